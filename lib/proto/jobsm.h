/* The aggregation server's job state machine: the counterpart of the agent's
 * driver (agent_driver.h). It owns a job's phases, the per-party sets
 * (joined, shared, dropped, expected and sent in the open round), the
 * thresholds the service checks itself (sealed exponents, plain uploads),
 * the exponent agreement rule, the dropout rules and the replay of persisted
 * events. The secure-aggregation rounds themselves are fs_secagg_server's
 * (secagg.h); this machine calls it where a step needs it, or returns a
 * decision the service acts on.
 *
 * Pure: no I/O, no clock (times are passed in, in seconds), no locks, no
 * logging, no phase names (their wire spelling is the service's). The
 * aggregation server keeps persistence, status documents, locks and HTTP.
 *
 * Phases in protocol order (the numeric order is used: a later phase has a
 * larger value; FS_JOB_DONE and FS_JOB_FAILED end a job):
 *   ADVERTISE, SHARE_KEYS                 once per job (SecAgg R0, R1)
 *   EXPONENTS                             fedsvd/fedpca: sealed exponents of aggregation r
 *   MASKED_INPUT, CONSISTENCY, UNMASKING  per aggregation (R2, R3, R4); all-inputs
 *                                         jobs (below) go from MASKED_INPUT to
 *                                         UNMASKING: no CONSISTENCY phase
 *   FACTORIZING                           fedsvd/fedpca, after the last aggregation
 *   NOISE_EXCHANGE                        fedpower-utility: after R4 of a sync
 *   PLAIN_UPLOAD                          plain fedpower: instead of R2..R4
 *
 * Dropout rules: a party expected in a round that did not send its message
 * when the round closes is dropped for the rest of the job. fedsvd/fedpca
 * jobs without allow_dropouts fail when that happens up to and including the
 * masked input (its data would be missing from the result); power-method
 * jobs without allow_dropouts fail at any round; secure-sum jobs go on while
 * the secure aggregation has its threshold.
 *
 * All-inputs jobs: fedsvd/fedpca and the secure-aggregation power methods
 * without allow_dropouts need every active party's masked input in every
 * aggregation, so their secure aggregation runs without the consistency
 * round (fs_secagg_config.all_inputs; the reason is in secagg.h). Secure-sum
 * jobs and jobs with allow_dropouts keep it.
 *
 * Concurrency contract (the service's): every function that changes the
 * state is called with the service's state-machine lock held and, where
 * status readers look at the fields, their lock too; readers may read the
 * fields directly. */
#ifndef FS_PROTO_JOBSM_H
#define FS_PROTO_JOBSM_H

#include <stddef.h>
#include <stdint.h>

#include "../core/err.h"
#include "fedsvd.h"
#include "job.h"
#include "secagg.h"

enum fs_job_phase {
    FS_JOB_ADVERTISE = 0,
    FS_JOB_SHARE_KEYS,
    FS_JOB_EXPONENTS,
    FS_JOB_MASKED_INPUT,
    FS_JOB_CONSISTENCY,
    FS_JOB_UNMASKING,
    FS_JOB_FACTORIZING,
    FS_JOB_NOISE_EXCHANGE,
    FS_JOB_PLAIN_UPLOAD,
    FS_JOB_DONE,
    FS_JOB_FAILED
};

/* Phases whose time is measured: FS_JOB_ADVERTISE .. FS_JOB_PLAIN_UPLOAD. */
#define FS_JOB_NTIMED 9

#define FS_JOBSM_REASON_MAX 512

struct fs_jobsm_config {
    enum fs_algo algo;
    uint32_t parties;      /* n; party ids are 1..n */
    uint32_t threshold;    /* t */
    uint32_t aggregations; /* secure aggregations (or plain rounds) of the job */
    int allow_dropouts;    /* fedsvd/fedpca, power methods: the spec's flag */
};

/* The state. Fields are read-only outside jobsm.c; per-party arrays have n + 1
 * entries, indexed by party id. */
struct fs_jobsm {
    struct fs_jobsm_config cfg;
    int fed;        /* fedsvd / fedpca */
    int power;      /* a power method */
    int plain;      /* plain fedpower: no secure aggregation after R1 */
    int all_inputs; /* fs_jobsm_all_inputs(&cfg): no CONSISTENCY phase */
    enum fs_job_phase phase;
    uint32_t r;          /* the aggregation in progress (or the last one) */
    int finishing;       /* a round closed and its work runs on the service's worker */
    double phase_opened; /* when the open phase began */
    double timings[FS_JOB_NTIMED];
    uint8_t has_timing[FS_JOB_NTIMED];
    uint8_t *joined;   /* advertised keys (U1) */
    uint8_t *shared;   /* shared keys (U2) */
    uint8_t *dropped;  /* counted as dropped at a round close */
    uint8_t *in_round; /* expected in the open round */
    uint8_t *sent;     /* sent the open round's message */
    uint8_t *active;   /* plain fedpower: the parties expected in the next round */
    uint8_t *has_exp;  /* the max_abs_exp advertised with the keys (secure-sum) */
    int *exp;
    uint8_t (*sealed)[FS_FEDSVD_SEALED_EXP_LEN]; /* this aggregation's sealed exponents */
    uint8_t *has_sealed;
    int *pubexp; /* the public exponent each party reported (SVD aggregation) */
    uint8_t *has_pubexp;
    int finish_pending; /* replay: R4 closed, its unmasking not replayed yet */
    char error[FS_JOBSM_REASON_MAX];
};

/** A new job in phase ADVERTISE (every party expected), opened at `at`. */
FS_WUR int fs_jobsm_init(struct fs_jobsm *s, const struct fs_jobsm_config *cfg, double at,
                         struct fs_err *err);

/**
 * 1 when the job's aggregations need every active party's masked input
 * (fedsvd/fedpca or a secure-aggregation power method, without
 * allow_dropouts): its secure aggregation is configured with all_inputs and
 * has no consistency round. 0 for secure-sum, plain fedpower and jobs with
 * allow_dropouts.
 */
int fs_jobsm_all_inputs(const struct fs_jobsm_config *cfg);

/** The dropout rule: 1 when a drop at the close of phase ph fails the job. */
int fs_jobsm_drop_fails(const struct fs_jobsm *s, enum fs_job_phase ph);

/** Free the arrays. Accepts a zeroed struct. */
void fs_jobsm_clear(struct fs_jobsm *s);

/** 1 while the job is neither done nor failed. */
int fs_jobsm_running(const struct fs_jobsm *s);

/** The SecAgg round (0..4) a phase belongs to, or -1 (exponents, factorizing, over, ...). */
int fs_jobsm_secagg_round(enum fs_job_phase ph);

/** 1 when the open round expects party v and has not heard from it yet. */
int fs_jobsm_waits_for(const struct fs_jobsm *s, uint32_t v);

/** 1 when the open round still expects party v (sent or not). */
int fs_jobsm_expects(const struct fs_jobsm *s, uint32_t v);

/** 1 when every party still in the open round has sent its message. */
int fs_jobsm_round_complete(const struct fs_jobsm *s);

/** The ids where flags[v] is set (v = 1..n), ascending; new array (free()), NULL on ENOMEM. */
uint32_t *fs_jobsm_ids(const struct fs_jobsm *s, const uint8_t *flags, size_t *k);

/* ---- transitions */

/**
 * Fail the job with reason (copied). @return 1 when it failed now, 0 when
 * it was already done or failed (nothing changes).
 */
int fs_jobsm_fail(struct fs_jobsm *s, const char *reason);

/**
 * Open phase ph expecting exactly the k ids of set, at time at; with record,
 * the time spent in the phase that ends adds to its timing (over the
 * aggregations).
 */
void fs_jobsm_next_round(struct fs_jobsm *s, enum fs_job_phase ph, const uint32_t *set, size_t k,
                         double at, int record);

/** Add the time since the open phase began to phase ph's timing. */
void fs_jobsm_record_timing(struct fs_jobsm *s, enum fs_job_phase ph, double at);

/** fedsvd/fedpca: the last unmasking is over, factorizing opens at `at`. */
void fs_jobsm_factorizing(struct fs_jobsm *s, double at);

/** The job is done (its result is recorded by the service): no party is expected. */
void fs_jobsm_done(struct fs_jobsm *s);

/** The service's worker starts (1) or ends (0) the work of a closed round. */
void fs_jobsm_set_finishing(struct fs_jobsm *s, int on);

/** A job that ended before a restart: its end state (done, or failed with error) and r. */
void fs_jobsm_restore_end(struct fs_jobsm *s, int failed, const char *error, uint32_t r);

/**
 * A job being loaded that cannot go on (its replay failed, or its kind does
 * not resume): back to the start, so the failure recorded next is the load's.
 */
void fs_jobsm_restart(struct fs_jobsm *s);

/** A party's flags from an ended job's status document. */
void fs_jobsm_restore_party(struct fs_jobsm *s, uint32_t v, int joined, int dropped);

/** A timing from an ended job's status document. */
void fs_jobsm_restore_timing(struct fs_jobsm *s, enum fs_job_phase t, double seconds);

/* ---- may a message be taken now? */

enum fs_jobsm_verdict {
    FS_JOBSM_OK = 0,
    FS_JOBSM_FAILED,      /* the job failed (s->error) */
    FS_JOBSM_CLOSED,      /* the phase of that aggregation is over (or the job is) */
    FS_JOBSM_NOT_YET,     /* the job has not reached that phase of that aggregation */
    FS_JOBSM_NOT_IN_ROUND /* the party is not expected in the open round: it was dropped */
};

/**
 * May `party` act in phase want of aggregation r now? party 0 skips the
 * membership check.
 */
enum fs_jobsm_verdict fs_jobsm_check(const struct fs_jobsm *s, enum fs_job_phase want, uint32_t r,
                                     uint32_t party);

/**
 * Phase want of aggregation r has closed for good, but what was accepted in
 * it is still known (same aggregation, job not over): a repeat of an
 * accepted message can be recognised.
 */
int fs_jobsm_repeatable(const struct fs_jobsm *s, enum fs_job_phase want, uint32_t r);

/** The secure aggregation has closed want's round too (it then accepts only identical repeats). */
int fs_jobsm_secagg_closed(const fs_secagg_server *sa, enum fs_job_phase want);

/* ---- party messages */

enum fs_jobsm_kind {
    FS_JOBSM_ADV = 0, /* advertised keys (+ max_abs_exp) */
    FS_JOBSM_SHARES,  /* encrypted key shares */
    FS_JOBSM_EXP,     /* sealed exponent of aggregation r */
    FS_JOBSM_PUBEXP,  /* public exponent (SVD aggregation) */
    FS_JOBSM_MASKED,  /* one masked chunk */
    FS_JOBSM_SIG,     /* consistency signature */
    FS_JOBSM_REVEALS, /* unmasking shares */
    FS_JOBSM_PLAIN,   /* plain fedpower upload (taken by the power server) */
    FS_JOBSM_NOISE    /* noise-exchange response (taken by the power server) */
};

/* A party's message, decoded (payload borrowed). */
struct fs_jobsm_msg {
    enum fs_jobsm_kind kind;
    uint32_t party;
    const struct fs_secagg_adv *adv;      /* ADV */
    int has_exp;                          /* ADV: max_abs_exp given */
    int exp;                              /* ADV: max_abs_exp; PUBEXP: the public exponent */
    const struct fs_secagg_share_ct *cts; /* SHARES */
    const struct fs_secagg_reveal *rv;    /* REVEALS */
    size_t k;                             /* SHARES, REVEALS */
    const uint8_t *bytes;  /* EXP: FS_FEDSVD_SEALED_EXP_LEN, SIG: FS_SECAGG_SIG_LEN */
    uint64_t idx;          /* MASKED: chunk index */
    const uint64_t *words; /* MASKED */
    size_t m;              /* MASKED: words */
};

/**
 * Against the job's own record (ADV, EXP, PUBEXP; SHARES/SIG/REVEALS by the
 * round's flags): *repeat = 1 when the party already sent this very
 * message. Another message where one was accepted is FS_ECONFLICT. PUBEXP
 * also applies the agreement rule: a public exponent different from one
 * another party reported means the relayed sealed exponents differ; then
 * reason (cap bytes) receives why the job must fail (else reason[0] = 0).
 */
FS_WUR int fs_jobsm_seen(const struct fs_jobsm *s, const struct fs_jobsm_msg *msg, int *repeat,
                         char *reason, size_t cap, struct fs_err *err);

/**
 * Hand the message to the secure aggregation (ADV, SHARES, MASKED, SIG,
 * REVEALS; nothing for the others). *is_new (MASKED): 1 for a new chunk, 0
 * for an identical repeat. ADV under a key that is not the party's pin is
 * FS_EAUTH (nothing stored); a bad signature (ADV, SIG) is FS_EINVAL.
 */
FS_WUR int fs_jobsm_secagg_add(fs_secagg_server *sa, const struct fs_jobsm_msg *msg, int *is_new,
                               struct fs_err *err);

/** Record an accepted new message in the party sets (sa: MASKED asks if the upload is complete). */
void fs_jobsm_accepted(struct fs_jobsm *s, const fs_secagg_server *sa,
                       const struct fs_jobsm_msg *msg);

/**
 * seen, secagg_add and accepted in one step (single-threaded callers:
 * replay, tests). *is_new: whether the message changed the state (and so
 * is persisted): 0 for a repeat. A job-failing reason as in fs_jobsm_seen.
 */
FS_WUR int fs_jobsm_apply(struct fs_jobsm *s, fs_secagg_server *sa, const struct fs_jobsm_msg *msg,
                          int *is_new, char *reason, size_t cap, struct fs_err *err);

/**
 * A message for a round that has closed (fs_jobsm_repeatable said its
 * messages are still known): 0 when it repeats one that was accepted,
 * else FS_ECONFLICT (or the secure aggregation's answer).
 */
FS_WUR int fs_jobsm_closed_repeat(const struct fs_jobsm *s, fs_secagg_server *sa,
                                  const struct fs_jobsm_msg *msg, struct fs_err *err);

/* ---- aggregations */

/**
 * secure-sum: the largest max_abs_exp advertised by the k active parties
 * (*have = 0 when none gave one: all their data is zero).
 */
void fs_jobsm_max_exp(const struct fs_jobsm *s, const uint32_t *active, size_t k, int *have,
                      int *e);

/**
 * Begin aggregation r of len words: the secure aggregation's begin (plain
 * fedpower: none) and its active set, *active (new array, free()) of *k ids.
 * The state does not change until fs_jobsm_opened.
 */
FS_WUR int fs_jobsm_begin(const struct fs_jobsm *s, fs_secagg_server *sa, uint32_t r, uint64_t len,
                          uint32_t **active, size_t *k, struct fs_err *err);

/**
 * Aggregation r is open at `at` with these active parties: fedsvd/fedpca
 * in EXPONENTS, plain fedpower in PLAIN_UPLOAD, the others in MASKED_INPUT.
 */
void fs_jobsm_opened(struct fs_jobsm *s, uint32_t r, const uint32_t *active, size_t k, double at);

/**
 * The public exponent the n3 contributors u3 of the SVD aggregation agree
 * on. FS_ESTATE when one did not report it or two differ.
 */
FS_WUR int fs_jobsm_agreed_exponent(const struct fs_jobsm *s, const uint32_t *u3, size_t n3, int *e,
                                    struct fs_err *err);

/** Plain fedpower: the parties expected in the next round. */
void fs_jobsm_set_active(struct fs_jobsm *s, const uint32_t *ids, size_t k);

/* ---- closing a round */

struct fs_jobsm_close {
    enum fs_job_phase phase; /* the round that closes */
    const char *event;       /* the kind of event that records it ("close_adv", ...) */
    uint32_t drops;          /* parties dropped by this close */
    uint32_t first_drop;     /* the lowest of them (0 when none) */
    uint32_t *ids;           /* plain upload, noise exchange: who answered (owned) */
    size_t k;
};

/**
 * Close the secure aggregation's side of the open round (R0..R3; nothing
 * for the others). The service calls it without its status lock (the close
 * may read uploads back). @return the secure aggregation's code.
 */
FS_WUR int fs_jobsm_close_secagg(const struct fs_jobsm *s, fs_secagg_server *sa,
                                 struct fs_err *err);

/**
 * Which round closes now, and who dropped (they are marked dropped). c->event
 * is NULL when no round is open (nothing to close). Free c with
 * fs_jobsm_close_clear. @return 0 or FS_ENOMEM.
 */
FS_WUR int fs_jobsm_close(struct fs_jobsm *s, struct fs_jobsm_close *c, struct fs_err *err);

void fs_jobsm_close_clear(struct fs_jobsm_close *c);

enum fs_jobsm_action {
    FS_JOBSM_NEXT = 0, /* the next round is open (or nothing to do) */
    FS_JOBSM_FAIL,     /* fail the job: reason, or the dropout rule (no_dropouts) */
    FS_JOBSM_BEGIN,    /* key setup done: begin aggregation 0 */
    FS_JOBSM_WORK      /* the round's work (unmasking, ...) goes to the worker */
};

struct fs_jobsm_step {
    enum fs_jobsm_action action;
    int no_dropouts; /* FAIL by the dropout rule (c->phase, c->first_drop, c->drops) */
    char reason[FS_JOBSM_REASON_MAX];
    uint32_t *set; /* the parties of the round just opened (owned), k ids */
    size_t k;
};

/**
 * After the close is recorded: apply the dropout rule and the thresholds,
 * then open the next round (at time at) or say what the service does next.
 */
FS_WUR int fs_jobsm_advance(struct fs_jobsm *s, const fs_secagg_server *sa,
                            const struct fs_jobsm_close *c, double at, struct fs_jobsm_step *st,
                            struct fs_err *err);

void fs_jobsm_step_clear(struct fs_jobsm_step *st);

/* ---- replay of persisted events */

enum fs_jobsm_event {
    FS_JOBSM_EV_ADV = 0,
    FS_JOBSM_EV_SHARES,
    FS_JOBSM_EV_EXP,
    FS_JOBSM_EV_PUBEXP,
    FS_JOBSM_EV_MASKED,
    FS_JOBSM_EV_SIG,
    FS_JOBSM_EV_REVEALS,
    FS_JOBSM_EV_BEGIN,
    FS_JOBSM_EV_CLOSE, /* every "close_*" */
    FS_JOBSM_EV_DONE
};

/** The event kind of a stored event's name; -1 for an unknown one. */
int fs_jobsm_event_parse(const char *kind, enum fs_jobsm_event *out);

/** The stored name of a message's event ("adv", "shares", ...). */
const char *fs_jobsm_event_name(enum fs_jobsm_kind kind);

/**
 * Replaying a close: after its fs_jobsm_close/advance, an R4 close leaves
 * the unmasking pending (the worker's work is not an event).
 */
void fs_jobsm_replay_closed(struct fs_jobsm *s, enum fs_job_phase closed);

/**
 * Replaying fedsvd/fedpca's "begin" of aggregation r: r must follow the one
 * in progress, and for r > 0 the previous (statistics) aggregation must
 * have closed its unmasking: *finish_first = 1 then (the service publishes
 * its sum before the begin). FS_EFORMAT otherwise.
 */
FS_WUR int fs_jobsm_replay_begin(struct fs_jobsm *s, int64_t r, int *finish_first,
                                 struct fs_err *err);

/** Parse a stored public exponent ("%d" text of len bytes) in its valid range. */
FS_WUR int fs_jobsm_pubexp_parse(const uint8_t *body, size_t len, int *e, struct fs_err *err);

/** 1 when two states are the same (phases, aggregation, party sets, exponents, error). */
int fs_jobsm_equal(const struct fs_jobsm *a, const struct fs_jobsm *b);

#endif
