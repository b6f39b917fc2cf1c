/* fedsvd svd: centralised SVD of one matrix, the baseline every federated
 * result is compared with. Writes U.npy, S.npy, V.npy and summary.json. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "io/matio.h"
#include "la/mat.h"
#include "la/svd.h"

#define NOPTS(a)   (sizeof(a) / sizeof((a)[0]))
#define HEAD_MAX   10
#define PATH_CAP   4096
#define MAX_INPUTS 64

static void svd_help(void)
{
    printf(
        "Usage: fedsvd svd --input FILE [--input FILE...] [--center] [--k K] [--method M]\n"
        "                  [--out DIR] [OPTIONS]\n"
        "\n"
        "Centralised SVD X = U diag(S) V^T of one matrix (rows = samples, columns =\n"
        "features): thin (r = min(rows, cols)) or the top k. This is the baseline every\n"
        "federated result is compared with.\n"
        "\n"
        "Options:\n"
        "  --input FILE         the matrix: .npy, CSV, MatrixMarket or IDX; repeat it to\n"
        "                       stack several files by rows (the pooled matrix of parties\n"
        "                       that hold different samples)\n"
        "  --center             subtract each column's mean first: the SVD of the centred\n"
        "                       matrix is the PCA (V = components, S^2/(rows-1) = explained\n"
        "                       variance); with --out also writes DIR/mean.npy\n"
        "  --input-format F     auto (default: by extension, then magic), npy, csv, mtx, idx\n"
        "  --k K                top-k instead of thin, 1 <= K <= min(rows, cols)\n"
        "  --method M           auto (default), thin, randomized or gesvdx. This command is\n"
        "                       the exact baseline, so auto is thin without --k and\n"
        "                       gesvdx with --k; both are exact to double precision.\n"
        "                       randomized is faster and approximate (its error depends\n"
        "                       on the spectrum's decay): ask for it explicitly\n"
        "  --oversample P       randomized: extra sketch columns (default 10)\n"
        "  --power-iters Q      randomized: subspace iterations (default 4)\n"
        "  --seed HEX64|INT     randomized: sketch seed (default: fresh from the OS CSPRNG)\n"
        "  --rtol T             numerical rank = #{s_i > T * s_1} (default max(rows,cols)*eps)\n"
        "  --out DIR            write DIR/U.npy (rows x r), DIR/S.npy (r), DIR/V.npy (cols x r)\n"
        "                       and DIR/summary.json; without --out nothing is written\n"
        "  --format F           text (default) or json (the summary as one JSON object)\n"
        "  -h, --help           show this text\n"
        "\n"
        "summary.json: {\"shape\":[m,n], \"k\", \"method\", \"seconds\" (factorization),\n"
        "\"reconstruction_error\" (||X - U S V^T||_F / ||X||_F), \"singular_values_head\",\n"
        "\"numerical_rank\", ...}.\n");
}

struct svd_args {
    const char *input;
    const char *inputs[MAX_INPUTS];
    size_t ninputs;
    int center;
    enum fs_io_format fmt;
    size_t k; /* 0 = thin */
    enum fs_topk_method method;
    int method_given;
    size_t oversample;
    int power_iters;
    int seeded;
    uint8_t seed[32];
    char seed_hex[65];
    double rtol; /* < 0: default */
    const char *out;
    int json;
};

static const char *method_name(enum fs_topk_method m)
{
    switch (m) {
    case FS_TOPK_RANDOMIZED:
        return "randomized";
    case FS_TOPK_GESVDX:
        return "gesvdx";
    default:
        return "thin";
    }
}

/* Take every --input out of argv (repeatable); the rest goes to cli_parse. */
static int split_inputs(int argc, char **argv, struct svd_args *a, char **rest, int *nrest)
{
    *nrest = 0;
    rest[(*nrest)++] = argv[0];
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        if (strcmp(argv[i], "--input") == 0) {
            if (i + 1 >= argc || strncmp(argv[i + 1], "--", 2) == 0) {
                return cli_usage_error("svd", "option '--input' needs a value");
            }
            v = argv[++i];
        } else if (strncmp(argv[i], "--input=", 8) == 0) {
            v = argv[i] + 8;
        } else {
            rest[(*nrest)++] = argv[i];
            continue;
        }
        if (a->ninputs >= MAX_INPUTS) {
            return cli_usage_error("svd", "more than %d --input options", MAX_INPUTS);
        }
        a->inputs[a->ninputs++] = v;
    }
    return CLI_OK;
}

static int parse_args(int argc, char **argv, struct svd_args *a, int *help)
{
    const char *cmd = "svd";
    const char *s_input = NULL, *s_fmt = NULL, *s_k = NULL, *s_method = NULL, *s_over = NULL;
    const char *s_iters = NULL, *s_seed = NULL, *s_rtol = NULL, *s_out = NULL, *s_format = NULL;
    struct cli_opt opts[] = {
        {"center", CLI_OPT_FLAG, NULL, NULL},
        {"input-format", CLI_OPT_VALUE, &s_fmt, NULL},
        {"k", CLI_OPT_VALUE, &s_k, NULL},
        {"method", CLI_OPT_VALUE, &s_method, NULL},
        {"oversample", CLI_OPT_VALUE, &s_over, NULL},
        {"power-iters", CLI_OPT_VALUE, &s_iters, NULL},
        {"seed", CLI_OPT_VALUE, &s_seed, NULL},
        {"rtol", CLI_OPT_VALUE, &s_rtol, NULL},
        {"out", CLI_OPT_DIR, &s_out, NULL},
        {"format", CLI_OPT_VALUE, &s_format, NULL},
    };
    const char *pos[1];
    size_t npos = 0;
    size_t v = 0;
    struct fs_err err;
    int rc;

    char **rest = calloc((size_t)argc + 1, sizeof *rest);
    int nrest = 0;

    memset(a, 0, sizeof *a);
    a->rtol = -1;
    a->power_iters = -1;
    opts[0].flag = &a->center;
    if (rest == NULL) {
        return cli_runtime_error(cmd, "out of memory");
    }
    rc = split_inputs(argc, argv, a, rest, &nrest);
    if (rc == CLI_OK) {
        rc = cli_parse(cmd, nrest, rest, opts, NOPTS(opts), pos, 0, &npos, help);
    }
    free(rest);
    if (rc != CLI_OK && !*help) {
        for (int i = 1; i < argc; i++) {
            *help |= strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0;
        }
    }
    if (rc != CLI_OK || *help) {
        return *help ? CLI_OK : rc;
    }
    s_input = a->ninputs > 0 ? a->inputs[0] : NULL;
    if (s_input == NULL) {
        return cli_usage_error(cmd, "--input is required");
    }
    a->input = s_input;
    a->out = s_out;
    if (s_fmt != NULL && fs_io_format_parse(s_fmt, &a->fmt, &err) != 0) {
        return cli_usage_error(cmd, "--input-format: expected auto, npy, csv, mtx or idx, got '%s'",
                               s_fmt);
    }
    if (s_k != NULL && (rc = cli_parse_size(cmd, "--k", s_k, 0, SIZE_MAX / 2, &a->k)) != 0) {
        return rc;
    }
    if (s_k != NULL && a->k == 0) { /* the number comes with the matrix: see cmd_svd */
        return cli_usage_error(cmd, "--k: must be between 1 and min(rows, cols), got '%s'", s_k);
    }
    a->method = FS_TOPK_AUTO;
    if (s_method != NULL) {
        a->method_given = 1;
        if (strcmp(s_method, "auto") == 0) {
            a->method = FS_TOPK_AUTO;
        } else if (strcmp(s_method, "thin") == 0) {
            a->method = FS_TOPK_THIN;
        } else if (strcmp(s_method, "randomized") == 0) {
            a->method = FS_TOPK_RANDOMIZED;
        } else if (strcmp(s_method, "gesvdx") == 0) {
            a->method = FS_TOPK_GESVDX;
        } else {
            return cli_usage_error(
                cmd, "--method: expected auto, thin, randomized or gesvdx, got '%s'", s_method);
        }
    }
    if (a->k == 0 && (a->method == FS_TOPK_RANDOMIZED || a->method == FS_TOPK_GESVDX)) {
        return cli_usage_error(cmd, "--method %s needs --k", s_method);
    }
    if (s_over != NULL &&
        (rc = cli_parse_size(cmd, "--oversample", s_over, 0, 100000, &a->oversample)) != 0) {
        return rc;
    }
    if (s_iters != NULL) {
        if ((rc = cli_parse_size(cmd, "--power-iters", s_iters, 0, 1000, &v)) != 0) {
            return rc;
        }
        a->power_iters = (int)v;
    }
    if (s_seed != NULL) {
        if ((rc = cli_parse_seed(cmd, s_seed, a->seed, a->seed_hex)) != 0) {
            return rc;
        }
        a->seeded = 1;
    }
    if (s_rtol != NULL && (rc = cli_parse_double(cmd, "--rtol", s_rtol, 0, CLI_CLOSED, 1,
                                                 CLI_CLOSED, &a->rtol)) != 0) {
        return rc;
    }
    return cli_parse_format(cmd, s_format, &a->json);
}

/* ||X - U diag(S) V^T||_F / ||X||_F with one gemm: R = X - U (V diag(S))^T. */
/* Load every --input and stack them by rows (same column count). */
static int load_inputs(const struct svd_args *a, fs_mat **out, struct fs_err *err)
{
    fs_mat *parts[MAX_INPUTS] = {0};
    size_t rows = 0, off = 0;
    fs_mat *x = NULL;
    int rc = 0;

    *out = NULL;
    if (a->ninputs == 1) {
        return fs_io_load_dense(a->inputs[0], a->fmt, NULL, out, err);
    }
    for (size_t i = 0; i < a->ninputs && rc == 0; i++) {
        rc = fs_io_load_dense(a->inputs[i], a->fmt, NULL, &parts[i], err);
        if (rc == 0 && i > 0 && parts[i]->cols != parts[0]->cols) {
            rc = fs_err_set(err, FS_EINVAL, "%s: %zu columns, but %s has %zu", a->inputs[i],
                            parts[i]->cols, a->inputs[0], parts[0]->cols);
        }
        if (rc == 0) {
            rows += parts[i]->rows;
        }
    }
    if (rc == 0) {
        x = fs_mat_new(rows, parts[0]->cols);
        if (x == NULL) {
            rc = fs_err_set(err, FS_ENOMEM, "out of memory for the %zu x %zu pooled matrix", rows,
                            parts[0]->cols);
        }
    }
    for (size_t i = 0; rc == 0 && i < a->ninputs; i++) {
        for (size_t j = 0; j < x->cols; j++) {
            for (size_t r = 0; r < parts[i]->rows; r++) {
                FS_MAT_AT(x, off + r, j) = FS_MAT_AT(parts[i], r, j);
            }
        }
        off += parts[i]->rows;
    }
    for (size_t i = 0; i < a->ninputs; i++) {
        fs_mat_free(parts[i]);
    }
    if (rc != 0) {
        fs_mat_free(x);
        return rc;
    }
    *out = x;
    return 0;
}

/* Subtract each column's mean (two-pass); a new array of the means, or NULL. */
static double *center_columns(fs_mat *x)
{
    double *mean = malloc((x->cols + 1) * sizeof *mean);

    for (size_t j = 0; mean != NULL && j < x->cols; j++) {
        double m = 0.0;
        for (size_t i = 0; i < x->rows; i++) {
            m += FS_MAT_AT(x, i, j);
        }
        m /= (double)x->rows;
        for (size_t i = 0; i < x->rows; i++) {
            FS_MAT_AT(x, i, j) -= m;
        }
        mean[j] = m;
    }
    return mean;
}

static int reconstruction_error(const fs_mat *x, const fs_svd *d, double *out, struct fs_err *err)
{
    fs_mat *r = NULL;
    fs_mat *vs = NULL;
    double nx;
    int rc;

    r = fs_mat_dup(x);
    vs = fs_mat_dup(d->v);
    if (r == NULL || vs == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "out of memory computing the reconstruction error");
        goto out;
    }
    for (size_t j = 0; j < vs->cols; j++) {
        for (size_t i = 0; i < vs->rows; i++) {
            FS_MAT_AT(vs, i, j) *= d->s[j];
        }
    }
    rc = fs_mat_gemm('N', 'T', -1.0, d->u, vs, 1.0, r, err);
    if (rc != 0) {
        goto out;
    }
    nx = fs_mat_norm_fro(x);
    *out = nx > 0 ? fs_mat_norm_fro(r) / nx : fs_mat_norm_fro(r);
out:
    fs_mat_free(vs);
    fs_mat_free(r);
    return rc;
}

static int write_outputs(const char *cmd, const char *dir, const fs_svd *d, json_t *summary)
{
    char path[PATH_CAP];
    struct fs_err err;
    int rc;

    fs_err_clear(&err);
    if ((rc = cli_mkdir_p(cmd, dir)) != 0) {
        return rc;
    }
    if ((rc = cli_path_join(cmd, path, sizeof path, dir, "U.npy")) != 0) {
        return rc;
    }
    if (fs_npy_write_mat(path, d->u, &err) != 0) {
        return cli_fs_error(cmd, &err);
    }
    if ((rc = cli_path_join(cmd, path, sizeof path, dir, "S.npy")) != 0) {
        return rc;
    }
    if (fs_npy_write_vec(path, d->s, d->r, &err) != 0) {
        return cli_fs_error(cmd, &err);
    }
    if ((rc = cli_path_join(cmd, path, sizeof path, dir, "V.npy")) != 0) {
        return rc;
    }
    if (fs_npy_write_mat(path, d->v, &err) != 0) {
        return cli_fs_error(cmd, &err);
    }
    if ((rc = cli_path_join(cmd, path, sizeof path, dir, "summary.json")) != 0) {
        return rc;
    }
    json_incref(summary);
    return cli_write_json_file(cmd, path, summary);
}

static void print_text(const struct svd_args *a, const fs_mat *x, const fs_svd *d,
                       enum fs_topk_method used, double secs, double load_secs, double rec,
                       size_t rank)
{
    size_t head = d->r < HEAD_MAX ? d->r : HEAD_MAX;

    printf("input                %s (%zu x %zu)\n", a->input, x->rows, x->cols);
    printf("method               %s, k = %zu\n", method_name(used), d->r);
    printf("seconds              %.3f (load %.3f)\n", secs, load_secs);
    printf("reconstruction error %.3e\n", rec);
    printf("numerical rank       %zu\n", rank);
    printf("singular values     ");
    for (size_t i = 0; i < head; i++) {
        printf(" %.10g", d->s[i]);
    }
    printf("%s\n", head < d->r ? " ..." : "");
    if (a->out != NULL) {
        printf("wrote                %s/{U,S,V}.npy, %s/summary.json\n", a->out, a->out);
    }
}

/* The method that runs: auto resolved here, not in the library, so that the
 * summary names it; a randomized run's seed drawn here so that it can be
 * printed and the run repeated. */
static int resolve_method(struct svd_args *a, enum fs_topk_method *used)
{
    int rc;

    *used = a->method;
    if (a->k == 0) {
        *used = FS_TOPK_THIN;
    }
    if (*used == FS_TOPK_AUTO) {
        /* The baseline must be exact: never pick the randomized method silently. */
        *used = FS_TOPK_GESVDX;
    }
    if (*used == FS_TOPK_RANDOMIZED && !a->seeded) {
        if ((rc = cli_parse_seed("svd", NULL, a->seed, a->seed_hex)) != 0) {
            return rc;
        }
        a->seeded = 1;
    } else if (*used != FS_TOPK_RANDOMIZED &&
               (a->seeded || a->oversample > 0 || a->power_iters >= 0)) {
        fprintf(stderr,
                "fedsvd svd: note: --seed/--oversample/--power-iters only affect the "
                "randomized method (this run uses %s)\n",
                method_name(*used));
    }
    return CLI_OK;
}

/* The SVD of x (thin, or the top k by `used`). */
static int compute(const struct svd_args *a, const fs_mat *x, enum fs_topk_method used, fs_svd *d,
                   struct fs_err *err)
{
    struct fs_svd_opts o = fs_svd_opts_default();

    if (a->k == 0) {
        return fs_svd_thin(x, d, err);
    }
    o.method = used;
    if (a->oversample > 0) {
        o.oversample = a->oversample;
    }
    if (a->power_iters >= 0) {
        o.power_iters = a->power_iters;
    }
    o.seed = a->seeded ? a->seed : NULL;
    return fs_svd_topk(x, a->k, &o, d, err);
}

/* The seed, centering and input list of the summary. */
static void summary_extras(const struct svd_args *a, enum fs_topk_method used, json_t *summary)
{
    if (used == FS_TOPK_RANDOMIZED) {
        json_object_set_new(summary, "seed", json_string(a->seed_hex));
    }
    json_object_set_new(summary, "centered", json_boolean(a->center));
    if (a->ninputs > 1) {
        json_t *ins = json_array();
        for (size_t i = 0; ins != NULL && i < a->ninputs; i++) {
            json_array_append_new(ins, json_string(a->inputs[i]));
        }
        json_object_set_new(summary, "inputs", ins);
    }
}

int cmd_svd(int argc, char **argv)
{
    const char *cmd = "svd";
    struct svd_args a;
    struct fs_err err;
    fs_mat *x = NULL;
    fs_svd d;
    double *mean = NULL;
    json_t *summary = NULL;
    json_t *head = NULL;
    enum fs_topk_method used;
    double t0, t1, t2, rec = 0, rtol;
    size_t minmn, rank;
    int help = 0;
    int rc;

    memset(&d, 0, sizeof d);
    fs_err_clear(&err);
    rc = parse_args(argc, argv, &a, &help);
    if (rc != CLI_OK) {
        return rc;
    }
    if (help) {
        svd_help();
        return CLI_OK;
    }

    t0 = cli_now();
    if (load_inputs(&a, &x, &err) != 0) {
        rc = cli_fs_error(cmd, &err);
        goto out;
    }
    if (a.center) {
        mean = center_columns(x);
        if (mean == NULL) {
            rc = cli_runtime_error(cmd, "out of memory");
            goto out;
        }
    }
    if (x->rows == 0 || x->cols == 0) {
        rc = cli_runtime_error(cmd, "%s: empty matrix (%zu x %zu)", a.input, x->rows, x->cols);
        goto out;
    }
    minmn = x->rows < x->cols ? x->rows : x->cols;
    if (a.k > minmn) {
        rc =
            cli_usage_error(cmd, "--k: must be between 1 and min(rows, cols) = %zu for %s, got %zu",
                            minmn, a.input, a.k);
        goto out;
    }

    if ((rc = resolve_method(&a, &used)) != CLI_OK) {
        goto out;
    }
    t1 = cli_now();
    rc = compute(&a, x, used, &d, &err);
    t2 = cli_now();
    if (rc != 0) {
        fs_err_prefix(&err, "%s: ", a.input);
        rc = cli_fs_error(cmd, &err);
        goto out;
    }
    if (reconstruction_error(x, &d, &rec, &err) != 0) {
        rc = cli_fs_error(cmd, &err);
        goto out;
    }
    rtol = a.rtol >= 0 ? a.rtol : (double)(x->rows > x->cols ? x->rows : x->cols) * DBL_EPSILON;
    rank = fs_svd_rank(&d, rtol);

    head = json_array();
    for (size_t i = 0; head != NULL && i < d.r && i < HEAD_MAX; i++) {
        json_array_append_new(head, cli_json_num(d.s[i]));
    }
    summary = json_pack("{s:s, s:[I,I], s:I, s:s, s:o, s:o, s:o, s:o, s:I, s:o}", "input", a.input,
                        "shape", (json_int_t)x->rows, (json_int_t)x->cols, "k", (json_int_t)d.r,
                        "method", method_name(used), "seconds", cli_json_num(t2 - t1),
                        "load_seconds", cli_json_num(t1 - t0), "reconstruction_error",
                        cli_json_num(rec), "singular_values_head", head, "numerical_rank",
                        (json_int_t)rank, "rank_rtol", cli_json_num(rtol));
    head = NULL; /* stolen by json_pack ("o"), also on failure */
    if (summary == NULL) {
        rc = cli_runtime_error(cmd, "out of memory building the summary");
        goto out;
    }
    summary_extras(&a, used, summary);
    if (a.out != NULL) {
        json_object_set_new(summary, "out", json_string(a.out));
        if (mean != NULL) {
            char path[PATH_CAP];
            if ((rc = cli_path_join(cmd, path, sizeof path, a.out, "mean.npy")) != CLI_OK ||
                (rc = cli_mkdir_p(cmd, a.out)) != CLI_OK) {
                goto out;
            }
            if (fs_npy_write_vec(path, mean, x->cols, &err) != 0) {
                rc = cli_fs_error(cmd, &err);
                goto out;
            }
        }
        if ((rc = write_outputs(cmd, a.out, &d, summary)) != 0) {
            goto out;
        }
    }
    if (a.json) {
        json_incref(summary);
        rc = cli_print_json(cmd, summary);
    } else {
        print_text(&a, x, &d, used, t2 - t1, t1 - t0, rec, rank);
        rc = CLI_OK;
    }
out:
    json_decref(summary);
    json_decref(head);
    fs_svd_clear(&d);
    fs_mat_free(x);
    free(mean);
    return rc;
}
