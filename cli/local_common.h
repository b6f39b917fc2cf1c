/* The steps that the two front ends of `fedsvd local` share (cmd_local.c:
 * secure-sum, fedsvd and fedpca; cmd_local_power.c: the power methods):
 * the command line's common options, the start of a run (directories,
 * signal handlers, temporary root, the processes' paths) and its end (stop,
 * summary.json, what is printed). */
#ifndef FS_CLI_LOCAL_COMMON_H
#define FS_CLI_LOCAL_COMMON_H

#include <jansson.h>
#include <stddef.h>

#include "cli.h"
#include "local.h"

/* The options every algorithm of fedsvd local takes, borrowed from argv. */
struct local_args {
    const char *s_alg, *s_out, *s_thr, *s_rt, *s_timeout, *s_bin, *s_format, *s_secagg;
    int keep, allow_dropouts, allow_low;
    const char *party[LOCAL_MAX_PARTIES], *fail[LOCAL_MAX_PARTIES], *input[LOCAL_MAX_PARTIES];
    size_t nparty, nfail, ninput;
    const char *restart[LOCAL_MAX_RESTARTS];
    size_t nrestart;
};

/* The entries of those options in a cli_opt table (the member name of the
 * struct local_args in the caller's argument struct). */
#define LOCAL_COMMON_OPTS(c)                                                                       \
    {"algorithm", CLI_OPT_VALUE, &(c).s_alg, NULL}, {"out", CLI_OPT_DIR, &(c).s_out, NULL},        \
        {"threshold", CLI_OPT_VALUE, &(c).s_thr, NULL},                                            \
        {"allow-low-threshold", CLI_OPT_FLAG, NULL, &(c).allow_low},                               \
        {"secagg", CLI_OPT_VALUE, &(c).s_secagg, NULL},                                            \
        {"round-timeout", CLI_OPT_VALUE, &(c).s_rt, NULL},                                         \
        {"timeout", CLI_OPT_VALUE, &(c).s_timeout, NULL},                                          \
        {"bin-dir", CLI_OPT_DIR, &(c).s_bin, NULL},                                                \
        {"format", CLI_OPT_VALUE, &(c).s_format, NULL}, {"keep", CLI_OPT_FLAG, NULL, &(c).keep},   \
    {                                                                                              \
        "allow-dropouts", CLI_OPT_FLAG, NULL, &(c).allow_dropouts                                  \
    }

/**
 * The command line into a (the repeatable options, --restart) and the
 * options of opts; --help anywhere sets *help (CLI_OK then).
 */
int local_read_args(const char *cmd, int argc, char **argv, const struct cli_opt *opts,
                    size_t nopts, struct local_args *a, int *help);

/**
 * The common options into L (parties, --out, --keep, --threshold (default
 * a majority), --allow-low-threshold, --secagg, --round-timeout (default
 * rt_default seconds), --timeout, --format), L's per-party arrays with the
 * --fail-party values (nphases allowed), and the --restart specs for a job
 * of algorithm algo. L keeps a->party (L->shown). Exit status 2 for a bad
 * value.
 */
int local_apply_args(struct local *L, struct local_args *a, size_t nphases, enum fs_algo algo,
                     size_t rt_default);

/**
 * The run's start: the binaries' directory, --out, the stale results of an
 * earlier run removed, the signal handlers (restored by the caller with
 * local_signals_restore), the temporary root.
 */
int local_open_run(struct local *L, const struct local_args *a, struct local_signals *sigs);

/** The processes' paths: the server (and its shard peers), the masker when L->fed, the agents. */
int local_init_procs(struct local *L);

/* The summary of a run (error: what failed, or NULL) and its text output. */
typedef json_t *(*local_summary_fn)(void *ctx, const char *error);
typedef void (*local_print_fn)(void *ctx, const json_t *summary);

/**
 * Stop everything, write summary.json (when the run got as far as a clock),
 * print the summary (--format json, on failure too) or the text outcome (on
 * success), then the restarts: the exit status (rc, or the first failure
 * after it).
 */
int local_finish(struct local *L, local_summary_fn summary_fn, local_print_fn print_fn, void *ctx,
                 const char *error, int rc);

#endif
