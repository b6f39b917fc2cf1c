/* Haar-random orthogonal matrices and FedSVD masks M = P blockdiag(Q_t):
 * orthogonality, determinism from the seed, block structure, blockwise
 * products and slabs against the dense matrix, errors. */
#include <stdint.h>

#include "la/haar.h"
#include "la/mask.h"
#include "test.h"
#include "test_la_util.h"

static const uint8_t SEED_A[32] = {0x11, 0x22, 0x33};
static const uint8_t SEED_B[32] = {0x11, 0x22, 0x34};

static void test_haar_orthogonal_deterministic(void)
{
    uint8_t s1[32] = {1};
    uint8_t s2[32] = {2};
    struct fs_err err = {0};
    fs_mat *a = NULL;
    fs_mat *b = NULL;
    fs_mat *c = NULL;

    CHECK_OK(fs_haar_from_seed(120, s1, &a, &err), &err);
    CHECK_OK(fs_haar_from_seed(120, s1, &b, &err), &err);
    CHECK_OK(fs_haar_from_seed(120, s2, &c, &err), &err);
    if (a == NULL || b == NULL || c == NULL) {
        goto out;
    }
    CHECK_MSG(tl_orth_err(a) < 1e-13, "%g", tl_orth_err(a));
    {
        fs_mat *at = fs_mat_transpose(a);
        CHECK(tl_orth_err(at) < 1e-13); /* rows orthonormal too */
        fs_mat_free(at);
    }
    CHECK(tl_bit_equal(a, b));
    CHECK(tl_max_diff(a, c) > 0.1);
out:
    fs_mat_free(a);
    fs_mat_free(b);
    fs_mat_free(c);
}

/*
 * Distribution checks. For Haar Q on O(n) the moments of tr(Q) match those
 * of a standard normal up to order n (Diaconis & Shahshahani 1994):
 * E[tr Q] = 0, E[(tr Q)^2] = 1, E[(tr Q)^4] = 3 for n >= 4; and every entry
 * has E[q_ij^2] = 1/n. A missing sign fix biases the diagonal (E[tr Q] far
 * from 0). 4000 draws of 4 x 4: sd of the mean of tr is 0.016, of the mean of
 * tr^2 about 0.022.
 */
static void test_haar_distribution(void)
{
    enum { N = 4, DRAWS = 4000 };
    uint8_t key[32] = {77};
    struct fs_err err = {0};
    fs_prg *prg = NULL;
    fs_mat *q = fs_mat_new(N, N);
    double s1 = 0.0;
    double s2 = 0.0;
    double s4 = 0.0;
    double sq = 0.0;

    CHECK_OK(fs_prg_new(&prg, key, NULL, &err), &err);
    for (int d = 0; d < DRAWS && prg != NULL; d++) {
        double tr = 0.0;
        CHECK_OK(fs_haar_fill(q, prg, &err), &err);
        for (size_t i = 0; i < N; i++) {
            tr += FS_MAT_AT(q, i, i);
        }
        s1 += tr;
        s2 += tr * tr;
        s4 += tr * tr * tr * tr;
        sq += FS_MAT_AT(q, 0, 1) * FS_MAT_AT(q, 0, 1);
    }
    CHECK_NEAR(s1 / DRAWS, 0.0, 0.07);
    CHECK_NEAR(s2 / DRAWS, 1.0, 0.1);
    CHECK_NEAR(s4 / DRAWS, 3.0, 0.6);
    CHECK_NEAR(sq / DRAWS, 1.0 / N, 0.03);
    fs_prg_free(prg);
    fs_mat_free(q);
}

/* Factored form: products and column ranges against the dense matrix, with
 * n large enough to cross the 64-column chunks. */
static void test_haar_factored(void)
{
    enum { N = 150, K = 7 };
    uint8_t key[32] = {3};
    struct fs_err err = {0};
    fs_prg *prg = NULL;
    fs_haar *h = NULL;
    fs_mat *q = fs_mat_new(N, N);
    fs_mat *xl = tl_randn(N, K, 40);
    fs_mat *xr = tl_randn(K, N, 41);
    const char ops[2] = {'N', 'T'};

    CHECK_OK(fs_prg_new(&prg, key, NULL, &err), &err);
    CHECK_OK(fs_haar_gen(N, prg, &h, &err), &err);
    if (h == NULL) {
        goto out;
    }
    CHECK(fs_haar_dim(h) == N);
    CHECK_OK(fs_haar_columns(h, 0, q, &err), &err);
    CHECK(tl_orth_err(q) < 1e-13);
    for (int i = 0; i < 2; i++) {
        fs_mat *y = fs_mat_dup(xl);
        fs_mat *ref = NULL;
        CHECK_OK(fs_haar_apply_left(h, ops[i], y, &err), &err);
        CHECK_OK(fs_mat_mul(ops[i], 'N', q, xl, &ref, &err), &err);
        CHECK_MSG(tl_max_diff(y, ref) < 1e-13, "left %c %g", ops[i], tl_max_diff(y, ref));
        fs_mat_free(y);
        fs_mat_free(ref);
        y = fs_mat_dup(xr);
        ref = NULL;
        CHECK_OK(fs_haar_apply_right(h, ops[i], y, &err), &err);
        CHECK_OK(fs_mat_mul('N', ops[i], xr, q, &ref, &err), &err);
        CHECK_MSG(tl_max_diff(y, ref) < 1e-13, "right %c %g", ops[i], tl_max_diff(y, ref));
        fs_mat_free(y);
        fs_mat_free(ref);
    }
    {
        /* column ranges, inside a chunk and across chunk boundaries: same bits */
        size_t ranges[][2] = {{0, 1}, {10, 20}, {60, 10}, {63, 66}, {100, 50}, {149, 1}};
        for (size_t r = 0; r < sizeof ranges / sizeof ranges[0]; r++) {
            fs_mat *c = fs_mat_new(N, ranges[r][1]);
            fs_mat want = fs_mat_view(q, 0, ranges[r][0], N, ranges[r][1]);
            CHECK_OK(fs_haar_columns(h, ranges[r][0], c, &err), &err);
            CHECK_MSG(tl_bit_equal(c, &want), "columns [%zu, +%zu)", ranges[r][0], ranges[r][1]);
            fs_mat_free(c);
        }
    }
    {
        fs_mat *c = fs_mat_new(N, 5);
        fs_mat *bad = fs_mat_new(N - 1, 3);
        CHECK(fs_haar_columns(h, 146, c, &err) == FS_EINVAL);
        CHECK(fs_haar_apply_left(h, 'N', bad, &err) == FS_EINVAL);
        CHECK(fs_haar_apply_right(h, 'N', bad, &err) == FS_EINVAL);
        CHECK(fs_haar_apply_left(h, 'x', xl, &err) == FS_EINVAL);
        fs_mat_free(c);
        fs_mat_free(bad);
    }
out:
    fs_haar_free(h);
    fs_haar_free(NULL);
    fs_prg_free(prg);
    fs_mat_free(q);
    fs_mat_free(xl);
    fs_mat_free(xr);
}

/*
 * Blocked column formation (64-reflector panels, 128-column chunks) against
 * LAPACK: Q from fs_haar_columns equals Q I from dormqr (fs_haar_apply_left),
 * and columns from a prefix of the reflectors (fs_haar_gen_prefix: what the
 * masking server draws for a slab) are bit-identical to the same columns
 * from all of them, whatever range they are asked with. n = 300: three
 * chunks (the last of 44 columns) and a last panel of 44 reflectors.
 */
static void test_haar_prefix_blocked(void)
{
    enum { N = 300 };
    uint8_t key[32] = {9};
    struct fs_err err = {0};
    fs_prg *prg = NULL;
    fs_haar *h = NULL;
    fs_mat *q = fs_mat_new(N, N);
    fs_mat *ref = fs_mat_new(N, N);
    size_t ranges[][2] = {{0, 1},     {0, 128},  {100, 60}, {127, 2},
                          {128, 128}, {250, 50}, {299, 1},  {5, 290}};

    CHECK(fs_haar_prefix_for(N, 0) == 0);
    CHECK(fs_haar_prefix_for(N, 1) == 128);
    CHECK(fs_haar_prefix_for(N, 128) == 128);
    CHECK(fs_haar_prefix_for(N, 129) == 256);
    CHECK(fs_haar_prefix_for(N, 257) == N);
    CHECK(fs_haar_prefix_for(N, N) == N);
    CHECK(fs_haar_prefix_for(100, 1) == 100);
    CHECK_OK(fs_prg_new(&prg, key, NULL, &err), &err);
    CHECK_OK(fs_haar_gen(N, prg, &h, &err), &err);
    fs_prg_free(prg);
    prg = NULL;
    if (h == NULL) {
        goto out;
    }
    CHECK_OK(fs_haar_columns(h, 0, q, &err), &err);
    CHECK_MSG(tl_orth_err(q) < 1e-13, "%g", tl_orth_err(q));
    for (size_t i = 0; i < N; i++) {
        FS_MAT_AT(ref, i, i) = 1.0;
    }
    CHECK_OK(fs_haar_apply_left(h, 'N', ref, &err), &err);
    CHECK_MSG(tl_max_diff(q, ref) < 1e-13, "blocked vs dormqr %g", tl_max_diff(q, ref));
    fs_haar_free(h);
    h = NULL;
    for (size_t r = 0; r < sizeof ranges / sizeof ranges[0]; r++) {
        size_t c0 = ranges[r][0];
        size_t w = ranges[r][1];
        size_t k = fs_haar_prefix_for(N, c0 + w);
        fs_mat *c = fs_mat_new(N, w);
        fs_mat want = fs_mat_view(q, 0, c0, N, w);
        CHECK_OK(fs_prg_new(&prg, key, NULL, &err), &err);
        CHECK_OK(fs_haar_gen_prefix(N, k, prg, &h, &err), &err);
        if (h != NULL) {
            CHECK_OK(fs_haar_columns(h, c0, c, &err), &err);
            CHECK_MSG(tl_bit_equal(c, &want), "prefix %zu, columns [%zu, +%zu)", k, c0, w);
            if (k < N) { /* the next chunk needs reflectors it does not have */
                fs_mat *one = fs_mat_new(N, 1);
                CHECK(fs_haar_columns(h, k, one, &err) == FS_EINVAL);
                CHECK(fs_haar_apply_left(h, 'N', ref, &err) == FS_EINVAL);
                CHECK(fs_haar_apply_right(h, 'T', ref, &err) == FS_EINVAL);
                fs_mat_free(one);
            }
        }
        fs_haar_free(h);
        h = NULL;
        fs_prg_free(prg);
        prg = NULL;
        fs_mat_free(c);
    }
    CHECK_OK(fs_prg_new(&prg, key, NULL, &err), &err);
    CHECK(fs_haar_gen_prefix(N, 0, prg, &h, &err) == FS_EINVAL && h == NULL);
    CHECK(fs_haar_gen_prefix(N, N + 1, prg, &h, &err) == FS_EINVAL && h == NULL);
    /* truncate to 128 reflectors, then extend again with a stream where
     * reflector 128 starts (a second object's after drawing 128): the same
     * bits as drawing everything at once */
    CHECK_OK(fs_haar_gen_prefix(N, 256, prg, &h, &err), &err);
    fs_prg_free(prg);
    prg = NULL;
    if (h != NULL) {
        fs_haar *h2 = NULL;
        fs_mat *c = fs_mat_new(N, 100);
        fs_mat want = fs_mat_view(q, 0, 0, N, 100);
        CHECK(fs_haar_truncate(h, 100, &err) == FS_EINVAL); /* not a chunk multiple */
        CHECK(fs_haar_truncate(h, 257, &err) == FS_EINVAL); /* more than drawn */
        CHECK_OK(fs_haar_columns(h, 130, c, &err), &err);   /* T of panels 0..3 computed */
        CHECK_OK(fs_haar_truncate(h, 128, &err), &err);
        CHECK(fs_haar_reflectors(h) == 128);
        CHECK(fs_haar_columns(h, 128, c, &err) == FS_EINVAL);
        CHECK_OK(fs_haar_columns(h, 0, c, &err), &err);
        CHECK(tl_bit_equal(c, &want));
        CHECK_OK(fs_prg_new(&prg, key, NULL, &err), &err);
        CHECK_OK(fs_haar_gen_prefix(N, 128, prg, &h2, &err), &err);
        CHECK_OK(fs_haar_extend(h, N, prg, &err), &err);
        CHECK(fs_haar_reflectors(h) == N);
        CHECK_OK(fs_haar_columns(h, 0, ref, &err), &err);
        CHECK(tl_bit_equal(ref, q));
        CHECK(fs_haar_extend(h, N + 1, prg, &err) == FS_EINVAL);
        fs_haar_free(h2);
        fs_mat_free(c);
    }
out:
    fs_haar_free(h);
    fs_prg_free(prg);
    fs_mat_free(q);
    fs_mat_free(ref);
}

static void test_haar_errors(void)
{
    uint8_t key[32] = {1};
    struct fs_err err = {0};
    fs_prg *prg = NULL;
    fs_mat *r = fs_mat_new(3, 4);

    CHECK_OK(fs_prg_new(&prg, key, NULL, &err), &err);
    CHECK(fs_haar_fill(r, prg, &err) == FS_EINVAL);
    CHECK(fs_haar_fill(r, NULL, &err) == FS_EINVAL);
    {
        fs_haar *h = NULL;
        CHECK(fs_haar_gen(0, prg, &h, &err) == FS_EINVAL && h == NULL);
        CHECK(fs_haar_gen(3, NULL, &h, &err) == FS_EINVAL);
    }
    fs_prg_free(prg);
    fs_mat_free(r);
}

static void test_choose_block(void)
{
    CHECK(fs_mask_choose_block(100, 50, 0) == 100);
    CHECK(fs_mask_choose_block(4096, 9000, 0) == 4096);
    CHECK(fs_mask_choose_block(70000, 784, 0) == 1030);  /* 68 blocks of 1029-1030 */
    CHECK(fs_mask_choose_block(10000, 1000, 0) == 1112); /* 9 blocks of 1111-1112 >= 1024 */
    CHECK(fs_mask_choose_block(50000, 1000, 0) == 1042); /* 48 blocks of 1041-1042 */
    CHECK(fs_mask_choose_block(70000, 6000, 0) == 6364); /* 11 blocks of >= 6000 */
    CHECK(fs_mask_choose_block(4097, 4000, 0) == 4097);  /* one block: two would be < 4000 */
    CHECK(fs_mask_choose_block(70000, 60000, 0) == 16384);
    CHECK(fs_mask_choose_block(70000, 60000, 8192) == 8192);
    CHECK(fs_mask_choose_block(5000, 6000, 0) == 5000);
    /* every balanced block of the default is at least max(other, FS_MASK_MIN_BLOCK) */
    for (size_t n = FS_MASK_DENSE_MAX + 1; n < 40000; n += 997) {
        for (size_t o = 1; o < 9000; o += 1201) {
            size_t b = fs_mask_choose_block(n, o, 0);
            size_t nb = n / b + (n % b != 0);
            size_t t = o > FS_MASK_MIN_BLOCK ? o : FS_MASK_MIN_BLOCK;
            CHECK(b <= n && n / nb >= (t < n ? t : n));
        }
    }
}

static void test_block_layout(void)
{
    struct fs_err err = {0};
    fs_mask *m = NULL;
    size_t off = 0;
    size_t sz = 0;
    size_t next = 0;

    /* n = 103, block 25: 5 blocks of 21, 21, 21, 20, 20 */
    CHECK_OK(fs_mask_new(103, 25, SEED_A, &m, &err), &err);
    if (m == NULL) {
        return;
    }
    CHECK(fs_mask_dim(m) == 103 && fs_mask_nblocks(m) == 5);
    for (size_t t = 0; t < fs_mask_nblocks(m); t++) {
        fs_mask_block_range(m, t, &off, &sz);
        CHECK(off == next && sz <= 25 && sz >= 20);
        for (size_t i = off; i < off + sz; i++) {
            CHECK(fs_mask_block_of(m, i) == t);
        }
        next = off + sz;
    }
    CHECK(next == 103);
    {
        /* perm is a permutation */
        const size_t *p = fs_mask_perm(m);
        unsigned char seen[103] = {0};
        size_t fixed = 0;
        for (size_t i = 0; i < 103; i++) {
            CHECK(p[i] < 103 && !seen[p[i]]);
            if (p[i] < 103) {
                seen[p[i]] = 1;
            }
            fixed += p[i] == i;
        }
        CHECK(fixed < 10); /* a uniform permutation has ~1 fixed point */
    }
    fs_mask_free(m);
    /* n <= block: one dense block */
    CHECK_OK(fs_mask_new(40, 0, SEED_A, &m, &err), &err);
    CHECK(m != NULL && fs_mask_nblocks(m) == 1);
    fs_mask_free(m);
    fs_mask_free(NULL);
}

static void test_dense_orthogonal_and_structure(void)
{
    struct fs_err err = {0};
    fs_mask *m = NULL;
    fs_mat *d = NULL;
    size_t nnz = 0;
    size_t expect = 0;

    CHECK_OK(fs_mask_new(103, 25, SEED_A, &m, &err), &err);
    CHECK_OK(fs_mask_dense(m, &d, &err), &err);
    if (m == NULL || d == NULL) {
        goto out;
    }
    CHECK_MSG(tl_orth_err(d) < 1e-13, "%g", tl_orth_err(d));
    /* M[perm[off + a], off + c] = Q_t[a, c] bit for bit, zero elsewhere */
    for (size_t t = 0; t < fs_mask_nblocks(m); t++) {
        size_t off;
        size_t sz;
        fs_mat *q = NULL;
        fs_mask_block_range(m, t, &off, &sz);
        CHECK_OK(fs_mask_block(m, t, &q, &err), &err);
        if (q == NULL) {
            continue;
        }
        CHECK(tl_orth_err(q) < 1e-13);
        for (size_t c = 0; c < sz; c++) {
            for (size_t a = 0; a < sz; a++) {
                CHECK(FS_MAT_AT(d, fs_mask_perm(m)[off + a], off + c) == FS_MAT_AT(q, a, c));
            }
        }
        expect += sz * sz;
        fs_mat_free(q);
    }
    for (size_t i = 0; i < d->rows * d->cols; i++) {
        nnz += d->data[i] != 0.0;
    }
    CHECK(nnz == expect);
out:
    fs_mat_free(d);
    fs_mask_free(m);
}

static void test_determinism(void)
{
    struct fs_err err = {0};
    fs_mask *m1 = NULL;
    fs_mask *m2 = NULL;
    fs_mask *m3 = NULL;
    fs_mask *m4 = NULL;
    fs_mat *d1 = NULL;
    fs_mat *d2 = NULL;
    fs_mat *d3 = NULL;
    fs_mat *d4 = NULL;

    CHECK_OK(fs_mask_new(90, 30, SEED_A, &m1, &err), &err);
    CHECK_OK(fs_mask_new(90, 30, SEED_A, &m2, &err), &err);
    CHECK_OK(fs_mask_new(90, 30, SEED_B, &m3, &err), &err);
    CHECK_OK(fs_mask_new(90, 45, SEED_A, &m4, &err), &err);
    CHECK_OK(fs_mask_dense(m1, &d1, &err), &err);
    CHECK_OK(fs_mask_dense(m2, &d2, &err), &err);
    CHECK_OK(fs_mask_dense(m3, &d3, &err), &err);
    CHECK_OK(fs_mask_dense(m4, &d4, &err), &err);
    if (d1 != NULL && d2 != NULL && d3 != NULL && d4 != NULL) {
        CHECK(tl_bit_equal(d1, d2));
        CHECK(memcmp(fs_mask_perm(m1), fs_mask_perm(m2), 90 * sizeof(size_t)) == 0);
        CHECK(tl_max_diff(d1, d3) > 0.1);
        CHECK(memcmp(fs_mask_perm(m1), fs_mask_perm(m3), 90 * sizeof(size_t)) != 0);
        CHECK(tl_max_diff(d1, d4) > 0.1); /* block size is bound into the key */
    }
    fs_mat_free(d1);
    fs_mat_free(d2);
    fs_mat_free(d3);
    fs_mat_free(d4);
    fs_mask_free(m1);
    fs_mask_free(m2);
    fs_mask_free(m3);
    fs_mask_free(m4);
}

/* Blockwise op(M) X and X op(M) against dense products. */
static void check_products(size_t n, size_t block, size_t k)
{
    struct fs_err err = {0};
    fs_mask *m = NULL;
    fs_mat *d = NULL;
    fs_mat *xl = tl_randn(n, k, 31);
    fs_mat *xr = tl_randn(k, n, 32);
    fs_mat *yl = fs_mat_new(n, k);
    fs_mat *yr = fs_mat_new(k, n);
    const char ops[2] = {'N', 'T'};

    CHECK_OK(fs_mask_new(n, block, SEED_B, &m, &err), &err);
    CHECK_OK(fs_mask_dense(m, &d, &err), &err);
    if (d == NULL) {
        goto out;
    }
    for (int i = 0; i < 2; i++) {
        fs_mat *ref = NULL;
        CHECK_OK(fs_mask_mul_left(m, ops[i], xl, yl, &err), &err);
        CHECK_OK(fs_mat_mul(ops[i], 'N', d, xl, &ref, &err), &err);
        CHECK_MSG(tl_max_diff(yl, ref) < 1e-13, "left %c: %g", ops[i], tl_max_diff(yl, ref));
        fs_mat_free(ref);
        ref = NULL;
        CHECK_OK(fs_mask_mul_right(m, ops[i], xr, yr, &err), &err);
        CHECK_OK(fs_mat_mul('N', ops[i], xr, d, &ref, &err), &err);
        CHECK_MSG(tl_max_diff(yr, ref) < 1e-13, "right %c: %g", ops[i], tl_max_diff(yr, ref));
        fs_mat_free(ref);
    }
    /* M^T (M X) = X */
    {
        fs_mat *back = fs_mat_new(n, k);
        CHECK_OK(fs_mask_mul_left(m, 'N', xl, yl, &err), &err);
        CHECK_OK(fs_mask_mul_left(m, 'T', yl, back, &err), &err);
        CHECK(tl_max_diff(back, xl) < 1e-13);
        fs_mat_free(back);
    }
out:
    fs_mat_free(d);
    fs_mat_free(xl);
    fs_mat_free(xr);
    fs_mat_free(yl);
    fs_mat_free(yr);
    fs_mask_free(m);
}

static void test_products_blockwise(void)
{
    check_products(103, 25, 7);
    check_products(64, 0, 5);    /* one dense block */
    check_products(50, 1, 3);    /* 1 x 1 blocks: a signed permutation */
    check_products(61, 60, 4);   /* balanced: 31 + 30, not 60 + 1 */
    check_products(299, 150, 6); /* blocks wider than a 64-column chunk */
}

/* fs_mask_keep: products with kept blocks (drawn on the first product,
 * reused after) are bit-identical to a fresh mask's; over the byte cap
 * nothing is kept and the products are still the same. */
static void test_keep_blocks(void)
{
    const size_t caps[2] = {(size_t)1 << 20, 1000}; /* all blocks fit / none does */
    const char ops[2] = {'N', 'T'};
    struct fs_err err = {0};
    fs_mat *x = tl_randn(103, 9, 41);
    fs_mat *xr = tl_randn(9, 103, 42);

    for (int c = 0; c < 2; c++) {
        fs_mask *kept = NULL;
        fs_mask *fresh = NULL;
        CHECK_OK(fs_mask_new(103, 40, SEED_A, &kept, &err), &err);
        CHECK_OK(fs_mask_keep(kept, caps[c], &err), &err);
        CHECK_OK(fs_mask_keep(kept, caps[c], &err), &err); /* again: no change */
        for (int rep = 0; rep < 2; rep++) {
            for (int i = 0; i < 2; i++) {
                fs_mat *a = fs_mat_new(103, 9), *b = fs_mat_new(103, 9);
                fs_mat *ar = fs_mat_new(9, 103), *br = fs_mat_new(9, 103);
                CHECK_OK(fs_mask_new(103, 40, SEED_A, &fresh, &err), &err);
                CHECK_OK(fs_mask_mul_left(kept, ops[i], x, a, &err), &err);
                CHECK_OK(fs_mask_mul_left(fresh, ops[i], x, b, &err), &err);
                CHECK_MSG(tl_bit_equal(a, b), "cap %zu rep %d left %c", caps[c], rep, ops[i]);
                CHECK_OK(fs_mask_mul_right(kept, ops[i], xr, ar, &err), &err);
                CHECK_OK(fs_mask_mul_right(fresh, ops[i], xr, br, &err), &err);
                CHECK_MSG(tl_bit_equal(ar, br), "cap %zu rep %d right %c", caps[c], rep, ops[i]);
                fs_mask_free(fresh);
                fresh = NULL;
                fs_mat_free(a);
                fs_mat_free(b);
                fs_mat_free(ar);
                fs_mat_free(br);
            }
        }
        fs_mask_free(kept);
    }
    CHECK(fs_mask_keep(NULL, 1, &err) == FS_EINVAL);
    fs_mat_free(x);
    fs_mat_free(xr);
}

static void test_products_strided_views(void)
{
    struct fs_err err = {0};
    fs_mask *m = NULL;
    fs_mat *xbig = tl_randn(60, 10, 33);
    fs_mat *ybig = fs_mat_new(60, 10);
    fs_mat x = fs_mat_view(xbig, 5, 1, 50, 4);
    fs_mat y = fs_mat_view(ybig, 2, 3, 50, 4);
    fs_mat *xc = fs_mat_dup(&x);
    fs_mat *yc = fs_mat_new(50, 4);

    CHECK_OK(fs_mask_new(50, 16, SEED_A, &m, &err), &err);
    CHECK_OK(fs_mask_mul_left(m, 'N', &x, &y, &err), &err);
    CHECK_OK(fs_mask_mul_left(m, 'N', xc, yc, &err), &err);
    CHECK(tl_bit_equal(&y, yc));
    CHECK(FS_MAT_AT(ybig, 0, 0) == 0.0 && FS_MAT_AT(ybig, 59, 9) == 0.0);
    fs_mat_free(xbig);
    fs_mat_free(ybig);
    fs_mat_free(xc);
    fs_mat_free(yc);
    fs_mask_free(m);
}

static void check_slab(const fs_mask *m, const fs_mat *d, size_t c0, size_t nc)
{
    struct fs_err err = {0};
    fs_mask_slab *s = NULL;
    fs_mat *sd = NULL;
    fs_mat *sd2 = NULL;
    fs_mat cols = fs_mat_view(d, 0, c0, d->rows, nc);
    fs_mat *x = tl_randn(nc, 3, 34);
    fs_mat *y = fs_mat_new(d->rows, 3);
    fs_mat *ref = NULL;

    CHECK_OK(fs_mask_slab_new(m, c0, nc, &s, &err), &err);
    CHECK_OK(fs_mask_slab_dense(m, c0, nc, &sd, &err), &err);
    if (s == NULL || sd == NULL) {
        goto out;
    }
    CHECK(tl_bit_equal(sd, &cols));
    CHECK_OK(fs_mask_slab_to_dense(s, &sd2, &err), &err);
    CHECK(tl_bit_equal(sd2, &cols));
    /* pieces tile the slab in column order */
    {
        size_t next = c0;
        for (size_t p = 0; p < s->npieces; p++) {
            CHECK(s->pieces[p].col0 == next);
            next += s->pieces[p].q->cols;
        }
        CHECK(next == c0 + nc);
    }
    CHECK_OK(fs_mask_slab_mul(s, x, y, &err), &err);
    CHECK_OK(fs_mat_mul('N', 'N', &cols, x, &ref, &err), &err);
    CHECK_MSG(tl_max_diff(y, ref) < 1e-13, "slab [%zu,+%zu) mul %g", c0, nc, tl_max_diff(y, ref));
    /* compact: piece by piece, the slab's rows of the full product, bit for bit */
    {
        size_t r = fs_mask_slab_rows(s);
        fs_mat *yc = fs_mat_new(r, 3);
        fs_mat *bad_shape = fs_mat_new(r + 1, 3);
        size_t q = 0, bad = 0, want = 0;
        for (size_t p = 0; p < s->npieces; p++) {
            want += s->pieces[p].q->rows;
        }
        CHECK(r == want);
        if (yc != NULL && bad_shape != NULL) {
            CHECK_OK(fs_mask_slab_mul_compact(s, x, yc, &err), &err);
            for (size_t p = 0; p < s->npieces; p++) {
                for (size_t a = 0; a < s->pieces[p].q->rows; a++, q++) {
                    for (size_t c = 0; c < 3; c++) {
                        double v = FS_MAT_AT(yc, q, c);
                        bad += memcmp(&v, &FS_MAT_AT(y, s->pieces[p].rows[a], c), sizeof v) != 0;
                    }
                }
            }
            CHECK(fs_mask_slab_mul_compact(s, x, bad_shape, &err) == FS_EINVAL);
        }
        CHECK_MSG(bad == 0, "slab [%zu,+%zu) compact: %zu entries differ", c0, nc, bad);
        fs_mat_free(yc);
        fs_mat_free(bad_shape);
    }
out:
    fs_mask_slab_free(s);
    fs_mat_free(sd);
    fs_mat_free(sd2);
    fs_mat_free(x);
    fs_mat_free(y);
    fs_mat_free(ref);
}

static void test_slabs(void)
{
    struct fs_err err = {0};
    fs_mask *m = NULL;
    fs_mat *d = NULL;

    CHECK_OK(fs_mask_new(103, 25, SEED_A, &m, &err), &err);
    CHECK_OK(fs_mask_dense(m, &d, &err), &err);
    if (d == NULL) {
        fs_mask_free(m);
        return;
    }
    check_slab(m, d, 0, 103); /* everything */
    check_slab(m, d, 0, 21);  /* exactly block 0 */
    check_slab(m, d, 10, 50); /* crosses three blocks */
    check_slab(m, d, 102, 1); /* last column */
    check_slab(m, d, 63, 20); /* exactly block 3 */
    check_slab(m, d, 40, 2);  /* inside one block */
    fs_mat_free(d);
    fs_mask_free(m);
    /* blocks of 150 and 149 span two 128-column chunks */
    m = NULL;
    d = NULL;
    CHECK_OK(fs_mask_new(299, 150, SEED_B, &m, &err), &err);
    CHECK_OK(fs_mask_dense(m, &d, &err), &err);
    if (d != NULL) {
        CHECK(tl_orth_err(d) < 1e-13);
        check_slab(m, d, 0, 299);
        check_slab(m, d, 100, 120); /* crosses the block boundary at 150 */
        check_slab(m, d, 63, 2);
        check_slab(m, d, 200, 99);
    }
    fs_mat_free(d);
    fs_mask_free(m);
    /* blocks of 350 (three 128-column chunks, the last of 94): three parties'
     * slabs, each block shared by two of them, give the dense matrix's bits */
    m = NULL;
    d = NULL;
    CHECK_OK(fs_mask_new(700, 350, SEED_A, &m, &err), &err);
    CHECK_OK(fs_mask_dense(m, &d, &err), &err);
    if (d != NULL) {
        CHECK(tl_orth_err(d) < 1e-13);
        check_slab(m, d, 0, 230);
        check_slab(m, d, 230, 230);
        check_slab(m, d, 460, 240);
        check_slab(m, d, 255, 1); /* one column, inside a chunk */
    }
    fs_mat_free(d);
    fs_mask_free(m);
    fs_mask_slab_free(NULL);
}

/* Slab [c0, c0 + nc) of m (with whatever cache is attached) against d's columns, bit for bit. */
static void check_cached_slab(const fs_mask *m, const fs_mat *d, size_t c0, size_t nc)
{
    struct fs_err err = {0};
    fs_mask_slab *s = NULL;
    fs_mat *sd = NULL;
    fs_mat cols = fs_mat_view(d, 0, c0, d->rows, nc);

    CHECK_OK(fs_mask_slab_new(m, c0, nc, &s, &err), &err);
    if (s != NULL) {
        CHECK_OK(fs_mask_slab_to_dense(s, &sd, &err), &err);
        CHECK_MSG(sd != NULL && tl_bit_equal(sd, &cols), "cached slab [%zu, +%zu)", c0, nc);
    }
    fs_mask_slab_free(s);
    fs_mat_free(sd);
}

/*
 * The block cache (fs_mask_cache): blocks of 350 shared by three "parties"
 * ([0, 230), [230, 460), [460, 700)), asked for in several orders, give the
 * dense matrix's bits; the second party in a block hits what the first left,
 * and an entry is gone once its block is handed out; masks from the same
 * seed share entries, another seed does not; a tiny cap evicts and still
 * gives the right bits; with no cache attached nothing is kept.
 */
static void test_slab_cache(void)
{
    struct fs_err err = {0};
    fs_mask *m = NULL;
    fs_mask *m2 = NULL;
    fs_mask *other = NULL;
    fs_mat *d = NULL;
    fs_mat *dother = NULL;
    fs_mask_cache *c = NULL;
    fs_mask_cache *tiny = NULL;
    struct fs_mask_cache_stats st;

    CHECK_OK(fs_mask_new(700, 350, SEED_A, &m, &err), &err);
    CHECK_OK(fs_mask_new(700, 350, SEED_A, &m2, &err), &err);
    CHECK_OK(fs_mask_new(700, 350, SEED_B, &other, &err), &err);
    CHECK_OK(fs_mask_dense(m, &d, &err), &err);
    CHECK_OK(fs_mask_dense(other, &dother, &err), &err);
    CHECK_OK(fs_mask_cache_new((size_t)64 << 20, &c, &err), &err);
    CHECK_OK(fs_mask_cache_new(1, &tiny, &err), &err);
    if (d == NULL || dother == NULL || c == NULL || tiny == NULL || m2 == NULL) {
        goto out;
    }
    CHECK(fs_mask_cache_attach(c) == NULL);
    /* middle party first: both its blocks are kept, then each is finished */
    check_cached_slab(m, d, 230, 230);
    fs_mask_cache_stats(c, &st);
    CHECK(st.misses == 2 && st.hits == 0 && st.entries == 2 && st.bytes > 0);
    check_cached_slab(m, d, 0, 230);
    check_cached_slab(m, d, 460, 240);
    fs_mask_cache_stats(c, &st);
    CHECK_MSG(st.hits == 2 && st.misses == 2 && st.entries == 0 && st.bytes == 0,
              "hits %llu misses %llu entries %llu", (unsigned long long)st.hits,
              (unsigned long long)st.misses, (unsigned long long)st.entries);
    /* the other way round (the tail of a block first), on a second mask
     * object from the same seed, with another seed's slab in between */
    check_cached_slab(m2, d, 460, 240);
    check_cached_slab(other, dother, 0, 230);
    check_cached_slab(m, d, 230, 230);
    check_cached_slab(m2, d, 0, 230);
    fs_mask_cache_stats(c, &st);
    CHECK(st.hits == 4 && st.misses == 5 && st.entries == 1); /* other's block 0 */
    /* one column, then the rest of the block around it */
    check_cached_slab(m, d, 400, 1);
    check_cached_slab(m, d, 350, 50);
    check_cached_slab(m, d, 401, 299);
    fs_mask_cache_stats(c, &st);
    CHECK(st.hits == 6 && st.misses == 6 && st.entries == 1 && st.evicted == 0);
    /* the tail of block 0 first (the entry keeps only 256 reflectors), then
     * columns past those (drawn anew: the kept ones cannot be extended),
     * then the rest */
    check_cached_slab(m, d, 200, 150);
    check_cached_slab(m, d, 100, 200);
    check_cached_slab(m, d, 0, 100);
    /* a cap below one entry: evicted at once, same bits */
    CHECK(fs_mask_cache_attach(tiny) == c);
    check_cached_slab(m, d, 230, 230);
    check_cached_slab(m, d, 0, 230);
    fs_mask_cache_stats(tiny, &st);
    CHECK(st.evicted == 3 && st.entries == 0 && st.bytes == 0 && st.hits == 0);
    /* detached: nothing goes into a cache */
    CHECK(fs_mask_cache_attach(NULL) == tiny);
    check_cached_slab(m, d, 100, 200);
    fs_mask_cache_stats(c, &st);
    CHECK(st.hits == 7 && st.misses == 8 && st.entries == 2);
out:
    (void)fs_mask_cache_attach(NULL);
    fs_mask_cache_free(c);
    fs_mask_cache_free(tiny);
    fs_mask_cache_free(NULL);
    fs_mat_free(d);
    fs_mat_free(dother);
    fs_mask_free(m);
    fs_mask_free(m2);
    fs_mask_free(other);
}

static void test_errors(void)
{
    struct fs_err err = {0};
    fs_mask *m = NULL;
    fs_mask *bad = NULL;
    fs_mat *x = tl_randn(30, 4, 35);
    fs_mat *y = fs_mat_new(30, 4);
    fs_mat *wrong = fs_mat_new(29, 4);
    fs_mat *q = NULL;
    fs_mask_slab *s = NULL;

    CHECK(fs_mask_new(0, 5, SEED_A, &bad, &err) == FS_EINVAL && bad == NULL);
    CHECK(fs_mask_new(10, 5, NULL, &bad, &err) == FS_EINVAL);
    CHECK_OK(fs_mask_new(30, 8, SEED_A, &m, &err), &err);
    if (m == NULL) {
        goto out;
    }
    CHECK(fs_mask_mul_left(m, 'N', x, wrong, &err) == FS_EINVAL);
    CHECK(fs_mask_mul_left(m, 'N', wrong, wrong, &err) == FS_EINVAL);
    CHECK(fs_mask_mul_right(m, 'N', x, y, &err) == FS_EINVAL); /* needs k x 30 */
    CHECK(fs_mask_mul_left(m, 'Q', x, y, &err) == FS_EINVAL);
    CHECK(fs_mask_mul_left(m, 'N', x, x, &err) == FS_EINVAL); /* in place */
    CHECK(fs_mask_block(m, 99, &q, &err) == FS_EINVAL && q == NULL);
    CHECK(fs_mask_slab_new(m, 25, 6, &s, &err) == FS_EINVAL && s == NULL);
    CHECK(fs_mask_slab_new(m, 3, 0, &s, &err) == FS_EINVAL);
    CHECK(fs_mask_slab_new(m, SIZE_MAX, 2, &s, &err) == FS_EINVAL);
    /* A corrupted slab (e.g. decoded from the network) is refused, not followed. */
    CHECK_OK(fs_mask_slab_new(m, 5, 10, &s, &err), &err);
    if (s != NULL) {
        fs_mat *xs = tl_randn(10, 4, 36);
        fs_mat *dense = NULL;
        s->pieces[0].rows[0] = 30;
        CHECK(fs_mask_slab_mul(s, xs, y, &err) == FS_EINVAL);
        CHECK(fs_mask_slab_to_dense(s, &dense, &err) == FS_EINVAL && dense == NULL);
        s->pieces[0].rows[0] = 0;
        s->pieces[0].col0 = 14;
        CHECK(fs_mask_slab_mul(s, xs, y, &err) == FS_EINVAL);
        CHECK(fs_mask_slab_mul(s, wrong, y, &err) == FS_EINVAL);
        fs_mat_free(xs);
    }
out:
    fs_mask_slab_free(s);
    fs_mask_free(m);
    fs_mat_free(x);
    fs_mat_free(y);
    fs_mat_free(wrong);
}

int main(void)
{
    RUN(test_haar_orthogonal_deterministic);
    RUN(test_haar_distribution);
    RUN(test_haar_factored);
    RUN(test_haar_prefix_blocked);
    RUN(test_haar_errors);
    RUN(test_choose_block);
    RUN(test_block_layout);
    RUN(test_dense_orthogonal_and_structure);
    RUN(test_determinism);
    RUN(test_products_blockwise);
    RUN(test_keep_blocks);
    RUN(test_products_strided_views);
    RUN(test_slabs);
    RUN(test_slab_cache);
    RUN(test_errors);
    return TEST_END("test_la_mask");
}
