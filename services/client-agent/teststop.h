/* The client agent's testing stop point, for crash tests (`fedsvd local
 * --restart client-agent-I@PHASE[:R]`, tests/chaos): off by default and set
 * only through the environment, never over the network, like the
 * aggregation server's (net/teststop.h holds the part they share):
 * FEDSVD_TEST_STOP_AT_PHASE=PHASE[:R]. The first time a participation's
 * worker finds its job in PHASE (of aggregation R; without R, of any
 * aggregation) in a poll of the job, before it acts on it (it sends
 * nothing of that phase), the worker stops there for good and the agent
 * writes the marker DATA_DIR/test-stop-point, a JSON object
 * {"participation", "job", "phase", "aggregation", "pid"}: the job waits
 * for this party until the agent is killed (SIGKILL, which the test then
 * sends) and started again, to resume the participation from its data
 * directory. It fires once per process and once per data directory (an
 * agent whose data directory holds the marker does not stop again). PHASE
 * is one a job enters after its creation and before its end:
 * waiting_for_parties, share_keys, exponents, masked_input, consistency,
 * unmasking, factorizing, noise_exchange or plain_upload. A phase in which
 * the party has a message to send is always seen (the job waits for it);
 * factorizing, in which it has none, only when a poll falls in it. */
#ifndef CA_TESTSTOP_H
#define CA_TESTSTOP_H

#include <stdint.h>

#include "core/err.h"

/**
 * Read FEDSVD_TEST_STOP_AT_PHASE (unset or empty: nothing to do) for an
 * agent on data_dir; call once, before any participation runs.
 * @return 0, or FS_EFORMAT for a value that is not PHASE[:R] of such a phase.
 */
int ca_teststop_arm(const char *data_dir, struct fs_err *err);

/** A worker of participation part (of job) polled its job in phase (its
 *  wire name) of aggregation r: when that is the armed stop point, hold
 *  the calling thread (see above). */
void ca_teststop_seen(const char *part, const char *job, const char *phase, uint32_t r);

/** Let a held worker go on (the agent is shutting down). */
void ca_teststop_release(void);

#endif
