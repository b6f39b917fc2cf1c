/* The client agent's participation driver: the step it asks for given the
 * job's phase, dropouts (the job moved on), late rounds after the party's
 * input is in, fail_at, several aggregations, progress; and the fedsvd /
 * fedpca flow (exponents rounds, statistics sums, factorizing). */
#include "proto/agent_driver.h"
#include "test.h"

static struct fs_agent_job_view jv(enum fs_agent_jphase ph, uint32_t r)
{
    struct fs_agent_job_view v;

    v.phase = ph;
    v.failed = 0;
    v.aggregation = r;
    v.error = NULL;
    return v;
}

/* next() on a view, returning the action kind; *step gets the step. */
static enum fs_agent_act next(struct fs_agent_driver *d, enum fs_agent_jphase ph, uint32_t r,
                              enum fs_agent_step *step)
{
    struct fs_agent_job_view v = jv(ph, r);
    struct fs_agent_action a;

    fs_agent_driver_next(d, &v, &a);
    if (step != NULL) {
        *step = a.step;
    }
    return a.act;
}

static void test_happy_path(void)
{
    struct fs_agent_driver d;
    struct fs_err err = {0};
    enum fs_agent_step s;

    CHECK_OK(fs_agent_driver_init(&d, 1, FS_AGENT_FAIL_NONE, &err), &err);
    CHECK(strcmp(fs_agent_driver_phase(&d), "advertise_keys") == 0);
    CHECK(next(&d, FS_AGENT_J_WAITING, 0, &s) == FS_AGENT_DO && s == FS_AGENT_S_ADVERTISE);
    fs_agent_driver_done(&d);
    /* roster only once R0 closed */
    CHECK(next(&d, FS_AGENT_J_WAITING, 0, &s) == FS_AGENT_WAIT && s == FS_AGENT_S_ROSTER);
    CHECK(next(&d, FS_AGENT_J_SHARE_KEYS, 0, &s) == FS_AGENT_DO && s == FS_AGENT_S_ROSTER);
    fs_agent_driver_done(&d);
    CHECK(next(&d, FS_AGENT_J_SHARE_KEYS, 0, &s) == FS_AGENT_DO && s == FS_AGENT_S_SHARE);
    fs_agent_driver_done(&d);
    CHECK(strcmp(fs_agent_driver_phase(&d), "share_keys") == 0);
    CHECK(next(&d, FS_AGENT_J_SHARE_KEYS, 0, &s) == FS_AGENT_WAIT && s == FS_AGENT_S_RECEIVE);
    CHECK(next(&d, FS_AGENT_J_MASKED, 0, &s) == FS_AGENT_DO && s == FS_AGENT_S_RECEIVE);
    fs_agent_driver_done(&d);
    CHECK(next(&d, FS_AGENT_J_MASKED, 0, &s) == FS_AGENT_DO && s == FS_AGENT_S_BEGIN);
    fs_agent_driver_done(&d);
    CHECK(next(&d, FS_AGENT_J_MASKED, 0, &s) == FS_AGENT_DO && s == FS_AGENT_S_UPLOAD);
    CHECK(strcmp(fs_agent_driver_phase(&d), "masked_input") == 0);
    fs_agent_driver_done(&d);
    CHECK(next(&d, FS_AGENT_J_MASKED, 0, &s) == FS_AGENT_WAIT && s == FS_AGENT_S_SURVIVORS);
    CHECK(next(&d, FS_AGENT_J_CONSISTENCY, 0, &s) == FS_AGENT_DO && s == FS_AGENT_S_SURVIVORS);
    fs_agent_driver_done(&d);
    CHECK(next(&d, FS_AGENT_J_CONSISTENCY, 0, &s) == FS_AGENT_DO && s == FS_AGENT_S_CONSISTENCY);
    fs_agent_driver_done(&d);
    CHECK(next(&d, FS_AGENT_J_CONSISTENCY, 0, &s) == FS_AGENT_WAIT && s == FS_AGENT_S_SIGNATURES);
    CHECK(next(&d, FS_AGENT_J_UNMASKING, 0, &s) == FS_AGENT_DO && s == FS_AGENT_S_SIGNATURES);
    fs_agent_driver_done(&d);
    CHECK(next(&d, FS_AGENT_J_UNMASKING, 0, &s) == FS_AGENT_DO && s == FS_AGENT_S_UNMASK);
    fs_agent_driver_done(&d);
    CHECK(strcmp(fs_agent_driver_phase(&d), "result") == 0);
    CHECK(next(&d, FS_AGENT_J_UNMASKING, 0, &s) == FS_AGENT_WAIT && s == FS_AGENT_S_RESULT);
    CHECK(next(&d, FS_AGENT_J_DONE, 0, &s) == FS_AGENT_DO && s == FS_AGENT_S_RESULT);
    fs_agent_driver_done(&d);
    CHECK(next(&d, FS_AGENT_J_DONE, 0, &s) == FS_AGENT_FINISH);
    CHECK(strcmp(fs_agent_driver_phase(&d), "done") == 0);
    CHECK_NEAR(fs_agent_driver_progress(&d, 0, 0), 1.0, 0);
}

static void test_job_failed(void)
{
    struct fs_agent_driver d;
    struct fs_err err = {0};
    struct fs_agent_job_view v = jv(FS_AGENT_J_FAILED, 0);
    struct fs_agent_action a;

    CHECK_OK(fs_agent_driver_init(&d, 1, FS_AGENT_FAIL_NONE, &err), &err);
    v.error = "6 masked inputs in aggregation 0, threshold 7";
    fs_agent_driver_next(&d, &v, &a);
    CHECK(a.act == FS_AGENT_FAIL);
    CHECK(strstr(a.reason, "job failed: 6 masked inputs") != NULL);
    /* state failed with some other phase name */
    v = jv(FS_AGENT_J_MASKED, 0);
    v.failed = 1;
    fs_agent_driver_next(&d, &v, &a);
    CHECK(a.act == FS_AGENT_FAIL && strstr(a.reason, "no reason given") != NULL);
}

static void test_too_late_and_dropped(void)
{
    struct fs_agent_driver d;
    struct fs_err err = {0};
    struct fs_agent_job_view v = jv(FS_AGENT_J_SHARE_KEYS, 0);
    struct fs_agent_action a;

    CHECK_OK(fs_agent_driver_init(&d, 1, FS_AGENT_FAIL_NONE, &err), &err);
    fs_agent_driver_next(&d, &v, &a);
    CHECK(a.act == FS_AGENT_FAIL && strstr(a.reason, "too late to join") != NULL);

    /* advertised, but the job went on to masked input without our shares */
    CHECK_OK(fs_agent_driver_init(&d, 1, FS_AGENT_FAIL_NONE, &err), &err);
    CHECK(next(&d, FS_AGENT_J_WAITING, 0, NULL) == FS_AGENT_DO);
    fs_agent_driver_done(&d);
    v = jv(FS_AGENT_J_MASKED, 0);
    fs_agent_driver_next(&d, &v, &a);
    CHECK(a.act == FS_AGENT_FAIL && strstr(a.reason, "dropped by the server") != NULL);

    /* shares received, but the job finished without our input */
    CHECK_OK(fs_agent_driver_init(&d, 1, FS_AGENT_FAIL_NONE, &err), &err);
    d.step = FS_AGENT_S_RECEIVE;
    CHECK(next(&d, FS_AGENT_J_DONE, 0, NULL) == FS_AGENT_FAIL);
    d.step = FS_AGENT_S_BEGIN;
    CHECK(next(&d, FS_AGENT_J_CONSISTENCY, 0, NULL) == FS_AGENT_FAIL);
    d.step = FS_AGENT_S_UPLOAD;
    CHECK(next(&d, FS_AGENT_J_UNMASKING, 0, NULL) == FS_AGENT_FAIL);
}

static void test_late_rounds_after_input_are_skipped(void)
{
    struct fs_agent_driver d;
    struct fs_err err = {0};
    enum fs_agent_step s;

    /* uploaded and signed; the server finished before our unmask message */
    CHECK_OK(fs_agent_driver_init(&d, 1, FS_AGENT_FAIL_NONE, &err), &err);
    d.step = FS_AGENT_S_UNMASK;
    CHECK(next(&d, FS_AGENT_J_DONE, 0, &s) == FS_AGENT_DO && s == FS_AGENT_S_RESULT);
    /* uploaded; survivors can still be read once the job is done */
    CHECK_OK(fs_agent_driver_init(&d, 1, FS_AGENT_FAIL_NONE, &err), &err);
    d.step = FS_AGENT_S_SURVIVORS;
    CHECK(next(&d, FS_AGENT_J_DONE, 0, &s) == FS_AGENT_DO && s == FS_AGENT_S_SURVIVORS);
    fs_agent_driver_done(&d);
    /* consistency missed: skip to the result, never unmask without having signed */
    CHECK(next(&d, FS_AGENT_J_DONE, 0, &s) == FS_AGENT_DO && s == FS_AGENT_S_RESULT);
    /* consistency maybe missed (or taken, its answer lost) while the job
     * unmasks that aggregation: the signatures say whether to unmask */
    CHECK_OK(fs_agent_driver_init(&d, 1, FS_AGENT_FAIL_NONE, &err), &err);
    d.step = FS_AGENT_S_CONSISTENCY;
    CHECK(next(&d, FS_AGENT_J_UNMASKING, 0, &s) == FS_AGENT_DO && s == FS_AGENT_S_SIGNATURES);
    fs_agent_driver_done(&d);
    CHECK(next(&d, FS_AGENT_J_UNMASKING, 0, &s) == FS_AGENT_DO && s == FS_AGENT_S_UNMASK);
    fs_agent_driver_done(&d);
    CHECK(next(&d, FS_AGENT_J_UNMASKING, 0, &s) == FS_AGENT_WAIT && s == FS_AGENT_S_RESULT);
    /* once the job is past that unmasking, a missed consistency is skipped */
    CHECK_OK(fs_agent_driver_init(&d, 1, FS_AGENT_FAIL_NONE, &err), &err);
    d.step = FS_AGENT_S_CONSISTENCY;
    CHECK(next(&d, FS_AGENT_J_DONE, 0, &s) == FS_AGENT_DO && s == FS_AGENT_S_RESULT);
}

static void test_unknown_phase_waits(void)
{
    struct fs_agent_driver d;
    struct fs_err err = {0};

    CHECK_OK(fs_agent_driver_init(&d, 1, FS_AGENT_FAIL_NONE, &err), &err);
    CHECK(next(&d, FS_AGENT_J_UNKNOWN, 0, NULL) == FS_AGENT_WAIT);
    CHECK(fs_agent_jphase_parse("iteration") == FS_AGENT_J_UNKNOWN); /* a later algorithm's */
    CHECK(fs_agent_jphase_parse("masked_input") == FS_AGENT_J_MASKED);
    CHECK(fs_agent_jphase_parse(NULL) == FS_AGENT_J_UNKNOWN);
    CHECK(strcmp(fs_agent_jphase_name(FS_AGENT_J_WAITING), "waiting_for_parties") == 0);
}

static void test_fail_at(void)
{
    static const struct {
        const char *name;
        enum fs_agent_step step;
        enum fs_agent_jphase phase;
    } cases[] = {
        {"advertise_keys", FS_AGENT_S_ADVERTISE, FS_AGENT_J_WAITING},
        {"share_keys", FS_AGENT_S_SHARE, FS_AGENT_J_SHARE_KEYS},
        {"masked_input", FS_AGENT_S_UPLOAD, FS_AGENT_J_MASKED},
        {"consistency", FS_AGENT_S_CONSISTENCY, FS_AGENT_J_CONSISTENCY},
        {"unmasking", FS_AGENT_S_UNMASK, FS_AGENT_J_UNMASKING},
    };
    struct fs_err err = {0};

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct fs_agent_driver d;
        struct fs_agent_job_view v = jv(cases[i].phase, 0);
        struct fs_agent_action a;
        enum fs_agent_fail_at f;
        CHECK_OK(fs_agent_fail_at_parse(cases[i].name, &f, &err), &err);
        CHECK(strcmp(fs_agent_fail_at_name(f), cases[i].name) == 0);
        CHECK_OK(fs_agent_driver_init(&d, 1, f, &err), &err);
        /* walk up to the step without the crash */
        d.step = cases[i].step;
        if (cases[i].step == FS_AGENT_S_UPLOAD) {
            /* BEGIN (a GET) still happens; the crash is before the first chunk */
            d.step = FS_AGENT_S_BEGIN;
            fs_agent_driver_next(&d, &v, &a);
            CHECK(a.act == FS_AGENT_DO);
            fs_agent_driver_done(&d);
        }
        fs_agent_driver_next(&d, &v, &a);
        CHECK_MSG(a.act == FS_AGENT_CRASH, "%s", cases[i].name);
        CHECK(strstr(a.reason, cases[i].name) != NULL);
        /* before the round opens it waits as usual */
        if (cases[i].phase != FS_AGENT_J_WAITING) {
            v = jv((enum fs_agent_jphase)(cases[i].phase - 1), 0);
            fs_agent_driver_next(&d, &v, &a);
            CHECK(a.act == FS_AGENT_WAIT);
        }
    }
    {
        enum fs_agent_fail_at f = FS_AGENT_FAIL_NONE;
        CHECK(fs_agent_fail_at_parse("done", &f, &err) == FS_EINVAL);
        CHECK(fs_agent_fail_at_parse(NULL, &f, &err) == FS_EINVAL);
        CHECK(fs_agent_fail_at_name(FS_AGENT_FAIL_NONE) == NULL);
    }
}

static void test_several_aggregations(void)
{
    struct fs_agent_driver d;
    struct fs_err err = {0};
    enum fs_agent_step s;

    CHECK_OK(fs_agent_driver_init(&d, 3, FS_AGENT_FAIL_NONE, &err), &err);
    d.step = FS_AGENT_S_BEGIN;
    for (uint32_t r = 0; r < 3; r++) {
        /* the previous aggregation's unmasking phase: wait */
        if (r > 0) {
            CHECK(next(&d, FS_AGENT_J_UNMASKING, r - 1, &s) == FS_AGENT_WAIT);
        }
        CHECK(next(&d, FS_AGENT_J_MASKED, r, &s) == FS_AGENT_DO && s == FS_AGENT_S_BEGIN);
        CHECK(d.r == r);
        fs_agent_driver_done(&d);
        CHECK(next(&d, FS_AGENT_J_MASKED, r, &s) == FS_AGENT_DO && s == FS_AGENT_S_UPLOAD);
        fs_agent_driver_done(&d);
        CHECK(next(&d, FS_AGENT_J_CONSISTENCY, r, &s) == FS_AGENT_DO);
        fs_agent_driver_done(&d);
        CHECK(next(&d, FS_AGENT_J_CONSISTENCY, r, &s) == FS_AGENT_DO);
        fs_agent_driver_done(&d);
        CHECK(next(&d, FS_AGENT_J_UNMASKING, r, &s) == FS_AGENT_DO);
        fs_agent_driver_done(&d);
        CHECK(next(&d, FS_AGENT_J_UNMASKING, r, &s) == FS_AGENT_DO && s == FS_AGENT_S_UNMASK);
        fs_agent_driver_done(&d);
    }
    CHECK(d.step == FS_AGENT_S_RESULT);
    /* a later aggregation's masked input after a missed one: dropped */
    CHECK_OK(fs_agent_driver_init(&d, 3, FS_AGENT_FAIL_NONE, &err), &err);
    d.step = FS_AGENT_S_BEGIN;
    CHECK(next(&d, FS_AGENT_J_MASKED, 1, NULL) == FS_AGENT_FAIL);
    CHECK(fs_agent_driver_init(&d, 0, FS_AGENT_FAIL_NONE, &err) == FS_EINVAL);
}

static void test_progress_monotone(void)
{
    struct fs_agent_driver d;
    struct fs_err err = {0};
    double last = -1;

    CHECK_OK(fs_agent_driver_init(&d, 2, FS_AGENT_FAIL_NONE, &err), &err);
    while (d.step != FS_AGENT_S_FINISHED) {
        if (d.step == FS_AGENT_S_UPLOAD) {
            for (uint64_t c = 0; c <= 10; c++) {
                double p = fs_agent_driver_progress(&d, c, 10);
                CHECK_MSG(p >= last && p <= 1.0, "%g after %g", p, last);
                last = p;
            }
        } else {
            double p = fs_agent_driver_progress(&d, 0, 0);
            CHECK_MSG(p >= last && p <= 1.0, "%g after %g at %s", p, last,
                      fs_agent_step_name(d.step));
            last = p;
        }
        fs_agent_driver_done(&d);
    }
    CHECK_NEAR(fs_agent_driver_progress(&d, 0, 0), 1.0, 0);
}

/* One aggregation of a fed job from BEGIN through UNMASK at aggregation r. */
static void fed_aggregation(struct fs_agent_driver *d, uint32_t r)
{
    enum fs_agent_step s;

    CHECK(next(d, FS_AGENT_J_EXPONENTS, r, &s) == FS_AGENT_DO && s == FS_AGENT_S_BEGIN);
    CHECK(strcmp(fs_agent_driver_phase(d), "exponents") == 0);
    fs_agent_driver_done(d);
    CHECK(next(d, FS_AGENT_J_EXPONENTS, r, &s) == FS_AGENT_DO && s == FS_AGENT_S_EXPONENT);
    fs_agent_driver_done(d);
    /* the relayed list only once the exponents round closed */
    CHECK(next(d, FS_AGENT_J_EXPONENTS, r, &s) == FS_AGENT_WAIT && s == FS_AGENT_S_EXPONENTS);
    CHECK(next(d, FS_AGENT_J_MASKED, r, &s) == FS_AGENT_DO && s == FS_AGENT_S_EXPONENTS);
    fs_agent_driver_done(d);
    CHECK(next(d, FS_AGENT_J_MASKED, r, &s) == FS_AGENT_DO && s == FS_AGENT_S_UPLOAD);
    fs_agent_driver_done(d);
    CHECK(next(d, FS_AGENT_J_CONSISTENCY, r, &s) == FS_AGENT_DO && s == FS_AGENT_S_SURVIVORS);
    fs_agent_driver_done(d);
    CHECK(next(d, FS_AGENT_J_CONSISTENCY, r, &s) == FS_AGENT_DO && s == FS_AGENT_S_CONSISTENCY);
    fs_agent_driver_done(d);
    CHECK(next(d, FS_AGENT_J_UNMASKING, r, &s) == FS_AGENT_DO && s == FS_AGENT_S_SIGNATURES);
    fs_agent_driver_done(d);
    CHECK(next(d, FS_AGENT_J_UNMASKING, r, &s) == FS_AGENT_DO && s == FS_AGENT_S_UNMASK);
    fs_agent_driver_done(d);
}

static void setup_keys(struct fs_agent_driver *d)
{
    CHECK(next(d, FS_AGENT_J_WAITING, 0, NULL) == FS_AGENT_DO);
    fs_agent_driver_done(d);
    CHECK(next(d, FS_AGENT_J_SHARE_KEYS, 0, NULL) == FS_AGENT_DO);
    fs_agent_driver_done(d);
    CHECK(next(d, FS_AGENT_J_SHARE_KEYS, 0, NULL) == FS_AGENT_DO);
    fs_agent_driver_done(d);
    /* shares are fetched once R1 closed: the next phase is the exponents round */
    CHECK(next(d, FS_AGENT_J_EXPONENTS, 0, NULL) == FS_AGENT_DO);
    fs_agent_driver_done(d);
}

static void test_fed_flow(void)
{
    struct fs_agent_driver d;
    struct fs_err err = {0};
    enum fs_agent_step s;

    /* fedpca with standardize: mean, variance (statistics), then the SVD */
    CHECK_OK(fs_agent_driver_init_fed(&d, 3, 2, FS_AGENT_FAIL_NONE, &err), &err);
    setup_keys(&d);
    for (uint32_t r = 0; r < 2; r++) {
        fed_aggregation(&d, r);
        /* the published sum once aggregation r is unmasked */
        CHECK(strcmp(fs_agent_driver_phase(&d), "statistics") == 0);
        CHECK(next(&d, FS_AGENT_J_UNMASKING, r, &s) == FS_AGENT_WAIT && s == FS_AGENT_S_STATS);
        CHECK(next(&d, FS_AGENT_J_EXPONENTS, r + 1, &s) == FS_AGENT_DO && s == FS_AGENT_S_STATS);
        fs_agent_driver_done(&d);
        CHECK(d.r == r + 1);
    }
    fed_aggregation(&d, 2);
    CHECK(strcmp(fs_agent_driver_phase(&d), "result") == 0);
    CHECK(next(&d, FS_AGENT_J_FACTORIZING, 2, &s) == FS_AGENT_WAIT && s == FS_AGENT_S_RESULT);
    CHECK(next(&d, FS_AGENT_J_DONE, 2, &s) == FS_AGENT_DO && s == FS_AGENT_S_RESULT);
    fs_agent_driver_done(&d);
    CHECK(next(&d, FS_AGENT_J_DONE, 2, NULL) == FS_AGENT_FINISH);
    CHECK(fs_agent_driver_init_fed(&d, 2, 2, FS_AGENT_FAIL_NONE, &err) == FS_EINVAL);
    CHECK(fs_agent_jphase_parse("exponents") == FS_AGENT_J_EXPONENTS &&
          fs_agent_jphase_parse("factorizing") == FS_AGENT_J_FACTORIZING);
}

static void test_fed_dropped(void)
{
    struct fs_agent_driver d;
    struct fs_err err = {0};
    struct fs_agent_action a;
    struct fs_agent_job_view v;
    enum fs_agent_step s;

    /* missed the exponents round: the job is in masked input already */
    CHECK_OK(fs_agent_driver_init_fed(&d, 1, 0, FS_AGENT_FAIL_NONE, &err), &err);
    setup_keys(&d);
    CHECK(next(&d, FS_AGENT_J_EXPONENTS, 0, &s) == FS_AGENT_DO && s == FS_AGENT_S_BEGIN);
    fs_agent_driver_done(&d);
    v = jv(FS_AGENT_J_MASKED, 0);
    fs_agent_driver_next(&d, &v, &a);
    CHECK(a.act == FS_AGENT_FAIL && strstr(a.reason, "dropped by the server") != NULL);
    /* the exponents were relayed but the masked input closed without us */
    CHECK_OK(fs_agent_driver_init_fed(&d, 1, 0, FS_AGENT_FAIL_NONE, &err), &err);
    setup_keys(&d);
    CHECK(next(&d, FS_AGENT_J_EXPONENTS, 0, NULL) == FS_AGENT_DO);
    fs_agent_driver_done(&d);
    CHECK(next(&d, FS_AGENT_J_EXPONENTS, 0, NULL) == FS_AGENT_DO);
    fs_agent_driver_done(&d);
    CHECK(next(&d, FS_AGENT_J_CONSISTENCY, 0, NULL) == FS_AGENT_FAIL);
    /* fail_at masked_input: the exponent is sent, the upload is not */
    CHECK_OK(fs_agent_driver_init_fed(&d, 1, 0, FS_AGENT_FAIL_MASKED_INPUT, &err), &err);
    setup_keys(&d);
    CHECK(next(&d, FS_AGENT_J_EXPONENTS, 0, NULL) == FS_AGENT_DO);
    fs_agent_driver_done(&d);
    CHECK(next(&d, FS_AGENT_J_EXPONENTS, 0, &s) == FS_AGENT_DO && s == FS_AGENT_S_EXPONENT);
    fs_agent_driver_done(&d);
    CHECK(next(&d, FS_AGENT_J_MASKED, 0, NULL) == FS_AGENT_DO);
    fs_agent_driver_done(&d);
    CHECK(next(&d, FS_AGENT_J_MASKED, 0, &s) == FS_AGENT_CRASH && s == FS_AGENT_S_UPLOAD);
    /* late consistency after the upload: skipped, the result is still fetched */
    CHECK_OK(fs_agent_driver_init_fed(&d, 1, 0, FS_AGENT_FAIL_NONE, &err), &err);
    setup_keys(&d);
    for (int i = 0; i < 3; i++) {
        CHECK(next(&d, i < 2 ? FS_AGENT_J_EXPONENTS : FS_AGENT_J_MASKED, 0, NULL) == FS_AGENT_DO);
        fs_agent_driver_done(&d);
    }
    CHECK(next(&d, FS_AGENT_J_MASKED, 0, &s) == FS_AGENT_DO && s == FS_AGENT_S_UPLOAD);
    fs_agent_driver_done(&d);
    CHECK(next(&d, FS_AGENT_J_CONSISTENCY, 0, NULL) == FS_AGENT_DO); /* survivors */
    fs_agent_driver_done(&d);
    CHECK(next(&d, FS_AGENT_J_FACTORIZING, 0, &s) == FS_AGENT_WAIT && s == FS_AGENT_S_RESULT);
}

/* One secure-sum aggregation r from BEGIN through UNMASK (power jobs). */
static void power_secagg_round(struct fs_agent_driver *d, uint32_t r)
{
    static const struct {
        enum fs_agent_jphase ph;
        enum fs_agent_step step;
    } seq[] = {{FS_AGENT_J_MASKED, FS_AGENT_S_BEGIN},
               {FS_AGENT_J_MASKED, FS_AGENT_S_UPLOAD},
               {FS_AGENT_J_CONSISTENCY, FS_AGENT_S_SURVIVORS},
               {FS_AGENT_J_CONSISTENCY, FS_AGENT_S_CONSISTENCY},
               {FS_AGENT_J_UNMASKING, FS_AGENT_S_SIGNATURES},
               {FS_AGENT_J_UNMASKING, FS_AGENT_S_UNMASK}};
    enum fs_agent_step s;

    for (size_t i = 0; i < sizeof seq / sizeof seq[0]; i++) {
        CHECK_MSG(next(d, seq[i].ph, r, &s) == FS_AGENT_DO && s == seq[i].step, "r %u step %zu", r,
                  i);
        fs_agent_driver_done(d);
    }
}

static void test_power_plain(void)
{
    struct fs_agent_driver d;
    struct fs_err err = {0};
    struct fs_agent_job_view v;
    struct fs_agent_action a;
    enum fs_agent_step s;

    /* 3 syncs + the Rayleigh upload, plain uploads */
    CHECK_OK(
        fs_agent_driver_init_power(&d, FS_AGENT_POWER_PLAIN, 4, 0, FS_AGENT_FAIL_NONE, 0, &err),
        &err);
    setup_keys(&d);
    for (uint32_t r = 0; r < 4; r++) {
        CHECK(next(&d, FS_AGENT_J_PLAIN_UPLOAD, r, &s) == FS_AGENT_DO && s == FS_AGENT_S_BEGIN);
        CHECK(strcmp(fs_agent_driver_phase(&d), "plain_upload") == 0);
        fs_agent_driver_done(&d);
        CHECK(next(&d, FS_AGENT_J_PLAIN_UPLOAD, r, &s) == FS_AGENT_DO &&
              s == FS_AGENT_S_PLAIN_UPLOAD);
        fs_agent_driver_done(&d);
        CHECK(d.step == (r < 3 ? FS_AGENT_S_BEGIN : FS_AGENT_S_RESULT));
        /* the next round is not open yet */
        if (r < 3) {
            CHECK(next(&d, FS_AGENT_J_PLAIN_UPLOAD, r, &s) == FS_AGENT_WAIT &&
                  s == FS_AGENT_S_BEGIN);
        }
    }
    CHECK(next(&d, FS_AGENT_J_UNKNOWN, 3, &s) == FS_AGENT_WAIT && s == FS_AGENT_S_RESULT);
    CHECK(next(&d, FS_AGENT_J_DONE, 3, &s) == FS_AGENT_DO && s == FS_AGENT_S_RESULT);
    fs_agent_driver_done(&d);
    CHECK(next(&d, FS_AGENT_J_DONE, 3, NULL) == FS_AGENT_FINISH);

    /* missed round 1's upload: dropped for good */
    CHECK_OK(
        fs_agent_driver_init_power(&d, FS_AGENT_POWER_PLAIN, 4, 0, FS_AGENT_FAIL_NONE, 0, &err),
        &err);
    setup_keys(&d);
    CHECK(next(&d, FS_AGENT_J_PLAIN_UPLOAD, 0, NULL) == FS_AGENT_DO);
    fs_agent_driver_done(&d);
    CHECK(next(&d, FS_AGENT_J_PLAIN_UPLOAD, 0, NULL) == FS_AGENT_DO);
    fs_agent_driver_done(&d);
    CHECK(next(&d, FS_AGENT_J_PLAIN_UPLOAD, 1, NULL) == FS_AGENT_DO); /* BEGIN 1 */
    fs_agent_driver_done(&d);
    v = jv(FS_AGENT_J_PLAIN_UPLOAD, 2);
    fs_agent_driver_next(&d, &v, &a);
    CHECK(a.act == FS_AGENT_FAIL && strstr(a.reason, "dropped by the server") != NULL &&
          strstr(a.reason, "plain_upload") != NULL);

    /* fail_at plain_upload:2 crashes before round 2's upload, not before round 0's */
    CHECK_OK(fs_agent_driver_init_power(&d, FS_AGENT_POWER_PLAIN, 4, 0, FS_AGENT_FAIL_PLAIN_UPLOAD,
                                        2, &err),
             &err);
    setup_keys(&d);
    for (uint32_t r = 0; r < 2; r++) {
        for (int i = 0; i < 2; i++) {
            CHECK(next(&d, FS_AGENT_J_PLAIN_UPLOAD, r, NULL) == FS_AGENT_DO);
            fs_agent_driver_done(&d);
        }
    }
    CHECK(next(&d, FS_AGENT_J_PLAIN_UPLOAD, 2, &s) == FS_AGENT_DO && s == FS_AGENT_S_BEGIN);
    fs_agent_driver_done(&d);
    fs_agent_driver_next(&d, &(struct fs_agent_job_view){FS_AGENT_J_PLAIN_UPLOAD, 0, 2, NULL}, &a);
    CHECK(a.act == FS_AGENT_CRASH && a.step == FS_AGENT_S_PLAIN_UPLOAD && a.r == 2 &&
          strstr(a.reason, "plain_upload") != NULL);
}

static void test_power_utility(void)
{
    struct fs_agent_driver d;
    struct fs_err err = {0};
    enum fs_agent_step s;
    double prev = 0.0;

    /* 2 syncs with a noise exchange each, then the Rayleigh sum (none) */
    CHECK_OK(
        fs_agent_driver_init_power(&d, FS_AGENT_POWER_UTILITY, 3, 2, FS_AGENT_FAIL_NONE, 0, &err),
        &err);
    setup_keys(&d);
    for (uint32_t r = 0; r < 2; r++) {
        power_secagg_round(&d, r);
        CHECK(d.step == FS_AGENT_S_EXCHANGE && d.r == r);
        CHECK(strcmp(fs_agent_driver_phase(&d), "noise_exchange") == 0);
        CHECK(next(&d, FS_AGENT_J_UNMASKING, r, &s) == FS_AGENT_WAIT && s == FS_AGENT_S_EXCHANGE);
        CHECK(fs_agent_driver_progress(&d, 0, 0) >= prev);
        prev = fs_agent_driver_progress(&d, 0, 0);
        CHECK(next(&d, FS_AGENT_J_NOISE_EXCHANGE, r, &s) == FS_AGENT_DO &&
              s == FS_AGENT_S_EXCHANGE);
        fs_agent_driver_done(&d);
        CHECK(d.step == FS_AGENT_S_BEGIN && d.r == r + 1);
        CHECK(fs_agent_driver_progress(&d, 0, 0) > prev);
    }
    power_secagg_round(&d, 2);
    CHECK(d.step == FS_AGENT_S_RESULT);
    CHECK(next(&d, FS_AGENT_J_DONE, 2, &s) == FS_AGENT_DO && s == FS_AGENT_S_RESULT);

    /* a late exchange is skipped (our noise stays in); so is a late unmask
     * followed by an exchange still open */
    CHECK_OK(
        fs_agent_driver_init_power(&d, FS_AGENT_POWER_UTILITY, 3, 2, FS_AGENT_FAIL_NONE, 0, &err),
        &err);
    setup_keys(&d);
    power_secagg_round(&d, 0);
    CHECK(next(&d, FS_AGENT_J_MASKED, 1, &s) == FS_AGENT_DO && s == FS_AGENT_S_BEGIN && d.r == 1);
    fs_agent_driver_done(&d);
    CHECK(next(&d, FS_AGENT_J_MASKED, 1, &s) == FS_AGENT_DO && s == FS_AGENT_S_UPLOAD);
    fs_agent_driver_done(&d);
    CHECK(next(&d, FS_AGENT_J_CONSISTENCY, 1, &s) == FS_AGENT_DO && s == FS_AGENT_S_SURVIVORS);
    fs_agent_driver_done(&d);
    /* consistency and unmask rounds passed without us: the exchange of 1 is open */
    CHECK(next(&d, FS_AGENT_J_NOISE_EXCHANGE, 1, &s) == FS_AGENT_DO && s == FS_AGENT_S_EXCHANGE &&
          d.r == 1);

    /* fail_at noise_exchange:1: exchange 0 happens, 1 crashes */
    CHECK_OK(
        fs_agent_driver_init_power(&d, FS_AGENT_POWER_UTILITY, 3, 2, FS_AGENT_FAIL_NONE, 0, &err),
        &err);
    {
        enum fs_agent_fail_at f;
        uint32_t round = 7;
        CHECK_OK(fs_agent_fail_at_parse_round("noise_exchange:1", &f, &round, &err), &err);
        CHECK(f == FS_AGENT_FAIL_NOISE_EXCHANGE && round == 1);
        CHECK_OK(fs_agent_driver_init_power(&d, FS_AGENT_POWER_UTILITY, 3, 2, f, round, &err),
                 &err);
    }
    setup_keys(&d);
    power_secagg_round(&d, 0);
    CHECK(next(&d, FS_AGENT_J_NOISE_EXCHANGE, 0, &s) == FS_AGENT_DO && s == FS_AGENT_S_EXCHANGE);
    fs_agent_driver_done(&d);
    power_secagg_round(&d, 1);
    CHECK(next(&d, FS_AGENT_J_NOISE_EXCHANGE, 1, &s) == FS_AGENT_CRASH && s == FS_AGENT_S_EXCHANGE);
}

static void test_power_secagg_dropout(void)
{
    struct fs_agent_driver d;
    struct fs_err err = {0};
    struct fs_agent_action a;
    enum fs_agent_fail_at f;
    uint32_t round = 0;
    enum fs_agent_step s;

    /* masked_input:2 of 4 aggregations: rounds 0, 1 complete, round 2 crashes */
    CHECK_OK(fs_agent_fail_at_parse_round("masked_input:2", &f, &round, &err), &err);
    CHECK(f == FS_AGENT_FAIL_MASKED_INPUT && round == 2);
    CHECK_OK(fs_agent_driver_init_power(&d, FS_AGENT_POWER_SECAGG, 4, 0, f, round, &err), &err);
    setup_keys(&d);
    power_secagg_round(&d, 0);
    power_secagg_round(&d, 1);
    CHECK(d.step == FS_AGENT_S_BEGIN && d.r == 2);
    CHECK(next(&d, FS_AGENT_J_MASKED, 2, &s) == FS_AGENT_DO && s == FS_AGENT_S_BEGIN);
    fs_agent_driver_done(&d);
    fs_agent_driver_next(&d, &(struct fs_agent_job_view){FS_AGENT_J_MASKED, 0, 2, NULL}, &a);
    CHECK(a.act == FS_AGENT_CRASH && a.step == FS_AGENT_S_UPLOAD && a.r == 2);
    /* no exchange steps without utility */
    CHECK_OK(
        fs_agent_driver_init_power(&d, FS_AGENT_POWER_SECAGG, 2, 0, FS_AGENT_FAIL_NONE, 0, &err),
        &err);
    setup_keys(&d);
    power_secagg_round(&d, 0);
    CHECK(d.step == FS_AGENT_S_BEGIN && d.r == 1);
    /* the survivors went on to aggregation 1 while we computed: dropped */
    CHECK(next(&d, FS_AGENT_J_CONSISTENCY, 1, &s) == FS_AGENT_FAIL && s == FS_AGENT_S_BEGIN);

    /* parameters */
    CHECK(fs_agent_driver_init_power(&d, FS_AGENT_POWER_SECAGG, 3, 1, FS_AGENT_FAIL_NONE, 0,
                                     &err) == FS_EINVAL);
    CHECK(fs_agent_driver_init_power(&d, FS_AGENT_POWER_UTILITY, 3, 4, FS_AGENT_FAIL_NONE, 0,
                                     &err) == FS_EINVAL);
    CHECK(fs_agent_driver_init_power(&d, FS_AGENT_POWER_NONE, 3, 0, FS_AGENT_FAIL_NONE, 0, &err) ==
          FS_EINVAL);
    CHECK(fs_agent_fail_at_parse_round("share_keys:1", &f, &round, &err) == FS_EINVAL);
    CHECK(fs_agent_fail_at_parse_round("masked_input:", &f, &round, &err) == FS_EINVAL);
    CHECK(fs_agent_fail_at_parse_round("masked_input:1x", &f, &round, &err) == FS_EINVAL);
    CHECK(fs_agent_fail_at_parse_round("masked_input:123456", &f, &round, &err) == FS_EINVAL);
    CHECK(fs_agent_fail_at_parse_round("lunch:1", &f, &round, &err) == FS_EINVAL);
    CHECK_OK(fs_agent_fail_at_parse_round("unmasking", &f, &round, &err), &err);
    CHECK(f == FS_AGENT_FAIL_UNMASKING && round == 0);
    CHECK(fs_agent_jphase_parse("noise_exchange") == FS_AGENT_J_NOISE_EXCHANGE &&
          fs_agent_jphase_parse("plain_upload") == FS_AGENT_J_PLAIN_UPLOAD);
    CHECK(strcmp(fs_agent_step_name(FS_AGENT_S_EXCHANGE), "exchange") == 0);
}

static struct fs_agent_action next_a(struct fs_agent_driver *d, enum fs_agent_jphase ph,
                                     uint32_t r);

/* All-inputs jobs (no allow_dropouts): no consistency round. After the
 * upload, the survivors (once masked input closed, the job straight in
 * unmasking), then the unmask message; a late unmask is skipped; fail_at
 * consistency never fires; a resumed driver replays without the consistency
 * steps. */
static void test_all_inputs(void)
{
    struct fs_agent_driver d;
    struct fs_err err = {0};
    struct fs_agent_action a;
    enum fs_agent_step s;
    double prev;

    CHECK_OK(fs_agent_driver_init_power(&d, FS_AGENT_POWER_UTILITY, 2, 1, FS_AGENT_FAIL_CONSISTENCY,
                                        0, &err),
             &err);
    fs_agent_driver_set_all_inputs(&d, 1);
    setup_keys(&d);
    CHECK(next(&d, FS_AGENT_J_MASKED, 0, &s) == FS_AGENT_DO && s == FS_AGENT_S_BEGIN);
    fs_agent_driver_done(&d);
    CHECK(next(&d, FS_AGENT_J_MASKED, 0, &s) == FS_AGENT_DO && s == FS_AGENT_S_UPLOAD);
    fs_agent_driver_done(&d);
    CHECK(next(&d, FS_AGENT_J_MASKED, 0, &s) == FS_AGENT_WAIT && s == FS_AGENT_S_SURVIVORS);
    CHECK(strcmp(fs_agent_driver_phase(&d), "unmasking") == 0);
    prev = fs_agent_driver_progress(&d, 0, 0);
    CHECK(next(&d, FS_AGENT_J_UNMASKING, 0, &s) == FS_AGENT_DO && s == FS_AGENT_S_SURVIVORS);
    fs_agent_driver_done(&d);
    CHECK(d.step == FS_AGENT_S_UNMASK);
    CHECK(fs_agent_driver_progress(&d, 0, 0) > prev);
    CHECK(next(&d, FS_AGENT_J_UNMASKING, 0, &s) == FS_AGENT_DO && s == FS_AGENT_S_UNMASK);
    fs_agent_driver_done(&d);
    CHECK(d.step == FS_AGENT_S_EXCHANGE && d.r == 0);
    CHECK(next(&d, FS_AGENT_J_NOISE_EXCHANGE, 0, &s) == FS_AGENT_DO && s == FS_AGENT_S_EXCHANGE);
    fs_agent_driver_done(&d);
    /* the Rayleigh sum: the unmasking round closed without us: skipped */
    CHECK(next(&d, FS_AGENT_J_MASKED, 1, &s) == FS_AGENT_DO && s == FS_AGENT_S_BEGIN);
    fs_agent_driver_done(&d);
    CHECK(next(&d, FS_AGENT_J_MASKED, 1, &s) == FS_AGENT_DO && s == FS_AGENT_S_UPLOAD);
    fs_agent_driver_done(&d);
    CHECK(next(&d, FS_AGENT_J_UNMASKING, 1, &s) == FS_AGENT_DO && s == FS_AGENT_S_SURVIVORS);
    fs_agent_driver_done(&d);
    CHECK(next(&d, FS_AGENT_J_DONE, 1, &s) == FS_AGENT_DO && s == FS_AGENT_S_RESULT);

    /* resumed in unmasking of aggregation 1 (fedsvd-like secure sum driver) */
    CHECK_OK(fs_agent_driver_init(&d, 2, FS_AGENT_FAIL_NONE, &err), &err);
    fs_agent_driver_set_all_inputs(&d, 1);
    fs_agent_driver_resume(&d);
    {
        static const enum fs_agent_step local_steps[] = {
            FS_AGENT_S_ADVERTISE, FS_AGENT_S_ROSTER, FS_AGENT_S_SHARE,     FS_AGENT_S_RECEIVE,
            FS_AGENT_S_BEGIN,     FS_AGENT_S_UPLOAD, FS_AGENT_S_SURVIVORS, FS_AGENT_S_UNMASK,
            FS_AGENT_S_BEGIN,     FS_AGENT_S_UPLOAD, FS_AGENT_S_SURVIVORS};
        for (size_t i = 0; i < sizeof local_steps / sizeof local_steps[0]; i++) {
            a = next_a(&d, FS_AGENT_J_UNMASKING, 1);
            CHECK_MSG(a.act == FS_AGENT_DO && a.step == local_steps[i] && a.local == 1,
                      "replay step %zu: act %d step %s local %d", i, (int)a.act,
                      fs_agent_step_name(a.step), a.local);
            fs_agent_driver_done(&d);
        }
    }
    a = next_a(&d, FS_AGENT_J_UNMASKING, 1);
    CHECK(a.act == FS_AGENT_DO && a.step == FS_AGENT_S_UNMASK && a.r == 1 && a.local == 0);

    /* the four-round order stays for the others */
    CHECK_OK(fs_agent_driver_init(&d, 1, FS_AGENT_FAIL_NONE, &err), &err);
    fs_agent_driver_set_all_inputs(&d, 0);
    d.step = FS_AGENT_S_SURVIVORS;
    fs_agent_driver_done(&d);
    CHECK(d.step == FS_AGENT_S_CONSISTENCY);
}

/* next() returning the whole action. */
static struct fs_agent_action next_a(struct fs_agent_driver *d, enum fs_agent_jphase ph, uint32_t r)
{
    struct fs_agent_job_view v = jv(ph, r);
    struct fs_agent_action a;

    fs_agent_driver_next(d, &v, &a);
    return a;
}

/* Resuming after a restart: every step is done again from the first; those
 * of rounds the job has left come back local (rebuild, send nothing) instead
 * of failing the participation as "too late"/"dropped", fail_at never fires
 * on them, and the first step of an open round ends the replay. */
static void test_resume_replay(void)
{
    static const enum fs_agent_step local_steps[] = {
        FS_AGENT_S_ADVERTISE,  FS_AGENT_S_ROSTER, FS_AGENT_S_SHARE,     FS_AGENT_S_RECEIVE,
        FS_AGENT_S_BEGIN,      FS_AGENT_S_UPLOAD, FS_AGENT_S_SURVIVORS, FS_AGENT_S_CONSISTENCY,
        FS_AGENT_S_SIGNATURES, FS_AGENT_S_UNMASK, FS_AGENT_S_BEGIN,     FS_AGENT_S_UPLOAD};
    struct fs_agent_driver d;
    struct fs_err err = {0};
    struct fs_agent_action a;

    CHECK_OK(fs_agent_driver_init(&d, 2, FS_AGENT_FAIL_MASKED_INPUT, &err), &err);
    /* without resume, the job in consistency of aggregation 1 is too late */
    CHECK(next(&d, FS_AGENT_J_CONSISTENCY, 1, NULL) == FS_AGENT_FAIL);
    CHECK_OK(fs_agent_driver_init(&d, 2, FS_AGENT_FAIL_MASKED_INPUT, &err), &err);
    fs_agent_driver_resume(&d);
    for (size_t i = 0; i < sizeof local_steps / sizeof local_steps[0]; i++) {
        a = next_a(&d, FS_AGENT_J_CONSISTENCY, 1);
        CHECK_MSG(a.act == FS_AGENT_DO && a.step == local_steps[i] && a.local == 1,
                  "replay step %zu: act %d step %s local %d", i, (int)a.act,
                  fs_agent_step_name(a.step), a.local);
        fs_agent_driver_done(&d);
    }
    /* aggregation 1's survivors: a GET of a closed round */
    a = next_a(&d, FS_AGENT_J_CONSISTENCY, 1);
    CHECK(a.act == FS_AGENT_DO && a.step == FS_AGENT_S_SURVIVORS && a.r == 1);
    fs_agent_driver_done(&d);
    /* the consistency message of the open round is sent (again): replay over */
    a = next_a(&d, FS_AGENT_J_CONSISTENCY, 1);
    CHECK(a.act == FS_AGENT_DO && a.step == FS_AGENT_S_CONSISTENCY && a.r == 1 && a.local == 0);
    CHECK(d.replay == 0);
    fs_agent_driver_done(&d);
    CHECK(next(&d, FS_AGENT_J_CONSISTENCY, 1, NULL) == FS_AGENT_WAIT);

    /* a secure-sum job already done: straight to the result */
    CHECK_OK(fs_agent_driver_init(&d, 2, FS_AGENT_FAIL_NONE, &err), &err);
    fs_agent_driver_resume(&d);
    a = next_a(&d, FS_AGENT_J_DONE, 1);
    CHECK(a.act == FS_AGENT_DO && a.step == FS_AGENT_S_RESULT && a.local == 0);

    /* resumed while the job still waits for parties: nothing is local */
    CHECK_OK(fs_agent_driver_init(&d, 1, FS_AGENT_FAIL_NONE, &err), &err);
    fs_agent_driver_resume(&d);
    a = next_a(&d, FS_AGENT_J_WAITING, 0);
    CHECK(a.act == FS_AGENT_DO && a.step == FS_AGENT_S_ADVERTISE && a.local == 0);
    CHECK(d.replay == 0);
}

int main(void)
{
    RUN(test_happy_path);
    RUN(test_job_failed);
    RUN(test_too_late_and_dropped);
    RUN(test_late_rounds_after_input_are_skipped);
    RUN(test_unknown_phase_waits);
    RUN(test_fail_at);
    RUN(test_several_aggregations);
    RUN(test_progress_monotone);
    RUN(test_fed_flow);
    RUN(test_fed_dropped);
    RUN(test_power_plain);
    RUN(test_power_utility);
    RUN(test_power_secagg_dropout);
    RUN(test_resume_replay);
    RUN(test_all_inputs);
    return TEST_END("test_agent_driver");
}
