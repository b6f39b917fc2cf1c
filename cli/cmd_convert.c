/* fedsvd convert: read a matrix in any supported format and write it as
 * .npy, CSV or MatrixMarket (sparse stays sparse for .mtx to .mtx). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "io/matio.h"
#include "la/csr.h"
#include "la/mat.h"

#define NOPTS(a) (sizeof(a) / sizeof((a)[0]))

static void convert_help(void)
{
    printf("Usage: fedsvd convert --input FILE --out FILE [--input-format F] [--format text|json]\n"
           "\n"
           "Convert a matrix file. The output format follows the extension of --out:\n"
           ".npy (float64, Fortran order), .csv (%%.17g, exact round trip, no header) or\n"
           ".mtx/.mm (MatrixMarket coordinate real general; zeros are dropped).\n"
           "\n"
           "Options:\n"
           "  --input FILE         .npy, CSV, MatrixMarket or IDX\n"
           "  --input-format F     auto (default), npy, csv, mtx or idx\n"
           "  --out FILE           the output file (written atomically)\n"
           "  --format F           text (default) or json\n"
           "  -h, --help           show this text\n");
}

static int has_suffix(const char *s, const char *suf)
{
    size_t ls = strlen(s);
    size_t lf = strlen(suf);

    return ls >= lf && strcmp(s + ls - lf, suf) == 0;
}

int cmd_convert(int argc, char **argv)
{
    const char *cmd = "convert";
    const char *s_in = NULL, *s_out = NULL, *s_fmt = NULL, *s_format = NULL;
    struct cli_opt opts[] = {
        {"input", CLI_OPT_VALUE, &s_in, NULL},
        {"out", CLI_OPT_VALUE, &s_out, NULL},
        {"input-format", CLI_OPT_VALUE, &s_fmt, NULL},
        {"format", CLI_OPT_VALUE, &s_format, NULL},
    };
    const char *pos[1];
    size_t npos = 0, rows = 0, cols = 0;
    enum fs_io_format fmt = FS_FMT_AUTO;
    int help = 0, json = 0;
    struct fs_err err;
    fs_mat *m = NULL;
    fs_csr *s = NULL;
    int rc;

    fs_err_clear(&err);
    rc = cli_parse(cmd, argc, argv, opts, NOPTS(opts), pos, 0, &npos, &help);
    if (rc != CLI_OK) {
        return rc;
    }
    if (help) {
        convert_help();
        return CLI_OK;
    }
    if (s_in == NULL || s_out == NULL) {
        return cli_usage_error(cmd, "--input and --out are required");
    }
    if (s_fmt != NULL && fs_io_format_parse(s_fmt, &fmt, &err) != 0) {
        return cli_usage_error(cmd, "--input-format: expected auto, npy, csv, mtx or idx, got '%s'",
                               s_fmt);
    }
    if ((rc = cli_parse_format(cmd, s_format, &json)) != 0) {
        return rc;
    }
    if ((has_suffix(s_out, ".mtx") || has_suffix(s_out, ".mm")) &&
        (fmt == FS_FMT_MTX || (fmt == FS_FMT_AUTO && fs_io_is_sparse_file(s_in)))) {
        if (fs_io_load_sparse(s_in, fmt, NULL, &s, &err) != 0 ||
            fs_mtx_write_csr(s_out, s, &err) != 0) {
            rc = cli_fs_error(cmd, &err);
            goto out;
        }
        rows = s->rows;
        cols = s->cols;
    } else {
        if (fs_io_load_dense(s_in, fmt, NULL, &m, &err) != 0 ||
            cli_write_dense_any(s_out, m, &err) != 0) {
            rc = cli_fs_error(cmd, &err);
            goto out;
        }
        rows = m->rows;
        cols = m->cols;
    }
    if (json) {
        rc = cli_print_json(cmd, json_pack("{s:s, s:s, s:[I,I]}", "input", s_in, "out", s_out,
                                           "shape", (json_int_t)rows, (json_int_t)cols));
    } else {
        printf("wrote %s (%zu x %zu)\n", s_out, rows, cols);
    }
out:
    fs_csr_free(s);
    fs_mat_free(m);
    return rc;
}
