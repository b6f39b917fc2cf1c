/* HTTP counters of /metrics and the text buffer: see metrics.h. */
#include "metrics.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reply.h"
#include "storage.h"

void fs_text_init(struct fs_text *t, size_t max)
{
    memset(t, 0, sizeof *t);
    t->max = max;
}

void fs_text_free(struct fs_text *t)
{
    free(t->p);
    t->p = NULL;
    t->n = 0;
    t->cap = 0;
}

void fs_text_printf(struct fs_text *t, const char *fmt, ...)
{
    va_list ap;
    int k;

    if (t->failed) {
        return;
    }
    for (;;) {
        size_t room = t->cap - t->n;
        size_t ncap;
        char *np;
        va_start(ap, fmt);
        k = vsnprintf(t->p != NULL ? t->p + t->n : NULL, room, fmt, ap);
        va_end(ap);
        if (k < 0 || (size_t)k > t->max - t->n) {
            t->failed = 1;
            return;
        }
        if ((size_t)k < room) {
            t->n += (size_t)k;
            return;
        }
        /* grow to at least what this append needs, doubling, within the cap */
        ncap = t->cap > 0 ? t->cap : 4096;
        while (ncap < t->n + (size_t)k + 1) {
            ncap *= 2;
        }
        if (ncap > t->max + 1) {
            ncap = t->max + 1;
        }
        np = realloc(t->p, ncap);
        if (np == NULL) {
            t->failed = 1;
            return;
        }
        t->p = np;
        t->cap = ncap;
    }
}

struct series {
    char method[8];
    char route[96];
    unsigned status;
    uint64_t count;
};

struct fs_http_metrics {
    pthread_mutex_t mu;
    size_t max;
    size_t n;
    uint64_t overflow; /* requests past the max series */
    uint64_t bytes_in;
    uint64_t bytes_out;
    struct series s[]; /* max */
};

fs_http_metrics *fs_http_metrics_new(size_t max_series)
{
    fs_http_metrics *m = calloc(1, sizeof *m + max_series * sizeof m->s[0]);

    if (m == NULL) {
        return NULL;
    }
    if (pthread_mutex_init(&m->mu, NULL) != 0) {
        free(m);
        return NULL;
    }
    m->max = max_series;
    return m;
}

void fs_http_metrics_free(fs_http_metrics *m)
{
    if (m == NULL) {
        return;
    }
    pthread_mutex_destroy(&m->mu);
    free(m);
}

void fs_http_metrics_record(fs_http_metrics *m, const struct fs_http_log_entry *e)
{
    size_t i;

    if (m == NULL) {
        return;
    }
    pthread_mutex_lock(&m->mu);
    m->bytes_in += e->bytes_in;
    m->bytes_out += e->bytes_out;
    for (i = 0; i < m->n; i++) {
        struct series *s = &m->s[i];
        if (s->status == e->status && strcmp(s->method, e->method) == 0 &&
            strcmp(s->route, e->route) == 0) {
            s->count++;
            break;
        }
    }
    if (i == m->n) {
        if (m->n < m->max) {
            struct series *s = &m->s[m->n++];
            snprintf(s->method, sizeof s->method, "%s", e->method);
            snprintf(s->route, sizeof s->route, "%s", e->route);
            s->status = e->status;
            s->count = 1;
        } else {
            m->overflow++;
        }
    }
    pthread_mutex_unlock(&m->mu);
}

void fs_http_metrics_write(fs_http_metrics *m, fs_http_server *srv, struct fs_text *t)
{
    if (srv != NULL) {
        fs_text_printf(t,
                       "# HELP fedsvd_http_connections Open HTTP connections.\n"
                       "# TYPE fedsvd_http_connections gauge\nfedsvd_http_connections %u\n",
                       fs_http_server_connections(srv));
    }
    pthread_mutex_lock(&m->mu);
    fs_text_printf(t,
                   "# HELP fedsvd_bytes_received_total Request body bytes received.\n"
                   "# TYPE fedsvd_bytes_received_total counter\nfedsvd_bytes_received_total %llu\n"
                   "# HELP fedsvd_bytes_sent_total Response body bytes sent.\n"
                   "# TYPE fedsvd_bytes_sent_total counter\nfedsvd_bytes_sent_total %llu\n",
                   (unsigned long long)m->bytes_in, (unsigned long long)m->bytes_out);
    fs_text_printf(t, "# HELP fedsvd_http_requests_total HTTP requests, by method, route and "
                      "status.\n# TYPE fedsvd_http_requests_total counter\n");
    for (size_t i = 0; i < m->n; i++) {
        fs_text_printf(t,
                       "fedsvd_http_requests_total{method=\"%s\",route=\"%s\",status=\"%u\"} "
                       "%llu\n",
                       m->s[i].method, m->s[i].route, m->s[i].status,
                       (unsigned long long)m->s[i].count);
    }
    if (m->overflow > 0) {
        fs_text_printf(t,
                       "fedsvd_http_requests_total{method=\"OTHER\",route=\"other\",status=\"0\"} "
                       "%llu\n",
                       (unsigned long long)m->overflow);
    }
    pthread_mutex_unlock(&m->mu);
    fs_text_printf(t,
                   "# HELP fedsvd_storage_unavailable 1 while the service cannot write its state "
                   "(disk full, quota, read-only).\n"
                   "# TYPE fedsvd_storage_unavailable gauge\nfedsvd_storage_unavailable %d\n"
                   "# HELP fedsvd_storage_errors_total Writes of state that failed for lack of "
                   "storage.\n"
                   "# TYPE fedsvd_storage_errors_total counter\nfedsvd_storage_errors_total %llu\n",
                   fs_storage_degraded(), (unsigned long long)fs_storage_errors());
}

int fs_http_metrics_respond(fs_http_resp *resp, struct fs_text *t)
{
    char *p = t->p;
    size_t n = t->n;
    int failed = t->failed || p == NULL;

    t->p = NULL;
    t->n = 0;
    t->cap = 0;
    if (failed) {
        free(p);
        return fs_http_problem(resp, 500, FS_PROBLEM_INTERNAL, NULL,
                               "out of memory for the metrics");
    }
    return fs_http_resp_bytes_owned(resp, 200, "text/plain; version=0.0.4; charset=utf-8", p, n);
}
