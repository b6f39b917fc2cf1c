/* Internals of the job manager, shared by its files (one direction each:
 * jobutil.c < jobstatus.c < jobcore.c < jobagg.c < jobround.c < jobroutes.c,
 * jobmgr.c, jobreplay.c, powerjob.c): the job and manager structs and the
 * helpers they use. The protocol state (phases, party sets, thresholds,
 * dropout rules) is lib/proto/jobsm.h's; the power methods plug in through
 * struct agg_algo_ops, registered by main.c. Locking rules: see jobmgr.h.
 * Not for other files. */
#ifndef AGGSRV_JOBMGR_INTERNAL_H
#define AGGSRV_JOBMGR_INTERNAL_H

#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "core/fdio.h"
#include "jobmgr.h"
#include "la/fixedpt.h"
#include "proto/fedsvd.h"
#include "proto/jobsm.h"
#include "proto/secagg.h"

struct agg_power;
struct agg_event;
struct agg_shardjob;
struct agg_shardgc;

struct chunk_ctx {
    agg_job *job;
};

struct agg_job {
    agg_mgr *mgr;
    pthread_mutex_t mu;
    pthread_mutex_t sm_mu;

    /* immutable after creation */
    char id[FS_JOB_ID_MAX + 1];
    struct fs_job_spec spec;
    char server_url[FS_JOB_URL_MAX + 1];
    uint32_t n;
    uint32_t chunk_words;
    char created_at[32];
    double created_unix;
    char dir[4200]; /* <data>/jobs/<id> */
    char tmp_dir[4300];
    fs_auth *auth; /* party tokens, labels "party:N" */
    struct fs_secagg_config cfg;
    int fed;                        /* fedsvd / fedpca */
    int power;                      /* a power-method job (state in pw) */
    const struct agg_algo_ops *ops; /* power-method jobs; NULL otherwise */
    uint32_t naggs;                 /* secure aggregations of the job */
    size_t *sizes;                  /* fed: party_sizes as size_t, for lib/proto */
    struct fs_fedsvd_job fj;        /* fed: the job as lib/proto sees it (sizes borrowed) */
    struct agg_shardjob *sj;        /* a sharded job (shardcoord.c); NULL: one server */
    void (*sj_detach)(agg_job *j);  /* frees sj (set with it) */
    json_t *sj_doc;                 /* the Job document's "shards" list (immutable) */

    /* sm_mu */
    fs_secagg_server *sm;
    struct chunk_ctx cs;
    uint64_t next_seq;
    int replaying;
    /* events the state machine took while storage was unavailable, oldest
     * first, written before any later one (agg_log_event): until then the
     * party's call is answered 503 and its re-send flushes them */
    struct agg_unlogged *unlogged;
    struct agg_unlogged **unlogged_tail;
    uint32_t *first_u3;   /* fedpca: U3 of aggregation 0 (every later one must equal it) */
    struct agg_power *pw; /* power-method jobs (powerjob.c); NULL otherwise */
    size_t nfirst;

    /* the protocol state: changed with sm_mu and mu held (st.finishing: mu
     * alone when the worker ends), read under either */
    struct fs_jobsm st;

    /* mu */
    uint64_t len; /* words of the aggregation in progress */
    uint64_t nchunks;
    int worker_running;
    int worker_exited;
    pthread_t worker;
    double deadline_mono;
    uint64_t bytes_in;
    uint64_t bytes_out;
    uint64_t phase_in[FS_JOB_NTIMED]; /* bytes of requests that ended while phase t was open */
    uint64_t phase_out[FS_JOB_NTIMED];
    struct fs_fixedpt fp;
    json_t *roster;    /* {"roster": [...]} once R0 closed */
    json_t *aggs;      /* array: Aggregation document r (null until begun) */
    json_t *result;    /* Result once done */
    int persist_dirty; /* the last agg_persist_state failed: the driver tries again */
};

/* A job kind's hooks (the power methods, powerjob.c), called with the locks
 * their comments in powerjob.c name. */
struct agg_algo_ops {
    /* before creation: complete and check the spec */
    int (*prepare_spec)(struct fs_job_spec *spec, struct fs_err *err);
    /* attach the kind's state to a new job shell (with_server: the protocol server) */
    int (*attach)(agg_job *j, int with_server, struct fs_err *err);
    void (*detach)(agg_job *j);
    uint64_t (*round_len)(const struct fs_job_spec *spec, uint32_t r);
    uint32_t (*secagg_aggregations)(const struct fs_job_spec *spec);
    /* status fields of the Job document (mu held) */
    void (*status_locked)(const agg_job *j, json_t *o);
    /* begin round r (sm_mu held) */
    int (*begin)(agg_job *j, uint32_t r, double at, struct fs_err *err);
    /* the worker's part after a round closed (sm_mu held) */
    void (*worker)(agg_job *j);
    int (*result_name)(const agg_job *j, const char *name);
    /* a job read from the store, before its events are replayed (running:
     * restore the protocol server from its sealed secret; nonzero when it
     * cannot resume, err says why) */
    int (*load)(agg_job *j, int running, struct fs_err *err);
    /* replay: a stored event before the generic replay sees it (sm_mu held);
     * *handled = 1 when the kind was the power method's */
    int (*replay)(agg_job *j, const struct agg_event *ev, int *handled, struct fs_err *err);
    /* each tick of the job, after its rounds were closed (no lock held);
     * may be NULL */
    void (*tick)(agg_job *j);
};

struct agg_mgr {
    struct agg_mgr_config cfg;
    char data_dir[4096];
    agg_store *st;
    const struct agg_algo_ops *power_ops;
    pthread_rwlock_t lock; /* the registry */
    agg_job **jobs;
    size_t njobs;
    size_t cap;
    pthread_mutex_t wake_mu;
    pthread_cond_t wake_cv;
    int woken;
    pthread_mutex_t count_mu;
    struct agg_counts counts; /* rounds/dropped/chunks; states are counted on demand */
    /* set by agg_mgr_free: a worker waiting for storage gives up */
    volatile sig_atomic_t closing;
    struct agg_shardgc *sgc; /* pending deletions of peers' windows (shardcoord.c) */
    /* agg_mgr_set_on_change (jobstatus.c; guarded by a lock of its own there) */
    void (*on_change)(void *ctx);
    void *on_change_ctx;
};

/* ---- jobutil.c: no job state */
double agg_now_mono(void);
double agg_now_wall(void);
void agg_iso_time(double t, char out[32]);
void agg_deadline_in(struct timespec *ts, unsigned ms); /* CLOCK_REALTIME, ms from now */
void agg_rm_tree(const char *path);
int agg_is_internal(int code);
json_t *agg_ids_where(const uint8_t *flags, const uint8_t *unless, uint32_t n);
int agg_file_sha256_hex(const char *path, char hex[65], struct fs_err *err);
int agg_read_words(const char *path, uint64_t off, uint64_t *y, size_t m, struct fs_err *err);
void agg_le64_encode(uint8_t *b, const uint64_t *y, size_t m);
int agg_write_upload(const char *path, const uint8_t *p, size_t n, off_t off, int sync);
int agg_write_upload_words(const char *path, const uint64_t *y, size_t m, off_t off, int sync,
                           struct fs_err *err);

/* ---- jobstatus.c: documents (mu held where _locked) */
json_t *agg_status_locked(const agg_job *j);
const char *agg_state_locked(const agg_job *j); /* "running", "done", "failed" */
void agg_persist_state(agg_job *j, const char *result_json);
/* The Aggregation document of the aggregation in progress (borrowed; mu held). */
json_t *agg_cur_doc(const agg_job *j);
/* Every party not among the survivors u3. */
json_t *agg_dropped_of(const agg_job *j, const uint32_t *u3, size_t n3);

/* ---- jobcore.c */
uint64_t agg_len(const agg_job *j, uint32_t r);
int agg_is_stats(const agg_job *j, uint32_t r);
int agg_words_path(const agg_job *j, uint32_t party, char *out, size_t cap);
int agg_sum_path(const agg_job *j, uint32_t r, char *out, size_t cap);
void agg_rm_chunks(const agg_job *j);
int agg_job_alloc(agg_mgr *m, const char *id, const struct fs_job_spec *spec, uint32_t chunk_words,
                  double created, agg_job **out, struct fs_err *err);
void agg_job_free(agg_job *j);
int agg_job_new_sm(agg_job *j, struct fs_err *err);
int agg_add_digests(agg_job *j, const uint8_t (*digests)[32], struct fs_err *err);
int agg_mgr_register(agg_mgr *m, agg_job *j, struct fs_err *err);
void agg_count_add(agg_mgr *m, uint64_t *field, uint64_t k);
void agg_wake(agg_mgr *m);
/* sm_mu held */
void agg_fail_job(agg_job *j, const char *reason);
void agg_after_sm_error(agg_job *j, int rc, const struct fs_err *err);
int agg_log_event(agg_job *j, const char *kind, uint32_t party, uint64_t idx, const void *body,
                  size_t len, double at, struct fs_err *err);
int agg_log_json(agg_job *j, const char *kind, uint32_t party, const json_t *body, double at,
                 struct fs_err *err);
/* A worker's write failed with rc: when it is FS_ESTORAGE (disk full,
 * read-only) wait a second and return 1 (write again), unless the server is
 * closing; else 0. *tries counts the waits (start at 0): the first is
 * logged with err's message, the others are not. */
int agg_storage_wait(agg_job *j, int rc, const struct fs_err *err, unsigned *tries);
/* sm_mu held: write the events kept while storage was unavailable.
 * @return 0 (none left), FS_ESTORAGE (still unavailable), another error */
int agg_flush_log(agg_job *j, struct fs_err *err);
void agg_fail_no_dropouts(agg_job *j, enum fs_job_phase ph, uint32_t who, uint32_t drops);
/* mu held: open phase ph expecting set (and restart the round deadline) */
void agg_next_round_locked(agg_job *j, enum fs_job_phase ph, const uint32_t *set, size_t k,
                           double at, int record);
/* mu held, as sm_mu is let go after a close or the worker: a round opened
 * since (ph, r) gets its whole timeout from now (see jobcore.c) */
void agg_round_clock_locked(agg_job *j, enum fs_job_phase ph, uint32_t r);
/* mu held: may party act in phase want of aggregation r now? */
int agg_check_locked(const agg_job *j, enum fs_job_phase want, uint32_t r, uint32_t party,
                     struct fs_err *err);
/* check, then take sm_mu (held on success); agg_leave releases it */
int agg_enter(agg_job *j, enum fs_job_phase want, uint32_t r, uint32_t party, struct fs_err *err);
/* agg_enter for a message that may repeat an accepted one (see jobcore.c) */
int agg_enter_repeat(agg_job *j, enum fs_job_phase want, uint32_t r, uint32_t party, int *closed,
                     struct fs_err *closed_err, struct fs_err *err);
int agg_closed_verdict(int rc, const struct fs_err *closed_err, struct fs_err *err);
void agg_leave(agg_job *j);
int agg_exists(const agg_job *j, uint32_t r, struct fs_err *err);

/* ---- jobagg.c: aggregations, the worker (sm_mu held) */
int agg_begin_sum(agg_job *j, const struct fs_fixedpt *given, double at, struct fs_err *err);
int agg_begin_fed(agg_job *j, uint32_t r, double at, struct fs_err *err);
/* aggregation 0 of any algorithm, once key sharing closed */
int agg_begin_first(agg_job *j, double at, struct fs_err *err);
int agg_finish_stats(agg_job *j, double at, struct fs_err *err);
int agg_start_worker(agg_job *j);

/* ---- jobround.c: messages and closing rounds (sm_mu held) */
/* A party's message: checked against the job's record, handed to the secure
 * aggregation, persisted (unless replaying) and recorded. body: the JSON
 * logged for ADV/SHARES/REVEALS (ADV: encoded when NULL). */
int agg_apply(agg_job *j, const struct fs_jobsm_msg *msg, const json_t *body, double at,
              struct fs_err *err);
int agg_close_round(agg_job *j, double at, int by_deadline, struct fs_err *err);
/* A streamed chunk, committed to the sum: log and record it (sm_mu held). */
int agg_apply_streamed(agg_job *j, uint32_t party, uint64_t idx, size_t m, double at,
                       struct fs_err *err);

/* ---- shardcoord.c: sharded fedsvd/fedpca jobs (the coordinator's side) */
/* Before a job of spec is stored: create its windows on the peers (none
 * when it is not sharded); FS_EFORMAT when there are too few peers,
 * FS_EUNAVAILABLE when a peer cannot take its window. */
int agg_shard_create_windows(agg_mgr *m, const char *id, const struct fs_job_spec *spec,
                             const uint8_t (*digests)[32], struct fs_err *err);
/* j->sj for a sharded job (after agg_job_alloc; strict: every shard must
 * have its peer, else shards without one fail the job when it runs);
 * j->sj_detach stops its poller and frees it. */
int agg_shard_attach(agg_job *j, int strict, struct fs_err *err);
/* Delete j's windows on the peers (a job whose creation failed after they were made). */
void agg_shard_forget_windows(agg_job *j);
/* The thread that deletes peers' windows (retried until the peer takes the
 * DELETE, also after a restart): started by agg_mgr_new when the server
 * has peers or deletions pending, stopped by agg_mgr_free. */
void agg_shard_gc_start(agg_mgr *m);
void agg_shard_gc_stop(agg_mgr *m);
/* 1 when aggregation r of j is split over the shards. */
int agg_shard_is_sharded(const agg_job *j, uint32_t r);
/* The driver: start the poller of a sharded job once. */
void agg_shard_tick(agg_job *j);
/* sm_mu held: begin the sharded aggregation (the own window, win_len words). */
int agg_shard_begin(agg_job *j, uint32_t r, uint64_t len, uint32_t **active, size_t *na,
                    uint64_t *win_len, struct fs_err *err);
/* mu held: 0 while a party of the open sharded masked_input is not complete on every peer. */
int agg_shard_round_ready(const agg_job *j);
int agg_shard_closes_masked(const agg_job *j);
/* sm_mu held: close the sharded masked_input; *body (free) goes with the close event. */
int agg_shard_close_masked(agg_job *j, char **body, struct fs_err *err);
int agg_shard_replay_close(agg_job *j, const void *body, size_t len, struct fs_err *err);
/* sm_mu held, the worker: the peers' part of the sharded SVD, TSQR into *pub. */
int agg_shard_finish_svd(agg_job *j, const struct fs_prg_term *plan, size_t np, const uint32_t *u3,
                         size_t n3, int e, struct fs_fedsvd_published *pub, struct fs_err *err);

#endif
