/* Ending mask sets: when a fedsvd/fedpca job is no longer running (done,
 * failed or cancelled), the aggregation server tells the masking server to
 * delete the job's mask set (POST /v1/masksets/{maskset}/end with the end
 * token the job creator registered with PUT /v1/jobs/{job}/maskset). The end
 * token can delete that mask set and do nothing else: it fetches no keys.
 *
 * One background thread polls the store once a second and makes the calls,
 * outside every job lock, so a slow or unreachable masking server never
 * holds up a job. A failed call is retried with exponential backoff (2 s ..
 * 5 min) up to AGG_MASKEND_ATTEMPTS times, each failure logged; after that
 * the mask set's ttl_s on the masking server deletes it. Pending calls
 * survive a restart (they are rows of server.db). */
#ifndef AGGSRV_MASKEND_H
#define AGGSRV_MASKEND_H

#include "core/err.h"
#include "store.h"

#define AGG_MASKEND_ATTEMPTS 8

typedef struct agg_maskend agg_maskend;

/**
 * Start the thread. ca_file: PEM bundle to verify https masking servers
 * ("" or NULL: the system store); insecure_http: 1 to allow a plain http://
 * masking URL on a non-loopback host (the server's --insecure-http).
 * @param out stop and free with agg_maskend_stop.
 */
FS_WUR int agg_maskend_start(agg_store *st, const char *ca_file, int insecure_http,
                             agg_maskend **out, struct fs_err *err);

/** Stop the thread (a call in flight finishes first) and free. Accepts NULL. */
void agg_maskend_stop(agg_maskend *e);

#endif
