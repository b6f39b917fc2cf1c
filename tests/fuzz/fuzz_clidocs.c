/* The other documents the CLI reads (api/participation.c, api/maskset.c,
 * api/cli_docs.c): a client agent's participation and participation list,
 * result file lists, the masking server's MaskSetCreated reply, an agent's
 * identity and a power-method aggregation. "parties" of the document sets
 * the mask set's party count when present. */
#include "fuzz.h"

#include "api/agent_msgs.h"
#include "api/cli_docs.h"
#include "api/maskset.h"
#include "api/participation.h"

static struct fs_participation g_part;
static struct fs_maskset_created g_ms;
static struct fs_result_file g_files[FS_RESULT_FILES_MAX];

static void participation(const json_t *j)
{
    struct fs_err err = {0};

    if (fs_participation_decode(j, &g_part, &err) == 0) {
        FUZZ_CHECK(fs_participation_id_valid(g_part.id));
        FUZZ_CHECK(g_part.party >= 1);
        FUZZ_CHECK(g_part.progress >= 0 && g_part.progress <= 1);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *j = fuzz_json(data, size);
    struct fs_err err = {0};
    struct fs_power_agg_view view;
    const json_t *arr = NULL;
    uint8_t pub[FS_JOB_KEY_LEN];
    size_t n = 0;
    uint32_t parties = 0;

    if (j == NULL) {
        return 0;
    }
    participation(j);
    if (fs_participation_list_decode(j, &arr, &n, &err) == 0) {
        FUZZ_CHECK(json_is_array(arr) && json_array_size(arr) == n);
        for (size_t i = 0; i < n && i < 8; i++) {
            participation(json_array_get(arr, i));
        }
    }
    for (int need = 0; need < 2; need++) {
        if (fs_result_files_decode(j, need, g_files, &n, &err) == 0) {
            FUZZ_CHECK(n <= FS_RESULT_FILES_MAX);
            for (size_t i = 0; i < n; i++) {
                FUZZ_CHECK(fs_agent_file_name_ok(g_files[i].name));
                for (size_t q = 0; q < i; q++) {
                    FUZZ_CHECK(strcmp(g_files[i].name, g_files[q].name) != 0);
                }
            }
        }
    }
    parties = (uint32_t)fuzz_u64(j, "parties", 3, FS_JOB_MAX_PARTIES + 1);
    if (fs_maskset_created_decode(j, parties, &g_ms, &err) == 0) {
        FUZZ_CHECK(g_ms.nparties == parties);
        FUZZ_CHECK(fs_maskset_id_valid(g_ms.id));
    }
    fs_maskset_created_wipe(&g_ms);
    if (fs_identity_decode(j, pub, &err) != 0) {
        FUZZ_CHECK(err.msg[0] != '\0');
    }
    if (fs_power_agg_view_decode(j, &view, &err) == 0) {
        FUZZ_CHECK(strlen(view.z_sha256) == 64);
    }
    json_decref(j);
    return 0;
}
