/* Internals of the job manager shared by jobmgr.c and powerjob.c (the
 * power-method job glue): the job and manager structs and the helpers both
 * use. Locking rules: see jobmgr.h. Not for other files. */
#ifndef AGGSRV_JOBMGR_INTERNAL_H
#define AGGSRV_JOBMGR_INTERNAL_H

#include <jansson.h>
#include <pthread.h>
#include <stdint.h>

#include "core/fdio.h"
#include "jobmgr.h"
#include "la/fixedpt.h"
#include "proto/fedsvd.h"
#include "proto/secagg.h"

struct agg_power;

/* Phases in protocol order. JP_EXP (sealed exponents) and JP_FACTOR only
 * occur in fedsvd/fedpca jobs; JP_EXP..JP_R4 repeat per aggregation.
 * JP_NOISEX (fedpower-utility: after JP_R4 of a sync) and JP_PLAIN (plain
 * fedpower: instead of JP_R2..JP_R4) only in power-method jobs. */
enum jphase {
    JP_R0 = 0,
    JP_R1,
    JP_EXP,
    JP_R2,
    JP_R3,
    JP_R4,
    JP_FACTOR,
    JP_NOISEX,
    JP_PLAIN,
    JP_DONE,
    JP_FAILED
};

#define NTIMINGS 9 /* JP_R0 .. JP_PLAIN */

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
    uint64_t len;
    uint64_t nchunks;
    char created_at[32];
    double created_unix;
    char dir[4200]; /* <data>/jobs/<id> */
    char tmp_dir[4300];
    fs_auth *auth; /* party tokens, labels "party:N" */
    struct fs_secagg_config cfg;
    int fed;                 /* fedsvd / fedpca */
    int power;               /* a power-method job (state in pw) */
    uint32_t naggs;          /* secure aggregations of the job */
    size_t *sizes;           /* fed: party_sizes as size_t, for lib/proto */
    struct fs_fedsvd_job fj; /* fed: the job as lib/proto sees it (sizes borrowed) */

    /* sm_mu */
    fs_secagg_server *sm;
    struct chunk_ctx cs;
    uint64_t next_seq;
    int replaying;
    uint32_t *first_u3;   /* fedpca: U3 of aggregation 0 (every later one must equal it) */
    struct agg_power *pw; /* power-method jobs (powerjob.c); NULL otherwise */
    size_t nfirst;

    /* mu */
    enum jphase phase;
    int finishing; /* R4 closed; unmasking on the worker */
    int worker_running;
    int worker_exited;
    pthread_t worker;
    double deadline_mono;
    double phase_opened; /* wall clock */
    uint32_t r;          /* the aggregation in progress (or the last one) */
    double timings[NTIMINGS];
    int has_timing[NTIMINGS];
    uint8_t *joined;   /* advertised keys (U1) */
    uint8_t *shared;   /* shared keys (U2) */
    uint8_t *dropped;  /* counted as dropped at a round close */
    uint8_t *in_round; /* still expected in the current round */
    uint8_t *sent;     /* sent this round's message */
    uint8_t *has_exp;
    int *exp;
    uint8_t (*sealed)[FS_FEDSVD_SEALED_EXP_LEN]; /* fed: this aggregation's sealed exponents */
    uint8_t *has_sealed;
    int *pubexp; /* fed: the public exponent each party reported (SVD aggregation) */
    uint8_t *has_pubexp;
    uint64_t bytes_in;
    uint64_t bytes_out;
    uint64_t phase_in[NTIMINGS]; /* bytes of requests that ended while phase t was open */
    uint64_t phase_out[NTIMINGS];
    struct fs_fixedpt fp;
    json_t *roster; /* {"roster": [...]} once R0 closed */
    json_t *aggs;   /* array: Aggregation document r (null until begun) */
    json_t *result; /* Result once done */
    char error[512];
};

struct agg_mgr {
    struct agg_mgr_config cfg;
    char data_dir[4096];
    agg_store *st;
    pthread_rwlock_t lock; /* the registry */
    agg_job **jobs;
    size_t njobs;
    size_t cap;
    pthread_mutex_t wake_mu;
    pthread_cond_t wake_cv;
    int woken;
    pthread_mutex_t count_mu;
    struct agg_counts counts; /* rounds/dropped/chunks; states are counted on demand */
};

/* Phase names on the wire (PHASE_NAME of jobmgr.c). */
const char *agg_phase_name(enum jphase ph);
/* Key of timings[t] in the Job's "timings" (TIMING_NAME of jobmgr.c), t < NTIMINGS. */
const char *agg_timing_name(int t);

double now_mono(void);
double now_wall(void);
void rm_tree(const char *path);
void count_add(agg_mgr *m, uint64_t *field, uint64_t k);
void wake(agg_mgr *m);
int is_internal(int code);
json_t *ids_where(const uint8_t *flags, const uint8_t *unless, uint32_t n);
int job_running(const agg_job *j);
/* sm_mu held */
void fail_job(agg_job *j, const char *reason);
void after_sm_error(agg_job *j, int rc, const struct fs_err *err);
int log_event(agg_job *j, const char *kind, uint32_t party, uint64_t idx, const void *body,
              size_t len, double at, struct fs_err *err);
int log_json(agg_job *j, const char *kind, uint32_t party, const json_t *body, double at,
             struct fs_err *err);
void fail_no_dropouts(agg_job *j, enum jphase ph, uint32_t who, uint32_t drops);
void persist_state(agg_job *j, const char *result_json);
/* mu held */
uint32_t mark_dropped_locked(agg_job *j, uint32_t *first);
void next_round_locked(agg_job *j, enum jphase ph, const uint32_t *set, size_t k, double at,
                       int record);
json_t *cur_agg(const agg_job *j);
int check_phase_locked(const agg_job *j, enum jphase want, uint32_t r, uint32_t party,
                       struct fs_err *err);
uint32_t *flag_ids(const uint8_t *flags, uint32_t n, size_t *k);
int start_worker(agg_job *j);
int file_sha256_hex(const char *path, char hex[65], struct fs_err *err);
json_t *dropped_of(const agg_job *j, const uint32_t *u3, size_t n3);
/* check the phase, then take sm_mu (held on success); leave() releases it */
int enter(agg_job *j, enum jphase want, uint32_t r, uint32_t party, struct fs_err *err);
void leave(agg_job *j);
int agg_exists(const agg_job *j, uint32_t r, struct fs_err *err);

#endif
