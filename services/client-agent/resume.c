/* Resuming participations after an agent restart (docs/client-agent.md,
 * "Restarts"). A participation's row stays "running" when the agent dies;
 * at the next start each one is rebuilt from what agent.db keeps: the
 * invitation (without token), the dataset's path and SHA-256 at join, and
 * the sealed resume state (the participation's secret and the party token,
 * AES-256-GCM under data-dir/agent.key). Its worker then replays the
 * protocol from the first step (lib/proto/agent_driver.h,
 * fs_agent_driver_resume): every random value derives from the secret, so
 * each message comes out byte for byte as before, and only the messages of
 * rounds still open are sent again. */
#include "agent.h"

#include "core/hex.h"
#include "crypto/ct.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The request the participation was created with: the stored invitation
 * plus the token, the dataset, fail_at. */
static int rebuild_request(struct ca_agent *ag, struct ca_part *p, const char *token,
                           struct fs_err *err)
{
    json_error_t je;
    json_t *inv = NULL;
    json_t *body = NULL;
    char *text = NULL;
    int rc = ca_store_invitation(ag->db, p->rec.id, &text, err);

    if (rc != 0) {
        return rc;
    }
    inv = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    free(text);
    if (inv == NULL || json_object_set_new(inv, "token", json_string(token)) != 0) {
        json_decref(inv);
        return fs_err_set(err, FS_EFORMAT, "the stored invitation is not readable");
    }
    body = json_pack("{s:o, s:{s:s, s:s}, s:o}", "invitation", inv, "dataset", "path",
                     p->rec.dataset_path, "format", p->rec.dataset_format, "fail_at",
                     p->rec.fail_at[0] != '\0' ? json_string(p->rec.fail_at) : json_null());
    if (body == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    rc = fs_agent_request_parse(body, ag->cfg.max_elements, &p->req, err);
    /* the token's text in the JSON tree: overwrite it before it is freed */
    {
        json_t *t = json_object_get(json_object_get(body, "invitation"), "token");
        const char *v = json_string_value(t);
        if (v != NULL) {
            fs_wipe((void *)v, strlen(v));
        }
    }
    json_decref(body);
    return rc;
}

/* Rebuild participation rec and start its worker. */
static int resume_one(struct ca_agent *ag, const struct ca_part_rec *rec, struct fs_err *err)
{
    struct ca_part *p = calloc(1, sizeof *p);
    uint8_t sealed[CA_SEALED_MAX];
    char token[FS_AUTH_TOKEN_MAX + 1];
    char want[65];
    char have[65];
    uint8_t d[32];
    size_t n = 0;
    int rc;

    token[0] = '\0';
    if (p == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    p->rec = *rec;
    if (snprintf(p->dir, sizeof p->dir, "%s/participations/%s", ag->cfg.data_dir, rec->id) >=
        (int)sizeof p->dir) {
        rc = fs_err_set(err, FS_EINVAL, "data dir path too long");
        goto out;
    }
    rc = ca_store_resume_get(ag->db, rec->id, sealed, sizeof sealed, &n, want, err);
    if (rc == FS_ENOTFOUND) {
        rc = fs_err_set(err, FS_ESTATE, "no resume state (started by an older agent)");
    }
    if (rc == 0) {
        rc = ca_files_open_resume(ag->cfg.data_dir, rec->id, sealed, n, p->secret, token, err);
    }
    if (rc == 0) {
        rc = rebuild_request(ag, p, token, err);
    }
    fs_wipe(token, sizeof token);
    if (rc == 0) {
        rc = ca_files_sha256(p->req.path, d, err);
    }
    if (rc == 0) {
        fs_hex_encode(d, sizeof d, have);
        if (strcmp(have, want) != 0) {
            rc = fs_err_set(err, FS_ESTATE, "the dataset changed");
        }
    }
    if (rc == 0) {
        rc = ca_api_load_dataset(ag, &p->req, &p->data, &p->sparse, err);
    }
    if (rc == 0) {
        memcpy(p->dataset_sha256, want, sizeof p->dataset_sha256);
        rc = ca_store_restarted(ag->db, rec->id, &p->rec.restarts, err);
    }
    if (rc == 0) {
        p->resumed = 1;
        pthread_mutex_lock(&ag->mu);
        rc = ca_worker_start_locked(ag, p, err);
        pthread_mutex_unlock(&ag->mu);
    }
out:
    if (rc != 0) {
        ca_part_free(p);
        return rc;
    }
    atomic_fetch_add(&ag->started, 1);
    fs_log_pack(FS_LOG_INFO, "participation resumed", "{s:s, s:s, s:i, s:s, s:i}", "participation",
                rec->id, "job", rec->job_id, "party", (int)rec->party, "phase", rec->phase,
                "restarts", (int)(rec->restarts + 1));
    return 0;
}

/* A participation that cannot resume: failed with the reason. Whether a
 * noisy upload left before the restart is unknown: its privacy-ledger
 * reservation counts as spent. */
static void fail_one(struct ca_agent *ag, struct ca_part_rec *rec, const struct fs_err *why)
{
    struct fs_err lerr = {0};

    if (ca_ledger_spend(ag, rec->id, &lerr) != 0) {
        fs_log(FS_LOG_WARN, "cannot settle a privacy-ledger reservation", NULL);
    }
    snprintf(rec->state, sizeof rec->state, "failed");
    /* %.400s: the prefix and the reason fit the record's error field */
    snprintf(rec->error, sizeof rec->error, CA_RESUME_PREFIX "%.400s",
             why->msg[0] != '\0' ? why->msg : fs_err_name(why->code));
    ca_files_now(rec->updated_at);
    if (ca_store_progress(ag->db, rec, NULL) != 0) {
        fs_log(FS_LOG_WARN, "cannot mark a participation failed", NULL);
    }
    ca_store_resume_drop(ag->db, rec->id);
    fs_log_pack(FS_LOG_WARN, "participation cannot resume", "{s:s, s:s, s:s}", "participation",
                rec->id, "job", rec->job_id, "error", rec->error);
}

void ca_resume_all(struct ca_agent *ag)
{
    struct ca_part_rec *recs = NULL;
    struct fs_err err = {0};
    size_t n = 0;

    if (ca_store_running(ag->db, CA_LIST_MAX, &recs, &n, &err) != 0) {
        fs_log_pack(FS_LOG_ERROR, "cannot list the participations to resume", "{s:s}", "error",
                    err.msg);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        struct fs_err e = {0};
        if (resume_one(ag, &recs[i], &e) != 0) {
            fail_one(ag, &recs[i], &e);
        }
    }
    free(recs);
}
