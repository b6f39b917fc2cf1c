/* Shared between secagg_client.c, secagg_server.c and secagg_common.c only. */
#ifndef FS_PROTO_SECAGG_INTERNAL_H
#define FS_PROTO_SECAGG_INTERNAL_H

#include <pthread.h>

#include "../crypto/aead.h"
#include "../crypto/prg.h"
#include "../crypto/x25519.h"
#include "secagg.h"

/* The server state (secagg_server.c; windows: secagg_shard.c). */
struct sparty {
    int in_u1;
    int in_u2;
    int dropped; /* mask key reconstructed: out for the rest of the job */
    struct fs_secagg_adv adv;
    struct fs_secagg_share_ct *cts_by_to; /* n+1 entries, len 0 = absent */
    /* per aggregation */
    int active;
    int complete;
    int in_u3;
    int in_u4;
    int revealed;
    uint64_t chunks_got;
    uint8_t *chunk_have;  /* CHUNK_NONE, CHUNK_HAVE or CHUNK_PENDING (streamed, in progress) */
    uint64_t *chunk_prog; /* a pending chunk's words folded so far */
    uint8_t *chunk_hash;  /* nchunks x 32 */
    uint8_t sig[FS_SECAGG_SIG_LEN];
    uint8_t reveal_hash[32];
};

#define SA_STRIPES     64
#define SA_BLOCK_WORDS 4096 /* 32 KiB of the sum per lock */

struct fs_secagg_server {
    struct fs_secagg_config cfg;
    struct fs_secagg_chunk_store store;
    int has_store;
    enum fs_secagg_phase phase;
    char abort_reason[256];
    struct sparty *p; /* 1..n */
    struct fs_secagg_adv *roster;
    size_t nroster;
    uint8_t session[32];
    uint32_t round;
    int has_round;
    uint64_t len;       /* words the sum holds: the window's */
    uint64_t total_len; /* words of the whole vector: every key derivation uses it */
    uint64_t win_off;   /* the window's first word in the whole vector (streams at win_off + i) */
    int data_only;      /* a shard's window: no key phases, unmasked by a plan */
    uint64_t nchunks;
    uint64_t *sum;
    uint64_t *scratch;
    uint32_t *set[5]; /* 0 active, 3 U3, 4 U4 */
    size_t nset[5];
    uint8_t (*sigs)[FS_SECAGG_SIG_LEN];
    uint8_t *u3msg;
    size_t u3msg_len;
    struct fs_shamir_share **rv; /* per party id: shares about it, up to |U4| */
    size_t *nrv;
    unsigned threads;                   /* for unmasking; 1 = the caller's thread only */
    uint8_t (*pins)[FS_SECAGG_KEY_LEN]; /* pinned identities, n; NULL = unpinned */
    uint32_t *pos; /* SecAgg+ ring positions (n+1), from the session; NULL = full graph */
    /* streamed uploads (secagg.h): ingest_mu guards gen, folding, uploads,
     * zombie and chunk_prog; stripe[b % SA_STRIPES] guards block b of the sum */
    pthread_mutex_t ingest_mu;
    pthread_cond_t ingest_cv;
    uint64_t gen;     /* bumped to void every pending upload */
    unsigned folding; /* folds in progress */
    unsigned uploads; /* begun and not released */
    int zombie;       /* freed, the shell waits for the last release */
    pthread_mutex_t stripe[SA_STRIPES];
};

enum { CHUNK_NONE = 0, CHUNK_HAVE = 1, CHUNK_PENDING = 2 };

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

/* sa_share_key and sa_pair_mask_key with the private key loaded once
 * (crypto/x25519.h): the same keys. */
int sa_share_key_k(const fs_x25519_key *my_c, const uint8_t peer_c_pk[32],
                   const uint8_t session[32], uint8_t key[32], struct fs_err *err);

int sa_pair_mask_key_k(const fs_x25519_key *my_s, const uint8_t peer_s_pk[32],
                       const uint8_t session[32], uint32_t r, uint64_t len, uint8_t key[32],
                       struct fs_err *err);

int sa_self_mask_key(const uint8_t seed[32], const uint8_t session[32], uint32_t party, uint32_t r,
                     uint64_t len, uint8_t key[32], struct fs_err *err);

/* v[0..len) += sum_s sign_s * PRG(key_s)[word0 .. word0 + len) (mod 2^64):
 * every stream over one cache-sized piece of v before the next piece, the
 * pieces shared by up to `threads` threads (1 = the calling thread only).
 * The result does not depend on the thread count. */
int sa_prg_apply_streams(const struct fs_prg_term *st, size_t ns, uint64_t word0, uint64_t *v,
                         uint64_t len, unsigned threads, struct fs_err *err);

/* Server internals shared with secagg_shard.c (secagg_server.c). */

/* Start aggregation r of a total_len-word vector whose window [win_off,
 * win_off + win_len) this server sums (the whole vector: 0, total_len). */
int sa_begin_window(fs_secagg_server *s, uint32_t r, uint64_t total_len, uint64_t win_off,
                    uint64_t win_len, struct fs_err *err);

/* Close R2; a party counts as complete only when complete here and
 * elsewhere[v - 1] != 0 (elsewhere NULL: here only). */
int sa_close_masked(fs_secagg_server *s, const uint8_t *elsewhere, struct fs_err *err);

/* The unmask plan of the current aggregation (phase UNMASK): new array of
 * *n streams (wipe and free: fs_secagg_plan_free). Aborts the job when a
 * seed or key does not reconstruct. */
int sa_unmask_plan(fs_secagg_server *s, struct fs_prg_term **plan, size_t *n, struct fs_err *err);

/* Apply a plan to the window's sum (word0 = win_off) and end the
 * aggregation: parties active but not in U3 are dropped for good, phase
 * READY. On failure the job aborts. */
int sa_apply_plan(fs_secagg_server *s, const struct fs_prg_term *plan, size_t n,
                  struct fs_err *err);

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
