/* The power-method jobs ("fedpower", "fedpower-utility", "fedpower-private",
 * "dp-ppm"; docs/wire-fedpower.md) on the aggregation server: glue between
 * the job manager (jobs, SecAgg rounds R0-R4, deadlines, the worker thread;
 * the job's phases are lib/proto/jobsm.h's) and lib/proto/fedpower.h's
 * server state machine, which holds the method's protocol logic.
 *
 * This file uses the job manager; the job manager calls it only through
 * agg_power_ops (registered by main.c). The agg_job_* functions are the
 * extra routes of http.c. A running power-method job resumes after a
 * restart: its server secret is sealed under <data-dir>/server.key and its
 * events are replayed (docs/wire-fedpower.md, Persistence). */
#ifndef AGGSRV_POWERJOB_H
#define AGGSRV_POWERJOB_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "../../api/jobs.h"
#include "jobmgr.h"
#include "la/mat.h"

/** The hooks the job manager calls for power-method jobs (register them
 * with agg_mgr_set_power_ops). */
extern const struct agg_algo_ops agg_power_ops;

/* ---- routes (docs/wire-fedpower.md) ---- */

/** Path of round r's broadcast Z (z.npy), once the round has begun. */
FS_WUR int agg_job_z_path(agg_job *j, uint32_t r, char *path, size_t cap, struct fs_err *err);

/** {"public_key", "bits"} of fedpower-utility. */
FS_WUR int agg_job_exchange_key(agg_job *j, json_t **out, struct fs_err *err);

/** {"selector"} for party in round r's noise exchange. */
FS_WUR int agg_job_get_selector(agg_job *j, uint32_t party, uint32_t r, json_t **out,
                                struct fs_err *err);

/** 1 while a selector request of round r would be answered 409 not_ready
 * but may be answered later (the exchange of r not open yet, the job not
 * past it): a long poll of the selector waits while this holds. Quick,
 * thread-safe (the job's mu only). */
int agg_job_selector_pending(agg_job *j, uint32_t r);

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
