/* The /v1/shards routes (openapi.yaml, tag shards): the windows this server
 * holds for sharded jobs of another aggregation server. http.c checks the
 * peer token before these run; the masked chunk route is http.c's streamed
 * upload with a window as its target. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "../../api/shardwire.h"
#include "crypto/ct.h"
#include "http.h"
#include "net/reply.h"
#include "shardgc.h"
#include "shardwin.h"

/* The window of {job}, or a 404 (NULL). */
static agg_shardwin *find_win(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    struct agg_app *app = agg_http_app(ctx);
    const char *id = fs_http_req_param(req, "job");
    agg_shardwin *w = app->shards != NULL ? agg_shards_find(app->shards, id) : NULL;

    if (w == NULL) {
        (void)fs_http_fail(resp, FS_ENOTFOUND, "no shard window for job %s",
                           fs_job_id_valid(id) ? id : "(malformed id)");
    }
    return w;
}

int agg_shard_h_put(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    struct agg_app *app = agg_http_app(ctx);
    struct fs_err err = {0};
    json_t *body = NULL;
    agg_shardwin *w;
    int created = 0;
    int rc;

    if (app->shards == NULL) {
        return fs_http_fail(resp, FS_EUNAVAILABLE, "%s", "shard windows are not available");
    }
    if (fs_http_body_json(req, resp, &body) != 0) {
        return 0;
    }
    rc = agg_shards_create(app->shards, fs_http_req_param(req, "job"), body, &created, &err);
    json_decref(body);
    if (rc != 0) {
        return fs_http_problem_err(resp, &err);
    }
    w = agg_shards_find(app->shards, fs_http_req_param(req, "job"));
    if (w == NULL) { /* deleted meanwhile */
        return fs_http_fail(resp, FS_ECONFLICT, "%s", "the window was deleted meanwhile");
    }
    rc = fs_http_reply_json(resp, created ? 201 : 200, agg_shardwin_doc(w), NULL);
    agg_shardwin_unref(w);
    return rc;
}

int agg_shard_h_get(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    agg_shardwin *w = find_win(req, resp, ctx);
    int rc;

    if (w == NULL) {
        return 0;
    }
    rc = fs_http_reply_json(resp, 200, agg_shardwin_doc(w), NULL);
    agg_shardwin_unref(w);
    return rc;
}

int agg_shard_h_delete(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    struct agg_app *app = agg_http_app(ctx);
    struct fs_err err = {0};

    if (app->shards == NULL ||
        agg_shards_delete(app->shards, fs_http_req_param(req, "job"), &err) != 0) {
        if (app->shards == NULL) {
            fs_err_set(&err, FS_ENOTFOUND, "no shard window for this job");
        }
        return fs_http_problem_err(resp, &err);
    }
    return fs_http_resp_empty(resp, 204);
}

int agg_shard_h_finish(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    struct fs_err err = {0};
    json_t *body = NULL;
    agg_shardwin *w = find_win(req, resp, ctx);
    int rc;

    if (w == NULL) {
        return 0;
    }
    if (fs_http_body_json(req, resp, &body) != 0) {
        agg_shardwin_unref(w);
        return 0;
    }
    rc = agg_shardwin_finish(w, body, &err);
    fs_shardwire_finish_wipe(body); /* the plan is secret: its key strings before freeing */
    json_decref(body);
    if (rc != 0) {
        agg_shardwin_unref(w);
        return fs_http_problem_err(resp, &err);
    }
    rc = fs_http_reply_json(resp, 202, agg_shardwin_doc(w), NULL);
    agg_shardwin_unref(w);
    return rc;
}

int agg_shard_h_r(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    struct fs_err err = {0};
    char path[4600];
    agg_shardwin *w = find_win(req, resp, ctx);
    int rc;

    if (w == NULL) {
        return 0;
    }
    rc = agg_shardwin_r_path(w, path, sizeof path, &err);
    agg_shardwin_unref(w);
    if (rc != 0) {
        return fs_http_problem_err(resp, &err);
    }
    if (fs_http_resp_file(resp, 200, "application/x-npy", path, &err) != 0) {
        fs_err_set(&err, FS_ENOTFOUND, "R is gone (the window was deleted)");
        return fs_http_problem_err(resp, &err);
    }
    return 0;
}

int agg_shard_h_deletions(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    struct agg_app *app = agg_http_app(ctx);

    (void)req;
    return fs_http_reply_json(
        resp, 200, agg_del_doc(app->cfg->data_dir, app->cfg->shard_deletion_max_age_s), NULL);
}
