/* Shared pieces of the fedsvd command: exit codes, option parsing, number
 * parsing with junk rejection, output helpers, and the command entry points.
 *
 * Every command is `int cmd_x(int argc, char **argv)` where argv[0] is the
 * command's own name ("svd", "dp calibrate", ...); it returns the process
 * exit status: CLI_OK, CLI_ERUNTIME (file/format/numeric failure) or
 * CLI_EUSAGE (bad command line). Usage errors and runtime errors are printed
 * as ONE line on stderr, prefixed "fedsvd <command>: ". */
#ifndef FS_CLI_CLI_H
#define FS_CLI_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "core/err.h"
#include "la/mat.h"

#define CLI_OK       0
#define CLI_ERUNTIME 1
#define CLI_EUSAGE   2

/* ---- option tables ---- */

enum cli_opt_kind {
    CLI_OPT_VALUE = 0, /* --name VALUE or --name=VALUE; the string is borrowed from argv */
    CLI_OPT_FLAG = 1,  /* --name; sets *flag to 1 */
    CLI_OPT_LIST = 2,  /* repeatable --name VALUE: value points to an array of CLI_LIST_MAX + 1
                          NULL pointers, filled in order (NULL-terminated) */
    CLI_OPT_DIR = 3    /* CLI_OPT_VALUE naming a directory: its trailing slashes are removed
                          (in argv; "/" stays), so "DIR/name" never prints as "DIR//name" */
};

#define CLI_LIST_MAX 1000 /* values of one repeatable option */

struct cli_opt {
    const char *name; /* without the leading "--" */
    enum cli_opt_kind kind;
    const char **value; /* CLI_OPT_VALUE: receives the argument */
    int *flag;          /* CLI_OPT_FLAG: set to 1 */
};

/**
 * Parse argv[1..argc-1] against opts. "--help"/"-h" anywhere sets *help and
 * stops parsing (so `fedsvd svd --help --bogus` still prints help). Positional
 * arguments go to pos (up to max_pos, more is a usage error). A repeated
 * option is a usage error (unless CLI_OPT_LIST), as is an unknown one.
 * @return CLI_OK, or CLI_EUSAGE after printing the one-line reason.
 */
int cli_parse(const char *cmd, int argc, char **argv, const struct cli_opt *opts, size_t nopts,
              const char **pos, size_t max_pos, size_t *npos, int *help);

/** Print "fedsvd CMD: <message>" and the "Try ... --help" hint on stderr; returns CLI_EUSAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/** Print "fedsvd CMD: <message>" (one line, newlines flattened) on stderr; returns CLI_ERUNTIME. */
int cli_runtime_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/** Runtime error from an fs_err (its message already names file and position). */
int cli_fs_error(const char *cmd, const struct fs_err *err);

/* ---- number parsing: each returns CLI_OK or CLI_EUSAGE (after printing) ---- */

/** Integer in [min, max]; decimal only, no sign, no junk. */
int cli_parse_size(const char *cmd, const char *flag, const char *s, size_t min, size_t max,
                   size_t *out);

/** Finite double; lo/hi bounds with open (strict) or closed ends. */
enum cli_bound { CLI_CLOSED = 0, CLI_OPEN = 1, CLI_NONE = 2 };
int cli_parse_double(const char *cmd, const char *flag, const char *s, double lo,
                     enum cli_bound lob, double hi, enum cli_bound hib, double *out);

/** Comma-separated list of positive integers ("100,200,300"); *out malloc'd. */
int cli_parse_size_list(const char *cmd, const char *flag, const char *s, size_t max_items,
                        size_t **out, size_t *n);

/** Output format: "text" (default) or "json". *json receives 1 for json. */
int cli_parse_format(const char *cmd, const char *s, int *json);

/**
 * A 32-byte PRG key from --seed: exactly 64 hex digits (the key itself), or
 * a decimal integer (its 8 little-endian bytes, then zeros). NULL s draws a
 * fresh key from the OS CSPRNG. hex receives the 64-digit form (65 bytes).
 * @return CLI_OK, CLI_EUSAGE for junk, CLI_ERUNTIME if the CSPRNG fails.
 */
int cli_parse_seed(const char *cmd, const char *s, uint8_t key[32], char hex[65]);

/* ---- output ---- */

/** Dump a JSON object as one line on stdout (takes a reference: decrefs it). */
int cli_print_json(const char *cmd, json_t *obj);

/** Write a JSON object to path atomically (pretty, trailing newline). Decrefs obj. */
int cli_write_json_file(const char *cmd, const char *path, json_t *obj);

/** json_real that maps NaN/Inf to null (Jansson refuses them). New reference. */
json_t *cli_json_num(double v);

/** Create a directory (and missing parents); existing is fine. */
int cli_mkdir_p(const char *cmd, const char *path);

/** Join dir + "/" + name into buf (cap bytes); CLI_ERUNTIME if too long. */
int cli_path_join(const char *cmd, char *buf, size_t cap, const char *dir, const char *name);

/** Monotonic seconds. */
double cli_now(void);

/** Write a matrix as CSV (%.17g, no header) atomically-ish (temp + rename). */
FS_WUR int cli_write_csv(const char *path, const fs_mat *m, struct fs_err *err);

/** Write a dense matrix as MatrixMarket coordinate (zeros dropped) via the CSR writer. */
FS_WUR int cli_write_mtx_dense(const char *path, const fs_mat *m, struct fs_err *err);

/** Write by extension: .csv, .mtx/.mm, else .npy. */
FS_WUR int cli_write_dense_any(const char *path, const fs_mat *m, struct fs_err *err);

/* ---- figures (cmd_plot.c) ---- */

/** A line plot of the columns of a matrix, as `fedsvd plot line` draws it. */
struct cli_line_plot {
    const char *out;                     /* the SVG file (written atomically) */
    const char *what;                    /* names the values in messages (like --input) */
    const char *title, *xlabel, *ylabel; /* may be NULL */
    const char *names;                   /* comma-separated series names, or NULL */
    int log_y;
};

/** Write y (rows x series, at most 20 series) as opt->out. CLI_OK or CLI_ERUNTIME. */
int cli_plot_line(const char *cmd, const fs_mat *y, const struct cli_line_plot *opt);

/* ---- commands ---- */

int cmd_svd(int argc, char **argv);
int cmd_dp(int argc, char **argv);
int cmd_gen(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_sum(int argc, char **argv);
int cmd_job(int argc, char **argv);
/** fedsvd local for secure-sum, fedsvd and fedpca (cmd_local.c). */
int cmd_local(int argc, char **argv);
/** fedsvd local for the power methods (cmd_local_power.c). */
int cmd_local_power(int argc, char **argv);
int cmd_agent(int argc, char **argv);
int cmd_join(int argc, char **argv);
int cmd_participation(int argc, char **argv);
int cmd_plot(int argc, char **argv);
int cmd_lsa(int argc, char **argv);

#endif
