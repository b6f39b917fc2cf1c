/* Storage trouble: a service that cannot write its state (disk full, quota,
 * read-only file system, file-size limit) answers FS_ESTORAGE (HTTP 503,
 * code storage_unavailable, Retry-After) for the writes, keeps serving
 * reads, and goes on once a write succeeds again.
 *
 * This module keeps the process-wide "episode": the first failure after a
 * good write logs one warning, the first good write after failures logs one
 * notice, so a full disk under load does not flood the log. /metrics
 * (net/metrics.h) and /readyz report the state. Thread-safe (atomics). */
#ifndef FS_NET_STORAGE_H
#define FS_NET_STORAGE_H

#include <stdint.h>

#include "../core/err.h"

/** Note a failed write (err->code FS_ESTORAGE; other codes are ignored). */
void fs_storage_failed(const struct fs_err *err);

/** Note a successful write: ends an episode. Cheap when there is none. */
void fs_storage_ok(void);

/** 1 while the last write failed with FS_ESTORAGE (until a write succeeds). */
int fs_storage_degraded(void);

/** "ok" or "unavailable": the readiness document's "storage" member. */
const char *fs_storage_state(void);

/** Writes that failed with FS_ESTORAGE since the start (/metrics). */
uint64_t fs_storage_errors(void);

#endif
