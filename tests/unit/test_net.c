/* lib/net: the libmicrohttpd server framework and the libcurl client talking
 * to each other on 127.0.0.1 (ephemeral port), plus auth, logging and
 * raw-socket abuse (garbage, bad escapes, huge headers, slowloris,
 * connection floods). */
#include "core/version.h"
#include "net/auth.h"
#include "net/http_client.h"
#include "net/http_server.h"
#include "net/log.h"
#include "net/reply.h"
#include "test.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define ADMIN_TOKEN "admin-token-0123456789abcdef"
#define PARTY_TOKEN "party-token-fedcba9876543210"
#define UPLOAD_MB   20

struct app {
    atomic_int flaky_calls;
    atomic_int limited_calls;
    atomic_int flakyup_calls;
    char download_path[512];
};

static struct app g_app;
static fs_http_server *g_srv;
static fs_auth *g_auth;
static uint16_t g_port;
static char g_base[64];
static char g_dir[256];
static FILE *g_log;

/* ------------------------------------------------------------------ helpers */

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static uint64_t splitmix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static void fill_pattern(uint8_t *p, uint64_t off, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t k = off + i;
        p[i] = (uint8_t)(splitmix(k >> 3) >> ((k & 7) * 8));
    }
}

static void hex32(const uint8_t *d, char out[65])
{
    for (int i = 0; i < 32; i++) {
        snprintf(out + 2 * i, 3, "%02x", d[i]);
    }
}

static fs_httpc *client(const char *token, unsigned retries)
{
    struct fs_httpc_config cfg;
    struct fs_err err = {0};
    fs_httpc *c = NULL;

    fs_httpc_config_default(&cfg);
    cfg.base_url = g_base;
    cfg.token = token;
    cfg.max_retries = retries;
    cfg.backoff_base_ms = 10;
    cfg.backoff_max_ms = 50;
    cfg.timeout_ms = 20000;
    CHECK_OK(fs_httpc_new(&c, &cfg, &err), &err);
    return c;
}

static int raw_connect(uint16_t port)
{
    struct sockaddr_in a;
    struct timeval tv = {3, 0};
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    if (fd < 0) {
        return -1;
    }
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void send_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0) {
            return; /* the server may close on us: that is fine */
        }
        p += w;
        n -= (size_t)w;
    }
}

/* Send raw bytes, read the reply until EOF or timeout. @return bytes read. */
static size_t raw_exchange(uint16_t port, const char *data, size_t len, char *out, size_t cap)
{
    int fd = raw_connect(port);
    size_t got = 0;

    out[0] = '\0';
    if (fd < 0) {
        return 0;
    }
    send_all(fd, data, len);
    while (got + 1 < cap) {
        ssize_t r = recv(fd, out + got, cap - 1 - got, 0);
        if (r <= 0) {
            break;
        }
        got += (size_t)r;
    }
    out[got] = '\0';
    close(fd);
    return got;
}

static int raw_status(const char *reply)
{
    int st = 0;
    if (strncmp(reply, "HTTP/1.", 7) != 0 || sscanf(reply + 9, "%3d", &st) != 1) {
        return -1;
    }
    return st;
}

static int server_alive(void)
{
    fs_httpc *c = client(NULL, 0);
    json_t *in = json_pack("{s:i}", "ping", 1);
    json_t *out = NULL;
    struct fs_err err = {0};
    int ok = 0;

    if (c != NULL && fs_httpc_json(c, "POST", "/echo", in, &out, NULL, &err) == 0) {
        ok = json_integer_value(json_object_get(json_object_get(out, "echo"), "ping")) == 1;
    }
    json_decref(in);
    json_decref(out);
    fs_httpc_free(c);
    return ok;
}

/* ------------------------------------------------------------------ handlers */

static int h_echo(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    struct fs_err err = {0};
    json_t *body = NULL;
    const char *q = fs_http_req_query(req, "x");

    (void)ctx;
    if (fs_http_req_json(req, &body, &err) != 0) {
        return fs_http_problem_err(resp, &err);
    }
    return fs_http_resp_json(resp, 200,
                             json_pack("{s:o, s:s?, s:s?}", "echo", body, "q", q, "ua",
                                       fs_http_req_header(req, "User-Agent")));
}

static int h_result(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    (void)ctx;
    return fs_http_resp_json(resp, 200,
                             json_pack("{s:s, s:s, s:s}", "id", fs_http_req_param(req, "id"),
                                       "name", fs_http_req_param(req, "name"), "route",
                                       fs_http_req_route(req)));
}

static int h_job(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    (void)ctx;
    return fs_http_resp_json(resp, 200,
                             json_pack("{s:s?, s:s}", "id", fs_http_req_param(req, "id"), "route",
                                       fs_http_req_route(req)));
}

static int h_small(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    size_t n = 0;
    (void)ctx;
    (void)fs_http_req_body(req, &n);
    return fs_http_resp_json(resp, 200, json_pack("{s:I}", "len", (json_int_t)n));
}

static int h_secure(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    (void)ctx;
    return fs_http_resp_json(resp, 200, json_pack("{s:s}", "who", fs_http_req_auth_label(req)));
}

struct upload {
    EVP_MD_CTX *md;
    uint64_t n;
    size_t max_chunk;
};

static void upload_free(void *p)
{
    struct upload *u = p;
    EVP_MD_CTX_free(u->md);
    free(u);
}

static int h_up_begin(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    struct upload *u = calloc(1, sizeof *u);

    (void)ctx;
    if (u == NULL) {
        return fs_http_problem(resp, 503, "out_of_memory", NULL, NULL);
    }
    u->md = EVP_MD_CTX_new();
    fs_http_req_set_user(req, u, upload_free);
    if (u->md == NULL || EVP_DigestInit_ex(u->md, EVP_sha256(), NULL) != 1) {
        return fs_http_problem(resp, 500, "crypto", NULL, NULL);
    }
    if (!fs_http_req_content_type_is(req, "application/x-npy")) {
        return fs_http_problem(resp, 415, "unsupported_media_type", NULL, "want application/x-npy");
    }
    return 0;
}

/* The first upload attempt is refused with 503 (after its headers). */
static int h_up_begin_flaky(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    struct app *a = ctx;

    if (atomic_fetch_add(&a->flakyup_calls, 1) == 0) {
        return fs_http_problem(resp, 503, "unavailable", NULL, "busy");
    }
    return h_up_begin(req, resp, NULL);
}

static int h_up_chunk(fs_http_req *req, const void *data, size_t len, fs_http_resp *resp, void *ctx)
{
    struct upload *u = fs_http_req_user(req);

    (void)ctx;
    (void)resp;
    if (EVP_DigestUpdate(u->md, data, len) != 1) {
        return -1;
    }
    u->n += len;
    if (len > u->max_chunk) {
        u->max_chunk = len;
    }
    return 0;
}

static int h_up_done(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    struct upload *u = fs_http_req_user(req);
    uint8_t d[32];
    unsigned dl = 0;
    char hex[65];

    (void)ctx;
    if (EVP_DigestFinal_ex(u->md, d, &dl) != 1) {
        return -1;
    }
    hex32(d, hex);
    return fs_http_resp_json(resp, 200,
                             json_pack("{s:s, s:I, s:I}", "sha256", hex, "bytes", (json_int_t)u->n,
                                       "max_chunk", (json_int_t)u->max_chunk));
}

static int h_download(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    struct app *a = ctx;
    struct fs_err err = {0};

    (void)req;
    if (fs_http_resp_file(resp, 200, "application/octet-stream", a->download_path, &err) != 0) {
        return fs_http_problem_err(resp, &err);
    }
    return 0;
}

/* Answers with fs_http_req_close_after: the connection closes after it. */
static int h_close(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    (void)ctx;
    fs_http_req_close_after(req);
    return fs_http_resp_json(resp, 200, json_pack("{s:b}", "closing", 1));
}

static int h_flaky(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    struct app *a = ctx;
    int n = atomic_fetch_add(&a->flaky_calls, 1) + 1;

    (void)req;
    if (n <= 2) {
        return fs_http_problem(resp, 503, "unavailable", NULL, "try again (%d)", n);
    }
    return fs_http_resp_json(resp, 200, json_pack("{s:i}", "attempt", n));
}

static int h_limited(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    struct app *a = ctx;
    int n = atomic_fetch_add(&a->limited_calls, 1) + 1;

    (void)req;
    if (n == 1) {
        int rc = fs_http_problem(resp, 429, "rate_limited", NULL, "slow down");
        if (rc == 0) {
            rc = fs_http_resp_header(resp, "Retry-After", "1");
        }
        return rc;
    }
    return fs_http_resp_json(resp, 200, json_pack("{s:i}", "attempt", n));
}

static int h_big(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    size_t n = 2 * 1024 * 1024;
    uint8_t *p = malloc(n);

    (void)req;
    (void)ctx;
    if (p == NULL) {
        return -1;
    }
    fill_pattern(p, 0, n);
    return fs_http_resp_bytes_owned(resp, 200, "application/octet-stream", p, n);
}

static int h_noresp(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    (void)req;
    (void)resp;
    (void)ctx;
    return -1;
}

static int h_slow(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    struct timespec ts = {0, 300 * 1000 * 1000};

    (void)req;
    (void)ctx;
    nanosleep(&ts, NULL);
    return fs_http_resp_json(resp, 200, json_pack("{s:b}", "slow", 1));
}

static int h_slower(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    struct timespec ts = {1, 500 * 1000 * 1000};

    (void)req;
    (void)ctx;
    nanosleep(&ts, NULL);
    return fs_http_resp_json(resp, 200, json_pack("{s:b}", "slow", 1));
}

/* GET /park?ms=N: a long poll that waits for g_park_ready (or N ms). */
static atomic_int g_park_ready;

static int park_ready(void *ctx)
{
    (void)ctx;
    return atomic_load(&g_park_ready);
}

static int h_park(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    const char *ms = fs_http_req_query(req, "ms");
    char *end = NULL;
    unsigned long wait = ms != NULL ? strtoul(ms, &end, 10) : 1000;

    (void)ctx;
    if (ms != NULL && (end == ms || *end != '\0' || wait > 60000)) {
        wait = 1000;
    }
    if (!fs_http_req_resumed(req) && !park_ready(NULL) &&
        fs_http_req_park(req, (unsigned)wait, park_ready, NULL) == 0) {
        return 0;
    }
    return fs_http_resp_json(
        resp, 200,
        json_pack("{s:b, s:b}", "resumed", fs_http_req_resumed(req), "ready", park_ready(NULL)));
}

static int start_server(void)
{
    struct fs_http_server_config cfg;
    struct fs_err err = {0};
    const struct fs_http_route routes[] = {
        {.method = "POST", .pattern = "/echo", .max_body = 64 * 1024, .handler = h_echo},
        {.method = "GET", .pattern = "/v1/jobs/{id}/result/{name}.npy", .handler = h_result},
        {.method = "GET", .pattern = "/v1/jobs/{id}", .handler = h_job},
        {.method = "PUT", .pattern = "/v1/jobs/{id}", .max_body = 1024, .handler = h_job},
        {.method = "GET", .pattern = "/v1/jobs/stats", .handler = h_job},
        {.method = "POST", .pattern = "/small", .max_body = 1024, .handler = h_small},
        {.method = "POST", .pattern = "/medium", .max_body = 1024 * 1024, .handler = h_small},
        {.method = "GET", .pattern = "/secure", .auth = g_auth, .handler = h_secure},
        {.method = "PUT",
         .pattern = "/upload",
         .max_body = 64ull * 1024 * 1024,
         .on_begin = h_up_begin,
         .on_chunk = h_up_chunk,
         .handler = h_up_done},
        {.method = "PUT",
         .pattern = "/upload-flaky",
         .max_body = 64ull * 1024 * 1024,
         .on_begin = h_up_begin_flaky,
         .on_chunk = h_up_chunk,
         .handler = h_up_done,
         .ctx = &g_app},
        {.method = "GET", .pattern = "/download", .handler = h_download, .ctx = &g_app},
        {.method = "GET", .pattern = "/flaky", .handler = h_flaky, .ctx = &g_app},
        {.method = "POST", .pattern = "/flaky", .handler = h_flaky, .ctx = &g_app},
        {.method = "GET", .pattern = "/limited", .handler = h_limited, .ctx = &g_app},
        {.method = "GET", .pattern = "/big", .handler = h_big},
        {.method = "GET", .pattern = "/noresp", .handler = h_noresp},
        {.method = "GET", .pattern = "/slow", .handler = h_slow},
        {.method = "GET", .pattern = "/park", .handler = h_park},
        {.method = "GET", .pattern = "/close", .handler = h_close},
    };

    fs_http_server_config_default(&cfg);
    cfg.threads = 4;
    CHECK_OK(fs_http_server_new(&g_srv, &cfg, &err), &err);
    if (g_srv == NULL) {
        return -1;
    }
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        CHECK_OK(fs_http_server_route(g_srv, &routes[i], &err), &err);
    }
    CHECK_OK(fs_http_server_start(g_srv, &err), &err);
    g_port = fs_http_server_port(g_srv);
    snprintf(g_base, sizeof g_base, "http://127.0.0.1:%u", (unsigned)g_port);
    return g_port != 0 ? 0 : -1;
}

/* -------------------------------------------------------------- unit tests */

static void test_log(void)
{
    FILE *f = tmpfile();
    char line[1024];
    enum fs_log_level lv = FS_LOG_INFO;
    struct fs_err err = {0};
    json_t *j = NULL;

    CHECK(f != NULL);
    if (f == NULL) {
        return;
    }
    fs_log_set_stream(f);
    fs_log_pack(FS_LOG_INFO, "hello", "{s:s, s:i, s:s}", "k", "v", "n", 7, "msg", "ignored");
    fs_log_pack(FS_LOG_DEBUG, "hidden", "{s:i}", "x", 1);
    fs_logf(FS_LOG_WARN, "value %d", 42);
    fs_log(FS_LOG_ERROR, "bad utf8 \xff\xfe", NULL);
    fs_log_set_stream(g_log);
    rewind(f);
    CHECK(fgets(line, sizeof line, f) != NULL);
    CHECK(strncmp(line, "{\"ts\":\"", 7) == 0);
    j = json_loads(line, 0, NULL);
    CHECK(json_is_object(j));
    CHECK(strcmp(json_string_value(json_object_get(j, "level")), "info") == 0);
    CHECK(strcmp(json_string_value(json_object_get(j, "msg")), "hello") == 0);
    CHECK(strcmp(json_string_value(json_object_get(j, "k")), "v") == 0);
    CHECK(json_integer_value(json_object_get(j, "n")) == 7);
    json_decref(j);
    CHECK(fgets(line, sizeof line, f) != NULL);
    CHECK(strstr(line, "\"msg\":\"value 42\"") != NULL && strstr(line, "\"warn\"") != NULL);
    CHECK(fgets(line, sizeof line, f) != NULL);
    j = json_loads(line, 0, NULL);
    CHECK(json_is_object(j));
    json_decref(j);
    CHECK(fgets(line, sizeof line, f) == NULL); /* the debug record was filtered */
    fclose(f);

    CHECK_OK(fs_log_level_parse("WARNING", &lv, &err), &err);
    CHECK(lv == FS_LOG_WARN);
    CHECK(fs_log_level_parse("loud", &lv, &err) == FS_EINVAL);
}

static void test_auth_unit(void)
{
    struct fs_err err = {0};
    fs_auth *a = NULL;
    char label[FS_AUTH_LABEL_MAX];
    const char *tok = NULL;
    size_t len = 0;
    char gen1[FS_AUTH_TOKEN_GEN_LEN + 1];
    char gen2[FS_AUTH_TOKEN_GEN_LEN + 1];
    char path[512];
    char *loaded = NULL;
    struct stat st;
    FILE *f = NULL;

    CHECK_OK(fs_auth_parse_bearer("Bearer abcdefghijklmnopq", &tok, &len, &err), &err);
    CHECK(len == 17 && strncmp(tok, "abcdefghijklmnopq", len) == 0);
    CHECK_OK(fs_auth_parse_bearer("  bearer \t xyz  ", &tok, &len, &err), &err);
    CHECK(len == 3);
    CHECK(fs_auth_parse_bearer(NULL, &tok, &len, &err) == FS_EAUTH);
    CHECK(fs_auth_parse_bearer("Basic dXNlcjpwYXNz", &tok, &len, &err) == FS_EAUTH);
    CHECK(fs_auth_parse_bearer("Bearer", &tok, &len, &err) == FS_EAUTH);
    CHECK(fs_auth_parse_bearer("Bearer ", &tok, &len, &err) == FS_EAUTH);
    CHECK(fs_auth_parse_bearer("Bearer a b", &tok, &len, &err) == FS_EAUTH);
    CHECK(fs_auth_parse_bearer("Bearerabc", &tok, &len, &err) == FS_EAUTH);

    CHECK_OK(fs_auth_new(&a, &err), &err);
    if (a == NULL) {
        return;
    }
    CHECK(fs_auth_add(a, "short", "x", &err) == FS_EINVAL);
    CHECK(fs_auth_add(a, "has space in the token!", "x", &err) == FS_EINVAL);
    CHECK_OK(fs_auth_add(a, ADMIN_TOKEN, "admin", &err), &err);
    CHECK_OK(fs_auth_add(a, PARTY_TOKEN, "party:1", &err), &err);
    CHECK(fs_auth_count(a) == 2);
    CHECK_OK(fs_auth_check_header(a, "Bearer " PARTY_TOKEN, label, &err), &err);
    CHECK(strcmp(label, "party:1") == 0);
    CHECK(fs_auth_check_header(a, "Bearer " PARTY_TOKEN "x", label, &err) == FS_EAUTH);
    CHECK(label[0] == '\0');
    CHECK(strstr(err.msg, PARTY_TOKEN) == NULL);
    CHECK(fs_auth_check_token(a, ADMIN_TOKEN, 5, label, &err) == FS_EAUTH);
    CHECK(fs_auth_remove(a, "party:1") == 1);
    CHECK(fs_auth_check_header(a, "Bearer " PARTY_TOKEN, label, &err) == FS_EAUTH);
    CHECK(fs_auth_count(a) == 1);

    {
        uint8_t d[FS_AUTH_DIGEST_LEN];
        CHECK_OK(fs_auth_digest(ADMIN_TOKEN, strlen(ADMIN_TOKEN), d, &err), &err);
        CHECK(fs_auth_token_matches(ADMIN_TOKEN, strlen(ADMIN_TOKEN), d) == 1);
        CHECK(fs_auth_token_matches(PARTY_TOKEN, strlen(PARTY_TOKEN), d) == 0);
    }

    CHECK_OK(fs_auth_token_generate(gen1, &err), &err);
    CHECK_OK(fs_auth_token_generate(gen2, &err), &err);
    CHECK(strlen(gen1) == FS_AUTH_TOKEN_GEN_LEN);
    CHECK(strcmp(gen1, gen2) != 0);
    CHECK(strspn(gen1, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") ==
          FS_AUTH_TOKEN_GEN_LEN);

    snprintf(path, sizeof path, "%s/token", g_dir);
    CHECK_OK(fs_auth_token_write_file(path, gen1, &err), &err);
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
    CHECK_OK(fs_auth_token_load(path, &loaded, &err), &err);
    CHECK(loaded != NULL && strcmp(loaded, gen1) == 0);
    fs_auth_token_free(loaded);
    loaded = NULL;
    CHECK_OK(fs_auth_add_file(a, path, "file", &err), &err);
    {
        char hdr[128];
        snprintf(hdr, sizeof hdr, "Bearer %s", gen1);
        CHECK_OK(fs_auth_check_header(a, hdr, label, &err), &err);
        CHECK(strcmp(label, "file") == 0);
    }

    snprintf(path, sizeof path, "%s/token_crlf", g_dir);
    f = fopen(path, "w");
    if (f != NULL) {
        fputs("abcdefghijklmnopqrstuvwxyz\r\n\n", f);
        fclose(f);
    }
    chmod(path, 0600);
    CHECK_OK(fs_auth_token_load(path, &loaded, &err), &err);
    CHECK(loaded != NULL && strcmp(loaded, "abcdefghijklmnopqrstuvwxyz") == 0);
    fs_auth_token_free(loaded);
    loaded = NULL;

    snprintf(path, sizeof path, "%s/token_short", g_dir);
    f = fopen(path, "w");
    if (f != NULL) {
        fputs("tooshort\n", f);
        fclose(f);
    }
    CHECK(fs_auth_token_load(path, &loaded, &err) == FS_EINVAL);
    CHECK(loaded == NULL);
    snprintf(path, sizeof path, "%s/token_two_lines", g_dir);
    f = fopen(path, "w");
    if (f != NULL) {
        fputs("abcdefghijklmnopqrstuvwxyz\nsecondline0123456789\n", f);
        fclose(f);
    }
    CHECK(fs_auth_token_load(path, &loaded, &err) == FS_EINVAL);
    CHECK(fs_auth_token_load("/nonexistent/token", &loaded, &err) == FS_EIO);
    fs_auth_free(a);
}

static void test_parse_listen(void)
{
    char host[64];
    uint16_t port = 0;
    struct fs_err err = {0};

    CHECK_OK(fs_http_parse_listen("127.0.0.1:8080", host, sizeof host, &port, &err), &err);
    CHECK(strcmp(host, "127.0.0.1") == 0 && port == 8080);
    CHECK_OK(fs_http_parse_listen("[::1]:0", host, sizeof host, &port, &err), &err);
    CHECK(strcmp(host, "::1") == 0 && port == 0);
    CHECK_OK(fs_http_parse_listen(":9000", host, sizeof host, &port, &err), &err);
    CHECK(strcmp(host, "0.0.0.0") == 0 && port == 9000);
    CHECK(fs_http_parse_listen("localhost", host, sizeof host, &port, &err) == FS_EINVAL);
    CHECK(fs_http_parse_listen("h:70000", host, sizeof host, &port, &err) == FS_EINVAL);
    CHECK(fs_http_parse_listen("h:12x", host, sizeof host, &port, &err) == FS_EINVAL);
    CHECK(fs_http_parse_listen("::1:80", host, sizeof host, &port, &err) == FS_EINVAL);
}

static void test_route_registration(void)
{
    fs_http_server *s = NULL;
    struct fs_err err = {0};
    const char *bad[] = {"v1/x",   "/v1//x", "/v1/{}",    "/v1/{a}{b}",
                         "/v1/{a", "/v1/a}", "/v1/{a-b}", "/v1/x/"};

    CHECK_OK(fs_http_server_new(&s, NULL, &err), &err);
    if (s == NULL) {
        return;
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct fs_http_route r = {.method = "GET", .pattern = bad[i], .handler = h_job};
        CHECK_MSG(fs_http_server_route(s, &r, &err) == FS_EINVAL, "%s", bad[i]);
    }
    {
        struct fs_http_route r = {.method = "GET", .pattern = "/a/{id}", .handler = h_job};
        struct fs_http_route r2 = {.method = "BREW", .pattern = "/a/{id}", .handler = h_job};
        struct fs_http_route r3 = {.method = "GET", .pattern = "/b", .handler = NULL};
        CHECK_OK(fs_http_server_route(s, &r, &err), &err);
        CHECK(fs_http_server_route(s, &r, &err) == FS_EINVAL); /* duplicate */
        CHECK(fs_http_server_route(s, &r2, &err) == FS_EINVAL);
        CHECK(fs_http_server_route(s, &r3, &err) == FS_EINVAL);
    }
    fs_http_server_free(s);
}

/* Routing without a socket (fs_http_server_probe), as the fuzz harness
 * drives it: statuses, precedence, decoded params and query values. */
static void test_route_probe(void)
{
    fs_http_server *s = NULL;
    struct fs_err err = {0};
    const char *pats[] = {"/v1/jobs/{job}", "/v1/jobs/stats", "/v1/jobs/{job}/result/{name}.npy"};
    const char *route = NULL;
    fs_http_req *req = NULL;

    CHECK_OK(fs_http_server_new(&s, NULL, &err), &err);
    if (s == NULL) {
        return;
    }
    for (size_t i = 0; i < sizeof pats / sizeof pats[0]; i++) {
        struct fs_http_route r = {.method = "GET", .pattern = pats[i], .handler = h_job};
        CHECK_OK(fs_http_server_route(s, &r, &err), &err);
    }
    CHECK(fs_http_server_probe(s, "GET", "/v1/jobs/a%2Cb%20c?x=%41&y&x=2", &route, &req) == 0);
    CHECK(route != NULL && strcmp(route, "/v1/jobs/{job}") == 0 && req != NULL);
    if (req != NULL) {
        CHECK(strcmp(fs_http_req_param(req, "job"), "a,b c") == 0);
        CHECK(strcmp(fs_http_req_query(req, "x"), "A") == 0);
        CHECK(strcmp(fs_http_req_query(req, "y"), "") == 0);
        CHECK(fs_http_req_query(req, "z") == NULL);
    }
    fs_http_req_probe_free(req);
    CHECK(fs_http_server_probe(s, "GET", "/v1/jobs/stats", &route, NULL) == 0);
    CHECK(route != NULL && strcmp(route, "/v1/jobs/stats") == 0);
    CHECK(fs_http_server_probe(s, "HEAD", "/v1/jobs/j/result/U.npy", &route, &req) == 0);
    if (req != NULL) {
        CHECK(strcmp(fs_http_req_param(req, "name"), "U") == 0);
    }
    fs_http_req_probe_free(req);
    CHECK(fs_http_server_probe(s, "POST", "/v1/jobs/j", &route, &req) == 405 && req == NULL);
    CHECK(route != NULL && strcmp(route, "/v1/jobs/{job}") == 0);
    CHECK(fs_http_server_probe(s, "GET", "/v1/jobs/j/result/.npy", &route, NULL) == 404);
    CHECK(fs_http_server_probe(s, "GET", "/v1/jobs/%2e%2e", &route, NULL) == 400);
    CHECK(fs_http_server_probe(s, "GET", "/v1/jobs/a%2Fb", &route, NULL) == 400);
    CHECK(fs_http_server_probe(s, "GET", "/v1/jobs/%zz", &route, NULL) == 400);
    CHECK(fs_http_server_probe(s, "GET", "/v1/jobs/%00", &route, NULL) == 400);
    CHECK(fs_http_server_probe(s, "GET", "/v1/jobs/j?a=%4", &route, NULL) == 400);
    CHECK(fs_http_server_probe(s, "GET", "/nope", &route, NULL) == 404 && route == NULL);
    fs_http_server_free(s);
}

/* ------------------------------------------------------------ HTTP tests */

static void test_json_echo(void)
{
    fs_httpc *c = client(NULL, 0);
    struct fs_err err = {0};
    json_t *in = json_pack("{s:[i,i], s:s}", "a", 1, 2, "s", "h\xc3\xa9llo");
    json_t *out = NULL;
    long status = 0;

    CHECK_OK(fs_httpc_json(c, "POST", "/echo?x=%41b%20c&y", in, &out, &status, &err), &err);
    CHECK(status == 200);
    CHECK(json_equal(json_object_get(out, "echo"), in));
    CHECK(json_is_string(json_object_get(out, "q")) &&
          strcmp(json_string_value(json_object_get(out, "q")), "Ab c") == 0);
    /* the User-Agent names the product and its version */
    {
        char ua[64];
        const char *got = json_string_value(json_object_get(out, "ua"));

        snprintf(ua, sizeof ua, "fedsvd/%s", fs_version());
        CHECK_MSG(got != NULL && strcmp(got, ua) == 0, "User-Agent %s, expected %s",
                  got != NULL ? got : "(none)", ua);
        CHECK(strcmp(fs_version(), "unknown") != 0 && fs_version()[0] >= '0' &&
              fs_version()[0] <= '9');
    }
    json_decref(out);
    out = NULL;

    /* invalid JSON -> 400 problem, message carries code and detail */
    {
        struct fs_httpc_req rq = {.method = "POST",
                                  .path = "/echo",
                                  .content_type = "application/json",
                                  .body = "{\"a\":",
                                  .body_len = 5};
        struct fs_httpc_resp resp;
        CHECK_OK(fs_httpc_do(c, &rq, &resp, &err), &err);
        CHECK(resp.status == 400);
        CHECK(strcmp(resp.content_type, "application/problem+json") == 0);
        CHECK(fs_httpc_check(&resp, "POST", "/echo", &err) == FS_EFORMAT);
        CHECK_MSG(strncmp(err.msg, "POST /echo: 400 bad_request: invalid JSON", 41) == 0, "%s",
                  err.msg);
        fs_httpc_resp_clear(&resp);
    }
    /* wrong content type -> 422 */
    {
        struct fs_httpc_req rq = {.method = "POST",
                                  .path = "/echo",
                                  .content_type = "text/plain",
                                  .body = "{}",
                                  .body_len = 2};
        struct fs_httpc_resp resp;
        CHECK_OK(fs_httpc_do(c, &rq, &resp, &err), &err);
        CHECK(resp.status == 422);
        fs_httpc_resp_clear(&resp);
    }
    json_decref(in);
    fs_httpc_free(c);
}

static void test_path_params(void)
{
    fs_httpc *c = client(NULL, 0);
    struct fs_err err = {0};
    json_t *out = NULL;

    CHECK_OK(fs_httpc_json(c, "GET", "/v1/jobs/j%2D1/result/U%5F1.npy", NULL, &out, NULL, &err),
             &err);
    CHECK(out != NULL && strcmp(json_string_value(json_object_get(out, "id")), "j-1") == 0);
    CHECK(out != NULL && strcmp(json_string_value(json_object_get(out, "name")), "U_1") == 0);
    json_decref(out);
    out = NULL;
    CHECK_OK(fs_httpc_json(c, "GET", "/v1/jobs/stats", NULL, &out, NULL, &err), &err);
    CHECK(out != NULL &&
          strcmp(json_string_value(json_object_get(out, "route")), "/v1/jobs/stats") == 0);
    json_decref(out);
    out = NULL;
    CHECK_OK(fs_httpc_json(c, "GET", "/v1/jobs/abc", NULL, &out, NULL, &err), &err);
    CHECK(out != NULL &&
          strcmp(json_string_value(json_object_get(out, "route")), "/v1/jobs/{id}") == 0);
    CHECK(out != NULL && strcmp(json_string_value(json_object_get(out, "id")), "abc") == 0);
    json_decref(out);
    out = NULL;
    /* suffix required: no ".npy" -> 404 */
    CHECK(fs_httpc_json(c, "GET", "/v1/jobs/x/result/U", NULL, &out, NULL, &err) == FS_ENOTFOUND);
    /* an encoded slash or ".." in a parameter -> 400 */
    CHECK(fs_httpc_json(c, "GET", "/v1/jobs/a%2Fb", NULL, &out, NULL, &err) == FS_EFORMAT);
    CHECK(fs_httpc_json(c, "GET", "/v1/jobs/%2E%2E", NULL, &out, NULL, &err) == FS_EFORMAT);
    fs_httpc_free(c);
}

/* Two requests pipelined on one kept-alive connection: both are answered,
 * unless the handler of the first called fs_http_req_close_after (its
 * answer says Connection: close and the server closes the connection). */
static void test_close_after(void)
{
    static const char two_close[] = "GET /close HTTP/1.1\r\nHost: x\r\n\r\n"
                                    "GET /v1/jobs/a HTTP/1.1\r\nHost: x\r\n\r\n";
    static const char two_kept[] =
        "GET /v1/jobs/a HTTP/1.1\r\nHost: x\r\n\r\n"
        "GET /v1/jobs/b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    char out[8192];
    const char *second = NULL;

    raw_exchange(g_port, two_close, strlen(two_close), out, sizeof out);
    CHECK(raw_status(out) == 200);
    CHECK(strstr(out, "Connection: close\r\n") != NULL ||
          strstr(out, "connection: close\r\n") != NULL);
    CHECK(strstr(out + 1, "HTTP/1.1 ") == NULL); /* the second request was not answered */
    raw_exchange(g_port, two_kept, strlen(two_kept), out, sizeof out);
    CHECK(raw_status(out) == 200);
    second = strstr(out + 1, "HTTP/1.1 ");
    CHECK(second != NULL && raw_status(second) == 200);
}

static void test_404_405(void)
{
    fs_httpc *c = client(NULL, 0);
    struct fs_err err = {0};
    json_t *out = NULL;
    char reply[4096];
    long status = 0;

    CHECK(fs_httpc_json(c, "GET", "/nope", NULL, &out, &status, &err) == FS_ENOTFOUND);
    CHECK(status == 404);
    CHECK_MSG(strcmp(err.msg, "GET /nope: 404 not_found: no such resource") == 0, "%s", err.msg);
    CHECK(fs_httpc_json(c, "DELETE", "/v1/jobs/x", NULL, &out, &status, &err) == FS_EIO);
    CHECK(status == 405);
    CHECK(strstr(err.msg, "method_not_allowed") != NULL);
    fs_httpc_free(c);

    {
        const char *rq = "DELETE /v1/jobs/x HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
        raw_exchange(g_port, rq, strlen(rq), reply, sizeof reply);
        CHECK(raw_status(reply) == 405);
        CHECK_MSG(strstr(reply, "Allow: GET, HEAD, PUT") != NULL, "%s", reply);
        CHECK(strstr(reply, "application/problem+json") != NULL);
        CHECK(strstr(reply, "\"type\":\"urn:fedsvd:problem:method_not_allowed\"") != NULL);
    }
    {
        const char *rq = "HEAD /v1/jobs/x HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
        raw_exchange(g_port, rq, strlen(rq), reply, sizeof reply);
        CHECK(raw_status(reply) == 200);
        CHECK(strstr(reply, "\r\n\r\n") != NULL && strstr(reply, "\r\n\r\n")[4] == '\0');
    }
}

static int gen_read(void *ctx, void *buf, size_t cap, size_t *got);
static int gen_rewind(void *ctx);

struct gen {
    uint64_t total;
    uint64_t off;
    EVP_MD_CTX *md;
};

static int gen_read(void *ctx, void *buf, size_t cap, size_t *got)
{
    struct gen *g = ctx;
    size_t n = g->total - g->off < cap ? (size_t)(g->total - g->off) : cap;

    fill_pattern(buf, g->off, n);
    if (g->md != NULL && EVP_DigestUpdate(g->md, buf, n) != 1) {
        return -1;
    }
    g->off += n;
    *got = n;
    return 0;
}

static int gen_rewind(void *ctx)
{
    struct gen *g = ctx;
    g->off = 0;
    return g->md != NULL && EVP_DigestInit_ex(g->md, EVP_sha256(), NULL) != 1 ? -1 : 0;
}

static void test_body_caps(void)
{
    fs_httpc *c = client(NULL, 0);
    struct fs_err err = {0};
    char *body = malloc(2 * 1024 * 1024);
    char reply[4096];

    if (body == NULL) {
        CHECK(0);
        return;
    }
    memset(body, 'a', 2 * 1024 * 1024);
    /* at the cap: fine */
    {
        struct fs_httpc_req rq = {.method = "POST",
                                  .path = "/small",
                                  .content_type = "text/plain",
                                  .body = body,
                                  .body_len = 1024};
        struct fs_httpc_resp resp;
        CHECK_OK(fs_httpc_do(c, &rq, &resp, &err), &err);
        CHECK(resp.status == 200);
        CHECK(resp.body != NULL && strstr(resp.body, "\"len\":1024") != NULL);
        fs_httpc_resp_clear(&resp);
    }
    /* a buffered body larger than the first allocation grows as it arrives */
    {
        struct fs_httpc_req rq = {.method = "POST",
                                  .path = "/medium",
                                  .content_type = "text/plain",
                                  .body = body,
                                  .body_len = 300 * 1024 + 1};
        struct fs_httpc_resp resp;
        CHECK_OK(fs_httpc_do(c, &rq, &resp, &err), &err);
        CHECK(resp.status == 200 && resp.body != NULL &&
              strstr(resp.body, "\"len\":307201") != NULL);
        fs_httpc_resp_clear(&resp);
    }
    /* Content-Length over the cap (small: drained, then 413) */
    {
        struct fs_httpc_req rq = {.method = "POST",
                                  .path = "/small",
                                  .content_type = "text/plain",
                                  .body = body,
                                  .body_len = 8192};
        struct fs_httpc_resp resp;
        CHECK_OK(fs_httpc_do(c, &rq, &resp, &err), &err);
        CHECK(resp.status == 413);
        CHECK(strcmp(resp.content_type, "application/problem+json") == 0);
        CHECK(fs_httpc_check(&resp, "POST", "/small", &err) == FS_ERANGE);
        CHECK_MSG(strstr(err.msg, "POST /small: 413 body_too_large: request body of 8192 bytes") ==
                      err.msg,
                  "%s", err.msg);
        fs_httpc_resp_clear(&resp);
    }
    /* Content-Length over the cap, large (Expect: 100-continue, rejected up front) */
    {
        struct fs_httpc_req rq = {.method = "POST",
                                  .path = "/small",
                                  .content_type = "text/plain",
                                  .body = body,
                                  .body_len = 2 * 1024 * 1024};
        struct fs_httpc_resp resp;
        CHECK_OK(fs_httpc_do(c, &rq, &resp, &err), &err);
        CHECK(resp.status == 413);
        fs_httpc_resp_clear(&resp);
    }
    /* chunked upload over the cap: checked as the pieces arrive */
    {
        struct gen g = {.total = 8192};
        struct fs_httpc_req rq = {.method = "POST",
                                  .path = "/small",
                                  .content_type = "text/plain",
                                  .read = gen_read,
                                  .rewind = gen_rewind,
                                  .read_ctx = &g,
                                  .read_len = -1};
        struct fs_httpc_resp resp;
        CHECK_OK(fs_httpc_do(c, &rq, &resp, &err), &err);
        CHECK(resp.status == 413);
        CHECK(resp.body != NULL && strstr(resp.body, "body_too_large") != NULL);
        fs_httpc_resp_clear(&resp);
    }
    /* chunked under the cap is fine */
    {
        struct gen g = {.total = 1000};
        struct fs_httpc_req rq = {.method = "POST",
                                  .path = "/small",
                                  .content_type = "text/plain",
                                  .read = gen_read,
                                  .read_ctx = &g,
                                  .read_len = -1};
        struct fs_httpc_resp resp;
        CHECK_OK(fs_httpc_do(c, &rq, &resp, &err), &err);
        CHECK(resp.status == 200 && resp.body != NULL && strstr(resp.body, "\"len\":1000") != NULL);
        fs_httpc_resp_clear(&resp);
    }
    /* raw: a huge declared body is refused before any byte is sent */
    {
        const char *rq = "POST /small HTTP/1.1\r\nHost: t\r\nContent-Length: 1000000000000\r\n"
                         "Content-Type: text/plain\r\n\r\n";
        raw_exchange(g_port, rq, strlen(rq), reply, sizeof reply);
        CHECK_MSG(raw_status(reply) == 413, "%s", reply);
    }
    /* a GET route has max_body 0: any body is too large */
    {
        const char *rq = "GET /v1/jobs/x HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n"
                         "Connection: close\r\n\r\nabc";
        raw_exchange(g_port, rq, strlen(rq), reply, sizeof reply);
        CHECK_MSG(raw_status(reply) == 413, "%s", reply);
    }
    free(body);
    fs_httpc_free(c);
    CHECK(server_alive());
}

static void test_auth_http(void)
{
    fs_httpc *none = client(NULL, 0);
    fs_httpc *wrong = client("wrong-token-0123456789abcdef", 0);
    fs_httpc *right = client(PARTY_TOKEN, 0);
    struct fs_err err = {0};
    json_t *out = NULL;
    long status = 0;
    char reply[4096];

    CHECK(fs_httpc_json(none, "GET", "/secure", NULL, &out, &status, &err) == FS_EAUTH);
    CHECK(status == 401);
    CHECK(strstr(err.msg, "401 unauthorized: missing Authorization header") != NULL);
    CHECK(fs_httpc_json(wrong, "GET", "/secure", NULL, &out, &status, &err) == FS_EAUTH);
    CHECK(status == 401);
    CHECK(strstr(err.msg, "wrong-token") == NULL);
    CHECK_OK(fs_httpc_json(right, "GET", "/secure", NULL, &out, &status, &err), &err);
    CHECK(out != NULL && strcmp(json_string_value(json_object_get(out, "who")), "party:1") == 0);
    json_decref(out);
    {
        const char *rq = "GET /secure HTTP/1.1\r\nHost: t\r\nAuthorization: Basic Zm9vOmJhcg==\r\n"
                         "Connection: close\r\n\r\n";
        raw_exchange(g_port, rq, strlen(rq), reply, sizeof reply);
        CHECK(raw_status(reply) == 401);
        CHECK(strstr(reply, "WWW-Authenticate: Bearer") != NULL);
    }
    fs_httpc_free(none);
    fs_httpc_free(wrong);
    fs_httpc_free(right);
}

static void test_stream_upload(void)
{
    fs_httpc *c = client(NULL, 2);
    struct fs_err err = {0};
    struct gen g = {.total = (uint64_t)UPLOAD_MB * 1024 * 1024};
    struct fs_httpc_req rq = {.method = "PUT",
                              .path = "/upload",
                              .content_type = "application/x-npy",
                              .read = gen_read,
                              .rewind = gen_rewind,
                              .read_ctx = &g,
                              .read_len = (int64_t)g.total};
    struct fs_httpc_resp resp;
    uint8_t d[32];
    unsigned dl = 0;
    char hex[65];
    json_t *j = NULL;

    g.md = EVP_MD_CTX_new();
    CHECK(g.md != NULL && EVP_DigestInit_ex(g.md, EVP_sha256(), NULL) == 1);
    CHECK_OK(fs_httpc_do(c, &rq, &resp, &err), &err);
    CHECK_MSG(resp.status == 200, "status %ld: %s", resp.status, resp.body ? resp.body : "");
    CHECK(EVP_DigestFinal_ex(g.md, d, &dl) == 1);
    hex32(d, hex);
    j = resp.body != NULL ? json_loads(resp.body, 0, NULL) : NULL;
    CHECK(j != NULL);
    if (j != NULL) {
        CHECK(strcmp(json_string_value(json_object_get(j, "sha256")), hex) == 0);
        CHECK(json_integer_value(json_object_get(j, "bytes")) == (json_int_t)g.total);
        /* the handler saw pieces of O(connection buffer), never the whole body */
        CHECK_MSG(json_integer_value(json_object_get(j, "max_chunk")) <= 64 * 1024,
                  "max_chunk %lld", (long long)json_integer_value(json_object_get(j, "max_chunk")));
    }
    json_decref(j);
    fs_httpc_resp_clear(&resp);

    /* chunked (unknown length) streaming works too */
    g.total = 3 * 1024 * 1024 + 17;
    CHECK(gen_rewind(&g) == 0);
    rq.read_len = -1;
    CHECK_OK(fs_httpc_do(c, &rq, &resp, &err), &err);
    CHECK(resp.status == 200 && resp.body != NULL &&
          strstr(resp.body, "\"bytes\":3145745") != NULL);
    fs_httpc_resp_clear(&resp);

    /* on_begin rejects the media type before the body is read */
    rq.content_type = "text/plain";
    CHECK(gen_rewind(&g) == 0);
    CHECK_OK(fs_httpc_do(c, &rq, &resp, &err), &err);
    CHECK(resp.status == 415);
    fs_httpc_resp_clear(&resp);
    EVP_MD_CTX_free(g.md);
    fs_httpc_free(c);
}

static void sha_hex(const void *p, size_t n, char hex[65])
{
    uint8_t d[32];
    unsigned dl = 0;

    CHECK(EVP_Digest(p, n, d, &dl, EVP_sha256(), NULL) == 1);
    hex32(d, hex);
}

static void test_upload_retry_and_file(void)
{
    fs_httpc *c = client(NULL, 3);
    struct fs_err err = {0};
    struct gen g = {.total = 512 * 1024};
    struct fs_httpc_req rq = {.method = "PUT",
                              .path = "/upload-flaky",
                              .content_type = "application/x-npy",
                              .read = gen_read,
                              .rewind = gen_rewind,
                              .read_ctx = &g,
                              .read_len = (int64_t)g.total};
    struct fs_httpc_resp resp;
    size_t n = 1536 * 1024 + 3;
    uint8_t *buf = malloc(n);
    char hex[65];
    char path[512];
    json_t *out = NULL;
    FILE *f = NULL;

    if (buf == NULL) {
        CHECK(0);
        fs_httpc_free(c);
        return;
    }
    /* refused once after the body was sent: rewound and sent again intact */
    atomic_store(&g_app.flakyup_calls, 0);
    CHECK_OK(fs_httpc_do(c, &rq, &resp, &err), &err);
    CHECK_MSG(resp.status == 200 && resp.attempts == 2, "status %ld attempts %u", resp.status,
              resp.attempts);
    fill_pattern(buf, 0, (size_t)g.total);
    sha_hex(buf, (size_t)g.total, hex);
    CHECK(resp.body != NULL && strstr(resp.body, hex) != NULL);
    fs_httpc_resp_clear(&resp);

    /* a stream that cannot rewind is not retried once bytes went out */
    atomic_store(&g_app.flakyup_calls, 0);
    g.off = 0;
    rq.rewind = NULL;
    CHECK_OK(fs_httpc_do(c, &rq, &resp, &err), &err);
    CHECK(resp.status == 503 && resp.attempts == 1);
    fs_httpc_resp_clear(&resp);

    /* streamed file upload */
    fill_pattern(buf, 777, n);
    sha_hex(buf, n, hex);
    snprintf(path, sizeof path, "%s/upload.npy", g_dir);
    f = fopen(path, "wb");
    CHECK(f != NULL && fwrite(buf, 1, n, f) == n);
    if (f != NULL) {
        fclose(f);
    }
    CHECK_OK(fs_httpc_send_file(c, "PUT", "/upload", "application/x-npy", path, &out, &err), &err);
    CHECK(out != NULL && strcmp(json_string_value(json_object_get(out, "sha256")), hex) == 0);
    json_decref(out);
    out = NULL;

    /* bytes, and a token set after creation */
    CHECK_OK(fs_httpc_set_token(c, PARTY_TOKEN, &err), &err);
    CHECK_OK(fs_httpc_send_bytes(c, "PUT", "/upload", "application/x-npy", buf, 100, &out, &err),
             &err);
    CHECK(out != NULL && json_integer_value(json_object_get(out, "bytes")) == 100);
    json_decref(out);
    out = NULL;
    CHECK(fs_httpc_set_token(c, "short", &err) == FS_EINVAL);
    CHECK_OK(fs_httpc_json(c, "GET", "/secure", NULL, &out, NULL, &err), &err);
    json_decref(out);
    free(buf);
    fs_httpc_free(c);
}

static void test_file_download(void)
{
    fs_httpc *c = client(NULL, 0);
    struct fs_err err = {0};
    size_t n = 3 * 1024 * 1024 + 5;
    uint8_t *src = malloc(n);
    uint8_t *back = malloc(n + 1);
    char dest[512];
    uint64_t bytes = 0;
    FILE *f = NULL;

    if (src == NULL || back == NULL) {
        CHECK(0);
        goto out;
    }
    fill_pattern(src, 12345, n);
    snprintf(g_app.download_path, sizeof g_app.download_path, "%s/served.bin", g_dir);
    f = fopen(g_app.download_path, "wb");
    CHECK(f != NULL && fwrite(src, 1, n, f) == n);
    if (f != NULL) {
        fclose(f);
    }
    snprintf(dest, sizeof dest, "%s/downloaded.bin", g_dir);
    CHECK_OK(fs_httpc_download(c, "/download", dest, &bytes, &err), &err);
    CHECK(bytes == n);
    f = fopen(dest, "rb");
    CHECK(f != NULL);
    if (f != NULL) {
        CHECK(fread(back, 1, n + 1, f) == n);
        CHECK(memcmp(src, back, n) == 0);
        fclose(f);
    }
    /* a 404 leaves no file and no temp file behind */
    snprintf(dest, sizeof dest, "%s/missing.bin", g_dir);
    CHECK(fs_httpc_download(c, "/nope", dest, &bytes, &err) == FS_ENOTFOUND);
    CHECK(access(dest, F_OK) != 0);
    {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "ls %s | grep -q part", g_dir);
        CHECK(system(cmd) != 0);
    }
out:
    free(src);
    free(back);
    fs_httpc_free(c);
}

static void test_retries(void)
{
    fs_httpc *c = client(NULL, 4);
    struct fs_err err = {0};
    struct fs_httpc_req rq = {.method = "GET", .path = "/flaky"};
    struct fs_httpc_resp resp;
    double t0 = 0;

    atomic_store(&g_app.flaky_calls, 0);
    CHECK_OK(fs_httpc_do(c, &rq, &resp, &err), &err);
    CHECK(resp.status == 200);
    CHECK(resp.attempts == 3);
    CHECK(atomic_load(&g_app.flaky_calls) == 3);
    fs_httpc_resp_clear(&resp);

    /* POST is not idempotent: the 503 comes back after one attempt */
    atomic_store(&g_app.flaky_calls, 0);
    rq.method = "POST";
    CHECK_OK(fs_httpc_do(c, &rq, &resp, &err), &err);
    CHECK(resp.status == 503 && resp.attempts == 1);
    fs_httpc_resp_clear(&resp);

    /* ... unless the caller says it is */
    atomic_store(&g_app.flaky_calls, 0);
    rq.retry = FS_HTTPC_RETRY_ALWAYS;
    CHECK_OK(fs_httpc_do(c, &rq, &resp, &err), &err);
    CHECK(resp.status == 200 && resp.attempts == 3);
    fs_httpc_resp_clear(&resp);

    /* not enough retries: the last 503 is returned */
    fs_httpc_free(c);
    c = client(NULL, 1);
    atomic_store(&g_app.flaky_calls, 0);
    rq.method = "GET";
    rq.retry = FS_HTTPC_RETRY_AUTO;
    CHECK_OK(fs_httpc_do(c, &rq, &resp, &err), &err);
    CHECK(resp.status == 503 && resp.attempts == 2);
    CHECK(fs_httpc_check(&resp, "GET", "/flaky", &err) == FS_EIO);
    CHECK_MSG(strcmp(err.msg, "GET /flaky: 503 unavailable: try again (2)") == 0, "%s", err.msg);
    fs_httpc_resp_clear(&resp);

    /* 429 with Retry-After: 1 is honoured */
    atomic_store(&g_app.limited_calls, 0);
    rq.path = "/limited";
    t0 = now_ms();
    CHECK_OK(fs_httpc_do(c, &rq, &resp, &err), &err);
    CHECK(resp.status == 200 && resp.attempts == 2);
    CHECK_MSG(now_ms() - t0 >= 950, "waited %.0f ms", now_ms() - t0);
    fs_httpc_resp_clear(&resp);
    fs_httpc_free(c);
}

static void test_connect_retry(void)
{
    /* nothing listens on this port: connection refused, retried, then FS_EIO */
    struct fs_httpc_config cfg;
    struct fs_err err = {0};
    fs_httpc *c = NULL;
    struct fs_httpc_req rq = {.method = "POST", .path = "/x"};
    struct fs_httpc_resp resp;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    socklen_t al = sizeof a;
    char url[64];

    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(bind(fd, (struct sockaddr *)&a, sizeof a) == 0);
    CHECK(getsockname(fd, (struct sockaddr *)&a, &al) == 0);
    close(fd); /* bound then closed: the port is very likely unused */
    snprintf(url, sizeof url, "http://127.0.0.1:%u", (unsigned)ntohs(a.sin_port));
    fs_httpc_config_default(&cfg);
    cfg.base_url = url;
    cfg.max_retries = 2;
    cfg.backoff_base_ms = 5;
    CHECK_OK(fs_httpc_new(&c, &cfg, &err), &err);
    CHECK(fs_httpc_do(c, &rq, &resp, &err) == FS_EIO);
    CHECK(resp.attempts == 3); /* connect failures are retried even for POST */
    CHECK_MSG(strstr(err.msg, "POST /x: ") == err.msg && strstr(err.msg, "after 3 attempts"), "%s",
              err.msg);
    fs_httpc_resp_clear(&resp);
    fs_httpc_free(c);
}

static void test_client_caps(void)
{
    struct fs_httpc_config cfg;
    struct fs_err err = {0};
    fs_httpc *c = NULL;
    struct fs_httpc_req rq = {.method = "GET", .path = "/big"};
    struct fs_httpc_resp resp;

    fs_httpc_config_default(&cfg);
    cfg.base_url = g_base;
    cfg.max_body = 1024 * 1024;
    CHECK_OK(fs_httpc_new(&c, &cfg, &err), &err);
    CHECK(fs_httpc_do(c, &rq, &resp, &err) == FS_ERANGE);
    CHECK(strstr(err.msg, "GET /big: response body exceeds 1048576 bytes") != NULL);
    fs_httpc_resp_clear(&resp);
    fs_httpc_free(c);

    cfg.max_body = 4 * 1024 * 1024;
    CHECK_OK(fs_httpc_new(&c, &cfg, &err), &err);
    CHECK_OK(fs_httpc_do(c, &rq, &resp, &err), &err);
    CHECK(resp.status == 200 && resp.len == 2 * 1024 * 1024);
    fs_httpc_resp_clear(&resp);

    /* handler that sets no response: 500 problem */
    rq.path = "/noresp";
    CHECK_OK(fs_httpc_do(c, &rq, &resp, &err), &err);
    CHECK(resp.status == 500 && strstr(resp.content_type, "problem+json") != NULL);
    fs_httpc_resp_clear(&resp);
    fs_httpc_free(c);
}

static void test_malformed_raw(void)
{
    static const char *cases[] = {
        "GARBAGE\r\n\r\n",
        "GET /v1/jobs/%zz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        "GET /v1/jobs/%4 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        "GET /v1/jobs/a%00b HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        "GET /v1/jobs/x?y=%zz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        "GET /%%%%%%%% HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        "GET no-slash HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        "GET / HTTP/9.9\r\nHost: t\r\nConnection: close\r\n\r\n",
        "POST /small HTTP/1.1\r\nHost: t\r\nContent-Length: abc\r\nConnection: close\r\n\r\n",
        "POST /small HTTP/1.1\r\nHost: t\r\nContent-Length: -5\r\nConnection: close\r\n\r\n",
        "POST /small HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        "zz\r\nhello\r\n0\r\n\r\n",
        "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 4\r\n"
        "Connection: close\r\n\r\n\xff\xfe\x00\x01",
        "\x16\x03\x01\x02\x10\x01\x02\x01\xfc\x03\x03garbage-tls-hello\r\n\r\n",
        "GET /v1/jobs/x HTTP/1.1\r\nHost: t\r\nBad Header Name: x\r\nConnection: close\r\n\r\n",
    };
    char reply[8192];

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len = strlen(cases[i]);
        if (i == 11) {
            len = strstr(cases[i], "\r\n\r\n") - cases[i] + 8; /* body holds a NUL */
        }
        raw_exchange(g_port, cases[i], len, reply, sizeof reply);
        if (i >= 1 && i <= 4) {
            CHECK_MSG(raw_status(reply) == 400, "case %zu: %.200s", i, reply);
        }
    }
    /* a header block far over the connection memory limit */
    {
        size_t n = 256 * 1024;
        char *big = malloc(n + 128);
        if (big != NULL) {
            size_t o = (size_t)snprintf(big, 128, "GET /v1/jobs/x HTTP/1.1\r\nHost: t\r\nX-Big: ");
            memset(big + o, 'a', n);
            memcpy(big + o + n, "\r\n\r\n", 4);
            raw_exchange(g_port, big, o + n + 4, reply, sizeof reply);
            CHECK_MSG(reply[0] == '\0' || raw_status(reply) == 431 || raw_status(reply) == 413 ||
                          raw_status(reply) == 400,
                      "%.100s", reply);
            free(big);
        }
    }
    /* a very long URL */
    {
        size_t n = 200 * 1024;
        char *big = malloc(n + 128);
        if (big != NULL) {
            memcpy(big, "GET /", 5);
            memset(big + 5, 'b', n);
            memcpy(big + 5 + n, " HTTP/1.1\r\nHost: t\r\n\r\n", 22);
            raw_exchange(g_port, big, 5 + n + 22, reply, sizeof reply);
            CHECK_MSG(reply[0] == '\0' || raw_status(reply) == 414 || raw_status(reply) == 431 ||
                          raw_status(reply) == 400,
                      "%.100s", reply);
            free(big);
        }
    }
    CHECK(server_alive());
}

static void test_limits_and_slowloris(void)
{
    struct fs_http_server_config cfg;
    struct fs_err err = {0};
    fs_http_server *s = NULL;
    struct fs_http_route r = {.method = "GET", .pattern = "/v1/jobs/{id}", .handler = h_job};
    int fds[12];
    uint16_t port = 0;
    char reply[2048];
    const char *rq = "GET /v1/jobs/a HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    double t0 = 0;

    fs_http_server_config_default(&cfg);
    cfg.threads = 2;
    cfg.max_connections = 4;
    cfg.timeout_s = 1;
    cfg.log_requests = 0;
    CHECK_OK(fs_http_server_new(&s, &cfg, &err), &err);
    if (s == NULL) {
        return;
    }
    CHECK_OK(fs_http_server_route(s, &r, &err), &err);
    CHECK_OK(fs_http_server_start(s, &err), &err);
    port = fs_http_server_port(s);
    CHECK(fs_http_server_route(s, &r, &err) == FS_ESTATE);

    /* slowloris: a partial request line is dropped after the idle timeout */
    {
        int fd = raw_connect(port);
        char b[16];
        ssize_t got = 0;
        CHECK(fd >= 0);
        send_all(fd, "GET /v1/jo", 10);
        t0 = now_ms();
        got = recv(fd, b, sizeof b, 0);
        CHECK_MSG(got <= 0 && now_ms() - t0 < 2900, "got %zd after %.0f ms", got, now_ms() - t0);
        close(fd);
    }
    /* flood: more connections than allowed; the extra ones are not accepted */
    for (int i = 0; i < 12; i++) {
        fds[i] = raw_connect(port);
    }
    {
        struct timespec ts = {0, 300 * 1000 * 1000};
        unsigned conns = 0;
        nanosleep(&ts, NULL);
        conns = fs_http_server_connections(s);
        CHECK_MSG(conns >= 1 && conns <= 4, "%u connections", conns);
    }
    for (int i = 0; i < 12; i++) {
        if (fds[i] >= 0) {
            close(fds[i]);
        }
    }
    {
        /* recovered: a normal request is served once the flood is gone */
        int ok = 0;
        for (int tries = 0; tries < 40 && !ok; tries++) {
            struct timespec ts = {0, 50 * 1000 * 1000};
            raw_exchange(port, rq, strlen(rq), reply, sizeof reply);
            ok = raw_status(reply) == 200;
            if (!ok) {
                nanosleep(&ts, NULL);
            }
        }
        CHECK(ok);
    }
    fs_http_server_stop(s, 1000);
    fs_http_server_stop(s, 1000); /* idempotent */
    fs_http_server_free(s);
}

/* A raw connection to 127.0.0.1:port from the local address src ("127.0.0.2"
 * is another client as far as the server can tell); receive timeout rcv_ms. */
static int raw_connect_from(const char *src, uint16_t port, long rcv_ms)
{
    struct sockaddr_in a;
    struct timeval tv = {rcv_ms / 1000, (rcv_ms % 1000) * 1000};
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    if (fd < 0) {
        return -1;
    }
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    if (inet_pton(AF_INET, src, &a.sin_addr) != 1 ||
        bind(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* 1 when the peer has closed fd (EOF or reset) within the receive timeout. */
static int peer_closed(int fd)
{
    char b[256];
    ssize_t r = recv(fd, b, sizeof b, 0);

    return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

/* Read one response (headers, then Content-Length bytes of body) from a
 * keep-alive connection. @return its status, -1 on EOF/timeout. */
static int read_response(int fd)
{
    char buf[4096];
    size_t got = 0;
    char *end = NULL;
    const char *cl = NULL;
    size_t need = 0;

    while (end == NULL) {
        ssize_t r;
        if (got + 1 >= sizeof buf) {
            return -1;
        }
        r = recv(fd, buf + got, sizeof buf - 1 - got, 0);
        if (r <= 0) {
            return -1;
        }
        got += (size_t)r;
        buf[got] = '\0';
        end = strstr(buf, "\r\n\r\n");
    }
    cl = strstr(buf, "Content-Length: ");
    need = (size_t)(end + 4 - buf) + (cl != NULL ? (size_t)strtoul(cl + 16, NULL, 10) : 0);
    while (got < need && got + 1 < sizeof buf) {
        ssize_t r = recv(fd, buf + got, sizeof buf - 1 - got, 0);
        if (r <= 0) {
            return -1;
        }
        got += (size_t)r;
    }
    buf[got] = '\0';
    return raw_status(buf);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Send data one byte every step_ms until the server closes the connection
 * or limit_ms pass. @return the milliseconds until the close, -1 if none. */
static double trickle_until_closed(int fd, const char *data, long step_ms, double limit_ms)
{
    double t0 = now_ms();
    size_t n = strlen(data);

    for (size_t i = 0; now_ms() - t0 < limit_ms; i++) {
        if (send(fd, data + i % n, 1, MSG_NOSIGNAL) != 1 || peer_closed(fd)) {
            return now_ms() - t0;
        }
        /* peer_closed waited step_ms (the receive timeout) */
    }
    (void)step_ms;
    return -1;
}

/* Plain HTTP only to loopback: the host parser and the refusal, before any
 * connection is tried (192.0.2.1 is TEST-NET-1; nothing is sent there). */
static void test_insecure_http_refused(void)
{
    static const char *const loop[] = {"localhost",       "LocalHost",       "127.0.0.1",
                                       "127.1.2.3",       "127.255.255.254", "::1",
                                       "0:0:0:0:0:0:0:1", "::ffff:127.0.0.1"};
    static const char *const remote[] = {
        "",           "0.0.0.0", "192.0.2.1", "128.0.0.1",   "127.0.0.1.", "127.1",
        "2130706433", "::",      "::2",       "localhost.x", "fe80::1",    "::ffff:10.0.0.1"};
    static const char *const ok_urls[] = {"http://127.0.0.1:8443",       "http://localhost/v1",
                                          "http://[::1]:80/x?y#z",       "HTTP://127.0.0.9",
                                          "https://192.0.2.1:1/x",       "HTTPS://example.org",
                                          "http://user@127.0.0.1:1/a@b", "127.0.0.1:8443/x",
                                          "http://127.0.0.1#@192.0.2.1"};
    static const char *const bad_urls[] = {
        "http://192.0.2.1:1",          "http://192.0.2.1:1/v1/jobs",
        "http://127.0.0.1@192.0.2.1/", "http://[::2]:1",
        "http://example.org",          "192.0.2.1:1/x",
        "ftp://127.0.0.1.example/",    "http://[::1",
        "http://127.0.0.1.nip.io/",    "http://0x7f000001/"};
    struct fs_httpc_config cfg;
    struct fs_httpc_req rq = {.method = "GET", .path = "http://192.0.2.1:1/v1/jobs"};
    struct fs_httpc_resp resp;
    struct fs_err err = {0};
    fs_httpc *c = NULL;
    double t0 = 0;
    int rc = 0;

    for (size_t i = 0; i < sizeof loop / sizeof loop[0]; i++) {
        CHECK_MSG(fs_http_host_is_loopback(loop[i]) == 1, "%s", loop[i]);
    }
    for (size_t i = 0; i < sizeof remote / sizeof remote[0]; i++) {
        CHECK_MSG(fs_http_host_is_loopback(remote[i]) == 0, "%s", remote[i]);
    }
    for (size_t i = 0; i < sizeof ok_urls / sizeof ok_urls[0]; i++) {
        CHECK_MSG(fs_http_url_check(ok_urls[i], 0, &err) == 0, "%s: %s", ok_urls[i], err.msg);
    }
    for (size_t i = 0; i < sizeof bad_urls / sizeof bad_urls[0]; i++) {
        CHECK_MSG(fs_http_url_check(bad_urls[i], 0, &err) == FS_EINVAL, "%s", bad_urls[i]);
        CHECK_MSG(strstr(err.msg, "--insecure-http") != NULL, "%s: %s", bad_urls[i], err.msg);
        CHECK_MSG(fs_http_url_check(bad_urls[i], 1, &err) == 0, "%s allowed", bad_urls[i]);
    }
    CHECK(fs_http_url_check("http://192.0.2.1:1", 0, &err) == FS_EINVAL &&
          strstr(err.msg, "'192.0.2.1'") != NULL && strstr(err.msg, "https://") != NULL);

    /* a client with such a base URL is refused when it is made */
    fs_httpc_config_default(&cfg);
    cfg.base_url = "http://192.0.2.1:1";
    cfg.max_retries = 0;
    cfg.connect_timeout_ms = 3000;
    CHECK(fs_httpc_new(&c, &cfg, &err) == FS_EINVAL && c == NULL);
    CHECK(strstr(err.msg, "not a loopback address") != NULL);
    /* full URLs are checked per request, before connecting (a connection
     * attempt would take the connect timeout and fail with FS_EIO) */
    cfg.base_url = NULL;
    CHECK_OK(fs_httpc_new(&c, &cfg, &err), &err);
    t0 = now_ms();
    rc = fs_httpc_do(c, &rq, &resp, &err);
    CHECK_MSG(rc == FS_EINVAL && now_ms() - t0 < 100, "rc %d after %.0f ms: %s", rc, now_ms() - t0,
              err.msg);
    CHECK(resp.attempts == 0);
    fs_httpc_resp_clear(&resp);
    fs_httpc_free(c);
    /* the opt-in: the client is made (no request is sent to that address) */
    cfg.base_url = "http://192.0.2.1:1";
    cfg.allow_insecure_http = 1;
    CHECK_OK(fs_httpc_new(&c, &cfg, &err), &err);
    fs_httpc_free(c);
}

/* Slow clients: a per-IP cap leaves room for other clients, and a request
 * that trickles its headers or body is cut at its deadline however steadily
 * it sends; the deadline restarts for each request of a keep-alive
 * connection, grows with the declared body, and does not limit handlers. */
static void test_per_ip_cap_and_deadline(void)
{
    struct fs_http_server_config cfg;
    struct fs_err err = {0};
    fs_http_server *s = NULL;
    const struct fs_http_route routes[] = {
        {.method = "GET", .pattern = "/v1/jobs/{id}", .handler = h_job},
        {.method = "POST", .pattern = "/small", .max_body = 1024 * 1024, .handler = h_small},
        {.method = "GET", .pattern = "/slower", .handler = h_slower},
    };
    const char *partial = "GET /v1/jobs/a HTTP/1.1\r\nHost: t\r\n";
    const char *rq = "GET /v1/jobs/b HTTP/1.1\r\nHost: t\r\n\r\n";
    int fds[50];
    int closed = 0;
    uint16_t port = 0;
    double t0 = 0;
    double ms = 0;

    fs_http_server_config_default(&cfg);
    cfg.threads = 2;
    cfg.max_connections = 48; /* without the per-IP cap, 50 slow clients would hold them all */
    cfg.max_per_ip = 40;
    cfg.timeout_s = 30; /* the idle timeout plays no part below */
    cfg.request_timeout_s = 30;
    cfg.log_requests = 0;
    CHECK_OK(fs_http_server_new(&s, &cfg, &err), &err);
    if (s == NULL) {
        return;
    }
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        CHECK_OK(fs_http_server_route(s, &routes[i], &err), &err);
    }
    CHECK_OK(fs_http_server_start(s, &err), &err);
    port = fs_http_server_port(s);

    /* 50 connections from 127.0.0.1 that never finish their headers */
    for (int i = 0; i < 50; i++) {
        fds[i] = raw_connect_from("127.0.0.1", port, 50);
        if (fds[i] >= 0) {
            send_all(fds[i], partial, strlen(partial));
        }
    }
    sleep_ms(300);
    for (int i = 0; i < 50; i++) {
        closed += fds[i] < 0 || peer_closed(fds[i]);
    }
    CHECK_MSG(closed == 10, "%d of 50 closed (expected the 10 over the cap)", closed);
    CHECK_MSG(fs_http_server_connections(s) == 40, "%u connections", fs_http_server_connections(s));
    /* another client is served at once */
    {
        int fd = raw_connect_from("127.0.0.2", port, 2000);
        int st = -1;
        t0 = now_ms();
        if (fd >= 0) {
            send_all(fd, rq, strlen(rq));
            st = read_response(fd);
            close(fd);
        }
        CHECK_MSG(st == 200 && now_ms() - t0 < 1500, "127.0.0.2: status %d after %.0f ms", st,
                  now_ms() - t0);
    }
    for (int i = 0; i < 50; i++) {
        if (fds[i] >= 0) {
            close(fds[i]);
        }
    }
    fs_http_server_free(s);

    /* deadline 1 s (+ 1 s per 1000 body bytes) */
    cfg.max_connections = 16;
    cfg.max_per_ip = 0;
    cfg.request_timeout_s = 1;
    cfg.min_body_rate = 1000;
    CHECK_OK(fs_http_server_new(&s, &cfg, &err), &err);
    if (s == NULL) {
        return;
    }
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        CHECK_OK(fs_http_server_route(s, &routes[i], &err), &err);
    }
    CHECK_OK(fs_http_server_start(s, &err), &err);
    port = fs_http_server_port(s);
    {
        /* headers, one byte every 100 ms: cut after about 1 s */
        int fd = raw_connect_from("127.0.0.1", port, 100);
        CHECK(fd >= 0);
        ms = fd >= 0
                 ? trickle_until_closed(fd, "GET /v1/jobs/a HTTP/1.1\r\nX-Pad: aaaaaaaa", 100, 6000)
                 : -1;
        CHECK_MSG(ms >= 800 && ms < 2500, "headers trickle cut after %.0f ms", ms);
        if (fd >= 0) {
            close(fd);
        }
    }
    {
        /* body of 500 bytes declared: 1 s + 0.5 s; one byte every 100 ms */
        const char *h = "POST /small HTTP/1.1\r\nHost: t\r\nContent-Type: text/plain\r\n"
                        "Content-Length: 500\r\n\r\n";
        int fd = raw_connect_from("127.0.0.1", port, 100);
        CHECK(fd >= 0);
        if (fd >= 0) {
            send_all(fd, h, strlen(h));
            ms = trickle_until_closed(fd, "x", 100, 6000);
            CHECK_MSG(ms >= 1300 && ms < 3000, "body trickle cut after %.0f ms", ms);
            close(fd);
        }
    }
    {
        /* keep-alive: two requests of 0.7 s each on one connection (1.4 s in
         * all) are both served: each has its own deadline */
        int fd = raw_connect_from("127.0.0.1", port, 2000);
        int st1 = -1;
        int st2 = -1;
        CHECK(fd >= 0);
        if (fd >= 0) {
            for (int r = 0; r < 2; r++) {
                size_t n = strlen(rq);
                for (size_t i = 0; i < n; i += (n + 6) / 7) {
                    send_all(fd, rq + i, i + (n + 6) / 7 <= n ? (n + 6) / 7 : n - i);
                    sleep_ms(100);
                }
                *(r == 0 ? &st1 : &st2) = read_response(fd);
            }
            close(fd);
        }
        CHECK_MSG(st1 == 200 && st2 == 200, "keep-alive: %d, %d", st1, st2);
    }
    {
        /* a handler may take longer than the deadline (its request is in) */
        const char *slow = "GET /slower HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
        char reply[1024];
        raw_exchange(port, slow, strlen(slow), reply, sizeof reply); /* 1.5 s */
        CHECK_MSG(raw_status(reply) == 200, "slow handler: %.60s", reply);
    }
    fs_http_server_free(s);
}

static atomic_int g_hook_ok;

static void count_hook(const struct fs_http_log_entry *e, void *ctx)
{
    (void)ctx;
    if (e->status == 200 && strcmp(e->route, "/v1/jobs/{id}") == 0 &&
        strcmp(e->method, "GET") == 0 && e->completed) {
        atomic_fetch_add(&g_hook_ok, 1);
    }
}

static void test_thread_per_connection(void)
{
    struct fs_http_server_config cfg;
    struct fs_err err = {0};
    fs_http_server *s = NULL;
    struct fs_http_route r = {.method = "GET", .pattern = "/v1/jobs/{id}", .handler = h_job};
    char reply[2048];
    const char *rq = "GET /v1/jobs/tpc HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";

    fs_http_server_config_default(&cfg);
    cfg.threads = 0;
    cfg.log_requests = 0;
    cfg.on_request = count_hook;
    CHECK_OK(fs_http_server_new(&s, &cfg, &err), &err);
    if (s == NULL) {
        return;
    }
    CHECK_OK(fs_http_server_route(s, &r, &err), &err);
    CHECK_OK(fs_http_server_start(s, &err), &err);
    raw_exchange(fs_http_server_port(s), rq, strlen(rq), reply, sizeof reply);
    CHECK(raw_status(reply) == 200 && strstr(reply, "\"id\":\"tpc\"") != NULL);
    fs_http_server_free(s);
    CHECK(atomic_load(&g_hook_ok) == 1);
}

static void test_tls(void)
{
    char cmd[2048];
    char cert[512];
    char key[512];
    char other[512];
    struct fs_http_server_config cfg;
    struct fs_httpc_config ccfg;
    struct fs_err err = {0};
    fs_http_server *s = NULL;
    fs_httpc *c = NULL;
    struct fs_http_route r = {.method = "GET", .pattern = "/v1/jobs/{id}", .handler = h_job};
    struct fs_httpc_req rq = {.method = "GET", .path = "/v1/jobs/tls"};
    struct fs_httpc_resp resp;
    char url[64];
    int rc = 0;

    snprintf(cert, sizeof cert, "%s/cert.pem", g_dir);
    snprintf(key, sizeof key, "%s/key.pem", g_dir);
    snprintf(cmd, sizeof cmd,
             "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
             "-keyout %s -out %s -days 1 -subj /CN=localhost "
             "-addext subjectAltName=IP:127.0.0.1,DNS:localhost >/dev/null 2>&1",
             key, cert);
    if (system(cmd) != 0) {
        printf("  (skipped: no openssl command to make a test certificate)\n");
        return;
    }
    /* a second, unrelated CA: trusting it must not make the server's cert valid
     * (cheaper under valgrind than loading the system store) */
    snprintf(other, sizeof other, "%s/other.pem", g_dir);
    snprintf(cmd, sizeof cmd,
             "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
             "-keyout %s/other.key -out %s -days 1 -subj /CN=localhost "
             "-addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1",
             g_dir, other);
    CHECK(system(cmd) == 0);
    fs_http_server_config_default(&cfg);
    cfg.threads = 2;
    cfg.tls_cert_file = cert;
    cfg.tls_key_file = key;
    CHECK_OK(fs_http_server_new(&s, &cfg, &err), &err);
    if (s == NULL) {
        return;
    }
    CHECK_OK(fs_http_server_route(s, &r, &err), &err);
    CHECK_OK(fs_http_server_start(s, &err), &err);
    snprintf(url, sizeof url, "https://127.0.0.1:%u", (unsigned)fs_http_server_port(s));

    fs_httpc_config_default(&ccfg);
    ccfg.base_url = url;
    ccfg.max_retries = 0;
    ccfg.connect_timeout_ms = 20000; /* handshakes are slow under valgrind */
    ccfg.ca_file = other;
    CHECK_OK(fs_httpc_new(&c, &ccfg, &err), &err);
    rc = fs_httpc_do(c, &rq, &resp, &err);
    CHECK_MSG(rc == FS_ECRYPTO, "rc %d: %s", rc, err.msg); /* self-signed: not trusted */
    fs_httpc_resp_clear(&resp);
    fs_httpc_free(c);

    ccfg.ca_file = cert;
    CHECK_OK(fs_httpc_new(&c, &ccfg, &err), &err);
    CHECK_OK(fs_httpc_do(c, &rq, &resp, &err), &err);
    CHECK(resp.status == 200 && resp.body != NULL && strstr(resp.body, "\"tls\"") != NULL);
    fs_httpc_resp_clear(&resp);
    fs_httpc_free(c);

    ccfg.ca_file = NULL;
    ccfg.insecure = 1;
    CHECK_OK(fs_httpc_new(&c, &ccfg, &err), &err);
    CHECK_OK(fs_httpc_do(c, &rq, &resp, &err), &err);
    CHECK(resp.status == 200);
    fs_httpc_resp_clear(&resp);
    fs_httpc_free(c);
    fs_http_server_free(s);
}

static void test_request_log(void)
{
    char line[2048];
    int saw_template = 0;
    int leaked = 0;
    int reads_info = 0, posts_debug = 0, saw_post = 0, saw_404 = 0;

    fflush(g_log);
    rewind(g_log);
    while (fgets(line, sizeof line, g_log) != NULL) {
        json_t *j = json_loads(line, 0, NULL);
        const char *level = json_string_value(json_object_get(j, "level"));
        const char *method = json_string_value(json_object_get(j, "method"));
        json_int_t status = json_integer_value(json_object_get(j, "status"));

        CHECK_MSG(json_is_object(j), "%s", line);
        if (strstr(line, "\"route\":\"/v1/jobs/{id}/result/{name}.npy\"") != NULL &&
            strstr(line, "\"status\":200") != NULL && strstr(line, "\"ms\":") != NULL) {
            saw_template = 1;
        }
        /* reads that went well (polls) at debug; what changes state, and
         * every error, at info */
        if (method != NULL && level != NULL &&
            strcmp(json_string_value(json_object_get(j, "msg")), "request") == 0) {
            int read = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
            int good =
                status >= 200 && status < 400 && json_is_true(json_object_get(j, "completed"));

            reads_info += read && good && strcmp(level, "debug") != 0;
            posts_debug += !read && strcmp(level, "debug") == 0;
            saw_post += strcmp(method, "POST") == 0 && status == 200 && strcmp(level, "info") == 0;
            saw_404 += read && status == 404 && strcmp(level, "info") == 0;
        }
        if (strstr(line, PARTY_TOKEN) != NULL || strstr(line, "wrong-token") != NULL ||
            strstr(line, "j%2D1") != NULL || strstr(line, "U_1") != NULL) {
            leaked = 1;
        }
        json_decref(j);
    }
    CHECK(saw_template);
    CHECK(!leaked);
    CHECK_MSG(reads_info == 0, "%d successful GET/HEAD requests logged above debug", reads_info);
    CHECK_MSG(posts_debug == 0, "%d requests that change state logged at debug", posts_debug);
    CHECK(saw_post > 0 && saw_404 > 0);
    fseek(g_log, 0, SEEK_END);
}

static void *slow_client(void *arg)
{
    long *status = arg;
    fs_httpc *c = client(NULL, 0);
    struct fs_httpc_req rq = {.method = "GET", .path = "/slow"};
    struct fs_httpc_resp resp;
    struct fs_err err = {0};

    if (c != NULL && fs_httpc_do(c, &rq, &resp, &err) == 0) {
        *status = resp.status;
    }
    fs_httpc_resp_clear(&resp);
    fs_httpc_free(c);
    return NULL;
}

/* One long poll of /park?ms=N: status, seconds, and the answer's flags. */
struct park_call {
    unsigned ms;
    long status;
    double secs;
    int resumed;
    int ready;
};

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *park_client(void *arg)
{
    struct park_call *pc = arg;
    fs_httpc *c = client(NULL, 0);
    char path[64];
    struct fs_err err = {0};
    json_t *out = NULL;
    double t0 = now_s();

    snprintf(path, sizeof path, "/park?ms=%u", pc->ms);
    if (c != NULL && fs_httpc_json(c, "GET", path, NULL, &out, &pc->status, &err) == 0) {
        pc->resumed = json_is_true(json_object_get(out, "resumed"));
        pc->ready = json_is_true(json_object_get(out, "ready"));
    }
    pc->secs = now_s() - t0;
    json_decref(out);
    fs_httpc_free(c);
    return NULL;
}

/* fs_http_req_park: a parked request answers after its wait, or as soon as
 * its condition holds; parked requests hold no server thread (more of them
 * than the server's 4 threads, and other requests still answer at once). */
static void test_long_poll(void)
{
    struct park_call one = {.ms = 300};
    struct park_call many[8];
    pthread_t th[8];
    struct timespec ts = {0, 200 * 1000 * 1000};
    fs_httpc *c = NULL;
    struct fs_err err = {0};
    json_t *out = NULL;
    long status = 0;
    double t0;

    atomic_store(&g_park_ready, 0);
    park_client(&one);
    CHECK_MSG(one.status == 200 && one.resumed && !one.ready && one.secs >= 0.25 && one.secs < 5,
              "status %ld resumed %d ready %d after %.3f s", one.status, one.resumed, one.ready,
              one.secs);
    for (int i = 0; i < 8; i++) {
        many[i] = (struct park_call){.ms = 20000};
        CHECK(pthread_create(&th[i], NULL, park_client, &many[i]) == 0);
    }
    nanosleep(&ts, NULL); /* all eight parked */
    c = client(NULL, 0);
    t0 = now_s();
    CHECK_OK(fs_httpc_json(c, "GET", "/v1/jobs/x", NULL, &out, &status, &err), &err);
    CHECK_MSG(status == 200 && now_s() - t0 < 10, "status %ld after %.3f s", status, now_s() - t0);
    json_decref(out);
    fs_httpc_free(c);
    atomic_store(&g_park_ready, 1);
    for (int i = 0; i < 8; i++) {
        pthread_join(th[i], NULL);
        CHECK_MSG(many[i].status == 200 && many[i].resumed && many[i].ready && many[i].secs < 5,
                  "poll %d: status %ld resumed %d ready %d after %.3f s", i, many[i].status,
                  many[i].resumed, many[i].ready, many[i].secs);
    }
    atomic_store(&g_park_ready, 0);
}

/* fs_http_server_kick: a parked request whose condition came true answers
 * at once, not at the server's next check (here 4 s away). */
static void test_long_poll_kick(void)
{
    static const struct fs_http_route park_route = {
        .method = "GET", .pattern = "/park", .handler = h_park};
    struct fs_http_server_config cfg;
    struct park_call parked = {.ms = 20000};
    struct timespec ts = {0, 300 * 1000 * 1000};
    struct fs_err err = {0};
    fs_http_server *s = NULL;
    char base[sizeof g_base];
    pthread_t th;

    fs_http_server_kick(NULL); /* ignored */
    fs_http_server_config_default(&cfg);
    cfg.threads = 2;
    cfg.log_requests = 0;
    cfg.park_check_ms = 4000;
    CHECK_OK(fs_http_server_new(&s, &cfg, &err), &err);
    if (s == NULL) {
        return;
    }
    CHECK_OK(fs_http_server_route(s, &park_route, &err), &err);
    CHECK_OK(fs_http_server_start(s, &err), &err);
    memcpy(base, g_base, sizeof base);
    snprintf(g_base, sizeof g_base, "http://127.0.0.1:%u", (unsigned)fs_http_server_port(s));
    atomic_store(&g_park_ready, 0);
    CHECK(pthread_create(&th, NULL, park_client, &parked) == 0);
    nanosleep(&ts, NULL); /* parked, and checked once */
    atomic_store(&g_park_ready, 1);
    fs_http_server_kick(s);
    pthread_join(th, NULL);
    CHECK_MSG(parked.status == 200 && parked.resumed && parked.ready && parked.secs < 2.5,
              "kicked: status %ld resumed %d ready %d after %.3f s", parked.status, parked.resumed,
              parked.ready, parked.secs);
    atomic_store(&g_park_ready, 0);
    memcpy(g_base, base, sizeof base);
    fs_http_server_stop(s, 1000);
    fs_http_server_free(s);
}

static void test_graceful_stop(void)
{
    pthread_t th;
    pthread_t pth;
    long status = 0;
    struct park_call parked = {.ms = 20000};
    struct timespec ts = {0, 100 * 1000 * 1000};
    fs_httpc *c = NULL;
    struct fs_err err = {0};
    json_t *out = NULL;

    atomic_store(&g_park_ready, 0);
    CHECK(pthread_create(&pth, NULL, park_client, &parked) == 0);
    CHECK(pthread_create(&th, NULL, slow_client, &status) == 0);
    nanosleep(&ts, NULL); /* the request is now inside its 300 ms handler */
    fs_http_server_stop(g_srv, 5000);
    pthread_join(th, NULL);
    pthread_join(pth, NULL);
    CHECK_MSG(status == 200, "status %ld", status);
    /* a parked long poll is answered when the server stops, not after its wait */
    CHECK_MSG(parked.status == 200 && parked.resumed && parked.secs < 5,
              "parked: status %ld resumed %d after %.3f s", parked.status, parked.resumed,
              parked.secs);
    c = client(NULL, 0);
    CHECK(fs_httpc_json(c, "GET", "/v1/jobs/x", NULL, &out, NULL, &err) == FS_EIO);
    fs_httpc_free(c);
    CHECK(fs_http_server_port(g_srv) == 0);
    fs_http_server_free(g_srv);
    g_srv = NULL;
}

/* FEDSVD_SOURCE_ADDRESS: outgoing connections come from that address (a host
 * with several addresses, or the multi-host test on 127.0.0.2..9), and a
 * value that is not an IP literal is refused when the client is made. */
struct src_srv {
    int lfd;
    char peer[INET_ADDRSTRLEN];
};

static void *src_accept(void *arg)
{
    struct src_srv *S = arg;
    struct sockaddr_in a;
    socklen_t al = sizeof a;
    char buf[4096];
    const char *reply = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                        "Content-Length: 2\r\nConnection: close\r\n\r\n{}";
    int fd = accept(S->lfd, (struct sockaddr *)&a, &al);

    if (fd < 0) {
        return NULL;
    }
    inet_ntop(AF_INET, &a.sin_addr, S->peer, sizeof S->peer);
    (void)!read(fd, buf, sizeof buf);
    send_all(fd, reply, strlen(reply));
    close(fd);
    return NULL;
}

static void test_source_address(void)
{
    struct src_srv S = {.lfd = -1, .peer = ""};
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t al = sizeof a;
    struct fs_httpc_config cfg;
    struct fs_httpc_req rq = {.method = "GET", .path = "/x"};
    struct fs_httpc_resp resp = {0};
    struct fs_err err = {0};
    fs_httpc *c = NULL;
    pthread_t th;
    char url[64];

    /* a bad value: refused with the variable's name */
    setenv("FEDSVD_SOURCE_ADDRESS", "eth0", 1);
    fs_httpc_config_default(&cfg);
    CHECK(fs_httpc_new(&c, &cfg, &err) != 0 && c == NULL);
    CHECK_MSG(strstr(err.msg, "FEDSVD_SOURCE_ADDRESS") != NULL, "%s", err.msg);
    fs_err_clear(&err);

    inet_pton(AF_INET, "127.0.0.2", &a.sin_addr);
    S.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(S.lfd >= 0 && bind(S.lfd, (struct sockaddr *)&a, sizeof a) == 0 &&
          listen(S.lfd, 4) == 0 && getsockname(S.lfd, (struct sockaddr *)&a, &al) == 0);
    if (S.lfd < 0 || pthread_create(&th, NULL, src_accept, &S) != 0) {
        unsetenv("FEDSVD_SOURCE_ADDRESS");
        return;
    }
    snprintf(url, sizeof url, "http://127.0.0.2:%u", (unsigned)ntohs(a.sin_port));
    setenv("FEDSVD_SOURCE_ADDRESS", "127.0.0.7", 1);
    fs_httpc_config_default(&cfg);
    unsetenv("FEDSVD_SOURCE_ADDRESS");
    cfg.base_url = url;
    cfg.max_retries = 0;
    CHECK_OK(fs_httpc_new(&c, &cfg, &err), &err);
    if (c != NULL) {
        CHECK_OK(fs_httpc_do(c, &rq, &resp, &err), &err);
        CHECK(resp.status == 200);
        fs_httpc_resp_clear(&resp);
        fs_httpc_free(c);
    }
    pthread_join(th, NULL);
    close(S.lfd);
    CHECK_MSG(strcmp(S.peer, "127.0.0.7") == 0, "request came from %s", S.peer);
}

int main(void)
{
    struct fs_err err = {0};
    char cmd[600];
    int rc = 0;

    snprintf(g_dir, sizeof g_dir, "/tmp/test_net.XXXXXX");
    if (mkdtemp(g_dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    g_log = tmpfile();
    fs_log_set_stream(g_log);
    if (fs_auth_new(&g_auth, &err) != 0 || fs_auth_add(g_auth, ADMIN_TOKEN, "admin", &err) != 0 ||
        fs_auth_add(g_auth, PARTY_TOKEN, "party:1", &err) != 0) {
        fprintf(stderr, "auth setup: %s\n", err.msg);
        return 1;
    }
    RUN(test_log);
    RUN(test_source_address);
    RUN(test_auth_unit);
    RUN(test_parse_listen);
    RUN(test_route_registration);
    RUN(test_route_probe);
    /* every request line, each at its own level (test_request_log) */
    fs_log_set_level(FS_LOG_DEBUG);
    if (start_server() != 0) {
        fprintf(stderr, "cannot start the test server\n");
        return 1;
    }
    RUN(test_json_echo);
    RUN(test_path_params);
    RUN(test_close_after);
    RUN(test_404_405);
    RUN(test_body_caps);
    RUN(test_auth_http);
    RUN(test_stream_upload);
    RUN(test_upload_retry_and_file);
    RUN(test_file_download);
    RUN(test_retries);
    RUN(test_connect_retry);
    RUN(test_client_caps);
    RUN(test_malformed_raw);
    RUN(test_limits_and_slowloris);
    RUN(test_insecure_http_refused);
    RUN(test_per_ip_cap_and_deadline);
    RUN(test_thread_per_connection);
    RUN(test_tls);
    RUN(test_request_log);
    RUN(test_long_poll);
    RUN(test_long_poll_kick);
    RUN(test_graceful_stop);
    fs_auth_free(g_auth);
    fs_log_set_stream(NULL);
    fclose(g_log);
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "cannot remove %s\n", g_dir);
    }
    rc = TEST_END("test_net");
    return rc;
}
