/* The job documents the CLI reads from the aggregation server
 * (api/jobdoc.c): a Job status, the job list, JobCreated (with its
 * invitations decoded as the CLI does) and a Result. */
#include "fuzz.h"

#include "api/agent_msgs.h"
#include "api/jobdoc.h"
#include "api/jobs.h"

static struct fs_job_status g_st;
static struct fs_job_result g_res;
static struct fs_invitation g_inv;

static void status(const json_t *j)
{
    struct fs_err err = {0};

    if (fs_job_status_decode(j, &g_st, &err) == 0) {
        FUZZ_CHECK(g_st.npresent <= FS_JOB_MAX_PARTIES && g_st.ndropped <= FS_JOB_MAX_PARTIES);
        FUZZ_CHECK(g_st.ntimings <= FS_JOBDOC_TIMINGS_MAX);
        FUZZ_CHECK(memchr(g_st.error, '\0', sizeof g_st.error) != NULL);
        FUZZ_CHECK(g_st.state == FS_JOB_STATE_RUNNING || g_st.state == FS_JOB_STATE_DONE ||
                   g_st.state == FS_JOB_STATE_FAILED);
        (void)fs_job_ids_has(g_st.present, g_st.npresent, 1);
    } else {
        FUZZ_CHECK(err.msg[0] != '\0');
    }
}

static void result(const json_t *j, int need_bytes)
{
    struct fs_err err = {0};

    if (fs_job_result_decode(j, need_bytes, &g_res, &err) == 0) {
        FUZZ_CHECK(g_res.nfiles <= FS_RESULT_FILES_MAX);
        for (size_t i = 0; i < g_res.nfiles; i++) {
            FUZZ_CHECK(fs_agent_file_name_ok(g_res.files[i].name));
            FUZZ_CHECK(strlen(g_res.files[i].sha256) == 64);
            FUZZ_CHECK(!need_bytes || g_res.files[i].has_bytes);
        }
        for (size_t i = 0; i < g_res.nsurvivors; i++) {
            FUZZ_CHECK(g_res.parties == 0 ||
                       (g_res.survivors[i] >= 1 && g_res.survivors[i] <= g_res.parties));
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *j = fuzz_json(data, size);
    struct fs_err err = {0};
    const json_t *arr = NULL;
    size_t n = 0;

    if (j == NULL) {
        return 0;
    }
    status(j);
    if (fs_job_list_decode(j, &arr, &n, &err) == 0) {
        FUZZ_CHECK(json_is_array(arr) && json_array_size(arr) == n);
        for (size_t i = 0; i < n && i < 8; i++) {
            status(json_array_get(arr, i));
        }
    }
    if (fs_job_created_decode(j, &g_st, &arr, &err) == 0) {
        FUZZ_CHECK(json_is_array(arr) && json_array_size(arr) == g_st.parties);
        for (size_t i = 0; i < g_st.parties && i < 8; i++) {
            if (fs_invitation_decode(json_array_get(arr, i), &g_inv, &err) == 0) {
                FUZZ_CHECK(g_inv.party == i + 1);
            }
            fs_invitation_wipe(&g_inv);
        }
    }
    result(j, 0);
    result(j, 1);
    json_decref(j);
    return 0;
}
