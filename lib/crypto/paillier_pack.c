/* Packing of signed int64 slots into one Paillier plaintext: signed digits
 * in base 2^w (the encoding and its bounds are described in paillier.h). */
#include <limits.h>
#include <string.h>

#include "paillier.h"

#define PACK_MAX_SUMMANDS (1u << 31)

/* x += v for a signed 64-bit v (any value, INT64_MIN included). */
static void add_i64(mpz_t x, int64_t v)
{
    uint64_t mag = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;

#if ULONG_MAX >= UINT64_MAX
    if (v < 0) {
        mpz_sub_ui(x, x, (unsigned long)mag);
    } else {
        mpz_add_ui(x, x, (unsigned long)mag);
    }
#else
    mpz_t t;
    mpz_init(t);
    mpz_import(t, 1, 1, sizeof mag, 0, 0, &mag);
    if (v < 0) {
        mpz_sub(x, x, t);
    } else {
        mpz_add(x, x, t);
    }
    mpz_clear(t);
#endif
}

/* x as int64; the caller has checked -2^63 <= x < 2^63. */
static int64_t get_i64(const mpz_t x)
{
    uint64_t mag = 0;
    size_t count = 0;

    mpz_export(&mag, &count, 1, sizeof mag, 0, 0, x);
    if (count == 0) {
        return 0;
    }
    if (mpz_sgn(x) >= 0) {
        return (int64_t)mag;
    }
    /* -mag without overflow for mag = 2^63 */
    return mag == (uint64_t)1 << 63 ? INT64_MIN : -(int64_t)mag;
}

static unsigned ceil_log2(unsigned k)
{
    unsigned l = 0;

    while (((uint64_t)1 << l) < k) {
        l++;
    }
    return l;
}

static int layout_matches(const struct fs_paillier_packing *pp, const fs_paillier_pk *pk,
                          struct fs_err *err)
{
    unsigned bits = fs_paillier_pk_bits(pk);

    /* the same rules as fs_paillier_packing_init, for a struct filled by hand */
    if (pp->value_bits < 1 || pp->value_bits > 64 || pp->summands < 1 ||
        pp->summands > PACK_MAX_SUMMANDS || pp->value_bits + ceil_log2(pp->summands) > 64 ||
        pp->slot_bits != pp->value_bits + ceil_log2(pp->summands) + 1 ||
        pp->slots != (bits - 1) / pp->slot_bits || pp->slots == 0) {
        return fs_err_set(err, FS_EINVAL, "paillier: packing layout does not fit a %u-bit key",
                          bits);
    }
    return 0;
}

int fs_paillier_packing_init(struct fs_paillier_packing *pp, const fs_paillier_pk *pk,
                             unsigned value_bits, unsigned summands, struct fs_err *err)
{
    unsigned bits = fs_paillier_pk_bits(pk);
    unsigned lk;

    memset(pp, 0, sizeof *pp);
    if (value_bits < 1 || value_bits > 64 || summands < 1 || summands > PACK_MAX_SUMMANDS) {
        return fs_err_set(err, FS_EINVAL, "paillier: packing of %u-bit values, %u summands",
                          value_bits, summands);
    }
    lk = ceil_log2(summands);
    if (value_bits + lk > 64) {
        return fs_err_set(err, FS_ERANGE,
                          "paillier: %u summands of %u-bit values overflow an int64 slot sum",
                          summands, value_bits);
    }
    pp->value_bits = value_bits;
    pp->summands = summands;
    pp->slot_bits = value_bits + lk + 1;
    pp->slots = (bits - 1) / pp->slot_bits;
    if (pp->slots == 0) {
        return fs_err_set(err, FS_ERANGE, "paillier: a %u-bit slot does not fit a %u-bit key",
                          pp->slot_bits, bits);
    }
    return 0;
}

int fs_paillier_pack(const struct fs_paillier_packing *pp, const fs_paillier_pk *pk,
                     const int64_t *v, size_t count, mpz_t m, struct fs_err *err)
{
    int rc = layout_matches(pp, pk, err);
    int64_t lo = 0;
    int64_t hi = 0;
    mpz_t acc;

    if (rc != 0) {
        return rc;
    }
    if (count > pp->slots) {
        return fs_err_set(err, FS_EINVAL, "paillier: %zu values for %u slots", count, pp->slots);
    }
    if (pp->value_bits < 64) {
        lo = -((int64_t)1 << (pp->value_bits - 1));
        hi = ((int64_t)1 << (pp->value_bits - 1)) - 1;
        for (size_t i = 0; i < count; i++) {
            if (v[i] < lo || v[i] > hi) {
                return fs_err_set(err, FS_ERANGE,
                                  "paillier: value %zu outside %u-bit two's complement", i,
                                  pp->value_bits);
            }
        }
    }
    mpz_init(acc);
    /* Horner from the top slot down: acc = sum v[s] 2^(w s) */
    for (size_t i = count; i-- > 0;) {
        mpz_mul_2exp(acc, acc, pp->slot_bits);
        add_i64(acc, v[i]);
    }
    mpz_fdiv_r(m, acc, fs_paillier_pk_n(pk));
    mpz_clear(acc);
    return 0;
}

int fs_paillier_unpack(const struct fs_paillier_packing *pp, const fs_paillier_pk *pk,
                       const mpz_t m, int64_t *v, size_t count, struct fs_err *err)
{
    const unsigned w = pp->slot_bits;
    mpz_t acc;
    mpz_t d;
    mpz_t pw;
    mpz_t lo;
    mpz_t hi;
    int rc = layout_matches(pp, pk, err);

    if (rc != 0) {
        return rc;
    }
    if (count > pp->slots) {
        return fs_err_set(err, FS_EINVAL, "paillier: %zu values for %u slots", count, pp->slots);
    }
    mpz_init(acc);
    mpz_init(d);
    mpz_init(pw);
    mpz_init(lo);
    mpz_init(hi);
    rc = fs_paillier_decode_signed(pk, acc, m, err);
    if (rc != 0) {
        goto out;
    }
    mpz_setbit(pw, w);
    /* slot sums lie in [-K 2^(b-1), K (2^(b-1) - 1)] */
    mpz_setbit(hi, pp->value_bits - 1);
    mpz_mul_ui(lo, hi, pp->summands);
    mpz_neg(lo, lo);
    mpz_sub_ui(hi, hi, 1);
    mpz_mul_ui(hi, hi, pp->summands);
    for (size_t i = 0; i < count; i++) {
        /* d = acc mod 2^w, read as a digit in [-2^(w-1), 2^(w-1)) */
        mpz_fdiv_r_2exp(d, acc, w);
        if (mpz_tstbit(d, w - 1) != 0) {
            mpz_sub(d, d, pw);
        }
        if (mpz_cmp(d, lo) < 0 || mpz_cmp(d, hi) > 0) {
            rc = fs_err_set(err, FS_ERANGE, "paillier: slot %zu beyond %u sums of %u-bit values", i,
                            pp->summands, pp->value_bits);
            goto out;
        }
        v[i] = get_i64(d);
        /* exact: acc - d is a multiple of 2^w */
        mpz_sub(acc, acc, d);
        mpz_fdiv_q_2exp(acc, acc, w);
    }
    if (mpz_sgn(acc) != 0) {
        rc = fs_err_set(err, FS_ERANGE, "paillier: plaintext has data above slot %zu", count);
    }
out:
    mpz_clear(acc);
    mpz_clear(d);
    mpz_clear(pw);
    mpz_clear(lo);
    mpz_clear(hi);
    return rc;
}
