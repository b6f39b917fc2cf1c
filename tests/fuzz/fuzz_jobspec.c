/* The job spec (POST /v1/jobs) and the other decoders of api/jobs.c: the
 * spec with its fedsvd and power-method parts, party_keys, the mask-set
 * document (PUT /v1/jobs/{job}/maskset), algorithm, phase and id names.
 * A decoded spec must encode and decode back to the same document. */
#include "fuzz.h"

#include "api/jobdoc.h"
#include "api/jobs.h"
#include "api/phase.h"

static struct fs_job_spec g_spec;
static struct fs_job_spec g_spec2;
static struct fs_job_fedpower g_power;
static struct fs_job_fedsvd g_fed;
static uint8_t g_keys[FS_JOB_MAX_PARTIES][FS_JOB_KEY_LEN];

static void spec_roundtrip(const json_t *j)
{
    struct fs_err err = {0};
    json_t *e1 = NULL;
    json_t *e2 = NULL;
    int rc = fs_job_spec_decode(j, 268435456u, &g_spec, &err);

    FUZZ_CHECK(rc == 0 || err.msg[0] != '\0');
    if (rc != 0) {
        return;
    }
    FUZZ_CHECK(g_spec.parties >= 1 && g_spec.parties <= FS_JOB_MAX_PARTIES);
    FUZZ_CHECK(g_spec.threshold >= 1 && g_spec.threshold <= g_spec.parties);
    e1 = fs_job_spec_encode(&g_spec);
    FUZZ_CHECK(e1 != NULL);
    FUZZ_CHECK(fs_job_spec_decode(e1, 268435456u, &g_spec2, &err) == 0);
    e2 = fs_job_spec_encode(&g_spec2);
    FUZZ_CHECK(e2 != NULL && json_equal(e1, e2));
    (void)fs_job_aggregations(&g_spec);
    for (uint32_t p = 1; p <= g_spec.parties; p++) {
        uint64_t rows = 0;
        uint64_t cols = 0;
        fs_job_party_shape(&g_spec, p, &rows, &cols);
    }
    if (fs_algo_is_power(g_spec.algo)) {
        struct fs_fedpower_config cfg;
        static uint64_t prow[FS_JOB_MAX_PARTIES];
        g_spec.power.has_z0_seed = 1;
        if (fs_job_fedpower_config(&g_spec, &cfg, prow, &err) != 0) {
            FUZZ_CHECK(err.msg[0] != '\0');
        }
    }
    json_decref(e1);
    json_decref(e2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *j = fuzz_json(data, size);
    struct fs_err err = {0};
    struct fs_job_maskset ms;
    enum fs_algo algo = FS_ALGO_SECURE_SUM;
    enum fs_job_phase ph;
    uint32_t parties = 0;
    int has = 0;
    const char *s = NULL;

    if (j == NULL) {
        return 0;
    }
    spec_roundtrip(j);
    if (fs_job_maskset_decode(j, &ms, &err) == 0) {
        json_t *e = fs_job_maskset_encode(&ms);
        struct fs_job_maskset ms2;
        FUZZ_CHECK(e != NULL && fs_job_maskset_decode(e, &ms2, &err) == 0);
        FUZZ_CHECK(strcmp(ms.masking_url, ms2.masking_url) == 0 &&
                   strcmp(ms.maskset, ms2.maskset) == 0 &&
                   strcmp(ms.end_token, ms2.end_token) == 0);
        FUZZ_CHECK(fs_maskset_id_valid(ms.maskset));
        json_decref(e);
    }
    parties = (uint32_t)fuzz_u64(j, "parties", 3, FS_JOB_MAX_PARTIES + 1);
    if (fs_job_party_keys_decode(j, parties, &has, g_keys, &err) == 0 && has) {
        json_t *e = fs_job_party_keys_encode((const uint8_t(*)[FS_JOB_KEY_LEN])g_keys, parties);
        FUZZ_CHECK(e != NULL);
        json_decref(e);
    }
    s = json_string_value(json_object_get(j, "algorithm"));
    if (s != NULL && fs_algo_parse(s, &algo) == 0) {
        FUZZ_CHECK(strcmp(fs_algo_name(algo), s) == 0);
    }
    if (fs_job_fedpower_decode(j, algo, parties,
                               (uint32_t)fuzz_u64(j, "threshold", 2, FS_JOB_MAX_PARTIES),
                               fuzz_u64(j, "cols", 8, UINT32_MAX), 0, &g_power, &err) != 0) {
        FUZZ_CHECK(err.msg[0] != '\0');
    }
    if (fs_job_fedsvd_decode(j, algo, parties, fuzz_u64(j, "rows", 12, UINT32_MAX),
                             fuzz_u64(j, "cols", 5, UINT32_MAX), &g_fed, &err) != 0) {
        FUZZ_CHECK(err.msg[0] != '\0');
    }
    s = json_string_value(json_object_get(j, "phase"));
    if (s != NULL && fs_job_phase_parse(s, &ph) == 0) {
        FUZZ_CHECK(strcmp(fs_job_phase_name(ph), s) == 0);
    }
    s = json_string_value(json_object_get(j, "id"));
    if (s != NULL) {
        (void)fs_job_id_valid(s);
        (void)fs_maskset_id_valid(s);
    }
    json_decref(j);
    return 0;
}
