/* Pieces both sides of secure aggregation compute identically: signed
 * messages, the session id and the key derivations. */
#include "secagg_internal.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../crypto/ct.h"
#include "../crypto/ed25519.h"
#include "../crypto/hkdf.h"
#include "../crypto/prg.h"
#include "../crypto/sha256.h"
#include "../crypto/x25519.h"

static const char ADV_TAG[] = "fedsvd/secagg/v2/adv";
static const char U3_TAG[] = "fedsvd/secagg/v1/u3";
static const char SESSION_TAG[] = "fedsvd/secagg/v2/session";
static const char ALL_INPUTS_TAG[] = "fedsvd/secagg/v2/all-inputs";
static const char SHARE_INFO[] = "fedsvd/secagg/v1/share-enc";
static const char PAIR_INFO[] = "fedsvd/secagg/v1/pair-mask";
static const char SELF_INFO[] = "fedsvd/secagg/v1/self-mask";
static const char GRAPH_INFO[] = "fedsvd/secagg/v1/plus-graph";

void sa_put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

uint32_t sa_get_u32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static void put_u64(uint8_t *p, uint64_t v)
{
    sa_put_u32(p, (uint32_t)(v >> 32));
    sa_put_u32(p + 4, (uint32_t)v);
}

int fs_secagg_config_check(const struct fs_secagg_config *cfg, struct fs_err *err)
{
    if (cfg->n < 1 || cfg->n > FS_SECAGG_MAX_PARTIES) {
        return fs_err_set(err, FS_EINVAL, "secagg: parties must be 1..%d, got %u",
                          FS_SECAGG_MAX_PARTIES, cfg->n);
    }
    if (cfg->t < 1 || cfg->t > cfg->n) {
        return fs_err_set(err, FS_EINVAL, "secagg: threshold must be 1..%u, got %u", cfg->n,
                          cfg->t);
    }
    if (cfg->aggregations < 1 || cfg->aggregations > FS_SECAGG_MAX_AGGREGATIONS) {
        return fs_err_set(err, FS_EINVAL, "secagg: aggregations must be 1..%d, got %u",
                          FS_SECAGG_MAX_AGGREGATIONS, cfg->aggregations);
    }
    if (cfg->degree != 0 &&
        (cfg->degree % 2 != 0 || cfg->degree < 2 || cfg->n < 4 || cfg->degree > cfg->n - 2)) {
        return fs_err_set(err, FS_EINVAL, "secagg: neighbour degree %u must be even, 2..%u",
                          cfg->degree, cfg->n >= 4 ? cfg->n - 2 : 0);
    }
    if (cfg->degree != 0 && (cfg->share_t < 1 || cfg->share_t > cfg->degree)) {
        return fs_err_set(err, FS_EINVAL, "secagg: neighbour share threshold %u must be 1..%u",
                          cfg->share_t, cfg->degree);
    }
    if (cfg->all_inputs > 1) {
        return fs_err_set(err, FS_EINVAL, "secagg: all_inputs must be 0 or 1, got %u",
                          cfg->all_inputs);
    }
    return 0;
}

uint32_t sa_share_t(const struct fs_secagg_config *cfg)
{
    return cfg->degree != 0 ? cfg->share_t : cfg->t;
}

/* ln C(a, b), 0 <= b <= a */
static double lchoose(double a, double b)
{
    return lgamma(a + 1) - lgamma(b + 1) - lgamma(a - b + 1);
}

/* P[X = x] for X hypergeometric: m draws from N items of which K are marked. */
static double hyper_pmf(uint32_t N, uint32_t K, uint32_t m, uint32_t x)
{
    if (x > m || x > K || m - x > N - K) {
        return 0.0;
    }
    return exp(lchoose(K, x) + lchoose(N - K, m - x) - lchoose(N, m));
}

int fs_secagg_plus_params(uint32_t n, double gamma, double delta, uint32_t *k, uint32_t *t,
                          struct fs_err *err)
{
    /* kSmall guards the floors against rounding (0.1 * 50 = 5.000000000000001) */
    const double small = 1e-12;
    const double sec_each = FS_SECAGG_PLUS_SIGMA + 1; /* sigma split over two bad events */
    uint32_t bad_c, bad_d, bad, alive;

    *k = 0;
    *t = 0;
    if (!(gamma >= 0 && delta >= 0 && gamma + delta <= 0.9)) {
        return fs_err_set(err, FS_EINVAL, "secagg: corrupt + dropout fractions must be <= 0.9");
    }
    bad_c = (uint32_t)floor((gamma + small) * n);
    if (gamma > 0 && bad_c == 0) {
        bad_c = 1; /* at least one colluder: a share alone never reveals a secret */
    }
    bad_d = (uint32_t)floor((delta + small) * n);
    bad = bad_c + bad_d;
    alive = (uint32_t)ceil((1 - delta - small) * n);
    for (uint32_t deg = 2; n >= 4 && deg <= n - 2; deg += 2) {
        double above = 0.0; /* P[more than x corrupt neighbours] */
        double low = 0.0;
        uint32_t t1 = deg;
        /* (1) disconnection: two disjoint runs of deg/2 bad ring positions;
         * n (n - deg - 1) / 2 such pairs, each all-bad with probability
         * bad! (n - deg)! / (n! (bad - deg)!) */
        if (deg <= bad) {
            double lp = log((double)n) + log((double)(n - deg - 1)) - log(2.0) + lgamma(bad + 1.0) +
                        lgamma(n - deg + 1.0) - lgamma(n + 1.0) - lgamma(bad - deg + 1.0);
            if (lp >= -sec_each * log(2.0)) {
                continue;
            }
        }
        /* (2) t1: the fewest corrupt neighbours x with P[more than x] <= 2^-(sigma+1) / n */
        for (uint32_t x = deg;; x--) {
            if (above > ldexp(1.0, -(int)sec_each) / n) {
                break; /* t1 stays x + 1 */
            }
            t1 = x;
            if (x == 0) {
                break;
            }
            above += hyper_pmf(n, bad_c, deg, x);
        }
        /* (3) P[fewer than t1 + 1 surviving neighbours] <= 2^-eta / n */
        for (uint32_t x = 0; x <= t1 && x <= deg; x++) {
            low += hyper_pmf(n, alive, deg, x);
        }
        if (t1 + 1 <= deg && low <= ldexp(1.0, -FS_SECAGG_PLUS_ETA) / n) {
            *k = deg;
            *t = t1 + 1;
            return 0;
        }
    }
    return fs_err_set(err, FS_EINVAL,
                      "secagg: no neighbour graph of degree below %u parties - 1 meets the "
                      "security and correctness bounds",
                      n);
}

int fs_secagg_config_plus(struct fs_secagg_config *cfg, struct fs_err *err)
{
    return fs_secagg_plus_params(cfg->n, FS_SECAGG_PLUS_GAMMA, FS_SECAGG_PLUS_DELTA, &cfg->degree,
                                 &cfg->share_t, err);
}

int fs_secagg_graph(const struct fs_secagg_config *cfg, const uint8_t session[32], uint32_t *pos,
                    struct fs_err *err)
{
    uint8_t key[32];
    uint32_t *perm = NULL;
    fs_prg *prg = NULL;
    int rc;

    if (cfg->degree == 0) {
        return fs_err_set(err, FS_EINVAL, "secagg: no neighbour graph in the full mode");
    }
    perm = malloc((size_t)cfg->n * sizeof *perm);
    if (perm == NULL) {
        return fs_err_set(err, FS_ENOMEM, "secagg: out of memory");
    }
    rc = fs_hkdf_sha256(key, sizeof key, session, 32, cfg->job_id, 32, GRAPH_INFO,
                        sizeof GRAPH_INFO, err);
    if (rc == 0) {
        rc = fs_prg_new(&prg, key, NULL, err);
    }
    fs_wipe(key, sizeof key);
    for (uint32_t i = 0; i < cfg->n; i++) {
        perm[i] = i + 1;
    }
    /* Fisher-Yates: perm[i] is the party at ring position i */
    for (uint32_t i = cfg->n; rc == 0 && i-- > 1;) {
        uint64_t j = 0;
        rc = fs_prg_below(prg, (uint64_t)i + 1, &j, err);
        if (rc == 0) {
            uint32_t tmp = perm[i];
            perm[i] = perm[j];
            perm[j] = tmp;
        }
    }
    for (uint32_t i = 0; rc == 0 && i < cfg->n; i++) {
        pos[perm[i]] = i;
    }
    pos[0] = 0;
    fs_prg_free(prg);
    free(perm);
    return rc;
}

int fs_secagg_adjacent(const struct fs_secagg_config *cfg, const uint32_t *pos, uint32_t u,
                       uint32_t v)
{
    uint32_t d;

    if (u == v || u < 1 || v < 1 || u > cfg->n || v > cfg->n) {
        return 0;
    }
    if (cfg->degree == 0 || pos == NULL) {
        return 1;
    }
    d = pos[u] > pos[v] ? pos[u] - pos[v] : pos[v] - pos[u];
    if (cfg->n - d < d) {
        d = cfg->n - d;
    }
    return d <= cfg->degree / 2;
}

uint32_t sa_chunk_words(const struct fs_secagg_config *cfg)
{
    return cfg->chunk_words != 0 ? cfg->chunk_words : FS_SECAGG_DEFAULT_CHUNK;
}

size_t sa_share_pt_len(const struct fs_secagg_config *cfg)
{
    /* from, to, then per aggregation a mask-key share and a self-seed share */
    return 8 + (size_t)FS_SHAMIR_SHARE_LEN * 2 * (size_t)cfg->aggregations;
}

int fs_secagg_adv_copy(struct fs_secagg_adv *dst, const struct fs_secagg_adv *src,
                       struct fs_err *err)
{
    uint8_t *pks = NULL;

    if (src->nkeys > FS_SECAGG_MAX_AGGREGATIONS || (src->nkeys > 0 && src->s_pks == NULL)) {
        return fs_err_set(err, FS_EINVAL, "secagg: advertisement of party %u has %u mask keys",
                          src->id, src->nkeys);
    }
    if (src->nkeys > 0) {
        pks = malloc((size_t)src->nkeys * FS_SECAGG_KEY_LEN);
        if (pks == NULL) {
            return fs_err_set(err, FS_ENOMEM, "secagg: out of memory");
        }
        memcpy(pks, src->s_pks, (size_t)src->nkeys * FS_SECAGG_KEY_LEN);
    }
    *dst = *src;
    dst->s_pks = pks;
    return 0;
}

void fs_secagg_adv_clear(struct fs_secagg_adv *a)
{
    if (a == NULL) {
        return;
    }
    free(a->s_pks);
    memset(a, 0, sizeof *a);
}

int fs_secagg_adv_equal(const struct fs_secagg_adv *a, const struct fs_secagg_adv *b)
{
    if (a->id != b->id || a->nkeys != b->nkeys || memcmp(a->sign_pk, b->sign_pk, 32) != 0 ||
        memcmp(a->c_pk, b->c_pk, 32) != 0 || memcmp(a->sig, b->sig, FS_SECAGG_SIG_LEN) != 0) {
        return 0;
    }
    if (a->nkeys == 0) {
        return 1;
    }
    return a->s_pks != NULL && b->s_pks != NULL &&
           memcmp(a->s_pks, b->s_pks, (size_t)a->nkeys * FS_SECAGG_KEY_LEN) == 0;
}

const uint8_t *fs_secagg_adv_mask_pk(const struct fs_secagg_adv *a, uint32_t r)
{
    if (r >= a->nkeys || a->s_pks == NULL) {
        return NULL;
    }
    return a->s_pks + (size_t)r * FS_SECAGG_KEY_LEN;
}

size_t fs_secagg_share_ct_len(const struct fs_secagg_config *cfg)
{
    return sa_share_pt_len(cfg) + FS_AEAD_BOX_OVERHEAD;
}

void fs_secagg_share_cts_free(struct fs_secagg_share_ct *cts, size_t k)
{
    if (cts == NULL) {
        return;
    }
    for (size_t i = 0; i < k; i++) {
        free(cts[i].ct);
    }
    free(cts);
}

int sa_adv_msg(const struct fs_secagg_config *cfg, const struct fs_secagg_adv *a,
               uint8_t buf[SA_ADV_MSG_MAX], size_t *len, struct fs_err *err)
{
    size_t n = 0;
    int rc;

    *len = 0;
    if (a->nkeys != cfg->aggregations || a->s_pks == NULL) {
        return fs_err_set(err, FS_EINVAL,
                          "secagg: advertisement of party %u has %u mask keys, the job runs %u "
                          "aggregations",
                          a->id, a->nkeys, cfg->aggregations);
    }
    memcpy(buf, ADV_TAG, sizeof ADV_TAG);
    n += sizeof ADV_TAG;
    memcpy(buf + n, cfg->job_id, 32);
    n += 32;
    sa_put_u32(buf + n, a->id);
    n += 4;
    sa_put_u32(buf + n, a->nkeys);
    n += 4;
    memcpy(buf + n, a->c_pk, 32);
    n += 32;
    rc = fs_sha256(buf + n, a->s_pks, (size_t)a->nkeys * FS_SECAGG_KEY_LEN, err);
    n += 32;
    if (rc == 0) {
        *len = n;
    }
    return rc;
}

int sa_session_id(const struct fs_secagg_config *cfg, const struct fs_secagg_adv *roster, size_t k,
                  uint8_t out[32], struct fs_err *err)
{
    fs_sha256_ctx *h = NULL;
    uint8_t hdr[16];
    int rc;

    rc = fs_sha256_new(&h, err);
    if (rc != 0) {
        return rc;
    }
    sa_put_u32(hdr, cfg->n);
    sa_put_u32(hdr + 4, cfg->t);
    sa_put_u32(hdr + 8, cfg->aggregations);
    sa_put_u32(hdr + 12, (uint32_t)k);
    rc = fs_sha256_update(h, SESSION_TAG, sizeof SESSION_TAG, err);
    if (rc == 0) {
        rc = fs_sha256_update(h, cfg->job_id, 32, err);
    }
    if (rc == 0) {
        rc = fs_sha256_update(h, hdr, sizeof hdr, err);
    }
    if (rc == 0 && cfg->degree != 0) {
        /* SecAgg+: the graph's degree and share threshold (absent in the full mode) */
        uint8_t plus[8];
        sa_put_u32(plus, cfg->degree);
        sa_put_u32(plus + 4, cfg->share_t);
        rc = fs_sha256_update(h, plus, sizeof plus, err);
    }
    if (rc == 0 && cfg->all_inputs != 0) {
        /* no consistency round (absent in the four-round mode) */
        rc = fs_sha256_update(h, ALL_INPUTS_TAG, sizeof ALL_INPUTS_TAG, err);
    }
    /* roster is sorted by id by both sides before hashing */
    for (size_t i = 0; rc == 0 && i < k; i++) {
        uint8_t idb[4];
        sa_put_u32(idb, roster[i].id);
        rc = fs_sha256_update(h, idb, 4, err);
        if (rc == 0) {
            rc = fs_sha256_update(h, roster[i].sign_pk, 32, err);
        }
        if (rc == 0) {
            rc = fs_sha256_update(h, roster[i].c_pk, 32, err);
        }
        if (rc == 0 && (roster[i].nkeys != cfg->aggregations || roster[i].s_pks == NULL)) {
            rc = fs_err_set(err, FS_EINVAL, "secagg: roster entry %u has %u mask keys, want %u",
                            roster[i].id, roster[i].nkeys, cfg->aggregations);
        }
        if (rc == 0) {
            rc = fs_sha256_update(h, roster[i].s_pks, (size_t)roster[i].nkeys * FS_SECAGG_KEY_LEN,
                                  err);
        }
    }
    if (rc == 0) {
        rc = fs_sha256_final(h, out, err);
    }
    fs_sha256_free(h);
    return rc;
}

int sa_u3_msg(const uint8_t session[32], uint32_t r, uint64_t len, const uint32_t *ids, size_t k,
              uint8_t **out, size_t *out_len, struct fs_err *err)
{
    size_t n = sizeof U3_TAG + 32 + 4 + 8 + 4 + 4 * k;
    uint8_t *buf = malloc(n);
    size_t off = 0;

    if (buf == NULL) {
        return fs_err_set(err, FS_ENOMEM, "secagg: out of memory");
    }
    memcpy(buf, U3_TAG, sizeof U3_TAG);
    off += sizeof U3_TAG;
    memcpy(buf + off, session, 32);
    off += 32;
    sa_put_u32(buf + off, r);
    off += 4;
    put_u64(buf + off, len);
    off += 8;
    sa_put_u32(buf + off, (uint32_t)k);
    off += 4;
    for (size_t i = 0; i < k; i++) {
        sa_put_u32(buf + off, ids[i]);
        off += 4;
    }
    *out = buf;
    *out_len = n;
    return 0;
}

void sa_share_ad(const uint8_t session[32], const struct fs_secagg_config *cfg, uint32_t from,
                 uint32_t to, uint8_t ad[SA_SHARE_AD_LEN])
{
    memcpy(ad, cfg->job_id, 32);
    memcpy(ad + 32, session, 32);
    sa_put_u32(ad + 64, from);
    sa_put_u32(ad + 68, to);
}

/* HKDF of an X25519 secret (the session as salt), wiping the secret. */
static int kdf_shared(uint8_t shared[32], const uint8_t session[32], const void *info,
                      size_t info_len, uint8_t key[32], struct fs_err *err)
{
    int rc = fs_hkdf_sha256(key, 32, shared, 32, session, 32, info, info_len, err);

    fs_wipe(shared, 32);
    return rc;
}

int sa_share_key_k(const fs_x25519_key *my_c, const uint8_t peer_c_pk[32],
                   const uint8_t session[32], uint8_t key[32], struct fs_err *err)
{
    uint8_t shared[32];
    int rc = fs_x25519_key_shared(my_c, shared, peer_c_pk, err);

    if (rc != 0) {
        fs_wipe(shared, sizeof shared);
        return rc;
    }
    return kdf_shared(shared, session, SHARE_INFO, sizeof SHARE_INFO, key, err);
}

int sa_share_key(const uint8_t my_c_sk[32], const uint8_t peer_c_pk[32], const uint8_t session[32],
                 uint8_t key[32], struct fs_err *err)
{
    fs_x25519_key *k = NULL;
    int rc = fs_x25519_key_new(&k, my_c_sk, err);

    if (rc == 0) {
        rc = sa_share_key_k(k, peer_c_pk, session, key, err);
    }
    fs_x25519_key_free(k);
    return rc;
}

static int mask_info(const char *tag, size_t tag_len, uint32_t party, uint32_t r, uint64_t len,
                     uint8_t *info)
{
    memcpy(info, tag, tag_len);
    sa_put_u32(info + tag_len, party);
    sa_put_u32(info + tag_len + 4, r);
    put_u64(info + tag_len + 8, len);
    return (int)(tag_len + 16);
}

int sa_pair_mask_key_k(const fs_x25519_key *my_s, const uint8_t peer_s_pk[32],
                       const uint8_t session[32], uint32_t r, uint64_t len, uint8_t key[32],
                       struct fs_err *err)
{
    uint8_t shared[32];
    uint8_t info[sizeof PAIR_INFO + 16];
    int ilen = mask_info(PAIR_INFO, sizeof PAIR_INFO, 0, r, len, info);
    int rc = fs_x25519_key_shared(my_s, shared, peer_s_pk, err);

    if (rc != 0) {
        fs_wipe(shared, sizeof shared);
        return rc;
    }
    return kdf_shared(shared, session, info, (size_t)ilen, key, err);
}

int sa_pair_mask_key(const uint8_t my_s_sk[32], const uint8_t peer_s_pk[32],
                     const uint8_t session[32], uint32_t r, uint64_t len, uint8_t key[32],
                     struct fs_err *err)
{
    fs_x25519_key *k = NULL;
    int rc = fs_x25519_key_new(&k, my_s_sk, err);

    if (rc == 0) {
        rc = sa_pair_mask_key_k(k, peer_s_pk, session, r, len, key, err);
    }
    fs_x25519_key_free(k);
    return rc;
}

int sa_self_mask_key(const uint8_t seed[32], const uint8_t session[32], uint32_t party, uint32_t r,
                     uint64_t len, uint8_t key[32], struct fs_err *err)
{
    uint8_t info[sizeof SELF_INFO + 16];
    int ilen = mask_info(SELF_INFO, sizeof SELF_INFO, party, r, len, info);

    return fs_hkdf_sha256(key, 32, seed, 32, session, 32, info, (size_t)ilen, err);
}

void fs_secagg_plan_free(struct fs_prg_term *plan, size_t n)
{
    if (plan == NULL) {
        return;
    }
    fs_wipe(plan, n * sizeof *plan);
    free(plan);
}

/* Words of v per piece in sa_prg_apply_streams: the unit threads take, and
 * what one set of PRG contexts (one per stream, seeked there) covers. */
#define STREAM_PIECE_WORDS ((uint64_t)1 << 16)

struct streams_work {
    const struct fs_prg_term *st;
    size_t ns;
    uint64_t *v;
    uint64_t len;
    uint64_t word0; /* stream word of v[0] */
    uint64_t next;  /* next piece index, under mu */
    int failed;     /* under mu */
    struct fs_err err;
    pthread_mutex_t mu;
};

static void *streams_worker(void *arg)
{
    struct streams_work *w = arg;
    uint64_t pieces = (w->len + STREAM_PIECE_WORDS - 1) / STREAM_PIECE_WORDS;
    struct fs_err err;

    fs_err_clear(&err);
    for (;;) {
        uint64_t piece;
        uint64_t off;
        size_t m;
        int rc = 0;

        pthread_mutex_lock(&w->mu);
        piece = w->failed ? pieces : w->next++;
        pthread_mutex_unlock(&w->mu);
        if (piece >= pieces) {
            break;
        }
        off = piece * STREAM_PIECE_WORDS;
        m = (size_t)(w->len - off < STREAM_PIECE_WORDS ? w->len - off : STREAM_PIECE_WORDS);
        rc = fs_prg_sum(w->st, w->ns, w->word0 + off, w->v + off, m, &err);
        if (rc != 0) {
            pthread_mutex_lock(&w->mu);
            if (!w->failed) {
                w->failed = 1;
                w->err = err;
            }
            pthread_mutex_unlock(&w->mu);
            break;
        }
    }
    return NULL;
}

int sa_prg_apply_streams(const struct fs_prg_term *st, size_t ns, uint64_t word0, uint64_t *v,
                         uint64_t len, unsigned threads, struct fs_err *err)
{
    enum { MAX_THREADS = 16 };
    struct streams_work w;
    pthread_t tid[MAX_THREADS];
    unsigned started = 0;
    uint64_t pieces = (len + STREAM_PIECE_WORDS - 1) / STREAM_PIECE_WORDS;

    if (ns == 0 || len == 0) {
        return 0;
    }
    memset(&w, 0, sizeof w);
    w.st = st;
    w.ns = ns;
    w.v = v;
    w.len = len;
    w.word0 = word0;
    if (pthread_mutex_init(&w.mu, NULL) != 0) {
        return fs_err_set(err, FS_ENOMEM, "secagg: cannot create a mutex");
    }
    if (threads > MAX_THREADS) {
        threads = MAX_THREADS;
    }
    if ((uint64_t)threads > pieces) {
        threads = (unsigned)pieces;
    }
    /* the calling thread works too; helpers that fail to start leave it more */
    while (started + 1 < threads && pthread_create(&tid[started], NULL, streams_worker, &w) == 0) {
        started++;
    }
    streams_worker(&w);
    for (unsigned i = 0; i < started; i++) {
        pthread_join(tid[i], NULL);
    }
    pthread_mutex_destroy(&w.mu);
    if (w.failed) {
        if (err != NULL) {
            *err = w.err;
        }
        return w.err.code != 0 ? w.err.code : FS_ECRYPTO;
    }
    return 0;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a;
    uint32_t y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

int sa_sorted_ids(const uint32_t *ids, size_t k, uint32_t n, uint32_t **out, struct fs_err *err)
{
    uint32_t *s = NULL;

    *out = NULL;
    if (k == 0 || k > n) {
        return fs_err_set(err, FS_EINVAL, "secagg: party set of size %zu (parties %u)", k, n);
    }
    s = malloc(k * sizeof *s);
    if (s == NULL) {
        return fs_err_set(err, FS_ENOMEM, "secagg: out of memory");
    }
    memcpy(s, ids, k * sizeof *s);
    qsort(s, k, sizeof *s, cmp_u32);
    for (size_t i = 0; i < k; i++) {
        if (s[i] < 1 || s[i] > n || (i > 0 && s[i] == s[i - 1])) {
            uint32_t bad = s[i];
            free(s);
            return fs_err_set(err, FS_EINVAL, "secagg: party set has invalid or repeated id %u",
                              bad);
        }
    }
    *out = s;
    return 0;
}

/* ------------------------------------------------------------ pinned identities */

int sa_pin_check(const uint8_t (*pins)[FS_SECAGG_KEY_LEN], const struct fs_secagg_adv *a,
                 struct fs_err *err)
{
    char got[FS_ED25519_FPR_LEN + 1];
    char want[FS_ED25519_FPR_LEN + 1];

    if (pins == NULL || memcmp(pins[a->id - 1], a->sign_pk, FS_SECAGG_KEY_LEN) == 0) {
        return 0;
    }
    fs_ed25519_fpr_format(a->sign_pk, got);
    fs_ed25519_fpr_format(pins[a->id - 1], want);
    return fs_err_set(err, FS_EAUTH,
                      "party %u's identity key %s is not the one pinned for it (%s): refused",
                      a->id, got, want);
}
