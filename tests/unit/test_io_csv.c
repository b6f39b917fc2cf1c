/* CSV / whitespace text: number parsing agrees with strtod bit for bit,
 * layout variants (header, CRLF, BOM, comments, blank lines, blanks as
 * separators, gzip), every malformed case with line and field, caps, a
 * medium-size load, and a truncate/mutate fuzz loop. */
#include "io/io_internal.h"
#include "test_io_util.h"

#include <locale.h>
#include <time.h>

static void test_parse_double_matches_strtod(void)
{
    static const char *const fixed[] = {"0",
                                        "-0",
                                        "1",
                                        "+1",
                                        ".5",
                                        "5.",
                                        "1e5",
                                        "1E-5",
                                        "123.456e+7",
                                        "0.1",
                                        "0.3",
                                        "2.2250738585072014e-308",
                                        "4.9e-324",
                                        "1.7976931348623157e308",
                                        "9007199254740993",
                                        "123456789012345678901234",
                                        "0.000000000000000000000000000001",
                                        "1e22",
                                        "1e23",
                                        "3.141592653589793238462643",
                                        "00012.5000",
                                        "1e-400"};
    char buf[64];
    int bad = 0;

    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        const char *end = NULL;
        double v = -1;
        int r = fs_io_parse_double(fixed[i], &end, &v);
        double w = strtod(fixed[i], NULL);
        CHECK_MSG(r == FS_IO_NUM_OK && *end == '\0' && memcmp(&v, &w, 8) == 0, "%s: %d %.17g",
                  fixed[i], r, v);
    }
    for (int it = 0; it < 100000; it++) {
        const char *end = NULL;
        double v = 0;
        double x = t_unif() * pow(10.0, (double)(int)(t_rng() % 40) - 20);
        static const char *const fmts[] = {"%.17g", "%.15g", "%.6g", "%.3f", "%.18e", "%g"};
        snprintf(buf, sizeof buf, fmts[it % 6], x);
        if (fs_io_parse_double(buf, &end, &v) != FS_IO_NUM_OK || *end != '\0' ||
            v != strtod(buf, NULL)) {
            if (bad++ < 5) {
                fprintf(stderr, "  mismatch on '%s'\n", buf);
            }
        }
    }
    CHECK(bad == 0);
    {
        const char *end = NULL;
        double v = 0;
        CHECK(fs_io_parse_double("nan", &end, &v) == FS_IO_NUM_NAN_INF);
        CHECK(fs_io_parse_double("-Infinity", &end, &v) == FS_IO_NUM_NAN_INF);
        CHECK(fs_io_parse_double("1e999", &end, &v) == FS_IO_NUM_OVERFLOW);
        CHECK(fs_io_parse_double("abc", &end, &v) == FS_IO_NUM_BAD);
        CHECK(fs_io_parse_double("-", &end, &v) == FS_IO_NUM_BAD);
        CHECK(fs_io_parse_double(".", &end, &v) == FS_IO_NUM_BAD);
        CHECK(fs_io_parse_double("0x1p3", &end, &v) == FS_IO_NUM_OK && *end == 'x');
        CHECK(fs_io_parse_double("1e+", &end, &v) == FS_IO_NUM_OK && *end == 'e');
    }
}

/* Long mantissas go through strtod, which follows LC_NUMERIC. */
static void test_parse_double_locale(void)
{
    static const char *const names[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "de_DE"};
    const char *got = NULL;
    const char *end = NULL;
    double v = 0;

    for (size_t i = 0; i < sizeof names / sizeof names[0] && got == NULL; i++) {
        got = setlocale(LC_NUMERIC, names[i]);
    }
    if (got == NULL) {
        printf("  note: no comma-decimal locale installed, locale case skipped\n");
        return;
    }
    CHECK(fs_io_parse_double("0.12345678901234567890", &end, &v) == FS_IO_NUM_OK && *end == '\0' &&
          v == 0.12345678901234567890);
    CHECK(fs_io_parse_double("1.5e300", &end, &v) == FS_IO_NUM_OK && v == 1.5e300);
    setlocale(LC_NUMERIC, "C");
}

static void check_2x3(const fs_mat *m)
{
    CHECK(m != NULL && m->rows == 2 && m->cols == 3);
    if (m != NULL && m->rows == 2 && m->cols == 3) {
        CHECK(FS_MAT_AT(m, 0, 0) == 1 && FS_MAT_AT(m, 0, 1) == 2 && FS_MAT_AT(m, 0, 2) == 3);
        CHECK(FS_MAT_AT(m, 1, 0) == 4 && FS_MAT_AT(m, 1, 1) == -5.5 && FS_MAT_AT(m, 1, 2) == 6e-3);
    }
}

static void test_layouts(void)
{
    static const struct {
        const char *name;
        const char *text;
    } cases[] = {
        {"plain.csv", "1,2,3\n4,-5.5,6e-3\n"},
        {"noeol.csv", "1,2,3\n4,-5.5,6e-3"},
        {"crlf.csv", "1,2,3\r\n4,-5.5,6e-3\r\n"},
        {"blank.csv", "1,2,3\n\n4,-5.5,6e-3\n\n\n  \n"},
        {"header.csv", "a,b,c\n1,2,3\n4,-5.5,6e-3\n"},
        {"quoted.csv", "\"x, y\",\"b\",c\r\n1,2,3\r\n4,-5.5,6e-3\r\n"},
        {"spaces.csv", " 1 , 2,3 \n4 ,\t-5.5 , 6e-3\n"},
        {"bom.csv", "\xef\xbb\xbf"
                    "1,2,3\n4,-5.5,6e-3\n"},
        {"bomhdr.csv", "\xef\xbb\xbf"
                       "a,b,c\n1,2,3\n4,-5.5,6e-3\n"},
        {"comments.txt", "# written by numpy.savetxt\n1 2 3\n# mid\n4 -5.5 6e-3\n"},
        {"ws.txt", "  1\t2   3\n4 -5.5\t\t6e-3  \n"},
        {"ws.tsv", "a\tb\tc\n1\t2\t3\n4\t-5.5\t6e-3\n"},
        {"sniffed.dat", "1,2,3\n4,-5.5,6e-3\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fs_mat *m = NULL;
        struct fs_err e = {0};
        int rc = load_text(cases[i].name, cases[i].text, NULL, &m, &e);
        CHECK_MSG(rc == 0, "%s: %s", cases[i].name, e.msg);
        check_2x3(m);
        fs_mat_free(m);
    }
    {
        fs_mat *m = NULL;
        struct fs_err e = {0};
        const char *t = "1\n2\n3\n";
        CHECK_OK(load_text("col.csv", t, NULL, &m, &e), &e);
        CHECK(m != NULL && m->rows == 3 && m->cols == 1 && m->data[2] == 3);
        fs_mat_free(m);
        m = NULL;
        write_gz(tpath("z.csv.gz"), "a,b,c\n1,2,3\n4,-5.5,6e-3\n", 24);
        CHECK_OK(fs_io_load_dense(tpath("z.csv.gz"), FS_FMT_AUTO, NULL, &m, &e), &e);
        check_2x3(m);
        fs_mat_free(m);
        m = NULL;
        /* forced format on a name that says otherwise */
        write_str(tpath("forced.bin"), "1,2,3\n4,-5.5,6e-3\n");
        CHECK_OK(fs_io_load_dense(tpath("forced.bin"), FS_FMT_CSV, NULL, &m, &e), &e);
        check_2x3(m);
        fs_mat_free(m);
    }
}

static void test_malformed(void)
{
    static const struct {
        const char *name;
        const char *text;
        int code;
        const char *needle;
    } cases[] = {
        {"rag1.csv", "1,2,3\n4,5,6\n7,8\n", FS_EFORMAT, "line 3: expected 3 fields, found 2"},
        {"rag2.csv", "1,2,3\n4,5,6,7\n", FS_EFORMAT, "line 2: expected 3 fields, found 4"},
        {"rag3.csv", "1,2\n\n3,4,\n", FS_EFORMAT, "line 3: expected 2 fields, found 3"},
        {"rag4.txt", "1 2 3\n4 5\n", FS_EFORMAT, "line 2: expected 3 fields, found 2"},
        {"rag5.csv", "x,y\n1,2,3\n", FS_EFORMAT,
         "line 2: expected 2 fields (as in the header on line 1), found 3"},
        {"rag6.csv", "1,2\n3,abc,4\n", FS_EFORMAT, "line 2: expected 2 fields, found 3"},
        {"nan1.csv", "1,2\n3,abc\n", FS_EFORMAT, "line 2, field 2: not a number 'abc'"},
        {"nan2.csv", "1,2\n3,1.5.5\n", FS_EFORMAT, "line 2, field 2: not a number '1.5.5'"},
        {"nan3.csv", "1,2\n3,0x10\n", FS_EFORMAT, "line 2, field 2: not a number '0x10'"},
        {"nan4.csv", "1,2\n3,4 5\n", FS_EFORMAT, "line 2, field 2: not a number '4 5'"},
        {"nan5.txt", "1 2\n3 4,5\n", FS_EFORMAT, "line 2, field 2: not a number '4,5'"},
        {"long.csv", "1,2\n3,abcdefghijklmnopqrstuvwxyz0123456789abcdefghij\n", FS_EFORMAT,
         "line 2, field 2: not a number 'abcdefghijklmnopqrstuvwxyz01...'"},
        {"nul.csv",
         "1,2\n3,4\0"
         "5\n",
         FS_EFORMAT, "line 2, field 2: not a number"},
        {"naninf1.csv", "1,2\nnan,2\n", FS_EFORMAT, "line 2, field 1: NaN or Inf not allowed"},
        {"naninf2.csv", "1,2\n3,-inf\n", FS_EFORMAT, "line 2, field 2: NaN or Inf not allowed"},
        {"naninf3.csv", "1,NaN\n", FS_EFORMAT, "line 1, field 2: NaN or Inf not allowed"},
        {"naninf4.txt", "1 Infinity\n", FS_EFORMAT, "line 1, field 2: NaN or Inf not allowed"},
        {"ovf.csv", "1,2\n1e999,2\n", FS_EFORMAT, "line 2, field 1: number out of range '1e999'"},
        {"empty1.csv", "1,,3\n", FS_EFORMAT, "line 1, field 2: empty field"},
        {"empty2.csv", "1,2,3\n4,5,\n", FS_EFORMAT, "line 2, field 3: empty field"},
        {"nodata.csv", "", FS_EFORMAT, "byte offset 0: empty file"},
        {"nodata2.csv", "\n\n# only a comment\n", FS_EFORMAT, "line 3: no data rows"},
        {"hdronly.csv", "a,b,c\n", FS_EFORMAT, "line 1: header but no data rows"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fs_mat *m = NULL;
        struct fs_err e = {0};
        const char *p = tpath(cases[i].name);
        int rc;
        if (strcmp(cases[i].name, "nul.csv") == 0) {
            write_bytes(p, cases[i].text, 10);
            rc = fs_io_load_dense(p, FS_FMT_AUTO, NULL, &m, &e);
        } else {
            rc = load_text(cases[i].name, cases[i].text, NULL, &m, &e);
        }
        EXPECT_ERR(rc, &e, cases[i].code, p, cases[i].needle);
        CHECK(m == NULL);
        CHECK(strlen(e.msg) < 200 + strlen(p));
    }
}

static void test_caps(void)
{
    struct fs_io_caps c = fs_io_caps_default();
    fs_mat *m = NULL;
    struct fs_err e = {0};
    const char *t = "h1,h2,h3\n1,2,3\n4,5,6\n7,8,9\n";

    c.max_rows = 2;
    EXPECT_ERR(load_text("cap.csv", t, &c, &m, &e), &e, FS_ERANGE, tpath("cap.csv"),
               "line 4: row count exceeds the cap of 2 (max_rows)");
    c = fs_io_caps_default();
    c.max_cols = 2;
    EXPECT_ERR(load_text("cap.csv", t, &c, &m, &e), &e, FS_ERANGE, tpath("cap.csv"),
               "line 2: 3 columns exceed the cap of 2 (max_cols)");
    c = fs_io_caps_default();
    c.max_elems = 8;
    EXPECT_ERR(load_text("cap.csv", t, &c, &m, &e), &e, FS_ERANGE, tpath("cap.csv"),
               "3 x 3 elements exceed the cap of 8 (max_elems)");
    c.max_elems = 9;
    CHECK_OK(load_text("cap.csv", t, &c, &m, &e), &e);
    fs_mat_free(m);
    m = NULL;
    /* the line-length cap follows max_cols: 1 MiB + 64 bytes per column */
    {
        size_t n = ((size_t)1 << 20) + 200;
        char *big = malloc(n + 1);
        memset(big, '1', n);
        big[n - 1] = '\n';
        big[n] = '\0';
        c = fs_io_caps_default();
        c.max_cols = 1;
        EXPECT_ERR(load_text("longline.csv", big, &c, &m, &e), &e, FS_ERANGE, tpath("longline.csv"),
                   "line 1: longer than the limit");
        free(big);
    }
}

static void test_gzip_broken(void)
{
    const char *t = "1,2,3\n4,5,6\n7,8,9\n10,11,12\n";
    uint8_t *raw;
    size_t n = 0;
    fs_mat *m = NULL;
    struct fs_err e = {0};

    write_gz(tpath("g.csv.gz"), t, strlen(t));
    raw = read_all(tpath("g.csv.gz"), &n);
    if (raw == NULL) {
        CHECK(0);
        return;
    }
    write_bytes(tpath("gt.csv.gz"), raw, n - 10);
    EXPECT_ERR(fs_io_load_dense(tpath("gt.csv.gz"), FS_FMT_AUTO, NULL, &m, &e), &e, FS_EFORMAT,
               tpath("gt.csv.gz"), "truncated gzip");
    raw[n - 6] ^= 0xff; /* CRC/length trailer */
    write_bytes(tpath("gc.csv.gz"), raw, n);
    EXPECT_ERR(fs_io_load_dense(tpath("gc.csv.gz"), FS_FMT_AUTO, NULL, &m, &e), &e, FS_EFORMAT,
               tpath("gc.csv.gz"), "gzip");
    CHECK(m == NULL);
    free(raw);
}

/* 3000 x 784 integers (Fashion-MNIST shaped) and a few floats, timed. */
/* Small files get small read buffers: a plain file of a few bytes, one
 * just over the smallest buffer, and a gzip'ed file of a few KiB that
 * expands to lines longer than its buffers (which must grow) all load. */
static void test_small_buffers(void)
{
    enum { R = 40, C = 3000 };
    size_t cap = (size_t)R * C * 2 + 64;
    char *t = malloc(cap);
    size_t n = 0;
    fs_mat *m = NULL;
    struct fs_err e = {0};
    int same = 1;

    if (t == NULL) {
        CHECK(0);
        return;
    }
    for (size_t i = 0; i < R; i++) {
        for (size_t j = 0; j < C; j++) {
            t[n++] = (char)('0' + (i + j) % 10);
            t[n++] = j + 1 < C ? ',' : '\n';
        }
    }
    write_gz(tpath("long.csv.gz"), t, n);
    CHECK_OK(fs_io_load_dense(tpath("long.csv.gz"), FS_FMT_AUTO, NULL, &m, &e), &e);
    CHECK(m != NULL && m->rows == R && m->cols == C);
    for (size_t i = 0; m != NULL && i < R; i++) {
        for (size_t j = 0; j < C; j++) {
            same &= FS_MAT_AT(m, i, j) == (double)((i + j) % 10);
        }
    }
    CHECK(same);
    fs_mat_free(m);
    m = NULL;
    /* one 6000-byte line without a newline, plain: it fills the buffer
     * (file size + 2, one byte kept for a NUL) */
    write_bytes(tpath("line.csv"), (const uint8_t *)t, (size_t)C * 2);
    CHECK_OK(fs_io_load_dense(tpath("line.csv"), FS_FMT_CSV, NULL, &m, &e), &e);
    CHECK(m != NULL && m->rows == 1 && m->cols == C && FS_MAT_AT(m, 0, C - 1) == 9);
    fs_mat_free(m);
    m = NULL;
    CHECK_OK(load_text("tiny.csv", "7\n", NULL, &m, &e), &e);
    CHECK(m != NULL && m->rows == 1 && m->cols == 1 && m->data[0] == 7);
    fs_mat_free(m);
    free(t);
}

static void test_medium(void)
{
    enum { R = 3000, C = 784 };
    const char *p = tpath("medium.csv");
    FILE *f = fopen(p, "w");
    fs_mat *m = NULL;
    struct fs_err e = {0};
    struct timespec t0;
    struct timespec t1;
    uint64_t seed = t_rng_state;
    int same = 1;

    if (f == NULL) {
        CHECK(0);
        return;
    }
    for (size_t j = 0; j < C; j++) {
        fprintf(f, "%spixel%zu", j ? "," : "", j);
    }
    fputc('\n', f);
    for (size_t i = 0; i < R; i++) {
        for (size_t j = 0; j < C; j++) {
            if (j == 7) {
                fprintf(f, ",%.17g", t_unif());
            } else {
                fprintf(f, "%s%u", j ? "," : "", (unsigned)(t_rng() % 256));
            }
        }
        fputc('\n', f);
    }
    fclose(f);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK_OK(fs_io_load_dense(p, FS_FMT_AUTO, NULL, &m, &e), &e);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("  medium.csv %dx%d loaded in %.3f s\n", R, C,
           (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    CHECK(m != NULL && m->rows == R && m->cols == C);
    t_rng_state = seed;
    for (size_t i = 0; m != NULL && i < R; i++) {
        for (size_t j = 0; j < C; j++) {
            double want = j == 7 ? t_unif() : (double)(t_rng() % 256);
            same &= FS_MAT_AT(m, i, j) == want;
        }
    }
    CHECK(same);
    fs_mat_free(m);
    unlink(p);
}

static void test_fuzz(void)
{
    const char *good = "a,b,c\n1.5,2,3e2\n-4,5,6\n";
    int ok = fuzz_file("fz.csv", (const uint8_t *)good, strlen(good), 1500, 0);
    CHECK(ok >= 2);
    ok = fuzz_file("fz.txt", (const uint8_t *)"1 2\n3 4\n", 8, 300, 0);
    CHECK(ok >= 2);
}

int main(void)
{
    tdir_init("csv");
    RUN(test_parse_double_matches_strtod);
    RUN(test_parse_double_locale);
    RUN(test_layouts);
    RUN(test_malformed);
    RUN(test_caps);
    RUN(test_gzip_broken);
    RUN(test_small_buffers);
    RUN(test_medium);
    RUN(test_fuzz);
    tdir_cleanup();
    return TEST_END("test_io_csv");
}
