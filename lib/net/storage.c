/* The storage-trouble episode of the process: see storage.h. */
#include "storage.h"

#include <stdatomic.h>

#include "log.h"

static atomic_int g_degraded;
static atomic_ullong g_errors;       /* failed writes, ever */
static atomic_ullong g_episode_base; /* g_errors when the episode began */

void fs_storage_failed(const struct fs_err *err)
{
    unsigned long long n;

    if (err == NULL || err->code != FS_ESTORAGE) {
        return;
    }
    n = atomic_fetch_add(&g_errors, 1);
    if (atomic_exchange(&g_degraded, 1) == 0) {
        atomic_store(&g_episode_base, n);
        /* the message names the file and the system's reason, no data */
        fs_log_pack(FS_LOG_ERROR, "storage unavailable: writes fail until space is back", "{s:s}",
                    "error", err->msg);
    }
}

void fs_storage_ok(void)
{
    if (atomic_load(&g_degraded) != 0 && atomic_exchange(&g_degraded, 0) != 0) {
        unsigned long long n = atomic_load(&g_errors) - atomic_load(&g_episode_base);
        fs_log_pack(FS_LOG_INFO, "storage writable again", "{s:I}", "failed_writes", (json_int_t)n);
    }
}

int fs_storage_degraded(void)
{
    return atomic_load(&g_degraded) != 0;
}

const char *fs_storage_state(void)
{
    return fs_storage_degraded() ? "unavailable" : "ok";
}

uint64_t fs_storage_errors(void)
{
    return (uint64_t)atomic_load(&g_errors);
}
