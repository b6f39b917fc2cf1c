/* CSV and whitespace-separated text matrices, streamed in two passes: the
 * first counts rows (so the caps are checked and the matrix allocated once,
 * at its final size), the second parses straight into the column-major
 * matrix. Plain or gzip'ed input.
 *
 * Rules: the separator is ',' if the first non-blank, non-comment line has
 * one, else runs of blanks (spaces, tabs). That first line is a header when
 * one of its fields is non-empty text that is not a number; a header must
 * have as many fields as the data. Blank lines and lines starting with '#'
 * are skipped anywhere; "\r\n" endings and a UTF-8 BOM are accepted. Line
 * numbers in messages are physical, 1-based; field numbers are 1-based. */
#include "io_internal.h"

#include <stdlib.h>
#include <string.h>

#define CSV_LINE_MIN ((size_t)1 << 20)
#define CSV_LINE_MAX ((size_t)1 << 30)
/* Bytes allowed per field when deriving the line-length cap from max_cols. */
#define CSV_FIELD_BYTES 64

struct csv {
    const char *path;
    struct fs_io_rd rd;
    int ws; /* separated by blanks instead of commas */
};

static int is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* Drop a UTF-8 byte-order mark at the start of the file. */
static void strip_bom(const struct csv *c, char **s, size_t *n)
{
    if (c->rd.lineno == 1 && *n >= 3 && (unsigned char)(*s)[0] == 0xef &&
        (unsigned char)(*s)[1] == 0xbb && (unsigned char)(*s)[2] == 0xbf) {
        *s += 3;
        *n -= 3;
    }
}

/* 1 if the line carries no data: blank or a '#' comment. */
static int no_data(const char *s, size_t n)
{
    size_t k = 0;
    while (k < n && (is_blank(s[k]) || s[k] == '\r')) {
        k++;
    }
    return k == n || s[k] == '#';
}

/* Next field of a line at p: [*fa, *fb) trimmed. Quotes ("a,b", "a""b") are
 * honoured so that headers with quoted names split correctly.
 * @return pointer after the field's separator, or NULL after the last field. */
static const char *next_field(const struct csv *c, const char *p, const char *end, const char **fa,
                              const char **fb)
{
    const char *q;

    while (p < end && is_blank(*p)) {
        p++;
    }
    *fa = p;
    q = p;
    if (q < end && *q == '"') {
        q++;
        while (q < end) {
            if (*q == '"' && q + 1 < end && q[1] == '"') {
                q += 2;
            } else if (*q == '"') {
                q++;
                break;
            } else {
                q++;
            }
        }
    }
    if (c->ws) {
        while (q < end && !is_blank(*q)) {
            q++;
        }
        *fb = q;
        while (q < end && is_blank(*q)) {
            q++;
        }
        return q < end ? q : NULL;
    }
    while (q < end && *q != ',') {
        q++;
    }
    *fb = q;
    while (*fb > *fa && is_blank((*fb)[-1])) {
        (*fb)--;
    }
    return q < end ? q + 1 : NULL;
}

static size_t count_fields(const struct csv *c, const char *s, size_t n)
{
    const char *p = s;
    const char *end = s + n;
    size_t k = 0;

    if (c->ws) {
        while (p < end && is_blank(*p)) {
            p++;
        }
        if (p == end) {
            return 0;
        }
    }
    while (p != NULL) {
        const char *fa;
        const char *fb;
        p = next_field(c, p, end, &fa, &fb);
        k++;
    }
    return k;
}

/* 1 if some field is non-empty and not a number (NaN/Inf count as numbers). */
static int has_text_field(const struct csv *c, const char *s, size_t n)
{
    const char *p = s;
    const char *end = s + n;

    while (p != NULL) {
        const char *fa;
        const char *fb;
        const char *q;
        double v;
        int r;
        p = next_field(c, p, end, &fa, &fb);
        if (fa == fb) {
            continue;
        }
        r = fs_io_parse_double(fa, &q, &v);
        if (r == FS_IO_NUM_BAD || q != fb) {
            return 1;
        }
    }
    return 0;
}

static int ragged(const struct csv *c, size_t expect, size_t found, struct fs_err *err)
{
    return fs_io_err(err, FS_EFORMAT, c->path, "line %llu: expected %zu fields, found %zu",
                     (unsigned long long)c->rd.lineno, expect, found);
}

/* Explain why field f (1-based) starting at fs does not parse. */
static int field_err(const struct csv *c, const char *s, size_t n, size_t expect, size_t f,
                     const char *fs, int r, struct fs_err *err)
{
    const char *end = s + n;
    const char *fa;
    const char *fb;
    char tok[32];
    size_t found = count_fields(c, s, n);

    if (found != expect) {
        return ragged(c, expect, found, err);
    }
    (void)next_field(c, fs, end, &fa, &fb);
    fs_io_token(tok, sizeof tok, fa, (size_t)(fb - fa));
    if (fa == fb) {
        return fs_io_err(err, FS_EFORMAT, c->path, "line %llu, field %zu: empty field",
                         (unsigned long long)c->rd.lineno, f);
    }
    if (r == FS_IO_NUM_NAN_INF) {
        return fs_io_err(err, FS_EFORMAT, c->path,
                         "line %llu, field %zu: NaN or Inf not allowed ('%s')",
                         (unsigned long long)c->rd.lineno, f, tok);
    }
    if (r == FS_IO_NUM_OVERFLOW) {
        return fs_io_err(err, FS_EFORMAT, c->path, "line %llu, field %zu: number out of range '%s'",
                         (unsigned long long)c->rd.lineno, f, tok);
    }
    return fs_io_err(err, FS_EFORMAT, c->path, "line %llu, field %zu: not a number '%s'",
                     (unsigned long long)c->rd.lineno, f, tok);
}

/* Parse one data line into row i of m. The hot loop of the module. */
static int parse_row(const struct csv *c, const char *s, size_t n, fs_mat *m, size_t i,
                     struct fs_err *err)
{
    const char *p = s;
    const char *end = s + n;
    double *cell = m->data + i;
    size_t cols = m->cols;

    for (size_t f = 0; f < cols; f++) {
        const char *fs;
        const char *q;
        const char *t;
        double v = 0;
        int r;
        int term;

        while (is_blank(*p)) {
            p++;
        }
        fs = p;
        r = fs_io_parse_double(p, &q, &v);
        t = q;
        while (is_blank(*t)) {
            t++;
        }
        term = c->ws ? (t > q || t == end) : (t == end || *t == ',');
        if (r != FS_IO_NUM_OK || !term || (c->ws && q == fs)) {
            return field_err(c, s, n, cols, f + 1, fs, term ? r : FS_IO_NUM_BAD, err);
        }
        cell[f * m->ld] = v;
        p = t;
        if (f + 1 < cols) {
            if (p == end) {
                return ragged(c, cols, f + 1, err);
            }
            if (!c->ws) {
                p++; /* the ',' */
            }
        }
    }
    if (p != end) {
        return ragged(c, cols, count_fields(c, s, n), err);
    }
    return 0;
}

/* Next line that carries data; 0 at end of file. */
static int next_data_line(struct csv *c, char **s, size_t *n, struct fs_err *err)
{
    for (;;) {
        int rc = fs_io_rd_line(&c->rd, s, n, err);
        if (rc <= 0) {
            return rc;
        }
        strip_bom(c, s, n);
        if (!no_data(*s, *n)) {
            return 1;
        }
    }
}

/* Pass 1: separator, header, columns, rows. */
static int csv_scan(struct csv *c, const struct fs_io_caps *caps, size_t *rows_out,
                    size_t *cols_out, uint64_t *first_out, struct fs_err *err)
{
    char *s = NULL;
    size_t n = 0;
    uint64_t header_line = 0;
    size_t header_fields = 0;
    size_t cols;
    size_t rows;
    char where[48];
    int rc;

    rc = next_data_line(c, &s, &n, err);
    if (rc < 0) {
        return rc;
    }
    if (rc == 0 && c->rd.lineno == 0) {
        return fs_io_err(err, FS_EFORMAT, c->path, "byte offset 0: empty file");
    }
    if (rc == 0) {
        return fs_io_err(err, FS_EFORMAT, c->path, "line %llu: no data rows",
                         (unsigned long long)c->rd.lineno);
    }
    c->ws = memchr(s, ',', n) == NULL;
    if (has_text_field(c, s, n)) {
        header_line = c->rd.lineno;
        header_fields = count_fields(c, s, n);
        rc = next_data_line(c, &s, &n, err);
        if (rc < 0) {
            return rc;
        }
        if (rc == 0) {
            return fs_io_err(err, FS_EFORMAT, c->path, "line %llu: header but no data rows",
                             (unsigned long long)header_line);
        }
    }
    *first_out = c->rd.lineno;
    cols = count_fields(c, s, n);
    snprintf(where, sizeof where, "line %llu", (unsigned long long)c->rd.lineno);
    rc = fs_io_check_shape(c->path, where, 1, cols, 1, caps, err);
    if (rc != 0) {
        return rc;
    }
    if (header_line != 0 && header_fields != cols) {
        return fs_io_err(err, FS_EFORMAT, c->path,
                         "line %llu: expected %zu fields (as in the header on line %llu), found "
                         "%zu",
                         (unsigned long long)c->rd.lineno, header_fields,
                         (unsigned long long)header_line, cols);
    }
    rows = 1;
    for (;;) {
        rc = next_data_line(c, &s, &n, err);
        if (rc < 0) {
            return rc;
        }
        if (rc == 0) {
            break;
        }
        if (rows == caps->max_rows) {
            return fs_io_err(err, FS_ERANGE, c->path,
                             "line %llu: row count exceeds the cap of %zu (max_rows)",
                             (unsigned long long)c->rd.lineno, caps->max_rows);
        }
        rows++;
    }
    snprintf(where, sizeof where, "line %llu", (unsigned long long)*first_out);
    rc = fs_io_check_shape(c->path, where, rows, cols, 1, caps, err);
    if (rc != 0) {
        return rc;
    }
    *rows_out = rows;
    *cols_out = cols;
    return 0;
}

/* Pass 2: parse every data line into m. */
static int csv_fill(struct csv *c, uint64_t first, fs_mat *m, struct fs_err *err)
{
    char *s = NULL;
    size_t n = 0;
    size_t i = 0;
    int rc;

    rc = fs_io_rd_rewind(&c->rd, err);
    if (rc != 0) {
        return rc;
    }
    while (c->rd.lineno + 1 < first) {
        rc = fs_io_rd_line(&c->rd, &s, &n, err);
        if (rc <= 0) {
            goto changed;
        }
    }
    for (;;) {
        rc = next_data_line(c, &s, &n, err);
        if (rc < 0) {
            return rc;
        }
        if (rc == 0) {
            break;
        }
        if (i == m->rows) {
            goto changed;
        }
        rc = parse_row(c, s, n, m, i, err);
        if (rc != 0) {
            return rc;
        }
        i++;
    }
    if (i != m->rows) {
        goto changed;
    }
    return 0;
changed:
    if (rc < 0) {
        return rc;
    }
    return fs_io_err(err, FS_EIO, c->path, "line %llu: file changed while being read",
                     (unsigned long long)c->rd.lineno);
}

int fs_io_csv_load_dense(const char *path, const struct fs_io_caps *caps, fs_mat **out,
                         struct fs_err *err)
{
    struct csv c;
    fs_mat *m = NULL;
    size_t rows = 0;
    size_t cols = 0;
    uint64_t first = 0;
    size_t max_line = CSV_LINE_MAX;
    int rc;

    *out = NULL;
    memset(&c, 0, sizeof c);
    c.path = path;
    if (caps->max_cols < (CSV_LINE_MAX - CSV_LINE_MIN) / CSV_FIELD_BYTES) {
        max_line = CSV_LINE_MIN + caps->max_cols * CSV_FIELD_BYTES;
    }
    rc = fs_io_rd_open(&c.rd, path, max_line, err);
    if (rc != 0) {
        return rc;
    }
    rc = csv_scan(&c, caps, &rows, &cols, &first, err);
    if (rc != 0) {
        goto out;
    }
    m = fs_mat_new_uninit(rows, cols);
    if (m == NULL) {
        rc = fs_io_err(err, FS_ENOMEM, path, "out of memory for a %zu x %zu matrix", rows, cols);
        goto out;
    }
    rc = csv_fill(&c, first, m, err);
out:
    fs_io_rd_close(&c.rd);
    if (rc != 0) {
        fs_mat_free(m);
        return rc;
    }
    *out = m;
    return 0;
}
