/* Seed-mode decryptions of the noise exchange, for noise_exchange.c only.
 *
 * A round's parties other than j (the plan) are grouped `slots` at a time
 * in ascending id order, the t-th of a group in slot t: its selector
 * encrypted 2^(256 t) (preshift), or its answer is raised to 2^(256 t) here
 * (selectors of 1, restored from before). Each group's answers form one
 * packed plaintext, decrypted once; a member that did not answer leaves
 * its slot 0 (it must be: a non-zero one is FS_EFORMAT). Groups are
 * independent, so they decrypt on several threads. While the answers come
 * in, a group whose members have all answered is decrypted in the
 * background; the final call reuses every such group and decrypts the
 * others at once. Decryption is deterministic: the seeds, and any error,
 * are those of decrypting group by group. */
#ifndef FS_PROTO_NOISEX_DEC_H
#define FS_PROTO_NOISEX_DEC_H

#include <stddef.h>
#include <stdint.h>

#include "../core/err.h"
#include "../crypto/paillier.h"

#define NXD_SEED_LEN 32

/* What a round's decryptions read: borrowed, fixed while the round is open. */
struct nxd_src {
    const fs_paillier_sk *sk;
    const fs_paillier_pk *pk;
    uint8_t *const *resp; /* k entries: NULL until the party answers, then fixed */
    size_t ct_size;
    size_t slots;     /* seeds (NXD_SEED_LEN bytes each) per packed plaintext */
    int mod_p;        /* the packed plaintext is below p: decrypt modulo p alone */
    int preshift;     /* selectors carry the slots: answers are multiplied, not shifted */
    unsigned threads; /* at most this many threads decrypt at once (>= 1) */
};

/* A round's background decryptions. */
struct nxd;

/*
 * Background decryptions of a round of k parties where plan (np entries,
 * ascending) are the indices of every party but j. Parties that answered
 * already (src->resp) count as answered.
 * @return 0, FS_EINVAL, FS_ENOMEM.
 */
int nxd_new(const struct nxd_src *src, const size_t *plan, size_t np, size_t k, struct nxd **out,
            struct fs_err *err);

/* Party index q's answer is in src->resp: a group it completes starts decrypting. */
void nxd_answered(struct nxd *d, size_t q);

/* Groups decrypted in the background so far (for tests). */
size_t nxd_ahead(struct nxd *d);

/*
 * The seeds of the parties of plan[0..np) (ascending indices, j excluded:
 * the plan nxd_new had, when d) that answered (src->resp), in plan order:
 * groups d decrypted ahead are reused, the others with an answer decrypted
 * now on up to src->threads threads. d may be NULL (none ahead).
 * *decryptions: the groups decrypted; *ahead: those decrypted before this
 * call.
 * @return 0, FS_EFORMAT (a group exceeds its slots, or a slot without an
 *         answer is not 0), FS_EINVAL (a ciphertext that does not
 *         decrypt), FS_ENOMEM.
 */
int nxd_seeds(struct nxd *d, const struct nxd_src *src, const size_t *plan, size_t np,
              uint32_t round, uint8_t (*seeds)[NXD_SEED_LEN], unsigned *decryptions,
              unsigned *ahead, struct fs_err *err);

/* Stop and join the background threads, wipe the plaintexts, free. Accepts NULL. */
void nxd_free(struct nxd *d);

#endif
