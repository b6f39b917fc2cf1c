/* Encrypted noise exchange (see noise_exchange.h). */
#include "noise_exchange.h"

#include <gmp.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../crypto/derive.h"
#include "../crypto/paillier.h"
#include "../crypto/rand.h"
#include "noisex_dec.h"
#include "noisex_ot.h"

#define NX_SEED_BITS (8u * FS_NOISEX_SEED_LEN)
/* 256-bit seed slots per plaintext at FS_PAILLIER_MAX_BITS */
#define NX_MAX_SLOTS ((FS_PAILLIER_MAX_BITS - 1) / NX_SEED_BITS)

struct fs_noisex_server {
    struct fs_noisex_params p;
    fs_paillier_sk *sk;
    const fs_paillier_pk *pk; /* borrowed from sk */
    fs_paillier_djn *djn;
    struct nxot *ot;               /* ot mode (instead of the Paillier key) */
    struct fs_paillier_packing pp; /* elementwise */
    size_t ct_size;
    size_t resp_size;
    size_t groups; /* ciphertexts per response */
    size_t slots;  /* values (elementwise) or seeds (seed mode) per plaintext */
    mpz_t n2;
    unsigned threads; /* seed mode: threads that decrypt the groups */
    int ahead;        /* seed mode: decrypt complete groups as the answers come */
    /* current round */
    int open;
    int started; /* a round has been begun (for strictly increasing rounds) */
    uint32_t round;
    uint32_t chosen;
    uint32_t *ids; /* ascending */
    size_t k;
    uint8_t *sel;    /* k * ct_size */
    uint8_t **resp;  /* k, each response_size bytes or NULL */
    struct nxd *dec; /* seed mode: the round's background decryptions, or NULL */
    int unshifted;   /* seed mode: restored selectors of 0 and 1 (answers shifted here) */
};

struct fs_noisex_client {
    struct fs_noisex_params p;
    fs_paillier_pk *pk;
    fs_paillier_djn *djn;
    struct nxot *ot; /* ot mode */
    struct fs_paillier_packing pp;
    size_t ct_size;
    size_t resp_size;
    size_t groups;
    size_t slots;
    mpz_t n2;
    int has_rr; /* re-randomizers derived from rr_key (set_rerand_key) */
    uint8_t rr_key[32];
};

/* ---- helpers ------------------------------------------------------------ */

static void mpz_wipe(mpz_t z)
{
    /* _mp_d/_mp_alloc are the documented layout of mpz_t in gmp.h. */
    OPENSSL_cleanse(z->_mp_d, (size_t)z->_mp_alloc * sizeof(mp_limb_t));
}

static void mpz_wipe_clear(mpz_t z)
{
    mpz_wipe(z);
    mpz_clear(z);
}

static unsigned ceil_log2(uint32_t k)
{
    unsigned l = 0;

    while (((uint64_t)1 << l) < k) {
        l++;
    }
    return l;
}

int fs_noisex_params_check(const struct fs_noisex_params *p, struct fs_err *err)
{
    if (p == NULL) {
        return fs_err_set(err, FS_EINVAL, "noise exchange: params is NULL");
    }
    if (p->mode != FS_NOISEX_SEED && p->mode != FS_NOISEX_ELEMENTWISE && p->mode != FS_NOISEX_OT) {
        return fs_err_set(err, FS_EINVAL, "noise exchange: unknown mode %d", (int)p->mode);
    }
    if (p->parties < 1 || p->parties > FS_NOISEX_MAX_PARTIES) {
        return fs_err_set(err, FS_EINVAL, "noise exchange: parties %u outside 1..%u", p->parties,
                          FS_NOISEX_MAX_PARTIES);
    }
    if (p->mode == FS_NOISEX_ELEMENTWISE) {
        if (p->noise_len < 1 || p->noise_len > FS_NOISEX_MAX_NOISE_LEN) {
            return fs_err_set(err, FS_EINVAL, "noise exchange: noise_len %zu outside 1..%u",
                              p->noise_len, FS_NOISEX_MAX_NOISE_LEN);
        }
        if (p->value_bits < 1 || p->value_bits + ceil_log2(p->parties) > 64) {
            return fs_err_set(err, FS_EINVAL,
                              "noise exchange: value_bits %u with %u parties exceeds 64 bits",
                              p->value_bits, p->parties);
        }
    }
    return 0;
}

const char *fs_noisex_mode_name(enum fs_noisex_mode m)
{
    return m == FS_NOISEX_ELEMENTWISE ? "elementwise" : m == FS_NOISEX_OT ? "ot" : "seed";
}

int fs_noisex_mode_parse(const char *s, enum fs_noisex_mode *out, struct fs_err *err)
{
    if (s != NULL && strcmp(s, "seed") == 0) {
        *out = FS_NOISEX_SEED;
        return 0;
    }
    if (s != NULL && strcmp(s, "elementwise") == 0) {
        *out = FS_NOISEX_ELEMENTWISE;
        return 0;
    }
    if (s != NULL && strcmp(s, "ot") == 0) {
        *out = FS_NOISEX_OT;
        return 0;
    }
    return fs_err_set(err, FS_EINVAL, "noise_exchange: expected seed, ot or elementwise");
}

/* Shared layout: slots per plaintext and ciphertexts per response. */
static int layout(const struct fs_noisex_params *p, const fs_paillier_pk *pk,
                  struct fs_paillier_packing *pp, size_t *slots, size_t *groups, struct fs_err *err)
{
    unsigned bits = fs_paillier_pk_bits(pk);

    if (p->mode == FS_NOISEX_SEED) {
        /* Seeds in 256-bit slots (selectors of 2^(256 t)): sum < 2^(256 S) <=
         * 2^(bits/2-1) <= p (primes of exactly bits/2 bits), so the server
         * decrypts modulo p alone (fs_paillier_decrypt_sum_p); keys too small
         * for one such slot use one slot below n and both primes. */
        *slots = (bits / 2 - 1) / NX_SEED_BITS;
        if (*slots < 1) {
            *slots = (bits - 1) / NX_SEED_BITS;
        }
        if (*slots < 1) {
            return fs_err_set(err, FS_ERANGE, "noise exchange: a %u-bit key holds no seed", bits);
        }
        *groups = 1;
        return 0;
    }
    int rc = fs_paillier_packing_init(pp, pk, p->value_bits, p->parties, err);
    if (rc != 0) {
        return rc;
    }
    *slots = pp->slots;
    *groups = (p->noise_len + pp->slots - 1) / pp->slots;
    return 0;
}

/* ---- server ------------------------------------------------------------- */

static void round_reset(fs_noisex_server *s)
{
    nxd_free(s->dec); /* before the responses it reads */
    s->dec = NULL;
    if (s->resp != NULL) {
        for (size_t q = 0; q < s->k; q++) {
            free(s->resp[q]);
        }
    }
    free(s->resp);
    free(s->sel);
    free(s->ids);
    s->resp = NULL;
    s->sel = NULL;
    s->ids = NULL;
    s->k = 0;
    s->open = 0;
    s->unshifted = 0;
}

/* The Paillier key (fresh when sk_buf is NULL), its layout and selector table. */
static int server_paillier(fs_noisex_server *s, unsigned key_bits, const uint8_t *sk_buf,
                           size_t sk_len, struct fs_err *err)
{
    int rc = sk_buf != NULL ? fs_paillier_sk_import(&s->sk, sk_buf, sk_len, err)
                            : fs_paillier_keygen(&s->sk, key_bits, err);

    if (rc != 0) {
        return rc;
    }
    s->pk = fs_paillier_sk_pub(s->sk);
    rc = layout(&s->p, s->pk, &s->pp, &s->slots, &s->groups, err);
    if (rc != 0) {
        return rc;
    }
    /* selectors: hs^a modulo p^2 and q^2 with the private key */
    rc = fs_paillier_djn_new_crt(&s->djn, s->sk, 0, FS_PAILLIER_DJN_WINDOW, NULL, err);
    if (rc != 0) {
        return rc;
    }
    s->ct_size = fs_paillier_ct_size(s->pk);
    s->resp_size = s->groups * s->ct_size;
    mpz_mul(s->n2, fs_paillier_pk_n(s->pk), fs_paillier_pk_n(s->pk));
    return 0;
}

/* ot mode: the secret (fresh when sk_buf is NULL); key_bits does not apply. */
static int server_ot(fs_noisex_server *s, const uint8_t *sk_buf, size_t sk_len, struct fs_err *err)
{
    s->ct_size = FS_ECOT_POINT_LEN;
    s->resp_size = FS_ECOT_RESP_LEN;
    s->slots = 1;
    s->groups = 1;
    return nxot_new(1, sk_buf, sk_len, &s->ot, err);
}

/* A server around a fresh (sk_buf NULL) or an exported private key. */
static int server_make(const struct fs_noisex_params *p, unsigned key_bits, const uint8_t *sk_buf,
                       size_t sk_len, fs_noisex_server **out, struct fs_err *err)
{
    fs_noisex_server *s = NULL;
    int rc;

    if (out == NULL) {
        return fs_err_set(err, FS_EINVAL, "noise exchange: out is NULL");
    }
    *out = NULL;
    rc = fs_noisex_params_check(p, err);
    if (rc != 0) {
        return rc;
    }
    s = calloc(1, sizeof *s);
    if (s == NULL) {
        return fs_err_set(err, FS_ENOMEM, "noise exchange: out of memory");
    }
    mpz_init(s->n2);
    s->p = *p;
    rc = p->mode == FS_NOISEX_OT ? server_ot(s, sk_buf, sk_len, err)
                                 : server_paillier(s, key_bits, sk_buf, sk_len, err);
    if (rc != 0) {
        goto out;
    }
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    s->threads = cpus < 1 ? 1u : (unsigned)(cpus > 64 ? 64 : cpus);
    s->ahead = 1;
    *out = s;
    s = NULL;
out:
    fs_noisex_server_free(s);
    return rc;
}

void fs_noisex_server_set_threads(fs_noisex_server *s, unsigned threads, int ahead)
{
    if (s != NULL) {
        s->threads = threads < 1 ? 1u : threads > 64 ? 64u : threads;
        s->ahead = ahead != 0;
    }
}

int fs_noisex_server_new(const struct fs_noisex_params *p, unsigned key_bits,
                         fs_noisex_server **out, struct fs_err *err)
{
    return server_make(p, key_bits, NULL, 0, out, err);
}

int fs_noisex_server_new_from_key(const struct fs_noisex_params *p, const uint8_t *sk, size_t len,
                                  fs_noisex_server **out, struct fs_err *err)
{
    if (sk == NULL) {
        return fs_err_set(err, FS_EINVAL, "noise exchange: NULL key");
    }
    return server_make(p, 0, sk, len, out, err);
}

size_t fs_noisex_server_sk_size(const fs_noisex_server *s)
{
    return s->ot != NULL ? FS_ECOT_SECRET_LEN : fs_paillier_sk_size(s->sk);
}

int fs_noisex_server_sk_export(const fs_noisex_server *s, uint8_t *buf, size_t len,
                               struct fs_err *err)
{
    if (s->ot != NULL) {
        return nxot_sk_export(s->ot, buf, len, err);
    }
    return fs_paillier_sk_export(s->sk, buf, len, err);
}

size_t fs_noisex_server_pk_size(const fs_noisex_server *s)
{
    return s->ot != NULL ? FS_ECOT_POINT_LEN : fs_paillier_pk_size(s->pk);
}

int fs_noisex_server_pk_export(const fs_noisex_server *s, uint8_t *buf, size_t len,
                               struct fs_err *err)
{
    if (s->ot != NULL) {
        return nxot_pk_export(s->ot, buf, len, err);
    }
    return fs_paillier_pk_export(s->pk, buf, len, err);
}

size_t fs_noisex_server_ct_size(const fs_noisex_server *s)
{
    return s->ct_size;
}

size_t fs_noisex_server_response_size(const fs_noisex_server *s)
{
    return s->resp_size;
}

size_t fs_noisex_server_slots(const fs_noisex_server *s)
{
    return s->slots;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a;
    uint32_t y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Index of id in the round, or -1. */
static long find_id(const fs_noisex_server *s, uint32_t id)
{
    size_t lo = 0;
    size_t hi = s->k;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->ids[mid] == id) {
            return (long)mid;
        }
        if (s->ids[mid] < id) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return -1;
}

/* A round's selectors computed ahead (fs_noisex_server_prepare). */
struct fs_noisex_prepared {
    uint32_t round;
    uint32_t chosen;
    uint32_t *ids; /* ascending */
    size_t k;
    uint8_t *sel; /* k * ct_size */
    size_t ct_size;
};

void fs_noisex_prepared_free(fs_noisex_prepared *p)
{
    if (p == NULL) {
        return;
    }
    free(p->ids);
    free(p->sel);
    OPENSSL_cleanse(p, sizeof *p); /* chosen */
    free(p);
}

/* Every other selector of the round (from `first`), on one thread. */
struct sel_part {
    const fs_noisex_server *s;
    fs_noisex_prepared *x;
    size_t first;
    int rc;
    struct fs_err err;
};

/* Seed mode: the slot of round index q in its decryption group when j is
 * at index jq (the parties but j, `slots` at a time in ascending order). */
static size_t seed_slot(size_t q, size_t jq, size_t slots)
{
    return (q < jq ? q : q - 1) % slots;
}

/* Index of the chosen party in x. */
static size_t chosen_index(const fs_noisex_prepared *x)
{
    size_t q = 0;

    while (q < x->k && x->ids[q] != x->chosen) {
        q++;
    }
    return q;
}

static void *sel_part_main(void *arg)
{
    struct sel_part *sp = arg;
    const fs_noisex_server *s = sp->s;
    fs_noisex_prepared *x = sp->x;
    size_t jq = chosen_index(x);
    mpz_t c, m;

    mpz_init(c);
    mpz_init(m);
    for (size_t q = sp->first; q < x->k && sp->rc == 0; q += 2) {
        /* A fresh DJN encryption for every party and round: all selectors are
         * distinct, unlinkable and of one size, whatever the plaintext. Seed
         * mode: 2^(256 t) for slot t of the party's group (its answer then
         * carries its seed in that slot), 0 for j; elementwise: 1 and 0. */
        mpz_set_ui(m, q == jq ? 0u : 1u);
        if (q != jq && s->p.mode == FS_NOISEX_SEED) {
            mpz_mul_2exp(m, m, (mp_bitcnt_t)(NX_SEED_BITS * seed_slot(q, jq, s->slots)));
        }
        sp->rc = fs_paillier_encrypt(s->pk, s->djn, c, m, &sp->err);
        if (sp->rc == 0) {
            sp->rc = fs_paillier_ct_export(s->pk, c, x->sel + q * s->ct_size, s->ct_size, &sp->err);
        }
    }
    mpz_clear(c);
    mpz_wipe_clear(m);
    return NULL;
}

/* The round's selectors, on two threads (the odd ones on a second thread when one starts). */
static int encrypt_selectors(const fs_noisex_server *s, fs_noisex_prepared *x, struct fs_err *err)
{
    struct sel_part sp[2];
    pthread_t th;
    int threaded;

    memset(sp, 0, sizeof sp);
    sp[0].s = sp[1].s = s;
    sp[0].x = sp[1].x = x;
    sp[1].first = 1;
    threaded = x->k > 1 && pthread_create(&th, NULL, sel_part_main, &sp[1]) == 0;
    sel_part_main(&sp[0]);
    if (threaded) {
        pthread_join(th, NULL);
    } else {
        sel_part_main(&sp[1]);
    }
    for (int i = 0; i < 2; i++) {
        if (sp[i].rc != 0) {
            if (err != NULL) {
                *err = sp[i].err;
            }
            return sp[i].rc;
        }
    }
    return 0;
}

/* Checked, sorted copy of a round's ids into x. */
static int prepared_ids(const fs_noisex_server *s, const uint32_t *ids, size_t k,
                        fs_noisex_prepared *x, struct fs_err *err)
{
    if (k < 1 || k > s->p.parties) {
        return fs_err_set(err, FS_EINVAL, "noise exchange: round of %zu parties (1..%u)", k,
                          s->p.parties);
    }
    x->ids = malloc(k * sizeof *x->ids);
    x->sel = malloc(k * s->ct_size);
    if (x->ids == NULL || x->sel == NULL) {
        return fs_err_set(err, FS_ENOMEM, "noise exchange: out of memory");
    }
    memcpy(x->ids, ids, k * sizeof *ids);
    qsort(x->ids, k, sizeof *x->ids, cmp_u32);
    x->k = k;
    x->ct_size = s->ct_size;
    for (size_t q = 0; q < k; q++) {
        if (x->ids[q] < 1 || x->ids[q] > s->p.parties || (q > 0 && x->ids[q] == x->ids[q - 1])) {
            return fs_err_set(err, FS_EINVAL, "noise exchange: bad or repeated party id %u",
                              x->ids[q]);
        }
    }
    return 0;
}

int fs_noisex_server_prepare(const fs_noisex_server *s, uint32_t round, const uint32_t *ids,
                             size_t k, fs_noisex_prepared **out, struct fs_err *err)
{
    fs_noisex_prepared *x;
    uint64_t pick = 0;
    int rc;

    if (out != NULL) {
        *out = NULL;
    }
    if (s == NULL || out == NULL || (k > 0 && ids == NULL)) {
        return fs_err_set(err, FS_EINVAL, "noise exchange: NULL argument");
    }
    x = calloc(1, sizeof *x);
    if (x == NULL) {
        return fs_err_set(err, FS_ENOMEM, "noise exchange: out of memory");
    }
    x->round = round;
    rc = prepared_ids(s, ids, k, x, err);
    if (rc == 0) {
        rc = fs_rand_below((uint64_t)k, &pick, err);
    }
    if (rc == 0) {
        x->chosen = x->ids[pick];
        rc = s->ot != NULL ? nxot_selectors(s->ot, round, x->ids, k, x->chosen, x->sel, err)
                           : encrypt_selectors(s, x, err);
    }
    if (rc != 0) {
        fs_noisex_prepared_free(x);
        return rc;
    }
    *out = x;
    return 0;
}

int fs_noisex_server_begin_prepared(fs_noisex_server *s, fs_noisex_prepared *x, struct fs_err *err)
{
    if (s == NULL || x == NULL) {
        fs_noisex_prepared_free(x);
        return fs_err_set(err, FS_EINVAL, "noise exchange: NULL argument");
    }
    if (x->ct_size != s->ct_size) {
        fs_noisex_prepared_free(x);
        return fs_err_set(err, FS_EINVAL, "noise exchange: selectors of another key");
    }
    if (s->started && x->round <= s->round) {
        uint32_t r = x->round;
        fs_noisex_prepared_free(x);
        return fs_err_set(err, FS_ESTATE, "noise exchange: round %u after round %u", r, s->round);
    }
    round_reset(s);
    s->resp = calloc(x->k, sizeof *s->resp);
    if (s->resp == NULL) {
        fs_noisex_prepared_free(x);
        return fs_err_set(err, FS_ENOMEM, "noise exchange: out of memory");
    }
    s->ids = x->ids;
    s->sel = x->sel;
    s->k = x->k;
    s->chosen = x->chosen;
    s->round = x->round;
    x->ids = NULL;
    x->sel = NULL;
    fs_noisex_prepared_free(x);
    s->started = 1;
    s->open = 1;
    return 0;
}

int fs_noisex_server_begin(fs_noisex_server *s, uint32_t round, const uint32_t *ids, size_t k,
                           struct fs_err *err)
{
    fs_noisex_prepared *x = NULL;
    int rc;

    if (s == NULL || (k > 0 && ids == NULL)) {
        return fs_err_set(err, FS_EINVAL, "noise exchange: NULL argument");
    }
    if (s->started && round <= s->round) {
        return fs_err_set(err, FS_ESTATE, "noise exchange: round %u after round %u", round,
                          s->round);
    }
    rc = fs_noisex_server_prepare(s, round, ids, k, &x, err);
    return rc != 0 ? rc : fs_noisex_server_begin_prepared(s, x, err);
}

const uint8_t *fs_noisex_server_selectors(const fs_noisex_server *s, size_t *len)
{
    if (s == NULL || !s->open) {
        return NULL;
    }
    if (len != NULL) {
        *len = s->k * s->ct_size;
    }
    return s->sel;
}

/* Restored selectors' plaintexts m[0..k): the index of j, the one that is
 * 0, with every other one 2^(256 t) for its slot t (seed mode; *unshifted
 * 0) or 1 (elementwise, and seed-mode rounds begun before selectors
 * carried the slot: *unshifted 1); else -1. */
static long restored_index(const fs_noisex_server *s, mpz_t *m, int *unshifted)
{
    long jq = -1;
    int ones = 1;
    int slots = s->p.mode == FS_NOISEX_SEED;

    for (size_t q = 0; q < s->k; q++) {
        if (mpz_sgn(m[q]) == 0 && jq < 0) {
            jq = (long)q;
        } else if (mpz_cmp_ui(m[q], 1) != 0) {
            ones = 0;
        }
    }
    if (jq < 0) {
        return -1;
    }
    for (size_t q = 0; q < s->k && slots; q++) {
        size_t t = seed_slot(q, (size_t)jq, s->slots);
        slots = q == (size_t)jq || (mpz_scan1(m[q], 0) == NX_SEED_BITS * t &&
                                    mpz_sizeinbase(m[q], 2) == NX_SEED_BITS * t + 1);
    }
    *unshifted = !slots;
    return slots || ones ? jq : -1;
}

/* The chosen party of restored selectors (restored_index; else FS_EFORMAT). */
static int restored_choice(fs_noisex_server *s, struct fs_err *err)
{
    mpz_t c;
    mpz_t *m = calloc(s->k, sizeof *m);
    long jq = -1;
    int unshifted = 0;
    int rc = 0;

    if (m == NULL) {
        return fs_err_set(err, FS_ENOMEM, "noise exchange: out of memory");
    }
    mpz_init(c);
    for (size_t q = 0; q < s->k; q++) {
        mpz_init(m[q]);
    }
    for (size_t q = 0; q < s->k && rc == 0; q++) {
        rc = fs_paillier_ct_import(s->pk, c, s->sel + q * s->ct_size, s->ct_size, err);
        if (rc == 0) {
            rc = fs_paillier_decrypt(s->sk, m[q], c, err);
        }
        if (rc != 0) {
            rc = fs_err_set(err, FS_EFORMAT, "noise exchange: selector %zu does not decrypt", q);
        }
    }
    if (rc == 0) {
        jq = restored_index(s, m, &unshifted);
    }
    if (rc == 0 && jq < 0) {
        rc = fs_err_set(err, FS_EFORMAT,
                        "noise exchange: the selectors are not one 0 and the others' slots");
    }
    if (rc == 0) {
        s->chosen = s->ids[jq];
        s->unshifted = unshifted;
    }
    for (size_t q = 0; q < s->k; q++) {
        mpz_wipe_clear(m[q]);
    }
    free(m);
    mpz_clear(c);
    return rc;
}

int fs_noisex_server_restore(fs_noisex_server *s, uint32_t round, const uint32_t *ids, size_t k,
                             const uint8_t *sel, size_t len, struct fs_err *err)
{
    fs_noisex_prepared *x;
    int rc;

    if (s == NULL || sel == NULL) {
        return fs_err_set(err, FS_EINVAL, "noise exchange: NULL argument");
    }
    if (len != k * s->ct_size) {
        return fs_err_set(err, FS_EFORMAT, "noise exchange: %zu selector bytes for %zu parties",
                          len, k);
    }
    x = calloc(1, sizeof *x);
    if (x == NULL) {
        return fs_err_set(err, FS_ENOMEM, "noise exchange: out of memory");
    }
    x->round = round;
    rc = prepared_ids(s, ids, k, x, err);
    if (rc != 0) {
        fs_noisex_prepared_free(x);
        return rc;
    }
    memcpy(x->sel, sel, len);
    s->started = 0; /* the round may be the one just begun */
    rc = fs_noisex_server_begin_prepared(s, x, err);
    if (rc != 0) {
        return rc;
    }
    rc = s->ot != NULL ? nxot_chosen(s->ot, s->round, s->ids, s->k, s->sel, &s->chosen, err)
                       : restored_choice(s, err);
    if (rc != 0) {
        round_reset(s);
    }
    return rc;
}

int fs_noisex_server_selector(const fs_noisex_server *s, uint32_t id, uint8_t *buf, size_t len,
                              struct fs_err *err)
{
    long q;

    if (s == NULL || buf == NULL) {
        return fs_err_set(err, FS_EINVAL, "noise exchange: NULL argument");
    }
    if (!s->open) {
        return fs_err_set(err, FS_ESTATE, "noise exchange: no round open");
    }
    if (len != s->ct_size) {
        return fs_err_set(err, FS_EINVAL, "noise exchange: selector buffer of %zu bytes, need %zu",
                          len, s->ct_size);
    }
    q = find_id(s, id);
    if (q < 0) {
        return fs_err_set(err, FS_ENOTFOUND, "noise exchange: party %u is not in round %u", id,
                          s->round);
    }
    memcpy(buf, s->sel + (size_t)q * s->ct_size, s->ct_size);
    return 0;
}

/* Seed mode: what the round's decryptions read. */
static void dec_src(const fs_noisex_server *s, struct nxd_src *src)
{
    memset(src, 0, sizeof *src);
    src->sk = s->sk;
    src->pk = s->pk;
    src->resp = s->resp;
    src->ct_size = s->ct_size;
    src->slots = s->slots;
    src->preshift = !s->unshifted;
    /* modulo p^2 and p alone when the slots fit below p (every key of 1024
     * bits or more), else modulo both primes */
    src->mod_p = s->slots * NX_SEED_BITS <= fs_paillier_pk_bits(s->pk) / 2 - 1;
    src->threads = s->threads;
}

/* Seed mode: party index q answered; the groups of every party but j that
 * are complete decrypt in the background (when that fails to start, they
 * decrypt at the end). */
static void dec_answered(fs_noisex_server *s, size_t q)
{
    struct fs_err err = {0};
    struct nxd_src src;
    size_t *plan;
    size_t np = 0;

    if (s->p.mode != FS_NOISEX_SEED || !s->ahead) {
        return;
    }
    if (s->dec != NULL) {
        nxd_answered(s->dec, q);
        return;
    }
    plan = malloc(s->k * sizeof *plan);
    if (plan == NULL) {
        return;
    }
    for (size_t i = 0; i < s->k; i++) {
        if (s->ids[i] != s->chosen) {
            plan[np++] = i;
        }
    }
    dec_src(s, &src);
    if (nxd_new(&src, plan, np, s->k, &s->dec, &err) != 0) {
        s->dec = NULL;
    }
    free(plan);
}

size_t fs_noisex_server_ahead(const fs_noisex_server *s)
{
    return s != NULL ? nxd_ahead(s->dec) : 0;
}

int fs_noisex_server_add_response(fs_noisex_server *s, uint32_t id, const uint8_t *buf, size_t len,
                                  struct fs_err *err)
{
    size_t want;
    long q;
    mpz_t c;
    int rc = 0;

    if (s == NULL || buf == NULL) {
        return fs_err_set(err, FS_EINVAL, "noise exchange: NULL argument");
    }
    if (!s->open) {
        return fs_err_set(err, FS_ESTATE, "noise exchange: no round open");
    }
    q = find_id(s, id);
    if (q < 0) {
        return fs_err_set(err, FS_ENOTFOUND, "noise exchange: party %u is not in round %u", id,
                          s->round);
    }
    want = s->resp_size;
    if (len != want) {
        return fs_err_set(err, FS_EFORMAT,
                          "noise exchange: response of party %u is %zu bytes, expected %zu", id,
                          len, want);
    }
    if (s->resp[q] != NULL) {
        if (memcmp(s->resp[q], buf, want) != 0) {
            return fs_err_set(err, FS_ECONFLICT,
                              "noise exchange: party %u already responded differently", id);
        }
        return 0;
    }
    mpz_init(c);
    if (s->ot != NULL) {
        rc = nxot_check_response(s->ot, buf, err);
        if (rc != 0) {
            fs_err_prefix(err, "noise exchange: party %u: ", id);
        }
    }
    for (size_t g = 0; g < s->groups && rc == 0 && s->ot == NULL; g++) {
        rc = fs_paillier_ct_import(s->pk, c, buf + g * s->ct_size, s->ct_size, err);
        if (rc != 0) {
            fs_err_prefix(err, "noise exchange: party %u ciphertext %zu: ", id, g);
        }
    }
    mpz_clear(c);
    if (rc != 0) {
        return rc;
    }
    s->resp[q] = malloc(want);
    if (s->resp[q] == NULL) {
        return fs_err_set(err, FS_ENOMEM, "noise exchange: out of memory");
    }
    memcpy(s->resp[q], buf, want);
    dec_answered(s, (size_t)q);
    return 0;
}

const uint32_t *fs_noisex_server_ids(const fs_noisex_server *s, size_t *k)
{
    if (s == NULL || !s->open) {
        return NULL;
    }
    if (k != NULL) {
        *k = s->k;
    }
    return s->ids;
}

int fs_noisex_server_in_round(const fs_noisex_server *s, uint32_t id)
{
    return s != NULL && s->open && find_id(s, id) >= 0;
}

int fs_noisex_server_has_response(const fs_noisex_server *s, uint32_t id)
{
    long q;

    if (s == NULL || !s->open) {
        return 0;
    }
    q = find_id(s, id);
    return q >= 0 && s->resp[q] != NULL;
}

void fs_noisex_result_clear(struct fs_noisex_result *r)
{
    if (r == NULL) {
        return;
    }
    if (r->seeds != NULL) {
        OPENSSL_cleanse(r->seeds, r->removed * sizeof *r->seeds);
    }
    free(r->seeds);
    free(r->ids);
    free(r->noise_sum);
    memset(r, 0, sizeof *r);
}

/* Seed mode: the parties but j in groups of `slots`, slot t of a group
 * selected by 2^(256 t): the group's answers are multiplied (no
 * squarings; a member without an answer adds 0 to its slot) and decrypted
 * once (noisex_dec.c: the groups on several threads, those complete before
 * the end in the background). */
static int finish_seeds(const fs_noisex_server *s, struct fs_noisex_result *out, struct fs_err *err)
{
    struct nxd_src src;
    size_t *plan;
    size_t np = 0;
    int rc;

    _Static_assert(FS_NOISEX_SEED_LEN == NXD_SEED_LEN, "seed length");
    if (s->slots > NX_MAX_SLOTS) {
        return fs_err_set(err, FS_EINTERNAL, "noise exchange: %zu slots", s->slots);
    }
    plan = malloc(s->k * sizeof *plan);
    if (plan == NULL) {
        return fs_err_set(err, FS_ENOMEM, "noise exchange: out of memory");
    }
    for (size_t q = 0; q < s->k; q++) {
        if (s->ids[q] != s->chosen) {
            plan[np++] = q;
        }
    }
    dec_src(s, &src);
    rc = nxd_seeds(s->dec, &src, plan, np, s->round, out->seeds, &out->decryptions, &out->ahead,
                   err);
    free(plan);
    return rc;
}

/* Elementwise: per packed plaintext, the product of all responders' ciphertexts, decrypted once. */
static int finish_elementwise(const fs_noisex_server *s, const size_t *who, size_t nw,
                              struct fs_noisex_result *out, struct fs_err *err)
{
    mpz_t acc, c, m;
    int rc = 0;

    if (nw == 0) {
        return 0; /* noise_sum stays all zero */
    }
    mpz_init(acc);
    mpz_init(c);
    mpz_init(m);
    for (size_t g = 0; g < s->groups && rc == 0; g++) {
        size_t off = g * s->slots;
        size_t cnt = s->p.noise_len - off < s->slots ? s->p.noise_len - off : s->slots;
        mpz_set_ui(acc, 1);
        for (size_t q = 0; q < nw && rc == 0; q++) {
            rc = fs_paillier_ct_import(s->pk, c, s->resp[who[q]] + g * s->ct_size, s->ct_size, err);
            if (rc == 0) {
                mpz_mul(acc, acc, c);
                mpz_mod(acc, acc, s->n2);
            }
        }
        if (rc == 0) {
            rc = fs_paillier_decrypt(s->sk, m, acc, err);
            out->decryptions++;
        }
        if (rc == 0) {
            if (fs_paillier_unpack(&s->pp, s->pk, m, out->noise_sum + off, cnt, err) != 0) {
                rc = fs_err_set(err, FS_EFORMAT,
                                "noise exchange: packed group %zu of round %u does not decode "
                                "(a party broke the value bounds)",
                                g, s->round);
            }
        }
    }
    mpz_wipe_clear(m);
    mpz_clear(c);
    mpz_wipe_clear(acc);
    return rc;
}

int fs_noisex_server_finish(fs_noisex_server *s, struct fs_noisex_result *out, struct fs_err *err)
{
    int rc = fs_noisex_server_peek(s, out, err);

    if (rc == 0) {
        round_reset(s);
    }
    return rc;
}

void fs_noisex_server_end(fs_noisex_server *s)
{
    if (s != NULL) {
        round_reset(s);
    }
}

int fs_noisex_server_peek(const fs_noisex_server *s, struct fs_noisex_result *out,
                          struct fs_err *err)
{
    size_t *who = NULL;
    size_t nw = 0;
    int rc = 0;

    if (s == NULL || out == NULL) {
        return fs_err_set(err, FS_EINVAL, "noise exchange: NULL argument");
    }
    memset(out, 0, sizeof *out);
    if (!s->open) {
        return fs_err_set(err, FS_ESTATE, "noise exchange: no round open");
    }
    who = malloc(s->k * sizeof *who);
    if (who == NULL) {
        return fs_err_set(err, FS_ENOMEM, "noise exchange: out of memory");
    }
    for (size_t q = 0; q < s->k; q++) {
        if (s->resp[q] != NULL && s->ids[q] != s->chosen) {
            who[nw++] = q;
        }
    }
    out->round = s->round;
    out->chosen = s->chosen;
    out->removed = nw;
    out->ids = malloc((nw > 0 ? nw : 1) * sizeof *out->ids);
    if (s->p.mode != FS_NOISEX_ELEMENTWISE) {
        out->seeds = calloc(nw > 0 ? nw : 1, sizeof *out->seeds);
    } else {
        out->noise_len = s->p.noise_len;
        out->noise_sum = calloc(s->p.noise_len, sizeof *out->noise_sum);
    }
    if (out->ids == NULL || (out->seeds == NULL && out->noise_sum == NULL)) {
        rc = fs_err_set(err, FS_ENOMEM, "noise exchange: out of memory");
        goto out;
    }
    for (size_t q = 0; q < nw; q++) {
        out->ids[q] = s->ids[who[q]];
    }
    if (s->ot != NULL) {
        rc = nxot_seeds(s->ot, s->round, s->ids, s->sel, s->resp, who, nw, out->seeds, err);
        out->decryptions = (unsigned)nw;
    } else if (s->p.mode == FS_NOISEX_SEED) {
        rc = finish_seeds(s, out, err);
    } else {
        rc = finish_elementwise(s, who, nw, out, err);
    }
out:
    free(who);
    if (rc != 0) {
        fs_noisex_result_clear(out);
    }
    return rc;
}

void fs_noisex_server_free(fs_noisex_server *s)
{
    if (s == NULL) {
        return;
    }
    round_reset(s);
    nxot_free(s->ot);
    fs_paillier_djn_free(s->djn);
    fs_paillier_sk_free(s->sk);
    mpz_clear(s->n2);
    OPENSSL_cleanse(s, sizeof *s);
    free(s);
}

/* ---- client ------------------------------------------------------------- */

static int client_new(const struct fs_noisex_params *p, const uint8_t *pk, size_t pk_len,
                      const uint8_t *base_key, fs_noisex_client **out, struct fs_err *err);

int fs_noisex_client_new(const struct fs_noisex_params *p, const uint8_t *pk, size_t pk_len,
                         fs_noisex_client **out, struct fs_err *err)
{
    return client_new(p, pk, pk_len, NULL, out, err);
}

int fs_noisex_client_new_det(const struct fs_noisex_params *p, const uint8_t *pk, size_t pk_len,
                             const uint8_t base_key[32], fs_noisex_client **out, struct fs_err *err)
{
    if (base_key == NULL) {
        return fs_err_set(err, FS_EINVAL, "noise exchange: NULL argument");
    }
    return client_new(p, pk, pk_len, base_key, out, err);
}

static int client_new(const struct fs_noisex_params *p, const uint8_t *pk, size_t pk_len,
                      const uint8_t *base_key, fs_noisex_client **out, struct fs_err *err)
{
    fs_noisex_client *c = NULL;
    int rc;

    if (out == NULL || pk == NULL) {
        return fs_err_set(err, FS_EINVAL, "noise exchange: NULL argument");
    }
    *out = NULL;
    rc = fs_noisex_params_check(p, err);
    if (rc != 0) {
        return rc;
    }
    c = calloc(1, sizeof *c);
    if (c == NULL) {
        return fs_err_set(err, FS_ENOMEM, "noise exchange: out of memory");
    }
    mpz_init(c->n2);
    c->p = *p;
    if (p->mode == FS_NOISEX_OT) {
        /* base_key does not apply: r comes from the CSPRNG or the re-randomizer key */
        rc = nxot_new(0, NULL, 0, &c->ot, err);
        if (rc == 0) {
            rc = nxot_check_pk(c->ot, pk, pk_len, err);
        }
        c->ct_size = FS_ECOT_POINT_LEN;
        c->resp_size = FS_ECOT_RESP_LEN;
        c->groups = 1;
        c->slots = 1;
        goto out;
    }
    rc = fs_paillier_pk_import(&c->pk, pk, pk_len, err);
    if (rc == 0) {
        rc = layout(p, c->pk, &c->pp, &c->slots, &c->groups, err);
    }
    if (rc == 0) {
        /* A seed-mode party re-randomizes one ciphertext per round, a few
         * per job: a fixed-base comb (about L squarings and 114 products
         * to build, 37 squarings and 76 products per randomizer at L = 448)
         * costs less in all than a window table (w = 5: 2880 products to
         * build, 90 per randomizer); elementwise responses re-randomize
         * many. The exponent length, and so the security, is the same. */
        if (p->mode == FS_NOISEX_SEED) {
            rc = fs_paillier_djn_new_comb(&c->djn, c->pk, 0, base_key, err);
        } else {
            unsigned w = FS_PAILLIER_DJN_WINDOW;
            rc = base_key != NULL ? fs_paillier_djn_new_det(&c->djn, c->pk, 0, w, base_key, err)
                                  : fs_paillier_djn_new(&c->djn, c->pk, 0, w, err);
        }
    }
    if (rc == 0) {
        c->ct_size = fs_paillier_ct_size(c->pk);
        c->resp_size = c->groups * c->ct_size;
        mpz_mul(c->n2, fs_paillier_pk_n(c->pk), fs_paillier_pk_n(c->pk));
    }
out:
    if (rc != 0) {
        fs_noisex_client_free(c);
        return rc;
    }
    *out = c;
    return 0;
}

size_t fs_noisex_client_ct_size(const fs_noisex_client *c)
{
    return c->ct_size;
}

size_t fs_noisex_client_response_size(const fs_noisex_client *c)
{
    return c->resp_size;
}

/* out_ct = sel^w * R' with a secret exponent w (mpz_powm_sec; w = 0 gives a fresh Enc(0)). */
static int raise_rerand(const fs_noisex_client *c, mpz_t res, const mpz_t sel, const mpz_t w,
                        size_t g, uint8_t *dst, struct fs_err *err)
{
    uint8_t key[32];
    int rc;

    if (mpz_sgn(w) == 0) {
        mpz_set_ui(res, 1);
    } else {
        mpz_powm_sec(res, sel, w, c->n2);
    }
    if (c->has_rr) {
        /* one key per ciphertext of the response */
        rc = fs_derive_key(key, c->rr_key, "noisex/rerandomize", (uint32_t)g, 0, err);
        if (rc == 0) {
            rc = fs_paillier_rerandomize_det(c->pk, c->djn, res, res, key, err);
        }
        OPENSSL_cleanse(key, sizeof key);
    } else {
        rc = fs_paillier_rerandomize(c->pk, c->djn, res, res, err);
    }
    if (rc == 0) {
        rc = fs_paillier_ct_export(c->pk, res, dst, c->ct_size, err);
    }
    return rc;
}

static int check_respond(const fs_noisex_client *c, enum fs_noisex_mode mode, const uint8_t *sel,
                         size_t sel_len, const uint8_t *out, size_t out_len, struct fs_err *err)
{
    if (c == NULL || sel == NULL || out == NULL) {
        return fs_err_set(err, FS_EINVAL, "noise exchange: NULL argument");
    }
    if (c->p.mode != mode) {
        return fs_err_set(err, FS_ESTATE, "noise exchange: the job uses %s mode",
                          fs_noisex_mode_name(c->p.mode));
    }
    if (sel_len != c->ct_size) {
        return fs_err_set(err, FS_EFORMAT, "noise exchange: selector of %zu bytes, expected %zu",
                          sel_len, c->ct_size);
    }
    if (out_len != c->resp_size) {
        return fs_err_set(err, FS_EINVAL, "noise exchange: response buffer of %zu bytes, need %zu",
                          out_len, c->resp_size);
    }
    return 0;
}

int fs_noisex_client_respond_seed(const fs_noisex_client *c, const uint8_t *sel, size_t sel_len,
                                  const uint8_t seed[FS_NOISEX_SEED_LEN], uint8_t *out,
                                  size_t out_len, struct fs_err *err)
{
    mpz_t s, w, res;
    int rc = check_respond(c, c != NULL && c->ot != NULL ? FS_NOISEX_OT : FS_NOISEX_SEED, sel,
                           sel_len, out, out_len, err);

    if (rc != 0) {
        return rc;
    }
    if (seed == NULL) {
        return fs_err_set(err, FS_EINVAL, "noise exchange: seed is NULL");
    }
    if (c->ot != NULL) {
        return nxot_respond(c->ot, sel, c->has_rr ? c->rr_key : NULL, seed, out, err);
    }
    mpz_init(s);
    mpz_init2(w, NX_SEED_BITS + 64);
    mpz_init(res);
    rc = fs_paillier_ct_import(c->pk, s, sel, sel_len, err);
    if (rc == 0) {
        mpz_import(w, FS_NOISEX_SEED_LEN, 1, 1, 1, 0, seed);
        rc = raise_rerand(c, res, s, w, 0, out, err);
    }
    mpz_wipe_clear(w);
    mpz_wipe_clear(res);
    mpz_clear(s);
    return rc;
}

int fs_noisex_client_respond_noise(const fs_noisex_client *c, const uint8_t *sel, size_t sel_len,
                                   const int64_t *noise, size_t n, uint8_t *out, size_t out_len,
                                   struct fs_err *err)
{
    mpz_t s, w, res;
    int rc = check_respond(c, FS_NOISEX_ELEMENTWISE, sel, sel_len, out, out_len, err);

    if (rc != 0) {
        return rc;
    }
    if (noise == NULL || n != c->p.noise_len) {
        return fs_err_set(err, FS_EINVAL, "noise exchange: %zu noise values, expected %zu", n,
                          c->p.noise_len);
    }
    mpz_init(s);
    mpz_init(w);
    mpz_init(res);
    rc = fs_paillier_ct_import(c->pk, s, sel, sel_len, err);
    for (size_t g = 0; g < c->groups && rc == 0; g++) {
        size_t off = g * c->slots;
        size_t cnt = n - off < c->slots ? n - off : c->slots;
        rc = fs_paillier_pack(&c->pp, c->pk, noise + off, cnt, w, err);
        if (rc != 0) {
            fs_err_prefix(err, "noise exchange: values from %zu: ", off);
            break;
        }
        rc = raise_rerand(c, res, s, w, g, out + g * c->ct_size, err);
    }
    mpz_wipe_clear(w);
    mpz_wipe_clear(res);
    mpz_clear(s);
    return rc;
}

int fs_noisex_client_set_rerand_key(fs_noisex_client *c, const uint8_t key[32], struct fs_err *err)
{
    if (c == NULL) {
        return fs_err_set(err, FS_EINVAL, "noise exchange: NULL argument");
    }
    c->has_rr = key != NULL;
    if (key != NULL) {
        memcpy(c->rr_key, key, sizeof c->rr_key);
    } else {
        OPENSSL_cleanse(c->rr_key, sizeof c->rr_key);
    }
    return 0;
}

void fs_noisex_client_free(fs_noisex_client *c)
{
    if (c == NULL) {
        return;
    }
    OPENSSL_cleanse(c->rr_key, sizeof c->rr_key);
    nxot_free(c->ot);
    fs_paillier_djn_free(c->djn);
    fs_paillier_pk_free(c->pk);
    mpz_clear(c->n2);
    free(c);
}
