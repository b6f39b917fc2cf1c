/* Internals shared by lib/crypto/paillier*.c (not part of the API). */
#ifndef FS_CRYPTO_PAILLIER_INT_H
#define FS_CRYPTO_PAILLIER_INT_H

#include <gmp.h>
#include <stddef.h>

#include "paillier.h"

struct fs_paillier_pk {
    mpz_t n;
    mpz_t n2;
    mpz_t half; /* (n - 1) / 2: the largest non-negative signed plaintext */
    unsigned bits;
    size_t nbytes;
};

struct fs_paillier_sk {
    struct fs_paillier_pk pub;
    mpz_t p;
    mpz_t q;
    mpz_t p2;
    mpz_t q2;
    mpz_t pm1;  /* p - 1 */
    mpz_t qm1;  /* q - 1 */
    mpz_t hp;   /* L_p(g^(p-1) mod p^2)^-1 mod p */
    mpz_t hq;   /* L_q(g^(q-1) mod q^2)^-1 mod q */
    mpz_t qinv; /* q^-1 mod p */
    mpz_t lambda;
    mpz_t mu; /* L(g^lambda mod n^2)^-1 mod n */
};

/* The CRT form of a DJN randomizer (paillier_crt.c). */
struct fs_paillier_crt;
/* A Lim-Lee comb for hs (paillier_comb.c). */
struct fs_paillier_comb;

struct fs_paillier_djn {
    const fs_paillier_pk *pk; /* borrowed */
    mpz_t hs;
    unsigned exp_bits; /* L */
    unsigned window;   /* w, 0 = no table */
    unsigned windows;  /* ceil(L / w) */
    mp_size_t limbs;   /* limbs of one table entry: size of n^2 */
    mp_limb_t *table;  /* windows x 2^w entries x limbs (NULL with crt) */
    size_t table_limbs;
    struct fs_paillier_crt *crt;   /* fs_paillier_djn_new_crt: tables modulo p^2 and q^2 */
    struct fs_paillier_comb *comb; /* fs_paillier_djn_new_comb */
};

/* w-bit digit of a (limb array a[0..na)) starting at bit pos (w < GMP_NUMB_BITS). */
static inline unsigned fs_paillier_digit(const mp_limb_t *a, size_t na, size_t pos, unsigned w)
{
    size_t li = pos / GMP_NUMB_BITS;
    unsigned off = (unsigned)(pos % GMP_NUMB_BITS);
    mp_limb_t v = 0;

    if (li < na) {
        v = a[li] >> off;
        if (off + w > GMP_NUMB_BITS && li + 1 < na) {
            v |= a[li + 1] << (GMP_NUMB_BITS - off);
        }
    }
    return (unsigned)(v & (((mp_limb_t)1 << w) - 1));
}

/**
 * CRT state for sk: Montgomery contexts modulo p^2 and q^2 and the Garner
 * constant. @return 0, FS_EINVAL (p^2 and q^2 of different limb counts:
 * the caller falls back to arithmetic modulo n^2), FS_ENOMEM.
 */
FS_WUR int fs_paillier_crt_new(struct fs_paillier_crt **out, const fs_paillier_sk *sk,
                               struct fs_err *err);

/** out = h^n mod n^2 (h secret, 0 < h < n), by halves modulo p^2 and q^2. */
FS_WUR int fs_paillier_crt_nth_power(const struct fs_paillier_crt *c, mpz_t out, const mpz_t h,
                                     struct fs_err *err);

/** Fixed-base tables of hs modulo p^2 and q^2, windows of w bits (1..MAX_WINDOW) over L bits. */
FS_WUR int fs_paillier_crt_build(struct fs_paillier_crt *c, const mpz_t hs, unsigned exp_bits,
                                 unsigned window, struct fs_err *err);

/** out = hs^a mod n^2 for 0 <= a < 2^L (a secret) through the tables. */
FS_WUR int fs_paillier_crt_pow(const struct fs_paillier_crt *c, mpz_t out, const mpz_t a,
                               struct fs_err *err);

/** Bytes of the two tables. */
size_t fs_paillier_crt_table_bytes(const struct fs_paillier_crt *c);

/**
 * out = prod_t c[t]^(2^(shift t)) mod x2 (t = 0 .. cnt-1; x2 = p^2 or q^2,
 * secret) by Horner's rule in Montgomery form: shift squarings per
 * ciphertext after the top one (shift 0: the plain product).
 * @return 0, FS_EINVAL, FS_ENOMEM.
 */
FS_WUR int fs_paillier_crt_horner(mpz_t out, mpz_srcptr x2, const mpz_srcptr *c, size_t cnt,
                                  unsigned shift, struct fs_err *err);

/** Wipe and free. Accepts NULL. */
void fs_paillier_crt_free(struct fs_paillier_crt *c);

/** The comb of hs modulo n2 (borrowed: must outlive it) for exponents of exp_bits bits. */
FS_WUR int fs_paillier_comb_build(struct fs_paillier_comb **out, mpz_srcptr n2, mpz_srcptr hs,
                                  unsigned exp_bits, struct fs_err *err);

/** out = hs^a mod n^2 for 0 <= a < 2^L (a secret). */
FS_WUR int fs_paillier_comb_pow(const struct fs_paillier_comb *cb, mpz_t out, const mpz_t a,
                                struct fs_err *err);

size_t fs_paillier_comb_table_bytes(const struct fs_paillier_comb *cb);
void fs_paillier_comb_free(struct fs_paillier_comb *cb);

#endif
