/* aggregation-server end to end for the power-method jobs
 * (docs/wire-fedpower.md): starts the real binary (the build's
 * bin/aggregation-server) and plays the parties in this process with
 * lib/proto's fedpower party and SecAgg client state machines over HTTP.
 *
 * Cases: each algorithm on 3 parties, d = 20, r = k = 3, T = 8, p = 2
 * (dp-ppm p = 1), 1024-bit Paillier: noise-free fedpower and
 * fedpower-utility reach the centralised top-k subspace (projection
 * distance <= 1e-8), the DP ones finish with a privacy report; a party
 * missing from a sync round (the job goes on with allow_dropouts, fails
 * below threshold and without allow_dropouts); bad inputs (plain.npy of the
 * wrong shape, garbage noise responses, a selector for a party not in U3)
 * get 4xx problem+json and leave the job running; the selector's long poll
 * (held while the exchange is not open, bad wait_ms 400); a weak DP job is refused;
 * a server restart fails a running fedpower job with a clear reason.
 *
 * Skipped (counted as passed with a note) when the server binary is not built. */
#include "crypto/ed25519.h"
#include "crypto/prg.h"
#include "crypto/sha256.h"
#include "io/matio.h"
#include "jobs.h"
#include "la/haar.h"
#include "la/mat.h"
#include "la/svd.h"
#include "net/http_client.h"
#include "proto/fedpower.h"
#include "proto/secagg.h"
#include "test.h"
#include "wire.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ADMIN_TOKEN "e2e-admin-token-0123456789abcdef"
#define NP          3
#define D           20
#define RK          3

#include "test_aggsrv_util.h"

/* ------------------------------------------------------------ data */

/* Every party's rows: g diag(sqrt(lam)) V^T, g standard normal; a clear gap after k. */
static fs_mat *g_x[NP + 1];
static fs_mat *g_ref; /* d x k top right singular vectors of the pooled rows */
static const uint64_t g_rows[NP] = {40, 30, 50};
static double g_bound;

static void data_init(void)
{
    struct fs_err err = {0};
    static const double lam[D] = {100,  50,   25,   0.02, 0.02, 0.02, 0.02, 0.02, 0.02, 0.02,
                                  0.02, 0.02, 0.02, 0.02, 0.02, 0.02, 0.02, 0.02, 0.02, 0.02};
    uint8_t key[32];
    uint8_t vseed[32];
    fs_prg *prg = NULL;
    fs_mat *v = NULL;
    fs_mat *pooled = fs_mat_new(40 + 30 + 50, D);
    fs_svd sv = {0};
    size_t off = 0;

    memset(key, 7, sizeof key);
    memset(vseed, 9, sizeof vseed);
    CHECK_OK(fs_prg_new(&prg, key, NULL, &err), &err);
    CHECK_OK(fs_haar_from_seed(D, vseed, &v, &err), &err);
    for (uint32_t i = 1; i <= NP; i++) {
        size_t s = g_rows[i - 1];
        fs_mat *g = fs_mat_new(s, D);
        double tr = 0.0;
        CHECK_OK(fs_mat_fill_normal(g, prg, &err), &err);
        for (size_t j = 0; j < D; j++) {
            fs_mat col = fs_mat_view(g, 0, j, s, 1);
            fs_mat_scale(&col, sqrt(lam[j]));
        }
        CHECK_OK(fs_mat_mul('N', 'T', g, v, &g_x[i], &err), &err);
        for (size_t j = 0; j < D; j++) {
            for (size_t r = 0; r < s; r++) {
                double x = FS_MAT_AT(g_x[i], r, j);
                FS_MAT_AT(pooled, off + r, j) = x;
                tr += x * x;
            }
        }
        off += s;
        tr /= (double)s; /* trace(M'_i) >= ||M'_i||_2 */
        if (tr > g_bound) {
            g_bound = tr;
        }
        fs_mat_free(g);
    }
    CHECK_OK(fs_svd_thin(pooled, &sv, &err), &err);
    g_ref = fs_mat_new(D, RK);
    for (size_t c = 0; c < RK; c++) {
        for (size_t r = 0; r < D; r++) {
            FS_MAT_AT(g_ref, r, c) = FS_MAT_AT(sv.v, r, c);
        }
    }
    fs_svd_clear(&sv);
    fs_mat_free(pooled);
    fs_mat_free(v);
    fs_prg_free(prg);
}

/* ------------------------------------------------------------ a job and its parties */

struct party {
    uint32_t id;
    fs_httpc *h;
    char token[FS_AUTH_TOKEN_MAX + 1];
    fs_secagg_client *c;
    fs_fedpower_party *fp;
    int skip_round; /* does not upload in this round and stops (-1: never) */
    int out;
    int has_key;
};

struct job {
    struct server *srv;
    fs_httpc *admin;
    char id[FS_JOB_ID_MAX + 1];
    char path[128];
    char alg[32];
    struct fs_fedpower_config cfg;
    uint64_t rows[FS_JOB_MAX_PARTIES];
    struct fs_secagg_config sc;
    struct party p[NP + 1];
    uint32_t naggs;
    uint32_t syncs;
    uint32_t exchanges; /* utility: the aggregations with a noise exchange */
    int allow;          /* allow_dropouts */
    int secagg;
};

static void job_free(struct job *j)
{
    for (uint32_t v = 1; v <= NP; v++) {
        fs_httpc_free(j->p[v].h);
        fs_secagg_client_free(j->p[v].c);
        fs_fedpower_party_free(j->p[v].fp);
    }
    fs_httpc_free(j->admin);
    memset(j, 0, sizeof *j);
}

/* Create from the extra spec fields (a JSON object text without braces). */
static int job_create(struct job *j, struct server *s, const char *alg, const char *extra,
                      long *status, json_t **reply)
{
    struct fs_err err = {0};
    char spec[2048];
    json_error_t je;
    json_t *body;
    json_t *out = NULL;
    json_t *invs;
    long st;

    memset(j, 0, sizeof *j);
    j->srv = s;
    snprintf(j->alg, sizeof j->alg, "%s", alg);
    j->admin = client(s, ADMIN_TOKEN);
    snprintf(spec, sizeof spec,
             "{\"algorithm\":\"%s\",\"allow_unpinned\":true,\"parties\":3,\"cols\":%d,"
             "\"party_rows\":[40,30,50],"
             "\"k\":%d,\"iterations\":8,\"round_timeout_s\":30%s%s}",
             alg, D, RK, extra[0] != '\0' ? "," : "", extra);
    body = json_loads(spec, 0, &je);
    CHECK_MSG(body != NULL, "spec %s: %s", spec, je.text);
    st = call_json(j->admin, "POST", "/v1/jobs", body, &out);
    json_decref(body);
    if (status != NULL) {
        *status = st;
    }
    if (st != 201) {
        if (reply != NULL) {
            *reply = out;
        } else {
            json_decref(out);
        }
        return -1;
    }
    snprintf(j->id, sizeof j->id, "%s",
             json_string_value(json_object_get(json_object_get(out, "job"), "id")));
    snprintf(j->path, sizeof j->path, "/v1/jobs/%s", j->id);
    j->naggs =
        (uint32_t)json_integer_value(json_object_get(json_object_get(out, "job"), "aggregations"));
    invs = json_object_get(out, "invitations");
    CHECK(json_array_size(invs) == NP);
    for (uint32_t v = 1; v <= NP; v++) {
        struct fs_invitation inv;
        struct party *p = &j->p[v];
        uint8_t sk[32];
        uint8_t pk[32];
        int allow;
        CHECK_OK(fs_invitation_decode(json_array_get(invs, v - 1), &inv, &err), &err);
        CHECK(inv.party == v && inv.is_fedpower && inv.rows == g_rows[v - 1] && inv.cols == D);
        CHECK_OK(fs_invitation_fedpower_config(&inv, &j->cfg, j->rows, &err), &err);
        snprintf(p->token, sizeof p->token, "%s", inv.token);
        allow = inv.power.allow_dropouts;
        j->allow = allow;
        if (v == 1) {
            j->sc.n = inv.parties;
            j->sc.t = inv.threshold;
        }
        fs_invitation_wipe(&inv);
        p->id = v;
        p->skip_round = -1;
        p->h = client(s, p->token);
        CHECK_OK(fs_ed25519_keygen(sk, pk, &err), &err);
        j->secagg = fs_fedpower_uses_secagg(j->cfg.alg);
        j->sc.aggregations = j->secagg ? j->naggs : 1;
        j->sc.chunk_words = 16;
        /* without allow_dropouts every sum needs every party: no consistency round */
        j->sc.all_inputs = j->secagg && !allow ? 1 : 0;
        CHECK_OK(fs_wire_secagg_job_id(j->id, j->sc.job_id, &err), &err);
        CHECK_OK(fs_secagg_client_new(&j->sc, v, sk, &p->c, &err), &err);
        CHECK_OK(fs_fedpower_party_new(&j->cfg, j->rows, v, g_x[v], NULL, &p->fp, &err), &err);
    }
    j->syncs = fs_fedpower_syncs(&j->cfg);
    j->exchanges = fs_fedpower_exchanges(&j->cfg);
    CHECK(j->naggs == j->syncs + (j->cfg.eigenvalues ? 1u : 0u));
    /* one exchange (the first sync's) in a utility job without allow_dropouts */
    CHECK(j->exchanges == (j->cfg.alg != FS_FEDPOWER_UTILITY                            ? 0u
                           : j->allow || j->cfg.noise_exchange == FS_NOISEX_ELEMENTWISE ? j->syncs
                                                                                        : 1u));
    if (reply != NULL) {
        *reply = out;
    } else {
        json_decref(out);
    }
    return 0;
}

static json_t *job_status(struct job *j)
{
    json_t *out = NULL;
    CHECK(call_json(j->admin, "GET", j->path, NULL, &out) == 200);
    return out;
}

static const char *phase_of(struct job *j, char *buf, size_t cap)
{
    json_t *st = job_status(j);
    snprintf(buf, cap, "%s", st != NULL ? json_string_value(json_object_get(st, "phase")) : "");
    json_decref(st);
    return buf;
}

static int wait_phase(struct job *j, const char *want, int timeout_ms)
{
    char ph[40];
    for (int waited = 0; waited < timeout_ms; waited += 20) {
        phase_of(j, ph, sizeof ph);
        if (strcmp(ph, want) == 0) {
            return 0;
        }
        if (strcmp(ph, "failed") == 0 || strcmp(ph, "done") == 0) {
            return -1;
        }
        sleep_ms(20);
    }
    return -1;
}

/* GET a document, polling while 409 not_ready; the status. */
static long get_poll(fs_httpc *h, const char *path, json_t **out)
{
    long st = 0;
    for (int tries = 0; tries < 1500; tries++) {
        st = call_json(h, "GET", path, NULL, out);
        if (st != 409 || strcmp(pcode(*out), "not_ready") != 0) {
            return st;
        }
        json_decref(*out);
        *out = NULL;
        sleep_ms(20);
    }
    return st;
}

/* Poll round r's document until key is non-null (or phase is want); NULL on failure. */
static json_t *agg_wait(struct job *j, uint32_t r, const char *key, const char *phase)
{
    char path[200];
    snprintf(path, sizeof path, "%s/aggregations/%u", j->path, r);
    for (int tries = 0; tries < 1500; tries++) {
        json_t *doc = NULL;
        long st = get_poll(j->admin, path, &doc);
        if (st != 200) {
            json_decref(doc);
            return NULL;
        }
        if ((key != NULL && !json_is_null(json_object_get(doc, key)) &&
             json_object_get(doc, key) != NULL) ||
            (phase != NULL &&
             strcmp(json_string_value(json_object_get(doc, "phase")), phase) == 0)) {
            return doc;
        }
        json_decref(doc);
        sleep_ms(20);
    }
    return NULL;
}

static void join(struct job *j)
{
    struct fs_err err = {0};
    char path[200];
    json_t *out = NULL;
    struct fs_secagg_adv *roster = NULL;
    size_t k = 0;

    snprintf(path, sizeof path, "%s/keys", j->path);
    for (uint32_t v = 1; v <= NP; v++) {
        struct fs_secagg_adv a;
        json_t *body;
        CHECK_OK(fs_secagg_client_advertise(j->p[v].c, &a, &err), &err);
        body = fs_wire_adv_encode(&a, 0, 0);
        CHECK(call_json(j->p[v].h, "POST", path, body, NULL) == 202);
        json_decref(body);
    }
    CHECK(wait_phase(j, "share_keys", 10000) == 0);
    CHECK(call_json(j->admin, "GET", path, NULL, &out) == 200);
    CHECK_OK(fs_wire_roster_decode(out, NP, &roster, &k, &err), &err);
    json_decref(out);
    snprintf(path, sizeof path, "%s/shares", j->path);
    for (uint32_t v = 1; v <= NP; v++) {
        struct fs_secagg_share_ct *cts = NULL;
        const struct fs_secagg_share_ct **ptrs;
        size_t nct = 0;
        json_t *body;
        CHECK_OK(fs_secagg_client_share_keys(j->p[v].c, roster, k, &cts, &nct, &err), &err);
        ptrs = calloc(nct + 1, sizeof *ptrs);
        for (size_t i = 0; i < nct; i++) {
            ptrs[i] = &cts[i];
        }
        body = fs_wire_shares_encode(ptrs, nct, 0);
        CHECK(call_json(j->p[v].h, "POST", path, body, NULL) == 202);
        json_decref(body);
        free(ptrs);
        fs_secagg_share_cts_free(cts, nct);
    }
    free(roster);
}

/* Download round r's Z, check its sha256 against the document. */
static fs_mat *get_z(struct job *j, struct party *p, uint32_t r, const json_t *doc)
{
    struct fs_err err = {0};
    char path[200];
    char file[PATH_MAX + 64];
    uint8_t h[32];
    char hex[65];
    fs_mat *z = NULL;
    FILE *f;
    uint8_t *buf;
    long n;

    snprintf(path, sizeof path, "%s/aggregations/%u/z.npy", j->path, r);
    snprintf(file, sizeof file, "%s/z-%s-%u-%u.npy", g_root, j->id, r, p->id);
    CHECK_OK(fs_httpc_download(p->h, path, file, NULL, &err), &err);
    f = fopen(file, "rb");
    if (f == NULL) {
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = malloc((size_t)n + 1);
    CHECK(fread(buf, 1, (size_t)n, f) == (size_t)n);
    fclose(f);
    CHECK_OK(fs_sha256(h, buf, (size_t)n, &err), &err);
    free(buf);
    for (int i = 0; i < 32; i++) {
        snprintf(hex + 2 * i, 3, "%02x", h[i]);
    }
    CHECK(strcmp(hex, json_string_value(json_object_get(json_object_get(doc, "z"), "sha256"))) ==
          0);
    CHECK_OK(fs_io_load_dense(file, FS_FMT_NPY, NULL, &z, &err), &err);
    return z;
}

static uint8_t *npy_f8(const fs_mat *m, size_t *len)
{
    struct fs_err err = {0};
    struct fs_npy_header h = {FS_NPY_F8, 1, 2, {m->rows, m->cols}, 0};
    size_t hl = 0;
    uint8_t *b = malloc(256 + 8 * m->rows * m->cols);

    CHECK_OK(fs_npy_format_header(&h, b, 256, &hl, &err), &err);
    for (size_t c = 0; c < m->cols; c++) {
        for (size_t r = 0; r < m->rows; r++) {
            double x = FS_MAT_AT(m, r, c);
            uint64_t w;
            memcpy(&w, &x, sizeof w);
            for (int k = 0; k < 8; k++) {
                b[hl + 8 * (r + c * m->rows) + (size_t)k] = (uint8_t)(w >> (8 * k));
            }
        }
    }
    *len = hl + 8 * m->rows * m->cols;
    return b;
}

static void secagg_upload(struct job *j, struct party *p, uint32_t r, const json_t *doc)
{
    struct fs_err err = {0};
    size_t len = 0;
    const uint64_t *ring = fs_fedpower_party_ring_upload(p->fp, &len);
    uint32_t *active = NULL;
    size_t na = 0;
    uint64_t *y = malloc(len * sizeof *y);

    CHECK(ring != NULL && len == (size_t)json_integer_value(json_object_get(doc, "length")));
    CHECK_OK(fs_wire_ids_decode(json_object_get(doc, "active"), NP, &active, &na, &err), &err);
    CHECK_OK(fs_secagg_client_begin(p->c, r, len, active, na, &err), &err);
    free(active);
    CHECK_OK(fs_secagg_client_mask(p->c, 0, ring, y, len, &err), &err);
    for (uint64_t c = 0; c * 16 < len; c++) {
        size_t m = len - c * 16 < 16 ? len - c * 16 : 16;
        struct fs_npy_header h = {FS_NPY_U8, 0, 1, {m, 1}, 0};
        uint8_t body[512];
        size_t hl = 0;
        char path[200];
        json_t *out = NULL;
        long st;
        CHECK_OK(fs_npy_format_header(&h, body, 256, &hl, &err), &err);
        for (size_t i = 0; i < m; i++) {
            for (int b = 0; b < 8; b++) {
                body[hl + 8 * i + (size_t)b] = (uint8_t)(y[c * 16 + i] >> (8 * b));
            }
        }
        snprintf(path, sizeof path, "%s/aggregations/%u/masked/%llu", j->path, r,
                 (unsigned long long)c);
        st = call(p->h, "PUT", path, "application/x-npy", body, hl + 8 * m, &out);
        CHECK_MSG(st == 204, "chunk %llu of %u: %ld %s", (unsigned long long)c, p->id, st,
                  pcode(out));
        json_decref(out);
    }
    free(y);
}

/* Run round r for every party still in; 0 when the round went through. */
/* fedpower-utility with g_early: every party answers sync r's exchange
 * right after its consistency message, or, without a consistency round (no
 * allow_dropouts), as unmasking opens (the exchange is open from when
 * masked input closed; `not_ready` while the server is still encrypting
 * the selectors), so that the server finishes the exchange while it
 * unmasks; in sync 0 a selector long poll sent during masked input is
 * answered once the exchange opened. */
static int g_early;

static void answer_early(struct job *j, uint32_t r)
{
    struct fs_err err = {0};
    char path[200];

    for (uint32_t v = 1; v <= NP; v++) {
        struct party *p = &j->p[v];
        json_t *out = NULL;
        uint8_t *pk = NULL, *sel = NULL, *resp = NULL;
        size_t pl = 0, sl = 0, rl;
        char *b64;
        json_t *body;
        long st;
        if (p->out) {
            continue;
        }
        if (!p->has_key) {
            snprintf(path, sizeof path, "%s/exchange-key", j->path);
            CHECK(call_json(p->h, "GET", path, NULL, &out) == 200);
            CHECK_OK(fs_b64url_decode_alloc(json_string_value(json_object_get(out, "public_key")),
                                            1 << 16, &pk, &pl, &err),
                     &err);
            json_decref(out);
            CHECK_OK(fs_fedpower_party_set_exchange_key(p->fp, pk, pl, &err), &err);
            free(pk);
            p->has_key = 1;
        }
        snprintf(path, sizeof path, "%s/aggregations/%u/selector", j->path, r);
        st = get_poll(p->h, path, &out);
        CHECK_MSG(st == 200, "early selector of party %u: %ld %s", v, st, pcode(out));
        if (st == 200) {
            CHECK_OK(fs_b64url_decode_alloc(json_string_value(json_object_get(out, "selector")),
                                            1 << 16, &sel, &sl, &err),
                     &err);
        }
        json_decref(out);
        out = NULL;
        rl = fs_fedpower_party_exchange_size(p->fp);
        resp = malloc(rl);
        CHECK_OK(fs_fedpower_party_exchange(p->fp, sel, sl, resp, rl, &err), &err);
        b64 = fs_b64url_encode(resp, rl);
        body = json_pack("{s:s}", "response", b64);
        snprintf(path, sizeof path, "%s/aggregations/%u/noise-response", j->path, r);
        st = call_json(p->h, "POST", path, body, &out);
        CHECK_MSG(st == 204, "early response of party %u: %ld %s", v, st, pcode(out));
        json_decref(out);
        json_decref(body);
        free(b64);
        free(resp);
        free(sel);
    }
}

/* The selector's long poll (GET …/selector?wait_ms=): sent on a thread of
 * its own while masked input of r is still open, answered once the
 * exchange opened, never 409 not_ready. */
struct sel_poll {
    pthread_t th;
    fs_httpc *h;
    char path[200];
    long st;
    json_t *out;
};

static void *sel_poll_main(void *arg)
{
    struct sel_poll *sp = arg;

    sp->st = call_json(sp->h, "GET", sp->path, NULL, &sp->out);
    return NULL;
}

static double mono_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* In masked input of sync r: bad wait_ms values are 400; a short long poll
 * waits its time out and answers 409 not_ready; a long one goes on a thread
 * (sp->th) and is answered by the exchange's opening (sel_poll_check). */
static int sel_poll_start(struct job *j, uint32_t r, struct sel_poll *sp)
{
    json_t *out = NULL;
    char path[200];
    double t0;
    long st;

    snprintf(path, sizeof path, "%s/aggregations/%u/selector?wait_ms=x1", j->path, r);
    st = call_json(j->p[1].h, "GET", path, NULL, &out);
    CHECK_MSG(st == 400 && strcmp(pcode(out), "bad_request") == 0, "wait_ms=x1: %ld %s", st,
              pcode(out));
    json_decref(out);
    snprintf(path, sizeof path, "%s/aggregations/%u/selector?wait_ms=30001", j->path, r);
    st = call_json(j->p[1].h, "GET", path, NULL, &out);
    CHECK_MSG(st == 400, "wait_ms over the cap: %ld %s", st, pcode(out));
    json_decref(out);
    snprintf(path, sizeof path, "%s/aggregations/%u/selector?wait_ms=150", j->path, r);
    t0 = mono_s();
    st = call_json(j->p[1].h, "GET", path, NULL, &out);
    CHECK_MSG(st == 409 && strcmp(pcode(out), "not_ready") == 0 && mono_s() - t0 >= 0.1,
              "selector long poll in masked input: %ld %s after %.3f s", st, pcode(out),
              mono_s() - t0);
    json_decref(out);
    memset(sp, 0, sizeof *sp);
    sp->h = client(j->srv, j->p[1].token);
    snprintf(sp->path, sizeof sp->path, "%s/aggregations/%u/selector?wait_ms=20000", j->path, r);
    if (sp->h == NULL || pthread_create(&sp->th, NULL, sel_poll_main, sp) != 0) {
        CHECK(0);
        fs_httpc_free(sp->h);
        sp->h = NULL;
        return -1;
    }
    return 0;
}

/* After masked input of r closed: the parked request got the selector. */
static void sel_poll_check(struct job *j, uint32_t r, struct sel_poll *sp)
{
    json_t *out = NULL;
    char path[200];
    long st;

    if (sp->h == NULL) {
        return;
    }
    pthread_join(sp->th, NULL);
    CHECK_MSG(sp->st == 200 && json_is_string(json_object_get(sp->out, "selector")),
              "parked selector request: %ld %s", sp->st, pcode(sp->out));
    snprintf(path, sizeof path, "%s/aggregations/%u/selector", j->path, r);
    st = call_json(j->p[1].h, "GET", path, NULL, &out);
    CHECK_MSG(st == 200 && json_equal(json_object_get(out, "selector"),
                                      json_object_get(sp->out, "selector")),
              "the selector again: %ld %s", st, pcode(out));
    json_decref(out);
    json_decref(sp->out);
    fs_httpc_free(sp->h);
    sp->h = NULL;
}

/* (static: a round that fails half-way leaves it to the thread) */
static struct sel_poll g_sp;

/* Every party still in posts its unmask message of round r: on the signed
 * survivor set ids/sigs (k of them), or, with sigs NULL, on the survivor
 * set ids of an all-inputs round (no signatures). */
static void post_unmasks(struct job *j, uint32_t r, const uint32_t *ids, const uint8_t (*sigs)[64],
                         size_t k)
{
    struct fs_err err = {0};
    char path[200];

    snprintf(path, sizeof path, "%s/aggregations/%u/unmask", j->path, r);
    for (uint32_t v = 1; v <= NP; v++) {
        struct fs_secagg_reveal *rv = NULL;
        size_t nrv = 0;
        json_t *body;
        if (j->p[v].out) {
            continue;
        }
        CHECK_OK(sigs != NULL ? fs_secagg_client_unmask(j->p[v].c, ids, sigs, k, &rv, &nrv, &err)
                              : fs_secagg_client_unmask_all(j->p[v].c, ids, k, &rv, &nrv, &err),
                 &err);
        body = fs_wire_reveals_encode(rv, nrv);
        CHECK(call_json(j->p[v].h, "POST", path, body, NULL) == 204);
        json_decref(body);
        free(rv);
    }
}

/* An all-inputs sync (no allow_dropouts): no consistency round, no
 * signatures; every party unmasks on the survivor set (and, early, answers
 * the exchange before its unmask message, as the agent does with ot). */
static int unmask_all(struct job *j, uint32_t r, const json_t *doc)
{
    struct fs_err err = {0};
    char path[200];
    uint32_t *u3 = NULL;
    size_t n3 = 0;

    CHECK(!json_is_array(json_object_get(doc, "signatures"))); /* stays null */
    sel_poll_check(j, r, &g_sp);
    if (g_early && j->cfg.alg == FS_FEDPOWER_UTILITY && r < j->exchanges) {
        answer_early(j, r);
    }
    snprintf(path, sizeof path, "%s/aggregations/%u/consistency", j->path, r);
    {
        /* the consistency route refuses in such a job */
        json_t *out = NULL;
        uint8_t sig[64] = {0};
        json_t *body = fs_wire_sig_encode(sig);
        long st = call_json(j->p[1].h, "POST", path, body, &out);
        CHECK_MSG(st == 409, "consistency in an all-inputs job: %ld %s", st, pcode(out));
        json_decref(out);
        json_decref(body);
    }
    CHECK_OK(fs_wire_ids_decode(json_object_get(doc, "survivors"), NP, &u3, &n3, &err), &err);
    post_unmasks(j, r, u3, NULL, n3);
    free(u3);
    return 0;
}

static int run_round(struct job *j, uint32_t r, int bad_inputs)
{
    struct fs_err err = {0};
    char path[200];
    json_t *doc = NULL;
    long st;
    int any = 0;

    snprintf(path, sizeof path, "%s/aggregations/%u", j->path, r);
    st = get_poll(j->admin, path, &doc);
    if (st != 200) {
        json_decref(doc);
        return -1;
    }
    CHECK(json_integer_value(json_object_get(doc, "index")) == r);
    CHECK(strcmp(json_string_value(json_object_get(doc, "kind")),
                 r < j->syncs ? "sync" : "rayleigh") == 0);
    if (j->secagg && r == 0) {
        for (uint32_t v = 1; v <= NP; v++) {
            struct fs_secagg_share_ct *cts = NULL;
            size_t k = 0;
            json_t *out = NULL;
            char sp[200];
            snprintf(sp, sizeof sp, "%s/shares", j->path);
            CHECK(call_json(j->p[v].h, "GET", sp, NULL, &out) == 200);
            CHECK_OK(fs_wire_shares_decode(out, 1, v, fs_secagg_share_ct_len(&j->sc), NP, &cts, &k,
                                           &err),
                     &err);
            json_decref(out);
            CHECK_OK(fs_secagg_client_receive_shares(j->p[v].c, cts, k, &err), &err);
            fs_secagg_share_cts_free(cts, k);
        }
    }
    if (j->cfg.alg == FS_FEDPOWER_UTILITY && r >= j->exchanges && r < j->syncs) {
        /* a later sync of a job with one exchange has none (404) */
        json_t *out = NULL;
        char sp[200];
        snprintf(sp, sizeof sp, "%s/aggregations/%u/selector", j->path, r);
        st = call_json(j->p[1].h, "GET", sp, NULL, &out);
        CHECK_MSG(st == 404 && strcmp(pcode(out), "not_found") == 0,
                  "selector of sync %u after the job's one exchange: %ld %s", r, st, pcode(out));
        json_decref(out);
    }
    if (g_early && r < j->exchanges) {
        /* masked input of r is open: the exchange is not (409 not_ready) */
        json_t *out = NULL;
        char sp[200];
        snprintf(sp, sizeof sp, "%s/aggregations/%u/selector", j->path, r);
        st = call_json(j->p[1].h, "GET", sp, NULL, &out);
        CHECK_MSG(st == 409 && strcmp(pcode(out), "not_ready") == 0,
                  "selector in masked input: %ld %s", st, pcode(out));
        json_decref(out);
        if (r == 0 && j->cfg.alg == FS_FEDPOWER_UTILITY) {
            (void)sel_poll_start(j, r, &g_sp);
        }
    }
    for (uint32_t v = 1; v <= NP; v++) {
        struct party *p = &j->p[v];
        fs_mat *z;
        if (p->out) {
            continue;
        }
        if (p->skip_round == (int)r) {
            p->out = 1;
            continue;
        }
        any = 1;
        z = get_z(j, p, r, doc);
        CHECK(z != NULL && z->rows == D && z->cols == RK);
        if (z == NULL) {
            json_decref(doc);
            return -1;
        }
        CHECK_OK(
            fs_fedpower_party_receive(
                p->fp, z, (uint32_t)json_integer_value(json_object_get(doc, "iteration")), &err),
            &err);
        fs_mat_free(z);
        if (j->secagg) {
            secagg_upload(j, p, r, doc);
        } else {
            double zmax = 0.0;
            const fs_mat *y = fs_fedpower_party_plain_upload(p->fp, &zmax);
            size_t blen = 0;
            uint8_t *body;
            char up[240];
            json_t *out = NULL;
            CHECK(y != NULL);
            body = npy_f8(y, &blen);
            if (bad_inputs && v == 1) {
                /* wrong shape: (rows, cols - 1) */
                fs_mat small = fs_mat_view(y, 0, 0, y->rows, y->cols - 1);
                size_t sl = 0;
                uint8_t *sb = npy_f8(&small, &sl);
                snprintf(up, sizeof up, "%s/aggregations/%u/plain.npy?zmax=%.17g", j->path, r,
                         zmax);
                st = call(p->h, "PUT", up, "application/x-npy", sb, sl, &out);
                CHECK_MSG(st == 422 && strcmp(pcode(out), "invalid") == 0, "bad shape: %ld %s", st,
                          pcode(out));
                json_decref(out);
                free(sb);
                /* too large: over the exact cap */
                sb = calloc(1, blen + 2048);
                memcpy(sb, body, blen);
                st = call(p->h, "PUT", up, "application/x-npy", sb, blen + 2048, &out);
                CHECK_MSG(st == 413, "too large: %ld %s", st, pcode(out));
                json_decref(out);
                free(sb);
                /* bad zmax */
                snprintf(up, sizeof up, "%s/aggregations/%u/plain.npy?zmax=-1", j->path, r);
                st = call(p->h, "PUT", up, "application/x-npy", body, blen, &out);
                CHECK_MSG(st == 422, "negative zmax: %ld %s", st, pcode(out));
                json_decref(out);
                snprintf(up, sizeof up, "%s/aggregations/%u/plain.npy", j->path, r);
                st = call(p->h, "PUT", up, "application/x-npy", body, blen, &out);
                CHECK_MSG(st == 400, "no zmax: %ld %s", st, pcode(out));
                json_decref(out);
                /* not this round */
                snprintf(up, sizeof up, "%s/aggregations/%u/plain.npy?zmax=1", j->path, r + 1);
                st = call(p->h, "PUT", up, "application/x-npy", body, blen, &out);
                CHECK_MSG(st == 409 && strcmp(pcode(out), "not_ready") == 0, "next round: %ld %s",
                          st, pcode(out));
                json_decref(out);
            }
            snprintf(up, sizeof up, "%s/aggregations/%u/plain.npy?zmax=%.17g", j->path, r, zmax);
            st = call(p->h, "PUT", up, "application/x-npy", body, blen, &out);
            CHECK_MSG(st == 204, "plain %u: %ld %s", v, st, pcode(out));
            json_decref(out);
            if (bad_inputs && v == 1) {
                st = call(p->h, "PUT", up, "application/x-npy", body, blen, NULL);
                CHECK(st == 204); /* identical repeat */
                /* the lowest mantissa bit of the last value: still finite and
                 * in range, only different (flipping an exponent bit could
                 * make it non-finite or out of range: 422, not a conflict) */
                body[blen - 8] ^= 0x01;
                st = call(p->h, "PUT", up, "application/x-npy", body, blen, &out);
                CHECK_MSG(st == 409 && strcmp(pcode(out), "conflict") == 0, "changed: %ld", st);
                json_decref(out);
            }
            free(body);
        }
    }
    json_decref(doc);
    if (!any) {
        return -1;
    }
    if (!j->secagg) {
        return 0;
    }
    /* consistency */
    doc = agg_wait(j, r, "survivors", NULL);
    if (doc == NULL) {
        return -1;
    }
    /* the survivors are published as the next round opens: unmasking at
     * once without allow_dropouts, else consistency (nobody signed yet) */
    CHECK_MSG(strcmp(json_string_value(json_object_get(doc, "phase")),
                     j->sc.all_inputs ? "unmasking" : "consistency") == 0,
              "%s sync %u after masked input: %s", j->alg, r,
              json_string_value(json_object_get(doc, "phase")));
    if (j->sc.all_inputs) {
        int rc = unmask_all(j, r, doc);
        json_decref(doc);
        if (rc != 0) {
            return rc;
        }
        goto after_unmask;
    }
    {
        uint32_t *u3 = NULL;
        size_t n3 = 0;
        snprintf(path, sizeof path, "%s/aggregations/%u/consistency", j->path, r);
        CHECK_OK(fs_wire_ids_decode(json_object_get(doc, "survivors"), NP, &u3, &n3, &err), &err);
        for (uint32_t v = 1; v <= NP; v++) {
            uint8_t sig[64];
            json_t *body;
            if (j->p[v].out) {
                continue;
            }
            CHECK_OK(fs_secagg_client_consistency(j->p[v].c, u3, n3, sig, &err), &err);
            body = fs_wire_sig_encode(sig);
            CHECK(call_json(j->p[v].h, "POST", path, body, NULL) == 204);
            json_decref(body);
        }
        free(u3);
    }
    json_decref(doc);
    sel_poll_check(j, r, &g_sp);
    if (g_early && j->cfg.alg == FS_FEDPOWER_UTILITY && r < j->exchanges) {
        answer_early(j, r);
    }
    doc = agg_wait(j, r, "signatures", NULL);
    if (doc == NULL) {
        return -1;
    }
    {
        uint32_t *ids = NULL;
        uint8_t(*sigs)[64] = NULL;
        size_t k = 0;
        CHECK_OK(fs_wire_sigs_decode(json_object_get(doc, "signatures"), NP, &ids, &sigs, &k, &err),
                 &err);
        post_unmasks(j, r, ids, (const uint8_t(*)[64])sigs, k);
        free(ids);
        free(sigs);
    }
    json_decref(doc);
after_unmask:
    if (j->cfg.alg != FS_FEDPOWER_UTILITY || r >= j->exchanges) {
        return 0;
    }
    if (g_early) {
        /* every answer is in: the exchange closes as soon as the sum is,
         * long before the 30 s deadline; nobody answers again */
        CHECK_MSG(wait_phase(j, "masked_input", 10000) == 0,
                  "sync %u: the exchange answered early did not close at once", r);
        return 0;
    }
    /* noise exchange */
    doc = agg_wait(j, r, NULL, "noise_exchange");
    if (doc == NULL) {
        return -1;
    }
    {
        uint32_t *u3 = NULL;
        size_t n3 = 0;
        CHECK_OK(fs_wire_ids_decode(json_object_get(doc, "survivors"), NP, &u3, &n3, &err), &err);
        for (uint32_t v = 1; v <= NP; v++) {
            struct party *p = &j->p[v];
            json_t *out = NULL;
            uint8_t *sel = NULL;
            uint8_t *resp = NULL;
            size_t sl = 0;
            size_t rl = 0;
            char *b64;
            json_t *body;
            int in_u3 = 0;
            for (size_t q = 0; q < n3; q++) {
                in_u3 |= u3[q] == v;
            }
            if (!in_u3) {
                snprintf(path, sizeof path, "%s/aggregations/%u/selector", j->path, r);
                st = call_json(p->h, "GET", path, NULL, &out);
                CHECK_MSG(st == 409 && strcmp(pcode(out), "conflict") == 0,
                          "selector outside U3: %ld %s", st, pcode(out));
                json_decref(out);
                continue;
            }
            if (p->out) {
                continue;
            }
            if (!p->has_key) {
                uint8_t *pk = NULL;
                size_t pl = 0;
                snprintf(path, sizeof path, "%s/exchange-key", j->path);
                CHECK(call_json(p->h, "GET", path, NULL, &out) == 200);
                CHECK(json_integer_value(json_object_get(out, "bits")) == 1024);
                CHECK_OK(
                    fs_b64url_decode_alloc(json_string_value(json_object_get(out, "public_key")),
                                           1 << 16, &pk, &pl, &err),
                    &err);
                json_decref(out);
                CHECK_OK(fs_fedpower_party_set_exchange_key(p->fp, pk, pl, &err), &err);
                free(pk);
                p->has_key = 1;
            }
            snprintf(path, sizeof path, "%s/aggregations/%u/selector", j->path, r);
            CHECK(call_json(p->h, "GET", path, NULL, &out) == 200);
            CHECK_OK(fs_b64url_decode_alloc(json_string_value(json_object_get(out, "selector")),
                                            1 << 16, &sel, &sl, &err),
                     &err);
            json_decref(out);
            rl = fs_fedpower_party_exchange_size(p->fp);
            resp = malloc(rl);
            CHECK_OK(fs_fedpower_party_exchange(p->fp, sel, sl, resp, rl, &err), &err);
            snprintf(path, sizeof path, "%s/aggregations/%u/noise-response", j->path, r);
            if (bad_inputs && v == 1) {
                /* garbage: wrong size, not base64, all-zero ciphertexts, not JSON */
                body = json_pack("{s:s}", "response", "AAAA");
                st = call_json(p->h, "POST", path, body, &out);
                CHECK_MSG(st == 422, "short response: %ld %s", st, pcode(out));
                json_decref(out);
                json_decref(body);
                body = json_pack("{s:s}", "response", "!!!");
                st = call_json(p->h, "POST", path, body, &out);
                CHECK_MSG(st == 400, "bad base64: %ld %s", st, pcode(out));
                json_decref(out);
                json_decref(body);
                {
                    uint8_t *zero = calloc(1, rl);
                    char *zb = fs_b64url_encode(zero, rl);
                    body = json_pack("{s:s}", "response", zb);
                    st = call_json(p->h, "POST", path, body, &out);
                    CHECK_MSG(st == 422, "zero ciphertexts: %ld %s", st, pcode(out));
                    json_decref(out);
                    json_decref(body);
                    free(zb);
                    free(zero);
                }
                st = call(p->h, "POST", path, "application/json", "nope", 4, &out);
                CHECK_MSG(st == 400, "not JSON: %ld %s", st, pcode(out));
                json_decref(out);
            }
            b64 = fs_b64url_encode(resp, rl);
            body = json_pack("{s:s}", "response", b64);
            st = call_json(p->h, "POST", path, body, &out);
            CHECK_MSG(st == 204, "response %u: %ld %s", v, st, pcode(out));
            json_decref(out);
            if (bad_inputs && v == 1 && n3 > 1) {
                CHECK(call_json(p->h, "POST", path, body, NULL) == 204); /* repeat */
            }
            json_decref(body);
            free(b64);
            free(resp);
            free(sel);
        }
        free(u3);
    }
    json_decref(doc);
    return 0;
}

/* Run the job to its end; the final Job status. */
static json_t *run_job(struct job *j, int bad_inputs)
{
    join(j);
    for (uint32_t r = 0; r < j->naggs; r++) {
        if (run_round(j, r, bad_inputs && r == 1) != 0) {
            break;
        }
    }
    for (int i = 0; i < 1500; i++) {
        char ph[40];
        phase_of(j, ph, sizeof ph);
        if (strcmp(ph, "done") == 0 || strcmp(ph, "failed") == 0) {
            break;
        }
        sleep_ms(20);
    }
    return job_status(j);
}

static fs_mat *get_v(struct job *j, json_t **res)
{
    struct fs_err err = {0};
    char path[200];
    char file[PATH_MAX + 64];
    fs_mat *v = NULL;
    long st;

    snprintf(path, sizeof path, "%s/result", j->path);
    st = call_json(j->p[2].h, "GET", path, NULL, res);
    CHECK_MSG(st == 200, "result: %ld %s", st, pcode(*res));
    snprintf(path, sizeof path, "%s/result/V.npy", j->path);
    snprintf(file, sizeof file, "%s/V-%s.npy", g_root, j->id);
    CHECK_OK(fs_httpc_download(j->admin, path, file, NULL, &err), &err);
    CHECK_OK(fs_io_load_dense(file, FS_FMT_NPY, NULL, &v, &err), &err);
    return v;
}

static void check_done(struct job *j, json_t *status, double max_dist)
{
    struct fs_err err = {0};
    json_t *res = NULL;
    json_t *priv;
    fs_mat *v;
    double dist = 1.0;

    CHECK_MSG(strcmp(json_string_value(json_object_get(status, "phase")), "done") == 0,
              "%s: phase %s, error %s", j->alg, json_string_value(json_object_get(status, "phase")),
              json_string_value(json_object_get(status, "error")));
    CHECK(json_integer_value(json_object_get(status, "syncs")) == j->syncs);
    CHECK(json_integer_value(json_object_get(status, "iteration")) == 8);
    CHECK(json_is_object(json_object_get(status, "privacy")));
    CHECK(json_is_string(json_object_get(status, "z0_seed")));
    v = get_v(j, &res);
    if (v != NULL) {
        CHECK(v->rows == D && v->cols == RK);
        CHECK_OK(fs_fedpower_subspace_dist(g_ref, v, &dist, NULL, &err), &err);
        CHECK_MSG(dist <= max_dist, "%s: projection distance %g > %g", j->alg, dist, max_dist);
        fprintf(stderr, "  %s: projection distance to the centralised top-%d: %.3g\n", j->alg, RK,
                dist);
    }
    fs_mat_free(v);
    CHECK(json_array_size(json_object_get(res, "convergence")) == j->syncs);
    CHECK(json_array_size(json_object_get(res, "eigenvalues")) == RK);
    CHECK(json_array_size(json_object_get(res, "files")) == 2);
    CHECK(json_integer_value(json_object_get(res, "syncs")) == j->syncs);
    priv = json_object_get(res, "privacy");
    CHECK(json_is_object(priv) && json_is_boolean(json_object_get(priv, "formal")));
    CHECK(json_is_number(json_object_get(json_object_get(res, "timings"), "crypto")));
    {
        /* eigenvalues close to the top eigenvalues of the pooled covariance */
        double l0 = json_number_value(json_array_get(json_object_get(res, "eigenvalues"), 0));
        CHECK_MSG(l0 > 50.0 && l0 < 200.0, "top eigenvalue %g", l0);
    }
    json_decref(res);
}

/* ------------------------------------------------------------ cases */

static struct server g_srv;

static void extra_bound(char *buf, size_t cap, const char *more)
{
    snprintf(buf, cap, "\"value_bound\":%.17g%s%s", 2.0 * g_bound, more[0] != '\0' ? "," : "",
             more);
}

static void test_plain(void)
{
    struct job j;
    json_t *st;

    if (!g_have_bin) {
        return;
    }
    /* p = 1: exact (p > 1 runs local iterations on each party's own data) */
    CHECK(job_create(&j, &g_srv, "fedpower", "\"sync_every\":1,\"sigma\":0", NULL, NULL) == 0);
    st = run_job(&j, 1);
    check_done(&j, st, 1e-8);
    json_decref(st);
    job_free(&j);
}

/* early: the agents answer the noise exchange before the sum is in (as
 * unmasking opens: these jobs have no consistency round); the
 * noise_exchange round then closes at once and the aggregate is exact. */
static void utility_case(int early)
{
    struct job j;
    char extra[256];
    json_t *st;

    if (!g_have_bin) {
        return;
    }
    extra_bound(extra, sizeof extra, "\"sync_every\":1,\"paillier_bits\":1024");
    CHECK(job_create(&j, &g_srv, "fedpower-utility", extra, NULL, NULL) == 0);
    g_early = early;
    st = run_job(&j, !early);
    g_early = 0;
    check_done(&j, st, 1e-8);
    json_decref(st);
    job_free(&j);
}

static void test_utility(void)
{
    utility_case(0);
}

static void test_utility_early(void)
{
    utility_case(1);
}

static void test_private(void)
{
    struct job j;
    char extra[256];
    json_t *st;

    if (!g_have_bin) {
        return;
    }
    extra_bound(extra, sizeof extra,
                "\"sync_every\":2,\"sigma\":0.01,\"clip_z\":1,\"bound_m\":200,"
                "\"allow_weak_privacy\":true");
    CHECK(job_create(&j, &g_srv, "fedpower-private", extra, NULL, NULL) == 0);
    st = run_job(&j, 0);
    check_done(&j, st, 0.5);
    CHECK(json_is_true(json_object_get(json_object_get(st, "privacy"), "formal")));
    json_decref(st);
    job_free(&j);
}

static void test_dpppm(void)
{
    struct job j;
    char extra[256];
    json_t *st;

    if (!g_have_bin) {
        return;
    }
    extra_bound(extra, sizeof extra, "\"sigma\":0.01,\"allow_weak_privacy\":true");
    CHECK(job_create(&j, &g_srv, "dp-ppm", extra, NULL, NULL) == 0);
    CHECK(j.syncs == 8 && j.naggs == 9);
    st = run_job(&j, 0);
    check_done(&j, st, 0.5);
    CHECK(json_is_true(json_object_get(json_object_get(st, "privacy"), "formal")));
    json_decref(st);
    job_free(&j);
}

static void test_weak_refused(void)
{
    struct job j;
    char extra[256];
    json_t *out = NULL;
    long st = 0;

    if (!g_have_bin) {
        return;
    }
    extra_bound(extra, sizeof extra, "\"sigma\":0.01");
    CHECK(job_create(&j, &g_srv, "dp-ppm", extra, &st, &out) != 0);
    CHECK_MSG(st == 422 && strstr(json_string_value(json_object_get(out, "detail")), "epsilon"),
              "weak: %ld %s", st, pcode(out));
    json_decref(out);
    job_free(&j);
    /* missing required field: 400; bad combination: 422 */
    CHECK(job_create(&j, &g_srv, "fedpower-private", "\"sigma\":1,\"clip_z\":1", &st, &out) != 0);
    CHECK_MSG(st == 400, "missing bound_m: %ld", st);
    json_decref(out);
    job_free(&j);
    CHECK(job_create(&j, &g_srv, "dp-ppm", "\"sigma\":1,\"value_bound\":5,\"sync_every\":2", &st,
                     &out) != 0);
    CHECK_MSG(st == 422, "dp-ppm p=2: %ld", st);
    json_decref(out);
    job_free(&j);
}

/* Party 3 does not upload in sync 1 (round 1). */
static void test_dropout(int allow, const char *alg, int threshold)
{
    struct job j;
    char extra[300];
    char more[200];
    json_t *st;
    const char *ph;

    if (!g_have_bin) {
        return;
    }
    snprintf(more, sizeof more,
             "\"sync_every\":2,\"round_timeout_s\":2,\"threshold\":%d,\"allow_dropouts\":%s%s",
             threshold, allow ? "true" : "false",
             strcmp(alg, "fedpower-utility") == 0 ? ",\"paillier_bits\":1024"
             : strcmp(alg, "fedpower-private") == 0
                 ? ",\"sigma\":0.01,\"clip_z\":1,\"bound_m\":200,\"allow_weak_privacy\":true"
                 : "");
    extra_bound(extra, sizeof extra, more);
    if (strcmp(alg, "fedpower") == 0) {
        snprintf(extra, sizeof extra, "%s", more);
    }
    {
        json_t *out = NULL;
        long code = 0;
        if (job_create(&j, &g_srv, alg, extra, &code, &out) != 0) {
            CHECK_MSG(0, "create %s: %ld %s", alg, code,
                      json_string_value(json_object_get(out, "detail")));
            json_decref(out);
            job_free(&j);
            return;
        }
        json_decref(out);
    }
    j.p[3].skip_round = 1;
    st = run_job(&j, 0);
    ph = json_string_value(json_object_get(st, "phase"));
    if (allow && threshold <= 2) {
        json_t *res = NULL;
        fs_mat *v;
        CHECK_MSG(strcmp(ph, "done") == 0, "%s dropout: %s (%s)", alg, ph,
                  json_string_value(json_object_get(st, "error")));
        CHECK(json_array_size(json_object_get(st, "dropped")) == 1);
        v = get_v(&j, &res);
        CHECK(json_array_size(json_object_get(res, "survivors")) == 2);
        CHECK(json_integer_value(json_array_get(json_object_get(res, "dropped"), 0)) == 3);
        {
            json_t *c1 = json_array_get(json_object_get(res, "convergence"), 1);
            CHECK(json_array_size(json_object_get(c1, "parties")) == 2);
        }
        fs_mat_free(v);
        json_decref(res);
    } else {
        const char *e = json_string_value(json_object_get(st, "error"));
        CHECK_MSG(strcmp(ph, "failed") == 0, "%s should fail: %s", alg, ph);
        CHECK_MSG(allow || threshold > 2 ||
                      (e != NULL && strstr(e, "party 3 did not send its masked_input") != NULL) ||
                      strcmp(alg, "fedpower") == 0,
                  "error: %s", e != NULL ? e : "(null)");
        CHECK_MSG(e != NULL && (strstr(e, "threshold") != NULL || strstr(e, "dropouts") != NULL ||
                                strstr(e, "masked inputs") != NULL),
                  "error: %s", e != NULL ? e : "(null)");
        fprintf(stderr, "  %s failed as expected: %s\n", alg, e != NULL ? e : "");
    }
    json_decref(st);
    job_free(&j);
}

static void test_dropouts(void)
{
    test_dropout(1, "fedpower", 2);
    test_dropout(1, "fedpower-utility", 2);
    test_dropout(1, "fedpower", 3);         /* below threshold */
    test_dropout(1, "fedpower-private", 3); /* below threshold (secagg) */
    test_dropout(0, "fedpower", 2);         /* dropouts not allowed */
    /* an all-inputs secure aggregation: the dropout rule names the party */
    test_dropout(0, "fedpower-private", 2);
}

static void test_routes(void)
{
    struct job j;
    char extra[256];
    char path[200];
    json_t *out = NULL;
    long st;

    if (!g_have_bin) {
        return;
    }
    extra_bound(extra, sizeof extra, "\"sigma\":0.01,\"allow_weak_privacy\":true");
    CHECK(job_create(&j, &g_srv, "dp-ppm", extra, NULL, NULL) == 0);
    snprintf(path, sizeof path, "%s/exchange-key", j.path);
    CHECK(call_json(j.p[1].h, "GET", path, NULL, &out) == 404); /* not utility */
    json_decref(out);
    snprintf(path, sizeof path, "%s/aggregations/0/z.npy", j.path);
    st = call_json(j.p[1].h, "GET", path, NULL, &out);
    CHECK_MSG(st == 409 && strcmp(pcode(out), "not_ready") == 0, "z before: %ld", st);
    json_decref(out);
    snprintf(path, sizeof path, "%s/aggregations/99/z.npy", j.path);
    CHECK(call_json(j.p[1].h, "GET", path, NULL, NULL) == 404);
    snprintf(path, sizeof path, "%s/aggregations/0/plain.npy?zmax=1", j.path);
    CHECK(call(j.p[1].h, "PUT", path, "application/x-npy", "x", 1, NULL) == 404);
    /* a restart resumes the running job; a fedpower-utility job whose
     * sealed secret no longer opens (server.key lost) fails cleanly */
    {
        struct job u;
        char key[4200];
        extra_bound(extra, sizeof extra, "\"sigma\":0.01,\"paillier_bits\":1024");
        CHECK(job_create(&u, &g_srv, "fedpower-utility", extra, NULL, NULL) == 0);
        CHECK(server_stop(&g_srv, SIGKILL) == 128 + SIGKILL);
        snprintf(key, sizeof key, "%s/server.key", g_srv.data);
        CHECK(unlink(key) == 0);
        CHECK(server_start(&g_srv) == 0);
        fs_httpc_free(j.admin);
        j.admin = client(&g_srv, ADMIN_TOKEN);
        fs_httpc_free(u.admin);
        u.admin = client(&g_srv, ADMIN_TOKEN);
        out = job_status(&j);
        CHECK(strcmp(json_string_value(json_object_get(out, "state")), "running") == 0);
        CHECK(json_is_null(json_object_get(out, "error")));
        json_decref(out);
        out = job_status(&u);
        CHECK(strcmp(json_string_value(json_object_get(out, "phase")), "failed") == 0);
        CHECK_MSG(json_is_string(json_object_get(out, "error")) &&
                      strncmp(json_string_value(json_object_get(out, "error")),
                              "cannot resume after restart: ", 29) == 0,
                  "error: %s", json_string_value(json_object_get(out, "error")));
        json_decref(out);
        job_free(&u);
    }
    job_free(&j);
}

int main(int argc, char **argv)
{
    (void)argc;
    if (aggsrv_test_setup(argv[0], "/tmp/fedsvd-aggsrv-fp-e2e-XXXXXX", ADMIN_TOKEN) != 0) {
        return 1;
    }
    data_init();
    snprintf(g_srv.data, sizeof g_srv.data, "%s/srv", g_root);
    snprintf(g_srv.extra[0], sizeof g_srv.extra[0], "--chunk-words");
    snprintf(g_srv.extra[1], sizeof g_srv.extra[1], "16");
    g_srv.nextra = 2;
    if (g_have_bin && server_start(&g_srv) != 0) {
        fprintf(stderr, "cannot start %s\n", g_bin);
        g_have_bin = 0;
        t_failed++;
    }
    RUN(test_plain);
    RUN(test_utility);
    RUN(test_utility_early);
    RUN(test_private);
    RUN(test_dpppm);
    RUN(test_weak_refused);
    RUN(test_dropouts);
    RUN(test_routes);
    if (g_have_bin) {
        CHECK(server_stop(&g_srv, SIGTERM) == 0);
    }
    for (int i = 1; i <= NP; i++) {
        fs_mat_free(g_x[i]);
    }
    fs_mat_free(g_ref);
    if (t_failed == 0 && getenv("FS_TEST_KEEP") == NULL) {
        char cmd[PATH_MAX + 16];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_root);
        if (system(cmd) != 0) {
            fprintf(stderr, "cannot remove %s\n", g_root);
        }
    } else {
        printf("kept %s\n", g_root);
    }
    return TEST_END("test_aggsrv_fedpower_e2e");
}
