/* MatrixMarket exchange format (math.nist.gov/MatrixMarket/formats.html):
 *   %%MatrixMarket matrix coordinate|array real|integer|pattern general|symmetric|skew-symmetric
 *   % comments
 *   M N NNZ          (coordinate)  or  M N  (array)
 *   i j [value]      1-based, one entry per line (coordinate)
 *   value            column-major; symmetric: lower triangle incl. diagonal,
 *                    skew-symmetric: strictly lower triangle (array)
 * Banner words are case-insensitive. Symmetric coordinate entries must lie on
 * or below the diagonal (the spec stores only the lower triangle; an upper
 * entry would otherwise be counted twice). Duplicate coordinates are summed.
 * complex and hermitian are not supported. */
#include "io_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MTX_MAX_LINE ((size_t)1 << 16)
#define MTX_MAX_TOK  8

enum { MF_REAL, MF_INT, MF_PATTERN };
enum { MS_GEN, MS_SYM, MS_SKEW };

struct mtx {
    const char *path;
    struct fs_io_rd rd;
    int coord;
    int field;
    int sym;
    uint64_t m;
    uint64_t n;
    uint64_t nnz;       /* coordinate: entries declared; array: values expected */
    uint64_t size_line; /* line number of the size line */
};

struct tok {
    const char *s;
    size_t n;
};

static int is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

/* Split on blanks into at most MTX_MAX_TOK tokens; returns the full count. */
static size_t split(const char *s, size_t n, struct tok *t)
{
    size_t k = 0;
    size_t p = 0;

    for (;;) {
        size_t a;
        while (p < n && is_blank(s[p])) {
            p++;
        }
        if (p >= n) {
            return k;
        }
        a = p;
        while (p < n && !is_blank(s[p])) {
            p++;
        }
        if (k < MTX_MAX_TOK) {
            t[k].s = s + a;
            t[k].n = p - a;
        }
        k++;
    }
}

static int word_is(const struct tok *t, const char *w)
{
    size_t n = strlen(w);
    if (t->n != n) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        char c = t->s[i];
        if (c >= 'A' && c <= 'Z') {
            c = (char)(c - 'A' + 'a');
        }
        if (c != w[i]) {
            return 0;
        }
    }
    return 1;
}

static int mtx_banner_word(struct mtx *x, const char *what, const struct tok *t, struct fs_err *err)
{
    char tok[32];
    fs_io_token(tok, sizeof tok, t->s, t->n);
    return fs_io_err(err, FS_EFORMAT, x->path, "line 1: unsupported %s '%s'", what, tok);
}

static int mtx_banner(struct mtx *x, const char *s, size_t n, struct fs_err *err)
{
    static const char magic[] = "%%MatrixMarket";
    struct tok t[MTX_MAX_TOK];
    size_t k;

    if (n < sizeof magic - 1 || memcmp(s, magic, sizeof magic - 1) != 0) {
        return fs_io_err(err, FS_EFORMAT, x->path,
                         "line 1: bad magic (expected '%%%%MatrixMarket')");
    }
    k = split(s, n, t);
    if (k != 5 || t[0].n != sizeof magic - 1) {
        return fs_io_err(err, FS_EFORMAT, x->path,
                         "line 1: expected '%%%%MatrixMarket matrix <format> <field> <symmetry>'");
    }
    if (!word_is(&t[1], "matrix")) {
        return mtx_banner_word(x, "object", &t[1], err);
    }
    if (word_is(&t[2], "coordinate")) {
        x->coord = 1;
    } else if (!word_is(&t[2], "array")) {
        return mtx_banner_word(x, "format", &t[2], err);
    }
    if (word_is(&t[3], "real") || word_is(&t[3], "double")) {
        x->field = MF_REAL;
    } else if (word_is(&t[3], "integer")) {
        x->field = MF_INT;
    } else if (word_is(&t[3], "pattern") && x->coord) {
        x->field = MF_PATTERN;
    } else {
        return mtx_banner_word(x, "field", &t[3], err);
    }
    if (word_is(&t[4], "general")) {
        x->sym = MS_GEN;
    } else if (word_is(&t[4], "symmetric")) {
        x->sym = MS_SYM;
    } else if (word_is(&t[4], "skew-symmetric") && x->field != MF_PATTERN) {
        x->sym = MS_SKEW;
    } else {
        return mtx_banner_word(x, "symmetry", &t[4], err);
    }
    return 0;
}

/* Next line that is neither blank nor a '%' comment; 0 at end of file. */
static int next_line(struct mtx *x, char **s, size_t *n, struct fs_err *err)
{
    for (;;) {
        size_t k = 0;
        int rc = fs_io_rd_line(&x->rd, s, n, err);
        if (rc <= 0) {
            return rc;
        }
        while (k < *n && is_blank((*s)[k])) {
            k++;
        }
        if (k < *n && (*s)[k] != '%') {
            return 1;
        }
    }
}

static int parse_dim(struct mtx *x, const struct tok *t, uint64_t *v, struct fs_err *err)
{
    const char *e;
    char tok[32];

    if (fs_io_parse_u64(t->s, &e, v) == 0 && e == t->s + t->n) {
        return 0;
    }
    fs_io_token(tok, sizeof tok, t->s, t->n);
    return fs_io_err(err, FS_EFORMAT, x->path, "line %llu: bad size '%s'",
                     (unsigned long long)x->rd.lineno, tok);
}

/* Banner, comments and the size line; caps checked here, before any allocation. */
static int mtx_header(struct mtx *x, const struct fs_io_caps *caps, int dense, struct fs_err *err)
{
    struct tok t[MTX_MAX_TOK];
    char *s = NULL;
    size_t n = 0;
    size_t k;
    size_t want;
    char where[48];
    int rc;

    rc = fs_io_rd_line(&x->rd, &s, &n, err);
    if (rc < 0) {
        return rc;
    }
    if (rc == 0) {
        return fs_io_err(err, FS_EFORMAT, x->path, "line 1: empty file");
    }
    rc = mtx_banner(x, s, n, err);
    if (rc != 0) {
        return rc;
    }
    rc = next_line(x, &s, &n, err);
    if (rc < 0) {
        return rc;
    }
    if (rc == 0) {
        return fs_io_err(err, FS_EFORMAT, x->path, "line %llu: no size line",
                         (unsigned long long)x->rd.lineno);
    }
    x->size_line = x->rd.lineno;
    want = x->coord ? 3 : 2;
    k = split(s, n, t);
    if (k != want) {
        return fs_io_err(
            err, FS_EFORMAT, x->path, "line %llu: expected %zu numbers (%s), found %zu",
            (unsigned long long)x->rd.lineno, want, x->coord ? "rows cols nnz" : "rows cols", k);
    }
    for (size_t i = 0; i < want; i++) {
        rc = parse_dim(x, &t[i], i == 0 ? &x->m : i == 1 ? &x->n : &x->nnz, err);
        if (rc != 0) {
            return rc;
        }
    }
    snprintf(where, sizeof where, "line %llu", (unsigned long long)x->rd.lineno);
    rc = fs_io_check_shape(x->path, where, x->m, x->n, dense, caps, err);
    if (rc != 0) {
        return rc;
    }
    if (x->m == 0 || x->n == 0) {
        return fs_io_err(err, FS_EFORMAT, x->path, "line %llu: empty matrix (%llu x %llu)",
                         (unsigned long long)x->rd.lineno, (unsigned long long)x->m,
                         (unsigned long long)x->n);
    }
    if (x->sym != MS_GEN && x->m != x->n) {
        return fs_io_err(
            err, FS_EFORMAT, x->path, "line %llu: a %s matrix must be square, got %llu x %llu",
            (unsigned long long)x->rd.lineno, x->sym == MS_SYM ? "symmetric" : "skew-symmetric",
            (unsigned long long)x->m, (unsigned long long)x->n);
    }
    if (!x->coord) {
        /* Values expected; m, n are within the caps so none of this overflows. */
        x->nnz = x->sym == MS_GEN   ? x->m * x->n
                 : x->sym == MS_SYM ? x->n * (x->n + 1) / 2
                                    : x->n * (x->n - 1) / 2;
        return 0;
    }
    if (x->nnz > caps->max_nnz || (x->sym != MS_GEN && x->nnz > caps->max_nnz / 2)) {
        return fs_io_err(err, FS_ERANGE, x->path,
                         "line %llu: %llu entries exceed the cap of %llu (max_nnz)",
                         (unsigned long long)x->rd.lineno, (unsigned long long)x->nnz,
                         (unsigned long long)caps->max_nnz);
    }
    return 0;
}

static int value_err(struct mtx *x, const struct tok *t, const char *why, struct fs_err *err)
{
    char tok[32];
    fs_io_token(tok, sizeof tok, t->s, t->n);
    return fs_io_err(err, FS_EFORMAT, x->path, "line %llu: %s '%s'",
                     (unsigned long long)x->rd.lineno, why, tok);
}

static int parse_value(struct mtx *x, const struct tok *t, double *v, struct fs_err *err)
{
    const char *e;
    int r = fs_io_parse_double(t->s, &e, v);

    if (e != t->s + t->n) {
        r = FS_IO_NUM_BAD;
    }
    if (r == FS_IO_NUM_NAN_INF) {
        return value_err(x, t, "NaN or Inf not allowed", err);
    }
    if (r == FS_IO_NUM_OVERFLOW) {
        return value_err(x, t, "number out of range", err);
    }
    if (r != FS_IO_NUM_OK) {
        return value_err(x, t, "not a number", err);
    }
    if (x->field == MF_INT && *v != floor(*v)) {
        return value_err(x, t, "not an integer", err);
    }
    return 0;
}

static int parse_index(struct mtx *x, const struct tok *t, const char *what, uint64_t lim,
                       uint64_t *v, struct fs_err *err)
{
    const char *e;
    char tok[32];

    if (fs_io_parse_u64(t->s, &e, v) != 0 || e != t->s + t->n) {
        fs_io_token(tok, sizeof tok, t->s, t->n);
        return fs_io_err(err, FS_EFORMAT, x->path, "line %llu: bad %s index '%s'",
                         (unsigned long long)x->rd.lineno, what, tok);
    }
    if (*v < 1 || *v > lim) {
        return fs_io_err(err, FS_EFORMAT, x->path, "line %llu: %s index %llu out of range 1..%llu",
                         (unsigned long long)x->rd.lineno, what, (unsigned long long)*v,
                         (unsigned long long)lim);
    }
    return 0;
}

/* Sink for entries: a dense matrix or coordinate arrays. The arrays grow
 * with what the file actually holds (up to `max`, the declared count), so a
 * tiny file claiming 2^31 entries allocates little. */
struct sink {
    fs_mat *d;
    size_t *ri;
    size_t *ci;
    double *v;
    size_t k;
    size_t cap;
    size_t max;
};

#define SINK_INIT ((size_t)1 << 12)

static int sink_grow(struct sink *o)
{
    size_t ncap = o->cap == 0 ? SINK_INIT : o->cap * 2;
    size_t *ri;
    size_t *ci;
    double *v;

    if (ncap > o->max) {
        ncap = o->max;
    }
    ri = realloc(o->ri, ncap * sizeof *ri);
    if (ri == NULL) {
        return FS_ENOMEM;
    }
    o->ri = ri;
    ci = realloc(o->ci, ncap * sizeof *ci);
    if (ci == NULL) {
        return FS_ENOMEM;
    }
    o->ci = ci;
    v = realloc(o->v, ncap * sizeof *v);
    if (v == NULL) {
        return FS_ENOMEM;
    }
    o->v = v;
    o->cap = ncap;
    return 0;
}

static int put(struct sink *o, size_t i, size_t j, double v)
{
    if (o->d != NULL) {
        o->d->data[i + j * o->d->ld] += v;
        return 0;
    }
    if (o->k == o->cap && sink_grow(o) != 0) {
        return FS_ENOMEM;
    }
    o->ri[o->k] = i;
    o->ci[o->k] = j;
    o->v[o->k] = v;
    o->k++;
    return 0;
}

static int put_sym(struct mtx *x, struct sink *o, size_t i, size_t j, double v, struct fs_err *err)
{
    int rc = put(o, i, j, v);
    if (rc == 0 && x->sym != MS_GEN && i != j) {
        rc = put(o, j, i, x->sym == MS_SKEW ? -v : v);
    }
    if (rc != 0) {
        return fs_io_err(err, rc, x->path, "line %llu: out of memory",
                         (unsigned long long)x->rd.lineno);
    }
    return 0;
}

static int read_coordinate(struct mtx *x, struct sink *o, struct fs_err *err)
{
    size_t want = x->field == MF_PATTERN ? 2 : 3;
    uint64_t count = 0;

    for (;;) {
        struct tok t[MTX_MAX_TOK];
        char *s = NULL;
        size_t n = 0;
        size_t k;
        uint64_t i;
        uint64_t j;
        double v = 1.0;
        int rc = next_line(x, &s, &n, err);

        if (rc < 0) {
            return rc;
        }
        if (rc == 0) {
            break;
        }
        if (count == x->nnz) {
            return fs_io_err(err, FS_EFORMAT, x->path,
                             "line %llu: more entries than the %llu declared on line %llu",
                             (unsigned long long)x->rd.lineno, (unsigned long long)x->nnz,
                             (unsigned long long)x->size_line);
        }
        k = split(s, n, t);
        if (k != want) {
            return fs_io_err(err, FS_EFORMAT, x->path, "line %llu: expected %zu fields, found %zu",
                             (unsigned long long)x->rd.lineno, want, k);
        }
        rc = parse_index(x, &t[0], "row", x->m, &i, err);
        if (rc == 0) {
            rc = parse_index(x, &t[1], "column", x->n, &j, err);
        }
        if (rc == 0 && want == 3) {
            rc = parse_value(x, &t[2], &v, err);
        }
        if (rc != 0) {
            return rc;
        }
        if ((x->sym == MS_SYM && i < j) || (x->sym == MS_SKEW && i <= j)) {
            return fs_io_err(err, FS_EFORMAT, x->path,
                             "line %llu: entry (%llu, %llu) %s the diagonal of a %s matrix",
                             (unsigned long long)x->rd.lineno, (unsigned long long)i,
                             (unsigned long long)j, x->sym == MS_SYM ? "above" : "on or above",
                             x->sym == MS_SYM ? "symmetric" : "skew-symmetric");
        }
        rc = put_sym(x, o, (size_t)(i - 1), (size_t)(j - 1), v, err);
        if (rc != 0) {
            return rc;
        }
        count++;
    }
    if (count != x->nnz) {
        return fs_io_err(err, FS_EFORMAT, x->path, "line %llu: expected %llu entries, found %llu",
                         (unsigned long long)x->rd.lineno, (unsigned long long)x->nnz,
                         (unsigned long long)count);
    }
    return 0;
}

static int read_array(struct mtx *x, fs_mat *d, struct fs_err *err)
{
    struct sink o = {d, NULL, NULL, NULL, 0, 0, 0};
    uint64_t count = 0;
    size_t i = x->sym == MS_SKEW ? 1 : 0;
    size_t j = 0;

    for (;;) {
        char *s = NULL;
        size_t n = 0;
        size_t p = 0;
        int rc = next_line(x, &s, &n, err);

        if (rc < 0) {
            return rc;
        }
        if (rc == 0) {
            break;
        }
        for (;;) {
            struct tok t;
            double v = 0;
            while (p < n && is_blank(s[p])) {
                p++;
            }
            if (p >= n) {
                break;
            }
            t.s = s + p;
            while (p < n && !is_blank(s[p])) {
                p++;
            }
            t.n = (size_t)(s + p - t.s);
            if (count == x->nnz) {
                return fs_io_err(err, FS_EFORMAT, x->path,
                                 "line %llu: more values than the %llu expected for %llu x %llu",
                                 (unsigned long long)x->rd.lineno, (unsigned long long)x->nnz,
                                 (unsigned long long)x->m, (unsigned long long)x->n);
            }
            rc = parse_value(x, &t, &v, err);
            if (rc != 0) {
                return rc;
            }
            rc = put_sym(x, &o, i, j, v, err);
            if (rc != 0) {
                return rc;
            }
            count++;
            if (++i == x->m) {
                j++;
                i = x->sym == MS_GEN ? 0 : x->sym == MS_SYM ? j : j + 1;
            }
        }
    }
    if (count != x->nnz) {
        return fs_io_err(err, FS_EFORMAT, x->path, "line %llu: expected %llu values, found %llu",
                         (unsigned long long)x->rd.lineno, (unsigned long long)x->nnz,
                         (unsigned long long)count);
    }
    return 0;
}

static int mtx_sparse(struct mtx *x, fs_csr **sparse, struct fs_err *err)
{
    struct sink o = {NULL, NULL, NULL, NULL, 0, 0, 0};
    int rc;

    if (x->n > UINT32_MAX) {
        return fs_io_err(err, FS_ERANGE, x->path,
                         "line %llu: %llu columns exceed the sparse limit of 2^32",
                         (unsigned long long)x->size_line, (unsigned long long)x->n);
    }
    o.max = (size_t)(x->sym == MS_GEN ? x->nnz : 2 * x->nnz); /* <= max_nnz */
    if (o.max == 0) {
        o.max = 1; /* valid (unused) arrays for fs_csr_from_coo */
    }
    if (sink_grow(&o) != 0) {
        rc = fs_io_err(err, FS_ENOMEM, x->path, "out of memory");
        goto out;
    }
    rc = read_coordinate(x, &o, err);
    if (rc != 0) {
        goto out;
    }
    rc = fs_csr_from_coo((size_t)x->m, (size_t)x->n, o.k, o.ri, o.ci, o.v, sparse, err);
    if (rc != 0) {
        fs_err_prefix(err, "%s: ", x->path);
        goto out;
    }
    for (size_t i = 0; i < (*sparse)->rows && rc == 0; i++) {
        for (size_t k = (*sparse)->rowptr[i]; k < (*sparse)->rowptr[i + 1]; k++) {
            if (!isfinite((*sparse)->vals[k])) {
                /* Duplicates that sum past the double range. */
                rc = fs_io_err(err, FS_EFORMAT, x->path,
                               "line %llu: entry (%zu, %lu) overflows when duplicates are summed",
                               (unsigned long long)x->rd.lineno, i + 1,
                               (unsigned long)(*sparse)->colidx[k] + 1);
                fs_csr_free(*sparse);
                *sparse = NULL;
                break;
            }
        }
    }
out:
    free(o.ri);
    free(o.ci);
    free(o.v);
    return rc;
}

int fs_io_mtx_load(const char *path, const struct fs_io_caps *caps, fs_mat **dense, fs_csr **sparse,
                   struct fs_err *err)
{
    struct mtx x;
    fs_mat *d = NULL;
    int rc;

    memset(&x, 0, sizeof x);
    x.path = path;
    if (dense != NULL) {
        *dense = NULL;
    }
    if (sparse != NULL) {
        *sparse = NULL;
    }
    rc = fs_io_rd_open(&x.rd, path, MTX_MAX_LINE, err);
    if (rc != 0) {
        return rc;
    }
    rc = mtx_header(&x, caps, dense != NULL, err);
    if (rc != 0) {
        goto out;
    }
    if (dense == NULL) {
        if (!x.coord) {
            rc = FS_ESTATE; /* the caller densifies and converts */
            goto out;
        }
        rc = mtx_sparse(&x, sparse, err);
        goto out;
    }
    d = fs_mat_new((size_t)x.m, (size_t)x.n);
    if (d == NULL) {
        rc = fs_io_err(err, FS_ENOMEM, path, "out of memory for a %llu x %llu matrix",
                       (unsigned long long)x.m, (unsigned long long)x.n);
        goto out;
    }
    if (x.coord) {
        struct sink o = {d, NULL, NULL, NULL, 0, 0, 0};
        rc = read_coordinate(&x, &o, err);
    } else {
        rc = read_array(&x, d, err);
    }
    if (rc == 0) {
        /* Duplicates that sum past the double range. */
        for (size_t k = 0; k < d->cols && rc == 0; k++) {
            for (size_t i = 0; i < d->rows; i++) {
                if (!isfinite(d->data[i + k * d->ld])) {
                    rc = fs_io_err(err, FS_EFORMAT, path,
                                   "line %llu: entry (%zu, %zu) overflows when duplicates are "
                                   "summed",
                                   (unsigned long long)x.rd.lineno, i + 1, k + 1);
                    break;
                }
            }
        }
    }
out:
    fs_io_rd_close(&x.rd);
    if (rc != 0) {
        fs_mat_free(d);
        return rc;
    }
    if (dense != NULL) {
        *dense = d;
    }
    return 0;
}

int fs_io_mtx_is_coordinate(const char *path)
{
    struct fs_io_rd rd;
    struct mtx x;
    char *s = NULL;
    size_t n = 0;
    int yes = 0;

    memset(&x, 0, sizeof x);
    x.path = path;
    if (fs_io_rd_open(&rd, path, MTX_MAX_LINE, NULL) != 0) {
        return 0;
    }
    if (fs_io_rd_line(&rd, &s, &n, NULL) == 1 && mtx_banner(&x, s, n, NULL) == 0) {
        yes = x.coord;
    }
    fs_io_rd_close(&rd);
    return yes;
}

/* ---- writer ---- */

int fs_mtx_write_csr(const char *path, const fs_csr *a, struct fs_err *err)
{
    struct fs_io_wr w;
    char line[96];
    int n;
    int rc;

    if (path == NULL || a == NULL || a->rowptr == NULL ||
        (a->nnz > 0 && (a->colidx == NULL || a->vals == NULL))) {
        return fs_err_set(err, FS_EINVAL, "fs_mtx_write_csr: bad argument");
    }
    rc = fs_io_wr_open(&w, path, err);
    if (rc != 0) {
        return rc;
    }
    n = snprintf(line, sizeof line,
                 "%%%%MatrixMarket matrix coordinate real general\n%zu %zu %zu\n", a->rows, a->cols,
                 a->nnz);
    rc = fs_io_wr_write(&w, line, (size_t)n, err);
    for (size_t i = 0; i < a->rows && rc == 0; i++) {
        for (size_t k = a->rowptr[i]; k < a->rowptr[i + 1] && rc == 0; k++) {
            n = snprintf(line, sizeof line, "%zu %lu %.17g\n", i + 1,
                         (unsigned long)a->colidx[k] + 1, a->vals[k]);
            rc = fs_io_wr_write(&w, line, (size_t)n, err);
        }
    }
    if (rc != 0) {
        fs_io_wr_abort(&w);
        return rc;
    }
    return fs_io_wr_commit(&w, err);
}
