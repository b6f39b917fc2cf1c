/* Server side of secure aggregation: see secagg.h for the rounds.
 * Every add_* validates the whole message before it changes any state, so a
 * bad message is rejected and changes nothing. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/mem.h"
#include "../crypto/ct.h"
#include "../crypto/ed25519.h"
#include "../crypto/sha256.h"
#include "../crypto/x25519.h"
#include "secagg_internal.h"

static void ingest_stop(fs_secagg_server *s);

static int abort_job(fs_secagg_server *s, struct fs_err *err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* 1 when u and v mask with each other (any two parties in the full graph). */
static int nbr(const fs_secagg_server *s, uint32_t u, uint32_t v)
{
    return fs_secagg_adjacent(&s->cfg, s->pos, u, v);
}

static int abort_job(fs_secagg_server *s, struct fs_err *err, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(s->abort_reason, sizeof s->abort_reason, fmt, ap);
    va_end(ap);
    ingest_stop(s);
    s->phase = FS_SECAGG_ABORTED;
    if (s->sum != NULL) {
        fs_wipe(s->sum, s->len * sizeof *s->sum);
    }
    return fs_err_set(err, FS_ESTATE, "secagg aborted: %s", s->abort_reason);
}

static int want_phase(const fs_secagg_server *s, enum fs_secagg_phase ph, const char *what,
                      struct fs_err *err)
{
    if (s->phase == FS_SECAGG_ABORTED) {
        return fs_err_set(err, FS_ESTATE, "secagg: job aborted: %s", s->abort_reason);
    }
    if (s->phase != ph) {
        return fs_err_set(err, FS_ESTATE, "secagg: %s is not allowed in this phase", what);
    }
    return 0;
}

static int party_ok(const fs_secagg_server *s, uint32_t id)
{
    return id >= 1 && id <= s->cfg.n;
}

/* The round of `ph` is over (not aborted): an add_* for it can only be the
 * repeat of a message already accepted, which is answered as the first one
 * was (0) when its bytes are identical, FS_ECONFLICT otherwise (a lost
 * response must not fail the honest party whose message counts). The
 * messages of R2-R4 are kept until the next aggregation begins. */
static int round_closed(const fs_secagg_server *s, enum fs_secagg_phase ph)
{
    switch (s->phase) {
    case FS_SECAGG_ABORTED:
    case FS_SECAGG_ADVERTISE:
        return 0;
    case FS_SECAGG_SHARE:
        return ph == FS_SECAGG_ADVERTISE;
    case FS_SECAGG_READY:
        return ph == FS_SECAGG_ADVERTISE || ph == FS_SECAGG_SHARE || s->has_round;
    default:
        return ph < s->phase;
    }
}

static int closed_conflict(struct fs_err *err, const char *what, uint32_t from)
{
    return fs_err_set(err, FS_ECONFLICT,
                      "secagg: %s is closed and party %u's message is not the one accepted", what,
                      from);
}

int fs_secagg_server_new(const struct fs_secagg_config *cfg,
                         const struct fs_secagg_chunk_store *store, fs_secagg_server **out,
                         struct fs_err *err)
{
    fs_secagg_server *s = NULL;
    int rc;

    *out = NULL;
    rc = fs_secagg_config_check(cfg, err);
    if (rc != 0) {
        return rc;
    }
    s = calloc(1, sizeof *s);
    if (s == NULL) {
        return fs_err_set(err, FS_ENOMEM, "secagg: out of memory");
    }
    pthread_mutex_init(&s->ingest_mu, NULL);
    pthread_cond_init(&s->ingest_cv, NULL);
    for (int i = 0; i < SA_STRIPES; i++) {
        pthread_mutex_init(&s->stripe[i], NULL);
    }
    s->cfg = *cfg;
    s->threads = 1;
    if (store != NULL && store->put != NULL) {
        s->store = *store;
        s->has_store = 1;
    }
    s->phase = FS_SECAGG_ADVERTISE;
    s->p = calloc((size_t)cfg->n + 1, sizeof *s->p);
    s->rv = calloc((size_t)cfg->n + 1, sizeof *s->rv);
    s->nrv = calloc((size_t)cfg->n + 1, sizeof *s->nrv);
    for (int i = 0; i < 5; i++) {
        s->set[i] = calloc((size_t)cfg->n, sizeof *s->set[i]);
    }
    s->sigs = calloc((size_t)cfg->n, sizeof *s->sigs);
    if (s->p == NULL || s->rv == NULL || s->nrv == NULL || s->set[0] == NULL || s->set[3] == NULL ||
        s->set[4] == NULL || s->sigs == NULL) {
        fs_secagg_server_free(s);
        return fs_err_set(err, FS_ENOMEM, "secagg: out of memory");
    }
    *out = s;
    return 0;
}

enum fs_secagg_phase fs_secagg_server_phase(const fs_secagg_server *s)
{
    return s->phase;
}

const char *fs_secagg_server_abort_reason(const fs_secagg_server *s)
{
    return s->abort_reason;
}

int fs_secagg_server_add_adv(fs_secagg_server *s, const struct fs_secagg_adv *a, struct fs_err *err)
{
    uint8_t msg[SA_ADV_MSG_MAX];
    size_t n = 0;
    int rc;

    if (round_closed(s, FS_SECAGG_ADVERTISE)) {
        if (party_ok(s, a->id) && s->p[a->id].in_u1 && fs_secagg_adv_equal(&s->p[a->id].adv, a)) {
            return 0;
        }
        return closed_conflict(err, "key advertisement", a->id);
    }
    rc = want_phase(s, FS_SECAGG_ADVERTISE, "key advertisement", err);
    if (rc != 0) {
        return rc;
    }
    if (!party_ok(s, a->id)) {
        return fs_err_set(err, FS_EINVAL, "secagg: party id %u outside 1..%u", a->id, s->cfg.n);
    }
    rc = sa_pin_check((const uint8_t(*)[FS_SECAGG_KEY_LEN])s->pins, a, err);
    if (rc != 0) {
        return rc;
    }
    rc = sa_adv_msg(&s->cfg, a, msg, &n, err);
    if (rc != 0) {
        return rc;
    }
    if (fs_ed25519_verify(a->sig, a->sign_pk, msg, n, err) != 0) {
        return fs_err_set(err, FS_EAUTH, "secagg: advertisement of party %u has a bad signature",
                          a->id);
    }
    if (s->p[a->id].in_u1) {
        if (fs_secagg_adv_equal(&s->p[a->id].adv, a)) {
            return 0;
        }
        return fs_err_set(err, FS_ECONFLICT, "secagg: party %u already advertised other keys",
                          a->id);
    }
    rc = fs_secagg_adv_copy(&s->p[a->id].adv, a, err);
    if (rc != 0) {
        return rc;
    }
    s->p[a->id].in_u1 = 1;
    return 0;
}

int fs_secagg_server_close_adv(fs_secagg_server *s, struct fs_err *err)
{
    size_t k = 0;
    int rc = want_phase(s, FS_SECAGG_ADVERTISE, "closing advertisement", err);

    if (rc != 0) {
        return rc;
    }
    for (uint32_t v = 1; v <= s->cfg.n; v++) {
        k += (size_t)s->p[v].in_u1;
    }
    if (k < s->cfg.t) {
        return abort_job(s, err, "%zu parties advertised keys, threshold %u", k, s->cfg.t);
    }
    s->roster = calloc(k, sizeof *s->roster);
    if (s->roster == NULL) {
        return fs_err_set(err, FS_ENOMEM, "secagg: out of memory");
    }
    s->nroster = 0;
    for (uint32_t v = 1; v <= s->cfg.n; v++) {
        if (s->p[v].in_u1) {
            s->roster[s->nroster++] = s->p[v].adv;
        }
    }
    rc = sa_session_id(&s->cfg, s->roster, s->nroster, s->session, err);
    if (rc == 0 && s->cfg.degree != 0) {
        free(s->pos);
        s->pos = malloc(((size_t)s->cfg.n + 1) * sizeof *s->pos);
        rc = s->pos == NULL ? fs_err_set(err, FS_ENOMEM, "secagg: out of memory")
                            : fs_secagg_graph(&s->cfg, s->session, s->pos, err);
    }
    if (rc == 0) {
        s->phase = FS_SECAGG_SHARE;
    }
    return rc;
}

const struct fs_secagg_adv *fs_secagg_server_roster(const fs_secagg_server *s, size_t *k)
{
    *k = s->nroster;
    return s->roster;
}

static int same_cts(const struct sparty *p, const struct fs_secagg_share_ct *cts, size_t k)
{
    for (size_t i = 0; i < k; i++) {
        const struct fs_secagg_share_ct *have = &p->cts_by_to[cts[i].to];
        if (have->len != cts[i].len || memcmp(have->ct, cts[i].ct, cts[i].len) != 0) {
            return 0;
        }
    }
    return 1;
}

int fs_secagg_server_add_shares(fs_secagg_server *s, uint32_t from,
                                const struct fs_secagg_share_ct *cts, size_t k, struct fs_err *err)
{
    size_t want_len = fs_secagg_share_ct_len(&s->cfg);
    struct fs_secagg_share_ct *by_to = NULL;
    uint8_t *seen = NULL;
    int closed = round_closed(s, FS_SECAGG_SHARE);
    int rc = closed ? 0 : want_phase(s, FS_SECAGG_SHARE, "share upload", err);

    if (rc != 0) {
        return rc;
    }
    if (closed && (!party_ok(s, from) || !s->p[from].in_u2)) {
        return closed_conflict(err, "share exchange", from);
    }
    if (!party_ok(s, from) || !s->p[from].in_u1) {
        return fs_err_set(err, FS_EINVAL, "secagg: party %u did not advertise keys", from);
    }
    {
        size_t want = 0; /* one bundle per roster neighbour */
        for (size_t i = 0; i < s->nroster; i++) {
            want += (size_t)nbr(s, from, s->roster[i].id);
        }
        if (k != want) {
            return fs_err_set(err, FS_EINVAL, "secagg: party %u sent %zu share bundles, want %zu",
                              from, k, want);
        }
    }
    seen = calloc((size_t)s->cfg.n + 1, 1);
    if (seen == NULL) {
        return fs_err_set(err, FS_ENOMEM, "secagg: out of memory");
    }
    for (size_t i = 0; i < k; i++) {
        uint32_t to = cts[i].to;
        if (cts[i].from != from || !party_ok(s, to) || !nbr(s, from, to) || !s->p[to].in_u1 ||
            seen[to]) {
            rc = fs_err_set(err, FS_EINVAL, "secagg: share bundle %zu of party %u is misaddressed",
                            i, from);
            goto out;
        }
        if (cts[i].len != want_len || cts[i].ct == NULL) {
            rc = fs_err_set(err, FS_EINVAL,
                            "secagg: share bundle %zu of party %u has %zu bytes, "
                            "want %zu",
                            i, from, cts[i].len, want_len);
            goto out;
        }
        seen[to] = 1;
    }
    if (s->p[from].in_u2) {
        rc = same_cts(&s->p[from], cts, k) ? 0
             : closed                      ? closed_conflict(err, "share exchange", from)
                      : fs_err_set(err, FS_ECONFLICT, "secagg: party %u already sent other shares",
                                   from);
        goto out;
    }
    by_to = calloc((size_t)s->cfg.n + 1, sizeof *by_to);
    if (by_to == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "secagg: out of memory");
        goto out;
    }
    for (size_t i = 0; i < k; i++) {
        struct fs_secagg_share_ct *d = &by_to[cts[i].to];
        d->from = from;
        d->to = cts[i].to;
        d->ct = malloc(want_len);
        if (d->ct == NULL) {
            fs_secagg_share_cts_free(by_to, (size_t)s->cfg.n + 1);
            rc = fs_err_set(err, FS_ENOMEM, "secagg: out of memory");
            goto out;
        }
        memcpy(d->ct, cts[i].ct, want_len);
        d->len = want_len;
    }
    s->p[from].cts_by_to = by_to;
    s->p[from].in_u2 = 1;
out:
    free(seen);
    return rc;
}

int fs_secagg_server_close_shares(fs_secagg_server *s, struct fs_err *err)
{
    size_t k = 0;
    int rc = want_phase(s, FS_SECAGG_SHARE, "closing share exchange", err);

    if (rc != 0) {
        return rc;
    }
    for (uint32_t v = 1; v <= s->cfg.n; v++) {
        k += (size_t)s->p[v].in_u2;
    }
    if (k < s->cfg.t) {
        return abort_job(s, err, "%zu parties shared keys, threshold %u", k, s->cfg.t);
    }
    s->phase = FS_SECAGG_READY;
    return 0;
}

int fs_secagg_server_shares_for(const fs_secagg_server *s, uint32_t to,
                                const struct fs_secagg_share_ct ***out, size_t *k,
                                struct fs_err *err)
{
    const struct fs_secagg_share_ct **list = NULL;
    size_t n = 0;

    *out = NULL;
    *k = 0;
    if (s->phase == FS_SECAGG_ADVERTISE || s->phase == FS_SECAGG_SHARE ||
        s->phase == FS_SECAGG_ABORTED) {
        return fs_err_set(err, FS_ESTATE, "secagg: share exchange not closed");
    }
    if (!party_ok(s, to) || !s->p[to].in_u2) {
        return fs_err_set(err, FS_EINVAL, "secagg: party %u is not in the key setup", to);
    }
    list = calloc(s->cfg.n, sizeof *list);
    if (list == NULL) {
        return fs_err_set(err, FS_ENOMEM, "secagg: out of memory");
    }
    for (uint32_t v = 1; v <= s->cfg.n; v++) {
        if (nbr(s, v, to) && s->p[v].in_u2) {
            list[n++] = &s->p[v].cts_by_to[to];
        }
    }
    *out = list;
    *k = n;
    return 0;
}

static void clear_round(fs_secagg_server *s)
{
    for (uint32_t v = 1; v <= s->cfg.n; v++) {
        struct sparty *p = &s->p[v];
        if (s->has_store && p->chunks_got > 0 && s->store.drop != NULL) {
            s->store.drop(s->store.ctx, v);
        }
        free(p->chunk_have);
        free(p->chunk_prog);
        free(p->chunk_hash);
        p->chunk_have = NULL;
        p->chunk_prog = NULL;
        p->chunk_hash = NULL;
        p->chunks_got = 0;
        p->active = p->complete = p->in_u3 = p->in_u4 = p->revealed = 0;
        if (s->rv[v] != NULL) {
            fs_wipe(s->rv[v], s->nrv[v] * sizeof *s->rv[v]);
            free(s->rv[v]);
            s->rv[v] = NULL;
        }
        s->nrv[v] = 0;
    }
    free(s->u3msg);
    s->u3msg = NULL;
    for (int i = 0; i < 5; i++) {
        s->nset[i] = 0;
    }
}

int fs_secagg_server_begin(fs_secagg_server *s, uint32_t r, uint64_t len, struct fs_err *err)
{
    return sa_begin_window(s, r, len, 0, len, err);
}

int sa_begin_window(fs_secagg_server *s, uint32_t r, uint64_t total_len, uint64_t win_off,
                    uint64_t len, struct fs_err *err)
{
    size_t na = 0;
    uint64_t cw;
    int rc = want_phase(s, FS_SECAGG_READY, "starting an aggregation", err);

    if (rc != 0) {
        return rc;
    }
    if (r >= s->cfg.aggregations || (s->has_round && r <= s->round)) {
        return fs_err_set(err, FS_ESTATE, "secagg: aggregation %u not allowed", r);
    }
    if (total_len == 0 || total_len > ((uint64_t)1 << 40)) {
        return fs_err_set(err, FS_EINVAL, "secagg: vector length %llu out of range",
                          (unsigned long long)total_len);
    }
    if (len == 0 || win_off > total_len || len > total_len - win_off) {
        return fs_err_set(err, FS_EINVAL, "secagg: window %llu+%llu outside %llu words",
                          (unsigned long long)win_off, (unsigned long long)len,
                          (unsigned long long)total_len);
    }
    clear_round(s);
    for (uint32_t v = 1; v <= s->cfg.n; v++) {
        if (s->p[v].in_u2 && !s->p[v].dropped) {
            s->set[0][na++] = v;
        }
    }
    s->round = r;
    s->has_round = 1;
    if (na < s->cfg.t) {
        return abort_job(s, err, "%zu parties left for aggregation %u, threshold %u", na, r,
                         s->cfg.t);
    }
    cw = sa_chunk_words(&s->cfg);
    free(s->sum);
    free(s->scratch);
    s->sum = calloc((size_t)len, sizeof *s->sum);
    s->scratch = malloc((size_t)(cw < len ? cw : len) * sizeof *s->scratch);
    if (s->sum == NULL || s->scratch == NULL) {
        return fs_err_set(err, FS_ENOMEM, "secagg: cannot hold a sum of %llu words",
                          (unsigned long long)len);
    }
    /* Chunks are folded into the sum under the caller's lock: fault it in
     * now, in one call, rather than page by page in the first fold of each
     * chunk (a read then a write of a fresh page, see core/mem.h). */
    fs_prefault_write(s->sum, (size_t)len * sizeof *s->sum);
    s->len = len;
    s->total_len = total_len;
    s->win_off = win_off;
    s->nchunks = (len + cw - 1) / cw;
    for (size_t i = 0; i < na; i++) {
        struct sparty *p = &s->p[s->set[0][i]];
        p->active = 1;
        p->chunk_have = calloc((size_t)s->nchunks, 1);
        p->chunk_prog = calloc((size_t)s->nchunks, sizeof *p->chunk_prog);
        p->chunk_hash = s->has_store ? NULL : malloc((size_t)s->nchunks * 32);
        if (p->chunk_have == NULL || p->chunk_prog == NULL ||
            (!s->has_store && p->chunk_hash == NULL)) {
            return fs_err_set(err, FS_ENOMEM, "secagg: out of memory");
        }
    }
    s->nset[0] = na;
    s->phase = FS_SECAGG_MASKED;
    return 0;
}

const uint32_t *fs_secagg_server_set(const fs_secagg_server *s, int which, size_t *k)
{
    if (which != 0 && which != 3 && which != 4) {
        *k = 0;
        return NULL;
    }
    *k = s->nset[which];
    return s->set[which];
}

/* ------------------------------------------------------------ folding */

enum fold_op { FOLD_ADD, FOLD_SUB, FOLD_ADD_LE };

static uint64_t word_at(const uint8_t *p, size_t i, enum fold_op op)
{
    uint64_t v;

    memcpy(&v, p + 8 * i, sizeof v);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    if (op == FOLD_ADD_LE) {
        v = __builtin_bswap64(v);
    }
#else
    (void)op;
#endif
    return v;
}

static void fold_range(uint64_t *sum, const uint8_t *p, size_t n, enum fold_op op)
{
    if (op == FOLD_SUB) {
        for (size_t i = 0; i < n; i++) {
            sum[i] -= word_at(p, i, op);
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            sum[i] += word_at(p, i, op);
        }
    }
}

/* Words [off, off + n) of the sum op= the n words at p, each block of
 * SA_BLOCK_WORDS under its stripe's lock. Blocks whose lock is free go
 * first, then the busy ones are waited for: parties that upload the same
 * chunk at the same moment fold side by side instead of queueing. */
static void fold_locked(fs_secagg_server *s, uint64_t off, const void *src, size_t n,
                        enum fold_op op)
{
    const uint8_t *p = src;
    uint64_t b0;
    uint64_t b1;

    if (n == 0) {
        return;
    }
    b0 = off / SA_BLOCK_WORDS;
    b1 = (off + n - 1) / SA_BLOCK_WORDS;
    for (uint64_t w0 = b0; w0 <= b1; w0 += SA_STRIPES) {
        uint64_t w1 = b1 - w0 < SA_STRIPES - 1 ? b1 : w0 + SA_STRIPES - 1;
        uint64_t left = w1 - w0 == 63 ? ~(uint64_t)0 : (((uint64_t)1 << (w1 - w0 + 1)) - 1);
        int wait = 0;
        while (left != 0) {
            for (uint64_t b = w0; b <= w1; b++) {
                uint64_t bit = (uint64_t)1 << (b - w0);
                pthread_mutex_t *mu = &s->stripe[b % SA_STRIPES];
                uint64_t lo;
                uint64_t hi;
                if ((left & bit) == 0) {
                    continue;
                }
                if (wait) {
                    pthread_mutex_lock(mu);
                } else if (pthread_mutex_trylock(mu) != 0) {
                    continue;
                }
                lo = b * SA_BLOCK_WORDS > off ? b * SA_BLOCK_WORDS : off;
                hi = (b + 1) * SA_BLOCK_WORDS < off + n ? (b + 1) * SA_BLOCK_WORDS : off + n;
                fold_range(s->sum + lo, p + 8 * (lo - off), (size_t)(hi - lo), op);
                pthread_mutex_unlock(mu);
                left &= ~bit;
            }
            wait = 1;
        }
    }
}

static void fold(fs_secagg_server *s, uint64_t off, const uint64_t *y, size_t m)
{
    fold_locked(s, off, y, m, FOLD_ADD);
}

static void unfold(fs_secagg_server *s, uint64_t off, const uint64_t *y, size_t m)
{
    fold_locked(s, off, y, m, FOLD_SUB);
}

/* Wait for the folds in progress and void every pending upload (the
 * caller's lock held, so no new one begins). */
static void ingest_stop(fs_secagg_server *s)
{
    pthread_mutex_lock(&s->ingest_mu);
    s->gen++;
    while (s->folding > 0) {
        pthread_cond_wait(&s->ingest_cv, &s->ingest_mu);
    }
    pthread_mutex_unlock(&s->ingest_mu);
}

/* Party v dropped mid-upload: subtract the chunks it did send (read back from
 * the store) so the sum holds complete uploads only. */
static int unfold_party(fs_secagg_server *s, uint32_t v, struct fs_err *err)
{
    struct sparty *p = &s->p[v];
    uint64_t cw = sa_chunk_words(&s->cfg);

    for (uint64_t idx = 0; idx < s->nchunks; idx++) {
        uint64_t off = idx * cw;
        size_t m = (size_t)(s->len - off < cw ? s->len - off : cw);
        int rc;
        if (!p->chunk_have[idx]) {
            continue;
        }
        rc = s->store.get(s->store.ctx, v, idx, s->scratch, m, err);
        if (rc != 0) {
            return rc;
        }
        unfold(s, off, s->scratch, m);
        p->chunk_have[idx] = 0;
    }
    p->chunks_got = 0;
    if (s->store.drop != NULL) {
        s->store.drop(s->store.ctx, v);
    }
    return 0;
}

int fs_secagg_server_add_masked(fs_secagg_server *s, uint32_t from, uint64_t idx, const uint64_t *y,
                                size_t m, struct fs_err *err)
{
    return fs_secagg_server_add_masked_ex(s, from, idx, y, m, NULL, err);
}

/* Party from re-sent chunk idx: 1 if it equals what was accepted, 0 if not,
 * a negative FS_E* code if the stored chunk cannot be read back. */
static int same_chunk(fs_secagg_server *s, uint32_t from, uint64_t idx, const uint64_t *y, size_t m,
                      const uint8_t *h, struct fs_err *err)
{
    if (s->has_store) {
        int rc = s->store.get(s->store.ctx, from, idx, s->scratch, m, err);
        if (rc != 0) {
            return rc < 0 ? rc : FS_EIO;
        }
        return memcmp(s->scratch, y, m * sizeof *y) == 0;
    }
    return fs_ct_eq(h, s->p[from].chunk_hash + idx * 32, 32);
}

int fs_secagg_server_add_masked_ex(fs_secagg_server *s, uint32_t from, uint64_t idx,
                                   const uint64_t *y, size_t m, int *is_new, struct fs_err *err)
{
    uint64_t cw = sa_chunk_words(&s->cfg);
    uint8_t h[32];
    struct sparty *p;
    uint64_t off;
    size_t want;
    int closed = round_closed(s, FS_SECAGG_MASKED);
    int rc = closed ? 0 : want_phase(s, FS_SECAGG_MASKED, "masked input upload", err);

    if (is_new != NULL) {
        *is_new = 0;
    }
    if (rc != 0) {
        return rc;
    }
    if (closed && (!party_ok(s, from) || !s->p[from].active || s->p[from].chunk_have == NULL ||
                   idx >= s->nchunks || !s->p[from].chunk_have[idx])) {
        return closed_conflict(err, "masked input", from);
    }
    if (!party_ok(s, from) || !s->p[from].active) {
        return fs_err_set(err, FS_EINVAL, "secagg: party %u is not active in aggregation %u", from,
                          s->round);
    }
    if (idx >= s->nchunks) {
        return fs_err_set(err, FS_EINVAL, "secagg: chunk %llu of %llu does not exist",
                          (unsigned long long)idx, (unsigned long long)s->nchunks);
    }
    off = idx * cw;
    want = (size_t)(s->len - off < cw ? s->len - off : cw);
    if (m != want) {
        return fs_err_set(err, FS_EINVAL, "secagg: chunk %llu has %zu words, want %zu",
                          (unsigned long long)idx, m, want);
    }
    if (y == NULL && m > 0) {
        return fs_err_set(err, FS_EINVAL, "secagg: no chunk data");
    }
    p = &s->p[from];
    if (p->chunk_have[idx] == CHUNK_PENDING) {
        return fs_err_set(err, FS_EUNAVAILABLE,
                          "secagg: chunk %llu of party %u is being received; retry",
                          (unsigned long long)idx, from);
    }
    if (!s->has_store) {
        rc = fs_sha256(h, y, m * sizeof *y, err);
        if (rc != 0) {
            return rc;
        }
    }
    if (p->chunk_have[idx]) {
        rc = same_chunk(s, from, idx, y, m, h, err);
        if (rc < 0 && !closed) {
            return rc;
        }
        if (rc == 1) {
            return 0;
        }
        if (closed) {
            return closed_conflict(err, "masked input", from);
        }
        return fs_err_set(err, FS_ECONFLICT,
                          "secagg: chunk %llu of party %u re-sent with other "
                          "content",
                          (unsigned long long)idx, from);
    }
    if (s->has_store) {
        rc = s->store.put(s->store.ctx, from, idx, y, m, err);
        if (rc != 0) {
            return rc;
        }
    }
    fold(s, off, y, m);
    if (!s->has_store) {
        memcpy(p->chunk_hash + idx * 32, h, 32);
    }
    p->chunk_have[idx] = 1;
    p->chunks_got++;
    if (is_new != NULL) {
        *is_new = 1;
    }
    if (p->chunks_got == s->nchunks) {
        p->complete = 1;
    }
    return 0;
}

/* ------------------------------------------------------------ streamed uploads */

int fs_secagg_server_upload_begin(fs_secagg_server *s, uint32_t from, uint64_t idx, size_t m,
                                  struct fs_secagg_upload *up, int *stream, struct fs_err *err)
{
    uint64_t cw = sa_chunk_words(&s->cfg);
    struct sparty *p;
    size_t want;
    int rc;

    memset(up, 0, sizeof *up);
    *stream = 0;
    if (!s->has_store || round_closed(s, FS_SECAGG_MASKED)) {
        return 0;
    }
    rc = want_phase(s, FS_SECAGG_MASKED, "masked input upload", err);
    if (rc != 0) {
        return rc;
    }
    if (!party_ok(s, from) || !s->p[from].active) {
        return fs_err_set(err, FS_EINVAL, "secagg: party %u is not active in aggregation %u", from,
                          s->round);
    }
    if (idx >= s->nchunks) {
        return fs_err_set(err, FS_EINVAL, "secagg: chunk %llu of %llu does not exist",
                          (unsigned long long)idx, (unsigned long long)s->nchunks);
    }
    want = (size_t)(s->len - idx * cw < cw ? s->len - idx * cw : cw);
    if (m != want) {
        return fs_err_set(err, FS_EINVAL, "secagg: chunk %llu has %zu words, want %zu",
                          (unsigned long long)idx, m, want);
    }
    p = &s->p[from];
    if (p->chunk_have[idx] == CHUNK_HAVE) {
        return 0; /* a repeat: add_masked_ex compares it */
    }
    if (p->chunk_have[idx] == CHUNK_PENDING) {
        return fs_err_set(err, FS_EUNAVAILABLE,
                          "secagg: chunk %llu of party %u is being received; retry",
                          (unsigned long long)idx, from);
    }
    p->chunk_have[idx] = CHUNK_PENDING;
    p->chunk_prog[idx] = 0;
    pthread_mutex_lock(&s->ingest_mu);
    s->uploads++;
    up->gen = s->gen;
    pthread_mutex_unlock(&s->ingest_mu);
    up->s = s;
    up->from = from;
    up->idx = idx;
    up->m = m;
    *stream = 1;
    return 0;
}

static int voided(struct fs_err *err, const struct fs_secagg_upload *up)
{
    return fs_err_set(err, FS_ECONFLICT,
                      "secagg: masked input is closed; chunk %llu of party %u does not count",
                      (unsigned long long)up->idx, up->from);
}

int fs_secagg_server_upload_fold(struct fs_secagg_upload *up, const uint8_t *p, size_t n,
                                 struct fs_err *err)
{
    fs_secagg_server *s = up->s;
    int ok;

    if (s == NULL || n > up->m - up->done) {
        return fs_err_set(err, FS_EINVAL, "secagg: chunk %llu: more words than it has",
                          (unsigned long long)up->idx);
    }
    pthread_mutex_lock(&s->ingest_mu);
    ok = !s->zombie && s->gen == up->gen;
    if (ok) {
        s->folding++;
    }
    pthread_mutex_unlock(&s->ingest_mu);
    if (!ok) {
        return voided(err, up);
    }
    fold_locked(s, up->idx * sa_chunk_words(&s->cfg) + up->done, p, n, FOLD_ADD_LE);
    up->done += n;
    pthread_mutex_lock(&s->ingest_mu);
    s->p[up->from].chunk_prog[up->idx] = up->done;
    if (--s->folding == 0) {
        pthread_cond_broadcast(&s->ingest_cv);
    }
    pthread_mutex_unlock(&s->ingest_mu);
    return 0;
}

/* Caller's lock held: is the upload still pending (not voided)? */
static int upload_live(const struct fs_secagg_upload *up)
{
    fs_secagg_server *s = up->s;
    int ok;

    if (s == NULL) {
        return 0;
    }
    pthread_mutex_lock(&s->ingest_mu);
    ok = !s->zombie && s->gen == up->gen;
    pthread_mutex_unlock(&s->ingest_mu);
    return ok;
}

int fs_secagg_server_upload_commit(struct fs_secagg_upload *up, struct fs_err *err)
{
    fs_secagg_server *s = up->s;
    struct sparty *p;

    if (!upload_live(up)) {
        return voided(err, up);
    }
    if (up->done != up->m) {
        return fs_err_set(err, FS_EINVAL, "secagg: chunk %llu: %zu of %zu words",
                          (unsigned long long)up->idx, up->done, up->m);
    }
    p = &s->p[up->from];
    p->chunk_have[up->idx] = CHUNK_HAVE;
    p->chunks_got++;
    if (p->chunks_got == s->nchunks) {
        p->complete = 1;
    }
    up->gen = ~up->gen; /* committed: nothing left to cancel */
    return 0;
}

/* Party v's pending chunk idx: its folded words leave the sum (read back
 * from the store, which has them: they were persisted before the fold). */
static int take_back_pending(fs_secagg_server *s, uint32_t v, uint64_t idx, struct fs_err *err)
{
    struct sparty *p = &s->p[v];
    size_t done = (size_t)p->chunk_prog[idx];
    int rc = 0;

    if (done > 0) {
        rc = s->store.get(s->store.ctx, v, idx, s->scratch, done, err);
        if (rc == 0) {
            unfold(s, idx * sa_chunk_words(&s->cfg), s->scratch, done);
        }
    }
    p->chunk_have[idx] = CHUNK_NONE;
    p->chunk_prog[idx] = 0;
    return rc;
}

int fs_secagg_server_upload_cancel(struct fs_secagg_upload *up, struct fs_err *err)
{
    fs_secagg_server *s = up->s;
    int rc;

    if (!upload_live(up)) {
        return 0; /* committed, or voided (and taken back) by whoever closed the round */
    }
    up->gen = ~up->gen;
    rc = take_back_pending(s, up->from, up->idx, err);
    if (rc != 0) {
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err->msg);
        return abort_job(s, err, "chunk %llu of party %u broke off and cannot be taken back: %s",
                         (unsigned long long)up->idx, up->from, why);
    }
    return 0;
}

static void destroy_shell(fs_secagg_server *s)
{
    for (int i = 0; i < SA_STRIPES; i++) {
        pthread_mutex_destroy(&s->stripe[i]);
    }
    pthread_cond_destroy(&s->ingest_cv);
    pthread_mutex_destroy(&s->ingest_mu);
    free(s);
}

void fs_secagg_server_upload_release(struct fs_secagg_upload *up)
{
    fs_secagg_server *s = up->s;
    int last;

    if (s == NULL) {
        return;
    }
    up->s = NULL;
    pthread_mutex_lock(&s->ingest_mu);
    s->uploads--;
    last = s->zombie && s->uploads == 0;
    pthread_mutex_unlock(&s->ingest_mu);
    if (last) {
        destroy_shell(s);
    }
}

/* Closing R2: every pending chunk leaves the sum (its party cannot be
 * complete, so it drops with the rest of its upload). */
static int settle_pending(fs_secagg_server *s, struct fs_err *err)
{
    ingest_stop(s);
    for (size_t i = 0; i < s->nset[0]; i++) {
        uint32_t v = s->set[0][i];
        struct sparty *p = &s->p[v];
        for (uint64_t idx = 0; p->chunk_have != NULL && idx < s->nchunks; idx++) {
            if (p->chunk_have[idx] == CHUNK_PENDING) {
                int rc = take_back_pending(s, v, idx, err);
                if (rc != 0) {
                    char why[sizeof err->msg];
                    snprintf(why, sizeof why, "%s", err->msg);
                    return abort_job(s, err,
                                     "party %u's chunk %llu broke off in aggregation %u and cannot "
                                     "be taken back: %s",
                                     v, (unsigned long long)idx, s->round, why);
                }
            }
        }
    }
    return 0;
}

int fs_secagg_server_has_masked(const fs_secagg_server *s, uint32_t from)
{
    return party_ok(s, from) && s->p[from].complete;
}

/* Open R4 for U4 = the first n4 ids of set[4]: room for their shares about every active party. */
static int open_unmask(fs_secagg_server *s, size_t n4, struct fs_err *err)
{
    s->nset[4] = n4;
    for (size_t i = 0; i < s->nset[0]; i++) {
        uint32_t v = s->set[0][i];
        s->rv[v] = calloc(n4 > 0 ? n4 : 1, sizeof *s->rv[v]);
        if (s->rv[v] == NULL) {
            return fs_err_set(err, FS_ENOMEM, "secagg: out of memory");
        }
    }
    s->phase = FS_SECAGG_UNMASK;
    return 0;
}

/* All-inputs mode, R2 closed with U3 (secagg.h): every active party's input
 * is required, so a missing one aborts; else R4 opens at once with U4 = U3. */
static int all_inputs_unmask(fs_secagg_server *s, struct fs_err *err)
{
    for (size_t i = 0; i < s->nset[0]; i++) {
        uint32_t v = s->set[0][i];
        if (!s->p[v].in_u3) {
            return abort_job(s, err,
                             "party %u's masked input is missing in aggregation %u, which "
                             "needs every active party's input",
                             v, s->round);
        }
    }
    for (size_t i = 0; i < s->nset[3]; i++) {
        s->set[4][i] = s->set[3][i];
        s->p[s->set[3][i]].in_u4 = 1;
    }
    return open_unmask(s, s->nset[3], err);
}

int fs_secagg_server_close_masked(fs_secagg_server *s, struct fs_err *err)
{
    return sa_close_masked(s, NULL, err);
}

int sa_close_masked(fs_secagg_server *s, const uint8_t *elsewhere, struct fs_err *err)
{
    size_t n3 = 0;
    int rc = want_phase(s, FS_SECAGG_MASKED, "closing masked input", err);

    if (rc == 0) {
        rc = settle_pending(s, err);
    }
    if (rc != 0) {
        return rc;
    }
    for (size_t i = 0; i < s->nset[0]; i++) {
        uint32_t v = s->set[0][i];
        struct sparty *p = &s->p[v];
        if (p->complete && (elsewhere == NULL || elsewhere[v - 1] != 0)) {
            p->in_u3 = 1;
            s->set[3][n3++] = v;
        } else if (p->chunks_got > 0 && !s->has_store) {
            return abort_job(s, err,
                             "party %u dropped mid-upload in aggregation %u and its "
                             "partial upload was already folded",
                             v, s->round);
        } else if (p->chunks_got > 0) {
            rc = unfold_party(s, v, err);
            if (rc != 0) {
                char why[sizeof err->msg];
                snprintf(why, sizeof why, "%s", err->msg);
                return abort_job(s, err,
                                 "party %u dropped mid-upload in aggregation %u and its "
                                 "partial upload cannot be taken back: %s",
                                 v, s->round, why);
            }
            p->complete = 0; /* complete here, not in another window */
        }
    }
    s->nset[3] = n3;
    if (n3 < s->cfg.t) {
        return abort_job(s, err, "%zu masked inputs in aggregation %u, threshold %u", n3, s->round,
                         s->cfg.t);
    }
    if (s->cfg.all_inputs) {
        return all_inputs_unmask(s, err);
    }
    rc =
        sa_u3_msg(s->session, s->round, s->total_len, s->set[3], n3, &s->u3msg, &s->u3msg_len, err);
    if (rc == 0) {
        s->phase = FS_SECAGG_CONSISTENCY;
    }
    return rc;
}

int fs_secagg_server_add_consistency(fs_secagg_server *s, uint32_t from,
                                     const uint8_t sig[FS_SECAGG_SIG_LEN], struct fs_err *err)
{
    struct sparty *p;
    int rc;

    if (s->cfg.all_inputs) {
        return fs_err_set(err, FS_ESTATE, "secagg: no consistency round in an all-inputs job");
    }
    if (round_closed(s, FS_SECAGG_CONSISTENCY)) {
        if (party_ok(s, from) && s->p[from].in_u4 &&
            fs_ct_eq(s->p[from].sig, sig, FS_SECAGG_SIG_LEN)) {
            return 0;
        }
        return closed_conflict(err, "consistency check", from);
    }
    rc = want_phase(s, FS_SECAGG_CONSISTENCY, "consistency signature", err);
    if (rc != 0) {
        return rc;
    }
    if (!party_ok(s, from) || !s->p[from].in_u3) {
        return fs_err_set(err, FS_EINVAL, "secagg: party %u is not a survivor", from);
    }
    p = &s->p[from];
    if (fs_ed25519_verify(sig, p->adv.sign_pk, s->u3msg, s->u3msg_len, err) != 0) {
        return fs_err_set(err, FS_EAUTH, "secagg: party %u's signature on the survivors is invalid",
                          from);
    }
    memcpy(p->sig, sig, FS_SECAGG_SIG_LEN);
    p->in_u4 = 1;
    return 0;
}

int fs_secagg_server_close_consistency(fs_secagg_server *s, struct fs_err *err)
{
    size_t n4 = 0;
    int rc = s->cfg.all_inputs
                 ? fs_err_set(err, FS_ESTATE, "secagg: no consistency round in an all-inputs job")
                 : want_phase(s, FS_SECAGG_CONSISTENCY, "closing consistency check", err);

    if (rc != 0) {
        return rc;
    }
    for (size_t i = 0; i < s->nset[3]; i++) {
        uint32_t v = s->set[3][i];
        if (s->p[v].in_u4) {
            memcpy(s->sigs[n4], s->p[v].sig, FS_SECAGG_SIG_LEN);
            s->set[4][n4++] = v;
        }
    }
    s->nset[4] = n4;
    if (n4 < s->cfg.t) {
        return abort_job(s, err, "%zu consistency signatures in aggregation %u, threshold %u", n4,
                         s->round, s->cfg.t);
    }
    return open_unmask(s, n4, err);
}

const uint8_t (*fs_secagg_server_sigs(const fs_secagg_server *s))[FS_SECAGG_SIG_LEN]
{
    return (const uint8_t(*)[FS_SECAGG_SIG_LEN])s->sigs;
}

/* Check a whole reveal message: one entry per active party, right kinds, share x = from. */
static int check_reveals(const fs_secagg_server *s, uint32_t from,
                         const struct fs_secagg_reveal *rv, size_t k,
                         struct fs_shamir_share *decoded, struct fs_err *err)
{
    uint8_t *seen = calloc((size_t)s->cfg.n + 1, 1);
    int rc = 0;

    if (seen == NULL) {
        return fs_err_set(err, FS_ENOMEM, "secagg: out of memory");
    }
    {
        size_t want = 0; /* itself and its active neighbours (every active party: full graph) */
        for (size_t i = 0; i < s->nset[0]; i++) {
            uint32_t v = s->set[0][i];
            want += (size_t)(v == from || nbr(s, from, v));
        }
        if (k != want) {
            rc = fs_err_set(err, FS_EINVAL, "secagg: party %u revealed %zu shares, want %zu", from,
                            k, want);
        }
    }
    for (size_t i = 0; rc == 0 && i < k; i++) {
        uint32_t v = rv[i].about;
        int want_kind;
        if (!party_ok(s, v) || !s->p[v].active || seen[v] || (v != from && !nbr(s, from, v))) {
            rc = fs_err_set(err, FS_EINVAL, "secagg: reveal about party %u is unexpected", v);
            break;
        }
        seen[v] = 1;
        want_kind = s->p[v].in_u3 ? FS_SECAGG_SELF_SEED : FS_SECAGG_MASK_KEY;
        if (rv[i].kind != want_kind) {
            rc = fs_err_set(err, FS_EINVAL, "secagg: reveal about party %u has the wrong kind", v);
            break;
        }
        if (fs_shamir_share_decode(&decoded[i], rv[i].share, FS_SHAMIR_SHARE_LEN, err) != 0 ||
            decoded[i].x != from) {
            rc = fs_err_set(err, FS_EINVAL, "secagg: reveal about party %u is malformed", v);
            break;
        }
    }
    free(seen);
    return rc;
}

int fs_secagg_server_add_reveals(fs_secagg_server *s, uint32_t from,
                                 const struct fs_secagg_reveal *rv, size_t k, struct fs_err *err)
{
    struct fs_shamir_share *decoded = NULL;
    uint8_t h[32];
    int closed = round_closed(s, FS_SECAGG_UNMASK);
    int rc = closed ? 0 : want_phase(s, FS_SECAGG_UNMASK, "unmasking shares", err);

    if (rc != 0) {
        return rc;
    }
    if (closed && (!party_ok(s, from) || !s->p[from].revealed || k > s->cfg.n)) {
        return closed_conflict(err, "unmasking", from);
    }
    if (!party_ok(s, from) || !s->p[from].in_u4) {
        return fs_err_set(err, FS_EINVAL,
                          s->cfg.all_inputs ? "secagg: party %u is not a survivor"
                                            : "secagg: party %u did not sign the survivors",
                          from);
    }
    if (k > s->cfg.n) {
        return fs_err_set(err, FS_EINVAL, "secagg: %zu reveals from party %u", k, from);
    }
    rc = fs_sha256(h, rv, k * sizeof *rv, err);
    if (rc != 0) {
        return rc;
    }
    if (s->p[from].revealed) {
        if (fs_ct_eq(h, s->p[from].reveal_hash, 32)) {
            return 0;
        }
        if (closed) {
            return closed_conflict(err, "unmasking", from);
        }
        return fs_err_set(err, FS_ECONFLICT, "secagg: party %u already revealed other shares",
                          from);
    }
    decoded = calloc(k + 1, sizeof *decoded);
    if (decoded == NULL) {
        return fs_err_set(err, FS_ENOMEM, "secagg: out of memory");
    }
    rc = check_reveals(s, from, rv, k, decoded, err);
    if (rc == 0) {
        for (size_t i = 0; i < k; i++) {
            uint32_t v = rv[i].about;
            s->rv[v][s->nrv[v]++] = decoded[i];
        }
        memcpy(s->p[from].reveal_hash, h, 32);
        s->p[from].revealed = 1;
    }
    fs_wipe(decoded, (k + 1) * sizeof *decoded);
    free(decoded);
    return rc;
}

/* Survivor v's self-mask stream, to subtract. */
static int self_stream(fs_secagg_server *s, uint32_t v, struct fs_prg_term *out, struct fs_err *err)
{
    uint8_t seed[32];
    int rc;

    if (s->nrv[v] < sa_share_t(&s->cfg)) {
        return abort_job(s, err,
                         "self-mask seed of party %u: only %zu of its share holders sent "
                         "unmasking shares in aggregation %u, threshold %u",
                         v, s->nrv[v], s->round, sa_share_t(&s->cfg));
    }
    rc = fs_shamir_combine(s->rv[v], s->nrv[v], sa_share_t(&s->cfg), seed, err);
    if (rc != 0) {
        return abort_job(s, err, "self-mask seed of party %u does not reconstruct", v);
    }
    rc = sa_self_mask_key(seed, s->session, v, s->round, s->total_len, out->key, err);
    out->sign = -1;
    fs_wipe(seed, sizeof seed);
    return rc;
}

/* Dropped party d's mask key has fewer than share_t shares: abort, naming it. */
static int too_few_holders(fs_secagg_server *s, uint32_t d, struct fs_err *err)
{
    return abort_job(s, err,
                     "party %u dropped in aggregation %u and only %zu of its neighbours sent "
                     "unmasking shares, threshold %u: its pairwise masks cannot be removed",
                     d, s->round, s->nrv[d], sa_share_t(&s->cfg));
}

/* The pairwise-mask streams survivors share with dropped party d (its
 * neighbours among them), signed to undo them: out[0..*nout). */
static int dropped_streams(fs_secagg_server *s, uint32_t d, struct fs_prg_term *out, size_t *nout,
                           struct fs_err *err)
{
    uint8_t sk[32];
    uint8_t pk[32];
    fs_x25519_key *key = NULL;
    int rc;

    *nout = 0;
    if (s->nrv[d] < sa_share_t(&s->cfg)) {
        return too_few_holders(s, d, err);
    }
    rc = fs_shamir_combine(s->rv[d], s->nrv[d], sa_share_t(&s->cfg), sk, err);
    if (rc != 0) {
        return abort_job(s, err, "mask key of dropped party %u does not reconstruct", d);
    }
    /* the key of this aggregation only (see secagg.h): no other one is revealed */
    rc = fs_x25519_key_new(&key, sk, err);
    fs_wipe(sk, sizeof sk);
    if (rc == 0) {
        rc = fs_x25519_key_public(key, pk, err);
    }
    if (rc != 0 || fs_secagg_adv_mask_pk(&s->p[d].adv, s->round) == NULL ||
        !fs_ct_eq(pk, fs_secagg_adv_mask_pk(&s->p[d].adv, s->round), 32)) {
        fs_x25519_key_free(key);
        return abort_job(s, err,
                         "reconstructed mask key of party %u does not match its "
                         "advertised key",
                         d);
    }
    for (size_t i = 0; rc == 0 && i < s->nset[3]; i++) {
        uint32_t u = s->set[3][i];
        if (!nbr(s, u, d)) {
            continue;
        }
        rc = sa_pair_mask_key_k(key, fs_secagg_adv_mask_pk(&s->p[u].adv, s->round), s->session,
                                s->round, s->total_len, out[*nout].key, err);
        /* u added +PRG if u > d, -PRG otherwise: undo it. */
        out[*nout].sign = u > d ? -1 : 1;
        (*nout)++;
    }
    fs_x25519_key_free(key);
    return rc;
}

void fs_secagg_server_set_threads(fs_secagg_server *s, unsigned threads)
{
    if (s != NULL) {
        s->threads = threads > 0 ? threads : 1;
    }
}

int sa_unmask_plan(fs_secagg_server *s, struct fs_prg_term **plan, size_t *n, struct fs_err *err)
{
    size_t n5 = 0, nst = 0, cap = 0;
    struct fs_prg_term *st = NULL;
    int rc = want_phase(s, FS_SECAGG_UNMASK, "unmasking", err);

    *plan = NULL;
    *n = 0;
    if (rc != 0) {
        return rc;
    }
    for (size_t i = 0; i < s->nset[4]; i++) {
        n5 += (size_t)s->p[s->set[4][i]].revealed;
    }
    if (n5 < s->cfg.t) {
        return abort_job(s, err,
                         "%zu parties sent unmasking shares in aggregation %u, threshold %u", n5,
                         s->round, s->cfg.t);
    }
    /* a dropped party without share_t holders is the likely cause when
     * anything cannot be reconstructed: name it first */
    for (size_t i = 0; i < s->nset[0]; i++) {
        uint32_t v = s->set[0][i];
        if (!s->p[v].in_u3 && s->nrv[v] < sa_share_t(&s->cfg)) {
            return too_few_holders(s, v, err);
        }
    }
    /* every key first: a bad reconstruction aborts before any sum changes */
    for (size_t i = 0; i < s->nset[0]; i++) {
        uint32_t v = s->set[0][i];
        if (s->p[v].in_u3) {
            cap += 1;
            continue;
        }
        for (size_t j = 0; j < s->nset[3]; j++) {
            cap += (size_t)nbr(s, s->set[3][j], v);
        }
    }
    st = calloc(cap > 0 ? cap : 1, sizeof *st);
    if (st == NULL) {
        return abort_job(s, err, "out of memory for %zu unmasking keys", cap);
    }
    for (size_t i = 0; rc == 0 && i < s->nset[0]; i++) {
        uint32_t v = s->set[0][i];
        if (s->p[v].in_u3) {
            rc = self_stream(s, v, &st[nst], err);
            nst += 1;
        } else {
            size_t got = 0;
            rc = dropped_streams(s, v, &st[nst], &got, err);
            nst += got;
        }
    }
    if (rc != 0) {
        fs_secagg_plan_free(st, cap);
        if (s->phase != FS_SECAGG_ABORTED) {
            abort_job(s, NULL, "unmasking failed: %s", err != NULL ? err->msg : "error");
        }
        return rc;
    }
    *plan = st;
    *n = nst;
    return 0;
}

int sa_apply_plan(fs_secagg_server *s, const struct fs_prg_term *plan, size_t n, struct fs_err *err)
{
    int rc = sa_prg_apply_streams(plan, n, s->win_off, s->sum, s->len, s->threads, err);

    if (rc != 0) {
        if (s->phase != FS_SECAGG_ABORTED) {
            abort_job(s, NULL, "unmasking failed: %s", err != NULL ? err->msg : "error");
        }
        return rc;
    }
    for (size_t i = 0; i < s->nset[0]; i++) {
        uint32_t v = s->set[0][i];
        if (!s->p[v].in_u3) {
            s->p[v].dropped = 1;
        }
    }
    s->phase = FS_SECAGG_READY;
    return 0;
}

int fs_secagg_server_finish(fs_secagg_server *s, const uint64_t **sum, struct fs_err *err)
{
    struct fs_prg_term *st = NULL;
    size_t nst = 0;
    int rc;

    *sum = NULL;
    rc = s->data_only ? fs_err_set(err, FS_ESTATE, "secagg: a data-only window has no reveals")
                      : sa_unmask_plan(s, &st, &nst, err);
    if (rc == 0) {
        rc = sa_apply_plan(s, st, nst, err);
    }
    fs_secagg_plan_free(st, nst);
    if (rc == 0) {
        *sum = s->sum;
    }
    return rc;
}

size_t fs_secagg_server_neighbours(const fs_secagg_server *s, uint32_t id, uint32_t *out)
{
    size_t k = 0;

    for (uint32_t v = 1; v <= s->cfg.n; v++) {
        if (nbr(s, id, v)) {
            out[k++] = v;
        }
    }
    return k;
}

uint64_t *fs_secagg_server_take_sum(fs_secagg_server *s, uint64_t *len)
{
    uint64_t *sum;

    if (len != NULL) {
        *len = 0;
    }
    if (s == NULL || s->phase != FS_SECAGG_READY || s->sum == NULL) {
        return NULL;
    }
    sum = s->sum;
    s->sum = NULL;
    if (len != NULL) {
        *len = s->len;
    }
    return sum;
}

void fs_secagg_server_free(fs_secagg_server *s)
{
    int keep;

    if (s == NULL) {
        return;
    }
    ingest_stop(s);
    if (s->p != NULL && s->rv != NULL && s->nrv != NULL) {
        clear_round(s);
    }
    if (s->p != NULL) {
        for (uint32_t v = 1; v <= s->cfg.n; v++) {
            fs_secagg_share_cts_free(s->p[v].cts_by_to, (size_t)s->cfg.n + 1);
            fs_secagg_adv_clear(&s->p[v].adv); /* the roster borrows these */
        }
    }
    free(s->p);
    free(s->rv);
    free(s->nrv);
    for (int i = 0; i < 5; i++) {
        free(s->set[i]);
    }
    free(s->sigs);
    free(s->roster);
    free(s->sum);
    free(s->scratch);
    free(s->pins);
    free(s->pos);
    /* a streamed upload still holds the shell: its last release frees it */
    pthread_mutex_lock(&s->ingest_mu);
    s->zombie = 1;
    keep = s->uploads > 0;
    pthread_mutex_unlock(&s->ingest_mu);
    if (!keep) {
        destroy_shell(s);
    }
}

/* ------------------------------------------------------------ pinned identities */

int fs_secagg_server_set_pins(fs_secagg_server *s, const uint8_t (*pins)[FS_SECAGG_KEY_LEN],
                              uint32_t n, struct fs_err *err)
{
    if (n != s->cfg.n) {
        return fs_err_set(err, FS_EINVAL, "secagg: %u pins for %u parties", n, s->cfg.n);
    }
    for (uint32_t v = 1; v <= s->cfg.n; v++) {
        if (s->p[v].in_u1) {
            return fs_err_set(err, FS_ESTATE, "secagg: pins come before the advertisements");
        }
    }
    free(s->pins);
    s->pins = malloc((size_t)n * sizeof *s->pins);
    if (s->pins == NULL) {
        return fs_err_set(err, FS_ENOMEM, "secagg: out of memory");
    }
    memcpy(s->pins, pins, (size_t)n * sizeof *s->pins);
    return 0;
}

int fs_secagg_server_check_pin(const fs_secagg_server *s, const struct fs_secagg_adv *a,
                               struct fs_err *err)
{
    if (!party_ok(s, a->id)) {
        return fs_err_set(err, FS_EINVAL, "secagg: party id %u outside 1..%u", a->id, s->cfg.n);
    }
    return sa_pin_check((const uint8_t(*)[FS_SECAGG_KEY_LEN])s->pins, a, err);
}
