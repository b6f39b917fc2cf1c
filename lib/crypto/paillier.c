#include "paillier.h"

#include <limits.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paillier_int.h"
#include "prg.h"
#include "rand.h"

#if GMP_NAIL_BITS != 0
#error "paillier.c assumes GMP limbs without nail bits"
#endif

/* Largest number of random bytes drawn at once: a value below n. */
#define RAND_MAX_BYTES (FS_PAILLIER_MAX_BITS / 8)
/* Attempts before a loop that succeeds with overwhelming probability gives up. */
#define MAX_TRIES 1000

/* ---- helpers --------------------------------------------------------------- */

/* Overwrite the whole limb allocation of x. GMP offers no accessor for the
 * allocated size; _mp_alloc is the field documented in the GMP manual
 * ("Integer Internals"). mpz_limbs_modify with that size returns the existing
 * array without reallocating. */
static void secret_wipe(mpz_t x)
{
    mp_size_t alloc = x->_mp_alloc;

    if (alloc > 0) {
        mp_limb_t *limbs = mpz_limbs_modify(x, alloc);
        OPENSSL_cleanse(limbs, (size_t)alloc * sizeof *limbs);
        mpz_limbs_finish(x, 0);
    }
}

static void secret_clear(mpz_t x)
{
    secret_wipe(x);
    mpz_clear(x);
}

static size_t bits_of(const mpz_t x)
{
    return mpz_sgn(x) == 0 ? 0 : mpz_sizeinbase(x, 2);
}

/* Set on this thread only while fs_paillier_rerandomize_det runs: the
 * re-randomizer's bits come from its key stream instead of the CSPRNG. */
static _Thread_local fs_prg *tl_prg;

/* out = uniform integer in [0, 2^bits). */
static int rand_bits(mpz_t out, unsigned bits, struct fs_err *err)
{
    uint8_t buf[RAND_MAX_BYTES];
    size_t nb = ((size_t)bits + 7) / 8;
    int rc;

    if (bits == 0 || nb > sizeof buf) {
        return fs_err_set(err, FS_EINTERNAL, "paillier: %u random bits requested", bits);
    }
    rc = tl_prg != NULL ? fs_prg_bytes(tl_prg, buf, nb, err) : fs_rand_bytes(buf, nb, err);
    if (rc == 0) {
        mpz_import(out, nb, 1, 1, 1, 0, buf);
        mpz_fdiv_r_2exp(out, out, bits);
    }
    OPENSSL_cleanse(buf, nb);
    return rc;
}

/* out = uniform element of Z_n^* (rejection sampling; n >= 2^(bits-1) so
 * each draw is accepted with probability about 1/2 or better). */
static int rand_unit(mpz_t out, const fs_paillier_pk *pk, struct fs_err *err)
{
    mpz_t g;
    int rc = 0;

    mpz_init(g);
    for (int i = 0; i < MAX_TRIES; i++) {
        rc = rand_bits(out, pk->bits, err);
        if (rc != 0) {
            goto out;
        }
        if (mpz_sgn(out) > 0 && mpz_cmp(out, pk->n) < 0) {
            mpz_gcd(g, out, pk->n);
            if (mpz_cmp_ui(g, 1) == 0) {
                goto out;
            }
        }
    }
    rc = fs_err_set(err, FS_ECRYPTO, "paillier: could not sample a unit mod n");
out:
    secret_clear(g);
    return rc;
}

static int ct_in_range(const fs_paillier_pk *pk, const mpz_t c)
{
    return mpz_sgn(c) > 0 && mpz_cmp(c, pk->n2) < 0;
}

static void pk_init(struct fs_paillier_pk *pk)
{
    mpz_init(pk->n);
    mpz_init(pk->n2);
    mpz_init(pk->half);
    pk->bits = 0;
    pk->nbytes = 0;
}

/* Derive n^2, (n-1)/2 and the sizes from pk->n. */
static void pk_finish(struct fs_paillier_pk *pk)
{
    mpz_mul(pk->n2, pk->n, pk->n);
    mpz_sub_ui(pk->half, pk->n, 1);
    mpz_fdiv_q_2exp(pk->half, pk->half, 1);
    pk->bits = (unsigned)bits_of(pk->n);
    pk->nbytes = ((size_t)pk->bits + 7) / 8;
}

static void pk_clear(struct fs_paillier_pk *pk)
{
    mpz_clear(pk->n);
    mpz_clear(pk->n2);
    mpz_clear(pk->half);
}

/* ---- keys ------------------------------------------------------------------ */

/* p = a random prime of exactly k bits with the top two bits set. */
static int gen_prime(mpz_t p, unsigned k, struct fs_err *err)
{
    for (int i = 0; i < MAX_TRIES; i++) {
        int rc = rand_bits(p, k, err);
        if (rc != 0) {
            return rc;
        }
        mpz_setbit(p, k - 1);
        mpz_setbit(p, k - 2);
        mpz_setbit(p, 0);
        mpz_nextprime(p, p);
        if (bits_of(p) != k) {
            continue; /* ran past 2^k: draw again */
        }
        if (mpz_probab_prime_p(p, 40) != 0) {
            return 0;
        }
    }
    return fs_err_set(err, FS_ECRYPTO, "paillier: prime generation failed");
}

/* h = L_p(g^(p-1) mod p^2)^-1 mod p with g = n + 1 (t is scratch). */
static int crt_h(mpz_t h, const mpz_t n, const mpz_t p, const mpz_t p2, const mpz_t pm1, mpz_t t)
{
    mpz_add_ui(t, n, 1);
    mpz_powm_sec(t, t, pm1, p2);
    mpz_sub_ui(t, t, 1);
    mpz_divexact(t, t, p);
    return mpz_invert(h, t, p) != 0 ? 0 : -1;
}

static void sk_init(fs_paillier_sk *sk)
{
    pk_init(&sk->pub);
    mpz_init(sk->p);
    mpz_init(sk->q);
    mpz_init(sk->p2);
    mpz_init(sk->q2);
    mpz_init(sk->pm1);
    mpz_init(sk->qm1);
    mpz_init(sk->hp);
    mpz_init(sk->hq);
    mpz_init(sk->qinv);
    mpz_init(sk->lambda);
    mpz_init(sk->mu);
}

/* Everything derived from p and q. @return 0 or -1 (degenerate key). */
static int sk_derive(fs_paillier_sk *sk, mpz_t t)
{
    mpz_mul(sk->pub.n, sk->p, sk->q);
    pk_finish(&sk->pub);
    mpz_mul(sk->p2, sk->p, sk->p);
    mpz_mul(sk->q2, sk->q, sk->q);
    mpz_sub_ui(sk->pm1, sk->p, 1);
    mpz_sub_ui(sk->qm1, sk->q, 1);
    /* gcd(n, (p-1)(q-1)) = 1 */
    mpz_mul(t, sk->pm1, sk->qm1);
    mpz_gcd(t, t, sk->pub.n);
    if (mpz_cmp_ui(t, 1) != 0) {
        return -1;
    }
    if (crt_h(sk->hp, sk->pub.n, sk->p, sk->p2, sk->pm1, t) != 0 ||
        crt_h(sk->hq, sk->pub.n, sk->q, sk->q2, sk->qm1, t) != 0 ||
        mpz_invert(sk->qinv, sk->q, sk->p) == 0) {
        return -1;
    }
    mpz_lcm(sk->lambda, sk->pm1, sk->qm1);
    mpz_add_ui(t, sk->pub.n, 1);
    mpz_powm_sec(t, t, sk->lambda, sk->pub.n2);
    mpz_sub_ui(t, t, 1);
    mpz_divexact(t, t, sk->pub.n);
    return mpz_invert(sk->mu, t, sk->pub.n) != 0 ? 0 : -1;
}

int fs_paillier_keygen(fs_paillier_sk **out, unsigned bits, struct fs_err *err)
{
    fs_paillier_sk *sk = NULL;
    mpz_t t;
    int rc = 0;
    int i;

    *out = NULL;
    if (bits % 2 != 0 || bits < FS_PAILLIER_MIN_BITS || bits > FS_PAILLIER_MAX_BITS) {
        return fs_err_set(err, FS_EINVAL, "paillier: key size %u bits (even, %u..%u)", bits,
                          FS_PAILLIER_MIN_BITS, FS_PAILLIER_MAX_BITS);
    }
    /* a process that makes a private key wipes GMP's heap blocks from now on */
    fs_paillier_gmp_wipe_on_free();
    sk = calloc(1, sizeof *sk);
    if (sk == NULL) {
        return fs_err_set(err, FS_ENOMEM, "paillier: out of memory");
    }
    sk_init(sk);
    mpz_init(t);
    for (i = 0; i < MAX_TRIES; i++) {
        rc = gen_prime(sk->p, bits / 2, err);
        if (rc == 0) {
            rc = gen_prime(sk->q, bits / 2, err);
        }
        if (rc != 0) {
            goto out;
        }
        if (mpz_cmp(sk->p, sk->q) != 0 && sk_derive(sk, t) == 0 && sk->pub.bits == bits) {
            break;
        }
    }
    if (i == MAX_TRIES) {
        rc = fs_err_set(err, FS_ECRYPTO, "paillier: key generation failed");
        goto out;
    }
    *out = sk;
    sk = NULL;
out:
    secret_clear(t);
    fs_paillier_sk_free(sk);
    return rc;
}

/* Bytes of one exported prime of a bits-bit key. */
static size_t prime_bytes(unsigned bits)
{
    return ((size_t)bits / 2 + 7) / 8;
}

size_t fs_paillier_sk_size(const fs_paillier_sk *sk)
{
    return 2 + 2 * prime_bytes(sk->pub.bits);
}

/* x big-endian, zero-padded to exactly len bytes (x < 2^(8 len)). */
static void export_fixed(uint8_t *buf, size_t len, const mpz_t x)
{
    size_t nb = (mpz_sizeinbase(x, 2) + 7) / 8;
    size_t written = 0;

    memset(buf, 0, len);
    mpz_export(buf + (len - nb), &written, 1, 1, 1, 0, x);
}

int fs_paillier_sk_export(const fs_paillier_sk *sk, uint8_t *buf, size_t len, struct fs_err *err)
{
    size_t pb = prime_bytes(sk->pub.bits);

    if (buf == NULL || len != fs_paillier_sk_size(sk)) {
        return fs_err_set(err, FS_EINVAL, "paillier: private key buffer is %zu bytes, need %zu",
                          len, fs_paillier_sk_size(sk));
    }
    buf[0] = (uint8_t)(sk->pub.bits >> 8);
    buf[1] = (uint8_t)sk->pub.bits;
    export_fixed(buf + 2, pb, sk->p);
    export_fixed(buf + 2 + pb, pb, sk->q);
    return 0;
}

int fs_paillier_sk_import(fs_paillier_sk **out, const uint8_t *buf, size_t len, struct fs_err *err)
{
    fs_paillier_sk *sk = NULL;
    unsigned bits;
    size_t pb;
    mpz_t t;
    int rc = 0;

    *out = NULL;
    if (buf == NULL || len < 2) {
        return fs_err_set(err, FS_EFORMAT, "paillier: private key of %zu bytes", len);
    }
    bits = (unsigned)buf[0] << 8 | buf[1];
    if (bits % 2 != 0 || bits < FS_PAILLIER_MIN_BITS || bits > FS_PAILLIER_MAX_BITS) {
        return fs_err_set(err, FS_EFORMAT, "paillier: private key of %u bits", bits);
    }
    pb = prime_bytes(bits);
    if (len != 2 + 2 * pb) {
        return fs_err_set(err, FS_EFORMAT, "paillier: private key of %zu bytes, expected %zu", len,
                          2 + 2 * pb);
    }
    fs_paillier_gmp_wipe_on_free();
    sk = calloc(1, sizeof *sk);
    if (sk == NULL) {
        return fs_err_set(err, FS_ENOMEM, "paillier: out of memory");
    }
    sk_init(sk);
    mpz_init(t);
    mpz_import(sk->p, pb, 1, 1, 1, 0, buf + 2);
    mpz_import(sk->q, pb, 1, 1, 1, 0, buf + 2 + pb);
    if (bits_of(sk->p) != bits / 2 || bits_of(sk->q) != bits / 2 || mpz_cmp(sk->p, sk->q) == 0 ||
        mpz_probab_prime_p(sk->p, 10) == 0 || mpz_probab_prime_p(sk->q, 10) == 0 ||
        sk_derive(sk, t) != 0 || sk->pub.bits != bits) {
        rc = fs_err_set(err, FS_EFORMAT, "paillier: not a valid private key");
        goto out;
    }
    *out = sk;
    sk = NULL;
out:
    secret_clear(t);
    fs_paillier_sk_free(sk);
    return rc;
}

const fs_paillier_pk *fs_paillier_sk_pub(const fs_paillier_sk *sk)
{
    return &sk->pub;
}

void fs_paillier_sk_free(fs_paillier_sk *sk)
{
    if (sk == NULL) {
        return;
    }
    secret_clear(sk->p);
    secret_clear(sk->q);
    secret_clear(sk->p2);
    secret_clear(sk->q2);
    secret_clear(sk->pm1);
    secret_clear(sk->qm1);
    secret_clear(sk->hp);
    secret_clear(sk->hq);
    secret_clear(sk->qinv);
    secret_clear(sk->lambda);
    secret_clear(sk->mu);
    pk_clear(&sk->pub);
    OPENSSL_cleanse(sk, sizeof *sk);
    free(sk);
}

unsigned fs_paillier_pk_bits(const fs_paillier_pk *pk)
{
    return pk->bits;
}

mpz_srcptr fs_paillier_pk_n(const fs_paillier_pk *pk)
{
    return pk->n;
}

int fs_paillier_pk_equal(const fs_paillier_pk *a, const fs_paillier_pk *b)
{
    return mpz_cmp(a->n, b->n) == 0;
}

size_t fs_paillier_pk_size(const fs_paillier_pk *pk)
{
    return pk->nbytes;
}

int fs_paillier_pk_export(const fs_paillier_pk *pk, uint8_t *buf, size_t len, struct fs_err *err)
{
    size_t written = 0;

    if (len != pk->nbytes) {
        return fs_err_set(err, FS_EINVAL, "paillier: public key buffer is %zu bytes, need %zu", len,
                          pk->nbytes);
    }
    mpz_export(buf, &written, 1, 1, 1, 0, pk->n);
    if (written != len) {
        return fs_err_set(err, FS_EINTERNAL, "paillier: exported %zu of %zu key bytes", written,
                          len);
    }
    return 0;
}

static int has_small_factor(const mpz_t n)
{
    for (unsigned long d = 3; d < 1000; d += 2) {
        if (mpz_divisible_ui_p(n, d) != 0) {
            return 1;
        }
    }
    return 0;
}

int fs_paillier_pk_import(fs_paillier_pk **out, const uint8_t *buf, size_t len, struct fs_err *err)
{
    fs_paillier_pk *pk = NULL;
    int rc = 0;

    *out = NULL;
    if (len < FS_PAILLIER_MIN_BITS / 8 || len > FS_PAILLIER_MAX_BITS / 8) {
        return fs_err_set(err, FS_ERANGE, "paillier: public key of %zu bytes (%u..%u)", len,
                          FS_PAILLIER_MIN_BITS / 8, FS_PAILLIER_MAX_BITS / 8);
    }
    if (buf[0] == 0) {
        return fs_err_set(err, FS_EFORMAT, "paillier: public key has a leading zero byte");
    }
    pk = calloc(1, sizeof *pk);
    if (pk == NULL) {
        return fs_err_set(err, FS_ENOMEM, "paillier: out of memory");
    }
    pk_init(pk);
    mpz_import(pk->n, len, 1, 1, 1, 0, buf);
    pk_finish(pk);
    if (pk->bits < FS_PAILLIER_MIN_BITS) {
        rc = fs_err_set(err, FS_ERANGE, "paillier: public key of %u bits (min %u)", pk->bits,
                        FS_PAILLIER_MIN_BITS);
        goto out;
    }
    if (mpz_even_p(pk->n) || mpz_perfect_square_p(pk->n) || has_small_factor(pk->n)) {
        rc = fs_err_set(err, FS_EFORMAT, "paillier: public key n is not an RSA modulus");
        goto out;
    }
    *out = pk;
    pk = NULL;
out:
    fs_paillier_pk_free(pk);
    return rc;
}

int fs_paillier_pk_dup(fs_paillier_pk **out, const fs_paillier_pk *pk, struct fs_err *err)
{
    fs_paillier_pk *c = calloc(1, sizeof *c);

    *out = NULL;
    if (c == NULL) {
        return fs_err_set(err, FS_ENOMEM, "paillier: out of memory");
    }
    pk_init(c);
    mpz_set(c->n, pk->n);
    pk_finish(c);
    *out = c;
    return 0;
}

void fs_paillier_pk_free(fs_paillier_pk *pk)
{
    if (pk == NULL) {
        return;
    }
    pk_clear(pk);
    free(pk);
}

/* ---- ciphertext serialization ------------------------------------------------ */

size_t fs_paillier_ct_size(const fs_paillier_pk *pk)
{
    return 2 * pk->nbytes;
}

int fs_paillier_ct_export(const fs_paillier_pk *pk, const mpz_t c, uint8_t *buf, size_t len,
                          struct fs_err *err)
{
    size_t need = 2 * pk->nbytes;
    size_t nb;
    size_t written = 0;

    if (len != need) {
        return fs_err_set(err, FS_EINVAL, "paillier: ciphertext buffer is %zu bytes, need %zu", len,
                          need);
    }
    if (!ct_in_range(pk, c)) {
        return fs_err_set(err, FS_EINVAL, "paillier: ciphertext out of range");
    }
    nb = (bits_of(c) + 7) / 8;
    memset(buf, 0, len - nb);
    mpz_export(buf + (len - nb), &written, 1, 1, 1, 0, c);
    if (written != nb) {
        return fs_err_set(err, FS_EINTERNAL, "paillier: exported %zu of %zu bytes", written, nb);
    }
    return 0;
}

int fs_paillier_ct_import(const fs_paillier_pk *pk, mpz_t c, const uint8_t *buf, size_t len,
                          struct fs_err *err)
{
    size_t need = 2 * pk->nbytes;
    mpz_t g;
    int ok;

    if (len != need) {
        return fs_err_set(err, FS_EFORMAT, "paillier: ciphertext of %zu bytes, expected %zu", len,
                          need);
    }
    mpz_import(c, len, 1, 1, 1, 0, buf);
    if (!ct_in_range(pk, c)) {
        return fs_err_set(err, FS_EFORMAT, "paillier: ciphertext out of range");
    }
    mpz_init(g);
    mpz_gcd(g, c, pk->n);
    ok = mpz_cmp_ui(g, 1) == 0;
    mpz_clear(g);
    if (!ok) {
        return fs_err_set(err, FS_EFORMAT, "paillier: ciphertext not invertible");
    }
    return 0;
}

/* ---- DJN randomizers --------------------------------------------------------- */

/* Copy x (0 <= x < n^2) into a zero-padded entry of `limbs` limbs. */
static void store_entry(mp_limb_t *dst, const mpz_t x, mp_size_t limbs)
{
    size_t sz = mpz_size(x);

    memcpy(dst, mpz_limbs_read(x), sz * sizeof *dst);
    memset(dst + sz, 0, ((size_t)limbs - sz) * sizeof *dst);
}

static int djn_build_table(fs_paillier_djn *d, struct fs_err *err)
{
    const mpz_srcptr n2 = d->pk->n2;
    size_t entries = (size_t)1 << d->window;
    mpz_t base;
    mpz_t cur;

    d->limbs = (mp_size_t)mpz_size(n2);
    d->windows = (d->exp_bits + d->window - 1) / d->window;
    d->table_limbs = (size_t)d->windows * entries * (size_t)d->limbs;
    d->table = malloc(d->table_limbs * sizeof *d->table);
    if (d->table == NULL) {
        return fs_err_set(err, FS_ENOMEM, "paillier: DJN table of %zu bytes",
                          d->table_limbs * sizeof *d->table);
    }
    mpz_init_set(base, d->hs);
    mpz_init(cur);
    for (unsigned i = 0; i < d->windows; i++) {
        mp_limb_t *row = d->table + (size_t)i * entries * (size_t)d->limbs;
        /* row[j] = base^j, base = hs^(2^(w i)) */
        mpz_set_ui(cur, 1);
        for (size_t j = 0; j < entries; j++) {
            store_entry(row + j * (size_t)d->limbs, cur, d->limbs);
            mpz_mul(cur, cur, base);
            mpz_mod(cur, cur, n2);
        }
        mpz_set(base, cur); /* base^(2^w) */
    }
    mpz_clear(base);
    mpz_clear(cur);
    return 0;
}

/* hs = (-y^2 mod n)^n mod n^2 for d (y drawn by the caller): modulo p^2 and
 * q^2 when d has the private key's CRT state, else modulo n^2. */
static int djn_base(fs_paillier_djn *d, mpz_t y, struct fs_err *err)
{
    const fs_paillier_pk *pk = d->pk;

    mpz_mul(y, y, y);
    mpz_mod(y, y, pk->n);
    mpz_sub(y, pk->n, y);
    if (d->crt != NULL) {
        return fs_paillier_crt_nth_power(d->crt, d->hs, y, err);
    }
    mpz_powm(d->hs, y, pk->n, pk->n2);
    return 0;
}

/* fs_paillier_djn_new, with the private key's CRT arithmetic when sk != NULL,
 * with a comb instead of the window table when comb != 0. */
static int djn_make(fs_paillier_djn **out, const fs_paillier_pk *pk, const fs_paillier_sk *sk,
                    unsigned exp_bits, unsigned window_bits, int comb, struct fs_err *err)
{
    fs_paillier_djn *d = NULL;
    mpz_t y;
    int rc = 0;

    *out = NULL;
    if (exp_bits == 0) {
        exp_bits =
            FS_PAILLIER_DJN_EXP_BITS < pk->bits / 2 ? FS_PAILLIER_DJN_EXP_BITS : pk->bits / 2;
    }
    if (exp_bits < 64 || exp_bits > pk->bits || window_bits > FS_PAILLIER_DJN_MAX_WINDOW) {
        return fs_err_set(err, FS_EINVAL, "paillier: DJN exponent %u bits (64..%u), window %u",
                          exp_bits, pk->bits, window_bits);
    }
    d = calloc(1, sizeof *d);
    if (d == NULL) {
        return fs_err_set(err, FS_ENOMEM, "paillier: out of memory");
    }
    d->pk = pk;
    d->exp_bits = exp_bits;
    d->window = window_bits;
    mpz_init(d->hs);
    mpz_init(y);
    if (sk != NULL && window_bits > 0 && fs_paillier_crt_new(&d->crt, sk, NULL) != 0) {
        d->crt = NULL; /* unusual prime sizes: arithmetic modulo n^2 */
    }
    rc = rand_unit(y, pk, err);
    if (rc == 0) {
        rc = djn_base(d, y, err);
    }
    if (rc == 0 && comb) {
        rc = fs_paillier_comb_build(&d->comb, pk->n2, d->hs, exp_bits, err);
    } else if (rc == 0 && window_bits > 0) {
        rc = d->crt != NULL ? fs_paillier_crt_build(d->crt, d->hs, exp_bits, window_bits, err)
                            : djn_build_table(d, err);
    }
    if (rc != 0) {
        goto out;
    }
    *out = d;
    d = NULL;
out:
    secret_clear(y);
    fs_paillier_djn_free(d);
    return rc;
}

int fs_paillier_djn_new(fs_paillier_djn **out, const fs_paillier_pk *pk, unsigned exp_bits,
                        unsigned window_bits, struct fs_err *err)
{
    return djn_make(out, pk, NULL, exp_bits, window_bits, 0, err);
}

/* out = hs^a mod n^2 for 0 <= a < 2^L (a may be secret). */
static int djn_pow(const fs_paillier_djn *d, mpz_t out, const mpz_t a, struct fs_err *err)
{
    const mp_size_t limbs = d->limbs;
    const size_t entries = (size_t)1 << d->window;
    const mp_limb_t *al = mpz_limbs_read(a);
    const size_t na = mpz_size(a);
    mp_limb_t *sel = NULL;
    mpz_t prod;

    if (d->crt != NULL) {
        return fs_paillier_crt_pow(d->crt, out, a, err);
    }
    if (d->comb != NULL) {
        return fs_paillier_comb_pow(d->comb, out, a, err);
    }
    if (d->table == NULL) {
        if (mpz_sgn(a) == 0) {
            mpz_set_ui(out, 1);
        } else {
            mpz_powm_sec(out, d->hs, a, d->pk->n2);
        }
        return 0;
    }
    sel = malloc((size_t)limbs * sizeof *sel);
    if (sel == NULL) {
        return fs_err_set(err, FS_ENOMEM, "paillier: out of memory");
    }
    mpz_init(prod);
    for (unsigned i = 0; i < d->windows; i++) {
        unsigned digit = fs_paillier_digit(al, na, (size_t)i * d->window, d->window);
        mpz_t ro;
        mpz_srcptr e;

        /* reads every entry of the row: the digit does not show in the access pattern */
        mpn_sec_tabselect(sel, d->table + (size_t)i * entries * (size_t)limbs, limbs,
                          (mp_size_t)entries, (mp_size_t)digit);
        e = mpz_roinit_n(ro, sel, limbs);
        if (i == 0) {
            mpz_set(prod, e);
        } else {
            mpz_mul(prod, prod, e);
            mpz_mod(prod, prod, d->pk->n2);
        }
    }
    mpz_set(out, prod);
    secret_clear(prod);
    OPENSSL_cleanse(sel, (size_t)limbs * sizeof *sel);
    free(sel);
    return 0;
}

int fs_paillier_djn_rn(const fs_paillier_djn *djn, mpz_t rn, struct fs_err *err)
{
    mpz_t a;
    int rc;

    mpz_init(a);
    do {
        rc = rand_bits(a, djn->exp_bits, err);
    } while (rc == 0 && mpz_sgn(a) == 0);
    if (rc == 0) {
        rc = djn_pow(djn, rn, a, err);
    }
    secret_clear(a);
    return rc;
}

int fs_paillier_djn_pow(const fs_paillier_djn *djn, mpz_t out, const mpz_t a, struct fs_err *err)
{
    if (mpz_sgn(a) < 0 || bits_of(a) > djn->exp_bits) {
        return fs_err_set(err, FS_EINVAL, "paillier: DJN exponent outside [0, 2^%u)",
                          djn->exp_bits);
    }
    return djn_pow(djn, out, a, err);
}

mpz_srcptr fs_paillier_djn_base(const fs_paillier_djn *djn)
{
    return djn->hs;
}

size_t fs_paillier_djn_table_bytes(const fs_paillier_djn *djn)
{
    if (djn->crt != NULL) {
        return fs_paillier_crt_table_bytes(djn->crt);
    }
    if (djn->comb != NULL) {
        return fs_paillier_comb_table_bytes(djn->comb);
    }
    return djn->table_limbs * sizeof(mp_limb_t);
}

void fs_paillier_djn_free(fs_paillier_djn *djn)
{
    if (djn == NULL) {
        return;
    }
    /* hs and the table are public values (computable from n by anyone who
     * knew y); only y, already wiped, was secret. */
    mpz_clear(djn->hs);
    free(djn->table);
    fs_paillier_crt_free(djn->crt); /* secret: reduced modulo p^2 and q^2 */
    fs_paillier_comb_free(djn->comb);
    free(djn);
}

/* ---- encryption, homomorphic operations, decryption ---------------------------- */

/* rn = fresh r^n (textbook) or hs^a (DJN). */
static int fresh_rn(const fs_paillier_pk *pk, const fs_paillier_djn *djn, mpz_t rn,
                    struct fs_err *err)
{
    mpz_t r;
    int rc;

    if (djn != NULL) {
        if (djn->pk != pk && mpz_cmp(djn->pk->n, pk->n) != 0) {
            return fs_err_set(err, FS_EINVAL, "paillier: DJN table belongs to another key");
        }
        return fs_paillier_djn_rn(djn, rn, err);
    }
    mpz_init(r);
    rc = rand_unit(r, pk, err);
    if (rc == 0) {
        mpz_powm(rn, r, pk->n, pk->n2);
    }
    secret_clear(r);
    return rc;
}

int fs_paillier_encrypt(const fs_paillier_pk *pk, const fs_paillier_djn *djn, mpz_t c,
                        const mpz_t m, struct fs_err *err)
{
    mpz_t rn;
    mpz_t t;
    int rc;

    if (mpz_sgn(m) < 0 || mpz_cmp(m, pk->n) >= 0) {
        return fs_err_set(err, FS_ERANGE, "paillier: plaintext outside [0, n)");
    }
    mpz_init(rn);
    mpz_init(t);
    rc = fresh_rn(pk, djn, rn, err);
    if (rc == 0) {
        /* (1 + n)^m = 1 + m n mod n^2, and 1 + m n < n^2 for m < n */
        mpz_mul(t, m, pk->n);
        mpz_add_ui(t, t, 1);
        mpz_mul(t, t, rn);
        mpz_mod(c, t, pk->n2);
    }
    secret_clear(rn);
    secret_clear(t);
    return rc;
}

int fs_paillier_rerandomize(const fs_paillier_pk *pk, const fs_paillier_djn *djn, mpz_t out,
                            const mpz_t c, struct fs_err *err)
{
    mpz_t rn;
    int rc;

    if (!ct_in_range(pk, c)) {
        return fs_err_set(err, FS_EINVAL, "paillier: ciphertext out of range");
    }
    mpz_init(rn);
    rc = fresh_rn(pk, djn, rn, err);
    if (rc == 0) {
        mpz_mul(out, c, rn);
        mpz_mod(out, out, pk->n2);
    }
    secret_clear(rn);
    return rc;
}

/* The _det variants: this thread's randomness (rand_bits) comes from
 * AES-256-CTR under key until det_leave. */
static int det_enter(const uint8_t key[32], const char *what, fs_prg **prg, struct fs_err *err)
{
    int rc;

    if (key == NULL) {
        return fs_err_set(err, FS_EINVAL, "paillier: NULL %s", what);
    }
    rc = fs_prg_new(prg, key, NULL, err);
    if (rc == 0) {
        tl_prg = *prg;
    }
    return rc;
}

static void det_leave(fs_prg *prg)
{
    tl_prg = NULL;
    fs_prg_free(prg);
}

int fs_paillier_djn_new_det(fs_paillier_djn **out, const fs_paillier_pk *pk, unsigned exp_bits,
                            unsigned window_bits, const uint8_t key[32], struct fs_err *err)
{
    fs_prg *prg = NULL;
    int rc = det_enter(key, "DJN key", &prg, err);

    if (rc == 0) {
        rc = fs_paillier_djn_new(out, pk, exp_bits, window_bits, err);
        det_leave(prg);
    }
    return rc;
}

int fs_paillier_djn_new_crt(fs_paillier_djn **out, const fs_paillier_sk *sk, unsigned exp_bits,
                            unsigned window_bits, const uint8_t *key, struct fs_err *err)
{
    fs_prg *prg = NULL;
    int rc;

    if (key == NULL) {
        return djn_make(out, &sk->pub, sk, exp_bits, window_bits, 0, err);
    }
    rc = det_enter(key, "DJN key", &prg, err);
    if (rc == 0) {
        rc = djn_make(out, &sk->pub, sk, exp_bits, window_bits, 0, err);
        det_leave(prg);
    }
    return rc;
}

int fs_paillier_djn_new_comb(fs_paillier_djn **out, const fs_paillier_pk *pk, unsigned exp_bits,
                             const uint8_t *key, struct fs_err *err)
{
    fs_prg *prg = NULL;
    int rc;

    if (key == NULL) {
        return djn_make(out, pk, NULL, exp_bits, 0, 1, err);
    }
    rc = det_enter(key, "DJN key", &prg, err);
    if (rc == 0) {
        rc = djn_make(out, pk, NULL, exp_bits, 0, 1, err);
        det_leave(prg);
    }
    return rc;
}

int fs_paillier_rerandomize_det(const fs_paillier_pk *pk, const fs_paillier_djn *djn, mpz_t out,
                                const mpz_t c, const uint8_t key[32], struct fs_err *err)
{
    fs_prg *prg = NULL;
    int rc = det_enter(key, "re-randomizer key", &prg, err);

    if (rc == 0) {
        rc = fs_paillier_rerandomize(pk, djn, out, c, err);
        det_leave(prg);
    }
    return rc;
}

int fs_paillier_add(const fs_paillier_pk *pk, mpz_t out, const mpz_t a, const mpz_t b,
                    struct fs_err *err)
{
    if (!ct_in_range(pk, a) || !ct_in_range(pk, b)) {
        return fs_err_set(err, FS_EINVAL, "paillier: ciphertext out of range");
    }
    mpz_mul(out, a, b);
    mpz_mod(out, out, pk->n2);
    return 0;
}

int fs_paillier_mul_scalar(const fs_paillier_pk *pk, mpz_t out, const mpz_t c, const mpz_t k,
                           struct fs_err *err)
{
    mpz_t e;
    mpz_t base;
    int rc = 0;

    if (!ct_in_range(pk, c)) {
        return fs_err_set(err, FS_EINVAL, "paillier: ciphertext out of range");
    }
    mpz_init(e);
    mpz_init(base);
    mpz_abs(e, k);
    if (mpz_cmp(e, pk->n) >= 0) {
        /* c^(k mod n) decrypts to k m mod n as well */
        mpz_fdiv_r(e, k, pk->n);
        mpz_set(base, c);
    } else if (mpz_sgn(k) < 0) {
        if (mpz_invert(base, c, pk->n2) == 0) {
            rc = fs_err_set(err, FS_EINVAL, "paillier: ciphertext not invertible");
            goto out;
        }
    } else {
        mpz_set(base, c);
    }
    mpz_powm(out, base, e, pk->n2);
out:
    mpz_clear(e);
    mpz_clear(base);
    return rc;
}

/* mx = L_x(c^(x-1) mod x^2) h_x mod x for the prime x (t is scratch).
 * @return 0, or -1 when x divides c. */
static int crt_half(mpz_t mx, const mpz_t c, const mpz_t x, const mpz_t x2, const mpz_t xm1,
                    const mpz_t hx, mpz_t t)
{
    mpz_mod(t, c, x2);
    if (mpz_divisible_p(t, x) != 0) {
        return -1;
    }
    mpz_powm_sec(t, t, xm1, x2);
    mpz_sub_ui(t, t, 1);
    mpz_divexact(t, t, x);
    mpz_mul(t, t, hx);
    mpz_mod(mx, t, x);
    return 0;
}

int fs_paillier_decrypt(const fs_paillier_sk *sk, mpz_t m, const mpz_t c, struct fs_err *err)
{
    mpz_t mp;
    mpz_t mq;
    mpz_t t;
    int rc = 0;

    if (!ct_in_range(&sk->pub, c)) {
        return fs_err_set(err, FS_EINVAL, "paillier: ciphertext out of range");
    }
    mpz_init(mp);
    mpz_init(mq);
    mpz_init(t);
    if (crt_half(mp, c, sk->p, sk->p2, sk->pm1, sk->hp, t) != 0 ||
        crt_half(mq, c, sk->q, sk->q2, sk->qm1, sk->hq, t) != 0) {
        rc = fs_err_set(err, FS_EINVAL, "paillier: ciphertext not invertible");
        goto out;
    }
    /* Garner: m = mq + q ((mp - mq) q^-1 mod p) */
    mpz_sub(t, mp, mq);
    mpz_mul(t, t, sk->qinv);
    mpz_mod(t, t, sk->p);
    mpz_mul(t, t, sk->q);
    mpz_add(m, t, mq);
out:
    secret_clear(mp);
    secret_clear(mq);
    secret_clear(t);
    return rc;
}

/* One CRT half of fs_paillier_decrypt_packed (prime x), on its own thread. */
struct packed_half {
    const fs_paillier_sk *sk;
    const mpz_srcptr *c;
    size_t cnt;
    unsigned shift;
    int q; /* 0: p, 1: q */
    mpz_t mx;
    int rc;
};

static void *packed_half_main(void *arg)
{
    struct packed_half *h = arg;
    const fs_paillier_sk *sk = h->sk;
    mpz_srcptr x = h->q ? sk->q : sk->p;
    mpz_srcptr x2 = h->q ? sk->q2 : sk->p2;
    mpz_t acc;
    mpz_t e;
    mpz_t t;

    mpz_init_set_ui(acc, 1);
    mpz_init(e);
    mpz_init(t);
    mpz_setbit(e, h->shift);
    for (size_t i = h->cnt; i-- > 0;) {
        if (i + 1 < h->cnt) {
            mpz_powm_sec(acc, acc, e, x2); /* (the modulus is secret) */
        }
        mpz_mod(t, h->c[i], x2);
        mpz_mul(acc, acc, t);
        mpz_mod(acc, acc, x2);
    }
    h->rc = crt_half(h->mx, acc, x, x2, h->q ? sk->qm1 : sk->pm1, h->q ? sk->hq : sk->hp, t);
    secret_clear(acc);
    secret_clear(t);
    mpz_clear(e);
    return NULL;
}

int fs_paillier_decrypt_packed(const fs_paillier_sk *sk, mpz_t m, const mpz_srcptr *c, size_t cnt,
                               unsigned shift, struct fs_err *err)
{
    struct packed_half h[2];
    pthread_t th;
    int threaded;
    mpz_t t;

    if (cnt < 1 || cnt > 64 || shift < 1 || shift > sk->pub.bits) {
        return fs_err_set(err, FS_EINVAL, "paillier: packed decryption of %zu ciphertexts", cnt);
    }
    for (size_t i = 0; i < cnt; i++) {
        if (!ct_in_range(&sk->pub, c[i])) {
            return fs_err_set(err, FS_EINVAL, "paillier: ciphertext out of range");
        }
    }
    for (int k = 0; k < 2; k++) {
        h[k].sk = sk;
        h[k].c = c;
        h[k].cnt = cnt;
        h[k].shift = shift;
        h[k].q = k;
        h[k].rc = 0;
        mpz_init(h[k].mx);
    }
    /* the p half on a second thread (or here, if none can start) */
    threaded = pthread_create(&th, NULL, packed_half_main, &h[0]) == 0;
    if (!threaded) {
        packed_half_main(&h[0]);
    }
    packed_half_main(&h[1]);
    if (threaded) {
        pthread_join(th, NULL);
    }
    mpz_init(t);
    if (h[0].rc == 0 && h[1].rc == 0) {
        /* Garner, as fs_paillier_decrypt */
        mpz_sub(t, h[0].mx, h[1].mx);
        mpz_mul(t, t, sk->qinv);
        mpz_mod(t, t, sk->p);
        mpz_mul(t, t, sk->q);
        mpz_add(m, t, h[1].mx);
    }
    secret_clear(t);
    secret_clear(h[0].mx);
    secret_clear(h[1].mx);
    if (h[0].rc != 0 || h[1].rc != 0) {
        return fs_err_set(err, FS_EINVAL, "paillier: ciphertext not invertible");
    }
    return 0;
}

int fs_paillier_decrypt_packed_p(const fs_paillier_sk *sk, mpz_t m, const mpz_srcptr *c, size_t cnt,
                                 unsigned shift, struct fs_err *err)
{
    mpz_t acc;
    mpz_t t;
    int rc;

    if (cnt < 1 || cnt > 64 || shift < 1 || (size_t)shift * cnt > sk->pub.bits / 2 - 1) {
        return fs_err_set(err, FS_EINVAL,
                          "paillier: packed decryption modulo p of %zu slots of %u bits", cnt,
                          shift);
    }
    for (size_t i = 0; i < cnt; i++) {
        if (!ct_in_range(&sk->pub, c[i])) {
            return fs_err_set(err, FS_EINVAL, "paillier: ciphertext out of range");
        }
    }
    mpz_init(acc);
    mpz_init(t);
    rc = fs_paillier_crt_horner(acc, sk->p2, c, cnt, shift, err);
    /* the plaintext is below 2^(bits/2 - 1) <= p (p has bits/2 bits): m mod p is m */
    if (rc == 0 && crt_half(m, acc, sk->p, sk->p2, sk->pm1, sk->hp, t) != 0) {
        rc = fs_err_set(err, FS_EINVAL, "paillier: ciphertext not invertible");
    }
    secret_clear(acc);
    secret_clear(t);
    return rc;
}

int fs_paillier_decrypt_sum_p(const fs_paillier_sk *sk, mpz_t m, const mpz_srcptr *c, size_t cnt,
                              struct fs_err *err)
{
    mpz_t acc;
    mpz_t t;
    int rc;

    if (cnt < 1 || cnt > 64) {
        return fs_err_set(err, FS_EINVAL, "paillier: sum decryption of %zu ciphertexts", cnt);
    }
    for (size_t i = 0; i < cnt; i++) {
        if (!ct_in_range(&sk->pub, c[i])) {
            return fs_err_set(err, FS_EINVAL, "paillier: ciphertext out of range");
        }
    }
    mpz_init(acc);
    mpz_init(t);
    /* the product modulo p^2 in Montgomery form (no squarings: shift 0) */
    rc = fs_paillier_crt_horner(acc, sk->p2, c, cnt, 0, err);
    if (rc == 0 && crt_half(m, acc, sk->p, sk->p2, sk->pm1, sk->hp, t) != 0) {
        rc = fs_err_set(err, FS_EINVAL, "paillier: ciphertext not invertible");
    }
    secret_clear(acc);
    secret_clear(t);
    return rc;
}

int fs_paillier_decrypt_nocrt(const fs_paillier_sk *sk, mpz_t m, const mpz_t c, struct fs_err *err)
{
    mpz_t t;

    if (!ct_in_range(&sk->pub, c)) {
        return fs_err_set(err, FS_EINVAL, "paillier: ciphertext out of range");
    }
    if (mpz_divisible_p(c, sk->p) != 0 || mpz_divisible_p(c, sk->q) != 0) {
        return fs_err_set(err, FS_EINVAL, "paillier: ciphertext not invertible");
    }
    mpz_init(t);
    mpz_powm_sec(t, c, sk->lambda, sk->pub.n2);
    mpz_sub_ui(t, t, 1);
    mpz_divexact(t, t, sk->pub.n);
    mpz_mul(t, t, sk->mu);
    mpz_mod(m, t, sk->pub.n);
    secret_clear(t);
    return 0;
}

int fs_paillier_encode_signed(const fs_paillier_pk *pk, mpz_t m, const mpz_t v, struct fs_err *err)
{
    if (mpz_cmpabs(v, pk->half) > 0) {
        return fs_err_set(err, FS_ERANGE, "paillier: signed value beyond (n-1)/2");
    }
    mpz_fdiv_r(m, v, pk->n);
    return 0;
}

int fs_paillier_decode_signed(const fs_paillier_pk *pk, mpz_t v, const mpz_t m, struct fs_err *err)
{
    if (mpz_sgn(m) < 0 || mpz_cmp(m, pk->n) >= 0) {
        return fs_err_set(err, FS_ERANGE, "paillier: plaintext outside [0, n)");
    }
    if (mpz_cmp(m, pk->half) > 0) {
        mpz_sub(v, m, pk->n);
    } else {
        mpz_set(v, m);
    }
    return 0;
}

/* ---- memory hygiene ------------------------------------------------------------ */

static void *wipe_alloc(size_t size)
{
    void *p = malloc(size);

    if (p == NULL) {
        fputs("fedsvd: GMP allocation failed\n", stderr);
        abort();
    }
    return p;
}

static void *wipe_realloc(void *old, size_t old_size, size_t new_size)
{
    void *p = wipe_alloc(new_size);

    if (old != NULL) {
        memcpy(p, old, old_size < new_size ? old_size : new_size);
        OPENSSL_cleanse(old, old_size);
        free(old);
    }
    return p;
}

static void wipe_free(void *p, size_t size)
{
    if (p != NULL) {
        OPENSSL_cleanse(p, size);
        free(p);
    }
}

static void install_wiping(void)
{
    mp_set_memory_functions(wipe_alloc, wipe_realloc, wipe_free);
}

void fs_paillier_gmp_wipe_on_free(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;

    (void)pthread_once(&once, install_wiping);
}
