/* aggregation-server end to end on loopback: starts the real binary (the
 * build's bin/aggregation-server, found next to this test's directory) and
 * plays the parties in this process with lib/proto's SecAgg client and
 * lib/net's HTTP client, following docs/wire-secure-sum.md.
 *
 * Cases: an honest 5-party job; dropouts at every round (the sum is of the
 * survivors only); an abort below threshold; kill -9 of the server in the
 * middle of the masked-input round and again during consistency, then a
 * restart that replays the event log and finishes the job; a SIGTERM
 * restart (exit status 0); and the error replies (401, 403, 400, 409,
 * 413, 415, 422).
 *
 * If the server binary is not built, every case is skipped (and counted as
 * passed with a note): `make all tests` builds both. */
#include "crypto/ed25519.h"
#include "crypto/rand.h"
#include "io/matio.h"
#include "jobs.h"
#include "la/fixedpt.h"
#include "la/mat.h"
#include "net/http_client.h"
#include "proto/secagg.h"
#include "test.h"
#include "wire.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ADMIN_TOKEN "e2e-admin-token-0123456789abcdef"
#define MAXP        8

#include "test_aggsrv_util.h"

/* ------------------------------------------------------------ parties */

enum stop_at { GO = 0, NO_ADV, NO_SHARES, MID_UPLOAD, NO_UPLOAD, NO_SIG, NO_UNMASK };

struct party {
    uint32_t id;
    fs_httpc *h;
    char token[FS_AUTH_TOKEN_MAX + 1];
    fs_secagg_client *c;
    double *x;      /* rows x cols, column-major */
    uint64_t *seen; /* every word this party PUT to the server, as sent */
    enum stop_at stop;
    int out;       /* stopped for good */
    uint64_t sent; /* chunks uploaded */
    int has_sig;
    uint8_t sig[64];
    json_t *adv_body;    /* the last advertisement, shares and chunk it sent */
    json_t *shares_body; /* (to repeat them: test_resend_after_close) */
    uint8_t *last_chunk;
    size_t last_chunk_len;
    char last_chunk_path[200];
};

struct job {
    struct server *srv;
    fs_httpc *admin;
    char id[FS_JOB_ID_MAX + 1];
    char path[128];
    uint32_t n, t;
    uint64_t rows, cols, len;
    struct fs_secagg_config cfg;
    struct party p[MAXP + 1];
    struct fs_fixedpt fp;
    uint64_t cw;
    uint64_t nchunks;
    uint32_t dribble; /* this party PUTs its chunks in small pieces (put_dribbled) */
};

static void job_free(struct job *j)
{
    for (uint32_t v = 1; v <= j->n; v++) {
        fs_httpc_free(j->p[v].h);
        fs_secagg_client_free(j->p[v].c);
        free(j->p[v].x);
        free(j->p[v].seen);
        json_decref(j->p[v].adv_body);
        json_decref(j->p[v].shares_body);
        free(j->p[v].last_chunk);
    }
    fs_httpc_free(j->admin);
    memset(j, 0, sizeof *j);
}

/* Reconnect every client to the (restarted) server. */
static void job_reconnect(struct job *j)
{
    fs_httpc_free(j->admin);
    j->admin = client(j->srv, ADMIN_TOKEN);
    for (uint32_t v = 1; v <= j->n; v++) {
        fs_httpc_free(j->p[v].h);
        j->p[v].h = client(j->srv, j->p[v].token);
    }
}

/* The party whose pin job_create replaces by another key (0: none). */
static uint32_t g_mispin;

/* Every job pins its parties' identities (party_keys): the keys the parties
 * of this process generate, except g_mispin's. */
static int job_create(struct job *j, struct server *s, uint32_t n, uint32_t t, uint64_t rows,
                      uint64_t cols, int timeout_s)
{
    struct fs_err err = {0};
    uint8_t sks[MAXP + 1][32];
    uint8_t pins[MAXP][32];
    json_t *spec;
    json_t *out = NULL;
    json_t *invs;
    long st;

    memset(j, 0, sizeof *j);
    j->srv = s;
    j->n = n;
    j->t = t;
    j->rows = rows;
    j->cols = cols;
    j->len = rows * cols;
    j->admin = client(s, ADMIN_TOKEN);
    for (uint32_t v = 1; v <= n; v++) {
        CHECK_OK(fs_ed25519_keygen(sks[v], pins[v - 1], &err), &err);
        if (v == g_mispin) {
            uint8_t other[32];
            CHECK_OK(fs_ed25519_keygen(other, pins[v - 1], &err), &err);
        }
    }
    /* the join phase closes at the round timeout too: the dropout cases
     * include a party that never advertises */
    spec =
        json_pack("{s:s, s:s, s:i, s:i, s:[I, I], s:i, s:i, s:o}", "algorithm", "secure-sum",
                  "name", "e2e", "parties", (int)n, "threshold", (int)t, "shape", (json_int_t)rows,
                  (json_int_t)cols, "round_timeout_s", timeout_s, "join_timeout_s", timeout_s,
                  "party_keys", fs_job_party_keys_encode((const uint8_t(*)[32])pins, n));
    if (t < n / 2 + 1) {
        /* the dropout and abort cases keep fewer than a majority on purpose */
        json_object_set_new(spec, "allow_low_threshold", json_true());
    }
    st = call_json(j->admin, "POST", "/v1/jobs", spec, &out);
    json_decref(spec);
    CHECK_MSG(st == 201, "create: %ld %s", st, pcode(out));
    if (st != 201) {
        json_decref(out);
        return -1;
    }
    snprintf(j->id, sizeof j->id, "%s",
             json_string_value(json_object_get(json_object_get(out, "job"), "id")));
    snprintf(j->path, sizeof j->path, "/v1/jobs/%s", j->id);
    j->cw =
        (uint64_t)json_integer_value(json_object_get(json_object_get(out, "job"), "chunk_words"));
    invs = json_object_get(out, "invitations");
    CHECK(json_array_size(invs) == n);
    j->cfg.n = n;
    j->cfg.t = t;
    j->cfg.aggregations = 1;
    j->cfg.chunk_words = (uint32_t)j->cw;
    CHECK_OK(fs_wire_secagg_job_id(j->id, j->cfg.job_id, &err), &err);
    for (uint32_t v = 1; v <= n; v++) {
        struct fs_invitation inv;
        struct party *p = &j->p[v];
        CHECK_OK(fs_invitation_decode(json_array_get(invs, v - 1), &inv, &err), &err);
        CHECK(inv.party == v);
        /* every invitation carries the pins of every party */
        CHECK(inv.has_pins && memcmp(inv.party_keys, pins, (size_t)n * 32) == 0);
        snprintf(p->token, sizeof p->token, "%s", inv.token);
        fs_invitation_wipe(&inv);
        p->id = v;
        p->h = client(s, p->token);
        CHECK_OK(fs_secagg_client_new(&j->cfg, v, sks[v], &p->c, &err), &err);
        p->x = malloc(j->len * sizeof *p->x);
        p->seen = calloc(j->len, sizeof *p->seen);
        for (uint64_t i = 0; i < j->len; i++) {
            uint64_t r = 0;
            CHECK_OK(fs_rand_below(2000001, &r, &err), &err);
            /* mixed magnitudes per party: ~1e-3 .. 1e3 */
            p->x[i] = ((double)r - 1000000.0) / 1000.0 * (v % 2 == 0 ? 1e-3 : 1.0);
        }
    }
    json_decref(out);
    return 0;
}

static const char *job_phase(struct job *j, json_t **status)
{
    static char ph[32];
    json_t *out = NULL;
    long st = call_json(j->admin, "GET", j->path, NULL, &out);

    ph[0] = '\0';
    if (st == 200) {
        snprintf(ph, sizeof ph, "%s", json_string_value(json_object_get(out, "phase")));
    }
    if (status != NULL) {
        *status = out;
    } else {
        json_decref(out);
    }
    return ph;
}

/* Wait until the phase is one of the '|'-separated names (or failed/done). */
static int wait_phase(struct job *j, const char *want, int timeout_ms)
{
    for (int waited = 0; waited < timeout_ms; waited += 20) {
        const char *ph = job_phase(j, NULL);
        char key[40];
        snprintf(key, sizeof key, "|%s|", ph);
        if (ph[0] != '\0') {
            char list[200];
            snprintf(list, sizeof list, "|%s|", want);
            if (strstr(list, key) != NULL) {
                return 0;
            }
            if (strcmp(ph, "failed") == 0 || strcmp(ph, "done") == 0) {
                return -1;
            }
        }
        sleep_ms(20);
    }
    fprintf(stderr, "  timeout waiting for %s (phase %s)\n", want, job_phase(j, NULL));
    return -1;
}

static void do_adverts(struct job *j)
{
    struct fs_err err = {0};

    for (uint32_t v = 1; v <= j->n; v++) {
        struct party *p = &j->p[v];
        struct fs_secagg_adv a;
        int e = 0;
        int has = 0;
        json_t *body;
        json_t *out = NULL;
        long st;
        if (p->stop == NO_ADV) {
            p->out = 1;
            continue;
        }
        for (uint64_t i = 0; i < j->len; i++) {
            int ei;
            if (p->x[i] != 0.0) {
                (void)frexp(p->x[i], &ei);
                if (!has || ei > e) {
                    e = ei;
                    has = 1;
                }
            }
        }
        CHECK_OK(fs_secagg_client_advertise(p->c, &a, &err), &err);
        body = fs_wire_adv_encode(&a, has, e);
        {
            char path[160];
            snprintf(path, sizeof path, "%s/keys", j->path);
            st = call_json(p->h, "POST", path, body, &out);
            CHECK_MSG(st == 202, "advert %u: %ld %s", v, st, pcode(out));
            json_decref(out);
            /* idempotent (409 once the last advert closed the round) */
            st = call_json(p->h, "POST", path, body, &out);
            CHECK_MSG(st == 202, "repeat advert %u: %ld %s", v, st, pcode(out));
            json_decref(out);
        }
        json_decref(p->adv_body);
        p->adv_body = body;
    }
}

static void do_shares(struct job *j)
{
    struct fs_err err = {0};
    char path[160];
    json_t *out = NULL;
    struct fs_secagg_adv *roster = NULL;
    size_t k = 0;
    long st;

    snprintf(path, sizeof path, "%s/keys", j->path);
    st = call_json(j->admin, "GET", path, NULL, &out);
    CHECK(st == 200);
    CHECK_OK(fs_wire_roster_decode(out, j->n, &roster, &k, &err), &err);
    json_decref(out);
    snprintf(path, sizeof path, "%s/shares", j->path);
    for (uint32_t v = 1; v <= j->n; v++) {
        struct party *p = &j->p[v];
        struct fs_secagg_share_ct *cts = NULL;
        const struct fs_secagg_share_ct **ptrs;
        size_t nct = 0;
        json_t *body;
        if (p->out) {
            continue;
        }
        CHECK_OK(fs_secagg_client_share_keys(p->c, roster, k, &cts, &nct, &err), &err);
        if (p->stop == NO_SHARES) {
            p->out = 1;
            fs_secagg_share_cts_free(cts, nct);
            continue;
        }
        ptrs = calloc(nct + 1, sizeof *ptrs);
        for (size_t i = 0; i < nct; i++) {
            ptrs[i] = &cts[i];
        }
        body = fs_wire_shares_encode(ptrs, nct, 0);
        st = call_json(p->h, "POST", path, body, &out);
        CHECK_MSG(st == 202, "shares %u: %ld %s", v, st, pcode(out));
        json_decref(out);
        json_decref(p->shares_body);
        p->shares_body = body;
        free(ptrs);
        fs_secagg_share_cts_free(cts, nct);
    }
    free(roster);
}

/* R1 end and R2 begin: receive shares, read the aggregation, begin. */
static void do_receive(struct job *j)
{
    struct fs_err err = {0};
    char path[160];
    json_t *agg = NULL;
    uint32_t *active = NULL;
    size_t na = 0;

    snprintf(path, sizeof path, "%s/aggregations/0", j->path);
    {
        /* The job shows masked_input a moment before the aggregation document
         * exists; 409 not_ready means "poll again" (docs/wire-secure-sum.md). */
        long st = 0;
        for (int tries = 0; tries < 200; tries++) {
            json_decref(agg);
            agg = NULL;
            st = call_json(j->admin, "GET", path, NULL, &agg);
            if (st != 409 || strcmp(pcode(agg), "not_ready") != 0) {
                break;
            }
            sleep_ms(50);
        }
        CHECK_MSG(st == 200, "GET %s: %ld %s", path, st, pcode(agg));
    }
    j->fp.bound = json_number_value(json_object_get(agg, "bound"));
    j->fp.frac_bits = (int)json_integer_value(json_object_get(agg, "frac_bits"));
    j->fp.summands = (unsigned)json_integer_value(json_object_get(agg, "summands"));
    j->nchunks = (uint64_t)json_integer_value(json_object_get(agg, "chunks"));
    CHECK((uint64_t)json_integer_value(json_object_get(agg, "length")) == j->len);
    CHECK_OK(fs_wire_ids_decode(json_object_get(agg, "active"), j->n, &active, &na, &err), &err);
    json_decref(agg);
    for (uint32_t v = 1; v <= j->n; v++) {
        struct party *p = &j->p[v];
        struct fs_secagg_share_ct *cts = NULL;
        size_t k = 0;
        json_t *out = NULL;
        if (p->out) {
            continue;
        }
        snprintf(path, sizeof path, "%s/shares", j->path);
        CHECK(call_json(p->h, "GET", path, NULL, &out) == 200);
        CHECK_OK(
            fs_wire_shares_decode(out, 1, v, fs_secagg_share_ct_len(&j->cfg), j->n, &cts, &k, &err),
            &err);
        json_decref(out);
        CHECK_OK(fs_secagg_client_receive_shares(p->c, cts, k, &err), &err);
        fs_secagg_share_cts_free(cts, k);
        CHECK_OK(fs_secagg_client_begin(p->c, 0, j->len, active, na, &err), &err);
    }
    free(active);
}

/* Upload chunks [from, to) of party v. */
/* A raw connection to the server with `head` (a request head) already sent:
 * the socket, or -1. */
static int raw_request(const struct job *j, const char *head)
{
    struct sockaddr_in sa;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    if (fd < 0) {
        return -1;
    }
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons(j->srv->port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        write(fd, head, strlen(head)) != (ssize_t)strlen(head)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* PUT body on a raw socket in small pieces a few ms apart (TCP_NODELAY), so
 * that the server gets the .npy header split over several reads and the
 * words in pieces that do not fall on word boundaries. @return the status. */
static long put_dribbled(struct job *j, struct party *p, const char *path, const uint8_t *body,
                         size_t len)
{
    static const size_t sizes[] = {3, 7, 1, 40, 13, 2, 100, 5};
    char head[1024];
    char resp[512] = {0};
    size_t off = 0;
    size_t got = 0;
    long st = -1;
    int one = 1;
    int fd;

    snprintf(head, sizeof head,
             "PUT %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n"
             "Content-Type: application/x-npy\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
             path, p->token, len);
    if ((fd = raw_request(j, head)) < 0) {
        return -1;
    }
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    for (size_t k = 0; off < len; k++) {
        size_t n = sizes[k % (sizeof sizes / sizeof sizes[0])];
        if (n > len - off) {
            n = len - off;
        }
        if (write(fd, body + off, n) != (ssize_t)n) {
            break;
        }
        off += n;
        sleep_ms(2);
    }
    while (got < sizeof resp - 1) {
        ssize_t r = read(fd, resp + got, sizeof resp - 1 - got);
        if (r <= 0) {
            break;
        }
        got += (size_t)r;
    }
    close(fd);
    if (sscanf(resp, "HTTP/1.1 %ld", &st) != 1) {
        st = -1;
    }
    return st;
}

/* GET the job as party p on a connection of its own, without asking for
 * a close: 1 when the server answered "Connection: close" and closed the
 * connection after the response, 0 when it keeps it open, -1 on an error. */
static int get_closes(struct job *j, struct party *p)
{
    struct timeval tv = {5, 0};
    char head[1024];
    char resp[16384];
    size_t got = 0;
    int fd;
    int closes = -1;

    resp[0] = '\0';
    snprintf(head, sizeof head,
             "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n\r\n", j->path,
             p->token);
    if ((fd = raw_request(j, head)) < 0) {
        return -1;
    }
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    while (got < sizeof resp - 1 && strstr(resp, "\r\n\r\n") == NULL) {
        ssize_t r = read(fd, resp + got, sizeof resp - 1 - got);
        if (r <= 0) {
            break;
        }
        got += (size_t)r;
        resp[got] = '\0';
    }
    if (strncmp(resp, "HTTP/1.1 200", 12) == 0 && strstr(resp, "\r\n\r\n") != NULL) {
        char *hend = strstr(resp, "\r\n\r\n");
        *hend = '\0';
        for (char *c = resp; *c != '\0'; c++) {
            *c = (char)tolower((unsigned char)*c);
        }
        closes = strstr(resp, "\r\nconnection: close") != NULL;
        if (closes) {
            /* the rest of the body, then the end of the stream */
            char buf[4096];
            ssize_t r;
            while ((r = read(fd, buf, sizeof buf)) > 0) {
            }
            closes = r == 0 ? 1 : -1;
        }
    }
    close(fd);
    return closes;
}

static void upload(struct job *j, struct party *p, uint64_t from, uint64_t to)
{
    struct fs_err err = {0};
    uint64_t *ring = malloc(j->len * sizeof *ring);

    CHECK_OK(fs_fixedpt_encode(&j->fp, p->x, ring, j->len, &err), &err);
    for (uint64_t c = from; c < to && c < j->nchunks; c++) {
        uint64_t off = c * j->cw;
        size_t m = (size_t)(j->len - off < j->cw ? j->len - off : j->cw);
        struct fs_npy_header h = {FS_NPY_U8, 0, 1, {m, 1}, 0};
        uint8_t *body = malloc(256 + 8 * m);
        uint64_t *y = malloc(m * sizeof *y);
        size_t hl = 0;
        char path[200];
        json_t *out = NULL;
        long st;
        CHECK_OK(fs_secagg_client_mask(p->c, off, ring + off, y, m, &err), &err);
        CHECK_OK(fs_npy_format_header(&h, body, 256, &hl, &err), &err);
        memcpy(p->seen + off, y, m * sizeof *y);
        for (size_t i = 0; i < m; i++) {
            for (int b = 0; b < 8; b++) {
                body[hl + 8 * i + (size_t)b] = (uint8_t)(y[i] >> (8 * b));
            }
        }
        snprintf(path, sizeof path, "%s/aggregations/0/masked/%llu", j->path,
                 (unsigned long long)c);
        if (p->id == j->dribble) {
            st = put_dribbled(j, p, path, body, hl + 8 * m);
        } else {
            st = call(p->h, "PUT", path, "application/x-npy", body, hl + 8 * m, &out);
        }
        CHECK_MSG(st == 204, "chunk %llu of %u: %ld %s", (unsigned long long)c, p->id, st,
                  pcode(out));
        json_decref(out);
        p->sent = c + 1;
        free(p->last_chunk);
        p->last_chunk = body;
        p->last_chunk_len = hl + 8 * m;
        snprintf(p->last_chunk_path, sizeof p->last_chunk_path, "%s", path);
        free(y);
    }
    free(ring);
}

static void do_uploads(struct job *j, uint64_t upto)
{
    for (uint32_t v = 1; v <= j->n; v++) {
        struct party *p = &j->p[v];
        if (p->out || p->stop == NO_UPLOAD) {
            p->out = p->out || p->stop == NO_UPLOAD;
            continue;
        }
        upload(j, p, p->sent, p->stop == MID_UPLOAD ? 1 : upto);
        if (p->stop == MID_UPLOAD) {
            p->out = 1;
        }
    }
}

static void do_consistency(struct job *j)
{
    struct fs_err err = {0};
    char path[160];
    json_t *agg = NULL;
    uint32_t *u3 = NULL;
    size_t n3 = 0;

    snprintf(path, sizeof path, "%s/aggregations/0", j->path);
    {
        /* The job shows masked_input a moment before the aggregation document
         * exists; 409 not_ready means "poll again" (docs/wire-secure-sum.md). */
        long st = 0;
        for (int tries = 0; tries < 200; tries++) {
            json_decref(agg);
            agg = NULL;
            st = call_json(j->admin, "GET", path, NULL, &agg);
            if (st != 409 || strcmp(pcode(agg), "not_ready") != 0) {
                break;
            }
            sleep_ms(50);
        }
        CHECK_MSG(st == 200, "GET %s: %ld %s", path, st, pcode(agg));
    }
    CHECK_OK(fs_wire_ids_decode(json_object_get(agg, "survivors"), j->n, &u3, &n3, &err), &err);
    json_decref(agg);
    snprintf(path, sizeof path, "%s/aggregations/0/consistency", j->path);
    for (uint32_t v = 1; v <= j->n; v++) {
        struct party *p = &j->p[v];
        uint8_t sig[64];
        json_t *body;
        json_t *out = NULL;
        long st;
        if (p->out) {
            continue;
        }
        if (p->stop == NO_SIG) {
            p->out = 1;
            continue;
        }
        if (p->has_sig) {
            memcpy(sig, p->sig, sizeof sig); /* a repeat */
        } else {
            CHECK_OK(fs_secagg_client_consistency(p->c, u3, n3, sig, &err), &err);
            memcpy(p->sig, sig, sizeof sig);
            p->has_sig = 1;
        }
        body = fs_wire_sig_encode(sig);
        st = call_json(p->h, "POST", path, body, &out);
        CHECK_MSG(st == 204, "consistency %u: %ld %s", v, st, pcode(out));
        json_decref(out);
        json_decref(body);
    }
    free(u3);
}

static void do_unmask(struct job *j)
{
    struct fs_err err = {0};
    char path[160];
    json_t *agg = NULL;
    uint32_t *ids = NULL;
    uint8_t(*sigs)[64] = NULL;
    size_t k = 0;

    snprintf(path, sizeof path, "%s/aggregations/0", j->path);
    {
        /* The job shows masked_input a moment before the aggregation document
         * exists; 409 not_ready means "poll again" (docs/wire-secure-sum.md). */
        long st = 0;
        for (int tries = 0; tries < 200; tries++) {
            json_decref(agg);
            agg = NULL;
            st = call_json(j->admin, "GET", path, NULL, &agg);
            if (st != 409 || strcmp(pcode(agg), "not_ready") != 0) {
                break;
            }
            sleep_ms(50);
        }
        CHECK_MSG(st == 200, "GET %s: %ld %s", path, st, pcode(agg));
    }
    CHECK_OK(fs_wire_sigs_decode(json_object_get(agg, "signatures"), j->n, &ids, &sigs, &k, &err),
             &err);
    json_decref(agg);
    snprintf(path, sizeof path, "%s/aggregations/0/unmask", j->path);
    for (uint32_t v = 1; v <= j->n; v++) {
        struct party *p = &j->p[v];
        struct fs_secagg_reveal *rv = NULL;
        size_t nrv = 0;
        json_t *body;
        json_t *out = NULL;
        long st;
        if (p->out) {
            continue;
        }
        if (p->stop == NO_UNMASK) {
            p->out = 1;
            continue;
        }
        CHECK_OK(fs_secagg_client_unmask(p->c, ids, (const uint8_t(*)[64])sigs, k, &rv, &nrv, &err),
                 &err);
        body = fs_wire_reveals_encode(rv, nrv);
        st = call_json(p->h, "POST", path, body, &out);
        CHECK_MSG(st == 204, "unmask %u: %ld %s", v, st, pcode(out));
        json_decref(out);
        json_decref(body);
        free(rv);
    }
    free(ids);
    free(sigs);
}

/* Fetch the result and compare with the sum of the survivors' matrices. */
static void check_result(struct job *j, const uint8_t *contributed)
{
    struct fs_err err = {0};
    char path[200];
    char file[PATH_MAX + 32];
    json_t *res = NULL;
    fs_mat *m = NULL;
    double maxabs = 0;
    double maxerr = 0;
    long st;

    snprintf(path, sizeof path, "%s/result", j->path);
    st = call_json(j->p[1].h, "GET", path, NULL, &res);
    CHECK_MSG(st == 200, "result: %ld %s", st, pcode(res));
    CHECK(json_array_size(json_object_get(res, "files")) == 1);
    json_decref(res);
    snprintf(path, sizeof path, "%s/result/sum.npy", j->path);
    snprintf(file, sizeof file, "%s/sum-%s.npy", g_root, j->id);
    CHECK_OK(fs_httpc_download(j->admin, path, file, NULL, &err), &err);
    CHECK_OK(fs_io_load_dense(file, FS_FMT_NPY, NULL, &m, &err), &err);
    if (m == NULL) {
        return;
    }
    CHECK(m->rows == j->rows && m->cols == j->cols);
    for (uint64_t i = 0; i < j->len; i++) {
        double want = 0;
        for (uint32_t v = 1; v <= j->n; v++) {
            if (contributed[v]) {
                want += j->p[v].x[i];
            }
        }
        if (fabs(want) > maxabs) {
            maxabs = fabs(want);
        }
        {
            double got = FS_MAT_AT(m, i % j->rows, i / j->rows);
            if (fabs(got - want) > maxerr) {
                maxerr = fabs(got - want);
            }
        }
    }
    CHECK_MSG(maxerr <= 1e-12 * maxabs, "max error %g of max %g", maxerr, maxabs);
    fs_mat_free(m);
}

/* R0 and R1 for every party, then each fetches its shares: masked input is open. */
static void to_masked_input(struct job *j)
{
    do_adverts(j);
    CHECK(wait_phase(j, "share_keys", 10000) == 0);
    do_shares(j);
    CHECK(wait_phase(j, "masked_input", 10000) == 0);
    do_receive(j);
}

/* After the uploads: R3 and R4 for every party still in, until the job is done. */
static void through_unmasking(struct job *j)
{
    CHECK(wait_phase(j, "consistency", 10000) == 0);
    do_consistency(j);
    CHECK(wait_phase(j, "unmasking", 10000) == 0);
    do_unmask(j);
    CHECK(wait_phase(j, "done", 20000) == 0 || strcmp(job_phase(j, NULL), "done") == 0);
}

static void new_server(struct server *s, const char *name)
{
    memset(s, 0, sizeof s[0]);
    snprintf(s->data, sizeof s->data, "%s/%s", g_root, name);
    snprintf(s->extra[0], sizeof s->extra[0], "--chunk-words");
    snprintf(s->extra[1], sizeof s->extra[1], "16");
    s->nextra = 2;
}

/* ------------------------------------------------------------ cases */

static void test_honest(void)
{
    struct server s;
    struct job j;
    uint8_t all[MAXP + 1];

    if (!g_have_bin) {
        return;
    }
    new_server(&s, "honest");
    CHECK(server_start(&s) == 0);
    if (job_create(&j, &s, 5, 3, 7, 5, 30) != 0) {
        server_stop(&s, SIGKILL);
        return;
    }
    /* Party 2's uploads arrive in pieces of 1 to 100 bytes (the .npy header
     * split over several reads, words split between reads): the server must
     * put the words together exactly as a whole upload for the sum to be right. */
    j.dribble = 2;
    /* A party's connection stays open before the job holds its sum and
     * closes after each answer while it does (a kept-alive connection would
     * hold its whole 64 KiB buffer beside the sum); not after the job ends. */
    CHECK(get_closes(&j, &j.p[1]) == 0);
    to_masked_input(&j);
    CHECK(get_closes(&j, &j.p[1]) == 1);
    do_uploads(&j, UINT64_MAX);
    CHECK(j.p[2].sent == j.nchunks);
    through_unmasking(&j);
    CHECK(get_closes(&j, &j.p[1]) == 0);
    memset(all, 1, sizeof all);
    check_result(&j, all);
    {
        json_t *st = NULL;
        (void)job_phase(&j, &st);
        CHECK(json_array_size(json_object_get(st, "present")) == 5);
        CHECK(json_array_size(json_object_get(st, "dropped")) == 0);
        CHECK(json_integer_value(json_object_get(st, "bytes_in")) > 0);
        CHECK(json_object_get(json_object_get(st, "timings"), "unmasking") != NULL);
        json_decref(st);
    }
    CHECK(server_stop(&s, SIGTERM) == 0);
    job_free(&j);
}

/* Pearson correlation of two equally long series. */
static double corr(const double *a, const double *b, size_t n)
{
    double sa = 0, sb = 0, saa = 0, sbb = 0, sab = 0;

    for (size_t i = 0; i < n; i++) {
        sa += a[i];
        sb += b[i];
        saa += a[i] * a[i];
        sbb += b[i] * b[i];
        sab += a[i] * b[i];
    }
    return (sab / n - (sa / n) * (sb / n)) /
           sqrt((saa / n - (sa / n) * (sa / n)) * (sbb / n - (sb / n) * (sb / n)));
}

/* What reaches the server is masked: every word a party PUT differs from its
 * fixed-point input, and neither the input values nor their encodings
 * correlate with the uploads (|r| < 5/sqrt(n), five standard errors). */
static void test_uploads_hide_inputs(void)
{
    struct server s;
    struct job j;
    uint8_t all[MAXP + 1];
    struct fs_err err = {0};

    if (!g_have_bin) {
        return;
    }
    new_server(&s, "hide");
    CHECK(server_start(&s) == 0);
    if (job_create(&j, &s, 3, 2, 100, 40, 30) != 0) {
        server_stop(&s, SIGKILL);
        return;
    }
    to_masked_input(&j);
    do_uploads(&j, UINT64_MAX);
    for (uint32_t v = 1; v <= j.n; v++) {
        struct party *p = &j.p[v];
        uint64_t *ring = malloc(j.len * sizeof *ring);
        double *enc = malloc(j.len * sizeof *enc);
        double *up = malloc(j.len * sizeof *up);
        size_t same = 0;
        double r1, r2;
        CHECK_OK(fs_fixedpt_encode(&j.fp, p->x, ring, j.len, &err), &err);
        for (uint64_t i = 0; i < j.len; i++) {
            same += ring[i] == p->seen[i];
            enc[i] = (double)(int64_t)ring[i];
            up[i] = (double)(int64_t)p->seen[i];
        }
        r1 = corr(p->x, up, j.len);
        r2 = corr(enc, up, j.len);
        CHECK_MSG(same == 0, "party %u: %zu uploaded words equal the input", v, same);
        CHECK_MSG(fabs(r1) < 5.0 / sqrt((double)j.len), "party %u: corr(x, upload) = %g", v, r1);
        CHECK_MSG(fabs(r2) < 5.0 / sqrt((double)j.len), "party %u: corr(enc, upload) = %g", v, r2);
        free(ring);
        free(enc);
        free(up);
    }
    through_unmasking(&j);
    memset(all, 1, sizeof all);
    check_result(&j, all);
    CHECK(server_stop(&s, SIGTERM) == 0);
    job_free(&j);
}

static void test_dropouts(void)
{
    struct server s;
    struct job j;
    uint8_t contrib[MAXP + 1] = {0};
    json_t *st = NULL;

    if (!g_have_bin) {
        return;
    }
    new_server(&s, "dropouts");
    CHECK(server_start(&s) == 0);
    /* 7 parties, t = 2, 1 s rounds: 2 never advertises, 3 never shares, 4 stops
     * mid-upload, 5 never uploads, 6 does not sign (its input still counts) */
    if (job_create(&j, &s, 7, 2, 9, 4, 1) != 0) {
        server_stop(&s, SIGKILL);
        return;
    }
    j.p[2].stop = NO_ADV;
    j.p[3].stop = NO_SHARES;
    j.p[4].stop = MID_UPLOAD;
    j.p[5].stop = NO_UPLOAD;
    j.p[6].stop = NO_SIG;
    to_masked_input(&j);
    do_uploads(&j, UINT64_MAX);
    through_unmasking(&j);
    contrib[1] = contrib[6] = contrib[7] = 1;
    check_result(&j, contrib);
    (void)job_phase(&j, &st);
    {
        char *d = json_dumps(json_object_get(st, "dropped"), JSON_COMPACT);
        CHECK_MSG(d != NULL && strcmp(d, "[2,3,4,5,6]") == 0, "dropped %s", d);
        free(d);
    }
    json_decref(st);
    CHECK(server_stop(&s, SIGTERM) == 0);
    job_free(&j);
}

static void test_abort_below_threshold(void)
{
    struct server s;
    struct job j;
    json_t *st = NULL;
    json_t *out = NULL;
    char path[200];

    if (!g_have_bin) {
        return;
    }
    new_server(&s, "abort");
    CHECK(server_start(&s) == 0);
    if (job_create(&j, &s, 3, 3, 2, 2, 1) != 0) {
        server_stop(&s, SIGKILL);
        return;
    }
    j.p[3].stop = NO_ADV;
    do_adverts(&j);
    CHECK(wait_phase(&j, "failed", 10000) == 0);
    (void)job_phase(&j, &st);
    CHECK(strcmp(json_string_value(json_object_get(st, "state")), "failed") == 0);
    CHECK(json_is_string(json_object_get(st, "error")));
    json_decref(st);
    snprintf(path, sizeof path, "%s/result", j.path);
    CHECK(call_json(j.p[1].h, "GET", path, NULL, &out) == 409);
    CHECK(strcmp(pcode(out), "aborted") == 0);
    json_decref(out);
    CHECK(server_stop(&s, SIGTERM) == 0);
    job_free(&j);
}

/* kill -9 mid-upload and again during consistency; the restarted server replays. */
static void test_kill_and_replay(void)
{
    struct server s;
    struct job j;
    uint8_t all[MAXP + 1];
    json_t *st = NULL;

    if (!g_have_bin) {
        return;
    }
    new_server(&s, "replay");
    CHECK(server_start(&s) == 0);
    if (job_create(&j, &s, 4, 3, 11, 6, 60) != 0) {
        server_stop(&s, SIGKILL);
        return;
    }
    to_masked_input(&j);
    do_uploads(&j, 2); /* 2 of 5 chunks each */
    CHECK(server_stop(&s, SIGKILL) == 128 + SIGKILL);
    CHECK(server_start(&s) == 0);
    job_reconnect(&j);
    CHECK(strcmp(job_phase(&j, &st), "masked_input") == 0);
    json_decref(st);
    do_uploads(&j, UINT64_MAX);
    CHECK(wait_phase(&j, "consistency", 10000) == 0);
    /* two of four sign, then the server dies */
    j.p[3].stop = j.p[4].stop = GO;
    {
        uint8_t keep3 = j.p[3].out;
        uint8_t keep4 = j.p[4].out;
        j.p[3].out = j.p[4].out = 1;
        do_consistency(&j);
        j.p[3].out = keep3;
        j.p[4].out = keep4;
    }
    CHECK(server_stop(&s, SIGKILL) == 128 + SIGKILL);
    CHECK(server_start(&s) == 0);
    job_reconnect(&j);
    CHECK(strcmp(job_phase(&j, NULL), "consistency") == 0);
    /* parties 1 and 2 repeat (idempotent), 3 and 4 sign for the first time */
    do_consistency(&j);
    CHECK(wait_phase(&j, "unmasking", 10000) == 0);
    /* a graceful restart in between */
    CHECK(server_stop(&s, SIGTERM) == 0);
    CHECK(server_start(&s) == 0);
    job_reconnect(&j);
    do_unmask(&j);
    CHECK(wait_phase(&j, "done", 20000) == 0 || strcmp(job_phase(&j, NULL), "done") == 0);
    memset(all, 1, sizeof all);
    check_result(&j, all);
    /* done jobs survive restarts too */
    CHECK(server_stop(&s, SIGKILL) == 128 + SIGKILL);
    CHECK(server_start(&s) == 0);
    job_reconnect(&j);
    CHECK(strcmp(job_phase(&j, NULL), "done") == 0);
    check_result(&j, all);
    CHECK(server_stop(&s, SIGTERM) == 0);
    job_free(&j);
}

struct up_arg {
    struct job *j;
    struct party *p;
};

static void *upload_thread(void *arg)
{
    struct up_arg *a = arg;
    upload(a->j, a->p, 0, UINT64_MAX);
    return NULL;
}

/* Many parties uploading many chunks at once (locking, folding, the log). */
static void test_concurrent(void)
{
    struct server s;
    struct job j;
    uint8_t all[MAXP + 1];
    pthread_t th[MAXP + 1];
    struct up_arg args[MAXP + 1];

    if (!g_have_bin) {
        return;
    }
    new_server(&s, "concurrent");
    CHECK(server_start(&s) == 0);
    if (job_create(&j, &s, MAXP, 5, 40, 30, 60) != 0) { /* 1200 words: 75 chunks each */
        server_stop(&s, SIGKILL);
        return;
    }
    to_masked_input(&j);
    for (uint32_t v = 1; v <= j.n; v++) {
        args[v].j = &j;
        args[v].p = &j.p[v];
        /* each thread needs its own HTTP client: they are per party already */
        CHECK(pthread_create(&th[v], NULL, upload_thread, &args[v]) == 0);
    }
    for (uint32_t v = 1; v <= j.n; v++) {
        pthread_join(th[v], NULL);
    }
    through_unmasking(&j);
    memset(all, 1, sizeof all);
    check_result(&j, all);
    CHECK(server_stop(&s, SIGTERM) == 0);
    job_free(&j);
}

/* --upload-buffer: while one chunk body is held in memory (a client that
 * sent its headers and a few bytes of a repeated chunk, on a raw socket:
 * repeats are buffered and compared whole), a second repeat that would
 * exceed the budget gets 503 (the client honours Retry-After), while a new
 * chunk streams into the sum without a buffer and is accepted; once the
 * first connection goes away the same job completes normally. */
static void test_upload_buffer(void)
{
    struct server s;
    struct job j;
    uint8_t all[MAXP + 1];
    struct sockaddr_in sa;
    char head[1024];
    json_t *out = NULL;
    long st;
    int fd;

    if (!g_have_bin) {
        return;
    }
    new_server(&s, "upbuf");
    /* chunks of 16 words: 128 + 128 bytes held per upload; 300 holds one */
    snprintf(s.extra[2], sizeof s.extra[2], "--upload-buffer");
    snprintf(s.extra[3], sizeof s.extra[3], "300");
    s.nextra = 4;
    CHECK(server_start(&s) == 0);
    if (job_create(&j, &s, 3, 2, 7, 5, 30) != 0) {
        server_stop(&s, SIGKILL);
        return;
    }
    to_masked_input(&j);
    upload(&j, &j.p[1], 0, 1);
    upload(&j, &j.p[2], 0, 1);
    fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0);
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons(s.port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
    snprintf(head, sizeof head,
             "PUT %s/aggregations/0/masked/0 HTTP/1.1\r\nHost: 127.0.0.1\r\n"
             "Authorization: Bearer %s\r\nContent-Type: application/x-npy\r\n"
             "Content-Length: 256\r\n\r\n\x93NUMPY",
             j.path, j.p[1].token);
    CHECK(write(fd, head, strlen(head)) == (ssize_t)strlen(head));
    sleep_ms(300);
    st = call(j.p[2].h, "PUT", j.p[2].last_chunk_path, "application/x-npy", j.p[2].last_chunk,
              j.p[2].last_chunk_len, &out);
    CHECK_MSG(st == 503 && strcmp(pcode(out), "unavailable") == 0, "held buffer: %ld %s", st,
              pcode(out));
    json_decref(out);
    out = NULL;
    upload(&j, &j.p[2], 1, 2); /* a new chunk: streamed, no buffer (CHECKs its 204) */
    close(fd);
    sleep_ms(300);
    do_uploads(&j, UINT64_MAX);
    through_unmasking(&j);
    memset(all, 1, sizeof all);
    check_result(&j, all);
    CHECK(server_stop(&s, SIGTERM) == 0);
    job_free(&j);
}

/* The problem detail of a call, "" if none. */
static const char *pdetail(const json_t *out)
{
    const char *d = json_string_value(json_object_get(out, "detail"));
    return d != NULL ? d : "";
}

/*
 * Lost responses: a party repeats a message after its round closed. The
 * identical bytes get the success answer again (202 for the advertisement
 * and the shares, 204 for the last chunk and the consistency signature) and
 * change nothing; other bytes stay 409 conflict. The party then goes on and
 * the sum is exact. Also: a bad consistency signature is 422 with a detail
 * that says what is wrong.
 */
static void test_resend_after_close(void)
{
    struct server s;
    struct job j;
    uint8_t all[MAXP + 1];
    char path[200];
    json_t *out = NULL;
    long st;

    if (!g_have_bin) {
        return;
    }
    new_server(&s, "resend");
    CHECK(server_start(&s) == 0);
    if (job_create(&j, &s, 3, 2, 7, 5, 30) != 0) {
        server_stop(&s, SIGKILL);
        return;
    }
    to_masked_input(&j);
    /* R0 and R1 are closed: the same advertisement and shares again */
    snprintf(path, sizeof path, "%s/keys", j.path);
    st = call_json(j.p[1].h, "POST", path, j.p[1].adv_body, &out);
    CHECK_MSG(st == 202, "advert after R0: %ld %s %s", st, pcode(out), pdetail(out));
    json_decref(out);
    {
        json_t *other = json_deep_copy(j.p[1].adv_body);
        json_object_set_new(other, "max_abs_exp", json_integer(77));
        st = call_json(j.p[1].h, "POST", path, other, &out);
        CHECK_MSG(st == 409 && strcmp(pcode(out), "conflict") == 0, "other advert: %ld %s", st,
                  pcode(out));
        json_decref(out);
        json_decref(other);
    }
    snprintf(path, sizeof path, "%s/shares", j.path);
    st = call_json(j.p[2].h, "POST", path, j.p[2].shares_body, &out);
    CHECK_MSG(st == 202, "shares after R1: %ld %s %s", st, pcode(out), pdetail(out));
    json_decref(out);
    do_uploads(&j, UINT64_MAX);
    CHECK(wait_phase(&j, "consistency", 10000) == 0);
    /* the last chunk's response was lost: the party sends it again */
    st = call(j.p[3].h, "PUT", j.p[3].last_chunk_path, "application/x-npy", j.p[3].last_chunk,
              j.p[3].last_chunk_len, &out);
    CHECK_MSG(st == 204, "last chunk after R2: %ld %s %s", st, pcode(out), pdetail(out));
    json_decref(out);
    j.p[3].last_chunk[j.p[3].last_chunk_len - 1] ^= 1;
    st = call(j.p[3].h, "PUT", j.p[3].last_chunk_path, "application/x-npy", j.p[3].last_chunk,
              j.p[3].last_chunk_len, &out);
    CHECK_MSG(st == 409 && strcmp(pcode(out), "conflict") == 0, "changed chunk: %ld %s", st,
              pcode(out));
    CHECK(strstr(pdetail(out), "is closed") != NULL);
    json_decref(out);
    j.p[3].last_chunk[j.p[3].last_chunk_len - 1] ^= 1;
    {
        /* a forged consistency signature: 422 whose detail says so */
        uint8_t bad[64];
        json_t *body;
        memset(bad, 7, sizeof bad);
        body = fs_wire_sig_encode(bad);
        snprintf(path, sizeof path, "%s/aggregations/0/consistency", j.path);
        st = call_json(j.p[1].h, "POST", path, body, &out);
        CHECK_MSG(st == 422 && strcmp(pcode(out), "invalid") == 0, "bad signature: %ld %s", st,
                  pcode(out));
        CHECK_MSG(strstr(pdetail(out), "signature") != NULL, "detail \"%s\"", pdetail(out));
        json_decref(out);
        json_decref(body);
    }
    do_consistency(&j);
    CHECK(wait_phase(&j, "unmasking", 10000) == 0);
    {
        json_t *body = fs_wire_sig_encode(j.p[1].sig);
        snprintf(path, sizeof path, "%s/aggregations/0/consistency", j.path);
        st = call_json(j.p[1].h, "POST", path, body, &out);
        CHECK_MSG(st == 204, "signature after R3: %ld %s %s", st, pcode(out), pdetail(out));
        json_decref(out);
        json_decref(body);
        j.p[1].sig[0] ^= 1;
        body = fs_wire_sig_encode(j.p[1].sig);
        st = call_json(j.p[1].h, "POST", path, body, &out);
        CHECK_MSG(st == 409 && strcmp(pcode(out), "conflict") == 0, "other signature: %ld %s", st,
                  pcode(out));
        json_decref(out);
        json_decref(body);
        j.p[1].sig[0] ^= 1;
    }
    /* the repeated chunk is still fine in R4 */
    st = call(j.p[3].h, "PUT", j.p[3].last_chunk_path, "application/x-npy", j.p[3].last_chunk,
              j.p[3].last_chunk_len, &out);
    CHECK_MSG(st == 204, "last chunk in R4: %ld %s %s", st, pcode(out), pdetail(out));
    json_decref(out);
    do_unmask(&j);
    CHECK(wait_phase(&j, "done", 20000) == 0 || strcmp(job_phase(&j, NULL), "done") == 0);
    memset(all, 1, sizeof all);
    check_result(&j, all);
    {
        json_t *stat = NULL;
        (void)job_phase(&j, &stat);
        CHECK(json_array_size(json_object_get(stat, "dropped")) == 0);
        json_decref(stat);
    }
    CHECK(server_stop(&s, SIGTERM) == 0);
    job_free(&j);
}

static void test_errors(void)
{
    struct server s;
    struct job j;
    fs_httpc *anon = NULL;
    fs_httpc *bad = NULL;
    json_t *out = NULL;
    char path[200];
    long st;

    if (!g_have_bin) {
        return;
    }
    new_server(&s, "errors");
    CHECK(server_start(&s) == 0);
    anon = client(&s, NULL);
    bad = client(&s, "not-the-admin-token-0123456789");
    CHECK(call_json(anon, "GET", "/healthz", NULL, NULL) == 200);
    CHECK(call_json(anon, "GET", "/readyz", NULL, NULL) == 200);
    CHECK(call_json(anon, "GET", "/metrics", NULL, NULL) == 200);
    CHECK(call_json(anon, "GET", "/v1/jobs", NULL, &out) == 401);
    CHECK(strcmp(pcode(out), "unauthorized") == 0);
    json_decref(out);
    CHECK(call_json(bad, "GET", "/v1/jobs", NULL, NULL) == 401);
    if (job_create(&j, &s, 3, 2, 4, 5, 30) != 0) {
        server_stop(&s, SIGKILL);
        return;
    }
    /* job spec errors */
    st = call(j.admin, "POST", "/v1/jobs", "application/json", "{", 1, &out);
    CHECK(st == 400);
    json_decref(out);
    st = call(j.admin, "POST", "/v1/jobs", "text/plain", "{}", 2, NULL);
    CHECK(st == 415);
    {
        const char *u = "{\"algorithm\":\"secure-sum\",\"parties\":3,\"shape\":[2,2],\"x\":1}";
        st = call(j.admin, "POST", "/v1/jobs", "application/json", u, strlen(u), &out);
        CHECK(st == 422 && strcmp(pcode(out), "invalid") == 0);
        json_decref(out);
    }
    /* party tokens: only their own job and party, not admin routes */
    CHECK(call_json(j.p[1].h, "GET", "/v1/jobs", NULL, NULL) == 401);
    CHECK(call_json(j.p[1].h, "GET", j.path, NULL, NULL) == 200);
    CHECK(call_json(j.p[1].h, "DELETE", j.path, NULL, NULL) == 403);
    snprintf(path, sizeof path, "%s/keys", j.path);
    {
        struct fs_err err = {0};
        struct fs_secagg_adv a;
        json_t *body;
        CHECK_OK(fs_secagg_client_advertise(j.p[2].c, &a, &err), &err);
        body = fs_wire_adv_encode(&a, 1, 3);
        CHECK(call_json(j.p[1].h, "POST", path, body, &out) == 403); /* 2's advert, 1's token */
        CHECK(strcmp(pcode(out), "forbidden") == 0);
        json_decref(out);
        CHECK(call_json(j.admin, "POST", path, body, NULL) == 403);
        /* a forged signature */
        a.sig[0] ^= 1;
        json_decref(body);
        body = fs_wire_adv_encode(&a, 1, 3);
        CHECK(call_json(j.p[2].h, "POST", path, body, &out) == 422);
        json_decref(out);
        json_decref(body);
        st = call(j.p[2].h, "POST", path, "application/json", "{\"party\":2}", 11, &out);
        CHECK(st == 400);
        json_decref(out);
    }
    CHECK(call_json(j.p[1].h, "GET", path, NULL, &out) == 409);
    CHECK(strcmp(pcode(out), "not_ready") == 0);
    json_decref(out);
    snprintf(path, sizeof path, "%s/aggregations/0/masked/0", j.path);
    st = call(j.p[1].h, "PUT", path, "application/x-npy", "xx", 2, &out);
    CHECK_MSG(st == 409 || st == 422, "%ld", st);
    json_decref(out);
    snprintf(path, sizeof path, "%s/result", j.path);
    CHECK(call_json(j.p[1].h, "GET", path, NULL, &out) == 409);
    CHECK(strcmp(pcode(out), "not_ready") == 0);
    json_decref(out);
    /* proceed to masked input and try bad chunks */
    to_masked_input(&j);
    {
        /* 20 words, chunk 16: chunk 0 has 16 words, chunk 1 has 4 */
        struct fs_err err = {0};
        struct fs_npy_header h = {FS_NPY_U8, 0, 1, {4, 1}, 0};
        uint8_t body[512];
        size_t hl = 0;
        memset(body, 0, sizeof body);
        CHECK_OK(fs_npy_format_header(&h, body, sizeof body, &hl, &err), &err);
        snprintf(path, sizeof path, "%s/aggregations/0/masked/0", j.path);
        st = call(j.p[1].h, "PUT", path, "application/x-npy", body, hl + 32, &out);
        CHECK_MSG(st == 422, "wrong shape: %ld", st); /* chunk 0 wants 16 words */
        json_decref(out);
        st = call(j.p[1].h, "PUT", path, "application/octet-stream", body, hl + 128, NULL);
        CHECK(st == 415);
        st = call(j.p[1].h, "PUT", path, "application/x-npy", body, 500, NULL);
        CHECK(st == 413);
        snprintf(path, sizeof path, "%s/aggregations/0/masked/2", j.path);
        st = call(j.p[1].h, "PUT", path, "application/x-npy", body, hl + 32, NULL);
        CHECK(st == 422); /* no chunk 2 */
        snprintf(path, sizeof path, "%s/aggregations/0/masked/1", j.path);
        st = call(j.p[1].h, "PUT", path, "application/x-npy", body, hl + 31, NULL);
        CHECK(st == 422); /* short */
        body[5] = 'X';
        st = call(j.p[1].h, "PUT", path, "application/x-npy", body, hl + 32, NULL);
        CHECK(st == 400); /* bad magic */
        body[5] = 'Y';
        st = call(j.p[1].h, "PUT", path, "application/x-npy", body, hl + 32, NULL);
        CHECK(st == 204); /* a well-formed chunk 1 (zeros) */
        st = call(j.p[1].h, "PUT", path, "application/x-npy", body, hl + 32, NULL);
        CHECK(st == 204); /* idempotent */
        body[hl] = 1;
        st = call(j.p[1].h, "PUT", path, "application/x-npy", body, hl + 32, &out);
        CHECK(st == 409 && strcmp(pcode(out), "conflict") == 0);
        json_decref(out);
        snprintf(path, sizeof path, "%s/aggregations/1", j.path);
        CHECK(call_json(j.p[1].h, "GET", path, NULL, NULL) == 404);
    }
    /* cancel */
    CHECK(call_json(j.admin, "DELETE", j.path, NULL, &out) == 200);
    CHECK(strcmp(json_string_value(json_object_get(out, "phase")), "failed") == 0);
    json_decref(out);
    snprintf(path, sizeof path, "%s/aggregations/0/consistency", j.path);
    st = call(j.p[1].h, "POST", path, "application/json", "{\"sig\":\"AA\"}", 12, &out);
    CHECK(st == 409 || st == 422);
    json_decref(out);
    {
        char m[64];
        snprintf(m, sizeof m, "/v1/jobs/j-00000000000000000000000000000000");
        CHECK(call_json(j.admin, "GET", m, NULL, NULL) == 404);
        CHECK(call_json(j.p[1].h, "GET", m, NULL, NULL) == 401);
    }
    fs_httpc_free(anon);
    fs_httpc_free(bad);
    CHECK(server_stop(&s, SIGTERM) == 0);
    job_free(&j);
}

/* Pinned identities: a job needs pins (or allow_unpinned), and an
 * advertisement signed by a key that is not its party's pin is refused with
 * 403 and not stored (the server cannot relay a substituted key). */
static void test_pins(void)
{
    static const char *const bad_specs[] = {
        /* neither party_keys nor allow_unpinned */
        "{\"algorithm\":\"secure-sum\",\"parties\":2,\"shape\":[2,2]}",
        "{\"algorithm\":\"secure-sum\",\"parties\":2,\"shape\":[2,2],\"allow_unpinned\":false}",
        /* one pin for two parties */
        "{\"algorithm\":\"secure-sum\",\"parties\":2,\"shape\":[2,2],\"party_keys\":["
        "\"00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\"]}",
        /* the same key twice */
        "{\"algorithm\":\"secure-sum\",\"parties\":2,\"shape\":[2,2],\"party_keys\":["
        "\"00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\","
        "\"00112233445566778899AABBCCDDEEFF00112233445566778899AABBCCDDEEFF\"]}",
        /* 63 digits */
        "{\"algorithm\":\"secure-sum\",\"parties\":2,\"shape\":[2,2],\"party_keys\":["
        "\"00112233445566778899aabbccddeeff00112233445566778899aabbccddeef\","
        "\"10112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\"]}",
    };
    struct server s;
    struct job j;
    json_t *out = NULL;
    char path[200];
    long st;

    if (!g_have_bin) {
        return;
    }
    new_server(&s, "pins");
    CHECK(server_start(&s) == 0);
    g_mispin = 2;
    if (job_create(&j, &s, 3, 2, 4, 5, 30) != 0) {
        g_mispin = 0;
        server_stop(&s, SIGKILL);
        return;
    }
    g_mispin = 0;
    for (size_t i = 0; i < sizeof bad_specs / sizeof bad_specs[0]; i++) {
        st = call(j.admin, "POST", "/v1/jobs", "application/json", bad_specs[i],
                  strlen(bad_specs[i]), &out);
        CHECK_MSG(st == 422 && strcmp(pcode(out), "invalid") == 0 &&
                      strstr(json_string_value(json_object_get(out, "detail")), "party_keys") !=
                          NULL,
                  "spec %zu: %ld %s", i, st, pcode(out));
        json_decref(out);
    }
    {
        const char *u = "{\"algorithm\":\"secure-sum\",\"parties\":2,\"shape\":[2,2],"
                        "\"allow_unpinned\":true}";
        st = call(j.admin, "POST", "/v1/jobs", "application/json", u, strlen(u), &out);
        CHECK_MSG(st == 201, "allow_unpinned: %ld %s", st, pcode(out));
        CHECK(json_object_get(json_array_get(json_object_get(out, "invitations"), 0),
                              "party_keys") == NULL);
        json_decref(out);
    }
    snprintf(path, sizeof path, "%s/keys", j.path);
    for (uint32_t v = 1; v <= 3; v++) {
        struct fs_err err = {0};
        struct fs_secagg_adv a;
        json_t *body;
        CHECK_OK(fs_secagg_client_advertise(j.p[v].c, &a, &err), &err);
        body = fs_wire_adv_encode(&a, 1, 3);
        st = call_json(j.p[v].h, "POST", path, body, &out);
        if (v == 2) {
            const char *d = json_string_value(json_object_get(out, "detail"));
            CHECK_MSG(st == 403 && strcmp(pcode(out), "forbidden") == 0, "party 2: %ld %s", st,
                      pcode(out));
            CHECK_MSG(d != NULL && strstr(d, "not the one pinned") != NULL, "detail: %s",
                      d != NULL ? d : "(none)");
        } else {
            CHECK_MSG(st == 202, "party %u: %ld %s", v, st, pcode(out));
        }
        json_decref(out);
        json_decref(body);
    }
    /* nothing stored for party 2: it is not present, the round still waits */
    CHECK(call_json(j.admin, "GET", j.path, NULL, &out) == 200);
    {
        const json_t *pr = json_object_get(out, "present");
        CHECK(json_array_size(pr) == 2 && json_integer_value(json_array_get(pr, 0)) == 1 &&
              json_integer_value(json_array_get(pr, 1)) == 3);
        CHECK(strcmp(json_string_value(json_object_get(out, "phase")), "waiting_for_parties") == 0);
    }
    json_decref(out);
    CHECK(server_stop(&s, SIGTERM) == 0);
    job_free(&j);
}

int main(int argc, char **argv)
{
    (void)argc;
    if (aggsrv_test_setup(argv[0], "/tmp/fedsvd-aggsrv-e2e-XXXXXX", ADMIN_TOKEN) != 0) {
        return 1;
    }
    RUN(test_honest);
    RUN(test_uploads_hide_inputs);
    RUN(test_dropouts);
    RUN(test_abort_below_threshold);
    RUN(test_kill_and_replay);
    RUN(test_concurrent);
    RUN(test_upload_buffer);
    RUN(test_errors);
    RUN(test_resend_after_close);
    RUN(test_pins);
    if (t_failed == 0 && getenv("FS_TEST_KEEP") == NULL) {
        char cmd[PATH_MAX + 16];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_root);
        if (system(cmd) != 0) {
            fprintf(stderr, "cannot remove %s\n", g_root);
        }
    } else {
        printf("kept %s\n", g_root);
    }
    return TEST_END("test_aggsrv_e2e");
}
