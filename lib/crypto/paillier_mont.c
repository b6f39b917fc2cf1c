/* Constant-time Montgomery arithmetic (see paillier_mont.h). */
#include "paillier_mont.h"

#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>

#if GMP_NAIL_BITS != 0
#error "paillier_mont.c assumes GMP limbs without nail bits"
#endif

/* Widest operand of fs_mont_to / fs_mont_mod, in multiples of n, plus one limb. */
#define WIDE(n) (2 * (n) + 1)

static mp_size_t max_sz(mp_size_t a, mp_size_t b)
{
    return a > b ? a : b;
}

mp_size_t fs_mont_scratch(const struct fs_mont *mt)
{
    return mt->itch;
}

/* r = t R^-1 mod m (almost reduced) for t of 2n limbs (destroyed):
 * one mpn_addmul_1 row per limb, then one conditional subtraction. */
static void redc(const struct fs_mont *mt, mp_limb_t *r, mp_limb_t *t)
{
    const mp_size_t n = mt->n;
    mp_limb_t cy;

    for (mp_size_t j = 0; j < n; j++) {
        mp_limb_t q = t[j] * mt->minv;
        t[j] = mpn_addmul_1(t + j, mt->m, n, q); /* t[j] becomes 0: keep the carry there */
    }
    cy = mpn_add_n(r, t + n, t, n);
    mpn_cnd_sub_n(cy, r, r, mt->m, n);
}

void fs_mont_mul(const struct fs_mont *mt, mp_limb_t *r, const mp_limb_t *a, const mp_limb_t *b,
                 mp_limb_t *tp)
{
    mpn_sec_mul(tp, a, mt->n, b, mt->n, tp + 2 * mt->n);
    redc(mt, r, tp);
}

void fs_mont_sqr(const struct fs_mont *mt, mp_limb_t *r, const mp_limb_t *a, mp_limb_t *tp)
{
    mpn_sec_sqr(tp, a, mt->n, tp + 2 * mt->n);
    redc(mt, r, tp);
}

void fs_mont_mod(const struct fs_mont *mt, mp_limb_t *r, const mp_limb_t *x, mp_size_t xn,
                 mp_limb_t *tp)
{
    const mp_size_t n = mt->n;

    if (xn < n) {
        /* x < 2^(GMP_NUMB_BITS (n-1)) <= m: already reduced */
        mpn_copyi(r, x, xn);
        mpn_zero(r + xn, n - xn);
        return;
    }
    mpn_copyi(tp, x, xn);
    mpn_sec_div_r(tp, xn, mt->m, n, tp + xn);
    mpn_copyi(r, tp, n);
}

void fs_mont_to(const struct fs_mont *mt, mp_limb_t *r, const mp_limb_t *x, mp_size_t xn,
                mp_limb_t *tp)
{
    mp_limb_t *xr = tp; /* x mod m, n limbs */

    fs_mont_mod(mt, xr, x, xn, tp + mt->n);
    fs_mont_mul(mt, r, xr, mt->r2, tp + mt->n);
}

void fs_mont_from(const struct fs_mont *mt, mp_limb_t *r, const mp_limb_t *a, mp_limb_t *tp)
{
    const mp_size_t n = mt->n;
    mp_limb_t *d = tp + 2 * n;
    mp_limb_t bw;

    mpn_copyi(tp, a, n);
    mpn_zero(tp + n, n);
    redc(mt, r, tp); /* (a + q m) / R < 1 + m: r <= m */
    bw = mpn_sub_n(d, r, mt->m, n);
    mpn_cnd_swap(1 - bw, r, d, n); /* r = m (a = 0 mod m) becomes 0 */
}

int fs_mont_init(struct fs_mont *mt, mpz_srcptr m, struct fs_err *err)
{
    mp_size_t n = (mp_size_t)mpz_size(m);
    mp_limb_t inv;
    mp_limb_t *t = NULL;
    mp_size_t tn;

    memset(mt, 0, sizeof *mt);
    if (n < 1 || mpz_sgn(m) <= 0 || mpz_even_p(m) || mpz_cmp_ui(m, 1) == 0) {
        return fs_err_set(err, FS_EINVAL, "paillier: Montgomery modulus must be odd and > 1");
    }
    mt->n = n;
    mt->itch = max_sz(mpn_sec_mul_itch(n, n), mpn_sec_sqr_itch(n)) + 2 * n;
    mt->itch = max_sz(mt->itch, WIDE(n) + mpn_sec_div_r_itch(WIDE(n), n));
    mt->itch = max_sz(mt->itch, 3 * n); /* fs_mont_from */
    mt->itch += n;                      /* fs_mont_to's reduced operand */
    mt->m = malloc((size_t)n * sizeof *mt->m);
    mt->r2 = malloc((size_t)n * sizeof *mt->r2);
    mt->one = malloc((size_t)n * sizeof *mt->one);
    tn = WIDE(n) + mt->itch;
    t = malloc((size_t)tn * sizeof *t);
    if (mt->m == NULL || mt->r2 == NULL || mt->one == NULL || t == NULL) {
        free(t);
        fs_mont_clear(mt);
        return fs_err_set(err, FS_ENOMEM, "paillier: out of memory");
    }
    mpn_copyi(mt->m, mpz_limbs_read(m), n);
    /* m^-1 mod 2^64 by Newton's iteration (m m = 1 mod 8: 3 bits, doubling) */
    inv = mt->m[0];
    for (int i = 0; i < 6; i++) {
        inv *= 2 - mt->m[0] * inv;
    }
    mt->minv = -inv;
    /* R^2 mod m */
    mpn_zero(t, WIDE(n));
    t[2 * n] = 1;
    fs_mont_mod(mt, mt->r2, t, WIDE(n), t + WIDE(n));
    /* R mod m = REDC(R^2) */
    mpn_copyi(t, mt->r2, n);
    mpn_zero(t + n, n);
    redc(mt, mt->one, t);
    OPENSSL_cleanse(t, (size_t)tn * sizeof *t);
    free(t);
    return 0;
}

void fs_mont_clear(struct fs_mont *mt)
{
    size_t bytes = (size_t)mt->n * sizeof(mp_limb_t);

    if (mt->m != NULL) {
        OPENSSL_cleanse(mt->m, bytes);
    }
    if (mt->r2 != NULL) {
        OPENSSL_cleanse(mt->r2, bytes);
    }
    if (mt->one != NULL) {
        OPENSSL_cleanse(mt->one, bytes);
    }
    free(mt->m);
    free(mt->r2);
    free(mt->one);
    memset(mt, 0, sizeof *mt);
}
