/* Ending mask sets when their job ends: see maskend.h. */
#include "maskend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "core/bgthread.h"
#include "net/http_client.h"
#include "net/log.h"

#define POLL_S       1
#define BACKOFF_MAX  300.0
#define CALL_TIMEOUT 15000 /* ms */

struct agg_maskend {
    agg_store *st;
    char ca_file[4096];
    int insecure_http; /* the server's --insecure-http: plain http to a non-loopback host */
    struct fs_bgthread bt;
};

static double wall_s(void)
{
    struct timeval tv;

    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + (double)tv.tv_usec * 1e-6;
}

/* One end call. 1: the mask set is gone (ended now, or before), 0: try again. */
static int end_call(agg_maskend *e, const struct agg_maskset_row *row, struct fs_err *err)
{
    struct fs_httpc_config hc;
    struct fs_httpc_req rq;
    struct fs_httpc_resp resp;
    fs_httpc *c = NULL;
    char path[160];
    int rc;

    fs_httpc_config_default(&hc);
    hc.base_url = row->masking_url;
    hc.token = row->end_token;
    hc.ca_file = e->ca_file[0] != '\0' ? e->ca_file : NULL;
    hc.allow_insecure_http = e->insecure_http;
    hc.timeout_ms = CALL_TIMEOUT;
    hc.max_retries = 1;
    hc.user_agent = "fedsvd-aggregation-server";
    memset(&rq, 0, sizeof rq);
    memset(&resp, 0, sizeof resp);
    snprintf(path, sizeof path, "/v1/masksets/%s/end", row->maskset);
    rq.method = "POST";
    rq.path = path;
    rq.accept = "application/json";
    rq.retry = FS_HTTPC_RETRY_ALWAYS; /* ending twice is the same as ending once */
    rc = fs_httpc_new(&c, &hc, err);
    if (rc == 0) {
        rc = fs_httpc_do(c, &rq, &resp, err);
    }
    if (rc == 0 && resp.status != 404 && resp.status != 410) {
        rc = fs_httpc_check(&resp, "POST", path, err);
    }
    fs_httpc_resp_clear(&resp);
    fs_httpc_free(c);
    return rc == 0;
}

static int on_due(void *ctx, const struct agg_maskset_row *row, struct fs_err *err)
{
    agg_maskend *e = ctx;
    struct fs_err cerr = {0};
    double now = wall_s();
    int ended = end_call(e, row, &cerr);
    double backoff = 2.0;

    for (uint32_t i = 0; i < row->attempts && backoff < BACKOFF_MAX; i++) {
        backoff *= 2;
    }
    if (backoff > BACKOFF_MAX) {
        backoff = BACKOFF_MAX;
    }
    if (ended) {
        fs_log_pack(FS_LOG_INFO, "mask set ended", "{s:s, s:s}", "job", row->job_id, "maskset",
                    row->maskset);
    } else if (row->attempts + 1 >= AGG_MASKEND_ATTEMPTS) {
        fs_log_pack(FS_LOG_ERROR,
                    "cannot end the job's mask set; giving up (its ttl_s on the masking server "
                    "deletes it)",
                    "{s:s, s:s, s:s}", "job", row->job_id, "maskset", row->maskset, "error",
                    cerr.msg);
    } else {
        fs_log_pack(FS_LOG_WARN, "cannot end the job's mask set; will retry",
                    "{s:s, s:s, s:s, s:f}", "job", row->job_id, "maskset", row->maskset, "error",
                    cerr.msg, "retry_in_s", backoff);
    }
    return agg_store_maskset_result(e->st, row->job_id, ended, now + backoff, now, err);
}

static void *loop(void *arg)
{
    agg_maskend *e = arg;

    while (!fs_bgthread_stopping(&e->bt)) {
        struct fs_err err = {0};

        if (agg_store_maskset_due(e->st, wall_s(), AGG_MASKEND_ATTEMPTS, on_due, e, &err) != 0) {
            fs_log_pack(FS_LOG_WARN, "mask set end calls", "{s:s}", "error", err.msg);
        }
        (void)fs_bgthread_wait(&e->bt, POLL_S * 1000);
    }
    return NULL;
}

int agg_maskend_start(agg_store *st, const char *ca_file, int insecure_http, agg_maskend **out,
                      struct fs_err *err)
{
    agg_maskend *e = calloc(1, sizeof *e);

    *out = NULL;
    if (e == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    e->st = st;
    e->insecure_http = insecure_http != 0;
    snprintf(e->ca_file, sizeof e->ca_file, "%s", ca_file != NULL ? ca_file : "");
    fs_bgthread_init(&e->bt);
    if (fs_bgthread_start(&e->bt, loop, e, NULL) != 0) {
        fs_bgthread_stop(&e->bt);
        free(e);
        return fs_err_set(err, FS_EIO, "cannot start the mask-set end thread");
    }
    *out = e;
    return 0;
}

void agg_maskend_stop(agg_maskend *e)
{
    if (e == NULL) {
        return;
    }
    fs_bgthread_stop(&e->bt);
    free(e);
}
