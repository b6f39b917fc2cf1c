/* fedsvd gen KIND: deterministic synthetic data for tests, demos and
 * benchmarks, optionally split by rows into party files.
 *
 * Every random draw comes from fs_prg (AES-256-CTR) keyed by the 32-byte
 * seed; independent quantities use independent streams (distinct IVs), so
 * e.g. changing --noise does not change the planted factors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "crypto/prg.h"
#include "io/matio.h"
#include "la/csr.h"
#include "la/mat.h"
#include "la/qr.h"

#define NOPTS(a)    (sizeof(a) / sizeof((a)[0]))
#define PATH_CAP    4096
#define MAX_PARTIES 100000
#define MAX_DIM     ((size_t)1 << 26)
#define MAX_ELEMS   ((size_t)1 << 31)

/* PRG streams (first IV byte). */
enum {
    STREAM_LEFT = 1,
    STREAM_RIGHT = 2,
    STREAM_NOISE = 3,
    STREAM_INT = 4,
    STREAM_RATINGS = 5,
    STREAM_PERM = 6,
    STREAM_ITEMS = 7
};

enum gen_kind { KIND_POWERLAW, KIND_UNIFORM_INT, KIND_PLANTED, KIND_RATINGS };

/* Option bits: which kinds accept which kind-specific options. */
enum {
    O_ROWS = 1 << 0,
    O_COLS = 1 << 1,
    O_ALPHA = 1 << 2,
    O_LOW = 1 << 3,
    O_HIGH = 1 << 4,
    O_RANK = 1 << 5,
    O_GAP = 1 << 6,
    O_NOISE = 1 << 7,
    O_DECAY = 1 << 8,
    O_USERS = 1 << 9,
    O_ITEMS = 1 << 10,
    O_NNZ = 1 << 11
};

struct kind_info {
    const char *name;
    enum gen_kind kind;
    unsigned allowed;
};

static const struct kind_info kinds[] = {
    {"powerlaw", KIND_POWERLAW, O_ROWS | O_COLS | O_ALPHA},
    {"uniform-int", KIND_UNIFORM_INT, O_ROWS | O_COLS | O_LOW | O_HIGH},
    {"planted", KIND_PLANTED, O_ROWS | O_COLS | O_RANK | O_GAP | O_NOISE | O_DECAY},
    {"ratings", KIND_RATINGS, O_USERS | O_ITEMS | O_NNZ | O_ALPHA},
};

struct gen_args {
    const struct kind_info *kind;
    size_t rows, cols; /* users x items for ratings */
    double alpha;
    double low, high;
    size_t rank;
    double gap, noise, decay;
    size_t nnz;
    uint8_t seed[32];
    char seed_hex[65];
    const char *out;
    const char *out_dir;
    const char *out_format; /* extension for party files, without the dot */
    size_t *split;          /* party sizes (malloc'd) */
    size_t nparties;
    int json;
};

/* Files written, for the report. */
struct gen_report {
    json_t *files; /* array of {path, role, rows, cols} */
};

static void gen_help(void)
{
    printf("Usage: fedsvd gen KIND [OPTIONS] (--out FILE | --out-dir DIR --parties K | both)\n"
           "\n"
           "Deterministic synthetic data (rows = samples, columns = features).\n"
           "\n"
           "Kinds:\n"
           "  powerlaw     --rows N --cols D [--alpha A]\n"
           "               X = U diag(s) V^T with s_i = i^(-A) (default A = 1), U, V Haar-random\n"
           "               with orthonormal columns, r = min(N, D) (Chai et al. 2021, sec. 6.1).\n"
           "               Also writes the exact singular values (see side files).\n"
           "  uniform-int  --rows N --cols D [--low L] [--high H]\n"
           "               i.i.d. integers uniform in [L, H], default [0, 5] (Liu et al. sec. 6)\n"
           "  planted      --rows N --cols D --rank K [--gap G] [--decay Q] [--noise SIGMA]\n"
           "               X = U diag(s) V^T (+ SIGMA * Gaussian noise), r = min(N, D), with\n"
           "               eigenvalues lambda_i = s_i^2: lambda_i = Q^(i-1) for i <= K, then\n"
           "               lambda_(K+1) = G * lambda_K (the eigengap ratio, default G = 0.85),\n"
           "               decaying by Q (default 0.95) after that; scaled so that\n"
           "               ||U diag(s) V^T||_F^2 = N*D (entries of RMS 1). Writes the true top-K\n"
           "               V and, when SIGMA = 0 (default), the exact singular values.\n"
           "  ratings      --users N --items D --ratings M [--alpha A]   (--nnz M: the same)\n"
           "               sparse ratings 1..5 of M distinct (user, item) pairs, users uniform,\n"
           "               each user's items drawn without replacement with popularity\n"
           "               proportional to rank^(-A) (items randomly permuted); streamed to\n"
           "               MatrixMarket (.mtx) unless told otherwise (Netflix-sized: --users\n"
           "               324468 --items 17711 --ratings 96000000 --parties 100)\n"
           "\n"
           "Output:\n"
           "  --out FILE          the whole matrix; format by extension: .npy (default),\n"
           "                      .csv, .mtx\n"
           "  --out-dir DIR       party files DIR/party-1.EXT ... DIR/party-K.EXT, rows split\n"
           "                      in order, as evenly as possible (first parties get one more)\n"
           "  --parties K         number of party files (with --out-dir)\n"
           "  --split N1,N2,...   explicit party sizes (must add up to the rows)\n"
           "  --out-format F      npy (default for dense kinds), csv or mtx (default for\n"
           "                      ratings) for the party files\n"
           "  --seed HEX64|INT    64 hex digits (the PRG key) or an integer; default: fresh\n"
           "                      from the OS CSPRNG, printed so the run can be repeated\n"
           "  --format F          text (default) or json (one object listing the files)\n"
           "  -h, --help          show this text\n"
           "\n"
           "Side files (next to --out FILE as FILE-without-extension.spectrum.npy / .V.npy, or\n"
           "as DIR/spectrum.npy, DIR/V.npy with --out-dir only): powerlaw writes the spectrum;\n"
           "planted writes V (D x K) and, without noise, the spectrum (r values).\n");
}

/* ---- random helpers ---- */

static int stream_prg(const uint8_t key[32], int stream, fs_prg **out, struct fs_err *err)
{
    uint8_t iv[16] = {0};

    iv[0] = (uint8_t)stream;
    return fs_prg_new(out, key, iv, err);
}

/* Buffered uniform words, so per-sample draws do not pay one AES call each. */
struct wordbuf {
    fs_prg *prg;
    uint64_t w[4096];
    size_t pos;
};

static int wordbuf_next(struct wordbuf *b, uint64_t *out, struct fs_err *err)
{
    if (b->pos == 0 || b->pos >= sizeof b->w / sizeof b->w[0]) {
        int rc = fs_prg_u64(b->prg, b->w, sizeof b->w / sizeof b->w[0], err);
        if (rc != 0) {
            return rc;
        }
        b->pos = 0;
    }
    *out = b->w[b->pos++];
    if (b->pos >= sizeof b->w / sizeof b->w[0]) {
        b->pos = 0;
    }
    return 0;
}

/* Uniform integer in [0, range) without bias (rejection); range >= 1. */
static int wordbuf_below(struct wordbuf *b, uint64_t range, uint64_t *out, struct fs_err *err)
{
    uint64_t rem = (UINT64_MAX % range + 1) % range; /* 2^64 mod range */
    uint64_t w = 0;

    for (;;) {
        int rc = wordbuf_next(b, &w, err);
        if (rc != 0) {
            return rc;
        }
        if (rem == 0 || w < UINT64_MAX - rem + 1) {
            *out = w % range;
            return 0;
        }
    }
}

/* New n x r matrix with orthonormal columns, Haar-distributed on the Stiefel
 * manifold: the Q of a Gaussian matrix with diag(R) >= 0 (fs_qr_orth). */
static int haar_cols(const uint8_t key[32], int stream, size_t n, size_t r, fs_mat **out,
                     struct fs_err *err)
{
    fs_prg *prg = NULL;
    fs_mat *q = NULL;
    int rc;

    *out = NULL;
    q = fs_mat_new_uninit(n, r);
    if (q == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory for a %zu x %zu factor", n, r);
    }
    rc = stream_prg(key, stream, &prg, err);
    if (rc == 0) {
        rc = fs_mat_fill_normal(q, prg, err);
    }
    if (rc == 0) {
        rc = fs_qr_orth(q, NULL, err);
    }
    fs_prg_free(prg);
    if (rc != 0) {
        fs_mat_free(q);
        return rc;
    }
    *out = q;
    return 0;
}

/* X = Q1 diag(s) Q2^T with Q1 rows x r, Q2 cols x r, r = min(rows, cols).
 * *right receives Q2 when not NULL (caller frees). */
static int gen_lowrank(const struct gen_args *a, const double *s, fs_mat **x, fs_mat **right,
                       struct fs_err *err)
{
    size_t r = a->rows < a->cols ? a->rows : a->cols;
    fs_mat *q1 = NULL;
    fs_mat *q2 = NULL;
    fs_mat *m = NULL;
    int rc;

    *x = NULL;
    rc = haar_cols(a->seed, STREAM_LEFT, a->rows, r, &q1, err);
    if (rc == 0) {
        rc = haar_cols(a->seed, STREAM_RIGHT, a->cols, r, &q2, err);
    }
    if (rc != 0) {
        goto out;
    }
    for (size_t j = 0; j < r; j++) {
        for (size_t i = 0; i < q1->rows; i++) {
            FS_MAT_AT(q1, i, j) *= s[j];
        }
    }
    m = fs_mat_new_uninit(a->rows, a->cols);
    if (m == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "out of memory for %zu x %zu", a->rows, a->cols);
        goto out;
    }
    rc = fs_mat_gemm('N', 'T', 1.0, q1, q2, 0.0, m, err);
    if (rc != 0) {
        goto out;
    }
    *x = m;
    m = NULL;
    if (right != NULL) {
        *right = q2;
        q2 = NULL;
    }
out:
    fs_mat_free(m);
    fs_mat_free(q2);
    fs_mat_free(q1);
    return rc;
}

static int add_noise(const struct gen_args *a, fs_mat *x, struct fs_err *err)
{
    fs_prg *prg = NULL;
    double *z = NULL;
    int rc;

    z = malloc(x->rows * sizeof *z);
    if (z == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    rc = stream_prg(a->seed, STREAM_NOISE, &prg, err);
    for (size_t j = 0; rc == 0 && j < x->cols; j++) {
        rc = fs_prg_normal(prg, z, x->rows, err);
        for (size_t i = 0; rc == 0 && i < x->rows; i++) {
            FS_MAT_AT(x, i, j) += a->noise * z[i];
        }
    }
    fs_prg_free(prg);
    free(z);
    return rc;
}

static int gen_uniform_int(const struct gen_args *a, fs_mat **x, struct fs_err *err)
{
    struct wordbuf b;
    fs_mat *m = NULL;
    uint64_t range = (uint64_t)(a->high - a->low) + 1;
    int rc;

    *x = NULL;
    memset(&b, 0, sizeof b);
    m = fs_mat_new_uninit(a->rows, a->cols);
    if (m == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory for %zu x %zu", a->rows, a->cols);
    }
    rc = stream_prg(a->seed, STREAM_INT, &b.prg, err);
    /* Row by row, so the first n rows do not depend on --rows. */
    for (size_t i = 0; rc == 0 && i < m->rows; i++) {
        for (size_t j = 0; rc == 0 && j < m->cols; j++) {
            uint64_t v = 0;
            rc = wordbuf_below(&b, range, &v, err);
            FS_MAT_AT(m, i, j) = a->low + (double)v;
        }
    }
    fs_prg_free(b.prg);
    if (rc != 0) {
        fs_mat_free(m);
        return rc;
    }
    *x = m;
    return 0;
}

/* ---- ratings helpers ---- */

static int random_perm(const uint8_t key[32], size_t n, size_t **out, struct fs_err *err)
{
    struct wordbuf b;
    size_t *p = NULL;
    int rc;

    memset(&b, 0, sizeof b);
    p = malloc(n * sizeof *p);
    if (p == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        p[i] = i;
    }
    rc = stream_prg(key, STREAM_PERM, &b.prg, err);
    for (size_t i = n; rc == 0 && i > 1; i--) {
        uint64_t j = 0;
        size_t t;
        rc = wordbuf_below(&b, i, &j, err);
        t = p[i - 1];
        p[i - 1] = p[j];
        p[j] = t;
    }
    fs_prg_free(b.prg);
    if (rc != 0) {
        free(p);
        return rc;
    }
    *out = p;
    return 0;
}

/* ---- output ---- */

static int has_suffix(const char *s, const char *suf)
{
    size_t ls = strlen(s);
    size_t lf = strlen(suf);

    return ls >= lf && strcmp(s + ls - lf, suf) == 0;
}

static int report_file(struct gen_report *r, const char *path, const char *role, size_t rows,
                       size_t cols)
{
    /* cols == 0 marks a 1-D vector (shape [rows]). */
    json_t *f = cols == 0 ? json_pack("{s:s, s:s, s:[I]}", "path", path, "role", role, "shape",
                                      (json_int_t)rows)
                          : json_pack("{s:s, s:s, s:[I,I]}", "path", path, "role", role, "shape",
                                      (json_int_t)rows, (json_int_t)cols);

    if (f == NULL || json_array_append_new(r->files, f) != 0) {
        return FS_ENOMEM;
    }
    return 0;
}

static int write_dense(const char *cmd, const char *path, const fs_mat *m, const char *role,
                       struct gen_report *r)
{
    struct fs_err err;

    fs_err_clear(&err);
    if (cli_write_dense_any(path, m, &err) != 0) {
        return cli_fs_error(cmd, &err);
    }
    return report_file(r, path, role, m->rows, m->cols) == 0
               ? CLI_OK
               : cli_runtime_error(cmd, "out of memory");
}

static int write_sparse(const char *cmd, const char *path, const fs_csr *a, const char *role,
                        struct gen_report *r)
{
    struct fs_err err;
    fs_mat *d = NULL;
    int rc;

    fs_err_clear(&err);
    if (has_suffix(path, ".mtx") || has_suffix(path, ".mm")) {
        if (fs_mtx_write_csr(path, a, &err) != 0) {
            return cli_fs_error(cmd, &err);
        }
        return report_file(r, path, role, a->rows, a->cols) == 0
                   ? CLI_OK
                   : cli_runtime_error(cmd, "out of memory");
    }
    if (fs_csr_to_dense(a, &d, &err) != 0) {
        return cli_fs_error(cmd, &err);
    }
    rc = write_dense(cmd, path, d, role, r);
    fs_mat_free(d);
    return rc;
}

/* Side-file path: FILE minus extension + suffix, or DIR/name. */
static int side_path(const char *cmd, const struct gen_args *a, const char *suffix,
                     const char *name, char *buf, size_t cap)
{
    if (a->out != NULL) {
        const char *slash = strrchr(a->out, '/');
        const char *dot = strrchr(a->out, '.');
        size_t base = (dot != NULL && (slash == NULL || dot > slash)) ? (size_t)(dot - a->out)
                                                                      : strlen(a->out);
        if ((size_t)snprintf(buf, cap, "%.*s%s", (int)base, a->out, suffix) >= cap) {
            return cli_runtime_error(cmd, "%s: path too long", a->out);
        }
        return CLI_OK;
    }
    return cli_path_join(cmd, buf, cap, a->out_dir, name);
}

static int write_side_vec(const char *cmd, const struct gen_args *a, const double *s, size_t n,
                          struct gen_report *r)
{
    char path[PATH_CAP];
    struct fs_err err;
    int rc;

    fs_err_clear(&err);
    if ((rc = side_path(cmd, a, ".spectrum.npy", "spectrum.npy", path, sizeof path)) != 0) {
        return rc;
    }
    if (fs_npy_write_vec(path, s, n, &err) != 0) {
        return cli_fs_error(cmd, &err);
    }
    return report_file(r, path, "spectrum", n, 0) == 0 ? CLI_OK
                                                       : cli_runtime_error(cmd, "out of memory");
}

static int write_side_v(const char *cmd, const struct gen_args *a, const fs_mat *q2, size_t k,
                        struct gen_report *r)
{
    char path[PATH_CAP];
    fs_mat v = fs_mat_view(q2, 0, 0, q2->rows, k);
    fs_mat *c = fs_mat_dup(&v);
    int rc;

    if (c == NULL) {
        return cli_runtime_error(cmd, "out of memory");
    }
    rc = side_path(cmd, a, ".V.npy", "V.npy", path, sizeof path);
    if (rc == 0) {
        struct fs_err err;
        fs_err_clear(&err);
        if (fs_npy_write_mat(path, c, &err) != 0) {
            rc = cli_fs_error(cmd, &err);
        } else if (report_file(r, path, "V", c->rows, c->cols) != 0) {
            rc = cli_runtime_error(cmd, "out of memory");
        }
    }
    fs_mat_free(c);
    return rc;
}

static int write_parties_dense(const char *cmd, const struct gen_args *a, const fs_mat *x,
                               struct gen_report *r)
{
    char name[64];
    char path[PATH_CAP];
    size_t r0 = 0;
    int rc;

    if ((rc = cli_mkdir_p(cmd, a->out_dir)) != 0) {
        return rc;
    }
    for (size_t p = 0; p < a->nparties; p++) {
        fs_mat v = fs_mat_view(x, r0, 0, a->split[p], x->cols);
        fs_mat *c = fs_mat_dup(&v); /* compact copy: writers need not handle ld > rows */

        if (c == NULL) {
            return cli_runtime_error(cmd, "out of memory");
        }
        snprintf(name, sizeof name, "party-%zu.%s", p + 1, a->out_format);
        rc = cli_path_join(cmd, path, sizeof path, a->out_dir, name);
        if (rc == 0) {
            rc = write_dense(cmd, path, c, "party", r);
        }
        fs_mat_free(c);
        if (rc != 0) {
            return rc;
        }
        r0 += a->split[p];
    }
    return CLI_OK;
}

/* ---- ratings (streamed) ----
 *
 * Users are uniform: a first pass over a PRG stream deals the M ratings out
 * to users one by one (a multinomial), capped at the number of items (the
 * excess dealt again to users with room). Then user by user, in row order:
 * the user's items are drawn by weighted sampling WITHOUT replacement from
 * the item popularity w_j ∝ rank^(-alpha) (integer weights in a Fenwick tree,
 * so removing and restoring a weight is exact), each with a rating 1..5, and
 * the user's entries are written at once, sorted by item. Only the per-user
 * counts (4 bytes a user) and one user's entries are held: a MatrixMarket
 * file is streamed to disk; other formats (densified) gather their part
 * first. */

struct fenwick {
    uint64_t *t; /* 1-based */
    size_t n;
    size_t top; /* the highest power of two <= n */
};

static void fen_add(struct fenwick *f, size_t i, uint64_t delta) /* mod 2^64: also subtracts */
{
    for (size_t x = i + 1; x <= f->n; x += x & (~x + 1)) {
        f->t[x] += delta;
    }
}

/* The index j (0-based) with prefix(j) <= u < prefix(j + 1), for u < the total. */
static size_t fen_find(const struct fenwick *f, uint64_t u)
{
    size_t pos = 0;

    for (size_t step = f->top; step > 0; step >>= 1) {
        if (pos + step <= f->n && f->t[pos + step] <= u) {
            pos += step;
            u -= f->t[pos];
        }
    }
    return pos;
}

static int fen_init(struct fenwick *f, const uint64_t *w, size_t n, struct fs_err *err)
{
    f->t = calloc(n + 1, sizeof *f->t);
    if (f->t == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    f->n = n;
    for (size_t i = 1; i <= n; i++) {
        size_t up = i + (i & (~i + 1));
        f->t[i] += w[i - 1];
        if (up <= n) {
            f->t[up] += f->t[i];
        }
    }
    for (f->top = 1; f->top * 2 <= n; f->top *= 2) {
    }
    return 0;
}

/* Ratings per user: M draws of a uniform user, each capped at the items. */
static int ratings_degrees(const struct gen_args *a, uint32_t **out, struct fs_err *err)
{
    struct wordbuf b;
    uint32_t *deg = calloc(a->rows, sizeof *deg);
    size_t excess = 0;
    int rc;

    *out = NULL;
    memset(&b, 0, sizeof b);
    if (deg == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory for %zu users", a->rows);
    }
    rc = stream_prg(a->seed, STREAM_RATINGS, &b.prg, err);
    for (size_t t = 0; rc == 0 && t < a->nnz; t++) {
        uint64_t u = 0;
        if ((rc = wordbuf_below(&b, a->rows, &u, err)) == 0) {
            if (deg[u] < a->cols) {
                deg[u]++;
            } else {
                excess++;
            }
        }
    }
    /* nnz <= rows * cols / 2, so a user with room is found in < 2 draws on average */
    while (rc == 0 && excess > 0) {
        uint64_t u = 0;
        if ((rc = wordbuf_below(&b, a->rows, &u, err)) == 0 && deg[u] < a->cols) {
            deg[u]++;
            excess--;
        }
    }
    fs_prg_free(b.prg);
    if (rc != 0) {
        free(deg);
        return rc;
    }
    *out = deg;
    return 0;
}

/* One output of the ratings: MatrixMarket streamed to a temporary file then
 * renamed, or (npy/csv) the triplets gathered and densified at the end. */
struct rsink {
    const char *path;
    const char *role;
    char tmp[PATH_CAP];
    FILE *f;
    char *buf;
    size_t len;
    size_t rows, nnz; /* declared */
    size_t put;       /* written so far */
    size_t *ri, *ci;
    double *v;
};

#define RSINK_BUF (1u << 20)

static int rsink_open(const char *cmd, struct rsink *s, const char *path, const char *role,
                      size_t rows, size_t cols, size_t nnz)
{
    memset(s, 0, sizeof *s);
    s->path = path;
    s->role = role;
    s->rows = rows;
    s->nnz = nnz;
    if (!has_suffix(path, ".mtx") && !has_suffix(path, ".mm")) {
        size_t n = nnz > 0 ? nnz : 1;
        s->ri = malloc(n * sizeof *s->ri);
        s->ci = malloc(n * sizeof *s->ci);
        s->v = malloc(n * sizeof *s->v);
        if (s->ri == NULL || s->ci == NULL || s->v == NULL) {
            return cli_runtime_error(cmd, "out of memory for %zu ratings", nnz);
        }
        return CLI_OK;
    }
    if ((size_t)snprintf(s->tmp, sizeof s->tmp, "%s.tmp-XXXXXX", path) >= sizeof s->tmp) {
        return cli_runtime_error(cmd, "%s: path too long", path);
    }
    {
        int fd = mkstemp(s->tmp);
        if (fd < 0) {
            s->tmp[0] = '\0';
            return cli_runtime_error(cmd, "%s: cannot create a file next to it", path);
        }
        s->f = fdopen(fd, "wb");
        if (s->f == NULL) {
            close(fd);
            return cli_runtime_error(cmd, "%s: cannot open", path);
        }
    }
    s->buf = malloc(RSINK_BUF);
    if (s->buf == NULL) {
        return cli_runtime_error(cmd, "out of memory");
    }
    s->len = (size_t)snprintf(s->buf, RSINK_BUF,
                              "%%%%MatrixMarket matrix coordinate integer general\n"
                              "%% fedsvd gen ratings: users x items, ratings 1..5\n"
                              "%zu %zu %zu\n",
                              rows, cols, nnz);
    return CLI_OK;
}

static int rsink_flush(const char *cmd, struct rsink *s)
{
    if (s->len > 0 && fwrite(s->buf, 1, s->len, s->f) != s->len) {
        return cli_runtime_error(cmd, "%s: write failed", s->path);
    }
    s->len = 0;
    return CLI_OK;
}

static char *put_dec(char *p, uint64_t v)
{
    char t[24];
    int n = 0;

    do {
        t[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    while (n > 0) {
        *p++ = t[--n];
    }
    return p;
}

/* Entry (row, col) = stars, 0-based row and column. */
static int rsink_put(const char *cmd, struct rsink *s, size_t row, size_t col, unsigned stars)
{
    if (s->f == NULL) {
        s->ri[s->put] = row;
        s->ci[s->put] = col;
        s->v[s->put] = (double)stars;
        s->put++;
        return CLI_OK;
    }
    if (s->len + 64 > RSINK_BUF) {
        int rc = rsink_flush(cmd, s);
        if (rc != CLI_OK) {
            return rc;
        }
    }
    {
        char *p = s->buf + s->len;
        p = put_dec(p, (uint64_t)row + 1);
        *p++ = ' ';
        p = put_dec(p, (uint64_t)col + 1);
        *p++ = ' ';
        *p++ = (char)('0' + stars);
        *p++ = '\n';
        s->len = (size_t)(p - s->buf);
    }
    s->put++;
    return CLI_OK;
}

static void rsink_discard(struct rsink *s)
{
    if (s->f != NULL) {
        fclose(s->f);
        s->f = NULL;
    }
    if (s->tmp[0] != '\0') {
        unlink(s->tmp);
        s->tmp[0] = '\0';
    }
    free(s->buf);
    free(s->ri);
    free(s->ci);
    free(s->v);
    s->buf = NULL;
    s->ri = s->ci = NULL;
    s->v = NULL;
}

static int rsink_close(const char *cmd, struct rsink *s, size_t cols, struct gen_report *r)
{
    int rc = CLI_OK;

    if (s->put != s->nnz) { /* cannot happen: the counts are dealt first */
        rc = cli_runtime_error(cmd, "%s: wrote %zu of %zu ratings", s->path, s->put, s->nnz);
    } else if (s->f != NULL) {
        rc = rsink_flush(cmd, s);
        if (rc == CLI_OK && fflush(s->f) != 0) {
            rc = cli_runtime_error(cmd, "%s: write failed", s->path);
        }
        if (fclose(s->f) != 0 && rc == CLI_OK) {
            rc = cli_runtime_error(cmd, "%s: write failed", s->path);
        }
        s->f = NULL;
        if (rc == CLI_OK && rename(s->tmp, s->path) != 0) {
            rc = cli_runtime_error(cmd, "%s: cannot rename the finished file into place", s->path);
        }
        if (rc == CLI_OK) {
            s->tmp[0] = '\0';
            if (report_file(r, s->path, s->role, s->rows, cols) != 0) {
                rc = cli_runtime_error(cmd, "out of memory");
            }
        }
    } else {
        fs_csr *c = NULL;
        struct fs_err err;
        fs_err_clear(&err);
        if (fs_csr_from_coo(s->rows, cols, s->nnz, s->ri, s->ci, s->v, &c, &err) != 0) {
            rc = cli_fs_error(cmd, &err);
        } else {
            rc = write_sparse(cmd, s->path, c, s->role, r);
        }
        fs_csr_free(c);
    }
    if (rc == CLI_OK) {
        json_t *last = json_array_get(r->files, json_array_size(r->files) - 1);
        if (last == NULL || json_object_set_new(last, "nnz", json_integer((json_int_t)s->nnz))) {
            rc = cli_runtime_error(cmd, "out of memory");
        }
    }
    rsink_discard(s);
    return rc;
}

static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x;
    uint64_t b = *(const uint64_t *)y;

    return a < b ? -1 : a > b;
}

struct ratings_state {
    uint32_t *deg;
    size_t *perm; /* popularity rank -> item */
    uint64_t *w;  /* integer weight of each rank */
    uint64_t wtotal;
    size_t *rank;  /* one user's ranks drawn */
    uint64_t *ent; /* one user's entries: item << 3 | stars */
    struct fenwick fen;
    struct wordbuf b;
    struct rsink whole;
    struct rsink part;
};

static int ratings_setup(const struct gen_args *a, struct ratings_state *st, struct fs_err *err)
{
    int rc;

    st->w = malloc(a->cols * sizeof *st->w);
    st->ent = malloc(a->cols * sizeof *st->ent);
    st->rank = malloc(a->cols * sizeof *st->rank);
    if (st->w == NULL || st->ent == NULL || st->rank == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    for (size_t j = 0; j < a->cols; j++) {
        double x = ldexp(pow((double)(j + 1), -a->alpha), 40);
        st->w[j] = x < 1.0 ? 1 : (uint64_t)llround(x);
        st->wtotal += st->w[j];
    }
    if ((rc = fen_init(&st->fen, st->w, a->cols, err)) != 0 ||
        (rc = random_perm(a->seed, a->cols, &st->perm, err)) != 0 ||
        (rc = ratings_degrees(a, &st->deg, err)) != 0) {
        return rc;
    }
    return stream_prg(a->seed, STREAM_ITEMS, &st->b.prg, err);
}

/* Draw user u's entries into st->ent, sorted by item. */
static int ratings_user(struct ratings_state *st, size_t u, struct fs_err *err)
{
    uint64_t total = st->wtotal;
    size_t d = st->deg[u];
    size_t done = 0;
    int rc = 0;

    for (; done < d; done++) {
        uint64_t x = 0;
        uint64_t stars = 0;
        size_t j;
        if ((rc = wordbuf_below(&st->b, total, &x, err)) != 0 ||
            (rc = wordbuf_below(&st->b, 5, &stars, err)) != 0) {
            break;
        }
        j = fen_find(&st->fen, x);
        fen_add(&st->fen, j, (uint64_t)0 - st->w[j]); /* without replacement */
        total -= st->w[j];
        st->rank[done] = j;
        st->ent[done] = ((uint64_t)st->perm[j] << 3) | (stars + 1);
    }
    for (size_t t = 0; t < done; t++) {
        fen_add(&st->fen, st->rank[t], st->w[st->rank[t]]);
    }
    if (rc == 0) {
        qsort(st->ent, d, sizeof *st->ent, cmp_u64);
    }
    return rc;
}

static void ratings_clear(struct ratings_state *st)
{
    rsink_discard(&st->whole);
    rsink_discard(&st->part);
    fs_prg_free(st->b.prg);
    free(st->fen.t);
    free(st->deg);
    free(st->perm);
    free(st->w);
    free(st->rank);
    free(st->ent);
}

static int generate_ratings(const char *cmd, const struct gen_args *a, struct gen_report *r)
{
    struct ratings_state st;
    struct fs_err err;
    size_t u = 0;
    size_t nparts = a->out_dir != NULL ? a->nparties : 1;
    int rc = CLI_OK;

    memset(&st, 0, sizeof st);
    fs_err_clear(&err);
    if (ratings_setup(a, &st, &err) != 0) {
        rc = cli_fs_error(cmd, &err);
        goto out;
    }
    if (a->out != NULL &&
        (rc = rsink_open(cmd, &st.whole, a->out, "matrix", a->rows, a->cols, a->nnz)) != 0) {
        goto out;
    }
    if (a->out_dir != NULL && (rc = cli_mkdir_p(cmd, a->out_dir)) != 0) {
        goto out;
    }
    for (size_t p = 0; p < nparts; p++) {
        size_t n = a->out_dir != NULL ? a->split[p] : a->rows;
        char name[64];
        char path[PATH_CAP];

        if (a->out_dir != NULL) {
            size_t pnnz = 0;
            for (size_t i = u; i < u + n; i++) {
                pnnz += st.deg[i];
            }
            snprintf(name, sizeof name, "party-%zu.%s", p + 1, a->out_format);
            if ((rc = cli_path_join(cmd, path, sizeof path, a->out_dir, name)) != 0 ||
                (rc = rsink_open(cmd, &st.part, path, "party", n, a->cols, pnnz)) != 0) {
                goto out;
            }
        }
        for (size_t i = 0; i < n; i++, u++) {
            if (ratings_user(&st, u, &err) != 0) {
                rc = cli_fs_error(cmd, &err);
                goto out;
            }
            for (size_t t = 0; t < st.deg[u]; t++) {
                size_t item = (size_t)(st.ent[t] >> 3);
                unsigned stars = (unsigned)(st.ent[t] & 7);
                if ((a->out != NULL && (rc = rsink_put(cmd, &st.whole, u, item, stars)) != 0) ||
                    (a->out_dir != NULL && (rc = rsink_put(cmd, &st.part, i, item, stars)) != 0)) {
                    goto out;
                }
            }
        }
        if (a->out_dir != NULL && (rc = rsink_close(cmd, &st.part, a->cols, r)) != 0) {
            goto out;
        }
    }
    if (a->out != NULL) {
        rc = rsink_close(cmd, &st.whole, a->cols, r);
    }
out:
    ratings_clear(&st);
    return rc;
}

/* ---- argument parsing ---- */

static int parse_int_value(const char *cmd, const char *flag, const char *s, double *out)
{
    int rc = cli_parse_double(cmd, flag, s, -9007199254740992.0, CLI_CLOSED, 9007199254740992.0,
                              CLI_CLOSED, out);

    if (rc == CLI_OK && *out != floor(*out)) {
        return cli_usage_error(cmd, "%s: expected an integer, got '%s'", flag, s);
    }
    return rc;
}

static int parse_split(const char *cmd, struct gen_args *a, const char *s_parties,
                       const char *s_split)
{
    size_t k = 0;
    size_t sum = 0;
    int rc;

    if (s_parties != NULL &&
        (rc = cli_parse_size(cmd, "--parties", s_parties, 1, MAX_PARTIES, &k)) != 0) {
        return rc;
    }
    if (s_split != NULL) {
        if ((rc = cli_parse_size_list(cmd, "--split", s_split, MAX_PARTIES, &a->split,
                                      &a->nparties)) != 0) {
            return rc;
        }
        if (k != 0 && k != a->nparties) {
            return cli_usage_error(cmd, "--parties %zu but --split lists %zu sizes", k,
                                   a->nparties);
        }
        for (size_t i = 0; i < a->nparties; i++) {
            sum += a->split[i];
        }
        if (sum != a->rows) {
            return cli_usage_error(cmd, "--split sizes add up to %zu, not the %zu rows", sum,
                                   a->rows);
        }
        return CLI_OK;
    }
    if (k > a->rows) {
        return cli_usage_error(cmd, "--parties %zu is more than the %zu rows", k, a->rows);
    }
    a->split = calloc(k, sizeof *a->split);
    if (a->split == NULL) {
        return cli_runtime_error(cmd, "out of memory");
    }
    a->nparties = k;
    for (size_t i = 0; i < k; i++) {
        a->split[i] = a->rows / k + (i < a->rows % k ? 1 : 0);
    }
    return CLI_OK;
}

struct gen_strs {
    const char *rows, *cols, *alpha, *low, *high, *rank, *gap, *noise, *decay, *users, *items, *nnz,
        *ratings, *seed, *out, *out_dir, *parties, *split, *out_format, *format;
};

static int check_allowed(const char *cmd, const struct gen_strs *s, unsigned allowed)
{
    const struct {
        const char *v;
        unsigned bit;
        const char *name;
    } t[] = {
        {s->rows, O_ROWS, "rows"},      {s->cols, O_COLS, "cols"},    {s->alpha, O_ALPHA, "alpha"},
        {s->low, O_LOW, "low"},         {s->high, O_HIGH, "high"},    {s->rank, O_RANK, "rank"},
        {s->gap, O_GAP, "gap"},         {s->noise, O_NOISE, "noise"}, {s->decay, O_DECAY, "decay"},
        {s->users, O_USERS, "users"},   {s->items, O_ITEMS, "items"}, {s->nnz, O_NNZ, "nnz"},
        {s->ratings, O_NNZ, "ratings"},
    };

    for (size_t i = 0; i < NOPTS(t); i++) {
        if (t[i].v != NULL && (allowed & t[i].bit) == 0) {
            return cli_usage_error(cmd, "option '--%s' does not apply to this kind", t[i].name);
        }
    }
    return CLI_OK;
}

static int parse_kind_args(const char *cmd, const struct gen_strs *s, struct gen_args *a)
{
    enum gen_kind k = a->kind->kind;
    int rc;

    if (k == KIND_RATINGS) {
        const char *m = s->nnz != NULL ? s->nnz : s->ratings;
        if (s->nnz != NULL && s->ratings != NULL) {
            return cli_usage_error(cmd, "--ratings is another name for --nnz: give one of them");
        }
        if (s->users == NULL || s->items == NULL || m == NULL) {
            return cli_usage_error(cmd, "--users, --items and --ratings (--nnz) are required");
        }
        if ((rc = cli_parse_size(cmd, "--users", s->users, 1, MAX_DIM, &a->rows)) != 0 ||
            (rc = cli_parse_size(cmd, "--items", s->items, 1, (size_t)UINT32_MAX, &a->cols)) != 0 ||
            (rc = cli_parse_size(cmd, s->nnz != NULL ? "--nnz" : "--ratings", m, 1, MAX_ELEMS,
                                 &a->nnz)) != 0) {
            return rc;
        }
        if ((double)a->nnz > 0.5 * (double)a->rows * (double)a->cols) {
            return cli_usage_error(cmd,
                                   "--nnz %zu is more than half of the %zu x %zu entries; "
                                   "use a dense kind",
                                   a->nnz, a->rows, a->cols);
        }
    } else {
        if (s->rows == NULL || s->cols == NULL) {
            return cli_usage_error(cmd, "--rows and --cols are required");
        }
        if ((rc = cli_parse_size(cmd, "--rows", s->rows, 1, MAX_DIM, &a->rows)) != 0 ||
            (rc = cli_parse_size(cmd, "--cols", s->cols, 1, MAX_DIM, &a->cols)) != 0) {
            return rc;
        }
        if ((double)a->rows * (double)a->cols > (double)MAX_ELEMS) {
            return cli_usage_error(cmd, "%zu x %zu is over the cap of %zu entries", a->rows,
                                   a->cols, MAX_ELEMS);
        }
    }
    a->alpha = 1.0;
    if (s->alpha != NULL && (rc = cli_parse_double(cmd, "--alpha", s->alpha, 0, CLI_CLOSED, 100,
                                                   CLI_CLOSED, &a->alpha)) != 0) {
        return rc;
    }
    if (k == KIND_UNIFORM_INT) {
        a->low = 0;
        a->high = 5;
        if ((s->low != NULL && (rc = parse_int_value(cmd, "--low", s->low, &a->low)) != 0) ||
            (s->high != NULL && (rc = parse_int_value(cmd, "--high", s->high, &a->high)) != 0)) {
            return rc;
        }
        if (a->high < a->low) {
            return cli_usage_error(cmd, "--high %g is below --low %g", a->high, a->low);
        }
        if (a->high - a->low >= 9007199254740992.0) {
            return cli_usage_error(cmd, "--high - --low must be below 2^53");
        }
    }
    if (k == KIND_PLANTED) {
        size_t r = a->rows < a->cols ? a->rows : a->cols;
        a->gap = 0.85;
        a->decay = 0.95;
        a->noise = 0;
        if (s->rank == NULL) {
            return cli_usage_error(cmd, "--rank is required");
        }
        if ((rc = cli_parse_size(cmd, "--rank", s->rank, 1, r, &a->rank)) != 0 ||
            (s->gap != NULL && (rc = cli_parse_double(cmd, "--gap", s->gap, 0, CLI_OPEN, 1,
                                                      CLI_CLOSED, &a->gap)) != 0) ||
            (s->decay != NULL && (rc = cli_parse_double(cmd, "--decay", s->decay, 0, CLI_OPEN, 1,
                                                        CLI_CLOSED, &a->decay)) != 0) ||
            (s->noise != NULL && (rc = cli_parse_double(cmd, "--noise", s->noise, 0, CLI_CLOSED, 0,
                                                        CLI_NONE, &a->noise)) != 0)) {
            return rc;
        }
    }
    return CLI_OK;
}

/* Ratings written as .npy/.csv are densified: the dense size must be capped. */
static int check_dense_ratings(const char *cmd, const struct gen_args *a)
{
    size_t most = 0;

    if (a->out != NULL && !has_suffix(a->out, ".mtx") && !has_suffix(a->out, ".mm")) {
        most = a->rows;
    }
    if (a->out_dir != NULL && strcmp(a->out_format, "mtx") != 0) {
        for (size_t p = 0; p < a->nparties; p++) {
            most = a->split[p] > most ? a->split[p] : most;
        }
    }
    if ((double)most * (double)a->cols > (double)MAX_ELEMS) {
        return cli_usage_error(cmd,
                               "dense output of %zu x %zu ratings is over the cap of %zu entries; "
                               "write MatrixMarket (.mtx)",
                               most, a->cols, MAX_ELEMS);
    }
    return CLI_OK;
}

static int parse_args(int argc, char **argv, struct gen_args *a, int *help)
{
    const char *cmd = "gen";
    struct gen_strs s;
    struct cli_opt opts[] = {
        {"rows", CLI_OPT_VALUE, &s.rows, NULL},
        {"cols", CLI_OPT_VALUE, &s.cols, NULL},
        {"alpha", CLI_OPT_VALUE, &s.alpha, NULL},
        {"low", CLI_OPT_VALUE, &s.low, NULL},
        {"high", CLI_OPT_VALUE, &s.high, NULL},
        {"rank", CLI_OPT_VALUE, &s.rank, NULL},
        {"gap", CLI_OPT_VALUE, &s.gap, NULL},
        {"noise", CLI_OPT_VALUE, &s.noise, NULL},
        {"decay", CLI_OPT_VALUE, &s.decay, NULL},
        {"users", CLI_OPT_VALUE, &s.users, NULL},
        {"items", CLI_OPT_VALUE, &s.items, NULL},
        {"nnz", CLI_OPT_VALUE, &s.nnz, NULL},
        {"ratings", CLI_OPT_VALUE, &s.ratings, NULL},
        {"seed", CLI_OPT_VALUE, &s.seed, NULL},
        {"out", CLI_OPT_VALUE, &s.out, NULL},
        {"out-dir", CLI_OPT_DIR, &s.out_dir, NULL},
        {"parties", CLI_OPT_VALUE, &s.parties, NULL},
        {"split", CLI_OPT_VALUE, &s.split, NULL},
        {"out-format", CLI_OPT_VALUE, &s.out_format, NULL},
        {"format", CLI_OPT_VALUE, &s.format, NULL},
    };
    const char *pos[1] = {NULL};
    size_t npos = 0;
    int rc;

    memset(&s, 0, sizeof s);
    rc = cli_parse(cmd, argc, argv, opts, NOPTS(opts), pos, 1, &npos, help);
    if (rc != CLI_OK || *help) {
        return rc;
    }
    if (npos == 0) {
        return cli_usage_error(cmd, "missing KIND (powerlaw, uniform-int, planted or ratings)");
    }
    for (size_t i = 0; i < NOPTS(kinds); i++) {
        if (strcmp(pos[0], kinds[i].name) == 0) {
            a->kind = &kinds[i];
        }
    }
    if (a->kind == NULL) {
        return cli_usage_error(cmd,
                               "unknown KIND '%s' (expected powerlaw, uniform-int, planted or "
                               "ratings)",
                               pos[0]);
    }
    if ((rc = check_allowed(cmd, &s, a->kind->allowed)) != 0 ||
        (rc = parse_kind_args(cmd, &s, a)) != 0 ||
        (rc = cli_parse_format(cmd, s.format, &a->json)) != 0) {
        return rc;
    }
    a->out = s.out;
    a->out_dir = s.out_dir;
    if (a->out == NULL && a->out_dir == NULL) {
        return cli_usage_error(cmd, "give --out FILE and/or --out-dir DIR with --parties K");
    }
    if (a->out_dir != NULL && s.parties == NULL && s.split == NULL) {
        return cli_usage_error(cmd, "--out-dir needs --parties K or --split N1,N2,...");
    }
    if (a->out_dir == NULL && (s.parties != NULL || s.split != NULL || s.out_format != NULL)) {
        return cli_usage_error(cmd, "--parties, --split and --out-format need --out-dir DIR");
    }
    a->out_format = a->kind->kind == KIND_RATINGS ? "mtx" : "npy";
    if (s.out_format != NULL) {
        if (strcmp(s.out_format, "npy") != 0 && strcmp(s.out_format, "csv") != 0 &&
            strcmp(s.out_format, "mtx") != 0) {
            return cli_usage_error(cmd, "--out-format: expected npy, csv or mtx, got '%s'",
                                   s.out_format);
        }
        a->out_format = s.out_format;
    }
    if (a->out_dir != NULL && (rc = parse_split(cmd, a, s.parties, s.split)) != 0) {
        return rc;
    }
    if (a->kind->kind == KIND_RATINGS && (rc = check_dense_ratings(cmd, a)) != 0) {
        return rc;
    }
    return cli_parse_seed(cmd, s.seed, a->seed, a->seed_hex);
}

/* ---- the command ---- */

static int spectrum_for(const struct gen_args *a, double **out)
{
    size_t r = a->rows < a->cols ? a->rows : a->cols;
    double *s = malloc(r * sizeof *s);
    double total = 0;

    *out = NULL;
    if (s == NULL) {
        return FS_ENOMEM;
    }
    for (size_t i = 0; i < r; i++) {
        if (a->kind->kind == KIND_POWERLAW) {
            s[i] = pow((double)(i + 1), -a->alpha);
            continue;
        }
        /* planted: eigenvalues lambda_i = s_i^2 */
        if (i == 0) {
            s[i] = 1.0;
        } else if (i == a->rank) {
            s[i] = a->gap * s[i - 1];
        } else {
            s[i] = a->decay * s[i - 1];
        }
    }
    if (a->kind->kind == KIND_PLANTED) {
        for (size_t i = 0; i < r; i++) {
            total += s[i];
        }
        for (size_t i = 0; i < r; i++) {
            s[i] = sqrt((double)a->rows * (double)a->cols * s[i] / total);
        }
    }
    *out = s;
    return 0;
}

static json_t *params_json(const struct gen_args *a)
{
    switch (a->kind->kind) {
    case KIND_POWERLAW:
        return json_pack("{s:o}", "alpha", cli_json_num(a->alpha));
    case KIND_UNIFORM_INT:
        return json_pack("{s:o, s:o}", "low", cli_json_num(a->low), "high", cli_json_num(a->high));
    case KIND_PLANTED:
        return json_pack("{s:I, s:o, s:o, s:o}", "rank", (json_int_t)a->rank, "gap",
                         cli_json_num(a->gap), "decay", cli_json_num(a->decay), "noise",
                         cli_json_num(a->noise));
    case KIND_RATINGS:
        return json_pack("{s:I, s:o}", "nnz", (json_int_t)a->nnz, "alpha", cli_json_num(a->alpha));
    }
    return json_object();
}

static int generate_dense(const char *cmd, const struct gen_args *a, struct gen_report *r)
{
    struct fs_err err;
    fs_mat *x = NULL;
    fs_mat *q2 = NULL;
    double *s = NULL;
    size_t rmin = a->rows < a->cols ? a->rows : a->cols;
    enum gen_kind k = a->kind->kind;
    int rc = CLI_OK;

    fs_err_clear(&err);
    if (k == KIND_UNIFORM_INT) {
        if (gen_uniform_int(a, &x, &err) != 0) {
            rc = cli_fs_error(cmd, &err);
            goto out;
        }
    } else {
        if (spectrum_for(a, &s) != 0) {
            rc = cli_runtime_error(cmd, "out of memory");
            goto out;
        }
        if (gen_lowrank(a, s, &x, k == KIND_PLANTED ? &q2 : NULL, &err) != 0 ||
            (a->noise > 0 && add_noise(a, x, &err) != 0)) {
            rc = cli_fs_error(cmd, &err);
            goto out;
        }
    }
    if (a->out != NULL && (rc = write_dense(cmd, a->out, x, "matrix", r)) != 0) {
        goto out;
    }
    if (a->out_dir != NULL && (rc = write_parties_dense(cmd, a, x, r)) != 0) {
        goto out;
    }
    if (s != NULL && a->noise == 0 && (rc = write_side_vec(cmd, a, s, rmin, r)) != 0) {
        goto out;
    }
    if (q2 != NULL) {
        rc = write_side_v(cmd, a, q2, a->rank, r);
    }
out:
    free(s);
    fs_mat_free(q2);
    fs_mat_free(x);
    return rc;
}

int cmd_gen(int argc, char **argv)
{
    const char *cmd = "gen";
    struct gen_args a;
    struct gen_report rep = {NULL};
    double t0;
    int help = 0;
    int rc;

    memset(&a, 0, sizeof a);
    rc = parse_args(argc, argv, &a, &help);
    if (rc != CLI_OK) {
        goto out;
    }
    if (help) {
        gen_help();
        goto out;
    }
    rep.files = json_array();
    if (rep.files == NULL) {
        rc = cli_runtime_error(cmd, "out of memory");
        goto out;
    }
    t0 = cli_now();
    rc = a.kind->kind == KIND_RATINGS ? generate_ratings(cmd, &a, &rep)
                                      : generate_dense(cmd, &a, &rep);
    if (rc != CLI_OK) {
        goto out;
    }
    if (a.json) {
        json_t *o =
            json_pack("{s:s, s:[I,I], s:s, s:o, s:o, s:O}", "kind", a.kind->name, "shape",
                      (json_int_t)a.rows, (json_int_t)a.cols, "seed", a.seed_hex, "seconds",
                      cli_json_num(cli_now() - t0), "params", params_json(&a), "files", rep.files);
        rc = cli_print_json(cmd, o);
    } else {
        size_t i;
        json_t *f;
        printf("gen %s: %zu x %zu, seed %s (%.3f s)\n", a.kind->name, a.rows, a.cols, a.seed_hex,
               cli_now() - t0);
        json_array_foreach(rep.files, i, f)
        {
            json_t *shape = json_object_get(f, "shape");
            long long r0 = (long long)json_integer_value(json_array_get(shape, 0));

            printf("wrote %s (%s, ", json_string_value(json_object_get(f, "path")),
                   json_string_value(json_object_get(f, "role")));
            if (json_array_size(shape) == 1) {
                printf("%lld values)\n", r0);
            } else {
                printf("%lld x %lld)\n", r0,
                       (long long)json_integer_value(json_array_get(shape, 1)));
            }
        }
    }
out:
    json_decref(rep.files);
    free(a.split);
    return rc;
}
