/* fedsvd compare: the accuracy metrics (docs/references.md) between a result
 * (--a) and a reference (--b): singular values, subspaces, plain matrices. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "io/matio.h"
#include "la/mat.h"
#include "la/qr.h"
#include "la/svd.h"

#define NOPTS(a) (sizeof(a) / sizeof((a)[0]))

static void compare_help(void)
{
    printf("Usage: fedsvd compare --a FILE --b FILE --metric sv|subspace|fro|maxrel [--k K]\n"
           "                      [--tol T]\n"
           "                      [--input-format F] [--format text|json]\n"
           "\n"
           "Compare a result (--a) with a reference (--b) and print the metric on stdout.\n"
           "\n"
           "Metrics:\n"
           "  sv         singular values (vectors, e.g. S.npy vs a planted spectrum):\n"
           "             max_i |a_i - b_i| / |b_1| over the first K values (default: all\n"
           "             values both have); json also gives the largest elementwise\n"
           "             relative error\n"
           "  subspace   column spaces of the first K columns (e.g. V.npy vs the planted V):\n"
           "             projection distance ||A A^T - B B^T||_F (printed), and sin-theta\n"
           "             ||(I - B B^T) A||_2 in json; both sides are orthonormalised first, so\n"
           "             signs and rotations within the subspace do not count\n"
           "  fro        ||A - B||_F / ||B||_F (same shape), and the largest |a_ij - b_ij|\n"
           "  maxrel     max |a_ij - b_ij| / max |b_ij| (same shape): the error relative to\n"
           "             the largest entry of the reference (secure-sum results)\n"
           "\n"
           "Options:\n"
           "  --a FILE, --b FILE   the two matrices (.npy, CSV, MatrixMarket, IDX)\n"
           "  --input-format F     auto (default), npy, csv, mtx or idx, for both files\n"
           "  --metric M           sv, subspace, fro or maxrel (required)\n"
           "  --k K                compare only the first K values / columns\n"
           "  --tol T              exit with status 1 if the printed metric exceeds T\n"
           "  --format F           text (default: the metric alone) or json (all figures)\n"
           "  -h, --help           show this text\n");
}

struct cmp_result {
    double value; /* the printed metric */
    const char *name;
    double extra; /* second figure (elementwise rel / sin-theta / max abs) */
    const char *extra_name;
    size_t k;
};

static int load(const char *cmd, const char *path, enum fs_io_format fmt, fs_mat **out)
{
    struct fs_err err;

    fs_err_clear(&err);
    if (fs_io_load_dense(path, fmt, NULL, out, &err) != 0) {
        return cli_fs_error(cmd, &err);
    }
    return CLI_OK;
}

static int is_vector(const fs_mat *m)
{
    return m->rows == 1 || m->cols == 1;
}

/* Entry i of a vector stored as a row or a column. */
static double vec_at(const fs_mat *m, size_t i)
{
    return m->cols == 1 ? FS_MAT_AT(m, i, 0) : FS_MAT_AT(m, 0, i);
}

static int metric_sv(const char *cmd, const fs_mat *a, const fs_mat *b, size_t k,
                     struct cmp_result *res)
{
    size_t na, nb, n;
    double ref, worst = 0, worst_rel = 0;

    if (!is_vector(a) || !is_vector(b)) {
        return cli_runtime_error(cmd, "--metric sv needs two vectors, got %zu x %zu and %zu x %zu",
                                 a->rows, a->cols, b->rows, b->cols);
    }
    na = a->rows * a->cols;
    nb = b->rows * b->cols;
    n = na < nb ? na : nb;
    if (k > n) {
        return cli_runtime_error(cmd, "--k %zu is more than the %zu values available", k, n);
    }
    if (k > 0) {
        n = k;
    }
    ref = fabs(vec_at(b, 0));
    for (size_t i = 0; i < n; i++) {
        double d = fabs(vec_at(a, i) - vec_at(b, i));
        double bi = fabs(vec_at(b, i));
        worst = d > worst ? d : worst;
        if (bi > 0 && d / bi > worst_rel) {
            worst_rel = d / bi;
        } else if (bi == 0 && d > 0) {
            worst_rel = INFINITY;
        }
    }
    res->value = ref > 0 ? worst / ref : worst;
    res->name = "sv_max_rel_error";
    res->extra = worst_rel;
    res->extra_name = "sv_max_elementwise_rel_error";
    res->k = n;
    return CLI_OK;
}

/* Orthonormal basis of the first k columns (new matrix). */
static int orth_first(const char *cmd, const fs_mat *m, size_t k, fs_mat **out)
{
    fs_mat v = fs_mat_view(m, 0, 0, m->rows, k);
    fs_mat *q = fs_mat_dup(&v);
    struct fs_err err;

    fs_err_clear(&err);
    *out = NULL;
    if (q == NULL) {
        return cli_runtime_error(cmd, "out of memory");
    }
    if (fs_qr_orth(q, NULL, &err) != 0) {
        fs_mat_free(q);
        return cli_fs_error(cmd, &err);
    }
    *out = q;
    return CLI_OK;
}

static int metric_subspace(const char *cmd, const fs_mat *a, const fs_mat *b, size_t k,
                           struct cmp_result *res)
{
    fs_mat *qa = NULL, *qb = NULL, *c = NULL;
    fs_svd d;
    struct fs_err err;
    size_t n;
    int rc;

    memset(&d, 0, sizeof d);
    fs_err_clear(&err);
    if (a->rows != b->rows) {
        return cli_runtime_error(cmd,
                                 "--metric subspace needs the same number of rows, got %zu "
                                 "and %zu",
                                 a->rows, b->rows);
    }
    n = a->cols < b->cols ? a->cols : b->cols;
    if (k > n) {
        return cli_runtime_error(cmd, "--k %zu is more than the %zu columns available", k, n);
    }
    if (k > 0) {
        n = k;
    }
    if (n > a->rows) {
        return cli_runtime_error(cmd, "%zu columns of length %zu cannot be orthonormal", n,
                                 a->rows);
    }
    if ((rc = orth_first(cmd, a, n, &qa)) != 0 || (rc = orth_first(cmd, b, n, &qb)) != 0) {
        goto out;
    }
    /* R = Qa - Qb (Qb^T Qa): the part of span(A) outside span(B). For orthonormal
     * bases of equal dimension ||Qa Qa^T - Qb Qb^T||_F = sqrt(2) ||R||_F, computed
     * without the cancellation of sqrt(2k - 2 ||Qb^T Qa||_F^2). */
    if (fs_mat_mul('T', 'N', qb, qa, &c, &err) != 0 ||
        fs_mat_gemm('N', 'N', -1.0, qb, c, 1.0, qa, &err) != 0 || fs_svd_thin(qa, &d, &err) != 0) {
        rc = cli_fs_error(cmd, &err);
        goto out;
    }
    res->value = sqrt(2.0) * fs_mat_norm_fro(qa);
    res->name = "projection_distance";
    res->extra = d.r > 0 ? d.s[0] : 0.0;
    res->extra_name = "sin_theta";
    res->k = n;
    rc = CLI_OK;
out:
    fs_svd_clear(&d);
    fs_mat_free(c);
    fs_mat_free(qb);
    fs_mat_free(qa);
    return rc;
}

static int metric_fro(const char *cmd, const fs_mat *a, const fs_mat *b, int maxrel,
                      struct cmp_result *res)
{
    fs_mat *d = NULL;
    struct fs_err err;
    double nb;

    fs_err_clear(&err);
    if (a->rows != b->rows || a->cols != b->cols) {
        return cli_runtime_error(cmd, "--metric %s needs equal shapes, got %zu x %zu and %zu x %zu",
                                 maxrel ? "maxrel" : "fro", a->rows, a->cols, b->rows, b->cols);
    }
    d = fs_mat_dup(a);
    if (d == NULL) {
        return cli_runtime_error(cmd, "out of memory");
    }
    if (fs_mat_axpy(-1.0, b, d, &err) != 0) {
        fs_mat_free(d);
        return cli_fs_error(cmd, &err);
    }
    nb = fs_mat_norm_fro(b);
    res->value = nb > 0 ? fs_mat_norm_fro(d) / nb : fs_mat_norm_fro(d);
    res->name = "fro_rel_error";
    res->extra = fs_mat_max_abs(d);
    res->extra_name = "max_abs_error";
    res->k = 0;
    if (maxrel) {
        double mb = fs_mat_max_abs(b);
        res->extra = res->value;
        res->extra_name = "fro_rel_error";
        res->value = mb > 0 ? fs_mat_max_abs(d) / mb : fs_mat_max_abs(d);
        res->name = "max_rel_error";
    }
    fs_mat_free(d);
    return CLI_OK;
}

int cmd_compare(int argc, char **argv)
{
    const char *cmd = "compare";
    const char *s_a = NULL, *s_b = NULL, *s_metric = NULL, *s_k = NULL, *s_tol = NULL;
    const char *s_fmt = NULL, *s_format = NULL;
    struct cli_opt opts[] = {
        {"a", CLI_OPT_VALUE, &s_a, NULL},           {"b", CLI_OPT_VALUE, &s_b, NULL},
        {"metric", CLI_OPT_VALUE, &s_metric, NULL}, {"k", CLI_OPT_VALUE, &s_k, NULL},
        {"tol", CLI_OPT_VALUE, &s_tol, NULL},       {"input-format", CLI_OPT_VALUE, &s_fmt, NULL},
        {"format", CLI_OPT_VALUE, &s_format, NULL},
    };
    const char *pos[1];
    size_t npos = 0, k = 0;
    double tol = -1;
    int help = 0, json = 0;
    enum fs_io_format fmt = FS_FMT_AUTO;
    struct fs_err err;
    struct cmp_result res;
    fs_mat *a = NULL, *b = NULL;
    int rc;

    memset(&res, 0, sizeof res);
    rc = cli_parse(cmd, argc, argv, opts, NOPTS(opts), pos, 0, &npos, &help);
    if (rc != CLI_OK) {
        return rc;
    }
    if (help) {
        compare_help();
        return CLI_OK;
    }
    if (s_a == NULL || s_b == NULL || s_metric == NULL) {
        return cli_usage_error(cmd, "--a, --b and --metric are required");
    }
    if (strcmp(s_metric, "sv") != 0 && strcmp(s_metric, "subspace") != 0 &&
        strcmp(s_metric, "fro") != 0 && strcmp(s_metric, "maxrel") != 0) {
        return cli_usage_error(cmd, "--metric: expected sv, subspace, fro or maxrel, got '%s'",
                               s_metric);
    }
    if (s_fmt != NULL && fs_io_format_parse(s_fmt, &fmt, &err) != 0) {
        return cli_usage_error(cmd, "--input-format: expected auto, npy, csv, mtx or idx, got '%s'",
                               s_fmt);
    }
    if ((s_k != NULL && (rc = cli_parse_size(cmd, "--k", s_k, 1, SIZE_MAX / 2, &k)) != 0) ||
        (s_tol != NULL &&
         (rc = cli_parse_double(cmd, "--tol", s_tol, 0, CLI_CLOSED, 0, CLI_NONE, &tol)) != 0) ||
        (rc = cli_parse_format(cmd, s_format, &json)) != 0) {
        return rc;
    }
    if (s_k != NULL && (strcmp(s_metric, "fro") == 0 || strcmp(s_metric, "maxrel") == 0)) {
        return cli_usage_error(cmd, "--k does not apply to --metric %s", s_metric);
    }
    if ((rc = load(cmd, s_a, fmt, &a)) != 0 || (rc = load(cmd, s_b, fmt, &b)) != 0) {
        goto out;
    }
    if (strcmp(s_metric, "sv") == 0) {
        rc = metric_sv(cmd, a, b, k, &res);
    } else if (strcmp(s_metric, "subspace") == 0) {
        rc = metric_subspace(cmd, a, b, k, &res);
    } else {
        rc = metric_fro(cmd, a, b, strcmp(s_metric, "maxrel") == 0, &res);
    }
    if (rc != CLI_OK) {
        goto out;
    }
    if (json) {
        json_t *o =
            json_pack("{s:s, s:o, s:o, s:o}", "metric", s_metric, "value", cli_json_num(res.value),
                      res.name, cli_json_num(res.value), res.extra_name, cli_json_num(res.extra));
        if (o != NULL && res.k > 0) {
            json_object_set_new(o, "k", json_integer((json_int_t)res.k));
        }
        if (o != NULL && tol >= 0) {
            json_object_set_new(o, "tol", json_real(tol));
            json_object_set_new(o, "pass", json_boolean(res.value <= tol));
        }
        rc = cli_print_json(cmd, o);
    } else {
        printf("%.6e\n", res.value);
    }
    if (rc == CLI_OK && tol >= 0 && !(res.value <= tol)) {
        rc = cli_runtime_error(cmd, "%s %.3e exceeds --tol %.3e (%s vs %s)", res.name, res.value,
                               tol, s_a, s_b);
    }
out:
    fs_mat_free(b);
    fs_mat_free(a);
    return rc;
}
