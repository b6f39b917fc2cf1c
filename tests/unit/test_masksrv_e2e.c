/* masking-server end to end on loopback: starts the real binary (the
 * build's bin/masking-server, next to this test's directory), creates mask
 * sets through its admin API (each party pinned to a fresh identity key),
 * downloads every party's keys with requests signed by that party's identity
 * (lib/crypto/reqsig.h; lib/net's HTTP client: the manifest and every .npy file),
 * assembles them with fs_fedsvd_keys_asm_* and checks what the keys are for:
 *
 *  - the parties' slabs stack to an orthogonal A (A^T A = I to 1e-12), with
 *    one and with several diagonal blocks, for both partitions; every party
 *    gets the same seed of B, and B from it is orthogonal; the files' total
 *    size is the status's key_bytes;
 *  - a whole FedSVD with the downloaded keys (parties encode, the ring sum is
 *    decoded and factorized, parties recover) gives the singular values of
 *    the pooled matrix and each party's exact factorization;
 *  - SIGTERM exits 0; a restart keeps the mask set and serves the same
 *    manifest (keys_id and file digests); the seed file is 0600 in a 0700 directory;
 *  - keys are the same whichever order the parties' slabs are generated in
 *    (the server's block cache shares blocks between neighbouring parties);
 *  - DELETE destroys the seed file, keys then answer 410, the job id can get
 *    a new mask set.
 *
 * The HTTP error replies are covered by tests/masking/run.sh (curl). If the
 * server binary is not built, every case is skipped (counted as passed with a
 * note). */
#include "crypto/ed25519.h"
#include "crypto/rand.h"
#include "crypto/reqsig.h"
#include "la/fixedpt.h"
#include "la/mask.h"
#include "la/mat.h"
#include "la/svd.h"
#include "maskkeys.h"
#include "net/auth.h"
#include "net/http_client.h"
#include "proto/fedsvd.h"
#include "test.h"
#include "test_la_util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ADMIN_TOKEN "masksrv-e2e-admin-token-0123456789"
#define MAXP        8

static char g_bin[PATH_MAX];
static char g_root[512];
static int g_have_bin;

struct server {
    pid_t pid;
    char url[64];
    char data[PATH_MAX];
};

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int server_start(struct server *s)
{
    char portfile[PATH_MAX + 16];
    char tok[PATH_MAX + 16];
    char log[PATH_MAX + 16];
    pid_t pid;

    snprintf(portfile, sizeof portfile, "%s.port", s->data);
    snprintf(tok, sizeof tok, "%s/admin.tok", g_root);
    snprintf(log, sizeof log, "%s.log", s->data);
    (void)unlink(portfile);
    pid = fork();
    if (pid < 0) {
        return -1;
    }
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd >= 0) {
            dup2(fd, 2);
            close(fd);
        }
        execl(g_bin, g_bin, "--listen", "127.0.0.1:0", "--data-dir", s->data, "--admin-token-file",
              tok, "--port-file", portfile, "--log-level", "warn", (char *)NULL);
        _exit(127);
    }
    s->pid = pid;
    for (int i = 0; i < 800; i++) {
        FILE *f = fopen(portfile, "r");
        if (f != NULL) {
            unsigned p = 0;
            int ok = fscanf(f, "%u", &p) == 1;
            fclose(f);
            if (ok && p > 0 && p < 65536) {
                snprintf(s->url, sizeof s->url, "http://127.0.0.1:%u", p);
                return 0;
            }
        }
        if (waitpid(pid, NULL, WNOHANG) == pid) {
            s->pid = 0;
            return -1;
        }
        sleep_ms(25);
    }
    return -1;
}

/* Stop with sig; returns the exit status (or 128+signal). */
static int server_stop(struct server *s, int sig)
{
    int st = 0;

    if (s->pid <= 0) {
        return -1;
    }
    kill(s->pid, sig);
    waitpid(s->pid, &st, 0);
    s->pid = 0;
    if (WIFEXITED(st)) {
        return WEXITSTATUS(st);
    }
    return 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

static fs_httpc *client(const struct server *s, const char *token)
{
    struct fs_httpc_config c;
    struct fs_err err = {0};
    fs_httpc *h = NULL;

    fs_httpc_config_default(&c);
    c.base_url = s->url;
    c.token = token;
    c.max_retries = 0;
    c.timeout_ms = 120000;
    c.low_speed_time_s = 120;
    c.max_body = (size_t)256 << 20;
    if (fs_httpc_new(&h, &c, &err) != 0) {
        fprintf(stderr, "  httpc: %s\n", err.msg);
    }
    return h;
}

/* One request; the status (0 on transport failure); the raw body (malloc'd) if body != NULL.
 * auth: an Authorization value instead of the token (or NULL). */
static long call_auth(const struct server *s, const char *token, const char *auth,
                      const char *method, const char *path, const char *json, char **body,
                      size_t *len)
{
    fs_httpc *h = client(s, token);
    struct fs_httpc_req rq;
    struct fs_httpc_resp resp;
    struct fs_err err = {0};
    long st = 0;

    memset(&rq, 0, sizeof rq);
    memset(&resp, 0, sizeof resp);
    rq.method = method;
    rq.path = path;
    rq.content_type = json != NULL ? "application/json" : NULL;
    rq.body = json;
    rq.body_len = json != NULL ? strlen(json) : 0;
    rq.retry = FS_HTTPC_RETRY_NEVER;
    rq.authorization = auth;
    if (body != NULL) {
        *body = NULL;
        *len = 0;
    }
    if (h != NULL && fs_httpc_do(h, &rq, &resp, &err) == 0) {
        st = resp.status;
        if (body != NULL && resp.body != NULL) {
            *body = resp.body;
            *len = resp.len;
            resp.body = NULL;
        }
    } else if (h != NULL) {
        fprintf(stderr, "  %s %s: %s\n", method, path, err.msg);
    }
    fs_httpc_resp_clear(&resp);
    fs_httpc_free(h);
    return st;
}

static long call(const struct server *s, const char *token, const char *method, const char *path,
                 const char *json, char **body, size_t *len)
{
    return call_auth(s, token, NULL, method, path, json, body, len);
}

static json_t *call_json(const struct server *s, const char *token, const char *method,
                         const char *path, const char *json, long *status)
{
    char *b = NULL;
    size_t n = 0;
    json_t *j = NULL;

    *status = call(s, token, method, path, json, &b, &n);
    if (b != NULL) {
        j = json_loadb(b, n, 0, NULL);
    }
    free(b);
    return j;
}

struct created {
    char id[64];
    uint32_t k;
    uint8_t sk[MAXP + 1][32]; /* party i's identity key */
    char end_token[64];
    uint64_t key_bytes[MAXP + 1];
};

/* spec with a fresh identity added to each party (keys into c->sk); a new string. */
static char *with_identities(const char *spec, struct created *c)
{
    json_t *j = json_loads(spec, 0, NULL);
    json_t *ps = json_object_get(j, "parties");
    struct fs_err err = {0};
    char *out = NULL;

    for (size_t i = 0; i < json_array_size(ps) && i < MAXP; i++) {
        uint8_t pub[32];
        char fpr[FS_ED25519_FPR_LEN + 1];
        if (fs_ed25519_keygen(c->sk[i + 1], pub, &err) != 0) {
            json_decref(j);
            return NULL;
        }
        fs_ed25519_fpr_format(pub, fpr);
        json_object_set_new(json_array_get(ps, i), "identity", json_string(fpr));
    }
    if (j != NULL) {
        out = json_dumps(j, JSON_COMPACT);
    }
    json_decref(j);
    return out;
}

static int create(const struct server *s, const char *spec_in, struct created *c)
{
    long st = 0;
    char *spec;
    json_t *j;
    json_t *ps;
    json_t *ms;
    int ok = 0;

    memset(c, 0, sizeof *c);
    spec = with_identities(spec_in, c);
    j = spec != NULL ? call_json(s, ADMIN_TOKEN, "POST", "/v1/masksets", spec, &st) : NULL;
    free(spec);
    if (j == NULL || st != 201) {
        fprintf(stderr, "  create: status %ld\n", st);
        json_decref(j);
        return -1;
    }
    ms = json_object_get(j, "maskset");
    ps = json_object_get(j, "parties");
    snprintf(c->id, sizeof c->id, "%s", json_string_value(json_object_get(ms, "id")));
    c->k = (uint32_t)json_array_size(ps);
    snprintf(c->end_token, sizeof c->end_token, "%s",
             json_string_value(json_object_get(j, "end_token")));
    ok = c->k >= 1 && c->k <= MAXP && strlen(c->end_token) == FS_AUTH_TOKEN_GEN_LEN;
    for (uint32_t i = 0; ok && i < c->k; i++) {
        json_t *p = json_array_get(ps, i);
        json_t *q = json_array_get(json_object_get(ms, "parties"), i);
        c->key_bytes[i + 1] = (uint64_t)json_integer_value(json_object_get(q, "key_bytes"));
        ok = json_integer_value(json_object_get(p, "party")) == (json_int_t)(i + 1) &&
             strstr(json_string_value(json_object_get(p, "keys_url")), c->id) != NULL &&
             json_object_get(p, "mask_token") == NULL;
    }
    json_decref(j);
    return ok ? 0 : -1;
}

/* GET path signed by party i's identity key (the query string, if any, is not signed). */
static long signed_get(const struct server *s, const struct created *c, uint32_t i,
                       const char *path, char **blob, size_t *len)
{
    char hdr[FS_REQSIG_HEADER_MAX];
    char bare[256];
    struct fs_err err = {0};

    snprintf(bare, sizeof bare, "%s", path);
    bare[strcspn(bare, "?")] = '\0';
    if (fs_reqsig_sign(c->sk[i], "GET", bare, c->id, i, (int64_t)time(NULL), NULL, hdr, &err) !=
        0) {
        fprintf(stderr, "  sign: %s\n", err.msg);
        return 0;
    }
    return call_auth(s, NULL, hdr, "GET", path, NULL, blob, len);
}

/* Download party i's keys manifest. */
static long download(const struct server *s, const struct created *c, uint32_t i, char **blob,
                     size_t *len)
{
    char path[160];

    snprintf(path, sizeof path, "/v1/masksets/%s/parties/%u/keys", c->id, i);
    return signed_get(s, c, i, path, blob, len);
}

/* Party i's keys as the agent gets them: the manifest, then every .npy file,
 * assembled and checked by fs_fedsvd_keys_asm_*. */
static int fetch_party(const struct server *s, const struct created *c, uint32_t i,
                       struct fs_fedsvd_keys **out)
{
    struct fs_err err = {0};
    struct fs_maskkeys man;
    fs_fedsvd_keys_asm *as = NULL;
    char *body = NULL;
    size_t len = 0;
    uint64_t total = 0;
    json_t *j = NULL;
    long st = download(s, c, i, &body, &len);
    int rc = -1;

    memset(&man, 0, sizeof man);
    if (st != 200 || body == NULL) {
        fprintf(stderr, "  party %u keys: status %ld\n", i, st);
        free(body);
        return -1;
    }
    j = json_loadb(body, len, 0, NULL);
    fs_fedsvd_wipe_free(body, len);
    if (j == NULL || fs_maskkeys_decode(j, &man, &err) != 0 ||
        fs_fedsvd_keys_asm_new(&man.hdr, man.pieces, man.npieces, man.keys_id, 0, &as, &err) != 0) {
        fprintf(stderr, "  party %u manifest: %s\n", i, err.msg);
        goto out;
    }
    CHECK(strcmp(man.maskset, c->id) == 0);
    for (size_t p = 0; p < man.npieces; p++) {
        for (int f = 0; f < 2; f++) {
            enum fs_fedsvd_keyfile which =
                f == 0 ? FS_FEDSVD_KEYFILE_ROWS : FS_FEDSVD_KEYFILE_BLOCK;
            char name[48];
            char path[256];
            fs_maskkeys_file_name(p, which, name, sizeof name);
            snprintf(path, sizeof path, "/v1/masksets/%s/parties/%u/keys/%s", c->id, i, name);
            st = signed_get(s, c, i, path, &body, &len);
            if (st != 200 ||
                fs_fedsvd_keys_asm_add(as, p, which, (const uint8_t *)body, len, &err) != 0) {
                fprintf(stderr, "  party %u %s: status %ld %s\n", i, name, st, err.msg);
                fs_fedsvd_wipe_free(body, len);
                goto out;
            }
            total += len;
            fs_fedsvd_wipe_free(body, len);
        }
    }
    CHECK_MSG(total == c->key_bytes[i], "party %u files %llu bytes, status says %llu", i,
              (unsigned long long)total, (unsigned long long)c->key_bytes[i]);
    if (fs_fedsvd_keys_asm_finish(as, out, &err) != 0) {
        fprintf(stderr, "  party %u assemble: %s\n", i, err.msg);
        goto out;
    }
    rc = 0;
out:
    json_decref(j);
    fs_fedsvd_keys_asm_free(as);
    fs_maskkeys_clear(&man);
    return rc;
}

/* Download and assemble every party's keys. */
static int fetch_all(const struct server *s, const struct created *c, struct fs_fedsvd_keys **keys)
{
    for (uint32_t i = 1; i <= c->k; i++) {
        keys[i] = NULL;
        if (fetch_party(s, c, i, &keys[i]) != 0) {
            return -1;
        }
        CHECK(keys[i]->party == i && keys[i]->parties == c->k);
    }
    return 0;
}

/* Stack the slabs to the dense m x m A_c; check orthogonality, common seeds, B_c. */
static void check_masks(struct fs_fedsvd_keys **keys, uint32_t k, size_t m, size_t n,
                        size_t min_pieces)
{
    struct fs_err err = {0};
    fs_mat *a = fs_mat_new(m, m);
    fs_mask *b = NULL;
    fs_mat *bd = NULL;
    size_t off = 0;
    size_t pieces = 0;

    for (uint32_t i = 1; i <= k; i++) {
        fs_mat *slab = NULL;
        CHECK(keys[i]->offset == off);
        CHECK(memcmp(keys[i]->b_seed, keys[1]->b_seed, 32) == 0);
        CHECK(memcmp(keys[i]->group_key, keys[1]->group_key, 32) == 0);
        CHECK(memcmp(keys[i]->b_seed, keys[i]->group_key, 32) != 0);
        CHECK(keys[i]->a_slab->n == m);
        pieces += keys[i]->a_slab->npieces;
        CHECK_OK(fs_mask_slab_to_dense(keys[i]->a_slab, &slab, &err), &err);
        if (slab != NULL) {
            for (size_t c = 0; c < keys[i]->size; c++) {
                memcpy(&FS_MAT_AT(a, 0, off + c), &FS_MAT_AT(slab, 0, c), m * sizeof(double));
            }
        }
        fs_mat_free(slab);
        off += keys[i]->size;
    }
    CHECK(off == m);
    CHECK_MSG(pieces >= min_pieces, "%zu slab pieces, expected at least %zu", pieces, min_pieces);
    CHECK_MSG(tl_orth_err(a) <= 1e-12, "||A^T A - I||_F = %g", tl_orth_err(a));
    CHECK_OK(fs_mask_new(n, keys[1]->block_b, keys[1]->b_seed, &b, &err), &err);
    if (b != NULL) {
        CHECK_OK(fs_mask_dense(b, &bd, &err), &err);
        CHECK_MSG(bd != NULL && tl_orth_err(bd) <= 1e-12, "||B^T B - I||_F = %g",
                  bd != NULL ? tl_orth_err(bd) : -1.0);
    }
    fs_mat_free(bd);
    fs_mask_free(b);
    fs_mat_free(a);
}

static void keys_free(struct fs_fedsvd_keys **keys, uint32_t k)
{
    for (uint32_t i = 1; i <= k; i++) {
        fs_fedsvd_keys_free(keys[i]);
        keys[i] = NULL;
    }
}

static void server_init(struct server *s, const char *name)
{
    memset(s, 0, sizeof *s);
    snprintf(s->data, sizeof s->data, "%s/%s", g_root, name);
}

/* ------------------------------------------------------------ cases */

static void test_samples_one_block(void)
{
    struct server s;
    struct created c;
    struct fs_fedsvd_keys *keys[MAXP + 1] = {0};

    if (!g_have_bin) {
        return;
    }
    server_init(&s, "one");
    CHECK(server_start(&s) == 0);
    CHECK(create(&s,
                 "{\"job_id\":\"j-one\",\"partition\":\"samples\",\"parties\":[{\"party\":1,"
                 "\"rows\":7},{\"party\":2,\"rows\":13},{\"party\":3,\"rows\":20}],\"cols\":6}",
                 &c) == 0);
    if (fetch_all(&s, &c, keys) == 0) {
        CHECK(keys[1]->rows == 40 && keys[1]->cols == 6 && keys[3]->size == 20);
        check_masks(keys, 3, 40, 6, 3);
    } else {
        CHECK(0);
    }
    keys_free(keys, 3);
    CHECK(server_stop(&s, SIGTERM) == 0);
}

static void test_several_blocks_both_partitions(void)
{
    struct server s;
    struct created c;
    struct fs_fedsvd_keys *keys[MAXP + 1] = {0};

    if (!g_have_bin) {
        return;
    }
    server_init(&s, "blocks");
    CHECK(server_start(&s) == 0);
    /* 40 rows in blocks of <= 8: 5 blocks, so the slabs have several pieces each */
    CHECK(create(&s,
                 "{\"job_id\":\"j-blocks\",\"partition\":\"samples\",\"parties\":[{\"party\":1,"
                 "\"rows\":7},{\"party\":2,\"rows\":13},{\"party\":3,\"rows\":20}],\"cols\":9,"
                 "\"block_size\":{\"partitioned\":8,\"shared\":4}}",
                 &c) == 0);
    if (fetch_all(&s, &c, keys) == 0) {
        CHECK(keys[1]->block_b == 4);
        check_masks(keys, 3, 40, 9, 7);
    } else {
        CHECK(0);
    }
    keys_free(keys, 3);
    /* features: party i holds columns; A_c acts on the 3 + 5 + 4 = 12 columns, B_c on the N = 15
     * rows */
    CHECK(create(&s,
                 "{\"job_id\":\"j-feat\",\"partition\":\"features\",\"parties\":[{\"party\":1,"
                 "\"cols\":3},{\"party\":2,\"cols\":5},{\"party\":3,\"cols\":4}],\"rows\":15,"
                 "\"block_size\":5}",
                 &c) == 0);
    if (fetch_all(&s, &c, keys) == 0) {
        CHECK(keys[1]->partition == FS_FEDSVD_FEATURES && keys[1]->rows == 15 &&
              keys[1]->cols == 12);
        check_masks(keys, 3, 12, 15, 4);
    } else {
        CHECK(0);
    }
    keys_free(keys, 3);
    CHECK(server_stop(&s, SIGTERM) == 0);
}

/* A whole FedSVD (without the secagg masks: the ring sum of the parties' encodings) on keys from
 * the server: the singular values of the pooled X, and X_i = U_i S V^T at every party. */
static void test_fedsvd_with_served_keys(void)
{
    static const size_t sz[] = {9, 14, 6, 11};
    const size_t N = 40;
    const size_t d = 7;
    const uint32_t K = 4;
    struct server s;
    struct created c;
    struct fs_fedsvd_keys *keys[MAXP + 1] = {0};
    struct fs_err err = {0};
    fs_fedsvd_party *p[MAXP + 1] = {0};
    fs_mat views[MAXP + 1];
    fs_mat *x = tl_randn(N, d, 42);
    struct fs_fedsvd_job job;
    struct fs_fedsvd_published pub;
    fs_svd ref = {0};
    fs_mat *yc = NULL;
    uint64_t len = (uint64_t)N * d;
    uint64_t *sum = calloc(len, sizeof *sum);
    uint64_t *w = calloc(len, sizeof *w);
    int e[MAXP];
    int E = 0;
    size_t off = 0;

    memset(&pub, 0, sizeof pub);
    if (!g_have_bin) {
        goto out;
    }
    server_init(&s, "fedsvd");
    CHECK(server_start(&s) == 0);
    CHECK(create(&s,
                 "{\"job_id\":\"j-fedsvd\",\"partition\":\"samples\",\"parties\":[{\"party\":1,"
                 "\"rows\":9},{\"party\":2,\"rows\":14},{\"party\":3,\"rows\":6},{\"party\":4,"
                 "\"rows\":11}],\"cols\":7,\"block_size\":{\"partitioned\":16}}",
                 &c) == 0);
    if (fetch_all(&s, &c, keys) != 0) {
        CHECK(0);
        keys_free(keys, K);
        server_stop(&s, SIGTERM);
        goto out;
    }
    CHECK(server_stop(&s, SIGTERM) == 0);
    for (uint32_t i = 1; i <= K; i++) {
        views[i] = fs_mat_view(x, off, 0, sz[i - 1], d);
        off += sz[i - 1];
        CHECK_OK(fs_fedsvd_party_new(keys[i], &views[i], &p[i], &err), &err);
        keys[i] = NULL; /* owned by the party now */
        CHECK_OK(fs_fedsvd_party_prepare(p[i], &e[i - 1], &err), &err);
    }
    CHECK_OK(fs_fedsvd_public_exponent(e, K, &E, &err), &err);
    for (uint32_t i = 1; i <= K; i++) {
        CHECK_OK(fs_fedsvd_party_set_exponent(p[i], E, &err), &err);
        CHECK_OK(fs_fedsvd_party_encode(p[i], 0, w, (size_t)len, &err), &err);
        for (uint64_t q = 0; q < len; q++) {
            sum[q] += w[q];
        }
    }
    {
        struct fs_fedsvd_job j2 = {FS_FEDSVD_SAMPLES, N, d, K, sz, 16, 0, 0};
        job = j2;
    }
    CHECK_OK(fs_fedsvd_server_decode(&job, E, sum, len, &yc, &err), &err);
    CHECK_OK(fs_fedsvd_server_factorize(yc, 0, FS_TOPK_AUTO, NULL, &pub, &err), &err);
    CHECK_OK(fs_svd_thin(x, &ref, &err), &err);
    for (size_t j = 0; j < d && pub.s != NULL && ref.s != NULL; j++) {
        CHECK_NEAR(pub.s[j], ref.s[j], 1e-12 * ref.s[0]);
    }
    for (uint32_t i = 1; i <= K; i++) {
        struct fs_fedsvd_result r = {0};
        fs_mat *us = NULL;
        fs_mat *rec = NULL;
        CHECK_OK(fs_fedsvd_party_recover(p[i], &pub, 0.0, &r, &err), &err);
        if (r.u != NULL && r.v != NULL) {
            us = fs_mat_dup(r.u);
            for (size_t j = 0; j < r.r; j++) {
                for (size_t q = 0; q < us->rows; q++) {
                    FS_MAT_AT(us, q, j) *= r.s[j];
                }
            }
            CHECK_OK(fs_mat_mul('N', 'T', us, r.v, &rec, &err), &err);
            if (rec != NULL) {
                CHECK_OK(fs_mat_axpy(-1.0, &views[i], rec, &err), &err);
                CHECK_MSG(fs_mat_norm_fro(rec) <= 1e-12 * fs_mat_norm_fro(&views[i]),
                          "party %u: ||X_i - U_i S V^T|| = %g", i, fs_mat_norm_fro(rec));
            }
        }
        fs_mat_free(us);
        fs_mat_free(rec);
        fs_fedsvd_result_clear(&r);
    }
out:
    for (uint32_t i = 1; i <= K; i++) {
        fs_fedsvd_party_free(p[i]);
    }
    keys_free(keys, K);
    fs_fedsvd_published_clear(&pub);
    fs_svd_clear(&ref);
    fs_mat_free(yc);
    fs_mat_free(x);
    free(sum);
    free(w);
}

static mode_t mode_of(const char *path)
{
    struct stat sb;

    if (stat(path, &sb) != 0) {
        return (mode_t)-1;
    }
    return sb.st_mode & 07777;
}

static void test_restart_and_delete(void)
{
    struct server s;
    struct created c;
    struct created c2;
    char *b1 = NULL;
    char *b2 = NULL;
    size_t n1 = 0;
    size_t n2 = 0;
    char seed[PATH_MAX + 128];
    char path[160];
    long st = 0;
    json_t *j = NULL;

    if (!g_have_bin) {
        return;
    }
    server_init(&s, "restart");
    CHECK(server_start(&s) == 0);
    CHECK(create(&s,
                 "{\"job_id\":\"j-restart\",\"partition\":\"samples\",\"parties\":[{\"party\":1,"
                 "\"rows\":30},{\"party\":2,\"rows\":25}],\"cols\":12}",
                 &c) == 0);
    CHECK(download(&s, &c, 2, &b1, &n1) == 200);
    snprintf(seed, sizeof seed, "%s/seeds/%s.seed", s.data, c.id);
    CHECK_MSG(mode_of(seed) == 0600, "seed file mode %o", (unsigned)mode_of(seed));
    CHECK_MSG(mode_of(s.data) == 0700, "data dir mode %o", (unsigned)mode_of(s.data));
    {
        char seeds[PATH_MAX + 16];
        char db[PATH_MAX + 16];
        snprintf(seeds, sizeof seeds, "%s/seeds", s.data);
        snprintf(db, sizeof db, "%s/masking.db", s.data);
        CHECK(mode_of(seeds) == 0700);
        CHECK(mode_of(db) == 0600);
    }
    CHECK(server_stop(&s, SIGTERM) == 0);

    CHECK(server_start(&s) == 0);
    CHECK(download(&s, &c, 2, &b2, &n2) == 200);
    CHECK_MSG(b1 != NULL && b2 != NULL && n1 == n2 && memcmp(b1, b2, n1) == 0,
              "keys after a restart differ (%zu vs %zu bytes)", n1, n2);
    snprintf(path, sizeof path, "/v1/masksets/%s", c.id);
    j = call_json(&s, ADMIN_TOKEN, "GET", path, NULL, &st);
    CHECK(st == 200 && j != NULL);
    CHECK(j != NULL && json_integer_value(json_object_get(
                           json_array_get(json_object_get(j, "parties"), 1), "downloads")) == 2);
    CHECK(j != NULL && json_integer_value(json_object_get(
                           json_array_get(json_object_get(j, "parties"), 0), "downloads")) == 0);
    json_decref(j);

    /* a second mask set for the same job: 409 while the first is active */
    CHECK(call(&s, ADMIN_TOKEN, "POST", "/v1/masksets",
               "{\"job_id\":\"j-restart\",\"partition\":\"samples\",\"parties\":[{\"party\":1,"
               "\"rows\":3,\"identity\":"
               "\"79b5562e8fe654f94078b112e8a98ba7901f853ae695bed7e0e3910bad049664\"}],\"cols\":2}",
               NULL, NULL) == 409);

    j = call_json(&s, ADMIN_TOKEN, "DELETE", path, NULL, &st);
    CHECK(st == 200 && j != NULL &&
          strcmp(json_string_value(json_object_get(j, "state")), "deleted") == 0 &&
          json_is_string(json_object_get(j, "deleted_at")));
    json_decref(j);
    CHECK_MSG(access(seed, F_OK) != 0, "seed file still there after DELETE");
    CHECK(download(&s, &c, 2, NULL, NULL) == 410);
    CHECK(download(&s, &c, 1, NULL, NULL) == 410);
    CHECK(call(&s, ADMIN_TOKEN, "DELETE", path, NULL, NULL, NULL) == 200);
    /* now the job may get a new mask set, with new masks */
    CHECK(create(&s,
                 "{\"job_id\":\"j-restart\",\"partition\":\"samples\",\"parties\":[{\"party\":1,"
                 "\"rows\":30},{\"party\":2,\"rows\":25}],\"cols\":12}",
                 &c2) == 0);
    {
        char *b3 = NULL;
        size_t n3 = 0;
        CHECK(download(&s, &c2, 2, &b3, &n3) == 200);
        CHECK(b3 != NULL && b1 != NULL && n3 == n1 && memcmp(b3, b1, n1) != 0);
        fs_fedsvd_wipe_free(b3, n3);
    }
    /* the old identities do not open the new set */
    {
        struct created mix = c2;
        memcpy(mix.sk[2], c.sk[2], sizeof mix.sk[2]);
        CHECK(download(&s, &mix, 2, NULL, NULL) == 401);
    }
    CHECK(server_stop(&s, SIGTERM) == 0);
    /* restart after the delete: still deleted, the new one still active */
    CHECK(server_start(&s) == 0);
    CHECK(download(&s, &c, 2, NULL, NULL) == 410);
    CHECK(download(&s, &c2, 1, NULL, NULL) == 200);
    CHECK(server_stop(&s, SIGTERM) == 0);
    fs_fedsvd_wipe_free(b1, n1);
    fs_fedsvd_wipe_free(b2, n2);
}

/*
 * The server's block cache (keygen.h): with blocks of 350 and parties of 300,
 * 300 and 100 rows, the blocks are shared by neighbouring parties (party 2
 * covers the end of block 0 and the start of block 1). Asked for in the order
 * 2, 1, 3 (party 2 leaves both blocks in the cache, 1 and 3 reuse them) and,
 * after a restart (empty cache), 1, 3, 2 (party 2 reuses what 1 and 3 left),
 * every party's manifest (keys_id, each file's SHA-256) is the same, and the
 * slabs stack to an orthogonal A.
 */
/*
 * A party's identity fetches its own keys and nothing else; no bearer token
 * (the admin's, the end token) fetches any; the end token deletes the mask
 * set (seed destroyed, keys 410) and cannot do anything else.
 */
static void test_identities_and_end_token(void)
{
    struct server s;
    struct created c;
    struct created wrong;
    char seed[PATH_MAX + 128];
    char path[200];
    char hdr[FS_REQSIG_HEADER_MAX];
    struct fs_err err = {0};
    long st = 0;
    json_t *j = NULL;

    if (!g_have_bin) {
        return;
    }
    server_init(&s, "ident");
    CHECK(server_start(&s) == 0);
    CHECK(create(&s,
                 "{\"job_id\":\"j-ident\",\"partition\":\"samples\",\"parties\":[{\"party\":1,"
                 "\"rows\":20},{\"party\":2,\"rows\":15}],\"cols\":6}",
                 &c) == 0);
    CHECK(download(&s, &c, 1, NULL, NULL) == 200);
    CHECK(download(&s, &c, 2, NULL, NULL) == 200);
    /* party 1's key on party 2's keys: claimed as party 2 (does not verify) or as itself */
    wrong = c;
    memcpy(wrong.sk[2], c.sk[1], sizeof wrong.sk[2]);
    CHECK(download(&s, &wrong, 2, NULL, NULL) == 401);
    snprintf(path, sizeof path, "/v1/masksets/%s/parties/2/keys", c.id);
    CHECK_OK(fs_reqsig_sign(c.sk[1], "GET", path, c.id, 1, (int64_t)time(NULL), NULL, hdr, &err),
             &err);
    CHECK(call_auth(&s, NULL, hdr, "GET", path, NULL, NULL, NULL) == 403);
    /* a stale signature */
    CHECK_OK(
        fs_reqsig_sign(c.sk[2], "GET", path, c.id, 2, (int64_t)time(NULL) - 3600, NULL, hdr, &err),
        &err);
    CHECK(call_auth(&s, NULL, hdr, "GET", path, NULL, NULL, NULL) == 401);
    /* bearer tokens: 403 */
    CHECK(call(&s, ADMIN_TOKEN, "GET", path, NULL, NULL, NULL) == 403);
    CHECK(call(&s, c.end_token, "GET", path, NULL, NULL, NULL) == 403);
    /* the end route: only the end token */
    snprintf(path, sizeof path, "/v1/masksets/%s/end", c.id);
    CHECK(call(&s, ADMIN_TOKEN, "POST", path, NULL, NULL, NULL) == 401);
    CHECK(call(&s, NULL, "POST", path, NULL, NULL, NULL) == 401);
    snprintf(seed, sizeof seed, "%s/seeds/%s.seed", s.data, c.id);
    CHECK(access(seed, F_OK) == 0);
    j = call_json(&s, c.end_token, "POST", path, NULL, &st);
    CHECK(st == 200 && j != NULL &&
          strcmp(json_string_value(json_object_get(j, "state")), "deleted") == 0);
    json_decref(j);
    CHECK_MSG(access(seed, F_OK) != 0, "seed file still there after the end call");
    CHECK(download(&s, &c, 1, NULL, NULL) == 410);
    CHECK(download(&s, &c, 2, NULL, NULL) == 410);
    CHECK(call(&s, c.end_token, "POST", path, NULL, NULL, NULL) == 200); /* idempotent */
    CHECK(server_stop(&s, SIGTERM) == 0);
}

static void test_block_cache_same_keys(void)
{
    static const uint32_t order[2][3] = {{2, 1, 3}, {1, 3, 2}};
    struct server s;
    struct created c;
    struct fs_fedsvd_keys *keys[MAXP + 1] = {0};
    char *man[2][4] = {{NULL}};
    size_t len[2][4] = {{0}};

    if (!g_have_bin) {
        return;
    }
    server_init(&s, "cache");
    CHECK(server_start(&s) == 0);
    CHECK(create(&s,
                 "{\"job_id\":\"j-cache\",\"partition\":\"samples\",\"parties\":[{\"party\":1,"
                 "\"rows\":300},{\"party\":2,\"rows\":300},{\"party\":3,\"rows\":100}],"
                 "\"cols\":6,\"block_size\":{\"partitioned\":350,\"shared\":6}}",
                 &c) == 0);
    for (int run = 0; run < 2; run++) {
        if (run == 1) {
            CHECK(server_stop(&s, SIGTERM) == 0);
            CHECK(server_start(&s) == 0);
        }
        for (int i = 0; i < 3; i++) {
            uint32_t p = order[run][i];
            CHECK(download(&s, &c, p, &man[run][p], &len[run][p]) == 200);
        }
        {
            /* 4 blocks needed (2 by party 2): the second party in each of the 2 blocks hits */
            char *text = NULL;
            size_t tlen = 0;
            CHECK(call(&s, NULL, "GET", "/metrics", NULL, &text, &tlen) == 200);
            CHECK_MSG(
                text != NULL &&
                    strstr(text, "fedsvd_mask_block_cache_total{result=\"hit\"} 2\n") != NULL &&
                    strstr(text, "fedsvd_mask_block_cache_total{result=\"miss\"} 2\n") != NULL &&
                    strstr(text, "fedsvd_mask_block_cache_bytes 0\n") != NULL,
                "run %d: block cache metrics", run);
            free(text);
        }
    }
    for (uint32_t p = 1; p <= 3; p++) {
        CHECK_MSG(man[0][p] != NULL && man[1][p] != NULL && len[0][p] == len[1][p] &&
                      memcmp(man[0][p], man[1][p], len[0][p]) == 0,
                  "party %u: keys differ with another order of generation", p);
    }
    if (fetch_all(&s, &c, keys) == 0) {
        check_masks(keys, 3, 700, 6, 4);
    } else {
        CHECK(0);
    }
    keys_free(keys, 3);
    for (int run = 0; run < 2; run++) {
        for (uint32_t p = 1; p <= 3; p++) {
            fs_fedsvd_wipe_free(man[run][p], len[run][p]);
        }
    }
    CHECK(server_stop(&s, SIGTERM) == 0);
}

/* A seed file left without a database row (a crash between the two steps of a create or a
 * delete) is destroyed at the next start. */
static void test_orphan_seed_swept(void)
{
    struct server s;
    char orphan[PATH_MAX + 128];
    FILE *f;

    if (!g_have_bin) {
        return;
    }
    server_init(&s, "sweep");
    CHECK(server_start(&s) == 0);
    CHECK(server_stop(&s, SIGTERM) == 0);
    snprintf(orphan, sizeof orphan, "%s/seeds/m-0123456789abcdef0123456789abcdef.seed", s.data);
    f = fopen(orphan, "w");
    CHECK(f != NULL);
    if (f != NULL) {
        fputs("0123456789abcdef0123456789abcdef", f);
        fclose(f);
    }
    CHECK(server_start(&s) == 0);
    CHECK_MSG(access(orphan, F_OK) != 0, "orphan seed file not destroyed");
    CHECK(server_stop(&s, SIGTERM) == 0);
}

int main(int argc, char **argv)
{
    char dir[2048];
    char tok[PATH_MAX + 16];
    char *slash;
    FILE *f;

    (void)argc;
    snprintf(dir, sizeof dir, "%s", argv[0]);
    slash = strrchr(dir, '/');
    if (slash != NULL) {
        *slash = '\0';
    } else {
        snprintf(dir, sizeof dir, ".");
    }
    snprintf(g_bin, sizeof g_bin, "%s/../bin/masking-server", dir);
    g_have_bin = access(g_bin, X_OK) == 0;
    if (!g_have_bin) {
        printf("note: %s not built; skipping the end-to-end cases\n", g_bin);
    }
    snprintf(g_root, sizeof g_root, "/tmp/fedsvd-masksrv-e2e-XXXXXX");
    if (mkdtemp(g_root) == NULL) {
        fprintf(stderr, "mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    snprintf(tok, sizeof tok, "%s/admin.tok", g_root);
    f = fopen(tok, "w");
    if (f != NULL) {
        fprintf(f, "%s\n", ADMIN_TOKEN);
        fclose(f);
        chmod(tok, 0600);
    }
    RUN(test_samples_one_block);
    RUN(test_several_blocks_both_partitions);
    RUN(test_fedsvd_with_served_keys);
    RUN(test_restart_and_delete);
    RUN(test_identities_and_end_token);
    RUN(test_block_cache_same_keys);
    RUN(test_orphan_seed_swept);
    if (t_failed == 0 && getenv("FS_TEST_KEEP") == NULL) {
        char cmd[PATH_MAX + 16];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_root);
        if (system(cmd) != 0) {
            fprintf(stderr, "cannot remove %s\n", g_root);
        }
    } else {
        printf("kept %s\n", g_root);
    }
    return TEST_END("test_masksrv_e2e");
}
