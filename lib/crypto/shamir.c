#include "shamir.h"

#include <gmp.h>
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>

#include "prg.h"
#include "rand.h"

/* p = 2^256 + 297 (see shamir.h). */
static const char prime_hex[] = "10000000000000000000000000000000000000000000000000000000000000129";

/* Uniform coefficients: this many CSPRNG bytes reduced mod p (bias < 2^-250). */
#define COEF_BYTES 64

const char *fs_shamir_prime_hex(void)
{
    return prime_hex;
}

/* GMP has no secure clear. Overwrite the whole limb allocation (the fields of
 * __mpz_struct that gmp.h declares) before handing it back to free. */
static void mpz_clear_wipe(mpz_t z)
{
    if (z->_mp_alloc > 0) {
        OPENSSL_cleanse(z->_mp_d, (size_t)z->_mp_alloc * sizeof(mp_limb_t));
    }
    mpz_clear(z);
}

static void load_prime(mpz_t p)
{
    /* The constant is well formed, so this cannot fail. */
    (void)mpz_set_str(p, prime_hex, 16);
}

/* z (0 <= z < 2^(8*len)) as len big-endian bytes. */
static void export_be(uint8_t *out, size_t len, const mpz_t z)
{
    size_t bytes = (mpz_sizeinbase(z, 2) + 7) / 8;
    size_t count = 0;

    memset(out, 0, len);
    if (mpz_sgn(z) == 0 || bytes > len) {
        return;
    }
    mpz_export(out + (len - bytes), &count, 1, 1, 1, 0, z);
}

static void import_be(mpz_t z, const uint8_t *in, size_t len)
{
    mpz_import(z, len, 1, 1, 1, 0, in);
}

/* 1 if y (33 bytes big-endian) < p, in time independent of y's value. */
static int y_in_field(const uint8_t y[FS_SHAMIR_Y_LEN])
{
    /* p = 0x01 || 00 * 30 || 0x01 0x29. y < p iff y[0] == 0, or y[0] == 1 and
     * the remaining 32 bytes, as an integer, are below 0x0129. */
    unsigned hi = y[0];
    unsigned mid = 0;
    unsigned low = ((unsigned)y[31] << 8) | y[32];

    for (size_t i = 1; i < 31; i++) {
        mid |= y[i];
    }
    return (hi == 0) | ((hi == 1) & (mid == 0) & (low < 0x0129));
}

static int check_points(const uint16_t *xs, size_t n, struct fs_err *err)
{
    uint8_t *seen = calloc((FS_SHAMIR_MAX_N + 1 + 7) / 8, 1);
    int rc = 0;

    if (seen == NULL) {
        return fs_err_set(err, FS_ENOMEM, "shamir: out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        unsigned x = xs[i];
        if (x == 0) {
            rc = fs_err_set(err, FS_EINVAL, "shamir: share %zu has x = 0", i);
            break;
        }
        if (seen[x / 8] & (1u << (x % 8))) {
            rc = fs_err_set(err, FS_EINVAL, "shamir: x = %u appears twice", x);
            break;
        }
        seen[x / 8] |= (uint8_t)(1u << (x % 8));
    }
    free(seen);
    return rc;
}

/* Coefficients from the CSPRNG (coef_key NULL) or, deterministically, from
 * AES-256-CTR under coef_key: the polynomial then depends on the key only,
 * never on the points, so the share at x is the same whatever xs holds. */
static int split_at(const uint8_t secret[FS_SHAMIR_SECRET_LEN], size_t t, const uint16_t *xs,
                    size_t n, const uint8_t *coef_key, struct fs_shamir_share *shares,
                    struct fs_err *err)
{
    mpz_t p, acc, *coef = NULL;
    uint8_t rnd[COEF_BYTES];
    fs_prg *prg = NULL;
    size_t ncoef = 0;
    int rc;

    if (n == 0 || n > FS_SHAMIR_MAX_N || t == 0 || t > n || xs == NULL || shares == NULL) {
        return fs_err_set(err, FS_EINVAL, "shamir: need 1 <= t <= n <= %d (t = %zu, n = %zu)",
                          FS_SHAMIR_MAX_N, t, n);
    }
    memset(shares, 0, n * sizeof *shares);
    rc = check_points(xs, n, err);
    if (rc != 0) {
        return rc;
    }
    coef = malloc(t * sizeof *coef);
    if (coef == NULL) {
        return fs_err_set(err, FS_ENOMEM, "shamir: out of memory");
    }
    mpz_init(p);
    mpz_init2(acc, 1024);
    load_prime(p);
    /* f(x) = coef[0] + coef[1] x + ... + coef[t-1] x^(t-1), coef[0] = secret. */
    for (ncoef = 0; ncoef < t; ncoef++) {
        mpz_init2(coef[ncoef], 640);
        if (ncoef == 0) {
            import_be(coef[0], secret, FS_SHAMIR_SECRET_LEN);
            continue;
        }
        if (coef_key != NULL && prg == NULL) {
            rc = fs_prg_new(&prg, coef_key, NULL, err);
            if (rc != 0) {
                ncoef++;
                goto out;
            }
        }
        rc = prg != NULL ? fs_prg_bytes(prg, rnd, sizeof rnd, err)
                         : fs_rand_bytes(rnd, sizeof rnd, err);
        if (rc != 0) {
            ncoef++;
            goto out;
        }
        import_be(coef[ncoef], rnd, sizeof rnd);
        mpz_mod(coef[ncoef], coef[ncoef], p);
    }
    for (size_t i = 0; i < n; i++) {
        /* Horner from the top coefficient. */
        mpz_set(acc, coef[t - 1]);
        for (size_t j = t - 1; j-- > 0;) {
            mpz_mul_ui(acc, acc, xs[i]);
            mpz_add(acc, acc, coef[j]);
            mpz_mod(acc, acc, p);
        }
        shares[i].x = xs[i];
        export_be(shares[i].y, FS_SHAMIR_Y_LEN, acc);
    }
    rc = 0;
out:
    if (rc != 0) {
        OPENSSL_cleanse(shares, n * sizeof *shares);
    }
    OPENSSL_cleanse(rnd, sizeof rnd);
    fs_prg_free(prg);
    for (size_t j = 0; j < ncoef; j++) {
        mpz_clear_wipe(coef[j]);
    }
    free(coef);
    mpz_clear_wipe(acc);
    mpz_clear(p);
    return rc;
}

int fs_shamir_split_at(const uint8_t secret[FS_SHAMIR_SECRET_LEN], size_t t, const uint16_t *xs,
                       size_t n, struct fs_shamir_share *shares, struct fs_err *err)
{
    return split_at(secret, t, xs, n, NULL, shares, err);
}

int fs_shamir_split_at_det(const uint8_t secret[FS_SHAMIR_SECRET_LEN], size_t t, const uint16_t *xs,
                           size_t n, const uint8_t coef_key[32], struct fs_shamir_share *shares,
                           struct fs_err *err)
{
    if (coef_key == NULL) {
        return fs_err_set(err, FS_EINVAL, "shamir: NULL coefficient key");
    }
    return split_at(secret, t, xs, n, coef_key, shares, err);
}

int fs_shamir_split(const uint8_t secret[FS_SHAMIR_SECRET_LEN], size_t t, size_t n,
                    struct fs_shamir_share *shares, struct fs_err *err)
{
    uint16_t *xs = NULL;
    int rc;

    if (n == 0 || n > FS_SHAMIR_MAX_N) {
        return fs_err_set(err, FS_EINVAL, "shamir: need 1 <= n <= %d (n = %zu)", FS_SHAMIR_MAX_N,
                          n);
    }
    xs = malloc(n * sizeof *xs);
    if (xs == NULL) {
        return fs_err_set(err, FS_ENOMEM, "shamir: out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        xs[i] = (uint16_t)(i + 1);
    }
    rc = fs_shamir_split_at(secret, t, xs, n, shares, err);
    free(xs);
    return rc;
}

/* Interpolation state for the first t shares: inv_den[i] =
 * 1 / prod_{m != i} (x_i - x_m) mod p. Only public values (the x's) enter it. */
struct interp {
    size_t t;
    const struct fs_shamir_share *s;
    mpz_t p;
    mpz_t *inv_den;
    mpz_t *suffix; /* scratch for eval */
    mpz_t *y;      /* the t y values, secret */
    size_t ninit;
};

static void interp_free(struct interp *ip)
{
    for (size_t i = 0; i < ip->ninit; i++) {
        mpz_clear(ip->inv_den[i]);
        mpz_clear(ip->suffix[i]);
        mpz_clear_wipe(ip->y[i]);
    }
    free(ip->inv_den);
    free(ip->suffix);
    free(ip->y);
    mpz_clear(ip->p);
}

static int interp_init(struct interp *ip, const struct fs_shamir_share *s, size_t t,
                       struct fs_err *err)
{
    memset(ip, 0, sizeof *ip);
    mpz_init(ip->p);
    load_prime(ip->p);
    ip->t = t;
    ip->s = s;
    ip->inv_den = malloc(t * sizeof *ip->inv_den);
    ip->suffix = malloc(t * sizeof *ip->suffix);
    ip->y = malloc(t * sizeof *ip->y);
    if (ip->inv_den == NULL || ip->suffix == NULL || ip->y == NULL) {
        return fs_err_set(err, FS_ENOMEM, "shamir: out of memory");
    }
    for (ip->ninit = 0; ip->ninit < t; ip->ninit++) {
        size_t i = ip->ninit;
        mpz_init_set_ui(ip->inv_den[i], 1);
        mpz_init2(ip->suffix[i], 320);
        mpz_init2(ip->y[i], 320);
        import_be(ip->y[i], s[i].y, FS_SHAMIR_Y_LEN);
        for (size_t m = 0; m < t; m++) {
            if (m != i) {
                mpz_mul_si(ip->inv_den[i], ip->inv_den[i], (long)s[i].x - (long)s[m].x);
                mpz_mod(ip->inv_den[i], ip->inv_den[i], ip->p);
            }
        }
        /* Distinct x's below p make the product nonzero, so it is invertible. */
        if (mpz_invert(ip->inv_den[i], ip->inv_den[i], ip->p) == 0) {
            ip->ninit++;
            return fs_err_set(err, FS_EINTERNAL, "shamir: denominator not invertible");
        }
    }
    return 0;
}

/* out = f(x) where f is the polynomial of degree < t through the t shares:
 * f(x) = sum_i y_i * inv_den_i * prod_{m != i} (x - x_m), the products taken
 * as prefix * suffix so one evaluation costs O(t). */
static void interp_eval(struct interp *ip, long x, mpz_t out)
{
    size_t t = ip->t;
    mpz_t prefix, term;

    mpz_init_set_ui(prefix, 1);
    mpz_init2(term, 1024);
    mpz_set_ui(ip->suffix[t - 1], 1);
    for (size_t i = t - 1; i-- > 0;) {
        mpz_mul_si(ip->suffix[i], ip->suffix[i + 1], x - (long)ip->s[i + 1].x);
        mpz_mod(ip->suffix[i], ip->suffix[i], ip->p);
    }
    mpz_set_ui(out, 0);
    for (size_t i = 0; i < t; i++) {
        /* Lagrange basis value l_i(x): public. */
        mpz_mul(term, prefix, ip->suffix[i]);
        mpz_mod(term, term, ip->p);
        mpz_mul(term, term, ip->inv_den[i]);
        mpz_mod(term, term, ip->p);
        /* Secret part: y_i * l_i(x). */
        mpz_mul(term, term, ip->y[i]);
        /* Reduce before adding so out stays within its preallocated limbs
         * (a reallocation would free a copy of secret data unwiped). */
        mpz_mod(term, term, ip->p);
        mpz_add(out, out, term);
        mpz_mod(out, out, ip->p);
        mpz_mul_si(prefix, prefix, x - (long)ip->s[i].x);
        mpz_mod(prefix, prefix, ip->p);
    }
    mpz_clear_wipe(term);
    mpz_clear(prefix);
}

static int check_shares(const struct fs_shamir_share *shares, size_t k, struct fs_err *err)
{
    uint16_t *xs = NULL;
    int rc;

    if (k > FS_SHAMIR_MAX_N) {
        return fs_err_set(err, FS_EINVAL, "shamir: %zu shares, at most %d distinct exist", k,
                          FS_SHAMIR_MAX_N);
    }
    for (size_t i = 0; i < k; i++) {
        if (!y_in_field(shares[i].y)) {
            return fs_err_set(err, FS_EINVAL, "shamir: share %zu (x = %u) has y >= p", i,
                              (unsigned)shares[i].x);
        }
    }
    xs = malloc(k * sizeof *xs);
    if (xs == NULL) {
        return fs_err_set(err, FS_ENOMEM, "shamir: out of memory");
    }
    for (size_t i = 0; i < k; i++) {
        xs[i] = shares[i].x;
    }
    rc = check_points(xs, k, err);
    free(xs);
    return rc;
}

int fs_shamir_combine(const struct fs_shamir_share *shares, size_t k, size_t t,
                      uint8_t secret[FS_SHAMIR_SECRET_LEN], struct fs_err *err)
{
    struct interp ip;
    mpz_t v, y;
    int rc;

    memset(secret, 0, FS_SHAMIR_SECRET_LEN);
    if (t == 0 || k < t || shares == NULL) {
        return fs_err_set(err, FS_EINVAL, "shamir: need 1 <= t <= k (t = %zu, k = %zu)", t, k);
    }
    rc = check_shares(shares, k, err);
    if (rc != 0) {
        return rc;
    }
    mpz_init2(v, 320);
    mpz_init2(y, 320);
    rc = interp_init(&ip, shares, t, err);
    if (rc != 0) {
        goto out;
    }
    /* Extra shares must lie on the same polynomial. */
    for (size_t j = t; j < k; j++) {
        interp_eval(&ip, (long)shares[j].x, v);
        import_be(y, shares[j].y, FS_SHAMIR_Y_LEN);
        if (mpz_cmp(v, y) != 0) {
            rc = fs_err_set(err, FS_EAUTH, "shamir: share x = %u is inconsistent with the others",
                            (unsigned)shares[j].x);
            goto out;
        }
    }
    interp_eval(&ip, 0, v);
    if (mpz_sizeinbase(v, 2) > 8 * FS_SHAMIR_SECRET_LEN) {
        rc = fs_err_set(err, FS_EAUTH, "shamir: shares are inconsistent (value >= 2^256)");
        goto out;
    }
    export_be(secret, FS_SHAMIR_SECRET_LEN, v);
    rc = 0;
out:
    if (rc != 0) {
        OPENSSL_cleanse(secret, FS_SHAMIR_SECRET_LEN);
    }
    interp_free(&ip);
    mpz_clear_wipe(y);
    mpz_clear_wipe(v);
    return rc;
}

void fs_shamir_share_encode(const struct fs_shamir_share *share, uint8_t out[FS_SHAMIR_SHARE_LEN])
{
    out[0] = (uint8_t)(share->x >> 8);
    out[1] = (uint8_t)(share->x & 0xff);
    memcpy(out + 2, share->y, FS_SHAMIR_Y_LEN);
}

int fs_shamir_share_decode(struct fs_shamir_share *share, const uint8_t *in, size_t len,
                           struct fs_err *err)
{
    memset(share, 0, sizeof *share);
    if (in == NULL || len != FS_SHAMIR_SHARE_LEN) {
        return fs_err_set(err, FS_EFORMAT, "shamir: share of %zu bytes, expected %d", len,
                          FS_SHAMIR_SHARE_LEN);
    }
    if (in[0] == 0 && in[1] == 0) {
        return fs_err_set(err, FS_EFORMAT, "shamir: share has x = 0");
    }
    if (!y_in_field(in + 2)) {
        return fs_err_set(err, FS_EFORMAT, "shamir: share value y >= p");
    }
    share->x = (uint16_t)(((unsigned)in[0] << 8) | in[1]);
    memcpy(share->y, in + 2, FS_SHAMIR_Y_LEN);
    return 0;
}
