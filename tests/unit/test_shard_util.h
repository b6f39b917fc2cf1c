/* Helpers for the sharded-aggregation tests (test_shard.c, test_fedpca.c):
 * an in-memory chunk store and one secure aggregation whose masked data is
 * split over S windows of the shard-blocked layout: the coordinator's
 * secagg server holds window 0 (fs_secagg_server_begin_window), S - 1
 * data-only windows (fs_secagg_shard_new) hold the others; U3 is closed
 * with every window's verdict (close_masked_ext), the coordinator's unmask
 * plan goes to the windows (fs_secagg_shard_finish). Everything is static:
 * each test is one program. */
#ifndef FS_TEST_SHARD_UTIL_H
#define FS_TEST_SHARD_UTIL_H

#include <stdint.h>
#include <stdlib.h>

#include "proto/fedsvd_shard.h"
#include "proto/secagg.h"
#include "test_fedsvd_util.h"

#define SH_MAXS 16
#define SH_MAXC 512

/* ------------------------------------------------------------ chunk store */

struct memstore {
    uint64_t *c[SA_MAXP + 1][SH_MAXC];
    size_t m[SA_MAXP + 1][SH_MAXC];
};

static inline int ms_put(void *ctx, uint32_t party, uint64_t idx, const uint64_t *y, size_t m,
                         struct fs_err *err)
{
    struct memstore *st = ctx;

    if (party > SA_MAXP || idx >= SH_MAXC) {
        return fs_err_set(err, FS_EINVAL, "memstore: chunk %llu of party %u out of range",
                          (unsigned long long)idx, party);
    }
    free(st->c[party][idx]);
    st->c[party][idx] = malloc((m > 0 ? m : 1) * sizeof *y);
    if (st->c[party][idx] == NULL) {
        return fs_err_set(err, FS_ENOMEM, "memstore: out of memory");
    }
    memcpy(st->c[party][idx], y, m * sizeof *y);
    st->m[party][idx] = m;
    return 0;
}

static inline int ms_get(void *ctx, uint32_t party, uint64_t idx, uint64_t *y, size_t m,
                         struct fs_err *err)
{
    struct memstore *st = ctx;

    if (party > SA_MAXP || idx >= SH_MAXC || st->c[party][idx] == NULL || m > st->m[party][idx]) {
        return fs_err_set(err, FS_EIO, "memstore: no chunk %llu of party %u",
                          (unsigned long long)idx, party);
    }
    memcpy(y, st->c[party][idx], m * sizeof *y);
    return 0;
}

static inline void ms_drop(void *ctx, uint32_t party)
{
    struct memstore *st = ctx;

    for (size_t i = 0; party <= SA_MAXP && i < SH_MAXC; i++) {
        free(st->c[party][i]);
        st->c[party][i] = NULL;
        st->m[party][i] = 0;
    }
}

static inline void ms_free(struct memstore *st)
{
    for (uint32_t p = 0; p <= SA_MAXP; p++) {
        ms_drop(st, p);
    }
}

static inline struct fs_secagg_chunk_store ms_store(struct memstore *st)
{
    struct fs_secagg_chunk_store s = {st, ms_put, ms_get, ms_drop};
    return s;
}

/* ------------------------------------------------------------ sharded sum */

struct shard_agg {
    /* in */
    uint32_t S;
    uint32_t drop_party; /* 0 = nobody: else this party stops uploading half way... */
    uint32_t drop_shard; /* ...through its chunks of this window (its others complete) */
    /* out */
    uint64_t off[SH_MAXS], len[SH_MAXS];
    fs_secagg_server *w[SH_MAXS]; /* w[0] is the coordinator (borrowed from struct sa) */
    struct memstore st[SH_MAXS];  /* the data-only windows' stores */
    uint64_t *sum[SH_MAXS];       /* each window's ring sum (taken: free()) */
    uint32_t *u3;
    size_t n3;
};

static inline void shard_agg_free(struct shard_agg *g)
{
    for (uint32_t s = 0; s < SH_MAXS; s++) {
        if (s > 0) {
            fs_secagg_server_free(g->w[s]);
        }
        ms_free(&g->st[s]);
        free(g->sum[s]);
    }
    free(g->u3);
}

/* One sharded aggregation r of the fedsvd vector of job (job->shards = g->S)
 * over the key setup j (its server, with a chunk store when a party drops
 * after uploading somewhere, is the coordinator). fn produces the masked
 * chunk at a GLOBAL offset. 0, or -1 when a server refused. */
static inline int shard_aggregate(struct sa *j, const struct fs_fedsvd_job *job, uint32_t r,
                                  sa_input_fn fn, void *ctx, struct shard_agg *g)
{
    struct fs_err err = {0};
    uint64_t total = fs_fedsvd_vector_len(job);
    uint64_t cw = j->cfg.chunk_words;
    uint64_t *y = malloc(cw * sizeof *y);
    uint8_t elsewhere[SA_MAXP];
    uint8_t here[SA_MAXP];
    const uint32_t *set;
    size_t na = 0, nplan = 0;
    struct fs_prg_term *plan = NULL;
    const uint64_t *sum = NULL;
    int rc = -1;

    g->w[0] = j->s;
    for (uint32_t s = 0; s < g->S; s++) {
        if (fs_fedsvd_shard_window(job, s, &g->off[s], &g->len[s]) != 0) {
            goto out;
        }
    }
    if (y == NULL ||
        fs_secagg_server_begin_window(j->s, r, total, g->off[0], g->len[0], &err) != 0) {
        goto out;
    }
    for (uint32_t s = 1; s < g->S; s++) {
        struct fs_secagg_chunk_store cs = ms_store(&g->st[s]);
        CHECK_OK(fs_secagg_shard_new(j->cfg.n, r, total, g->off[s], g->len[s], (uint32_t)cw,
                                     &g->w[s], &err),
                 &err);
        CHECK_OK(fs_secagg_shard_set_store(g->w[s], &cs, &err), &err);
        if (g->w[s] == NULL) {
            goto out;
        }
    }
    set = fs_secagg_server_set(j->s, 0, &na);
    for (size_t q = 0; q < na; q++) {
        uint32_t i = set[q];
        if (j->gone[i]) {
            continue;
        }
        CHECK_OK(fs_secagg_client_begin(j->c[i], r, total, set, na, &err), &err);
        for (uint32_t s = 0; s < g->S; s++) {
            uint64_t nch = (g->len[s] + cw - 1) / cw;
            for (uint64_t c = 0; c < nch; c++) {
                size_t m = (size_t)(g->len[s] - c * cw < cw ? g->len[s] - c * cw : cw);
                if (i == g->drop_party && s == g->drop_shard && c >= nch / 2) {
                    break; /* gone before its upload here is complete */
                }
                CHECK_OK(fn(ctx, i, j->c[i], g->off[s] + c * cw, y, m, &err), &err);
                CHECK_OK(fs_secagg_server_add_masked(g->w[s], i, c, y, m, &err), &err);
            }
        }
        if (i == g->drop_party) {
            j->gone[i] = 1;
        }
    }
    /* U3: complete on every window */
    memset(elsewhere, 1, sizeof elsewhere);
    for (uint32_t s = 1; s < g->S; s++) {
        CHECK(fs_secagg_shard_complete(g->w[s], here) == 0);
        for (uint32_t i = 0; i < j->cfg.n; i++) {
            elsewhere[i] = (uint8_t)(elsewhere[i] && here[i]);
        }
    }
    if (fs_secagg_server_close_masked_ext(j->s, elsewhere, &err) != 0) {
        goto out;
    }
    if (sa_consistency_reveals(j, NULL, &g->u3, &g->n3, &err) != 0) {
        goto out;
    }
    /* the plan for the shards, then the coordinator's own window */
    if (fs_secagg_server_unmask_plan(j->s, &plan, &nplan, &err) != 0 ||
        fs_secagg_server_finish(j->s, &sum, &err) != 0) {
        goto out;
    }
    g->sum[0] = fs_secagg_server_take_sum(j->s, NULL);
    for (uint32_t s = 1; s < g->S; s++) {
        if (fs_secagg_shard_finish(g->w[s], g->u3, g->n3, plan, nplan, &sum, &err) != 0) {
            goto out;
        }
        g->sum[s] = fs_secagg_server_take_sum(g->w[s], NULL);
    }
    rc = 0;
out:
    if (rc != 0) {
        fprintf(stderr, "  shard_aggregate: %s\n", err.msg);
    }
    fs_secagg_plan_free(plan, nplan);
    free(y);
    return rc;
}

/* Every window's R (the sums are taken over), then the TSQR factorization. */
static inline int shard_factorize(const struct fs_fedsvd_job *job, struct shard_agg *g, int E,
                                  size_t k, enum fs_topk_method method, const uint8_t *seed,
                                  struct fs_fedsvd_published *pub)
{
    struct fs_err err = {0};
    fs_mat *r[SH_MAXS] = {NULL};
    int rc = 0;

    for (uint32_t s = 0; rc == 0 && s < g->S; s++) {
        rc = fs_fedsvd_shard_r(job, s, E, g->sum[s], &r[s], &err);
        g->sum[s] = NULL;
    }
    if (rc == 0) { /* as the coordinator: folded one shard at a time */
        fs_mat *acc = NULL;
        for (uint32_t s = 0; rc == 0 && s < g->S; s++) {
            rc = fs_fedsvd_tsqr_fold(&acc, r[s], r[s]->cols, &err);
        }
        if (rc == 0) {
            rc = fs_fedsvd_tsqr_finish(job, acc, k, method, seed, pub, &err); /* frees acc */
        } else {
            fs_mat_free(acc);
        }
    }
    if (rc != 0) {
        fprintf(stderr, "  shard_factorize: %s\n", err.msg);
    }
    for (uint32_t s = 0; s < g->S; s++) {
        fs_mat_free(r[s]);
    }
    return rc;
}

#endif
