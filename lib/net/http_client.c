#include "http_client.h"

#include "../core/fdio.h"
#include "../core/version.h"
#include "../crypto/rand.h"
#include "auth.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define EXPECT_THRESHOLD (1024 * 1024) /* bodies above this wait for 100-continue */
#define URL_MAX          8192

struct fs_httpc {
    CURL *h;
    struct fs_httpc_config cfg;
    char *base_url;
    char *auth_header; /* "Authorization: Bearer ..." (secret) */
    char *ca_file;
    char *user_agent;
    char *source_if; /* "host!ADDR" for CURLOPT_INTERFACE, or NULL */
    char errbuf[CURL_ERROR_SIZE];
};

/* Per-attempt transfer state shared with the libcurl callbacks. */
struct xfer {
    fs_httpc *c;
    const struct fs_httpc_req *rq;
    /* response body in memory */
    char *buf;
    size_t len;
    size_t cap;
    int over;
    /* download */
    FILE *dl;
    uint64_t dl_bytes;
    int dl_over;
    int dl_errno;
    /* upload source */
    size_t src_off;
    FILE *up;
    uint64_t src_used;
    int src_failed;
};

static pthread_once_t g_curl_once = PTHREAD_ONCE_INIT;
static CURLcode g_curl_init_rc = CURLE_OK;

static void curl_init_once(void)
{
    g_curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

void fs_httpc_config_default(struct fs_httpc_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->connect_timeout_ms = 5000;
    cfg->timeout_ms = 60000;
    cfg->low_speed_time_s = 30;
    cfg->max_retries = 4;
    cfg->backoff_base_ms = 200;
    cfg->backoff_max_ms = 10000;
    cfg->retry_after_max_ms = 30000;
    cfg->max_body = 16u * 1024 * 1024;
    cfg->max_download = 64ull * 1024 * 1024 * 1024;
    cfg->user_agent = "fedsvd";
    cfg->source_address = getenv("FEDSVD_SOURCE_ADDRESS");
    if (cfg->source_address != NULL && cfg->source_address[0] == '\0') {
        cfg->source_address = NULL;
    }
}

/* "host!ADDR" for CURLOPT_INTERFACE (a numeric address, never an interface
 * name), after checking that addr is an IPv4 or IPv6 literal. */
static int source_if_new(const char *addr, char **out, struct fs_err *err)
{
    struct in_addr a4;
    struct in6_addr a6;
    size_t n;

    *out = NULL;
    if (addr == NULL) {
        return 0;
    }
    if (inet_pton(AF_INET, addr, &a4) != 1 && inet_pton(AF_INET6, addr, &a6) != 1) {
        return fs_err_set(err, FS_EINVAL,
                          "source address '%s' (FEDSVD_SOURCE_ADDRESS): expected an IPv4 or "
                          "IPv6 address of this host",
                          addr);
    }
    n = strlen(addr) + sizeof "host!";
    *out = malloc(n);
    if (*out == NULL) {
        return fs_err_set(err, FS_ENOMEM, "http client: out of memory");
    }
    snprintf(*out, n, "host!%s", addr);
    return 0;
}

int fs_http_host_is_loopback(const char *host)
{
    struct in_addr a4;
    struct in6_addr a6;

    if (host == NULL) {
        return 0;
    }
    if (strcasecmp(host, "localhost") == 0) {
        return 1; /* libcurl resolves it to loopback itself, never through DNS */
    }
    if (inet_pton(AF_INET, host, &a4) == 1) {
        return (ntohl(a4.s_addr) >> 24) == 127;
    }
    if (inet_pton(AF_INET6, host, &a6) == 1) {
        return IN6_IS_ADDR_LOOPBACK(&a6) || (IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127);
    }
    return 0;
}

/* The host of url (userinfo skipped, IPv6 brackets removed) into host, and
 * whether its scheme is https. A host that does not fit comes back "". */
static void url_host(const char *url, char *host, size_t cap, int *https)
{
    const char *sep = strstr(url, "://");
    const char *a = url;
    const char *end = NULL;
    const char *at = NULL;
    size_t n = 0;

    *https = 0;
    host[0] = '\0';
    if (sep != NULL && strcspn(url, "/?#") > (size_t)(sep - url)) {
        *https = (size_t)(sep - url) == 5 && strncasecmp(url, "https", 5) == 0;
        a = sep + 3;
    }
    end = a + strcspn(a, "/?#");
    for (const char *p = a; p < end; p++) {
        if (*p == '@') {
            at = p;
        }
    }
    if (at != NULL) {
        a = at + 1;
    }
    if (*a == '[') {
        const char *close_br = memchr(a, ']', (size_t)(end - a));
        if (close_br == NULL) {
            return;
        }
        a++;
        n = (size_t)(close_br - a);
    } else {
        const char *colon = memchr(a, ':', (size_t)(end - a));
        n = (size_t)((colon != NULL ? colon : end) - a);
    }
    if (n < cap) {
        memcpy(host, a, n);
        host[n] = '\0';
    }
}

int fs_http_url_check(const char *url, int allow_insecure_http, struct fs_err *err)
{
    char host[256];
    int https = 0;

    if (url == NULL) {
        return fs_err_set(err, FS_EINVAL, "http client: no URL");
    }
    url_host(url, host, sizeof host, &https);
    if (https || allow_insecure_http || fs_http_host_is_loopback(host)) {
        return 0;
    }
    return fs_err_set(err, FS_EINVAL,
                      "refusing plain HTTP to '%.200s', which is not a loopback address: tokens "
                      "and data would cross the network unencrypted; use an https:// URL (or "
                      "--insecure-http to allow it)",
                      host);
}

static void wipe_free(char *s)
{
    if (s != NULL) {
        OPENSSL_cleanse(s, strlen(s));
        free(s);
    }
}

int fs_httpc_set_token(fs_httpc *c, const char *token, struct fs_err *err)
{
    char *h = NULL;
    size_t n = 0;

    if (token != NULL) {
        size_t tl = strnlen(token, FS_AUTH_TOKEN_MAX + 1);
        if (!fs_auth_token_valid(token, tl)) {
            return fs_err_set(err, FS_EINVAL, "http client: invalid bearer token");
        }
        n = tl + sizeof "Authorization: Bearer ";
        h = malloc(n);
        if (h == NULL) {
            return fs_err_set(err, FS_ENOMEM, "http client: out of memory");
        }
        snprintf(h, n, "Authorization: Bearer %s", token);
    }
    wipe_free(c->auth_header);
    c->auth_header = h;
    return 0;
}

static char *dup_or_null(const char *s, int *fail)
{
    char *d = NULL;

    if (s == NULL) {
        return NULL;
    }
    d = strdup(s);
    if (d == NULL) {
        *fail = 1;
    }
    return d;
}

/* "<product>/<version>", the User-Agent every request sends. */
static char *user_agent_new(const char *product, int *fail)
{
    size_t n = strlen(product) + 1 + strlen(fs_version()) + 1;
    char *s = malloc(n);

    if (s == NULL) {
        *fail = 1;
        return NULL;
    }
    snprintf(s, n, "%s/%s", product, fs_version());
    return s;
}

int fs_httpc_new(fs_httpc **out, const struct fs_httpc_config *cfg, struct fs_err *err)
{
    fs_httpc *c = NULL;
    int fail = 0;
    int rc = 0;

    *out = NULL;
    pthread_once(&g_curl_once, curl_init_once);
    if (g_curl_init_rc != CURLE_OK) {
        return fs_err_set(err, FS_EIO, "http client: curl_global_init failed");
    }
    c = calloc(1, sizeof *c);
    if (c == NULL) {
        return fs_err_set(err, FS_ENOMEM, "http client: out of memory");
    }
    if (cfg != NULL) {
        c->cfg = *cfg;
    } else {
        fs_httpc_config_default(&c->cfg);
    }
    c->base_url = dup_or_null(c->cfg.base_url, &fail);
    c->ca_file = dup_or_null(c->cfg.ca_file, &fail);
    c->user_agent = user_agent_new(c->cfg.user_agent != NULL ? c->cfg.user_agent : "fedsvd", &fail);
    c->cfg.base_url = c->base_url;
    c->cfg.ca_file = c->ca_file;
    c->cfg.user_agent = c->user_agent;
    c->cfg.token = NULL;
    if (fail) {
        rc = fs_err_set(err, FS_ENOMEM, "http client: out of memory");
        goto out;
    }
    rc = source_if_new(c->cfg.source_address, &c->source_if, err);
    if (rc != 0) {
        goto out;
    }
    c->cfg.source_address = NULL;
    if (c->base_url != NULL) {
        rc = fs_http_url_check(c->base_url, c->cfg.allow_insecure_http, err);
        if (rc != 0) {
            goto out;
        }
    }
    if (c->cfg.max_body == 0) {
        c->cfg.max_body = 16u * 1024 * 1024;
    }
    if (c->cfg.max_download == 0) {
        c->cfg.max_download = 64ull * 1024 * 1024 * 1024;
    }
    rc = fs_httpc_set_token(c, cfg != NULL ? cfg->token : NULL, err);
    if (rc != 0) {
        goto out;
    }
    c->h = curl_easy_init();
    if (c->h == NULL) {
        rc = fs_err_set(err, FS_EIO, "http client: curl_easy_init failed");
        goto out;
    }
    *out = c;
    return 0;
out:
    fs_httpc_free(c);
    return rc;
}

void fs_httpc_free(fs_httpc *c)
{
    if (c == NULL) {
        return;
    }
    if (c->h != NULL) {
        curl_easy_cleanup(c->h);
    }
    wipe_free(c->auth_header);
    free(c->base_url);
    free(c->ca_file);
    free(c->user_agent);
    free(c->source_if);
    free(c);
}

void fs_httpc_resp_clear(struct fs_httpc_resp *resp)
{
    if (resp == NULL) {
        return;
    }
    free(resp->body);
    memset(resp, 0, sizeof *resp);
}

/* ---------------------------------------------------------------- callbacks */

static int is_2xx(long status)
{
    return status >= 200 && status < 300;
}

static size_t on_write(char *p, size_t size, size_t nmemb, void *ud)
{
    struct xfer *x = ud;
    size_t n = size * nmemb;
    long status = 0;

    curl_easy_getinfo(x->c->h, CURLINFO_RESPONSE_CODE, &status);
    if (x->dl != NULL && is_2xx(status)) {
        if (x->dl_bytes + n > x->c->cfg.max_download) {
            x->dl_over = 1;
            return 0;
        }
        if (fwrite(p, 1, n, x->dl) != n) {
            x->dl_errno = errno != 0 ? errno : EIO;
            return 0;
        }
        x->dl_bytes += n;
        return n;
    }
    if (n > x->c->cfg.max_body - x->len) {
        x->over = 1;
        return 0;
    }
    if (x->len + n + 1 > x->cap) {
        size_t ncap = x->cap < 4096 ? 4096 : x->cap * 2;
        char *nb = NULL;
        if (ncap < x->len + n + 1) {
            ncap = x->len + n + 1;
        }
        if (ncap > x->c->cfg.max_body + 1) {
            ncap = x->c->cfg.max_body + 1;
        }
        nb = realloc(x->buf, ncap);
        if (nb == NULL) {
            x->over = 1;
            return 0;
        }
        x->buf = nb;
        x->cap = ncap;
    }
    memcpy(x->buf + x->len, p, n);
    x->len += n;
    x->buf[x->len] = '\0';
    return n;
}

static size_t on_read(char *buf, size_t size, size_t nmemb, void *ud)
{
    struct xfer *x = ud;
    const struct fs_httpc_req *rq = x->rq;
    size_t cap = size * nmemb;
    size_t got = 0;

    if (rq->body != NULL) {
        got = rq->body_len - x->src_off;
        if (got > cap) {
            got = cap;
        }
        memcpy(buf, (const char *)rq->body + x->src_off, got);
        x->src_off += got;
    } else if (x->up != NULL) {
        got = fread(buf, 1, cap, x->up);
        if (got == 0 && ferror(x->up)) {
            x->src_failed = 1;
            return CURL_READFUNC_ABORT;
        }
    } else if (rq->read != NULL) {
        if (rq->read(rq->read_ctx, buf, cap, &got) != 0 || got > cap) {
            x->src_failed = 1;
            return CURL_READFUNC_ABORT;
        }
    }
    x->src_used += got;
    return got;
}

/* ------------------------------------------------------------------ request */

static int is_idempotent(const struct fs_httpc_req *rq)
{
    if (rq->retry == FS_HTTPC_RETRY_ALWAYS) {
        return 1;
    }
    return strcmp(rq->method, "GET") == 0 || strcmp(rq->method, "HEAD") == 0 ||
           strcmp(rq->method, "PUT") == 0 || strcmp(rq->method, "DELETE") == 0 ||
           strcmp(rq->method, "OPTIONS") == 0;
}

static int transient(CURLcode rc)
{
    switch (rc) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
        return 1;
    default:
        return 0;
    }
}

static int not_sent(CURLcode rc)
{
    return rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST;
}

static void sleep_ms(long ms)
{
    struct timespec ts;

    if (ms <= 0) {
        return;
    }
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (ms % 1000) * 1000000L;
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Exponential backoff with jitter in [d/2, d] from the CSPRNG. */
static long backoff_ms(const fs_httpc *c, unsigned attempt)
{
    long d = c->cfg.backoff_base_ms > 0 ? c->cfg.backoff_base_ms : 1;
    uint64_t j = 0;

    for (unsigned i = 1; i < attempt && d < c->cfg.backoff_max_ms; i++) {
        d *= 2;
    }
    if (c->cfg.backoff_max_ms > 0 && d > c->cfg.backoff_max_ms) {
        d = c->cfg.backoff_max_ms;
    }
    if (d >= 2 && fs_rand_below((uint64_t)(d / 2) + 1, &j, NULL) == 0) {
        return d / 2 + (long)j;
    }
    return d;
}

static int rewind_source(struct xfer *x)
{
    const struct fs_httpc_req *rq = x->rq;

    x->src_off = 0;
    if (x->up != NULL) {
        if (fseek(x->up, 0, SEEK_SET) != 0) {
            return -1;
        }
        clearerr(x->up);
    } else if (rq->read != NULL && x->src_used > 0) {
        if (rq->rewind == NULL || rq->rewind(rq->read_ctx) != 0) {
            return -1;
        }
    }
    x->src_used = 0;
    return 0;
}

/* curl rewinds the body when it resends a request on a fresh connection
 * (a reused keep-alive connection that the server had closed while idle);
 * without this the request fails with "necessary data rewind wasn't
 * possible" or "Send failure: Broken pipe". */
static int on_seek(void *ud, curl_off_t offset, int origin)
{
    if (origin != SEEK_SET || offset != 0) {
        return CURL_SEEKFUNC_CANTSEEK;
    }
    return rewind_source(ud) == 0 ? CURL_SEEKFUNC_OK : CURL_SEEKFUNC_FAIL;
}

static int reset_sinks(struct xfer *x)
{
    x->len = 0;
    x->over = 0;
    if (x->buf != NULL) {
        x->buf[0] = '\0';
    }
    if (x->dl != NULL) {
        x->dl_bytes = 0;
        x->dl_over = 0;
        x->dl_errno = 0;
        if (fflush(x->dl) != 0 || ftruncate(fileno(x->dl), 0) != 0 ||
            fseek(x->dl, 0, SEEK_SET) != 0) {
            return -1;
        }
    }
    return 0;
}

static int has_body(const struct fs_httpc_req *rq)
{
    return rq->body != NULL || rq->upload_file != NULL || rq->read != NULL;
}

static int64_t body_size(const struct fs_httpc_req *rq, struct xfer *x)
{
    if (rq->body != NULL) {
        return (int64_t)rq->body_len;
    }
    if (x->up != NULL) {
        long pos = 0;
        if (fseek(x->up, 0, SEEK_END) != 0) {
            return -1;
        }
        pos = ftell(x->up);
        if (fseek(x->up, 0, SEEK_SET) != 0 || pos < 0) {
            return -1;
        }
        return pos;
    }
    return rq->read_len;
}

static int setup(fs_httpc *c, struct xfer *x, const char *url, int64_t size,
                 struct curl_slist **hdrs)
{
    const struct fs_httpc_req *rq = x->rq;
    CURL *h = c->h;
    struct curl_slist *l = NULL;
    char line[256];
    long total_ms = c->cfg.timeout_ms;
    int bad = 0;

    curl_easy_reset(h);
    bad |= curl_easy_setopt(h, CURLOPT_URL, url) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https") != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_ERRORBUFFER, c->errbuf) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, c->cfg.connect_timeout_ms) != CURLE_OK;
    if (rq->timeout_ms > 0) {
        total_ms = rq->timeout_ms;
    } else if (rq->timeout_ms < 0) {
        total_ms = 0; /* no limit */
    }
    bad |= curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, total_ms) != CURLE_OK;
    if (c->cfg.low_speed_time_s > 0) {
        bad |= curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L) != CURLE_OK;
        bad |= curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, c->cfg.low_speed_time_s) != CURLE_OK;
    }
    bad |= curl_easy_setopt(h, CURLOPT_USERAGENT, c->user_agent) != CURLE_OK;
    if (c->source_if != NULL) {
        bad |= curl_easy_setopt(h, CURLOPT_INTERFACE, c->source_if) != CURLE_OK;
    }
    bad |= curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, c->cfg.insecure ? 0L : 1L) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, c->cfg.insecure ? 0L : 2L) != CURLE_OK;
    if (c->ca_file != NULL) {
        bad |= curl_easy_setopt(h, CURLOPT_CAINFO, c->ca_file) != CURLE_OK;
    }
    bad |= curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_WRITEDATA, x) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE,
                            (curl_off_t)(x->dl != NULL ? c->cfg.max_download : c->cfg.max_body)) !=
           CURLE_OK;
    if (strcmp(rq->method, "HEAD") == 0) {
        bad |= curl_easy_setopt(h, CURLOPT_NOBODY, 1L) != CURLE_OK;
    } else if (strcmp(rq->method, "GET") != 0) {
        bad |= curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, rq->method) != CURLE_OK;
    }
    if (has_body(rq)) {
        bad |= curl_easy_setopt(h, CURLOPT_UPLOAD, 1L) != CURLE_OK;
        bad |= curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read) != CURLE_OK;
        bad |= curl_easy_setopt(h, CURLOPT_READDATA, x) != CURLE_OK;
        bad |= curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, on_seek) != CURLE_OK;
        bad |= curl_easy_setopt(h, CURLOPT_SEEKDATA, x) != CURLE_OK;
        bad |= curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)size) != CURLE_OK;
        if (size >= 0 && size <= EXPECT_THRESHOLD) {
            /* small bodies: no 100-continue round trip */
            l = curl_slist_append(l, "Expect:");
        }
    } else if (strcmp(rq->method, "POST") == 0 || strcmp(rq->method, "PUT") == 0 ||
               strcmp(rq->method, "PATCH") == 0) {
        bad |= curl_easy_setopt(h, CURLOPT_POSTFIELDS, "") != CURLE_OK;
        bad |= curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, 0L) != CURLE_OK;
    }
    if (rq->content_type != NULL && has_body(rq)) {
        snprintf(line, sizeof line, "Content-Type: %s", rq->content_type);
        l = curl_slist_append(l, line);
    } else if (!has_body(rq)) {
        l = curl_slist_append(l, "Content-Type:"); /* no default form type on empty POSTs */
    }
    if (rq->accept != NULL) {
        snprintf(line, sizeof line, "Accept: %s", rq->accept);
        l = curl_slist_append(l, line);
    }
    if (rq->authorization != NULL) {
        char auth[640];
        int n = snprintf(auth, sizeof auth, "Authorization: %s", rq->authorization);
        bad |= n < 0 || (size_t)n >= sizeof auth || strpbrk(rq->authorization, "\r\n") != NULL;
        l = curl_slist_append(l, auth);
        OPENSSL_cleanse(auth, sizeof auth);
    } else if (c->auth_header != NULL) {
        l = curl_slist_append(l, c->auth_header);
    }
    *hdrs = l;
    bad |= curl_easy_setopt(h, CURLOPT_HTTPHEADER, l) != CURLE_OK;
    return bad ? -1 : 0;
}

static int validate(const fs_httpc *c, const struct fs_httpc_req *rq, struct fs_err *err)
{
    int sources = (rq->body != NULL) + (rq->upload_file != NULL) + (rq->read != NULL);

    if (rq->method == NULL || rq->path == NULL || rq->method[0] == '\0') {
        return fs_err_set(err, FS_EINVAL, "http client: request needs method and path");
    }
    if (sources > 1) {
        return fs_err_set(err, FS_EINVAL, "%s %s: more than one body source", rq->method, rq->path);
    }
    if (sources > 0 && (strcmp(rq->method, "GET") == 0 || strcmp(rq->method, "HEAD") == 0)) {
        return fs_err_set(err, FS_EINVAL, "%s %s: body not allowed", rq->method, rq->path);
    }
    if (c->base_url == NULL && strncmp(rq->path, "http://", 7) != 0 &&
        strncmp(rq->path, "https://", 8) != 0) {
        return fs_err_set(err, FS_EINVAL, "%s %s: no base URL configured", rq->method, rq->path);
    }
    return 0;
}

static int open_download(const char *dest, char *tmp, size_t cap, FILE **out, struct fs_err *err)
{
    int n = snprintf(tmp, cap, "%s.part.XXXXXX", dest);
    int fd = -1;

    *out = NULL;
    if (n < 0 || (size_t)n >= cap) {
        return fs_err_set(err, FS_EINVAL, "%s: path too long", dest);
    }
    fd = mkstemp(tmp);
    if (fd < 0) {
        return fs_err_set(err, fs_io_errcode(errno), "%s: %s", tmp, strerror(errno));
    }
    *out = fdopen(fd, "wb");
    if (*out == NULL) {
        close(fd);
        unlink(tmp);
        return fs_err_set(err, fs_io_errcode(errno), "%s: %s", tmp, strerror(errno));
    }
    return 0;
}

static int finish_download(struct xfer *x, const char *tmp, const char *dest, struct fs_err *err)
{
    FILE *f = x->dl;

    x->dl = NULL;
    if (fflush(f) != 0 || fsync(fileno(f)) != 0) {
        fclose(f);
        return fs_err_set(err, fs_io_errcode(errno), "%s: %s", tmp, strerror(errno));
    }
    if (fclose(f) != 0) {
        return fs_err_set(err, fs_io_errcode(errno), "%s: %s", tmp, strerror(errno));
    }
    if (rename(tmp, dest) != 0) {
        return fs_err_set(err, fs_io_errcode(errno), "%s: %s", dest, strerror(errno));
    }
    return 0;
}

/* Map a failed transfer to an fs_err. */
static int transfer_error(const fs_httpc *c, const struct xfer *x, CURLcode rc,
                          const struct fs_httpc_req *rq, unsigned attempts, struct fs_err *err)
{
    const char *what = c->errbuf[0] != '\0' ? c->errbuf : curl_easy_strerror(rc);

    if (x->over || rc == CURLE_FILESIZE_EXCEEDED) {
        return fs_err_set(err, FS_ERANGE, "%s %s: response body exceeds %zu bytes", rq->method,
                          rq->path, c->cfg.max_body);
    }
    if (x->dl_over) {
        return fs_err_set(err, FS_ERANGE, "%s %s: download exceeds %llu bytes", rq->method,
                          rq->path, (unsigned long long)c->cfg.max_download);
    }
    if (x->dl_errno != 0) {
        return fs_err_set(err, fs_io_errcode(x->dl_errno), "%s %s: writing the download: %s",
                          rq->method, rq->path, strerror(x->dl_errno));
    }
    if (x->src_failed) {
        return fs_err_set(err, FS_EIO, "%s %s: reading the request body failed", rq->method,
                          rq->path);
    }
    if (rc == CURLE_PEER_FAILED_VERIFICATION || rc == CURLE_SSL_CACERT_BADFILE ||
        rc == CURLE_SSL_CERTPROBLEM) {
        return fs_err_set(err, FS_ECRYPTO, "%s %s: TLS verification failed: %s", rq->method,
                          rq->path, what);
    }
    return fs_err_set(err, FS_EIO, "%s %s: %s (after %u attempt%s)", rq->method, rq->path, what,
                      attempts, attempts == 1 ? "" : "s");
}

int fs_httpc_do(fs_httpc *c, const struct fs_httpc_req *rq, struct fs_httpc_resp *resp,
                struct fs_err *err)
{
    struct xfer x;
    struct curl_slist *hdrs = NULL;
    char url[URL_MAX];
    char tmp[4096];
    int64_t size = -1;
    int idem = 0;
    int rc = 0;
    int n = 0;

    memset(&x, 0, sizeof x);
    memset(resp, 0, sizeof *resp);
    tmp[0] = '\0';
    rc = validate(c, rq, err);
    if (rc != 0) {
        return rc;
    }
    x.c = c;
    x.rq = rq;
    idem = is_idempotent(rq);
    n = snprintf(url, sizeof url, "%s%s", c->base_url != NULL ? c->base_url : "", rq->path);
    if (n < 0 || (size_t)n >= sizeof url) {
        return fs_err_set(err, FS_EINVAL, "%s %s: URL too long", rq->method, rq->path);
    }
    rc = fs_http_url_check(url, c->cfg.allow_insecure_http, err);
    if (rc != 0) {
        return rc;
    }
    if (rq->upload_file != NULL) {
        x.up = fopen(rq->upload_file, "rb");
        if (x.up == NULL) {
            return fs_err_set(err, FS_EIO, "%s: %s", rq->upload_file, strerror(errno));
        }
    }
    size = has_body(rq) ? body_size(rq, &x) : 0;
    if (rq->download_file != NULL) {
        rc = open_download(rq->download_file, tmp, sizeof tmp, &x.dl, err);
        if (rc != 0) {
            goto out;
        }
    }
    for (unsigned attempt = 1;; attempt++) {
        CURLcode cr = CURLE_OK;
        long status = 0;
        curl_off_t retry_after = -1;
        long delay = 0;
        int can_retry = attempt <= c->cfg.max_retries && rq->retry != FS_HTTPC_RETRY_NEVER;

        resp->attempts = attempt;
        c->errbuf[0] = '\0';
        if ((attempt > 1 && rewind_source(&x) != 0) || reset_sinks(&x) != 0) {
            rc = fs_err_set(err, FS_EIO, "%s %s: cannot restart the body for a retry", rq->method,
                            rq->path);
            goto out;
        }
        curl_slist_free_all(hdrs);
        hdrs = NULL;
        if (setup(c, &x, url, size, &hdrs) != 0) {
            rc = fs_err_set(err, FS_EINVAL, "%s %s: libcurl rejected an option", rq->method,
                            rq->path);
            goto out;
        }
        cr = curl_easy_perform(c->h);
        if (cr != CURLE_OK) {
            int retry_ok = transient(cr) && !x.over && !x.dl_over && x.dl_errno == 0 &&
                           !x.src_failed && (idem || not_sent(cr));
            if (rq->read != NULL && rq->rewind == NULL && x.src_used > 0) {
                retry_ok = 0;
            }
            if (can_retry && retry_ok) {
                sleep_ms(backoff_ms(c, attempt));
                continue;
            }
            rc = transfer_error(c, &x, cr, rq, attempt, err);
            goto out;
        }
        curl_easy_getinfo(c->h, CURLINFO_RESPONSE_CODE, &status);
        resp->status = status;
        if (!can_retry ||
            !(status == 429 || (idem && (status == 502 || status == 503 || status == 504)))) {
            break;
        }
        if (rq->read != NULL && rq->rewind == NULL && x.src_used > 0) {
            break;
        }
        delay = backoff_ms(c, attempt);
        if ((status == 429 || status == 503) &&
            curl_easy_getinfo(c->h, CURLINFO_RETRY_AFTER, &retry_after) == CURLE_OK &&
            retry_after > 0) {
            if (retry_after * 1000 > (curl_off_t)c->cfg.retry_after_max_ms) {
                break; /* the server wants a longer pause than we wait for */
            }
            if (retry_after * 1000 > delay) {
                delay = (long)(retry_after * 1000);
            }
        }
        sleep_ms(delay);
    }
    {
        const char *ct = NULL;
        if (curl_easy_getinfo(c->h, CURLINFO_CONTENT_TYPE, &ct) == CURLE_OK && ct != NULL) {
            snprintf(resp->content_type, sizeof resp->content_type, "%s", ct);
        }
    }
    resp->body = x.buf;
    resp->len = x.len;
    x.buf = NULL;
    if (x.dl != NULL && is_2xx(resp->status)) {
        rc = finish_download(&x, tmp, rq->download_file, err);
        if (rc == 0) {
            tmp[0] = '\0';
        }
    }
out:
    curl_slist_free_all(hdrs);
    curl_easy_setopt(c->h, CURLOPT_HTTPHEADER, NULL);
    if (x.up != NULL) {
        fclose(x.up);
    }
    if (x.dl != NULL) {
        fclose(x.dl);
    }
    if (tmp[0] != '\0') {
        unlink(tmp);
    }
    free(x.buf);
    return rc;
}

/* ------------------------------------------------------------------ helpers */

static int code_for_status(long status)
{
    switch (status) {
    case 400:
        return FS_EFORMAT;
    case 401:
    case 403:
        return FS_EAUTH;
    case 404:
        return FS_ENOTFOUND;
    case 409:
        return FS_ECONFLICT;
    case 413:
        return FS_ERANGE;
    case 422:
        return FS_EINVAL;
    default:
        return FS_EIO;
    }
}

/* Printable-ASCII copy of at most cap-1 bytes of s. */
static void snippet(const char *s, size_t len, char *out, size_t cap)
{
    size_t o = 0;

    for (size_t i = 0; i < len && o + 1 < cap; i++) {
        unsigned char ch = (unsigned char)s[i];
        out[o++] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : ' ';
    }
    out[o] = '\0';
}

int fs_httpc_check(const struct fs_httpc_resp *resp, const char *method, const char *path,
                   struct fs_err *err)
{
    int code = 0;
    json_t *j = NULL;
    char text[256];

    if (is_2xx(resp->status)) {
        return 0;
    }
    code = code_for_status(resp->status);
    if (resp->body != NULL && resp->len > 0 && strstr(resp->content_type, "json") != NULL) {
        j = json_loadb(resp->body, resp->len, 0, NULL);
    }
    if (json_is_object(j)) {
        const char *pcode = json_string_value(json_object_get(j, "code"));
        const char *detail = json_string_value(json_object_get(j, "detail"));
        const char *title = json_string_value(json_object_get(j, "title"));
        const char *msg = detail != NULL ? detail : title;
        fs_err_set(err, code, "%s %s: %ld %s%s%s", method, path, resp->status,
                   pcode != NULL ? pcode : "error", msg != NULL ? ": " : "",
                   msg != NULL ? msg : "");
    } else {
        snippet(resp->body != NULL ? resp->body : "", resp->len, text, 121);
        fs_err_set(err, code, "%s %s: HTTP %ld%s%s", method, path, resp->status,
                   text[0] != '\0' ? ": " : "", text);
    }
    json_decref(j);
    return code;
}

static int parse_json_out(const struct fs_httpc_resp *resp, const char *method, const char *path,
                          json_t **out, struct fs_err *err)
{
    json_error_t jerr;

    if (out == NULL) {
        return 0;
    }
    *out = NULL;
    if (resp->body == NULL || resp->len == 0) {
        return 0;
    }
    *out = json_loadb(resp->body, resp->len, 0, &jerr);
    if (*out == NULL) {
        return fs_err_set(err, FS_EFORMAT, "%s %s: invalid JSON in response at line %d: %s", method,
                          path, jerr.line, jerr.text);
    }
    return 0;
}

static int call_and_parse(fs_httpc *c, const struct fs_httpc_req *rq, json_t **out, long *status,
                          struct fs_err *err)
{
    struct fs_httpc_resp resp;
    int rc = 0;

    if (out != NULL) {
        *out = NULL;
    }
    rc = fs_httpc_do(c, rq, &resp, err);
    if (status != NULL) {
        *status = resp.status;
    }
    if (rc == 0) {
        rc = fs_httpc_check(&resp, rq->method, rq->path, err);
    }
    if (rc == 0) {
        rc = parse_json_out(&resp, rq->method, rq->path, out, err);
    }
    fs_httpc_resp_clear(&resp);
    return rc;
}

int fs_httpc_json(fs_httpc *c, const char *method, const char *path, const json_t *body,
                  json_t **out, long *status, struct fs_err *err)
{
    struct fs_httpc_req rq;
    char *s = NULL;
    int rc = 0;

    memset(&rq, 0, sizeof rq);
    rq.method = method;
    rq.path = path;
    rq.accept = "application/json, application/problem+json";
    if (body != NULL) {
        s = json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY);
        if (s == NULL) {
            return fs_err_set(err, FS_ENOMEM, "%s %s: cannot encode JSON body", method, path);
        }
        rq.body = s;
        rq.body_len = strlen(s);
        rq.content_type = "application/json";
    }
    rc = call_and_parse(c, &rq, out, status, err);
    free(s);
    return rc;
}

int fs_httpc_send_bytes(fs_httpc *c, const char *method, const char *path, const char *content_type,
                        const void *data, size_t len, json_t **out, struct fs_err *err)
{
    struct fs_httpc_req rq;

    memset(&rq, 0, sizeof rq);
    rq.method = method;
    rq.path = path;
    rq.content_type = content_type;
    rq.accept = "application/json, application/problem+json";
    rq.body = data != NULL ? data : "";
    rq.body_len = len;
    return call_and_parse(c, &rq, out, NULL, err);
}

int fs_httpc_send_file(fs_httpc *c, const char *method, const char *path, const char *content_type,
                       const char *file, json_t **out, struct fs_err *err)
{
    struct fs_httpc_req rq;

    memset(&rq, 0, sizeof rq);
    rq.method = method;
    rq.path = path;
    rq.content_type = content_type;
    rq.accept = "application/json, application/problem+json";
    rq.upload_file = file;
    return call_and_parse(c, &rq, out, NULL, err);
}

int fs_httpc_download(fs_httpc *c, const char *path, const char *dest, uint64_t *bytes,
                      struct fs_err *err)
{
    struct fs_httpc_req rq;
    struct fs_httpc_resp resp;
    int rc = 0;

    memset(&rq, 0, sizeof rq);
    rq.method = "GET";
    rq.path = path;
    rq.download_file = dest;
    rc = fs_httpc_do(c, &rq, &resp, err);
    if (rc == 0) {
        rc = fs_httpc_check(&resp, "GET", path, err);
    }
    if (rc == 0 && bytes != NULL) {
        curl_off_t dl = 0;
        if (curl_easy_getinfo(c->h, CURLINFO_SIZE_DOWNLOAD_T, &dl) == CURLE_OK && dl >= 0) {
            *bytes = (uint64_t)dl;
        }
    }
    fs_httpc_resp_clear(&resp);
    return rc;
}
