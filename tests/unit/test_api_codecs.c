/* The wire layer a client uses (api/jobs.h, api/jobdoc.h, api/maskset.h):
 * algorithm names, the job spec encoder against the specs the CLI sent
 * by hand (the server's decoder is the judge: both decode to the same
 * spec), and the decoders of the job, job list, creation reply, result
 * and mask-set documents. */
#include <stdlib.h>

#include "../../api/jobdoc.h"
#include "../../api/jobs.h"
#include "../../api/maskset.h"
#include "../../lib/crypto/ed25519.h"
#include "test.h"

static json_t *parse(const char *s)
{
    json_error_t e;
    json_t *j = json_loads(s, 0, &e);
    if (j == NULL) {
        fprintf(stderr, "bad test JSON: %s (%s)\n", s, e.text);
        abort();
    }
    return j;
}

#define FPR1  "1111111111111111111111111111111111111111111111111111111111111111"
#define FPR2  "2222222222222222222222222222222222222222222222222222222222222222"
#define FPR3  "aBcDef0123456789abcdef0123456789abcdef0123456789abcdef0123456789"
#define TOKEN "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
#define JOB   "j-0123456789abcdef0123456789abcdef"

static void test_algo_names(void)
{
    enum fs_algo a = FS_ALGO_SECURE_SUM;

    for (int i = 0; i < FS_ALGO_COUNT; i++) {
        CHECK(fs_algo_parse(fs_algo_name((enum fs_algo)i), &a) == 0 && (int)a == i);
        CHECK(strstr(FS_ALGO_LIST, fs_algo_name((enum fs_algo)i)) != NULL);
    }
    CHECK(fs_algo_parse("fedprox", &a) == -1 && fs_algo_parse(NULL, &a) == -1);
    CHECK(fs_algo_parse("FEDSVD", &a) == -1 && fs_algo_parse("", &a) == -1);
    CHECK(strcmp(fs_algo_name(FS_ALGO_DP_PPM), "dp-ppm") == 0);
    CHECK(strcmp(fs_algo_name((enum fs_algo)FS_ALGO_COUNT), "unknown") == 0);
    CHECK(fs_algo_is_fedsvd(FS_ALGO_FEDPCA) && !fs_algo_is_fedsvd(FS_ALGO_SECURE_SUM));
    CHECK(fs_algo_is_power(FS_ALGO_FEDPOWER) && fs_algo_is_power(FS_ALGO_DP_PPM) &&
          !fs_algo_is_power(FS_ALGO_FEDSVD));
    CHECK(!fs_algo_is_dp(FS_ALGO_FEDPOWER) && fs_algo_is_dp(FS_ALGO_FEDPOWER_UTILITY) &&
          fs_algo_is_dp(FS_ALGO_FEDPOWER_PRIVATE) && fs_algo_is_dp(FS_ALGO_DP_PPM));
    CHECK(fs_algo_fedpower_alg(FS_ALGO_FEDPOWER_UTILITY) == FS_FEDPOWER_UTILITY &&
          fs_algo_fedpower_alg(FS_ALGO_DP_PPM) == FS_FEDPOWER_DPPPM &&
          (int)fs_algo_fedpower_alg(FS_ALGO_FEDSVD) == 0);
}

/* The spec the CLI posted by hand (`cli`) and the one built with
 * fs_job_spec_init + fs_job_spec_encode (`s`) decode alike. */
static void same_spec(const char *cli, const struct fs_job_spec *s, const char *label)
{
    struct fs_err err = {0};
    struct fs_job_spec *a = malloc(sizeof *a);
    struct fs_job_spec *b = malloc(sizeof *b);
    json_t *j = parse(cli);
    json_t *e = fs_job_spec_encode(s);
    int rc;

    CHECK(a != NULL && b != NULL && e != NULL);
    rc = fs_job_spec_decode(j, 1 << 28, a, &err);
    CHECK_MSG(rc == 0, "%s: hand-built spec: %s", label, err.msg);
    rc = fs_job_spec_decode(e, 1 << 28, b, &err);
    CHECK_MSG(rc == 0, "%s: encoded spec: %s", label, err.msg);
    CHECK_MSG(memcmp(a, b, sizeof *a) == 0, "%s: the two specs differ", label);
    CHECK_MSG(a->algo == s->algo, "%s: algo", label);
    /* the server's defaults stay the server's: no threshold when none was set */
    CHECK_MSG((json_object_get(e, "threshold") != NULL) == (s->threshold > 0), "%s: threshold",
              label);
    /* a power job has no pooled shape (the server caps only its uploads) */
    CHECK_MSG((json_object_get(e, "shape") == NULL) == fs_algo_is_power(s->algo), "%s: shape",
              label);
    json_decref(j);
    json_decref(e);
    free(a);
    free(b);
}

static void test_spec_secure_sum(void)
{
    struct fs_job_spec *s = malloc(sizeof *s);
    struct fs_err err = {0};

    CHECK(s != NULL);
    fs_job_spec_init(s, FS_ALGO_SECURE_SUM);
    s->parties = 3;
    s->rows = 4;
    s->cols = 5;
    s->allow_unpinned = 1;
    same_spec(
        "{\"algorithm\":\"secure-sum\",\"parties\":3,\"shape\":[4,5],\"allow_unpinned\":true}", s,
        "secure-sum");
    /* every option the CLI takes: threshold, low threshold, timeouts, name, URL, pins */
    s->parties = 2;
    s->threshold = 1;
    s->allow_low_threshold = 1;
    s->round_timeout_s = 30;
    s->join_timeout_s = 100;
    snprintf(s->name, sizeof s->name, "%s", "nightly");
    snprintf(s->server_url, sizeof s->server_url, "%s", "https://agg.example:8443");
    s->allow_unpinned = 0;
    s->has_pins = 1;
    CHECK_OK(fs_ed25519_fpr_parse(FPR1, s->party_keys[0], &err), &err);
    CHECK_OK(fs_ed25519_fpr_parse(FPR3, s->party_keys[1], &err), &err);
    same_spec("{\"algorithm\":\"secure-sum\",\"parties\":2,\"shape\":[4,5],\"threshold\":1,"
              "\"allow_low_threshold\":true,\"round_timeout_s\":30,\"join_timeout_s\":100,"
              "\"name\":\"nightly\",\"server_url\":\"https://agg.example:8443\","
              "\"party_keys\":[\"" FPR1 "\",\"" FPR3 "\"]}",
              s, "secure-sum, every option");
    free(s);
}

/* "secagg": full | plus, the default by the number of parties, and a
 * decoded spec that encodes and decodes to itself (the server's stored spec). */
static void test_spec_secagg(void)
{
    static const struct {
        const char *json;
        int want; /* enum fs_job_secagg, or -1: refused */
    } cases[] = {
        {"{\"algorithm\":\"secure-sum\",\"parties\":10,\"shape\":[2,2],\"allow_unpinned\":true}",
         FS_JOB_SECAGG_FULL},
        {"{\"algorithm\":\"secure-sum\",\"parties\":20,\"shape\":[2,2],\"allow_unpinned\":true}",
         FS_JOB_SECAGG_PLUS},
        {"{\"algorithm\":\"secure-sum\",\"parties\":50,\"shape\":[2,2],\"allow_unpinned\":true,"
         "\"secagg\":\"full\"}",
         FS_JOB_SECAGG_FULL},
        {"{\"algorithm\":\"secure-sum\",\"parties\":10,\"shape\":[2,2],\"allow_unpinned\":true,"
         "\"secagg\":\"plus\"}",
         FS_JOB_SECAGG_PLUS},
        {"{\"algorithm\":\"fedsvd\",\"parties\":30,\"shape\":[60,4],\"allow_unpinned\":true,"
         "\"party_sizes\":[2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2],"
         "\"secagg\":null}",
         FS_JOB_SECAGG_PLUS},
        {"{\"algorithm\":\"dp-ppm\",\"parties\":4,\"cols\":3,\"party_rows\":[5,5,5,5],"
         "\"k\":1,\"epsilon\":1,\"value_bound\":2,\"allow_unpinned\":true,\"secagg\":\"plus\"}",
         FS_JOB_SECAGG_PLUS},
        /* three parties have no graph thinner than the full one */
        {"{\"algorithm\":\"secure-sum\",\"parties\":3,\"shape\":[2,2],\"allow_unpinned\":true,"
         "\"secagg\":\"plus\"}",
         -1},
        {"{\"algorithm\":\"secure-sum\",\"parties\":30,\"shape\":[2,2],\"allow_unpinned\":true,"
         "\"secagg\":\"half\"}",
         -1},
        {"{\"algorithm\":\"secure-sum\",\"parties\":30,\"shape\":[2,2],\"allow_unpinned\":true,"
         "\"secagg\":1}",
         -1},
    };
    struct fs_job_spec *a = malloc(sizeof *a);
    struct fs_job_spec *b = malloc(sizeof *b);
    struct fs_secagg_config cfg;
    struct fs_err err = {0};
    int mode = 0;

    CHECK(a != NULL && b != NULL);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *j = parse(cases[i].json);
        json_t *e = NULL;
        int rc = fs_job_spec_decode(j, 1 << 28, a, &err);
        if (cases[i].want < 0) {
            CHECK_MSG(rc != 0, "case %zu accepted", i);
            json_decref(j);
            continue;
        }
        CHECK_MSG(rc == 0, "case %zu: %s", i, err.msg);
        CHECK_MSG(a->secagg == cases[i].want, "case %zu: secagg %d", i, a->secagg);
        e = fs_job_spec_encode(a);
        CHECK(e != NULL && json_is_string(json_object_get(e, "secagg")));
        CHECK_OK(fs_job_spec_decode(e, 1 << 28, b, &err), &err);
        CHECK_MSG(memcmp(a, b, sizeof *a) == 0, "case %zu: the round trip differs", i);
        json_decref(e);
        json_decref(j);
    }
    /* a spec built by hand leaves the choice to the server: no member */
    fs_job_spec_init(a, FS_ALGO_SECURE_SUM);
    a->parties = 25;
    a->rows = a->cols = 1;
    a->allow_unpinned = 1;
    {
        json_t *e = fs_job_spec_encode(a);
        CHECK(e != NULL && json_object_get(e, "secagg") == NULL);
        CHECK_OK(fs_job_spec_decode(e, 1 << 28, b, &err), &err);
        CHECK(b->secagg == FS_JOB_SECAGG_PLUS);
        json_decref(e);
    }
    CHECK(fs_job_secagg_parse("plus", &mode) == 0 && mode == FS_JOB_SECAGG_PLUS);
    CHECK(fs_job_secagg_parse("Plus", &mode) == -1 && fs_job_secagg_parse(NULL, &mode) == -1);
    CHECK(strcmp(fs_job_secagg_name(FS_JOB_SECAGG_FULL), "full") == 0);
    CHECK(fs_job_secagg_default(19) == FS_JOB_SECAGG_FULL);
    CHECK(fs_job_secagg_default(20) == FS_JOB_SECAGG_PLUS);
    /* the lib/proto configuration of each mode */
    memset(&cfg, 0, sizeof cfg);
    cfg.n = 50;
    CHECK_OK(fs_job_secagg_config(FS_JOB_SECAGG_PLUS, &cfg, &err), &err);
    CHECK(cfg.degree == 16 && cfg.share_t == 11);
    CHECK_OK(fs_job_secagg_config(FS_JOB_SECAGG_FULL, &cfg, &err), &err);
    CHECK(cfg.degree == 0 && cfg.share_t == 0);
    free(a);
    free(b);
}

static void test_spec_fedsvd(void)
{
    struct fs_job_spec *s = malloc(sizeof *s);

    CHECK(s != NULL);
    fs_job_spec_init(s, FS_ALGO_FEDSVD);
    s->parties = 2;
    s->rows = 10;
    s->cols = 7;
    s->fed.partition = FS_JOB_FEATURES;
    s->fed.party_sizes[0] = 3;
    s->fed.party_sizes[1] = 4;
    s->fed.k = 2;
    s->fed.method = FS_JOB_RANDOMIZED;
    s->fed.allow_dropouts = 1;
    s->allow_unpinned = 1;
    same_spec("{\"algorithm\":\"fedsvd\",\"parties\":2,\"shape\":[10,7],\"partition\":\"features\","
              "\"party_sizes\":[3,4],\"k\":2,\"method\":\"randomized\",\"allow_dropouts\":true,"
              "\"allow_unpinned\":true}",
              s, "fedsvd");
    fs_job_spec_init(s, FS_ALGO_FEDPCA);
    s->parties = 3;
    s->rows = 600;
    s->cols = 50;
    s->fed.party_sizes[0] = 200;
    s->fed.party_sizes[1] = 250;
    s->fed.party_sizes[2] = 150;
    s->fed.standardize = 1;
    s->allow_unpinned = 1;
    same_spec("{\"algorithm\":\"fedpca\",\"parties\":3,\"shape\":[600,50],"
              "\"partition\":\"samples\",\"party_sizes\":[200,250,150],\"method\":\"exact\","
              "\"standardize\":true,\"allow_dropouts\":false,\"allow_unpinned\":true}",
              s, "fedpca");
    free(s);
}

/* The fields the CLI's hand-built power-method spec always wrote. */
#define POWER_COMMON                                                                               \
    "\"parties\":3,\"cols\":20,\"party_rows\":[100,80,120],\"allow_dropouts\":false,"              \
    "\"allow_unpinned\":true,\"k\":3,\"iterations\":92,\"align\":\"global\","                      \
    "\"eigenvalues\":true,\"allow_weak_privacy\":false"

static void power_base(struct fs_job_spec *s, enum fs_algo algo)
{
    fs_job_spec_init(s, algo);
    s->parties = 3;
    s->cols = 20;
    s->power.party_rows[0] = 100;
    s->power.party_rows[1] = 80;
    s->power.party_rows[2] = 120;
    s->power.k = 3;
    s->allow_unpinned = 1;
}

static void test_spec_power(void)
{
    struct fs_job_spec *s = malloc(sizeof *s);

    CHECK(s != NULL);
    power_base(s, FS_ALGO_FEDPOWER);
    s->power.has_sigma = 1;
    s->power.sigma = 0.25;
    s->power.has_sigma_server = 1;
    s->power.sigma_server = 0.5;
    s->power.align = FS_FEDPOWER_ALIGN_CLIENT1;
    s->power.eigenvalues = 0;
    s->power.rank = 5;
    same_spec("{\"algorithm\":\"fedpower\",\"parties\":3,\"cols\":20,\"party_rows\":[100,80,120],"
              "\"allow_dropouts\":false,\"allow_unpinned\":true,\"k\":3,\"rank\":5,"
              "\"iterations\":92,\"sync_every\":4,\"align\":\"client1\",\"delta\":1e-5,"
              "\"eigenvalues\":false,\"allow_weak_privacy\":false,\"sigma\":0.25,"
              "\"sigma_server\":0.5}",
              s, "fedpower");

    power_base(s, FS_ALGO_FEDPOWER_UTILITY);
    s->power.has_epsilon = 1;
    s->power.epsilon = 2.0;
    s->power.value_bound = 40.0;
    s->power.noise_exchange = FS_NOISEX_ELEMENTWISE;
    s->power.paillier_bits = 2048;
    s->power.sync_every = 2;
    s->threshold = 3;
    same_spec("{\"algorithm\":\"fedpower-utility\"," POWER_COMMON ",\"rank\":3,\"sync_every\":2,"
              "\"delta\":1e-5,\"epsilon\":2.0,\"value_bound\":40.0,"
              "\"noise_exchange\":\"elementwise\",\"paillier_bits\":2048,\"threshold\":3}",
              s, "fedpower-utility");

    power_base(s, FS_ALGO_FEDPOWER_PRIVATE);
    s->power.has_sigma = 1;
    s->power.sigma = 0.5;
    s->power.clip_z = 1.0;
    s->power.bound_m = 25.0;
    s->power.bound_mode = FS_FEDPOWER_MHAT_REJECT;
    s->power.allow_dropouts = 1;
    same_spec("{\"algorithm\":\"fedpower-private\",\"parties\":3,\"cols\":20,"
              "\"party_rows\":[100,80,120],\"allow_dropouts\":true,\"allow_unpinned\":true,"
              "\"k\":3,\"rank\":3,\"iterations\":92,\"sync_every\":4,\"align\":\"global\","
              "\"delta\":1e-5,\"eigenvalues\":true,\"allow_weak_privacy\":false,\"sigma\":0.5,"
              "\"clip_z\":1.0,\"bound_m\":25.0,\"bound_mode\":\"reject\"}",
              s, "fedpower-private");

    power_base(s, FS_ALGO_DP_PPM);
    s->power.has_epsilon = 1;
    s->power.epsilon = 1.5;
    s->power.delta = 1e-6;
    s->power.value_bound = 9.0;
    s->power.iterations = 10;
    s->power.allow_weak_privacy = 1;
    same_spec("{\"algorithm\":\"dp-ppm\",\"parties\":3,\"cols\":20,\"party_rows\":[100,80,120],"
              "\"allow_dropouts\":false,\"allow_unpinned\":true,\"k\":3,\"rank\":3,"
              "\"iterations\":10,\"sync_every\":1,\"align\":\"global\",\"delta\":1e-6,"
              "\"eigenvalues\":true,\"allow_weak_privacy\":true,\"epsilon\":1.5,"
              "\"value_bound\":9.0}",
              s, "dp-ppm");
    free(s);
}

static void test_job_status(void)
{
    struct fs_err err = {0};
    struct fs_job_status *st = malloc(sizeof *st);
    json_t *j = parse("{\"id\":\"" JOB "\",\"algorithm\":\"fedpca\",\"name\":\"n1\","
                      "\"phase\":\"masked_input\",\"state\":\"running\",\"aggregation\":1,"
                      "\"aggregations\":3,\"parties\":3,\"threshold\":2,\"shape\":[600,50],"
                      "\"present\":[1,3],\"dropped\":[2],\"bytes_in\":1000,\"bytes_out\":20,"
                      "\"timings\":{\"advertise_keys\":0.5,\"share_keys\":1.25},"
                      "\"deadline_in_s\":12.5,\"created_at\":\"2026-01-01T00:00:00Z\","
                      "\"error\":null,\"chunk_words\":4096,\"round\":2,\"k\":null}");

    CHECK(st != NULL);
    CHECK_OK(fs_job_status_decode(j, st, &err), &err);
    CHECK(strcmp(st->id, JOB) == 0 && st->algo_known && st->algo == FS_ALGO_FEDPCA);
    CHECK(st->state == FS_JOB_STATE_RUNNING && strcmp(st->phase, "masked_input") == 0);
    CHECK(st->phase_known && st->phase_id == FS_JOB_MASKED_INPUT);
    CHECK(st->aggregation == 1 && st->aggregations == 3 && st->parties == 3 && st->threshold == 2);
    CHECK(st->has_shape && st->rows == 600 && st->cols == 50);
    CHECK(st->npresent == 2 && st->present[1] == 3 && st->ndropped == 1 && st->dropped[0] == 2);
    CHECK(fs_job_ids_has(st->dropped, st->ndropped, 2) &&
          !fs_job_ids_has(st->dropped, st->ndropped, 1));
    CHECK(st->bytes_in == 1000 && st->bytes_out == 20);
    CHECK(st->ntimings == 2 && strcmp(st->timings[1].name, "share_keys") == 0 &&
          st->timings[1].seconds == 1.25);
    CHECK(st->has_deadline && st->deadline_in_s == 12.5 && !st->has_error);
    CHECK(strcmp(st->name, "n1") == 0 && strcmp(st->created_at, "2026-01-01T00:00:00Z") == 0);
    /* a failed job's reason; an algorithm of a newer server still decodes */
    json_object_set_new(j, "state", json_string("failed"));
    json_object_set_new(j, "error", json_string("party 2 dropped"));
    json_object_set_new(j, "deadline_in_s", json_null());
    json_object_set_new(j, "algorithm", json_string("fedprox"));
    CHECK_OK(fs_job_status_decode(j, st, &err), &err);
    CHECK(st->state == FS_JOB_STATE_FAILED && st->has_error &&
          strcmp(st->error, "party 2 dropped") == 0);
    CHECK(!st->has_deadline && !st->algo_known && strcmp(st->algorithm, "fedprox") == 0);
    json_object_set_new(j, "phase", json_string("iteration")); /* a later server's phase */
    CHECK_OK(fs_job_status_decode(j, st, &err), &err);
    CHECK(!st->phase_known && strcmp(st->phase, "iteration") == 0);
    /* bad documents */
    json_object_set_new(j, "state", json_string("paused"));
    CHECK(fs_job_status_decode(j, st, &err) == FS_EINVAL && strstr(err.msg, "job.state") != NULL);
    json_object_set_new(j, "state", json_string("done"));
    json_object_set_new(j, "dropped", parse("[4]"));
    CHECK(fs_job_status_decode(j, st, &err) == FS_EINVAL && strstr(err.msg, "dropped") != NULL);
    json_object_set_new(j, "dropped", parse("[\"2\"]"));
    CHECK(fs_job_status_decode(j, st, &err) == FS_EFORMAT);
    json_object_set_new(j, "dropped", parse("[]"));
    json_object_set_new(j, "threshold", json_integer(4));
    CHECK(fs_job_status_decode(j, st, &err) == FS_EINVAL);
    json_object_set_new(j, "threshold", json_integer(2));
    json_object_set_new(j, "timings", json_pack("{s:s}", "x", "1"));
    CHECK(fs_job_status_decode(j, st, &err) == FS_EFORMAT);
    json_object_del(j, "timings");
    json_object_del(j, "phase");
    CHECK(fs_job_status_decode(j, st, &err) == FS_EFORMAT && strstr(err.msg, "phase") != NULL);
    CHECK(fs_job_status_decode(NULL, st, &err) == FS_EFORMAT);
    json_decref(j);
    free(st);
}

static json_t *invitation_json(uint32_t party)
{
    return json_pack("{s:i, s:s, s:s, s:i, s:s, s:s, s:i, s:i, s:[i,i]}", "version", 1, "job_id",
                     JOB, "job_url", "http://127.0.0.1:1/v1/jobs/" JOB, "party", (int)party,
                     "token", TOKEN, "algorithm", "secure-sum", "parties", 2, "threshold", 2,
                     "shape", 2, 2);
}

static void test_job_list_created(void)
{
    struct fs_err err = {0};
    struct fs_job_status *st = malloc(sizeof *st);
    struct fs_invitation *inv = malloc(sizeof *inv);
    const json_t *a = NULL;
    size_t n = 9;
    json_t *job = parse("{\"id\":\"" JOB "\",\"algorithm\":\"secure-sum\",\"phase\":"
                        "\"waiting_for_parties\",\"state\":\"running\",\"parties\":2}");
    json_t *j = json_pack("{s:[O]}", "jobs", job);

    CHECK(st != NULL && inv != NULL);
    CHECK_OK(fs_job_list_decode(j, &a, &n, &err), &err);
    CHECK(n == 1 && a == json_object_get(j, "jobs"));
    CHECK_OK(fs_job_status_decode(json_array_get(a, 0), st, &err), &err);
    CHECK(st->algo == FS_ALGO_SECURE_SUM && st->threshold == 0 && !st->has_shape);
    json_decref(j);
    j = parse("{\"jobs\":{}}");
    CHECK(fs_job_list_decode(j, &a, &n, &err) == FS_EFORMAT && a == NULL && n == 0);
    json_decref(j);

    j = json_pack("{s:O, s:[o,o]}", "job", job, "invitations", invitation_json(1),
                  invitation_json(2));
    CHECK_OK(fs_job_created_decode(j, st, &a, &err), &err);
    CHECK(st->parties == 2 && json_array_size(a) == 2);
    CHECK(fs_invitation_add_maskset((json_t *)json_array_get(a, 1), "https://m.example", "m-1") ==
          0);
    CHECK(strcmp(json_string_value(json_object_get(json_array_get(a, 1), "maskset")), "m-1") == 0 &&
          strcmp(json_string_value(json_object_get(json_array_get(a, 1), "masking_url")),
                 "https://m.example") == 0);
    CHECK(fs_invitation_add_maskset(NULL, "https://m.example", "m-1") == -1);
    CHECK_OK(fs_invitation_decode(json_array_get(a, 0), inv, &err), &err);
    CHECK(inv->party == 1 && inv->algo_known && inv->algo == FS_ALGO_SECURE_SUM);
    fs_invitation_wipe(inv);
    /* out of order, or one short */
    json_array_insert_new(json_object_get(j, "invitations"), 0, invitation_json(2));
    json_array_remove(json_object_get(j, "invitations"), 2);
    CHECK(fs_job_created_decode(j, st, &a, &err) == FS_EINVAL && a == NULL);
    json_array_remove(json_object_get(j, "invitations"), 1);
    CHECK(fs_job_created_decode(j, st, &a, &err) == FS_EINVAL);
    json_decref(j);
    json_decref(job);
    free(st);
    free(inv);
}

static void test_job_result(void)
{
    struct fs_err err = {0};
    struct fs_job_result *r = malloc(sizeof *r);
    json_t *j = parse("{\"algorithm\":\"secure-sum\",\"shape\":[2,3],\"parties\":3,"
                      "\"survivors\":[1,3],\"dropped\":[2],\"files\":[{\"name\":\"sum.npy\","
                      "\"shape\":[2,3],\"sha256\":\"" FPR3 "\"}],\"fixed_point\":{}}");

    CHECK(r != NULL);
    CHECK_OK(fs_job_result_decode(j, 0, r, &err), &err);
    CHECK(r->algo == FS_ALGO_SECURE_SUM && r->has_shape && r->rows == 2 && r->cols == 3);
    CHECK(r->nsurvivors == 2 && r->survivors[1] == 3 && r->ndropped == 1);
    CHECK(r->nfiles == 1 && strcmp(r->files[0].name, "sum.npy") == 0 && !r->files[0].has_bytes);
    CHECK(strncmp(r->files[0].sha256, "abcdef", 6) == 0); /* lower-cased */
    CHECK(fs_job_result_decode(j, 1, r, &err) == FS_EFORMAT && strstr(err.msg, "bytes") != NULL);
    json_object_set_new(j, "files", parse("[{\"name\":\"../x.npy\",\"sha256\":\"" FPR1 "\"}]"));
    CHECK(fs_job_result_decode(j, 0, r, &err) == FS_EINVAL);
    json_object_set_new(j, "files", parse("[]"));
    json_object_set_new(j, "survivors", parse("[1,4]"));
    CHECK(fs_job_result_decode(j, 0, r, &err) == FS_EINVAL);
    json_object_del(j, "survivors");
    json_object_del(j, "files");
    CHECK(fs_job_result_decode(j, 0, r, &err) == FS_EFORMAT);
    json_decref(j);
    free(r);
}

static void test_maskset(void)
{
    struct fs_err err = {0};
    struct fs_maskset_request *q = calloc(1, sizeof *q);
    struct fs_maskset_created *c = malloc(sizeof *c);
    struct fs_job_maskset m;
    struct fs_job_maskset back;
    json_t *j;
    json_t *want;

    CHECK(q != NULL && c != NULL);
    snprintf(q->job_id, sizeof q->job_id, "%s", JOB);
    q->partition = FS_JOB_FEATURES;
    q->parties = 2;
    q->sizes[0] = 3;
    q->sizes[1] = 4;
    q->shared = 10;
    CHECK_OK(fs_ed25519_fpr_parse(FPR1, q->identities[0], &err), &err);
    CHECK_OK(fs_ed25519_fpr_parse(FPR2, q->identities[1], &err), &err);
    j = fs_maskset_request_encode(q);
    /* what cmd_job.c posted by hand */
    want = parse("{\"job_id\":\"" JOB "\",\"partition\":\"features\",\"parties\":["
                 "{\"party\":1,\"cols\":3,\"identity\":\"" FPR1 "\"},"
                 "{\"party\":2,\"cols\":4,\"identity\":\"" FPR2 "\"}],\"rows\":10}");
    CHECK(json_equal(j, want));
    json_decref(j);
    q->partition = FS_JOB_SAMPLES;
    q->block_size = 64;
    snprintf(q->server_url, sizeof q->server_url, "%s", "http://127.0.0.1:9");
    j = fs_maskset_request_encode(q);
    CHECK(json_integer_value(json_object_get(j, "cols")) == 10 &&
          json_object_get(j, "rows") == NULL &&
          json_integer_value(json_object_get(j, "block_size")) == 64 &&
          strcmp(json_string_value(json_object_get(j, "server_url")), "http://127.0.0.1:9") == 0 &&
          json_integer_value(
              json_object_get(json_array_get(json_object_get(j, "parties"), 1), "rows")) == 4);
    json_decref(j);
    json_decref(want);
    q->parties = 0;
    CHECK(fs_maskset_request_encode(q) == NULL);

    j = parse("{\"maskset\":{\"id\":\"m-0123\",\"job_id\":\"" JOB "\"},\"end_token\":\"" TOKEN
              "\",\"parties\":[{\"party\":1,\"identity\":\"" FPR1
              "\",\"keys_url\":\"http://m/k1\"},"
              "{\"party\":2,\"identity\":\"" FPR2 "\",\"keys_url\":\"http://m/k2\"}]}");
    CHECK_OK(fs_maskset_created_decode(j, 2, c, &err), &err);
    CHECK(strcmp(c->id, "m-0123") == 0 && strcmp(c->end_token, TOKEN) == 0 && c->nparties == 2);
    CHECK(memcmp(c->parties[1].identity, q->identities[1], 32) == 0 &&
          strcmp(c->parties[1].keys_url, "http://m/k2") == 0);
    fs_maskset_created_wipe(c);
    CHECK(c->end_token[0] == '\0');
    CHECK(fs_maskset_created_decode(j, 3, c, &err) == FS_EINVAL);
    json_object_set_new(json_object_get(j, "maskset"), "id", json_string("m/1"));
    CHECK(fs_maskset_created_decode(j, 2, c, &err) == FS_EINVAL);
    json_object_set_new(json_object_get(j, "maskset"), "id", json_string("m-1"));
    json_object_set_new(j, "end_token", json_string("short"));
    CHECK(fs_maskset_created_decode(j, 2, c, &err) == FS_EINVAL);
    json_object_del(j, "end_token");
    CHECK(fs_maskset_created_decode(j, 2, c, &err) == FS_EFORMAT);
    json_decref(j);

    /* PUT /v1/jobs/{job}/maskset: the server's decoder reads what the encoder writes */
    memset(&m, 0, sizeof m);
    snprintf(m.masking_url, sizeof m.masking_url, "%s", "https://m.example:8444");
    snprintf(m.maskset, sizeof m.maskset, "%s", "m-0123");
    snprintf(m.end_token, sizeof m.end_token, "%s", TOKEN);
    j = fs_job_maskset_encode(&m);
    CHECK_OK(fs_job_maskset_decode(j, &back, &err), &err);
    CHECK(memcmp(&m, &back, sizeof m) == 0);
    json_decref(j);
    CHECK(fs_maskset_id_valid("m-0123") && !fs_maskset_id_valid("") && !fs_maskset_id_valid("a b"));
    free(q);
    free(c);
}

/* The spec field "shards" (default 1, 1..16, fedsvd/fedpca samples only:
 * else 400) and the Job document's "shards" list. */
static void test_shards(void)
{
    struct fs_err err = {0};
    struct fs_job_spec *s = malloc(sizeof *s);
    struct fs_job_status *st = malloc(sizeof *st);
    struct fs_job_shard sh[2] = {{0, "http://127.0.0.1:1", 0, 5, 0, 35},
                                 {1, "https://peer.example:8446", 5, 10, 35, 35}};
    json_t *j;
    json_t *e;
    json_t *list;

    CHECK(s != NULL && st != NULL);
#define FED_SPEC(extra)                                                                            \
    "{\"algorithm\":\"fedsvd\",\"parties\":2,\"shape\":[10,7],\"party_sizes\":[4,6],"              \
    "\"allow_unpinned\":true" extra "}"
    j = parse(FED_SPEC(""));
    CHECK_OK(fs_job_spec_decode(j, 1 << 28, s, &err), &err);
    CHECK(s->fed.shards == 0); /* absent, as in a stored job: one server */
    e = fs_job_spec_encode(s);
    CHECK(e != NULL && json_object_get(e, "shards") == NULL); /* 1 is not written */
    json_decref(e);
    json_decref(j);
    j = parse(FED_SPEC(",\"shards\":4"));
    CHECK_OK(fs_job_spec_decode(j, 1 << 28, s, &err), &err);
    CHECK(s->fed.shards == 4);
    e = fs_job_spec_encode(s);
    CHECK(e != NULL && json_integer_value(json_object_get(e, "shards")) == 4);
    json_decref(e);
    json_decref(j);
    j = parse(FED_SPEC(",\"shards\":17"));
    CHECK(fs_job_spec_decode(j, 1 << 28, s, &err) == FS_EINVAL);
    json_decref(j);
    j = parse(FED_SPEC(",\"shards\":11")); /* more shards than rows */
    CHECK(fs_job_spec_decode(j, 1 << 28, s, &err) == FS_EINVAL);
    json_decref(j);
    j = parse("{\"algorithm\":\"fedsvd\",\"parties\":2,\"shape\":[10,7],\"party_sizes\":[3,4],"
              "\"partition\":\"features\",\"shards\":2,\"allow_unpinned\":true}");
    CHECK(fs_job_spec_decode(j, 1 << 28, s, &err) == FS_EFORMAT &&
          strstr(err.msg, "samples partition") != NULL);
    json_decref(j);
    j = parse("{\"algorithm\":\"secure-sum\",\"parties\":2,\"shape\":[2,2],\"shards\":3}");
    CHECK(fs_job_spec_decode(j, 1 << 28, s, &err) == FS_EFORMAT &&
          strstr(err.msg, "shards need fedsvd or fedpca") != NULL);
    json_decref(j);
    j = parse("{\"algorithm\":\"secure-sum\",\"parties\":2,\"shape\":[2,2],\"shards\":1,"
              "\"allow_unpinned\":true}");
    CHECK_OK(fs_job_spec_decode(j, 1 << 28, s, &err), &err);
    json_decref(j);
#undef FED_SPEC
    /* the Job document's list */
    j = parse("{\"id\":\"" JOB "\",\"algorithm\":\"fedsvd\",\"phase\":\"masked_input\","
              "\"state\":\"running\",\"parties\":2}");
    CHECK_OK(fs_job_status_decode(j, st, &err), &err);
    CHECK(st->nshards == 0);
    list = fs_job_shards_encode(sh, 2);
    CHECK(list != NULL && json_array_size(list) == 2);
    json_object_set_new(j, "shards", list);
    CHECK_OK(fs_job_status_decode(j, st, &err), &err);
    CHECK(st->nshards == 2 && st->shards[1].shard == 1 && st->shards[1].lo == 5 &&
          st->shards[1].hi == 10 && st->shards[1].off == 35 && st->shards[1].len == 35 &&
          strcmp(st->shards[1].url, "https://peer.example:8446") == 0);
    json_object_set_new(json_array_get(list, 1), "shard", json_integer(2)); /* out of order */
    CHECK(fs_job_status_decode(j, st, &err) == FS_EINVAL);
    json_object_set_new(json_array_get(list, 1), "shard", json_integer(1));
    json_object_set_new(json_array_get(list, 1), "rows", parse("[5]"));
    CHECK(fs_job_status_decode(j, st, &err) == FS_EFORMAT);
    json_object_set_new(j, "shards", parse("[]"));
    CHECK(fs_job_status_decode(j, st, &err) == FS_EFORMAT);
    json_decref(j);
    free(s);
    free(st);
}

int main(void)
{
    RUN(test_algo_names);
    RUN(test_spec_secure_sum);
    RUN(test_spec_secagg);
    RUN(test_spec_fedsvd);
    RUN(test_spec_power);
    RUN(test_job_status);
    RUN(test_job_list_created);
    RUN(test_job_result);
    RUN(test_maskset);
    RUN(test_shards);
    return TEST_END("test_api_codecs");
}
