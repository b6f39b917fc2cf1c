/* Power-method job parameters (api/jobs.h, docs/wire-fedpower.md): job spec,
 * invitation and the lib/proto configuration built from them. */
#include <stdlib.h>

#include "../../api/jobs.h"
#include "../../lib/dp/dgauss.h"
#include "../../lib/proto/fedpower.h"
#include "../../lib/proto/noise_exchange.h"
#include "test.h"

static json_t *parse(const char *s)
{
    json_error_t e;
    json_t *j = json_loads(s, 0, &e);
    if (j == NULL) {
        fprintf(stderr, "bad test JSON: %s\n", s);
        abort();
    }
    return j;
}

#define BASE "\"parties\":3,\"cols\":20,\"party_rows\":[100,80,120],\"k\":3,\"allow_unpinned\":true"

static void test_spec_defaults(void)
{
    struct fs_err err = {0};
    struct fs_job_spec s;
    struct fs_job_spec s2;
    struct fs_fedpower_config cfg;
    uint64_t rows[FS_JOB_MAX_PARTIES];
    json_t *j = parse("{\"algorithm\":\"fedpower-private\"," BASE
                      ",\"sigma\":0.5,\"clip_z\":1.0,\"bound_m\":25}");
    json_t *e;

    CHECK_OK(fs_job_spec_decode(j, 1 << 28, &s, &err), &err);
    CHECK(s.algo == FS_ALGO_FEDPOWER_PRIVATE && fs_algo_is_power(s.algo) &&
          !fs_algo_is_fedsvd(s.algo));
    CHECK(s.parties == 3 && s.threshold == 2 && s.cols == 20 && s.rows == 300);
    CHECK(s.power.k == 3 && s.power.rank == 3 && s.power.iterations == 92);
    CHECK(s.power.sync_every == 4 && s.power.align == FS_FEDPOWER_ALIGN_GLOBAL);
    CHECK(s.power.has_sigma && s.power.sigma == 0.5 && !s.power.has_epsilon);
    CHECK(s.power.delta == 1e-5 && s.power.eigenvalues == 1 && !s.power.allow_dropouts);
    CHECK(s.power.clip_z == 1.0 && s.power.bound_m == 25.0 && !s.power.has_z0_seed);
    CHECK(s.power.party_rows[1] == 80 && s.power.paillier_bits == 0);
    /* the server draws the seed; the encoded spec carries it and round-trips */
    for (int i = 0; i < 32; i++) {
        s.power.z0_seed[i] = (uint8_t)(i * 7 + 1);
    }
    s.power.has_z0_seed = 1;
    e = fs_job_spec_encode(&s);
    CHECK(json_is_string(json_object_get(e, "z0_seed")) &&
          strlen(json_string_value(json_object_get(e, "z0_seed"))) == 64);
    CHECK(json_integer_value(json_object_get(e, "cols")) == 20);
    CHECK(json_object_get(e, "noise_exchange") == NULL);
    CHECK_OK(fs_job_spec_decode(e, 1 << 28, &s2, &err), &err);
    CHECK(memcmp(&s, &s2, sizeof s) == 0);
    json_decref(e);
    CHECK_OK(fs_job_fedpower_config(&s, &cfg, rows, &err), &err);
    CHECK(cfg.alg == FS_FEDPOWER_PRIVATE && cfg.parties == 3 && cfg.threshold == 2);
    CHECK(cfg.d == 20 && cfg.r == 3 && cfg.k == 3 && cfg.iterations == 92);
    CHECK(cfg.calib == FS_FEDPOWER_SIGMA_GIVEN && cfg.sigma == 0.5 && cfg.m_hat == 25.0);
    CHECK(cfg.z_hat == 1.0 && cfg.value_bound == 0.0 && cfg.z0_seed[1] == 8);
    CHECK(rows[0] == 100 && rows[1] == 80 && rows[2] == 120 && rows[3] == 0);
    json_decref(j);
}

static void test_spec_utility(void)
{
    struct fs_err err = {0};
    struct fs_job_spec s;
    struct fs_fedpower_config cfg;
    uint64_t rows[FS_JOB_MAX_PARTIES];
    json_t *j = parse("{\"algorithm\":\"fedpower-utility\"," BASE
                      ",\"rank\":5,\"iterations\":8,\"sync_every\":2,\"value_bound\":4,"
                      "\"noise_exchange\":\"elementwise\",\"paillier_bits\":1024,"
                      "\"eigenvalues\":false,\"allow_dropouts\":true,\"threshold\":3}");

    CHECK_OK(fs_job_spec_decode(j, 1 << 28, &s, &err), &err);
    CHECK(s.power.rank == 5 && s.power.iterations == 8 && s.power.sync_every == 2);
    CHECK(s.power.noise_exchange == FS_NOISEX_ELEMENTWISE && s.power.paillier_bits == 1024);
    CHECK(!s.power.eigenvalues && s.power.allow_dropouts && !s.power.has_sigma);
    CHECK_OK(fs_job_fedpower_config(&s, &cfg, rows, &err), &err);
    CHECK(cfg.sigma == 0.0 && cfg.calib == FS_FEDPOWER_SIGMA_GIVEN && cfg.value_bound == 4.0);
    CHECK(fs_fedpower_syncs(&cfg) == 4 && cfg.threshold == 3);
    json_decref(j);
    /* dp-ppm with epsilon: calibrated, p defaults to 1 */
    j = parse("{\"algorithm\":\"dp-ppm\"," BASE ",\"epsilon\":2,\"delta\":1e-6,"
              "\"value_bound\":1,\"iterations\":10}");
    CHECK_OK(fs_job_spec_decode(j, 1 << 28, &s, &err), &err);
    CHECK(s.power.sync_every == 1 && s.power.has_epsilon && s.power.epsilon == 2.0);
    CHECK_OK(fs_job_fedpower_config(&s, &cfg, rows, &err), &err);
    CHECK(cfg.calib == FS_FEDPOWER_SIGMA_FROM_EPS && cfg.eps == 2.0 && cfg.delta == 1e-6);
    json_decref(j);
    /* shape instead of cols */
    j = parse("{\"algorithm\":\"fedpower\",\"allow_unpinned\":true,\"parties\":2,\"shape\":[9,7],"
              "\"party_rows\":[4,5],"
              "\"k\":2,\"sigma\":0.1,\"sigma_server\":0.2,\"align\":\"client1\","
              "\"iterations\":4}");
    CHECK_OK(fs_job_spec_decode(j, 1 << 28, &s, &err), &err);
    CHECK(s.cols == 7 && s.rows == 9 && s.power.align == FS_FEDPOWER_ALIGN_CLIENT1);
    CHECK(s.power.has_sigma_server && s.power.sigma_server == 0.2);
    json_decref(j);
}

/* noise_exchange "ot": decoded, encoded back without a Paillier key size,
 * and a key size given with it is refused */
static void test_spec_ot(void)
{
    struct fs_err err = {0};
    struct fs_job_spec s;
    struct fs_job_spec back;
    struct fs_fedpower_config cfg;
    uint64_t rows[FS_JOB_MAX_PARTIES];
    json_t *j = parse("{\"algorithm\":\"fedpower-utility\"," BASE
                      ",\"value_bound\":4,\"noise_exchange\":\"ot\"}");
    json_t *e;

    CHECK_OK(fs_job_spec_decode(j, 1 << 28, &s, &err), &err);
    CHECK(s.power.noise_exchange == FS_NOISEX_OT && s.power.paillier_bits == 0);
    CHECK_OK(fs_job_fedpower_config(&s, &cfg, rows, &err), &err);
    CHECK(cfg.noise_exchange == FS_NOISEX_OT);
    json_decref(j);
    e = fs_job_spec_encode(&s);
    CHECK(e != NULL);
    CHECK(strcmp(json_string_value(json_object_get(e, "noise_exchange")), "ot") == 0);
    CHECK(json_object_get(e, "paillier_bits") == NULL);
    CHECK_OK(fs_job_spec_decode(e, 1 << 28, &back, &err), &err);
    CHECK(back.power.noise_exchange == FS_NOISEX_OT && back.power.paillier_bits == 0);
    json_decref(e);
    j = parse("{\"algorithm\":\"fedpower-utility\"," BASE
              ",\"value_bound\":4,\"noise_exchange\":\"ot\",\"paillier_bits\":2048}");
    CHECK(fs_job_spec_decode(j, 1 << 28, &s, &err) == FS_EINVAL &&
          strstr(err.msg, "paillier_bits: does not apply to noise_exchange ot"));
    json_decref(j);
    j = parse("{\"algorithm\":\"fedpower-utility\"," BASE
              ",\"value_bound\":4,\"noise_exchange\":\"xor\"}");
    CHECK(fs_job_spec_decode(j, 1 << 28, &s, &err) == FS_EINVAL &&
          strstr(err.msg, "expected seed, ot or elementwise"));
    json_decref(j);
    /* the library took ot without a key size above; seed still needs one */
    cfg.noise_exchange = FS_NOISEX_SEED;
    CHECK(fs_fedpower_config_check(&cfg, &err) == FS_EINVAL && strstr(err.msg, "paillier_bits"));
}

static void test_spec_bad(void)
{
    const char *bad[][2] = {
        /* missing / wrong JSON types: 400 */
        {"{\"algorithm\":\"fedpower\",\"parties\":3,\"party_rows\":[1,2,3],\"k\":1}", "400"},
        {"{\"algorithm\":\"fedpower\",\"parties\":3,\"cols\":20,\"k\":1}", "400"},
        {"{\"algorithm\":\"fedpower\",\"parties\":3,\"cols\":20,\"party_rows\":[1,2,3]}", "400"},
        {"{\"algorithm\":\"fedpower\"," BASE ",\"sigma\":\"0.1\"}", "400"},
        {"{\"algorithm\":\"fedpower\",\"parties\":3,\"cols\":20,\"party_rows\":[1,\"2\",3],"
         "\"k\":1}",
         "400"},
        {"{\"algorithm\":\"fedpower\"," BASE ",\"eigenvalues\":1}", "400"},
        {"{\"algorithm\":\"fedpower-private\"," BASE ",\"sigma\":1,\"bound_m\":2}", "400"},
        {"{\"algorithm\":\"fedpower\"," BASE ",\"z0_seed\":5}", "400"},
        /* out of range, bad combinations: 422 */
        {"{\"algorithm\":\"fedpower\"," BASE ",\"rank\":2}", "422"},
        {"{\"algorithm\":\"fedpower\"," BASE ",\"rank\":21}", "422"},
        {"{\"algorithm\":\"fedpower\",\"parties\":3,\"cols\":20,\"party_rows\":[1,2],\"k\":1}",
         "422"},
        {"{\"algorithm\":\"fedpower\",\"parties\":3,\"cols\":20,\"party_rows\":[1,0,2],\"k\":1}",
         "422"},
        {"{\"algorithm\":\"fedpower\"," BASE ",\"k\":21}", "422"},
        {"{\"algorithm\":\"dp-ppm\"," BASE ",\"sigma\":1,\"value_bound\":1,\"sync_every\":2}",
         "422"},
        {"{\"algorithm\":\"fedpower\"," BASE ",\"iterations\":3,\"sync_every\":4}", "422"},
        {"{\"algorithm\":\"fedpower-utility\"," BASE ",\"value_bound\":1,\"align\":\"client1\"}",
         "422"},
        {"{\"algorithm\":\"fedpower\"," BASE ",\"align\":\"left\"}", "422"},
        {"{\"algorithm\":\"fedpower-private\"," BASE ",\"clip_z\":1,\"bound_m\":2}", "422"},
        {"{\"algorithm\":\"fedpower-private\"," BASE
         ",\"sigma\":1,\"epsilon\":1,\"clip_z\":1,\"bound_m\":2}",
         "422"},
        {"{\"algorithm\":\"fedpower-private\"," BASE ",\"sigma\":0,\"clip_z\":1,\"bound_m\":2}",
         "422"},
        {"{\"algorithm\":\"fedpower-private\"," BASE ",\"sigma\":1,\"clip_z\":0,\"bound_m\":2}",
         "422"},
        {"{\"algorithm\":\"dp-ppm\"," BASE ",\"sigma\":1}", "422"}, /* value_bound required */
        {"{\"algorithm\":\"fedpower-utility\"," BASE ",\"value_bound\":1,\"paillier_bits\":512}",
         "422"},
        {"{\"algorithm\":\"fedpower-utility\"," BASE
         ",\"value_bound\":1,\"noise_exchange\":\"xor\"}",
         "422"},
        {"{\"algorithm\":\"fedpower\"," BASE ",\"noise_exchange\":\"seed\"}", "422"},
        {"{\"algorithm\":\"fedpower-utility\"," BASE ",\"value_bound\":1,\"sigma_server\":1}",
         "422"},
        {"{\"algorithm\":\"fedpower\"," BASE ",\"clip_z\":1}", "422"},
        {"{\"algorithm\":\"fedpower\"," BASE ",\"delta\":1}", "422"},
        {"{\"algorithm\":\"fedpower\"," BASE ",\"epsilon\":-1}", "422"},
        {"{\"algorithm\":\"fedpower\"," BASE ",\"sigma\":-0.1}", "422"},
        {"{\"algorithm\":\"fedpower\"," BASE ",\"z0_seed\":\"00ff\"}", "422"},
        {"{\"algorithm\":\"fedpower\"," BASE ",\"partition\":\"samples\"}", "422"},
        {"{\"algorithm\":\"fedpower\"," BASE ",\"shape\":[300,19]}", "422"},
        {"{\"algorithm\":\"secure-sum\",\"parties\":2,\"shape\":[2,2],\"rank\":2}", "422"},
        {"{\"algorithm\":\"fedsvd\",\"parties\":2,\"shape\":[10,7],\"party_sizes\":[5,5],"
         "\"iterations\":3}",
         "422"},
    };
    struct fs_err err = {0};
    struct fs_job_spec s;

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int want = strcmp(bad[i][1], "422") == 0 ? FS_EINVAL : FS_EFORMAT;
        json_t *j = parse(bad[i][0]);
        int rc = fs_job_spec_decode(j, 1 << 28, &s, &err);
        CHECK_MSG(rc == want, "case %zu: rc %d (%s)", i, rc, err.msg);
        json_decref(j);
    }
    /* d * r over the server's element limit */
    {
        json_t *j = parse("{\"algorithm\":\"fedpower\"," BASE "}");
        CHECK(fs_job_spec_decode(j, 50, &s, &err) == FS_EINVAL && strstr(err.msg, "limit"));
        json_decref(j);
    }
}

static void test_invitation(void)
{
    struct fs_err err = {0};
    struct fs_job_spec s;
    struct fs_invitation inv;
    struct fs_invitation back;
    struct fs_fedpower_config c1;
    struct fs_fedpower_config c2;
    uint64_t r1[FS_JOB_MAX_PARTIES];
    uint64_t r2[FS_JOB_MAX_PARTIES];
    json_t *j = parse("{\"algorithm\":\"fedpower-utility\"," BASE ",\"value_bound\":3}");

    CHECK_OK(fs_job_spec_decode(j, 1 << 28, &s, &err), &err);
    json_decref(j);
    s.power.has_z0_seed = 1;
    s.power.z0_seed[31] = 0xab;
    memset(&inv, 0, sizeof inv);
    inv.version = 1;
    CHECK_OK(fs_job_id_generate(inv.job_id, &err), &err);
    snprintf(inv.job_url, sizeof inv.job_url, "http://127.0.0.1:8443/v1/jobs/%s", inv.job_id);
    inv.party = 2;
    CHECK_OK(fs_auth_token_generate(inv.token, &err), &err);
    snprintf(inv.algorithm, sizeof inv.algorithm, "%s", fs_algo_name(s.algo));
    inv.algo_known = fs_algo_parse(inv.algorithm, &inv.algo) == 0;
    inv.parties = s.parties;
    inv.threshold = s.threshold;
    inv.rows = s.power.party_rows[1];
    inv.cols = s.cols;
    inv.is_fedpower = 1;
    inv.power = s.power;
    j = fs_invitation_encode(&inv);
    CHECK(j != NULL);
    CHECK_OK(fs_invitation_decode(j, &back, &err), &err);
    CHECK(memcmp(&inv, &back, sizeof inv) == 0);
    CHECK_OK(fs_invitation_fedpower_config(&back, &c1, r1, &err), &err);
    CHECK_OK(fs_job_fedpower_config(&s, &c2, r2, &err), &err);
    CHECK(memcmp(&c1, &c2, sizeof c1) == 0 && memcmp(r1, r2, sizeof r1) == 0);
    CHECK(c1.z0_seed[31] == 0xab && c1.paillier_bits == 3072);
    /* a seed-mode utility invitation names the server's sample map, and an
     * agent with another one (or a server that predates the field) is
     * refused: the regenerated noise would not cancel */
    CHECK(json_integer_value(json_object_get(j, "noise_sampler")) == FS_FEDPOWER_NOISE_MAP_VERSION);
    json_object_set_new(j, "noise_sampler", json_integer(FS_FEDPOWER_NOISE_MAP_VERSION - 1));
    CHECK(fs_invitation_decode(j, &back, &err) == FS_EINVAL && strstr(err.msg, "noise_sampler"));
    json_object_set_new(j, "noise_sampler", json_string("2"));
    CHECK(fs_invitation_decode(j, &back, &err) == FS_EINVAL && strstr(err.msg, "noise_sampler"));
    json_object_del(j, "noise_sampler");
    CHECK(fs_invitation_decode(j, &back, &err) == FS_EINVAL &&
          strstr(err.msg, "noise_sampler: missing"));
    json_object_set_new(j, "noise_sampler", json_integer(FS_FEDPOWER_NOISE_MAP_VERSION));
    CHECK_OK(fs_invitation_decode(j, &back, &err), &err);
    fs_invitation_wipe(&back);
    {
        /* the elementwise exchange regenerates nothing: no field, and one is refused */
        struct fs_invitation el = inv;
        json_t *e;

        el.power.noise_exchange = FS_NOISEX_ELEMENTWISE;
        e = fs_invitation_encode(&el);
        CHECK(e != NULL && json_object_get(e, "noise_sampler") == NULL);
        CHECK_OK(fs_invitation_decode(e, &back, &err), &err);
        fs_invitation_wipe(&back);
        json_object_set_new(e, "noise_sampler", json_integer(FS_FEDPOWER_NOISE_MAP_VERSION));
        CHECK(fs_invitation_decode(e, &back, &err) == FS_EINVAL &&
              strstr(err.msg, "unknown field \"noise_sampler\""));
        json_decref(e);
    }
    {
        /* ot regenerates the noise from seeds as seed mode does: the sampler
         * is named; the mode and the absent key size survive the round trip */
        struct fs_invitation ot = inv;
        struct fs_fedpower_config c3;
        json_t *e;

        ot.power.noise_exchange = FS_NOISEX_OT;
        ot.power.paillier_bits = 0;
        e = fs_invitation_encode(&ot);
        CHECK(e != NULL && json_integer_value(json_object_get(e, "noise_sampler")) ==
                               FS_FEDPOWER_NOISE_MAP_VERSION);
        CHECK(json_object_get(e, "paillier_bits") == NULL);
        CHECK_OK(fs_invitation_decode(e, &back, &err), &err);
        CHECK(back.power.noise_exchange == FS_NOISEX_OT && back.power.paillier_bits == 0);
        CHECK_OK(fs_invitation_fedpower_config(&back, &c3, r1, &err), &err);
        CHECK(c3.noise_exchange == FS_NOISEX_OT);
        fs_invitation_wipe(&back);
        json_object_del(e, "noise_sampler");
        CHECK(fs_invitation_decode(e, &back, &err) == FS_EINVAL &&
              strstr(err.msg, "noise_sampler: missing"));
        json_decref(e);
    }
    /* the seed is required in an invitation */
    json_object_del(j, "z0_seed");
    CHECK(fs_invitation_decode(j, &back, &err) == FS_EFORMAT && strstr(err.msg, "z0_seed"));
    CHECK(back.token[0] == '\0');
    json_decref(j);
    /* shape must be [party_rows[party-1], cols] */
    inv.rows = 100;
    j = fs_invitation_encode(&inv);
    CHECK(fs_invitation_decode(j, &back, &err) == FS_EINVAL && strstr(err.msg, "party_rows"));
    json_decref(j);
    /* a secure-sum invitation has no power parameters */
    inv.is_fedpower = 0;
    CHECK(fs_invitation_fedpower_config(&inv, &c1, r1, &err) == FS_EINVAL);
    fs_invitation_wipe(&inv);
}

int main(void)
{
    RUN(test_spec_defaults);
    RUN(test_spec_utility);
    RUN(test_spec_ot);
    RUN(test_spec_bad);
    RUN(test_invitation);
    return TEST_END("test_jobs_fedpower");
}
