/* Lossless federated SVD (Chai et al. 2021, with the corrections listed in
 * docs/references.md): the pure pieces of the three roles, with no sockets, files or
 * clocks. Services move the messages; secure aggregation is lib/proto/secagg.
 *
 * Roles and messages (samples partition; party i holds rows R_i of the N x d
 * matrix X = [X_1; ...; X_K]):
 *
 *   masking server  fs_fedsvd_maskset_new(job, master seed)
 *                   -> keys_i = fs_fedsvd_maskset_party(i): the seed of the
 *                      shared d x d mask B, the column slab A[:, R_i] of the
 *                      secret N x N mask A, and the parties' group key
 *                      (sealed exponents, fedpca offsets).
 *                      Ship as .npy pieces (fs_fedsvd_keyfile_write,
 *                      fs_fedsvd_keys_asm_*) or one blob (_encode/_decode).
 *   party i         fs_fedsvd_party_new(keys_i, X_i)
 *                   fs_fedsvd_party_prepare -> exponent e_i; advertise it, or
 *                   seal it for the other parties (fs_fedsvd_exponent_seal)
 *   server          E = fs_fedsvd_public_exponent(e_1..e_K)       (publish E)
 *                   (sealed: each party opens all, fs_fedsvd_exponent_open_max,
 *                   and one reports E to the server)
 *   party i         fs_fedsvd_party_set_exponent(E)
 *                   fs_fedsvd_party_masked(secagg client, off, words) for every
 *                   chunk of the vec(X'_i), X'_i = A[:, R_i] X_i B (N x d),
 *                   a secure-aggregation input of fs_fedsvd_vector_len words
 *   server          secagg sum = vec(A X B) (ring);
 *                   fs_fedsvd_server_check_contributors(U3)
 *                   fs_fedsvd_server_decode(E, sum) -> X' = A X B
 *                   fs_fedsvd_server_factorize(X', k) -> S, V' (publish)
 *   party i         fs_fedsvd_party_recover(S, V') -> V = B V' (shared),
 *                   U_i = X_i V S^-1 (private), numerical rank.
 *
 * The aggregation server sees X' = A X B and learns S (and ||X||_F); it never
 * sees A, B or any X_i. The masking server never sees data. A party sees B,
 * its own slab of A, S and V' (V' = B^T V, nothing new once it has V).
 *
 * Canonical orientation. Both partitions run the same code on the matrix
 * Y whose rows are partitioned: Y = X (samples) or Y = X^T (features). With m
 * = rows of Y (the partitioned dimension: N or d) and n = columns of Y (the
 * shared one: d or N), the masking server draws A_c (m x m, secret, one slab
 * per party) and B_c (n x n, shared by all parties), and the server
 * factorizes Y' = A_c Y B_c = U_c S V_c^T (m x n). Parties recover the shared
 * factor B_c V_c and their private rows Y_i B_c V_c S^-1.
 *
 * Features partition (X = [X_1 | ... | X_K], party i holds the N x d_i
 * columns C_i). In the notation X' = A X B = sum_i A X_i B[C_i, :] (N x d):
 * A = B_c^T (N x N, shared: parties get its seed), B = A_c^T (d x d, secret:
 * party i gets its row slab B[C_i, :] as the column slab A_c[:, C_i] of B^T).
 * The aggregated vector is X' in ROW-major order (= vec(X'^T), column-major
 * d x N); the server factorizes X'^T = U_c S V_c^T and publishes V_c, which is
 * U' of X' = U' S V'^T. Parties recover U = A^T U' = B_c U' (N x r, shared)
 * and V_i = X_i^T U S^-1 (d_i x r, private). Check: X_i = U S V_i^T holds
 * because X^T U S^-1 = V.
 *
 * Results. r = min(N, d) (thin) or k (top-k), all in every result. rank =
 * #{j : s_j > rtol s_1}. The private factor's columns j >= rank are ZERO: they
 * are not determined by the party's data (U_i = X_i V S^-1 needs s_j > 0), and
 * zero keeps X_i = U_i S V^T exact up to the dropped s_j ~ 0 terms. S and the
 * shared factor keep all r columns (valid orthonormal vectors). Take the first
 * `rank` columns of both for a clean factorization. Signs: each pair is
 * flipped so that the largest-magnitude entry of the SHARED factor's column is
 * positive; for samples this is fs_svd's convention (on V), for features it is
 * on U. (Parties regenerate B independently; on a near-tie of two entries at
 * the 1e-16 level two parties could in theory pick different signs.)
 *
 * Dropouts. A party that drops before its masked input is complete is not in
 * the secagg survivor set U3 and the sum is A X~ B, X~ = X with that party's
 * rows set to zero. Zero rows change neither the singular values nor V, so
 * the result is EXACTLY the SVD of the survivors' rows (still lossless); the
 * dropped party's slab of A is simply unused. Because the job then answers a
 * different question than the one asked, the default is to fail cleanly:
 * fs_fedsvd_server_check_contributors refuses unless every party is in U3, or
 * allow_dropouts is set, in which case it reports the survivors' total size.
 * A party dropping after its upload (at consistency or unmasking) is in U3:
 * its rows are in the result. For features the same holds with columns.
 *
 * Fixed point. Each party advertises e_i with max|X'_i| <=
 * 2^e_i, computed WITHOUT forming X'_i: |X'_i[r,c]| <= rho_i ||T_i[:,c]||_2,
 * T_i = Y_i B_c, rho_i = max_r ||A_c[r, R_i]||_2 <= 1 (Cauchy-Schwarz on one
 * row of the slab), times 1 + 2^-20 for rounding. The public exponent E is
 * the max (computable by the parties alone from sealed exponents); values are encoded with bound
 * 2^E and K summands (f = 62 - E - ceil(log2 K)), so the ring sum never wraps and each decoded
 * entry is within K 2^-(f+1) < K^2 2^(E-62) of the float sum. The bound can exceed the true
 * max|X'_i| by up to ~sqrt(m / (2 ln m)) for Gaussian-like data (~5 bits of
 * the 62), which keeps the error far below the SVD's own rounding while
 * letting a party stream its contribution (it never holds the m x n X'_i,
 * only T_i = Y_i B_c and one block of columns). What a plain e_i reveals: the
 * order of magnitude (factor 2) of party i's data norm; sealed, the server
 * learns only E (~ log2 s_1, which it learns from S anyway).
 *
 * Sharded aggregation (samples only, job->shards = S > 1): the vector is
 * laid out shard by shard (fedsvd_shard.h); S servers each sum, decode and
 * reduce their rows of Y' to an R factor (fs_fedsvd_shard_r), and the
 * coordinator factorizes the stacked R's (fs_fedsvd_tsqr_factorize): the
 * same S and V' as fs_fedsvd_server_factorize of the whole Y', to rounding.
 * Parties encode that layout after fs_fedsvd_party_set_shards.
 *
 * Determinism and secrets: the same keys and data give bit-identical chunks
 * (blocks of columns are computed at fixed boundaries), so a retried chunk
 * upload is identical. Keys, slabs, the derived seeds and the party's
 * intermediate products are wiped when freed. */
#ifndef FS_PROTO_FEDSVD_H
#define FS_PROTO_FEDSVD_H

#include <stddef.h>
#include <stdint.h>

#include "../core/err.h"
#include "../la/fixedpt.h"
#include "../la/mask.h"
#include "../la/mat.h"
#include "../la/svd.h"
#include "secagg.h"

enum fs_fedsvd_partition {
    FS_FEDSVD_SAMPLES = 0, /* rows partitioned: V shared, U_i private */
    FS_FEDSVD_FEATURES = 1 /* columns partitioned: U shared, V_i private */
};

/* Exponents: advertised and public exponents lie in [MIN, MAX]; MIN also
 * stands for "all zero". */
#define FS_FEDSVD_EXP_MIN (-1000)
#define FS_FEDSVD_EXP_MAX 1000

/* Largest rows or cols of a job (BLAS/LAPACK take int dimensions). */
#define FS_FEDSVD_MAX_DIM 2147483647u

/* The public parameters of a job, known to every role. */
struct fs_fedsvd_job {
    enum fs_fedsvd_partition partition;
    size_t rows;         /* N, samples in total */
    size_t cols;         /* d, features in total */
    uint32_t parties;    /* K; party ids 1..K as in secagg */
    const size_t *sizes; /* borrowed, K entries: party i owns sizes[i-1] consecutive
                            rows (samples) or columns (features), in id order, from
                            offset sizes[0] + ... + sizes[i-2]; each >= 1, sum = N or d */
    size_t block_a;      /* max block of the partitioned-dimension mask; 0 = default */
    size_t block_b;      /* max block of the shared-dimension mask; 0 = default */
    uint32_t shards;     /* aggregation shards S (lib/proto/fedsvd_shard.h): 0 or 1 =
                            one server holds the whole vector; 2..FS_FEDSVD_MAX_SHARDS
                            (samples only) = the shard-blocked layout */
};

/* Most aggregation shards of a job. */
#define FS_FEDSVD_MAX_SHARDS 16

/** Check a job (ranges, sizes add up, caps). @return 0 or FS_EINVAL / FS_ERANGE. */
FS_WUR int fs_fedsvd_job_check(const struct fs_fedsvd_job *job, struct fs_err *err);

/** Words of the aggregated vector: N * d (0 for an invalid job). */
uint64_t fs_fedsvd_vector_len(const struct fs_fedsvd_job *job);

/* ------------------------------------------------------- fixed point */

/**
 * Exponent to advertise for a nonnegative magnitude bound: the least e with
 * maxabs (1 + 2^-20) <= 2^e, clamped below at FS_FEDSVD_EXP_MIN (also for 0).
 * @return 0, or FS_ERANGE if maxabs is not finite or e > FS_FEDSVD_EXP_MAX.
 */
FS_WUR int fs_fedsvd_exponent(double maxabs, int *e, struct fs_err *err);

/**
 * Public exponent: the max of the k >= 1 advertised ones. Each must lie in
 * [FS_FEDSVD_EXP_MIN, FS_FEDSVD_EXP_MAX] (they come from the network).
 * @return 0 or FS_EINVAL.
 */
FS_WUR int fs_fedsvd_public_exponent(const int *e, size_t k, int *out, struct fs_err *err);

/* Sealed exponents. An advertised exponent tells whoever reads it the order
 * of magnitude of that party's data. Parties can instead exchange exponents
 * sealed (AES-256-GCM) under a key derived from the group key, relayed by the
 * aggregation server without it reading them; each party opens all of them
 * and takes the max. For FedSVD the server still needs the public exponent
 * to decode X' (a party reports it), but then learns only the max (~ log2 of
 * the largest singular value, which it learns anyway), not each party's.
 * fedpca's statistics rounds always use sealed exponents: only parties decode
 * those sums. */
#define FS_FEDSVD_SEALED_EXP_LEN 32

/**
 * Seal exponent e of party `party` for aggregation `round` (bound in the
 * associated data, so a sealed exponent cannot be replayed for another party
 * or round). Random nonce. @return 0, FS_EINVAL, FS_ECRYPTO.
 */
FS_WUR int fs_fedsvd_exponent_seal(const uint8_t group_key[32], uint32_t round, uint32_t party,
                                   int e, uint8_t out[FS_FEDSVD_SEALED_EXP_LEN],
                                   struct fs_err *err);

/**
 * Open k >= 1 sealed exponents of aggregation `round`, sealed[q] from party
 * ids[q], and give their max. @return 0, FS_EAUTH (forged, or relayed for
 * the wrong party or round), FS_EINVAL (out-of-range exponent).
 */
FS_WUR int fs_fedsvd_exponent_open_max(const uint8_t group_key[32], uint32_t round,
                                       const uint32_t *ids,
                                       const uint8_t (*sealed)[FS_FEDSVD_SEALED_EXP_LEN], size_t k,
                                       int *max, struct fs_err *err);

/** Fixed-point parameters for bound 2^exponent and `parties` summands. */
FS_WUR int fs_fedsvd_fixedpt(int exponent, uint32_t parties, struct fs_fixedpt *fp,
                             struct fs_err *err);

/* ------------------------------------------------------- masking side */

/* What one party receives from the masking server. The struct is public so a
 * service can ship its parts: the masking server sends a JSON manifest and
 * two .npy files per slab piece (fs_fedsvd_keyfile_write below), the agent
 * puts them back together with fs_fedsvd_keys_asm_*. fs_fedsvd_keys_encode/
 * _decode give one validated binary blob (in-process shipping: bench, tests). */
struct fs_fedsvd_keys {
    uint32_t party;   /* 1..parties */
    uint32_t parties; /* K */
    enum fs_fedsvd_partition partition;
    size_t rows, cols;     /* N, d */
    size_t offset, size;   /* own range of the partitioned dimension */
    size_t block_b;        /* block size of the shared mask B_c */
    uint8_t b_seed[32];    /* seed of B_c (n x n), the same for every party */
    uint8_t group_key[32]; /* secret of the parties (the same for all, never given to the
                              aggregation server): seals exponents, fedpca ring offsets */
    fs_mask_slab *a_slab;  /* owned: A_c[:, offset:offset+size], m x size */
};

typedef struct fs_fedsvd_maskset fs_fedsvd_maskset;

/**
 * New mask set for a job from a 32-byte secret master seed (copied, wiped on
 * free). The seeds of A_c, B_c and the offset key are HKDF-SHA256 outputs of
 * the master seed under distinct labels bound to (partition, m, n), so none
 * reveals another. Blocks: job->block_a/b, or fs_mask_choose_block(m, n, 0)
 * and fs_mask_choose_block(n, m, 0).
 * @param out new mask set, free with fs_fedsvd_maskset_free.
 */
FS_WUR int fs_fedsvd_maskset_new(const struct fs_fedsvd_job *job, const uint8_t master_seed[32],
                                 fs_fedsvd_maskset **out, struct fs_err *err);

/**
 * The keys for party `party` (1..K): only its own slab of A_c is generated.
 * Cost O(b^2 size) for block size b. @param out new keys, free with
 * fs_fedsvd_keys_free. @return 0, FS_EINVAL (no such party), FS_ENOMEM, ...
 */
FS_WUR int fs_fedsvd_maskset_party(const fs_fedsvd_maskset *ms, uint32_t party,
                                   struct fs_fedsvd_keys **out, struct fs_err *err);

/** Free, wiping the seeds. Accepts NULL. */
void fs_fedsvd_maskset_free(fs_fedsvd_maskset *ms);

/** Check keys (geometry, slab pieces cover exactly the range, indices in bounds, finite). */
FS_WUR int fs_fedsvd_keys_check(const struct fs_fedsvd_keys *k, struct fs_err *err);

/**
 * Serialise keys into a new buffer (little endian, magic "FSVDKEY1"); free()
 * it after wiping (it holds secrets: fs_fedsvd_wipe_free).
 */
FS_WUR int fs_fedsvd_keys_encode(const struct fs_fedsvd_keys *k, uint8_t **buf, size_t *len,
                                 struct fs_err *err);

/**
 * Parse and validate a blob from fs_fedsvd_keys_encode. Every allocation is
 * bounded by len (the blob holds every value it describes).
 * @param out new keys, free with fs_fedsvd_keys_free.
 * @return 0, FS_EFORMAT (any malformed or inconsistent field), FS_ENOMEM.
 */
FS_WUR int fs_fedsvd_keys_decode(const uint8_t *buf, size_t len, struct fs_fedsvd_keys **out,
                                 struct fs_err *err);

/** Free keys, wiping seeds and slab. Accepts NULL. */
void fs_fedsvd_keys_free(struct fs_fedsvd_keys *k);

/* ---- keys as .npy files (the masking server's wire, docs/wire-fedsvd.md)
 *
 * Piece p of the slab (fs_mask_piece: block t, first column col0, r rows of
 * A_c, c columns) is two files:
 *   rows.npy   <u8, shape (r,): the row indices of A_c the block covers;
 *   block.npy  <f8, shape (r, c), fortran_order True (column-major data):
 *              A_c[rows[a], col0 + j] = block[a, j], every other entry of
 *              those columns is zero.
 * Both are .npy v1.0 with the header padded to 64 bytes, little-endian. The
 * manifest lists per piece (block, col0, r, c) and each file's SHA-256; the
 * keys id (fs_fedsvd_keys_id) is a SHA-256 over the geometry, both seeds and
 * every piece's description and file digests, so it binds all the files of
 * one download. The agent checks every file against the manifest as it
 * arrives (fs_fedsvd_keys_asm_add) and the whole at the end
 * (fs_fedsvd_keys_check). */

/* Largest number of pieces of one party's slab (the manifest's cap; the
 * masking server rejects mask sets whose block size gives more). */
#define FS_FEDSVD_KEYS_MAX_PIECES 1024

enum fs_fedsvd_keyfile {
    FS_FEDSVD_KEYFILE_ROWS = 0, /* rows.npy */
    FS_FEDSVD_KEYFILE_BLOCK = 1 /* block.npy */
};

/* One piece as a manifest describes it. */
struct fs_fedsvd_piece_desc {
    size_t block;          /* diagonal block index t of A_c */
    size_t col0;           /* first column of A_c covered (global) */
    size_t r;              /* rows of the block (entries of rows.npy) */
    size_t c;              /* columns covered */
    uint8_t sha256[2][32]; /* of the files, by enum fs_fedsvd_keyfile */
};

/** Exact length in bytes of a piece's file (header + data); 0 on overflow or r, c = 0. */
uint64_t fs_fedsvd_keyfile_len(size_t r, size_t c, enum fs_fedsvd_keyfile which);

/** Receives a file's bytes in order (at most 1 MiB per call). @return 0 or an FS_E* code. */
typedef int (*fs_fedsvd_sink_fn)(void *ctx, const uint8_t *buf, size_t n, struct fs_err *err);

/**
 * Produce file `which` of piece p of k (checked keys) through sink, and fill
 * the piece's description (desc->sha256[which] and the geometry) if desc is
 * not NULL. The bytes are secret: the internal buffer is wiped.
 * @return 0, FS_EINVAL (bad p / keys), the sink's error, FS_ECRYPTO, FS_ENOMEM.
 */
FS_WUR int fs_fedsvd_keyfile_write(const struct fs_fedsvd_keys *k, size_t p,
                                   enum fs_fedsvd_keyfile which, fs_fedsvd_sink_fn sink, void *ctx,
                                   struct fs_fedsvd_piece_desc *desc, struct fs_err *err);

/**
 * The keys id: SHA-256 over a version label, the fields of k except a_slab
 * (party, parties, partition, rows, cols, offset, size, block_b, b_seed,
 * group_key) and the n piece descriptions (block, col0, r, c, both digests).
 */
FS_WUR int fs_fedsvd_keys_id(const struct fs_fedsvd_keys *k, const struct fs_fedsvd_piece_desc *d,
                             size_t n, uint8_t out[32], struct fs_err *err);

typedef struct fs_fedsvd_keys_asm fs_fedsvd_keys_asm;

/**
 * Start assembling keys from a manifest: hdr's fields except a_slab (copied,
 * hdr->a_slab ignored), the n piece descriptions (copied) and the manifest's
 * keys id. Checks, before any file is fetched: the header (party, range,
 * block), 1 <= n <= FS_FEDSVD_KEYS_MAX_PIECES, the pieces cover exactly the
 * party's range in ascending order (col0 consecutive, 1 <= c <= r <= m,
 * increasing block), the files' total at most max_bytes (0 = no cap), and
 * that keys_id is fs_fedsvd_keys_id of all this.
 * @param out free with fs_fedsvd_keys_asm_free.
 * @return 0, FS_EFORMAT (inconsistent manifest), FS_ERANGE (over max_bytes), FS_ENOMEM.
 */
FS_WUR int fs_fedsvd_keys_asm_new(const struct fs_fedsvd_keys *hdr,
                                  const struct fs_fedsvd_piece_desc *d, size_t n,
                                  const uint8_t keys_id[32], uint64_t max_bytes,
                                  fs_fedsvd_keys_asm **out, struct fs_err *err);

/** Length the manifest promises for file `which` of piece p (0 if p is out of range). */
uint64_t fs_fedsvd_keys_asm_file_len(const fs_fedsvd_keys_asm *a, size_t p,
                                     enum fs_fedsvd_keyfile which);

/**
 * Add file `which` of piece p (borrowed; the caller wipes it): its length
 * and SHA-256 must be the manifest's, its .npy header the expected dtype,
 * order and shape, row indices < m. Allocates only what the (verified) file
 * holds. @return 0, FS_EFORMAT (any mismatch), FS_ESTATE (already added), FS_ENOMEM.
 */
FS_WUR int fs_fedsvd_keys_asm_add(fs_fedsvd_keys_asm *a, size_t p, enum fs_fedsvd_keyfile which,
                                  const uint8_t *file, size_t len, struct fs_err *err);

/**
 * Every file added: validate the whole (fs_fedsvd_keys_check, as FS_EFORMAT)
 * and hand out the keys. @param out free with fs_fedsvd_keys_free.
 * @return 0, FS_ESTATE (files missing), FS_EFORMAT.
 */
FS_WUR int fs_fedsvd_keys_asm_finish(fs_fedsvd_keys_asm *a, struct fs_fedsvd_keys **out,
                                     struct fs_err *err);

/** Free, wiping whatever was assembled. Accepts NULL. */
void fs_fedsvd_keys_asm_free(fs_fedsvd_keys_asm *a);

/** Wipe len bytes of buf then free it. Accepts NULL. */
void fs_fedsvd_wipe_free(void *buf, size_t len);

/* ------------------------------------------------------- server */

/* What the aggregation server publishes to parties after factorizing. */
struct fs_fedsvd_published {
    size_t r;        /* singular triplets: min(m, n), or k */
    double *s;       /* r singular values, descending, owned */
    fs_mat *vc;      /* n x r, owned: V' (samples, d x r) or U' (features, N x r) */
    double total_sq; /* ||X'||_F^2 = ||X||_F^2 = sum of ALL squared singular values */
};

/** Release the fields of p (not p). Accepts NULL and zeroed structs. */
void fs_fedsvd_published_clear(struct fs_fedsvd_published *p);

/**
 * Dropout policy on the survivor set U3 of the aggregation (ids, any order).
 * Without allow_dropouts every party 1..K must be in U3 (else FS_ESTATE
 * naming the first missing one); with it, any nonempty subset is accepted.
 * @param n_included if not NULL, receives the survivors' total of the
 *        partitioned dimension (N or d of the matrix actually decomposed).
 */
FS_WUR int fs_fedsvd_server_check_contributors(const struct fs_fedsvd_job *job, int allow_dropouts,
                                               const uint32_t *ids, size_t nids, size_t *n_included,
                                               struct fs_err *err);

/**
 * Decode the ring sum (len = fs_fedsvd_vector_len words) into the canonical
 * masked matrix Y' = A_c Y B_c, m x n: X' (N x d) for samples, X'^T (d x N)
 * for features. @param out new matrix, free with fs_mat_free.
 */
FS_WUR int fs_fedsvd_server_decode(const struct fs_fedsvd_job *job, int public_exponent,
                                   const uint64_t *sum, uint64_t len, fs_mat **out,
                                   struct fs_err *err);

/**
 * As fs_fedsvd_server_decode, but in place: takes sum (len words from
 * malloc/calloc, e.g. fs_secagg_server_take_sum; freed on failure too) and
 * decodes it into the same memory, so no second m x n buffer is needed.
 * *out owns that memory (fs_mat_free). Same values bit for bit.
 */
FS_WUR int fs_fedsvd_server_decode_owned(const struct fs_fedsvd_job *job, int public_exponent,
                                         uint64_t *sum, uint64_t len, fs_mat **out,
                                         struct fs_err *err);

/**
 * Factorize the canonical masked matrix. k = 0: thin SVD in place, r =
 * min(m, n) (m >= n: dgeqrf, then dgesdd of the n x n R; m < n: dgesdd);
 * 1 <= k <= min(m, n): top-k by `method`, where
 * FS_TOPK_AUTO means exact (dgesvdx for k < min/2, else thin + truncate) and
 * FS_TOPK_RANDOMIZED is used only when asked. U' is never formed.
 * @param yc m x n, DESTROYED (overwritten by LAPACK; for k = 0 and m >= n it
 *        becomes R, n x n, and an owned buffer shrinks to n^2 words as soon as
 *        the QR is done); the caller still frees it.
 * @param seed 32 bytes for the randomized sketch, or NULL: then SHA-256 of the
 *        matrix (and its shape), so that equal inputs give bit-identical results.
 * @param out filled (owned fields), release with fs_fedsvd_published_clear.
 */
FS_WUR int fs_fedsvd_server_factorize(fs_mat *yc, size_t k, enum fs_topk_method method,
                                      const uint8_t *seed, struct fs_fedsvd_published *out,
                                      struct fs_err *err);

/* ------------------------------------------------------- party */

/* A party's result: X_i = u diag(s) v^T (columns >= rank of the private factor are zero). */
struct fs_fedsvd_result {
    enum fs_fedsvd_partition partition;
    size_t r;    /* columns of u and v, number of s */
    size_t rank; /* numerical rank: #{s_j > rtol s_1} */
    double *s;   /* r, owned */
    fs_mat *u;   /* owned: samples U_i (n_i x r, private); features U (N x r, shared) */
    fs_mat *v;   /* owned: samples V (d x r, shared); features V_i (d_i x r, private) */
};

/** Release the fields of r (not r). Accepts NULL and zeroed structs. */
void fs_fedsvd_result_clear(struct fs_fedsvd_result *r);

typedef struct fs_fedsvd_party fs_fedsvd_party;

/**
 * New party state.
 * @param keys takes ownership (also on failure).
 * @param x borrowed, must stay valid and unchanged until fs_fedsvd_party_free:
 *        samples: X_i, size x d; features: X_i, N x size (finite entries).
 * @param out free with fs_fedsvd_party_free.
 */
FS_WUR int fs_fedsvd_party_new(struct fs_fedsvd_keys *keys, const fs_mat *x, fs_fedsvd_party **out,
                               struct fs_err *err);

/** Borrowed keys of a party. */
const struct fs_fedsvd_keys *fs_fedsvd_party_keys(const fs_fedsvd_party *p);

/**
 * Compute T = Y_i B_c (size x n) and the exponent to advertise (see the
 * header comment). Cost O(size n b_B). Idempotent.
 */
FS_WUR int fs_fedsvd_party_prepare(fs_fedsvd_party *p, int *exponent, struct fs_err *err);

/**
 * 1 when fs_fedsvd_party_prepare has nothing left to do: T is computed, or
 * the upload ended. A driver with time on its hands (waiting for the other
 * parties) may prepare early while this is 0: the result is the same.
 */
int fs_fedsvd_party_prepared(const fs_fedsvd_party *p);

/** Fix the public exponent E (>= this party's e_i; FS_EINVAL otherwise). */
FS_WUR int fs_fedsvd_party_set_exponent(fs_fedsvd_party *p, int public_exponent,
                                        struct fs_err *err);

/**
 * Words [off, off + cnt) of the fixed-point encoding of vec(Y'_i), Y'_i =
 * A_c[:, R_i] Y_i B_c, without secagg masks (tests, or another transport).
 * Chunks may come in any order and be repeated (bit-identical).
 */
FS_WUR int fs_fedsvd_party_encode(fs_fedsvd_party *p, uint64_t off, uint64_t *y, size_t cnt,
                                  struct fs_err *err);

/**
 * Same, then masked for secure aggregation with fs_secagg_client_mask(c, off,
 * y, y, cnt): the chunk to upload. The client must have begun the aggregation
 * with len = fs_fedsvd_vector_len. With shards (fs_fedsvd_party_set_shards)
 * off is the global word of the shard-blocked layout and [off, off + cnt)
 * lies in one shard's window (else FS_EINVAL).
 */
FS_WUR int fs_fedsvd_party_masked(fs_fedsvd_party *p, fs_secagg_client *c, uint64_t off,
                                  uint64_t *y, size_t cnt, struct fs_err *err);

/**
 * Sharded aggregation (fedsvd_shard.h): encode the shard-blocked layout of
 * `shards` shards (0 or 1: the unsharded layout, the default). Samples
 * partition only, shards <= FS_FEDSVD_MAX_SHARDS and <= N. Set it before
 * the first chunk; each chunk (encode or masked) must then lie in one
 * shard's window. @return 0 or FS_EINVAL.
 */
FS_WUR int fs_fedsvd_party_set_shards(fs_fedsvd_party *p, uint32_t shards, struct fs_err *err);

/** Free (wiping) T, the column cache and the slab once the upload is done. */
void fs_fedsvd_party_end_upload(fs_fedsvd_party *p);

/**
 * Recover the shared factor B_c V_c and the private one Y_i B_c V_c S^-1.
 * @param pub borrowed; checked (shapes, finite, s descending and >= 0).
 * @param rtol rank tolerance relative to s_1; <= 0 means max(N, d) * DBL_EPSILON.
 * @param out filled, release with fs_fedsvd_result_clear.
 */
FS_WUR int fs_fedsvd_party_recover(fs_fedsvd_party *p, const struct fs_fedsvd_published *pub,
                                   double rtol, struct fs_fedsvd_result *out, struct fs_err *err);

/** Free, wiping keys and intermediates. Does not touch x. Accepts NULL. */
void fs_fedsvd_party_free(fs_fedsvd_party *p);

#endif
