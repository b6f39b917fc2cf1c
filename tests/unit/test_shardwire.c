/* api/shardwire.c and api/jobwait.c: the peer documents of sharded
 * aggregation (window spec, status, finish with its secret plan, the
 * shards' verdict) and the long-poll query. Round trips with the exact
 * bytes the services send, and every refusal with the error code the
 * services map to HTTP (FS_EFORMAT 400, FS_EINVAL 422, FS_ERANGE 413). */
#include "crypto/ct.h"
#include "jobwait.h"
#include "phase.h"
#include "shardwire.h"
#include "test.h"
#include "wire.h"

#include <stdlib.h>

static json_t *parse(const char *s)
{
    json_error_t je;
    json_t *j = json_loads(s, JSON_REJECT_DUPLICATES, &je);
    if (j == NULL) {
        fprintf(stderr, "  bad test JSON: %s\n", je.text);
    }
    return j;
}

/* ------------------------------------------------------------ window spec */

/* 10 x 3, parties of 4 and 6 rows, 2 shards: shard 1 holds rows 5..9, words [15, 30). */
static const uint8_t g_auth[2][32] = {{0x00, 0x01, 0xfe, 0xff}, {0xab, 0xcd}};
static size_t g_sizes[2] = {4, 6};

static struct fs_shard_window spec_ok(void)
{
    struct fs_shard_window w;
    memset(&w, 0, sizeof w);
    w.shard = 1;
    w.round = 0;
    w.shards = 2;
    w.parties = 2;
    w.chunk_words = 16;
    w.total_words = 30;
    w.offset = 15;
    w.words = 15;
    w.rows = 10;
    w.cols = 3;
    w.party_auth = g_auth;
    w.party_sizes = g_sizes;
    return w;
}

#define HEX0 "0001feff00000000000000000000000000000000000000000000000000000000"
#define HEX1 "abcd000000000000000000000000000000000000000000000000000000000000"
#define SPEC_TEXT                                                                                  \
    "{\"shard\":1,\"round\":0,\"total_words\":30,\"offset\":15,\"words\":15,\"chunk_words\":16,"   \
    "\"parties\":2,\"party_auth\":[\"" HEX0 "\",\"" HEX1 "\"],\"shape\":[10,3],\"shards\":2,"      \
    "\"party_sizes\":[4,6]}"

static void test_window_roundtrip(void)
{
    struct fs_err err = {0};
    struct fs_shard_window w = spec_ok();
    struct fs_shard_window d;
    json_t *j = fs_shardwire_window_encode(&w);
    char *txt = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;

    CHECK(txt != NULL);
    if (txt == NULL) {
        json_decref(j);
        return;
    }
    CHECK_MSG(strcmp(txt, SPEC_TEXT) == 0, "%s", txt); /* the bytes on the wire */
    CHECK_OK(fs_shardwire_window_decode(j, &d, &err), &err);
    CHECK(d.shard == 1 && d.round == 0 && d.shards == 2 && d.parties == 2 && d.chunk_words == 16);
    CHECK(d.total_words == 30 && d.offset == 15 && d.words == 15 && d.rows == 10 && d.cols == 3);
    CHECK(d.party_auth != NULL && memcmp(d.party_auth, g_auth, sizeof g_auth) == 0);
    CHECK(d.party_sizes != NULL && d.party_sizes[0] == 4 && d.party_sizes[1] == 6);
    fs_shardwire_window_clear(&d);
    CHECK(d.party_auth == NULL && d.party_sizes == NULL);
    free(txt);
    json_decref(j);
}

/* SPEC_TEXT with member key's value replaced by val (raw JSON; NULL removes it). */
static int spec_with(const char *key, const char *val, struct fs_err *err)
{
    json_t *j = parse(SPEC_TEXT);
    struct fs_shard_window d;
    int rc;

    if (val != NULL) {
        json_t *v = json_loads(val, JSON_DECODE_ANY, NULL);
        json_object_set_new(j, key, v);
    } else {
        json_object_del(j, key);
    }
    memset(err, 0, sizeof *err);
    rc = fs_shardwire_window_decode(j, &d, err);
    CHECK(rc != 0 || d.party_auth != NULL);
    if (rc != 0) {
        CHECK(d.party_auth == NULL && d.party_sizes == NULL && err->msg[0] != '\0');
    }
    fs_shardwire_window_clear(&d);
    json_decref(j);
    return rc;
}

static void test_window_refusals(void)
{
    struct fs_err err = {0};
    struct fs_shard_window d;
    json_t *j = parse("[1]");

    CHECK(fs_shardwire_window_decode(j, &d, &err) == FS_EFORMAT);
    json_decref(j);
    CHECK(spec_with("extra", "1", &err) == FS_EINVAL && strstr(err.msg, "extra") != NULL);
    CHECK(spec_with("shard", "\"1\"", &err) == FS_EFORMAT);
    CHECK(spec_with("shard", NULL, &err) == FS_EFORMAT);
    CHECK(spec_with("shard", "0", &err) == FS_EINVAL);
    CHECK(spec_with("shard", "2", &err) == FS_EINVAL); /* shard >= shards */
    CHECK(spec_with("shard", "1.0", &err) == FS_EFORMAT);
    CHECK(spec_with("shards", "17", &err) == FS_EINVAL);
    CHECK(spec_with("chunk_words", "8", &err) == FS_EINVAL);
    CHECK(spec_with("chunk_words", "4194305", &err) == FS_EINVAL);
    CHECK(spec_with("parties", "1001", &err) == FS_EINVAL);
    CHECK(spec_with("parties", "-1", &err) == FS_EINVAL);
    CHECK(spec_with("parties", "3", &err) == FS_EFORMAT); /* one entry per party */
    CHECK(spec_with("party_auth", "[\"" HEX0 "\"]", &err) == FS_EFORMAT);
    CHECK(spec_with("party_auth", "[\"" HEX0 "\", \"ABCD" HEX1 "\"]", &err) == FS_EFORMAT);
    CHECK(spec_with("party_auth", "[\"" HEX0 "\", \"ABCD\"]", &err) == FS_EFORMAT);
    CHECK(spec_with("party_auth", "[\"" HEX0 "\", 7]", &err) == FS_EFORMAT);
    /* upper-case hex is not the form the coordinator sends */
    CHECK(spec_with("party_auth",
                    "[\"" HEX0
                    "\", \"ABCD000000000000000000000000000000000000000000000000000000000000\"]",
                    &err) == FS_EFORMAT);
    CHECK(spec_with("party_sizes", "[4, 0]", &err) == FS_EFORMAT);
    CHECK(spec_with("party_sizes", "[4, 5]", &err) == FS_EINVAL); /* do not add up to rows */
    CHECK(spec_with("party_sizes", "[4, \"6\"]", &err) == FS_EFORMAT);
    CHECK(spec_with("shape", "[10]", &err) == FS_EFORMAT);
    CHECK(spec_with("shape", "[10, 0]", &err) == FS_EFORMAT);
    /* sizes beyond the window */
    CHECK(spec_with("words", "16", &err) == FS_EINVAL && strstr(err.msg, "shard 1") != NULL);
    CHECK(spec_with("offset", "14", &err) == FS_EINVAL);
    CHECK(spec_with("total_words", "31", &err) == FS_EINVAL);
    CHECK(spec_with("words", "1099511627777", &err) == FS_EINVAL);
    /* rows x cols wrapping around 2^64 onto total_words */
    CHECK(spec_with("shape", "[1099511627776, 16777217]", &err) == FS_EINVAL);
}

/* ------------------------------------------------------------ status */

#define JOB "j-0123456789abcdef0123456789abcdef"

static void test_status_roundtrip(void)
{
    struct fs_err err = {0};
    uint8_t c[5] = {1, 0, 1, 0, 0};
    uint8_t back[5] = {9, 9, 9, 9, 9};
    struct fs_shard_status s;
    struct fs_shard_status d;
    json_t *j;
    char *txt;

    memset(&s, 0, sizeof s);
    snprintf(s.job, sizeof s.job, "%s", JOB);
    s.shard = 2;
    s.state = FS_SHARD_RECEIVING;
    s.parties = 5;
    s.complete = c;
    s.offset = 100;
    s.words = 50;
    s.chunks = 4;
    s.chunk_words = 16;
    s.peak_rss_bytes = 123456;
    j = fs_shardwire_status_encode(&s);
    txt = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;
    CHECK(txt != NULL &&
          strcmp(txt, "{\"job\":\"" JOB "\",\"shard\":2,\"state\":\"receiving\",\"complete\":[1,3],"
                      "\"offset\":100,\"words\":50,\"chunks\":4,\"chunk_words\":16,"
                      "\"peak_rss_bytes\":123456,\"error\":null,\"finish_s\":null}") == 0);
    memset(&d, 0, sizeof d);
    d.parties = 5;
    d.complete = back;
    CHECK_OK(fs_shardwire_status_decode(j, &d, &err), &err);
    CHECK(memcmp(back, c, 5) == 0 && d.shard == 2 && d.state == FS_SHARD_RECEIVING);
    CHECK(d.offset == 100 && d.words == 50 && d.chunks == 4 && d.chunk_words == 16);
    CHECK(d.peak_rss_bytes == 123456 && d.error[0] == '\0' && !d.has_finish_s);
    CHECK(strcmp(d.job, JOB) == 0);
    free(txt);
    json_decref(j);

    s.state = FS_SHARD_DONE;
    s.complete = NULL;
    s.has_finish_s = 1;
    s.finish_s = 0.5;
    snprintf(s.error, sizeof s.error, "%s", "a reason");
    j = fs_shardwire_status_encode(&s);
    d.complete = NULL;
    CHECK_OK(fs_shardwire_status_decode(j, &d, &err), &err);
    CHECK(d.state == FS_SHARD_DONE && d.has_finish_s && d.finish_s == 0.5);
    CHECK(strcmp(d.error, "a reason") == 0);
    CHECK(json_array_size(json_object_get(j, "complete")) == 0);
    json_decref(j);
    CHECK(strcmp(fs_shard_state_name(FS_SHARD_FAILED), "failed") == 0);
    CHECK(strcmp(fs_shard_state_name((enum fs_shard_state)9), "unknown") == 0);
}

static int status_of(const char *text, uint32_t parties, struct fs_err *err)
{
    json_t *j = parse(text);
    uint8_t c[8];
    struct fs_shard_status d;
    int rc;

    memset(&d, 0, sizeof d);
    d.parties = parties;
    d.complete = c;
    memset(err, 0, sizeof *err);
    rc = fs_shardwire_status_decode(j, &d, err);
    json_decref(j);
    return rc;
}

#define ST_HEAD "{\"job\":\"" JOB "\",\"shard\":1,"
#define ST_NUMS "\"offset\":0,\"words\":5,\"chunks\":1,\"chunk_words\":16,\"peak_rss_bytes\":1"

static void test_status_refusals(void)
{
    struct fs_err err = {0};

    CHECK(status_of(ST_HEAD "\"state\":\"receiving\",\"complete\":[1,2]," ST_NUMS
                            ",\"error\":null,\"later\":1}",
                    3, &err) == 0); /* unknown members ignored */
    CHECK(status_of(ST_HEAD "\"state\":\"resting\",\"complete\":[]," ST_NUMS ",\"error\":null}", 3,
                    &err) == FS_EINVAL);
    CHECK(status_of(ST_HEAD "\"state\":1,\"complete\":[]," ST_NUMS ",\"error\":null}", 3, &err) ==
          FS_EFORMAT);
    CHECK(status_of(ST_HEAD "\"state\":\"done\",\"complete\":[4]," ST_NUMS ",\"error\":null}", 3,
                    &err) == FS_EINVAL);
    CHECK(status_of(ST_HEAD "\"state\":\"done\",\"complete\":[2,2]," ST_NUMS ",\"error\":null}", 3,
                    &err) == FS_EINVAL);
    CHECK(status_of(ST_HEAD "\"state\":\"done\",\"complete\":[1,2,3,3]," ST_NUMS ",\"error\":null}",
                    3, &err) == FS_ERANGE);
    CHECK(status_of(ST_HEAD "\"state\":\"done\",\"complete\":[\"1\"]," ST_NUMS ",\"error\":null}",
                    3, &err) == FS_EFORMAT);
    CHECK(status_of(ST_HEAD "\"state\":\"done\",\"complete\":{}," ST_NUMS ",\"error\":null}", 3,
                    &err) == FS_EFORMAT);
    CHECK(status_of(ST_HEAD "\"state\":\"done\",\"complete\":[]," ST_NUMS ",\"error\":5}", 3,
                    &err) == FS_EFORMAT);
    CHECK(status_of(ST_HEAD "\"state\":\"done\",\"complete\":[]," ST_NUMS
                            ",\"error\":null,\"finish_s\":-1}",
                    3, &err) == FS_EINVAL);
    CHECK(status_of(ST_HEAD "\"state\":\"done\",\"complete\":[],\"offset\":-1,\"words\":5,"
                            "\"chunks\":1,\"chunk_words\":16,\"peak_rss_bytes\":1,\"error\":null}",
                    3, &err) == FS_EINVAL);
    CHECK(status_of("{\"job\":\"j-1\",\"shard\":1,\"state\":\"done\",\"complete\":[]," ST_NUMS
                    ",\"error\":null}",
                    3, &err) == FS_EFORMAT);
    CHECK(status_of("{\"job\":\"" JOB "\",\"shard\":16,\"state\":\"done\",\"complete\":[]," ST_NUMS
                    ",\"error\":null}",
                    3, &err) == FS_EINVAL);
    CHECK(status_of("[]", 3, &err) == FS_EFORMAT);
}

static void test_status_error_cut(void)
{
    struct fs_err err = {0};
    json_t *j = parse(ST_HEAD "\"state\":\"failed\",\"complete\":[]," ST_NUMS ",\"error\":null}");
    char *text = malloc(2 * 300 + 1);
    struct fs_shard_status d;
    json_t *e;

    /* 300 two-byte characters: 255 bytes would split the 128th */
    for (int i = 0; i < 300; i++) {
        text[2 * i] = (char)0xc3;
        text[2 * i + 1] = (char)0xa9;
    }
    text[600] = '\0';
    json_object_set_new(j, "error", json_string(text));
    memset(&d, 0, sizeof d);
    d.parties = 3;
    CHECK_OK(fs_shardwire_status_decode(j, &d, &err), &err);
    CHECK(strlen(d.error) == 254); /* 127 characters */
    e = fs_shardwire_status_encode(&d);
    CHECK(e != NULL && json_is_string(json_object_get(e, "error")));
    json_decref(e);
    json_decref(j);
    free(text);
}

/* ------------------------------------------------------------ finish */

#define FIN_HEAD "{\"u3\":[1,3],\"exponent\":-20,\"plan\":[{\"key\":\"ERERE"

static void test_finish_roundtrip(void)
{
    struct fs_err err = {0};
    uint32_t u3[2] = {1, 3};
    struct fs_prg_term plan[3];
    uint32_t u3b[4];
    struct fs_prg_term planb[4];
    struct fs_shard_finish f;
    char *txt;
    json_t *j;
    size_t nu3 = 0;
    size_t np = 0;

    for (int i = 0; i < 3; i++) {
        memset(plan[i].key, 0x11 * (i + 1), sizeof plan[i].key);
        plan[i].sign = i == 2 ? -5 : 1; /* any negative sign is sent as -1 */
    }
    txt = fs_shardwire_finish_encode(u3, 2, -20, plan, 3);
    CHECK(txt != NULL);
    if (txt == NULL) {
        return;
    }
    CHECK_MSG(strncmp(txt, FIN_HEAD, strlen(FIN_HEAD)) == 0, "%s", txt);
    CHECK(strstr(txt, "\"sign\":-1}]}") != NULL);
    j = parse(txt);
    CHECK_OK(fs_shardwire_finish_sizes(j, 3, &nu3, &np, &err), &err);
    CHECK(nu3 == 2 && np == 3);
    memset(&f, 0, sizeof f);
    f.u3 = u3b;
    f.u3_cap = 4;
    f.plan = planb;
    f.plan_cap = 4;
    CHECK_OK(fs_shardwire_finish_decode(j, 3, &f, &err), &err);
    CHECK(f.nu3 == 2 && f.u3[0] == 1 && f.u3[1] == 3 && f.exponent == -20 && f.nplan == 3);
    CHECK(memcmp(planb[0].key, plan[0].key, 32) == 0 && planb[2].sign == -1);
    CHECK(memcmp(planb[2].key, plan[2].key, 32) == 0 && planb[1].sign == 1);
    fs_shardwire_finish_wipe(j);
    {
        const char *k = json_string_value(
            json_object_get(json_array_get(json_object_get(j, "plan"), 0), "key"));
        CHECK(k != NULL && k[0] == '\0');
    }
    fs_wipe(txt, strlen(txt));
    free(txt);
    json_decref(j);
    CHECK(fs_shardwire_plan_max(3, 2) == 4 && fs_shardwire_plan_max(1000, 500) == 250500);
    CHECK(fs_shardwire_plan_max(3, 4) == 0);
}

#define K32 "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8"

/* Decode text for 3 parties into buffers first filled with junk: the plan
 * buffer must be all zeros after a refusal, and the message keyless. */
static int finish_of(const char *text, struct fs_err *err)
{
    json_t *j = parse(text);
    uint32_t u3[8];
    struct fs_prg_term plan[8];
    struct fs_shard_finish f;
    int rc;

    memset(plan, 0xa5, sizeof plan);
    memset(&f, 0, sizeof f);
    f.u3 = u3;
    f.u3_cap = 3;
    f.plan = plan;
    f.plan_cap = 4;
    memset(err, 0, sizeof *err);
    rc = fs_shardwire_finish_decode(j, 3, &f, err);
    if (rc != 0) {
        int zero = 1;
        for (size_t i = 0; i < sizeof plan / 2; i++) { /* plan_cap = 4 of 8 */
            zero &= ((const uint8_t *)plan)[i] == 0;
        }
        CHECK_MSG(zero, "plan not wiped after: %s", err->msg);
        CHECK(f.nplan == 0 && f.nu3 == 0);
        CHECK(strstr(err->msg, "AAECAwQF") == NULL && strstr(err->msg, "BBECAwQF") == NULL);
    }
    json_decref(j);
    return rc;
}

#define T1  "{\"key\":\"" K32 "\",\"sign\":1}"
#define TM1 "{\"key\":\"" K32 "\",\"sign\":-1}"

static void test_finish_refusals(void)
{
    struct fs_err err = {0};

    CHECK(finish_of("{\"u3\":[1,2],\"exponent\":0,\"plan\":[" T1 "," TM1 "]}", &err) == 0);
    CHECK(finish_of("{\"u3\":[1,2]}", &err) == FS_EFORMAT);
    CHECK(finish_of("{\"u3\":[1,2],\"exponent\":\"0\",\"plan\":[" T1 "," T1 "]}", &err) ==
          FS_EFORMAT);
    CHECK(finish_of("{\"u3\":[1,2],\"exponent\":1025,\"plan\":[" T1 "," T1 "]}", &err) ==
          FS_EINVAL);
    CHECK(finish_of("{\"u3\":[1,2],\"exponent\":0,\"plan\":[" T1 "," T1 "],\"more\":1}", &err) ==
          FS_EINVAL);
    /* a bad sign, after a good term: the good term's key is wiped too */
    CHECK(finish_of("{\"u3\":[1,2],\"exponent\":0,\"plan\":[" T1 ",{\"key\":\"" K32
                    "\",\"sign\":2}]}",
                    &err) == FS_EINVAL &&
          strstr(err.msg, "plan[1].sign") != NULL);
    CHECK(finish_of("{\"u3\":[1,2],\"exponent\":0,\"plan\":[" T1 ",{\"key\":\"" K32
                    "\",\"sign\":\"1\"}]}",
                    &err) == FS_EFORMAT);
    CHECK(finish_of("{\"u3\":[1,2],\"exponent\":0,\"plan\":[" T1 ",{\"key\":\"" K32
                    "\",\"sign\":1,\"x\":0}]}",
                    &err) == FS_EINVAL);
    /* keys: short, long, not base64url */
    CHECK(finish_of("{\"u3\":[1,2],\"exponent\":0,\"plan\":[" T1
                    ",{\"key\":\"BBECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHg\",\"sign\":1}]}",
                    &err) == FS_EINVAL &&
          strstr(err.msg, "plan[1].key") != NULL);
    CHECK(finish_of("{\"u3\":[1,2],\"exponent\":0,\"plan\":[" T1
                    ",{\"key\":\"BBECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gIQ\",\"sign\":1}]}",
                    &err) == FS_EINVAL);
    CHECK(finish_of("{\"u3\":[1,2],\"exponent\":0,\"plan\":[" T1
                    ",{\"key\":\"BBECAwQF+gcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8\",\"sign\":1}]}",
                    &err) == FS_EFORMAT);
    CHECK(finish_of("{\"u3\":[1,2],\"exponent\":0,\"plan\":[" T1 ",{\"sign\":1}]}", &err) ==
          FS_EFORMAT);
    /* survivors: duplicate, out of range, not increasing, too many, none */
    CHECK(finish_of("{\"u3\":[1,1],\"exponent\":0,\"plan\":[" T1 "," T1 "]}", &err) == FS_EINVAL);
    CHECK(finish_of("{\"u3\":[1,4],\"exponent\":0,\"plan\":[" T1 "," T1 "]}", &err) == FS_EINVAL);
    CHECK(finish_of("{\"u3\":[0],\"exponent\":0,\"plan\":[" T1 "]}", &err) == FS_EINVAL);
    CHECK(finish_of("{\"u3\":[2,1],\"exponent\":0,\"plan\":[" T1 "," T1 "]}", &err) == FS_EINVAL);
    CHECK(finish_of("{\"u3\":[1,\"2\"],\"exponent\":0,\"plan\":[" T1 "," T1 "]}", &err) ==
          FS_EFORMAT);
    CHECK(finish_of("{\"u3\":[1,2,3,4],\"exponent\":0,\"plan\":[" T1 "]}", &err) == FS_ERANGE);
    CHECK(finish_of("{\"u3\":[],\"exponent\":0,\"plan\":[]}", &err) == FS_ERANGE);
    /* terms: more than 2 survivors of 3 parties can need (2 + 1 x 2 = 4), fewer than the survivors
     */
    CHECK(finish_of("{\"u3\":[1,2],\"exponent\":0,\"plan\":[" T1 "," T1 "," T1 "," T1 "," T1 "]}",
                    &err) == FS_ERANGE);
    CHECK(finish_of("{\"u3\":[1,2],\"exponent\":0,\"plan\":[" T1 "]}", &err) == FS_EINVAL);
    /* more terms than the caller's buffer (plan_cap 4 here; u3 all 3: up to 3 terms allowed) */
    CHECK(finish_of("{\"u3\":[1,2,3],\"exponent\":0,\"plan\":[" T1 "," T1 "," T1 "]}", &err) == 0);
    CHECK(finish_of("[]", &err) == FS_EFORMAT);
}

static void test_finish_caller_cap(void)
{
    struct fs_err err = {0};
    json_t *j = parse("{\"u3\":[1,2],\"exponent\":0,\"plan\":[" T1 "," T1 "," T1 "]}");
    uint32_t u3[2];
    struct fs_prg_term plan[2];
    struct fs_shard_finish f;

    memset(&f, 0, sizeof f);
    f.u3 = u3;
    f.u3_cap = 2;
    f.plan = plan;
    f.plan_cap = 2;
    CHECK(fs_shardwire_finish_decode(j, 3, &f, &err) == FS_ERANGE);
    json_decref(j);
}

/* ------------------------------------------------------------ verdict, long poll */

static void test_verdict(void)
{
    struct fs_err err = {0};
    uint32_t ids[2] = {2, 5};
    uint8_t in[6];
    json_t *j = fs_shardwire_verdict_encode(ids, 2);
    char *txt = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;

    CHECK(txt != NULL && strcmp(txt, "{\"complete_on_shards\":[2,5]}") == 0);
    CHECK_OK(fs_shardwire_verdict_decode(j, 5, in, &err), &err);
    CHECK(in[0] == 0 && in[1] == 0 && in[2] == 1 && in[3] == 0 && in[5] == 1);
    CHECK(fs_shardwire_verdict_decode(j, 4, in, &err) == FS_EINVAL); /* 5 > 4 */
    free(txt);
    json_decref(j);
    j = parse("{\"complete_on_shards\":[2,2]}");
    CHECK(fs_shardwire_verdict_decode(j, 5, in, &err) == FS_EINVAL && in[2] == 0);
    json_decref(j);
    j = parse("{\"complete_on_shards\":[1,2,3]}");
    CHECK(fs_shardwire_verdict_decode(j, 2, in, &err) == FS_ERANGE);
    json_decref(j);
    j = parse("{\"other\":[]}");
    CHECK(fs_shardwire_verdict_decode(j, 2, in, &err) == FS_EFORMAT);
    json_decref(j);
    CHECK(fs_shardwire_verdict_decode(NULL, 2, in, &err) == FS_EFORMAT);
}

static void test_job_wait(void)
{
    struct fs_err err = {0};
    struct fs_job_wait w;

    CHECK_OK(fs_job_wait_parse(NULL, "junk", "x", 30000, &w, &err), &err);
    CHECK(w.wait == 0);
    CHECK_OK(fs_job_wait_parse("1500", "masked_input", "3", 30000, &w, &err), &err);
    CHECK(w.wait == 1 && w.ms == 1500 && w.aggregation == 3 &&
          strcmp(fs_job_phase_name(w.phase), "masked_input") == 0);
    CHECK_OK(fs_job_wait_parse("0", "done", "4294967295", 30000, &w, &err), &err);
    CHECK(w.ms == 0 && w.aggregation == 4294967295u);
    CHECK(fs_job_wait_parse("30001", "done", "0", 30000, &w, &err) == FS_EFORMAT && w.wait == 0);
    CHECK(strstr(err.msg, "0..30000") != NULL);
    CHECK(fs_job_wait_parse("01", "done", "0", 30000, &w, &err) == FS_EFORMAT);
    CHECK(fs_job_wait_parse("-1", "done", "0", 30000, &w, &err) == FS_EFORMAT);
    CHECK(fs_job_wait_parse("", "done", "0", 30000, &w, &err) == FS_EFORMAT);
    CHECK(fs_job_wait_parse("10", NULL, "0", 30000, &w, &err) == FS_EFORMAT);
    CHECK(fs_job_wait_parse("10", "resting", "0", 30000, &w, &err) == FS_EFORMAT);
    CHECK(fs_job_wait_parse("10", "done", NULL, 30000, &w, &err) == FS_EFORMAT);
    CHECK(fs_job_wait_parse("10", "done", "4294967296", 30000, &w, &err) == FS_EFORMAT);
    CHECK(fs_job_wait_parse("10", "done", "1x", 30000, &w, &err) == FS_EFORMAT);
    CHECK(fs_job_wait_parse("99999999999999999999", "done", "1", 30000, &w, &err) == FS_EFORMAT);
}

int main(void)
{
    RUN(test_window_roundtrip);
    RUN(test_window_refusals);
    RUN(test_status_roundtrip);
    RUN(test_status_refusals);
    RUN(test_status_error_cut);
    RUN(test_finish_roundtrip);
    RUN(test_finish_refusals);
    RUN(test_finish_caller_cap);
    RUN(test_verdict);
    RUN(test_job_wait);
    return TEST_END("test_shardwire");
}
