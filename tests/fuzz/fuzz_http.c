/* HTTP request routing of lib/net/http_server.c without sockets
 * (fs_http_server_probe): path splitting and strict percent-decoding, route
 * matching and precedence, {param} extraction, query parsing; the bearer
 * token check of an Authorization header (lib/net/auth.c); route pattern
 * parsing (fs_http_server_route); --listen values. The routes are those of
 * the three services. Input: line 1 "METHOD TARGET", line 2 an
 * Authorization header value, line 3 a --listen value (lines optional). */
#include "fuzz.h"

#include "lib/net/auth.h"
#include "lib/net/http_server.h"

static const char *const g_routes[][2] = {
    /* aggregation-server */
    {"GET", "/healthz"},
    {"GET", "/metrics"},
    {"GET", "/"},
    {"GET", "/readyz"},
    {"GET", "/openapi.yaml"},
    {"GET", "/favicon.svg"},
    {"GET", "/dashboard.js"},
    {"GET", "/dashboard.css"},
    {"POST", "/v1/jobs"},
    {"GET", "/v1/jobs"},
    {"GET", "/v1/jobs/{job}"},
    {"DELETE", "/v1/jobs/{job}"},
    {"PUT", "/v1/jobs/{job}/maskset"},
    {"POST", "/v1/jobs/{job}/keys"},
    {"GET", "/v1/jobs/{job}/keys"},
    {"POST", "/v1/jobs/{job}/shares"},
    {"GET", "/v1/jobs/{job}/shares"},
    {"GET", "/v1/jobs/{job}/aggregations/{r}"},
    {"PUT", "/v1/jobs/{job}/aggregations/{r}/masked/{chunk}"},
    {"POST", "/v1/jobs/{job}/aggregations/{r}/consistency"},
    {"POST", "/v1/jobs/{job}/aggregations/{r}/unmask"},
    {"POST", "/v1/jobs/{job}/aggregations/{r}/exponent"},
    {"POST", "/v1/jobs/{job}/aggregations/{r}/public-exponent"},
    {"GET", "/v1/jobs/{job}/aggregations/{r}/sum.npy"},
    {"GET", "/v1/jobs/{job}/aggregations/{r}/z.npy"},
    {"GET", "/v1/jobs/{job}/exchange-key"},
    {"GET", "/v1/jobs/{job}/aggregations/{r}/selector"},
    {"POST", "/v1/jobs/{job}/aggregations/{r}/noise-response"},
    {"PUT", "/v1/jobs/{job}/aggregations/{r}/plain.npy"},
    {"GET", "/v1/jobs/{job}/result"},
    {"GET", "/v1/jobs/{job}/result/{name}.npy"},
    /* client-agent */
    {"POST", "/v1/participations"},
    {"GET", "/v1/participations"},
    {"GET", "/v1/identity"},
    {"GET", "/v1/participations/{id}"},
    {"DELETE", "/v1/participations/{id}"},
    {"GET", "/v1/participations/{id}/result"},
    {"GET", "/v1/participations/{id}/result/{name}.npy"},
    {"GET", "/v1/privacy-ledger"},
    /* masking-server */
    {"POST", "/v1/masksets"},
    {"GET", "/v1/masksets"},
    {"GET", "/v1/masksets/{maskset}"},
    {"DELETE", "/v1/masksets/{maskset}"},
    {"POST", "/v1/masksets/{maskset}/end"},
    {"GET", "/v1/masksets/{maskset}/parties/{party}/keys"},
    {"GET", "/v1/masksets/{maskset}/parties/{party}/keys/{piece}/rows.npy"},
    {"GET", "/v1/masksets/{maskset}/parties/{party}/keys/{piece}/block.npy"},
};

static const char *const g_params[] = {"job", "r",       "chunk", "name",
                                       "id",  "maskset", "party", "piece"};

static const char *const g_query[] = {"", "a", "state", "limit", "wait", "since", "format"};

static fs_http_server *g_srv;
static fs_auth *g_auth;

static int handler(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    (void)req;
    (void)resp;
    (void)ctx;
    return 0;
}

static void setup(void)
{
    struct fs_err err = {0};

    if (g_srv != NULL) {
        return;
    }
    if (fs_http_server_new(&g_srv, NULL, &err) != 0) {
        abort();
    }
    for (size_t i = 0; i < sizeof g_routes / sizeof g_routes[0]; i++) {
        struct fs_http_route r = {
            .method = g_routes[i][0], .pattern = g_routes[i][1], .handler = handler};
        if (fs_http_server_route(g_srv, &r, &err) != 0) {
            fprintf(stderr, "route %s: %s\n", g_routes[i][1], err.msg);
            abort();
        }
    }
    if (fs_auth_new(&g_auth, &err) != 0 ||
        fs_auth_add(g_auth, "fuzz-token-0123456789abcdef", "fuzz", &err) != 0) {
        abort();
    }
}

static void probe(const char *method, const char *target)
{
    const char *route = NULL;
    fs_http_req *req = NULL;
    unsigned st = fs_http_server_probe(g_srv, method, target, &route, &req);

    FUZZ_CHECK(st == 0 || st == 400 || st == 404 || st == 405 || st == 500);
    FUZZ_CHECK(st != 405 || route != NULL);
    if (st != 0) {
        FUZZ_CHECK(req == NULL);
        return;
    }
    FUZZ_CHECK(req != NULL && route != NULL && strcmp(fs_http_req_route(req), route) == 0);
    for (size_t i = 0; i < sizeof g_params / sizeof g_params[0]; i++) {
        const char *v = fs_http_req_param(req, g_params[i]);
        if (v != NULL) {
            FUZZ_CHECK(v[0] != '\0' && strchr(v, '/') == NULL);
            FUZZ_CHECK(strcmp(v, ".") != 0 && strcmp(v, "..") != 0);
            FUZZ_CHECK(strstr(route, g_params[i]) != NULL);
        }
    }
    for (size_t i = 0; i < sizeof g_query / sizeof g_query[0]; i++) {
        (void)fs_http_req_query(req, g_query[i]);
    }
    fs_http_req_probe_free(req);
}

/* The target as a route pattern of its own server: a pattern that registers
 * route a request for its own text (a {param} is then its own value). */
static void pattern(const char *method, const char *target)
{
    struct fs_err err = {0};
    fs_http_server *s = NULL;
    struct fs_http_route r = {.method = method, .pattern = target, .handler = handler};

    if (strlen(target) > 512 || fs_http_server_new(&s, NULL, &err) != 0) {
        fs_http_server_free(s);
        return;
    }
    if (fs_http_server_route(s, &r, &err) == 0) {
        const char *route = NULL;
        FUZZ_CHECK(fs_http_server_probe(s, method, target, &route, NULL) == 0);
        FUZZ_CHECK(route != NULL && strcmp(route, target) == 0);
    }
    fs_http_server_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *in = NULL;
    char *line[3] = {NULL, NULL, NULL};
    char *sp = NULL;
    const char *method = "GET";
    const char *target = NULL;
    char *p = NULL;

    if (size > 8192) {
        return 0;
    }
    setup();
    in = fuzz_str(data, size);
    p = in;
    for (int i = 0; i < 3 && p != NULL; i++) {
        char *nl = strchr(p, '\n');
        line[i] = p;
        if (nl != NULL) {
            *nl = '\0';
        }
        p = nl != NULL ? nl + 1 : NULL;
    }
    sp = strchr(line[0], ' ');
    if (sp != NULL) {
        *sp = '\0';
        method = line[0];
        target = sp + 1;
    } else {
        target = line[0];
    }
    probe(method, target);
    pattern(method, target);
    if (line[1] != NULL) {
        struct fs_err err = {0};
        char label[FS_AUTH_LABEL_MAX];
        const char *tok = NULL;
        size_t tlen = 0;
        int rc = fs_auth_check_header(g_auth, line[1], label, &err);
        FUZZ_CHECK(rc != 0 || strcmp(label, "fuzz") == 0);
        if (fs_auth_parse_bearer(line[1], &tok, &tlen, &err) == 0) {
            FUZZ_CHECK(tok >= line[1] && tok + tlen <= line[1] + strlen(line[1]));
        }
    }
    if (line[2] != NULL) {
        struct fs_err err = {0};
        char host[256];
        uint16_t port = 0;
        if (fs_http_parse_listen(line[2], host, sizeof host, &port, &err) == 0) {
            FUZZ_CHECK(strlen(host) < sizeof host);
        }
    }
    free(in);
    return 0;
}
