/* Lim-Lee fixed-base comb for DJN randomizers hs^a mod n^2 (see
 * fs_paillier_djn_new_comb): the L-bit exponent is read as TEETH rows of
 * BLOCKS blocks of blen bits; for block b the table holds, for every TEETH-bit
 * index j, prod_i g_(i,b)^(j_i) with g_(i,b) = hs^(2^(i span + b blen)),
 * span = BLOCKS blen. Then
 *   hs^a = prod_(k = blen-1 .. 0) (...)^2 prod_b T_b[column (b, k) of a],
 * blen - 1 squarings and BLOCKS blen products (446 bits: 37 and 76),
 * against ceil(L/w) products for a w-bit window table, and the tables cost
 * about L squarings and BLOCKS 2^TEETH products to build (a w = 3 window
 * table: ceil(L/3) 8 products). Entries are selected with
 * mpn_sec_tabselect, as in the window table. */
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>

#include "paillier_int.h"

#define TEETH   6u
#define BLOCKS  2u
#define ENTRIES (1u << TEETH)

struct fs_paillier_comb {
    mpz_srcptr n2;    /* borrowed from the public key */
    unsigned blen;    /* bits per block */
    mp_size_t limbs;  /* limbs of one entry: size of n^2 */
    mp_limb_t *table; /* BLOCKS x ENTRIES x limbs */
};

static void store(mp_limb_t *dst, const mpz_t x, mp_size_t limbs)
{
    size_t sz = mpz_size(x);

    memcpy(dst, mpz_limbs_read(x), sz * sizeof *dst);
    memset(dst + sz, 0, ((size_t)limbs - sz) * sizeof *dst);
}

void fs_paillier_comb_free(struct fs_paillier_comb *cb)
{
    if (cb == NULL) {
        return;
    }
    free(cb->table); /* public values (powers of hs) */
    free(cb);
}

size_t fs_paillier_comb_table_bytes(const struct fs_paillier_comb *cb)
{
    return (size_t)BLOCKS * ENTRIES * (size_t)cb->limbs * sizeof(mp_limb_t);
}

int fs_paillier_comb_build(struct fs_paillier_comb **out, mpz_srcptr n2, mpz_srcptr hs,
                           unsigned exp_bits, struct fs_err *err)
{
    struct fs_paillier_comb *cb = calloc(1, sizeof *cb);
    mpz_t g[TEETH][BLOCKS];
    mpz_t cur;
    mpz_t e;
    mpz_t view;
    unsigned span;
    unsigned last;

    *out = NULL;
    if (cb == NULL) {
        return fs_err_set(err, FS_ENOMEM, "paillier: out of memory");
    }
    cb->n2 = n2;
    cb->blen = (exp_bits + TEETH * BLOCKS - 1) / (TEETH * BLOCKS);
    cb->limbs = (mp_size_t)mpz_size(n2);
    cb->table = malloc((size_t)BLOCKS * ENTRIES * (size_t)cb->limbs * sizeof *cb->table);
    if (cb->table == NULL) {
        free(cb);
        return fs_err_set(err, FS_ENOMEM, "paillier: out of memory");
    }
    span = BLOCKS * cb->blen;
    last = (TEETH - 1) * span + (BLOCKS - 1) * cb->blen;
    /* g[i][b] = hs^(2^(i span + b blen)), one chain of squarings */
    mpz_init_set(cur, hs);
    for (unsigned k = 0; k <= last; k++) {
        if (k % cb->blen == 0) {
            unsigned i = k / span;
            unsigned b = (k % span) / cb->blen;
            mpz_init_set(g[i][b], cur);
        }
        if (k < last) {
            mpz_mul(cur, cur, cur);
            mpz_mod(cur, cur, n2);
        }
    }
    mpz_clear(cur);
    mpz_init(e);
    for (unsigned b = 0; b < BLOCKS; b++) {
        mp_limb_t *tb = cb->table + (size_t)b * ENTRIES * (size_t)cb->limbs;
        mpz_set_ui(e, 1);
        store(tb, e, cb->limbs);
        for (unsigned j = 1; j < ENTRIES; j++) {
            unsigned top = 0;
            while ((j >> (top + 1)) != 0) {
                top++;
            }
            unsigned rest = j & ~(1u << top);
            /* entry j = entry (j without its top bit) * g[top][b] */
            if (rest == 0) {
                mpz_set(e, g[top][b]);
            } else {
                mpz_mul(e, mpz_roinit_n(view, tb + (size_t)rest * (size_t)cb->limbs, cb->limbs),
                        g[top][b]);
                mpz_mod(e, e, n2);
            }
            store(tb + (size_t)j * (size_t)cb->limbs, e, cb->limbs);
        }
    }
    mpz_clear(e);
    for (unsigned i = 0; i < TEETH; i++) {
        for (unsigned b = 0; b < BLOCKS; b++) {
            mpz_clear(g[i][b]);
        }
    }
    *out = cb;
    return 0;
}

int fs_paillier_comb_pow(const struct fs_paillier_comb *cb, mpz_t out, const mpz_t a,
                         struct fs_err *err)
{
    const mp_size_t limbs = cb->limbs;
    const mp_limb_t *al = mpz_limbs_read(a);
    const size_t na = mpz_size(a);
    const unsigned span = BLOCKS * cb->blen;
    mp_limb_t *sel = malloc((size_t)limbs * sizeof *sel);
    mpz_t acc;
    mpz_t view;
    int first = 1;

    if (sel == NULL) {
        return fs_err_set(err, FS_ENOMEM, "paillier: out of memory");
    }
    mpz_init(acc);
    for (unsigned k = cb->blen; k-- > 0;) {
        if (!first) {
            mpz_mul(acc, acc, acc);
            mpz_mod(acc, acc, cb->n2);
        }
        for (unsigned b = 0; b < BLOCKS; b++) {
            unsigned idx = 0;
            for (unsigned i = 0; i < TEETH; i++) {
                idx |= fs_paillier_digit(al, na, (size_t)i * span + (size_t)b * cb->blen + k, 1)
                       << i;
            }
            /* reads every entry: the column of a does not show */
            mpn_sec_tabselect(sel, cb->table + (size_t)b * ENTRIES * (size_t)limbs, limbs,
                              (mp_size_t)ENTRIES, (mp_size_t)idx);
            if (first) {
                mpz_set(acc, mpz_roinit_n(view, sel, limbs));
                first = 0;
            } else {
                mpz_mul(acc, acc, mpz_roinit_n(view, sel, limbs));
                mpz_mod(acc, acc, cb->n2);
            }
        }
    }
    mpz_set(out, acc);
    OPENSSL_cleanse(acc->_mp_d, (size_t)acc->_mp_alloc * sizeof(mp_limb_t));
    mpz_clear(acc);
    OPENSSL_cleanse(sel, (size_t)limbs * sizeof *sel);
    free(sel);
    return 0;
}
