/* Encrypted noise exchange of fedpower-utility (Liu et al. 2023,
 * Alg. 2 steps 8-13 with its all-ones selector fixed) as two pure state
 * machines. No sockets, files or clocks.
 *
 * The aggregation server owns a Paillier key. In each round (one per
 * power-method sync, or one per job for fedpower-utility jobs that set
 * exchange_once, where the seeds moved are master seeds: see
 * lib/proto/fedpower.h) it picks j uniformly (CSPRNG) among the parties whose
 * noisy inputs are in the secure sum, and sends every one of them a FRESH
 * encryption of a selector s_i = b_i u_i, with the bit b_i (b_j = 0, b_i = 1
 * otherwise) and u_i = 1 (elementwise) or a power of two (seed mode, below):
 * every selector of every round is a new DJN encryption, all exactly
 * fs_noisex_ct_size bytes, so under DCR no party can tell whether it is j,
 * nor which u_i it has. Party i returns Enc(s_i)^{w_i} times a fresh
 * re-randomizer, w_i encoding its noise; the exponentiation with the secret
 * w_i uses mpz_powm_sec. The server learns w_i for i != j and nothing about
 * w_j (Enc(0)).
 *
 * Costs at 3072 bits (one core): a seed-mode party builds its DJN base (a
 * full-length exponentiation modulo n^2) and a fixed-base comb once a job,
 * then a response is one 256-bit mpz_powm_sec and one comb randomizer; the
 * server computes its selectors' randomizers modulo p^2 and q^2 with its
 * key (fs_paillier_djn_new_crt), then per group of up to 5 seeds multiplies
 * the answers modulo p^2 and decrypts once modulo p alone (no squarings:
 * the selectors placed the seeds). At 20 parties that is about 15 ms of
 * CPU for the selectors and 21 ms for the 4 decryptions of a sync, nearly
 * all of it the selectors' 2 x 90 Montgomery products modulo p^2 and q^2
 * (a fixed-base table, windows of 5 bits: the fastest width) and the
 * decryptions' mpz_powm_sec modulo p^2 by p - 1; 19 seeds need 4
 * plaintexts below p whatever the grouping.
 *
 * Modes:
 *  - FS_NOISEX_SEED (default): w_i is the 256-bit seed the party expanded
 *    its noise from. One ciphertext per party. The parties but j, in
 *    ascending id order, form groups of S = floor((bits/2-1)/256) (5 at
 *    3072 bits, 1 at 1024; 1 below n for keys of 512 bits or less), the
 *    t-th member of a group in slot t, and its selector encrypts
 *    u_i = 2^(256 t): its answer Enc(2^(256 t))^{w_i} = Enc(w_i 2^(256 t))
 *    holds its seed in slot t already. The server multiplies a group's
 *    answers and decrypts the product once modulo p alone (the packed
 *    seeds are below 2^(bits/2-1) <= p), recovering every seed but j's; a
 *    member that did not answer leaves its slot 0 (a non-zero one means a
 *    party broke the protocol: FS_EFORMAT). The caller regenerates the
 *    noise from the seeds. The server learns each other party's noise
 *    individually, which is exactly what the paper's step 12 gives it.
 *    (Rounds begun with selectors of 0 and 1 and restored from them are
 *    finished by raising answer t to 2^(256 t) before the product.)
 *  - FS_NOISEX_ELEMENTWISE (the paper's form, for comparison): w_i is the
 *    integer noise vector itself, packed into signed slots
 *    (fs_paillier_pack, headroom for `parties` additions). The party returns
 *    one ciphertext per packed plaintext; the server multiplies all returned
 *    ciphertexts slot-wise and decrypts each product once, learning only the
 *    SUM of the noise of all parties but j.
 *  - FS_NOISEX_OT (opt-in): as seed mode for the caller (the result
 *    carries the seeds of the removed ids), but the exchange is an
 *    oblivious transfer in the style of M. Bellare and S. Micali,
 *    "Non-interactive oblivious transfer and applications" (CRYPTO 1989),
 *    on P-256 (lib/crypto/ecot.h) instead of Paillier: the server is the
 *    receiver with choice "learn the seed" for every party but j. There is
 *    no key generation beyond a 32-byte secret; the exported public key is
 *    the fixed point C (hashed to the curve, so nobody knows its discrete
 *    logarithm), the same for every job. Party i's selector in round t is
 *    k0 G for j and C - k1 G for everyone else, with k0, k1 derived from
 *    the secret, t, i and the choice (HKDF-SHA256); a response is R = r G
 *    and the seed masked with SHA-256 of (selector, R, r (C - selector)).
 *    The server computes that mask as k1 R exactly where the selector was
 *    C - k1 G; for j it would need log_G C. Sizes: public key and selector 33 bytes
 *    (compressed points), response 65, exported secret 32; one slot, no
 *    groups; key_bits, set_threads and base_key do not apply.
 *    Assumptions, compared with seed mode: a party learns nothing about
 *    whether it is j even against unbounded computation (both selectors
 *    are uniformly distributed points), where seed mode relies on DCR;
 *    the server cannot recover j's seed unless it solves computational
 *    Diffie-Hellman on P-256 (SHA-256 taken as a random oracle), where
 *    seed mode relies on j's ciphertext hiding a zero. A round's selectors
 *    are a function of (secret, t, i, j): persist them before sending and
 *    restore them after a restart, so that a party sees one selector per
 *    round (two would still be unrelated points, k0 and k1 being
 *    independent, but a fresh j per attempt is a second draw of who keeps
 *    its noise).
 *
 * The paper's selector is an r x r all-ones matrix P' used as N . P', which
 * multiplies the noise by a matrix of ones (N 1 != N); the selector here is
 * a scalar bit acting as identity or zero.
 *
 * Threat model: honest-but-curious server (a malicious one could send
 * Enc(2^k) for any k and shift the seeds around, as the honest one does
 * with its slots; parties cannot check a selector's plaintext; in ot mode it could send C - k1 G to
 * every party and open all seeds, which no party can detect either), no collusion between the
 * server and a party. A party that does not respond keeps its noise in
 * the aggregate (less accuracy, never less privacy).
 *
 * Serialization: public key and ciphertexts as in lib/crypto/paillier.h
 * (fixed width, big-endian). A response is the concatenation of its
 * ciphertexts. ot mode: compressed SEC1 points (33 bytes); a response is
 * R (33 bytes) || masked seed (32 bytes). */
#ifndef FS_PROTO_NOISE_EXCHANGE_H
#define FS_PROTO_NOISE_EXCHANGE_H

#include <stddef.h>
#include <stdint.h>

#include "../core/err.h"

#define FS_NOISEX_SEED_LEN      32
#define FS_NOISEX_MAX_PARTIES   1000
#define FS_NOISEX_MAX_NOISE_LEN (1u << 26) /* values per party (elementwise) */

enum fs_noisex_mode { FS_NOISEX_SEED = 0, FS_NOISEX_ELEMENTWISE = 1, FS_NOISEX_OT = 2 };

struct fs_noisex_params {
    enum fs_noisex_mode mode;
    uint32_t parties;    /* ids 1..parties */
    size_t noise_len;    /* elementwise: int64 values per party and round (ignored for seeds) */
    unsigned value_bits; /* elementwise: each value fits value_bits two's complement bits */
};

/** Check parameters (ranges, caps; elementwise: value_bits + ceil(log2 parties) <= 64). */
FS_WUR int fs_noisex_params_check(const struct fs_noisex_params *p, struct fs_err *err);

/** "seed" / "elementwise" / "ot"; parse returns 0 or FS_EINVAL. */
const char *fs_noisex_mode_name(enum fs_noisex_mode m);
FS_WUR int fs_noisex_mode_parse(const char *s, enum fs_noisex_mode *out, struct fs_err *err);

/** 1 when the parties expand their noise from a 32-byte seed that the
 * exchange moves (seed, ot), 0 when it moves the noise itself (elementwise). */
static inline int fs_noisex_mode_seeded(enum fs_noisex_mode m)
{
    return m != FS_NOISEX_ELEMENTWISE;
}

/** 1 when the mode uses a Paillier key (seed, elementwise; ot does not). */
static inline int fs_noisex_mode_paillier(enum fs_noisex_mode m)
{
    return m != FS_NOISEX_OT;
}

/* ------------------------------------------------------------------ server */

typedef struct fs_noisex_server fs_noisex_server;

struct fs_noisex_result {
    uint32_t round;
    uint32_t chosen; /* j (server-private; never send it to parties) */
    size_t removed;  /* parties whose noise was recovered: responders other than j */
    uint32_t *ids;   /* the removed ids, ascending, owned */
    uint8_t (*seeds)[FS_NOISEX_SEED_LEN]; /* seed, ot: seeds[q] of ids[q], owned, wiped on clear */
    int64_t *noise_sum; /* elementwise: noise_len sums over the removed parties, owned */
    size_t noise_len;
    unsigned decryptions; /* decryptions this round cost */
    unsigned ahead;       /* seed mode: of them, done in the background before the round closed */
};

/**
 * New server with a fresh Paillier key of key_bits bits (FS_PAILLIER_MIN_BITS..
 * FS_PAILLIER_MAX_BITS; 3072 for production, 1024 in tests) and a DJN
 * fixed-base table for the selector encryptions. ot mode: a fresh 32-byte
 * secret from the CSPRNG; key_bits is ignored.
 * @param out new state, free with fs_noisex_server_free.
 * @return 0, FS_EINVAL, FS_ERANGE (elementwise: no slot fits), FS_ENOMEM, FS_ECRYPTO.
 */
FS_WUR int fs_noisex_server_new(const struct fs_noisex_params *p, unsigned key_bits,
                                fs_noisex_server **out, struct fs_err *err);

/**
 * New server around a private key written by fs_noisex_server_sk_export
 * (a server that restarts with the key it had), else as fs_noisex_server_new.
 * ot mode: the key is the 32-byte secret (another length is FS_EFORMAT).
 * @return 0, FS_EINVAL, FS_EFORMAT (not a valid key), FS_ERANGE, FS_ENOMEM, FS_ECRYPTO.
 */
FS_WUR int fs_noisex_server_new_from_key(const struct fs_noisex_params *p, const uint8_t *sk,
                                         size_t len, fs_noisex_server **out, struct fs_err *err);

/** Bytes of the exported private key. */
size_t fs_noisex_server_sk_size(const fs_noisex_server *s);

/**
 * Export the private key (fs_paillier_sk_export): secret, for sealing at
 * rest only; the caller wipes buf. @param len must be fs_noisex_server_sk_size.
 */
FS_WUR int fs_noisex_server_sk_export(const fs_noisex_server *s, uint8_t *buf, size_t len,
                                      struct fs_err *err);

/** Bytes of the exported public key. */
size_t fs_noisex_server_pk_size(const fs_noisex_server *s);

/** Export the public key (len must be fs_noisex_server_pk_size). */
FS_WUR int fs_noisex_server_pk_export(const fs_noisex_server *s, uint8_t *buf, size_t len,
                                      struct fs_err *err);

/** Bytes of one selector ciphertext (the same for every party and round). */
size_t fs_noisex_server_ct_size(const fs_noisex_server *s);

/** Bytes of one party's response. */
size_t fs_noisex_server_response_size(const fs_noisex_server *s);

/** Values per packed plaintext (elementwise), 256-bit seed slots per plaintext (seed). */
size_t fs_noisex_server_slots(const fs_noisex_server *s);

/**
 * Start round `round` (strictly increasing) over the parties whose noise is
 * in the aggregate (ids 1..parties, distinct, k >= 1): pick j uniformly
 * from them with the CSPRNG and encrypt a fresh selector for each.
 * Any unfinished previous round is discarded.
 */
FS_WUR int fs_noisex_server_begin(fs_noisex_server *s, uint32_t round, const uint32_t *ids,
                                  size_t k, struct fs_err *err);

/** A round's selectors computed ahead of fs_noisex_server_begin_prepared. */
typedef struct fs_noisex_prepared fs_noisex_prepared;

/**
 * As fs_noisex_server_begin, without changing s: pick j and encrypt the
 * selectors of round `round` over ids into *out. It only reads the public
 * key and the fixed-base table, so it may run on another thread while the
 * owner of s goes on with anything but begin/restore/free. Install with
 * fs_noisex_server_begin_prepared (or free with fs_noisex_prepared_free).
 * @return 0, FS_EINVAL, FS_ENOMEM, FS_ECRYPTO.
 */
FS_WUR int fs_noisex_server_prepare(const fs_noisex_server *s, uint32_t round, const uint32_t *ids,
                                    size_t k, fs_noisex_prepared **out, struct fs_err *err);

/**
 * Open the prepared round (takes x, also on failure): exactly what
 * fs_noisex_server_begin would have done with the same draws.
 * @return 0, FS_EINVAL (another key's), FS_ESTATE (round not after the last), FS_ENOMEM.
 */
FS_WUR int fs_noisex_server_begin_prepared(fs_noisex_server *s, fs_noisex_prepared *x,
                                           struct fs_err *err);

/** Free prepared selectors that were not installed. Accepts NULL. */
void fs_noisex_prepared_free(fs_noisex_prepared *x);

/**
 * The selectors of the open round (borrowed until the round changes): one
 * ciphertext per party in ascending id order, *len = k * ct_size bytes.
 * They reveal j only to the key's owner: persisting them (with the key
 * sealed) lets a restarted server send the very same bytes again.
 * @return NULL when no round is open.
 */
const uint8_t *fs_noisex_server_selectors(const fs_noisex_server *s, size_t *len);

/**
 * Reopen round `round` over ids with the selectors it had (len = k *
 * ct_size bytes, ascending ids, as fs_noisex_server_selectors gave them):
 * j is recovered by decrypting them (exactly one must be Enc(0), the others
 * Enc(2^(256 t)) for their slots t (seed mode; or all Enc(1), as selectors
 * were before they carried the slots) or Enc(1) (elementwise); ot mode: exactly one k0 G, the
 * others C - k1 G, recomputed from the secret). Discards any open round; round may repeat the last
 * one begun. Responses are taken afresh.
 * @return 0, FS_EINVAL, FS_EFORMAT (not this key's selectors), FS_ENOMEM.
 */
FS_WUR int fs_noisex_server_restore(fs_noisex_server *s, uint32_t round, const uint32_t *ids,
                                    size_t k, const uint8_t *sel, size_t len, struct fs_err *err);

/**
 * The selector ciphertext for party id in the current round (the same bytes
 * on a repeated request). @param len must be fs_noisex_server_ct_size.
 * @return 0, FS_ESTATE (no round open), FS_ENOTFOUND (id not in the round), FS_EINVAL.
 */
FS_WUR int fs_noisex_server_selector(const fs_noisex_server *s, uint32_t id, uint8_t *buf,
                                     size_t len, struct fs_err *err);

/**
 * Party id's response (fs_noisex_server_response_size bytes). Every
 * ciphertext is checked (range, invertibility; ot mode: R is a point).
 * A repeat with the same bytes is accepted; different bytes are
 * FS_ECONFLICT.
 * @return 0, FS_ESTATE, FS_ENOTFOUND, FS_EFORMAT, FS_ECONFLICT, FS_ENOMEM.
 */
FS_WUR int fs_noisex_server_add_response(fs_noisex_server *s, uint32_t id, const uint8_t *buf,
                                         size_t len, struct fs_err *err);

/**
 * Seed mode (no effect in ot mode, whose finish costs one scalar
 * multiplication per seed): decrypt a round's seed groups on up to
 * `threads` threads (1..64; default: the online CPUs) and, when ahead is
 * non-zero (the default), every group of the parties but j as soon as all
 * of its members answered, in the background, so that finish decrypts
 * only the groups still open. The seeds are the same either way.
 */
void fs_noisex_server_set_threads(fs_noisex_server *s, unsigned threads, int ahead);

/** Seed groups of the open round decrypted in the background so far. */
size_t fs_noisex_server_ahead(const fs_noisex_server *s);

/** The ids of the open round (ascending, borrowed), *k of them; NULL when none is open. */
const uint32_t *fs_noisex_server_ids(const fs_noisex_server *s, size_t *k);

/** 1 if party id is one of the open round's. */
int fs_noisex_server_in_round(const fs_noisex_server *s, uint32_t id);

/** 1 if party id has responded in the current round. */
int fs_noisex_server_has_response(const fs_noisex_server *s, uint32_t id);

/**
 * Close the round: combine and decrypt the responses of every responder
 * but j. Non-responders are simply not removed (listed nowhere in out).
 * @param out filled (owned fields), release with fs_noisex_result_clear.
 * @return 0, FS_ESTATE, FS_EFORMAT (a decrypted value out of range: a party
 *         broke the bounds), FS_ENOMEM, FS_ECRYPTO.
 */
FS_WUR int fs_noisex_server_finish(fs_noisex_server *s, struct fs_noisex_result *out,
                                   struct fs_err *err);

/**
 * What fs_noisex_server_finish would return now, without closing the round
 * (it reads the key and the responses, and takes or keeps the seed groups
 * decrypted ahead under their own lock: another thread may run it while
 * the owner adds no response and does not end the round). With
 * fs_noisex_server_end after it, the same as finish.
 */
FS_WUR int fs_noisex_server_peek(const fs_noisex_server *s, struct fs_noisex_result *out,
                                 struct fs_err *err);

/** Close the open round without decrypting (after fs_noisex_server_peek). */
void fs_noisex_server_end(fs_noisex_server *s);

/** Release the fields of r (seeds wiped). Accepts NULL and zeroed structs. */
void fs_noisex_result_clear(struct fs_noisex_result *r);

/** Free, wiping the private key. Accepts NULL. */
void fs_noisex_server_free(fs_noisex_server *s);

/* ------------------------------------------------------------------ client */

typedef struct fs_noisex_client fs_noisex_client;

/**
 * New client for the server's exported public key (checked on import), with
 * its own DJN randomizer table built from the public n. ot mode: the key
 * must be the constant C (else FS_EFORMAT, "not this protocol's OT
 * constant").
 * @param out new state, free with fs_noisex_client_free.
 */
FS_WUR int fs_noisex_client_new(const struct fs_noisex_params *p, const uint8_t *pk, size_t pk_len,
                                fs_noisex_client **out, struct fs_err *err);

/**
 * Like fs_noisex_client_new, but the DJN base hs is derived from base_key
 * (32 bytes, secret) instead of drawn from the CSPRNG: with
 * fs_noisex_client_set_rerand_key, a client rebuilt after a restart then
 * answers a selector with the same bytes. ot mode: base_key is not used
 * (the same as fs_noisex_client_new).
 */
FS_WUR int fs_noisex_client_new_det(const struct fs_noisex_params *p, const uint8_t *pk,
                                    size_t pk_len, const uint8_t base_key[32],
                                    fs_noisex_client **out, struct fs_err *err);

size_t fs_noisex_client_ct_size(const fs_noisex_client *c);
size_t fs_noisex_client_response_size(const fs_noisex_client *c);

/**
 * Take the re-randomizers of the following responses from AES-256-CTR
 * under keys derived from key (32 bytes, copied; NULL: back to the CSPRNG):
 * the same selector and noise then give the same response bytes. The key
 * must be secret and serve one response (one exchange) only. ot mode: r is
 * HKDF-SHA256(key, "fedsvd/noisex-ot/r") modulo the group order.
 * @return 0 or FS_EINVAL.
 */
FS_WUR int fs_noisex_client_set_rerand_key(fs_noisex_client *c, const uint8_t key[32],
                                           struct fs_err *err);

/**
 * Seed mode: out = Enc(b)^seed * R' for the selector Enc(b) (seed read as a
 * big-endian 256-bit integer). ot mode: out = R || seed XOR pad for the
 * selector PK0 (FS_EFORMAT when it is not a point, or is C itself).
 * @param out_len must be the response size.
 * @return 0, FS_EFORMAT (selector malformed), FS_EINVAL, FS_ESTATE (wrong mode), FS_ECRYPTO.
 */
FS_WUR int fs_noisex_client_respond_seed(const fs_noisex_client *c, const uint8_t *sel,
                                         size_t sel_len, const uint8_t seed[FS_NOISEX_SEED_LEN],
                                         uint8_t *out, size_t out_len, struct fs_err *err);

/**
 * Elementwise mode: noise[0..n) (n = noise_len) packed, and for every packed
 * plaintext m_g one ciphertext Enc(b)^{m_g} * R'_g.
 * @return 0, FS_EFORMAT, FS_EINVAL, FS_ERANGE (a value outside value_bits,
 *         naming its index), FS_ESTATE (also in ot mode), FS_ECRYPTO.
 */
FS_WUR int fs_noisex_client_respond_noise(const fs_noisex_client *c, const uint8_t *sel,
                                          size_t sel_len, const int64_t *noise, size_t n,
                                          uint8_t *out, size_t out_len, struct fs_err *err);

/** Free. Accepts NULL. */
void fs_noisex_client_free(fs_noisex_client *c);

#endif
