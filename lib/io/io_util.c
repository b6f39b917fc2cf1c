/* Shared plumbing of lib/io: buffered (optionally gzip'ed) reader, error
 * formatting, caps, number parsing and atomic writes. See io_internal.h. */
#include "io_internal.h"

#include "../core/fdio.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RD_INIT_CAP ((size_t)1 << 18)
/* The smallest buffers for a small regular file (see rd_init_cap). */
#define RD_SMALL_CAP ((size_t)1 << 12)
/* gzread takes an unsigned and returns an int: stay well below INT_MAX. */
#define RD_MAX_CHUNK   ((size_t)1 << 30)
#define PATH_SHOWN_MAX 200

/* ---- errors ---- */

int fs_io_err(struct fs_err *err, int code, const char *path, const char *fmt, ...)
{
    char msg[FS_ERR_MSG_MAX];
    va_list ap;
    size_t pl;

    if (err == NULL) {
        return code;
    }
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (path == NULL) {
        /* Buffer parsers (npy headers from HTTP bodies) have no file name. */
        return fs_err_set(err, code, "%s", msg);
    }
    pl = strlen(path);
    if (pl > PATH_SHOWN_MAX) {
        /* Keep the file name (the tail) so the message still names it. */
        return fs_err_set(err, code, "...%s: %s", path + pl - PATH_SHOWN_MAX, msg);
    }
    return fs_err_set(err, code, "%s: %s", path, msg);
}

void fs_io_token(char *dst, size_t cap, const char *s, size_t n)
{
    size_t keep = n;
    size_t o = 0;

    if (cap < 8) {
        if (cap > 0) {
            dst[0] = '\0';
        }
        return;
    }
    if (keep > cap - 1) {
        keep = cap - 4;
    }
    for (size_t i = 0; i < keep; i++) {
        unsigned char c = (unsigned char)s[i];
        dst[o++] = (c >= 0x20 && c < 0x7f && c != '\'') ? (char)c : '?';
    }
    if (keep < n) {
        dst[o++] = '.';
        dst[o++] = '.';
        dst[o++] = '.';
    }
    dst[o] = '\0';
}

/* ---- caps ---- */

struct fs_io_caps fs_io_caps_default(void)
{
    struct fs_io_caps c;
    c.max_rows = (size_t)1 << 26;
    c.max_cols = (size_t)1 << 20;
    c.max_elems = (uint64_t)1 << 31;
    c.max_nnz = (uint64_t)1 << 31;
    return c;
}

struct fs_io_caps fs_io_caps_resolve(const struct fs_io_caps *caps)
{
    struct fs_io_caps d = fs_io_caps_default();

    if (caps == NULL) {
        return d;
    }
    if (caps->max_rows != 0) {
        d.max_rows = caps->max_rows;
    }
    if (caps->max_cols != 0) {
        d.max_cols = caps->max_cols;
    }
    if (caps->max_elems != 0) {
        d.max_elems = caps->max_elems;
    }
    if (caps->max_nnz != 0) {
        d.max_nnz = caps->max_nnz;
    }
    return d;
}

int fs_io_check_shape(const char *path, const char *where, uint64_t rows, uint64_t cols, int dense,
                      const struct fs_io_caps *caps, struct fs_err *err)
{
    if (rows > caps->max_rows) {
        return fs_io_err(err, FS_ERANGE, path, "%s: %llu rows exceed the cap of %llu (max_rows)",
                         where, (unsigned long long)rows, (unsigned long long)caps->max_rows);
    }
    if (cols > caps->max_cols) {
        return fs_io_err(err, FS_ERANGE, path, "%s: %llu columns exceed the cap of %llu (max_cols)",
                         where, (unsigned long long)cols, (unsigned long long)caps->max_cols);
    }
    if (dense && cols != 0 && rows > caps->max_elems / cols) {
        return fs_io_err(err, FS_ERANGE, path,
                         "%s: %llu x %llu elements exceed the cap of %llu (max_elems)", where,
                         (unsigned long long)rows, (unsigned long long)cols,
                         (unsigned long long)caps->max_elems);
    }
    return 0;
}

/* ---- reader ---- */

static int rd_zerr(struct fs_io_rd *r, struct fs_err *err)
{
    int zerr = Z_OK;
    const char *m = gzerror(r->gz, &zerr);
    uint64_t off = r->base + r->len;

    if (zerr == Z_ERRNO) {
        return fs_io_err(err, FS_EIO, r->path, "byte offset %llu: read error: %s",
                         (unsigned long long)off, strerror(errno));
    }
    if (zerr == Z_BUF_ERROR) {
        return fs_io_err(err, FS_EFORMAT, r->path,
                         "byte offset %llu (uncompressed): truncated gzip stream",
                         (unsigned long long)off);
    }
    return fs_io_err(err, FS_EFORMAT, r->path, "byte offset %llu (uncompressed): gzip: %s",
                     (unsigned long long)off, m != NULL ? m : "corrupt data");
}

/* Raw read through zlib, in chunks gzread can express. */
static int rd_raw(struct fs_io_rd *r, unsigned char *dst, size_t n, size_t *got, struct fs_err *err)
{
    size_t done = 0;

    while (done < n) {
        size_t want = n - done > RD_MAX_CHUNK ? RD_MAX_CHUNK : n - done;
        int k = gzread(r->gz, dst + done, (unsigned)want);
        if (k < 0) {
            *got = done;
            return rd_zerr(r, err);
        }
        if (k == 0) {
            int zerr = Z_OK;
            (void)gzerror(r->gz, &zerr);
            *got = done;
            if (zerr != Z_OK) {
                return rd_zerr(r, err);
            }
            return 0;
        }
        done += (size_t)k;
    }
    *got = done;
    return 0;
}

/* Buffer size for a reader: a regular file smaller than RD_INIT_CAP gets
 * buffers of its size (at least RD_SMALL_CAP), not the big ones meant for
 * big files and streams, so that opening many small files (and every input
 * a fuzzer tries) stays cheap. A gzip'ed file may expand: it is then read in
 * smaller chunks, and the line buffer still grows to the longest line. */
static size_t rd_init_cap(const struct fs_io_rd *r)
{
    if (!r->regular || r->st_size >= RD_INIT_CAP - 2) {
        return RD_INIT_CAP;
    }
    return r->st_size + 2 > RD_SMALL_CAP ? (size_t)r->st_size + 2 : RD_SMALL_CAP;
}

int fs_io_rd_open(struct fs_io_rd *r, const char *path, size_t max_line, struct fs_err *err)
{
    size_t init_cap;
    struct stat st;
    int fd = -1;

    memset(r, 0, sizeof *r);
    r->path = path;
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return fs_io_err(err, errno == ENOENT ? FS_ENOTFOUND : FS_EIO, path, "cannot open: %s",
                         strerror(errno));
    }
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return fs_io_err(err, FS_EIO, path, "cannot stat: %s", strerror(e));
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return fs_io_err(err, FS_EIO, path, "cannot read: %s", strerror(EISDIR));
    }
    r->regular = S_ISREG(st.st_mode);
    r->st_size = (uint64_t)st.st_size;
    r->gz = gzdopen(fd, "rb");
    if (r->gz == NULL) {
        close(fd);
        return fs_io_err(err, FS_ENOMEM, path, "cannot open: out of memory");
    }
    init_cap = rd_init_cap(r);
    (void)gzbuffer(r->gz, (unsigned)(init_cap / 2));
    if (max_line < 64) {
        max_line = 64;
    }
    r->max_cap = max_line + 1;
    r->cap = init_cap < r->max_cap ? init_cap : r->max_cap;
    r->buf = malloc(r->cap);
    if (r->buf == NULL) {
        fs_io_rd_close(r);
        return fs_io_err(err, FS_ENOMEM, path, "out of memory");
    }
    return 0;
}

void fs_io_rd_close(struct fs_io_rd *r)
{
    if (r == NULL) {
        return;
    }
    if (r->gz != NULL) {
        (void)gzclose_r(r->gz);
        r->gz = NULL;
    }
    free(r->buf);
    r->buf = NULL;
    r->cap = 0;
    r->len = 0;
    r->pos = 0;
}

int fs_io_rd_rewind(struct fs_io_rd *r, struct fs_err *err)
{
    if (gzrewind(r->gz) != 0) {
        return fs_io_err(err, FS_EIO, r->path, "cannot rewind for the second pass");
    }
    r->pos = 0;
    r->len = 0;
    r->base = 0;
    r->eof = 0;
    r->lineno = 0;
    return 0;
}

uint64_t fs_io_rd_tell(const struct fs_io_rd *r)
{
    return r->base + r->pos;
}

int fs_io_rd_is_gz(const struct fs_io_rd *r)
{
    return r->gz != NULL && gzdirect(r->gz) == 0;
}

/* Move unread bytes to the front, grow if full (up to max_cap), read more.
 * Sets r->eof at end of stream. FS_ERANGE when the buffer is full and at
 * its maximum (a line too long). */
static int rd_fill(struct fs_io_rd *r, struct fs_err *err)
{
    size_t got = 0;
    int rc;

    if (r->pos > 0) {
        memmove(r->buf, r->buf + r->pos, r->len - r->pos);
        r->base += r->pos;
        r->len -= r->pos;
        r->pos = 0;
    }
    if (r->len + 1 >= r->cap) {
        size_t ncap;
        unsigned char *nb;
        if (r->cap >= r->max_cap) {
            return FS_ERANGE;
        }
        ncap = r->cap > r->max_cap / 2 ? r->max_cap : r->cap * 2;
        nb = realloc(r->buf, ncap);
        if (nb == NULL) {
            return fs_io_err(err, FS_ENOMEM, r->path, "out of memory growing the line buffer");
        }
        r->buf = nb;
        r->cap = ncap;
    }
    rc = rd_raw(r, r->buf + r->len, r->cap - 1 - r->len, &got, err);
    r->len += got;
    if (rc != 0) {
        return rc;
    }
    if (got == 0) {
        r->eof = 1;
    }
    return 0;
}

int fs_io_rd_known_size(struct fs_io_rd *r, uint64_t *size)
{
    if (!r->regular || gzdirect(r->gz) != 1) {
        return 0;
    }
    *size = r->st_size;
    return 1;
}

int fs_io_rd_slurp(struct fs_io_rd *r, size_t max, uint8_t **out, size_t *got, struct fs_err *err)
{
    size_t init_cap = rd_init_cap(r);
    size_t cap = max < init_cap ? max : init_cap;
    size_t have = 0;
    uint8_t *b = malloc(cap > 0 ? cap : 1);
    int rc = 0;

    *out = NULL;
    *got = 0;
    if (b == NULL) {
        return fs_io_err(err, FS_ENOMEM, r->path, "out of memory");
    }
    while (have < max) {
        size_t k = 0;
        if (have == cap) {
            size_t ncap = cap > max / 2 ? max : cap * 2;
            uint8_t *nb = realloc(b, ncap);
            if (nb == NULL) {
                rc = fs_io_err(err, FS_ENOMEM, r->path, "out of memory");
                break;
            }
            b = nb;
            cap = ncap;
        }
        rc = fs_io_rd_read(r, b + have, cap - have, &k, err);
        have += k;
        if (rc != 0 || have < cap) {
            break;
        }
    }
    if (rc != 0) {
        free(b);
        return rc;
    }
    *out = b;
    *got = have;
    return 0;
}

int fs_io_rd_read(struct fs_io_rd *r, void *dst, size_t n, size_t *got, struct fs_err *err)
{
    unsigned char *d = dst;
    size_t have = r->len - r->pos;
    size_t take = have < n ? have : n;
    size_t more = 0;
    int rc;

    memcpy(d, r->buf + r->pos, take);
    r->pos += take;
    *got = take;
    if (take == n || r->eof) {
        return 0;
    }
    /* Buffer drained: read the rest straight into dst. */
    r->base += r->pos;
    r->pos = 0;
    r->len = 0;
    rc = rd_raw(r, d + take, n - take, &more, err);
    r->base += more;
    *got = take + more;
    if (rc == 0 && *got < n) {
        r->eof = 1;
    }
    return rc;
}

int fs_io_rd_line(struct fs_io_rd *r, char **line, size_t *len, struct fs_err *err)
{
    size_t scanned = 0; /* bytes after pos already known to hold no '\n' */

    for (;;) {
        unsigned char *s = r->buf + r->pos;
        size_t avail = r->len - r->pos;
        unsigned char *nl = memchr(s + scanned, '\n', avail - scanned);
        size_t n;
        int rc;

        if (nl != NULL || (r->eof && avail > 0)) {
            n = nl != NULL ? (size_t)(nl - s) : avail;
            r->pos += nl != NULL ? n + 1 : n;
            if (n > 0 && s[n - 1] == '\r') {
                n--;
            }
            s[n] = '\0'; /* the '\n', the '\r' or the spare byte */
            r->lineno++;
            *line = (char *)s;
            *len = n;
            return 1;
        }
        if (r->eof) {
            return 0;
        }
        scanned = avail;
        rc = rd_fill(r, err);
        if (rc == FS_ERANGE) {
            return fs_io_err(err, FS_ERANGE, r->path,
                             "line %llu: longer than the limit of %zu bytes",
                             (unsigned long long)(r->lineno + 1), r->max_cap - 1);
        }
        if (rc != 0) {
            return rc;
        }
    }
}

/* ---- numbers ---- */

static const double pow10_exact[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                       1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                       1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

static int word_ci(const char *s, const char *w)
{
    size_t i = 0;
    for (; w[i] != '\0'; i++) {
        char c = s[i];
        if (c >= 'A' && c <= 'Z') {
            c = (char)(c - 'A' + 'a');
        }
        if (c != w[i]) {
            return 0;
        }
    }
    return (int)i;
}

/* Rare: long mantissa or large exponent. strtod rounds correctly; it must
 * consume exactly [s, p), which our grammar accepted. strtod follows
 * LC_NUMERIC, so under a locale with another decimal point the '.' is
 * swapped first (as Jansson does). */
static int slow_strtod(const char *s, const char *p, double *v)
{
    const char *dp = localeconv()->decimal_point;
    char tmp[512];
    char *e2 = NULL;
    double d;

    if (dp != NULL && strcmp(dp, ".") != 0) {
        size_t n = (size_t)(p - s);
        char *dot;
        if (n >= sizeof tmp || strlen(dp) != 1) {
            return FS_IO_NUM_BAD;
        }
        memcpy(tmp, s, n);
        tmp[n] = '\0';
        dot = strchr(tmp, '.');
        if (dot != NULL) {
            *dot = dp[0];
        }
        d = strtod(tmp, &e2);
        if (e2 != tmp + n) {
            return FS_IO_NUM_BAD;
        }
    } else {
        d = strtod(s, &e2);
        if (e2 != p) {
            return FS_IO_NUM_BAD;
        }
    }
    if (isinf(d)) {
        return FS_IO_NUM_OVERFLOW;
    }
    *v = d;
    return FS_IO_NUM_OK;
}

int fs_io_parse_double(const char *s, const char **end, double *v)
{
    const char *p = s;
    int neg = 0;
    uint64_t mant = 0;
    int nd = 0;      /* significant digits kept in mant */
    int dropped = 0; /* significant digits beyond 19 */
    long exp10 = 0;
    int ndigits = 0; /* all mantissa digits seen */

    *end = s;
    if (*p == '+' || *p == '-') {
        neg = *p == '-';
        p++;
    }
    if ((*p < '0' || *p > '9') && *p != '.') {
        int k = word_ci(p, "infinity");
        if (k == 0) {
            k = word_ci(p, "inf");
        }
        if (k == 0) {
            k = word_ci(p, "nan");
        }
        if (k > 0) {
            *end = p + k;
            return FS_IO_NUM_NAN_INF;
        }
        return FS_IO_NUM_BAD;
    }
    for (; *p >= '0' && *p <= '9'; p++, ndigits++) {
        if (mant == 0 && *p == '0') {
            continue;
        }
        if (nd < 19) {
            mant = mant * 10 + (uint64_t)(*p - '0');
            nd++;
        } else {
            dropped++;
            exp10++;
        }
    }
    if (*p == '.') {
        p++;
        for (; *p >= '0' && *p <= '9'; p++, ndigits++) {
            if (mant == 0 && *p == '0') {
                exp10--;
                continue;
            }
            if (nd < 19) {
                mant = mant * 10 + (uint64_t)(*p - '0');
                nd++;
                exp10--;
            } else {
                dropped++;
            }
        }
    }
    if (ndigits == 0) {
        return FS_IO_NUM_BAD;
    }
    if (*p == 'e' || *p == 'E') {
        const char *q = p + 1;
        int eneg = 0;
        long e = 0;
        if (*q == '+' || *q == '-') {
            eneg = *q == '-';
            q++;
        }
        if (*q >= '0' && *q <= '9') {
            for (; *q >= '0' && *q <= '9'; q++) {
                if (e < 100000) {
                    e = e * 10 + (*q - '0');
                }
            }
            exp10 += eneg ? -e : e;
            p = q;
        }
        /* else: "1e" or "1e+" — the 'e' is not part of the number and the
         * caller sees a non-separator there. */
    }
    *end = p;
    if (mant == 0) {
        *v = neg ? -0.0 : 0.0;
        return FS_IO_NUM_OK;
    }
    if (nd <= 15 && dropped == 0 && exp10 >= -22 && exp10 <= 22) {
        /* Both operands exact, one IEEE rounding: correctly rounded. */
        double d = (double)mant;
        d = exp10 >= 0 ? d * pow10_exact[exp10] : d / pow10_exact[-exp10];
        *v = neg ? -d : d;
        return FS_IO_NUM_OK;
    }
    return slow_strtod(s, p, v);
}

int fs_io_parse_u64(const char *s, const char **end, uint64_t *v)
{
    const char *p = s;
    uint64_t x = 0;

    *end = s;
    if (*p < '0' || *p > '9') {
        return -1;
    }
    for (; *p >= '0' && *p <= '9'; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (x > (UINT64_MAX - d) / 10) {
            return -1;
        }
        x = x * 10 + d;
    }
    *end = p;
    *v = x;
    return 0;
}

/* ---- atomic write ---- */

int fs_io_wr_open(struct fs_io_wr *w, const char *path, struct fs_err *err)
{
    static const char suffix[] = ".tmp.XXXXXX";
    size_t pl = strlen(path);
    int fd;

    memset(w, 0, sizeof *w);
    w->path = path;
    w->tmp = malloc(pl + sizeof suffix);
    if (w->tmp == NULL) {
        return fs_io_err(err, FS_ENOMEM, path, "out of memory");
    }
    memcpy(w->tmp, path, pl);
    memcpy(w->tmp + pl, suffix, sizeof suffix);
    fd = mkstemp(w->tmp);
    if (fd < 0) {
        int e = errno;
        free(w->tmp);
        w->tmp = NULL;
        return fs_io_err(err, fs_io_errcode(e), path, "cannot create temporary file: %s",
                         strerror(e));
    }
    w->f = fdopen(fd, "wb");
    if (w->f == NULL) {
        int e = errno;
        close(fd);
        unlink(w->tmp);
        free(w->tmp);
        w->tmp = NULL;
        return fs_io_err(err, FS_EIO, path, "cannot open temporary file: %s", strerror(e));
    }
    (void)setvbuf(w->f, NULL, _IOFBF, (size_t)1 << 17);
    return 0;
}

int fs_io_wr_write(struct fs_io_wr *w, const void *p, size_t n, struct fs_err *err)
{
    if (n > 0 && fwrite(p, 1, n, w->f) != n) {
        w->failed = 1;
        return fs_io_err(err, fs_io_errcode(errno), w->path, "write failed: %s", strerror(errno));
    }
    return 0;
}

static void fsync_parent_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir = NULL;
    int fd;

    if (slash == NULL) {
        fd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    } else {
        size_t n = slash == path ? 1 : (size_t)(slash - path);
        dir = malloc(n + 1);
        if (dir == NULL) {
            return;
        }
        memcpy(dir, path, n);
        dir[n] = '\0';
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        free(dir);
    }
    if (fd >= 0) {
        /* Best effort: some filesystems refuse fsync on directories. */
        (void)fsync(fd);
        close(fd);
    }
}

int fs_io_wr_commit(struct fs_io_wr *w, struct fs_err *err)
{
    int rc = 0;
    int e = 0;

    if (w->f == NULL) {
        return fs_io_err(err, FS_ESTATE, w->path, "write not open");
    }
    if (w->failed || fflush(w->f) != 0 || ferror(w->f)) {
        e = errno;
        rc = FS_EIO;
    } else if (fsync(fileno(w->f)) != 0) {
        e = errno;
        rc = FS_EIO;
    }
    if (fclose(w->f) != 0 && rc == 0) {
        e = errno;
        rc = FS_EIO;
    }
    w->f = NULL;
    if (rc == 0 && rename(w->tmp, w->path) != 0) {
        e = errno;
        rc = FS_EIO;
    }
    if (rc != 0) {
        unlink(w->tmp);
        rc = fs_io_errcode(e); /* disk full, read-only: FS_ESTORAGE */
        fs_io_err(err, rc, w->path, "write failed: %s", strerror(e));
    } else {
        fsync_parent_dir(w->path);
    }
    free(w->tmp);
    w->tmp = NULL;
    return rc;
}

void fs_io_wr_abort(struct fs_io_wr *w)
{
    if (w == NULL) {
        return;
    }
    if (w->f != NULL) {
        fclose(w->f);
        w->f = NULL;
    }
    if (w->tmp != NULL) {
        unlink(w->tmp);
        free(w->tmp);
        w->tmp = NULL;
    }
}
