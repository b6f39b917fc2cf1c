/* Shared between the files of the power-method jobs (powerjob.c: creation,
 * rounds, the worker, plain uploads, replay; powerjob_exchange.c:
 * fedpower-utility's noise exchange). Nothing else includes it. */
#ifndef AGGSRV_POWERJOB_INTERNAL_H
#define AGGSRV_POWERJOB_INTERNAL_H

#include <jansson.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "jobmgr_internal.h"
#include "proto/fedpower.h"

struct agg_power {
    /* immutable after pj_attach */
    struct fs_fedpower_config cfg;
    uint64_t rows[FS_JOB_MAX_PARTIES];
    struct fs_fedpower_privacy priv;
    uint32_t syncs;
    uint32_t exchanges; /* utility: noise exchanges, in aggregations 0..exchanges-1 */
    int secagg;
    char *pk_b64; /* fedpower-utility: the exported public key */
    unsigned pk_bits;
    size_t sel_size;
    size_t resp_size;

    /* sm_mu */
    fs_fedpower_server *srv;
    uint32_t x_logged; /* r + 1 once sync r's selectors are persisted (they may be sent) */
    struct fs_fedpower_xpre *xpre; /* an answered exchange's outcome, computed ahead */
    /* the thread computing it (powerjob_exchange.c); its fields are the
     * thread's until pj_join_precompute */
    pthread_t pre_th;
    int pre_running;
    uint32_t pre_r;
    int pre_rc;
    struct fs_err pre_err;
    struct fs_fedpower_xpre *pre_out;
    double pre_s;

    /* mu */
    uint32_t x_tried;   /* r + 1 once the early exchange of sync r was opened (or tried) */
    uint32_t pre_tried; /* r + 1 once its outcome was computed ahead (or tried) */
    uint32_t x_open;    /* r + 1 once sync r's selectors are persisted */
    uint32_t x_late;    /* r + 1: sync r's exchange opens only after the sum */
    uint32_t sync;      /* status: current sync (syncs at the Rayleigh round and after) */
    uint32_t iter;      /* status: the iteration the current Z follows */
    double crypto_s;    /* Paillier key generation, selectors, decryptions */
    json_t *sync_ids;   /* array: per sync, the ids in its aggregate */
    json_t *last_ids;   /* the ids of the last aggregate */
};

int pj_is_plain(const agg_job *j);
int pj_is_utility(const agg_job *j);

/* 0 when the job is a power-method job (utility_only: fedpower-utility,
 * plain_only: fedpower), else FS_ENOTFOUND. */
int pj_need_power(const agg_job *j, int utility_only, int plain_only, struct fs_err *err);

/* sm_mu held: party's answer of the open round is in. */
void pj_mark_sent(agg_job *j, uint32_t party);

/* Replay: ev belongs to the open round r of phase ph. */
int pj_replay_in_round(const agg_job *j, const struct agg_event *ev, enum fs_job_phase ph,
                       struct fs_err *err);

/* ---- powerjob_exchange.c ---- */

/* The tick (no lock held): once masked input of a sync closed, open its
 * noise exchange early (selectors drawn without sm_mu, installed and
 * persisted under it); once every party answered it before unmasking
 * closed, decrypt and regenerate the noise to remove ahead, on a thread of
 * its own (pw->xpre after pj_join_precompute). */
void pj_tick(agg_job *j);

/* sm_mu held (or the job being freed): wait for that thread; its outcome
 * goes to pw->xpre (when it is this sync's). */
void pj_join_precompute(agg_job *j, struct agg_power *pw);

/* The worker, sm_mu held, after the sum went into the power server (phase
 * EXCHANGE): persist the selectors unless that was done early, open the
 * noise_exchange round over U3 with the early responders counted in. */
int pj_open_noise_round(agg_job *j, uint32_t r, const uint32_t *u3, size_t n3, double at,
                        struct fs_err *err);

/* Replay of the "exchange" and "noise" events (sm_mu held). */
int pj_replay_exchange(agg_job *j, const struct agg_event *ev, struct fs_err *err);
int pj_replay_noise(agg_job *j, const struct agg_event *ev, struct fs_err *err);

#endif
