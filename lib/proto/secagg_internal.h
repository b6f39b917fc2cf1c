/* Shared between secagg_client.c, secagg_server.c and secagg_common.c only. */
#ifndef FS_PROTO_SECAGG_INTERNAL_H
#define FS_PROTO_SECAGG_INTERNAL_H

#include "../crypto/aead.h"
#include "../crypto/prg.h"
#include "secagg.h"

#define SA_ADV_MSG_MAX  160
#define SA_SHARE_AD_LEN 72

void sa_put_u32(uint8_t *p, uint32_t v);
uint32_t sa_get_u32(const uint8_t *p);
uint32_t sa_chunk_words(const struct fs_secagg_config *cfg);
size_t sa_share_pt_len(const struct fs_secagg_config *cfg);

/* The bytes an advertisement's signature covers (the mask keys by their
 * SHA-256), *len of them; FS_EINVAL when a does not carry one mask key per
 * aggregation. */
int sa_adv_msg(const struct fs_secagg_config *cfg, const struct fs_secagg_adv *a,
               uint8_t buf[SA_ADV_MSG_MAX], size_t *len, struct fs_err *err);

/* Session id over the parameters and the roster (sorted by id). */
int sa_session_id(const struct fs_secagg_config *cfg, const struct fs_secagg_adv *roster, size_t k,
                  uint8_t out[32], struct fs_err *err);

/* The bytes a consistency signature covers (new buffer, free()). ids sorted. */
int sa_u3_msg(const uint8_t session[32], uint32_t r, uint64_t len, const uint32_t *ids, size_t k,
              uint8_t **out, size_t *out_len, struct fs_err *err);

void sa_share_ad(const uint8_t session[32], const struct fs_secagg_config *cfg, uint32_t from,
                 uint32_t to, uint8_t ad[SA_SHARE_AD_LEN]);

int sa_share_key(const uint8_t my_c_sk[32], const uint8_t peer_c_pk[32], const uint8_t session[32],
                 uint8_t key[32], struct fs_err *err);

int sa_pair_mask_key(const uint8_t my_s_sk[32], const uint8_t peer_s_pk[32],
                     const uint8_t session[32], uint32_t r, uint64_t len, uint8_t key[32],
                     struct fs_err *err);

int sa_self_mask_key(const uint8_t seed[32], const uint8_t session[32], uint32_t party, uint32_t r,
                     uint64_t len, uint8_t key[32], struct fs_err *err);

/* v[0..len) += sum_s sign_s * PRG(key_s)[0..len) (mod 2^64): every stream
 * over one cache-sized piece of v before the next piece, the pieces shared by
 * up to `threads` threads (1 = the calling thread only). The result does not
 * depend on the thread count. */
int sa_prg_apply_streams(const struct fs_prg_term *st, size_t ns, uint64_t *v, uint64_t len,
                         unsigned threads, struct fs_err *err);

/* Sorted copy of a party-id set, checked (1..n, no repeats, non-empty). */
int sa_sorted_ids(const uint32_t *ids, size_t k, uint32_t n, uint32_t **out, struct fs_err *err);

/* The Shamir threshold of a party's shares: cfg->share_t with a SecAgg+
 * graph, else cfg->t. */
uint32_t sa_share_t(const struct fs_secagg_config *cfg);

/* Pinned identities: 0 when pins is NULL (unpinned) or a->sign_pk is
 * pins[a->id - 1] (a->id in 1..n, checked by the caller), else FS_EAUTH
 * with both fingerprints in err. */
int sa_pin_check(const uint8_t (*pins)[FS_SECAGG_KEY_LEN], const struct fs_secagg_adv *a,
                 struct fs_err *err);

#endif
