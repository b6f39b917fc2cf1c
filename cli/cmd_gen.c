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
    STREAM_PERM = 6
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
           "               with orthonormal columns, r = min(N, D) (seed 003 sec. 6.1). Also\n"
           "               writes the exact singular values (see side files).\n"
           "  uniform-int  --rows N --cols D [--low L] [--high H]\n"
           "               i.i.d. integers uniform in [L, H] (default [0, 5], seed 001 sec. 6)\n"
           "  planted      --rows N --cols D --rank K [--gap G] [--decay Q] [--noise SIGMA]\n"
           "               X = U diag(s) V^T (+ SIGMA * Gaussian noise), r = min(N, D), with\n"
           "               eigenvalues lambda_i = s_i^2: lambda_i = Q^(i-1) for i <= K, then\n"
           "               lambda_(K+1) = G * lambda_K (the eigengap ratio, default G = 0.85),\n"
           "               decaying by Q (default 0.95) after that; scaled so that\n"
           "               ||U diag(s) V^T||_F^2 = N*D (entries of RMS 1). Writes the true top-K\n"
           "               V and, when SIGMA = 0 (default), the exact singular values.\n"
           "  ratings      --users N --items D --nnz M [--alpha A]\n"
           "               sparse ratings 1..5 of M distinct (user, item) pairs, users uniform,\n"
           "               item popularity proportional to rank^(-A) (items randomly\n"
           "               permuted); written as MatrixMarket (.mtx) unless told otherwise\n"
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

/* Uniform in [0, 1) with 53 bits. */
static int wordbuf_uniform(struct wordbuf *b, double *out, struct fs_err *err)
{
    uint64_t w = 0;
    int rc = wordbuf_next(b, &w, err);

    *out = (double)(w >> 11) * 0x1.0p-53;
    return rc;
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

/* ---- ratings ---- */

/* Open-addressing set of nonzero 64-bit keys. */
struct keyset {
    uint64_t *slot;
    size_t mask;
};

static int keyset_init(struct keyset *s, size_t n, struct fs_err *err)
{
    size_t cap = 16;

    while (cap < 2 * n) {
        cap *= 2;
    }
    s->slot = calloc(cap, sizeof *s->slot);
    s->mask = cap - 1;
    return s->slot == NULL ? fs_err_set(err, FS_ENOMEM, "out of memory for %zu ratings", n) : 0;
}

/* 1 if inserted, 0 if already present. */
static int keyset_insert(struct keyset *s, uint64_t key)
{
    size_t h = (size_t)((key * 0x9e3779b97f4a7c15ULL) >> 17) & s->mask;

    while (s->slot[h] != 0) {
        if (s->slot[h] == key) {
            return 0;
        }
        h = (h + 1) & s->mask;
    }
    s->slot[h] = key;
    return 1;
}

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

/* First index with cum[idx] > u (cum ascending, cum[n-1] > u). */
static size_t upper_search(const double *cum, size_t n, double u)
{
    size_t lo = 0;
    size_t hi = n - 1;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cum[mid] > u) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    return lo;
}

static int gen_ratings(const struct gen_args *a, fs_csr **out, struct fs_err *err)
{
    struct wordbuf b;
    struct keyset set = {NULL, 0};
    size_t *perm = NULL;
    double *cum = NULL;
    size_t *ri = NULL;
    size_t *ci = NULL;
    double *v = NULL;
    size_t placed = 0;
    size_t attempts = 0;
    size_t max_attempts = 50 * a->nnz + 100000;
    int rc;

    *out = NULL;
    memset(&b, 0, sizeof b);
    cum = malloc(a->cols * sizeof *cum);
    ri = malloc(a->nnz * sizeof *ri);
    ci = malloc(a->nnz * sizeof *ci);
    v = malloc(a->nnz * sizeof *v);
    if (cum == NULL || ri == NULL || ci == NULL || v == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "out of memory for %zu ratings", a->nnz);
        goto out;
    }
    for (size_t j = 0; j < a->cols; j++) {
        cum[j] = (j > 0 ? cum[j - 1] : 0.0) + pow((double)(j + 1), -a->alpha);
    }
    if ((rc = keyset_init(&set, a->nnz, err)) != 0 ||
        (rc = random_perm(a->seed, a->cols, &perm, err)) != 0 ||
        (rc = stream_prg(a->seed, STREAM_RATINGS, &b.prg, err)) != 0) {
        goto out;
    }
    while (placed < a->nnz) {
        uint64_t user = 0;
        uint64_t stars = 0;
        double u = 0;
        size_t item;

        if (++attempts > max_attempts) {
            rc = fs_err_set(err, FS_ERANGE,
                            "placed only %zu of %zu distinct ratings after %zu draws; "
                            "lower --nnz or --alpha",
                            placed, a->nnz, max_attempts);
            goto out;
        }
        if ((rc = wordbuf_below(&b, a->rows, &user, err)) != 0 ||
            (rc = wordbuf_uniform(&b, &u, err)) != 0 ||
            (rc = wordbuf_below(&b, 5, &stars, err)) != 0) {
            goto out;
        }
        item = perm[upper_search(cum, a->cols, u * cum[a->cols - 1])];
        if (!keyset_insert(&set, (uint64_t)user * a->cols + item + 1)) {
            continue;
        }
        ri[placed] = (size_t)user;
        ci[placed] = item;
        v[placed] = (double)(stars + 1);
        placed++;
    }
    rc = fs_csr_from_coo(a->rows, a->cols, a->nnz, ri, ci, v, out, err);
out:
    fs_prg_free(b.prg);
    free(set.slot);
    free(v);
    free(ci);
    free(ri);
    free(cum);
    free(perm);
    return rc;
}

/* New CSR of rows [r0, r0 + n) of a. */
static int csr_rows(const fs_csr *a, size_t r0, size_t n, fs_csr **out, struct fs_err *err)
{
    size_t base = a->rowptr[r0];
    size_t nnz = a->rowptr[r0 + n] - base;
    size_t *ri = malloc((nnz > 0 ? nnz : 1) * sizeof *ri);
    size_t *ci = malloc((nnz > 0 ? nnz : 1) * sizeof *ci);
    int rc;

    if (ri == NULL || ci == NULL) {
        free(ri);
        free(ci);
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        for (size_t t = a->rowptr[r0 + i]; t < a->rowptr[r0 + i + 1]; t++) {
            ri[t - base] = i;
            ci[t - base] = a->colidx[t];
        }
    }
    rc = fs_csr_from_coo(n, a->cols, nnz, ri, ci, a->vals + base, out, err);
    free(ri);
    free(ci);
    return rc;
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

static int write_parties_sparse(const char *cmd, const struct gen_args *a, const fs_csr *x,
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
        fs_csr *c = NULL;
        struct fs_err err;

        fs_err_clear(&err);
        if (csr_rows(x, r0, a->split[p], &c, &err) != 0) {
            return cli_fs_error(cmd, &err);
        }
        snprintf(name, sizeof name, "party-%zu.%s", p + 1, a->out_format);
        rc = cli_path_join(cmd, path, sizeof path, a->out_dir, name);
        if (rc == 0) {
            rc = write_sparse(cmd, path, c, "party", r);
        }
        fs_csr_free(c);
        if (rc != 0) {
            return rc;
        }
        r0 += a->split[p];
    }
    return CLI_OK;
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
        *seed, *out, *out_dir, *parties, *split, *out_format, *format;
};

static int check_allowed(const char *cmd, const struct gen_strs *s, unsigned allowed)
{
    const struct {
        const char *v;
        unsigned bit;
        const char *name;
    } t[] = {
        {s->rows, O_ROWS, "rows"},    {s->cols, O_COLS, "cols"},    {s->alpha, O_ALPHA, "alpha"},
        {s->low, O_LOW, "low"},       {s->high, O_HIGH, "high"},    {s->rank, O_RANK, "rank"},
        {s->gap, O_GAP, "gap"},       {s->noise, O_NOISE, "noise"}, {s->decay, O_DECAY, "decay"},
        {s->users, O_USERS, "users"}, {s->items, O_ITEMS, "items"}, {s->nnz, O_NNZ, "nnz"},
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
        if (s->users == NULL || s->items == NULL || s->nnz == NULL) {
            return cli_usage_error(cmd, "--users, --items and --nnz are required");
        }
        if ((rc = cli_parse_size(cmd, "--users", s->users, 1, MAX_DIM, &a->rows)) != 0 ||
            (rc = cli_parse_size(cmd, "--items", s->items, 1, (size_t)UINT32_MAX, &a->cols)) != 0 ||
            (rc = cli_parse_size(cmd, "--nnz", s->nnz, 1, MAX_ELEMS, &a->nnz)) != 0) {
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
        {"seed", CLI_OPT_VALUE, &s.seed, NULL},
        {"out", CLI_OPT_VALUE, &s.out, NULL},
        {"out-dir", CLI_OPT_VALUE, &s.out_dir, NULL},
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

static int generate_sparse(const char *cmd, const struct gen_args *a, struct gen_report *r)
{
    struct fs_err err;
    fs_csr *x = NULL;
    int rc = CLI_OK;

    fs_err_clear(&err);
    if (gen_ratings(a, &x, &err) != 0) {
        return cli_fs_error(cmd, &err);
    }
    if (a->out != NULL) {
        rc = write_sparse(cmd, a->out, x, "matrix", r);
    }
    if (rc == CLI_OK && a->out_dir != NULL) {
        rc = write_parties_sparse(cmd, a, x, r);
    }
    fs_csr_free(x);
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
    rc = a.kind->kind == KIND_RATINGS ? generate_sparse(cmd, &a, &rep)
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
