/* A testing aid for crash tests (`fedsvd local --restart
 * aggregation-server@PHASE[:R]`, tests/chaos), off by default and set only
 * through the environment, never over the network (net/teststop.h holds
 * what it shares with the agent's and the masking server's):
 * FEDSVD_TEST_STOP_AT_PHASE=PHASE[:R]. The first time a job of this server
 * enters PHASE (of aggregation R; without R, of any aggregation) and that
 * state change is durably persisted, the thread that made it (the round
 * driver or the job's worker, holding the job's locks) stops there for good
 * and the server writes the marker file DATA_DIR/test-stop-point, a JSON
 * object {"job", "phase", "aggregation", "pid"}: the job is held in that
 * phase (its phase stays visible in the Job document) until the process is
 * killed, which is what the test then does (SIGKILL), at a known point
 * after the persisted change. It fires once per process and once per data
 * directory (a server whose data directory holds the marker does not stop
 * again). PHASE done stops the job's worker once the job's end (its "done"
 * event) is logged and before its state and result are stored. The
 * pseudo-phase begin (no :R) stops the round driver once the key-sharing
 * round's close is logged and before aggregation 0's "begin" event is: the
 * marker then says share_keys of aggregation 0 (the round that closed),
 * while the Job document already shows the phase that begin opens.
 * waiting_for_parties cannot be a stop point: a job enters it on creation,
 * within the POST that creates it. */
#ifndef AGGSRV_TESTSTOP_H
#define AGGSRV_TESTSTOP_H

#include <stdint.h>

#include "core/err.h"
#include "net/teststop.h"
#include "proto/jobsm.h"

#define AGG_TESTSTOP_ENV    FS_TESTSTOP_ENV
#define AGG_TESTSTOP_MARKER FS_TESTSTOP_MARKER
#define AGG_TESTSTOP_BEGIN  "begin"

/**
 * Read FEDSVD_TEST_STOP_AT_PHASE (unset or empty: nothing to do) for a
 * server on data_dir; call once, before the jobs are loaded (the replay
 * stores no running job's state: only a worker the load starts may stop).
 * @return 0, or FS_EFORMAT for a value that is not PHASE[:R] of a phase a
 *         job enters after its creation (or done, or begin).
 */
int agg_teststop_arm(const char *data_dir, struct fs_err *err);

/** A running job's state (phase ph of aggregation r) was just persisted,
 *  or (ph FS_JOB_DONE) its end logged: when it is the armed stop point,
 *  hold the calling thread (see above). */
void agg_teststop_reached(const char *job, enum fs_job_phase ph, uint32_t r);

/** The key-sharing round of a job closed (logged) and aggregation 0 is
 *  about to begin: when begin is the armed stop point, hold the calling
 *  thread (see above). */
void agg_teststop_before_begin(const char *job);

/** Let a held thread go on (the server is shutting down). */
void agg_teststop_release(void);

#endif
