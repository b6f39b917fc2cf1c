/* The masking server's testing stop point, for crash tests (`fedsvd local
 * --restart masking-server@keys[:P]`, tests/chaos): off by default and set
 * only through the environment, never over the network, like the
 * aggregation server's (net/teststop.h holds the part they share):
 * FEDSVD_TEST_STOP_AT_PHASE=keys or keys:P. Once the response that
 * completes a party's masks (the last of its key files not handed out
 * before) has been sent, to party P (without P: to the first party that
 * has all of its keys), the server writes the marker
 * DATA_DIR/test-stop-point, a JSON object {"maskset", "job", "phase":
 * "keys", "party", "pid"}, and from the moment that response was handed
 * out it holds every later key request (manifests and files, of every
 * party) until it is killed (SIGKILL, which the test then sends) and
 * started again: the parties that still need keys then get them from the
 * restarted server. It fires once per process and once per data
 * directory (a server whose data directory holds the marker does not stop
 * again). Another value makes the server refuse to start. */
#ifndef MASK_TESTSTOP_H
#define MASK_TESTSTOP_H

#include <stdint.h>

#include "core/err.h"
#include "net/http_server.h"

#define MASK_TESTSTOP_KEYS "keys"

/**
 * Read FEDSVD_TEST_STOP_AT_PHASE (unset or empty: nothing to do) for a
 * server on data_dir; call once, before serving.
 * @return 0, or FS_EFORMAT for a value that is not keys[:P].
 */
int mask_teststop_arm(const char *data_dir, struct fs_err *err);

/** A key request came in: once the stop point fired, hold it (see above). */
void mask_teststop_gate(void);

/** req handed out a key file of party (1-based) of maskset (of job); all:
 *  the party now has every file. When that is the armed stop point, the
 *  stop fires once req's response was sent (mask_teststop_sent). */
void mask_teststop_served(const fs_http_req *req, const char *maskset, const char *job,
                          uint32_t party, int all);

/** A request ended (the HTTP server's on_request hook). */
void mask_teststop_sent(const fs_http_req *req);

/** Let held requests go on (the server is shutting down). */
void mask_teststop_release(void);

#endif
