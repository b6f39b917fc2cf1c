/* The power-method jobs ("fedpower", "fedpower-utility", "fedpower-private",
 * "dp-ppm"; docs/wire-fedpower.md) on the aggregation server: glue between
 * the job manager (jobmgr.c: jobs, SecAgg rounds R0-R4, deadlines, the
 * worker thread) and lib/proto/fedpower.h's server state machine, which
 * holds all the protocol logic.
 *
 * The pj_* hooks are called by jobmgr.c with the locks its comments name;
 * the agg_job_* functions are the extra routes of http.c. A running
 * power-method job is not resumed after a restart (see pj_load). */
#ifndef AGGSRV_POWERJOB_H
#define AGGSRV_POWERJOB_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "../../api/jobs.h"
#include "jobmgr.h"
#include "la/mat.h"

struct agg_power;

/**
 * Before a job is created: draw z0_seed (unless the spec fixes it) and
 * compute the privacy report; a weak job is FS_EINVAL unless
 * allow_weak_privacy, as is an unreachable (epsilon, delta) target.
 */
FS_WUR int pj_prepare_spec(struct fs_job_spec *spec, struct fs_err *err);

/**
 * Attach the power-method state to a new job shell (after job_alloc):
 * configuration, privacy report; with_server: the lib/proto server
 * (fedpower-utility: Paillier key generation, ~0.1-1 s at 3072 bits).
 */
FS_WUR int pj_attach(agg_job *j, int with_server, struct fs_err *err);

/** Free (the server wipes its key). Accepts NULL. */
void pj_free(struct agg_power *pw);

/** Words of round r's upload: d*r at a sync, r*r at the Rayleigh round. */
uint64_t pj_round_len(const struct fs_job_spec *spec, uint32_t r);

/** SecAgg aggregations the job's fs_secagg_server needs (1 for plain fedpower). */
uint32_t pj_secagg_aggregations(const struct fs_job_spec *spec);

/** Plain fedpower: the parties expected in round 0 (U2; mu held). */
void pj_set_active_locked(agg_job *j, const uint32_t *ids, size_t k);

/** Status fields of the Job document (mu held). */
void pj_status_locked(const agg_job *j, json_t *o);

/** Begin round r: write z.npy, open masked input or the plain upload (sm_mu held). */
FS_WUR int pj_begin(agg_job *j, uint32_t r, double at, struct fs_err *err);

/** Close a plain_upload or noise_exchange round (sm_mu held): hands over to the worker. */
FS_WUR int pj_close_round(agg_job *j, double at, int by_deadline, struct fs_err *err);

/** The worker's part after a round closed (sm_mu held, the worker thread). */
void pj_worker(agg_job *j);

/** 1 when name (without .npy) is a result file of this power-method job. */
int pj_result_name(const agg_job *j, const char *name);

/**
 * A power-method job read from the store: attach its (server-less) state;
 * a running one is failed with "server restarted during a fedpower job;
 * not resumable". sm_mu is not needed (nothing else runs yet).
 */
void pj_load(agg_job *j, int running);

/* ---- routes (docs/wire-fedpower.md) ---- */

/** Path of round r's broadcast Z (z.npy), once the round has begun. */
FS_WUR int agg_job_z_path(agg_job *j, uint32_t r, char *path, size_t cap, struct fs_err *err);

/** {"public_key", "bits"} of fedpower-utility. */
FS_WUR int agg_job_exchange_key(agg_job *j, json_t **out, struct fs_err *err);

/** {"selector"} for party in round r's noise exchange. */
FS_WUR int agg_job_get_selector(agg_job *j, uint32_t party, uint32_t r, json_t **out,
                                struct fs_err *err);

/** Before the body: may party answer round r's exchange now? *bytes = the response size. */
FS_WUR int agg_job_noise_check(agg_job *j, uint32_t party, uint32_t r, size_t *bytes,
                               struct fs_err *err);

/** Party's noise response (exactly the response size). */
FS_WUR int agg_job_post_noise_response(agg_job *j, uint32_t party, uint32_t r, const uint8_t *buf,
                                       size_t len, struct fs_err *err);

/** Before the body: may party upload round r's plain matrix now? Its shape. */
FS_WUR int agg_job_plain_check(agg_job *j, uint32_t party, uint32_t r, size_t *rows, size_t *cols,
                               struct fs_err *err);

/** Party's plain upload of round r and its zmax. */
FS_WUR int agg_job_put_plain(agg_job *j, uint32_t party, uint32_t r, const fs_mat *y, double zmax,
                             struct fs_err *err);

#endif
