/* The aggregation server's job state machine: see jobsm.h. */
#include "jobsm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../crypto/ct.h"

static const char *const CLOSE_EVENT[] = {"close_adv",    "close_shares",      "close_exp",
                                          "close_masked", "close_consistency", "close_unmask"};

/* ------------------------------------------------------------ the state */

int fs_jobsm_init(struct fs_jobsm *s, const struct fs_jobsm_config *cfg, double at,
                  struct fs_err *err)
{
    size_t n1 = (size_t)cfg->parties + 1;

    memset(s, 0, sizeof *s);
    s->cfg = *cfg;
    s->fed = fs_algo_is_fedsvd(cfg->algo);
    s->power = fs_algo_is_power(cfg->algo);
    s->plain = cfg->algo == FS_ALGO_FEDPOWER;
    s->all_inputs = fs_jobsm_all_inputs(cfg);
    s->joined = calloc(n1, 1);
    s->shared = calloc(n1, 1);
    s->dropped = calloc(n1, 1);
    s->in_round = calloc(n1, 1);
    s->sent = calloc(n1, 1);
    s->active = calloc(n1, 1);
    s->has_exp = calloc(n1, 1);
    s->exp = calloc(n1, sizeof *s->exp);
    s->sealed = calloc(n1, sizeof *s->sealed);
    s->has_sealed = calloc(n1, 1);
    s->pubexp = calloc(n1, sizeof *s->pubexp);
    s->has_pubexp = calloc(n1, 1);
    if (s->joined == NULL || s->shared == NULL || s->dropped == NULL || s->in_round == NULL ||
        s->sent == NULL || s->active == NULL || s->has_exp == NULL || s->exp == NULL ||
        s->sealed == NULL || s->has_sealed == NULL || s->pubexp == NULL || s->has_pubexp == NULL) {
        fs_jobsm_clear(s);
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    s->phase = FS_JOB_ADVERTISE;
    s->phase_opened = at;
    memset(s->in_round + 1, 1, cfg->parties);
    return 0;
}

int fs_jobsm_all_inputs(const struct fs_jobsm_config *cfg)
{
    int secagg_job = fs_algo_is_fedsvd(cfg->algo) ||
                     (fs_algo_is_power(cfg->algo) && cfg->algo != FS_ALGO_FEDPOWER);

    return secagg_job && !cfg->allow_dropouts;
}

void fs_jobsm_clear(struct fs_jobsm *s)
{
    free(s->joined);
    free(s->shared);
    free(s->dropped);
    free(s->in_round);
    free(s->sent);
    free(s->active);
    free(s->has_exp);
    free(s->exp);
    free(s->sealed);
    free(s->has_sealed);
    free(s->pubexp);
    free(s->has_pubexp);
    memset(s, 0, sizeof *s);
}

int fs_jobsm_running(const struct fs_jobsm *s)
{
    return s->phase != FS_JOB_DONE && s->phase != FS_JOB_FAILED;
}

int fs_jobsm_secagg_round(enum fs_job_phase ph)
{
    switch (ph) {
    case FS_JOB_ADVERTISE:
        return 0;
    case FS_JOB_SHARE_KEYS:
        return 1;
    case FS_JOB_MASKED_INPUT:
        return 2;
    case FS_JOB_CONSISTENCY:
        return 3;
    case FS_JOB_UNMASKING:
        return 4;
    default:
        return -1;
    }
}

int fs_jobsm_expects(const struct fs_jobsm *s, uint32_t v)
{
    return fs_jobsm_running(s) && !s->finishing && s->in_round[v] && !s->dropped[v];
}

int fs_jobsm_waits_for(const struct fs_jobsm *s, uint32_t v)
{
    return fs_jobsm_expects(s, v) && !s->sent[v];
}

int fs_jobsm_round_complete(const struct fs_jobsm *s)
{
    int any = 0;

    for (uint32_t v = 1; v <= s->cfg.parties; v++) {
        if (s->in_round[v]) {
            any = 1;
            if (!s->sent[v]) {
                return 0;
            }
        }
    }
    return any;
}

uint32_t *fs_jobsm_ids(const struct fs_jobsm *s, const uint8_t *flags, size_t *k)
{
    uint32_t *ids = calloc((size_t)s->cfg.parties + 1, sizeof *ids);

    *k = 0;
    for (uint32_t v = 1; ids != NULL && v <= s->cfg.parties; v++) {
        if (flags[v]) {
            ids[(*k)++] = v;
        }
    }
    return ids;
}

static uint32_t *copy_ids(const uint32_t *set, size_t k)
{
    uint32_t *ids = malloc((k + 1) * sizeof *ids);

    if (ids != NULL && k > 0) {
        memcpy(ids, set, k * sizeof *ids);
    }
    return ids;
}

/* ------------------------------------------------------------ transitions */

int fs_jobsm_fail(struct fs_jobsm *s, const char *reason)
{
    if (!fs_jobsm_running(s)) {
        return 0;
    }
    snprintf(s->error, sizeof s->error, "%s", reason);
    s->phase = FS_JOB_FAILED;
    s->finishing = 0;
    return 1;
}

void fs_jobsm_record_timing(struct fs_jobsm *s, enum fs_job_phase ph, double at)
{
    if ((int)ph < FS_JOB_NTIMED) {
        s->timings[ph] += at - s->phase_opened;
        s->has_timing[ph] = 1;
    }
}

void fs_jobsm_next_round(struct fs_jobsm *s, enum fs_job_phase ph, const uint32_t *set, size_t k,
                         double at, int record)
{
    if (record) {
        fs_jobsm_record_timing(s, s->phase, at);
    }
    memset(s->in_round, 0, (size_t)s->cfg.parties + 1);
    memset(s->sent, 0, (size_t)s->cfg.parties + 1);
    for (size_t i = 0; i < k; i++) {
        s->in_round[set[i]] = 1;
    }
    s->phase = ph;
    s->phase_opened = at;
}

void fs_jobsm_factorizing(struct fs_jobsm *s, double at)
{
    fs_jobsm_record_timing(s, FS_JOB_UNMASKING, at);
    s->phase = FS_JOB_FACTORIZING;
    s->phase_opened = at;
}

void fs_jobsm_done(struct fs_jobsm *s)
{
    s->phase = FS_JOB_DONE;
    s->finishing = 0;
    memset(s->in_round, 0, (size_t)s->cfg.parties + 1);
}

void fs_jobsm_set_finishing(struct fs_jobsm *s, int on)
{
    s->finishing = on;
}

void fs_jobsm_restore_end(struct fs_jobsm *s, int failed, const char *error, uint32_t r)
{
    s->phase = failed ? FS_JOB_FAILED : FS_JOB_DONE;
    snprintf(s->error, sizeof s->error, "%s", error != NULL ? error : "");
    s->r = r < s->cfg.aggregations ? r : s->r;
    s->finishing = 0;
    memset(s->in_round, 0, (size_t)s->cfg.parties + 1);
}

void fs_jobsm_restart(struct fs_jobsm *s)
{
    s->phase = FS_JOB_ADVERTISE;
    s->finishing = 0;
}

void fs_jobsm_restore_party(struct fs_jobsm *s, uint32_t v, int joined, int dropped)
{
    if (v >= 1 && v <= s->cfg.parties) {
        s->joined[v] |= (uint8_t)(joined != 0);
        s->dropped[v] |= (uint8_t)(dropped != 0);
    }
}

void fs_jobsm_restore_timing(struct fs_jobsm *s, enum fs_job_phase t, double seconds)
{
    if ((int)t < FS_JOB_NTIMED) {
        s->timings[t] = seconds;
        s->has_timing[t] = 1;
    }
}

/* ------------------------------------------------------------ checks */

/* Position of (phase, aggregation r) on the job's timeline. */
static uint64_t pos_of(const struct fs_jobsm *s, enum fs_job_phase ph, uint32_t r)
{
    switch (ph) {
    case FS_JOB_ADVERTISE:
    case FS_JOB_SHARE_KEYS:
        return (uint64_t)ph;
    case FS_JOB_EXPONENTS:
    case FS_JOB_MASKED_INPUT:
    case FS_JOB_CONSISTENCY:
    case FS_JOB_UNMASKING:
        return 10 + 5 * (uint64_t)r + (uint64_t)(ph - FS_JOB_EXPONENTS);
    case FS_JOB_PLAIN_UPLOAD: /* plain fedpower: in place of masked input */
        return 10 + 5 * (uint64_t)r + 1;
    case FS_JOB_NOISE_EXCHANGE: /* fedpower-utility: after unmasking */
        return 10 + 5 * (uint64_t)r + 4;
    case FS_JOB_FACTORIZING:
        return 10 + 5 * (uint64_t)s->cfg.aggregations;
    default:
        return UINT64_MAX;
    }
}

enum fs_jobsm_verdict fs_jobsm_check(const struct fs_jobsm *s, enum fs_job_phase want, uint32_t r,
                                     uint32_t party)
{
    uint64_t now = pos_of(s, s->phase, s->r);
    uint64_t need = pos_of(s, want, r);

    if (s->phase == FS_JOB_FAILED) {
        return FS_JOBSM_FAILED;
    }
    if (s->finishing || s->phase == FS_JOB_DONE || now > need) {
        return FS_JOBSM_CLOSED;
    }
    if (now < need) {
        return FS_JOBSM_NOT_YET;
    }
    if (party != 0 && (party > s->cfg.parties || !s->in_round[party])) {
        return FS_JOBSM_NOT_IN_ROUND;
    }
    return FS_JOBSM_OK;
}

int fs_jobsm_repeatable(const struct fs_jobsm *s, enum fs_job_phase want, uint32_t r)
{
    if (s->phase == FS_JOB_FAILED || s->phase == FS_JOB_DONE || s->phase == FS_JOB_FACTORIZING) {
        return 0;
    }
    if (!s->finishing && pos_of(s, s->phase, s->r) <= pos_of(s, want, r)) {
        return 0;
    }
    return want == FS_JOB_ADVERTISE || want == FS_JOB_SHARE_KEYS || r == s->r;
}

int fs_jobsm_secagg_closed(const fs_secagg_server *sa, enum fs_job_phase want)
{
    enum fs_secagg_phase ph = fs_secagg_server_phase(sa);

    switch (want) {
    case FS_JOB_ADVERTISE:
        return ph != FS_SECAGG_ADVERTISE && ph != FS_SECAGG_ABORTED;
    case FS_JOB_SHARE_KEYS:
        return ph != FS_SECAGG_ADVERTISE && ph != FS_SECAGG_SHARE && ph != FS_SECAGG_ABORTED;
    case FS_JOB_MASKED_INPUT:
        return ph == FS_SECAGG_CONSISTENCY || ph == FS_SECAGG_UNMASK || ph == FS_SECAGG_READY;
    case FS_JOB_CONSISTENCY:
        return ph == FS_SECAGG_UNMASK || ph == FS_SECAGG_READY;
    case FS_JOB_UNMASKING:
        return ph == FS_SECAGG_READY;
    default:
        return 1; /* not a secagg round: the caller compares with the job's own record */
    }
}

/* ------------------------------------------------------------ party messages */

static int seen_pubexp(const struct fs_jobsm *s, uint32_t party, int e, int *repeat, char *reason,
                       size_t cap, struct fs_err *err)
{
    if (s->has_pubexp[party]) {
        if (s->pubexp[party] != e) {
            return fs_err_set(err, FS_ECONFLICT,
                              "party %u already reported another public exponent", party);
        }
        *repeat = 1;
        return 0;
    }
    for (uint32_t v = 1; v <= s->cfg.parties; v++) {
        if (s->has_pubexp[v] && s->pubexp[v] != e) {
            snprintf(reason, cap,
                     "parties %u and %u report different public exponents: the relayed sealed "
                     "exponents differ between parties",
                     v, party);
            break;
        }
    }
    return 0;
}

int fs_jobsm_seen(const struct fs_jobsm *s, const struct fs_jobsm_msg *msg, int *repeat,
                  char *reason, size_t cap, struct fs_err *err)
{
    uint32_t p = msg->kind == FS_JOBSM_ADV ? msg->adv->id : msg->party;

    *repeat = 0;
    if (cap > 0) {
        reason[0] = '\0';
    }
    if (p < 1 || p > s->cfg.parties) {
        return fs_err_set(err, FS_EINVAL, "party %u is not in this job", p);
    }
    switch (msg->kind) {
    case FS_JOBSM_ADV:
        *repeat = s->joined[p];
        if (*repeat &&
            (s->has_exp[p] != (uint8_t)msg->has_exp || (msg->has_exp && s->exp[p] != msg->exp))) {
            return fs_err_set(err, FS_ECONFLICT, "party %u already advertised another max_abs_exp",
                              p);
        }
        return 0;
    case FS_JOBSM_SHARES:
        *repeat = s->shared[p];
        return 0;
    case FS_JOBSM_EXP:
        *repeat = s->has_sealed[p];
        if (*repeat && !fs_ct_eq(s->sealed[p], msg->bytes, FS_FEDSVD_SEALED_EXP_LEN)) {
            return fs_err_set(err, FS_ECONFLICT,
                              "party %u already sent another sealed exponent for aggregation %u", p,
                              s->r);
        }
        return 0;
    case FS_JOBSM_PUBEXP:
        return seen_pubexp(s, p, msg->exp, repeat, reason, cap, err);
    case FS_JOBSM_SIG:
    case FS_JOBSM_REVEALS:
        *repeat = s->sent[p];
        return 0;
    default:
        return 0; /* masked chunks: the secure aggregation recognises a repeat */
    }
}

int fs_jobsm_secagg_add(fs_secagg_server *sa, const struct fs_jobsm_msg *msg, int *is_new,
                        struct fs_err *err)
{
    int rc = 0;

    *is_new = 1;
    switch (msg->kind) {
    case FS_JOBSM_ADV:
        rc = fs_secagg_server_check_pin(sa, msg->adv, err);
        if (rc != 0) {
            return FS_EAUTH; /* a key that is not the job's pin for this party */
        }
        rc = fs_secagg_server_add_adv(sa, msg->adv, err);
        return rc == FS_EAUTH ? fs_err_set(err, FS_EINVAL, "%s", err->msg) : rc;
    case FS_JOBSM_SHARES:
        return fs_secagg_server_add_shares(sa, msg->party, msg->cts, msg->k, err);
    case FS_JOBSM_MASKED:
        return fs_secagg_server_add_masked_ex(sa, msg->party, msg->idx, msg->words, msg->m, is_new,
                                              err);
    case FS_JOBSM_SIG:
        rc = fs_secagg_server_add_consistency(sa, msg->party, msg->bytes, err);
        return rc == FS_EAUTH ? fs_err_set(err, FS_EINVAL, "%s", err->msg) : rc;
    case FS_JOBSM_REVEALS:
        return fs_secagg_server_add_reveals(sa, msg->party, msg->rv, msg->k, err);
    default:
        return 0;
    }
}

void fs_jobsm_accepted(struct fs_jobsm *s, const fs_secagg_server *sa,
                       const struct fs_jobsm_msg *msg)
{
    uint32_t p = msg->kind == FS_JOBSM_ADV ? msg->adv->id : msg->party;

    switch (msg->kind) {
    case FS_JOBSM_ADV:
        s->joined[p] = 1;
        s->has_exp[p] = (uint8_t)msg->has_exp;
        s->exp[p] = msg->exp;
        break;
    case FS_JOBSM_SHARES:
        s->shared[p] = 1;
        break;
    case FS_JOBSM_EXP:
        memcpy(s->sealed[p], msg->bytes, FS_FEDSVD_SEALED_EXP_LEN);
        s->has_sealed[p] = 1;
        break;
    case FS_JOBSM_PUBEXP:
        s->pubexp[p] = msg->exp;
        s->has_pubexp[p] = 1;
        return; /* not the round's message: the upload is */
    case FS_JOBSM_MASKED:
        if (!fs_secagg_server_has_masked(sa, p)) {
            return; /* the upload is not complete yet */
        }
        break;
    default:
        break;
    }
    s->sent[p] = 1;
}

int fs_jobsm_apply(struct fs_jobsm *s, fs_secagg_server *sa, const struct fs_jobsm_msg *msg,
                   int *is_new, char *reason, size_t cap, struct fs_err *err)
{
    int repeat = 0;
    int chunk_new = 1;
    int rc = fs_jobsm_seen(s, msg, &repeat, reason, cap, err);

    *is_new = 0;
    if (rc != 0 || (cap > 0 && reason[0] != '\0')) {
        return rc;
    }
    rc = fs_jobsm_secagg_add(sa, msg, &chunk_new, err);
    if (rc != 0) {
        return rc;
    }
    *is_new = msg->kind == FS_JOBSM_MASKED ? chunk_new : !repeat;
    if (*is_new) {
        fs_jobsm_accepted(s, sa, msg);
    }
    return 0;
}

int fs_jobsm_closed_repeat(const struct fs_jobsm *s, fs_secagg_server *sa,
                           const struct fs_jobsm_msg *msg, struct fs_err *err)
{
    uint32_t p = msg->kind == FS_JOBSM_ADV ? msg->adv->id : msg->party;
    int same = 0;

    if (p < 1 || p > s->cfg.parties) {
        return fs_err_set(err, FS_ECONFLICT, "party %u is not in this job", p);
    }
    switch (msg->kind) {
    case FS_JOBSM_ADV:
        same = s->joined[p] && s->has_exp[p] == (uint8_t)msg->has_exp &&
               (!msg->has_exp || s->exp[p] == msg->exp);
        return same ? fs_secagg_server_add_adv(sa, msg->adv, err)
                    : fs_err_set(err, FS_ECONFLICT, "not a repeat");
    case FS_JOBSM_EXP:
        same = s->has_sealed[p] && fs_ct_eq(s->sealed[p], msg->bytes, FS_FEDSVD_SEALED_EXP_LEN);
        break;
    case FS_JOBSM_PUBEXP:
        same = s->has_pubexp[p] && s->pubexp[p] == msg->exp;
        break;
    case FS_JOBSM_SHARES:
        return fs_secagg_server_add_shares(sa, p, msg->cts, msg->k, err);
    case FS_JOBSM_MASKED:
        return fs_secagg_server_add_masked(sa, p, msg->idx, msg->words, msg->m, err);
    case FS_JOBSM_SIG:
        return fs_secagg_server_add_consistency(sa, p, msg->bytes, err);
    case FS_JOBSM_REVEALS:
        return fs_secagg_server_add_reveals(sa, p, msg->rv, msg->k, err);
    default:
        break;
    }
    return same ? 0 : fs_err_set(err, FS_ECONFLICT, "not a repeat");
}

/* ------------------------------------------------------------ aggregations */

void fs_jobsm_max_exp(const struct fs_jobsm *s, const uint32_t *active, size_t k, int *have, int *e)
{
    *have = 0;
    *e = 0;
    for (size_t i = 0; i < k; i++) {
        uint32_t v = active[i];
        if (s->has_exp[v] && (!*have || s->exp[v] > *e)) {
            *e = s->exp[v];
            *have = 1;
        }
    }
}

int fs_jobsm_begin(const struct fs_jobsm *s, fs_secagg_server *sa, uint32_t r, uint64_t len,
                   uint32_t **active, size_t *k, struct fs_err *err)
{
    *active = NULL;
    *k = 0;
    if (s->plain) {
        *active = fs_jobsm_ids(s, s->active, k);
    } else {
        const uint32_t *set;
        int rc = fs_secagg_server_begin(sa, r, len, err);
        if (rc != 0) {
            return rc;
        }
        set = fs_secagg_server_set(sa, 0, k);
        *active = copy_ids(set, *k);
    }
    return *active == NULL ? fs_err_set(err, FS_ENOMEM, "out of memory") : 0;
}

void fs_jobsm_opened(struct fs_jobsm *s, uint32_t r, const uint32_t *active, size_t k, double at)
{
    enum fs_job_phase ph = s->fed     ? FS_JOB_EXPONENTS
                           : s->plain ? FS_JOB_PLAIN_UPLOAD
                                      : FS_JOB_MASKED_INPUT;

    s->r = r;
    if (s->fed) {
        memset(s->has_sealed, 0, (size_t)s->cfg.parties + 1);
        memset(s->has_pubexp, 0, (size_t)s->cfg.parties + 1);
    }
    fs_jobsm_next_round(s, ph, active, k, at, 0);
}

int fs_jobsm_agreed_exponent(const struct fs_jobsm *s, const uint32_t *u3, size_t n3, int *e,
                             struct fs_err *err)
{
    int have = 0;

    for (size_t i = 0; i < n3; i++) {
        uint32_t v = u3[i];
        if (v < 1 || v > s->cfg.parties || !s->has_pubexp[v]) {
            return fs_err_set(err, FS_ESTATE, "party %u uploaded without reporting the exponent",
                              v);
        }
        if (have && s->pubexp[v] != *e) {
            return fs_err_set(err, FS_ESTATE, "the parties report different public exponents");
        }
        *e = s->pubexp[v];
        have = 1;
    }
    return have ? 0 : fs_err_set(err, FS_ESTATE, "no contributor reported the public exponent");
}

void fs_jobsm_set_active(struct fs_jobsm *s, const uint32_t *ids, size_t k)
{
    memset(s->active, 0, (size_t)s->cfg.parties + 1);
    for (size_t i = 0; i < k; i++) {
        s->active[ids[i]] = 1;
    }
}

/* ------------------------------------------------------------ closing a round */

int fs_jobsm_close_secagg(const struct fs_jobsm *s, fs_secagg_server *sa, struct fs_err *err)
{
    switch (s->phase) {
    case FS_JOB_ADVERTISE:
        return fs_secagg_server_close_adv(sa, err);
    case FS_JOB_SHARE_KEYS:
        return fs_secagg_server_close_shares(sa, err);
    case FS_JOB_MASKED_INPUT:
        return fs_secagg_server_close_masked(sa, err);
    case FS_JOB_CONSISTENCY:
        return fs_secagg_server_close_consistency(sa, err);
    default:
        return 0;
    }
}

/* Parties expected in the open round that did not send are dropped. */
static void mark_dropped(struct fs_jobsm *s, struct fs_jobsm_close *c)
{
    for (uint32_t v = 1; v <= s->cfg.parties; v++) {
        if (s->in_round[v] && !s->sent[v] && !s->dropped[v]) {
            s->dropped[v] = 1;
            if (c->drops == 0) {
                c->first_drop = v;
            }
            c->drops++;
        }
    }
}

int fs_jobsm_close(struct fs_jobsm *s, struct fs_jobsm_close *c, struct fs_err *err)
{
    memset(c, 0, sizeof *c);
    c->phase = s->phase;
    if (s->phase <= FS_JOB_UNMASKING) {
        c->event = CLOSE_EVENT[s->phase];
        mark_dropped(s, c);
        return 0;
    }
    if (s->phase != FS_JOB_PLAIN_UPLOAD && s->phase != FS_JOB_NOISE_EXCHANGE) {
        return 0; /* no round is open */
    }
    if (s->phase == FS_JOB_PLAIN_UPLOAD) {
        c->event = "close_plain";
        mark_dropped(s, c);
    } else {
        c->event = "close_exchange";
    }
    c->ids = fs_jobsm_ids(s, s->sent, &c->k);
    return c->ids == NULL ? fs_err_set(err, FS_ENOMEM, "out of memory") : 0;
}

void fs_jobsm_close_clear(struct fs_jobsm_close *c)
{
    free(c->ids);
    memset(c, 0, sizeof *c);
}

int fs_jobsm_drop_fails(const struct fs_jobsm *s, enum fs_job_phase ph)
{
    if (s->cfg.allow_dropouts) {
        return 0;
    }
    return (s->fed && ph <= FS_JOB_MASKED_INPUT) || s->power;
}

/* Open the next secagg round with a set of the secure aggregation's (3: U3, 4: U4). */
static int next_from_secagg(struct fs_jobsm *s, const fs_secagg_server *sa, int which,
                            enum fs_job_phase ph, double at, struct fs_jobsm_step *st,
                            struct fs_err *err)
{
    const uint32_t *set = fs_secagg_server_set(sa, which, &st->k);

    st->set = copy_ids(set, st->k);
    if (st->set == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    fs_jobsm_next_round(s, ph, st->set, st->k, at, 1);
    return 0;
}

/* The next round expects the parties flagged in flags. */
static int next_from_flags(struct fs_jobsm *s, const uint8_t *flags, enum fs_job_phase ph,
                           double at, struct fs_jobsm_step *st, struct fs_err *err)
{
    st->set = fs_jobsm_ids(s, flags, &st->k);
    if (st->set == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    if (ph == FS_JOB_MASKED_INPUT && s->power) {
        fs_jobsm_set_active(s, st->set, st->k);
    }
    fs_jobsm_next_round(s, ph, st->set, st->k, at, 1);
    return 0;
}

/* Power rounds: the answers are in; the worker takes them. */
static int close_power(struct fs_jobsm *s, const struct fs_jobsm_close *c, double at,
                       struct fs_jobsm_step *st)
{
    if (c->phase == FS_JOB_PLAIN_UPLOAD && c->k < s->cfg.threshold) {
        st->action = FS_JOBSM_FAIL;
        snprintf(st->reason, sizeof st->reason, "%zu plain uploads in round %u, threshold %u", c->k,
                 s->r, s->cfg.threshold);
        return 0;
    }
    fs_jobsm_record_timing(s, c->phase, at);
    s->phase_opened = at;
    if (c->phase == FS_JOB_PLAIN_UPLOAD) {
        fs_jobsm_set_active(s, c->ids, c->k);
    }
    st->action = FS_JOBSM_WORK;
    return 0;
}

int fs_jobsm_advance(struct fs_jobsm *s, const fs_secagg_server *sa, const struct fs_jobsm_close *c,
                     double at, struct fs_jobsm_step *st, struct fs_err *err)
{
    memset(st, 0, sizeof *st);
    if (c->drops > 0 && fs_jobsm_drop_fails(s, c->phase)) {
        st->action = FS_JOBSM_FAIL;
        st->no_dropouts = 1;
        return 0;
    }
    switch (c->phase) {
    case FS_JOB_ADVERTISE:
        return next_from_flags(s, s->joined, FS_JOB_SHARE_KEYS, at, st, err);
    case FS_JOB_SHARE_KEYS:
        /* The service begins aggregation 0 next, outside the status lock:
         * meanwhile the job shows the phase that begin opens, never one
         * past it. A fedsvd/fedpca job shown in masked input there would
         * tell a party polling then that its exponents round is over
         * (fs_agent_driver_next: "dropped by the server"). */
        st->action = FS_JOBSM_BEGIN;
        return next_from_flags(s, s->shared, s->fed ? FS_JOB_EXPONENTS : FS_JOB_MASKED_INPUT, at,
                               st, err);
    case FS_JOB_EXPONENTS: {
        size_t k = 0;
        uint32_t *ids = fs_jobsm_ids(s, s->has_sealed, &k);
        free(ids);
        if (ids == NULL) {
            return fs_err_set(err, FS_ENOMEM, "out of memory");
        }
        if (k < s->cfg.threshold) {
            st->action = FS_JOBSM_FAIL;
            snprintf(st->reason, sizeof st->reason,
                     "%zu sealed exponents in aggregation %u, threshold %u", k, s->r,
                     s->cfg.threshold);
            return 0;
        }
        return next_from_flags(s, s->has_sealed, FS_JOB_MASKED_INPUT, at, st, err);
    }
    case FS_JOB_MASKED_INPUT:
        /* all-inputs: the secure aggregation opened R4 with U4 = U3 */
        return s->all_inputs ? next_from_secagg(s, sa, 4, FS_JOB_UNMASKING, at, st, err)
                             : next_from_secagg(s, sa, 3, FS_JOB_CONSISTENCY, at, st, err);
    case FS_JOB_CONSISTENCY:
        return next_from_secagg(s, sa, 4, FS_JOB_UNMASKING, at, st, err);
    case FS_JOB_UNMASKING:
        st->action = FS_JOBSM_WORK;
        return 0;
    case FS_JOB_PLAIN_UPLOAD:
    case FS_JOB_NOISE_EXCHANGE:
        return close_power(s, c, at, st);
    default:
        return 0;
    }
}

void fs_jobsm_step_clear(struct fs_jobsm_step *st)
{
    free(st->set);
    memset(st, 0, sizeof *st);
}

/* ------------------------------------------------------------ replay */

static const char *const EVENT_NAME[] = {"adv", "shares",  "exp",   "pubexp", "masked",
                                         "sig", "reveals", "begin", "close_", "done"};

int fs_jobsm_event_parse(const char *kind, enum fs_jobsm_event *out)
{
    for (int i = 0; i < (int)(sizeof EVENT_NAME / sizeof EVENT_NAME[0]); i++) {
        int hit = i == FS_JOBSM_EV_CLOSE ? strncmp(kind, EVENT_NAME[i], 6) == 0
                                         : strcmp(kind, EVENT_NAME[i]) == 0;
        if (hit) {
            *out = (enum fs_jobsm_event)i;
            return 0;
        }
    }
    return -1;
}

const char *fs_jobsm_event_name(enum fs_jobsm_kind kind)
{
    switch (kind) {
    case FS_JOBSM_ADV:
        return "adv";
    case FS_JOBSM_SHARES:
        return "shares";
    case FS_JOBSM_EXP:
        return "exp";
    case FS_JOBSM_PUBEXP:
        return "pubexp";
    case FS_JOBSM_MASKED:
        return "masked";
    case FS_JOBSM_SIG:
        return "sig";
    case FS_JOBSM_REVEALS:
        return "reveals";
    default:
        return "unknown";
    }
}

void fs_jobsm_replay_closed(struct fs_jobsm *s, enum fs_job_phase closed)
{
    if (closed == FS_JOB_UNMASKING) {
        s->finish_pending = 1;
    }
}

int fs_jobsm_replay_begin(struct fs_jobsm *s, int64_t r, int *finish_first, struct fs_err *err)
{
    int pending = s->finish_pending;

    *finish_first = 0;
    if (r < 0 || r >= (int64_t)s->cfg.aggregations || (r > 0 && (int64_t)s->r != r - 1)) {
        return fs_err_set(err, FS_EFORMAT, "bad begin");
    }
    if (r > 0) {
        /* the previous (statistics) aggregation was unmasked before this */
        s->finish_pending = 0;
        if (!pending) {
            return fs_err_set(err, FS_EFORMAT, "begin before unmask");
        }
        *finish_first = 1;
    }
    return 0;
}

int fs_jobsm_pubexp_parse(const uint8_t *body, size_t len, int *e, struct fs_err *err)
{
    char txt[16];
    char *end = NULL;
    long v;

    if (len == 0 || len >= sizeof txt) {
        return fs_err_set(err, FS_EFORMAT, "bad public exponent");
    }
    memcpy(txt, body, len);
    txt[len] = '\0';
    v = strtol(txt, &end, 10);
    if (end == txt || *end != '\0' || v < FS_FEDSVD_EXP_MIN || v > FS_FEDSVD_EXP_MAX) {
        return fs_err_set(err, FS_EFORMAT, "bad public exponent");
    }
    *e = (int)v;
    return 0;
}

int fs_jobsm_equal(const struct fs_jobsm *a, const struct fs_jobsm *b)
{
    size_t n1 = (size_t)a->cfg.parties + 1;

    if (a->cfg.parties != b->cfg.parties || a->phase != b->phase || a->r != b->r ||
        a->finishing != b->finishing || a->phase_opened != b->phase_opened ||
        strcmp(a->error, b->error) != 0 ||
        memcmp(a->has_timing, b->has_timing, sizeof a->has_timing) != 0) {
        return 0;
    }
    for (int t = 0; t < FS_JOB_NTIMED; t++) {
        if (a->has_timing[t] && a->timings[t] != b->timings[t]) {
            return 0;
        }
    }
    return memcmp(a->joined, b->joined, n1) == 0 && memcmp(a->shared, b->shared, n1) == 0 &&
           memcmp(a->dropped, b->dropped, n1) == 0 && memcmp(a->in_round, b->in_round, n1) == 0 &&
           memcmp(a->sent, b->sent, n1) == 0 && memcmp(a->active, b->active, n1) == 0 &&
           memcmp(a->has_exp, b->has_exp, n1) == 0 &&
           memcmp(a->exp, b->exp, n1 * sizeof *a->exp) == 0 &&
           memcmp(a->has_sealed, b->has_sealed, n1) == 0 &&
           memcmp(a->sealed, b->sealed, n1 * sizeof *a->sealed) == 0 &&
           memcmp(a->has_pubexp, b->has_pubexp, n1) == 0 &&
           memcmp(a->pubexp, b->pubexp, n1 * sizeof *a->pubexp) == 0;
}
