/* One thread per participation: poll the job, ask the driver
 * (lib/proto/agent_driver.h) what comes next, move the SecAgg client's
 * messages (lib/proto/secagg.h) over HTTP (docs/wire-secure-sum.md), and
 * persist progress. The fedsvd/fedpca steps (keys from the masking server,
 * sealed exponents, the local recovery) are in worker_fed.c, the
 * power-method steps in worker_power.c, the requests in worker_io.c. No
 * protocol decisions here beyond "which request carries this message".
 *
 * Static functions return 0, CA_STEP_WAIT (the server is not there yet: poll
 * again) or a negative FS_E* code. */
#include "worker.h"

#include "crypto/ct.h"
#include "io/matio.h"
#include "la/fixedpt.h"
#include "net/http_client.h"
#include "proto/agent_driver.h"
#include "proto/secagg.h"
#include "teststop.h"
#include "wire.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MASK_PIECE ((size_t)65536) /* words encoded and masked at a time */

/* First job status: the job must be the one the invitation describes. */
static int setup(struct ca_wk *w, const struct fs_agent_job *job, struct fs_err *err)
{
    const struct fs_invitation *inv = &w->p->req.inv;
    int rc;

    if (inv->is_fedpower) {
        return ca_wk_setup_power(w, job, err);
    }
    if (inv->is_fedsvd) {
        if (job->parties != inv->parties || job->threshold != inv->threshold) {
            return fs_err_set(err, FS_EINVAL,
                              "the job does not match the invitation (parties %u/%u, threshold "
                              "%u/%u)",
                              job->parties, inv->parties, job->threshold, inv->threshold);
        }
        rc = w->fed == NULL ? ca_wk_setup_fed(w, job, err) : 0;
        if (rc == 0 && job->aggregations != ca_fed_aggregations(w->fed)) {
            rc = fs_err_set(err, FS_EINVAL, "the job runs %u aggregations, expected %u",
                            job->aggregations, ca_fed_aggregations(w->fed));
        }
        if (rc != 0) {
            return rc;
        }
        memset(&w->cfg, 0, sizeof w->cfg);
        w->cfg.n = job->parties;
        w->cfg.t = job->threshold;
        w->cfg.aggregations = job->aggregations;
        /* without allow_dropouts every sum needs every party: no consistency round */
        w->cfg.all_inputs = inv->fed.allow_dropouts ? 0 : 1;
        rc = fs_agent_job_secagg_config(job, &w->cfg, err);
        if (rc == 0) {
            rc = fs_wire_secagg_job_id(inv->job_id, w->cfg.job_id, err);
        }
        if (rc == 0) {
            rc = fs_secagg_config_check(&w->cfg, err);
        }
        if (rc == 0) {
            rc = fs_agent_driver_init_fed(&w->drv, job->aggregations, job->aggregations - 1,
                                          w->p->req.fail_at, err);
        }
        if (rc == 0) {
            fs_agent_driver_set_all_inputs(&w->drv, !inv->fed.allow_dropouts);
        }
        if (rc == 0) {
            w->ready = 1;
        }
        return rc;
    }
    if (job->parties != inv->parties || job->threshold != inv->threshold ||
        job->rows != inv->rows || job->cols != inv->cols) {
        return fs_err_set(err, FS_EINVAL,
                          "the job does not match the invitation (parties %u/%u, threshold "
                          "%u/%u, shape %llux%llu/%llux%llu)",
                          job->parties, inv->parties, job->threshold, inv->threshold,
                          (unsigned long long)job->rows, (unsigned long long)job->cols,
                          (unsigned long long)inv->rows, (unsigned long long)inv->cols);
    }
    memset(&w->cfg, 0, sizeof w->cfg);
    w->cfg.n = job->parties;
    w->cfg.t = job->threshold;
    w->cfg.aggregations = job->aggregations;
    rc = fs_agent_job_secagg_config(job, &w->cfg, err);
    if (rc == 0) {
        rc = fs_wire_secagg_job_id(inv->job_id, w->cfg.job_id, err);
    }
    if (rc == 0) {
        rc = fs_secagg_config_check(&w->cfg, err);
    }
    if (rc == 0) {
        rc = fs_agent_driver_init(&w->drv, job->aggregations, w->p->req.fail_at, err);
    }
    if (rc == 0) {
        w->ready = 1;
    }
    return rc;
}

static int step_advertise(struct ca_wk *w, struct fs_err *err)
{
    char path[128];
    int rc;

    if (w->sc == NULL) {
        uint8_t sk[32];
        rc = ca_files_identity_load(w->ag->cfg.data_dir, sk, err);
        if (rc == 0) {
            /* every random value from the participation's secret: see agent.h */
            rc = fs_secagg_client_new_det(&w->cfg, w->p->req.inv.party, sk, w->p->secret, &w->sc,
                                          err);
        }
        fs_wipe(sk, sizeof sk);
        if (rc == 0 && w->p->req.inv.has_pins) {
            /* the job's pins: a roster carrying another key is refused */
            rc = fs_secagg_client_set_pins(
                w->sc, (const uint8_t(*)[FS_SECAGG_KEY_LEN])w->p->req.inv.party_keys, w->cfg.n,
                err);
        }
        if (rc == 0) {
            rc = fs_secagg_client_advertise(w->sc, &w->adv, err);
        }
        if (rc != 0) {
            fs_secagg_client_free(w->sc);
            w->sc = NULL;
            return rc;
        }
    }
    rc = ca_wk_path(w, path, sizeof path, "/keys");
    if (rc != 0) {
        return fs_err_set(err, rc, "path too long");
    }
    return ca_wk_post_json(w, path, fs_wire_adv_encode(&w->adv, w->has_exp, w->max_exp), err);
}

static int step_roster(struct ca_wk *w, struct fs_err *err)
{
    struct fs_secagg_adv *roster = NULL;
    json_t *j = NULL;
    char path[128];
    size_t k = 0;
    int rc;

    rc = ca_wk_path(w, path, sizeof path, "/keys");
    if (rc == 0) {
        rc = ca_wk_get_json(w, path, &j, err);
    }
    if (rc != 0) {
        goto out;
    }
    rc = fs_wire_roster_decode(j, w->cfg.n, &roster, &k, err);
    if (rc != 0) {
        fs_err_prefix(err, "GET %s: ", path);
        goto out;
    }
    {
        int present = 0;
        for (size_t i = 0; i < k; i++) {
            present |= roster[i].id == w->p->req.inv.party;
        }
        if (!present) {
            rc = fs_err_set(err, FS_ESTATE,
                            "dropped by the server: this party is not in the roster of key "
                            "advertisements");
            goto out;
        }
    }
    rc = fs_secagg_client_share_keys(w->sc, roster, k, &w->cts, &w->ncts, err);
out:
    free(roster);
    json_decref(j);
    return rc;
}

static int step_share(struct ca_wk *w, struct fs_err *err)
{
    const struct fs_secagg_share_ct **ptrs = NULL;
    char path[128];
    int rc;

    ptrs = calloc(w->ncts + 1, sizeof *ptrs);
    if (ptrs == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < w->ncts; i++) {
        ptrs[i] = &w->cts[i];
    }
    rc = ca_wk_path(w, path, sizeof path, "/shares");
    if (rc == 0) {
        rc = ca_wk_post_json(w, path, fs_wire_shares_encode(ptrs, w->ncts, 0), err);
    }
    free(ptrs);
    if (rc == 0) {
        fs_secagg_share_cts_free(w->cts, w->ncts);
        w->cts = NULL;
        w->ncts = 0;
    }
    return rc;
}

static int step_receive(struct ca_wk *w, struct fs_err *err)
{
    struct fs_secagg_share_ct *cts = NULL;
    json_t *j = NULL;
    char path[128];
    size_t k = 0;
    int rc;

    rc = ca_wk_path(w, path, sizeof path, "/shares");
    if (rc == 0) {
        rc = ca_wk_get_json(w, path, &j, err);
    }
    if (rc == FS_ECONFLICT && w->local) {
        /* replaying after a restart, and the server has let the shares go
         * (the last unmasking has what it needs): no secure-aggregation
         * state to rebuild, the result is all that is left */
        w->sa_skip = 1;
        rc = 0;
        goto out;
    }
    if (rc != 0) {
        goto out;
    }
    rc = fs_wire_shares_decode(j, 1, w->p->req.inv.party, fs_secagg_share_ct_len(&w->cfg), w->cfg.n,
                               &cts, &k, err);
    if (rc != 0) {
        fs_err_prefix(err, "GET %s: ", path);
        goto out;
    }
    rc = fs_secagg_client_receive_shares(w->sc, cts, k, err);
out:
    fs_secagg_share_cts_free(cts, k);
    json_decref(j);
    return rc;
}

static int step_begin(struct ca_wk *w, uint32_t r, struct fs_err *err)
{
    uint32_t me = w->p->req.inv.party;
    int rc;

    fs_agent_agg_clear(&w->agg);
    w->has_agg = 0;
    rc = ca_wk_fetch_agg(w, r, &w->agg, err);
    if (rc != 0) {
        return rc;
    }
    w->has_agg = 1;
    w->chunks_total = ca_wk_chunks_total(w, r);
    if (!ca_in_set(w->agg.active, w->agg.nactive, me)) {
        return fs_err_set(err, FS_ESTATE,
                          "dropped by the server: not in the active set of aggregation %u", r);
    }
    if (w->pw != NULL && w->local && (w->job_agg != r || w->job_done)) {
        /* replaying a round the job has closed: its upload is in, nothing
         * of the local iterations is needed again */
        if (ca_power_kind(w->pw) == FS_AGENT_POWER_PLAIN) {
            return 0;
        }
    } else if (w->pw != NULL) {
        rc = ca_wk_power_begin(w, r, err);
        if (rc != 0 || ca_power_kind(w->pw) == FS_AGENT_POWER_PLAIN) {
            return rc;
        }
    } else if (w->fed == NULL && w->max_abs > w->agg.fp.bound) {
        return fs_err_set(err, FS_EINVAL,
                          "the dataset's largest |value| is above the job's fixed-point bound "
                          "%g",
                          w->agg.fp.bound);
    }
    if (w->sa_skip) {
        return 0;
    }
    rc = fs_secagg_client_begin(w->sc, r, w->agg.length, w->agg.active, w->agg.nactive, err);
    if (rc != 0) {
        return rc;
    }
    free(w->words);
    w->words = malloc((size_t)w->agg.chunk_words * sizeof *w->words);
    if (w->words == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory for a %llu-word chunk",
                          (unsigned long long)w->agg.chunk_words);
    }
    w->chunks_done = 0;
    return 0;
}

static int step_upload(struct ca_wk *w, uint32_t r, struct fs_err *err)
{
    const double *x =
        w->p->data != NULL ? w->p->data->data : NULL; /* column-major: word i is x[i] */
    uint8_t hdr[CA_NPY_HEADER_CAP];
    int rc = 0;

    if (w->local || w->sa_skip) {
        /* replayed: the upload is in the server's sum already (or the job
         * went on without it); masked chunks are regenerated, never stored */
        if (w->fed != NULL) {
            ca_fed_end_upload(w->fed, r);
        }
        return 0;
    }
    rc = ca_wk_upload_begin(w, r, err);
    while (rc == 0 && w->chunks_done < w->chunks_total) {
        struct ca_chunk_target t;
        struct fs_npy_header h;
        struct ca_body_src src;
        size_t hlen = 0;
        uint64_t off;
        size_t m;

        if (atomic_load(&w->p->stop) != 0) {
            return CA_STEP_WAIT; /* the loop reports why it stops */
        }
        /* the job route (shard 0), or a shard peer's window (worker_shard.c) */
        rc = ca_wk_chunk_target(w, r, w->chunks_done, &t, err);
        if (rc != 0) {
            break;
        }
        off = t.off;
        m = t.m;
        /* Encoding and masking are deterministic, so a retried chunk is
         * byte-identical (the server accepts identical repeats). They run
         * over pieces of at most MASK_PIECE words: each PRG stream (one per
         * other party, plus the self mask) then passes over a piece that
         * stays in the cache, however large the server's chunks are. */
        for (size_t k = 0; rc == 0 && k < m; k += MASK_PIECE) {
            size_t pm = m - k < MASK_PIECE ? m - k : MASK_PIECE;
            uint64_t *pw = w->words + k;
            if (w->fed != NULL) {
                rc = ca_fed_chunk(w->fed, r, w->sc, off + k, pw, pm, err);
            } else if (w->pw != NULL) {
                rc = ca_power_chunk(w->pw, w->sc, off + k, pw, pm, err);
            } else {
                rc = fs_fixedpt_encode(&w->agg.fp, x + off + k, pw, pm, err);
                if (rc == 0) {
                    rc = fs_secagg_client_mask(w->sc, off + k, pw, pw, pm, err);
                }
            }
        }
        if (rc != 0) {
            break;
        }
        memset(&h, 0, sizeof h);
        h.dtype = FS_NPY_U8;
        h.fortran_order = 0;
        h.ndim = 1;
        h.shape[0] = m;
        h.shape[1] = 1;
        rc = fs_npy_format_header(&h, hdr, sizeof hdr, &hlen, err);
        if (rc != 0) {
            break;
        }
        src.a = hdr;
        src.alen = hlen;
        src.b = (const uint8_t *)w->words;
        src.blen = m * sizeof(uint64_t);
        src.pos = 0;
        rc = ca_wk_ledger_before_upload(w, err);
        if (rc == 0) {
            rc = ca_wk_call_on(w, t.http, "PUT", t.path, NULL, &src, NULL, err);
            if (rc != 0 && rc != CA_STEP_WAIT && t.shard > 0) {
                fs_err_prefix(err, "shard %u (%s): ", t.shard, ca_wk_shard_url(w, t.shard));
            }
        }
        if (rc != 0) {
            break;
        }
        w->chunks_done++;
        ca_wk_save(w, 0);
    }
    if (rc == 0 && w->fed != NULL) {
        ca_fed_end_upload(w->fed, r);
        ca_wk_add_timing(w, ca_fed_is_stats(w->fed, r) ? "statistics" : "upload",
                         ca_mono_s() - w->t_step0);
    }
    if (rc == 0 && w->pw != NULL) {
        ca_wk_add_timing(w, "upload", ca_mono_s() - w->t_step0);
    }
    return rc;
}

static int step_survivors(struct ca_wk *w, uint32_t r, struct fs_err *err)
{
    struct fs_agent_agg a;
    int rc;

    if (w->sa_skip) {
        return 0;
    }
    rc = ca_wk_fetch_agg(w, r, &a, err);
    if (rc != 0) {
        return rc;
    }
    if (!a.has_survivors) {
        rc = CA_STEP_WAIT;
    } else if (!ca_in_set(a.survivors, a.nsurvivors, w->p->req.inv.party)) {
        rc = fs_err_set(err, FS_ESTATE,
                        "dropped by the server: not among the survivors of aggregation %u "
                        "(masked input incomplete at the deadline)",
                        r);
    } else if (w->cfg.all_inputs) {
        /* no consistency round: U3 must be the whole active set (secagg.h) */
        if (w->rv != NULL) {
            fs_wipe(w->rv, w->nrv * sizeof *w->rv);
            free(w->rv);
            w->rv = NULL;
        }
        w->skip_unmask = 0;
        rc = fs_secagg_client_unmask_all(w->sc, a.survivors, a.nsurvivors, &w->rv, &w->nrv, err);
    } else {
        rc = fs_secagg_client_consistency(w->sc, a.survivors, a.nsurvivors, w->sig, err);
    }
    fs_agent_agg_clear(&a);
    return rc;
}

static int step_consistency(struct ca_wk *w, uint32_t r, struct fs_err *err)
{
    char path[128];
    int rc = ca_wk_path(w, path, sizeof path, "/aggregations/%u/consistency", r);

    if (w->sa_skip) {
        return 0;
    }
    if (rc != 0) {
        return fs_err_set(err, rc, "path too long");
    }
    return ca_wk_post_json(w, path, fs_wire_sig_encode(w->sig), err);
}

static int step_signatures(struct ca_wk *w, uint32_t r, struct fs_err *err)
{
    struct fs_agent_agg a;
    int rc;

    if (w->sa_skip) {
        return 0;
    }
    rc = ca_wk_fetch_agg(w, r, &a, err);
    if (rc != 0) {
        return rc;
    }
    w->skip_unmask = 1;
    for (size_t i = 0; a.has_signatures && i < a.nsigs; i++) {
        if (a.sig_ids[i] == w->p->rec.party) {
            w->skip_unmask = 0;
        }
    }
    if (!a.has_signatures) {
        rc = CA_STEP_WAIT;
    } else if (w->skip_unmask) {
        /* The consistency round closed without this party's signature: it
         * is not in the unmasking round (its input is in the sum). */
        rc = 0;
    } else {
        if (w->rv != NULL) {
            fs_wipe(w->rv, w->nrv * sizeof *w->rv);
            free(w->rv);
            w->rv = NULL;
        }
        rc = fs_secagg_client_unmask(w->sc, a.sig_ids, (const uint8_t(*)[FS_SECAGG_SIG_LEN])a.sigs,
                                     a.nsigs, &w->rv, &w->nrv, err);
    }
    fs_agent_agg_clear(&a);
    return rc;
}

static int step_unmask(struct ca_wk *w, uint32_t r, struct fs_err *err)
{
    char path[128];
    int rc = ca_wk_path(w, path, sizeof path, "/aggregations/%u/unmask", r);

    if (w->sa_skip || w->skip_unmask) {
        w->skip_unmask = 0;
        return 0;
    }
    if (rc != 0) {
        return fs_err_set(err, rc, "path too long");
    }
    rc = ca_wk_post_json(w, path, fs_wire_reveals_encode(w->rv, w->nrv), err);
    if (rc == 0) {
        fs_wipe(w->rv, w->nrv * sizeof *w->rv);
        free(w->rv);
        w->rv = NULL;
        w->nrv = 0;
    }
    return rc;
}

static int step_result(struct ca_wk *w, struct fs_err *err)
{
    struct fs_agent_result res;
    json_t *j = NULL;
    char path[160];
    char dest[CA_PATH_MAX + FS_AGENT_FILE_NAME_MAX + 2];
    int rc;

    rc = ca_wk_path(w, path, sizeof path, "/result");
    if (rc == 0) {
        rc = ca_wk_get_json(w, path, &j, err);
    }
    if (rc != 0) {
        goto out;
    }
    rc = fs_agent_result_parse(j, &res, err);
    if (rc != 0) {
        fs_err_prefix(err, "GET %s: ", path);
        goto out;
    }
    for (size_t i = 0; i < res.nfiles; i++) {
        const struct fs_agent_file *f = &res.files[i];
        uint64_t bytes = 0;
        rc = ca_wk_path(w, path, sizeof path, "/result/%s", f->name);
        if (rc == 0 &&
            snprintf(dest, sizeof dest, "%s/%s", w->p->dir, f->name) >= (int)sizeof dest) {
            rc = FS_EINVAL;
        }
        if (rc != 0) {
            rc = fs_err_set(err, rc, "path too long");
            goto out;
        }
        rc = fs_httpc_download(w->http, path, dest, &bytes, err);
        ca_wk_count(w, 0, bytes);
        if (rc == 0) {
            rc = ca_wk_check_file(dest, f, w->ag->cfg.max_elements, err);
        }
        if (rc != 0) {
            unlink(dest);
            goto out;
        }
    }
    if (w->pw != NULL) {
        /* the party's manifest: the server's document, our verified copies */
        json_object_set_new(j, "party", json_integer(w->p->req.inv.party));
        json_object_set(j, "party_timings", w->timings);
        json_object_set_new(j, "bytes_sent", json_integer((json_int_t)w->p->rec.bytes_sent));
        json_object_set_new(j, "bytes_received",
                            json_integer((json_int_t)w->p->rec.bytes_received));
    }
    rc = ca_wk_write_manifest(w, j, err);
out:
    json_decref(j);
    return rc;
}

static int do_step(struct ca_wk *w, const struct fs_agent_action *a, struct fs_err *err)
{
    int rc;

    w->local = a->local;
    if (w->local && w->job_done &&
        (a->step == FS_AGENT_S_ADVERTISE || a->step == FS_AGENT_S_ROSTER ||
         a->step == FS_AGENT_S_SHARE || a->step == FS_AGENT_S_RECEIVE)) {
        /* the job is done (fedsvd/fedpca: only the party's own state is
         * rebuilt for the local recovery), the shares are gone */
        w->sa_skip = 1;
    }
    if (w->local && w->sa_skip &&
        (a->step == FS_AGENT_S_ADVERTISE || a->step == FS_AGENT_S_ROSTER ||
         a->step == FS_AGENT_S_SHARE || a->step == FS_AGENT_S_RECEIVE)) {
        return 0;
    }
    if (w->local && (a->step == FS_AGENT_S_PLAIN_UPLOAD || a->step == FS_AGENT_S_EXCHANGE)) {
        return 0; /* replayed: sent before, or the job went on without it */
    }
    switch (a->step) {
    case FS_AGENT_S_ADVERTISE:
        return step_advertise(w, err);
    case FS_AGENT_S_ROSTER:
        return step_roster(w, err);
    case FS_AGENT_S_SHARE:
        return step_share(w, err);
    case FS_AGENT_S_RECEIVE:
        return step_receive(w, err);
    case FS_AGENT_S_BEGIN:
        return step_begin(w, a->r, err);
    case FS_AGENT_S_UPLOAD:
        return step_upload(w, a->r, err);
    case FS_AGENT_S_SURVIVORS:
        return step_survivors(w, a->r, err);
    case FS_AGENT_S_CONSISTENCY:
        rc = step_consistency(w, a->r, err);
        if (rc == 0 && w->pw != NULL && ca_power_exchange_cheap(w->pw)) {
            /* ot: the answer costs ~0.1 ms, so give it while the others
             * sign: the exchange then closes as soon as unmasking does */
            ca_wk_exchange_early(w, a->r);
        }
        return rc;
    case FS_AGENT_S_SIGNATURES:
        return step_signatures(w, a->r, err);
    case FS_AGENT_S_UNMASK:
        if (w->cfg.all_inputs && w->pw != NULL && ca_power_exchange_cheap(w->pw)) {
            /* ot, no consistency round: the answer costs ~0.1 ms, so give
             * it as unmasking opens, before the unmask message */
            ca_wk_exchange_early(w, a->r);
        }
        rc = step_unmask(w, a->r, err);
        if (rc == 0) {
            /* fedpower-utility: after the unmask message, so that the
             * server unmasks while this party computes its answer */
            ca_wk_exchange_early(w, a->r);
        }
        return rc;
    case FS_AGENT_S_EXPONENT:
        return ca_wk_exponent(w, a->r, err);
    case FS_AGENT_S_EXPONENTS:
        return ca_wk_exponents(w, a->r, err);
    case FS_AGENT_S_STATS:
        return ca_wk_stats(w, a->r, err);
    case FS_AGENT_S_PLAIN_UPLOAD:
        return ca_wk_plain_upload(w, a->r, err);
    case FS_AGENT_S_EXCHANGE:
        return w->x_sent == a->r + 1 ? 0 : ca_wk_exchange(w, a->r, err);
    case FS_AGENT_S_RESULT:
        return w->fed != NULL ? ca_wk_result_fed(w, err) : step_result(w, err);
    default:
        return fs_err_set(err, FS_EINTERNAL, "no such step");
    }
}

/* Errors worth waiting out: the server unreachable or answering 5xx, or
 * this agent's own disk full or read-only (FS_ESTORAGE: the step's state
 * could not be written ahead, nothing was sent). */
static int transient(int rc)
{
    return rc == FS_EIO || rc == FS_ESTORAGE;
}

/* GET the job; path NULL: w->jpath (else a long poll's path, see wait_for_change). */
static int poll_job(struct ca_wk *w, const char *path, struct fs_agent_job *job, struct fs_err *err)
{
    json_t *j = NULL;
    int rc = ca_wk_get_json(w, path != NULL ? path : w->jpath, &j, err);

    if (rc == 0) {
        rc = fs_agent_job_parse(j, job, err);
        if (rc == 0) {
            rc = ca_wk_shards_read(w, j, job, err);
        }
        if (rc != 0) {
            fs_err_prefix(err, "GET %s: ", w->jpath);
        }
    }
    json_decref(j);
    return rc;
}

/* The participation loop's own state. */
struct wk_loop {
    double t_err;                    /* first of a run of transient errors */
    double t_change;                 /* last change of the job's position */
    char last_pos[64];               /* "<phase>/<aggregation>" at the last poll */
    unsigned wait_ms;                /* the next idle poll's wait (doubles up to poll_ms) */
    struct fs_agent_action inflight; /* a step whose sending broke off */
    int has_inflight;
    char dropped[FS_ERR_MSG_MAX]; /* the driver's "dropped" verdict, while re-sending */
    /* long polls: the next job poll waits at the server for the position to change */
    int no_long_poll; /* the server answered a long poll at once: sleep between polls instead */
    int park;         /* the next poll is the long poll park_path */
    char park_path[FS_JOB_ID_MAX + 128];
    unsigned park_ms; /* its wait_ms */
    double park_t0;
    /* after_step: the next step, decided on the job as the last step found it */
    int has_next;
    struct fs_agent_action next;
};

/* The driver's next action on the job's status. A step whose last try
 * broke off is tried once more when the driver finds the job moved on: the
 * server may have taken the message and died before it answered, and gone
 * on with it. It answers a repeat of a message it has as the first one, and
 * refuses it if the round closed without it (then l->dropped says why). */
static void next_action(struct ca_wk *w, struct wk_loop *l, const struct fs_agent_job *job,
                        struct fs_agent_action *act)
{
    struct fs_agent_job_view view;

    fs_agent_job_view(job, &view);
    fs_agent_driver_next(&w->drv, &view, act);
    l->dropped[0] = '\0';
    if (act->act == FS_AGENT_FAIL && l->has_inflight && !view.failed &&
        act->step == l->inflight.step && act->r == l->inflight.r) {
        memcpy(l->dropped, act->reason, sizeof l->dropped);
        *act = l->inflight;
        l->has_inflight = 0;
    }
}

/* Track the job's position; fail when it stalls (not while it waits for
 * partners: the server enforces the join timeout, hours long). */
static int track_position(struct ca_wk *w, struct wk_loop *l, const struct fs_agent_job *job,
                          struct fs_err *err)
{
    const struct ca_config *cfg = &w->ag->cfg;
    char pos[64];

    snprintf(pos, sizeof pos, "%s/%u", job->phase_name, job->aggregation);
    if (strcmp(pos, l->last_pos) != 0 || job->phase == FS_AGENT_J_WAITING) {
        if (strcmp(pos, l->last_pos) != 0) {
            l->wait_ms = CA_POLL_FIRST_MS;
        }
        memcpy(l->last_pos, pos, sizeof pos);
        l->t_change = ca_mono_s();
    } else if (cfg->stall_s > 0 && ca_mono_s() - l->t_change > (double)cfg->stall_s) {
        return fs_err_set(err, FS_ESTATE, "the job made no progress for %u s (phase %s)",
                          cfg->stall_s, job->phase_name);
    }
    return 0;
}

/* Wait for the job to move on from where this poll found it (step_wait: a
 * step found the server not ready, which the job's position may not show:
 * poll the old way). The next poll is a long poll (GET
 * /v1/jobs/{job}?wait_ms=&phase=&aggregation=): the server answers as soon
 * as the phase or the aggregation changes, or after CA_LONG_POLL_MS (or
 * poll_ms if longer, at most CA_LONG_POLL_MAX_MS). The driver's decisions
 * depend on nothing else (struct fs_agent_job_view), so a change is seen
 * within milliseconds and an idle agent sends about one poll a second. A
 * server that answers it at once (one without long polls) gets the old
 * polling: the wait starts at CA_POLL_FIRST_MS after a step and doubles up
 * to poll_ms. */
static void wait_for_change(struct ca_wk *w, struct wk_loop *l, const struct fs_agent_job *job,
                            int step_wait)
{
    const struct ca_config *cfg = &w->ag->cfg;
    unsigned ms = cfg->poll_ms > CA_LONG_POLL_MS ? cfg->poll_ms : CA_LONG_POLL_MS;
    int plain = step_wait || job->phase_name[0] == '\0';

    for (const char *c = job->phase_name; *c != '\0'; c++) {
        plain |= !((*c >= 'a' && *c <= 'z') || *c == '_');
    }
    ms = ms < CA_LONG_POLL_MAX_MS ? ms : CA_LONG_POLL_MAX_MS;
    if (!l->no_long_poll && !plain &&
        snprintf(l->park_path, sizeof l->park_path, "%s?wait_ms=%u&phase=%s&aggregation=%u",
                 w->jpath, ms, job->phase_name, job->aggregation) < (int)sizeof l->park_path) {
        l->park = 1;
        l->park_ms = ms;
        l->park_t0 = ca_mono_s();
        return;
    }
    ca_wk_sleep(w, l->wait_ms < cfg->poll_ms ? l->wait_ms : cfg->poll_ms);
    if (l->wait_ms < cfg->poll_ms) {
        l->wait_ms *= 2;
    }
}

/* After a long poll: a server that answered it at once with the job where
 * it was does not hold polls (or is stopping): poll the old way from now on. */
static void after_long_poll(struct ca_wk *w, struct wk_loop *l, const struct fs_agent_job *job)
{
    char pos[64];

    snprintf(pos, sizeof pos, "%s/%u", job->phase_name, job->aggregation);
    if (strcmp(pos, l->last_pos) == 0 && ca_mono_s() - l->park_t0 < 0.0005 * (double)l->park_ms) {
        l->no_long_poll = 1;
        fs_log_pack(FS_LOG_DEBUG, "the server does not hold job polls: polling", "{s:s}",
                    "participation", w->p->rec.id);
    }
}

/* After a step, the driver is shown the job where the step was decided.
 * When it has nothing more to do there, the next poll is at once the long
 * poll for the job to leave that position, not a plain GET that would find
 * it (most often) where it was and be followed by that long poll; the
 * server answers the long poll at once if the job moved meanwhile. When it
 * has a next step there, that step is taken without a GET in between (run:
 * should the job have moved on and the server refuse it, the job is looked
 * at again and the driver decides anew). Without long polls (or with the
 * fedsvd preparation pending, which runs while waiting) the next poll is a
 * plain GET, as before. */
static void after_step(struct ca_wk *w, struct wk_loop *l, const struct fs_agent_job *job)
{
    struct fs_agent_action act;

    if (l->no_long_poll || (w->fed != NULL && ca_fed_prepare_pending(w->fed))) {
        return;
    }
    next_action(w, l, job, &act);
    if (act.act == FS_AGENT_WAIT) {
        wait_for_change(w, l, job, 0);
    } else if (act.act == FS_AGENT_DO) {
        l->next = act;
        l->has_next = 1;
    }
}

/* Poll the job (the long poll wait_for_change set up, else a plain GET)
 * into *job; the first time, set the participation up from it. */
static int look(struct ca_wk *w, struct wk_loop *l, struct fs_agent_job *job, struct fs_err *err)
{
    int rc;

    if (l->park) {
        l->park = 0;
        rc = poll_job(w, l->park_path, job, err);
        if (rc == 0) {
            after_long_poll(w, l, job);
        } else if (!transient(rc)) {
            l->no_long_poll = 1; /* refused (a server that checks its queries): poll */
            rc = poll_job(w, NULL, job, err);
        }
    } else {
        rc = poll_job(w, NULL, job, err);
    }
    if (rc == 0) {
        w->job_agg = job->aggregation;
        w->job_done = job->phase == FS_AGENT_J_DONE;
    }
    if (rc == 0 && !w->ready) {
        rc = setup(w, job, err);
        if (rc == 0 && w->p->resumed) {
            fs_agent_driver_resume(&w->drv);
        }
    }
    return rc;
}

/*
 * The participation loop. @return 0 when done; otherwise the failure
 * reason is in err (err->code may be 0 for a driver decision).
 */
static int run(struct ca_wk *w, struct fs_err *err)
{
    const struct ca_config *cfg = &w->ag->cfg;
    struct fs_agent_job job;
    struct fs_agent_action act;
    struct wk_loop l;
    int step_wait = 0;
    int rc;

    memset(&l, 0, sizeof l);
    l.t_change = ca_mono_s();
    l.wait_ms = CA_POLL_FIRST_MS;
    for (;;) {
        int stop = atomic_load(&w->p->stop);
        int ahead = l.has_next; /* a step decided without a fresh look (after_step) */
        if (stop != 0) {
            return fs_err_set(err, FS_ESTATE, "%s",
                              stop == 2 ? "cancelled by the operator" : "agent stopped");
        }
        l.has_next = 0;
        if (ahead) {
            act = l.next;
            rc = 0;
        } else if ((rc = look(w, &l, &job, err)) == 0) {
            /* FEDSVD_TEST_STOP_AT_PHASE (a testing aid, off by default): may not return */
            ca_teststop_seen(w->p->rec.id, w->p->rec.job_id, job.phase_name, job.aggregation);
            next_action(w, &l, &job, &act);
        }
        if (rc == 0 && act.act == FS_AGENT_DO) {
            fs_log_pack(FS_LOG_DEBUG, "step", "{s:s, s:s, s:i}", "participation", w->p->rec.id,
                        "step", fs_agent_step_name(act.step), "aggregation", (int)act.r);
            rc = do_step(w, &act, err);
            w->local = 0;
            if (ahead && rc != 0 && rc != CA_STEP_WAIT && !transient(rc)) {
                /* the job may have moved on meanwhile: look again, decide again */
                fs_log_pack(FS_LOG_DEBUG, "step refused: looking at the job again", "{s:s, s:s}",
                            "participation", w->p->rec.id, "error", err->msg);
                fs_err_clear(err);
                continue;
            }
            if (rc != 0 && transient(rc)) {
                l.inflight = act;
                l.has_inflight = 1;
            } else if (rc != 0 && l.dropped[0] != '\0') {
                fs_log_pack(FS_LOG_INFO, "a repeated message was refused", "{s:s, s:s}",
                            "participation", w->p->rec.id, "error", err->msg);
                return fs_err_set(err, FS_ESTATE, "%s", l.dropped);
            }
            if (rc == 0) {
                l.has_inflight = 0;
                fs_agent_driver_done(&w->drv);
                l.t_err = 0;
                l.wait_ms = CA_POLL_FIRST_MS;
                ca_wk_save(w, 0);
                after_step(w, &l, &job);
                continue;
            }
        }
        step_wait = rc == CA_STEP_WAIT; /* a step found the server not there yet */
        if (rc == CA_STEP_WAIT) {
            rc = 0;
            act.act = FS_AGENT_WAIT;
        }
        if (rc != 0) {
            if (!transient(rc)) {
                return rc;
            }
            if (l.t_err == 0) {
                l.t_err = ca_mono_s();
            } else if (ca_mono_s() - l.t_err > (double)cfg->patience_s) {
                return fs_err_prefix(err, "server unreachable for %u s: ", cfg->patience_s);
            }
            ca_wk_sleep(w, cfg->poll_ms * 5);
            continue;
        }
        l.t_err = 0;
        if (act.act == FS_AGENT_FINISH) {
            return 0;
        }
        if (act.act == FS_AGENT_FAIL || act.act == FS_AGENT_CRASH) {
            if (act.act == FS_AGENT_CRASH) {
                fs_log_pack(FS_LOG_WARN, "fail_at reached: stopping as if crashed", "{s:s, s:s}",
                            "participation", w->p->rec.id, "fail_at",
                            fs_agent_fail_at_name(w->drv.fail_at));
            }
            return fs_err_set(err, FS_ESTATE, "%s", act.reason);
        }
        if ((rc = track_position(w, &l, &job, err)) != 0) {
            return rc;
        }
        if (w->fed != NULL && ca_fed_prepare_pending(w->fed)) {
            /* Nothing to send until the others catch up: compute T = Y_i B
             * (the bulk of the local work) now rather than at the exponent
             * step, e.g. while the masking server generates the other
             * parties' keys. The same T either way. */
            double t0 = ca_mono_s();
            rc = ca_fed_prepare(w->fed, err);
            ca_wk_add_timing(w, "prepare", ca_mono_s() - t0);
            if (rc != 0) {
                return rc;
            }
            l.t_change = ca_mono_s();
            continue;
        }
        ca_wk_save(w, 0);
        wait_for_change(w, &l, &job, step_wait);
    }
}

static void wk_free(struct ca_wk *w)
{
    ca_wk_xkey_stop(w); /* before the party state it reads goes */
    ca_fed_free(w->fed);
    ca_power_free(w->pw);
    json_decref(w->timings);
    fs_httpc_free(w->http);
    ca_wk_shards_free(w);
    fs_secagg_client_free(w->sc);
    fs_secagg_share_cts_free(w->cts, w->ncts);
    if (w->rv != NULL) {
        fs_wipe(w->rv, w->nrv * sizeof *w->rv);
        free(w->rv);
    }
    if (w->words != NULL) {
        fs_wipe(w->words, (size_t)w->agg.chunk_words * sizeof *w->words); /* before agg_clear */
        free(w->words);
    }
    fs_agent_agg_clear(&w->agg);
    fs_wipe(w, sizeof *w);
}

void ca_part_free(struct ca_part *p)
{
    if (p == NULL) {
        return;
    }
    fs_invitation_wipe(&p->req.inv);
    if (p->data != NULL) {
        fs_mat_wipe(p->data);
        fs_mat_free(p->data);
    }
    if (p->sparse != NULL) {
        fs_wipe(p->sparse->vals, p->sparse->nnz * sizeof *p->sparse->vals);
        fs_csr_free(p->sparse);
    }
    fs_wipe(p->secret, sizeof p->secret);
    free(p);
}

static void *worker_main(void *arg)
{
    struct ca_part *p = arg;
    struct ca_agent *ag = p->ag;
    struct fs_httpc_config hc;
    struct fs_err err = {0};
    struct ca_wk *w;
    int rc;

    w = calloc(1, sizeof *w);
    if (w == NULL) {
        rc = fs_err_set(&err, FS_ENOMEM, "out of memory");
        goto end;
    }
    w->p = p;
    w->ag = ag;
    w->timings = json_object();
    snprintf(w->jpath, sizeof w->jpath, "/v1/jobs/%s", p->req.inv.job_id);
    if (p->req.inv.is_fedpower) {
        w->has_exp = 0; /* lib/proto encodes: no fixed-point negotiation */
    } else {
        w->max_abs = fs_mat_max_abs(p->data);
        rc = fs_agent_max_abs_exp(p->data->data, (size_t)(p->data->rows * p->data->cols),
                                  &w->max_exp);
        w->has_exp = rc == 1;
    }
    fs_httpc_config_default(&hc);
    hc.base_url = p->req.base_url;
    hc.token = p->req.inv.token;
    /* kept for the clients of a sharded job's peers (worker_shard.c) */
    memcpy(w->token, p->req.inv.token, sizeof w->token);
    hc.insecure = ag->cfg.insecure;
    hc.allow_insecure_http = ag->cfg.insecure_http;
    hc.ca_file = ag->cfg.ca_file[0] != '\0' ? ag->cfg.ca_file : NULL;
    hc.max_body = CA_JSON_BODY_MAX;
    hc.max_download = ag->cfg.max_elements * 8 + (1u << 20);
    hc.max_retries = 3;
    hc.backoff_max_ms = 2000;
    hc.user_agent = "fedsvd-client-agent";
    rc = fs_httpc_new(&w->http, &hc, &err);
    /* the client holds its own copy now */
    fs_wipe(p->req.inv.token, sizeof p->req.inv.token);
    if (rc == 0) {
        rc = run(w, &err);
    }
end:
    if (rc != 0 && atomic_load(&p->stop) == 1) {
        /* the agent is stopping (SIGTERM): the participation stays running
         * in agent.db and resumes at the next start */
        fs_log_pack(FS_LOG_INFO, "participation suspended: resumes at the next start", "{s:s, s:s}",
                    "participation", p->rec.id, "phase", p->rec.phase);
        if (w != NULL) {
            ca_wk_save(w, 1);
        }
        goto release;
    }
    if (rc == 0) {
        snprintf(p->rec.state, sizeof p->rec.state, "done");
        snprintf(p->rec.phase, sizeof p->rec.phase, "done");
        p->rec.progress = 1.0;
        p->rec.error[0] = '\0';
    } else {
        snprintf(p->rec.state, sizeof p->rec.state, "failed");
        snprintf(p->rec.error, sizeof p->rec.error, "%s",
                 err.msg[0] != '\0' ? err.msg : fs_err_name(rc));
        if (p->req.inv.is_fedpower && (w == NULL || !w->ledger_spent)) {
            /* no noisy upload left: give the reservation back (a no-op
             * without one); before the terminal state is stored, so a
             * settling ledger read never sees it failed and reserved */
            struct fs_err lerr = {0};

            if (ca_ledger_release(ag, p->rec.id, &lerr) != 0) {
                fs_log(FS_LOG_WARN, "cannot release a privacy-ledger reservation", NULL);
            }
        }
    }
    if (w != NULL) {
        ca_wk_save(w, 1);
    } else {
        ca_files_now(p->rec.updated_at);
        if (ca_store_progress(ag->db, &p->rec, NULL) != 0) {
            fs_log(FS_LOG_WARN, "cannot save a participation's end", NULL);
        }
    }
    ca_store_resume_drop(ag->db, p->rec.id); /* ended: the secret and token go (secure_delete) */
    fs_log_pack(rc == 0 ? FS_LOG_INFO : FS_LOG_WARN, "participation ended",
                "{s:s, s:s, s:i, s:s, s:s, s:s, s:I, s:I}", "participation", p->rec.id, "job",
                p->rec.job_id, "party", (int)p->rec.party, "state", p->rec.state, "phase",
                p->rec.phase, "error", p->rec.error, "bytes_sent", (json_int_t)p->rec.bytes_sent,
                "bytes_received", (json_int_t)p->rec.bytes_received);
release:
    if (w != NULL) {
        wk_free(w);
        free(w);
    }
    pthread_mutex_lock(&ag->mu);
    for (struct ca_part **pp = &ag->parts; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    }
    ag->nrunning--;
    pthread_cond_broadcast(&ag->cv);
    pthread_mutex_unlock(&ag->mu);
    ca_part_free(p);
    return NULL;
}

int ca_worker_start_locked(struct ca_agent *ag, struct ca_part *p, struct fs_err *err)
{
    pthread_attr_t attr;
    pthread_t t;
    int rc;

    p->ag = ag;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&t, &attr, worker_main, p);
    if (rc == 0) {
        p->next = ag->parts;
        ag->parts = p;
        ag->nrunning++;
    }
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        return fs_err_set(err, FS_EIO, "cannot start a worker thread: %s", strerror(rc));
    }
    return 0;
}
