/* What the services' testing stop points share (the aggregation server's,
 * the client agent's and the masking server's teststop.c): a testing aid
 * for crash tests (`fedsvd local --restart`, tests/chaos), off by default
 * and set only through the environment variable FEDSVD_TEST_STOP_AT_PHASE,
 * never over the network. Each service gives the value its own meaning (a
 * point of its own work, "NAME" or "NAME:N"); this part reads and splits
 * it, arms it once per process and once per data directory (a data
 * directory that holds the marker file test-stop-point is not stopped in
 * again), lets one thread of the process fire it, writes the marker (a
 * JSON object, with the process id added) and holds threads until the
 * process stops (SIGKILL, which is what the test sends, or a shutdown that
 * releases them). */
#ifndef FS_NET_TESTSTOP_H
#define FS_NET_TESTSTOP_H

#include <stddef.h>

#include <jansson.h>

#include "../core/err.h"

#define FS_TESTSTOP_ENV    "FEDSVD_TEST_STOP_AT_PHASE"
#define FS_TESTSTOP_MARKER "test-stop-point"

/* What a service's stop points are: "NAME" or "NAME:N" (N a decimal
 * number up to UINT32_MAX), and which of them it takes. */
struct fs_teststop_kind {
    const char *whose; /* "the aggregation server's" */
    const char *form;  /* "PHASE[:R]": the messages of FS_EFORMAT */
    const char *names; /* what accept takes, said in the message of one refused */
    /* 0 when NAME (n: N, -1 without) is a stop point of the service (kept
     * in its own state), else nonzero */
    int (*accept)(const char *name, long n);
};

/**
 * The stop point of a service on data_dir: FEDSVD_TEST_STOP_AT_PHASE unset
 * or empty, nothing to do (*armed 0); else kind->accept must take it, and
 * the stop point is armed (*armed 1, logged as a testing aid) unless the
 * marker is already in data_dir (logged: not armed). Call once at start,
 * before anything may reach the stop point.
 * @return 0, or FS_EFORMAT (naming FEDSVD_TEST_STOP_AT_PHASE) for a value
 *         that is not a stop point of kind, or for a marker path too long.
 */
FS_WUR int fs_teststop_arm(const char *data_dir, const struct fs_teststop_kind *kind, int *armed,
                           struct fs_err *err);

/** 1 for the first caller of the process (the one that fires), 0 after. */
int fs_teststop_claim(void);

/** Write the marker: o (stolen; NULL: out of memory, logged) with "pid"
 *  added; logged at warn with msg and the marker's fields. */
void fs_teststop_mark(json_t *o, const char *msg);

/** Hold the calling thread until fs_teststop_release. */
void fs_teststop_hold(void);

/** Let every held thread go on (the service is shutting down). */
void fs_teststop_release(void);

#endif
