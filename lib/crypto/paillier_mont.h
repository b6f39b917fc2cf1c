/* Fixed-length Montgomery arithmetic modulo an odd modulus m of n limbs,
 * R = 2^(GMP_NUMB_BITS n), for the Paillier code (lib/crypto/paillier*.c)
 * only. Every operation runs the same instructions and touches the same
 * memory whatever the values of its operands and of m (for one n):
 * products by mpn_sec_mul / mpn_sec_sqr, the reduction by mpn_addmul_1 rows
 * and a conditional subtraction (mpn_cnd_sub_n), reductions of wider
 * numbers by mpn_sec_div_r. So the modulus may be secret (p^2, q^2) and so
 * may the operands.
 *
 * Values in Montgomery form are x R mod m, kept "almost reduced": any
 * n-limb value below R stands for its residue; fs_mont_from returns the
 * canonical residue in [0, m). Results may alias operands. tp is caller
 * scratch of fs_mont_scratch limbs (one per thread). */
#ifndef FS_CRYPTO_PAILLIER_MONT_H
#define FS_CRYPTO_PAILLIER_MONT_H

#include <gmp.h>

#include "../core/err.h"

struct fs_mont {
    mp_size_t n;    /* limbs of m */
    mp_limb_t *m;   /* the modulus, odd, top limb non-zero */
    mp_limb_t minv; /* -m^-1 mod 2^GMP_NUMB_BITS */
    mp_limb_t *r2;  /* R^2 mod m */
    mp_limb_t *one; /* R mod m: 1 in Montgomery form */
    mp_size_t itch; /* scratch limbs of one operation */
};

/** Set up mt for m (odd, > 1). @return 0, FS_EINVAL (m even), FS_ENOMEM. */
FS_WUR int fs_mont_init(struct fs_mont *mt, mpz_srcptr m, struct fs_err *err);

/** Wipe and free (accepts a zeroed struct). */
void fs_mont_clear(struct fs_mont *mt);

/** Scratch limbs every operation below needs. */
mp_size_t fs_mont_scratch(const struct fs_mont *mt);

/** r = a b R^-1 mod m (a, b, r: n limbs, a, b < R). */
void fs_mont_mul(const struct fs_mont *mt, mp_limb_t *r, const mp_limb_t *a, const mp_limb_t *b,
                 mp_limb_t *tp);

/** r = a^2 R^-1 mod m. */
void fs_mont_sqr(const struct fs_mont *mt, mp_limb_t *r, const mp_limb_t *a, mp_limb_t *tp);

/** r = x R mod m for x of xn limbs (any value; xn public): into Montgomery form. */
void fs_mont_to(const struct fs_mont *mt, mp_limb_t *r, const mp_limb_t *x, mp_size_t xn,
                mp_limb_t *tp);

/** r = a R^-1 mod m, canonical (0 <= r < m): out of Montgomery form. */
void fs_mont_from(const struct fs_mont *mt, mp_limb_t *r, const mp_limb_t *a, mp_limb_t *tp);

/** r = x mod m, canonical, for x of xn limbs (xn public). */
void fs_mont_mod(const struct fs_mont *mt, mp_limb_t *r, const mp_limb_t *x, mp_size_t xn,
                 mp_limb_t *tp);

#endif
