/* The job's documents: the Job status document, the snapshot persisted with
 * the job row, and the ids lists they share (see jobmgr_internal.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../api/phase.h"
#include "jobmgr_internal.h"
#include "net/log.h"
#include "teststop.h"

static json_t *timings_json(const agg_job *j)
{
    json_t *o = json_object();

    for (int i = 0; o != NULL && i < FS_JOB_NTIMED; i++) {
        if (j->st.has_timing[i]) {
            json_object_set_new(o, fs_job_timing_name((enum fs_job_phase)i),
                                json_real(j->st.timings[i]));
        }
    }
    return o;
}

/* fedsvd/fedpca parameters of the Job document. */
static void fed_status(const agg_job *j, json_t *o)
{
    json_t *sizes = json_array();
    const struct fs_job_fedsvd *f = &j->spec.fed;

    for (uint32_t v = 0; sizes != NULL && v < j->n; v++) {
        json_array_append_new(sizes, json_integer((json_int_t)f->party_sizes[v]));
    }
    json_object_set_new(o, "partition", json_string(fs_job_partition_name(f->partition)));
    json_object_set_new(o, "party_sizes", sizes);
    json_object_set_new(o, "k", f->k > 0 ? json_integer((json_int_t)f->k) : json_null());
    json_object_set_new(o, "method",
                        json_string(f->method == FS_JOB_RANDOMIZED ? "randomized" : "exact"));
    json_object_set_new(o, "standardize", json_boolean(f->standardize));
    json_object_set_new(o, "allow_dropouts", json_boolean(f->allow_dropouts));
}

/* Bytes by phase, {"<timing name>": {"in": n, "out": n}}, for the phases
 * that saw traffic (a request counts in the phase open when it ended). */
static json_t *phase_bytes_json(const agg_job *j)
{
    json_t *o = json_object();

    for (int i = 0; o != NULL && i < FS_JOB_NTIMED; i++) {
        if (j->phase_in[i] != 0 || j->phase_out[i] != 0) {
            json_object_set_new(o, fs_job_timing_name((enum fs_job_phase)i),
                                json_pack("{s:I, s:I}", "in", (json_int_t)j->phase_in[i], "out",
                                          (json_int_t)j->phase_out[i]));
        }
    }
    return o;
}

/* Each party's state (the dashboard's table) and the parties the job waits
 * for; mu held. sr: the open SecAgg round or -1. */
static void party_status(const agg_job *j, int sr, json_t *o)
{
    const struct fs_jobsm *s = &j->st;
    json_t *a = json_array();
    json_t *w = json_array();

    for (uint32_t v = 1; a != NULL && w != NULL && v <= j->n; v++) {
        int expected = fs_jobsm_expects(s, v);
        int waiting = fs_jobsm_waits_for(s, v);
        json_array_append_new(a, json_pack("{s:i, s:b, s:b, s:b, s:b, s:b, s:o}", "party", (int)v,
                                           "joined", s->joined[v] != 0, "dropped",
                                           s->dropped[v] != 0, "expected", expected, "sent",
                                           expected && s->sent[v] != 0, "waiting", waiting, "round",
                                           expected && sr >= 0 ? json_integer(sr) : json_null()));
        if (waiting) {
            json_array_append_new(w, json_integer((json_int_t)v));
        }
    }
    json_object_set_new(o, "party_states", a);
    json_object_set_new(o, "waiting_for", w);
}

const char *agg_state_locked(const agg_job *j)
{
    return j->st.phase == FS_JOB_DONE     ? "done"
           : j->st.phase == FS_JOB_FAILED ? "failed"
                                          : "running";
}

/* Elapsed time in the open phase and time to its deadline. */
static void clock_status(const agg_job *j, json_t *o)
{
    int running = fs_jobsm_running(&j->st);

    json_object_set_new(
        o, "phase_elapsed_s",
        running ? json_real(floor((agg_now_wall() - j->st.phase_opened) * 10 + 0.5) / 10)
                : json_null());
    if (running && !j->st.finishing) {
        double left = j->deadline_mono - agg_now_mono();
        json_object_set_new(o, "deadline_in_s",
                            json_real(left > 0 ? floor(left * 10 + 0.5) / 10 : 0.0));
    } else {
        json_object_set_new(o, "deadline_in_s", json_null());
    }
}

json_t *agg_status_locked(const agg_job *j)
{
    const struct fs_jobsm *s = &j->st;
    int sr = fs_jobsm_secagg_round(s->phase);
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:[I, I], s:i, s:i}", "id",
                          j->id, "algorithm", fs_algo_name(j->spec.algo), "name", j->spec.name,
                          "phase", fs_job_phase_name(s->phase), "state", agg_state_locked(j),
                          "aggregation", (int)s->r, "aggregations", (int)j->naggs, "parties",
                          (int)j->n, "threshold", (int)j->spec.threshold, "shape",
                          (json_int_t)j->spec.rows, (json_int_t)j->spec.cols, "chunk_words",
                          (int)j->chunk_words, "round_timeout_s", (int)j->spec.round_timeout_s);

    if (o == NULL) {
        return NULL;
    }
    json_object_set_new(o, "secagg", json_string(fs_job_secagg_name(j->spec.secagg)));
    if (j->cfg.degree != 0) {
        json_object_set_new(o, "secagg_degree", json_integer((json_int_t)j->cfg.degree));
        json_object_set_new(o, "secagg_share_threshold", json_integer((json_int_t)j->cfg.share_t));
    }
    if (j->fed) {
        fed_status(j, o);
    }
    if (j->sj_doc != NULL) {
        json_object_set_new(o, "shards", json_deep_copy(j->sj_doc));
    }
    if (j->ops != NULL) {
        j->ops->status_locked(j, o);
    }
    json_object_set_new(o, "round",
                        fs_jobsm_running(s) && sr >= 0 ? json_integer(sr) : json_null());
    json_object_set_new(o, "present", agg_ids_where(s->joined, s->dropped, j->n));
    json_object_set_new(o, "dropped", agg_ids_where(s->dropped, NULL, j->n));
    json_object_set_new(o, "bytes_in", json_integer((json_int_t)j->bytes_in));
    json_object_set_new(o, "bytes_out", json_integer((json_int_t)j->bytes_out));
    json_object_set_new(o, "timings", timings_json(j));
    json_object_set_new(o, "bytes_by_phase", phase_bytes_json(j));
    party_status(j, sr, o);
    json_object_set_new(o, "created_at", json_string(j->created_at));
    clock_status(j, o);
    json_object_set_new(o, "error", s->error[0] != '\0' ? json_string(s->error) : json_null());
    return o;
}

json_t *agg_job_status(agg_job *j)
{
    json_t *o;

    pthread_mutex_lock(&j->mu);
    o = agg_status_locked(j);
    pthread_mutex_unlock(&j->mu);
    return o;
}

int agg_job_moved(agg_job *j, enum fs_job_phase ph, uint32_t r)
{
    int moved;

    pthread_mutex_lock(&j->mu);
    moved = j->st.phase != ph || j->st.r != r;
    pthread_mutex_unlock(&j->mu);
    return moved;
}

int agg_job_holds_sum(agg_job *j)
{
    enum fs_algo a = j->spec.algo;
    int held;

    if (a != FS_ALGO_SECURE_SUM && a != FS_ALGO_FEDSVD && a != FS_ALGO_FEDPCA) {
        return 0; /* the power iterations' sums are d x k */
    }
    pthread_mutex_lock(&j->mu);
    /* from the round before masked_input (exponents for fedsvd and fedpca,
     * share_keys for secure-sum): the connections open when masked_input
     * allocates the sum were answered in it */
    held = j->st.phase >= (j->fed ? FS_JOB_EXPONENTS : FS_JOB_SHARE_KEYS) &&
           j->st.phase <= FS_JOB_FACTORIZING;
    pthread_mutex_unlock(&j->mu);
    return held;
}

const char *agg_job_id(const agg_job *j)
{
    return j->id;
}

enum fs_algo agg_job_algo(const agg_job *j)
{
    return j->spec.algo;
}

void agg_job_count_bytes(agg_job *j, uint64_t in, uint64_t out)
{
    pthread_mutex_lock(&j->mu);
    j->bytes_in += in;
    j->bytes_out += out;
    if ((int)j->st.phase < FS_JOB_NTIMED) {
        j->phase_in[j->st.phase] += in;
        j->phase_out[j->st.phase] += out;
    }
    pthread_mutex_unlock(&j->mu);
}

/* Snapshot persisted with the job row: status counters survive restarts and
 * finished jobs are served from it. mu held. */
static char *snapshot_locked(const agg_job *j)
{
    json_t *o = json_object();
    char *s = NULL;

    if (o == NULL) {
        return NULL;
    }
    json_object_set_new(o, "job", agg_status_locked(j));
    json_object_set_new(o, "aggregation_docs", json_deep_copy(j->aggs));
    s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}

/* agg_mgr_set_on_change's lock: a leaf (fn takes none) */
static pthread_mutex_t g_change_mu = PTHREAD_MUTEX_INITIALIZER;

void agg_mgr_set_on_change(agg_mgr *m, void (*fn)(void *ctx), void *ctx)
{
    pthread_mutex_lock(&g_change_mu);
    m->on_change = fn;
    m->on_change_ctx = ctx;
    pthread_mutex_unlock(&g_change_mu);
}

static void changed(agg_mgr *m)
{
    pthread_mutex_lock(&g_change_mu);
    if (m->on_change != NULL) {
        m->on_change(m->on_change_ctx);
    }
    pthread_mutex_unlock(&g_change_mu);
}

/* Tests only (tests/agent/partner_test.sh): FEDSVD_TEST_PERSIST_DELAY_MS=MS@PHASE
 * makes persisting a running job's state in phase PHASE take MS ms longer
 * (at most 10 s), as a loaded disk would, with the job's state-machine lock
 * held as every caller that opens a round holds it. */
static void test_persist_delay(enum fs_job_phase ph)
{
    const char *v = getenv("FEDSVD_TEST_PERSIST_DELAY_MS");
    char *end = NULL;
    unsigned long ms = v != NULL ? strtoul(v, &end, 10) : 0;
    enum fs_job_phase want;

    if (ms > 0 && end != NULL && *end == '@' && fs_job_phase_parse(end + 1, &want) == 0 &&
        want == ph) {
        usleep((useconds_t)(ms < 10000 ? ms : 10000) * 1000);
    }
}

void agg_persist_state(agg_job *j, const char *result_json)
{
    struct fs_err err = {0};
    const char *state;
    char *snap;
    char error[FS_JOBSM_REASON_MAX];
    enum fs_job_phase ph;
    uint32_t r;
    int rc;

    changed(j->mgr); /* long polls see the change now, not at their next check */
    pthread_mutex_lock(&j->mu);
    state = agg_state_locked(j);
    snap = snapshot_locked(j);
    snprintf(error, sizeof error, "%s", j->st.error);
    ph = j->st.phase;
    r = j->st.r;
    pthread_mutex_unlock(&j->mu);
    if (strcmp(state, "running") == 0) {
        test_persist_delay(ph);
    }
    rc = agg_store_job_update(j->mgr->st, j->id, state, error[0] != '\0' ? error : NULL,
                              result_json, snap, &err);
    if (rc != 0 && rc != FS_ESTORAGE) { /* a storage episode is logged once, elsewhere */
        fs_log_pack(FS_LOG_ERROR, "cannot persist job state", "{s:s, s:s}", "job", j->id, "error",
                    err.msg);
    }
    pthread_mutex_lock(&j->mu);
    j->persist_dirty = rc != 0; /* agg_mgr_tick tries again */
    pthread_mutex_unlock(&j->mu);
    free(snap);
    if (rc == 0 && strcmp(state, "running") == 0) {
        agg_teststop_reached(j->id, ph, r); /* FEDSVD_TEST_STOP_AT_PHASE: may not return */
    }
}

json_t *agg_cur_doc(const agg_job *j)
{
    json_t *d = json_array_get(j->aggs, j->st.r);

    return json_is_object(d) ? d : NULL;
}

json_t *agg_dropped_of(const agg_job *j, const uint32_t *u3, size_t n3)
{
    uint8_t *surv = calloc((size_t)j->n + 1, 1);
    uint8_t *all = malloc((size_t)j->n + 1);
    json_t *o = NULL;

    if (surv != NULL && all != NULL) {
        for (size_t i = 0; i < n3; i++) {
            surv[u3[i]] = 1;
        }
        memset(all, 1, (size_t)j->n + 1);
        o = agg_ids_where(all, surv, j->n);
    }
    free(surv);
    free(all);
    return o;
}
