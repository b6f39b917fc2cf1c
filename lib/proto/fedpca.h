/* Federated PCA on top of FedSVD (the "fedpca" job; Chai et al. 2021, §5.1,
 * done properly): centre (and optionally scale) with the global mean (and
 * variance), then FedSVD of the centred data. Pure state machine for the
 * party side; the aggregation server only runs secure aggregation and
 * fs_fedsvd_server_*; the masking server only hands out fs_fedsvd_keys.
 *
 * Samples partition, message flow (aggregation indices of one secagg job
 * with cfg.aggregations = fs_fedpca_aggregations(...)):
 *
 *   agg 0  MEAN  3d + 1 words: [wide(colsum_i) (3 words per column) | n_i] + o_{0,i}
 *   agg 1  VAR   (standardize only) 3d words: [wide(sum_rows (x - mean)^2)] + o_{1,i}
 *   agg 2  SVD   (agg 1 without standardize) FedSVD of Z_i = (X_i - mean) / scale
 *
 * Before each statistics aggregation every party sends its exponent SEALED
 * under the group key (fs_fedpca_party_stats_exponent); the server relays the
 * K sealed exponents to every party, which opens them and fixes their max E
 * (fs_fedpca_party_stats_open). The server never sees an exponent: it does
 * not need one, since only parties decode these sums. Values travel as
 * "wide" 3-limb fixed point with bound 2^E (two 52-bit digits and a signed
 * top limb, one ring word each, summed exactly in 128 bits): full double
 * precision for every column however far apart the columns' scales are (one
 * 64-bit word would lose ~7 digits on a column 1e-9 of the largest, e.g. a
 * variance of 1e-6 next to one of 1e3). The count is a plain integer word.
 *
 * Hiding the statistics from the aggregation server (the offset scheme).
 * The masking server gives every party the same 32-byte group key (in
 * fs_fedsvd_keys, never to the aggregation server). For stats round r, party
 * j's offset is o_{r,j} = AES-CTR keystream (len words) under
 * HKDF-Expand(group key, "fedpca/offset" || r || j): uniform in Z_2^64^len,
 * independent across (r, j). Party i adds o_{r,i} in the ring AFTER
 * fixed-point encoding, then secagg-masks the result as usual. The
 * aggregation server's unmasked sum is sum_i enc_i + sum_{j in S} o_{r,j},
 * S = the survivor set U3 of that aggregation: uniformly random for any
 * nonempty S (a one-time pad), so the server learns nothing about the column
 * sums, the count or the variances. It publishes the raw ring sum and S; each
 * party subtracts sum_{j in S} o_{r,j} (mod 2^64, exact) and decodes. A
 * per-party offset (rather than one shared o added K times) keeps the pad
 * uniform for any |S| (K o is not uniform when K is even) and makes dropouts
 * harmless. A wrong S leaves a random residue: the decoded count is then
 * implausible (> N or < 2) and the step fails (FS_ESTATE).
 *
 * What the aggregation server learns in the statistics rounds: the
 * contributor sets and the vector lengths (d, public anyway). Not the
 * exponents (sealed), not the sums (padded).
 *
 * Why two stats rounds with standardize: sum x^2 - N mean^2 cancels
 * catastrophically when |mean| >> std (1e6 vs 1 loses 12 digits); the second
 * round sums the centred squares, which is the two-pass algorithm and exact
 * to rounding. Without standardize no variance is needed: the total variance
 * for the explained-variance ratio is ||X'||_F^2 = ||X_c||_F^2, which the
 * server computes from X' (and could anyway) and publishes as total_sq.
 *
 * Conventions. Centring by the mean over the included rows N; explained
 * variance s_j^2 / (N - 1); ratio s_j^2 / total_sq (relative to the TOTAL
 * variance, the trace of the centred covariance, also for top-k); scale
 * (standardize) = sample standard deviation (ddof = 1, as R's prcomp
 * scale. = TRUE: the PCA of the correlation matrix), and a column with
 * var <= (N eps |mean|)^2 counts as constant and keeps scale 1 (the rule
 * scikit-learn's StandardScaler applies, which however divides by N). Components are d x k
 * (columns), scores = Z V (n_i x k for samples, computed directly, valid also beyond the numerical
 * rank).
 *
 * Dropouts. The contributor set must be the same in every aggregation of the
 * job (a party in the mean but missing from the SVD would centre the rows
 * with the wrong mean); a party checks this at each step and fails with
 * FS_ESTATE otherwise; the server does the same with
 * fs_fedpca_server_check_round before it factorizes anything. Secure
 * aggregation makes a party that dropped during an aggregation drop for good,
 * so with allow_dropouts a job that lost a party in round 0 gives the exact
 * PCA of the survivors' rows, and one that loses a party after round 0
 * (including one that uploaded in round 0 and then vanished) fails cleanly.
 * Without allow_dropouts any missing party fails the job.
 *
 * Features partition: each column lives at one party, so means and
 * variances are local; no stats rounds (aggregations = 1). Results mirror
 * FedSVD: components = own rows V_i of V (private), scores = U S (shared),
 * mean/scale of the party's own columns. */
#ifndef FS_PROTO_FEDPCA_H
#define FS_PROTO_FEDPCA_H

#include <stddef.h>
#include <stdint.h>

#include "fedsvd.h"

enum fs_fedpca_step {
    FS_FEDPCA_STEP_MEAN = 1, /* samples: secure sum of column sums and counts */
    FS_FEDPCA_STEP_VAR,      /* samples + standardize: secure sum of centred squares */
    FS_FEDPCA_STEP_SVD,      /* FedSVD of the centred (scaled) data */
    FS_FEDPCA_STEP_DONE
};

struct fs_fedpca_result {
    enum fs_fedsvd_partition partition;
    size_t k;                         /* components */
    size_t rank;                      /* numerical rank (see fs_fedsvd_result) */
    size_t n_samples;                 /* N: rows the PCA ran on (survivors) */
    double *s;                        /* k singular values of the centred data */
    double *explained_variance;       /* k: s^2 / (N - 1) */
    double *explained_variance_ratio; /* k: s^2 / total_sq */
    double total_variance;            /* total_sq / (N - 1) */
    size_t nmean;                     /* d (samples) or own d_i (features) */
    double *mean;                     /* nmean */
    double *scale;                    /* nmean, or NULL without standardize */
    fs_mat *components;               /* samples: V_k, d x k (shared); features: d_i x k (own) */
    fs_mat *scores;                   /* samples: Z_i V_k, n_i x k (own); features: U S, N x k */
};

/** Release the fields of r (not r). Accepts NULL and zeroed structs. */
void fs_fedpca_result_clear(struct fs_fedpca_result *r);

/** Secure aggregations a fedpca job runs: samples 2 (3 with standardize), features 1. */
unsigned fs_fedpca_aggregations(enum fs_fedsvd_partition partition, int standardize);

typedef struct fs_fedpca_party fs_fedpca_party;

/**
 * New party state. @param keys takes ownership (also on failure).
 * @param x borrowed, as for fs_fedsvd_party_new; only read until the SVD step
 *        begins (the party then works on its own centred copy).
 * @param out free with fs_fedpca_party_free.
 */
FS_WUR int fs_fedpca_party_new(struct fs_fedsvd_keys *keys, const fs_mat *x, int standardize,
                               fs_fedpca_party **out, struct fs_err *err);

/** Current step. */
enum fs_fedpca_step fs_fedpca_party_step(const fs_fedpca_party *p);

/** Words of the current stats aggregation: 3d + 1 (MEAN), 3d (VAR), 0 otherwise. */
size_t fs_fedpca_party_stats_len(const fs_fedpca_party *p);

/**
 * This party's exponent for the current stats round, sealed for the other
 * parties (FS_FEDSVD_SEALED_EXP_LEN bytes; the server relays it unread).
 */
FS_WUR int fs_fedpca_party_stats_exponent(fs_fedpca_party *p,
                                          uint8_t sealed[FS_FEDSVD_SEALED_EXP_LEN],
                                          struct fs_err *err);

/**
 * Open the k sealed exponents of this round (sealed[q] from party ids[q],
 * ours included) and fix their max as the round's public exponent.
 * @return 0, FS_EAUTH (forged or misrouted), FS_EINVAL (ours missing).
 */
FS_WUR int fs_fedpca_party_stats_open(fs_fedpca_party *p, const uint32_t *ids,
                                      const uint8_t (*sealed)[FS_FEDSVD_SEALED_EXP_LEN], size_t k,
                                      struct fs_err *err);

/**
 * The current stats round's input: wide fixed-point words plus this party's
 * ring offset (len = fs_fedpca_party_stats_len). Mask it with
 * fs_secagg_client_mask before upload.
 */
FS_WUR int fs_fedpca_party_stats_input(fs_fedpca_party *p, uint64_t *y, size_t len,
                                       struct fs_err *err);

/**
 * The server's ring sum of the current stats round and its contributor set
 * (U3, which must contain this party and, after round 0, equal round 0's).
 * Removes the offsets, decodes, and moves to the next step; entering the SVD
 * step centres (and scales) the data and creates the FedSVD party.
 */
FS_WUR int fs_fedpca_party_stats_result(fs_fedpca_party *p, const uint64_t *sum, size_t len,
                                        const uint32_t *contributors, size_t ncontrib,
                                        struct fs_err *err);

/** The FedSVD party of the SVD step (borrowed; NULL before it). Drive it as in fedsvd.h. */
fs_fedsvd_party *fs_fedpca_party_svd(fs_fedpca_party *p);

/**
 * Finish: recover (fs_fedsvd_party_recover) and derive the PCA results.
 * @param contributors the SVD aggregation's U3 (checked equal to the stats
 *        rounds' for samples; may be NULL for features).
 * @param rtol as for fs_fedsvd_party_recover.
 * @param out filled, release with fs_fedpca_result_clear.
 */
FS_WUR int fs_fedpca_party_finish(fs_fedpca_party *p, const struct fs_fedsvd_published *pub,
                                  const uint32_t *contributors, size_t ncontrib, double rtol,
                                  struct fs_fedpca_result *out, struct fs_err *err);

/** Free, wiping the data copy and the keys. Accepts NULL. */
void fs_fedpca_party_free(fs_fedpca_party *p);

/**
 * Server side, after each aggregation of a samples job: the dropout policy of
 * fs_fedsvd_server_check_contributors on `now` (U3 of this aggregation), and
 * `now` must equal `first` (U3 of aggregation 0; pass first = NULL for
 * aggregation 0 itself). Lets the server stop a job whose contributors
 * changed before it factorizes anything. @return 0, FS_ESTATE, FS_EINVAL.
 */
FS_WUR int fs_fedpca_server_check_round(const struct fs_fedsvd_job *job, int allow_dropouts,
                                        const uint32_t *first, size_t nfirst, const uint32_t *now,
                                        size_t nnow, struct fs_err *err);

#endif
