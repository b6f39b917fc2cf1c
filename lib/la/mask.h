/* FedSVD masks (docs/wire-fedsvd.md): a secret random orthogonal n x n matrix
 *
 *     M = P · blockdiag(Q_0, ..., Q_{nb-1})
 *
 * with P a uniformly random permutation and each Q_t an independent
 * Haar-random orthogonal block, all derived from a 32-byte seed. The
 * matrix is never needed densely: products with M or M^T and column slabs
 * M[:, c0:c0+nc] are computed block by block, generating each Q_t on demand.
 *
 * Conventions.
 *  - Permutation: M[perm[i], j] = D[i, j] where D = blockdiag(Q_t), i.e.
 *    row i of D becomes row perm[i] of M (fs_mask_perm).
 *  - Blocks: nb = ceil(n / block) blocks of balanced sizes (they differ by at
 *    most one, the larger ones first), each <= block. One dense block when
 *    n <= block. Balanced rather than "b, b, ..., remainder" because a tiny
 *    last block (a 1 x 1 block is just ±1) would leave those rows of the
 *    data essentially unmasked.
 *  - Seed: sub-keys are derived with the AES-CTR PRG from (seed, n, block),
 *    so the same seed with a different n or block size gives an unrelated
 *    mask. The permutation comes from stream 0 (Fisher–Yates with
 *    fs_prg_below), block t from stream t + 1 (fs_haar_gen: the implicit
 *    Householder QR of a Gaussian matrix with diag(R) > 0, see haar.h).
 *  - Determinism: the same (seed, n, block) gives the same permutation
 *    everywhere and a bit-identical matrix for the same machine, BLAS build
 *    and BLAS thread count (across those, rounding-level differences: see
 *    haar.h); a slab is bit-identical to the same columns of the dense matrix.
 *  - Secrets: the derived key and the permutation are wiped on fs_mask_free;
 *    temporary blocks are wiped before they are freed.
 *  - Cost: blocks are regenerated on every call (slabs: only as far as their
 *    columns need, and see fs_mask_cache below) from n_t (n_t + 1) / 2 normal
 *    draws (O(n_t^2)); a product with k columns costs O(n_t^2 k) per block, a
 *    slab of w columns O(n_t^2 w), the dense matrix O(n^2 b). Example (2 busy
 *    cores): M X for n = 20000, b = 4096, k = 100 takes ~2.4 s.
 */
#ifndef FS_LA_MASK_H
#define FS_LA_MASK_H

#include <stddef.h>
#include <stdint.h>

#include "mat.h"

/** Default largest block: dimensions up to this get one dense Haar block. */
#define FS_MASK_DENSE_MAX 4096

typedef struct fs_mask fs_mask;

/**
 * One piece of a column slab: the part of block t that falls in the slab.
 * M[rows[a], col0 + c] = q[a, c] for a < q->rows, c < q->cols; every other
 * entry of those columns of M is zero.
 */
typedef struct fs_mask_piece {
    size_t block; /* block index t */
    size_t col0;  /* first column of M covered (global index) */
    size_t *rows; /* q->rows row indices of M (owned) */
    fs_mat *q;    /* owned: Q_t restricted to the covered columns (all its rows) */
} fs_mask_piece;

/** The column slab M[:, c0:c0+nc] as pieces in ascending column order. */
typedef struct fs_mask_slab {
    size_t n;  /* rows of M */
    size_t c0; /* first column */
    size_t nc; /* number of columns */
    size_t npieces;
    fs_mask_piece *pieces; /* owned */
} fs_mask_slab;

/** Smallest default block of a mask bigger than FS_MASK_DENSE_MAX (see fs_mask_choose_block). */
#define FS_MASK_MIN_BLOCK 1024

/**
 * Suggested block size for a mask of dimension n acting next to a data
 * dimension other_dim: n when n <= FS_MASK_DENSE_MAX (one dense
 * block); otherwise t = max(other_dim, FS_MASK_MIN_BLOCK) (so a block's rows
 * do not span a detectable low-dimensional subspace), capped at max_block
 * (0 = 4 * FS_MASK_DENSE_MAX), returned as the bound ceil(n / floor(n / t))
 * that gives at most floor(n / t) balanced blocks of at least t rows each (n if
 * t >= n; max_block if that bound exceeds it). The masking cost grows as
 * n b^2 (the FedSVD server's SVD as n d^2), a party's as b n_i d, so blocks
 * near the other dimension keep masking no dearer than the factorization;
 * docs/wire-fedsvd.md (block_size) discusses what larger blocks add.
 */
size_t fs_mask_choose_block(size_t n, size_t other_dim, size_t max_block);

/**
 * New mask spec of dimension n with blocks of at most `block` rows
 * (0 = FS_MASK_DENSE_MAX), from a 32-byte secret seed (copied). Computes the
 * permutation now (O(n) memory); blocks are generated on use.
 * @param out receives the new mask, free with fs_mask_free.
 * @return 0, FS_EINVAL (n == 0, NULL seed), FS_ERANGE (block over the LAPACK
 *         int range), FS_ENOMEM, FS_ECRYPTO.
 */
FS_WUR int fs_mask_new(size_t n, size_t block, const uint8_t seed[32], fs_mask **out,
                       struct fs_err *err);

/** Free, wiping the derived key and the permutation. Accepts NULL. */
void fs_mask_free(fs_mask *m);

/**
 * Keep every block a product (fs_mask_mul_left/right) draws, until
 * fs_mask_free, so later products skip drawing it again (a party multiplies
 * by its shared mask twice: before the upload and to recover its result).
 * Only when the blocks' reflectors take at most max_bytes (n_t^2 * 8 bytes
 * per block); otherwise nothing changes (and 0 is returned). The results are
 * bit-identical either way. Afterwards the mask's products are not reentrant
 * (a kept block is applied in place): one thread at a time.
 * @return 0, FS_EINVAL, FS_ENOMEM.
 */
FS_WUR int fs_mask_keep(fs_mask *m, size_t max_bytes, struct fs_err *err);

/** Dimension n. */
size_t fs_mask_dim(const fs_mask *m);

/** Number of diagonal blocks. */
size_t fs_mask_nblocks(const fs_mask *m);

/** Rows/columns [*off, *off + *size) of D that block t occupies (t < nblocks). */
void fs_mask_block_range(const fs_mask *m, size_t t, size_t *off, size_t *size);

/** Index of the block containing row/column i of D (i < n). */
size_t fs_mask_block_of(const fs_mask *m, size_t i);

/** The permutation (n entries, borrowed, valid until fs_mask_free): M[perm[i], :] = D[i, :]. */
const size_t *fs_mask_perm(const fs_mask *m);

/** New copy of block Q_t (size x size); free with fs_mat_free (wipe first if kept long). */
FS_WUR int fs_mask_block(const fs_mask *m, size_t t, fs_mat **out, struct fs_err *err);

/** New dense n x n matrix M (for small n); free with fs_mat_free. */
FS_WUR int fs_mask_dense(const fs_mask *m, fs_mat **out, struct fs_err *err);

/**
 * y = op(M) x without forming M. op: 'N' (M) or 'T' (M^T).
 * x and y are n x k, preallocated, and must not overlap (FS_EINVAL).
 */
FS_WUR int fs_mask_mul_left(const fs_mask *m, char op, const fs_mat *x, fs_mat *y,
                            struct fs_err *err);

/**
 * y = x op(M) without forming M. op: 'N' or 'T'.
 * x and y are k x n, preallocated, and must not overlap (FS_EINVAL).
 */
FS_WUR int fs_mask_mul_right(const fs_mask *m, char op, const fs_mat *x, fs_mat *y,
                             struct fs_err *err);

/**
 * The column slab M[:, c0:c0+nc] (what a party holding rows c0..c0+nc-1 of
 * the data needs) as pieces: only the blocks overlapping those columns are
 * generated. @param out new slab, free with fs_mask_slab_free.
 * @return 0, FS_EINVAL (nc == 0 or c0 + nc > n), FS_ENOMEM, ...
 */
FS_WUR int fs_mask_slab_new(const fs_mask *m, size_t c0, size_t nc, fs_mask_slab **out,
                            struct fs_err *err);

/** New dense n x nc copy of a slab; free with fs_mat_free. */
FS_WUR int fs_mask_slab_to_dense(const fs_mask_slab *s, fs_mat **out, struct fs_err *err);

/** Shortcut: new dense M[:, c0:c0+nc] (n x nc). */
FS_WUR int fs_mask_slab_dense(const fs_mask *m, size_t c0, size_t nc, fs_mat **out,
                              struct fs_err *err);

/**
 * y = M[:, c0:c0+nc] x using only the slab's pieces (x nc x k, y n x k
 * preallocated, no overlap). Pieces are bounds-checked, so a slab decoded
 * from the network cannot write outside y (FS_EINVAL).
 */
FS_WUR int fs_mask_slab_mul(const fs_mask_slab *s, const fs_mat *x, fs_mat *y, struct fs_err *err);

/** Rows of M the slab's pieces cover, counted with repeats (the sum of their q->rows). */
size_t fs_mask_slab_rows(const fs_mask_slab *s);

/**
 * y = the slab's nonzero rows of M[:, c0:c0+nc] x, compactly: y has
 * fs_mask_slab_rows(s) rows, piece p's rows (in its rows[] order) after
 * those of pieces 0..p-1; row a of piece p is row rows[a] of
 * fs_mask_slab_mul's product (bit for bit when the pieces' rows are
 * distinct). One product per piece, no n-row buffer. x nc x k, y
 * preallocated, no overlap.
 */
FS_WUR int fs_mask_slab_mul_compact(const fs_mask_slab *s, const fs_mat *x, fs_mat *y,
                                    struct fs_err *err);

/** Free a slab, wiping its blocks and row indices. Accepts NULL. */
void fs_mask_slab_free(fs_mask_slab *s);

/*
 * Block cache for slabs (the masking server: neighbouring parties' slabs
 * meet inside a block, and each would otherwise draw that block's first
 * reflectors and form the 128-column chunk they share).
 *
 * While a cache is attached to a thread (fs_mask_cache_attach),
 * fs_mask_slab_new on that thread keeps, per block it touches but does not
 * hand out entirely: the block's reflectors drawn so far with its stream
 * (a later slab needing more columns draws on from there; once the block's
 * last column is out, only the reflectors the columns left need) and the
 * formed chunks it needed only part of. Entries are named by a PRF output of the
 * mask's key (masks from the same seed, n and block share them) and block
 * index. An entry is freed (wiped) once slabs have handed out as many
 * columns of the block as it has, or least recently used first when the
 * entries exceed max_bytes, or with the cache. A slab is bit-identical with
 * or without a cache. Thread-safe; an entry in use is taken out, so two
 * threads on one block each work alone (the second gets no hit).
 */
typedef struct fs_mask_cache fs_mask_cache;

struct fs_mask_cache_stats {
    uint64_t hits;    /* a block found in the cache */
    uint64_t misses;  /* a block not found */
    uint64_t evicted; /* entries dropped over the cap */
    uint64_t entries; /* entries now */
    uint64_t bytes;   /* their reflectors and chunks, bytes */
};

/** New empty cache holding at most about max_bytes. @param out free with fs_mask_cache_free. */
FS_WUR int fs_mask_cache_new(size_t max_bytes, fs_mask_cache **out, struct fs_err *err);

/** Free, wiping every entry. No thread may have it attached. Accepts NULL. */
void fs_mask_cache_free(fs_mask_cache *c);

/** Use c for fs_mask_slab_new on the calling thread (NULL: none). @return the previous one. */
fs_mask_cache *fs_mask_cache_attach(fs_mask_cache *c);

/** A snapshot of c's counters. */
void fs_mask_cache_stats(fs_mask_cache *c, struct fs_mask_cache_stats *out);

#endif
