/* The federated power method family (docs/references.md) as pure state
 * machines: a party side and a server side, fed messages and returning
 * messages, with no sockets, files or clocks.
 *
 *   fedpower          Liu et al. 2023, Alg. 1 (Guo et al.): plain uploads, local and
 *                     server Gaussian noise, Procrustes alignment.
 *   fedpower-utility  Liu et al. 2023, Alg. 2: uploads through secure aggregation,
 *                     then the encrypted noise exchange (noise_exchange.h)
 *                     removes every party's noise but one.
 *   fedpower-private  Liu et al. 2023, Alg. 3: noise every iteration, no alignment,
 *                     secure aggregation at syncs, Z clipped to z_hat, entries
 *                     of M'_i bounded by m_hat, distributed DP noise.
 *   dp-ppm            Nicolas et al. 2024, Alg. 2: p = 1, per-party N(0, Delta_l^2 nu^2),
 *                     Delta_l the largest row norm of the public iterate,
 *                     zCDP accounting.
 *
 * Data and iteration. Party i holds M_i (s_i x d, dense or CSR) and computes
 * with M'_i = M_i^T M_i / s_i implicitly, Y = M_i^T (M_i Z) / s_i; the d x d
 * matrix is formed only when that is cheaper over the job (or for clipping
 * to m_hat, which needs it). The server starts from Z_0 = orth(G), G a d x r
 * standard Gaussian matrix from the public z0_seed (fs_fedpower_z0), runs
 * T iterations and aggregates ("syncs") after iterations p, 2p, ... and
 * always after iteration T (a last, shorter period when p does not divide
 * T): ceil(T/p) syncs. Orthogonalisation is Householder QR with diag(R) >= 0
 * (fs_qr_orth) on both sides.
 *
 * Weights. The row counts s_i are public: each party declares s_i when it
 * joins (the papers' noise formulas already use min s_i and max s_i/s), and
 * every state machine is created with the same vector rows[0..n). A party
 * uploads w_i * Y_i with w_i = s_i / s, s = sum of rows (plain fedpower
 * uploads Y_i and the server weights). When parties drop, the server scales
 * the sum by s / s_U, s_U the rows of the parties in the sum, so the weights
 * renormalise over the survivors; a dropped party's data then simply leaves
 * the job (its noise never counted towards the guarantee, see below).
 *
 * Secure-aggregation variants. A party's upload is a vector of len words in
 * Z_2^64: the fixed-point encoding (lib/la/fixedpt.h, frac_bits f common to
 * the job, K = parties summands) of w_i Y_i plus integer noise drawn by the
 * exact discrete Gaussian sampler (lib/dp) in units of 2^-f. The caller masks
 * it with its fs_secagg_client and hands the server's unmasked sum, with the
 * ids of the parties in it (secagg U3), to fs_fedpower_server_add_sum. The
 * public bound for the encoding is value_bound (a bound on ||M'_i||_2, hence
 * on every entry of M'_i Z for unit columns and of Q^T M'_i Q) plus 40 noise
 * standard deviations; a party whose values exceed it gets FS_ERANGE.
 *
 * Noise calibration (sigma is a standard deviation throughout, relative to
 * one party's own, unweighted Y_i = M'_i Z unless said otherwise):
 *   fedpower   local noise N(0, ||Z_(t-1)^(i)||_max^2 sigma^2) on each party's
 *              aligned Y at a sync, server noise N(0, max_i ||Z||_max^2
 *              sigma'^2) on the weighted sum; sigma, sigma' given or from
 *              (eps, delta) by Guo et al.'s formulas (Liu et al. 2023, §3)
 *              with R = ceil(T/p) syncs. No formal guarantee (Liu et al.
 *              2023, §5).
 *   utility    N(0, sigma^2) on each party's Y at a sync (Liu et al. Alg. 2),
 *              i.e. w_i sigma on its weighted upload, entered in the ring;
 *              after the exchange w_j N_j remains. No formal guarantee.
 *   private    every iteration. At a sync party i's weighted upload has
 *              sensitivity w_i Delta <= w_max Delta (w_max = max_i s_i / s,
 *              public), so each party adds N_Z(0, (w_max sigma)^2 / t) (in
 *              units of 2^-f) and the sum over >= t survivors has std >=
 *              w_max sigma: ratio Delta / sigma (Guo's sigma' = sigma max_i p_i
 *              has the same reason). At a local (non-sync) iteration the
 *              iterate never leaves the party but feeds the next upload, so it
 *              gets the full sigma on its own Y. Either way every iteration is
 *              a Gaussian mechanism with Delta / sigma, and the accountant
 *              counts T releases (plus the eigenvalue release).
 *   dp-ppm     p = 1; Nicolas et al.'s relation is on the aggregate A = sum_i w_i
 *              M'_i itself: per party N_Z(0, Delta_l^2 sigma^2 / t), sum >=
 *              Delta_l^2 sigma^2 over >= t survivors (the paper uses nu =
 *              sigma / sqrt(s) for s parties; we use t so that dropouts never
 *              weaken the guarantee).
 * All noise that is not secret-shared is also discrete: values are rounded
 * to a grid 2^-g before integer noise is added (floating-point Gaussian
 * noise leaks through its low bits).
 *
 * Eigenvalues. With cfg.eigenvalues the server broadcasts the final
 * orthonormal Q after iteration T; each party uploads w_i Q^T M'_i Q (r x r;
 * noised like a sync for the DP algorithms, with the sensitivity of that
 * release, and counted as one more release); the server takes the
 * Rayleigh-Ritz step: eigenvalues of the summed r x r matrix, Ritz vectors
 * Q V, of which the top k are the result.
 *
 * Threading: one state machine per thread; distinct objects are independent. */
#ifndef FS_PROTO_FEDPOWER_H
#define FS_PROTO_FEDPOWER_H

#include <stddef.h>
#include <stdint.h>

#include "../core/err.h"
#include "../la/csr.h"
#include "../la/mat.h"
#include "noise_exchange.h"

#define FS_FEDPOWER_MAX_PARTIES    1000
#define FS_FEDPOWER_MAX_DIM        (1u << 20) /* d */
#define FS_FEDPOWER_MAX_RANK       1024       /* r */
#define FS_FEDPOWER_MAX_ITERATIONS 100000
/* A total epsilon above this is "meaningless": refused unless allow_weak_privacy. */
#define FS_FEDPOWER_WEAK_EPS 10.0
/* Noise values are bounded by this many standard deviations in the fixed-point
 * range (exceeding it has probability < e^-800 and fails the upload). */
#define FS_FEDPOWER_NOISE_CAP_SIGMAS 40.0

enum fs_fedpower_alg {
    FS_FEDPOWER_PLAIN = 1,   /* "fedpower" */
    FS_FEDPOWER_UTILITY = 2, /* "fedpower-utility" */
    FS_FEDPOWER_PRIVATE = 3, /* "fedpower-private" */
    FS_FEDPOWER_DPPPM = 4    /* "dp-ppm" */
};

enum fs_fedpower_align {
    FS_FEDPOWER_ALIGN_GLOBAL = 0,  /* to the last broadcast Z (default; exact at p = 1) */
    FS_FEDPOWER_ALIGN_CLIENT1 = 1, /* to party 1's upload, on the server (fedpower only) */
    FS_FEDPOWER_ALIGN_NONE = 2
};

enum fs_fedpower_calib {
    FS_FEDPOWER_SIGMA_GIVEN = 0,   /* cfg.sigma (and sigma_server) as given; epsilon reported */
    FS_FEDPOWER_SIGMA_FROM_EPS = 1 /* sigma calibrated from cfg.eps, cfg.delta */
};

enum fs_fedpower_dppm_calib {
    FS_FEDPOWER_DPPPM_PAPER = 0, /* sigma = eps^-1 sqrt(4 L ln(1/delta)) (Nicolas et al.) */
    FS_FEDPOWER_DPPPM_ZCDP = 1   /* the smallest sigma whose zCDP total converts to eps */
};

enum fs_fedpower_bound_mode {
    FS_FEDPOWER_MHAT_CLIP = 0,  /* clip the entries of M'_i to [-m_hat, m_hat] */
    FS_FEDPOWER_MHAT_REJECT = 1 /* refuse data whose M'_i has an entry beyond m_hat */
};

enum fs_fedpower_cov {
    FS_FEDPOWER_COV_AUTO = 0,     /* explicit d x d only when cheaper (and small enough) */
    FS_FEDPOWER_COV_IMPLICIT = 1, /* always M_i^T (M_i Z) / s_i */
    FS_FEDPOWER_COV_EXPLICIT = 2  /* always form M'_i */
};

/* The job's public parameters; identical at the server and every party. */
struct fs_fedpower_config {
    enum fs_fedpower_alg alg;
    uint32_t parties;    /* n, ids 1..n */
    uint32_t threshold;  /* t: fewest survivors of any secure sum; noise is calibrated to t */
    uint32_t d;          /* features (columns) */
    uint32_t r;          /* iteration rank */
    uint32_t k;          /* target rank, 1 <= k <= r */
    uint32_t iterations; /* T >= 1 */
    uint32_t sync_every; /* p >= 1 (dp-ppm: 1) */
    enum fs_fedpower_align align;
    uint8_t z0_seed[32]; /* public seed of Z_0 */
    int eigenvalues;     /* 1: final Rayleigh-Ritz release (eigenvalues, Ritz vectors) */

    /* noise and privacy */
    enum fs_fedpower_calib calib;
    double eps;          /* target total epsilon (calib = FROM_EPS) */
    double delta;        /* delta of the target and of every epsilon reported */
    double sigma;        /* party noise std; dp-ppm: its sigma (noise = Delta_l sigma). 0 = none
                            (fedpower and utility only) */
    double sigma_server; /* fedpower: server noise std sigma' */
    enum fs_fedpower_dppm_calib dppm_calib;
    double m_hat; /* private: bound on |entries of M'_i| */
    double z_hat; /* private: clip of Z's entries */
    enum fs_fedpower_bound_mode m_hat_mode;
    double value_bound; /* secagg variants: public bound on ||M'_i||_2 of every party;
                           0 = d * m_hat for private (a Gershgorin bound), required otherwise */
    enum fs_noisex_mode noise_exchange; /* utility: seed (default), ot or elementwise */
    unsigned paillier_bits;             /* utility: key size (default 3072; ot: unused) */
    int exchange_once; /* utility, seed and ot: one noise exchange per job (see below) */
    int allow_weak_privacy;
    enum fs_fedpower_cov cov;
};

/** Defaults for alg: p = 4 (dp-ppm 1), T = 92, r = k = 10, align global,
 * eigenvalues on, delta 1e-5, sigma given, seed exchange, 3072-bit key,
 * clip to m_hat, cov auto. parties, threshold, d, m_hat, z_hat,
 * sigma/eps and value_bound are left 0 for the caller. */
void fs_fedpower_config_default(struct fs_fedpower_config *cfg, enum fs_fedpower_alg alg);

/** Check ranges and combinations (e.g. align client1 needs plain fedpower). */
FS_WUR int fs_fedpower_config_check(const struct fs_fedpower_config *cfg, struct fs_err *err);

/** "fedpower", "fedpower-utility", "fedpower-private", "dp-ppm". */
const char *fs_fedpower_alg_name(enum fs_fedpower_alg alg);
FS_WUR int fs_fedpower_alg_parse(const char *s, enum fs_fedpower_alg *out, struct fs_err *err);
const char *fs_fedpower_align_name(enum fs_fedpower_align a);
FS_WUR int fs_fedpower_align_parse(const char *s, enum fs_fedpower_align *out, struct fs_err *err);

/** 1 if the algorithm's uploads go through secure aggregation. */
int fs_fedpower_uses_secagg(enum fs_fedpower_alg alg);

/** Number of syncs ceil(T/p). */
uint32_t fs_fedpower_syncs(const struct fs_fedpower_config *cfg);

/**
 * Noise exchanges of a job: 0 unless fedpower-utility; the syncs; 1 with
 * exchange_once.
 *
 * exchange_once (seed and ot modes; set for jobs without allow_dropouts,
 * where every party's masked input is in every sum): the exchange runs in
 * the first sync only and moves each party's 32-byte master seed; the noise
 * of sync q is expanded from HKDF(master, "fedpower/exchange-sync", q)
 * (fs_fedpower_sync_seed), at the party and, for every party but j, at the
 * server. So j is drawn once per job instead of once per sync: at every
 * sync the aggregate keeps exactly the fresh noise of one party, unknown to
 * the parties, as before. It needs every party in every sum: were j to drop
 * out later, nobody's noise would remain, which is why jobs with
 * allow_dropouts exchange at every sync.
 */
uint32_t fs_fedpower_exchanges(const struct fs_fedpower_config *cfg);

/* The version of the map from a seed the noise exchange moves to the noise
 * the server removes: the party and the server must share it, so
 * invitations to fedpower-utility jobs with seeded noise carry it
 * (noise_sampler). 1 and 2: the discrete Gaussian sampler's stream
 * versions (FS_DGAUSS_STREAM_VERSION), the seed used as is at every sync;
 * 3: sampler 2, and with exchange_once every sync's seed derived from the
 * master seed (fs_fedpower_sync_seed). Bump it with either. */
#define FS_FEDPOWER_NOISE_MAP_VERSION 3

/** The seed of sync q's noise from a master seed (exchange_once). */
FS_WUR int fs_fedpower_sync_seed(uint8_t out[32], const uint8_t master[32], uint32_t q,
                                 struct fs_err *err);

/** Secure sums the job runs: syncs, plus 1 for eigenvalues (0 for plain fedpower). */
uint32_t fs_fedpower_aggregations(const struct fs_fedpower_config *cfg);

/** Z_0 = orth(G), G ~ N(0,1)^(d x r) from PRG(z0_seed). New d x r matrix, free with fs_mat_free. */
FS_WUR int fs_fedpower_z0(const struct fs_fedpower_config *cfg, fs_mat **out, struct fs_err *err);

/* ------------------------------------------------------------ privacy */

/* What a job spends and reveals. All epsilons are at cfg.delta. */
struct fs_fedpower_privacy {
    int formal;         /* 1 for fedpower-private and dp-ppm: a DP guarantee holds */
    char relation[400]; /* the neighbouring relation */
    char server_learns[320];
    char note[400]; /* caveats, refusal reason */
    double delta;
    double sigma;        /* resolved noise std (total over >= t survivors for distributed
                            noise; dp-ppm: in units of Delta_l) */
    double sigma_server; /* fedpower */
    double sensitivity;  /* per release (dp-ppm: 1, in units of Delta_l) */
    uint32_t releases;   /* noisy releases the accountant counts */
    double rho_round;    /* zCDP of the costliest release, discretisation included */
    double rho_total;
    double eps_round;       /* optimal conversion of rho_round */
    double eps_total;       /* optimal conversion (CKS20) of rho_total: the real total */
    double paper_eps_round; /* the paper's own per-round formula */
    double paper_eps_total; /* its basic composition (Nicolas et al.: simple conversion) */
    double paper_delta_total;
    int paper_formula_valid; /* the classic Gaussian formula needs eps_round < 1 */
    int weak;                /* eps_total > FS_FEDPOWER_WEAK_EPS (or no formal guarantee) */
    int allowed;             /* the job may run: !weak || allow_weak_privacy || !formal */
};

/**
 * The privacy report of a job (σ resolved from (ε, δ) when asked).
 * @param rows s_i per party (rows[i-1] for id i; 0 = absent); needed by
 *        fedpower / utility for Guo et al.'s formulas, may be NULL otherwise.
 * @return 0, FS_EINVAL (bad configuration, unreachable target).
 * A weak job is reported (weak = 1, allowed = 0, note says why), not an error
 * here; the state machines refuse it (FS_EINVAL) unless allow_weak_privacy.
 */
FS_WUR int fs_fedpower_privacy_report(const struct fs_fedpower_config *cfg, const uint64_t *rows,
                                      struct fs_fedpower_privacy *out, struct fs_err *err);

/**
 * The zCDP rho a party spends in the job (for the client agent's ledger):
 * rho_total of the report for the DP algorithms, +INFINITY for fedpower and
 * fedpower-utility (no formal guarantee; a ledger should refuse them or
 * treat them as an explicit exception).
 */
FS_WUR int fs_fedpower_party_rho(const struct fs_fedpower_config *cfg, const uint64_t *rows,
                                 double *rho, struct fs_err *err);

/* --------------------------------------------------- seeded noise */

/* Values per block of seeded noise: block i (values i B .. i B + B - 1) is
 * drawn from its own AES-256-CTR stream of the seed (counter block
 * "fpnz" || i (32 bits, big endian) || 0^64), so blocks can be regenerated
 * independently and in parallel with the same result. */
#define FS_FEDPOWER_NOISE_BLOCK 4096

/**
 * The noise of seed mode: n samples of the discrete Gaussian N_Z(0, sigma^2)
 * by the exact sampler of lib/dp (fs_dgauss_sample_prg), block by block
 * (FS_FEDPOWER_NOISE_BLOCK) from AES-256-CTR streams keyed with `seed`, so
 * the aggregation server regenerates exactly what the party drew. sigma as
 * in fs_dgauss_sample (2^-20..2^52; sigma^2 of the double taken exactly).
 * @return 0, FS_EINVAL, FS_ENOMEM, FS_ERANGE, FS_ECRYPTO.
 */
FS_WUR int fs_fedpower_noise_from_seed(const uint8_t seed[32], double sigma, int64_t *out, size_t n,
                                       struct fs_err *err);

/**
 * v[i] -= sum_q noise_q[i] (mod 2^64) for the k seeded noises
 * fs_fedpower_noise_from_seed(seeds[q], sigmas[q], ., n), regenerated on up
 * to `threads` threads (1 = the calling thread only; work items are (seed,
 * block) pairs). The result does not depend on `threads`. Wipes its scratch.
 * @return 0, FS_EINVAL, FS_ENOMEM, FS_ERANGE, FS_ECRYPTO.
 */
FS_WUR int fs_fedpower_noise_remove(const uint8_t (*seeds)[32], const double *sigmas, size_t k,
                                    uint64_t *v, size_t n, unsigned threads, struct fs_err *err);

/* ------------------------------------------------------------ party */

typedef struct fs_fedpower_party fs_fedpower_party;

/**
 * New party state for id (1..n). Exactly one of dense (s_i x d) and csr
 * (s_i x d) is given; it is BORROWED and must outlive the party (no copy of
 * a possibly large matrix). rows: the public vector of row counts; rows[id-1]
 * must equal s_i. Checks the data (finite; private: m_hat, clip or reject —
 * reject names the offending entry), the configuration and the privacy
 * (a weak job is refused unless allow_weak_privacy).
 * @param out new state, free with fs_fedpower_party_free.
 */
FS_WUR int fs_fedpower_party_new(const struct fs_fedpower_config *cfg, const uint64_t *rows,
                                 uint32_t id, const fs_mat *dense, const fs_csr *csr,
                                 fs_fedpower_party **out, struct fs_err *err);

/**
 * Receive the broadcast Z (d x r) that follows iteration `iter` (0 for Z_0)
 * and prepare this party's next upload: the local iterations up to the next
 * sync and the sync's upload, or (iter == T, eigenvalues) the Rayleigh
 * upload. iter must be the value the server announced (0, then each sync's
 * iteration in turn). Private clips Z to z_hat itself, dp-ppm computes
 * Delta_l itself: the guarantee does not rest on the server.
 */
FS_WUR int fs_fedpower_party_receive(fs_fedpower_party *p, const fs_mat *z, uint32_t iter,
                                     struct fs_err *err);

/**
 * Plain fedpower: the upload after receive (borrowed until the next receive):
 * Y'_i (d x r, aligned and noised, NOT weighted) or at the end Q^T M'_i Q
 * (r x r); *zmax = ||Z_(t-1)^(i)||_max, the scale of its noise.
 * @return NULL if there is no plain upload pending.
 */
const fs_mat *fs_fedpower_party_plain_upload(const fs_fedpower_party *p, double *zmax);

/**
 * Secure-aggregation variants: the ring vector to mask and upload (borrowed
 * until the next receive), *len words (d r at a sync, r r for eigenvalues).
 * @return NULL if there is none pending.
 */
const uint64_t *fs_fedpower_party_ring_upload(const fs_fedpower_party *p, size_t *len);

/**
 * Derive every random draw of this party from secret (32 bytes from the OS
 * CSPRNG, copied, wiped on free) instead of the CSPRNG: the DP noise of
 * each upload (per kind and iteration), the utility seed mode's seed and the
 * exchange responses' re-randomizers. A party rebuilt with the same secret
 * after a restart then adds exactly the noise it drew before (a second,
 * fresh draw of one value would weaken the guarantee). Call before the
 * first receive. @return 0 or FS_EINVAL.
 */
FS_WUR int fs_fedpower_party_set_secret(fs_fedpower_party *p, const uint8_t secret[32],
                                        struct fs_err *err);

/**
 * A party rebuilt after a restart (set_secret first) takes up the job at the
 * broadcast after iteration iter (a sync point at or after its own
 * position) without replaying the syncs before it: their uploads are in,
 * and the noise of the next one is derived, not drawn. @return 0,
 * FS_EINVAL, FS_ESTATE (no secret, done, or not a sync point ahead).
 */
FS_WUR int fs_fedpower_party_resume_at(fs_fedpower_party *p, uint32_t iter, struct fs_err *err);

/** Utility: the server's Paillier public key (as exported), once before the first exchange. */
FS_WUR int fs_fedpower_party_set_exchange_key(fs_fedpower_party *p, const uint8_t *pk, size_t len,
                                              struct fs_err *err);

/**
 * Utility: the two halves of fs_fedpower_party_set_exchange_key, so that the
 * costly one (the party's own DJN base and table: a full-length modular
 * exponentiation) can run on another thread while the party computes:
 * _exchange_prepare only reads p's configuration and secret (set_secret
 * first when the party has one) and may run concurrently with any other
 * call on p but _exchange_install, free, and the exchange itself;
 * _exchange_install (on p's thread) takes *nx over. The result is the same
 * as set_exchange_key's.
 * @return 0, or as fs_fedpower_party_set_exchange_key.
 */
FS_WUR int fs_fedpower_party_exchange_prepare(const fs_fedpower_party *p, const uint8_t *pk,
                                              size_t len, struct fs_noisex_client **nx,
                                              struct fs_err *err);
void fs_fedpower_party_exchange_install(fs_fedpower_party *p, struct fs_noisex_client *nx);

/** Utility: bytes of one exchange response. */
size_t fs_fedpower_party_exchange_size(const fs_fedpower_party *p);

/**
 * Utility: answer this sync's selector ciphertext with the noise of the
 * pending upload (seed, ot or elementwise per the job). A retry with the same
 * selector returns the same bytes (the server accepts identical repeats); a
 * different selector in the same sync is FS_ECONFLICT. The noise secret is
 * wiped at the next receive.
 * @param out response buffer of fs_fedpower_party_exchange_size bytes.
 */
FS_WUR int fs_fedpower_party_exchange(fs_fedpower_party *p, const uint8_t *sel, size_t sel_len,
                                      uint8_t *out, size_t out_len, struct fs_err *err);

/** s_i, w_i = s_i / s, and the iterations this party has completed. */
uint64_t fs_fedpower_party_rows(const fs_fedpower_party *p);
double fs_fedpower_party_weight(const fs_fedpower_party *p);
int fs_fedpower_party_explicit_cov(const fs_fedpower_party *p); /* 1 if M'_i was formed */

/** Free, wiping the noise secrets and local iterates. Accepts NULL. */
void fs_fedpower_party_free(fs_fedpower_party *p);

/* ------------------------------------------------------------ server */

enum fs_fedpower_phase {
    FS_FEDPOWER_UPLOAD = 1, /* parties run up to the next sync and upload */
    FS_FEDPOWER_EXCHANGE,   /* utility: noise exchange of this sync */
    FS_FEDPOWER_RAYLEIGH,   /* parties upload Q^T M'_i Q */
    FS_FEDPOWER_DONE
};

typedef struct fs_fedpower_server fs_fedpower_server;

/**
 * New server state (generates the Paillier key for utility). rows as for
 * the party. Refuses a weak job unless allow_weak_privacy.
 * @param out new state, free with fs_fedpower_server_free.
 */
FS_WUR int fs_fedpower_server_new(const struct fs_fedpower_config *cfg, const uint64_t *rows,
                                  fs_fedpower_server **out, struct fs_err *err);

/**
 * Bytes of the server's secret: what a restarted server needs to go on as
 * if it had not stopped (the seed of its own noise: plain fedpower's server
 * noise of sync q is expanded from HKDF(seed, q); utility: also the
 * Paillier private key).
 */
size_t fs_fedpower_server_secret_size(const fs_fedpower_server *s);

/**
 * Export the secret (secret material: seal it at rest, wipe buf after).
 * @param len must be fs_fedpower_server_secret_size(s). @return 0, FS_EINVAL.
 */
FS_WUR int fs_fedpower_server_secret_export(const fs_fedpower_server *s, uint8_t *buf, size_t len,
                                            struct fs_err *err);

/**
 * As fs_fedpower_server_new, with the secret of an earlier server of the
 * same job (fs_fedpower_server_secret_export): the same Z broadcasts, the
 * same server noise and exchange key, so that feeding it the same messages
 * again reproduces the earlier run exactly.
 * @return as fs_fedpower_server_new, or FS_EFORMAT (not such a secret).
 */
FS_WUR int fs_fedpower_server_new_restored(const struct fs_fedpower_config *cfg,
                                           const uint64_t *rows, const uint8_t *secret, size_t len,
                                           fs_fedpower_server **out, struct fs_err *err);

/** Optional: a d x k orthonormal reference (copied) for per-sync subspace errors. */
FS_WUR int fs_fedpower_server_set_reference(fs_fedpower_server *s, const fs_mat *ref,
                                            struct fs_err *err);

enum fs_fedpower_phase fs_fedpower_server_phase(const fs_fedpower_server *s);

/**
 * What parties must receive now (phases UPLOAD and RAYLEIGH): Z (borrowed)
 * and the iteration it follows. NULL in other phases.
 */
const fs_mat *fs_fedpower_server_broadcast(const fs_fedpower_server *s, uint32_t *iter);

/** Index (0-based) of the current sync, or of the secure sum (secagg). */
uint32_t fs_fedpower_server_sync_index(const fs_fedpower_server *s);

/** Words of the ring vectors of the current secure sum (d r, or r r for eigenvalues). */
size_t fs_fedpower_server_ring_len(const fs_fedpower_server *s);

/** Plain fedpower: party id's upload (d x r, or r x r in RAYLEIGH) and its zmax. */
FS_WUR int fs_fedpower_server_add_plain(fs_fedpower_server *s, uint32_t id, const fs_mat *y,
                                        double zmax, struct fs_err *err);

/**
 * Plain fedpower: close the round over the parties that uploaded (>= 1):
 * align (client1), weight with s_i / s_U, add server noise, orthogonalise,
 * record, broadcast (or finish the Rayleigh-Ritz step).
 */
FS_WUR int fs_fedpower_server_close_plain(fs_fedpower_server *s, struct fs_err *err);

/**
 * Secure-aggregation variants: the unmasked secure sum (ring_len words) and
 * the ids of the parties whose inputs it holds (secagg U3). Private and
 * dp-ppm then orthogonalise (clip) and broadcast; utility moves to the
 * EXCHANGE phase (its noise is removed first).
 */
FS_WUR int fs_fedpower_server_add_sum(fs_fedpower_server *s, const uint64_t *sum, size_t len,
                                      const uint32_t *ids, size_t k, struct fs_err *err);

/**
 * Utility, UPLOAD of a sync, before its sum: the secure sum's parties (U3)
 * are fixed once masked input closes, so the noise exchange may open then,
 * while consistency and unmasking run. prepare draws j and encrypts the
 * selectors exactly as add_sum would (fs_noisex_server_prepare: it only
 * reads the key, so it may run without the caller's lock while nothing else
 * opens an exchange or frees s); open_prepared installs them (takes x, also
 * on failure); open_exchange does both. From then on the selector,
 * exchange_selectors and add_response calls work as in EXCHANGE, and
 * add_sum (with the same ids, any order) keeps the open exchange and its
 * responses instead of beginning one. Without an early exchange add_sum
 * begins it as before.
 * @return 0, FS_ESTATE (not utility, not a sync waiting for its sum, or an
 *         exchange already open), FS_EINVAL, FS_ENOMEM, FS_ECRYPTO.
 */
FS_WUR int fs_fedpower_server_prepare_exchange(const fs_fedpower_server *s, const uint32_t *ids,
                                               size_t k, struct fs_noisex_prepared **out,
                                               struct fs_err *err);
FS_WUR int fs_fedpower_server_open_prepared(fs_fedpower_server *s, struct fs_noisex_prepared *x,
                                            struct fs_err *err);
FS_WUR int fs_fedpower_server_open_exchange(fs_fedpower_server *s, const uint32_t *ids, size_t k,
                                            struct fs_err *err);

/**
 * Utility, UPLOAD of a sync (a restarted server replaying): open the early
 * exchange over ids again with the selectors it had
 * (fs_fedpower_server_exchange_selectors), so j is the one it was.
 * @return 0, FS_ESTATE, FS_EINVAL, FS_EFORMAT (not selectors of this key and ids).
 */
FS_WUR int fs_fedpower_server_restore_exchange(fs_fedpower_server *s, const uint32_t *ids, size_t k,
                                               const uint8_t *sel, size_t len, struct fs_err *err);

/** Utility: 1 while this sync's exchange takes selectors and responses (early or EXCHANGE). */
int fs_fedpower_server_exchange_ready(const fs_fedpower_server *s);

/** Utility: 1 if party id has answered the open exchange. */
int fs_fedpower_server_has_response(const fs_fedpower_server *s, uint32_t id);

/** Utility: the exported Paillier public key: *len bytes at *pk (borrowed). */
const uint8_t *fs_fedpower_server_exchange_key(const fs_fedpower_server *s, size_t *len);

/** Utility: bytes of a selector ciphertext and of a response. */
size_t fs_fedpower_server_selector_size(const fs_fedpower_server *s);
size_t fs_fedpower_server_response_size(const fs_fedpower_server *s);

/** Utility, EXCHANGE (or an early exchange): the selector for party id (one of the sum's ids). */
FS_WUR int fs_fedpower_server_selector(const fs_fedpower_server *s, uint32_t id, uint8_t *buf,
                                       size_t len, struct fs_err *err);

/**
 * Utility, EXCHANGE: every selector of the open exchange (borrowed, in
 * ascending id order, *len bytes): persist them before any is sent.
 * NULL outside EXCHANGE.
 */
const uint8_t *fs_fedpower_server_exchange_selectors(const fs_fedpower_server *s, size_t *len);

/**
 * Utility, EXCHANGE (a restarted server, right after add_sum): put back the
 * selectors the exchange had (fs_fedpower_server_exchange_selectors), so
 * parties get the same bytes and j is the one it was.
 * @return 0, FS_ESTATE, FS_EFORMAT (not selectors of this key and sum).
 */
FS_WUR int fs_fedpower_server_restore_selectors(fs_fedpower_server *s, const uint8_t *sel,
                                                size_t len, struct fs_err *err);

/** Utility, EXCHANGE (or an early exchange): party id's response. */
FS_WUR int fs_fedpower_server_add_response(fs_fedpower_server *s, uint32_t id, const uint8_t *buf,
                                           size_t len, struct fs_err *err);

/**
 * Utility, EXCHANGE: decrypt, regenerate (seed) or take (elementwise) the
 * noise of every responder but j, subtract it in the ring, orthogonalise and
 * broadcast. Non-responders keep their noise in (recorded per sync).
 */
FS_WUR int fs_fedpower_server_close_exchange(fs_fedpower_server *s, struct fs_err *err);

/**
 * Utility: the exchange's parties that have not answered yet (0: all did);
 * SIZE_MAX when no exchange is open.
 */
size_t fs_fedpower_server_exchange_missing(const fs_fedpower_server *s);

/** The outcome of an answered exchange computed ahead of its close. */
struct fs_fedpower_xpre;

/**
 * Utility, an exchange open (early or EXCHANGE) that every one of its
 * parties answered: decrypt the answers and regenerate the noise to remove
 * now (exactly what close_exchange would), so that the close only adds it
 * to the sum. It reads only the exchange's state, the key and the job's
 * fixed parameters, none of which add_sum changes: it may run on another
 * thread, also while add_sum runs, as long as nothing adds an answer,
 * opens, closes or frees the exchange meanwhile.
 * @return 0, FS_ESTATE (not open, or an answer missing), FS_EFORMAT, FS_ENOMEM, FS_ECRYPTO.
 */
FS_WUR int fs_fedpower_server_exchange_precompute(const fs_fedpower_server *s,
                                                  struct fs_fedpower_xpre **out,
                                                  struct fs_err *err);

/**
 * Utility, EXCHANGE: fs_fedpower_server_close_exchange with the outcome
 * computed ahead (x NULL: the plain close). The same result, bit for bit.
 * x stays the caller's. @return as close_exchange, or FS_ESTATE (x is of
 * another exchange, or an answer is missing).
 */
FS_WUR int fs_fedpower_server_close_exchange_pre(fs_fedpower_server *s, struct fs_fedpower_xpre *x,
                                                 struct fs_err *err);

/** Free (wiped). Accepts NULL. */
void fs_fedpower_xpre_free(struct fs_fedpower_xpre *x);

/* The outcome, from the server's view (what it may publish). */
struct fs_fedpower_result {
    fs_mat *z;           /* d x k: Ritz vectors (eigenvalues on) or the first k columns of Q_T */
    double *eigenvalues; /* k, descending (NULL without the eigenvalue release) */
    uint32_t syncs;      /* syncs completed */
    double *convergence; /* per sync q: ||P_q - P_(q-1)||_F, P = ZZ^T of the first k
                            columns, P_(-1) from Z_0 */
    double *error;       /* per sync: projection distance to the reference (NULL without) */
    double *sin_theta;   /* per sync: ||(I - RR^T) Z_k||_2 (NULL without reference) */
    uint32_t *survivors; /* per sync: parties in the aggregate */
    uint32_t
        *noises_left; /* per sync: parties whose noise remains (utility: 1 when all answered) */
    struct fs_fedpower_privacy privacy;
};

/** Copy the result (phase DONE, or the progress so far with z = NULL before it). */
FS_WUR int fs_fedpower_server_result(const fs_fedpower_server *s, struct fs_fedpower_result *out,
                                     struct fs_err *err);

/** Release the fields of r. Accepts NULL and zeroed structs. */
void fs_fedpower_result_clear(struct fs_fedpower_result *r);

/** The privacy report the server computed at creation (borrowed). */
const struct fs_fedpower_privacy *fs_fedpower_server_privacy(const fs_fedpower_server *s);

/** Free, wiping the Paillier key. Accepts NULL. */
void fs_fedpower_server_free(fs_fedpower_server *s);

/** Threads for regenerating the seeded noise at a noise exchange (default 1) and for
 *  decrypting its seed groups (default: the online CPUs). */
void fs_fedpower_server_set_threads(fs_fedpower_server *s, unsigned threads);

/* --------------------------------------------------------- metrics */

/**
 * Projection distance ||A A^T - B B^T||_F of two d x k matrices with
 * orthonormal columns, without forming d x d: sqrt(2) ||B - A (A^T B)||_F
 * (the identity 2k - 2||A^T B||_F^2 cancels catastrophically below ~1e-8).
 * *sin_theta (may be NULL) receives ||(I - AA^T) B||_2.
 */
FS_WUR int fs_fedpower_subspace_dist(const fs_mat *a, const fs_mat *b, double *dist,
                                     double *sin_theta, struct fs_err *err);

#endif
