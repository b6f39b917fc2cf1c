/* fedsvd local --shards S (docs/sharding.md): S - 1 aggregation-server
 * processes beside the job's server, the shard peers. They start first, on
 * free loopback ports, so that the coordinator (L->server) starts with a
 * --shard-peer URL for each; every one of them reads the same 0600 peer
 * token file from the run's root. The summary gets each shard's rows and
 * peak memory. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "jobdoc.h"
#include "local.h"
#include "net/auth.h"
#include "orch.h"

int local_shards_init(struct local *L)
{
    struct fs_err err;

    fs_err_clear(&err);
    if (L->shards <= 1) {
        return CLI_OK;
    }
    L->peers = calloc(L->shards - 1, sizeof *L->peers);
    if (L->peers == NULL) {
        return cli_runtime_error(L->cmd, "out of memory");
    }
    /* root is at most sizeof root - 256 bytes (local_setup_root) */
    if ((size_t)snprintf(L->peer_file, sizeof L->peer_file, "%s/peer.token", L->root) >=
        sizeof L->peer_file) {
        return cli_runtime_error(L->cmd, "%s: path too long", L->root);
    }
    if (fs_auth_token_generate(L->peer_tok, &err) != 0 ||
        fs_auth_token_write_file(L->peer_file, L->peer_tok, &err) != 0) {
        return cli_fs_error(L->cmd, &err);
    }
    for (size_t i = 0; i + 1 < L->shards; i++) {
        char name[32];
        int rc;

        snprintf(name, sizeof name, "aggregation-shard-%u", (unsigned)(i + 1) & 0xffu);
        if ((rc = local_init_proc(L, &L->peers[i], name, "aggregation-server")) != CLI_OK) {
            return rc;
        }
    }
    return CLI_OK;
}

int local_shards_start(struct local *L)
{
    struct proc *ps[FS_JOB_MAX_SHARDS];
    uint16_t ports[FS_JOB_MAX_SHARDS];
    size_t n = L->shards > 1 ? L->shards - 1 : 0;
    int rc;

    if (n == 0) {
        return CLI_OK;
    }
    if (local_free_ports(n, ports) != 0) {
        return cli_runtime_error(L->cmd, "cannot find free ports: %s", strerror(errno));
    }
    for (size_t i = 0; i < n; i++) {
        ps[i] = &L->peers[i];
        if ((rc = local_start_proc(L, ps[i], ports[i], 1)) != CLI_OK) {
            return rc;
        }
    }
    return local_wait_ready(L, ps, n);
}

size_t local_shards_procs(struct local *L, struct proc **ps)
{
    size_t n = 0;

    for (size_t i = 0; L->peers != NULL && i + 1 < L->shards; i++) {
        ps[n++] = &L->peers[i];
    }
    return n;
}

int local_shards_check(struct local *L)
{
    char st[64];

    for (size_t i = 0; L->peers != NULL && i + 1 < L->shards; i++) {
        if (!local_proc_running(&L->peers[i])) {
            local_describe_status(&L->peers[i], st, sizeof st);
            return cli_runtime_error(L->cmd, "%s stopped unexpectedly (%s); see %s/logs/%s.log",
                                     L->peers[i].name, st, L->out, L->peers[i].name);
        }
    }
    return CLI_OK;
}

void local_shards_copy_logs(struct local *L, const char *dir)
{
    char to[LOCAL_PATH];

    for (size_t i = 0; L->peers != NULL && i + 1 < L->shards; i++) {
        if ((size_t)snprintf(to, sizeof to, "%s/%s.log", dir, L->peers[i].name) < sizeof to) {
            (void)local_copy_file(L->peers[i].log, to);
        }
    }
}

json_t *local_shards_json(const struct local *L)
{
    json_t *a = json_array();

    for (size_t s = 0; a != NULL && L->shards > 1 && s < L->shards; s++) {
        const struct proc *p = s == 0 ? &L->server : &L->peers[s - 1];
        const struct fs_job_status *st = L->status;
        json_t *rows = json_null();

        if (st != NULL && st->nshards == L->shards) {
            rows = json_pack("[I, I]", (json_int_t)st->shards[s].lo, (json_int_t)st->shards[s].hi);
        }
        if (rows == NULL) {
            rows = json_null();
        }
        json_array_append_new(
            a,
            json_pack("{s:I, s:s, s:o, s:o}", "shard", (json_int_t)s, "process", p->name, "rows",
                      rows, "peak_rss_bytes",
                      p->hwm_kb >= 0 ? json_integer((json_int_t)(p->hwm_kb * 1024)) : json_null()));
    }
    return a;
}

void local_shards_free(struct local *L)
{
    for (size_t i = 0; L->peers != NULL && i + 1 < L->shards; i++) {
        fs_httpc_free(L->peers[i].http);
    }
    free(L->peers);
    L->peers = NULL;
    memset(L->peer_tok, 0, sizeof L->peer_tok);
}
