/* The peer documents of sharded aggregation (api/shardwire.c) and the
 * long-poll query of GET /v1/jobs/{job} (api/jobwait.c). The input is one
 * JSON document, given to every decoder:
 *   - the window spec: a decoded spec encodes to the same document;
 *   - the status, for "n" parties (default 5): encode and decode again
 *     give the same status;
 *   - the finish body (the document less "n"): a decoded finish encodes to
 *     text that decodes to the same survivors, exponent and plan; a refused
 *     one leaves the plan buffer all zeros and no key text in the message;
 *     fs_shardwire_finish_wipe zeroes every key string;
 *   - the shards' verdict, for "n" parties;
 *   - "wait_ms", "phase", "aggregation" (strings) as the long-poll query. */
#include "fuzz.h"

#include "api/jobwait.h"
#include "api/phase.h"
#include "api/shardwire.h"

#define FZ_WAIT_MAX 30000u

static void window(const json_t *j)
{
    struct fs_err err = {0};
    struct fs_shard_window w;
    struct fs_shard_window w2;
    json_t *e;

    if (fs_shardwire_window_decode(j, &w, &err) != 0) {
        FUZZ_CHECK(err.msg[0] != '\0' && w.party_auth == NULL && w.party_sizes == NULL);
        return;
    }
    FUZZ_CHECK(w.shard >= 1 && w.shard < w.shards && w.parties >= 1);
    FUZZ_CHECK(w.offset + w.words <= w.total_words && w.rows * w.cols == w.total_words);
    e = fs_shardwire_window_encode(&w);
    FUZZ_CHECK(e != NULL && json_equal(e, j));
    FUZZ_CHECK(fs_shardwire_window_decode(e, &w2, &err) == 0);
    FUZZ_CHECK(w2.offset == w.offset && w2.words == w.words && w2.parties == w.parties &&
               memcmp(w2.party_auth, w.party_auth, (size_t)w.parties * sizeof *w.party_auth) == 0);
    fs_shardwire_window_clear(&w2);
    fs_shardwire_window_clear(&w);
    json_decref(e);
}

static void status(const json_t *j, uint32_t n)
{
    static uint8_t c1[FS_JOB_MAX_PARTIES];
    static uint8_t c2[FS_JOB_MAX_PARTIES];
    struct fs_err err = {0};
    struct fs_shard_status s;
    struct fs_shard_status s2;
    json_t *e1;
    json_t *e2;

    memset(&s, 0, sizeof s);
    s.parties = n;
    s.complete = c1;
    if (fs_shardwire_status_decode(j, &s, &err) != 0) {
        FUZZ_CHECK(err.msg[0] != '\0');
        return;
    }
    FUZZ_CHECK(strlen(s.error) < sizeof s.error && fs_job_id_valid(s.job));
    e1 = fs_shardwire_status_encode(&s);
    FUZZ_CHECK(e1 != NULL);
    memset(&s2, 0, sizeof s2);
    s2.parties = n;
    s2.complete = c2;
    FUZZ_CHECK(fs_shardwire_status_decode(e1, &s2, &err) == 0);
    FUZZ_CHECK(memcmp(c1, c2, n) == 0 && s2.state == s.state && s2.shard == s.shard &&
               s2.peak_rss_bytes == s.peak_rss_bytes && strcmp(s2.error, s.error) == 0 &&
               s2.has_finish_s == s.has_finish_s);
    e2 = fs_shardwire_status_encode(&s2);
    FUZZ_CHECK(e2 != NULL && json_equal(e1, e2));
    json_decref(e1);
    json_decref(e2);
}

/* 1 when no key string of the finish document j appears in msg. */
static int no_key_in(const json_t *j, const char *msg)
{
    const json_t *plan = json_object_get(j, "plan");
    for (size_t i = 0; json_is_array(plan) && i < json_array_size(plan); i++) {
        const char *k = json_string_value(json_object_get(json_array_get(plan, i), "key"));
        if (k != NULL && strlen(k) >= 8 && strstr(msg, k) != NULL) {
            return 0;
        }
    }
    return 1;
}

static void finish_back(const struct fs_shard_finish *f, uint32_t n)
{
    struct fs_err err = {0};
    struct fs_shard_finish g;
    char *txt = fs_shardwire_finish_encode(f->u3, f->nu3, f->exponent, f->plan, f->nplan);
    json_t *j2;

    FUZZ_CHECK(txt != NULL);
    j2 = fuzz_json((const uint8_t *)txt, strlen(txt));
    FUZZ_CHECK(j2 != NULL);
    memset(&g, 0, sizeof g);
    g.u3 = calloc(f->nu3 + 1, sizeof *g.u3);
    g.u3_cap = f->nu3;
    g.plan = calloc(f->nplan + 1, sizeof *g.plan);
    g.plan_cap = f->nplan;
    FUZZ_CHECK(g.u3 != NULL && g.plan != NULL);
    FUZZ_CHECK(fs_shardwire_finish_decode(j2, n, &g, &err) == 0);
    FUZZ_CHECK(g.nu3 == f->nu3 && g.nplan == f->nplan && g.exponent == f->exponent);
    FUZZ_CHECK(memcmp(g.u3, f->u3, f->nu3 * sizeof *g.u3) == 0);
    FUZZ_CHECK(memcmp(g.plan, f->plan, f->nplan * sizeof *g.plan) == 0);
    fs_shardwire_finish_wipe(j2);
    free(g.u3);
    free(g.plan);
    free(txt);
    json_decref(j2);
}

static void finish(json_t *j, uint32_t n)
{
    struct fs_err err = {0};
    struct fs_shard_finish f;
    size_t nu3 = 0;
    size_t np = 0;
    int sized = fs_shardwire_finish_sizes(j, n, &nu3, &np, &err) == 0;
    int rc;

    memset(&f, 0, sizeof f);
    f.u3_cap = sized ? nu3 : 4;
    f.plan_cap = sized ? np : 4;
    f.u3 = calloc(f.u3_cap + 1, sizeof *f.u3);
    f.plan = calloc(f.plan_cap + 1, sizeof *f.plan);
    FUZZ_CHECK(f.u3 != NULL && f.plan != NULL);
    memset(f.plan, 0xa5, f.plan_cap * sizeof *f.plan); /* left-overs to wipe */
    rc = fs_shardwire_finish_decode(j, n, &f, &err);
    if (rc != 0) {
        FUZZ_CHECK(err.msg[0] != '\0' && f.nplan == 0 && f.nu3 == 0 && no_key_in(j, err.msg));
        for (size_t i = 0; i < f.plan_cap * sizeof *f.plan; i++) {
            FUZZ_CHECK(((const uint8_t *)f.plan)[i] == 0);
        }
    } else {
        FUZZ_CHECK(sized && f.nu3 == nu3 && f.nplan == np && f.nplan >= f.nu3);
        for (size_t i = 0; i < f.nu3; i++) {
            FUZZ_CHECK(f.u3[i] >= 1 && f.u3[i] <= n && (i == 0 || f.u3[i] > f.u3[i - 1]));
        }
        for (size_t i = 0; i < f.nplan; i++) {
            FUZZ_CHECK(f.plan[i].sign == 1 || f.plan[i].sign == -1);
        }
        finish_back(&f, n);
    }
    free(f.u3);
    free(f.plan);
    fs_shardwire_finish_wipe(j);
    {
        const json_t *plan = json_object_get(j, "plan");
        for (size_t i = 0; json_is_array(plan) && i < json_array_size(plan); i++) {
            const json_t *k = json_object_get(json_array_get(plan, i), "key");
            for (size_t b = 0; json_is_string(k) && b < json_string_length(k); b++) {
                FUZZ_CHECK(json_string_value(k)[b] == '\0');
            }
        }
    }
}

static void verdict(const json_t *j, uint32_t n)
{
    static uint8_t in[FS_JOB_MAX_PARTIES + 1];
    static uint8_t in2[FS_JOB_MAX_PARTIES + 1];
    static uint32_t ids[FS_JOB_MAX_PARTIES];
    struct fs_err err = {0};
    size_t k = 0;
    json_t *e;

    if (fs_shardwire_verdict_decode(j, n, in, &err) != 0) {
        FUZZ_CHECK(err.msg[0] != '\0');
        return;
    }
    FUZZ_CHECK(in[0] == 0);
    for (uint32_t v = 1; v <= n; v++) {
        if (in[v]) {
            ids[k++] = v;
        }
    }
    e = fs_shardwire_verdict_encode(ids, k);
    FUZZ_CHECK(e != NULL && json_equal(json_object_get(e, "complete_on_shards"),
                                       json_object_get(j, "complete_on_shards")));
    FUZZ_CHECK(fs_shardwire_verdict_decode(e, n, in2, &err) == 0 &&
               memcmp(in, in2, (size_t)n + 1) == 0);
    json_decref(e);
}

static void job_wait(const json_t *j)
{
    struct fs_err err = {0};
    struct fs_job_wait w;
    const char *ms = json_string_value(json_object_get(j, "wait_ms"));
    const char *ph = json_string_value(json_object_get(j, "phase"));
    const char *ag = json_string_value(json_object_get(j, "aggregation"));
    char back[32];

    if (fs_job_wait_parse(ms, ph, ag, FZ_WAIT_MAX, &w, &err) != 0) {
        FUZZ_CHECK(err.msg[0] != '\0' && ms != NULL && w.wait == 0);
        return;
    }
    FUZZ_CHECK(w.wait == (ms != NULL));
    if (w.wait) {
        FUZZ_CHECK(w.ms <= FZ_WAIT_MAX && strcmp(fs_job_phase_name(w.phase), ph) == 0);
        snprintf(back, sizeof back, "%u", w.ms);
        FUZZ_CHECK(strcmp(back, ms) == 0);
        snprintf(back, sizeof back, "%u", w.aggregation);
        FUZZ_CHECK(strcmp(back, ag) == 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *j = fuzz_json(data, size);
    json_t *body;
    uint32_t n;

    if (j == NULL) {
        return 0;
    }
    n = (uint32_t)fuzz_u64(j, "n", 5, FS_JOB_MAX_PARTIES);
    n = n > 0 ? n : 1;
    window(j);
    status(j, n);
    verdict(j, n);
    job_wait(j);
    body = json_deep_copy(j);
    if (body != NULL) {
        (void)json_object_del(body, "n");
        finish(body, n);
        json_decref(body);
    }
    json_decref(j);
    return 0;
}
