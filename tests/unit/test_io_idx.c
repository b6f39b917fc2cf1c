/* IDX: tiny generated files of every type, plain and gzip'ed, detection by
 * name and by magic, malformed headers and data with byte offsets, caps,
 * the real Fashion-MNIST test set when installed, and a fuzz loop. */
#include "test_io_util.h"

#include <math.h>
#include <time.h>

#define FMNIST_DIR "/usr/share/datasets/fashion-mnist"

/* Header 00 00 type ndim + big-endian dims into b; returns its length. */
static size_t idx_hdr(uint8_t *b, uint8_t type, int ndim, const uint32_t *dims)
{
    b[0] = 0;
    b[1] = 0;
    b[2] = type;
    b[3] = (uint8_t)ndim;
    for (int k = 0; k < ndim; k++) {
        b[4 + 4 * k] = (uint8_t)(dims[k] >> 24);
        b[5 + 4 * k] = (uint8_t)(dims[k] >> 16);
        b[6 + 4 * k] = (uint8_t)(dims[k] >> 8);
        b[7 + 4 * k] = (uint8_t)dims[k];
    }
    return 4 + 4 * (size_t)ndim;
}

/* (3, 2, 2) u8 images: 3 x 4, value of (i, j) = 10 i + j */
static size_t tiny_images(uint8_t *b)
{
    uint32_t d[3] = {3, 2, 2};
    size_t n = idx_hdr(b, 0x08, 3, d);
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 4; j++) {
            b[n++] = (uint8_t)(10 * i + j + (i == 2 && j == 3 ? 200 : 0));
        }
    }
    return n;
}

static void check_tiny(const fs_mat *m)
{
    CHECK(m != NULL && m->rows == 3 && m->cols == 4);
    if (m != NULL && m->rows == 3 && m->cols == 4) {
        CHECK(FS_MAT_AT(m, 0, 0) == 0 && FS_MAT_AT(m, 1, 2) == 12 && FS_MAT_AT(m, 2, 1) == 21 &&
              FS_MAT_AT(m, 2, 3) == 223);
    }
}

static void test_tiny_plain_gz_detection(void)
{
    uint8_t b[64];
    size_t n = tiny_images(b);
    static const char *const names[] = {"t-idx3-ubyte", "t.idx",           "weird.bin",
                                        "t.dat.gz",     "t-idx3-ubyte.gz", "noext"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        fs_mat *m = NULL;
        struct fs_err e = {0};
        if (k >= 3 && k <= 4) {
            write_gz(tpath(names[k]), b, n);
        } else {
            write_bytes(tpath(names[k]), b, n);
        }
        CHECK_OK(fs_io_load_dense(tpath(names[k]), FS_FMT_AUTO, NULL, &m, &e), &e);
        check_tiny(m);
        fs_mat_free(m);
    }
    {
        fs_mat *m = NULL;
        struct fs_err e = {0};
        write_gz(tpath("forced.csv"), b, n); /* the format flag beats the name */
        CHECK_OK(fs_io_load_dense(tpath("forced.csv"), FS_FMT_IDX, NULL, &m, &e), &e);
        check_tiny(m);
        fs_mat_free(m);
        m = NULL;
        CHECK(fs_io_is_sparse_file(tpath("t.idx")) == 0);
        /* sparse view of the same */
        {
            fs_csr *a = NULL;
            CHECK_OK(fs_io_load_sparse(tpath("t.idx"), FS_FMT_AUTO, NULL, &a, &e), &e);
            CHECK(a != NULL && a->rows == 3 && a->cols == 4 && a->nnz == 11);
            fs_csr_free(a);
        }
    }
}

static void test_types(void)
{
    uint8_t b[128];
    uint32_t d1[1] = {3};
    uint32_t d2[2] = {2, 2};
    fs_mat *m = NULL;
    struct fs_err e = {0};
    size_t n;

    /* labels (n,) -> n x 1, signed bytes */
    n = idx_hdr(b, 0x09, 1, d1);
    b[n++] = 0xff;
    b[n++] = 0x7f;
    b[n++] = 0x80;
    write_bytes(tpath("i8.idx"), b, n);
    CHECK_OK(fs_io_load_dense(tpath("i8.idx"), FS_FMT_AUTO, NULL, &m, &e), &e);
    CHECK(m != NULL && m->rows == 3 && m->cols == 1 && m->data[0] == -1 && m->data[1] == 127 &&
          m->data[2] == -128);
    fs_mat_free(m);
    m = NULL;
    /* i16 big-endian */
    n = idx_hdr(b, 0x0B, 2, d2);
    memcpy(b + n, "\xff\xfe\x01\x00\x00\x05\x80\x00", 8);
    write_bytes(tpath("i16.idx"), b, n + 8);
    CHECK_OK(fs_io_load_dense(tpath("i16.idx"), FS_FMT_AUTO, NULL, &m, &e), &e);
    CHECK(m != NULL && FS_MAT_AT(m, 0, 0) == -2 && FS_MAT_AT(m, 0, 1) == 256 &&
          FS_MAT_AT(m, 1, 0) == 5 && FS_MAT_AT(m, 1, 1) == -32768);
    fs_mat_free(m);
    m = NULL;
    /* i32 */
    n = idx_hdr(b, 0x0C, 1, d1);
    memcpy(b + n, "\xff\xff\xff\xff\x7f\xff\xff\xff\x00\x01\x00\x00", 12);
    write_bytes(tpath("i32.idx"), b, n + 12);
    CHECK_OK(fs_io_load_dense(tpath("i32.idx"), FS_FMT_AUTO, NULL, &m, &e), &e);
    CHECK(m != NULL && m->data[0] == -1 && m->data[1] == 2147483647.0 && m->data[2] == 65536);
    fs_mat_free(m);
    m = NULL;
    /* f32: 1.5 = 3fc00000, -0.25 = be800000 */
    n = idx_hdr(b, 0x0D, 2, (const uint32_t[2]){1, 2});
    memcpy(b + n, "\x3f\xc0\x00\x00\xbe\x80\x00\x00", 8);
    write_bytes(tpath("f32.idx"), b, n + 8);
    CHECK_OK(fs_io_load_dense(tpath("f32.idx"), FS_FMT_AUTO, NULL, &m, &e), &e);
    CHECK(m != NULL && m->rows == 1 && m->cols == 2 && m->data[0] == 1.5 && m->data[1] == -0.25);
    fs_mat_free(m);
    m = NULL;
    /* f64: 2.0 = 4000000000000000 */
    n = idx_hdr(b, 0x0E, 1, (const uint32_t[1]){1});
    memcpy(b + n, "\x40\x00\x00\x00\x00\x00\x00\x00", 8);
    write_bytes(tpath("f64.idx"), b, n + 8);
    CHECK_OK(fs_io_load_dense(tpath("f64.idx"), FS_FMT_AUTO, NULL, &m, &e), &e);
    CHECK(m != NULL && m->data[0] == 2.0);
    fs_mat_free(m);
}

static void test_malformed(void)
{
    uint8_t good[64];
    uint8_t b[64];
    size_t n = tiny_images(good); /* 16-byte header + 12 bytes */
    const char *p = tpath("bad-ubyte");
    fs_mat *m = NULL;
    struct fs_err e = {0};

    memcpy(b, good, n);
    b[1] = 8;
    write_bytes(p, b, n);
    EXPECT_ERR(fs_io_load_dense(p, FS_FMT_AUTO, NULL, &m, &e), &e, FS_EFORMAT, p,
               "byte offset 1: bad magic");
    memcpy(b, good, n);
    b[2] = 0x0A;
    write_bytes(p, b, n);
    EXPECT_ERR(fs_io_load_dense(p, FS_FMT_AUTO, NULL, &m, &e), &e, FS_EFORMAT, p,
               "byte offset 2: unknown IDX data type 0x0a");
    memcpy(b, good, n);
    b[3] = 0;
    write_bytes(p, b, n);
    EXPECT_ERR(fs_io_load_dense(p, FS_FMT_AUTO, NULL, &m, &e), &e, FS_EFORMAT, p,
               "byte offset 3: 0 dimensions");
    memcpy(b, good, n);
    b[11] = 0;
    write_bytes(p, b, n);
    EXPECT_ERR(fs_io_load_dense(p, FS_FMT_AUTO, NULL, &m, &e), &e, FS_EFORMAT, p,
               "byte offset 8: dimension 1 is zero");
    write_bytes(p, good, 10);
    EXPECT_ERR(fs_io_load_dense(p, FS_FMT_AUTO, NULL, &m, &e), &e, FS_EFORMAT, p,
               "byte offset 10: truncated header: expected 16 bytes, found 10");
    write_bytes(p, good, 3);
    EXPECT_ERR(fs_io_load_dense(p, FS_FMT_AUTO, NULL, &m, &e), &e, FS_EFORMAT, p,
               "byte offset 3: truncated header: expected 4 bytes, found 3");
    write_bytes(p, good, n - 3);
    EXPECT_ERR(fs_io_load_dense(p, FS_FMT_AUTO, NULL, &m, &e), &e, FS_EFORMAT, p,
               "byte offset 25: truncated data: expected 28 bytes, found 25");
    write_gz(tpath("bad-gz-ubyte"), good, n - 3); /* offsets are in the decompressed stream */
    EXPECT_ERR(fs_io_load_dense(tpath("bad-gz-ubyte"), FS_FMT_AUTO, NULL, &m, &e), &e, FS_EFORMAT,
               tpath("bad-gz-ubyte"), "byte offset 25: truncated data");
    memcpy(b, good, n);
    b[n] = 1;
    write_bytes(p, b, n + 1);
    EXPECT_ERR(fs_io_load_dense(p, FS_FMT_AUTO, NULL, &m, &e), &e, FS_EFORMAT, p,
               "byte offset 28: unexpected data after the array");
    /* NaN in f32 at element [0, 1] */
    {
        size_t k = idx_hdr(b, 0x0D, 2, (const uint32_t[2]){1, 2});
        memcpy(b + k, "\x3f\xc0\x00\x00\x7f\xc0\x00\x00", 8);
        write_bytes(p, b, k + 8);
        EXPECT_ERR(fs_io_load_dense(p, FS_FMT_AUTO, NULL, &m, &e), &e, FS_EFORMAT, p,
                   "byte offset 16: element [0, 1]: NaN or Inf not allowed");
    }
    /* caps, checked from the header alone (a 16-byte file claiming 4G x 64K) */
    {
        struct fs_io_caps c = fs_io_caps_default();
        write_bytes(p, "\0\0\x08\x02\xff\xff\xff\xff\x00\x01\x00\x00", 12);
        EXPECT_ERR(fs_io_load_dense(p, FS_FMT_AUTO, NULL, &m, &e), &e, FS_ERANGE, p, "max_rows");
        write_bytes(p, good, n);
        c.max_cols = 3;
        EXPECT_ERR(fs_io_load_dense(p, FS_FMT_AUTO, &c, &m, &e), &e, FS_ERANGE, p, "max_cols");
        c = fs_io_caps_default();
        c.max_elems = 11;
        EXPECT_ERR(fs_io_load_dense(p, FS_FMT_AUTO, &c, &m, &e), &e, FS_ERANGE, p, "max_elems");
    }
    /* unknown magic through sniffing, empty file */
    write_bytes(tpath("junk"), "\x01\x02\x03\x04\x05", 5);
    EXPECT_ERR(fs_io_load_dense(tpath("junk"), FS_FMT_AUTO, NULL, &m, &e), &e, FS_EFORMAT,
               tpath("junk"), "byte offset 0: unknown format");
    write_bytes(tpath("empty"), "", 0);
    EXPECT_ERR(fs_io_load_dense(tpath("empty"), FS_FMT_AUTO, NULL, &m, &e), &e, FS_EFORMAT,
               tpath("empty"), "byte offset 0: empty file");
    CHECK(m == NULL);
}

static double elapsed(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0->tv_nsec);
}

static void test_fashion_mnist(void)
{
    const char *img = FMNIST_DIR "/t10k-images-idx3-ubyte.gz";
    const char *lab = FMNIST_DIR "/t10k-labels-idx1-ubyte.gz";
    fs_mat *m = NULL;
    struct fs_err e = {0};
    struct timespec t0;

    if (access(img, R_OK) != 0 || access(lab, R_OK) != 0) {
        printf("  note: %s not installed (dataset-fashion-mnist), skipped\n", img);
        return;
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK_OK(fs_io_load_dense(img, FS_FMT_AUTO, NULL, &m, &e), &e);
    printf("  %s: loaded in %.3f s\n", img, elapsed(&t0));
    CHECK(m != NULL && m->rows == 10000 && m->cols == 784);
    if (m != NULL && m->rows == 10000 && m->cols == 784) {
        double lo = 1e9;
        double hi = -1e9;
        double sum = 0;
        int integral = 1;
        for (size_t k = 0; k < m->rows * m->cols; k++) {
            double v = m->data[k];
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
            sum += v;
            integral &= v == floor(v);
        }
        CHECK(lo == 0 && hi == 255 && integral);
        /* mean pixel of the Fashion-MNIST test set is about 73 */
        CHECK_MSG(sum / (10000.0 * 784) > 60 && sum / (10000.0 * 784) < 85, "mean %g",
                  sum / (10000.0 * 784));
    }
    fs_mat_free(m);
    m = NULL;
    CHECK_OK(fs_io_load_dense(lab, FS_FMT_AUTO, NULL, &m, &e), &e);
    CHECK(m != NULL && m->rows == 10000 && m->cols == 1);
    if (m != NULL && m->cols == 1) {
        int counts[10] = {0};
        int okv = 1;
        for (size_t i = 0; i < m->rows; i++) {
            double v = m->data[i];
            okv &= v >= 0 && v <= 9 && v == floor(v);
            if (v >= 0 && v <= 9) {
                counts[(int)v]++;
            }
        }
        CHECK(okv && counts[0] == 1000 && counts[9] == 1000); /* balanced classes */
    }
    fs_mat_free(m);
}

static void test_fuzz(void)
{
    uint8_t b[64];
    size_t n = tiny_images(b);
    int ok = fuzz_file("fz-ubyte", b, n, 1500, 0);
    CHECK(ok >= 1);
    /* gzip'ed: truncations and byte flips in the compressed stream */
    write_gz(tpath("fzg.gz"), b, n);
    {
        size_t gn = 0;
        uint8_t *g = read_all(tpath("fzg.gz"), &gn);
        if (g != NULL) {
            ok = fuzz_file("fzg2-ubyte.gz", g, gn, 800, 0);
            CHECK(ok >= 1);
            free(g);
        }
    }
}

int main(void)
{
    tdir_init("idx");
    RUN(test_tiny_plain_gz_detection);
    RUN(test_types);
    RUN(test_malformed);
    RUN(test_fashion_mnist);
    RUN(test_fuzz);
    tdir_cleanup();
    return TEST_END("test_io_idx");
}
