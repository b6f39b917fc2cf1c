/* SQLite persistence: see store.h. */
#include "store.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "net/db.h"

struct agg_store {
    fs_db *db;
};

static const char SCHEMA[] = "CREATE TABLE IF NOT EXISTS jobs ("
                             "  id TEXT PRIMARY KEY,"
                             "  created_at TEXT NOT NULL,"
                             "  created_unix REAL NOT NULL,"
                             "  spec TEXT NOT NULL,"
                             "  chunk_words INTEGER NOT NULL,"
                             "  state TEXT NOT NULL,"
                             "  error TEXT,"
                             "  result TEXT,"
                             "  status TEXT);"
                             "CREATE TABLE IF NOT EXISTS party_tokens ("
                             "  job_id TEXT NOT NULL REFERENCES jobs(id),"
                             "  party INTEGER NOT NULL,"
                             "  digest BLOB NOT NULL,"
                             "  PRIMARY KEY (job_id, party));"
                             "CREATE TABLE IF NOT EXISTS events ("
                             "  job_id TEXT NOT NULL REFERENCES jobs(id),"
                             "  seq INTEGER NOT NULL,"
                             "  kind TEXT NOT NULL,"
                             "  party INTEGER NOT NULL,"
                             "  idx INTEGER NOT NULL,"
                             "  body BLOB,"
                             "  at REAL NOT NULL,"
                             "  PRIMARY KEY (job_id, seq));"
                             "CREATE TABLE IF NOT EXISTS job_masksets ("
                             "  job_id TEXT PRIMARY KEY REFERENCES jobs(id),"
                             "  masking_url TEXT NOT NULL,"
                             "  maskset TEXT NOT NULL,"
                             "  end_token TEXT,"
                             "  attempts INTEGER NOT NULL DEFAULT 0,"
                             "  next_try_unix REAL NOT NULL DEFAULT 0,"
                             "  ended_at REAL);";

int agg_store_open(const char *dir, int fsync_full, agg_store **out, struct fs_err *err)
{
    agg_store *st = NULL;
    char path[4200];
    int rc = 0;

    *out = NULL;
    if ((size_t)snprintf(path, sizeof path, "%s/server.db", dir) >= sizeof path) {
        return fs_err_set(err, FS_EINVAL, "data dir path too long");
    }
    st = calloc(1, sizeof *st);
    if (st == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    rc = fs_db_open(path, "server.db", fsync_full, SCHEMA, &st->db, err);
    if (rc != 0) {
        agg_store_close(st);
        return rc;
    }
    *out = st;
    return 0;
}

void agg_store_close(agg_store *st)
{
    if (st == NULL) {
        return;
    }
    fs_db_close(st->db);
    free(st);
}

int agg_store_job_insert(agg_store *st, const char *id, const char *created_at, double created_unix,
                         const char *spec_json, uint32_t chunk_words, const uint8_t (*digests)[32],
                         uint32_t n, struct fs_err *err)
{
    sqlite3_stmt *s1 = NULL;
    sqlite3_stmt *s2 = NULL;
    int rc = 0;

    fs_db_lock(st->db);
    rc = fs_db_exec(st->db, "BEGIN IMMEDIATE;", "begin", err);
    if (rc != 0) {
        goto out;
    }
    if (sqlite3_prepare_v2(fs_db_conn(st->db),
                           "INSERT INTO jobs (id, created_at, created_unix, spec, chunk_words, "
                           "state) VALUES (?, ?, ?, ?, ?, 'running');",
                           -1, &s1, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(fs_db_conn(st->db),
                           "INSERT INTO party_tokens (job_id, party, digest) VALUES (?, ?, ?);", -1,
                           &s2, NULL) != SQLITE_OK) {
        rc = fs_db_err(st->db, err, "prepare");
        goto rollback;
    }
    sqlite3_bind_text(s1, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s1, 2, created_at, -1, SQLITE_STATIC);
    sqlite3_bind_double(s1, 3, created_unix);
    sqlite3_bind_text(s1, 4, spec_json, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s1, 5, chunk_words);
    if (sqlite3_step(s1) != SQLITE_DONE) {
        rc = fs_db_err(st->db, err, "insert job");
        goto rollback;
    }
    for (uint32_t i = 0; i < n; i++) {
        sqlite3_reset(s2);
        sqlite3_bind_text(s2, 1, id, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s2, 2, (sqlite3_int64)i + 1);
        sqlite3_bind_blob(s2, 3, digests[i], 32, SQLITE_STATIC);
        if (sqlite3_step(s2) != SQLITE_DONE) {
            rc = fs_db_err(st->db, err, "insert token digest");
            goto rollback;
        }
    }
    rc = fs_db_exec(st->db, "COMMIT;", "commit", err);
    if (rc == 0) {
        goto out;
    }
rollback:
    (void)fs_db_exec(st->db, "ROLLBACK;", "rollback", NULL);
out:
    sqlite3_finalize(s1);
    sqlite3_finalize(s2);
    fs_db_unlock(st->db);
    return rc;
}

int agg_store_job_update(agg_store *st, const char *id, const char *state, const char *error,
                         const char *result_json, const char *status_json, struct fs_err *err)
{
    sqlite3_stmt *s = NULL;
    int rc = 0;

    fs_db_lock(st->db);
    if (sqlite3_prepare_v2(fs_db_conn(st->db),
                           "UPDATE jobs SET state = ?, error = ?, result = coalesce(?, result), "
                           "status = coalesce(?, status) WHERE id = ?;",
                           -1, &s, NULL) != SQLITE_OK) {
        rc = fs_db_err(st->db, err, "prepare");
        goto out;
    }
    sqlite3_bind_text(s, 1, state, -1, SQLITE_STATIC);
    if (error != NULL) {
        sqlite3_bind_text(s, 2, error, -1, SQLITE_STATIC);
    }
    if (result_json != NULL) {
        sqlite3_bind_text(s, 3, result_json, -1, SQLITE_STATIC);
    }
    if (status_json != NULL) {
        sqlite3_bind_text(s, 4, status_json, -1, SQLITE_STATIC);
    }
    sqlite3_bind_text(s, 5, id, -1, SQLITE_STATIC);
    if (sqlite3_step(s) != SQLITE_DONE) {
        rc = fs_db_err(st->db, err, "update job");
    }
out:
    sqlite3_finalize(s);
    fs_db_unlock(st->db);
    return rc;
}

int agg_store_event_append(agg_store *st, const char *id, uint64_t seq, const char *kind,
                           uint32_t party, uint64_t idx, const void *body, size_t len, double at,
                           struct fs_err *err)
{
    sqlite3_stmt *s = NULL;
    int rc = 0;

    fs_db_lock(st->db);
    if (sqlite3_prepare_v2(fs_db_conn(st->db),
                           "INSERT INTO events (job_id, seq, kind, party, idx, body, at) "
                           "VALUES (?, ?, ?, ?, ?, ?, ?);",
                           -1, &s, NULL) != SQLITE_OK) {
        rc = fs_db_err(st->db, err, "prepare");
        goto out;
    }
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)seq);
    sqlite3_bind_text(s, 3, kind, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 4, party);
    sqlite3_bind_int64(s, 5, (sqlite3_int64)idx);
    if (body != NULL) {
        sqlite3_bind_blob64(s, 6, body, len, SQLITE_STATIC);
    }
    sqlite3_bind_double(s, 7, at);
    if (sqlite3_step(s) != SQLITE_DONE) {
        rc = fs_db_err(st->db, err, "append event");
    }
out:
    sqlite3_finalize(s);
    fs_db_unlock(st->db);
    return rc;
}

static const char *col_text(sqlite3_stmt *s, int i)
{
    return (const char *)sqlite3_column_text(s, i);
}

int agg_store_jobs_load(agg_store *st,
                        int (*cb)(void *ctx, const struct agg_job_row *row, struct fs_err *err),
                        void *ctx, struct fs_err *err)
{
    sqlite3_stmt *s = NULL;
    int rc = 0;
    int step;

    fs_db_lock(st->db);
    if (sqlite3_prepare_v2(fs_db_conn(st->db),
                           "SELECT id, created_at, created_unix, spec, chunk_words, state, error, "
                           "result, status FROM jobs ORDER BY created_unix, id;",
                           -1, &s, NULL) != SQLITE_OK) {
        rc = fs_db_err(st->db, err, "prepare");
        goto out;
    }
    while ((step = sqlite3_step(s)) == SQLITE_ROW) {
        struct agg_job_row row;
        row.id = col_text(s, 0);
        row.created_at = col_text(s, 1);
        row.created_unix = sqlite3_column_double(s, 2);
        row.spec = col_text(s, 3);
        row.chunk_words = (uint32_t)sqlite3_column_int64(s, 4);
        row.state = col_text(s, 5);
        row.error = col_text(s, 6);
        row.result = col_text(s, 7);
        row.status = col_text(s, 8);
        if (row.id == NULL || row.created_at == NULL || row.spec == NULL || row.state == NULL) {
            rc = fs_err_set(err, FS_EFORMAT, "server.db: job row with NULL fields");
            goto out;
        }
        /* the callback may use the store (tokens, events): drop the lock */
        fs_db_unlock(st->db);
        rc = cb(ctx, &row, err);
        fs_db_lock(st->db);
        if (rc != 0) {
            goto out;
        }
    }
    if (step != SQLITE_DONE) {
        rc = fs_db_err(st->db, err, "load jobs");
    }
out:
    sqlite3_finalize(s);
    fs_db_unlock(st->db);
    return rc;
}

int agg_store_tokens_load(agg_store *st, const char *id, uint32_t n, uint8_t (*digests)[32],
                          struct fs_err *err)
{
    sqlite3_stmt *s = NULL;
    uint32_t got = 0;
    int rc = 0;
    int step;

    fs_db_lock(st->db);
    rc = fs_db_prepare(
        st->db, "SELECT party, digest FROM party_tokens WHERE job_id = ? ORDER BY party;", &s, err);
    if (rc != 0) {
        goto out;
    }
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    while ((step = sqlite3_step(s)) == SQLITE_ROW) {
        sqlite3_int64 p = sqlite3_column_int64(s, 0);
        if (p < 1 || p > n || sqlite3_column_bytes(s, 1) != 32) {
            rc = fs_err_set(err, FS_EFORMAT, "server.db: bad token row for job %s", id);
            goto out;
        }
        memcpy(digests[p - 1], sqlite3_column_blob(s, 1), 32);
        got++;
    }
    if (step != SQLITE_DONE) {
        rc = fs_db_err(st->db, err, "load tokens");
    } else if (got != n) {
        rc = fs_err_set(err, FS_EFORMAT, "server.db: job %s has %u token digests, want %u", id, got,
                        n);
    }
out:
    sqlite3_finalize(s);
    fs_db_unlock(st->db);
    return rc;
}

/* Prepare sql and bind texts[0..n) to ?1..?n; *out is finalized by the caller. */
static int prepare_texts(agg_store *st, const char *sql, const char *const *texts, int n,
                         sqlite3_stmt **out, struct fs_err *err)
{
    if (sqlite3_prepare_v2(fs_db_conn(st->db), sql, -1, out, NULL) != SQLITE_OK) {
        return fs_db_err(st->db, err, "prepare");
    }
    for (int i = 0; i < n; i++) {
        sqlite3_bind_text(*out, i + 1, texts[i], -1, SQLITE_STATIC);
    }
    return 0;
}

int agg_store_maskset_set(agg_store *st, const char *job_id, const char *masking_url,
                          const char *maskset, const char *end_token, struct fs_err *err)
{
    const char *const v[4] = {job_id, masking_url, maskset, end_token};
    sqlite3_stmt *s = NULL;
    int rc;

    fs_db_lock(st->db);
    rc = prepare_texts(st,
                       "INSERT INTO job_masksets (job_id, masking_url, maskset, end_token) "
                       "VALUES (?1, ?2, ?3, ?4) ON CONFLICT(job_id) DO NOTHING;",
                       v, 4, &s, err);
    if (rc == 0 && sqlite3_step(s) != SQLITE_DONE) {
        rc = fs_db_err(st->db, err, "insert mask set");
    }
    if (rc == 0 && sqlite3_changes(fs_db_conn(st->db)) == 0) {
        /* a repeat is fine (a retried PUT), another mask set is not */
        sqlite3_finalize(s);
        s = NULL;
        rc = prepare_texts(st,
                           "SELECT 1 FROM job_masksets WHERE job_id = ?1 AND masking_url = ?2 "
                           "AND maskset = ?3 AND end_token IS ?4;",
                           v, 4, &s, err);
        if (rc == 0 && sqlite3_step(s) != SQLITE_ROW) {
            rc = fs_err_set(err, FS_ECONFLICT, "job %s already has another mask set", job_id);
        }
    }
    sqlite3_finalize(s);
    fs_db_unlock(st->db);
    return rc;
}

int agg_store_maskset_due(agg_store *st, double now_unix, uint32_t max_attempts,
                          int (*cb)(void *ctx, const struct agg_maskset_row *row,
                                    struct fs_err *err),
                          void *ctx, struct fs_err *err)
{
    sqlite3_stmt *s = NULL;
    struct agg_maskset_row *rows = NULL;
    size_t n = 0;
    int step = SQLITE_DONE;
    int rc = 0;

    /* Copy the rows first: cb makes network calls and must not hold the lock. */
    fs_db_lock(st->db);
    if (sqlite3_prepare_v2(fs_db_conn(st->db),
                           "SELECT m.job_id, m.masking_url, m.maskset, m.end_token, m.attempts "
                           "FROM job_masksets m JOIN jobs j ON j.id = m.job_id WHERE j.state != "
                           "'running' AND m.end_token IS NOT NULL AND m.attempts < ?1 AND "
                           "m.next_try_unix <= ?2 LIMIT 16;",
                           -1, &s, NULL) != SQLITE_OK) {
        rc = fs_db_err(st->db, err, "prepare");
        fs_db_unlock(st->db);
        goto out;
    }
    sqlite3_bind_int64(s, 1, max_attempts);
    sqlite3_bind_double(s, 2, now_unix);
    rows = calloc(16, sizeof *rows);
    while (rows != NULL && n < 16 && (step = sqlite3_step(s)) == SQLITE_ROW) {
        struct agg_maskset_row *r = &rows[n];
        const char *v[4];
        for (int c = 0; c < 4; c++) {
            v[c] = (const char *)sqlite3_column_text(s, c);
        }
        if (v[0] == NULL || v[1] == NULL || v[2] == NULL || v[3] == NULL) {
            continue;
        }
        r->job_id = strdup(v[0]);
        r->masking_url = strdup(v[1]);
        r->maskset = strdup(v[2]);
        r->end_token = strdup(v[3]);
        r->attempts = (uint32_t)sqlite3_column_int64(s, 4);
        n++;
    }
    if (rows == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "out of memory");
    } else if (step != SQLITE_DONE && step != SQLITE_ROW) {
        rc = fs_db_err(st->db, err, "select mask sets");
    }
    sqlite3_finalize(s);
    s = NULL;
    fs_db_unlock(st->db);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (rows[i].job_id == NULL || rows[i].masking_url == NULL || rows[i].maskset == NULL ||
            rows[i].end_token == NULL) {
            rc = fs_err_set(err, FS_ENOMEM, "out of memory");
        } else {
            rc = cb(ctx, &rows[i], err);
        }
    }
out:
    for (size_t i = 0; rows != NULL && i < n; i++) {
        free(rows[i].job_id);
        free(rows[i].masking_url);
        free(rows[i].maskset);
        if (rows[i].end_token != NULL) {
            OPENSSL_cleanse(rows[i].end_token, strlen(rows[i].end_token));
        }
        free(rows[i].end_token);
    }
    free(rows);
    return rc;
}

int agg_store_maskset_result(agg_store *st, const char *job_id, int ended, double next_try_unix,
                             double now_unix, struct fs_err *err)
{
    sqlite3_stmt *s = NULL;
    int rc = 0;

    fs_db_lock(st->db);
    if (sqlite3_prepare_v2(fs_db_conn(st->db),
                           ended ? "UPDATE job_masksets SET end_token = NULL, ended_at = ?2, "
                                   "attempts = attempts + 1 WHERE job_id = ?1;"
                                 : "UPDATE job_masksets SET attempts = attempts + 1, "
                                   "next_try_unix = ?3 WHERE job_id = ?1;",
                           -1, &s, NULL) != SQLITE_OK) {
        rc = fs_db_err(st->db, err, "prepare");
        goto out;
    }
    sqlite3_bind_text(s, 1, job_id, -1, SQLITE_STATIC);
    if (ended) {
        sqlite3_bind_double(s, 2, now_unix);
    } else {
        sqlite3_bind_double(s, 3, next_try_unix);
    }
    if (sqlite3_step(s) != SQLITE_DONE) {
        rc = fs_db_err(st->db, err, "update mask set");
    }
out:
    sqlite3_finalize(s);
    fs_db_unlock(st->db);
    return rc;
}

int agg_store_events_load(agg_store *st, const char *id,
                          int (*cb)(void *ctx, const struct agg_event *ev, struct fs_err *err),
                          void *ctx, struct fs_err *err)
{
    sqlite3_stmt *s = NULL;
    int rc = 0;
    int step;

    /* Events are read under the lock; callbacks must not call the store. */
    fs_db_lock(st->db);
    if (sqlite3_prepare_v2(fs_db_conn(st->db),
                           "SELECT seq, kind, party, idx, body, at FROM events WHERE job_id = ? "
                           "ORDER BY seq;",
                           -1, &s, NULL) != SQLITE_OK) {
        rc = fs_db_err(st->db, err, "prepare");
        goto out;
    }
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    while ((step = sqlite3_step(s)) == SQLITE_ROW) {
        struct agg_event ev;
        ev.seq = (uint64_t)sqlite3_column_int64(s, 0);
        ev.kind = col_text(s, 1);
        ev.party = (uint32_t)sqlite3_column_int64(s, 2);
        ev.idx = (uint64_t)sqlite3_column_int64(s, 3);
        ev.body = sqlite3_column_blob(s, 4);
        ev.len = (size_t)sqlite3_column_bytes(s, 4);
        ev.at = sqlite3_column_double(s, 5);
        if (ev.kind == NULL) {
            rc = fs_err_set(err, FS_EFORMAT, "server.db: event without kind");
            goto out;
        }
        rc = cb(ctx, &ev, err);
        if (rc != 0) {
            goto out;
        }
    }
    if (step != SQLITE_DONE) {
        rc = fs_db_err(st->db, err, "load events");
    }
out:
    sqlite3_finalize(s);
    fs_db_unlock(st->db);
    return rc;
}

int agg_store_ping(agg_store *st)
{
    sqlite3_stmt *s = NULL;
    int ok = 0;

    fs_db_lock(st->db);
    if (sqlite3_prepare_v2(fs_db_conn(st->db), "SELECT count(*) FROM jobs;", -1, &s, NULL) ==
            SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW) {
        ok = 1;
    }
    sqlite3_finalize(s);
    fs_db_unlock(st->db);
    return ok;
}
