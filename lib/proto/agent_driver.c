#include "agent_driver.h"

#include "secagg.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const g_jphase_names[] = {[FS_AGENT_J_UNKNOWN] = "unknown",
                                             [FS_AGENT_J_WAITING] = "waiting_for_parties",
                                             [FS_AGENT_J_SHARE_KEYS] = "share_keys",
                                             [FS_AGENT_J_MASKED] = "masked_input",
                                             [FS_AGENT_J_CONSISTENCY] = "consistency",
                                             [FS_AGENT_J_UNMASKING] = "unmasking",
                                             [FS_AGENT_J_DONE] = "done",
                                             [FS_AGENT_J_FAILED] = "failed",
                                             [FS_AGENT_J_EXPONENTS] = "exponents",
                                             [FS_AGENT_J_FACTORIZING] = "factorizing",
                                             [FS_AGENT_J_NOISE_EXCHANGE] = "noise_exchange",
                                             [FS_AGENT_J_PLAIN_UPLOAD] = "plain_upload"};

static const char *const g_step_names[] = {
    [FS_AGENT_S_ADVERTISE] = "advertise",   [FS_AGENT_S_ROSTER] = "roster",
    [FS_AGENT_S_SHARE] = "share",           [FS_AGENT_S_RECEIVE] = "receive",
    [FS_AGENT_S_BEGIN] = "begin",           [FS_AGENT_S_UPLOAD] = "upload",
    [FS_AGENT_S_SURVIVORS] = "survivors",   [FS_AGENT_S_CONSISTENCY] = "consistency",
    [FS_AGENT_S_SIGNATURES] = "signatures", [FS_AGENT_S_UNMASK] = "unmask",
    [FS_AGENT_S_RESULT] = "result",         [FS_AGENT_S_FINISHED] = "finished",
    [FS_AGENT_S_EXPONENT] = "exponent",     [FS_AGENT_S_EXPONENTS] = "exponents",
    [FS_AGENT_S_STATS] = "stats",           [FS_AGENT_S_PLAIN_UPLOAD] = "plain_upload",
    [FS_AGENT_S_EXCHANGE] = "exchange"};

static const char *const g_fail_at_names[] = {[FS_AGENT_FAIL_NONE] = NULL,
                                              [FS_AGENT_FAIL_ADVERTISE_KEYS] = "advertise_keys",
                                              [FS_AGENT_FAIL_SHARE_KEYS] = "share_keys",
                                              [FS_AGENT_FAIL_MASKED_INPUT] = "masked_input",
                                              [FS_AGENT_FAIL_CONSISTENCY] = "consistency",
                                              [FS_AGENT_FAIL_UNMASKING] = "unmasking",
                                              [FS_AGENT_FAIL_PLAIN_UPLOAD] = "plain_upload",
                                              [FS_AGENT_FAIL_NOISE_EXCHANGE] = "noise_exchange"};

enum fs_agent_jphase fs_agent_jphase_parse(const char *s)
{
    if (s == NULL) {
        return FS_AGENT_J_UNKNOWN;
    }
    for (size_t i = 1; i < sizeof g_jphase_names / sizeof g_jphase_names[0]; i++) {
        if (strcmp(s, g_jphase_names[i]) == 0) {
            return (enum fs_agent_jphase)i;
        }
    }
    return FS_AGENT_J_UNKNOWN;
}

const char *fs_agent_jphase_name(enum fs_agent_jphase p)
{
    if ((unsigned)p >= sizeof g_jphase_names / sizeof g_jphase_names[0]) {
        return "unknown";
    }
    return g_jphase_names[p];
}

const char *fs_agent_step_name(enum fs_agent_step s)
{
    if ((unsigned)s >= sizeof g_step_names / sizeof g_step_names[0]) {
        return "unknown";
    }
    return g_step_names[s];
}

int fs_agent_fail_at_parse(const char *s, enum fs_agent_fail_at *out, struct fs_err *err)
{
    for (size_t i = 1; s != NULL && i < sizeof g_fail_at_names / sizeof g_fail_at_names[0]; i++) {
        if (strcmp(s, g_fail_at_names[i]) == 0) {
            *out = (enum fs_agent_fail_at)i;
            return 0;
        }
    }
    return fs_err_set(err, FS_EINVAL,
                      "fail_at: expected advertise_keys, share_keys, masked_input, consistency, "
                      "unmasking, plain_upload or noise_exchange (the last five optionally "
                      "followed by :R, an aggregation index)");
}

int fs_agent_fail_at_parse_round(const char *s, enum fs_agent_fail_at *out, uint32_t *round,
                                 struct fs_err *err)
{
    char name[32];
    const char *colon = s != NULL ? strchr(s, ':') : NULL;
    unsigned long v = 0;
    size_t n;
    int rc;

    *round = 0;
    if (colon == NULL) {
        return fs_agent_fail_at_parse(s, out, err);
    }
    n = (size_t)(colon - s);
    if (n >= sizeof name) {
        return fs_agent_fail_at_parse(NULL, out, err);
    }
    memcpy(name, s, n);
    name[n] = '\0';
    rc = fs_agent_fail_at_parse(name, out, err);
    if (rc != 0) {
        return rc;
    }
    if (*out == FS_AGENT_FAIL_ADVERTISE_KEYS || *out == FS_AGENT_FAIL_SHARE_KEYS) {
        return fs_err_set(err, FS_EINVAL, "fail_at: %s happens once per job: no :R", name);
    }
    colon++;
    if (colon[0] == '\0' || strlen(colon) > 5) {
        return fs_err_set(err, FS_EINVAL, "fail_at: expected NAME:R with R in 0..99999");
    }
    for (const char *p = colon; *p != '\0'; p++) {
        if (*p < '0' || *p > '9') {
            return fs_err_set(err, FS_EINVAL, "fail_at: expected NAME:R with R in 0..99999");
        }
        v = v * 10 + (unsigned long)(*p - '0');
    }
    *round = (uint32_t)v;
    return 0;
}

const char *fs_agent_fail_at_name(enum fs_agent_fail_at f)
{
    if ((unsigned)f >= sizeof g_fail_at_names / sizeof g_fail_at_names[0]) {
        return NULL;
    }
    return g_fail_at_names[f];
}

int fs_agent_driver_init(struct fs_agent_driver *d, uint32_t aggregations,
                         enum fs_agent_fail_at fail_at, struct fs_err *err)
{
    if (aggregations < 1 || aggregations > FS_SECAGG_MAX_AGGREGATIONS) {
        return fs_err_set(err, FS_EINVAL, "agent: aggregations must be 1..%d, got %u",
                          FS_SECAGG_MAX_AGGREGATIONS, aggregations);
    }
    if ((unsigned)fail_at > FS_AGENT_FAIL_NOISE_EXCHANGE) {
        return fs_err_set(err, FS_EINVAL, "agent: bad fail_at value");
    }
    memset(d, 0, sizeof *d);
    d->step = FS_AGENT_S_ADVERTISE;
    d->aggregations = aggregations;
    d->fail_at = fail_at;
    return 0;
}

int fs_agent_driver_init_fed(struct fs_agent_driver *d, uint32_t aggregations, uint32_t stats,
                             enum fs_agent_fail_at fail_at, struct fs_err *err)
{
    int rc = fs_agent_driver_init(d, aggregations, fail_at, err);

    if (rc != 0) {
        return rc;
    }
    if (stats >= aggregations) {
        return fs_err_set(err, FS_EINVAL, "agent: %u statistics rounds of %u aggregations", stats,
                          aggregations);
    }
    d->fed = 1;
    d->stats = stats;
    return 0;
}

int fs_agent_driver_init_power(struct fs_agent_driver *d, enum fs_agent_power kind,
                               uint32_t aggregations, uint32_t exchanges,
                               enum fs_agent_fail_at fail_at, uint32_t fail_round,
                               struct fs_err *err)
{
    int rc = fs_agent_driver_init(d, aggregations, fail_at, err);

    if (rc != 0) {
        return rc;
    }
    if (kind != FS_AGENT_POWER_PLAIN && kind != FS_AGENT_POWER_SECAGG &&
        kind != FS_AGENT_POWER_UTILITY) {
        return fs_err_set(err, FS_EINVAL, "agent: bad power-method job kind");
    }
    if (exchanges > aggregations || (exchanges > 0 && kind != FS_AGENT_POWER_UTILITY)) {
        return fs_err_set(err, FS_EINVAL,
                          "agent: %u noise exchanges in a job of %u aggregations (utility only)",
                          exchanges, aggregations);
    }
    d->power = (int)kind;
    d->exchanges = exchanges;
    d->fail_round = fail_round;
    return 0;
}

void fs_agent_driver_set_all_inputs(struct fs_agent_driver *d, int on)
{
    d->all_inputs = on != 0;
}

/* Positions on one line: the job's (phase, aggregation) and the place each
 * step needs. Key setup comes first, then five rounds per aggregation
 * (exponents only in fedsvd/fedpca jobs, plain_upload in their place in
 * fedpower jobs, noise_exchange only in fedpower-utility jobs), then
 * factorizing. */
#define POS_DONE UINT64_MAX
#define POS_PER  5

static uint64_t pos_of(const struct fs_agent_driver *d, enum fs_agent_jphase p, uint32_t r)
{
    switch (p) {
    case FS_AGENT_J_WAITING:
        return 1;
    case FS_AGENT_J_SHARE_KEYS:
        return 2;
    case FS_AGENT_J_EXPONENTS:
    case FS_AGENT_J_PLAIN_UPLOAD:
        return 10 + POS_PER * (uint64_t)r;
    case FS_AGENT_J_MASKED:
        return 11 + POS_PER * (uint64_t)r;
    case FS_AGENT_J_CONSISTENCY:
        return 12 + POS_PER * (uint64_t)r;
    case FS_AGENT_J_UNMASKING:
        return 13 + POS_PER * (uint64_t)r;
    case FS_AGENT_J_NOISE_EXCHANGE:
        return 14 + POS_PER * (uint64_t)r;
    case FS_AGENT_J_FACTORIZING:
        return 10 + POS_PER * (uint64_t)d->aggregations;
    case FS_AGENT_J_DONE:
        return POS_DONE;
    default:
        return 0;
    }
}

/* The send step a fail_at value withholds. */
static int crashes_here(const struct fs_agent_driver *d)
{
    switch (d->fail_at) {
    case FS_AGENT_FAIL_ADVERTISE_KEYS:
        return d->step == FS_AGENT_S_ADVERTISE;
    case FS_AGENT_FAIL_SHARE_KEYS:
        return d->step == FS_AGENT_S_SHARE;
    case FS_AGENT_FAIL_MASKED_INPUT:
        return d->step == FS_AGENT_S_UPLOAD && d->r == d->fail_round;
    case FS_AGENT_FAIL_CONSISTENCY:
        return d->step == FS_AGENT_S_CONSISTENCY && d->r == d->fail_round;
    case FS_AGENT_FAIL_UNMASKING:
        return d->step == FS_AGENT_S_UNMASK && d->r == d->fail_round;
    case FS_AGENT_FAIL_PLAIN_UPLOAD:
        return d->step == FS_AGENT_S_PLAIN_UPLOAD && d->r == d->fail_round;
    case FS_AGENT_FAIL_NOISE_EXCHANGE:
        return d->step == FS_AGENT_S_EXCHANGE && d->r == d->fail_round;
    default:
        return 0;
    }
}

/* On to the next aggregation, or the result after the last. */
static void next_aggregation(struct fs_agent_driver *d)
{
    if (d->r + 1 < d->aggregations) {
        d->r++;
        d->step = FS_AGENT_S_BEGIN;
    } else {
        d->step = FS_AGENT_S_RESULT;
    }
}

/* After aggregation r's secure sum (done or skipped). */
static void after_aggregation(struct fs_agent_driver *d)
{
    if (d->fed && d->r < d->stats) {
        d->step = FS_AGENT_S_STATS;
    } else if (d->power == FS_AGENT_POWER_UTILITY && d->r < d->exchanges) {
        d->step = FS_AGENT_S_EXCHANGE;
    } else {
        next_aggregation(d);
    }
}

void fs_agent_driver_done(struct fs_agent_driver *d)
{
    switch (d->step) {
    case FS_AGENT_S_UNMASK:
        after_aggregation(d);
        break;
    case FS_AGENT_S_BEGIN:
        d->step = d->fed                             ? FS_AGENT_S_EXPONENT
                  : d->power == FS_AGENT_POWER_PLAIN ? FS_AGENT_S_PLAIN_UPLOAD
                                                     : FS_AGENT_S_UPLOAD;
        break;
    case FS_AGENT_S_PLAIN_UPLOAD:
    case FS_AGENT_S_EXCHANGE:
        next_aggregation(d);
        break;
    case FS_AGENT_S_EXPONENT:
        d->step = FS_AGENT_S_EXPONENTS;
        break;
    case FS_AGENT_S_EXPONENTS:
        d->step = FS_AGENT_S_UPLOAD;
        break;
    case FS_AGENT_S_STATS:
        d->r++;
        d->step = FS_AGENT_S_BEGIN;
        break;
    case FS_AGENT_S_SURVIVORS:
        d->step = d->all_inputs ? FS_AGENT_S_UNMASK : FS_AGENT_S_CONSISTENCY;
        break;
    case FS_AGENT_S_FINISHED:
        break;
    default:
        d->step = (enum fs_agent_step)(d->step + 1);
        break;
    }
}

static void set_act(struct fs_agent_action *out, enum fs_agent_act act,
                    const struct fs_agent_driver *d)
{
    out->act = act;
    out->step = d->step;
    out->r = d->r;
    out->local = 0;
    out->reason[0] = '\0';
}

void fs_agent_driver_resume(struct fs_agent_driver *d)
{
    d->replay = 1;
}

static void late(struct fs_agent_driver *d, const struct fs_agent_job_view *job,
                 struct fs_agent_action *out)
{
    set_act(out, FS_AGENT_FAIL, d);
    if (d->step == FS_AGENT_S_ADVERTISE) {
        snprintf(out->reason, sizeof out->reason,
                 "too late to join: the job is already in phase %s",
                 fs_agent_jphase_name(job->phase));
    } else if (job->phase == FS_AGENT_J_DONE) {
        snprintf(out->reason, sizeof out->reason,
                 "dropped by the server: the job finished without this party's input");
    } else {
        snprintf(out->reason, sizeof out->reason,
                 "dropped by the server: the job moved on to %s (aggregation %u) before this "
                 "party's %s step",
                 fs_agent_jphase_name(job->phase), job->aggregation, fs_agent_step_name(d->step));
    }
}

void fs_agent_driver_next(struct fs_agent_driver *d, const struct fs_agent_job_view *job,
                          struct fs_agent_action *out)
{
    uint64_t pos;
    uint64_t need;
    int exact;

    if (job->failed || job->phase == FS_AGENT_J_FAILED) {
        set_act(out, FS_AGENT_FAIL, d);
        snprintf(out->reason, sizeof out->reason, "job failed: %s",
                 job->error != NULL && job->error[0] != '\0' ? job->error : "no reason given");
        return;
    }
    for (;;) {
        if (d->step == FS_AGENT_S_FINISHED) {
            set_act(out, FS_AGENT_FINISH, d);
            return;
        }
        pos = pos_of(d, job->phase, job->aggregation);
        if (pos == 0) {
            set_act(out, FS_AGENT_WAIT, d); /* a phase we do not know: wait */
            return;
        }
        if (d->replay && pos == POS_DONE && !d->fed && d->step != FS_AGENT_S_RESULT) {
            /* nothing of the protocol state is needed for the result */
            d->replay = 0;
            d->r = d->aggregations - 1;
            d->step = FS_AGENT_S_RESULT;
            continue;
        }
        exact = 1;
        switch (d->step) {
        case FS_AGENT_S_ADVERTISE:
            need = 1;
            break;
        case FS_AGENT_S_ROSTER:
        case FS_AGENT_S_SHARE:
            need = 2;
            break;
        case FS_AGENT_S_RECEIVE:
            need = 2;
            exact = 0;
            break;
        case FS_AGENT_S_BEGIN:
            need = pos_of(d,
                          d->fed                             ? FS_AGENT_J_EXPONENTS
                          : d->power == FS_AGENT_POWER_PLAIN ? FS_AGENT_J_PLAIN_UPLOAD
                                                             : FS_AGENT_J_MASKED,
                          d->r);
            break;
        case FS_AGENT_S_PLAIN_UPLOAD:
            need = pos_of(d, FS_AGENT_J_PLAIN_UPLOAD, d->r);
            break;
        case FS_AGENT_S_EXCHANGE:
            need = pos_of(d, FS_AGENT_J_NOISE_EXCHANGE, d->r);
            break;
        case FS_AGENT_S_EXPONENT:
            need = pos_of(d, FS_AGENT_J_EXPONENTS, d->r);
            break;
        case FS_AGENT_S_EXPONENTS:
            /* once the exponents round closed; it must still be masked input */
            if (pos <= pos_of(d, FS_AGENT_J_EXPONENTS, d->r)) {
                set_act(out, FS_AGENT_WAIT, d);
                return;
            }
            need = pos_of(d, FS_AGENT_J_MASKED, d->r);
            break;
        case FS_AGENT_S_STATS:
            need = pos_of(d, FS_AGENT_J_UNMASKING, d->r);
            exact = 0;
            break;
        case FS_AGENT_S_UPLOAD:
            need = pos_of(d, FS_AGENT_J_MASKED, d->r);
            break;
        case FS_AGENT_S_SURVIVORS:
            need = pos_of(d, FS_AGENT_J_MASKED, d->r);
            exact = 0;
            break;
        case FS_AGENT_S_CONSISTENCY:
            need = pos_of(d, FS_AGENT_J_CONSISTENCY, d->r);
            break;
        case FS_AGENT_S_SIGNATURES:
            need = pos_of(d, FS_AGENT_J_CONSISTENCY, d->r);
            exact = 0;
            break;
        case FS_AGENT_S_UNMASK:
            need = pos_of(d, FS_AGENT_J_UNMASKING, d->r);
            break;
        default: /* RESULT */
            need = POS_DONE;
            break;
        }
        if (d->replay && exact && pos > need) {
            set_act(out, FS_AGENT_DO, d);
            out->local = 1;
            return;
        }
        if (d->replay && exact) {
            d->replay = 0; /* caught up: this step's round is current or ahead */
        }
        if (!exact) {
            /* a "GET once the round closed" step */
            if (pos <= need) {
                set_act(out, FS_AGENT_WAIT, d);
            } else if (pos == POS_DONE && d->step == FS_AGENT_S_RECEIVE && !d->replay) {
                late(d, job, out);
            } else {
                set_act(out, FS_AGENT_DO, d);
                out->local = d->replay;
            }
            return;
        }
        if (pos < need) {
            set_act(out, FS_AGENT_WAIT, d);
            return;
        }
        if (pos > need) {
            if (d->step == FS_AGENT_S_CONSISTENCY && pos == pos_of(d, FS_AGENT_J_UNMASKING, d->r)) {
                /* The round may have closed with our signature (the answer
                 * lost): the signatures of aggregation r say whether this
                 * party is to unmask. */
                d->step = FS_AGENT_S_SIGNATURES;
                continue;
            }
            if (d->step == FS_AGENT_S_CONSISTENCY || d->step == FS_AGENT_S_UNMASK) {
                /* Our input is in the sum already; the server went on without
                 * this message. Skip to what comes after this aggregation. */
                after_aggregation(d);
                continue;
            }
            if (d->step == FS_AGENT_S_EXCHANGE) {
                /* the exchange closed without our response: our noise stays
                 * in the aggregate, our input too */
                next_aggregation(d);
                continue;
            }
            late(d, job, out);
            return;
        }
        if (crashes_here(d)) {
            set_act(out, FS_AGENT_CRASH, d);
            snprintf(out->reason, sizeof out->reason,
                     "fail_at %s: stopped before sending this round's message (testing aid)",
                     fs_agent_fail_at_name(d->fail_at));
            return;
        }
        set_act(out, FS_AGENT_DO, d);
        return;
    }
}

const char *fs_agent_driver_phase(const struct fs_agent_driver *d)
{
    switch (d->step) {
    case FS_AGENT_S_ADVERTISE:
        return "advertise_keys";
    case FS_AGENT_S_ROSTER:
    case FS_AGENT_S_SHARE:
    case FS_AGENT_S_RECEIVE:
        return "share_keys";
    case FS_AGENT_S_EXPONENT:
    case FS_AGENT_S_EXPONENTS:
        return "exponents";
    case FS_AGENT_S_STATS:
        return "statistics";
    case FS_AGENT_S_BEGIN:
        return d->fed                             ? "exponents"
               : d->power == FS_AGENT_POWER_PLAIN ? "plain_upload"
                                                  : "masked_input";
    case FS_AGENT_S_PLAIN_UPLOAD:
        return "plain_upload";
    case FS_AGENT_S_EXCHANGE:
        return "noise_exchange";
    case FS_AGENT_S_UPLOAD:
        return "masked_input";
    case FS_AGENT_S_SURVIVORS:
        return d->all_inputs ? "unmasking" : "consistency";
    case FS_AGENT_S_CONSISTENCY:
        return "consistency";
    case FS_AGENT_S_SIGNATURES:
    case FS_AGENT_S_UNMASK:
        return "unmasking";
    case FS_AGENT_S_RESULT:
        return "result";
    default:
        return "done";
    }
}

double fs_agent_driver_progress(const struct fs_agent_driver *d, uint64_t chunks_done,
                                uint64_t chunks_total)
{
    static const double setup = 0.08; /* R0, R1 */
    static const double tail = 0.04;  /* result download */
    double per = (1.0 - setup - tail) / (double)(d->aggregations > 0 ? d->aggregations : 1);
    double base = setup + per * (double)d->r;
    double within;

    switch (d->step) {
    case FS_AGENT_S_ADVERTISE:
        return 0.0;
    case FS_AGENT_S_ROSTER:
        return 0.02;
    case FS_AGENT_S_SHARE:
        return 0.04;
    case FS_AGENT_S_RECEIVE:
        return 0.06;
    case FS_AGENT_S_BEGIN:
        within = 0.0;
        break;
    case FS_AGENT_S_EXPONENT:
        within = 0.01;
        break;
    case FS_AGENT_S_EXPONENTS:
        within = 0.02;
        break;
    case FS_AGENT_S_STATS:
    case FS_AGENT_S_EXCHANGE:
        within = 0.99;
        break;
    case FS_AGENT_S_PLAIN_UPLOAD:
        within = 0.5;
        break;
    case FS_AGENT_S_UPLOAD:
        within = chunks_total > 0 && chunks_done <= chunks_total
                     ? 0.85 * (double)chunks_done / (double)chunks_total
                     : 0.0;
        break;
    case FS_AGENT_S_SURVIVORS:
        within = 0.85;
        break;
    case FS_AGENT_S_CONSISTENCY:
        within = 0.9;
        break;
    case FS_AGENT_S_SIGNATURES:
        within = 0.93;
        break;
    case FS_AGENT_S_UNMASK:
        within = 0.96;
        break;
    case FS_AGENT_S_RESULT:
        return 1.0 - tail;
    default:
        return 1.0;
    }
    return base + per * within;
}

int fs_agent_max_abs_exp(const double *x, size_t n, int *e)
{
    double m = 0.0;
    int ex = 0;

    for (size_t i = 0; i < n; i++) {
        double a = fabs(x[i]);
        if (!isfinite(a)) {
            return -1;
        }
        if (a > m) {
            m = a;
        }
    }
    if (m == 0.0) {
        return 0;
    }
    (void)frexp(m, &ex); /* m = f * 2^ex with 0.5 <= f < 1, so m < 2^ex */
    *e = ex;
    return 1;
}
