/* .npy files: header parser/formatter (also used on HTTP bodies), dense
 * and u64 readers, atomic writers. Format reference: numpy's
 * doc/neps/nep-0001-npy-format.rst (versions 1.0, 2.0 and 3.0). */
#include "io_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define NPY_MAGIC     "\x93NUMPY"
#define NPY_MAGIC_LEN 6
/* numpy itself refuses headers over 10000 bytes unless told otherwise. */
#define NPY_MAX_HEADER ((size_t)1 << 20)
#define NPY_CHUNK      ((size_t)1 << 20)
#define NPY_DESCR_MAX  16

struct npy_info {
    struct fs_npy_header h;
    char kind;     /* 'f', 'i' or 'u' */
    unsigned size; /* bytes per element */
    int big;       /* data is big-endian */
    char descr[NPY_DESCR_MAX];
    size_t descr_off; /* byte offset of the descr string, for messages */
    size_t need;      /* with FS_ESTATE: header bytes needed */
};

/* Dict parser state. Offsets in messages are from the start of the file. */
struct ps {
    const uint8_t *b;
    size_t p;
    size_t end;
    const char *path; /* NULL for buffers */
    struct fs_err *err;
};

static int host_is_le(void)
{
    const uint16_t x = 1;
    uint8_t b;
    memcpy(&b, &x, 1);
    return b == 1;
}

static int ps_err(struct ps *s, int code, size_t off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int ps_err(struct ps *s, int code, size_t off, const char *fmt, ...)
{
    char msg[FS_ERR_MSG_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return fs_io_err(s->err, code, s->path, "byte offset %zu: %s", off, msg);
}

static void ps_ws(struct ps *s)
{
    while (s->p < s->end &&
           (s->b[s->p] == ' ' || s->b[s->p] == '\t' || s->b[s->p] == '\n' || s->b[s->p] == '\r')) {
        s->p++;
    }
}

static int ps_expect(struct ps *s, char c, const char *what)
{
    ps_ws(s);
    if (s->p >= s->end) {
        return ps_err(s, FS_EFORMAT, s->p, "header ends early, expected %s", what);
    }
    if (s->b[s->p] != (uint8_t)c) {
        return ps_err(s, FS_EFORMAT, s->p, "expected %s in the header dict", what);
    }
    s->p++;
    return 0;
}

/* A Python string literal without escapes ('x' or "x"). */
static int ps_string(struct ps *s, char *out, size_t cap, size_t *at)
{
    uint8_t q;
    size_t n = 0;

    ps_ws(s);
    *at = s->p;
    if (s->p >= s->end || (s->b[s->p] != '\'' && s->b[s->p] != '"')) {
        return ps_err(s, FS_EFORMAT, s->p, "expected a quoted string in the header dict");
    }
    q = s->b[s->p++];
    while (s->p < s->end && s->b[s->p] != q) {
        uint8_t c = s->b[s->p];
        if (c == '\\' || c < 0x20 || c >= 0x7f) {
            return ps_err(s, FS_EFORMAT, s->p, "unsupported character in a header string");
        }
        if (n + 1 >= cap) {
            return ps_err(s, FS_EFORMAT, *at, "header string too long");
        }
        out[n++] = (char)c;
        s->p++;
    }
    if (s->p >= s->end) {
        return ps_err(s, FS_EFORMAT, *at, "unterminated string in the header dict");
    }
    s->p++;
    out[n] = '\0';
    return 0;
}

static int is_ident(uint8_t c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

static int ps_bool(struct ps *s, int *v)
{
    static const char *const words[2] = {"False", "True"};

    ps_ws(s);
    for (int k = 0; k < 2; k++) {
        size_t n = strlen(words[k]);
        if (s->end - s->p >= n && memcmp(s->b + s->p, words[k], n) == 0 &&
            (s->p + n == s->end || !is_ident(s->b[s->p + n]))) {
            s->p += n;
            *v = k;
            return 0;
        }
    }
    return ps_err(s, FS_EFORMAT, s->p, "fortran_order must be True or False");
}

static int ps_uint(struct ps *s, uint64_t *v)
{
    size_t at = s->p;
    uint64_t x = 0;

    if (s->p >= s->end || s->b[s->p] < '0' || s->b[s->p] > '9') {
        return ps_err(s, FS_EFORMAT, at, "expected a non-negative integer in shape");
    }
    while (s->p < s->end && s->b[s->p] >= '0' && s->b[s->p] <= '9') {
        unsigned d = (unsigned)(s->b[s->p] - '0');
        if (x > (UINT64_MAX - d) / 10) {
            return ps_err(s, FS_ERANGE, at, "dimension too large");
        }
        x = x * 10 + d;
        s->p++;
    }
    if (s->p < s->end && (s->b[s->p] == 'L' || s->b[s->p] == 'l')) {
        s->p++; /* Python 2 long literal, as old numpy wrote */
    }
    *v = x;
    return 0;
}

/* A tuple of 1 or 2 integers: (n,) or (m, n) with an optional trailing comma. */
static int ps_shape(struct ps *s, uint64_t dims[2], int *ndim)
{
    size_t at;
    int n = 0;
    int rc;

    ps_ws(s);
    at = s->p;
    rc = ps_expect(s, '(', "'(' starting the shape tuple");
    if (rc != 0) {
        return rc;
    }
    for (;;) {
        int comma = 0;
        ps_ws(s);
        if (s->p < s->end && s->b[s->p] == ')') {
            s->p++;
            break;
        }
        if (n == 2) {
            return ps_err(s, FS_EFORMAT, at, "shape has more than 2 dimensions (unsupported)");
        }
        rc = ps_uint(s, &dims[n]);
        if (rc != 0) {
            return rc;
        }
        n++;
        ps_ws(s);
        if (s->p < s->end && s->b[s->p] == ',') {
            s->p++;
            comma = 1;
        }
        ps_ws(s);
        if (s->p < s->end && s->b[s->p] == ')') {
            if (n == 1 && !comma) {
                return ps_err(s, FS_EFORMAT, at, "shape (n) is not a tuple, expected (n,)");
            }
            s->p++;
            break;
        }
        if (!comma) {
            return ps_err(s, FS_EFORMAT, s->p, "expected ',' or ')' in the shape tuple");
        }
    }
    if (n == 0) {
        return ps_err(s, FS_EFORMAT, at, "0-d arrays (shape ()) are not supported");
    }
    *ndim = n;
    return 0;
}

/* "<f8" and friends. Extended accepts every int/float kind we can convert. */
static int parse_descr(struct ps *s, struct npy_info *in, int extended)
{
    const char *d = in->descr;
    char order = d[0];
    char kind = order != '\0' ? d[1] : '\0';
    unsigned size = 0;
    int ok;

    if ((order == '<' || order == '>' || order == '|' || order == '=') && kind != '\0' &&
        d[2] >= '1' && d[2] <= '8' && d[3] == '\0') {
        size = (unsigned)(d[2] - '0');
    }
    ok = size != 0 && (kind == 'f' || kind == 'i' || kind == 'u');
    if (ok && kind == 'f') {
        ok = size == 4 || size == 8;
    } else if (ok) {
        ok = size == 1 || size == 2 || size == 4 || size == 8;
    }
    in->big = order == '>' || ((order == '=' || order == '|') && !host_is_le());
    if (ok && !extended) {
        ok = (kind == 'f' || kind == 'u') && size == 8 && !in->big;
    }
    if (!ok) {
        char tok[NPY_DESCR_MAX + 4];
        fs_io_token(tok, sizeof tok, d, strlen(d));
        return ps_err(s, FS_EFORMAT, in->descr_off, "unsupported dtype '%s'%s", tok,
                      extended ? "" : " (expected '<f8' or '<u8')");
    }
    in->kind = kind;
    in->size = size;
    in->h.dtype = kind == 'u' && size == 8 ? FS_NPY_U8 : FS_NPY_F8;
    return 0;
}

enum { KEY_DESCR = 1, KEY_FORTRAN = 2, KEY_SHAPE = 4 };

static int ps_dict(struct ps *s, const struct fs_io_caps *caps, struct npy_info *in, int extended)
{
    unsigned seen = 0;
    uint64_t dims[2] = {0, 0};
    int ndim = 0;
    size_t shape_at = 0;
    int rc;

    rc = ps_expect(s, '{', "'{' starting the header dict");
    if (rc != 0) {
        return rc;
    }
    for (;;) {
        char key[32];
        size_t at;
        unsigned bit;

        ps_ws(s);
        if (s->p < s->end && s->b[s->p] == '}') {
            s->p++;
            break;
        }
        rc = ps_string(s, key, sizeof key, &at);
        if (rc != 0) {
            return rc;
        }
        if (strcmp(key, "descr") == 0) {
            bit = KEY_DESCR;
        } else if (strcmp(key, "fortran_order") == 0) {
            bit = KEY_FORTRAN;
        } else if (strcmp(key, "shape") == 0) {
            bit = KEY_SHAPE;
        } else {
            return ps_err(s, FS_EFORMAT, at, "unknown key '%s' in the header dict", key);
        }
        if (seen & bit) {
            return ps_err(s, FS_EFORMAT, at, "duplicate key '%s' in the header dict", key);
        }
        seen |= bit;
        rc = ps_expect(s, ':', "':' after a key");
        if (rc != 0) {
            return rc;
        }
        if (bit == KEY_DESCR) {
            rc = ps_string(s, in->descr, sizeof in->descr, &in->descr_off);
        } else if (bit == KEY_FORTRAN) {
            rc = ps_bool(s, &in->h.fortran_order);
        } else {
            ps_ws(s);
            shape_at = s->p;
            rc = ps_shape(s, dims, &ndim);
        }
        if (rc != 0) {
            return rc;
        }
        ps_ws(s);
        if (s->p < s->end && s->b[s->p] == ',') {
            s->p++;
            continue;
        }
        if (s->p < s->end && s->b[s->p] == '}') {
            s->p++;
            break;
        }
        return ps_err(s, FS_EFORMAT, s->p, "expected ',' or '}' in the header dict");
    }
    ps_ws(s);
    if (s->p != s->end) {
        return ps_err(s, FS_EFORMAT, s->p, "unexpected bytes after the header dict");
    }
    if (seen != (KEY_DESCR | KEY_FORTRAN | KEY_SHAPE)) {
        return ps_err(s, FS_EFORMAT, s->p, "header dict lacks '%s'",
                      !(seen & KEY_DESCR)     ? "descr"
                      : !(seen & KEY_FORTRAN) ? "fortran_order"
                                              : "shape");
    }
    rc = parse_descr(s, in, extended);
    if (rc != 0) {
        return rc;
    }
    if (ndim == 1) {
        if (dims[0] > caps->max_elems) {
            return ps_err(s, FS_ERANGE, shape_at,
                          "%llu elements exceed the cap of %llu (max_elems)",
                          (unsigned long long)dims[0], (unsigned long long)caps->max_elems);
        }
        dims[1] = 1;
    } else {
        char where[48];
        snprintf(where, sizeof where, "byte offset %zu", shape_at);
        rc = fs_io_check_shape(s->path, where, dims[0], dims[1], 1, caps, s->err);
        if (rc != 0) {
            return rc;
        }
    }
    if (dims[0] > SIZE_MAX || dims[1] > SIZE_MAX ||
        (dims[1] != 0 && dims[0] > (UINT64_MAX / 8) / dims[1])) {
        return ps_err(s, FS_ERANGE, shape_at, "shape too large");
    }
    in->h.ndim = ndim;
    in->h.shape[0] = (size_t)dims[0];
    in->h.shape[1] = (size_t)dims[1];
    return 0;
}

static int npy_parse(const uint8_t *buf, size_t len, const struct fs_io_caps *caps_in, int extended,
                     const char *path, struct npy_info *in, struct fs_err *err)
{
    struct fs_io_caps caps = fs_io_caps_resolve(caps_in);
    struct ps s;
    size_t m = len < NPY_MAGIC_LEN ? len : NPY_MAGIC_LEN;
    unsigned major;
    unsigned minor;
    size_t lsz;
    uint64_t hlen = 0;

    memset(in, 0, sizeof *in);
    s.b = buf;
    s.p = 0;
    s.end = len;
    s.path = path;
    s.err = err;
    if (buf == NULL && len > 0) {
        return fs_err_set(err, FS_EINVAL, "npy header: NULL buffer");
    }
    for (size_t i = 0; i < m; i++) {
        if (buf[i] != (uint8_t)NPY_MAGIC[i]) {
            return ps_err(&s, FS_EFORMAT, i, "bad magic (not a .npy file)");
        }
    }
    in->need = 8;
    if (len < 8) {
        return ps_err(&s, FS_ESTATE, len, "need more bytes for the header");
    }
    major = buf[6];
    minor = buf[7];
    if ((major != 1 && major != 2 && major != 3) || minor != 0) {
        return ps_err(&s, FS_EFORMAT, 6, "unsupported .npy version %u.%u", major, minor);
    }
    lsz = major == 1 ? 2 : 4;
    in->need = 8 + lsz;
    if (len < 8 + lsz) {
        return ps_err(&s, FS_ESTATE, len, "need more bytes for the header");
    }
    for (size_t i = lsz; i > 0; i--) {
        hlen = (hlen << 8) | buf[8 + i - 1];
    }
    if (hlen > NPY_MAX_HEADER) {
        return ps_err(&s, FS_EFORMAT, 8, "header length %llu exceeds the limit of %zu",
                      (unsigned long long)hlen, NPY_MAX_HEADER);
    }
    in->need = 8 + lsz + (size_t)hlen;
    in->h.header_len = in->need;
    if (len < in->need) {
        return ps_err(&s, FS_ESTATE, len, "need %zu header bytes", in->need);
    }
    s.p = 8 + lsz;
    s.end = in->need;
    return ps_dict(&s, &caps, in, extended);
}

int fs_npy_parse_header(const uint8_t *buf, size_t len, const struct fs_io_caps *caps,
                        struct fs_npy_header *h, struct fs_err *err)
{
    struct npy_info in;
    int rc;

    if (h == NULL) {
        return fs_err_set(err, FS_EINVAL, "npy header: NULL output");
    }
    rc = npy_parse(buf, len, caps, 0, NULL, &in, err);
    if (rc == 0) {
        *h = in.h;
    }
    return rc;
}

int fs_npy_format_header(const struct fs_npy_header *h, uint8_t *buf, size_t cap, size_t *out_len,
                         struct fs_err *err)
{
    char dict[160];
    int n;
    size_t total;
    size_t hl;

    if (h == NULL || (h->dtype != FS_NPY_F8 && h->dtype != FS_NPY_U8) ||
        (h->ndim != 1 && h->ndim != 2)) {
        return fs_err_set(err, FS_EINVAL, "npy header: bad dtype or ndim");
    }
    if (h->ndim == 1) {
        n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': %s, 'shape': (%zu,), }",
                     h->dtype == FS_NPY_F8 ? "<f8" : "<u8", h->fortran_order ? "True" : "False",
                     h->shape[0]);
    } else {
        n = snprintf(dict, sizeof dict,
                     "{'descr': '%s', 'fortran_order': %s, 'shape': (%zu, %zu), }",
                     h->dtype == FS_NPY_F8 ? "<f8" : "<u8", h->fortran_order ? "True" : "False",
                     h->shape[0], h->shape[1]);
    }
    if (n < 0 || (size_t)n >= sizeof dict) {
        return fs_err_set(err, FS_EINTERNAL, "npy header: formatting failed");
    }
    /* magic(6) version(2) len(2) dict padding '\n', total a multiple of 64 */
    total = (10 + (size_t)n + 1 + 63) / 64 * 64;
    if (out_len != NULL) {
        *out_len = total;
    }
    if (buf == NULL || cap < total) {
        return fs_err_set(err, FS_ERANGE, "npy header: buffer of %zu bytes, need %zu", cap, total);
    }
    hl = total - 10;
    memcpy(buf, NPY_MAGIC, NPY_MAGIC_LEN);
    buf[6] = 1;
    buf[7] = 0;
    buf[8] = (uint8_t)(hl & 0xff);
    buf[9] = (uint8_t)(hl >> 8);
    memcpy(buf + 10, dict, (size_t)n);
    memset(buf + 10 + n, ' ', total - 10 - (size_t)n - 1);
    buf[total - 1] = '\n';
    return 0;
}

/* ---- reading files ---- */

/* Read and parse the header of an open file. */
static int npy_read_header(struct fs_io_rd *rd, const char *path, const struct fs_io_caps *caps,
                           struct npy_info *in, struct fs_err *err)
{
    uint8_t *hb = NULL;
    size_t have = 0;
    size_t want = 64;
    int rc;

    for (;;) {
        size_t got = 0;
        uint8_t *nb = realloc(hb, want);
        if (nb == NULL) {
            rc = fs_io_err(err, FS_ENOMEM, path, "out of memory");
            goto out;
        }
        hb = nb;
        rc = fs_io_rd_read(rd, hb + have, want - have, &got, err);
        if (rc != 0) {
            goto out;
        }
        have += got;
        rc = npy_parse(hb, have, caps, 1, path, in, err);
        if (rc == 0) {
            fs_err_clear(err); /* the "need more bytes" of an earlier round */
        }
        if (rc != FS_ESTATE) {
            goto out;
        }
        if (have < want) {
            rc = fs_io_err(err, FS_EFORMAT, path,
                           "byte offset %zu: truncated header: expected %zu bytes, found %zu", have,
                           in->need, have);
            goto out;
        }
        want = in->need;
    }
out:
    free(hb);
    return rc;
}

static int npy_truncated(const char *path, uint64_t at, uint64_t expect, struct fs_err *err)
{
    return fs_io_err(err, FS_EFORMAT, path,
                     "byte offset %llu: truncated data: expected %llu bytes, found %llu",
                     (unsigned long long)at, (unsigned long long)expect, (unsigned long long)at);
}

static int npy_trailing(const char *path, uint64_t expect, struct fs_err *err)
{
    return fs_io_err(err, FS_EFORMAT, path,
                     "byte offset %llu: unexpected data after the array (expected %llu bytes in "
                     "total)",
                     (unsigned long long)expect, (unsigned long long)expect);
}

/* After the data: the file must end. */
static int npy_check_end(struct fs_io_rd *rd, const char *path, uint64_t expect, struct fs_err *err)
{
    uint8_t b;
    size_t got = 0;
    int rc = fs_io_rd_read(rd, &b, 1, &got, err);

    if (rc != 0) {
        return rc;
    }
    return got != 0 ? npy_trailing(path, expect, err) : 0;
}

/* A plain file must be exactly total bytes long: 1 when its size is known
 * (*rc is 0 or the error), 0 for a stream (gzip) whose end is found later. */
static int npy_size_known(struct fs_io_rd *rd, const char *path, uint64_t total, int *rc,
                          struct fs_err *err)
{
    uint64_t size = 0;

    if (!fs_io_rd_known_size(rd, &size)) {
        return 0;
    }
    *rc = size < total   ? npy_truncated(path, size, total, err)
          : size > total ? npy_trailing(path, total, err)
                         : 0;
    return 1;
}

static uint64_t load_uint(const uint8_t *p, unsigned size, int big)
{
    uint64_t x = 0;
    if (big) {
        for (unsigned k = 0; k < size; k++) {
            x = (x << 8) | p[k];
        }
    } else {
        for (unsigned k = size; k > 0; k--) {
            x = (x << 8) | p[k - 1];
        }
    }
    return x;
}

#define EXACT_INT_MAX ((uint64_t)1 << 53)

/* Element to double. 0 ok, 1 not finite, 2 integer not exactly representable. */
static int elem_to_double(const uint8_t *p, const struct npy_info *in, double *v)
{
    uint64_t x = load_uint(p, in->size, in->big);

    if (in->kind == 'f') {
        if (in->size == 8) {
            memcpy(v, &x, 8);
        } else {
            uint32_t x32 = (uint32_t)x;
            float f;
            memcpy(&f, &x32, 4);
            *v = (double)f;
        }
        return isfinite(*v) ? 0 : 1;
    }
    if (in->kind == 'u') {
        if (x > EXACT_INT_MAX) {
            return 2;
        }
        *v = (double)x;
        return 0;
    }
    if (in->size < 8 && (x >> (in->size * 8 - 1)) != 0) {
        x |= ~(uint64_t)0 << (in->size * 8); /* sign-extend */
    }
    {
        int64_t sx;
        memcpy(&sx, &x, 8);
        if (sx > (int64_t)EXACT_INT_MAX || sx < -(int64_t)EXACT_INT_MAX) {
            return 2;
        }
        *v = (double)sx;
    }
    return 0;
}

static int npy_elem_err(const char *path, int why, uint64_t off, size_t i, size_t j,
                        struct fs_err *err)
{
    return fs_io_err(
        err, FS_EFORMAT, path, "byte offset %llu: element [%zu, %zu]: %s", (unsigned long long)off,
        i, j, why == 1 ? "NaN or Inf not allowed" : "integer too large to be exact as a double");
}

/* After a straight copy of <f8 data into m: reject NaN/Inf. */
static int npy_check_finite(const char *path, const struct npy_info *in, const fs_mat *m,
                            struct fs_err *err)
{
    size_t n = m->rows * m->cols;

    for (size_t k = 0; k < n; k++) {
        if (!isfinite(m->data[k])) {
            return npy_elem_err(path, 1, in->h.header_len + (uint64_t)k * 8, k % m->rows,
                                k / m->rows, err);
        }
    }
    return 0;
}

/* Rows transposed per block: a block's columns are short contiguous runs in
 * the destination, instead of one cache line and TLB entry per element. */
#define NPY_BLOCK 64

/* Elements [e0, e0 + k) in Fortran order (ld == rows: linear positions). */
static int npy_convert_cols(const char *path, const uint8_t *raw, size_t e0, size_t k,
                            const struct npy_info *in, fs_mat *m, struct fs_err *err)
{
    for (size_t e = 0; e < k; e++) {
        double v = 0;
        int why = elem_to_double(raw + e * in->size, in, &v);
        if (why != 0) {
            size_t idx = e0 + e;
            return npy_elem_err(path, why, in->h.header_len + (uint64_t)idx * in->size,
                                idx % m->rows, idx / m->rows, err);
        }
        m->data[e0 + e] = v;
    }
    return 0;
}

/* Rows [i0, i0 + k) in C order, transposed block by block. */
static int npy_convert_rows(const char *path, const uint8_t *raw, size_t i0, size_t k,
                            const struct npy_info *in, fs_mat *m, struct fs_err *err)
{
    size_t rowb = m->cols * in->size;

    for (size_t b0 = 0; b0 < k; b0 += NPY_BLOCK) {
        size_t bn = k - b0 < NPY_BLOCK ? k - b0 : NPY_BLOCK;
        for (size_t j = 0; j < m->cols; j++) {
            const uint8_t *src = raw + b0 * rowb + j * in->size;
            double *dst = m->data + i0 + b0 + j * m->ld;
            for (size_t r = 0; r < bn; r++) {
                int why = elem_to_double(src + r * rowb, in, &dst[r]);
                if (why != 0) {
                    size_t i = i0 + b0 + r;
                    return npy_elem_err(
                        path, why, in->h.header_len + (uint64_t)i * rowb + j * in->size, i, j, err);
                }
            }
        }
    }
    return 0;
}

/* 1 if the file bytes are the column-major matrix itself. */
static int npy_is_direct(const struct npy_info *in, const fs_mat *m)
{
    return in->kind == 'f' && in->size == 8 && !in->big && host_is_le() &&
           (in->h.fortran_order || m->cols == 1 || m->rows == 1) && m->ld == m->rows;
}

/* Plain file (size already checked): read straight or in chunks (whole
 * rows in C order). */
static int npy_data_plain(struct fs_io_rd *rd, const char *path, const struct npy_info *in,
                          fs_mat *m, struct fs_err *err)
{
    size_t n = m->rows * m->cols;
    uint64_t total = in->h.header_len + (uint64_t)n * in->size;
    /* a chunk is `per` units: elements (Fortran) or rows (C) */
    size_t unit = in->h.fortran_order ? in->size : m->cols * in->size;
    size_t units = in->h.fortran_order ? n : m->rows;
    size_t per = unit >= NPY_CHUNK ? 1 : NPY_CHUNK / unit;
    uint8_t *buf = NULL;
    size_t got = 0;
    size_t done = 0;
    int rc = 0;

    if (npy_is_direct(in, m)) {
        rc = fs_io_rd_read(rd, m->data, n * 8, &got, err);
        if (rc == 0 && got < n * 8) { /* shrank since the size check */
            rc = npy_truncated(path, in->h.header_len + got, total, err);
        }
        if (rc == 0) {
            rc = npy_check_finite(path, in, m, err);
        }
        goto out;
    }
    if (per > units) { /* a small array: a buffer its size, not a whole chunk */
        per = units > 0 ? units : 1;
    }
    buf = malloc(per * unit);
    if (buf == NULL) {
        return fs_io_err(err, FS_ENOMEM, path, "out of memory");
    }
    while (rc == 0 && done < units) {
        size_t k = units - done < per ? units - done : per;
        rc = fs_io_rd_read(rd, buf, k * unit, &got, err);
        if (rc == 0 && got < k * unit) {
            rc = npy_truncated(path, in->h.header_len + (uint64_t)done * unit + got, total, err);
        }
        if (rc == 0) {
            rc = in->h.fortran_order ? npy_convert_cols(path, buf, done, k, in, m, err)
                                     : npy_convert_rows(path, buf, done, k, in, m, err);
        }
        done += k;
    }
out:
    free(buf);
    if (rc == 0) {
        rc = npy_check_end(rd, path, total, err);
    }
    return rc;
}

/* Data after the header into a new matrix. Plain files are checked against
 * their size, gzip'ed ones read into memory first, so a short file never
 * makes us allocate what its header claims. */
static int npy_load_data(struct fs_io_rd *rd, const char *path, const struct npy_info *in,
                         fs_mat **out, struct fs_err *err)
{
    size_t rows = in->h.shape[0];
    size_t cols = in->h.shape[1];
    size_t bytes = rows * cols * in->size; /* bounded by the header parser */
    uint64_t total = in->h.header_len + (uint64_t)bytes;
    uint8_t *raw = NULL;
    size_t got = 0;
    fs_mat *m = NULL;
    int rc = 0;

    if (npy_size_known(rd, path, total, &rc, err)) {
        if (rc != 0) {
            return rc;
        }
    } else {
        rc = fs_io_rd_slurp(rd, bytes + 1, &raw, &got, err);
        if (rc != 0) {
            return rc;
        }
        if (got < bytes) {
            rc = npy_truncated(path, in->h.header_len + got, total, err);
        } else if (got > bytes) {
            rc = npy_trailing(path, total, err);
        }
        if (rc != 0) {
            goto out;
        }
    }
    m = fs_mat_new_uninit(rows, cols);
    if (m == NULL) {
        rc = fs_io_err(err, FS_ENOMEM, path, "out of memory for a %zu x %zu matrix", rows, cols);
        goto out;
    }
    if (raw == NULL) {
        rc = npy_data_plain(rd, path, in, m, err);
    } else if (npy_is_direct(in, m)) {
        memcpy(m->data, raw, bytes);
        rc = npy_check_finite(path, in, m, err);
    } else if (in->h.fortran_order) {
        rc = npy_convert_cols(path, raw, 0, rows * cols, in, m, err);
    } else {
        rc = npy_convert_rows(path, raw, 0, rows, in, m, err);
    }
out:
    free(raw);
    if (rc != 0) {
        fs_mat_free(m);
        return rc;
    }
    *out = m;
    return 0;
}

/* Open path and read its header: a non-empty 2-D array within caps. On
 * success rd is left at the data (the caller closes it). */
static int npy_open_dense(struct fs_io_rd *rd, const char *path, const struct fs_io_caps *caps,
                          struct npy_info *in, struct fs_err *err)
{
    int rc = fs_io_rd_open(rd, path, 64, err);

    if (rc != 0) {
        return rc;
    }
    rc = npy_read_header(rd, path, caps, in, err);
    if (rc == 0) {
        rc = fs_io_check_shape(path, "byte offset 0", in->h.shape[0], in->h.shape[1], 1, caps, err);
    }
    if (rc == 0 && (in->h.shape[0] == 0 || in->h.shape[1] == 0)) {
        rc = fs_io_err(err, FS_EFORMAT, path, "byte offset %zu: empty array (shape %zu x %zu)",
                       in->h.header_len, in->h.shape[0], in->h.shape[1]);
    }
    if (rc != 0) {
        fs_io_rd_close(rd);
    }
    return rc;
}

int fs_io_npy_load_dense(const char *path, const struct fs_io_caps *caps, fs_mat **out,
                         struct fs_err *err)
{
    struct fs_io_rd rd;
    struct npy_info in;
    int rc;

    *out = NULL;
    rc = npy_open_dense(&rd, path, caps, &in, err);
    if (rc != 0) {
        return rc;
    }
    rc = npy_load_data(&rd, path, &in, out, err);
    fs_io_rd_close(&rd);
    return rc;
}

/* The data after the header checked as npy_load_data would convert it, in
 * chunks of one reused buffer. The first bad element in file order is
 * reported. */
static int npy_check_data(struct fs_io_rd *rd, const char *path, const struct npy_info *in,
                          struct fs_err *err)
{
    size_t rows = in->h.shape[0];
    size_t cols = in->h.shape[1];
    size_t n = rows * cols; /* bounded by the header parser */
    uint64_t total = in->h.header_len + (uint64_t)n * in->size;
    size_t per = NPY_CHUNK / in->size;
    int f8 = in->kind == 'f' && in->size == 8 && !in->big && host_is_le();
    uint8_t *buf;
    size_t done = 0;
    int rc = 0;

    if (npy_size_known(rd, path, total, &rc, err) && rc != 0) {
        return rc;
    }
    if (per > n) { /* a small array: a buffer its size, not a whole chunk */
        per = n > 0 ? n : 1;
    }
    buf = malloc(per * in->size);
    if (buf == NULL) {
        return fs_io_err(err, FS_ENOMEM, path, "out of memory");
    }
    while (rc == 0 && done < n) {
        size_t k = n - done < per ? n - done : per;
        size_t got = 0;
        size_t bad = k;
        int why = 0;
        rc = fs_io_rd_read(rd, buf, k * in->size, &got, err);
        if (rc == 0 && got < k * in->size) {
            rc =
                npy_truncated(path, in->h.header_len + (uint64_t)done * in->size + got, total, err);
        }
        for (size_t e = 0; rc == 0 && e < k && bad == k; e++) {
            double v;
            if (f8) {
                memcpy(&v, buf + e * 8, 8);
                why = isfinite(v) ? 0 : 1;
            } else {
                why = elem_to_double(buf + e * in->size, in, &v);
            }
            bad = why != 0 ? e : k;
        }
        if (rc == 0 && bad < k) {
            size_t idx = done + bad;
            size_t i = in->h.fortran_order ? idx % rows : idx / cols;
            size_t j = in->h.fortran_order ? idx / rows : idx % cols;
            rc = npy_elem_err(path, why, in->h.header_len + (uint64_t)idx * in->size, i, j, err);
        }
        done += k;
    }
    free(buf);
    return rc == 0 ? npy_check_end(rd, path, total, err) : rc;
}

int fs_io_npy_check_dense(const char *path, const struct fs_io_caps *caps, size_t *rows,
                          size_t *cols, struct fs_err *err)
{
    struct fs_io_rd rd;
    struct npy_info in;
    int rc = npy_open_dense(&rd, path, caps, &in, err);

    if (rc != 0) {
        return rc;
    }
    rc = npy_check_data(&rd, path, &in, err);
    fs_io_rd_close(&rd);
    if (rc == 0) {
        *rows = in.h.shape[0];
        *cols = in.h.shape[1];
    }
    return rc;
}

int fs_npy_read_u64(const char *path, uint64_t max_elems, uint64_t **out, size_t *n,
                    struct fs_err *err)
{
    struct fs_io_caps caps = fs_io_caps_default();
    struct fs_io_rd rd;
    struct npy_info in;
    uint64_t *v = NULL;
    size_t cnt = 0;
    size_t got = 0;
    uint64_t total = 0;
    uint64_t size = 0;
    int rc;

    if (path == NULL || out == NULL || n == NULL) {
        return fs_err_set(err, FS_EINVAL, "fs_npy_read_u64: NULL argument");
    }
    *out = NULL;
    *n = 0;
    caps.max_rows = SIZE_MAX;
    caps.max_cols = SIZE_MAX;
    if (max_elems != 0) {
        caps.max_elems = max_elems;
    }
    rc = fs_io_rd_open(&rd, path, 64, err);
    if (rc != 0) {
        return rc;
    }
    rc = npy_read_header(&rd, path, &caps, &in, err);
    if (rc != 0) {
        goto out;
    }
    if (in.kind != 'u' || in.size != 8) {
        char tok[NPY_DESCR_MAX + 4];
        fs_io_token(tok, sizeof tok, in.descr, strlen(in.descr));
        rc = fs_io_err(err, FS_EFORMAT, path, "byte offset %zu: dtype '%s', expected '<u8'",
                       in.descr_off, tok);
        goto out;
    }
    cnt = in.h.shape[0] * in.h.shape[1];
    total = in.h.header_len + (uint64_t)cnt * 8;
    if (fs_io_rd_known_size(&rd, &size)) {
        /* Checked before allocating what the header claims. */
        if (size != total) {
            rc = size < total ? npy_truncated(path, size, total, err)
                              : npy_trailing(path, total, err);
            goto out;
        }
        v = malloc(cnt > 0 ? cnt * 8 : 8);
        if (v == NULL) {
            rc = fs_io_err(err, FS_ENOMEM, path, "out of memory for %zu elements", cnt);
            goto out;
        }
        rc = fs_io_rd_read(&rd, v, cnt * 8, &got, err);
    } else {
        uint8_t *raw = NULL;
        rc = fs_io_rd_slurp(&rd, cnt * 8, &raw, &got, err);
        v = (uint64_t *)(void *)raw; /* malloc'd: aligned for any type */
    }
    if (rc != 0) {
        goto out;
    }
    if (got < cnt * 8) {
        rc = npy_truncated(path, in.h.header_len + got, total, err);
        goto out;
    }
    if (in.big == host_is_le()) {
        for (size_t k = 0; k < cnt; k++) {
            uint8_t b[8];
            memcpy(b, &v[k], 8);
            v[k] = load_uint(b, 8, in.big);
        }
    }
    rc = npy_check_end(&rd, path, total, err);
out:
    fs_io_rd_close(&rd);
    if (rc != 0) {
        free(v);
        return rc;
    }
    *out = v;
    *n = cnt;
    return 0;
}

/* ---- writing ---- */

/* Write n 8-byte little-endian words (doubles or u64) from src. */
static int write_le64(struct fs_io_wr *w, const void *src, size_t n, struct fs_err *err)
{
    const uint8_t *s = src;
    uint8_t buf[8 * 1024];

    if (host_is_le()) {
        return fs_io_wr_write(w, src, n * 8, err);
    }
    while (n > 0) {
        size_t k = n < 1024 ? n : 1024;
        for (size_t e = 0; e < k; e++) {
            for (unsigned b = 0; b < 8; b++) {
                buf[e * 8 + b] = s[e * 8 + 7 - b];
            }
        }
        int rc = fs_io_wr_write(w, buf, k * 8, err);
        if (rc != 0) {
            return rc;
        }
        s += k * 8;
        n -= k;
    }
    return 0;
}

static int npy_write(const char *path, const struct fs_npy_header *h, const void *data, size_t ld,
                     struct fs_err *err)
{
    struct fs_io_wr w;
    uint8_t hdr[256];
    size_t hl = 0;
    int rc;

    rc = fs_npy_format_header(h, hdr, sizeof hdr, &hl, err);
    if (rc != 0) {
        return rc;
    }
    rc = fs_io_wr_open(&w, path, err);
    if (rc != 0) {
        return rc;
    }
    rc = fs_io_wr_write(&w, hdr, hl, err);
    if (h->ndim == 1) {
        if (rc == 0) {
            rc = write_le64(&w, data, h->shape[0], err);
        }
    } else {
        const uint8_t *d = data;
        for (size_t j = 0; j < h->shape[1] && rc == 0; j++) {
            rc = write_le64(&w, d + j * ld * 8, h->shape[0], err);
        }
    }
    if (rc != 0) {
        fs_io_wr_abort(&w);
        return rc;
    }
    return fs_io_wr_commit(&w, err);
}

int fs_npy_write_mat(const char *path, const fs_mat *m, struct fs_err *err)
{
    struct fs_npy_header h;

    if (path == NULL || m == NULL || (m->data == NULL && m->rows * m->cols > 0) ||
        m->ld < m->rows) {
        return fs_err_set(err, FS_EINVAL, "fs_npy_write_mat: bad argument");
    }
    memset(&h, 0, sizeof h);
    h.dtype = FS_NPY_F8;
    h.fortran_order = 1;
    h.ndim = 2;
    h.shape[0] = m->rows;
    h.shape[1] = m->cols;
    return npy_write(path, &h, m->data, m->ld, err);
}

static int npy_write_1d(const char *path, enum fs_npy_dtype dt, const void *v, size_t n,
                        struct fs_err *err)
{
    struct fs_npy_header h;

    if (path == NULL || (v == NULL && n > 0)) {
        return fs_err_set(err, FS_EINVAL, "npy write: bad argument");
    }
    memset(&h, 0, sizeof h);
    h.dtype = dt;
    h.fortran_order = 0;
    h.ndim = 1;
    h.shape[0] = n;
    h.shape[1] = 1;
    return npy_write(path, &h, v, n, err);
}

int fs_npy_write_vec(const char *path, const double *v, size_t n, struct fs_err *err)
{
    return npy_write_1d(path, FS_NPY_F8, v, n, err);
}

int fs_npy_write_u64(const char *path, const uint64_t *v, size_t n, struct fs_err *err)
{
    return npy_write_1d(path, FS_NPY_U8, v, n, err);
}
