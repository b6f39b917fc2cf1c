/* Secure aggregation windows: one sum split over several servers by word
 * ranges (see "windows" in secagg.h). The coordinator's window is a normal
 * server whose sum covers part of the vector; a shard's data-only window is
 * the same state machine with every party active from the start and no key
 * phases, unmasked by the coordinator's plan. */
#include <stdlib.h>
#include <string.h>

#include "secagg_internal.h"

/* Streams in a plan: fs_prg_sum's cap. */
#define SA_PLAN_MAX ((size_t)1 << 20)

int fs_secagg_server_begin_window(fs_secagg_server *s, uint32_t r, uint64_t total_len,
                                  uint64_t win_off, uint64_t win_len, struct fs_err *err)
{
    if (s == NULL) {
        return fs_err_set(err, FS_EINVAL, "secagg: no server");
    }
    if (s->data_only) {
        return fs_err_set(err, FS_ESTATE, "secagg: a data-only window has one aggregation");
    }
    return sa_begin_window(s, r, total_len, win_off, win_len, err);
}

int fs_secagg_server_close_masked_ext(fs_secagg_server *s, const uint8_t *elsewhere,
                                      struct fs_err *err)
{
    if (s == NULL) {
        return fs_err_set(err, FS_EINVAL, "secagg: no server");
    }
    if (s->data_only) {
        return fs_err_set(err, FS_ESTATE, "secagg: a data-only window closes in shard_finish");
    }
    return sa_close_masked(s, elsewhere, err);
}

int fs_secagg_server_unmask_plan(fs_secagg_server *s, struct fs_prg_term **plan, size_t *n,
                                 struct fs_err *err)
{
    if (s == NULL || plan == NULL || n == NULL) {
        return fs_err_set(err, FS_EINVAL, "secagg: NULL argument");
    }
    *plan = NULL;
    *n = 0;
    if (s->data_only) {
        return fs_err_set(err, FS_ESTATE, "secagg: a data-only window has no reveals");
    }
    return sa_unmask_plan(s, plan, n, err);
}

int fs_secagg_shard_new(uint32_t n_parties, uint32_t r, uint64_t total_len, uint64_t win_off,
                        uint64_t win_len, uint32_t chunk_words, fs_secagg_server **out,
                        struct fs_err *err)
{
    struct fs_secagg_config cfg;
    fs_secagg_server *s = NULL;
    int rc;

    if (out == NULL) {
        return fs_err_set(err, FS_EINVAL, "secagg shard: out is NULL");
    }
    *out = NULL;
    if (r >= FS_SECAGG_MAX_AGGREGATIONS) {
        return fs_err_set(err, FS_EINVAL, "secagg shard: aggregation %u out of range", r);
    }
    memset(&cfg, 0, sizeof cfg);
    cfg.n = n_parties;
    cfg.t = 1;
    cfg.aggregations = r + 1;
    cfg.chunk_words = chunk_words;
    rc = fs_secagg_server_new(&cfg, NULL, &s, err);
    if (rc != 0) {
        return rc;
    }
    s->data_only = 1;
    for (uint32_t v = 1; v <= n_parties; v++) {
        s->p[v].in_u1 = s->p[v].in_u2 = 1;
    }
    s->phase = FS_SECAGG_READY;
    rc = sa_begin_window(s, r, total_len, win_off, win_len, err);
    if (rc != 0) {
        fs_secagg_server_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

int fs_secagg_shard_set_store(fs_secagg_server *s, const struct fs_secagg_chunk_store *store,
                              struct fs_err *err)
{
    if (s == NULL || store == NULL || store->put == NULL || store->get == NULL) {
        return fs_err_set(err, FS_EINVAL, "secagg shard: a chunk store needs put and get");
    }
    if (!s->data_only || s->phase != FS_SECAGG_MASKED) {
        return fs_err_set(err, FS_ESTATE, "secagg shard: not a data-only window taking uploads");
    }
    for (uint32_t v = 1; v <= s->cfg.n; v++) {
        if (s->p[v].chunks_got > 0) {
            return fs_err_set(err, FS_ESTATE, "secagg shard: the store comes before the uploads");
        }
    }
    /* with a store the chunk hashes are not kept (secagg_server.c) */
    for (uint32_t v = 1; v <= s->cfg.n; v++) {
        free(s->p[v].chunk_hash);
        s->p[v].chunk_hash = NULL;
    }
    s->store = *store;
    s->has_store = 1;
    return 0;
}

int fs_secagg_shard_complete(const fs_secagg_server *s, uint8_t *complete)
{
    if (s == NULL || complete == NULL) {
        return FS_EINVAL;
    }
    for (uint32_t v = 1; v <= s->cfg.n; v++) {
        complete[v - 1] = (uint8_t)(s->p[v].complete != 0);
    }
    return 0;
}

/* The plan's streams: signs +-1, at most SA_PLAN_MAX of them. */
static int plan_check(const struct fs_prg_term *plan, size_t nplan, struct fs_err *err)
{
    if (nplan > SA_PLAN_MAX || (plan == NULL && nplan > 0)) {
        return fs_err_set(err, FS_EINVAL, "secagg shard: plan of %zu streams", nplan);
    }
    for (size_t i = 0; i < nplan; i++) {
        if (plan[i].sign != 1 && plan[i].sign != -1) {
            return fs_err_set(err, FS_EINVAL, "secagg shard: plan stream %zu has sign %d", i,
                              plan[i].sign);
        }
    }
    return 0;
}

int fs_secagg_shard_finish(fs_secagg_server *s, const uint32_t *u3, size_t nu3,
                           const struct fs_prg_term *plan, size_t nplan, const uint64_t **sum,
                           struct fs_err *err)
{
    uint8_t *in = NULL;
    uint32_t *ids = NULL;
    int rc;

    if (sum != NULL) {
        *sum = NULL;
    }
    if (s == NULL || sum == NULL || (u3 == NULL && nu3 > 0)) {
        return fs_err_set(err, FS_EINVAL, "secagg shard: NULL argument");
    }
    if (!s->data_only) {
        return fs_err_set(err, FS_EINVAL, "secagg shard: not a data-only window");
    }
    if (s->phase != FS_SECAGG_MASKED) {
        return fs_err_set(err, FS_ESTATE, "secagg shard: the window is %s",
                          s->phase == FS_SECAGG_ABORTED ? "aborted" : "already unmasked");
    }
    rc = plan_check(plan, nplan, err);
    if (rc == 0) {
        rc = sa_sorted_ids(u3, nu3, s->cfg.n, &ids, err);
    }
    if (rc != 0) {
        return rc;
    }
    in = calloc(s->cfg.n, 1);
    if (in == NULL) {
        free(ids);
        return fs_err_set(err, FS_ENOMEM, "secagg shard: out of memory");
    }
    for (size_t i = 0; i < nu3; i++) {
        in[ids[i] - 1] = 1;
        if (!s->p[ids[i]].complete) {
            rc = fs_err_set(err, FS_EINVAL,
                            "secagg shard: party %u of U3 has not completed its upload here",
                            ids[i]);
            goto out;
        }
    }
    rc = sa_close_masked(s, in, err);
    if (rc == 0) {
        rc = sa_apply_plan(s, plan, nplan, err);
    }
    if (rc == 0) {
        *sum = s->sum;
    }
out:
    free(ids);
    free(in);
    return rc;
}
