/* The steps that the two front ends of `fedsvd local` share: see
 * local_common.h. */
#include "local_common.h"

#include <stdio.h>
#include <stdlib.h>

#include "orch.h"

int local_read_args(const char *cmd, int argc, char **argv, const struct cli_opt *opts,
                    size_t nopts, struct local_args *a, int *help)
{
    char **rest = calloc((size_t)argc + 1, sizeof *rest);
    int rc;

    if (rest == NULL) {
        return cli_runtime_error(cmd, "out of memory");
    }
    rc = local_take_restarts(cmd, &argc, argv, a->restart, &a->nrestart);
    if (rc == CLI_OK) {
        rc = local_parse_args(cmd, argc, argv, opts, nopts, a->party, &a->nparty, a->fail,
                              &a->nfail, a->input, &a->ninput, rest, help);
    }
    free(rest); /* the values point into argv */
    return rc;
}

int local_apply_args(struct local *L, struct local_args *a, size_t nphases, enum fs_algo algo,
                     size_t rt_default)
{
    const char *cmd = L->cmd;
    size_t rt = rt_default;
    int rc;

    L->k = a->nparty;
    L->shown = a->party;
    L->out = a->s_out;
    L->keep = a->keep;
    L->thr = L->k / 2 + 1;
    L->allow_low_threshold = a->allow_low;
    L->s_secagg = a->s_secagg;
    L->allow_dropouts = a->allow_dropouts; /* a restart in consistency needs it */
    if ((rc = local_alloc(L, a->fail, a->nfail, nphases)) != CLI_OK ||
        (rc = local_parse_restarts(L, algo, a->restart, a->nrestart)) != CLI_OK) {
        return rc;
    }
    if ((a->s_thr != NULL &&
         (rc = cli_parse_size(cmd, "--threshold", a->s_thr, 1, L->k, &L->thr)) != 0) ||
        (a->s_rt != NULL &&
         (rc = cli_parse_size(cmd, "--round-timeout", a->s_rt, 1, 86400, &rt)) != 0) ||
        (a->s_timeout != NULL && (rc = cli_parse_double(cmd, "--timeout", a->s_timeout, 0, CLI_OPEN,
                                                        0, CLI_NONE, &L->timeout)) != 0) ||
        (rc = cli_parse_format(cmd, a->s_format, &L->json)) != 0) {
        return rc;
    }
    if (L->s_secagg != NULL && fs_job_secagg_parse(L->s_secagg, &L->secagg) != 0) {
        return cli_usage_error(cmd, "--secagg: expected full or plus, got '%s'", L->s_secagg);
    }
    L->round_timeout = (double)rt;
    return CLI_OK;
}

int local_open_run(struct local *L, const struct local_args *a, struct local_signals *sigs)
{
    int rc;

    if ((rc = local_find_bin_dir(L, a->s_bin)) != CLI_OK ||
        (rc = cli_mkdir_p(L->cmd, a->s_out)) != CLI_OK) {
        return rc;
    }
    local_remove_stale(L);
    local_signals_install(sigs);
    return local_setup_root(L);
}

int local_init_procs(struct local *L)
{
    int rc;

    if ((rc = local_init_proc(L, &L->server, "aggregation-server", "aggregation-server")) !=
            CLI_OK ||
        (rc = local_shards_init(L)) != CLI_OK ||
        (L->fed &&
         (rc = local_init_proc(L, &L->masker, "masking-server", "masking-server")) != CLI_OK)) {
        return rc;
    }
    for (size_t i = 0; i < L->k; i++) {
        char name[32];

        snprintf(name, sizeof name, "agent-%zu", i + 1);
        if ((rc = local_init_proc(L, &L->agents[i], name, "client-agent")) != CLI_OK) {
            return rc;
        }
    }
    return CLI_OK;
}

int local_finish(struct local *L, local_summary_fn summary_fn, local_print_fn print_fn, void *ctx,
                 const char *error, int rc)
{
    json_t *summary = NULL;

    orch_progress_done(&L->prog);
    local_stop(L);
    if (L->root[0] != '\0') {
        local_copy_logs(L);
        if (L->t_start > 0) {
            summary = summary_fn(ctx, error[0] != '\0' ? error : NULL);
            rc = local_write_summary(L, summary, rc);
        }
        local_drop_root(L);
    }
    if (summary != NULL && L->json) {
        /* on failure too: the summary says what failed */
        int prc = cli_print_json(L->cmd, json_incref(summary));

        rc = rc != CLI_OK ? rc : prc;
    } else if (rc == CLI_OK && summary != NULL) {
        print_fn(ctx, summary);
        local_print_restarts(L);
    }
    json_decref(summary);
    return rc;
}
