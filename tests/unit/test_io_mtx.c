/* MatrixMarket: coordinate and array; real, integer, pattern; general,
 * symmetric, skew-symmetric; dense and sparse loads; the CSR writer round
 * trip; malformed files with line numbers; caps; fuzz. */
#include "test_io_util.h"

static double dense_at(const fs_csr *a, size_t i, size_t j)
{
    for (size_t k = a->rowptr[i]; k < a->rowptr[i + 1]; k++) {
        if (a->colidx[k] == j) {
            return a->vals[k];
        }
    }
    return 0.0;
}

static void test_coordinate_general(void)
{
    const char *t = "%%MatrixMarket matrix coordinate real general\n"
                    "% a comment\n"
                    "%\n"
                    "\n"
                    "3 4 5\n"
                    "1 1 1.5\n"
                    "3 4 -2\n"
                    "2 2 7e1\n"
                    "  1   1   0.5  \n" /* duplicate: summed */
                    "3 1 4\r\n";
    fs_mat *m = NULL;
    fs_csr *a = NULL;
    struct fs_err e = {0};

    CHECK_OK(load_text("g.mtx", t, NULL, &m, &e), &e);
    CHECK(m != NULL && m->rows == 3 && m->cols == 4);
    if (m != NULL) {
        CHECK(FS_MAT_AT(m, 0, 0) == 2.0 && FS_MAT_AT(m, 2, 3) == -2 && FS_MAT_AT(m, 1, 1) == 70 &&
              FS_MAT_AT(m, 2, 0) == 4 && FS_MAT_AT(m, 0, 1) == 0);
    }
    fs_mat_free(m);
    CHECK(fs_io_is_sparse_file(tpath("g.mtx")) == 1);
    CHECK_OK(fs_io_load_sparse(tpath("g.mtx"), FS_FMT_AUTO, NULL, &a, &e), &e);
    CHECK(a != NULL && a->rows == 3 && a->cols == 4 && a->nnz == 4);
    if (a != NULL) {
        CHECK(dense_at(a, 0, 0) == 2.0 && dense_at(a, 2, 3) == -2 && dense_at(a, 2, 0) == 4);
    }
    fs_csr_free(a);
}

static void test_coordinate_symmetric_pattern_integer(void)
{
    fs_mat *m = NULL;
    fs_csr *a = NULL;
    struct fs_err e = {0};

    CHECK_OK(load_text("s.mtx",
                       "%%MatrixMarket matrix coordinate real symmetric\n3 3 3\n1 1 1\n3 1 2\n3 2 "
                       "5\n",
                       NULL, &m, &e),
             &e);
    CHECK(m != NULL && FS_MAT_AT(m, 0, 0) == 1 && FS_MAT_AT(m, 2, 0) == 2 &&
          FS_MAT_AT(m, 0, 2) == 2 && FS_MAT_AT(m, 1, 2) == 5 && FS_MAT_AT(m, 2, 1) == 5 &&
          FS_MAT_AT(m, 1, 1) == 0);
    fs_mat_free(m);
    m = NULL;
    CHECK_OK(fs_io_load_sparse(tpath("s.mtx"), FS_FMT_AUTO, NULL, &a, &e), &e);
    CHECK(a != NULL && a->nnz == 5 && dense_at(a, 0, 2) == 2);
    fs_csr_free(a);
    a = NULL;

    CHECK_OK(load_text("p.MTX",
                       "%%MatrixMarket MATRIX Coordinate Pattern General\n2 3 2\n1 3\n2 1\n", NULL,
                       &m, &e),
             &e);
    CHECK(m != NULL && FS_MAT_AT(m, 0, 2) == 1 && FS_MAT_AT(m, 1, 0) == 1 &&
          FS_MAT_AT(m, 0, 0) == 0);
    fs_mat_free(m);
    m = NULL;

    CHECK_OK(load_text("k.mm",
                       "%%MatrixMarket matrix coordinate integer skew-symmetric\n3 3 1\n3 1 -4\n",
                       NULL, &m, &e),
             &e);
    CHECK(m != NULL && FS_MAT_AT(m, 2, 0) == -4 && FS_MAT_AT(m, 0, 2) == 4);
    fs_mat_free(m);
}

static void test_array(void)
{
    fs_mat *m = NULL;
    fs_csr *a = NULL;
    struct fs_err e = {0};

    /* column-major 2 x 3 */
    CHECK_OK(load_text("a.mtx",
                       "%%MatrixMarket matrix array real general\n% c\n2 3\n1\n2\n3\n4\n5\n6\n",
                       NULL, &m, &e),
             &e);
    CHECK(m != NULL && FS_MAT_AT(m, 1, 0) == 2 && FS_MAT_AT(m, 0, 1) == 3 &&
          FS_MAT_AT(m, 1, 2) == 6);
    fs_mat_free(m);
    m = NULL;
    CHECK(fs_io_is_sparse_file(tpath("a.mtx")) == 0);
    /* symmetric: lower triangle column by column: (0,0) (1,0) (2,0) (1,1) (2,1) (2,2) */
    CHECK_OK(load_text("as.mtx",
                       "%%MatrixMarket matrix array real symmetric\n3 3\n1\n2\n3\n4\n5\n6\n", NULL,
                       &m, &e),
             &e);
    CHECK(m != NULL && FS_MAT_AT(m, 0, 0) == 1 && FS_MAT_AT(m, 2, 0) == 3 &&
          FS_MAT_AT(m, 0, 2) == 3 && FS_MAT_AT(m, 1, 1) == 4 && FS_MAT_AT(m, 2, 1) == 5 &&
          FS_MAT_AT(m, 1, 2) == 5 && FS_MAT_AT(m, 2, 2) == 6);
    fs_mat_free(m);
    m = NULL;
    /* skew: strictly lower: (1,0) (2,0) (2,1) */
    CHECK_OK(load_text("ak.mtx",
                       "%%MatrixMarket matrix array integer skew-symmetric\n3 3\n1\n2\n3\n", NULL,
                       &m, &e),
             &e);
    CHECK(m != NULL && FS_MAT_AT(m, 1, 0) == 1 && FS_MAT_AT(m, 0, 1) == -1 &&
          FS_MAT_AT(m, 2, 1) == 3 && FS_MAT_AT(m, 1, 2) == -3 && FS_MAT_AT(m, 2, 2) == 0);
    fs_mat_free(m);
    /* sparse load of an array file drops zeros */
    CHECK_OK(load_text("az.mtx", "%%MatrixMarket matrix array real general\n2 2\n0\n5\n0\n0\n",
                       NULL, &m, &e),
             &e);
    fs_mat_free(m);
    CHECK_OK(fs_io_load_sparse(tpath("az.mtx"), FS_FMT_AUTO, NULL, &a, &e), &e);
    CHECK(a != NULL && a->nnz == 1 && dense_at(a, 1, 0) == 5);
    fs_csr_free(a);
}

static void test_write_roundtrip(void)
{
    const char *t = "%%MatrixMarket matrix coordinate real general\n4 5 4\n"
                    "1 5 0.1\n4 1 -3.25e-7\n2 2 12345678.901234567\n4 5 1\n";
    fs_csr *a = NULL;
    fs_csr *b = NULL;
    fs_mat *m = NULL;
    struct fs_err e = {0};

    CHECK_OK(load_text("w.mtx", t, NULL, &m, &e), &e);
    fs_mat_free(m);
    CHECK_OK(fs_io_load_sparse(tpath("w.mtx"), FS_FMT_MTX, NULL, &a, &e), &e);
    if (a == NULL) {
        return;
    }
    CHECK_OK(fs_mtx_write_csr(tpath("w2.mtx"), a, &e), &e);
    CHECK(tdir_count(".tmp.") == 0);
    CHECK_OK(fs_io_load_sparse(tpath("w2.mtx"), FS_FMT_AUTO, NULL, &b, &e), &e);
    CHECK(b != NULL && b->rows == a->rows && b->cols == a->cols && b->nnz == a->nnz);
    if (b != NULL && b->nnz == a->nnz) {
        CHECK(memcmp(a->rowptr, b->rowptr, (a->rows + 1) * sizeof *a->rowptr) == 0);
        CHECK(memcmp(a->colidx, b->colidx, a->nnz * sizeof *a->colidx) == 0);
        CHECK(memcmp(a->vals, b->vals, a->nnz * sizeof *a->vals) == 0);
    }
    fs_csr_free(a);
    fs_csr_free(b);
}

static void test_malformed(void)
{
    static const struct {
        const char *text;
        int code;
        const char *needle;
    } cases[] = {
        {"%MatrixMarket matrix coordinate real general\n1 1 0\n", FS_EFORMAT, "line 1: bad magic"},
        {"", FS_EFORMAT, "line 1: empty file"},
        {"%%MatrixMarket matrix coordinate complex general\n1 1 0\n", FS_EFORMAT,
         "line 1: unsupported field 'complex'"},
        {"%%MatrixMarket matrix coordinate real hermitian\n1 1 0\n", FS_EFORMAT,
         "line 1: unsupported symmetry 'hermitian'"},
        {"%%MatrixMarket vector coordinate real general\n1 1 0\n", FS_EFORMAT,
         "line 1: unsupported object 'vector'"},
        {"%%MatrixMarket matrix array pattern general\n1 1\n", FS_EFORMAT,
         "line 1: unsupported field 'pattern'"},
        {"%%MatrixMarket matrix coordinate real\n1 1 0\n", FS_EFORMAT, "line 1: expected"},
        {"%%MatrixMarket matrix coordinate real general\n% only comments\n", FS_EFORMAT,
         "line 2: no size line"},
        {"%%MatrixMarket matrix coordinate real general\n3 3\n", FS_EFORMAT,
         "line 2: expected 3 numbers (rows cols nnz), found 2"},
        {"%%MatrixMarket matrix coordinate real general\n3 x 1\n", FS_EFORMAT,
         "line 2: bad size 'x'"},
        {"%%MatrixMarket matrix coordinate real general\n0 3 0\n", FS_EFORMAT,
         "line 2: empty matrix"},
        {"%%MatrixMarket matrix coordinate real general\n2 2 5\n", FS_EFORMAT,
         "line 2: expected 5 entries, found 0"},
        {"%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1\n4 1 1\n", FS_EFORMAT,
         "line 4: row index 4 out of range 1..3"},
        {"%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1\n1 0 1\n", FS_EFORMAT,
         "line 4: column index 0 out of range 1..3"},
        {"%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1\n-1 1 1\n", FS_EFORMAT,
         "line 4: bad row index '-1'"},
        {"%%MatrixMarket matrix coordinate real general\n3 3 3\n1 1 1\n2 2 2\n", FS_EFORMAT,
         "line 4: expected 3 entries, found 2"},
        {"%%MatrixMarket matrix coordinate real general\n3 3 1\n1 1 1\n2 2 2\n", FS_EFORMAT,
         "line 4: more entries than the 1 declared on line 2"},
        {"%%MatrixMarket matrix coordinate real general\n3 3 1\n1 1\n", FS_EFORMAT,
         "line 3: expected 3 fields, found 2"},
        {"%%MatrixMarket matrix coordinate real general\n3 3 1\n1 1 abc\n", FS_EFORMAT,
         "line 3: not a number 'abc'"},
        {"%%MatrixMarket matrix coordinate real general\n3 3 1\n1 1 nan\n", FS_EFORMAT,
         "line 3: NaN or Inf not allowed"},
        {"%%MatrixMarket matrix coordinate real general\n3 3 1\n1 1 -inf\n", FS_EFORMAT,
         "line 3: NaN or Inf not allowed"},
        {"%%MatrixMarket matrix coordinate integer general\n3 3 1\n1 1 1.5\n", FS_EFORMAT,
         "line 3: not an integer '1.5'"},
        {"%%MatrixMarket matrix coordinate real symmetric\n3 3 1\n1 2 1\n", FS_EFORMAT,
         "line 3: entry (1, 2) above the diagonal of a symmetric matrix"},
        {"%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 1\n2 2 1\n", FS_EFORMAT,
         "line 3: entry (2, 2) on or above the diagonal"},
        {"%%MatrixMarket matrix coordinate real symmetric\n3 4 1\n1 1 1\n", FS_EFORMAT,
         "line 2: a symmetric matrix must be square"},
        {"%%MatrixMarket matrix coordinate real general\n1 1 2\n1 1 1e308\n1 1 1e308\n", FS_EFORMAT,
         "entry (1, 1) overflows"},
        {"%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n", FS_EFORMAT,
         "line 5: expected 4 values, found 3"},
        {"%%MatrixMarket matrix array real general\n2 1\n1\n2\n3\n", FS_EFORMAT,
         "line 5: more values than the 2 expected"},
        {"%%MatrixMarket matrix array real symmetric\n2 2\n1\n2\n3\n4\n", FS_EFORMAT,
         "line 6: more values than the 3 expected"},
        {"%%MatrixMarket matrix array real general\n1 2\n1\n1e999\n", FS_EFORMAT,
         "line 4: number out of range '1e999'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fs_mat *m = NULL;
        struct fs_err e = {0};
        char name[32];
        snprintf(name, sizeof name, "bad%zu.mtx", i);
        EXPECT_ERR(load_text(name, cases[i].text, NULL, &m, &e), &e, cases[i].code, tpath(name),
                   cases[i].needle);
        CHECK(m == NULL);
    }
    /* sparse path reports the same */
    {
        fs_csr *a = NULL;
        struct fs_err e = {0};
        EXPECT_ERR(fs_io_load_sparse(tpath("bad12.mtx"), FS_FMT_AUTO, NULL, &a, &e), &e, FS_EFORMAT,
                   tpath("bad12.mtx"), "line 4: row index 4 out of range 1..3");
        CHECK(a == NULL);
    }
}

static void test_caps(void)
{
    const char *t = "%%MatrixMarket matrix coordinate real general\n1000 2000 3\n1 1 1\n2 2 "
                    "2\n3 3 3\n";
    struct fs_io_caps c = fs_io_caps_default();
    fs_mat *m = NULL;
    fs_csr *a = NULL;
    struct fs_err e = {0};

    c.max_nnz = 2;
    write_str(tpath("cap.mtx"), t);
    EXPECT_ERR(fs_io_load_sparse(tpath("cap.mtx"), FS_FMT_AUTO, &c, &a, &e), &e, FS_ERANGE,
               tpath("cap.mtx"), "line 2: 3 entries exceed the cap of 2 (max_nnz)");
    c = fs_io_caps_default();
    c.max_elems = 1000000;
    /* sparse ignores max_elems, dense does not */
    CHECK_OK(fs_io_load_sparse(tpath("cap.mtx"), FS_FMT_AUTO, &c, &a, &e), &e);
    CHECK(a != NULL && a->nnz == 3);
    fs_csr_free(a);
    EXPECT_ERR(fs_io_load_dense(tpath("cap.mtx"), FS_FMT_AUTO, &c, &m, &e), &e, FS_ERANGE,
               tpath("cap.mtx"), "line 2: 1000 x 2000 elements exceed");
    c = fs_io_caps_default();
    c.max_rows = 999;
    EXPECT_ERR(fs_io_load_dense(tpath("cap.mtx"), FS_FMT_AUTO, &c, &m, &e), &e, FS_ERANGE,
               tpath("cap.mtx"), "max_rows");
    c = fs_io_caps_default();
    c.max_nnz = 5; /* symmetric entries count twice */
    write_str(tpath("caps.mtx"),
              "%%MatrixMarket matrix coordinate real symmetric\n5 5 3\n2 1 1\n3 1 1\n4 1 1\n");
    EXPECT_ERR(fs_io_load_sparse(tpath("caps.mtx"), FS_FMT_AUTO, &c, &a, &e), &e, FS_ERANGE,
               tpath("caps.mtx"), "max_nnz");
    CHECK(m == NULL);
}

static void test_fuzz(void)
{
    const char *g = "%%MatrixMarket matrix coordinate real symmetric\n% c\n4 4 4\n1 1 1.5\n3 1 "
                    "-2\n4 4 3e1\n2 2 7\n";
    const char *h = "%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n";
    int ok = fuzz_file("fz.mtx", (const uint8_t *)g, strlen(g), 1500, 0);
    CHECK(ok >= 1);
    ok = fuzz_file("fz2.mtx", (const uint8_t *)g, strlen(g), 500, 1);
    CHECK(ok >= 1);
    ok = fuzz_file("fz3.mtx", (const uint8_t *)h, strlen(h), 500, 0);
    CHECK(ok >= 1);
}

int main(void)
{
    tdir_init("mtx");
    RUN(test_coordinate_general);
    RUN(test_coordinate_symmetric_pattern_integer);
    RUN(test_array);
    RUN(test_write_roundtrip);
    RUN(test_malformed);
    RUN(test_caps);
    RUN(test_fuzz);
    tdir_cleanup();
    return TEST_END("test_io_mtx");
}
