#include "http_server.h"
#include "../core/hex.h"

#include "log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TLS_FILE_MAX     (1024 * 1024)
#define INITIAL_BODY_MAX (64 * 1024)

enum {
    M_GET = 1u << 0,
    M_HEAD = 1u << 1,
    M_POST = 1u << 2,
    M_PUT = 1u << 3,
    M_DELETE = 1u << 4,
    M_PATCH = 1u << 5,
    M_OTHER = 1u << 6
};

static const struct {
    const char *name;
    unsigned bit;
} g_methods[] = {{"GET", M_GET}, {"HEAD", M_HEAD},     {"POST", M_POST},
                 {"PUT", M_PUT}, {"DELETE", M_DELETE}, {"PATCH", M_PATCH}};

/* A pattern segment: a literal (name == NULL, text in lit) or a parameter
 * with optional literal prefix (lit) and suffix. */
struct seg {
    char *lit;
    char *name;
    char *suffix;
};

struct route {
    struct fs_http_route r; /* r.method and r.pattern point at the copies below */
    char *method;
    char *pattern;
    unsigned mbit;
    struct seg segs[FS_HTTP_MAX_SEGMENTS];
    size_t nsegs;
};

/* A connection under the request deadline (see http_server.h), from
 * libmicrohttpd's connection-started to connection-closed notification; the
 * socket is closed only after the latter, so the watchdog may shut it down
 * while the entry is in the list. Fields under the server's tmu. */
struct conn_track {
    struct conn_track *prev;
    struct conn_track *next;
    int fd;
    int cut;             /* the watchdog shut it down */
    int64_t start_ms;    /* when the connection became ready for its current request */
    int64_t deadline_ms; /* 0: none (request complete, handler or response running) */
    char addr[INET6_ADDRSTRLEN];
};

struct fs_http_server {
    struct fs_http_server_config cfg;
    char *host;
    char *tls_cert;
    char *tls_key;
    struct route *routes;
    size_t nroutes;
    struct MHD_Daemon *d;
    uint16_t port;
    atomic_long in_flight;
    atomic_int running;
    /* request deadlines: the tracked connections and their watchdog */
    pthread_mutex_t tmu;
    pthread_cond_t tcv;
    struct conn_track *tracks;
    pthread_t watchdog;
    int have_watchdog;
    int wd_stop;
    /* long polls: the parked (suspended) requests and the thread that wakes them */
    pthread_mutex_t pmu;
    pthread_cond_t pcv;
    struct fs_http_req *parked;
    pthread_t parker;
    int have_parker;
    int pk_stop;          /* no more parking: wake every parked request now */
    int pk_exit;          /* the parker thread ends */
    atomic_int pk_kicked; /* fs_http_server_kick: check the parked requests again now */
};

struct fs_http_resp {
    struct MHD_Response *mr;
    unsigned status;
    uint64_t len;
};

struct kv {
    char *k;
    char *v;
};

struct fs_http_req {
    fs_http_server *srv;
    struct MHD_Connection *conn;
    struct conn_track *track; /* NULL: no request deadline */
    const struct route *route;
    const char *method_name; /* static string, safe to log */
    const char *method_raw;  /* libmicrohttpd's copy, valid during the request */
    char *path;
    struct kv params[FS_HTTP_MAX_PARAMS];
    size_t nparams;
    struct kv query[FS_HTTP_MAX_QUERY];
    size_t nquery;
    int query_bad;
    char *body;
    size_t blen;
    size_t bcap;
    uint64_t received;
    uint64_t cl;
    int has_cl;
    int has_body;
    int expect100;
    int draining;
    uint64_t drained;
    int queued;
    int close_after; /* fs_http_req_close_after: the response says Connection: close */
    unsigned status_sent;
    uint64_t bytes_out;
    char auth_label[FS_AUTH_LABEL_MAX];
    void *user;
    void (*user_free)(void *);
    struct fs_http_resp resp;
    struct timespec t0;
    /* long poll (fs_http_req_park) */
    int (*pk_ready)(void *ctx);
    void *pk_ctx;
    int64_t pk_until_ms;
    int pk_want;    /* the handler asked to park the request */
    int pk_resumed; /* the wait is over: the handler runs again and answers */
    struct fs_http_req *pk_next;
};

/* ------------------------------------------------------------------ config */

void fs_http_server_config_default(struct fs_http_server_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->host = "127.0.0.1";
    cfg->port = 0;
    cfg->threads = 4;
    cfg->max_connections = 256;
    cfg->max_per_ip = 0;
    cfg->timeout_s = 30;
    cfg->request_timeout_s = 300;
    cfg->min_body_rate = 64 * 1024;
    cfg->conn_memory_limit = 64 * 1024;
    cfg->drain_max = 1024 * 1024;
    cfg->log_requests = 1;
}

static int parse_port(const char *s, uint16_t *port)
{
    char *end = NULL;
    unsigned long v = 0;

    if (*s < '0' || *s > '9') {
        return -1;
    }
    errno = 0;
    v = strtoul(s, &end, 10);
    if (errno != 0 || *end != '\0' || v > 65535) {
        return -1;
    }
    *port = (uint16_t)v;
    return 0;
}

int fs_http_parse_listen(const char *s, char *host, size_t hostcap, uint16_t *port,
                         struct fs_err *err)
{
    const char *colon = NULL;
    const char *h = NULL;
    size_t hlen = 0;

    if (s == NULL || hostcap == 0) {
        return fs_err_set(err, FS_EINVAL, "listen address: missing");
    }
    if (s[0] == '[') {
        const char *close_br = strchr(s, ']');
        if (close_br == NULL || close_br[1] != ':') {
            return fs_err_set(err, FS_EINVAL, "listen address '%s': expected [IPv6]:PORT", s);
        }
        h = s + 1;
        hlen = (size_t)(close_br - h);
        colon = close_br + 1;
    } else {
        colon = strrchr(s, ':');
        if (colon == NULL) {
            return fs_err_set(err, FS_EINVAL, "listen address '%s': expected HOST:PORT", s);
        }
        h = s;
        hlen = (size_t)(colon - s);
        if (memchr(h, ':', hlen) != NULL) {
            return fs_err_set(err, FS_EINVAL, "listen address '%s': put IPv6 hosts in brackets", s);
        }
    }
    if (parse_port(colon + 1, port) != 0) {
        return fs_err_set(err, FS_EINVAL, "listen address '%s': bad port", s);
    }
    if (hlen == 0) {
        h = "0.0.0.0";
        hlen = 7;
    }
    if (hlen >= hostcap) {
        return fs_err_set(err, FS_EINVAL, "listen address '%s': host too long", s);
    }
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    return 0;
}

/* ------------------------------------------------------------------ routes */

static unsigned method_bit(const char *m)
{
    for (size_t i = 0; i < sizeof g_methods / sizeof g_methods[0]; i++) {
        if (strcmp(m, g_methods[i].name) == 0) {
            return g_methods[i].bit;
        }
    }
    return M_OTHER;
}

static const char *method_name(unsigned bit)
{
    for (size_t i = 0; i < sizeof g_methods / sizeof g_methods[0]; i++) {
        if (g_methods[i].bit == bit) {
            return g_methods[i].name;
        }
    }
    return "OTHER";
}

static void route_clear(struct route *rt)
{
    free(rt->method);
    free(rt->pattern);
    for (size_t i = 0; i < rt->nsegs; i++) {
        free(rt->segs[i].lit);
        free(rt->segs[i].name);
        free(rt->segs[i].suffix);
    }
    memset(rt, 0, sizeof *rt);
}

static int valid_param_name(const char *p, size_t n)
{
    if (n == 0) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_')) {
            return 0;
        }
    }
    return 1;
}

/* Parse one pattern segment [s, s+n) into sg. */
static int parse_seg(const char *s, size_t n, struct seg *sg, size_t *nparams)
{
    const char *open = memchr(s, '{', n);
    const char *close = memchr(s, '}', n);

    if (n == 0) {
        return -1;
    }
    if (open == NULL && close == NULL) {
        sg->lit = strndup(s, n);
        return sg->lit != NULL ? 0 : -1;
    }
    if (open == NULL || close == NULL || close < open) {
        return -1;
    }
    if (memchr(open + 1, '{', (size_t)(s + n - open - 1)) != NULL ||
        memchr(close + 1, '}', (size_t)(s + n - close - 1)) != NULL ||
        !valid_param_name(open + 1, (size_t)(close - open - 1))) {
        return -1;
    }
    if (*nparams >= FS_HTTP_MAX_PARAMS) {
        return -1;
    }
    (*nparams)++;
    sg->lit = strndup(s, (size_t)(open - s));
    sg->name = strndup(open + 1, (size_t)(close - open - 1));
    sg->suffix = strndup(close + 1, (size_t)(s + n - close - 1));
    return sg->lit != NULL && sg->name != NULL && sg->suffix != NULL ? 0 : -1;
}

static int parse_pattern(const char *pattern, struct route *rt)
{
    const char *p = pattern;
    size_t nparams = 0;

    if (pattern[0] != '/' || strchr(pattern, '?') != NULL || strchr(pattern, '%') != NULL) {
        return -1;
    }
    if (strcmp(pattern, "/") == 0) {
        return 0;
    }
    while (*p == '/') {
        const char *start = p + 1;
        const char *end = strchr(start, '/');
        size_t n = end != NULL ? (size_t)(end - start) : strlen(start);
        if (rt->nsegs >= FS_HTTP_MAX_SEGMENTS) {
            return -1;
        }
        if (parse_seg(start, n, &rt->segs[rt->nsegs], &nparams) != 0) {
            rt->nsegs++; /* so route_clear frees a partial segment */
            return -1;
        }
        rt->nsegs++;
        p = start + n;
    }
    return 0;
}

int fs_http_server_route(fs_http_server *s, const struct fs_http_route *route, struct fs_err *err)
{
    struct route rt;
    struct route *nv = NULL;

    memset(&rt, 0, sizeof rt);
    if (atomic_load(&s->running) || s->d != NULL) {
        return fs_err_set(err, FS_ESTATE, "http: routes must be added before start");
    }
    if (route == NULL || route->method == NULL || route->pattern == NULL ||
        route->handler == NULL) {
        return fs_err_set(err, FS_EINVAL, "http: route needs method, pattern and handler");
    }
    rt.mbit = method_bit(route->method);
    if (rt.mbit == M_OTHER || rt.mbit == M_HEAD) {
        return fs_err_set(err, FS_EINVAL, "http: route %s %s: unsupported method", route->method,
                          route->pattern);
    }
    for (size_t i = 0; i < s->nroutes; i++) {
        if (s->routes[i].mbit == rt.mbit && strcmp(s->routes[i].pattern, route->pattern) == 0) {
            return fs_err_set(err, FS_EINVAL, "http: route %s %s registered twice", route->method,
                              route->pattern);
        }
    }
    rt.r = *route;
    rt.method = strdup(route->method);
    rt.pattern = strdup(route->pattern);
    if (rt.method == NULL || rt.pattern == NULL) {
        route_clear(&rt);
        return fs_err_set(err, FS_ENOMEM, "http: out of memory");
    }
    if (parse_pattern(rt.pattern, &rt) != 0) {
        route_clear(&rt);
        return fs_err_set(err, FS_EINVAL, "http: bad route pattern '%s'", route->pattern);
    }
    rt.r.method = rt.method;
    rt.r.pattern = rt.pattern;
    nv = realloc(s->routes, (s->nroutes + 1) * sizeof *nv);
    if (nv == NULL) {
        route_clear(&rt);
        return fs_err_set(err, FS_ENOMEM, "http: out of memory");
    }
    s->routes = nv;
    s->routes[s->nroutes++] = rt;
    return 0;
}

/* ------------------------------------------------------------ path decoding */

/* Strict percent-decoding of n bytes into a new string: "%" must be
 * followed by two hex digits and must not decode to NUL. */
static char *pct_decode(const char *s, size_t n)
{
    char *out = malloc(n + 1);
    size_t o = 0;

    if (out == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '%') {
            int hi = i + 1 < n ? fs_hex_digit(s[i + 1]) : -1;
            int lo = i + 2 < n ? fs_hex_digit(s[i + 2]) : -1;
            if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
                free(out);
                return NULL;
            }
            out[o++] = (char)(hi * 16 + lo);
            i += 2;
        } else {
            out[o++] = s[i];
        }
    }
    out[o] = '\0';
    return out;
}

struct pathsegs {
    char *v[FS_HTTP_MAX_SEGMENTS];
    size_t n;
};

static void pathsegs_free(struct pathsegs *ps)
{
    for (size_t i = 0; i < ps->n; i++) {
        free(ps->v[i]);
    }
    ps->n = 0;
}

/* Split a raw path into decoded segments. @return 0, -1 malformed, -2 too many/ENOMEM. */
static int split_path(const char *path, struct pathsegs *ps)
{
    const char *p = path;

    ps->n = 0;
    if (path[0] != '/') {
        return -1;
    }
    if (strcmp(path, "/") == 0) {
        return 0;
    }
    while (*p == '/') {
        const char *start = p + 1;
        const char *end = strchr(start, '/');
        size_t n = end != NULL ? (size_t)(end - start) : strlen(start);
        if (ps->n >= FS_HTTP_MAX_SEGMENTS) {
            return -2;
        }
        ps->v[ps->n] = pct_decode(start, n);
        if (ps->v[ps->n] == NULL) {
            return -1;
        }
        ps->n++;
        p = start + n;
    }
    return 0;
}

static int bad_param_value(const char *v, size_t n)
{
    return n == 0 || memchr(v, '/', n) != NULL || (n == 1 && v[0] == '.') ||
           (n == 2 && v[0] == '.' && v[1] == '.');
}

/* Does rt match the segments? *bad set when it matches structurally but a
 * parameter value is not acceptable. */
static int route_matches(const struct route *rt, const struct pathsegs *ps, int *bad)
{
    if (rt->nsegs != ps->n) {
        return 0;
    }
    for (size_t i = 0; i < rt->nsegs; i++) {
        const struct seg *sg = &rt->segs[i];
        const char *v = ps->v[i];
        size_t vn = strlen(v);
        size_t pl = strlen(sg->lit);
        size_t sl = 0;
        if (sg->name == NULL) {
            if (strcmp(sg->lit, v) != 0) {
                return 0;
            }
            continue;
        }
        sl = strlen(sg->suffix);
        if (vn < pl + sl + 1 || strncmp(v, sg->lit, pl) != 0 ||
            strcmp(v + vn - sl, sg->suffix) != 0) {
            return 0;
        }
        if (bad_param_value(v + pl, vn - pl - sl)) {
            *bad = 1;
            return 0;
        }
    }
    return 1;
}

/* Negative when a is more specific than b (literal > affixed param > param, leftmost first). */
static int specificity_cmp(const struct route *a, const struct route *b)
{
    for (size_t i = 0; i < a->nsegs && i < b->nsegs; i++) {
        int sa = a->segs[i].name == NULL ? 2 : (a->segs[i].lit[0] || a->segs[i].suffix[0]);
        int sb = b->segs[i].name == NULL ? 2 : (b->segs[i].lit[0] || b->segs[i].suffix[0]);
        if (sa != sb) {
            return sb - sa;
        }
    }
    return 0;
}

static int extract_params(fs_http_req *req, const struct pathsegs *ps)
{
    const struct route *rt = req->route;

    for (size_t i = 0; i < rt->nsegs; i++) {
        const struct seg *sg = &rt->segs[i];
        size_t pl = 0;
        size_t sl = 0;
        size_t vn = 0;
        if (sg->name == NULL) {
            continue;
        }
        pl = strlen(sg->lit);
        sl = strlen(sg->suffix);
        vn = strlen(ps->v[i]);
        req->params[req->nparams].k = sg->name; /* borrowed from the route */
        req->params[req->nparams].v = strndup(ps->v[i] + pl, vn - pl - sl);
        if (req->params[req->nparams].v == NULL) {
            return -1;
        }
        req->nparams++;
    }
    return 0;
}

/* ---------------------------------------------------------------- responses */

static void resp_reset(fs_http_resp *resp)
{
    if (resp->mr != NULL) {
        MHD_destroy_response(resp->mr);
    }
    resp->mr = NULL;
    resp->status = 0;
    resp->len = 0;
}

static int resp_set(fs_http_resp *resp, unsigned status, struct MHD_Response *mr, uint64_t len,
                    const char *content_type)
{
    if (mr == NULL) {
        return FS_ENOMEM;
    }
    if (content_type != NULL &&
        MHD_add_response_header(mr, MHD_HTTP_HEADER_CONTENT_TYPE, content_type) != MHD_YES) {
        MHD_destroy_response(mr);
        return FS_EINVAL;
    }
    resp_reset(resp);
    resp->mr = mr;
    resp->status = status;
    resp->len = len;
    return 0;
}

int fs_http_resp_is_set(const fs_http_resp *resp)
{
    return resp != NULL && resp->mr != NULL;
}

int fs_http_resp_bytes(fs_http_resp *resp, unsigned status, const char *content_type,
                       const void *data, size_t len)
{
    struct MHD_Response *mr = NULL;

    if (len > 0 && data == NULL) {
        return FS_EINVAL;
    }
    mr = MHD_create_response_from_buffer(len, (void *)(len > 0 ? data : ""), MHD_RESPMEM_MUST_COPY);
    return resp_set(resp, status, mr, len, content_type);
}

static void free_cb(void *p)
{
    free(p);
}

int fs_http_resp_bytes_owned(fs_http_resp *resp, unsigned status, const char *content_type,
                             void *data, size_t len)
{
    struct MHD_Response *mr = NULL;

    if (data == NULL) {
        return len == 0 ? fs_http_resp_bytes(resp, status, content_type, NULL, 0) : FS_EINVAL;
    }
    mr = MHD_create_response_from_buffer_with_free_callback(len, data, free_cb);
    if (mr == NULL) {
        free(data);
        return FS_ENOMEM;
    }
    return resp_set(resp, status, mr, len, content_type);
}

int fs_http_resp_json(fs_http_resp *resp, unsigned status, json_t *body)
{
    char *s = NULL;

    if (body == NULL) {
        return FS_EINVAL;
    }
    s = json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY);
    json_decref(body);
    if (s == NULL) {
        return FS_ENOMEM;
    }
    return fs_http_resp_bytes_owned(resp, status, "application/json", s, strlen(s));
}

int fs_http_resp_empty(fs_http_resp *resp, unsigned status)
{
    return fs_http_resp_bytes(resp, status, NULL, NULL, 0);
}

int fs_http_resp_fd(fs_http_resp *resp, unsigned status, const char *content_type, int fd,
                    uint64_t size)
{
    struct MHD_Response *mr = NULL;

    if (fd < 0) {
        return FS_EINVAL;
    }
    mr = MHD_create_response_from_fd64(size, fd);
    if (mr == NULL) {
        close(fd);
        return FS_ENOMEM;
    }
    return resp_set(resp, status, mr, size, content_type);
}

int fs_http_resp_file(fs_http_resp *resp, unsigned status, const char *content_type,
                      const char *path, struct fs_err *err)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    int rc = 0;

    if (fd < 0) {
        return fs_err_set(err, errno == ENOENT ? FS_ENOTFOUND : FS_EIO, "%s: %s", path,
                          strerror(errno));
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return fs_err_set(err, FS_EIO, "%s: not a regular file", path);
    }
    rc = fs_http_resp_fd(resp, status, content_type, fd, (uint64_t)st.st_size);
    if (rc != 0) {
        return fs_err_set(err, rc, "%s: cannot create response", path);
    }
    return 0;
}

static int add_header(fs_http_resp *resp, const char *name, const char *value)
{
    if (resp->mr == NULL) {
        return FS_ESTATE;
    }
    return MHD_add_response_header(resp->mr, name, value) == MHD_YES ? 0 : FS_EINVAL;
}

int fs_http_resp_header(fs_http_resp *resp, const char *name, const char *value)
{
    return add_header(resp, name, value);
}

static const char *reason(unsigned status)
{
    const char *r = MHD_get_reason_phrase_for(status);
    return r != NULL && r[0] != '\0' ? r : "Error";
}

int fs_http_problem(fs_http_resp *resp, unsigned status, const char *code, const char *title,
                    const char *detail_fmt, ...)
{
    char type[160];
    char detail[1024];
    json_t *o = NULL;
    char *s = NULL;
    va_list ap;

    if (code == NULL) {
        code = "error";
    }
    snprintf(type, sizeof type, "%s%s", FS_HTTP_PROBLEM_TYPE_PREFIX, code);
    o = json_pack("{s:s, s:s, s:i}", "type", type, "title", title != NULL ? title : reason(status),
                  "status", (int)status);
    if (o == NULL) {
        goto fail;
    }
    if (detail_fmt != NULL) {
        json_t *d = NULL;
        va_start(ap, detail_fmt);
        vsnprintf(detail, sizeof detail, detail_fmt, ap);
        va_end(ap);
        d = json_string(detail);
        if (d == NULL) {
            /* invalid UTF-8 (e.g. echoed client bytes): keep ASCII only */
            for (char *p = detail; *p != '\0'; p++) {
                if ((unsigned char)*p >= 0x80) {
                    *p = '?';
                }
            }
            d = json_string(detail);
        }
        json_object_set_new(o, "detail", d);
    }
    json_object_set_new(o, "code", json_string(code));
    s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (s == NULL) {
        goto fail;
    }
    if (fs_http_resp_bytes_owned(resp, status, "application/problem+json", s, strlen(s)) != 0) {
        goto fail;
    }
    return 0;
fail:
    resp_reset(resp);
    return FS_ENOMEM;
}

/* ------------------------------------------------------------------ request */

const char *fs_http_req_method(const fs_http_req *req)
{
    return req->method_raw;
}

const char *fs_http_req_path(const fs_http_req *req)
{
    return req->path;
}

const char *fs_http_req_route(const fs_http_req *req)
{
    return req->route != NULL ? req->route->pattern : "-";
}

const char *fs_http_req_param(const fs_http_req *req, const char *name)
{
    for (size_t i = 0; i < req->nparams; i++) {
        if (strcmp(req->params[i].k, name) == 0) {
            return req->params[i].v;
        }
    }
    return NULL;
}

const char *fs_http_req_query(const fs_http_req *req, const char *name)
{
    for (size_t i = 0; i < req->nquery; i++) {
        if (strcmp(req->query[i].k, name) == 0) {
            return req->query[i].v;
        }
    }
    return NULL;
}

const char *fs_http_req_header(const fs_http_req *req, const char *name)
{
    return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}

int fs_http_req_content_type_is(const fs_http_req *req, const char *media_type)
{
    const char *ct = fs_http_req_header(req, MHD_HTTP_HEADER_CONTENT_TYPE);
    size_t n = strlen(media_type);

    if (ct == NULL) {
        return 0;
    }
    while (*ct == ' ' || *ct == '\t') {
        ct++;
    }
    if (strncasecmp(ct, media_type, n) != 0) {
        return 0;
    }
    ct += n;
    while (*ct == ' ' || *ct == '\t') {
        ct++;
    }
    return *ct == '\0' || *ct == ';';
}

int fs_http_req_content_length(const fs_http_req *req, uint64_t *len)
{
    if (!req->has_cl) {
        return 0;
    }
    *len = req->cl;
    return 1;
}

const char *fs_http_req_body(const fs_http_req *req, size_t *len)
{
    *len = req->body != NULL ? req->blen : 0;
    return req->body;
}

uint64_t fs_http_req_bytes_received(const fs_http_req *req)
{
    return req->received;
}

static int is_json_type(const fs_http_req *req)
{
    const char *ct = fs_http_req_header(req, MHD_HTTP_HEADER_CONTENT_TYPE);
    const char *semi = NULL;
    size_t n = 0;

    if (ct == NULL) {
        return 0;
    }
    if (fs_http_req_content_type_is(req, "application/json")) {
        return 1;
    }
    semi = strchr(ct, ';');
    n = semi != NULL ? (size_t)(semi - ct) : strlen(ct);
    while (n > 0 && (ct[n - 1] == ' ' || ct[n - 1] == '\t')) {
        n--;
    }
    return n > 5 && strncasecmp(ct + n - 5, "+json", 5) == 0;
}

int fs_http_req_json(const fs_http_req *req, json_t **out, struct fs_err *err)
{
    json_error_t jerr;

    *out = NULL;
    if (!is_json_type(req)) {
        return fs_err_set(err, FS_EINVAL, "Content-Type must be application/json");
    }
    if (req->body == NULL || req->blen == 0) {
        return fs_err_set(err, FS_EFORMAT, "empty request body");
    }
    *out = json_loadb(req->body, req->blen, JSON_REJECT_DUPLICATES, &jerr);
    if (*out == NULL) {
        return fs_err_set(err, FS_EFORMAT, "invalid JSON at line %d column %d: %s", jerr.line,
                          jerr.column, jerr.text);
    }
    return 0;
}

const char *fs_http_req_auth_label(const fs_http_req *req)
{
    return req->auth_label;
}

void fs_http_req_set_user(fs_http_req *req, void *user, void (*free_fn)(void *user))
{
    if (req->user_free != NULL && req->user != NULL && req->user != user) {
        req->user_free(req->user);
    }
    req->user = user;
    req->user_free = free_fn;
}

void *fs_http_req_user(const fs_http_req *req)
{
    return req->user;
}

static void req_free(fs_http_req *req)
{
    if (req == NULL) {
        return;
    }
    if (req->user_free != NULL && req->user != NULL) {
        req->user_free(req->user);
    }
    resp_reset(&req->resp);
    for (size_t i = 0; i < req->nparams; i++) {
        free(req->params[i].v);
    }
    for (size_t i = 0; i < req->nquery; i++) {
        free(req->query[i].k);
        free(req->query[i].v);
    }
    free(req->body);
    free(req->path);
    free(req);
}

/* ---------------------------------------------------------------- dispatch */

static enum MHD_Result collect_query(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value)
{
    fs_http_req *req = cls;
    char *k = NULL;
    char *v = NULL;

    (void)kind;
    if (req->nquery >= FS_HTTP_MAX_QUERY) {
        req->query_bad = 1;
        return MHD_NO;
    }
    k = pct_decode(key, strlen(key));
    v = value != NULL ? pct_decode(value, strlen(value)) : strdup("");
    if (k == NULL || v == NULL) {
        free(k);
        free(v);
        req->query_bad = 1;
        return MHD_NO;
    }
    req->query[req->nquery].k = k;
    req->query[req->nquery].v = v;
    req->nquery++;
    return MHD_YES;
}

/* Build the Allow header value for every route sharing rt's pattern. */
static void allow_list(const fs_http_server *s, const struct route *rt, char *buf, size_t cap)
{
    size_t o = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < s->nroutes; i++) {
        const struct route *r = &s->routes[i];
        if (strcmp(r->pattern, rt->pattern) != 0) {
            continue;
        }
        int n = snprintf(buf + o, cap - o, "%s%s%s", o > 0 ? ", " : "", r->method,
                         r->mbit == M_GET ? ", HEAD" : "");
        if (n < 0 || (size_t)n >= cap - o) {
            break;
        }
        o += (size_t)n;
    }
}

/* Route the request: sets req->route or a problem response. */
static void route_request(fs_http_req *req, const char *url)
{
    fs_http_server *s = req->srv;
    struct pathsegs ps;
    const struct route *best = NULL;
    const struct route *hit = NULL;
    int bad = 0;
    int rc = split_path(url, &ps);

    if (rc != 0) {
        if (rc == -2) {
            (void)fs_http_problem(&req->resp, 404, "not_found", NULL, "no such resource");
        } else {
            (void)fs_http_problem(&req->resp, 400, "bad_path", NULL,
                                  "malformed percent-encoding in the path");
        }
        goto out;
    }
    for (size_t i = 0; i < s->nroutes; i++) {
        const struct route *r = &s->routes[i];
        if (route_matches(r, &ps, &bad) && (best == NULL || specificity_cmp(r, best) < 0)) {
            best = r;
        }
    }
    if (best == NULL) {
        if (bad) {
            (void)fs_http_problem(&req->resp, 400, "bad_path", NULL,
                                  "invalid path parameter value");
        } else {
            (void)fs_http_problem(&req->resp, 404, "not_found", NULL, "no such resource");
        }
        goto out;
    }
    for (size_t i = 0; i < s->nroutes; i++) {
        const struct route *r = &s->routes[i];
        unsigned want = req->method_name != NULL ? method_bit(req->method_name) : M_OTHER;
        if (strcmp(r->pattern, best->pattern) != 0) {
            continue;
        }
        if (r->mbit == want || (want == M_HEAD && r->mbit == M_GET)) {
            hit = r;
            break;
        }
    }
    if (hit == NULL) {
        char allow[128];
        allow_list(s, best, allow, sizeof allow);
        if (fs_http_problem(&req->resp, 405, "method_not_allowed", NULL,
                            "method not allowed on this resource") == 0) {
            (void)add_header(&req->resp, MHD_HTTP_HEADER_ALLOW, allow);
        }
        req->route = best; /* for the log line */
        goto out;
    }
    req->route = hit;
    if (extract_params(req, &ps) != 0) {
        (void)fs_http_problem(&req->resp, 500, "out_of_memory", NULL, "out of memory");
    }
out:
    pathsegs_free(&ps);
}

static int parse_u64(const char *s, uint64_t *out)
{
    char *end = NULL;
    unsigned long long v = 0;

    while (*s == ' ' || *s == '\t') {
        s++;
    }
    if (*s < '0' || *s > '9') {
        return -1;
    }
    errno = 0;
    v = strtoull(s, &end, 10);
    while (*end == ' ' || *end == '\t') {
        end++;
    }
    if (errno != 0 || *end != '\0') {
        return -1;
    }
    *out = (uint64_t)v;
    return 0;
}

static void read_body_headers(fs_http_req *req)
{
    const char *cl = fs_http_req_header(req, MHD_HTTP_HEADER_CONTENT_LENGTH);
    const char *te = fs_http_req_header(req, MHD_HTTP_HEADER_TRANSFER_ENCODING);
    const char *ex = fs_http_req_header(req, MHD_HTTP_HEADER_EXPECT);

    if (cl != NULL && parse_u64(cl, &req->cl) == 0) {
        req->has_cl = 1;
    }
    /* libmicrohttpd accepts only the chunked transfer coding */
    req->has_body = (req->has_cl && req->cl > 0) || te != NULL;
    req->expect100 = ex != NULL && strcasecmp(ex, "100-continue") == 0;
}

/* ------------------------------------------------------- request deadlines */

static int64_t mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Arm t's deadline: restart = 1 counts from now (the connection is ready for
 * a new request), else from the current request's start; body bytes add
 * body / min_body_rate seconds. */
static void track_arm(fs_http_server *s, struct conn_track *t, int restart, uint64_t body)
{
    int64_t extra = 0;

    if (s->cfg.min_body_rate > 0) {
        extra = (int64_t)(body / s->cfg.min_body_rate) * 1000 +
                (int64_t)(body % s->cfg.min_body_rate) * 1000 / s->cfg.min_body_rate;
    }
    pthread_mutex_lock(&s->tmu);
    if (restart) {
        t->start_ms = mono_ms();
    }
    t->deadline_ms = t->start_ms + (int64_t)s->cfg.request_timeout_s * 1000 + extra;
    pthread_mutex_unlock(&s->tmu);
}

static void track_disarm(fs_http_server *s, struct conn_track *t)
{
    pthread_mutex_lock(&s->tmu);
    t->deadline_ms = 0;
    pthread_mutex_unlock(&s->tmu);
}

/* The request's body allowance changed (headers in, chunked bytes came):
 * the declared length, or what came so far, at most what the framework
 * reads before it closes (max_body + drain_max). */
static void deadline_update(fs_http_req *req)
{
    uint64_t cap = req->srv->cfg.drain_max;
    uint64_t body = req->has_cl ? req->cl : req->received;

    if (req->track == NULL || req->queued) {
        return;
    }
    if (req->route != NULL) {
        cap += req->route->r.max_body;
    }
    track_arm(req->srv, req->track, 0, body < cap ? body : cap);
}

/* The client's address as text ("" when unknown). */
static void peer_addr(struct MHD_Connection *conn, char *out, size_t cap)
{
    const union MHD_ConnectionInfo *ca =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);

    out[0] = '\0';
    if (ca == NULL || ca->client_addr == NULL) {
        return;
    }
    if (ca->client_addr->sa_family == AF_INET) {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)ca->client_addr)->sin_addr,
                  out, (socklen_t)cap);
    } else if (ca->client_addr->sa_family == AF_INET6) {
        inet_ntop(AF_INET6,
                  &((const struct sockaddr_in6 *)(const void *)ca->client_addr)->sin6_addr, out,
                  (socklen_t)cap);
    }
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    fs_http_server *s = cls;
    struct conn_track *t = *socket_context;

    if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        if (t != NULL) {
            pthread_mutex_lock(&s->tmu);
            if (t->prev != NULL) {
                t->prev->next = t->next;
            } else {
                s->tracks = t->next;
            }
            if (t->next != NULL) {
                t->next->prev = t->prev;
            }
            pthread_mutex_unlock(&s->tmu);
            free(t);
            *socket_context = NULL;
        }
        return;
    }
    if (toe != MHD_CONNECTION_NOTIFY_STARTED || s->cfg.request_timeout_s == 0) {
        return;
    }
    t = calloc(1, sizeof *t);
    if (t == NULL) {
        fs_log(FS_LOG_WARN, "out of memory: a connection has no request deadline", NULL);
        return;
    }
    {
        const union MHD_ConnectionInfo *fd =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (fd == NULL) {
            free(t);
            return;
        }
        t->fd = fd->connect_fd;
        peer_addr(conn, t->addr, sizeof t->addr);
    }
    pthread_mutex_lock(&s->tmu);
    t->next = s->tracks;
    if (s->tracks != NULL) {
        s->tracks->prev = t;
    }
    s->tracks = t;
    pthread_mutex_unlock(&s->tmu);
    track_arm(s, t, 1, 0);
    *socket_context = t;
}

/* Every 100 ms: shut down the connections whose request is past its
 * deadline; libmicrohttpd then sees the end of the stream and closes them. */
/* Wait on cv (CLOCK_MONOTONIC, mu held) at most ms milliseconds. */
static void cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, long ms)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000 * 1000;
    if (ts.tv_nsec >= 1000 * 1000 * 1000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000 * 1000 * 1000;
    }
    pthread_cond_timedwait(cv, mu, &ts);
}

static void *watchdog_main(void *arg)
{
    fs_http_server *s = arg;

    pthread_mutex_lock(&s->tmu);
    while (!s->wd_stop) {
        int64_t now = mono_ms();
        for (struct conn_track *t = s->tracks; t != NULL; t = t->next) {
            if (!t->cut && t->deadline_ms != 0 && now >= t->deadline_ms) {
                t->cut = 1;
                shutdown(t->fd, SHUT_RDWR);
                fs_log_pack(FS_LOG_WARN, "request too slow: connection closed", "{s:s, s:I}",
                            "client", t->addr[0] != '\0' ? t->addr : "?", "seconds",
                            (json_int_t)((now - t->start_ms) / 1000));
            }
        }
        cond_wait_ms(&s->tcv, &s->tmu, 100);
    }
    pthread_mutex_unlock(&s->tmu);
    return NULL;
}

/* ---------------------------------------------------------------- long polls */

#define PARK_CHECK_MS 5 /* how often the parker asks the parked requests' ready() (default) */

int fs_http_req_park(fs_http_req *req, unsigned wait_ms, int (*ready)(void *ctx), void *ctx)
{
    if (req == NULL || req->conn == NULL || ready == NULL || wait_ms == 0 || req->pk_resumed ||
        req->srv->cfg.threads == 0) {
        return -1;
    }
    req->pk_ready = ready;
    req->pk_ctx = ctx;
    req->pk_until_ms = mono_ms() + (int64_t)wait_ms;
    req->pk_want = 1;
    return 0;
}

void fs_http_req_close_after(fs_http_req *req)
{
    if (req != NULL) {
        req->close_after = 1;
    }
}

int fs_http_req_resumed(const fs_http_req *req)
{
    return req != NULL && req->pk_resumed;
}

/* Wake the parked requests whose wait is over (all of them once stopping):
 * libmicrohttpd runs their handler again. pmu held. */
static void park_sweep(fs_http_server *s)
{
    int64_t now = mono_ms();
    fs_http_req **pp = &s->parked;

    while (*pp != NULL) {
        fs_http_req *r = *pp;
        if (s->pk_stop || now >= r->pk_until_ms || r->pk_ready(r->pk_ctx)) {
            *pp = r->pk_next;
            r->pk_next = NULL;
            r->pk_resumed = 1;
            MHD_resume_connection(r->conn);
        } else {
            pp = &r->pk_next;
        }
    }
}

void fs_http_server_kick(fs_http_server *s)
{
    if (s != NULL) {
        atomic_store(&s->pk_kicked, 1);
        pthread_cond_broadcast(&s->pcv); /* without pmu: never blocks */
    }
}

static void *parker_main(void *arg)
{
    fs_http_server *s = arg;

    pthread_mutex_lock(&s->pmu);
    while (!s->pk_exit) {
        atomic_store(&s->pk_kicked, 0);
        park_sweep(s);
        pthread_cond_broadcast(&s->pcv); /* (stop waits for an empty list) */
        if (atomic_load(&s->pk_kicked)) {
            continue; /* kicked during the sweep: once more */
        }
        if (s->parked == NULL) {
            pthread_cond_wait(&s->pcv, &s->pmu);
        } else {
            cond_wait_ms(&s->pcv, &s->pmu,
                         s->cfg.park_check_ms > 0 ? (long)s->cfg.park_check_ms : PARK_CHECK_MS);
        }
    }
    pthread_mutex_unlock(&s->pmu);
    return NULL;
}

/* Suspend the connection of a request whose handler asked to park it (from
 * the access handler, as libmicrohttpd requires) and hand it to the parker.
 * @return 0, or -1 (stopping, no thread): the caller answers at once. */
static int park(fs_http_req *req)
{
    fs_http_server *s = req->srv;
    int rc = 0;

    pthread_mutex_lock(&s->pmu);
    if (s->pk_stop) {
        rc = -1;
    } else if (!s->have_parker) {
        if (pthread_create(&s->parker, NULL, parker_main, s) != 0) {
            rc = -1;
        } else {
            s->have_parker = 1;
        }
    }
    if (rc == 0) {
        MHD_suspend_connection(req->conn);
        req->pk_next = s->parked;
        s->parked = req;
        pthread_cond_broadcast(&s->pcv);
    }
    pthread_mutex_unlock(&s->pmu);
    return rc;
}

/* Stop parking and wake every parked request (server stop); end the parker
 * once the daemon is gone (end = 1). */
static void park_stop(fs_http_server *s, int end)
{
    pthread_mutex_lock(&s->pmu);
    s->pk_stop = 1;
    pthread_cond_broadcast(&s->pcv);
    while (s->have_parker && s->parked != NULL) {
        pthread_cond_wait(&s->pcv, &s->pmu);
    }
    if (!end || !s->have_parker) {
        pthread_mutex_unlock(&s->pmu);
        return;
    }
    s->pk_exit = 1;
    pthread_cond_broadcast(&s->pcv);
    pthread_mutex_unlock(&s->pmu);
    pthread_join(s->parker, NULL);
    s->have_parker = 0;
}

/* Queue the response in req->resp (a 500 problem when none was set).
 * @return MHD_YES, or MHD_NO to close the connection. */
static enum MHD_Result queue(fs_http_req *req)
{
    enum MHD_Result r = MHD_NO;

    if (req->resp.mr == NULL &&
        fs_http_problem(&req->resp, 500, "internal", NULL, "the handler set no response") != 0) {
        return MHD_NO;
    }
    if (req->track != NULL) {
        track_disarm(req->srv, req->track); /* the request is in: the response is not limited */
    }
    if (req->close_after) {
        /* libmicrohttpd closes the connection once this response is sent */
        (void)MHD_add_response_header(req->resp.mr, MHD_HTTP_HEADER_CONNECTION, "close");
    }
    r = MHD_queue_response(req->conn, req->resp.status, req->resp.mr);
    req->queued = 1;
    if (r == MHD_YES) {
        req->status_sent = req->resp.status;
        req->bytes_out = req->resp.len;
    }
    resp_reset(&req->resp);
    return r;
}

/* A rejection decided while the body may still be coming. Reply now when
 * the client has not sent (or will not send) a body, else drain the body
 * (up to drain_max) and reply at the end so the client can read it. */
static enum MHD_Result reject(fs_http_req *req)
{
    if (!req->has_body || req->expect100 ||
        (req->has_cl && req->cl - req->received > req->srv->cfg.drain_max)) {
        return queue(req);
    }
    req->draining = 1;
    return MHD_YES;
}

static enum MHD_Result first_call_inner(fs_http_server *s, struct MHD_Connection *conn,
                                        const char *url, const char *method, void **con_cls)
{
    fs_http_req *req = calloc(1, sizeof *req);
    const struct route *rt = NULL;
    int rc = 0;

    if (req == NULL) {
        return MHD_NO;
    }
    clock_gettime(CLOCK_MONOTONIC, &req->t0);
    req->srv = s;
    req->conn = conn;
    if (s->cfg.request_timeout_s > 0) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        req->track = ci != NULL ? ci->socket_context : NULL;
    }
    req->method_raw = method;
    req->method_name = method_name(method_bit(method));
    *con_cls = req;
    atomic_fetch_add(&s->in_flight, 1);
    req->path = strdup(url);
    if (req->path == NULL) {
        return MHD_NO;
    }
    read_body_headers(req);
    route_request(req, url);
    if (req->resp.mr != NULL) {
        return reject(req);
    }
    MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, collect_query, req);
    if (req->query_bad) {
        (void)fs_http_problem(&req->resp, 400, "bad_query", NULL,
                              "malformed or too many query parameters");
        return reject(req);
    }
    rt = req->route;
    if (rt->r.auth != NULL) {
        struct fs_err aerr = {0};
        const char *h = fs_http_req_header(req, MHD_HTTP_HEADER_AUTHORIZATION);
        if (fs_auth_check_header(rt->r.auth, h, req->auth_label, &aerr) != 0) {
            if (fs_http_problem(&req->resp, 401, "unauthorized", NULL, "%s", aerr.msg) == 0) {
                (void)add_header(&req->resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
            }
            return reject(req);
        }
    }
    if (req->has_cl && req->cl > rt->r.max_body) {
        (void)fs_http_problem(&req->resp, 413, "body_too_large", NULL,
                              "request body of %llu bytes exceeds the limit of %llu bytes",
                              (unsigned long long)req->cl, (unsigned long long)rt->r.max_body);
        return reject(req);
    }
    if (rt->r.on_begin != NULL) {
        rc = rt->r.on_begin(req, &req->resp, rt->r.ctx);
        if (rc != 0 || req->resp.mr != NULL) {
            return reject(req);
        }
    }
    if (rt->r.on_chunk == NULL && req->has_cl && req->cl > 0) {
        /* cl <= max_body here. Size the buffer for small bodies at once, but
         * let large ones grow as bytes arrive, so a declared length alone
         * does not reserve memory. */
        size_t first = req->cl < INITIAL_BODY_MAX ? (size_t)req->cl + 1 : INITIAL_BODY_MAX;
        req->body = malloc(first);
        if (req->body == NULL) {
            (void)fs_http_problem(&req->resp, 503, "out_of_memory", NULL, "out of memory");
            return reject(req);
        }
        req->bcap = first;
    }
    return MHD_YES;
}

/* The headers are in: the deadline grows with the body to come. */
static enum MHD_Result first_call(fs_http_server *s, struct MHD_Connection *conn, const char *url,
                                  const char *method, void **con_cls)
{
    enum MHD_Result r = first_call_inner(s, conn, url, method, con_cls);

    if (*con_cls != NULL) {
        deadline_update(*con_cls);
    }
    return r;
}

static int append_body(fs_http_req *req, const char *data, size_t n)
{
    size_t need = req->blen + n + 1;

    if (need > req->bcap) {
        size_t ncap = req->bcap < 4096 ? 4096 : req->bcap * 2;
        char *nb = NULL;
        if (ncap < need) {
            ncap = need;
        }
        if (ncap > req->route->r.max_body + 1) {
            ncap = (size_t)req->route->r.max_body + 1;
        }
        nb = realloc(req->body, ncap);
        if (nb == NULL) {
            return -1;
        }
        req->body = nb;
        req->bcap = ncap;
    }
    memcpy(req->body + req->blen, data, n);
    req->blen += n;
    req->body[req->blen] = '\0';
    return 0;
}

static enum MHD_Result body_piece(fs_http_req *req, const char *data, size_t n)
{
    const struct route *rt = req->route;

    req->received += n;
    if (req->queued) {
        return MHD_YES;
    }
    if (!req->has_cl) {
        deadline_update(req); /* chunked: the allowance follows the bytes received */
    }
    if (req->draining) {
        req->drained += n;
        return req->drained > req->srv->cfg.drain_max ? MHD_NO : MHD_YES;
    }
    if (req->received > rt->r.max_body) {
        (void)fs_http_problem(&req->resp, 413, "body_too_large", NULL,
                              "request body exceeds the limit of %llu bytes",
                              (unsigned long long)rt->r.max_body);
        req->draining = 1;
        req->drained = n;
        return req->drained > req->srv->cfg.drain_max ? MHD_NO : MHD_YES;
    }
    if (rt->r.on_chunk != NULL) {
        int rc = rt->r.on_chunk(req, data, n, &req->resp, rt->r.ctx);
        if (rc != 0 || req->resp.mr != NULL) {
            req->draining = 1;
        }
        return MHD_YES;
    }
    if (append_body(req, data, n) != 0) {
        (void)fs_http_problem(&req->resp, 503, "out_of_memory", NULL, "out of memory");
        req->draining = 1;
    }
    return MHD_YES;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn, const char *url,
                                 const char *method, const char *version, const char *upload_data,
                                 size_t *upload_data_size, void **con_cls)
{
    fs_http_req *req = *con_cls;

    (void)version;
    if (req == NULL) {
        return first_call(cls, conn, url, method, con_cls);
    }
    if (*upload_data_size > 0) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        return body_piece(req, upload_data, n);
    }
    if (req->queued) {
        return MHD_YES;
    }
    if (req->track != NULL) {
        track_disarm(req->srv, req->track); /* the request is in: handlers are not limited */
    }
    if (!req->draining) {
        int rc = req->route->r.handler(req, &req->resp, req->route->r.ctx);
        if (rc == 0 && req->pk_want && req->resp.mr == NULL) {
            /* a long poll: answered when the parker wakes it (the handler runs again) */
            req->pk_want = 0;
            if (park(req) == 0) {
                return MHD_YES;
            }
            req->pk_resumed = 1;
            rc = req->route->r.handler(req, &req->resp, req->route->r.ctx);
        }
        req->pk_want = 0;
        if (rc != 0 && req->resp.mr == NULL) {
            fs_log_pack(FS_LOG_ERROR, "handler failed", "{s:s, s:i}", "route", req->route->pattern,
                        "rc", rc);
        }
    }
    return queue(req);
}

static double elapsed_ms(const struct timespec *t0)
{
    struct timespec t1;

    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

/* Reads that went well (GET and HEAD answered below 400: the parties' and
 * operators' status polls, downloads, probes) at debug, so that a job's log
 * at info shows what changed state and what failed, not every poll. */
static enum fs_log_level request_log_level(const struct fs_http_log_entry *e)
{
    int read = strcmp(e->method, "GET") == 0 || strcmp(e->method, "HEAD") == 0;

    return read && e->completed && e->status >= 100 && e->status < 400 ? FS_LOG_DEBUG : FS_LOG_INFO;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    fs_http_server *s = cls;
    fs_http_req *req = *con_cls;
    struct fs_http_log_entry e;

    if (req == NULL) {
        return;
    }
    *con_cls = NULL;
    memset(&e, 0, sizeof e);
    e.method = req->method_name;
    e.route = fs_http_req_route(req);
    e.status = req->status_sent;
    e.ms = elapsed_ms(&req->t0);
    e.bytes_in = req->received;
    e.bytes_out = req->bytes_out;
    e.completed = toe == MHD_REQUEST_TERMINATED_COMPLETED_OK;
    e.req = req;
    if (s->cfg.on_request != NULL) {
        s->cfg.on_request(&e, s->cfg.hook_ctx);
    }
    if (req->track != NULL) {
        track_arm(s, req->track, 1, 0); /* the next request on this connection */
    }
    if (s->cfg.log_requests) {
        char client[INET6_ADDRSTRLEN];
        peer_addr(conn, client, sizeof client);
        fs_log_pack(request_log_level(&e), "request", "{s:s, s:s, s:i, s:f, s:I, s:I, s:b, s:s}",
                    "method", e.method, "route", e.route, "status", (int)e.status, "ms", e.ms,
                    "bytes_in", (json_int_t)e.bytes_in, "bytes_out", (json_int_t)e.bytes_out,
                    "completed", e.completed, "client", client[0] != '\0' ? client : "?");
    }
    req_free(req);
    atomic_fetch_sub(&s->in_flight, 1);
}

/* Paths and arguments are decoded per segment by us (strictly), so that an
 * encoded '/' stays inside its segment and malformed escapes are rejected. */
static size_t unescape_identity(void *cls, struct MHD_Connection *c, char *s)
{
    (void)cls;
    (void)c;
    return strlen(s);
}

static void mhd_logger(void *cls, const char *fmt, va_list ap)
{
    fs_http_server *s = cls;
    char msg[512];
    size_t n = 0;

    vsnprintf(msg, sizeof msg, fmt, ap);
    n = strlen(msg);
    while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r')) {
        msg[--n] = '\0';
    }
    /* Once running, libmicrohttpd mostly reports misbehaving clients. */
    fs_log_pack(atomic_load(&s->running) ? FS_LOG_DEBUG : FS_LOG_WARN, "libmicrohttpd", "{s:s}",
                "detail", msg);
}

/* ---------------------------------------------------------------- lifecycle */

int fs_http_server_new(fs_http_server **out, const struct fs_http_server_config *cfg,
                       struct fs_err *err)
{
    fs_http_server *s = calloc(1, sizeof *s);
    pthread_condattr_t ca;

    *out = NULL;
    if (s == NULL) {
        return fs_err_set(err, FS_ENOMEM, "http: out of memory");
    }
    pthread_mutex_init(&s->tmu, NULL);
    pthread_mutex_init(&s->pmu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->tcv, &ca);
    pthread_cond_init(&s->pcv, &ca);
    pthread_condattr_destroy(&ca);
    if (cfg != NULL) {
        s->cfg = *cfg;
    } else {
        fs_http_server_config_default(&s->cfg);
    }
    s->host = strdup(s->cfg.host != NULL ? s->cfg.host : "127.0.0.1");
    if (s->host == NULL) {
        fs_http_server_free(s);
        return fs_err_set(err, FS_ENOMEM, "http: out of memory");
    }
    s->cfg.host = s->host;
    s->cfg.tls_cert_file = NULL; /* read at start from the caller's strings */
    s->cfg.tls_key_file = NULL;
    if (cfg != NULL && cfg->tls_cert_file != NULL && cfg->tls_key_file != NULL) {
        /* Copy the paths now: the caller's strings need not outlive this call. */
        s->tls_cert = strdup(cfg->tls_cert_file);
        s->tls_key = strdup(cfg->tls_key_file);
        if (s->tls_cert == NULL || s->tls_key == NULL) {
            fs_http_server_free(s);
            return fs_err_set(err, FS_ENOMEM, "http: out of memory");
        }
    } else if (cfg != NULL && (cfg->tls_cert_file != NULL || cfg->tls_key_file != NULL)) {
        fs_http_server_free(s);
        return fs_err_set(err, FS_EINVAL, "http: TLS needs both a certificate and a key file");
    }
    if (s->cfg.conn_memory_limit < 8192) {
        s->cfg.conn_memory_limit = 8192;
    }
    if (s->cfg.max_connections == 0) {
        s->cfg.max_connections = 256;
    }
    *out = s;
    return 0;
}

static int read_small_file(const char *path, char **out, struct fs_err *err)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t n = 0;

    *out = NULL;
    if (f == NULL) {
        return fs_err_set(err, FS_EIO, "%s: %s", path, strerror(errno));
    }
    buf = malloc(TLS_FILE_MAX + 1);
    if (buf == NULL) {
        fclose(f);
        return fs_err_set(err, FS_ENOMEM, "%s: out of memory", path);
    }
    n = fread(buf, 1, TLS_FILE_MAX + 1, f);
    if (ferror(f) || n > TLS_FILE_MAX || n == 0) {
        fclose(f);
        free(buf);
        return fs_err_set(err, FS_EIO, "%s: unreadable, empty or larger than %d bytes", path,
                          TLS_FILE_MAX);
    }
    fclose(f);
    buf[n] = '\0';
    *out = buf;
    return 0;
}

static void wipe_free(char *p)
{
    if (p != NULL) {
        OPENSSL_cleanse(p, strlen(p));
        free(p);
    }
}

int fs_http_server_start(fs_http_server *s, struct fs_err *err)
{
    struct addrinfo hints;
    struct addrinfo *ai = NULL;
    struct MHD_OptionItem opts[8];
    const union MHD_DaemonInfo *info = NULL;
    char *cert = NULL;
    char *key = NULL;
    char portstr[8];
    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC | MHD_USE_ERROR_LOG |
                         MHD_ALLOW_SUSPEND_RESUME;
    size_t no = 0;
    int rc = 0;
    int gai = 0;

    if (s->d != NULL) {
        return fs_err_set(err, FS_ESTATE, "http: server already started");
    }
    s->pk_stop = 0;
    s->pk_exit = 0;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    snprintf(portstr, sizeof portstr, "%u", (unsigned)s->cfg.port);
    gai = getaddrinfo(s->host, portstr, &hints, &ai);
    if (gai != 0 || ai == NULL) {
        return fs_err_set(err, FS_EIO, "http: cannot resolve listen host '%s': %s", s->host,
                          gai_strerror(gai));
    }
    if (ai->ai_family == AF_INET6) {
        flags |= MHD_USE_IPv6;
    }
    if (s->cfg.threads > 0) {
        if (MHD_is_feature_supported(MHD_FEATURE_EPOLL) == MHD_YES) {
            flags |= MHD_USE_EPOLL;
        } else {
            flags |= MHD_USE_POLL;
        }
        opts[no++] =
            (struct MHD_OptionItem){MHD_OPTION_THREAD_POOL_SIZE, (intptr_t)s->cfg.threads, NULL};
    } else {
        flags |= MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL;
    }
    if (s->tls_cert != NULL) {
        if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
            rc = fs_err_set(err, FS_EIO, "http: libmicrohttpd has no TLS support");
            goto out;
        }
        rc = read_small_file(s->tls_cert, &cert, err);
        if (rc == 0) {
            rc = read_small_file(s->tls_key, &key, err);
        }
        if (rc != 0) {
            goto out;
        }
        flags |= MHD_USE_TLS;
        opts[no++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, cert};
        opts[no++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, key};
        opts[no++] =
            (struct MHD_OptionItem){MHD_OPTION_HTTPS_PRIORITIES, 0, (void *)FS_HTTP_TLS_PRIORITIES};
    }
    opts[no++] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};

    s->d = MHD_start_daemon(
        flags, s->cfg.port, NULL, NULL, on_access, s, MHD_OPTION_EXTERNAL_LOGGER, mhd_logger, s,
        MHD_OPTION_SOCK_ADDR, ai->ai_addr, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, s, MHD_OPTION_UNESCAPE_CALLBACK,
        unescape_identity, s, MHD_OPTION_CONNECTION_MEMORY_LIMIT, s->cfg.conn_memory_limit,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned int)s->cfg.max_connections,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned int)s->cfg.max_per_ip,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)s->cfg.timeout_s, MHD_OPTION_ARRAY, opts,
        MHD_OPTION_END);
    if (s->d == NULL) {
        rc = fs_err_set(err, FS_EIO, "http: cannot listen on %s:%u (address in use or not local?)",
                        s->host, (unsigned)s->cfg.port);
        goto out;
    }
    if (s->cfg.request_timeout_s > 0) {
        s->wd_stop = 0;
        if (pthread_create(&s->watchdog, NULL, watchdog_main, s) != 0) {
            MHD_stop_daemon(s->d);
            s->d = NULL;
            rc = fs_err_set(err, FS_EIO, "http: cannot start the request deadline thread");
            goto out;
        }
        s->have_watchdog = 1;
    }
    info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info != NULL ? info->port : s->cfg.port;
    atomic_store(&s->running, 1);
    /* (debug: each service says "listening" once, with its own details) */
    fs_log_pack(FS_LOG_DEBUG, "listening", "{s:s, s:i, s:b}", "host", s->host, "port", (int)s->port,
                "tls", s->tls_cert != NULL);
out:
    wipe_free(key);
    wipe_free(cert);
    freeaddrinfo(ai);
    return rc;
}

uint16_t fs_http_server_port(const fs_http_server *s)
{
    return s != NULL && s->d != NULL ? s->port : 0;
}

unsigned fs_http_server_connections(const fs_http_server *s)
{
    const union MHD_DaemonInfo *info = NULL;

    if (s == NULL || s->d == NULL) {
        return 0;
    }
    info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
    return info != NULL ? info->num_connections : 0;
}

void fs_http_server_stop(fs_http_server *s, unsigned grace_ms)
{
    MHD_socket lfd = MHD_INVALID_SOCKET;
    struct timespec t0;

    if (s == NULL || s->d == NULL) {
        return;
    }
    park_stop(s, 0); /* parked long polls answer now */
    lfd = MHD_quiesce_daemon(s->d);
    if (lfd != MHD_INVALID_SOCKET) {
        close(lfd);
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (atomic_load(&s->in_flight) > 0 && elapsed_ms(&t0) < (double)grace_ms) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    MHD_stop_daemon(s->d);
    s->d = NULL;
    park_stop(s, 1);
    if (s->have_watchdog) {
        pthread_mutex_lock(&s->tmu);
        s->wd_stop = 1;
        pthread_cond_signal(&s->tcv);
        pthread_mutex_unlock(&s->tmu);
        pthread_join(s->watchdog, NULL);
        s->have_watchdog = 0;
    }
    atomic_store(&s->running, 0);
    fs_log_pack(FS_LOG_DEBUG, "stopped", "{s:i}", "port", (int)s->port);
}

void fs_http_server_free(fs_http_server *s)
{
    if (s == NULL) {
        return;
    }
    fs_http_server_stop(s, 0);
    for (size_t i = 0; i < s->nroutes; i++) {
        route_clear(&s->routes[i]);
    }
    free(s->routes);
    free(s->tls_cert);
    free(s->tls_key);
    free(s->host);
    pthread_cond_destroy(&s->tcv);
    pthread_mutex_destroy(&s->tmu);
    pthread_cond_destroy(&s->pcv);
    pthread_mutex_destroy(&s->pmu);
    free(s);
}

/* ------------------------------------------------ routing without a socket */

/* The query string as libmicrohttpd hands it to collect_query: pieces
 * between '&', the first '=' splitting key and value (no '=': value NULL),
 * no unescaping (unescape_identity). */
static void probe_query(fs_http_req *req, const char *q)
{
    char *copy = strdup(q);
    char *p = copy;

    if (copy == NULL) {
        req->query_bad = 1;
        return;
    }
    while (p != NULL && *p != '\0' && !req->query_bad) {
        char *amp = strchr(p, '&');
        char *eq = NULL;
        if (amp != NULL) {
            *amp = '\0';
        }
        eq = strchr(p, '=');
        if (eq != NULL) {
            *eq = '\0';
        }
        if (collect_query(req, MHD_GET_ARGUMENT_KIND, p, eq != NULL ? eq + 1 : NULL) != MHD_YES) {
            break;
        }
        p = amp != NULL ? amp + 1 : NULL;
    }
    free(copy);
}

unsigned fs_http_server_probe(const fs_http_server *s, const char *method, const char *target,
                              const char **route, fs_http_req **out)
{
    fs_http_req *req = calloc(1, sizeof *req);
    const char *q = strchr(target, '?');
    unsigned status = 0;

    if (route != NULL) {
        *route = NULL;
    }
    if (out != NULL) {
        *out = NULL;
    }
    if (req == NULL) {
        return 500;
    }
    req->srv = (fs_http_server *)s;
    req->method_raw = method;
    req->method_name = method_name(method_bit(method));
    req->path = q != NULL ? strndup(target, (size_t)(q - target)) : strdup(target);
    if (req->path == NULL) {
        req_free(req);
        return 500;
    }
    route_request(req, req->path);
    if (req->resp.mr == NULL && q != NULL) {
        probe_query(req, q + 1);
        if (req->query_bad) {
            (void)fs_http_problem(&req->resp, 400, "bad_query", NULL,
                                  "malformed or too many query parameters");
        }
    }
    status = req->resp.mr != NULL ? req->resp.status : 0;
    if (route != NULL && req->route != NULL) {
        *route = req->route->pattern;
    }
    if (status == 0 && out != NULL) {
        *out = req;
    } else {
        req_free(req);
    }
    return status;
}

void fs_http_req_probe_free(fs_http_req *req)
{
    req_free(req);
}
