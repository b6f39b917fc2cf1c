/* fedsvd lsa: federated latent semantic analysis on this machine with the
 * real services, as `fedsvd local` runs its jobs.
 *
 * Each party's side (here, in this process, one party after the other):
 * read its documents, tokenize them (lib/text), map every term to a feature
 * (a keyed hash bucket, or its index in a public vocabulary) and count its
 * document frequencies. The aggregate counts come from a real secure-sum job
 * (df of every feature and the number of documents, one row per party), so
 * the servers see no party's counts and nobody sees a word. From the sum,
 * every party derives the same kept columns (--min-df, --max-df) and the same
 * smooth IDF, builds its own l2-normalised TF-IDF rows, and the exact top-k
 * FedSVD job (samples partition: documents are the samples) gives the shared
 * term vectors and singular values and each party's own document vectors.
 * Top terms per component are resolved by each party through its own terms
 * (hashing) or through the vocabulary.
 *
 * The hashing key is drawn here from the OS CSPRNG (or read from
 * --key-file) and handed to nothing but the parties' text processing: no
 * service receives it. */
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "cmd_local.h"
#include "cmd_lsa.h"
#include "core/hex.h"
#include "crypto/ct.h"
#include "crypto/rand.h"
#include "io/matio.h"
#include "la/svd.h"
#include "local.h"
#include "orch.h"
#include "text/text.h"

#define NOPTS(a)        (sizeof(a) / sizeof((a)[0]))
#define LSA_D_DEFAULT   4096
#define LSA_D_MAX       ((size_t)1 << 20)
#define LSA_TOP_DEFAULT 10

struct party {
    const char *input; /* as given */
    struct fs_text_corpus c;
    uint32_t *feat; /* feature of each of its terms */
    size_t zero_rows;
    fs_mat *u; /* document vectors (n_i x k) once known */
};

struct lsa {
    const char *cmd;
    size_t k, top;
    size_t np;
    struct party *p;
    int lines, central, verify, json;
    struct fs_text_opts topt;
    struct fs_text_set *vocab; /* --vocabulary, or NULL: hashing */
    struct fs_text_set *stop;
    size_t d;
    uint8_t key[FS_TEXT_KEY_LEN];
    char key_hex[2 * FS_TEXT_KEY_LEN + 1];
    int key_given;
    double min_df, max_df;
    double *df; /* d, the aggregate */
    double ndocs;
    long *col; /* d: column of each feature, or -1 */
    size_t ncols;
    double *idf; /* ncols */
    fs_mat *v;   /* ncols x k */
    double *s;   /* k */
    const char *out;
    double t_read, t_df, t_tfidf, t_svd;
    int fed_started; /* the fedsvd job was set up */
};

static void lsa_help(void)
{
    printf("Usage: fedsvd lsa --party INPUT --party INPUT [...] --k K --out DIR\n"
           "                  [--lines] [--hash-features D [--key-file F] | --vocabulary FILE]\n"
           "                  [--stop-words FILE] [--min-length N] [--min-df N] [--max-df F]\n"
           "                  [--skip-invalid] [--top N] [--verify] [--central]\n"
           "                  [--timeout S] [--keep] [--bin-dir DIR] [--format text|json]\n"
           "\n"
           "Federated latent semantic analysis of the documents of several parties, run on\n"
           "this machine with the real services as 'fedsvd local' does (a masking-server, an\n"
           "aggregation-server and one client-agent per party, each a process of its own):\n"
           "\n"
           "  1. each party tokenizes its documents (Unicode letters, lower-cased, by the C\n"
           "     library's C.UTF-8 tables) and maps every term to a feature: a bucket of a\n"
           "     keyed hash (HMAC-SHA256) under a key the parties share and no server sees,\n"
           "     or its line in a public --vocabulary;\n"
           "  2. a secure-sum job adds up the parties' document frequencies and document\n"
           "     counts (no party's counts are visible to anyone);\n"
           "  3. from these aggregate counts alone every party keeps the same features\n"
           "     (--min-df, --max-df) and weights its own documents by the smooth IDF\n"
           "     log((1 + N) / (1 + df)) + 1, each row scaled to unit length (TF-IDF);\n"
           "  4. an exact top-K fedsvd job (documents are the samples) factorizes the\n"
           "     documents x features matrix.\n"
           "\n"
           "Results in DIR: S.npy (singular values) and term_vectors.npy (D x K, one row per\n"
           "feature; dropped features are zero rows), shared by all; V.npy (the kept\n"
           "features x K, as fedsvd returns it); df.npy (the aggregate document frequencies);\n"
           "party-<i>/U.npy, party <i>'s document vectors (one row per document, private),\n"
           "party-<i>/documents.txt (the source of each row) and party-<i>/top_terms.txt\n"
           "(each component's heaviest features, resolved through party <i>'s own terms;\n"
           "with --vocabulary DIR/top_terms.txt through the vocabulary); with hashing and no\n"
           "--key-file, party-<i>/hash.key (0600) holds the key the run drew. summary.json:\n"
           "counts, timings, bytes per party and server of both jobs; logs/ the services'.\n"
           "\n"
           "Across sites (a coordinator and one client-agent per site, on different\n"
           "machines): 'fedsvd job create --algorithm lsa' creates the two jobs, and each\n"
           "site runs 'fedsvd lsa count', 'df', 'rows' and 'terms' around 'fedsvd join'\n"
           "('fedsvd lsa df --help'; docs/lsa.md).\n"
           "\n"
           "--central computes the same on the pooled documents in this process (no\n"
           "services; LAPACK dgesvdx): the reference. Give it the federated run's key\n"
           "(--key-file DIR/party-1/hash.key) to compare the two with 'fedsvd compare'.\n"
           "\n");
    printf("Options:\n"
           "  --party INPUT        a directory of UTF-8 text files (one document per regular\n"
           "                       file, in name order; hidden files skipped), or with --lines\n"
           "                       a file with one document per line; once per party, 1 to %d\n"
           "  --lines              every --party is a file with one document per line\n"
           "  --k K                the number of components (required)\n"
           "  --out DIR            where the results go (created)\n"
           "  --hash-features D    feature hashing into D buckets (default %d; 1..%zu)\n"
           "  --key-file F         the hashing key: 64 hex digits (default: drawn from the\n"
           "                       OS CSPRNG and written to DIR/party-<i>/hash.key)\n"
           "  --vocabulary FILE    a public vocabulary, one word per line, instead of hashing\n"
           "  --stop-words FILE    words to drop, one per line ('#' lines are comments)\n"
           "  --min-length N       drop tokens of fewer than N letters (default 1)\n"
           "  --min-df N           keep features in at least N documents (default 1)\n"
           "  --max-df F           keep features in at most F x N documents (default 1)\n"
           "  --skip-invalid       skip (and count) documents that are not UTF-8 instead of\n"
           "                       stopping with an error naming them. Documents without a\n"
           "                       token are always skipped and counted\n"
           "  --top N              top terms listed per component (default %d)\n"
           "  --verify             also compute the pooled reference in this process and\n"
           "                       report the agreement (summary.json: verification)\n"
           "  --central            only the pooled reference, no services\n"
           "  --timeout S, --keep, --bin-dir DIR, --format text|json  as for 'fedsvd local'\n"
           "  -h, --help           show this text\n"
           "\n"
           "Example:\n"
           "  fedsvd lsa --party a/ --party b/ --party c/ --k 5 --hash-features 1024 \\\n"
           "      --stop-words stop.txt --min-df 2 --verify --out lsa\n",
           LOCAL_MAX_PARTIES, LSA_D_DEFAULT, LSA_D_MAX, LSA_TOP_DEFAULT);
}

/* A path under --out or the run's root: both are checked to leave room
 * (cmd_lsa), so nothing here is cut. */
static void pathf(char *buf, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void pathf(char *buf, size_t cap, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
}

/* ---- the parties' side ---- */

static int read_key_file(struct lsa *A, const char *path)
{
    char buf[160];
    FILE *f = fopen(path, "r");
    size_t n;

    if (f == NULL) {
        return cli_runtime_error(A->cmd, "--key-file %s: %s", path, strerror(errno));
    }
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) {
        buf[--n] = '\0';
    }
    if (n != 2 * FS_TEXT_KEY_LEN || fs_hex_decode(buf, A->key, FS_TEXT_KEY_LEN) != 0) {
        fs_wipe(buf, sizeof buf);
        return cli_runtime_error(A->cmd, "--key-file %s: expected 64 hex digits", path);
    }
    fs_wipe(buf, sizeof buf);
    fs_hex_encode(A->key, FS_TEXT_KEY_LEN, A->key_hex);
    return CLI_OK;
}

static int read_parties(struct lsa *A)
{
    struct fs_err err;
    double t0 = cli_now();

    fs_err_clear(&err);
    for (size_t i = 0; i < A->np; i++) {
        struct party *p = &A->p[i];
        int rc;

        if (fs_text_corpus_init(&p->c, &err) != 0) {
            return cli_fs_error(A->cmd, &err);
        }
        rc = A->lines ? fs_text_corpus_read_lines(&p->c, p->input, &A->topt, &err)
                      : fs_text_corpus_read_dir(&p->c, p->input, &A->topt, &err);
        if (rc != 0) {
            return cli_runtime_error(A->cmd, "party %zu: %s", i + 1, err.msg);
        }
        if (p->c.ndocs == 0) {
            return cli_runtime_error(A->cmd,
                                     "party %zu (%s): no document with a token (%zu empty, %zu "
                                     "not UTF-8)",
                                     i + 1, p->input, p->c.skipped_empty, p->c.skipped_invalid);
        }
        if (fs_text_features(&p->c, A->vocab != NULL ? NULL : A->key, A->vocab, A->d, &p->feat,
                             &err) != 0) {
            return cli_fs_error(A->cmd, &err);
        }
    }
    A->t_read = cli_now() - t0;
    return CLI_OK;
}

/* Columns and IDF from the aggregate counts (the same on every party). */
static int derive_columns(struct lsa *A)
{
    A->col = calloc(A->d, sizeof *A->col);
    A->idf = calloc(A->d, sizeof *A->idf);
    if (A->col == NULL || A->idf == NULL) {
        return cli_runtime_error(A->cmd, "out of memory");
    }
    fs_text_select(A->df, A->d, A->ndocs, A->min_df, A->max_df, A->col, &A->ncols);
    if (A->ncols == 0) {
        return cli_runtime_error(A->cmd,
                                 "no feature is left (between --min-df %g and --max-df %g of %.0f "
                                 "documents)",
                                 A->min_df, A->max_df, A->ndocs);
    }
    if (A->k > A->ncols || (double)A->k > A->ndocs) {
        return cli_runtime_error(A->cmd,
                                 "--k %zu is more than the %zu features kept or the %.0f documents",
                                 A->k, A->ncols, A->ndocs);
    }
    fs_text_idf(A->df, A->d, A->col, A->ndocs, A->idf);
    return CLI_OK;
}

static fs_mat *party_tfidf(const struct lsa *A, struct party *p)
{
    fs_mat *x = fs_mat_new(p->c.ndocs, A->ncols);

    if (x != NULL) {
        fs_text_tfidf(&p->c, p->feat, A->col, A->idf, x, 0, &p->zero_rows);
    }
    return x;
}

/* ---- results ---- */

static int write_party_files(struct lsa *A)
{
    for (size_t i = 0; i < A->np; i++) {
        char path[LOCAL_PATH];
        FILE *f;

        pathf(path, sizeof path, "%s/party-%zu", A->out, i + 1);
        if (cli_mkdir_p(A->cmd, path) != CLI_OK) {
            return CLI_ERUNTIME;
        }
        pathf(path, sizeof path, "%s/party-%zu/documents.txt", A->out, i + 1);
        f = fopen(path, "w");
        if (f == NULL) {
            return cli_runtime_error(A->cmd, "%s: %s", path, strerror(errno));
        }
        for (size_t r = 0; r < A->p[i].c.ndocs; r++) {
            fprintf(f, "%s\n", A->p[i].c.source[r]);
        }
        if (fclose(f) != 0) {
            return cli_runtime_error(A->cmd, "%s: write failed", path);
        }
        if (A->vocab == NULL && !A->key_given) {
            int fd;
            ssize_t w;
            char line[2 * FS_TEXT_KEY_LEN + 2];

            pathf(path, sizeof path, "%s/party-%zu/hash.key", A->out, i + 1);
            fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
            if (fd < 0) {
                return cli_runtime_error(A->cmd, "%s: %s", path, strerror(errno));
            }
            snprintf(line, sizeof line, "%s\n", A->key_hex);
            w = write(fd, line, strlen(line));
            fs_wipe(line, sizeof line);
            if (close(fd) != 0 || w != (ssize_t)(2 * FS_TEXT_KEY_LEN + 1)) {
                return cli_runtime_error(A->cmd, "%s: write failed", path);
            }
        }
    }
    return CLI_OK;
}

/* The features of component j's largest positive weights (oriented), at most A->top. */
static size_t top_features(const struct lsa *A, const long *feat_of_col, size_t j, size_t *out)
{
    size_t n = lsa_top_rows(A->v, j, NULL, A->top, out);

    for (size_t q = 0; q < n; q++) {
        out[q] = (size_t)feat_of_col[out[q]];
    }
    return n;
}

/* Party p's most frequent own term in feature f, or NULL. */
static const char *own_term(const struct party *p, size_t f)
{
    size_t n = fs_text_set_size(p->c.terms), best = SIZE_MAX;

    for (size_t t = 0; t < n; t++) {
        if (p->feat[t] == f && (best == SIZE_MAX || p->c.term_total[t] > p->c.term_total[best])) {
            best = t;
        }
    }
    return best == SIZE_MAX ? NULL : fs_text_set_get(p->c.terms, best, NULL);
}

/* The top terms of every component: json {"party-1": [[..],..]} or {"vocabulary": ...};
 * the text files alongside. */
static int top_terms(struct lsa *A, json_t **out)
{
    long *foc = malloc(A->ncols * sizeof *foc);
    size_t *ids = malloc((A->top + 1) * sizeof *ids);
    size_t nviews = A->vocab != NULL ? 1 : A->np;
    json_t *all = json_object();
    int rc = CLI_OK;

    *out = NULL;
    if (foc == NULL || ids == NULL || all == NULL) {
        rc = cli_runtime_error(A->cmd, "out of memory");
        goto done;
    }
    for (size_t f = 0; f < A->d; f++) {
        if (A->col[f] >= 0) {
            foc[A->col[f]] = (long)f;
        }
    }
    for (size_t view = 0; view < nviews; view++) {
        char path[LOCAL_PATH], name[32];
        json_t *comps = json_array();
        FILE *fp;

        if (A->vocab != NULL) {
            pathf(path, sizeof path, "%s/top_terms.txt", A->out);
            snprintf(name, sizeof name, "vocabulary");
        } else {
            pathf(path, sizeof path, "%s/party-%zu/top_terms.txt", A->out, view + 1);
            snprintf(name, sizeof name, "party-%zu", view + 1);
        }
        fp = fopen(path, "w");
        if (fp == NULL || comps == NULL) {
            json_decref(comps);
            if (fp != NULL) {
                fclose(fp);
            }
            rc = cli_runtime_error(A->cmd, "%s: %s", path, strerror(errno));
            goto done;
        }
        for (size_t j = 0; j < A->k; j++) {
            size_t n = top_features(A, foc, j, ids);
            json_t *terms = json_array();

            fprintf(fp, "%zu\t%.6g\t", j + 1, A->s[j]);
            for (size_t q = 0; q < n; q++) {
                const char *t = A->vocab != NULL ? fs_text_set_get(A->vocab, ids[q], NULL)
                                                 : own_term(&A->p[view], ids[q]);
                fprintf(fp, "%s%s", q > 0 ? " " : "", t != NULL ? t : "-");
                json_array_append_new(terms, t != NULL ? json_string(t) : json_null());
            }
            fprintf(fp, "\n");
            json_array_append_new(comps, terms);
        }
        if (fclose(fp) != 0) {
            json_decref(comps);
            rc = cli_runtime_error(A->cmd, "%s: write failed", path);
            goto done;
        }
        json_object_set_new(all, name, comps);
    }
    *out = all;
    all = NULL;
done:
    json_decref(all);
    free(foc);
    free(ids);
    return rc;
}

/* D x k: the kept columns' rows of V at their features, zero elsewhere. */
static int write_term_vectors(struct lsa *A)
{
    fs_mat *t = fs_mat_new(A->d, A->k);
    char path[LOCAL_PATH];
    struct fs_err err;
    int rc = CLI_OK;

    fs_err_clear(&err);
    if (t == NULL) {
        return cli_runtime_error(A->cmd, "out of memory");
    }
    for (size_t f = 0; f < A->d; f++) {
        for (size_t j = 0; A->col[f] >= 0 && j < A->k; j++) {
            FS_MAT_AT(t, f, j) = FS_MAT_AT(A->v, A->col[f], j);
        }
    }
    pathf(path, sizeof path, "%s/term_vectors.npy", A->out);
    if (fs_npy_write_mat(path, t, &err) != 0) {
        rc = cli_fs_error(A->cmd, &err);
    }
    pathf(path, sizeof path, "%s/df.npy", A->out);
    if (rc == CLI_OK && fs_npy_write_vec(path, A->df, A->d, &err) != 0) {
        rc = cli_fs_error(A->cmd, &err);
    }
    fs_mat_free(t);
    return rc;
}

/* ---- the pooled reference ---- */

struct reference {
    double *df; /* d */
    double ndocs;
    fs_svd svd; /* of the pooled TF-IDF with A's columns and IDF */
};

/* ||(I - Q Q^T) P||_F * sqrt(2) = ||P P^T - Q Q^T||_F for orthonormal n x k P, Q. */
static double proj_distance(const fs_mat *p, const fs_mat *q, size_t k)
{
    fs_mat pv = fs_mat_view(p, 0, 0, p->rows, k), qv = fs_mat_view(q, 0, 0, q->rows, k);
    fs_mat *qtp = fs_mat_new(k, k), *r = fs_mat_dup(&pv);
    struct fs_err err;
    double d = -1;

    fs_err_clear(&err);
    if (qtp != NULL && r != NULL && fs_mat_gemm('T', 'N', 1.0, &qv, &pv, 0.0, qtp, &err) == 0 &&
        fs_mat_gemm('N', 'N', -1.0, &qv, qtp, 1.0, r, &err) == 0) {
        d = sqrt(2.0) * fs_mat_norm_fro(r);
    }
    fs_mat_free(qtp);
    fs_mat_free(r);
    return d;
}

/* The pooled TF-IDF matrix (parties stacked in order) with A's columns. */
static fs_mat *pooled_tfidf(const struct lsa *A)
{
    size_t n = 0, off = 0;
    fs_mat *x;

    for (size_t i = 0; i < A->np; i++) {
        n += A->p[i].c.ndocs;
    }
    x = fs_mat_new(n, A->ncols);
    for (size_t i = 0; x != NULL && i < A->np; i++) {
        size_t zr;
        fs_text_tfidf(&A->p[i].c, A->p[i].feat, A->col, A->idf, x, off, &zr);
        off += A->p[i].c.ndocs;
    }
    return x;
}

static void pooled_df(const struct lsa *A, double *df, double *ndocs)
{
    memset(df, 0, A->d * sizeof *df);
    *ndocs = 0;
    for (size_t i = 0; i < A->np; i++) {
        fs_text_df_add(&A->p[i].c, A->p[i].feat, A->d, df);
        *ndocs += (double)A->p[i].c.ndocs;
    }
}

static int reference_svd(const struct lsa *A, fs_svd *svd)
{
    fs_mat *x = pooled_tfidf(A);
    struct fs_svd_opts o = fs_svd_opts_default();
    struct fs_err err;
    int rc;

    fs_err_clear(&err);
    if (x == NULL) {
        return cli_runtime_error(A->cmd, "out of memory for the pooled matrix");
    }
    o.method = FS_TOPK_GESVDX;
    rc = fs_svd_topk(x, A->k, &o, svd, &err);
    fs_mat_free(x);
    return rc == 0 ? CLI_OK : cli_fs_error(A->cmd, &err);
}

/* The federated result (A->s, A->v, each party's u) against the reference. */
static int verify(struct lsa *A, json_t **out)
{
    double *df = calloc(A->d, sizeof *df), ndocs = 0, df_err = 0, sv = 0, sv_rel = 0;
    fs_svd ref = {0};
    json_t *parties = json_array();
    fs_mat *ustack = NULL;
    double *sign = calloc(A->k, sizeof *sign);
    size_t n = 0, off = 0;
    int rc;

    *out = NULL;
    if (df == NULL || sign == NULL || parties == NULL) {
        rc = cli_runtime_error(A->cmd, "out of memory");
        goto done;
    }
    pooled_df(A, df, &ndocs);
    for (size_t f = 0; f < A->d; f++) {
        double e = fabs(df[f] - A->df[f]);
        df_err = e > df_err ? e : df_err;
    }
    if (ndocs != A->ndocs || df_err != 0) {
        rc = cli_runtime_error(A->cmd,
                               "the secure sum's document frequencies differ from the pooled "
                               "counts (max |difference| %g, N %.0f vs %.0f)",
                               df_err, A->ndocs, ndocs);
        goto done;
    }
    if ((rc = reference_svd(A, &ref)) != CLI_OK) {
        goto done;
    }
    for (size_t j = 0; j < A->k; j++) {
        double e = fabs(A->s[j] - ref.s[j]);
        double dot = 0;
        sv = e / ref.s[0] > sv ? e / ref.s[0] : sv;
        sv_rel = ref.s[j] > 0 && e / ref.s[j] > sv_rel ? e / ref.s[j] : sv_rel;
        for (size_t c = 0; c < A->ncols; c++) {
            dot += FS_MAT_AT(A->v, c, j) * FS_MAT_AT(ref.v, c, j);
        }
        sign[j] = dot < 0 ? -1.0 : 1.0;
    }
    for (size_t i = 0; i < A->np; i++) {
        n += A->p[i].c.ndocs;
    }
    ustack = fs_mat_new(n, A->k);
    if (ustack == NULL) {
        rc = cli_runtime_error(A->cmd, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < A->np; i++) {
        const fs_mat *u = A->p[i].u;
        double m = 0, scale = 0;

        for (size_t j = 0; j < A->k; j++) {
            for (size_t r = 0; r < u->rows; r++) {
                double e = fabs(sign[j] * FS_MAT_AT(u, r, j) - FS_MAT_AT(ref.u, off + r, j));
                m = e > m ? e : m;
                scale = fabs(FS_MAT_AT(ref.u, off + r, j)) > scale
                            ? fabs(FS_MAT_AT(ref.u, off + r, j))
                            : scale;
                FS_MAT_AT(ustack, off + r, j) = FS_MAT_AT(u, r, j);
            }
        }
        json_array_append_new(parties, json_pack("{s:I, s:I, s:f, s:f}", "party",
                                                 (json_int_t)(i + 1), "documents",
                                                 (json_int_t)u->rows, "max_abs_error_sign_aligned",
                                                 m, "max_abs_reference", scale));
        off += u->rows;
    }
    *out = json_pack("{s:s, s:I, s:f, s:f, s:f, s:f, s:f, s:o}", "reference",
                     "LAPACK dgesvdx (exact top-k) of the pooled TF-IDF matrix", "compared_columns",
                     (json_int_t)A->k, "df_max_abs_difference", df_err, "sv_error", sv,
                     "sv_max_relative_error", sv_rel, "term_projection_distance",
                     proj_distance(A->v, ref.v, A->k), "document_projection_distance",
                     proj_distance(ustack, ref.u, A->k), "parties", parties);
    parties = NULL;
    if (*out == NULL) {
        rc = cli_runtime_error(A->cmd, "out of memory");
    }
done:
    json_decref(parties);
    fs_mat_free(ustack);
    fs_svd_clear(&ref);
    free(df);
    free(sign);
    return rc;
}

/* --central: the reference alone, written as the federated run writes its result. */
static int run_central(struct lsa *A, json_t **summary)
{
    fs_svd ref = {0};
    struct fs_err err;
    char path[LOCAL_PATH];
    json_t *terms = NULL, *parties = json_array();
    double t0;
    size_t off = 0;
    int rc;

    fs_err_clear(&err);
    A->df = calloc(A->d, sizeof *A->df);
    if (A->df == NULL || parties == NULL) {
        json_decref(parties);
        return cli_runtime_error(A->cmd, "out of memory");
    }
    t0 = cli_now();
    pooled_df(A, A->df, &A->ndocs);
    A->t_df = cli_now() - t0;
    if ((rc = derive_columns(A)) != CLI_OK) {
        goto done;
    }
    t0 = cli_now();
    if ((rc = reference_svd(A, &ref)) != CLI_OK) {
        goto done;
    }
    A->t_svd = cli_now() - t0;
    /* signs as the sites' results have them (fedsvd lsa terms): each term
     * vector's largest-magnitude entry positive, document vectors alike */
    for (size_t j = 0; j < A->k; j++) {
        if (lsa_orient(ref.v, j) < 0) {
            for (size_t r = 0; r < ref.v->rows; r++) {
                FS_MAT_AT(ref.v, r, j) = -FS_MAT_AT(ref.v, r, j);
            }
            for (size_t r = 0; r < ref.u->rows; r++) {
                FS_MAT_AT(ref.u, r, j) = -FS_MAT_AT(ref.u, r, j);
            }
        }
    }
    A->v = ref.v;
    A->s = ref.s;
    if ((rc = write_party_files(A)) != CLI_OK) {
        goto done;
    }
    for (size_t i = 0; i < A->np; i++) {
        fs_mat uv = fs_mat_view(ref.u, off, 0, A->p[i].c.ndocs, A->k);
        fs_mat *u = fs_mat_dup(&uv);

        pathf(path, sizeof path, "%s/party-%zu/U.npy", A->out, i + 1);
        if (u == NULL || fs_npy_write_mat(path, u, &err) != 0) {
            fs_mat_free(u);
            rc = cli_fs_error(A->cmd, &err);
            goto done;
        }
        fs_mat_free(u);
        json_array_append_new(
            parties, json_pack("{s:I, s:s, s:I, s:I, s:I}", "party", (json_int_t)(i + 1), "input",
                               A->p[i].input, "documents", (json_int_t)A->p[i].c.ndocs,
                               "skipped_empty", (json_int_t)A->p[i].c.skipped_empty,
                               "skipped_invalid", (json_int_t)A->p[i].c.skipped_invalid));
        off += A->p[i].c.ndocs;
    }
    pathf(path, sizeof path, "%s/S.npy", A->out);
    if (fs_npy_write_vec(path, ref.s, A->k, &err) != 0) {
        rc = cli_fs_error(A->cmd, &err);
        goto done;
    }
    pathf(path, sizeof path, "%s/V.npy", A->out);
    if (fs_npy_write_mat(path, ref.v, &err) != 0) {
        rc = cli_fs_error(A->cmd, &err);
        goto done;
    }
    if ((rc = write_term_vectors(A)) != CLI_OK || (rc = top_terms(A, &terms)) != CLI_OK) {
        goto done;
    }
    {
        json_t *sv = json_array();
        for (size_t j = 0; j < A->k; j++) {
            json_array_append_new(sv, json_real(ref.s[j]));
        }
        *summary = json_pack(
            "{s:s, s:I, s:I, s:s, s:I, s:I, s:o, s:o, s:o, s:{s:f, s:f, s:f}}", "algorithm",
            "lsa-central", "k", (json_int_t)A->k, "documents", (json_int_t)A->ndocs, "features",
            A->vocab != NULL ? "vocabulary" : "hashing", "d", (json_int_t)A->d, "kept_features",
            (json_int_t)A->ncols, "singular_values", sv, "parties", parties, "top_terms", terms,
            "seconds", "read", A->t_read, "df", A->t_df, "svd", A->t_svd);
        parties = NULL;
        terms = NULL;
    }
done:
    A->v = NULL;
    A->s = NULL;
    json_decref(parties);
    json_decref(terms);
    fs_svd_clear(&ref);
    return rc;
}

/* ---- the federated run ---- */

/* Forget the finished job's ids and documents: the next job starts clean. */
static void reset_job(struct local *L)
{
    for (size_t i = 0; i < L->k; i++) {
        free(L->part_ids[i]);
        L->part_ids[i] = NULL;
        json_array_set_new(L->parts, i, json_null());
    }
    json_decref(L->job);
    L->job = NULL;
    json_decref(L->manifest);
    L->manifest = NULL;
    L->have_result = 0;
    L->job_id[0] = '\0';
}

static int set_file(struct local *L, size_t i, const char *path)
{
    free(L->files[i]);
    L->files[i] = strdup(path);
    return L->files[i] == NULL ? cli_runtime_error(L->cmd, "out of memory") : CLI_OK;
}

/* Step 2: the secure sum of [df, ndocs] over the parties. */
static int df_sum(struct lsa *A, struct local *L, json_t **sum_info, char *error, size_t cap)
{
    char path[LOCAL_PATH];
    json_t *invs = NULL, *parts = json_array();
    fs_mat *row = fs_mat_new(1, A->d + 1), *sum = NULL;
    struct fs_err err;
    double t0 = cli_now();
    int rc = CLI_OK;

    fs_err_clear(&err);
    if (row == NULL || parts == NULL) {
        rc = cli_runtime_error(A->cmd, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < A->np; i++) {
        memset(row->data, 0, (A->d + 1) * sizeof(double));
        fs_text_df_add(&A->p[i].c, A->p[i].feat, A->d, row->data);
        row->data[A->d] = (double)A->p[i].c.ndocs;
        pathf(path, sizeof path, "%s/party-%zu-df.npy", L->root, i + 1);
        if (fs_npy_write_mat(path, row, &err) != 0) {
            rc = cli_fs_error(A->cmd, &err);
            goto done;
        }
        if ((rc = set_file(L, i, path)) != CLI_OK) {
            goto done;
        }
    }
    L->fed = 0;
    L->rows = 1;
    L->cols = A->d + 1;
    L->thr = L->k; /* every party's counts, or no result */
    L->round_timeout = 60;
    orch_progress_text(&L->prog, "document frequencies: secure sum");
    if ((rc = local_create_job(L, &invs)) != CLI_OK) {
        snprintf(error, cap, "job setup failed");
        goto done;
    }
    if ((rc = local_drive(L, invs, error, cap)) != CLI_OK) {
        goto done;
    }
    if ((rc = local_fetch_sum(L)) != CLI_OK || (rc = local_settle_agents(L, 60.0)) != CLI_OK) {
        snprintf(error, cap, "could not fetch the document frequencies");
        goto done;
    }
    local_refresh_job(L);
    pathf(path, sizeof path, "%s/sum.npy", A->out);
    if (fs_io_load_dense(path, FS_FMT_NPY, NULL, &sum, &err) != 0) {
        rc = cli_fs_error(A->cmd, &err);
        goto done;
    }
    unlink(path);
    if (sum->rows * sum->cols != A->d + 1) {
        rc = cli_runtime_error(A->cmd, "the secure sum has %zu values, expected %zu",
                               sum->rows * sum->cols, A->d + 1);
        goto done;
    }
    A->df = calloc(A->d, sizeof *A->df);
    if (A->df == NULL) {
        rc = cli_runtime_error(A->cmd, "out of memory");
        goto done;
    }
    /* counts: the fixed-point sum decodes exactly to integers */
    for (size_t f = 0; f <= A->d; f++) {
        double v = nearbyint(sum->data[f]);
        if (fabs(sum->data[f] - v) > 1e-6 || v < 0) {
            rc = cli_runtime_error(A->cmd, "the secure sum's value %zu is not a count", f);
            goto done;
        }
        if (f < A->d) {
            A->df[f] = v;
        } else {
            A->ndocs = v;
        }
    }
    for (size_t i = 0; i < L->k; i++) {
        const json_t *p = json_array_get(L->parts, i);
        json_array_append_new(
            parts, json_pack("{s:I, s:o, s:o}", "party", (json_int_t)(i + 1), "bytes_sent",
                             local_copy_if(p, "bytes_sent", local_is_num), "bytes_received",
                             local_copy_if(p, "bytes_received", local_is_num)));
    }
    *sum_info = json_pack("{s:s, s:I, s:o, s:o, s:o, s:f, s:o}", "job_id", L->job_id, "values",
                          (json_int_t)(A->d + 1), "bytes_in",
                          local_copy_if(L->job, "bytes_in", local_is_num), "bytes_out",
                          local_copy_if(L->job, "bytes_out", local_is_num), "timings",
                          local_copy_if(L->job, "timings", local_is_obj), "seconds", cli_now() - t0,
                          "parties", parts);
    parts = NULL;
    A->t_df = cli_now() - t0;
done:
    json_decref(parts);
    json_decref(invs);
    fs_mat_free(row);
    fs_mat_free(sum);
    return rc;
}

/* Steps 3 and 4: every party's TF-IDF rows, then the fedsvd job. */
static int factorize(struct lsa *A, struct local *L, char *error, size_t cap)
{
    char path[LOCAL_PATH];
    json_t *invs = NULL;
    struct fs_err err;
    double t0 = cli_now();
    fs_mat *s = NULL;
    int rc;

    fs_err_clear(&err);
    if ((rc = derive_columns(A)) != CLI_OK) {
        snprintf(error, cap, "no features");
        return rc;
    }
    L->n_rows = 0;
    for (size_t i = 0; i < A->np; i++) {
        fs_mat *x = party_tfidf(A, &A->p[i]);

        pathf(path, sizeof path, "%s/party-%zu-tfidf.npy", L->root, i + 1);
        if (x == NULL) {
            return cli_runtime_error(A->cmd, "out of memory for party %zu's rows", i + 1);
        }
        rc = fs_npy_write_mat(path, x, &err);
        fs_mat_free(x);
        if (rc != 0) {
            return cli_fs_error(A->cmd, &err);
        }
        if ((rc = set_file(L, i, path)) != CLI_OK) {
            return rc;
        }
        L->sizes[i] = A->p[i].c.ndocs;
        L->n_rows += A->p[i].c.ndocs;
    }
    A->t_tfidf = cli_now() - t0;
    reset_job(L);
    A->fed_started = 1;
    L->fed = 1;
    L->n_cols = A->ncols;
    L->ksvd = A->k;
    L->thr = L->k / 2 + 1;
    L->round_timeout = 300;
    t0 = cli_now();
    orch_progress_text(&L->prog, "fedsvd of the TF-IDF rows");
    if ((rc = local_create_job(L, &invs)) != CLI_OK || (rc = local_create_maskset(L, invs)) != 0) {
        snprintf(error, cap, "job setup failed");
        goto done;
    }
    if ((rc = local_drive(L, invs, error, cap)) != CLI_OK) {
        goto done;
    }
    if ((rc = local_fed_collect(L)) != CLI_OK) {
        snprintf(error, cap, "could not collect the parties' results");
        goto done;
    }
    L->t_collected = cli_now();
    A->t_svd = cli_now() - t0;
    pathf(path, sizeof path, "%s/V.npy", A->out);
    if (fs_io_load_dense(path, FS_FMT_NPY, NULL, &A->v, &err) != 0) {
        rc = cli_fs_error(A->cmd, &err);
        goto done;
    }
    pathf(path, sizeof path, "%s/S.npy", A->out);
    if (fs_io_load_dense(path, FS_FMT_NPY, NULL, &s, &err) != 0) {
        rc = cli_fs_error(A->cmd, &err);
        goto done;
    }
    if (A->v->rows != A->ncols || A->v->cols < A->k || s->rows * s->cols < A->k) {
        rc = cli_runtime_error(A->cmd, "the fedsvd result has the wrong shape");
        goto done;
    }
    A->s = malloc(A->k * sizeof *A->s);
    if (A->s == NULL) {
        rc = cli_runtime_error(A->cmd, "out of memory");
        goto done;
    }
    memcpy(A->s, s->data, A->k * sizeof *A->s);
    for (size_t i = 0; i < A->np; i++) {
        pathf(path, sizeof path, "%s/party-%zu/U.npy", A->out, i + 1);
        if (fs_io_load_dense(path, FS_FMT_NPY, NULL, &A->p[i].u, &err) != 0) {
            rc = cli_fs_error(A->cmd, &err);
            goto done;
        }
        if (A->p[i].u->rows != A->p[i].c.ndocs || A->p[i].u->cols != A->k) {
            rc = cli_runtime_error(A->cmd, "party %zu's U.npy has the wrong shape", i + 1);
            goto done;
        }
    }
done:
    fs_mat_free(s);
    json_decref(invs);
    return rc;
}

static json_t *party_counts(const struct lsa *A)
{
    json_t *a = json_array();

    for (size_t i = 0; a != NULL && i < A->np; i++) {
        const struct party *p = &A->p[i];
        json_array_append_new(
            a, json_pack("{s:I, s:s, s:I, s:I, s:I, s:I, s:I, s:I}", "party", (json_int_t)(i + 1),
                         "input", p->input, "documents", (json_int_t)p->c.ndocs, "skipped_empty",
                         (json_int_t)p->c.skipped_empty, "skipped_invalid",
                         (json_int_t)p->c.skipped_invalid, "zero_rows", (json_int_t)p->zero_rows,
                         "tokens", (json_int_t)p->c.tokens, "distinct_terms",
                         (json_int_t)fs_text_set_size(p->c.terms)));
    }
    return a;
}

static int run_federated(struct lsa *A, const char *s_bin, int keep, double timeout,
                         json_t **summary)
{
    struct local L;
    struct local_signals sigs;
    char error[FS_ERR_MSG_MAX];
    json_t *sum_info = NULL, *fed = NULL, *terms = NULL, *ver = NULL;
    int rc;

    memset(&L, 0, sizeof L);
    memset(&sigs, 0, sizeof sigs);
    error[0] = '\0';
    L.cmd = A->cmd;
    L.k = A->np;
    L.out = A->out;
    L.keep = keep;
    L.timeout = timeout;
    L.fed = 1; /* the masking server too: both jobs run on one set of services */
    L.shown = malloc(A->np * sizeof *L.shown);
    if (L.shown == NULL) {
        return cli_runtime_error(A->cmd, "out of memory");
    }
    for (size_t i = 0; i < A->np; i++) {
        L.shown[i] = A->p[i].input;
    }
    if ((rc = local_alloc(&L, NULL, 0, LOCAL_FAIL_SECAGG)) != CLI_OK ||
        (rc = local_find_bin_dir(&L, s_bin)) != CLI_OK) {
        goto out;
    }
    local_remove_stale(&L);
    L.t_start = cli_now();
    orch_progress_init(&L.prog, stderr, A->cmd);
    local_signals_install(&sigs);
    if ((rc = local_setup_root(&L)) != CLI_OK ||
        (rc = local_init_proc(&L, &L.server, "aggregation-server", "aggregation-server")) !=
            CLI_OK ||
        (rc = local_init_proc(&L, &L.masker, "masking-server", "masking-server")) != CLI_OK) {
        goto out;
    }
    for (size_t i = 0; i < L.k; i++) {
        char name[32];

        snprintf(name, sizeof name, "agent-%zu", i + 1);
        if ((rc = local_init_proc(&L, &L.agents[i], name, "client-agent")) != CLI_OK) {
            goto out;
        }
    }
    if ((rc = local_start(&L, error, sizeof error)) != CLI_OK ||
        (rc = df_sum(A, &L, &sum_info, error, sizeof error)) != CLI_OK ||
        (rc = factorize(A, &L, error, sizeof error)) != CLI_OK) {
        goto out;
    }
    if ((rc = write_party_files(A)) != CLI_OK || (rc = write_term_vectors(A)) != CLI_OK ||
        (rc = top_terms(A, &terms)) != CLI_OK) {
        snprintf(error, sizeof error, "could not write the results");
        goto out;
    }
    if (A->verify) {
        orch_progress_text(&L.prog, "verifying against the pooled computation");
        if ((rc = verify(A, &ver)) != CLI_OK) {
            snprintf(error, sizeof error, "verification failed");
            goto out;
        }
    }
out:
    orch_progress_done(&L.prog);
    L.fed = 1;
    local_stop(&L);
    if (L.root[0] != '\0') {
        local_copy_logs(&L);
        if (A->fed_started) {
            fed = local_fed_summary(&L, error[0] != '\0' ? error : NULL);
        }
        local_drop_root(&L);
    }
    {
        json_t *sv = json_array();
        for (size_t j = 0; A->s != NULL && j < A->k; j++) {
            json_array_append_new(sv, json_real(A->s[j]));
        }
        *summary = json_pack(
            "{s:s, s:s, s:o, s:I, s:I, s:s, s:I, s:I, s:f, s:f, s:o, s:o, s:o, s:o, s:o, "
            "s:{s:f, s:f, s:f, s:f, s:f}}",
            "algorithm", "lsa", "state", rc == CLI_OK ? "done" : "failed", "error",
            error[0] != '\0' ? json_string(error) : json_null(), "k", (json_int_t)A->k, "documents",
            (json_int_t)A->ndocs, "features", A->vocab != NULL ? "vocabulary" : "hashing", "d",
            (json_int_t)A->d, "kept_features", (json_int_t)A->ncols, "min_df", A->min_df, "max_df",
            A->max_df, "singular_values", sv, "parties", party_counts(A), "document_frequencies",
            sum_info != NULL ? sum_info : json_null(), "fedsvd", fed != NULL ? fed : json_null(),
            "top_terms", terms != NULL ? terms : json_null(), "seconds", "total",
            cli_now() - L.t_start, "read_and_hash", A->t_read, "df_secure_sum", A->t_df, "tfidf",
            A->t_tfidf, "fedsvd", A->t_svd);
        sum_info = fed = terms = NULL;
        if (*summary != NULL && ver != NULL) {
            json_object_set_new(*summary, "verification", ver);
            ver = NULL;
        }
    }
    local_signals_restore(&sigs);
    json_decref(sum_info);
    json_decref(fed);
    json_decref(terms);
    json_decref(ver);
    free(L.shown);
    local_free(&L);
    return rc;
}

static void print_text(const struct lsa *A, const json_t *summary)
{
    const json_t *terms = json_object_get(summary, "top_terms");
    const json_t *ver = json_object_get(summary, "verification");
    const char *key;
    json_t *views;

    printf("%s of %.0f documents from %zu parties: %s, %zu of %zu features kept, k %zu, in "
           "%.1f s\n",
           A->central ? "lsa (pooled reference)" : "lsa", A->ndocs, A->np,
           A->vocab != NULL ? "vocabulary" : "keyed hashing", A->ncols, A->d, A->k,
           json_real_value(json_object_get(json_object_get(summary, "seconds"), "total")));
    for (size_t j = 0; j < A->k; j++) {
        printf("component %zu (s = %.4g)\n", j + 1,
               json_number_value(json_array_get(json_object_get(summary, "singular_values"), j)));
        json_object_foreach((json_t *)terms, key, views)
        {
            const json_t *list = json_array_get(views, j);
            size_t q;
            json_t *t;

            printf("  %-10s", key);
            json_array_foreach(list, q, t)
            {
                if (json_is_string(t)) { /* a feature without a word of this party: none */
                    printf(" %s", json_string_value(t));
                }
            }
            printf("\n");
        }
    }
    if (ver != NULL) {
        printf("agreement with the pooled computation: singular values %.2e (relative to s_1; "
               "largest relative %.2e), term-vector projection distance %.2e, document-vector "
               "projection distance %.2e",
               json_number_value(json_object_get(ver, "sv_error")),
               json_number_value(json_object_get(ver, "sv_max_relative_error")),
               json_number_value(json_object_get(ver, "term_projection_distance")),
               json_number_value(json_object_get(ver, "document_projection_distance")));
        {
            double m = 0;
            size_t q;
            json_t *p;
            json_array_foreach(json_object_get(ver, "parties"), q, p)
            {
                double e = json_number_value(json_object_get(p, "max_abs_error_sign_aligned"));
                m = e > m ? e : m;
            }
            printf(", document vectors (sign-aligned) %.2e\n", m);
        }
    }
    if (!A->central) {
        const json_t *fed = json_object_get(summary, "fedsvd");
        const json_t *dfp =
            json_object_get(json_object_get(summary, "document_frequencies"), "parties");
        const json_t *sec = json_object_get(summary, "seconds");
        for (size_t i = 0; i < A->np; i++) {
            const json_t *a = json_array_get(dfp, i);
            const json_t *b = json_array_get(json_object_get(fed, "parties"), i);
            printf("party %zu: %zu documents; secure sum %.1f kB sent, %.1f kB received; fedsvd "
                   "%.1f kB sent, %.1f kB received\n",
                   i + 1, A->p[i].c.ndocs,
                   json_number_value(json_object_get(a, "bytes_sent")) / 1e3,
                   json_number_value(json_object_get(a, "bytes_received")) / 1e3,
                   json_number_value(json_object_get(b, "bytes_sent")) / 1e3,
                   json_number_value(json_object_get(b, "bytes_received")) / 1e3);
        }
        printf("seconds: read and hash %.2f, secure sum %.2f, tf-idf %.2f, fedsvd %.2f\n",
               json_number_value(json_object_get(sec, "read_and_hash")),
               json_number_value(json_object_get(sec, "df_secure_sum")),
               json_number_value(json_object_get(sec, "tfidf")),
               json_number_value(json_object_get(sec, "fedsvd")));
    }
    printf("  %s/{S,V,term_vectors,df}.npy (shared), %s/party-<i>/{U.npy,documents.txt,"
           "top_terms.txt} (each party's own), %s/summary.json\n",
           A->out, A->out, A->out);
}

/* --stop-words, and --vocabulary or the hashing key (--key-file, else a fresh one). */
static int read_words(struct lsa *A, const char *s_stop, const char *s_vocab, const char *s_key)
{
    struct fs_err err;
    int rc;

    fs_err_clear(&err);
    if (s_stop != NULL && fs_text_read_words(s_stop, 0, &A->stop, &err) != 0) {
        return cli_runtime_error(A->cmd, "--stop-words %s", err.msg);
    }
    A->topt.stop = A->stop;
    if (s_vocab != NULL) {
        if (fs_text_read_words(s_vocab, 1, &A->vocab, &err) != 0) {
            return cli_runtime_error(A->cmd, "--vocabulary %s", err.msg);
        }
        A->d = fs_text_set_size(A->vocab);
        if (A->d == 0) {
            return cli_runtime_error(A->cmd, "--vocabulary %s: no word", s_vocab);
        }
    } else if (s_key != NULL) {
        if ((rc = read_key_file(A, s_key)) != CLI_OK) {
            return rc;
        }
        A->key_given = 1;
    } else {
        if (fs_rand_bytes(A->key, sizeof A->key, &err) != 0) {
            return cli_fs_error(A->cmd, &err);
        }
        fs_hex_encode(A->key, FS_TEXT_KEY_LEN, A->key_hex);
    }
    return CLI_OK;
}

/* The run (central or federated), summary.json, and what is printed. */
static int run_and_report(struct lsa *A, const char *s_bin, int keep, double timeout)
{
    json_t *summary = NULL;
    int rc;

    if (A->central) {
        double t0 = cli_now() - A->t_read;
        rc = run_central(A, &summary);
        if (summary != NULL) {
            json_object_set_new(json_object_get(summary, "seconds"), "total",
                                json_real(cli_now() - t0));
        }
    } else {
        rc = run_federated(A, s_bin, keep, timeout, &summary);
    }
    if (summary != NULL) {
        char path[LOCAL_PATH];
        if (cli_path_join(A->cmd, path, sizeof path, A->out, "summary.json") == CLI_OK) {
            int wrc = cli_write_json_file(A->cmd, path, json_incref(summary));
            rc = rc != CLI_OK ? rc : wrc;
        }
    }
    if (rc == CLI_OK && summary != NULL) {
        if (A->json) {
            rc = cli_print_json(A->cmd, json_incref(summary));
        } else {
            print_text(A, summary);
        }
    }
    json_decref(summary);
    return rc;
}

static void lsa_free(struct lsa *A)
{
    for (size_t i = 0; A->p != NULL && i < A->np; i++) {
        fs_text_corpus_clear(&A->p[i].c);
        free(A->p[i].feat);
        fs_mat_free(A->p[i].u);
    }
    free(A->p);
    fs_text_set_free(A->vocab);
    fs_text_set_free(A->stop);
    free(A->df);
    free(A->col);
    free(A->idf);
    fs_mat_free(A->v);
    free(A->s);
    fs_wipe(A->key, sizeof A->key);
    fs_wipe(A->key_hex, sizeof A->key_hex);
}

int cmd_lsa(int argc, char **argv)
{
    const char *cmd = "lsa";
    const char *s_k = NULL, *s_out = NULL, *s_d = NULL, *s_key = NULL, *s_vocab = NULL;
    const char *s_stop = NULL, *s_minlen = NULL, *s_mindf = NULL, *s_maxdf = NULL, *s_top = NULL;
    const char *s_timeout = NULL, *s_bin = NULL, *s_format = NULL;
    int lines = 0, skip_invalid = 0, verify_flag = 0, central = 0, keep = 0;
    struct cli_opt opts[] = {
        {"k", CLI_OPT_VALUE, &s_k, NULL},
        {"out", CLI_OPT_VALUE, &s_out, NULL},
        {"lines", CLI_OPT_FLAG, NULL, &lines},
        {"hash-features", CLI_OPT_VALUE, &s_d, NULL},
        {"key-file", CLI_OPT_VALUE, &s_key, NULL},
        {"vocabulary", CLI_OPT_VALUE, &s_vocab, NULL},
        {"stop-words", CLI_OPT_VALUE, &s_stop, NULL},
        {"min-length", CLI_OPT_VALUE, &s_minlen, NULL},
        {"min-df", CLI_OPT_VALUE, &s_mindf, NULL},
        {"max-df", CLI_OPT_VALUE, &s_maxdf, NULL},
        {"skip-invalid", CLI_OPT_FLAG, NULL, &skip_invalid},
        {"top", CLI_OPT_VALUE, &s_top, NULL},
        {"verify", CLI_OPT_FLAG, NULL, &verify_flag},
        {"central", CLI_OPT_FLAG, NULL, &central},
        {"timeout", CLI_OPT_VALUE, &s_timeout, NULL},
        {"keep", CLI_OPT_FLAG, NULL, &keep},
        {"bin-dir", CLI_OPT_VALUE, &s_bin, NULL},
        {"format", CLI_OPT_VALUE, &s_format, NULL},
    };
    const char *party[LOCAL_MAX_PARTIES], *fail[LOCAL_MAX_PARTIES], *input[LOCAL_MAX_PARTIES];
    size_t nparty = 0, nfail = 0, ninput = 0, minlen = 1, mindf = 1;
    char **rest = NULL;
    int help = 0, rc;
    double timeout = 600;
    struct lsa A;

    if (cmd_lsa_is_site_step(argc, argv)) {
        return cmd_lsa_site(argc, argv);
    }
    memset(&A, 0, sizeof A);
    A.cmd = cmd;
    A.max_df = 1.0;
    A.top = LSA_TOP_DEFAULT;
    rest = calloc((size_t)argc + 1, sizeof *rest);
    if (rest == NULL) {
        return cli_runtime_error(cmd, "out of memory");
    }
    rc = local_parse_args(cmd, argc, argv, opts, NOPTS(opts), party, &nparty, fail, &nfail, input,
                          &ninput, rest, &help);
    if (rc != CLI_OK) {
        goto out;
    }
    if (help) {
        lsa_help();
        goto out;
    }
    if (nfail > 0 || ninput > 0) {
        rc = cli_usage_error(cmd, "--fail-party and --input are for 'fedsvd local'");
        goto out;
    }
    if (nparty == 0 || s_k == NULL || s_out == NULL) {
        rc = cli_usage_error(cmd, "--party (at least one), --k and --out are required");
        goto out;
    }
    if (s_vocab != NULL && (s_d != NULL || s_key != NULL)) {
        rc =
            cli_usage_error(cmd, "--vocabulary replaces hashing: no --hash-features or --key-file");
        goto out;
    }
    A.d = LSA_D_DEFAULT;
    if ((rc = cli_parse_size(cmd, "--k", s_k, 1, 100000, &A.k)) != CLI_OK ||
        (s_d != NULL &&
         (rc = cli_parse_size(cmd, "--hash-features", s_d, 1, LSA_D_MAX, &A.d)) != CLI_OK) ||
        (s_minlen != NULL &&
         (rc = cli_parse_size(cmd, "--min-length", s_minlen, 1, 1000, &minlen)) != CLI_OK) ||
        (s_mindf != NULL &&
         (rc = cli_parse_size(cmd, "--min-df", s_mindf, 1, SIZE_MAX / 2, &mindf)) != CLI_OK) ||
        (s_maxdf != NULL && (rc = cli_parse_double(cmd, "--max-df", s_maxdf, 0, CLI_OPEN, 1,
                                                   CLI_CLOSED, &A.max_df)) != CLI_OK) ||
        (s_top != NULL && (rc = cli_parse_size(cmd, "--top", s_top, 1, 1000, &A.top)) != CLI_OK) ||
        (s_timeout != NULL && (rc = cli_parse_double(cmd, "--timeout", s_timeout, 0, CLI_OPEN, 0,
                                                     CLI_NONE, &timeout)) != CLI_OK) ||
        (rc = cli_parse_format(cmd, s_format, &A.json)) != CLI_OK) {
        goto out;
    }
    if (strlen(s_out) > LOCAL_PATH - 256) {
        rc = cli_usage_error(cmd, "--out: path too long");
        goto out;
    }
    if (central && (verify_flag || keep || s_timeout != NULL || s_bin != NULL)) {
        rc = cli_usage_error(cmd, "--central runs no services: no --verify, --keep, --timeout or "
                                  "--bin-dir");
        goto out;
    }
    A.min_df = (double)mindf;
    A.np = nparty;
    A.lines = lines;
    A.central = central;
    A.verify = verify_flag;
    A.out = s_out;
    A.topt.min_len = minlen;
    A.topt.skip_invalid = skip_invalid;
    A.p = calloc(nparty, sizeof *A.p);
    if (A.p == NULL) {
        rc = cli_runtime_error(cmd, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < nparty; i++) {
        A.p[i].input = party[i];
    }
    if ((rc = read_words(&A, s_stop, s_vocab, s_key)) != CLI_OK ||
        (rc = cli_mkdir_p(cmd, s_out)) != CLI_OK || (rc = read_parties(&A)) != CLI_OK) {
        goto out;
    }
    rc = run_and_report(&A, s_bin, keep, timeout);
out:
    lsa_free(&A);
    free(rest);
    return rc;
}
