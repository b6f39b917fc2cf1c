/* .npy: header parser robustness and streaming (FS_ESTATE), header
 * formatting and alignment, round trips in Fortran and C order, u64 ring
 * vectors, other dtypes, malformed files with positions, atomic writes,
 * caps, and a truncate/mutate fuzz loop. */
#include "test_io_util.h"

#include <math.h>

/* A .npy header around dict: version major.0, length field, '\n' at the end. */
static size_t mk_hdr(uint8_t *buf, int major, const char *dict)
{
    size_t dl = strlen(dict);
    size_t lsz = major == 1 ? 2 : 4;
    size_t hl = dl + 1;

    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (uint8_t)major;
    buf[7] = 0;
    for (size_t i = 0; i < lsz; i++) {
        buf[8 + i] = (uint8_t)(hl >> (8 * i));
    }
    memcpy(buf + 8 + lsz, dict, dl);
    buf[8 + lsz + dl] = '\n';
    return 8 + lsz + hl;
}

static int parse_dict(int major, const char *dict, struct fs_npy_header *h, struct fs_err *e)
{
    uint8_t buf[1024];
    size_t n = mk_hdr(buf, major, dict);
    return fs_npy_parse_header(buf, n, NULL, h, e);
}

static void test_header_variants(void)
{
    struct fs_npy_header h;
    struct fs_err e = {0};

    CHECK_OK(parse_dict(1, "{'shape': (2, 3), 'fortran_order': False, 'descr': '<f8'}", &h, &e),
             &e);
    CHECK(h.dtype == FS_NPY_F8 && h.ndim == 2 && h.shape[0] == 2 && h.shape[1] == 3 &&
          !h.fortran_order);
    CHECK_OK(parse_dict(1, "{\"descr\":\"<u8\",\"fortran_order\":True,\"shape\":(5,)}", &h, &e),
             &e);
    CHECK(h.dtype == FS_NPY_U8 && h.ndim == 1 && h.shape[0] == 5 && h.shape[1] == 1 &&
          h.fortran_order);
    CHECK_OK(parse_dict(2,
                        "{ 'descr' : '<f8' , 'fortran_order' : True , 'shape' : ( 7L , 3L , ) , }",
                        &h, &e),
             &e);
    CHECK(h.ndim == 2 && h.shape[0] == 7 && h.shape[1] == 3);
    CHECK(h.header_len == 12 +
                              strlen("{ 'descr' : '<f8' , 'fortran_order' : True , 'shape' : ( "
                                     "7L , 3L , ) , }") +
                              1);
    CHECK_OK(parse_dict(3, "{'descr': '<f8', 'fortran_order': False, 'shape': (4, 1), }", &h, &e),
             &e);
    CHECK(h.shape[0] == 4);
}

static void test_header_rejects(void)
{
    static const struct {
        const char *dict;
        int code;
        const char *needle;
    } cases[] = {
        {"{'descr': '<f8', 'fortran_order': False, 'shape': ()}", FS_EFORMAT, "0-d"},
        {"{'descr': '<f8', 'fortran_order': False, 'shape': (3)}", FS_EFORMAT, "(n,)"},
        {"{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4, 5)}", FS_EFORMAT, "more than 2"},
        {"{'descr': '<f8', 'fortran_order': False, 'shape': [3, 4]}", FS_EFORMAT, "'('"},
        {"{'descr': '<f8', 'fortran_order': False}", FS_EFORMAT, "lacks 'shape'"},
        {"{'descr': '<f8', 'shape': (1,)}", FS_EFORMAT, "lacks 'fortran_order'"},
        {"{'descr': '<f8', 'fortran_order': False, 'shape': (1,), 'x': 1}", FS_EFORMAT,
         "unknown key 'x'"},
        {"{'descr': '<f8', 'descr': '<f8', 'fortran_order': False, 'shape': (1,)}", FS_EFORMAT,
         "duplicate key"},
        {"{'descr': '<c16', 'fortran_order': False, 'shape': (1,)}", FS_EFORMAT,
         "unsupported dtype '<c16'"},
        {"{'descr': '<i4', 'fortran_order': False, 'shape': (1,)}", FS_EFORMAT,
         "unsupported dtype"},
        {"{'descr': '>f8', 'fortran_order': False, 'shape': (1,)}", FS_EFORMAT,
         "unsupported dtype"},
        {"{'descr': '<f8', 'fortran_order': true, 'shape': (1,)}", FS_EFORMAT, "True or False"},
        {"{'descr': '<f8', 'fortran_order': Truex, 'shape': (1,)}", FS_EFORMAT, "True or False"},
        {"{'descr': '<f8', 'fortran_order': False, 'shape': (-1,)}", FS_EFORMAT, "integer"},
        {"{'descr': '<f8', 'fortran_order': False, 'shape': (1,)} x", FS_EFORMAT,
         "after the header dict"},
        {"{'descr': '<f8' 'fortran_order': False, 'shape': (1,)}", FS_EFORMAT, "',' or '}'"},
        {"{'descr: '<f8', 'fortran_order': False, 'shape': (1,)}", FS_EFORMAT, ""},
        {"'descr': '<f8'", FS_EFORMAT, "'{'"},
        {"{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999,)}", FS_ERANGE,
         "too large"},
        {"{'descr': '<f8', 'fortran_order': False, 'shape': (100000000, 100000000)}", FS_ERANGE,
         "max_rows"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct fs_npy_header h;
        struct fs_err e = {0};
        int rc = parse_dict(1, cases[i].dict, &h, &e);
        CHECK_MSG(rc == cases[i].code, "case %zu: rc %d: %s", i, rc, e.msg);
        CHECK_MSG(strstr(e.msg, cases[i].needle) != NULL && strstr(e.msg, "byte offset") != NULL,
                  "case %zu: %s", i, e.msg);
    }
}

static void test_header_magic_version_stream(void)
{
    uint8_t buf[256];
    struct fs_npy_header h;
    struct fs_err e = {0};
    size_t n = mk_hdr(buf, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }");

    /* every strict prefix asks for more bytes */
    for (size_t k = 0; k < n; k++) {
        int rc = fs_npy_parse_header(buf, k, NULL, &h, &e);
        CHECK_MSG(rc == FS_ESTATE, "prefix %zu: rc %d %s", k, rc, e.msg);
    }
    CHECK_OK(fs_npy_parse_header(buf, n + 100, NULL, &h, &e), &e);
    CHECK(h.header_len == n);

    buf[3] = 'P';
    EXPECT_ERR(fs_npy_parse_header(buf, 2, NULL, &h, &e), &e, FS_ESTATE, NULL, "more bytes");
    EXPECT_ERR(fs_npy_parse_header(buf, 4, NULL, &h, &e), &e, FS_EFORMAT, NULL,
               "byte offset 3: bad magic");
    buf[3] = 'M';
    buf[6] = 4;
    EXPECT_ERR(fs_npy_parse_header(buf, n, NULL, &h, &e), &e, FS_EFORMAT, NULL,
               "byte offset 6: unsupported .npy version 4.0");
    buf[6] = 2;
    buf[8] = 0;
    buf[9] = 0;
    buf[10] = 0x20; /* 2 MiB header */
    buf[11] = 0;
    EXPECT_ERR(fs_npy_parse_header(buf, n, NULL, &h, &e), &e, FS_EFORMAT, NULL,
               "exceeds the limit");

    /* caps */
    {
        struct fs_io_caps c = fs_io_caps_default();
        n = mk_hdr(buf, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (20, 3), }");
        c.max_rows = 10;
        EXPECT_ERR(fs_npy_parse_header(buf, n, &c, &h, &e), &e, FS_ERANGE, NULL, "max_rows");
        c = fs_io_caps_default();
        c.max_elems = 59;
        EXPECT_ERR(fs_npy_parse_header(buf, n, &c, &h, &e), &e, FS_ERANGE, NULL, "max_elems");
        c.max_elems = 60;
        CHECK_OK(fs_npy_parse_header(buf, n, &c, &h, &e), &e);
    }
}

static void test_header_format(void)
{
    struct fs_npy_header h = {FS_NPY_F8, 1, 2, {123456, 789}, 0};
    struct fs_npy_header g;
    uint8_t buf[256];
    size_t len = 0;
    struct fs_err e = {0};

    CHECK_OK(fs_npy_format_header(&h, buf, sizeof buf, &len, &e), &e);
    CHECK(len % 64 == 0 && buf[len - 1] == '\n' && buf[6] == 1 && buf[7] == 0);
    CHECK((size_t)(buf[8] | buf[9] << 8) == len - 10);
    CHECK_OK(fs_npy_parse_header(buf, len, NULL, &g, &e), &e);
    CHECK(g.dtype == FS_NPY_F8 && g.fortran_order && g.ndim == 2 && g.shape[0] == 123456 &&
          g.shape[1] == 789 && g.header_len == len);
    EXPECT_ERR(fs_npy_format_header(&h, buf, 10, &len, &e), &e, FS_ERANGE, NULL, "need");
    h.dtype = FS_NPY_U8;
    h.ndim = 1;
    h.fortran_order = 0;
    CHECK_OK(fs_npy_format_header(&h, buf, sizeof buf, &len, &e), &e);
    CHECK(t_memmem(buf, len, "(123456,)", 9) != NULL);
    CHECK_OK(fs_npy_parse_header(buf, len, NULL, &g, &e), &e);
    CHECK(g.dtype == FS_NPY_U8 && g.ndim == 1 && g.shape[0] == 123456);
}

static fs_mat *rand_mat(size_t r, size_t c)
{
    fs_mat *m = fs_mat_new(r, c);
    for (size_t j = 0; j < c; j++) {
        for (size_t i = 0; i < r; i++) {
            FS_MAT_AT(m, i, j) = t_unif() * 1e3;
        }
    }
    return m;
}

static int mat_equal(const fs_mat *a, const fs_mat *b)
{
    if (a == NULL || b == NULL || a->rows != b->rows || a->cols != b->cols) {
        return 0;
    }
    for (size_t j = 0; j < a->cols; j++) {
        for (size_t i = 0; i < a->rows; i++) {
            if (memcmp(&FS_MAT_AT(a, i, j), &FS_MAT_AT(b, i, j), sizeof(double)) != 0) {
                return 0;
            }
        }
    }
    return 1;
}

static void test_roundtrip_fortran(void)
{
    fs_mat *a = rand_mat(37, 13);
    fs_mat *b = NULL;
    struct fs_err e = {0};
    size_t n = 0;
    uint8_t *raw;
    struct fs_npy_header h;

    CHECK_OK(fs_npy_write_mat(tpath("f.npy"), a, &e), &e);
    CHECK(tdir_count(".tmp.") == 0);
    raw = read_all(tpath("f.npy"), &n);
    CHECK(raw != NULL);
    if (raw != NULL) {
        CHECK_OK(fs_npy_parse_header(raw, n, NULL, &h, &e), &e);
        CHECK(h.fortran_order && h.header_len % 64 == 0 && n == h.header_len + 37 * 13 * 8);
        CHECK(t_memmem(raw, h.header_len, "'fortran_order': True", 21) != NULL);
        free(raw);
    }
    CHECK_OK(fs_io_load_dense(tpath("f.npy"), FS_FMT_AUTO, NULL, &b, &e), &e);
    CHECK(mat_equal(a, b));
    fs_mat_free(b);
    b = NULL;

    /* a view with ld > rows writes only the block */
    {
        fs_mat v = {5, 4, a->ld, a->data + 3 + 2 * a->ld, 0};
        CHECK_OK(fs_npy_write_mat(tpath("v.npy"), &v, &e), &e);
        CHECK_OK(fs_io_load_dense(tpath("v.npy"), FS_FMT_NPY, NULL, &b, &e), &e);
        CHECK(mat_equal(&v, b));
        fs_mat_free(b);
        b = NULL;
    }
    /* overwrite an existing file */
    CHECK_OK(fs_npy_write_mat(tpath("f.npy"), a, &e), &e);
    fs_mat_free(a);
}

static void test_roundtrip_c_order(void)
{
    enum { R = 29, C = 17 };
    struct fs_npy_header h = {FS_NPY_F8, 0, 2, {R, C}, 0};
    uint8_t *buf = malloc(128 + R * C * 8);
    size_t hl = 0;
    fs_mat *m = NULL;
    struct fs_err e = {0};
    double x[R][C];

    CHECK_OK(fs_npy_format_header(&h, buf, 128, &hl, &e), &e);
    for (size_t i = 0; i < R; i++) {
        for (size_t j = 0; j < C; j++) {
            x[i][j] = t_unif();
        }
    }
    memcpy(buf + hl, x, sizeof x); /* row-major = C order (little-endian host) */
    write_bytes(tpath("c.npy"), buf, hl + sizeof x);
    CHECK_OK(fs_io_load_dense(tpath("c.npy"), FS_FMT_AUTO, NULL, &m, &e), &e);
    CHECK(m != NULL && m->rows == R && m->cols == C);
    if (m != NULL) {
        int same = 1;
        for (size_t i = 0; i < R; i++) {
            for (size_t j = 0; j < C; j++) {
                same &= FS_MAT_AT(m, i, j) == x[i][j];
            }
        }
        CHECK(same);
    }
    fs_mat_free(m);
    free(buf);
}

static void test_vec_and_u64(void)
{
    double v[7] = {1, -2, 3.5, 0, 1e-300, -1e300, 42};
    uint64_t u[5] = {0, 1, UINT64_MAX, (uint64_t)1 << 53, 0x0123456789abcdefull};
    uint64_t *r = NULL;
    size_t n = 0;
    fs_mat *m = NULL;
    struct fs_err e = {0};

    CHECK_OK(fs_npy_write_vec(tpath("v1.npy"), v, 7, &e), &e);
    CHECK_OK(fs_io_load_dense(tpath("v1.npy"), FS_FMT_AUTO, NULL, &m, &e), &e);
    CHECK(m != NULL && m->rows == 7 && m->cols == 1 && memcmp(m->data, v, sizeof v) == 0);
    fs_mat_free(m);
    m = NULL;

    CHECK_OK(fs_npy_write_u64(tpath("u.npy"), u, 5, &e), &e);
    CHECK_OK(fs_npy_read_u64(tpath("u.npy"), 0, &r, &n, &e), &e);
    CHECK(n == 5 && r != NULL && memcmp(r, u, sizeof u) == 0);
    free(r);
    r = NULL;
    EXPECT_ERR(fs_npy_read_u64(tpath("u.npy"), 4, &r, &n, &e), &e, FS_ERANGE, tpath("u.npy"),
               "max_elems");
    EXPECT_ERR(fs_io_load_dense(tpath("u.npy"), FS_FMT_AUTO, NULL, &m, &e), &e, FS_EFORMAT,
               tpath("u.npy"), "element [2, 0]: integer too large");
    EXPECT_ERR(fs_npy_read_u64(tpath("v1.npy"), 0, &r, &n, &e), &e, FS_EFORMAT, tpath("v1.npy"),
               "expected '<u8'");
    CHECK(r == NULL);

    /* empty ring vector is fine */
    CHECK_OK(fs_npy_write_u64(tpath("u0.npy"), u, 0, &e), &e);
    CHECK_OK(fs_npy_read_u64(tpath("u0.npy"), 0, &r, &n, &e), &e);
    CHECK(n == 0);
    free(r);
    r = NULL;
    /* 2-D u8 flattened in memory order */
    {
        struct fs_npy_header h = {FS_NPY_U8, 0, 2, {2, 3}, 0};
        uint8_t buf[128 + 48];
        size_t hl = 0;
        uint64_t w[6] = {1, 2, 3, 4, 5, 6};
        CHECK_OK(fs_npy_format_header(&h, buf, 128, &hl, &e), &e);
        memcpy(buf + hl, w, sizeof w);
        write_bytes(tpath("u2.npy"), buf, hl + sizeof w);
        CHECK_OK(fs_npy_read_u64(tpath("u2.npy"), 0, &r, &n, &e), &e);
        CHECK(n == 6 && r != NULL && r[5] == 6);
        free(r);
    }
}

/* Other dtypes converted to double. */
static void test_dtypes(void)
{
    uint8_t buf[256];
    size_t hl;
    fs_mat *m = NULL;
    struct fs_err e = {0};

    {
        float f[4] = {1.5f, -2.25f, 3.0f, 1e10f};
        hl = mk_hdr(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }");
        memcpy(buf + hl, f, sizeof f);
        write_bytes(tpath("f4.npy"), buf, hl + sizeof f);
        CHECK_OK(fs_io_load_dense(tpath("f4.npy"), FS_FMT_AUTO, NULL, &m, &e), &e);
        CHECK(m != NULL && FS_MAT_AT(m, 0, 1) == -2.25 && FS_MAT_AT(m, 1, 0) == 3.0 &&
              FS_MAT_AT(m, 1, 1) == (double)1e10f);
        fs_mat_free(m);
        m = NULL;
    }
    {
        int32_t x[3] = {-7, 0, 2147483647};
        hl = mk_hdr(buf, 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }");
        memcpy(buf + hl, x, sizeof x);
        write_bytes(tpath("i4.npy"), buf, hl + sizeof x);
        CHECK_OK(fs_io_load_dense(tpath("i4.npy"), FS_FMT_AUTO, NULL, &m, &e), &e);
        CHECK(m != NULL && m->rows == 3 && m->data[0] == -7 && m->data[2] == 2147483647.0);
        fs_mat_free(m);
        m = NULL;
    }
    {
        uint8_t x[6] = {0, 255, 7, 8, 9, 10};
        hl = mk_hdr(buf, 1, "{'descr': '|u1', 'fortran_order': True, 'shape': (2, 3), }");
        memcpy(buf + hl, x, sizeof x);
        write_bytes(tpath("u1.npy"), buf, hl + sizeof x);
        CHECK_OK(fs_io_load_dense(tpath("u1.npy"), FS_FMT_AUTO, NULL, &m, &e), &e);
        CHECK(m != NULL && FS_MAT_AT(m, 1, 0) == 255 && FS_MAT_AT(m, 0, 2) == 9);
        fs_mat_free(m);
        m = NULL;
    }
    {
        /* big-endian doubles 1.0 and -2.0 */
        uint8_t x[16] = {0x3f, 0xf0, 0, 0, 0, 0, 0, 0, 0xc0, 0, 0, 0, 0, 0, 0, 0};
        hl = mk_hdr(buf, 1, "{'descr': '>f8', 'fortran_order': False, 'shape': (1, 2), }");
        memcpy(buf + hl, x, sizeof x);
        write_bytes(tpath("be.npy"), buf, hl + sizeof x);
        CHECK_OK(fs_io_load_dense(tpath("be.npy"), FS_FMT_AUTO, NULL, &m, &e), &e);
        CHECK(m != NULL && m->data[0] == 1.0 && m->data[1] == -2.0);
        fs_mat_free(m);
    }
}

static void test_malformed_files(void)
{
    fs_mat *a = rand_mat(4, 3);
    fs_mat *m = NULL;
    struct fs_err e = {0};
    uint8_t *raw;
    size_t n = 0;
    const char *p = tpath("bad.npy");

    CHECK_OK(fs_npy_write_mat(tpath("good.npy"), a, &e), &e);
    raw = read_all(tpath("good.npy"), &n);
    if (raw == NULL) {
        CHECK(0);
        fs_mat_free(a);
        return;
    }
    /* truncated data: header 128 + 96 bytes */
    CHECK(n == 224);
    write_bytes(p, raw, n - 5);
    EXPECT_ERR(fs_io_load_dense(p, FS_FMT_AUTO, NULL, &m, &e), &e, FS_EFORMAT, p,
               "byte offset 219: truncated data: expected 224 bytes, found 219");
    CHECK(m == NULL);
    /* truncated header */
    write_bytes(p, raw, 40);
    EXPECT_ERR(fs_io_load_dense(p, FS_FMT_AUTO, NULL, &m, &e), &e, FS_EFORMAT, p,
               "byte offset 40: truncated header: expected 128 bytes, found 40");
    write_bytes(p, raw, 0);
    EXPECT_ERR(fs_io_load_dense(p, FS_FMT_NPY, NULL, &m, &e), &e, FS_EFORMAT, p,
               "truncated header");
    /* trailing bytes */
    {
        uint8_t *big = malloc(n + 3);
        memcpy(big, raw, n);
        memset(big + n, 0, 3);
        write_bytes(p, big, n + 3);
        free(big);
    }
    EXPECT_ERR(fs_io_load_dense(p, FS_FMT_AUTO, NULL, &m, &e), &e, FS_EFORMAT, p,
               "byte offset 224: unexpected data after the array");
    /* NaN at element [1, 2] (Fortran: index 1 + 2*4 = 9) */
    {
        double nan = NAN;
        memcpy(raw + 128 + 9 * 8, &nan, 8);
        write_bytes(p, raw, n);
        EXPECT_ERR(fs_io_load_dense(p, FS_FMT_AUTO, NULL, &m, &e), &e, FS_EFORMAT, p,
                   "byte offset 200: element [1, 2]: NaN or Inf not allowed");
    }
    /* bad magic */
    raw[1] = 'X';
    write_bytes(p, raw, n);
    EXPECT_ERR(fs_io_load_dense(p, FS_FMT_AUTO, NULL, &m, &e), &e, FS_EFORMAT, p,
               "byte offset 1: bad magic");
    /* zero dimension */
    {
        uint8_t buf[128];
        size_t hl = mk_hdr(buf, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (0, 3), }");
        write_bytes(p, buf, hl);
        EXPECT_ERR(fs_io_load_dense(p, FS_FMT_AUTO, NULL, &m, &e), &e, FS_EFORMAT, p,
                   "empty array");
    }
    /* caps on load */
    {
        struct fs_io_caps c = fs_io_caps_default();
        c.max_cols = 2;
        EXPECT_ERR(fs_io_load_dense(tpath("good.npy"), FS_FMT_AUTO, &c, &m, &e), &e, FS_ERANGE,
                   tpath("good.npy"), "max_cols");
    }
    /* missing file, directory */
    EXPECT_ERR(fs_io_load_dense(tpath("nope.npy"), FS_FMT_AUTO, NULL, &m, &e), &e, FS_ENOTFOUND,
               tpath("nope.npy"), "cannot open");
    EXPECT_ERR(fs_io_load_dense(t_dir, FS_FMT_NPY, NULL, &m, &e), &e, FS_EIO, t_dir, "directory");
    /* unwritable destination */
    EXPECT_ERR(fs_npy_write_mat(tpath("no/such/dir/x.npy"), a, &e), &e, FS_EIO,
               tpath("no/such/dir/x.npy"), "temporary");
    CHECK(m == NULL);
    free(raw);
    fs_mat_free(a);
}

/* gzip'ed .npy: read into memory first, same checks and messages. */
static void test_gzip(void)
{
    fs_mat *a = rand_mat(6, 5);
    fs_mat *m = NULL;
    struct fs_err e = {0};
    uint8_t *raw;
    size_t n = 0;

    CHECK_OK(fs_npy_write_mat(tpath("g.npy"), a, &e), &e);
    raw = read_all(tpath("g.npy"), &n);
    if (raw == NULL) {
        CHECK(0);
        fs_mat_free(a);
        return;
    }
    write_gz(tpath("g.npy.gz"), raw, n);
    CHECK_OK(fs_io_load_dense(tpath("g.npy.gz"), FS_FMT_AUTO, NULL, &m, &e), &e);
    CHECK(mat_equal(a, m));
    fs_mat_free(m);
    m = NULL;
    write_gz(tpath("t.npy.gz"), raw, n - 8);
    EXPECT_ERR(fs_io_load_dense(tpath("t.npy.gz"), FS_FMT_AUTO, NULL, &m, &e), &e, FS_EFORMAT,
               tpath("t.npy.gz"), "byte offset 360: truncated data: expected 368 bytes, found 360");
    {
        uint8_t *big = malloc(n + 1);
        memcpy(big, raw, n);
        big[n] = 7;
        write_gz(tpath("x.npy.gz"), big, n + 1);
        free(big);
    }
    EXPECT_ERR(fs_io_load_dense(tpath("x.npy.gz"), FS_FMT_AUTO, NULL, &m, &e), &e, FS_EFORMAT,
               tpath("x.npy.gz"), "byte offset 368: unexpected data after the array");
    /* C order through the conversion path */
    {
        struct fs_npy_header h = {FS_NPY_F8, 0, 2, {2, 3}, 0};
        uint8_t buf[128 + 48];
        size_t hl = 0;
        double x[6] = {1, 2, 3, 4, 5, 6};
        CHECK_OK(fs_npy_format_header(&h, buf, 128, &hl, &e), &e);
        memcpy(buf + hl, x, sizeof x);
        write_gz(tpath("c.npy.gz"), buf, hl + sizeof x);
        CHECK_OK(fs_io_load_dense(tpath("c.npy.gz"), FS_FMT_AUTO, NULL, &m, &e), &e);
        CHECK(m != NULL && FS_MAT_AT(m, 0, 2) == 3 && FS_MAT_AT(m, 1, 0) == 4);
        fs_mat_free(m);
        m = NULL;
    }
    /* u64 through gzip */
    {
        uint64_t u[3] = {5, UINT64_MAX, 7};
        uint64_t *r = NULL;
        size_t k = 0;
        uint8_t *ur;
        size_t un = 0;
        CHECK_OK(fs_npy_write_u64(tpath("u.npy"), u, 3, &e), &e);
        ur = read_all(tpath("u.npy"), &un);
        if (ur != NULL) {
            write_gz(tpath("u.npy.gz"), ur, un);
            CHECK_OK(fs_npy_read_u64(tpath("u.npy.gz"), 0, &r, &k, &e), &e);
            CHECK(k == 3 && r != NULL && r[1] == UINT64_MAX);
            free(r);
            r = NULL;
            write_gz(tpath("ut.npy.gz"), ur, un - 1);
            EXPECT_ERR(fs_npy_read_u64(tpath("ut.npy.gz"), 0, &r, &k, &e), &e, FS_EFORMAT,
                       tpath("ut.npy.gz"), "truncated data");
            write_bytes(tpath("ut.npy"), ur, un - 1);
            EXPECT_ERR(fs_npy_read_u64(tpath("ut.npy"), 0, &r, &k, &e), &e, FS_EFORMAT,
                       tpath("ut.npy"), "truncated data: expected 152 bytes, found 151");
            free(ur);
        }
    }
    free(raw);
    fs_mat_free(a);
}

static void test_format_names(void)
{
    enum fs_io_format f = FS_FMT_AUTO;
    struct fs_err e = {0};

    CHECK_OK(fs_io_format_parse("npy", &f, &e), &e);
    CHECK(f == FS_FMT_NPY);
    CHECK_OK(fs_io_format_parse("MTX", &f, &e), &e);
    CHECK(f == FS_FMT_MTX);
    CHECK_OK(fs_io_format_parse("auto", &f, &e), &e);
    CHECK(f == FS_FMT_AUTO);
    EXPECT_ERR(fs_io_format_parse("parquet", &f, &e), &e, FS_EINVAL, NULL, "'parquet'");
}

static void test_fuzz(void)
{
    fs_mat *a = rand_mat(3, 2);
    struct fs_err e = {0};
    uint8_t *raw;
    size_t n = 0;
    int ok;

    CHECK_OK(fs_npy_write_mat(tpath("fz.npy"), a, &e), &e);
    raw = read_all(tpath("fz.npy"), &n);
    if (raw != NULL) {
        ok = fuzz_file("fz2.npy", raw, n, 1500, 0);
        CHECK(ok >= 1); /* at least the full file */
        /* header parser on mutated buffers directly */
        for (int it = 0; it < 20000; it++) {
            uint8_t b[128];
            struct fs_npy_header h;
            size_t len = (size_t)(t_rng() % 65);
            memcpy(b, raw, 64);
            for (int k = 0; k < 2; k++) {
                b[t_rng() % 64] = (uint8_t)t_rng();
            }
            int rc = fs_npy_parse_header(b, len + 10 > 64 ? 64 : len + 10, NULL, &h, &e);
            CHECK(rc <= 0);
        }
        free(raw);
    }
    fs_mat_free(a);
}

/* fs_io_check_dense gives the verdict fs_io_load_dense gives (code and
 * message, or the shape) for the same file. */
static void check_like_load(const char *path)
{
    struct fs_err el = {0};
    struct fs_err ec = {0};
    fs_mat *m = NULL;
    size_t r = 0;
    size_t c = 0;
    int rl = fs_io_load_dense(path, FS_FMT_AUTO, NULL, &m, &el);
    int rcheck = fs_io_check_dense(path, FS_FMT_AUTO, NULL, &r, &c, &ec);

    CHECK_MSG(rl == rcheck, "%s: load %d (%s), check %d (%s)", path, rl, el.msg, rcheck, ec.msg);
    if (rl != 0) {
        CHECK_MSG(strcmp(el.msg, ec.msg) == 0, "%s: load '%s', check '%s'", path, el.msg, ec.msg);
    } else {
        CHECK_MSG(m != NULL && r == m->rows && c == m->cols, "%s: shape %zu x %zu", path, r, c);
    }
    fs_mat_free(m);
}

static void test_check_dense(void)
{
    struct fs_err e = {0};
    uint8_t buf[256];
    size_t hl;
    size_t r = 0;
    size_t c = 0;

    /* a large file (several 1 MiB chunks) in both orders, then one bad value
     * in its third chunk */
    {
        fs_mat *a = rand_mat(700, 500);
        uint8_t *raw;
        size_t n = 0;
        double inf = INFINITY;
        CHECK_OK(fs_npy_write_mat(tpath("big.npy"), a, &e), &e);
        check_like_load(tpath("big.npy"));
        CHECK_OK(fs_io_check_dense(tpath("big.npy"), FS_FMT_NPY, NULL, &r, &c, &e), &e);
        CHECK(r == 700 && c == 500);
        raw = read_all(tpath("big.npy"), &n);
        if (raw != NULL) {
            memcpy(raw + 128 + (size_t)300001 * 8, &inf, 8);
            write_bytes(tpath("bigbad.npy"), raw, n);
            check_like_load(tpath("bigbad.npy"));
            write_gz(tpath("bigbad.npy.gz"), raw, n);
            check_like_load(tpath("bigbad.npy.gz"));
            /* the same bytes read as C order: another element */
            struct fs_npy_header h = {FS_NPY_F8, 0, 2, {700, 500}, 0};
            hl = 0;
            CHECK_OK(fs_npy_format_header(&h, buf, 128, &hl, &e), &e);
            CHECK(hl == 128);
            memcpy(raw, buf, 128);
            write_bytes(tpath("bigbadc.npy"), raw, n);
            check_like_load(tpath("bigbadc.npy"));
            free(raw);
        }
        fs_mat_free(a);
    }
    /* the malformed, gzip'ed and other-dtype files of the tests above */
    {
        static const char *const names[] = {"good.npy", "bad.npy",  "nope.npy", "g.npy.gz",
                                            "t.npy.gz", "x.npy.gz", "c.npy.gz", "f4.npy",
                                            "i4.npy",   "u1.npy",   "be.npy"};
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
            check_like_load(tpath(names[i]));
        }
    }
    /* values other dtypes reject: Inf as <f4, an integer too large for a double */
    {
        float f[2] = {1.0f, INFINITY};
        int64_t x[2] = {3, ((int64_t)1 << 53) + 1};
        hl = mk_hdr(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2), }");
        memcpy(buf + hl, f, sizeof f);
        write_bytes(tpath("f4inf.npy"), buf, hl + sizeof f);
        check_like_load(tpath("f4inf.npy"));
        hl = mk_hdr(buf, 1, "{'descr': '<i8', 'fortran_order': True, 'shape': (2, 1), }");
        memcpy(buf + hl, x, sizeof x);
        write_bytes(tpath("i8big.npy"), buf, hl + sizeof x);
        check_like_load(tpath("i8big.npy"));
    }
    /* another format: loaded and freed */
    write_bytes(tpath("m.csv"), (const uint8_t *)"1,2,3\n4,5,6\n", 12);
    check_like_load(tpath("m.csv"));
    CHECK_OK(fs_io_check_dense(tpath("m.csv"), FS_FMT_AUTO, NULL, &r, &c, &e), &e);
    CHECK(r == 2 && c == 3);
    EXPECT_ERR(fs_io_check_dense(NULL, FS_FMT_AUTO, NULL, &r, &c, &e), &e, FS_EINVAL, NULL,
               "NULL argument");
}

int main(void)
{
    tdir_init("npy");
    RUN(test_header_variants);
    RUN(test_header_rejects);
    RUN(test_header_magic_version_stream);
    RUN(test_header_format);
    RUN(test_roundtrip_fortran);
    RUN(test_roundtrip_c_order);
    RUN(test_vec_and_u64);
    RUN(test_dtypes);
    RUN(test_malformed_files);
    RUN(test_gzip);
    RUN(test_format_names);
    RUN(test_check_dense);
    RUN(test_fuzz);
    tdir_cleanup();
    return TEST_END("test_io_npy");
}
