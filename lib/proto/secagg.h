/* Secure aggregation (Bonawitz et al. 2017, as summarised in Liu et al.
 * 2023, Appendix A) as two pure state machines, one per side. No sockets, files or
 * clocks: callers move the messages (HTTP, or a unit test's loop) and decide
 * when a round closes (deadline or everyone in).
 *
 * One job = one key setup, then `aggregations` sums:
 *   R0 AdvertiseKeys   client: fs_secagg_client_advertise  -> server: add_adv, close_adv
 *                      (identity key, share-encryption key, one mask key per aggregation)
 *   R1 ShareKeys       client: share_keys(roster)          -> server: add_shares, close_shares
 *                      client: receive_shares(cts for me)
 * and for each aggregation r = 0, 1, ... (server: begin(r, len)):
 *   R2 MaskedInput     client: begin(r, len, active), mask(chunks) -> server: add_masked,
 * close_masked R3 Consistency     client: consistency(U3)              -> server: add_consistency,
 * close_consistency R4 Unmasking       client: unmask(U4 signatures)        -> server: add_reveals,
 * finish -> sum
 *
 * Choices: X25519 key agreement, Ed25519 signatures,
 * AES-256-GCM share encryption under HKDF of the pairwise secret (ids and the
 * session bound in the associated data), masks from AES-256-CTR keyed by an
 * HKDF of (secret, session id, aggregation index, vector length), Shamir over
 * the field of lib/crypto/shamir.h, arithmetic in Z_2^64. The session id is a
 * SHA-256 of the job id, the parameters and every advertised key.
 *
 * Fresh keys per aggregation: every aggregation r has its own X25519 mask
 * key pair per party (s_sk[r], s_pks[r], all advertised and signed in R0) and
 * its own self-mask seed; R1 shares each of them separately. The pairwise
 * masks of aggregation r come from s_sk[r] only. So whatever one aggregation
 * reveals about a party (its seed if it survives, its mask key s_sk[r] if it
 * drops) says nothing about any other aggregation's masks.
 *
 * The rule both sides enforce, across the whole job and not only within one
 * aggregation: for one party and one aggregation, never both its self-mask
 * seed and its mask key. A client reveals, in aggregation r, a seed share
 * (survivor) or a share of s_sk[r] (dropped), never both, and a share of
 * s_sk[r] only for r; the server accepts exactly one kind per party per
 * aggregation and checks a reconstructed key against s_pks[r]. Without
 * per-aggregation keys a party that survives aggregation r (seed revealed)
 * and drops in r' (key revealed) would be fully unmasked in r.
 * A party whose mask key was reconstructed (it dropped during an
 * aggregation) stays dropped for the rest of the job.
 *
 * Threat model: honest-but-curious server, and clients that may drop at any
 * point. Identity (signing) keys are pinned by the job when it says so (the
 * service layer checks advertisements and rosters against the pins);
 * otherwise they are trusted on first use. Clients refuse to reveal both
 * kinds of share for the same peer and check that t parties signed the same
 * survivor set (in all-inputs mode, below: that it is the whole active set). */
/*
 * All-inputs aggregations (cfg.all_inputs = 1). Bonawitz et al. add the
 * consistency round R3 against a server that lies about who dropped: it
 * tells some parties "u dropped" (they reveal shares of u's mask key) and
 * others "u survived" (they reveal shares of u's self-mask seed), collects
 * enough of both and unmasks u's input alone. That attack needs some party
 * to reveal a mask-key share. In a job where every active party's masked
 * input is required (the job fails when one is missing), a client never
 * reveals one: it unmasks only when the survivor set U3 it is shown is
 * exactly the active set of that aggregation, and then reveals self-mask
 * seed shares only, which an honest run hands the server anyway. Whatever
 * the server claims, it collects no mask-key share and can unmask no
 * individual input; signatures on U3 would protect nothing. So in this
 * mode R3 does not run:
 *   R2 MaskedInput     as above; server: close_masked fails (the job
 *                      aborts) unless U3 is the whole active set, and
 *                      opens R4 with U4 = U3
 *   R4 Unmasking       client: unmask_all(U3)              -> server: add_reveals, finish
 * The consistency entry points refuse (FS_ESTATE) in this mode, and
 * fs_secagg_client_unmask_all never produces a mask-key share. A server
 * and a client that disagree on the mode derive different session ids and
 * fail at the key exchange.
 */
#ifndef FS_PROTO_SECAGG_H
#define FS_PROTO_SECAGG_H

#include <stddef.h>
#include <stdint.h>

#include "../core/err.h"
#include "../crypto/prg.h"
#include "../crypto/shamir.h"

#define FS_SECAGG_MAX_PARTIES      1000
#define FS_SECAGG_MAX_AGGREGATIONS 100000
#define FS_SECAGG_KEY_LEN          32
#define FS_SECAGG_SIG_LEN          64
#define FS_SECAGG_DEFAULT_CHUNK    65536 /* words per upload chunk */

struct fs_secagg_config {
    uint32_t n;            /* expected parties, ids 1..n */
    uint32_t t;            /* threshold: survivors needed at every round, 1 <= t <= n */
    uint32_t aggregations; /* sums this job will run; keys and seeds for all are shared in R1 */
    uint32_t chunk_words;  /* upload chunk size in uint64 words; 0 = FS_SECAGG_DEFAULT_CHUNK */
    uint8_t job_id[32];    /* binds every key, signature and mask to this job */
    /* SecAgg+ (see below): 0 = every pair of parties masks (the full graph);
     * else the even degree k of the neighbour graph, 2 <= k <= n - 2 */
    uint32_t degree;
    uint32_t share_t; /* with degree: Shamir threshold among a party's neighbours, 1..degree */
    /* 1: every aggregation needs every active party's masked input (see
     * "All-inputs aggregations" above): no consistency round; 0: the four
     * rounds. Bound into the session id. */
    uint32_t all_inputs;
};

/* SecAgg+ (Bell, Bonawitz, Gascon, Lepoint, Raykova, "Secure Single-Server
 * Aggregation with (Poly)Logarithmic Overhead", CCS 2020). With cfg.degree
 * = k > 0 a party exchanges shares and pairwise masks only with its k
 * neighbours in a Harary graph H(n, k) (party at ring position i is a
 * neighbour of the positions i +- 1 .. i +- k/2 mod n) whose ring positions
 * are a random permutation of the ids. The permutation is a Fisher-Yates
 * shuffle driven by AES-256-CTR under HKDF(session id): both sides compute
 * it after R0, from the session id, which hashes the job id, the
 * parameters and every party's freshly drawn, signed R0 keys. Nobody knows
 * the graph before every party in the roster has committed to its keys; a
 * server could only re-draw it by leaving advertisers out of the roster
 * (outside the honest-but-curious model these state machines assume).
 * A party's mask key and self-mask seed are split among itself and its
 * neighbours with threshold cfg.share_t; a dropped party's pairwise masks
 * come back from share_t of its neighbours' shares, or the aggregation
 * aborts naming the party. cfg.t stays the job's global minimum of
 * parties at every round.
 *
 * fs_secagg_plus_params picks (k, share_t) as in the paper's analysis: the
 * smallest even k such that (1) the graph of honest survivors stays
 * connected except with probability 2^-(sigma+1) (union bound over the
 * pairs of k/2-long runs of corrupt-or-dropped ring positions), (2)
 * share_t = t1 + 1 where t1 bounds a party's corrupt neighbours (a
 * hypergeometric tail below 2^-(sigma+1)/n), and (3) a party keeps at
 * least share_t surviving neighbours except with probability 2^-eta/n; with
 * gamma the fraction of parties colluding with the server, delta the
 * fraction dropping out. */
#define FS_SECAGG_PLUS_GAMMA 0.2 /* corrupt fraction the parameters tolerate */
#define FS_SECAGG_PLUS_DELTA 0.1 /* dropout fraction the parameters tolerate */
#define FS_SECAGG_PLUS_SIGMA 40  /* statistical security, bits */
#define FS_SECAGG_PLUS_ETA   30  /* correctness, bits */
#define FS_SECAGG_PLUS_MIN_N 20  /* jobs pick "plus" by default from this many parties */

/* R0 message: a party's public keys, signed with its identity key.
 * s_pks holds one X25519 mask public key per aggregation (nkeys of them,
 * nkeys == cfg.aggregations). Who owns s_pks depends on where the struct came
 * from: borrowed from the client (fs_secagg_client_advertise) or the server
 * (fs_secagg_server_roster), owned by the holder after fs_secagg_adv_copy or a
 * wire decode (release with fs_secagg_adv_clear). */
struct fs_secagg_adv {
    uint32_t id;
    uint32_t nkeys;                     /* mask keys in s_pks */
    uint8_t sign_pk[FS_SECAGG_KEY_LEN]; /* Ed25519 identity */
    uint8_t c_pk[FS_SECAGG_KEY_LEN];    /* X25519, encrypts shares */
    uint8_t *s_pks;                     /* nkeys x 32: X25519 mask key of aggregation r at r*32 */
    uint8_t sig[FS_SECAGG_SIG_LEN];     /* over job id, id, nkeys, c_pk, SHA-256(s_pks) */
};

/* R1 message: the encrypted bundle of shares `from` made for `to`. */
struct fs_secagg_share_ct {
    uint32_t from;
    uint32_t to;
    size_t len;
    uint8_t *ct; /* owned by whoever owns the array; see fs_secagg_share_cts_free */
};

enum fs_secagg_share_kind {
    FS_SECAGG_SELF_SEED = 1, /* share of a survivor's self-mask seed for this aggregation */
    FS_SECAGG_MASK_KEY = 2   /* share of a dropped party's mask private key */
};

/* R4 message element: one share about party `about`. */
struct fs_secagg_reveal {
    uint32_t about;
    uint8_t kind; /* enum fs_secagg_share_kind */
    uint8_t share[FS_SHAMIR_SHARE_LEN];
};

/** Deep copy: dst gets its own s_pks (release with fs_secagg_adv_clear). */
FS_WUR int fs_secagg_adv_copy(struct fs_secagg_adv *dst, const struct fs_secagg_adv *src,
                              struct fs_err *err);

/** Free an owned s_pks and zero the struct. Accepts NULL. */
void fs_secagg_adv_clear(struct fs_secagg_adv *a);

/** 1 when both advertise the same keys and signature, else 0. */
int fs_secagg_adv_equal(const struct fs_secagg_adv *a, const struct fs_secagg_adv *b);

/** The mask public key a advertised for aggregation r (NULL if r >= nkeys). Borrowed. */
const uint8_t *fs_secagg_adv_mask_pk(const struct fs_secagg_adv *a, uint32_t r);

/** Check a configuration (ranges, t <= n, caps). @return 0 or FS_EINVAL. */
FS_WUR int fs_secagg_config_check(const struct fs_secagg_config *cfg, struct fs_err *err);

/**
 * SecAgg+ parameters for n parties (see above): the smallest even degree k,
 * 2 <= k <= n - 2, and its share threshold t, for corrupt fraction gamma and
 * dropout fraction delta (gamma + delta <= 0.9) at FS_SECAGG_PLUS_SIGMA /
 * FS_SECAGG_PLUS_ETA. @return 0, or FS_EINVAL when no k < n - 1 qualifies.
 */
FS_WUR int fs_secagg_plus_params(uint32_t n, double gamma, double delta, uint32_t *k, uint32_t *t,
                                 struct fs_err *err);

/** Set cfg->degree and cfg->share_t for cfg->n with the default gamma and delta. */
FS_WUR int fs_secagg_config_plus(struct fs_secagg_config *cfg, struct fs_err *err);

/**
 * The SecAgg+ ring positions of a session: pos[id] in 0..n-1 for id 1..n
 * (pos has n+1 entries, pos[0] unused). Needs cfg->degree > 0.
 */
FS_WUR int fs_secagg_graph(const struct fs_secagg_config *cfg, const uint8_t session[32],
                           uint32_t *pos, struct fs_err *err);

/** 1 when u != v mask with each other (always in the full graph; pos NULL then). */
int fs_secagg_adjacent(const struct fs_secagg_config *cfg, const uint32_t *pos, uint32_t u,
                       uint32_t v);

/** Bytes of one R1 ciphertext for a configuration. */
size_t fs_secagg_share_ct_len(const struct fs_secagg_config *cfg);

/** Free an array of k share ciphertexts and their buffers. Accepts NULL. */
void fs_secagg_share_cts_free(struct fs_secagg_share_ct *cts, size_t k);

/* ------------------------------------------------------------------ client */

typedef struct fs_secagg_client fs_secagg_client;

/**
 * New client state for party `id` (1..n) with its long-term Ed25519 identity
 * private key (copied; wiped on free). Generates, from the CSPRNG, the
 * share-encryption key pair, one mask key pair per aggregation and one
 * self-mask seed per aggregation.
 * @param out new state, free with fs_secagg_client_free.
 */
FS_WUR int fs_secagg_client_new(const struct fs_secagg_config *cfg, uint32_t id,
                                const uint8_t sign_sk[FS_SECAGG_KEY_LEN], fs_secagg_client **out,
                                struct fs_err *err);

/**
 * Like fs_secagg_client_new, but every random value of the client (the
 * share-encryption key pair, each aggregation's mask key pair and self-mask
 * seed, the Shamir coefficients, the share boxes' nonces) is derived from
 * secret (32 bytes, copied, wiped on free; lib/crypto/derive.h) instead of
 * drawn from the CSPRNG. Every message is then a function of (secret,
 * identity, the server's messages): an agent restarted with the same secret
 * rebuilds its state and its messages byte for byte. secret must come from
 * the CSPRNG, stay secret and serve one participation only.
 */
FS_WUR int fs_secagg_client_new_det(const struct fs_secagg_config *cfg, uint32_t id,
                                    const uint8_t sign_sk[FS_SECAGG_KEY_LEN],
                                    const uint8_t secret[32], fs_secagg_client **out,
                                    struct fs_err *err);

/** R0: this party's advertisement; out->s_pks is borrowed from c (valid until it is freed). */
FS_WUR int fs_secagg_client_advertise(fs_secagg_client *c, struct fs_secagg_adv *out,
                                      struct fs_err *err);

/**
 * R1: verify the roster the server forwarded (>= t advertisements, distinct
 * ids, valid signatures, ours unchanged), fix the session id, and share
 * every aggregation's mask key and self-mask seed with each other roster member.
 * @param out new array of k-1 ciphertexts (one per other member), free with
 *        fs_secagg_share_cts_free.
 */
FS_WUR int fs_secagg_client_share_keys(fs_secagg_client *c, const struct fs_secagg_adv *roster,
                                       size_t k, struct fs_secagg_share_ct **out, size_t *nout,
                                       struct fs_err *err);

/**
 * End of R1: the ciphertexts addressed to this party by every member of U2
 * (the parties whose shares the server accepted). Each is decrypted and
 * checked now; U2 is this set plus this party.
 */
FS_WUR int fs_secagg_client_receive_shares(fs_secagg_client *c,
                                           const struct fs_secagg_share_ct *cts, size_t k,
                                           struct fs_err *err);

/**
 * R2: start aggregation r (0-based, increasing) of a vector of len words
 * over the active set the server announced (sorted or not; must be a subset
 * of U2 containing this party, of size >= t, and contain nobody whose mask
 * key this party has revealed).
 */
FS_WUR int fs_secagg_client_begin(fs_secagg_client *c, uint32_t r, uint64_t len,
                                  const uint32_t *active, size_t na, struct fs_err *err);

/**
 * R2: y[0..m) = x[0..m) + self mask + pairwise masks at word positions
 * off..off+m (mod 2^64). Chunks may come in any order; x and y may alias.
 */
FS_WUR int fs_secagg_client_mask(fs_secagg_client *c, uint64_t off, const uint64_t *x, uint64_t *y,
                                 size_t m, struct fs_err *err);

/** R3: sign the survivor set U3 the server announced (must contain this party, >= t, within the
 * active set). FS_ESTATE in an all-inputs job (no R3). */
FS_WUR int fs_secagg_client_consistency(fs_secagg_client *c, const uint32_t *u3, size_t n3,
                                        uint8_t sig[FS_SECAGG_SIG_LEN], struct fs_err *err);

/**
 * R4 of an all-inputs aggregation (cfg.all_inputs; no R3): u3 is the
 * survivor set the server announced. Refuses (FS_EAUTH, nothing revealed)
 * unless u3 is exactly this aggregation's active set, then reveals a
 * self-seed share for itself and each active neighbour (every active
 * party: full graph), never a mask-key share. FS_ESTATE outside all-inputs
 * mode or before the upload's aggregation began.
 * @param out new array (free()) of *nout reveals.
 */
FS_WUR int fs_secagg_client_unmask_all(fs_secagg_client *c, const uint32_t *u3, size_t n3,
                                       struct fs_secagg_reveal **out, size_t *nout,
                                       struct fs_err *err);

/**
 * R4: given the signatures on U3 the server collected (ids and signatures,
 * at least t valid ones from distinct members of U3 required), reveal a
 * self-seed share for each survivor and a mask-key share for each active
 * party not in U3 (a share of that party's mask key for this aggregation
 * only). Refuses (FS_EAUTH / FS_ESTATE) rather than ever revealing both kinds
 * for one peer. FS_ESTATE in an all-inputs job (fs_secagg_client_unmask_all).
 * @param out new array (free()) of *nout reveals.
 */
FS_WUR int fs_secagg_client_unmask(fs_secagg_client *c, const uint32_t *ids,
                                   const uint8_t (*sigs)[FS_SECAGG_SIG_LEN], size_t k,
                                   struct fs_secagg_reveal **out, size_t *nout, struct fs_err *err);

/** The session id (valid after share_keys). */
const uint8_t *fs_secagg_client_session(const fs_secagg_client *c);

/**
 * The parties this one masks with (ids sorted into out, n entries of room;
 * valid after share_keys): its k graph neighbours, or every other party.
 */
size_t fs_secagg_client_neighbours(const fs_secagg_client *c, uint32_t *out);

/**
 * Pinned identities (the job's party_keys): pins[i] is party i+1's Ed25519
 * identity public key, n entries (copied). From then on share_keys refuses
 * (FS_EAUTH) a roster whose entry for a party carries another identity key:
 * a server that substitutes a party's keys is caught before any share is
 * made, and since every R1 ciphertext is keyed by the roster's X25519 keys,
 * which the pinned identity signs, shares only ever reach pinned parties.
 * Call before share_keys. @return 0; FS_EAUTH when this party's own identity
 * is not pins[id-1]; FS_EINVAL (n is not the job's), FS_ESTATE, FS_ENOMEM.
 */
FS_WUR int fs_secagg_client_set_pins(fs_secagg_client *c, const uint8_t (*pins)[FS_SECAGG_KEY_LEN],
                                     uint32_t n, struct fs_err *err);

/** Free, wiping every secret. Accepts NULL. */
void fs_secagg_client_free(fs_secagg_client *c);

/* ------------------------------------------------------------------ server */

/* Where the server keeps the chunks of each party's upload. Every chunk is
 * folded into the running sum as it arrives (memory O(length), one pass);
 * put persists it first, and get reads it back only to take a party's partial
 * upload out of the sum again when the party drops mid-upload (its chunks are
 * subtracted at close_masked, exact in Z_2^64). The service keeps them on
 * disk; tests in memory. A re-sent chunk is compared with the stored one
 * (get). drop: the round is over (or the party's partial upload was taken
 * out) and its chunks will not be read back by the state machine. With
 * put == NULL there is no undo: a party that drops mid-upload then makes the
 * aggregation fail. */
struct fs_secagg_chunk_store {
    void *ctx;
    int (*put)(void *ctx, uint32_t party, uint64_t idx, const uint64_t *y, size_t m,
               struct fs_err *err);
    int (*get)(void *ctx, uint32_t party, uint64_t idx, uint64_t *y, size_t m, struct fs_err *err);
    void (*drop)(void *ctx, uint32_t party);
};

enum fs_secagg_phase {
    FS_SECAGG_ADVERTISE = 1,
    FS_SECAGG_SHARE,
    FS_SECAGG_READY, /* keys set up, between aggregations */
    FS_SECAGG_MASKED,
    FS_SECAGG_CONSISTENCY,
    FS_SECAGG_UNMASK,
    FS_SECAGG_ABORTED
};

typedef struct fs_secagg_server fs_secagg_server;

/** New server state. store may be NULL (fold at once). @param out free with fs_secagg_server_free.
 */
FS_WUR int fs_secagg_server_new(const struct fs_secagg_config *cfg,
                                const struct fs_secagg_chunk_store *store, fs_secagg_server **out,
                                struct fs_err *err);

enum fs_secagg_phase fs_secagg_server_phase(const fs_secagg_server *s);

/** Why the server aborted (empty string if it has not). */
const char *fs_secagg_server_abort_reason(const fs_secagg_server *s);

/*
 * Repeats: every add_* below is idempotent, also after its round has closed:
 * the server keeps what it needs to recognise the message it accepted from
 * each party (the advertisement and the shares for the job, the masked
 * chunks (their SHA-256, or the chunk store), the consistency signature and
 * the reveals of the current aggregation until the next one begins). An
 * identical repeat of an accepted message then returns 0 and changes
 * nothing, so a party whose response was lost does not fail; anything else
 * for a closed round (other bytes, or a message that was never accepted) is
 * FS_ECONFLICT.
 */

/** R0: accept an advertisement. An identical repeat is accepted (idempotent); a different one is
 * FS_ECONFLICT. */
FS_WUR int fs_secagg_server_add_adv(fs_secagg_server *s, const struct fs_secagg_adv *a,
                                    struct fs_err *err);

/** Close R0: U1 = advertisers; aborts (FS_ESTATE) if fewer than t. */
FS_WUR int fs_secagg_server_close_adv(fs_secagg_server *s, struct fs_err *err);

/** The roster (U1's advertisements, by id), borrowed until the server is freed. */
const struct fs_secagg_adv *fs_secagg_server_roster(const fs_secagg_server *s, size_t *k);

/** R1: party `from` in U1 hands in exactly one ciphertext for each other member of U1. Idempotent.
 */
FS_WUR int fs_secagg_server_add_shares(fs_secagg_server *s, uint32_t from,
                                       const struct fs_secagg_share_ct *cts, size_t k,
                                       struct fs_err *err);

/** Close R1: U2 = parties whose shares arrived; aborts if fewer than t. */
FS_WUR int fs_secagg_server_close_shares(fs_secagg_server *s, struct fs_err *err);

/**
 * The ciphertexts addressed to `to` by members of U2 (borrowed pointers into
 * server state; *out is a new array of pointers, free()).
 */
FS_WUR int fs_secagg_server_shares_for(const fs_secagg_server *s, uint32_t to,
                                       const struct fs_secagg_share_ct ***out, size_t *k,
                                       struct fs_err *err);

/** Start aggregation r (next index) of len words. Active set = U2 minus permanently dropped
 * parties. */
FS_WUR int fs_secagg_server_begin(fs_secagg_server *s, uint32_t r, uint64_t len,
                                  struct fs_err *err);

/** Ids of the current active set (borrowed), or U3/U4 when asked with which = 3/4. */
const uint32_t *fs_secagg_server_set(const fs_secagg_server *s, int which, size_t *k);

/**
 * R2: chunk idx (words idx*chunk .. , m words: chunk_words except the last)
 * of party from's masked vector. A repeat with the same content is accepted;
 * different content is FS_ECONFLICT.
 */
FS_WUR int fs_secagg_server_add_masked(fs_secagg_server *s, uint32_t from, uint64_t idx,
                                       const uint64_t *y, size_t m, struct fs_err *err);

/**
 * As fs_secagg_server_add_masked; *is_new (may be NULL) is 1 when the chunk
 * was new, 0 for an identical repeat. With a chunk store a repeat is compared
 * with the stored chunk (store get) and nothing is hashed; without one the
 * server keeps a SHA-256 per chunk for the comparison.
 */
FS_WUR int fs_secagg_server_add_masked_ex(fs_secagg_server *s, uint32_t from, uint64_t idx,
                                          const uint64_t *y, size_t m, int *is_new,
                                          struct fs_err *err);

/*
 * Streamed R2 chunks (servers with a chunk store): many chunks, of one party
 * or of several, fold into the sum at the same time on the caller's threads,
 * piece by piece as they arrive, without the caller's lock and without a
 * copy of the chunk. The sum stays the exact ring sum: additions in Z_2^64
 * commute, and each range of the sum is changed under its own lock.
 *
 *   begin   (caller's lock)  reserve chunk idx of party from: it is pending
 *   fold    (no lock)        its next words, in order; the caller has
 *                            persisted them (store put's file) before
 *   commit  (caller's lock)  all m words folded: the chunk counts, as if
 *                            add_masked_ex had taken it
 *   cancel  (caller's lock)  the upload broke off: the words folded so far
 *                            (read back through store get) leave the sum
 *   release (no lock)        always last, once per begin that succeeded
 *
 * Closing R2, aborting, beginning the next aggregation, finishing and
 * fs_secagg_server_free first wait for every fold in progress and void every
 * pending chunk (a voided upload's fold, commit and cancel fail with
 * FS_ECONFLICT and change nothing); close_masked takes a pending chunk's
 * folded words back out of the sum with the rest of its dropped party's
 * upload. The server's memory lives until the last release.
 */
struct fs_secagg_upload {
    fs_secagg_server *s; /* borrowed; kept alive until release */
    uint64_t gen;
    uint32_t from;
    uint64_t idx;
    size_t m;    /* words of the chunk */
    size_t done; /* words folded so far */
};

/**
 * Reserve chunk idx of party from (m words) for a streamed upload. *stream
 * is 0 (and nothing is reserved, release not needed) when the chunk cannot
 * be streamed: R2 is closed, the chunk was already accepted (a repeat: use
 * add_masked_ex, which compares it) or the server has no chunk store.
 * FS_EUNAVAILABLE while the same chunk is pending in another upload.
 */
FS_WUR int fs_secagg_server_upload_begin(fs_secagg_server *s, uint32_t from, uint64_t idx, size_t m,
                                         struct fs_secagg_upload *up, int *stream,
                                         struct fs_err *err);

/**
 * Fold the next n words of the upload (p: n little-endian words, any
 * alignment). Safe to call from many threads at once for different uploads.
 */
FS_WUR int fs_secagg_server_upload_fold(struct fs_secagg_upload *up, const uint8_t *p, size_t n,
                                        struct fs_err *err);

/** Commit a complete upload (caller's lock). */
FS_WUR int fs_secagg_server_upload_commit(struct fs_secagg_upload *up, struct fs_err *err);

/** Take an incomplete upload's words back out of the sum (caller's lock). */
FS_WUR int fs_secagg_server_upload_cancel(struct fs_secagg_upload *up, struct fs_err *err);

/** End of an upload begun with *stream == 1 (no lock; may free a freed server's memory). */
void fs_secagg_server_upload_release(struct fs_secagg_upload *up);

/** 1 if party from's upload of this aggregation is complete. */
int fs_secagg_server_has_masked(const fs_secagg_server *s, uint32_t from);

/** Close R2: U3 = parties with complete uploads; aborts if fewer than t. All-inputs
 * mode: aborts unless U3 is the whole active set, then opens R4 with U4 = U3 (no R3). */
FS_WUR int fs_secagg_server_close_masked(fs_secagg_server *s, struct fs_err *err);

/** R3: party from (in U3) signs U3. Invalid signature is FS_EAUTH; FS_ESTATE in all-inputs
 * mode. */
FS_WUR int fs_secagg_server_add_consistency(fs_secagg_server *s, uint32_t from,
                                            const uint8_t sig[FS_SECAGG_SIG_LEN],
                                            struct fs_err *err);

/** Close R3: U4 = signers; aborts if fewer than t. FS_ESTATE in all-inputs mode. */
FS_WUR int fs_secagg_server_close_consistency(fs_secagg_server *s, struct fs_err *err);

/** The U4 signatures (borrowed; ids from fs_secagg_server_set(s, 4, ...), same order).
 * All-inputs mode: none were collected (the entries are zero; do not publish them). */
const uint8_t (*fs_secagg_server_sigs(const fs_secagg_server *s))[FS_SECAGG_SIG_LEN];

/** R4: party from's reveals (one per active party other than a dropped... see client). */
FS_WUR int fs_secagg_server_add_reveals(fs_secagg_server *s, uint32_t from,
                                        const struct fs_secagg_reveal *rv, size_t k,
                                        struct fs_err *err);

/**
 * Close R4: with >= t responders, reconstruct every survivor's self seed and
 * every dropped party's mask key (checked against its advertised key) and
 * remove the masks. *sum is borrowed (len words) until the next begin.
 * Aborts if fewer than t responded or a reconstruction fails.
 */
FS_WUR int fs_secagg_server_finish(fs_secagg_server *s, const uint64_t **sum, struct fs_err *err);

/**
 * After a successful fs_secagg_server_finish: hand the sum over (*len words),
 * to be released with free(); the server keeps no copy (so the caller may,
 * e.g., decode it in place). NULL before finish or once taken.
 */
uint64_t *fs_secagg_server_take_sum(fs_secagg_server *s, uint64_t *len);

/* Threads fs_secagg_server_finish may use to remove the masks (default 1: the
 * caller's only); the sum does not depend on it. */
void fs_secagg_server_set_threads(fs_secagg_server *s, unsigned threads);

/** Party id's neighbours as the server sees them (as fs_secagg_client_neighbours; after
 * close_adv). */
size_t fs_secagg_server_neighbours(const fs_secagg_server *s, uint32_t id, uint32_t *out);

/** Free. Accepts NULL. */
void fs_secagg_server_free(fs_secagg_server *s);

/* ------------------------------------------------- windows (sharded sums)
 *
 * A sharded sum splits only the masked DATA of one aggregation over several
 * servers; the key setup, consistency and unmasking run once, on the
 * coordinator. Each server holds a window [win_off, win_off + win_len) of
 * the total vector of total_len words: chunk indices are LOCAL to the window
 * (chunk c covers window words [c cw, min(win_len, (c+1) cw)), global offset
 * win_off + c cw), while every key derivation (mask keys, the U3 message)
 * uses total_len, and the masks of window word i are the streams' words at
 * win_off + i. The coordinator's window is a normal server begun with
 * fs_secagg_server_begin_window; each other shard runs a data-only window
 * (fs_secagg_shard_new), which takes uploads (add_masked_ex or the streamed
 * upload API, same rules) from parties 1..n and is unmasked with the plan
 * the coordinator computes (fs_secagg_server_unmask_plan). The plan holds
 * the survivors' self-mask keys and the dropped parties' pairwise mask keys:
 * it is secret, travels only over the peers' channel and is wiped after use.
 */

/**
 * Coordinator: as fs_secagg_server_begin(r, total_len), but the server sums
 * only the window [win_off, win_off + win_len) of the vector (win_len >= 1,
 * inside total_len). @return 0, FS_EINVAL, FS_ESTATE, FS_ENOMEM.
 */
FS_WUR int fs_secagg_server_begin_window(fs_secagg_server *s, uint32_t r, uint64_t total_len,
                                         uint64_t win_off, uint64_t win_len, struct fs_err *err);

/**
 * Close R2 as fs_secagg_server_close_masked, counting a party complete only
 * if its upload is complete here AND elsewhere[party - 1] != 0 (n bytes: the
 * other windows' verdicts; NULL = only here). A party complete here but not
 * elsewhere is dropped like any incomplete one (its chunks leave the sum).
 */
FS_WUR int fs_secagg_server_close_masked_ext(fs_secagg_server *s, const uint8_t *elsewhere,
                                             struct fs_err *err);

/**
 * After the reveals (phase UNMASK, enough responders): reconstruct the seeds
 * and keys as fs_secagg_server_finish does and give the unmask plan, the
 * streams every window adds (sign > 0) or subtracts: new array (*n terms),
 * release with fs_secagg_plan_free. Does not change the sum or the phase:
 * the coordinator asks for the plan (to send to the shards), then unmasks
 * its own window with fs_secagg_server_finish, which applies the same plan
 * at the window's words. Phase errors: FS_ESTATE.
 */
FS_WUR int fs_secagg_server_unmask_plan(fs_secagg_server *s, struct fs_prg_term **plan, size_t *n,
                                        struct fs_err *err);

/** Wipe and free a plan. Accepts NULL. */
void fs_secagg_plan_free(struct fs_prg_term *plan, size_t n);

/**
 * Shard side: a data-only window of aggregation r (n_parties parties, ids
 * 1..n; total_len, window and chunk_words (0 = default) as the coordinator's).
 * No key phases; parties 1..n may upload at once (phase MASKED). Without a
 * chunk store the chunks fold at once (a SHA-256 kept per chunk for
 * repeats); fs_secagg_shard_set_store gives one (streamed uploads, undo of a
 * dropped party). @param out free with fs_secagg_server_free.
 */
FS_WUR int fs_secagg_shard_new(uint32_t n_parties, uint32_t r, uint64_t total_len, uint64_t win_off,
                               uint64_t win_len, uint32_t chunk_words, fs_secagg_server **out,
                               struct fs_err *err);

/** Give a data-only window a chunk store (copied) before its first upload. @return 0, FS_ESTATE. */
FS_WUR int fs_secagg_shard_set_store(fs_secagg_server *s, const struct fs_secagg_chunk_store *store,
                                     struct fs_err *err);

/** complete[p - 1] = 1 when party p's upload to this window is complete, else 0 (n bytes). */
FS_WUR int fs_secagg_shard_complete(const fs_secagg_server *s, uint8_t *complete);

/**
 * Drop the uploads of parties not in u3 (nu3 ids), apply the plan: *sum is
 * the window's ring sum (win_len words), borrowed until the server is freed
 * (or taken with fs_secagg_server_take_sum). Once only: FS_ESTATE after.
 * The uploads of parties not in u3 leave the sum (read back through the
 * chunk store; without one a party not in u3 that sent any chunk aborts the
 * window). @return 0, FS_EINVAL (bad ids or plan, a party of u3 incomplete
 * here, not a data-only window), FS_ESTATE (finished already, aborted).
 */
FS_WUR int fs_secagg_shard_finish(fs_secagg_server *s, const uint32_t *u3, size_t nu3,
                                  const struct fs_prg_term *plan, size_t nplan,
                                  const uint64_t **sum, struct fs_err *err);

/**
 * Pinned identities on the server (the job's party_keys, n entries, copied;
 * see fs_secagg_client_set_pins): add_adv then refuses (FS_EAUTH, nothing
 * stored) an advertisement whose sign_pk is not the pin of its party.
 * Call before the first add_adv. @return 0, FS_EINVAL, FS_ESTATE, FS_ENOMEM.
 */
FS_WUR int fs_secagg_server_set_pins(fs_secagg_server *s, const uint8_t (*pins)[FS_SECAGG_KEY_LEN],
                                     uint32_t n, struct fs_err *err);

/**
 * The pin rule alone: 0 when the job is unpinned or a->sign_pk is the pin of
 * party a->id, else FS_EAUTH naming both fingerprints (a caller may answer
 * it differently from a bad signature).
 */
FS_WUR int fs_secagg_server_check_pin(const fs_secagg_server *s, const struct fs_secagg_adv *a,
                                      struct fs_err *err);

#endif
