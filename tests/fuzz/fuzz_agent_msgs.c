/* What the client agent reads from the aggregation server (api/agent_msgs.c):
 * the job status, an aggregation document (secure-sum, fedsvd/fedpca and
 * power-method kinds) and a result's file list. The aggregation's index,
 * party count and vector length come from the document's "index", "n" and
 * "length" when present, so the fuzzer reaches the checks behind them. */
#include "fuzz.h"

#include "api/agent_msgs.h"

static struct fs_agent_job g_job;
static struct fs_agent_result g_res;

static void agg(const json_t *j, uint32_t r, uint32_t n, uint64_t len)
{
    struct fs_err err = {0};
    struct fs_agent_agg a;

    memset(&a, 0, sizeof a);
    if (fs_agent_agg_parse(j, r, n, len, &a, &err) == 0) {
        FUZZ_CHECK(a.index == r && a.length == len);
        FUZZ_CHECK(a.chunk_words <= FS_AGENT_MAX_CHUNK_WORDS && (a.power || a.chunk_words >= 1));
        FUZZ_CHECK(a.chunk_words == 0 ? a.chunks == 0
                                      : a.chunks == (len + a.chunk_words - 1) / a.chunk_words);
        FUZZ_CHECK(a.nactive <= n && a.nsigs <= n);
        for (size_t i = 0; i < a.nactive; i++) {
            FUZZ_CHECK(a.active[i] >= 1 && a.active[i] <= n);
        }
        for (size_t i = 0; i < a.nsurvivors; i++) {
            FUZZ_CHECK(a.survivors[i] >= 1 && a.survivors[i] <= n);
        }
    } else {
        FUZZ_CHECK(err.msg[0] != '\0');
    }
    fs_agent_agg_clear(&a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *j = fuzz_json(data, size);
    struct fs_err err = {0};
    uint32_t r = 0;
    uint32_t n = 0;
    uint64_t len = 0;

    if (j == NULL) {
        return 0;
    }
    if (fs_agent_job_parse(j, &g_job, &err) == 0) {
        struct fs_agent_job_view view;
        fs_agent_job_view(&g_job, &view);
        FUZZ_CHECK(memchr(g_job.error, '\0', sizeof g_job.error) != NULL);
    }
    r = (uint32_t)fuzz_u64(j, "index", 0, UINT32_MAX);
    n = (uint32_t)fuzz_u64(j, "n", 3, 1000);
    len = fuzz_u64(j, "length", 10, (uint64_t)1 << 40);
    agg(j, r, n, len);
    agg(j, 0, 3, 10);
    if (fs_agent_result_parse(j, &g_res, &err) == 0) {
        FUZZ_CHECK(g_res.nfiles <= FS_AGENT_MAX_FILES);
        for (size_t i = 0; i < g_res.nfiles; i++) {
            FUZZ_CHECK(fs_agent_file_name_ok(g_res.files[i].name));
            FUZZ_CHECK(strstr(g_res.files[i].name, "..") == NULL &&
                       strchr(g_res.files[i].name, '/') == NULL);
        }
    }
    json_decref(j);
    return 0;
}
