/* Invitations (fs_invitation_decode and what the agent derives from one) and
 * the participation request an operator posts to a client agent
 * (fs_agent_request_parse: {"invitation", "dataset", "fail_at"}). A
 * decoded invitation must encode and decode back to the same document. */
#include "fuzz.h"

#include "api/agent_msgs.h"
#include "api/jobs.h"

static struct fs_invitation g_inv;
static struct fs_invitation g_inv2;
static struct fs_agent_request g_req;

static void invitation(const json_t *j)
{
    struct fs_err err = {0};
    char url[FS_JOB_URL_MAX + 1];
    json_t *e1 = NULL;
    json_t *e2 = NULL;

    if (fs_invitation_decode(j, &g_inv, &err) != 0) {
        FUZZ_CHECK(err.msg[0] != '\0');
        return;
    }
    FUZZ_CHECK(g_inv.party >= 1 && g_inv.party <= g_inv.parties);
    e1 = fs_invitation_encode(&g_inv);
    FUZZ_CHECK(e1 != NULL);
    FUZZ_CHECK(fs_invitation_decode(e1, &g_inv2, &err) == 0);
    e2 = fs_invitation_encode(&g_inv2);
    FUZZ_CHECK(e2 != NULL && json_equal(e1, e2));
    if (fs_invitation_server_url(&g_inv, url, sizeof url, &err) == 0) {
        FUZZ_CHECK(strlen(url) < sizeof url);
    }
    if (g_inv.is_fedpower) {
        struct fs_fedpower_config cfg;
        static uint64_t rows[FS_JOB_MAX_PARTIES];
        if (fs_invitation_fedpower_config(&g_inv, &cfg, rows, &err) != 0) {
            FUZZ_CHECK(err.msg[0] != '\0');
        }
    }
    fs_invitation_wipe(&g_inv);
    fs_invitation_wipe(&g_inv2);
    json_decref(e1);
    json_decref(e2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *j = fuzz_json(data, size);
    struct fs_err err = {0};

    if (j == NULL) {
        return 0;
    }
    invitation(j);
    if (json_is_object(json_object_get(j, "invitation"))) {
        invitation(json_object_get(j, "invitation"));
    }
    if (fs_agent_request_parse(j, 1u << 28, &g_req, &err) == 0) {
        FUZZ_CHECK(g_req.path[0] != '\0');
    } else {
        FUZZ_CHECK(err.msg[0] != '\0');
    }
    fs_invitation_wipe(&g_req.inv);
    json_decref(j);
    return 0;
}
