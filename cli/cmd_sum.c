/* fedsvd sum: the elementwise sum of matrices of one shape, accumulated in
 * long double (the reference a secure-sum result is checked against). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "io/matio.h"
#include "la/mat.h"

#define NOPTS(a)   (sizeof(a) / sizeof((a)[0]))
#define SUM_MAX_IN 1000

static void sum_help(void)
{
    printf("Usage: fedsvd sum --out FILE [--input-format F] [--format text|json] FILE...\n"
           "\n"
           "Add matrices of the same shape elementwise and write the sum (float64). The\n"
           "accumulation is in long double, then rounded once, so the result is the\n"
           "correctly rounded sum for up to a few thousand terms of similar magnitude: the\n"
           "reference for 'fedsvd local --algorithm secure-sum'.\n"
           "\n"
           "Options:\n"
           "  FILE...              1 to 1000 matrices (.npy, CSV, MatrixMarket, IDX)\n"
           "  --out FILE           the sum (.npy, .csv or .mtx by extension)\n"
           "  --input-format F     auto (default), npy, csv, mtx or idx, for every input\n"
           "  --format F           text (default) or json\n"
           "  -h, --help           show this text\n"
           "\n"
           "Example: fedsvd sum --out expected.npy a.npy b.npy c.npy\n");
}

int cmd_sum(int argc, char **argv)
{
    const char *cmd = "sum";
    const char *s_out = NULL, *s_fmt = NULL, *s_format = NULL;
    struct cli_opt opts[] = {
        {"out", CLI_OPT_VALUE, &s_out, NULL},
        {"input-format", CLI_OPT_VALUE, &s_fmt, NULL},
        {"format", CLI_OPT_VALUE, &s_format, NULL},
    };
    const char *pos[SUM_MAX_IN];
    size_t npos = 0, rows = 0, cols = 0;
    enum fs_io_format fmt = FS_FMT_AUTO;
    int help = 0, json = 0, rc;
    struct fs_err err;
    long double *acc = NULL;
    fs_mat *m = NULL;

    fs_err_clear(&err);
    rc = cli_parse(cmd, argc, argv, opts, NOPTS(opts), pos, SUM_MAX_IN, &npos, &help);
    if (rc != CLI_OK) {
        return rc;
    }
    if (help) {
        sum_help();
        return CLI_OK;
    }
    if (s_out == NULL || npos == 0) {
        return cli_usage_error(cmd, "--out and at least one input FILE are required");
    }
    if (s_fmt != NULL && fs_io_format_parse(s_fmt, &fmt, &err) != 0) {
        return cli_usage_error(cmd, "--input-format: expected auto, npy, csv, mtx or idx, got '%s'",
                               s_fmt);
    }
    if ((rc = cli_parse_format(cmd, s_format, &json)) != 0) {
        return rc;
    }
    for (size_t f = 0; f < npos; f++) {
        if (fs_io_load_dense(pos[f], fmt, NULL, &m, &err) != 0) {
            rc = cli_fs_error(cmd, &err);
            goto out;
        }
        if (f == 0) {
            rows = m->rows;
            cols = m->cols;
            acc = calloc(rows * cols > 0 ? rows * cols : 1, sizeof *acc);
            if (acc == NULL) {
                rc = cli_runtime_error(cmd, "out of memory for a %zu x %zu sum", rows, cols);
                goto out;
            }
        } else if (m->rows != rows || m->cols != cols) {
            rc = cli_runtime_error(cmd, "%s: shape %zu x %zu differs from %s (%zu x %zu)", pos[f],
                                   m->rows, m->cols, pos[0], rows, cols);
            goto out;
        }
        for (size_t j = 0; j < cols; j++) {
            for (size_t i = 0; i < rows; i++) {
                acc[j * rows + i] += (long double)FS_MAT_AT(m, i, j);
            }
        }
        fs_mat_free(m);
        m = NULL;
    }
    m = fs_mat_new(rows, cols);
    if (m == NULL) {
        rc = cli_runtime_error(cmd, "out of memory");
        goto out;
    }
    for (size_t j = 0; j < cols; j++) {
        for (size_t i = 0; i < rows; i++) {
            FS_MAT_AT(m, i, j) = (double)acc[j * rows + i];
        }
    }
    if (cli_write_dense_any(s_out, m, &err) != 0) {
        rc = cli_fs_error(cmd, &err);
        goto out;
    }
    if (json) {
        rc = cli_print_json(cmd, json_pack("{s:s, s:I, s:[I,I]}", "out", s_out, "inputs",
                                           (json_int_t)npos, "shape", (json_int_t)rows,
                                           (json_int_t)cols));
    } else {
        printf("wrote %s (%zu x %zu, sum of %zu)\n", s_out, rows, cols, npos);
    }
out:
    fs_mat_free(m);
    free(acc);
    return rc;
}
