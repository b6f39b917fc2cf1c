/* Client side of secure aggregation: see secagg.h for the rounds. */
#include <stdlib.h>
#include <string.h>

#include "../crypto/ct.h"
#include "../crypto/derive.h"
#include "../crypto/ed25519.h"
#include "../crypto/rand.h"
#include "../crypto/x25519.h"
#include "secagg_internal.h"

enum stage {
    ST_NEW = 0,
    ST_ADVERTISED,
    ST_SHARED,
    ST_READY,   /* shares received; between aggregations */
    ST_MASKING, /* aggregation begun */
    ST_SIGNED   /* consistency signed, waiting to unmask */
};

struct peer {
    int in_roster;
    int in_u2;
    int active;
    int mask_revealed;        /* we revealed a share of its mask key: dropped for good */
    struct fs_secagg_adv adv; /* owns its s_pks (a copy of the roster's) */
    uint8_t *key_shares;      /* aggregations x share: our shares of its mask keys */
    uint8_t *seed_shares;     /* aggregations x share: our shares of its seeds */
    uint8_t pair_key[32];     /* this aggregation's pairwise PRG key */
};

struct fs_secagg_client {
    struct fs_secagg_config cfg;
    uint32_t id;
    enum stage stage;
    uint8_t sign_sk[32];
    uint8_t sign_pk[32];
    uint8_t c_sk[32];
    uint8_t c_pk[32];
    uint8_t *s_sks; /* aggregations x 32: mask private key of each aggregation */
    uint8_t *s_pks; /* aggregations x 32: their public keys, as advertised */
    uint8_t *seeds; /* aggregations x 32 self-mask seeds */
    /* the private keys loaded once (loading one costs a scalar multiplication) */
    fs_ed25519_signer *signer; /* sign_sk */
    fs_x25519_key *c_key;      /* c_sk */
    fs_x25519_key **s_keys;    /* aggregations: s_sks, each freed once its aggregation began */
    uint8_t session[32];
    struct peer *peers; /* index 1..n */
    uint32_t round;
    int has_round;
    uint64_t len;
    uint8_t self_key[32];
    uint32_t *u3;
    size_t n3;
    uint8_t (*pins)[FS_SECAGG_KEY_LEN]; /* pinned identities, n; NULL = unpinned */
    int has_det;                        /* randomness derived from det (new_det) */
    uint8_t det[32];
    uint32_t *pos; /* SecAgg+ ring positions (n+1), from the session; NULL = full graph */
};

/* 1 when v is this party's neighbour (every other party in the full graph). */
static int nbr(const fs_secagg_client *c, uint32_t v)
{
    return fs_secagg_adjacent(&c->cfg, c->pos, c->id, v);
}

static size_t seeds_bytes(const struct fs_secagg_config *cfg)
{
    return (size_t)cfg->aggregations * 32;
}

static size_t seed_shares_bytes(const struct fs_secagg_config *cfg)
{
    return (size_t)cfg->aggregations * FS_SHAMIR_SHARE_LEN;
}

/* Wipe and free a peer's shares of its secrets. */
static void peer_drop_shares(const struct fs_secagg_config *cfg, struct peer *p)
{
    if (p->seed_shares != NULL) {
        fs_wipe(p->seed_shares, seed_shares_bytes(cfg));
        free(p->seed_shares);
        p->seed_shares = NULL;
    }
    if (p->key_shares != NULL) {
        fs_wipe(p->key_shares, seed_shares_bytes(cfg));
        free(p->key_shares);
        p->key_shares = NULL;
    }
}

/* A key pair: from the CSPRNG, or derived from the client's secret; *key
 * the private key loaded. */
static int client_keypair(const fs_secagg_client *c, const char *label, uint32_t r, uint8_t sk[32],
                          uint8_t pk[32], fs_x25519_key **key, struct fs_err *err)
{
    int rc = c->has_det ? fs_derive_key(sk, c->det, label, r, 0, err)
                        : fs_rand_bytes(sk, FS_X25519_KEY_LEN, err);

    if (rc == 0) {
        rc = fs_x25519_key_new(key, sk, err);
    }
    if (rc == 0) {
        rc = fs_x25519_key_public(*key, pk, err);
    }
    if (rc != 0) {
        fs_wipe(sk, FS_X25519_KEY_LEN);
        fs_wipe(pk, FS_X25519_KEY_LEN);
    }
    return rc;
}

static int client_new(const struct fs_secagg_config *cfg, uint32_t id,
                      const uint8_t sign_sk[FS_SECAGG_KEY_LEN], const uint8_t *secret,
                      fs_secagg_client **out, struct fs_err *err);

int fs_secagg_client_new(const struct fs_secagg_config *cfg, uint32_t id,
                         const uint8_t sign_sk[FS_SECAGG_KEY_LEN], fs_secagg_client **out,
                         struct fs_err *err)
{
    return client_new(cfg, id, sign_sk, NULL, out, err);
}

int fs_secagg_client_new_det(const struct fs_secagg_config *cfg, uint32_t id,
                             const uint8_t sign_sk[FS_SECAGG_KEY_LEN], const uint8_t secret[32],
                             fs_secagg_client **out, struct fs_err *err)
{
    if (secret == NULL) {
        *out = NULL;
        return fs_err_set(err, FS_EINVAL, "secagg: NULL client secret");
    }
    return client_new(cfg, id, sign_sk, secret, out, err);
}

static int client_new(const struct fs_secagg_config *cfg, uint32_t id,
                      const uint8_t sign_sk[FS_SECAGG_KEY_LEN], const uint8_t *secret,
                      fs_secagg_client **out, struct fs_err *err)
{
    fs_secagg_client *c = NULL;
    int rc;

    *out = NULL;
    rc = fs_secagg_config_check(cfg, err);
    if (rc != 0) {
        return rc;
    }
    if (id < 1 || id > cfg->n) {
        return fs_err_set(err, FS_EINVAL, "secagg: party id %u outside 1..%u", id, cfg->n);
    }
    c = calloc(1, sizeof *c);
    if (c == NULL) {
        return fs_err_set(err, FS_ENOMEM, "secagg: out of memory");
    }
    c->cfg = *cfg;
    c->id = id;
    c->peers = calloc((size_t)cfg->n + 1, sizeof *c->peers);
    c->seeds = malloc(seeds_bytes(cfg));
    c->s_sks = malloc(seeds_bytes(cfg));
    c->s_pks = malloc(seeds_bytes(cfg));
    c->s_keys = calloc(cfg->aggregations, sizeof *c->s_keys);
    if (c->peers == NULL || c->seeds == NULL || c->s_sks == NULL || c->s_pks == NULL ||
        c->s_keys == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "secagg: out of memory");
        goto fail;
    }
    memcpy(c->sign_sk, sign_sk, 32);
    if (secret != NULL) {
        memcpy(c->det, secret, sizeof c->det);
        c->has_det = 1;
    }
    rc = fs_ed25519_signer_new(&c->signer, c->sign_sk, err);
    if (rc == 0) {
        rc = fs_ed25519_signer_public(c->signer, c->sign_pk, err);
    }
    if (rc == 0) {
        rc = client_keypair(c, "secagg/share-key", 0, c->c_sk, c->c_pk, &c->c_key, err);
    }
    for (uint32_t r = 0; rc == 0 && r < cfg->aggregations; r++) {
        rc = client_keypair(c, "secagg/mask-key", r, c->s_sks + (size_t)r * 32,
                            c->s_pks + (size_t)r * 32, &c->s_keys[r], err);
    }
    if (rc == 0 && !c->has_det) {
        rc = fs_rand_bytes(c->seeds, seeds_bytes(cfg), err);
    }
    for (uint32_t r = 0; rc == 0 && c->has_det && r < cfg->aggregations; r++) {
        rc = fs_derive_key(c->seeds + (size_t)r * 32, c->det, "secagg/self-seed", r, 0, err);
    }
    if (rc != 0) {
        goto fail;
    }
    *out = c;
    return 0;
fail:
    fs_secagg_client_free(c);
    return rc;
}

int fs_secagg_client_advertise(fs_secagg_client *c, struct fs_secagg_adv *out, struct fs_err *err)
{
    uint8_t msg[SA_ADV_MSG_MAX];
    size_t n = 0;
    int rc;

    if (c->stage > ST_ADVERTISED) {
        return fs_err_set(err, FS_ESTATE, "secagg: keys already shared");
    }
    memset(out, 0, sizeof *out);
    out->id = c->id;
    out->nkeys = c->cfg.aggregations;
    memcpy(out->sign_pk, c->sign_pk, 32);
    memcpy(out->c_pk, c->c_pk, 32);
    out->s_pks = c->s_pks;
    rc = sa_adv_msg(&c->cfg, out, msg, &n, err);
    if (rc != 0) {
        return rc;
    }
    c->stage = ST_ADVERTISED;
    return fs_ed25519_signer_sign(c->signer, out->sig, msg, n, err);
}

static int cmp_adv(const void *a, const void *b)
{
    uint32_t x = ((const struct fs_secagg_adv *)a)->id;
    uint32_t y = ((const struct fs_secagg_adv *)b)->id;
    return (x > y) - (x < y);
}

/* Check the forwarded roster and copy it into peers; fixes the session id. */
static int take_roster(fs_secagg_client *c, const struct fs_secagg_adv *roster, size_t k,
                       struct fs_err *err)
{
    struct fs_secagg_adv *sorted = NULL;
    int found_self = 0;
    int rc = 0;

    if (k < c->cfg.t || k > c->cfg.n) {
        return fs_err_set(err, FS_EINVAL,
                          "secagg: roster of %zu parties (threshold %u, parties %u)", k, c->cfg.t,
                          c->cfg.n);
    }
    sorted = malloc(k * sizeof *sorted);
    if (sorted == NULL) {
        return fs_err_set(err, FS_ENOMEM, "secagg: out of memory");
    }
    memcpy(sorted, roster, k * sizeof *sorted);
    qsort(sorted, k, sizeof *sorted, cmp_adv);
    for (size_t i = 0; i < k; i++) {
        const struct fs_secagg_adv *a = &sorted[i];
        uint8_t msg[SA_ADV_MSG_MAX];
        size_t n = 0;
        if (a->id < 1 || a->id > c->cfg.n || (i > 0 && a->id == sorted[i - 1].id)) {
            rc = fs_err_set(err, FS_EINVAL, "secagg: roster has invalid or repeated id %u", a->id);
            goto out;
        }
        rc = sa_adv_msg(&c->cfg, a, msg, &n, err);
        if (rc != 0) {
            goto out;
        }
        rc = fs_ed25519_verify(a->sig, a->sign_pk, msg, n, err);
        if (rc != 0) {
            fs_err_set(err, FS_EAUTH, "secagg: roster entry %u has a bad signature", a->id);
            rc = FS_EAUTH;
            goto out;
        }
        rc = sa_pin_check((const uint8_t(*)[FS_SECAGG_KEY_LEN])c->pins, a, err);
        if (rc != 0) {
            goto out;
        }
        if (a->id == c->id) {
            if (!fs_ct_eq(a->c_pk, c->c_pk, 32) ||
                !fs_ct_eq(a->s_pks, c->s_pks, seeds_bytes(&c->cfg)) ||
                !fs_ct_eq(a->sign_pk, c->sign_pk, 32)) {
                rc = fs_err_set(err, FS_EAUTH, "secagg: roster alters our own keys");
                goto out;
            }
            found_self = 1;
        }
    }
    if (!found_self) {
        rc = fs_err_set(err, FS_EINVAL, "secagg: roster does not include party %u", c->id);
        goto out;
    }
    for (size_t i = 0; i < k && rc == 0; i++) {
        struct peer *p = &c->peers[sorted[i].id];
        fs_secagg_adv_clear(&p->adv);
        rc = fs_secagg_adv_copy(&p->adv, &sorted[i], err);
        p->in_roster = rc == 0;
    }
    if (rc == 0) {
        rc = sa_session_id(&c->cfg, sorted, k, c->session, err);
    }
    if (rc == 0 && c->cfg.degree != 0) {
        free(c->pos);
        c->pos = malloc(((size_t)c->cfg.n + 1) * sizeof *c->pos);
        rc = c->pos == NULL ? fs_err_set(err, FS_ENOMEM, "secagg: out of memory")
                            : fs_secagg_graph(&c->cfg, c->session, c->pos, err);
    }
out:
    free(sorted);
    return rc;
}

/* Shamir shares of one secret: CSPRNG coefficients, or coefficients from a
 * key derived per (purpose, aggregation). */
static int client_split(const fs_secagg_client *c, const char *label, uint32_t r,
                        const uint8_t *secret, const uint16_t *xs, size_t k,
                        struct fs_shamir_share *sh, struct fs_err *err)
{
    uint8_t ck[32];
    int rc;

    if (!c->has_det) {
        return fs_shamir_split_at(secret, sa_share_t(&c->cfg), xs, k, sh, err);
    }
    rc = fs_derive_key(ck, c->det, label, r, 0, err);
    if (rc == 0) {
        rc = fs_shamir_split_at_det(secret, sa_share_t(&c->cfg), xs, k, ck, sh, err);
    }
    fs_wipe(ck, sizeof ck);
    return rc;
}

/* Plaintext for recipient index j: from, to, then per aggregation the
 * mask-key share and the seed share. */
static void build_bundle(const fs_secagg_client *c, uint32_t to,
                         const struct fs_shamir_share *key_sh,
                         const struct fs_shamir_share *seed_sh, size_t k, size_t j, uint8_t *pt)
{
    size_t off = 8;

    sa_put_u32(pt, c->id);
    sa_put_u32(pt + 4, to);
    for (uint32_t r = 0; r < c->cfg.aggregations; r++) {
        fs_shamir_share_encode(&key_sh[(size_t)r * k + j], pt + off);
        off += FS_SHAMIR_SHARE_LEN;
        fs_shamir_share_encode(&seed_sh[(size_t)r * k + j], pt + off);
        off += FS_SHAMIR_SHARE_LEN;
    }
}

int fs_secagg_client_share_keys(fs_secagg_client *c, const struct fs_secagg_adv *roster, size_t k,
                                struct fs_secagg_share_ct **out, size_t *nout, struct fs_err *err)
{
    struct fs_shamir_share *key_sh = NULL;
    struct fs_shamir_share *seed_sh = NULL;
    struct fs_secagg_share_ct *cts = NULL;
    uint16_t *xs = NULL;
    uint8_t *pt = NULL;
    size_t pt_len = sa_share_pt_len(&c->cfg);
    size_t ct_len = fs_secagg_share_ct_len(&c->cfg);
    size_t nct = 0;
    size_t self_j = 0;
    int rc;

    *out = NULL;
    *nout = 0;
    if (c->stage != ST_ADVERTISED) {
        return fs_err_set(err, FS_ESTATE, "secagg: share_keys before advertise, or twice");
    }
    rc = take_roster(c, roster, k, err);
    if (rc != 0) {
        return rc;
    }
    xs = malloc(k * sizeof *xs);
    key_sh = calloc(k * c->cfg.aggregations, sizeof *key_sh);
    seed_sh = calloc(k * c->cfg.aggregations, sizeof *seed_sh);
    cts = calloc(k, sizeof *cts);
    pt = malloc(pt_len);
    if (xs == NULL || key_sh == NULL || seed_sh == NULL || cts == NULL || pt == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "secagg: out of memory");
        goto out;
    }
    k = 0;
    for (uint32_t v = 1; v <= c->cfg.n; v++) {
        if (c->peers[v].in_roster && (v == c->id || nbr(c, v))) {
            if (v == c->id) {
                self_j = k;
            }
            xs[k++] = (uint16_t)v;
        }
    }
    for (uint32_t r = 0; rc == 0 && r < c->cfg.aggregations; r++) {
        rc = client_split(c, "secagg/shamir-mask-key", r, c->s_sks + (size_t)r * 32, xs, k,
                          key_sh + (size_t)r * k, err);
        if (rc == 0) {
            rc = client_split(c, "secagg/shamir-self-seed", r, c->seeds + (size_t)r * 32, xs, k,
                              seed_sh + (size_t)r * k, err);
        }
    }
    if (rc != 0) {
        goto out;
    }
    /* Keep our own shares of our own secrets: we reveal our seed share too. */
    {
        struct peer *me = &c->peers[c->id];
        peer_drop_shares(&c->cfg, me);
        me->seed_shares = malloc(seed_shares_bytes(&c->cfg));
        me->key_shares = malloc(seed_shares_bytes(&c->cfg));
        if (me->seed_shares == NULL || me->key_shares == NULL) {
            rc = fs_err_set(err, FS_ENOMEM, "secagg: out of memory");
            goto out;
        }
        for (uint32_t r = 0; r < c->cfg.aggregations; r++) {
            fs_shamir_share_encode(&key_sh[(size_t)r * k + self_j],
                                   me->key_shares + (size_t)r * FS_SHAMIR_SHARE_LEN);
            fs_shamir_share_encode(&seed_sh[(size_t)r * k + self_j],
                                   me->seed_shares + (size_t)r * FS_SHAMIR_SHARE_LEN);
        }
    }
    for (size_t j = 0; j < k; j++) {
        uint32_t to = xs[j];
        uint8_t key[32];
        uint8_t ad[SA_SHARE_AD_LEN];
        size_t got = 0;
        if (to == c->id) {
            continue;
        }
        build_bundle(c, to, key_sh, seed_sh, k, j, pt);
        cts[nct].from = c->id;
        cts[nct].to = to;
        cts[nct].ct = malloc(ct_len);
        if (cts[nct].ct == NULL) {
            rc = fs_err_set(err, FS_ENOMEM, "secagg: out of memory");
            goto out;
        }
        nct++;
        rc = sa_share_key_k(c->c_key, c->peers[to].adv.c_pk, c->session, key, err);
        if (rc == 0) {
            sa_share_ad(c->session, &c->cfg, c->id, to, ad);
            /* derived randomness: a synthetic nonce, so the box is rebuilt identically */
            rc = c->has_det ? fs_aead_box_seal_det(cts[nct - 1].ct, ct_len, &got, key, ad,
                                                   sizeof ad, pt, pt_len, err)
                            : fs_aead_box_seal(cts[nct - 1].ct, ct_len, &got, key, ad, sizeof ad,
                                               pt, pt_len, err);
        }
        fs_wipe(key, sizeof key);
        if (rc != 0) {
            goto out;
        }
        cts[nct - 1].len = got;
    }
    c->stage = ST_SHARED;
    *out = cts;
    *nout = nct;
    cts = NULL;
out:
    fs_secagg_share_cts_free(cts, nct);
    if (key_sh != NULL) {
        fs_wipe(key_sh, k * c->cfg.aggregations * sizeof *key_sh);
    }
    if (seed_sh != NULL) {
        fs_wipe(seed_sh, k * c->cfg.aggregations * sizeof *seed_sh);
    }
    if (pt != NULL) {
        fs_wipe(pt, pt_len);
    }
    free(key_sh);
    free(seed_sh);
    free(pt);
    free(xs);
    return rc;
}

/* Decrypt one bundle addressed to us and store our shares of its sender's secrets. */
static int take_bundle(fs_secagg_client *c, const struct fs_secagg_share_ct *ct, uint8_t *pt,
                       struct fs_err *err)
{
    size_t pt_len = sa_share_pt_len(&c->cfg);
    struct peer *p;
    uint8_t key[32];
    uint8_t ad[SA_SHARE_AD_LEN];
    struct fs_shamir_share sh;
    size_t got = 0;
    int rc;

    if (ct->to != c->id || ct->from < 1 || ct->from > c->cfg.n || ct->from == c->id ||
        !c->peers[ct->from].in_roster || !nbr(c, ct->from)) {
        return fs_err_set(err, FS_EINVAL, "secagg: share from %u to %u is not for this party",
                          ct->from, ct->to);
    }
    p = &c->peers[ct->from];
    if (p->in_u2) {
        return fs_err_set(err, FS_EINVAL, "secagg: two share bundles from party %u", ct->from);
    }
    if (ct->len != fs_secagg_share_ct_len(&c->cfg)) {
        return fs_err_set(err, FS_EINVAL, "secagg: share bundle from %u has %zu bytes, want %zu",
                          ct->from, ct->len, fs_secagg_share_ct_len(&c->cfg));
    }
    rc = sa_share_key_k(c->c_key, p->adv.c_pk, c->session, key, err);
    if (rc != 0) {
        return rc;
    }
    sa_share_ad(c->session, &c->cfg, ct->from, c->id, ad);
    rc = fs_aead_box_open(pt, pt_len, &got, key, ad, sizeof ad, ct->ct, ct->len, err);
    fs_wipe(key, sizeof key);
    if (rc != 0 || got != pt_len || sa_get_u32(pt) != ct->from || sa_get_u32(pt + 4) != c->id) {
        return fs_err_set(err, FS_EAUTH, "secagg: share bundle from %u does not authenticate",
                          ct->from);
    }
    peer_drop_shares(&c->cfg, p);
    p->seed_shares = malloc(seed_shares_bytes(&c->cfg));
    p->key_shares = malloc(seed_shares_bytes(&c->cfg));
    if (p->seed_shares == NULL || p->key_shares == NULL) {
        peer_drop_shares(&c->cfg, p);
        return fs_err_set(err, FS_ENOMEM, "secagg: out of memory");
    }
    for (size_t q = 0; q < 2 * (size_t)c->cfg.aggregations; q++) {
        const uint8_t *enc = pt + 8 + q * FS_SHAMIR_SHARE_LEN;
        uint8_t *dst = q % 2 == 0 ? p->key_shares : p->seed_shares;
        rc = fs_shamir_share_decode(&sh, enc, FS_SHAMIR_SHARE_LEN, err);
        if (rc != 0 || sh.x != c->id) {
            peer_drop_shares(&c->cfg, p);
            fs_wipe(&sh, sizeof sh);
            return fs_err_set(err, FS_EAUTH, "secagg: bad share from party %u", ct->from);
        }
        memcpy(dst + (q / 2) * FS_SHAMIR_SHARE_LEN, enc, FS_SHAMIR_SHARE_LEN);
    }
    fs_wipe(&sh, sizeof sh);
    p->in_u2 = 1;
    return 0;
}

int fs_secagg_client_receive_shares(fs_secagg_client *c, const struct fs_secagg_share_ct *cts,
                                    size_t k, struct fs_err *err)
{
    size_t pt_len = sa_share_pt_len(&c->cfg);
    uint8_t *pt = NULL;
    int rc = 0;

    if (c->stage != ST_SHARED) {
        return fs_err_set(err, FS_ESTATE, "secagg: receive_shares before share_keys, or twice");
    }
    if (k + 1 < sa_share_t(&c->cfg)) {
        return fs_err_set(err, FS_ESTATE, "secagg: only %zu parties shared keys, threshold %u",
                          k + 1, sa_share_t(&c->cfg));
    }
    pt = malloc(pt_len);
    if (pt == NULL) {
        return fs_err_set(err, FS_ENOMEM, "secagg: out of memory");
    }
    for (size_t i = 0; i < k && rc == 0; i++) {
        rc = take_bundle(c, &cts[i], pt, err);
    }
    fs_wipe(pt, pt_len);
    free(pt);
    if (rc != 0) {
        /* Leave no half-taken state: a retry with the right bundles works. */
        for (uint32_t v = 1; v <= c->cfg.n; v++) {
            if (v != c->id && c->peers[v].in_u2) {
                c->peers[v].in_u2 = 0;
                peer_drop_shares(&c->cfg, &c->peers[v]);
            }
        }
        return rc;
    }
    c->peers[c->id].in_u2 = 1;
    c->stage = ST_READY;
    return 0;
}

int fs_secagg_client_begin(fs_secagg_client *c, uint32_t r, uint64_t len, const uint32_t *active,
                           size_t na, struct fs_err *err)
{
    uint32_t *ids = NULL;
    int self_in = 0;
    int rc;

    if (c->stage != ST_READY && c->stage != ST_MASKING && c->stage != ST_SIGNED) {
        return fs_err_set(err, FS_ESTATE, "secagg: begin before key setup");
    }
    if (r >= c->cfg.aggregations || (c->has_round && r <= c->round)) {
        return fs_err_set(err, FS_ESTATE, "secagg: aggregation %u not allowed (last %u of %u)", r,
                          c->has_round ? c->round : 0, c->cfg.aggregations);
    }
    if (len == 0 || len > ((uint64_t)1 << 40)) {
        return fs_err_set(err, FS_EINVAL, "secagg: vector length %llu out of range",
                          (unsigned long long)len);
    }
    rc = sa_sorted_ids(active, na, c->cfg.n, &ids, err);
    if (rc != 0) {
        return rc;
    }
    if (na < c->cfg.t) {
        rc = fs_err_set(err, FS_ESTATE, "secagg: %zu active parties, threshold %u", na, c->cfg.t);
        goto out;
    }
    for (size_t i = 0; i < na; i++) {
        struct peer *p = &c->peers[ids[i]];
        /* a non-neighbour's shares never reach us: it must be in the roster */
        if ((nbr(c, ids[i]) ? !p->in_u2 : !p->in_roster) || p->mask_revealed) {
            rc = fs_err_set(err, FS_EAUTH, "secagg: party %u cannot be active", ids[i]);
            goto out;
        }
        self_in |= ids[i] == c->id;
    }
    if (!self_in) {
        rc = fs_err_set(err, FS_ESTATE, "secagg: this party is not in the active set");
        goto out;
    }
    for (uint32_t v = 1; v <= c->cfg.n; v++) {
        c->peers[v].active = 0;
    }
    rc = sa_self_mask_key(c->seeds + (size_t)r * 32, c->session, c->id, r, len, c->self_key, err);
    for (size_t i = 0; rc == 0 && i < na; i++) {
        struct peer *p = &c->peers[ids[i]];
        p->active = 1;
        if (ids[i] != c->id && nbr(c, ids[i])) {
            /* this aggregation's own key pair on both sides: see secagg.h */
            rc = c->s_keys[r] == NULL
                     ? fs_err_set(err, FS_ESTATE, "secagg: mask key of aggregation %u gone", r)
                     : sa_pair_mask_key_k(c->s_keys[r], fs_secagg_adv_mask_pk(&p->adv, r),
                                          c->session, r, len, p->pair_key, err);
        }
    }
    if (rc != 0) {
        goto out;
    }
    c->round = r;
    c->has_round = 1;
    c->len = len;
    c->stage = ST_MASKING;
    /* no later begin uses this aggregation's key pair or an earlier one */
    for (uint32_t q = 0; q <= r; q++) {
        fs_x25519_key_free(c->s_keys[q]);
        c->s_keys[q] = NULL;
    }
    free(c->u3);
    c->u3 = NULL;
    c->n3 = 0;
out:
    free(ids);
    return rc;
}

int fs_secagg_client_mask(fs_secagg_client *c, uint64_t off, const uint64_t *x, uint64_t *y,
                          size_t m, struct fs_err *err)
{
    struct fs_prg_term *st = NULL;
    size_t ns = 0;
    int rc;

    if (c->stage != ST_MASKING) {
        return fs_err_set(err, FS_ESTATE, "secagg: mask outside an aggregation");
    }
    if (off > c->len || m > c->len - off) {
        return fs_err_set(err, FS_EINVAL, "secagg: chunk %llu+%zu beyond length %llu",
                          (unsigned long long)off, m, (unsigned long long)c->len);
    }
    if (x != y) {
        memmove(y, x, m * sizeof *y);
    }
    /* the self mask and every active pair's, summed per L1 piece: one pass over y */
    st = calloc((size_t)c->cfg.n, sizeof *st);
    if (st == NULL) {
        return fs_err_set(err, FS_ENOMEM, "secagg: out of memory");
    }
    memcpy(st[ns].key, c->self_key, 32);
    st[ns++].sign = 1;
    for (uint32_t v = 1; v <= c->cfg.n; v++) {
        if (v != c->id && c->peers[v].active && nbr(c, v)) {
            memcpy(st[ns].key, c->peers[v].pair_key, 32);
            st[ns++].sign = c->id > v ? 1 : -1;
        }
    }
    rc = fs_prg_sum(st, ns, off, y, m, err);
    fs_wipe(st, (size_t)c->cfg.n * sizeof *st);
    free(st);
    return rc;
}

int fs_secagg_client_consistency(fs_secagg_client *c, const uint32_t *u3, size_t n3,
                                 uint8_t sig[FS_SECAGG_SIG_LEN], struct fs_err *err)
{
    uint32_t *ids = NULL;
    uint8_t *msg = NULL;
    size_t msg_len = 0;
    int self_in = 0;
    int rc;

    if (c->cfg.all_inputs) {
        return fs_err_set(err, FS_ESTATE, "secagg: no consistency round in an all-inputs job");
    }
    if (c->stage != ST_MASKING) {
        return fs_err_set(err, FS_ESTATE, "secagg: consistency outside an aggregation");
    }
    rc = sa_sorted_ids(u3, n3, c->cfg.n, &ids, err);
    if (rc != 0) {
        return rc;
    }
    if (n3 < c->cfg.t) {
        rc = fs_err_set(err, FS_ESTATE, "secagg: %zu survivors, threshold %u", n3, c->cfg.t);
        goto out;
    }
    for (size_t i = 0; i < n3; i++) {
        if (!c->peers[ids[i]].active) {
            rc = fs_err_set(err, FS_EAUTH, "secagg: survivor %u was not active", ids[i]);
            goto out;
        }
        self_in |= ids[i] == c->id;
    }
    if (!self_in) {
        rc = fs_err_set(err, FS_ESTATE, "secagg: this party is not among the survivors");
        goto out;
    }
    rc = sa_u3_msg(c->session, c->round, c->len, ids, n3, &msg, &msg_len, err);
    if (rc == 0) {
        rc = fs_ed25519_signer_sign(c->signer, sig, msg, msg_len, err);
    }
    if (rc == 0) {
        free(c->u3);
        c->u3 = ids;
        c->n3 = n3;
        ids = NULL;
        c->stage = ST_SIGNED;
    }
out:
    free(msg);
    free(ids);
    return rc;
}

static int in_sorted(const uint32_t *ids, size_t k, uint32_t v)
{
    size_t lo = 0;
    size_t hi = k;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ids[mid] == v) {
            return 1;
        }
        if (ids[mid] < v) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return 0;
}

/* Count valid signatures on our U3 from distinct members of U3. */
static int count_valid_sigs(fs_secagg_client *c, const uint32_t *ids,
                            const uint8_t (*sigs)[FS_SECAGG_SIG_LEN], size_t k, size_t *valid,
                            struct fs_err *err)
{
    uint8_t *msg = NULL;
    uint8_t *seen = NULL;
    size_t msg_len = 0;
    int rc;

    *valid = 0;
    rc = sa_u3_msg(c->session, c->round, c->len, c->u3, c->n3, &msg, &msg_len, err);
    if (rc != 0) {
        return rc;
    }
    seen = calloc((size_t)c->cfg.n + 1, 1);
    if (seen == NULL) {
        free(msg);
        return fs_err_set(err, FS_ENOMEM, "secagg: out of memory");
    }
    for (size_t i = 0; i < k; i++) {
        uint32_t v = ids[i];
        struct fs_err ignored;
        if (v < 1 || v > c->cfg.n || seen[v] || !in_sorted(c->u3, c->n3, v)) {
            rc = fs_err_set(err, FS_EAUTH, "secagg: signature list has a bad or repeated id %u", v);
            break;
        }
        seen[v] = 1;
        if (fs_ed25519_verify(sigs[i], c->peers[v].adv.sign_pk, msg, msg_len, &ignored) != 0) {
            rc = fs_err_set(err, FS_EAUTH,
                            "secagg: party %u's signature on the survivors is invalid", v);
            break;
        }
        (*valid)++;
    }
    free(seen);
    free(msg);
    return rc;
}

int fs_secagg_client_unmask(fs_secagg_client *c, const uint32_t *ids,
                            const uint8_t (*sigs)[FS_SECAGG_SIG_LEN], size_t k,
                            struct fs_secagg_reveal **out, size_t *nout, struct fs_err *err)
{
    struct fs_secagg_reveal *rv = NULL;
    size_t valid = 0;
    size_t n = 0;
    int rc;

    *out = NULL;
    *nout = 0;
    if (c->cfg.all_inputs) {
        return fs_err_set(err, FS_ESTATE,
                          "secagg: an all-inputs job unmasks without signatures (unmask_all)");
    }
    if (c->stage != ST_SIGNED) {
        return fs_err_set(err, FS_ESTATE, "secagg: unmask before consistency");
    }
    rc = count_valid_sigs(c, ids, sigs, k, &valid, err);
    if (rc != 0) {
        return rc;
    }
    if (valid < c->cfg.t) {
        return fs_err_set(err, FS_EAUTH, "secagg: %zu signatures on the survivors, threshold %u",
                          valid, c->cfg.t);
    }
    rv = calloc(c->cfg.n, sizeof *rv);
    if (rv == NULL) {
        return fs_err_set(err, FS_ENOMEM, "secagg: out of memory");
    }
    for (uint32_t v = 1; v <= c->cfg.n; v++) {
        struct peer *p = &c->peers[v];
        if (!p->active || (v != c->id && !nbr(c, v))) {
            continue; /* SecAgg+: we hold shares of our neighbours' secrets only */
        }
        rv[n].about = v;
        if (in_sorted(c->u3, c->n3, v)) {
            /* Invariant: an active peer never had its mask key revealed (begin checks). */
            rv[n].kind = FS_SECAGG_SELF_SEED;
            memcpy(rv[n].share, p->seed_shares + (size_t)c->round * FS_SHAMIR_SHARE_LEN,
                   FS_SHAMIR_SHARE_LEN);
        } else {
            /* only this aggregation's mask key: every other one stays secret */
            rv[n].kind = FS_SECAGG_MASK_KEY;
            memcpy(rv[n].share, p->key_shares + (size_t)c->round * FS_SHAMIR_SHARE_LEN,
                   FS_SHAMIR_SHARE_LEN);
            p->mask_revealed = 1;
        }
        n++;
    }
    c->stage = ST_READY;
    *out = rv;
    *nout = n;
    return 0;
}

int fs_secagg_client_unmask_all(fs_secagg_client *c, const uint32_t *u3, size_t n3,
                                struct fs_secagg_reveal **out, size_t *nout, struct fs_err *err)
{
    struct fs_secagg_reveal *rv = NULL;
    uint32_t *ids = NULL;
    size_t nactive = 0;
    size_t n = 0;
    int rc;

    *out = NULL;
    *nout = 0;
    if (!c->cfg.all_inputs) {
        return fs_err_set(err, FS_ESTATE, "secagg: unmask_all needs an all-inputs job");
    }
    if (c->stage != ST_MASKING) {
        return fs_err_set(err, FS_ESTATE, "secagg: unmask outside an aggregation");
    }
    rc = sa_sorted_ids(u3, n3, c->cfg.n, &ids, err);
    if (rc != 0) {
        return rc;
    }
    /* The rule of secagg.h: U3 must be exactly the active set, so that only
     * self-seed shares are ever revealed. */
    for (size_t i = 0; i < n3; i++) {
        if (!c->peers[ids[i]].active) {
            rc = fs_err_set(err, FS_EAUTH, "secagg: survivor %u was not active", ids[i]);
            goto out;
        }
    }
    for (uint32_t v = 1; v <= c->cfg.n; v++) {
        if (c->peers[v].active && !in_sorted(ids, n3, v)) {
            rc = fs_err_set(err, FS_EAUTH,
                            "secagg: active party %u is missing from the survivors of an "
                            "all-inputs aggregation: nothing revealed",
                            v);
            goto out;
        }
        nactive += (size_t)(c->peers[v].active != 0);
    }
    if (nactive != n3) {
        rc = fs_err_set(err, FS_EAUTH, "secagg: the survivors are not the active set");
        goto out;
    }
    rv = calloc(c->cfg.n, sizeof *rv);
    if (rv == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "secagg: out of memory");
        goto out;
    }
    for (uint32_t v = 1; v <= c->cfg.n; v++) {
        struct peer *p = &c->peers[v];
        if (!p->active || (v != c->id && !nbr(c, v))) {
            continue; /* SecAgg+: we hold shares of our neighbours' secrets only */
        }
        rv[n].about = v;
        rv[n].kind = FS_SECAGG_SELF_SEED;
        memcpy(rv[n].share, p->seed_shares + (size_t)c->round * FS_SHAMIR_SHARE_LEN,
               FS_SHAMIR_SHARE_LEN);
        n++;
    }
    c->stage = ST_READY;
    *out = rv;
    *nout = n;
out:
    free(ids);
    return rc;
}

const uint8_t *fs_secagg_client_session(const fs_secagg_client *c)
{
    return c->session;
}

size_t fs_secagg_client_neighbours(const fs_secagg_client *c, uint32_t *out)
{
    size_t k = 0;

    for (uint32_t v = 1; v <= c->cfg.n; v++) {
        if (nbr(c, v)) {
            out[k++] = v;
        }
    }
    return k;
}

void fs_secagg_client_free(fs_secagg_client *c)
{
    if (c == NULL) {
        return;
    }
    if (c->peers != NULL) {
        for (uint32_t v = 0; v <= c->cfg.n; v++) {
            peer_drop_shares(&c->cfg, &c->peers[v]);
            fs_secagg_adv_clear(&c->peers[v].adv);
        }
        fs_wipe(c->peers, ((size_t)c->cfg.n + 1) * sizeof *c->peers);
        free(c->peers);
    }
    if (c->seeds != NULL) {
        fs_wipe(c->seeds, seeds_bytes(&c->cfg));
        free(c->seeds);
    }
    if (c->s_sks != NULL) {
        fs_wipe(c->s_sks, seeds_bytes(&c->cfg));
        free(c->s_sks);
    }
    if (c->s_keys != NULL) {
        for (uint32_t r = 0; r < c->cfg.aggregations; r++) {
            fs_x25519_key_free(c->s_keys[r]);
        }
        free(c->s_keys);
    }
    fs_x25519_key_free(c->c_key);
    fs_ed25519_signer_free(c->signer);
    free(c->s_pks);
    free(c->u3);
    free(c->pins);
    free(c->pos);
    fs_wipe(c, sizeof *c);
    free(c);
}

/* ------------------------------------------------------------ pinned identities */

int fs_secagg_client_set_pins(fs_secagg_client *c, const uint8_t (*pins)[FS_SECAGG_KEY_LEN],
                              uint32_t n, struct fs_err *err)
{
    char mine[FS_ED25519_FPR_LEN + 1];

    if (n != c->cfg.n) {
        return fs_err_set(err, FS_EINVAL, "secagg: %u pins for %u parties", n, c->cfg.n);
    }
    if (c->stage > ST_ADVERTISED) {
        return fs_err_set(err, FS_ESTATE, "secagg: pins come before the roster");
    }
    if (memcmp(pins[c->id - 1], c->sign_pk, FS_SECAGG_KEY_LEN) != 0) {
        fs_ed25519_fpr_format(c->sign_pk, mine);
        return fs_err_set(err, FS_EAUTH,
                          "this agent's identity %s is not the one pinned for party %u", mine,
                          c->id);
    }
    free(c->pins);
    c->pins = malloc((size_t)n * sizeof *c->pins);
    if (c->pins == NULL) {
        return fs_err_set(err, FS_ENOMEM, "secagg: out of memory");
    }
    memcpy(c->pins, pins, (size_t)n * sizeof *c->pins);
    return 0;
}
