/* The participation worker's internals, shared by its files:
 *
 *   worker.c        the thread, its loop (poll the job, ask the driver
 *                   lib/proto/agent_driver.h what comes next) and the
 *                   secure-aggregation steps (lib/proto/secagg.h)
 *   worker_io.c     requests to the aggregation server, progress, timings
 *   worker_fed.c    fedsvd / fedpca: the party's keys from the masking
 *                   server, sealed exponents, statistics, the local result
 *   worker_power.c  the power-method jobs: Z downloads, plain uploads, the
 *                   noise exchange
 *   worker_shard.c  sharded fedsvd / fedpca jobs: the job's shards, which
 *                   request carries each masked chunk
 *
 * Functions return 0, CA_STEP_WAIT (the server is not there yet: poll
 * again) or a negative FS_E* code. */
#ifndef CA_WORKER_H
#define CA_WORKER_H

#include "agent.h"
#include "net/http_client.h"
#include "proto/agent_driver.h"
#include "proto/secagg.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "masked chunks are sent as <u8 straight from memory: little-endian hosts only"
#endif

#define CA_STEP_WAIT      1
#define CA_JSON_BODY_MAX  (16u * 1024 * 1024) /* any JSON document from a server */
#define CA_NPY_HEADER_CAP 256
/* First wait between job polls after a step or a change of the job's position
 * (doubled at each idle poll up to --poll-ms). */
#define CA_POLL_FIRST_MS 10u
/* Wait of one long poll of the job (GET /v1/jobs/{job}?wait_ms=): --poll-ms
 * if longer, at most CA_LONG_POLL_MAX_MS. It bounds how long a stop or a
 * cancel waits for the participation's thread. */
#define CA_LONG_POLL_MS     1000u
#define CA_LONG_POLL_MAX_MS 10000u
/* fedpower-utility: the selector's long poll (GET …/selector?wait_ms=) */
#define CA_SELECTOR_WAIT_MS 2000u

struct ca_wk {
    struct ca_part *p;
    struct ca_agent *ag;
    fs_httpc *http;
    char jpath[FS_JOB_ID_MAX + 16]; /* "/v1/jobs/<id>" */
    struct fs_secagg_config cfg;
    struct fs_agent_driver drv;
    int ready; /* cfg and drv set from the first job status */
    fs_secagg_client *sc;
    struct fs_secagg_adv adv;
    int has_exp;
    int max_exp;
    double max_abs;
    struct fs_secagg_share_ct *cts; /* R1 message, from ROSTER until SHARE */
    size_t ncts;
    struct fs_agent_agg agg; /* current aggregation, from BEGIN */
    int has_agg;
    uint8_t sig[FS_SECAGG_SIG_LEN]; /* R3 message */
    int skip_unmask;                /* this party's R3 message is not among the signatures */
    struct fs_secagg_reveal *rv;    /* R4 message */
    size_t nrv;
    uint64_t *words; /* one masked chunk */
    uint64_t chunks_done;
    uint64_t chunks_total; /* of the current upload, every shard's chunks */
    double last_save;
    char saved_phase[32];
    /* fedsvd / fedpca */
    struct ca_fed *fed;
    /* power-method jobs (power.c) */
    struct ca_power *pw;
    int has_xkey;    /* utility: the server's exchange key is set */
    uint32_t x_sent; /* utility: r + 1 once sync r's noise response was accepted early */
    /* utility: the exchange key prepared on a background thread (worker_power.c) */
    pthread_t xk_thread;
    int xk_started;
    uint8_t *xk_pk;
    size_t xk_len;
    struct fs_noisex_client *xk_nx;
    int xk_rc;
    struct fs_err xk_err;
    double xk_cpu_s;
    atomic_int xk_done; /* set by the thread when it is done */
    int ledger_spent;   /* the privacy ledger was told a noisy upload may leave */
    double t_step0;     /* when the current timed step began */
    json_t *timings;    /* seconds per party-side phase */
    /* resuming after a restart (resume.c, fs_agent_driver_resume) */
    int local;        /* the step being done is replayed: rebuild, send nothing */
    int sa_skip;      /* the secure-aggregation state cannot be rebuilt (the
                       * job finished, or the server dropped the shares) */
    uint32_t job_agg; /* the job's aggregation at the last poll */
    int job_done;     /* the job was done at the last poll */
    /* sharded jobs (worker_shard.c): NULL when the job is not sharded */
    struct ca_shards *shards;
    char token[FS_AUTH_TOKEN_MAX + 1]; /* the party token, for the shards' clients: wipe */
};

/* Where one masked chunk goes (worker_shard.c). */
struct ca_chunk_target {
    uint32_t shard; /* 0: the aggregation server of the job */
    uint64_t off;   /* global word offset of the chunk */
    size_t m;       /* its words */
    fs_httpc *http; /* the client that sends it (borrowed) */
    char path[FS_JOB_ID_MAX + 96];
};

/* A request body in two pieces (an .npy header, then the payload). */
struct ca_body_src {
    const uint8_t *a; /* header */
    size_t alen;
    const uint8_t *b; /* payload */
    size_t blen;
    size_t pos;
};

/* ---- worker_power.c ---- */

/** Wait for the background exchange-key thread, if any, and drop its result. */
void ca_wk_xkey_stop(struct ca_wk *w);

/* ---- worker_io.c ---- */

/** Monotonic seconds. */
double ca_mono_s(void);
/** Add secs to the party-side timing name. */
void ca_wk_add_timing(struct ca_wk *w, const char *name, double secs);
/** Sleep up to ms, waking early when the participation is told to stop. */
void ca_wk_sleep(struct ca_wk *w, unsigned ms);
/** Persist phase/progress/bytes (throttled unless force or the phase changed). */
void ca_wk_save(struct ca_wk *w, int force);
/** Write ahead (ca_store_wal) a message of two pieces (either may be empty). */
FS_WUR int ca_wk_wal(struct ca_wk *w, const char *path, const void *a, size_t alen, const void *b,
                     size_t blen, struct fs_err *err);
/** Count body bytes sent and received. */
void ca_wk_count(struct ca_wk *w, uint64_t sent, uint64_t received);
/**
 * One request. JSON bodies (json != NULL) or a two-piece streamed body
 * (src != NULL). A 409 whose code is not_ready or aborted is CA_STEP_WAIT
 * (the next job poll tells which); other non-2xx are errors named after the
 * request. *out gets the parsed JSON response (NULL when empty) if wanted.
 */
FS_WUR int ca_wk_call(struct ca_wk *w, const char *method, const char *path, const json_t *json,
                      struct ca_body_src *src, json_t **out, struct fs_err *err);
/** ca_wk_call on another client than the worker's (a shard peer's). */
FS_WUR int ca_wk_call_on(struct ca_wk *w, fs_httpc *http, const char *method, const char *path,
                         const json_t *json, struct ca_body_src *src, json_t **out,
                         struct fs_err *err);
/** GET a JSON document (an empty response is an error). */
FS_WUR int ca_wk_get_json(struct ca_wk *w, const char *path, json_t **out, struct fs_err *err);
/**
 * POST a JSON message; steals msg. Write ahead: the message's SHA-256 is
 * recorded in agent.db before it is sent (ca_store_wal), and a message
 * rebuilt after a restart must match the recorded one. While a step is
 * replayed (w->local) nothing is sent.
 */
FS_WUR int ca_wk_post_json(struct ca_wk *w, const char *path, json_t *msg, struct fs_err *err);
/** "/v1/jobs/<id>" followed by fmt. @return 0 or FS_EINVAL (too long). */
FS_WUR int ca_wk_path(struct ca_wk *w, char *buf, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/** 1 when the job runs the invitation's algorithm (both known to this build). */
static inline int ca_same_algo(const struct fs_agent_job *job, const struct fs_invitation *inv)
{
    return job->algo_known && inv->algo_known && job->algo == inv->algo;
}
/** 1 when id is among ids[0..k). */
int ca_in_set(const uint32_t *ids, size_t k, uint32_t id);
/** GET aggregations/r into *agg (caller clears). */
FS_WUR int ca_wk_fetch_agg(struct ca_wk *w, uint32_t r, struct fs_agent_agg *agg,
                           struct fs_err *err);
/** A downloaded file must be the .npy the manifest describes. */
FS_WUR int ca_wk_check_file(const char *dest, const struct fs_agent_file *f, uint64_t max_elems,
                            struct fs_err *err);
/**
 * Power-method jobs: before the first noisy upload leaves (masked chunk,
 * plain.npy, noise response), mark this participation's privacy-ledger
 * reservation spent. If the ledger cannot record it, nothing is uploaded.
 */
FS_WUR int ca_wk_ledger_before_upload(struct ca_wk *w, struct fs_err *err);

/* Write the participation's manifest.json (j, pretty-printed) atomically. */
FS_WUR int ca_wk_write_manifest(struct ca_wk *w, const json_t *j, struct fs_err *err);

/* ---- worker_fed.c ---- */

/** The fedsvd/fedpca job must be the invitation's; then fetch the keys. */
FS_WUR int ca_wk_setup_fed(struct ca_wk *w, const struct fs_agent_job *job, struct fs_err *err);
/** This party's sealed exponent of aggregation r. */
FS_WUR int ca_wk_exponent(struct ca_wk *w, uint32_t r, struct fs_err *err);
/** Open the relayed exponents; report the SVD round's max. */
FS_WUR int ca_wk_exponents(struct ca_wk *w, uint32_t r, struct fs_err *err);
/** fedpca: the published (padded) sum of statistics aggregation r. */
FS_WUR int ca_wk_stats(struct ca_wk *w, uint32_t r, struct fs_err *err);
/** Recover this party's factors and write its manifest. */
FS_WUR int ca_wk_result_fed(struct ca_wk *w, struct fs_err *err);

/* ---- worker_power.c ---- */

/** Build the power-method party state and check the job against the invitation. */
FS_WUR int ca_wk_setup_power(struct ca_wk *w, const struct fs_agent_job *job, struct fs_err *err);
/** BEGIN of a power-method round: Z and the local iterations. */
FS_WUR int ca_wk_power_begin(struct ca_wk *w, uint32_t r, struct fs_err *err);
/** fedpower: PUT plain.npy. */
FS_WUR int ca_wk_plain_upload(struct ca_wk *w, uint32_t r, struct fs_err *err);
/** fedpower-utility: answer this sync's selector. */
FS_WUR int ca_wk_exchange(struct ca_wk *w, uint32_t r, struct fs_err *err);
/* fedpower-utility: the same, early (right after the unmask message of
 * sync r); a failure leaves it to ca_wk_exchange. */
void ca_wk_exchange_early(struct ca_wk *w, uint32_t r);

/* ---- worker_shard.c ---- */

/**
 * Read the job document's "shards" list once (doc: the job status as
 * received, job: decoded): check each shard's rows and words against the
 * row split and its URL with the rule of every URL the agent uses, and make
 * a client per shard peer. No list, or one shard: unsharded (nothing kept).
 */
FS_WUR int ca_wk_shards_read(struct ca_wk *w, const json_t *doc, const struct fs_agent_job *job,
                             struct fs_err *err);
/** Shards of the job (1 when unsharded). */
uint32_t ca_wk_shard_count(const struct ca_wk *w);
/** The URL of shard s, "" when unknown. */
const char *ca_wk_shard_url(const struct ca_wk *w, uint32_t s);
/** Free the shards' clients. */
void ca_wk_shards_free(struct ca_wk *w);
/** Chunks of aggregation r's upload (w->agg set): every shard's, or agg.chunks. */
uint64_t ca_wk_chunks_total(const struct ca_wk *w, uint32_t r);
/**
 * Aggregation r's document (doc, borrowed) as the decoder takes it: for a
 * sharded SVD aggregation the coordinator counts only its own window's
 * chunks, replaced by the whole vector's count. New reference (NULL: out of
 * memory).
 */
json_t *ca_wk_shard_agg_doc(const struct ca_wk *w, uint32_t r, json_t *doc);
/** Before aggregation r's first chunk: the party encodes the shard-blocked layout. */
FS_WUR int ca_wk_upload_begin(struct ca_wk *w, uint32_t r, struct fs_err *err);
/** Chunk idx (0 .. ca_wk_chunks_total - 1) of aggregation r: words, client, path. */
FS_WUR int ca_wk_chunk_target(struct ca_wk *w, uint32_t r, uint64_t idx, struct ca_chunk_target *t,
                              struct fs_err *err);

#endif
