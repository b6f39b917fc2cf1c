/* fedsvd / fedpca participations (docs/wire-fedsvd.md): the party's keys
 * from the masking server (requests signed with the agent's identity), the
 * sealed exponents, fedpca's statistics round and the local recovery of the
 * party's result (fed.c). See worker.h. */
#include "worker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/hex.h"
#include "crypto/ct.h"
#include "crypto/reqsig.h"
#include "io/matio.h"
#include "maskkeys.h"
#include "wire.h"

/* One GET on the masking server into resp (a 2xx, else an error), signed
 * by the party's identity key sk (lib/crypto/reqsig.h: the path without its
 * query string, this mask set, this party, now). */
static int mask_get(fs_httpc *mc, const struct fs_invitation *inv, const uint8_t sk[32],
                    const char *path, const char *accept, struct fs_httpc_resp *resp,
                    struct fs_err *err)
{
    struct fs_httpc_req rq;
    char bare[FS_REQSIG_PATH_MAX + 1];
    char auth[FS_REQSIG_HEADER_MAX];
    size_t n = strcspn(path, "?");
    int rc;

    if (n > FS_REQSIG_PATH_MAX) {
        return fs_err_set(err, FS_EINVAL, "masking server path too long");
    }
    memcpy(bare, path, n);
    bare[n] = '\0';
    rc = fs_reqsig_sign(sk, "GET", bare, inv->maskset, inv->party, (int64_t)time(NULL), NULL, auth,
                        err);
    if (rc != 0) {
        return rc;
    }
    memset(&rq, 0, sizeof rq);
    rq.method = "GET";
    rq.path = path;
    rq.accept = accept;
    rq.authorization = auth;
    rq.timeout_ms = -1; /* the server may generate the slab in this request */
    rc = fs_httpc_do(mc, &rq, resp, err);
    if (rc == 0) {
        rc = fs_httpc_check(resp, "GET", path, err);
    }
    return rc;
}

static void mask_resp_wipe(struct fs_httpc_resp *resp)
{
    if (resp->body != NULL) {
        fs_wipe(resp->body, resp->len);
    }
    fs_httpc_resp_clear(resp);
}

/* One download of the party's keys (docs/wire-fedsvd.md): the manifest,
 * checked against the invitation, then every piece's rows.npy and block.npy,
 * each checked against the manifest (length, SHA-256, .npy header) as it
 * arrives and wiped once copied. FS_ECONFLICT: the server generated the keys
 * again meanwhile (another keys_id): start over. */
static int fetch_keys_once(struct ca_wk *w, fs_httpc *mc, const uint8_t sk[32], uint64_t max_bytes,
                           struct fs_fedsvd_keys **keys, int *again, struct fs_err *err)
{
    const struct fs_invitation *inv = &w->p->req.inv;
    struct fs_httpc_resp resp;
    struct fs_maskkeys man;
    fs_fedsvd_keys_asm *as = NULL;
    json_error_t je;
    json_t *j = NULL;
    char base[FS_MASKSET_ID_MAX + 64];
    char path[FS_MASKSET_ID_MAX + 256];
    char keys_id[65];
    int rc;

    memset(&resp, 0, sizeof resp);
    memset(&man, 0, sizeof man);
    snprintf(base, sizeof base, "/v1/masksets/%s/parties/%u/keys", inv->maskset, inv->party);
    rc = mask_get(mc, inv, sk, base, "application/json", &resp, err);
    if (rc == 0) {
        ca_wk_count(w, 0, resp.len);
        j = json_loadb(resp.body != NULL ? resp.body : "", resp.len, JSON_REJECT_DUPLICATES, &je);
        rc = j == NULL ? fs_err_set(err, FS_EFORMAT, "keys manifest is not JSON: %s", je.text)
                       : fs_maskkeys_decode(j, &man, err);
    }
    mask_resp_wipe(&resp);
    json_decref(j); /* holds the seeds' text, freed unwiped by jansson (the body is wiped) */
    if (rc == 0) {
        rc = ca_fed_check_manifest(inv, &man, err);
    }
    if (rc == 0) {
        rc = fs_fedsvd_keys_asm_new(&man.hdr, man.pieces, man.npieces, man.keys_id, max_bytes, &as,
                                    err);
    }
    fs_hex_encode(man.keys_id, sizeof man.keys_id, keys_id);
    for (size_t p = 0; rc == 0 && p < man.npieces; p++) {
        for (int f = 0; rc == 0 && f < 2; f++) {
            enum fs_fedsvd_keyfile which =
                f == 0 ? FS_FEDSVD_KEYFILE_ROWS : FS_FEDSVD_KEYFILE_BLOCK;
            char name[48];
            fs_maskkeys_file_name(p, which, name, sizeof name);
            snprintf(path, sizeof path, "%s/%s?keys_id=%s", base, name, keys_id);
            rc = mask_get(mc, inv, sk, path, "application/x-npy", &resp, err);
            *again = rc == FS_ECONFLICT;
            if (rc == 0) {
                ca_wk_count(w, 0, resp.len);
                rc =
                    fs_fedsvd_keys_asm_add(as, p, which, (const uint8_t *)resp.body, resp.len, err);
            }
            mask_resp_wipe(&resp);
        }
    }
    if (rc == 0) {
        rc = fs_fedsvd_keys_asm_finish(as, keys, err);
    }
    fs_fedsvd_keys_asm_free(as);
    fs_maskkeys_clear(&man);
    return rc;
}

/* GET the party's keys from the masking server (docs/wire-fedsvd.md) with
 * requests signed by the agent's identity key (the one the job pinned), and
 * build the fedsvd/fedpca party state. Everything secret is wiped at once. */
static int fetch_keys(struct ca_wk *w, struct fs_err *err)
{
    const struct fs_invitation *inv = &w->p->req.inv;
    struct fs_httpc_config hc;
    struct fs_fedsvd_keys *keys = NULL;
    fs_httpc *mc = NULL;
    uint8_t sk[32];
    double t0 = ca_mono_s();
    uint64_t max_bytes;
    int rc;

    rc = ca_files_identity_load(w->ag->cfg.data_dir, sk, err);
    if (rc != 0) {
        return rc;
    }
    fs_httpc_config_default(&hc);
    hc.base_url = inv->masking_url;
    hc.insecure = w->ag->cfg.insecure;
    hc.allow_insecure_http = w->ag->cfg.insecure_http;
    hc.ca_file = w->ag->cfg.ca_file[0] != '\0' ? w->ag->cfg.ca_file : NULL;
    /* a party's slab of A: about 8 b n_i bytes (b the block size); the
     * largest file is one piece's block */
    max_bytes = w->ag->cfg.max_elements * 8 < ((uint64_t)4 << 30)
                    ? w->ag->cfg.max_elements * 8 + (1u << 20)
                    : ((uint64_t)4 << 30);
    hc.max_body = (size_t)max_bytes;
    hc.max_retries = 3;
    hc.backoff_max_ms = 2000;
    hc.user_agent = "fedsvd-client-agent";
    /* The masking server sends nothing until the party's slab is generated
     * (on the manifest request, or on a file request after its cache dropped
     * the keys), which takes minutes for large blocks (docs/wire-fedsvd.md):
     * don't let the idle-transfer guard abort and restart that from scratch. */
    hc.low_speed_time_s = 1800;
    rc = fs_httpc_new(&mc, &hc, err);
    for (int attempt = 0; rc == 0; attempt++) {
        int again = 0;
        rc = fetch_keys_once(w, mc, sk, max_bytes, &keys, &again, err);
        if (!again || attempt >= 2) {
            break;
        }
        fs_log_pack(FS_LOG_WARN,
                    "the masking server regenerated the keys during the download; "
                    "starting over",
                    "{s:s}", "participation", w->p->rec.id);
        rc = 0;
    }
    fs_wipe(sk, sizeof sk);
    if (rc == 0) {
        rc = ca_fed_new(inv, w->p->data, keys, &w->fed, err); /* takes keys */
    }
    if (rc != 0) {
        fs_err_prefix(err, "masking server %s: ", inv->masking_url);
    }
    fs_httpc_free(mc);
    ca_wk_add_timing(w, "keys", ca_mono_s() - t0);
    return rc;
}

/* The fedsvd/fedpca parameters of the job must be the invitation's. */
int ca_wk_setup_fed(struct ca_wk *w, const struct fs_agent_job *job, struct fs_err *err)
{
    const struct fs_invitation *inv = &w->p->req.inv;

    if (!job->is_fed || !ca_same_algo(job, inv) || job->rows != inv->global_rows ||
        job->cols != inv->global_cols || memcmp(&job->fed, &inv->fed, sizeof job->fed) != 0) {
        return fs_err_set(err, FS_EINVAL,
                          "the job does not match the invitation (algorithm %s/%s, shape "
                          "%llux%llu/%llux%llu, partition, party sizes, k, method, standardize "
                          "or allow_dropouts differ)",
                          job->algorithm, inv->algorithm, (unsigned long long)job->rows,
                          (unsigned long long)job->cols, (unsigned long long)inv->global_rows,
                          (unsigned long long)inv->global_cols);
    }
    return fetch_keys(w, err);
}

/* fedsvd/fedpca: this party's sealed exponent of aggregation r. */
int ca_wk_exponent(struct ca_wk *w, uint32_t r, struct fs_err *err)
{
    uint8_t sealed[FS_WIRE_SEALED_EXP_LEN];
    char path[128];
    double t0 = ca_mono_s();
    int rc;

    rc = ca_fed_exponent(w->fed, r, sealed, err);
    if (!ca_fed_is_stats(w->fed, r)) {
        ca_wk_add_timing(w, "prepare",
                         ca_mono_s() - t0); /* T = Y_i B: the bulk of the local work */
    }
    if (rc == 0) {
        rc = ca_wk_path(w, path, sizeof path, "/aggregations/%u/exponent", r);
        if (rc != 0) {
            rc = fs_err_set(err, rc, "path too long");
        }
    }
    if (rc == 0) {
        rc = ca_wk_post_json(w, path, fs_wire_exp_encode(sealed), err);
    }
    return rc;
}

/* fedsvd/fedpca: open the relayed exponents; report the SVD round's max. */
int ca_wk_exponents(struct ca_wk *w, uint32_t r, struct fs_err *err)
{
    struct fs_agent_agg a;
    char path[128];
    int e = 0;
    int rc = ca_wk_fetch_agg(w, r, &a, err);

    if (rc != 0) {
        return rc;
    }
    if (!a.has_exponents) {
        fs_agent_agg_clear(&a);
        return CA_STEP_WAIT;
    }
    if (!ca_in_set(a.exp_ids, a.nexps, w->p->req.inv.party)) {
        fs_agent_agg_clear(&a);
        return fs_err_set(err, FS_ESTATE,
                          "dropped by the server: this party's exponent is not among those of "
                          "aggregation %u",
                          r);
    }
    rc = ca_fed_open(w->fed, r, a.exp_ids, (const uint8_t(*)[FS_WIRE_SEALED_EXP_LEN])a.sealed,
                     a.nexps, &e, err);
    fs_agent_agg_clear(&a);
    if (rc == 0 && !ca_fed_is_stats(w->fed, r)) {
        rc = ca_wk_path(w, path, sizeof path, "/aggregations/%u/public-exponent", r);
        if (rc != 0) {
            return fs_err_set(err, rc, "path too long");
        }
        rc = ca_wk_post_json(w, path, fs_wire_pubexp_encode(e), err);
    }
    w->t_step0 = ca_mono_s();
    return rc;
}

/* fedpca: the published (padded) sum of statistics aggregation r. */
int ca_wk_stats(struct ca_wk *w, uint32_t r, struct fs_err *err)
{
    struct fs_agent_agg a;
    char path[160];
    char dest[CA_PATH_MAX + 32];
    uint64_t *sum = NULL;
    size_t n = 0;
    uint64_t bytes = 0;
    uint8_t d[32];
    int rc = ca_wk_fetch_agg(w, r, &a, err);

    if (rc != 0) {
        return rc;
    }
    if (!a.has_sum || !a.has_survivors) {
        fs_agent_agg_clear(&a);
        return CA_STEP_WAIT;
    }
    rc = ca_wk_path(w, path, sizeof path, "/aggregations/%u/sum.npy", r);
    if (rc == 0 &&
        snprintf(dest, sizeof dest, "%s/agg-%u-sum.npy", w->p->dir, r) >= (int)sizeof dest) {
        rc = FS_EINVAL;
    }
    if (rc != 0) {
        fs_agent_agg_clear(&a);
        return fs_err_set(err, rc, "path too long");
    }
    rc = fs_httpc_download(w->http, path, dest, &bytes, err);
    ca_wk_count(w, 0, bytes);
    if (rc == 0) {
        rc = ca_files_sha256(dest, d, err);
    }
    if (rc == 0 && !fs_ct_eq(d, a.sum_sha256, 32)) {
        rc = fs_err_set(err, FS_EFORMAT, "GET %s: sha256 differs from the aggregation's", path);
    }
    if (rc == 0) {
        rc = fs_npy_read_u64(dest, a.length, &sum, &n, err);
    }
    if (rc == 0 && n != a.length) {
        rc = fs_err_set(err, FS_EFORMAT, "GET %s: %zu words, expected %llu", path, n,
                        (unsigned long long)a.length);
    }
    if (rc == 0) {
        rc = ca_fed_stats_result(w->fed, sum, n, a.survivors, a.nsurvivors, err);
    }
    unlink(dest);
    free(sum);
    fs_agent_agg_clear(&a);
    return rc;
}

/* The server's published file `name` from its manifest, downloaded to
 * <dir>/server-<name> and checked; *m is a new matrix (1-D: n x 1). */
static int fetch_published(struct ca_wk *w, const struct fs_agent_result *res, const char *name,
                           fs_mat **m, struct fs_err *err)
{
    const struct fs_agent_file *f = NULL;
    char path[160];
    char dest[CA_PATH_MAX + FS_AGENT_FILE_NAME_MAX + 16];
    uint64_t bytes = 0;
    int rc;

    *m = NULL;
    for (size_t i = 0; i < res->nfiles; i++) {
        if (strcmp(res->files[i].name, name) == 0) {
            f = &res->files[i];
        }
    }
    if (f == NULL) {
        return fs_err_set(err, FS_EFORMAT, "the server's result lists no %s", name);
    }
    rc = ca_wk_path(w, path, sizeof path, "/result/%s", name);
    if (rc == 0 &&
        snprintf(dest, sizeof dest, "%s/server-%s", w->p->dir, name) >= (int)sizeof dest) {
        rc = FS_EINVAL;
    }
    if (rc != 0) {
        return fs_err_set(err, rc, "path too long");
    }
    rc = fs_httpc_download(w->http, path, dest, &bytes, err);
    ca_wk_count(w, 0, bytes);
    if (rc == 0) {
        rc = ca_wk_check_file(dest, f, w->ag->cfg.max_elements, err);
    }
    if (rc == 0) {
        rc = fs_io_load_dense(dest, FS_FMT_NPY, NULL, m, err);
    }
    unlink(dest);
    return rc;
}

/*
 * fedsvd/fedpca: fetch S and V' (U' for features) and the survivors, recover
 * this party's factors locally (fed.c) and write its own manifest: the
 * server's fields, the party's files, and the party-side timings.
 */
int ca_wk_result_fed(struct ca_wk *w, struct fs_err *err)
{
    int features = w->p->req.inv.fed.partition == FS_JOB_FEATURES;
    struct fs_agent_result res;
    json_t *j = NULL;
    json_t *files = json_array();
    json_t *info = json_object();
    uint32_t *u3 = NULL;
    size_t n3 = 0;
    fs_mat *s = NULL;
    fs_mat *vc = NULL;
    char path[160];
    json_t *tsq;
    double t0;
    int rc;

    if (files == NULL || info == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "out of memory");
        goto out;
    }
    rc = ca_wk_path(w, path, sizeof path, "/result");
    if (rc == 0) {
        rc = ca_wk_get_json(w, path, &j, err);
    }
    if (rc != 0) {
        goto out;
    }
    rc = fs_agent_result_parse(j, &res, err);
    if (rc == 0) {
        rc = fs_wire_ids_decode(json_object_get(j, "survivors"), w->cfg.n, &u3, &n3, err);
    }
    tsq = json_object_get(j, "total_sq");
    if (rc == 0 && !json_is_number(tsq)) {
        rc = fs_err_set(err, FS_EFORMAT, "total_sq: expected a number");
    }
    if (rc != 0) {
        fs_err_prefix(err, "GET %s: ", path);
        goto out;
    }
    rc = fetch_published(w, &res, "s.npy", &s, err);
    if (rc == 0) {
        rc = fetch_published(w, &res, features ? "uprime.npy" : "vprime.npy", &vc, err);
    }
    if (rc == 0 && (s->cols != 1 || vc->cols != s->rows)) {
        rc = fs_err_set(err, FS_EFORMAT, "the published S and shared factor do not fit");
    }
    if (rc != 0) {
        goto out;
    }
    t0 = ca_mono_s();
    rc = ca_fed_finish(w->fed, s->data, s->rows, vc, json_number_value(tsq), u3, n3, w->p->dir,
                       files, info, err);
    ca_wk_add_timing(w, "recover", ca_mono_s() - t0);
    if (rc != 0) {
        goto out;
    }
    /* the party's manifest: the server's facts, our files */
    json_object_set(j, "server_files", json_object_get(j, "files"));
    json_object_set(j, "files", files);
    json_object_set_new(j, "server_rank", json_incref(json_object_get(j, "rank")));
    json_object_update(j, info);
    json_object_set(j, "party_timings", w->timings);
    json_object_set_new(j, "party", json_integer(w->p->req.inv.party));
    rc = ca_wk_write_manifest(w, j, err);
out:
    free(u3);
    fs_mat_free(s);
    fs_mat_free(vc);
    json_decref(files);
    json_decref(info);
    json_decref(j);
    return rc;
}
