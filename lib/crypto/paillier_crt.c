/* DJN randomizers and packed decryption with the private key: arithmetic
 * modulo p^2 and q^2 (half-size operands) in constant-time Montgomery form
 * (paillier_mont.h), recombined by Garner's formula. Used by the key owner
 * only (fs_paillier_djn_new_crt, fs_paillier_decrypt_packed_p). */
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>

#include "paillier_int.h"
#include "paillier_mont.h"

struct crt_half {
    struct fs_mont mt; /* modulo x^2 */
    mp_limb_t *table;  /* windows x 2^w entries x n limbs, Montgomery form */
};

struct fs_paillier_crt {
    const fs_paillier_sk *sk; /* borrowed */
    struct crt_half h[2];     /* [0]: p, [1]: q */
    mp_size_t n;              /* limbs of p^2 and of q^2 */
    mp_limb_t *qi;            /* (q^2)^-1 R mod p^2, canonical */
    mp_limb_t *q2;            /* q^2 */
    unsigned windows;
    unsigned window;
    size_t table_limbs; /* per half */
};

/* Limb scratch for the operations below: the Montgomery scratch of the
 * larger context plus 8 n-limb temporaries. */
static mp_size_t scratch_limbs(const struct fs_paillier_crt *c)
{
    mp_size_t a = fs_mont_scratch(&c->h[0].mt);
    mp_size_t b = fs_mont_scratch(&c->h[1].mt);

    return (a > b ? a : b) + 8 * c->n;
}

static void wipe_free(void *p, size_t bytes)
{
    if (p != NULL) {
        OPENSSL_cleanse(p, bytes);
        free(p);
    }
}

static void secret_clear(mpz_t x)
{
    if (x->_mp_alloc > 0) {
        OPENSSL_cleanse(x->_mp_d, (size_t)x->_mp_alloc * sizeof(mp_limb_t));
    }
    mpz_clear(x);
}

/* r < 2m (n limbs) becomes r mod m. */
static void canon(const struct fs_mont *mt, mp_limb_t *r, mp_limb_t *tp)
{
    mp_limb_t bw = mpn_sub_n(tp, r, mt->m, mt->n);

    mpn_cnd_swap(1 - bw, r, tp, mt->n);
}

/* Limbs of x (0 <= x < 2^(64 n)) zero-padded to n. */
static void limbs_of(mp_limb_t *dst, const mpz_t x, mp_size_t n)
{
    mp_size_t sz = (mp_size_t)mpz_size(x);

    mpn_copyi(dst, mpz_limbs_read(x), sz);
    mpn_zero(dst + sz, n - sz);
}

/* out = the x with x = cp mod p^2, x = cq mod q^2 (cp, cq canonical, n limbs):
 * out = cq + q^2 ((cp - cq) (q^2)^-1 mod p^2), constant time. */
static void garner(const struct fs_paillier_crt *c, mpz_t out, const mp_limb_t *cp,
                   const mp_limb_t *cq, mp_limb_t *tp)
{
    const struct fs_mont *mp = &c->h[0].mt;
    const mp_size_t n = c->n;
    mp_limb_t *x1 = tp;
    mp_limb_t *x2 = tp + n;
    mp_limb_t *w = tp + 2 * n; /* 2n limbs */
    mp_limb_t *s = tp + 4 * n;
    mp_limb_t bw;

    fs_mont_mul(mp, x1, cp, c->qi, s); /* cp (q^2)^-1, below 2 p^2 */
    canon(mp, x1, s);
    fs_mont_mul(mp, x2, cq, c->qi, s); /* cq < q^2 < R */
    canon(mp, x2, s);
    bw = mpn_sub_n(x1, x1, x2, n);
    mpn_cnd_add_n(bw, x1, x1, mp->m, n);
    mpn_sec_mul(w, c->q2, n, x1, n, s);
    mpn_copyi(s, cq, n);
    mpn_zero(s + n, n);
    mpn_add_n(w, w, s, 2 * n); /* < p^2 q^2: no carry */
    mpn_copyi(mpz_limbs_write(out, 2 * n), w, 2 * n);
    mpz_limbs_finish(out, 2 * n);
}

void fs_paillier_crt_free(struct fs_paillier_crt *c)
{
    if (c == NULL) {
        return;
    }
    for (int k = 0; k < 2; k++) {
        wipe_free(c->h[k].table, c->table_limbs * sizeof(mp_limb_t));
        fs_mont_clear(&c->h[k].mt);
    }
    wipe_free(c->qi, (size_t)c->n * sizeof(mp_limb_t));
    wipe_free(c->q2, (size_t)c->n * sizeof(mp_limb_t));
    OPENSSL_cleanse(c, sizeof *c);
    free(c);
}

/* c->qi = (q^2)^-1 R mod p^2 from qinv = q^-1 mod p by one Newton (Hensel)
 * step: y = qinv^2 is (q^2)^-1 mod p, y (2 - q^2 y) is it mod p^2. */
static void garner_constant(struct fs_paillier_crt *c, const fs_paillier_sk *sk, mp_limb_t *tp)
{
    const struct fs_mont *mp = &c->h[0].mt;
    const mp_size_t n = c->n;
    mp_limb_t *y = tp;      /* n limbs */
    mp_limb_t *ym = tp + n; /* y R */
    mp_limb_t *t = tp + 2 * n;
    mp_limb_t *u = tp + 3 * n;
    mp_limb_t *s = tp + 4 * n;
    mp_limb_t bw;

    limbs_of(t, sk->qinv, n);
    mpn_sec_mul(s, t, n, t, n, s + 2 * n); /* qinv^2 < p^2 */
    mpn_copyi(y, s, n);
    fs_mont_to(mp, ym, y, n, s);
    fs_mont_mul(mp, t, c->q2, ym, s); /* q^2 y mod p^2 (q^2 < R) */
    fs_mont_mod(mp, t, t, n, s);      /* canonical, = 1 mod p */
    mpn_zero(u, n);
    u[0] = 2;
    bw = mpn_sub_n(u, u, t, n); /* 2 - q^2 y mod p^2 */
    mpn_cnd_add_n(bw, u, u, mp->m, n);
    fs_mont_mul(mp, t, ym, u, s); /* y (2 - q^2 y), below 2 p^2 */
    canon(mp, t, s);
    fs_mont_mul(mp, c->qi, t, mp->r2, s); /* into Montgomery form */
    canon(mp, c->qi, s);
}

int fs_paillier_crt_new(struct fs_paillier_crt **out, const fs_paillier_sk *sk, struct fs_err *err)
{
    struct fs_paillier_crt *c = NULL;
    mp_limb_t *tp = NULL;
    mp_size_t tn = 0;
    int rc = 0;

    *out = NULL;
    if (mpz_size(sk->p2) != mpz_size(sk->q2)) {
        return fs_err_set(err, FS_EINVAL, "paillier: p^2 and q^2 of different limb counts");
    }
    c = calloc(1, sizeof *c);
    if (c == NULL) {
        return fs_err_set(err, FS_ENOMEM, "paillier: out of memory");
    }
    c->sk = sk;
    c->n = (mp_size_t)mpz_size(sk->p2);
    rc = fs_mont_init(&c->h[0].mt, sk->p2, err);
    if (rc == 0) {
        rc = fs_mont_init(&c->h[1].mt, sk->q2, err);
    }
    if (rc != 0) {
        goto out;
    }
    c->qi = malloc((size_t)c->n * sizeof *c->qi);
    c->q2 = malloc((size_t)c->n * sizeof *c->q2);
    tn = scratch_limbs(c);
    tp = malloc((size_t)tn * sizeof *tp);
    if (c->qi == NULL || c->q2 == NULL || tp == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "paillier: out of memory");
        goto out;
    }
    limbs_of(c->q2, sk->q2, c->n);
    garner_constant(c, sk, tp);
    *out = c;
    c = NULL;
out:
    wipe_free(tp, (size_t)tn * sizeof *tp);
    fs_paillier_crt_free(c);
    return rc;
}

int fs_paillier_crt_nth_power(const struct fs_paillier_crt *c, mpz_t out, const mpz_t h,
                              struct fs_err *err)
{
    const mp_size_t n = c->n;
    mp_size_t tn = scratch_limbs(c);
    mp_limb_t *tp = malloc((size_t)tn * sizeof *tp);
    mp_limb_t *half[2];
    mpz_t base, res;

    if (tp == NULL) {
        return fs_err_set(err, FS_ENOMEM, "paillier: out of memory");
    }
    half[0] = tp + tn - 2 * n;
    half[1] = tp + tn - n;
    mpz_init2(base, (mp_bitcnt_t)n * GMP_NUMB_BITS);
    mpz_init2(res, (mp_bitcnt_t)n * GMP_NUMB_BITS);
    for (int k = 0; k < 2; k++) {
        /* (h mod x^2)^n mod x^2: secret base and modulus, so mpz_powm_sec */
        fs_mont_mod(&c->h[k].mt, half[k], mpz_limbs_read(h), (mp_size_t)mpz_size(h), tp);
        mpn_copyi(mpz_limbs_write(base, n), half[k], n);
        mpz_limbs_finish(base, n);
        mpz_powm_sec(res, base, c->sk->pub.n, k == 0 ? c->sk->p2 : c->sk->q2);
        limbs_of(half[k], res, n);
    }
    garner(c, out, half[0], half[1], tp);
    secret_clear(base);
    secret_clear(res);
    wipe_free(tp, (size_t)tn * sizeof *tp);
    return 0;
}

int fs_paillier_crt_build(struct fs_paillier_crt *c, const mpz_t hs, unsigned exp_bits,
                          unsigned window, struct fs_err *err)
{
    const mp_size_t n = c->n;
    const size_t entries = (size_t)1 << window;
    mp_size_t tn = scratch_limbs(c);
    mp_limb_t *tp = NULL;
    mp_limb_t *base;

    if (window < 1 || window > FS_PAILLIER_DJN_MAX_WINDOW || c->h[0].table != NULL) {
        return fs_err_set(err, FS_EINVAL, "paillier: CRT table window %u", window);
    }
    c->window = window;
    c->windows = (exp_bits + window - 1) / window;
    c->table_limbs = (size_t)c->windows * entries * (size_t)n;
    tp = malloc((size_t)tn * sizeof *tp);
    c->h[0].table = malloc(c->table_limbs * sizeof(mp_limb_t));
    c->h[1].table = malloc(c->table_limbs * sizeof(mp_limb_t));
    if (tp == NULL || c->h[0].table == NULL || c->h[1].table == NULL) {
        free(tp);
        return fs_err_set(err, FS_ENOMEM, "paillier: DJN tables of %zu bytes",
                          2 * c->table_limbs * sizeof(mp_limb_t));
    }
    base = tp + tn - n;
    for (int k = 0; k < 2; k++) {
        const struct fs_mont *mt = &c->h[k].mt;
        /* row i holds base^j (j < 2^w) for base = hs^(2^(w i)), Montgomery form */
        fs_mont_to(mt, base, mpz_limbs_read(hs), (mp_size_t)mpz_size(hs), tp);
        for (unsigned i = 0; i < c->windows; i++) {
            mp_limb_t *row = c->h[k].table + (size_t)i * entries * (size_t)n;
            mpn_copyi(row, mt->one, n);
            for (size_t j = 1; j < entries; j++) {
                fs_mont_mul(mt, row + j * (size_t)n, row + (j - 1) * (size_t)n, base, tp);
            }
            fs_mont_mul(mt, base, row + (entries - 1) * (size_t)n, base, tp);
        }
    }
    wipe_free(tp, (size_t)tn * sizeof *tp);
    return 0;
}

int fs_paillier_crt_pow(const struct fs_paillier_crt *c, mpz_t out, const mpz_t a,
                        struct fs_err *err)
{
    const mp_size_t n = c->n;
    const size_t entries = (size_t)1 << c->window;
    const mp_limb_t *al = mpz_limbs_read(a);
    const size_t na = mpz_size(a);
    mp_size_t tn = scratch_limbs(c);
    mp_limb_t *tp = malloc((size_t)tn * sizeof *tp);
    mp_limb_t *half[2];
    mp_limb_t *sel;

    if (tp == NULL) {
        return fs_err_set(err, FS_ENOMEM, "paillier: out of memory");
    }
    half[0] = tp + tn - 2 * n;
    half[1] = tp + tn - n;
    sel = tp + tn - 3 * n;
    for (int k = 0; k < 2; k++) {
        const struct fs_mont *mt = &c->h[k].mt;
        for (unsigned i = 0; i < c->windows; i++) {
            unsigned digit = fs_paillier_digit(al, na, (size_t)i * c->window, c->window);
            /* every entry of the row is read: the digit does not show */
            mpn_sec_tabselect(i == 0 ? half[k] : sel,
                              c->h[k].table + (size_t)i * entries * (size_t)n, n,
                              (mp_size_t)entries, (mp_size_t)digit);
            if (i > 0) {
                fs_mont_mul(mt, half[k], half[k], sel, tp);
            }
        }
        fs_mont_from(mt, half[k], half[k], tp);
    }
    garner(c, out, half[0], half[1], tp);
    wipe_free(tp, (size_t)tn * sizeof *tp);
    return 0;
}

size_t fs_paillier_crt_table_bytes(const struct fs_paillier_crt *c)
{
    return 2 * c->table_limbs * sizeof(mp_limb_t);
}

int fs_paillier_crt_horner(mpz_t out, mpz_srcptr x2, const mpz_srcptr *c, size_t cnt,
                           unsigned shift, struct fs_err *err)
{
    struct fs_mont mt;
    mp_size_t n;
    mp_size_t tn;
    mp_limb_t *tp = NULL;
    mp_limb_t *acc;
    mp_limb_t *ct;
    int rc = fs_mont_init(&mt, x2, err);

    if (rc != 0) {
        return rc;
    }
    n = mt.n;
    tn = fs_mont_scratch(&mt) + 2 * n;
    tp = malloc((size_t)tn * sizeof *tp);
    if (tp == NULL) {
        fs_mont_clear(&mt);
        return fs_err_set(err, FS_ENOMEM, "paillier: out of memory");
    }
    acc = tp + tn - 2 * n;
    ct = tp + tn - n;
    for (size_t i = cnt; i-- > 0;) {
        /* c[i] mod x^2 in Montgomery form (its size is public) */
        fs_mont_to(&mt, i + 1 == cnt ? acc : ct, mpz_limbs_read(c[i]), (mp_size_t)mpz_size(c[i]),
                   tp);
        if (i + 1 < cnt) {
            for (unsigned b = 0; b < shift; b++) {
                fs_mont_sqr(&mt, acc, acc, tp);
            }
            fs_mont_mul(&mt, acc, acc, ct, tp);
        }
    }
    fs_mont_from(&mt, acc, acc, tp);
    mpn_copyi(mpz_limbs_write(out, n), acc, n);
    mpz_limbs_finish(out, n);
    wipe_free(tp, (size_t)tn * sizeof *tp);
    fs_mont_clear(&mt);
    return 0;
}
