/* The peer documents of sharded aggregation (see shardwire.h). */
#include "shardwire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/crypto/ct.h"
#include "../lib/proto/fedsvd.h"
#include "../lib/proto/fedsvd_shard.h"
#include "wire.h"

static const char *const STATE_NAME[] = {"receiving", "finishing", "done", "failed"};

const char *fs_shard_state_name(enum fs_shard_state s)
{
    return (unsigned)s < sizeof STATE_NAME / sizeof STATE_NAME[0] ? STATE_NAME[s] : "unknown";
}

/* 0 when every member of object j is one of keys (NULL-terminated). */
static int only_keys(const json_t *j, const char *const *keys, const char *where,
                     struct fs_err *err)
{
    const char *key;
    json_t *val;

    json_object_foreach((json_t *)j, key, val)
    {
        int ok = 0;
        (void)val;
        for (size_t i = 0; keys[i] != NULL; i++) {
            ok |= strcmp(key, keys[i]) == 0;
        }
        if (!ok) {
            return fs_err_set(err, FS_EINVAL, "%sunknown field \"%.64s\"", where, key);
        }
    }
    return 0;
}

/* Member key of b: an integer in lo..hi. */
static int get_u64(const json_t *b, const char *key, uint64_t lo, uint64_t hi, uint64_t *out,
                   struct fs_err *err)
{
    const json_t *v = json_object_get(b, key);

    if (!json_is_integer(v)) {
        return fs_err_set(err, FS_EFORMAT, "%s: expected an integer", key);
    }
    if (json_integer_value(v) < 0 || (uint64_t)json_integer_value(v) < lo ||
        (uint64_t)json_integer_value(v) > hi) {
        return fs_err_set(err, FS_EINVAL, "%s: outside %llu..%llu", key, (unsigned long long)lo,
                          (unsigned long long)hi);
    }
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

/* ------------------------------------------------------------ the window spec */

json_t *fs_shardwire_window_encode(const struct fs_shard_window *w)
{
    json_t *auth = json_array();
    json_t *sizes = json_array();

    for (uint32_t v = 0; auth != NULL && sizes != NULL && v < w->parties; v++) {
        char hex[2 * FS_SHARDWIRE_AUTH_LEN + 1];
        for (int k = 0; k < FS_SHARDWIRE_AUTH_LEN; k++) {
            snprintf(hex + 2 * k, 3, "%02x", w->party_auth[v][k]);
        }
        if (json_array_append_new(auth, json_string(hex)) != 0 ||
            json_array_append_new(sizes, json_integer((json_int_t)w->party_sizes[v])) != 0) {
            json_decref(auth);
            auth = NULL;
        }
    }
    if (auth == NULL || sizes == NULL) {
        json_decref(auth);
        json_decref(sizes);
        return NULL;
    }
    /* the members in this order: the bytes on the wire are stable */
    return json_pack("{s:i, s:i, s:I, s:I, s:I, s:i, s:i, s:o, s:[I, I], s:i, s:o}", "shard",
                     (int)w->shard, "round", (int)w->round, "total_words",
                     (json_int_t)w->total_words, "offset", (json_int_t)w->offset, "words",
                     (json_int_t)w->words, "chunk_words", (int)w->chunk_words, "parties",
                     (int)w->parties, "party_auth", auth, "shape", (json_int_t)w->rows,
                     (json_int_t)w->cols, "shards", (int)w->shards, "party_sizes", sizes);
}

void fs_shardwire_window_clear(struct fs_shard_window *w)
{
    if (w == NULL) {
        return;
    }
    free((void *)w->party_auth);
    free(w->party_sizes);
    memset(w, 0, sizeof *w);
}

static int hex_nibble(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    return -1;
}

/* The integers of a spec. */
static int window_ints(const json_t *b, struct fs_shard_window *w, struct fs_err *err)
{
    uint64_t x[5] = {0};
    int rc;

    if ((rc = get_u64(b, "shard", 1, FS_JOB_MAX_SHARDS - 1, &x[0], err)) != 0 ||
        (rc = get_u64(b, "round", 0, UINT32_MAX, &x[1], err)) != 0 ||
        (rc = get_u64(b, "chunk_words", FS_SHARDWIRE_CHUNK_MIN, FS_SHARDWIRE_CHUNK_MAX, &x[2],
                      err)) != 0 ||
        (rc = get_u64(b, "parties", 1, FS_JOB_MAX_PARTIES, &x[3], err)) != 0 ||
        (rc = get_u64(b, "shards", 2, FS_JOB_MAX_SHARDS, &x[4], err)) != 0 ||
        (rc = get_u64(b, "total_words", 1, FS_SHARDWIRE_WORDS_MAX, &w->total_words, err)) != 0 ||
        (rc = get_u64(b, "offset", 0, FS_SHARDWIRE_WORDS_MAX, &w->offset, err)) != 0 ||
        (rc = get_u64(b, "words", 1, FS_SHARDWIRE_WORDS_MAX, &w->words, err)) != 0) {
        return rc;
    }
    w->shard = (uint32_t)x[0];
    w->round = (uint32_t)x[1];
    w->chunk_words = (uint32_t)x[2];
    w->parties = (uint32_t)x[3];
    w->shards = (uint32_t)x[4];
    if (w->shard >= w->shards) {
        return fs_err_set(err, FS_EINVAL, "shard: %u of %u shards", w->shard, w->shards);
    }
    return 0;
}

/* party_sizes and party_auth into new arrays. */
static int window_parties(const json_t *b, struct fs_shard_window *w, struct fs_err *err)
{
    const json_t *auth = json_object_get(b, "party_auth");
    const json_t *sizes = json_object_get(b, "party_sizes");
    uint8_t(*digests)[FS_SHARDWIRE_AUTH_LEN] = NULL;

    if (!json_is_array(auth) || json_array_size(auth) != w->parties || !json_is_array(sizes) ||
        json_array_size(sizes) != w->parties) {
        return fs_err_set(err, FS_EFORMAT,
                          "party_auth and party_sizes: expected one entry per party");
    }
    w->party_sizes = calloc(w->parties, sizeof *w->party_sizes);
    digests = calloc(w->parties, sizeof *digests);
    w->party_auth = (const uint8_t(*)[FS_SHARDWIRE_AUTH_LEN])digests;
    if (w->party_sizes == NULL || digests == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    for (uint32_t i = 0; i < w->parties; i++) {
        const json_t *v = json_array_get(sizes, i);
        if (!json_is_integer(v) || json_integer_value(v) < 1) {
            return fs_err_set(err, FS_EFORMAT, "party_sizes[%u]: expected a positive integer", i);
        }
        if ((uint64_t)json_integer_value(v) > FS_SHARDWIRE_WORDS_MAX) {
            return fs_err_set(err, FS_EINVAL, "party_sizes[%u]: too large", i);
        }
        w->party_sizes[i] = (size_t)json_integer_value(v);
    }
    for (uint32_t i = 0; i < w->parties; i++) {
        const char *h = json_string_value(json_array_get(auth, i));
        if (h == NULL || json_string_length(json_array_get(auth, i)) != 2 * FS_SHARDWIRE_AUTH_LEN) {
            return fs_err_set(err, FS_EFORMAT, "party_auth[%u]: expected 64 hex digits", i);
        }
        for (size_t k = 0; k < FS_SHARDWIRE_AUTH_LEN; k++) {
            int hi = hex_nibble(h[2 * k]);
            int lo = hex_nibble(h[2 * k + 1]);
            if (hi < 0 || lo < 0) {
                return fs_err_set(err, FS_EFORMAT, "party_auth[%u]: expected 64 hex digits", i);
            }
            digests[i][k] = (uint8_t)(hi << 4 | lo);
        }
    }
    return 0;
}

/* The shape, and the window against the job's shard-blocked layout. */
static int window_layout(const json_t *b, struct fs_shard_window *w, struct fs_err *err)
{
    const json_t *shape = json_object_get(b, "shape");
    struct fs_fedsvd_job fj;
    uint64_t off = 0;
    uint64_t len = 0;

    if (!json_is_array(shape) || json_array_size(shape) != 2 ||
        !json_is_integer(json_array_get(shape, 0)) || !json_is_integer(json_array_get(shape, 1)) ||
        json_integer_value(json_array_get(shape, 0)) < 1 ||
        json_integer_value(json_array_get(shape, 1)) < 1) {
        return fs_err_set(err, FS_EFORMAT, "shape: expected [rows, cols]");
    }
    w->rows = (uint64_t)json_integer_value(json_array_get(shape, 0));
    w->cols = (uint64_t)json_integer_value(json_array_get(shape, 1));
    if (w->rows > FS_SHARDWIRE_WORDS_MAX || w->cols > FS_SHARDWIRE_WORDS_MAX / w->rows) {
        return fs_err_set(err, FS_EINVAL, "shape: too large");
    }
    memset(&fj, 0, sizeof fj);
    fj.partition = FS_FEDSVD_SAMPLES;
    fj.rows = (size_t)w->rows;
    fj.cols = (size_t)w->cols;
    fj.parties = w->parties;
    fj.sizes = w->party_sizes;
    fj.shards = w->shards;
    if (fs_fedsvd_job_check(&fj, err) != 0) {
        return fs_err_set(err, FS_EINVAL, "%s", err->msg);
    }
    if (w->rows * w->cols != w->total_words ||
        fs_fedsvd_shard_window(&fj, w->shard, &off, &len) != 0 || off != w->offset ||
        len != w->words) {
        return fs_err_set(err, FS_EINVAL,
                          "total_words, offset and words do not match the job's shard %u",
                          w->shard);
    }
    return 0;
}

int fs_shardwire_window_decode(const json_t *j, struct fs_shard_window *w, struct fs_err *err)
{
    static const char *const keys[] = {"shard", "round",       "total_words", "offset",
                                       "words", "chunk_words", "parties",     "party_auth",
                                       "shape", "shards",      "party_sizes", NULL};
    int rc;

    memset(w, 0, sizeof *w);
    if (!json_is_object(j)) {
        return fs_err_set(err, FS_EFORMAT, "expected a JSON object");
    }
    rc = only_keys(j, keys, "", err);
    if (rc == 0) {
        rc = window_ints(j, w, err);
    }
    if (rc == 0) {
        rc = window_parties(j, w, err);
    }
    if (rc == 0) {
        rc = window_layout(j, w, err);
    }
    if (rc != 0) {
        fs_shardwire_window_clear(w);
    }
    return rc;
}

/* ------------------------------------------------------------ the status */

json_t *fs_shardwire_status_encode(const struct fs_shard_status *s)
{
    json_t *ids = json_array();
    json_t *o;

    for (uint32_t p = 1; ids != NULL && s->complete != NULL && p <= s->parties; p++) {
        if (s->complete[p - 1] && json_array_append_new(ids, json_integer(p)) != 0) {
            json_decref(ids);
            ids = NULL;
        }
    }
    if (ids == NULL) {
        return NULL;
    }
    /* the members in this order: the bytes on the wire are stable */
    o = json_pack("{s:s, s:i, s:s, s:o, s:I, s:I, s:I, s:I, s:I}", "job", s->job, "shard",
                  (int)s->shard, "state", fs_shard_state_name(s->state), "complete", ids, "offset",
                  (json_int_t)s->offset, "words", (json_int_t)s->words, "chunks",
                  (json_int_t)s->chunks, "chunk_words", (json_int_t)s->chunk_words,
                  "peak_rss_bytes", (json_int_t)s->peak_rss_bytes);
    if (o != NULL && s->error[0] != '\0') {
        json_t *e = json_string(s->error);
        e = e != NULL ? e : json_string("(the error text is not UTF-8)");
        if (json_object_set_new(o, "error", e) != 0) {
            json_decref(o);
            o = NULL;
        }
    }
    if (o != NULL &&
        ((s->error[0] == '\0' && json_object_set_new(o, "error", json_null()) != 0) ||
         json_object_set_new(o, "finish_s",
                             s->has_finish_s ? json_real(s->finish_s) : json_null()) != 0)) {
        json_decref(o);
        o = NULL;
    }
    return o;
}

/* complete: increasing ids 1..parties into s->complete (when given). */
static int status_ids(const json_t *a, struct fs_shard_status *s, struct fs_err *err)
{
    json_int_t last = 0;

    if (!json_is_array(a)) {
        return fs_err_set(err, FS_EFORMAT, "complete: expected an array of party ids");
    }
    if (json_array_size(a) > s->parties) {
        return fs_err_set(err, FS_ERANGE, "complete: %zu entries, at most %u allowed",
                          json_array_size(a), s->parties);
    }
    if (s->complete != NULL) {
        memset(s->complete, 0, s->parties);
    }
    for (size_t i = 0; i < json_array_size(a); i++) {
        const json_t *v = json_array_get(a, i);
        json_int_t x = json_integer_value(v);
        if (!json_is_integer(v)) {
            return fs_err_set(err, FS_EFORMAT, "complete[%zu]: expected an integer", i);
        }
        if (x < 1 || x > (json_int_t)s->parties || x <= last) {
            return fs_err_set(err, FS_EINVAL, "complete[%zu]: expected increasing party ids 1..%u",
                              i, s->parties);
        }
        last = x;
        if (s->complete != NULL) {
            s->complete[x - 1] = 1;
        }
    }
    return 0;
}

static int status_text(const json_t *o, struct fs_shard_status *s, struct fs_err *err)
{
    const json_t *st = json_object_get(o, "state");
    const json_t *e = json_object_get(o, "error");
    const json_t *f = json_object_get(o, "finish_s");
    const char *job = json_string_value(json_object_get(o, "job"));
    int known = 0;

    if (job == NULL || !fs_job_id_valid(job)) {
        return fs_err_set(err, FS_EFORMAT, "job: expected a job id");
    }
    snprintf(s->job, sizeof s->job, "%s", job);
    if (!json_is_string(st)) {
        return fs_err_set(err, FS_EFORMAT, "state: expected a string");
    }
    for (size_t i = 0; i < sizeof STATE_NAME / sizeof STATE_NAME[0]; i++) {
        if (strcmp(json_string_value(st), STATE_NAME[i]) == 0) {
            s->state = (enum fs_shard_state)i;
            known = 1;
        }
    }
    if (!known) {
        return fs_err_set(err, FS_EINVAL, "state: expected receiving, finishing, done or failed");
    }
    if (!json_is_null(e) && !json_is_string(e)) {
        return fs_err_set(err, FS_EFORMAT, "error: expected a string or null");
    }
    if (json_is_string(e)) { /* a longer text is cut, at a character's start */
        const char *src = json_string_value(e);
        size_t n = (size_t)snprintf(s->error, sizeof s->error, "%s", src);
        if (n >= sizeof s->error) {
            n = sizeof s->error - 1;
            while (n > 0 && ((unsigned char)src[n] & 0xc0) == 0x80) {
                n--;
            }
            s->error[n] = '\0';
        }
    }
    if (f != NULL && !json_is_null(f)) {
        if (!json_is_number(f) || !(json_number_value(f) >= 0) || json_number_value(f) > 1e12) {
            return fs_err_set(err, FS_EINVAL, "finish_s: expected seconds or null");
        }
        s->has_finish_s = 1;
        s->finish_s = json_number_value(f);
    }
    return 0;
}

int fs_shardwire_status_decode(const json_t *j, struct fs_shard_status *s, struct fs_err *err)
{
    static const char *const ints[] = {"offset", "words", "chunks", "chunk_words",
                                       "peak_rss_bytes"};
    uint64_t *dst[] = {&s->offset, &s->words, &s->chunks, &s->chunk_words, &s->peak_rss_bytes};
    uint64_t shard = 0;
    int rc;

    s->job[0] = '\0';
    s->error[0] = '\0';
    s->has_finish_s = 0;
    s->finish_s = 0;
    if (!json_is_object(j)) {
        return fs_err_set(err, FS_EFORMAT, "expected a JSON object");
    }
    if ((rc = status_text(j, s, err)) != 0 ||
        (rc = get_u64(j, "shard", 1, FS_JOB_MAX_SHARDS - 1, &shard, err)) != 0) {
        return rc;
    }
    s->shard = (uint32_t)shard;
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        if ((rc = get_u64(j, ints[i], 0, INT64_MAX, dst[i], err)) != 0) {
            return rc;
        }
    }
    return status_ids(json_object_get(j, "complete"), s, err);
}

/* ------------------------------------------------------------ the finish */

uint64_t fs_shardwire_plan_max(uint32_t n, size_t nu3)
{
    if (nu3 > n) {
        return 0;
    }
    return (uint64_t)nu3 + (uint64_t)(n - nu3) * nu3;
}

uint64_t fs_shardwire_finish_cap(uint32_t n)
{
    /* u3: n ids; plan: the survivors' self masks plus, for every dropped
     * party, one pair key per survivor: at most n + ceil(n/2) floor(n/2)
     * terms of about 70 bytes of JSON each */
    uint64_t terms = (uint64_t)n + (uint64_t)((n + 1) / 2) * (n / 2);

    return 4096 + 12 * (uint64_t)n + 80 * terms;
}

int fs_shardwire_finish_sizes(const json_t *j, uint32_t parties, size_t *nu3, size_t *nplan,
                              struct fs_err *err)
{
    const json_t *u3 = json_object_get(j, "u3");
    const json_t *plan = json_object_get(j, "plan");

    *nu3 = 0;
    *nplan = 0;
    if (!json_is_object(j) || !json_is_array(u3) || !json_is_array(plan) ||
        !json_is_integer(json_object_get(j, "exponent"))) {
        return fs_err_set(err, FS_EFORMAT,
                          "expected {\"u3\": [ids], \"exponent\": E, "
                          "\"plan\": [{\"key\", \"sign\"}]}");
    }
    if (json_array_size(u3) < 1 || json_array_size(u3) > parties) {
        return fs_err_set(err, FS_ERANGE, "u3: %zu entries, expected 1..%u", json_array_size(u3),
                          parties);
    }
    if (json_array_size(plan) > fs_shardwire_plan_max(parties, json_array_size(u3))) {
        return fs_err_set(err, FS_ERANGE,
                          "plan: %zu terms, at most %llu for %zu survivors of %u parties",
                          json_array_size(plan),
                          (unsigned long long)fs_shardwire_plan_max(parties, json_array_size(u3)),
                          json_array_size(u3), parties);
    }
    *nu3 = json_array_size(u3);
    *nplan = json_array_size(plan);
    return 0;
}

static int finish_term(const json_t *t, size_t i, struct fs_prg_term *out, struct fs_err *err)
{
    static const char *const keys[] = {"key", "sign", NULL};
    const json_t *k = json_object_get(t, "key");
    const json_t *sg = json_object_get(t, "sign");
    char where[48];
    int rc;

    if (!json_is_object(t) || !json_is_string(k) || !json_is_integer(sg)) {
        return fs_err_set(err, FS_EFORMAT, "plan[%zu]: expected {\"key\", \"sign\": 1|-1}", i);
    }
    snprintf(where, sizeof where, "plan[%zu]: ", i);
    if ((rc = only_keys(t, keys, where, err)) != 0) {
        return rc;
    }
    if (json_integer_value(sg) != 1 && json_integer_value(sg) != -1) {
        return fs_err_set(err, FS_EINVAL, "plan[%zu].sign: expected 1 or -1", i);
    }
    /* the b64url decoder's messages name lengths and characters' kinds,
     * never the text; still, only its code is passed on */
    rc = fs_b64url_decode_exact(json_string_value(k), out->key, sizeof out->key, err);
    if (rc != 0) {
        return fs_err_set(err, rc,
                          rc == FS_EINVAL ? "plan[%zu].key: expected %d bytes"
                                          : "plan[%zu].key: expected base64url",
                          i, FS_SHARDWIRE_KEY_LEN);
    }
    out->sign = (int)json_integer_value(sg);
    return 0;
}

static int finish_fill(const json_t *j, uint32_t parties, struct fs_shard_finish *f,
                       struct fs_err *err)
{
    static const char *const keys[] = {"u3", "exponent", "plan", NULL};
    const json_t *u3 = json_object_get(j, "u3");
    const json_t *plan = json_object_get(j, "plan");
    json_int_t e;
    size_t nu3 = 0;
    size_t np = 0;
    int rc = fs_shardwire_finish_sizes(j, parties, &nu3, &np, err);

    if (rc != 0 || (rc = only_keys(j, keys, "", err)) != 0) {
        return rc;
    }
    e = json_integer_value(json_object_get(j, "exponent"));
    if (e < FS_WIRE_MIN_EXP || e > FS_WIRE_MAX_EXP) {
        return fs_err_set(err, FS_EINVAL, "exponent: outside %d..%d", FS_WIRE_MIN_EXP,
                          FS_WIRE_MAX_EXP);
    }
    if (nu3 > f->u3_cap || np > f->plan_cap || f->u3 == NULL || (np > 0 && f->plan == NULL)) {
        return fs_err_set(err, FS_ERANGE, "u3 or plan: more entries than this window takes");
    }
    for (size_t i = 0; i < nu3; i++) {
        const json_t *v = json_array_get(u3, i);
        if (!json_is_integer(v)) {
            return fs_err_set(err, FS_EFORMAT, "u3[%zu]: expected an integer", i);
        }
        if (json_integer_value(v) < 1 || json_integer_value(v) > (json_int_t)parties ||
            (i > 0 && json_integer_value(v) <= (json_int_t)f->u3[i - 1])) {
            return fs_err_set(err, FS_EINVAL, "u3: expected increasing party ids 1..%u", parties);
        }
        f->u3[i] = (uint32_t)json_integer_value(v);
    }
    for (size_t i = 0; i < np; i++) {
        if ((rc = finish_term(json_array_get(plan, i), i, &f->plan[i], err)) != 0) {
            return rc;
        }
    }
    if (np < nu3) {
        return fs_err_set(err, FS_EINVAL,
                          "plan: %zu terms, fewer than the %zu survivors' self masks", np, nu3);
    }
    f->exponent = (int)e;
    f->nu3 = nu3;
    f->nplan = np;
    return 0;
}

int fs_shardwire_finish_decode(const json_t *j, uint32_t parties, struct fs_shard_finish *f,
                               struct fs_err *err)
{
    int rc = finish_fill(j, parties, f, err);

    if (rc != 0) {
        if (f->plan != NULL) {
            fs_wipe(f->plan, f->plan_cap * sizeof *f->plan);
        }
        f->nplan = 0;
        f->nu3 = 0;
    }
    return rc;
}

/* Wipe the key strings of an array of plan terms. */
static void wipe_terms(const json_t *plan)
{
    for (size_t i = 0; json_is_array(plan) && i < json_array_size(plan); i++) {
        json_t *k = json_object_get(json_array_get(plan, i), "key");
        if (json_is_string(k)) {
            fs_wipe((void *)json_string_value(k), json_string_length(k));
        }
    }
}

void fs_shardwire_finish_wipe(json_t *j)
{
    wipe_terms(json_object_get(j, "plan"));
}

char *fs_shardwire_finish_encode(const uint32_t *u3, size_t nu3, int exponent,
                                 const struct fs_prg_term *plan, size_t nplan)
{
    json_t *terms = json_array();
    json_t *ids = fs_wire_ids_encode(u3, nu3);
    json_t *b = NULL;
    char *txt = NULL;

    for (size_t i = 0; terms != NULL && i < nplan; i++) {
        char *k = fs_b64url_encode(plan[i].key, sizeof plan[i].key);
        json_t *t =
            k != NULL ? json_pack("{s:s, s:i}", "key", k, "sign", plan[i].sign > 0 ? 1 : -1) : NULL;
        if (k != NULL) {
            fs_wipe(k, strlen(k));
            free(k);
        }
        if (t == NULL || json_array_append_new(terms, t) != 0) {
            wipe_terms(terms);
            json_decref(terms);
            terms = NULL;
        }
    }
    if (terms != NULL && ids != NULL) {
        b = json_pack("{s:o, s:i, s:o}", "u3", ids, "exponent", exponent, "plan", terms);
        ids = NULL;
        terms = NULL;
    }
    if (b != NULL) {
        txt = json_dumps(b, JSON_COMPACT);
        fs_shardwire_finish_wipe(b); /* the keys' copies in the document */
    }
    json_decref(ids);
    wipe_terms(terms); /* NULL unless ids could not be made */
    json_decref(terms);
    json_decref(b);
    return txt;
}

/* ------------------------------------------------------------ the verdict */

json_t *fs_shardwire_verdict_encode(const uint32_t *ids, size_t k)
{
    return json_pack("{s:o}", "complete_on_shards", fs_wire_ids_encode(ids, k));
}

int fs_shardwire_verdict_decode(const json_t *j, uint32_t n, uint8_t *in, struct fs_err *err)
{
    const json_t *a = json_object_get(j, "complete_on_shards");
    json_int_t last = 0;

    memset(in, 0, (size_t)n + 1);
    if (!json_is_array(a)) {
        return fs_err_set(err, FS_EFORMAT, "complete_on_shards: expected an array of party ids");
    }
    if (json_array_size(a) > n) {
        return fs_err_set(err, FS_ERANGE, "complete_on_shards: %zu entries, at most %u allowed",
                          json_array_size(a), n);
    }
    for (size_t i = 0; i < json_array_size(a); i++) {
        const json_t *v = json_array_get(a, i);
        json_int_t x = json_integer_value(v);
        if (!json_is_integer(v) || x < 1 || x > (json_int_t)n || x <= last) {
            memset(in, 0, (size_t)n + 1);
            return fs_err_set(err, json_is_integer(v) ? FS_EINVAL : FS_EFORMAT,
                              "complete_on_shards[%zu]: expected increasing party ids 1..%u", i, n);
        }
        last = x;
        in[x] = 1;
    }
    return 0;
}
