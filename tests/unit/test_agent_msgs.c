/* The client agent's message views: the participation request with its
 * invitation, the job status, the aggregation and the result manifest. Each
 * invalid case must be refused with a message naming the field. */
#include "agent_msgs.h"
#include "test.h"
#include "wire.h"

#include <stdlib.h>

#define JOB   "j-0123456789abcdef0123456789abcdef"
#define TOKEN "abcdefghijklmnopqrstuvwxyz012345678901234-_"

static json_t *load(const char *text)
{
    json_error_t e;
    json_t *j = json_loads(text, 0, &e);

    if (j == NULL) {
        fprintf(stderr, "  bad test JSON: %s\n", e.text);
    }
    return j;
}

static json_t *invitation(void)
{
    return json_pack("{s:i, s:s, s:s, s:i, s:s, s:s, s:i, s:i, s:[i, i]}", "version", 1, "job_id",
                     JOB, "job_url", "http://127.0.0.1:8443/v1/jobs/" JOB, "party", 2, "token",
                     TOKEN, "algorithm", "secure-sum", "parties", 3, "threshold", 2, "shape", 4, 5);
}

static json_t *request(void)
{
    return json_pack("{s:o, s:{s:s, s:s}, s:n}", "invitation", invitation(), "dataset", "path",
                     "/data/a.npy", "format", "npy", "fail_at");
}

/* parse with one change applied to the request; returns rc, err filled */
static int parse_with(void (*edit)(json_t *), struct fs_agent_request *out, struct fs_err *err)
{
    json_t *j = request();
    int rc;

    if (edit != NULL) {
        edit(j);
    }
    rc = fs_agent_request_parse(j, 1000, out, err);
    json_decref(j);
    return rc;
}

static void ed_unknown_top(json_t *j)
{
    json_object_set_new(j, "extra", json_true());
}
static void ed_unknown_inv(json_t *j)
{
    json_object_set_new(json_object_get(j, "invitation"), "callback_url",
                        json_string("http://evil.example/"));
}
static void ed_unknown_ds(json_t *j)
{
    json_object_set_new(json_object_get(j, "dataset"), "sheet", json_integer(1));
}
static void ed_bad_fail_at(json_t *j)
{
    json_object_set_new(j, "fail_at", json_string("result"));
}
static void ed_fail_at_num(json_t *j)
{
    json_object_set_new(j, "fail_at", json_integer(3));
}
static void ed_algo(json_t *j)
{
    json_object_set_new(json_object_get(j, "invitation"), "algorithm", json_string("fedprox"));
}
static void ed_shape_big(json_t *j)
{
    json_object_set_new(json_object_get(j, "invitation"), "shape", json_pack("[i, i]", 100, 11));
}
static void ed_userinfo(json_t *j)
{
    json_object_set_new(json_object_get(j, "invitation"), "job_url",
                        json_string("http://u:p@127.0.0.1:8443/v1/jobs/" JOB));
}
static void ed_ftp(json_t *j)
{
    json_object_set_new(json_object_get(j, "invitation"), "job_url",
                        json_string("ftp://127.0.0.1/v1/jobs/" JOB));
}
static void ed_url_other_job(json_t *j)
{
    json_object_set_new(json_object_get(j, "invitation"), "job_url",
                        json_string("http://127.0.0.1:8443/v1/jobs/j-1"));
}
static void ed_version(json_t *j)
{
    json_object_set_new(json_object_get(j, "invitation"), "version", json_integer(2));
}
static void ed_party(json_t *j)
{
    json_object_set_new(json_object_get(j, "invitation"), "party", json_integer(4));
}
static void ed_token(json_t *j)
{
    json_object_set_new(json_object_get(j, "invitation"), "token", json_string("short"));
}
static void ed_format(json_t *j)
{
    json_object_set_new(json_object_get(j, "dataset"), "format", json_string("xlsx"));
}
static void ed_no_format(json_t *j)
{
    json_object_del(json_object_get(j, "dataset"), "format");
}
static void ed_empty_path(json_t *j)
{
    json_object_set_new(json_object_get(j, "dataset"), "path", json_string(""));
}
static void ed_no_invitation(json_t *j)
{
    json_object_del(j, "invitation");
}
static void ed_ok_fail_at(json_t *j)
{
    json_object_set_new(j, "fail_at", json_string("masked_input"));
}
static void ed_prefix_url(json_t *j)
{
    json_object_set_new(json_object_get(j, "invitation"), "job_url",
                        json_string("https://ingress.example/fedsvd/v1/jobs/" JOB));
}

static void test_request(void)
{
    static const struct {
        void (*edit)(json_t *);
        int rc;
        const char *needle;
    } bad[] = {
        {ed_unknown_top, FS_EINVAL, "extra"},
        {ed_unknown_ds, FS_EINVAL, "sheet"},
        {ed_unknown_inv, FS_EINVAL, "invitation: unknown field \"callback_url\""},
        {ed_bad_fail_at, FS_EINVAL, "fail_at"},
        {ed_fail_at_num, FS_EFORMAT, "fail_at"},
        {ed_algo, FS_EINVAL, "not supported"},
        {ed_shape_big, FS_EINVAL, "limit"},
        {ed_userinfo, FS_EINVAL, "job_url"},
        {ed_ftp, FS_EINVAL, "job_url"},
        {ed_url_other_job, FS_EINVAL, "job_url"},
        {ed_version, FS_EINVAL, "version"},
        {ed_party, FS_EINVAL, "party"},
        {ed_token, FS_EINVAL, "token"},
        {ed_format, FS_EINVAL, "dataset.format"},
        {ed_empty_path, FS_EINVAL, "dataset.path"},
        {ed_no_invitation, FS_EFORMAT, "invitation"},
    };
    struct fs_agent_request rq;
    struct fs_err err = {0};

    CHECK_OK(parse_with(NULL, &rq, &err), &err);
    CHECK(strcmp(rq.inv.job_id, JOB) == 0);
    CHECK(strcmp(rq.base_url, "http://127.0.0.1:8443") == 0);
    CHECK(rq.inv.party == 2 && rq.inv.parties == 3 && rq.inv.threshold == 2);
    CHECK(rq.inv.rows == 4 && rq.inv.cols == 5);
    CHECK(strcmp(rq.inv.token, TOKEN) == 0);
    CHECK(strcmp(rq.path, "/data/a.npy") == 0 && rq.fmt == FS_FMT_NPY);
    CHECK(rq.fail_at == FS_AGENT_FAIL_NONE);
    fs_invitation_wipe(&rq.inv);
    CHECK(rq.inv.token[0] == '\0');

    CHECK_OK(parse_with(ed_no_format, &rq, &err), &err);
    CHECK(rq.fmt == FS_FMT_AUTO && strcmp(rq.format, "auto") == 0);
    CHECK_OK(parse_with(ed_ok_fail_at, &rq, &err), &err);
    CHECK(rq.fail_at == FS_AGENT_FAIL_MASKED_INPUT);
    CHECK_OK(parse_with(ed_prefix_url, &rq, &err), &err);
    CHECK(strcmp(rq.base_url, "https://ingress.example/fedsvd") == 0);
    fs_invitation_wipe(&rq.inv);

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = parse_with(bad[i].edit, &rq, &err);
        CHECK_MSG(rc == bad[i].rc, "case %zu: rc %d (%s)", i, rc, err.msg);
        CHECK_MSG(strstr(err.msg, bad[i].needle) != NULL, "case %zu: %s", i, err.msg);
        CHECK_MSG(strstr(err.msg, TOKEN) == NULL, "case %zu leaks the token", i);
        CHECK(rq.inv.token[0] == '\0');
    }
    {
        json_t *j = load("[1, 2]");
        CHECK(fs_agent_request_parse(j, 1000, &rq, &err) == FS_EFORMAT);
        json_decref(j);
    }
}

/* A fedsvd invitation for party 2 of 3 (rows 3, 4, 5 of a 12 x 5 matrix). */
static void ed_fed(json_t *j)
{
    json_t *inv = json_object_get(j, "invitation");
    json_object_set_new(inv, "algorithm", json_string("fedsvd"));
    json_object_set_new(inv, "global_shape", json_pack("[i, i]", 12, 5));
    json_object_set_new(inv, "partition", json_string("samples"));
    json_object_set_new(inv, "party_sizes", json_pack("[i, i, i]", 3, 4, 5));
    json_object_set_new(inv, "masking_url", json_string("http://127.0.0.1:8445/"));
    json_object_set_new(inv, "maskset", json_string("m-0123456789abcdef"));
}

static void test_request_fed(void)
{
    struct fs_agent_request rq;
    struct fs_err err = {0};
    json_t *j = request();
    json_t *inv;

    ed_fed(j);
    CHECK_OK(fs_agent_request_parse(j, 1000, &rq, &err), &err);
    CHECK(rq.inv.is_fedsvd && rq.inv.global_rows == 12 && rq.inv.global_cols == 5);
    CHECK(rq.inv.fed.party_sizes[1] == 4 && rq.inv.rows == 4 && rq.inv.cols == 5);
    CHECK(strcmp(rq.inv.masking_url, "http://127.0.0.1:8445") == 0); /* trailing '/' trimmed */
    CHECK(strcmp(rq.inv.maskset, "m-0123456789abcdef") == 0);
    fs_invitation_wipe(&rq.inv);
    inv = json_object_get(j, "invitation");
    /* the mask fields are added by the mask-set creator: required here */
    json_object_del(inv, "maskset");
    CHECK(fs_agent_request_parse(j, 1000, &rq, &err) == FS_EINVAL && strstr(err.msg, "maskset"));
    json_object_set_new(inv, "maskset", json_string("../x"));
    CHECK(fs_agent_request_parse(j, 1000, &rq, &err) == FS_EINVAL && strstr(err.msg, "maskset"));
    json_object_set_new(inv, "maskset", json_string("m-1"));
    json_object_set_new(inv, "masking_url", json_string("http://u:p@host"));
    CHECK(fs_agent_request_parse(j, 1000, &rq, &err) == FS_EINVAL &&
          strstr(err.msg, "masking_url"));
    json_object_set_new(inv, "masking_url", json_string("http://127.0.0.1:8445"));
    /* this party's shape must be its slice of the pooled matrix */
    json_object_set_new(inv, "party_sizes", json_pack("[i, i, i]", 4, 3, 5));
    CHECK(fs_agent_request_parse(j, 1000, &rq, &err) == FS_EINVAL && strstr(err.msg, "shape"));
    json_object_set_new(inv, "party_sizes", json_pack("[i, i, i]", 3, 4, 4));
    CHECK(fs_agent_request_parse(j, 1000, &rq, &err) == FS_EINVAL && strstr(err.msg, "add up"));
    json_object_set_new(inv, "party_sizes", json_pack("[i, i, i]", 3, 4, 5));
    /* the pooled matrix is capped too */
    CHECK(fs_agent_request_parse(j, 50, &rq, &err) == FS_EINVAL && strstr(err.msg, "global_shape"));
    CHECK(rq.inv.token[0] == '\0');
    /* a field of another algorithm's invitation is unknown here too */
    CHECK_OK(fs_agent_request_parse(j, 1000, &rq, &err), &err);
    fs_invitation_wipe(&rq.inv);
    json_object_set_new(inv, "sync_every", json_integer(2));
    CHECK(fs_agent_request_parse(j, 1000, &rq, &err) == FS_EINVAL &&
          strstr(err.msg, "unknown field \"sync_every\"") != NULL);
    json_object_del(inv, "sync_every");
    json_object_set_new(inv, "mask_secret", json_string("x"));
    CHECK(fs_agent_request_parse(j, 1000, &rq, &err) == FS_EINVAL &&
          strstr(err.msg, "unknown field \"mask_secret\"") != NULL);
    CHECK(rq.inv.token[0] == '\0');
    json_decref(j);
}

static void test_job(void)
{
    struct fs_agent_job job;
    struct fs_agent_job_view v;
    struct fs_err err = {0};
    json_t *j = load("{\"id\":\"" JOB "\",\"algorithm\":\"secure-sum\",\"phase\":\"masked_input\","
                     "\"state\":\"running\",\"aggregation\":0,\"aggregations\":1,\"parties\":10,"
                     "\"threshold\":7,\"shape\":[1000,1000],\"present\":[1,2],\"dropped\":[3],"
                     "\"error\":null,\"something_new\":{}}");

    CHECK_OK(fs_agent_job_parse(j, &job, &err), &err);
    CHECK(job.phase == FS_AGENT_J_MASKED && job.state == 0 && job.aggregations == 1);
    CHECK(job.parties == 10 && job.threshold == 7 && job.rows == 1000 && job.cols == 1000);
    CHECK(job.error[0] == '\0');
    json_object_set_new(j, "state", json_string("failed"));
    json_object_set_new(j, "phase", json_string("failed"));
    json_object_set_new(j, "error", json_string("6 masked inputs\nin aggregation 0"));
    CHECK_OK(fs_agent_job_parse(j, &job, &err), &err);
    fs_agent_job_view(&job, &v);
    CHECK(v.failed && strcmp(v.error, "6 masked inputs in aggregation 0") == 0);
    json_object_set_new(j, "state", json_string("done"));
    json_object_set_new(j, "phase", json_string("finishing"));
    CHECK_OK(fs_agent_job_parse(j, &job, &err), &err);
    fs_agent_job_view(&job, &v);
    CHECK(v.phase == FS_AGENT_J_DONE && !v.failed);
    json_object_set_new(j, "state", json_string("paused"));
    CHECK(fs_agent_job_parse(j, &job, &err) == FS_EFORMAT);
    json_object_set_new(j, "state", json_string("running"));
    json_object_set_new(j, "threshold", json_integer(11));
    CHECK(fs_agent_job_parse(j, &job, &err) == FS_EINVAL && strstr(err.msg, "threshold"));
    json_object_set_new(j, "threshold", json_integer(7));
    json_object_del(j, "phase");
    CHECK(fs_agent_job_parse(j, &job, &err) == FS_EFORMAT && strstr(err.msg, "phase"));
    json_decref(j);
}

static json_t *agg_json(void)
{
    return load("{\"index\":0,\"length\":20,\"chunk_words\":8,\"chunks\":3,"
                "\"phase\":\"masked_input\",\"active\":[1,2,3],\"survivors\":null,"
                "\"signatures\":null,\"bound\":16.0,\"frac_bits\":57,\"summands\":3}");
}

static void test_agg(void)
{
    struct fs_agent_agg a;
    struct fs_err err = {0};
    json_t *j = agg_json();
    uint8_t sig[64];

    CHECK_OK(fs_agent_agg_parse(j, 0, 3, 20, &a, &err), &err);
    CHECK(a.chunks == 3 && a.chunk_words == 8 && a.nactive == 3 && !a.has_survivors &&
          !a.has_signatures);
    CHECK(a.fp.frac_bits == 57 && a.fp.summands == 3 && a.fp.bound == 16.0);
    fs_agent_agg_clear(&a);

    /* fixed-point parameters must agree with fs_fixedpt_init's choice or be safer */
    {
        struct fs_fixedpt fp;
        CHECK_OK(fs_fixedpt_init(&fp, 16.0, 3, &err), &err);
        CHECK(fp.frac_bits <= 57);
    }
    CHECK(fs_agent_agg_parse(j, 1, 3, 20, &a, &err) == FS_EINVAL); /* other index */
    CHECK(fs_agent_agg_parse(j, 0, 3, 21, &a, &err) == FS_EINVAL); /* other length */
    CHECK(fs_agent_agg_parse(j, 0, 2, 20, &a, &err) != 0);         /* ids beyond n */
    json_object_set_new(j, "chunks", json_integer(2));
    CHECK(fs_agent_agg_parse(j, 0, 3, 20, &a, &err) == FS_EINVAL && strstr(err.msg, "chunks"));
    json_object_set_new(j, "chunks", json_integer(3));
    json_object_set_new(j, "frac_bits", json_integer(60)); /* 3 * 16 * 2^60 > 2^63 */
    CHECK(fs_agent_agg_parse(j, 0, 3, 20, &a, &err) == FS_EINVAL && strstr(err.msg, "wrap"));
    json_object_set_new(j, "frac_bits", json_integer(57));
    json_object_set_new(j, "bound", json_real(-1));
    CHECK(fs_agent_agg_parse(j, 0, 3, 20, &a, &err) == FS_EINVAL && strstr(err.msg, "bound"));
    json_object_set_new(j, "bound", json_integer(16)); /* an integer is a number too */
    CHECK_OK(fs_agent_agg_parse(j, 0, 3, 20, &a, &err), &err);
    fs_agent_agg_clear(&a);
    json_object_set_new(j, "chunk_words", json_integer((json_int_t)FS_AGENT_MAX_CHUNK_WORDS + 1));
    CHECK(fs_agent_agg_parse(j, 0, 3, 20, &a, &err) == FS_EINVAL);
    json_object_set_new(j, "chunk_words", json_integer(8));
    json_object_set_new(j, "active", json_pack("[i, i]", 1, 1));
    CHECK(fs_agent_agg_parse(j, 0, 3, 20, &a, &err) != 0 && strstr(err.msg, "active"));
    json_object_set_new(j, "active", json_pack("[i, i, i]", 1, 2, 3));

    /* survivors and signatures once the rounds closed */
    memset(sig, 7, sizeof sig);
    {
        uint32_t ids[2] = {1, 3};
        uint8_t sigs[2][64];
        memcpy(sigs[0], sig, 64);
        memcpy(sigs[1], sig, 64);
        json_object_set_new(j, "survivors", json_pack("[i, i]", 1, 3));
        json_object_set_new(j, "signatures",
                            fs_wire_sigs_encode(ids, (const uint8_t(*)[64])sigs, 2));
    }
    CHECK_OK(fs_agent_agg_parse(j, 0, 3, 20, &a, &err), &err);
    CHECK(a.has_survivors && a.nsurvivors == 2 && a.survivors[1] == 3);
    CHECK(a.has_signatures && a.nsigs == 2 && a.sig_ids[1] == 3 && a.sigs[1][0] == 7);
    fs_agent_agg_clear(&a);
    fs_agent_agg_clear(NULL);
    json_decref(j);
}

static void test_agg_fed(void)
{
    struct fs_agent_agg a;
    struct fs_err err = {0};
    uint32_t ids[2] = {1, 3};
    uint8_t sealed[2][32];
    json_t *j = load("{\"index\":1,\"kind\":\"stats\",\"length\":15,\"chunk_words\":8,"
                     "\"chunks\":2,\"phase\":\"exponents\",\"active\":[1,2,3],"
                     "\"exponents\":null,\"survivors\":null,\"signatures\":null,\"sum\":null}");

    CHECK_OK(fs_agent_agg_parse(j, 1, 3, 15, &a, &err), &err);
    CHECK(a.fed && a.is_stats && !a.has_exponents && !a.has_sum && a.phase == FS_AGENT_J_EXPONENTS);
    fs_agent_agg_clear(&a);
    memset(sealed, 9, sizeof sealed);
    json_object_set_new(j, "exponents", fs_wire_exps_encode(ids, (const uint8_t(*)[32])sealed, 2));
    json_object_set_new(j, "sum",
                        json_pack("{s:i, s:s}", "words", 15, "sha256",
                                  "00112233445566778899aabbccddeeff00112233445566778899"
                                  "aabbccddeeff"));
    CHECK_OK(fs_agent_agg_parse(j, 1, 3, 15, &a, &err), &err);
    CHECK(a.has_exponents && a.nexps == 2 && a.exp_ids[1] == 3 && a.sealed[1][0] == 9);
    CHECK(a.has_sum && a.sum_words == 15 && a.sum_sha256[1] == 0x11);
    fs_agent_agg_clear(&a);
    json_object_set_new(j, "sum", json_pack("{s:i, s:s}", "words", 14, "sha256", "00"));
    CHECK(fs_agent_agg_parse(j, 1, 3, 15, &a, &err) == FS_EFORMAT);
    json_object_set_new(j, "sum", json_null());
    json_object_set_new(j, "kind", json_string("other"));
    CHECK(fs_agent_agg_parse(j, 1, 3, 15, &a, &err) == FS_EINVAL && strstr(err.msg, "kind"));
    json_object_set_new(j, "kind", json_string("svd"));
    json_object_set_new(j, "exponents", json_pack("[{s:i, s:s}]", "party", 4, "sealed", "AA"));
    CHECK(fs_agent_agg_parse(j, 1, 3, 15, &a, &err) != 0 && strstr(err.msg, "exponents"));
    json_decref(j);
}

static void test_agg_power(void)
{
    struct fs_agent_agg a;
    struct fs_err err = {0};
    /* plain fedpower: no chunks */
    json_t *j = load("{\"index\":2,\"kind\":\"sync\",\"sync\":2,\"iteration\":8,\"length\":12,"
                     "\"rows\":6,\"cols\":2,\"chunk_words\":0,\"chunks\":0,"
                     "\"phase\":\"plain_upload\",\"active\":[1,3],"
                     "\"z\":{\"shape\":[6,2],\"sha256\":\"00112233445566778899aabbccddeeff"
                     "00112233445566778899aabbccddeeff\"},\"survivors\":null,"
                     "\"signatures\":null}");

    CHECK_OK(fs_agent_agg_parse(j, 2, 3, 12, &a, &err), &err);
    CHECK(a.power && !a.is_rayleigh && !a.fed && a.iteration == 8 && a.z_rows == 6 &&
          a.z_cols == 2 && a.z_sha256[1] == 0x11 && a.chunks == 0);
    CHECK(a.phase == FS_AGENT_J_PLAIN_UPLOAD && a.nactive == 2 && a.active[1] == 3);
    fs_agent_agg_clear(&a);
    /* secure aggregation: chunks as for secure-sum, no fixed point */
    json_object_set_new(j, "chunk_words", json_integer(5));
    json_object_set_new(j, "chunks", json_integer(3));
    CHECK_OK(fs_agent_agg_parse(j, 2, 3, 12, &a, &err), &err);
    CHECK(a.chunks == 3 && a.fp.summands == 0);
    fs_agent_agg_clear(&a);
    json_object_set_new(j, "chunks", json_integer(2));
    CHECK(fs_agent_agg_parse(j, 2, 3, 12, &a, &err) == FS_EINVAL && strstr(err.msg, "chunks"));
    json_object_set_new(j, "chunks", json_integer(3));
    json_object_set_new(j, "kind", json_string("rayleigh"));
    CHECK_OK(fs_agent_agg_parse(j, 2, 3, 12, &a, &err), &err);
    CHECK(a.is_rayleigh);
    fs_agent_agg_clear(&a);
    json_object_set_new(j, "z", json_pack("{s:[i, i], s:s}", "shape", 6, 2, "sha256", "zz"));
    CHECK(fs_agent_agg_parse(j, 2, 3, 12, &a, &err) == FS_EFORMAT && strstr(err.msg, "z"));
    json_object_set_new(j, "z", json_null());
    CHECK(fs_agent_agg_parse(j, 2, 3, 12, &a, &err) == FS_EFORMAT);
    json_object_del(j, "iteration");
    CHECK(fs_agent_agg_parse(j, 2, 3, 12, &a, &err) == FS_EFORMAT && strstr(err.msg, "iteration"));
    json_decref(j);
}

static void test_job_power(void)
{
    struct fs_agent_job job;
    struct fs_err err = {0};
    json_t *j = load("{\"id\":\"" JOB "\",\"algorithm\":\"dp-ppm\",\"phase\":\"noise_exchange\","
                     "\"state\":\"running\",\"aggregation\":2,\"aggregations\":5,"
                     "\"parties\":3,\"threshold\":2,\"cols\":7,\"error\":null}");

    CHECK_OK(fs_agent_job_parse(j, &job, &err), &err);
    CHECK(job.cols == 7 && job.phase == FS_AGENT_J_NOISE_EXCHANGE && job.aggregations == 5);
    json_object_set_new(j, "algorithm", json_string("secure-sum"));
    CHECK(fs_agent_job_parse(j, &job, &err) == FS_EFORMAT && strstr(err.msg, "shape"));
    json_decref(j);
}

static void test_job_fed(void)
{
    struct fs_agent_job job;
    struct fs_err err = {0};
    json_t *j = load("{\"id\":\"" JOB "\",\"algorithm\":\"fedpca\",\"phase\":\"factorizing\","
                     "\"state\":\"running\",\"aggregation\":2,\"aggregations\":3,"
                     "\"parties\":3,\"threshold\":2,\"shape\":[12,5],\"partition\":\"samples\","
                     "\"party_sizes\":[3,4,5],\"k\":2,\"method\":\"exact\","
                     "\"standardize\":true,\"allow_dropouts\":false,\"error\":null}");

    CHECK_OK(fs_agent_job_parse(j, &job, &err), &err);
    CHECK(job.is_fed && job.fed.k == 2 && job.fed.standardize && job.fed.party_sizes[2] == 5);
    CHECK(job.phase == FS_AGENT_J_FACTORIZING && job.aggregations == 3);
    json_object_set_new(j, "party_sizes", json_pack("[i, i]", 3, 9));
    CHECK(fs_agent_job_parse(j, &job, &err) == FS_EINVAL && strstr(err.msg, "party_sizes"));
    json_decref(j);
}

static void test_result(void)
{
    struct fs_agent_result r;
    struct fs_err err = {0};
    const char *hex = "00112233445566778899aabbccddeeff00112233445566778899AABBCCDDEEFF";
    json_t *j = json_pack("{s:s, s:[{s:s, s:[i,i], s:s}]}", "algorithm", "secure-sum", "files",
                          "name", "sum.npy", "shape", 4, 5, "sha256", hex);
    json_t *f = json_object_get(json_array_get(json_object_get(j, "files"), 0), "name");

    CHECK_OK(fs_agent_result_parse(j, &r, &err), &err);
    CHECK(r.nfiles == 1 && strcmp(r.files[0].name, "sum.npy") == 0);
    CHECK(r.files[0].ndim == 2 && r.files[0].shape[0] == 4 && r.files[0].shape[1] == 5);
    CHECK(r.files[0].sha256[1] == 0x11 && r.files[0].sha256[31] == 0xff);
    (void)f;
    {
        static const char *const bad_names[] = {"../x.npy", "sum",         ".npy",
                                                "a/b.npy",  "sum.npy.tmp", "s u m.npy"};
        for (size_t i = 0; i < sizeof bad_names / sizeof bad_names[0]; i++) {
            json_object_set_new(json_array_get(json_object_get(j, "files"), 0), "name",
                                json_string(bad_names[i]));
            CHECK_MSG(fs_agent_result_parse(j, &r, &err) == FS_EFORMAT, "%s", bad_names[i]);
        }
        json_object_set_new(json_array_get(json_object_get(j, "files"), 0), "name",
                            json_string("sum.npy"));
    }
    json_array_append(json_object_get(j, "files"), json_array_get(json_object_get(j, "files"), 0));
    CHECK(fs_agent_result_parse(j, &r, &err) == FS_EFORMAT && strstr(err.msg, "repeated"));
    json_array_remove(json_object_get(j, "files"), 1);
    json_object_set_new(json_array_get(json_object_get(j, "files"), 0), "sha256",
                        json_string("abc"));
    CHECK(fs_agent_result_parse(j, &r, &err) == FS_EFORMAT && strstr(err.msg, "sha256"));
    json_decref(j);
    CHECK(fs_agent_file_name_ok("U_1.npy") && fs_agent_file_name_ok("sum.npy"));
}

static void test_max_abs_exp(void)
{
    double x[4] = {0.5, -3.0, 2.0, 0.0};
    double z[2] = {0.0, -0.0};
    double inf[2] = {1.0, 1.0 / 0.0};
    int e = 0;

    CHECK(fs_agent_max_abs_exp(x, 4, &e) == 1 && e == 2); /* 3 < 2^2 */
    x[1] = 4.0;
    CHECK(fs_agent_max_abs_exp(x, 4, &e) == 1 && e == 3); /* 4 < 2^3 */
    x[1] = 1e-300;
    x[0] = 0;
    x[2] = 0;
    CHECK(fs_agent_max_abs_exp(x, 4, &e) == 1 && ldexp(1.0, e) > 1e-300 &&
          ldexp(1.0, e - 1) <= 1e-300);
    CHECK(fs_agent_max_abs_exp(z, 2, &e) == 0);
    CHECK(fs_agent_max_abs_exp(inf, 2, &e) == -1);
}

int main(void)
{
    RUN(test_request);
    RUN(test_request_fed);
    RUN(test_agg_fed);
    RUN(test_job_fed);
    RUN(test_job);
    RUN(test_agg);
    RUN(test_agg_power);
    RUN(test_job_power);
    RUN(test_result);
    RUN(test_max_abs_exp);
    return TEST_END("test_agent_msgs");
}
