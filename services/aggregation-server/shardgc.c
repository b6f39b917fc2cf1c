/* The records of pending and abandoned shard window deletions (shardgc.h). */
#include "shardgc.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/fdio.h"

#define DEL_RECORD_MAX 4096               /* bytes of one record file */
#define DEL_TIME_MAX   ((int64_t)1 << 40) /* unix s: later times in a record are not taken */

/* src as printable ASCII into out (cap bytes with the NUL): errors may
 * quote a peer's answer, and a cut UTF-8 sequence is no JSON string. */
static void ascii_copy(char *out, size_t cap, const char *src)
{
    size_t k = 0;

    for (const char *p = src != NULL ? src : ""; *p != '\0' && k + 1 < cap; p++) {
        out[k++] = (*p >= 0x20 && *p < 0x7f) ? *p : '?';
    }
    out[k] = '\0';
}

static void iso_time(int64_t t, char out[32])
{
    time_t s = (time_t)t;
    struct tm tm;

    if (gmtime_r(&s, &tm) == NULL || strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) {
        snprintf(out, 32, "%s", "1970-01-01T00:00:00Z");
    }
}

static int is_record(const char *name)
{
    size_t len = strlen(name);

    return name[0] != '.' && strstr(name, ".tmp.") == NULL && len > 5 &&
           strcmp(name + len - 5, ".json") == 0;
}

int agg_del_read(const char *dir, const char *name, struct agg_del_rec *r)
{
    char path[4400];
    struct stat st;
    json_error_t je;
    json_t *doc;
    const char *j;
    const char *u;
    const char *e;
    json_int_t s;
    int rc = -1;

    memset(r, 0, sizeof *r);
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path ||
        stat(path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > DEL_RECORD_MAX) {
        return -1;
    }
    doc = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    j = json_string_value(json_object_get(doc, "job"));
    u = json_string_value(json_object_get(doc, "url"));
    e = json_string_value(json_object_get(doc, "error"));
    s = json_integer_value(json_object_get(doc, "shard"));
    if (j != NULL && fs_job_id_valid(j) && u != NULL && u[0] != '\0' &&
        strlen(u) <= FS_JOB_URL_MAX && s >= 1 && s < FS_JOB_MAX_SHARDS) {
        json_int_t at = json_integer_value(json_object_get(doc, "recorded"));
        json_int_t ab = json_integer_value(json_object_get(doc, "abandoned"));
        snprintf(r->job, sizeof r->job, "%s", j);
        snprintf(r->url, sizeof r->url, "%s", u);
        ascii_copy(r->error, sizeof r->error, e);
        r->shard = (uint32_t)s;
        r->recorded = at > 0 && at < DEL_TIME_MAX ? (int64_t)at : (int64_t)st.st_mtime;
        r->abandoned = ab > 0 && ab < DEL_TIME_MAX ? (int64_t)ab : 0;
        rc = 0;
    }
    json_decref(doc);
    return rc;
}

int agg_del_write(const char *path, const struct agg_del_rec *r, struct fs_err *err)
{
    json_t *doc = json_pack("{s:s, s:i, s:s, s:I}", "job", r->job, "shard", (int)r->shard, "url",
                            r->url, "recorded", (json_int_t)r->recorded);
    char *txt = NULL;
    int rc;

    if (doc != NULL && r->abandoned > 0) {
        (void)json_object_set_new(doc, "abandoned", json_integer((json_int_t)r->abandoned));
        (void)json_object_set_new(doc, "error", json_string(r->error));
    }
    txt = doc != NULL ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    if (txt == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    rc = fs_write_file_atomic(path, txt, strlen(txt), err);
    free(txt);
    return rc;
}

int agg_del_abandon(const char *dir, const char *name, struct agg_del_rec *r, const char *error,
                    struct fs_err *err)
{
    char path[4400];
    int rc;

    ascii_copy(r->error, sizeof r->error, error);
    r->abandoned = (int64_t)time(NULL);
    rc = (size_t)snprintf(path, sizeof path, "%s/%s", dir, AGG_DEL_ABANDONED) >= sizeof path
             ? fs_err_set(err, FS_EINVAL, "data directory path too long")
             : fs_mkdir_p(path, err);
    if (rc == 0 && (size_t)snprintf(path, sizeof path, "%s/%s/%s", dir, AGG_DEL_ABANDONED, name) >=
                       sizeof path) {
        rc = fs_err_set(err, FS_EINVAL, "data directory path too long");
    }
    if (rc == 0) {
        rc = agg_del_write(path, r, err);
    }
    if (rc == 0 && (size_t)snprintf(path, sizeof path, "%s/%s", dir, name) < sizeof path) {
        (void)unlink(path);
    }
    return rc;
}

/* Count (and, into list when not NULL, at most AGG_DEL_LIST_MAX of) the
 * records of dir. */
static uint64_t scan(const char *dir, json_t *list, uint32_t max_age_s)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    uint64_t n = 0;

    while (d != NULL && (e = readdir(d)) != NULL) {
        struct agg_del_rec r;
        char at[32];
        json_t *o;
        if (!is_record(e->d_name)) {
            continue;
        }
        n++;
        if (list == NULL || json_array_size(list) >= AGG_DEL_LIST_MAX ||
            agg_del_read(dir, e->d_name, &r) != 0) {
            continue;
        }
        iso_time(r.recorded, at);
        o = json_pack("{s:s, s:i, s:s, s:s}", "job", r.job, "shard", (int)r.shard, "url", r.url,
                      "recorded_at", at);
        if (o != NULL && r.abandoned > 0) {
            iso_time(r.abandoned, at);
            (void)json_object_set_new(o, "abandoned_at", json_string(at));
            (void)json_object_set_new(o, "error", json_string(r.error));
        } else if (o != NULL && max_age_s > 0) {
            iso_time(r.recorded + (int64_t)max_age_s, at);
            (void)json_object_set_new(o, "give_up_at", json_string(at));
        }
        if (o != NULL) {
            (void)json_array_append_new(list, o);
        }
    }
    if (d != NULL) {
        closedir(d);
    }
    return n;
}

static void dirs(const char *data_dir, char pend[4200], char aban[4300])
{
    snprintf(pend, 4200, "%s/%s", data_dir, AGG_DEL_DIR);
    snprintf(aban, 4300, "%s/%s", pend, AGG_DEL_ABANDONED);
}

void agg_del_counts(const char *data_dir, uint64_t *pending, uint64_t *abandoned)
{
    char pend[4200];
    char aban[4300];

    dirs(data_dir, pend, aban);
    *pending = scan(pend, NULL, 0);
    *abandoned = scan(aban, NULL, 0);
}

json_t *agg_del_doc(const char *data_dir, uint32_t max_age_s)
{
    char pend[4200];
    char aban[4300];
    json_t *p = json_array();
    json_t *a = json_array();
    uint64_t np;
    uint64_t na;

    if (p == NULL || a == NULL) {
        json_decref(p);
        json_decref(a);
        return NULL;
    }
    dirs(data_dir, pend, aban);
    np = scan(pend, p, max_age_s);
    na = scan(aban, a, 0);
    return json_pack("{s:I, s:I, s:I, s:o, s:o}", "max_age_s", (json_int_t)max_age_s,
                     "pending_count", (json_int_t)np, "abandoned_count", (json_int_t)na, "pending",
                     p, "abandoned", a);
}
