/* The client agent's participation driver: a pure state machine that decides
 * the next HTTP step of a secure-sum participation (docs/wire-secure-sum.md)
 * from what the agent has done so far and the job status it last polled.
 * No sockets, clocks or JSON: the agent's worker polls GET /v1/jobs/{job},
 * feeds the status here, and performs the step it is told to (moving the
 * messages of lib/proto/secagg.h over HTTP).
 *
 * Steps, in order, per job (R0, R1) and per aggregation r (R2..R4):
 *   ADVERTISE    POST keys                 (needs phase waiting_for_parties)
 *   ROSTER       GET keys, share_keys      (needs share_keys)
 *   SHARE        POST shares               (needs share_keys)
 *   RECEIVE      GET shares, receive       (needs a phase after share_keys)
 *   BEGIN r      GET aggregations/r, begin (needs masked_input of r)
 *   UPLOAD r     PUT every masked chunk    (needs masked_input of r)
 *   SURVIVORS r  GET aggregations/r (U3)   (needs a phase after masked_input of r)
 *   CONSISTENCY r POST consistency         (needs consistency of r)
 *   SIGNATURES r GET aggregations/r (U4)   (needs a phase after consistency of r)
 *   UNMASK r     POST unmask               (needs unmasking of r)
 *   RESULT       GET result and its files  (needs done)
 * All-inputs jobs (fs_agent_driver_set_all_inputs; secagg.h) have no
 * consistency round: SURVIVORS r (U3, needs a phase after masked_input of
 * r) is followed by UNMASK r, without CONSISTENCY and SIGNATURES.
 *
 * fedsvd / fedpca jobs (docs/wire-fedsvd.md; fs_agent_driver_init_fed) add,
 * per aggregation r:
 *   BEGIN r      GET aggregations/r, begin (needs exponents of r)
 *   EXPONENT r   POST the sealed exponent  (needs exponents of r)
 *   EXPONENTS r  GET the relayed list, open it (and for the SVD aggregation
 *                POST the public exponent) (needs masked_input of r)
 *   ... UPLOAD .. UNMASK as above, then for the leading `stats` aggregations
 *   STATS r      GET aggregations/r and its sum.npy (needs a phase after
 *                unmasking of r)
 * and the job passes through "factorizing" before done.
 *
 * Power-method jobs (fedpower, fedpower-utility, fedpower-private, dp-ppm;
 * docs/wire-fedpower.md; fs_agent_driver_init_power) keep the key setup and,
 * per aggregation r (a sync, or the final Rayleigh upload):
 *   BEGIN r      GET aggregations/r and its z.npy, receive Z (the local
 *                iterations up to the next sync: the party's heavy compute)
 *                (needs masked_input of r, or plain_upload of r for fedpower)
 *   fedpower:    PLAIN_UPLOAD r  PUT plain.npy (needs plain_upload of r)
 *   secure-aggregation algorithms: UPLOAD .. UNMASK as above, and for
 *   fedpower-utility at the first `exchanges` aggregations (the syncs):
 *   EXCHANGE r   GET the selector, POST the noise response (needs
 *                noise_exchange of r; skipped once the job moved past it:
 *                the server keeps the party's noise in)
 * Final phases the agent does not know (the server's own post-processing)
 * are waited out like any unknown phase.
 *
 * A job that moved past the round a message belongs to has dropped this
 * party: before its masked input is in, that ends the participation; after
 * it (the party's data is in the sum), a late consistency or unmask message
 * is skipped and the party still fetches the result.
 *
 * fail_at (a testing aid): the driver answers CRASH instead of DO right
 * before the first message of that round would be sent (for the
 * per-aggregation rounds: of aggregation fail_round, 0 by default). */
#ifndef FS_PROTO_AGENT_DRIVER_H
#define FS_PROTO_AGENT_DRIVER_H

#include <stddef.h>
#include <stdint.h>

#include "../core/err.h"

/* The job's phase as the aggregation server reports it. */
enum fs_agent_jphase {
    FS_AGENT_J_UNKNOWN = 0,    /* a phase this agent does not know: keep waiting */
    FS_AGENT_J_WAITING,        /* "waiting_for_parties" (R0 open) */
    FS_AGENT_J_SHARE_KEYS,     /* "share_keys" */
    FS_AGENT_J_MASKED,         /* "masked_input" */
    FS_AGENT_J_CONSISTENCY,    /* "consistency" */
    FS_AGENT_J_UNMASKING,      /* "unmasking" */
    FS_AGENT_J_DONE,           /* "done" */
    FS_AGENT_J_FAILED,         /* "failed" */
    FS_AGENT_J_EXPONENTS,      /* "exponents" (fedsvd/fedpca) */
    FS_AGENT_J_FACTORIZING,    /* "factorizing" (fedsvd/fedpca) */
    FS_AGENT_J_NOISE_EXCHANGE, /* "noise_exchange" (fedpower-utility) */
    FS_AGENT_J_PLAIN_UPLOAD    /* "plain_upload" (fedpower) */
};

/** Phase from its wire name; unknown names give FS_AGENT_J_UNKNOWN. */
enum fs_agent_jphase fs_agent_jphase_parse(const char *s);

/** Wire name of a phase ("unknown" for FS_AGENT_J_UNKNOWN). */
const char *fs_agent_jphase_name(enum fs_agent_jphase p);

/* The job status fields the driver looks at. */
struct fs_agent_job_view {
    enum fs_agent_jphase phase;
    int failed;           /* state "failed" (also when phase says so) */
    uint32_t aggregation; /* index of the current aggregation */
    const char *error;    /* the abort reason when failed; borrowed, may be NULL */
};

enum fs_agent_step {
    FS_AGENT_S_ADVERTISE = 0,
    FS_AGENT_S_ROSTER,
    FS_AGENT_S_SHARE,
    FS_AGENT_S_RECEIVE,
    FS_AGENT_S_BEGIN,
    FS_AGENT_S_UPLOAD,
    FS_AGENT_S_SURVIVORS,
    FS_AGENT_S_CONSISTENCY,
    FS_AGENT_S_SIGNATURES,
    FS_AGENT_S_UNMASK,
    FS_AGENT_S_RESULT,
    FS_AGENT_S_FINISHED,
    FS_AGENT_S_EXPONENT,     /* fedsvd/fedpca */
    FS_AGENT_S_EXPONENTS,    /* fedsvd/fedpca */
    FS_AGENT_S_STATS,        /* fedpca statistics rounds */
    FS_AGENT_S_PLAIN_UPLOAD, /* fedpower */
    FS_AGENT_S_EXCHANGE      /* fedpower-utility noise exchange */
};

/** Short name of a step ("advertise", "upload", ...), for logs. */
const char *fs_agent_step_name(enum fs_agent_step s);

/* Rounds whose message fail_at can withhold. */
enum fs_agent_fail_at {
    FS_AGENT_FAIL_NONE = 0,
    FS_AGENT_FAIL_ADVERTISE_KEYS,
    FS_AGENT_FAIL_SHARE_KEYS,
    FS_AGENT_FAIL_MASKED_INPUT,
    FS_AGENT_FAIL_CONSISTENCY,
    FS_AGENT_FAIL_UNMASKING,
    FS_AGENT_FAIL_PLAIN_UPLOAD,  /* fedpower */
    FS_AGENT_FAIL_NOISE_EXCHANGE /* fedpower-utility */
};

/**
 * Parse a fail_at name: "advertise_keys", "share_keys", "masked_input",
 * "consistency", "unmasking", "plain_upload", "noise_exchange". @return 0 or
 * FS_EINVAL.
 */
FS_WUR int fs_agent_fail_at_parse(const char *s, enum fs_agent_fail_at *out, struct fs_err *err);

/**
 * Parse "NAME" or "NAME:R" (R a decimal aggregation index, 0..99999): the
 * per-aggregation rounds (masked_input, consistency, unmasking, plain_upload,
 * noise_exchange) then crash at aggregation R instead of the first one
 * (*round = 0 without ":R"). The key-setup rounds take no ":R".
 * @return 0 or FS_EINVAL.
 */
FS_WUR int fs_agent_fail_at_parse_round(const char *s, enum fs_agent_fail_at *out, uint32_t *round,
                                        struct fs_err *err);

/** Wire name of a fail_at value (NULL for FS_AGENT_FAIL_NONE). */
const char *fs_agent_fail_at_name(enum fs_agent_fail_at f);

struct fs_agent_driver {
    enum fs_agent_step step; /* the next step to perform */
    uint32_t r;              /* current aggregation */
    uint32_t aggregations;   /* how many the job runs (>= 1) */
    enum fs_agent_fail_at fail_at;
    int fed;             /* fedsvd/fedpca: exponent rounds, "factorizing" */
    uint32_t stats;      /* the first `stats` aggregations publish their sum (fedpca) */
    int power;           /* enum fs_agent_power: a power-method job */
    uint32_t exchanges;  /* fedpower-utility: the first `exchanges` aggregations exchange noise */
    uint32_t fail_round; /* the aggregation a per-aggregation fail_at stops at */
    int replay;          /* resuming after a restart: see fs_agent_driver_resume */
    int all_inputs;      /* no consistency round: SURVIVORS, then UNMASK */
};

/* Kinds of power-method job (fs_agent_driver_init_power). */
enum fs_agent_power {
    FS_AGENT_POWER_NONE = 0,
    FS_AGENT_POWER_PLAIN = 1,  /* fedpower: plain uploads */
    FS_AGENT_POWER_SECAGG = 2, /* fedpower-private, dp-ppm: secure aggregation */
    FS_AGENT_POWER_UTILITY = 3 /* fedpower-utility: secure aggregation + noise exchange */
};

enum fs_agent_act {
    FS_AGENT_WAIT = 0, /* poll again later */
    FS_AGENT_DO,       /* perform `step` for aggregation `r`, then call fs_agent_driver_done */
    FS_AGENT_CRASH,    /* fail_at reached: stop sending anything, as if crashed */
    FS_AGENT_FAIL,     /* the participation has failed: `reason` */
    FS_AGENT_FINISH    /* everything done */
};

struct fs_agent_action {
    enum fs_agent_act act;
    enum fs_agent_step step;
    uint32_t r;
    int local; /* replaying a step the job has left: rebuild state, send nothing */
    char reason[FS_ERR_MSG_MAX];
};

/**
 * Start a driver. @param aggregations 1..FS_SECAGG_MAX_AGGREGATIONS.
 * @return 0 or FS_EINVAL.
 */
FS_WUR int fs_agent_driver_init(struct fs_agent_driver *d, uint32_t aggregations,
                                enum fs_agent_fail_at fail_at, struct fs_err *err);

/**
 * Start a driver for a fedsvd/fedpca job: each aggregation opens with the
 * exponents round, and the first `stats` (< aggregations) are statistics
 * rounds whose sum the party fetches. @return 0 or FS_EINVAL.
 */
FS_WUR int fs_agent_driver_init_fed(struct fs_agent_driver *d, uint32_t aggregations,
                                    uint32_t stats, enum fs_agent_fail_at fail_at,
                                    struct fs_err *err);

/**
 * Start a driver for a power-method job of `aggregations` rounds (syncs, plus
 * the Rayleigh upload), the first `exchanges` (utility only, <= aggregations)
 * followed by a noise exchange. fail_round: see fs_agent_fail_at_parse_round.
 * @return 0 or FS_EINVAL.
 */
FS_WUR int fs_agent_driver_init_power(struct fs_agent_driver *d, enum fs_agent_power kind,
                                      uint32_t aggregations, uint32_t exchanges,
                                      enum fs_agent_fail_at fail_at, uint32_t fail_round,
                                      struct fs_err *err);

/**
 * The job's aggregations need every active party's input (fedsvd/fedpca or a
 * secure-aggregation power method without allow_dropouts): no consistency
 * round. Call after init.
 */
void fs_agent_driver_set_all_inputs(struct fs_agent_driver *d, int on);

/**
 * Decide what to do given the latest job status. May advance the driver
 * past rounds the job has left without needing this party (late
 * consistency/unmask messages). Never fails: the outcome is in *out.
 */
void fs_agent_driver_next(struct fs_agent_driver *d, const struct fs_agent_job_view *job,
                          struct fs_agent_action *out);

/**
 * Resuming after a restart: the agent rebuilds its state by performing every
 * step again from the first. A step whose round the job has already left is
 * answered FS_AGENT_DO with `local` set (recompute the message or fetch what
 * the server keeps, but send nothing: it was sent, or the job went on
 * without it), never failed or skipped; fail_at never fires on those. The
 * first step whose round is current or ahead ends the replay, and from there
 * on the driver decides as usual (a message of the current round is sent
 * again: the server answers an identical repeat as the first time). When
 * the job is done, a secure-sum or power-method party goes straight to the
 * result.
 */
void fs_agent_driver_resume(struct fs_agent_driver *d);

/** The step last returned with FS_AGENT_DO completed: move to the next one. */
void fs_agent_driver_done(struct fs_agent_driver *d);

/**
 * The participation phase to report for the driver's position:
 * "advertise_keys", "share_keys", "exponents", "masked_input", "consistency",
 * "unmasking", "statistics", "plain_upload", "noise_exchange", "result" or
 * "done".
 */
const char *fs_agent_driver_phase(const struct fs_agent_driver *d);

/**
 * Progress in [0, 1] for reporting: key setup, then each aggregation's
 * upload (weighted by chunks_done / chunks_total of the current one, the
 * bulk of the work), its last rounds, and the result download.
 */
double fs_agent_driver_progress(const struct fs_agent_driver *d, uint64_t chunks_done,
                                uint64_t chunks_total);

/**
 * The largest binary exponent of the data: e with max|x| < 2^e (frexp), for
 * the R0 advert's max_abs_exp. @return 1 and *e when some x != 0, 0 when the
 * data is all zeros (max_abs_exp null), -1 if a value is not finite.
 */
int fs_agent_max_abs_exp(const double *x, size_t n, int *e);

#endif
