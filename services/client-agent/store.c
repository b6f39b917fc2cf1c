/* agent.db: the participations table (SQLite, WAL). One connection shared
 * by the HTTP threads and the workers behind a mutex: the rows are small and
 * written at most a few times a second per participation. */
#include "agent.h"

#include "crypto/ct.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char SCHEMA[] =
    "CREATE TABLE IF NOT EXISTS participations ("
    " id TEXT PRIMARY KEY,"
    " job_id TEXT NOT NULL,"
    " party INTEGER NOT NULL,"
    " algorithm TEXT NOT NULL,"
    " state TEXT NOT NULL,"
    " phase TEXT NOT NULL,"
    " progress REAL NOT NULL DEFAULT 0,"
    " bytes_sent INTEGER NOT NULL DEFAULT 0,"
    " bytes_received INTEGER NOT NULL DEFAULT 0,"
    " error TEXT NOT NULL DEFAULT '',"
    " created_at TEXT NOT NULL,"
    " updated_at TEXT NOT NULL,"
    " dataset_path TEXT NOT NULL,"
    " dataset_format TEXT NOT NULL,"
    " rows INTEGER NOT NULL,"
    " cols INTEGER NOT NULL,"
    " fail_at TEXT NOT NULL DEFAULT '',"
    " job_url TEXT NOT NULL,"
    " invitation TEXT NOT NULL," /* without the party token; no mask credential exists */
    " restarts INTEGER NOT NULL DEFAULT 0);"
    "CREATE INDEX IF NOT EXISTS participations_job ON participations (job_id, party);"
    /* What a running participation needs to resume after a restart (deleted
     * when it ends): the participation's secret and the party token, sealed
     * with AES-256-GCM under data-dir/agent.key, and the dataset's SHA-256
     * at join. */
    "CREATE TABLE IF NOT EXISTS resume_state ("
    " id TEXT PRIMARY KEY,"
    " sealed BLOB NOT NULL,"
    " dataset_sha256 TEXT NOT NULL);"
    /* Write-ahead digests: SHA-256 of each message (request path and body)
     * stored before it is sent; a message rebuilt after a restart must match. */
    "CREATE TABLE IF NOT EXISTS sent_messages ("
    " id TEXT NOT NULL,"
    " path TEXT NOT NULL,"
    " sha256 BLOB NOT NULL,"
    " PRIMARY KEY (id, path));";

#define COLS                                                                                       \
    "id, job_id, party, algorithm, state, phase, progress, bytes_sent, bytes_received, error, "    \
    "created_at, updated_at, dataset_path, dataset_format, rows, cols, fail_at, job_url, restarts"

int ca_store_open(const char *path, fs_db **out, unsigned *n_running, struct fs_err *err)
{
    fs_db *s = NULL;
    sqlite3_stmt *st = NULL;
    int rc = 0;

    *out = NULL;
    rc = fs_db_open(path, "agent.db", 0, SCHEMA, &s, err);
    if (rc != 0) {
        return rc;
    }
    /* an agent.db of an older version lacks the restarts column: add it
     * (an error here only means it exists) */
    (void)sqlite3_exec(fs_db_conn(s),
                       "ALTER TABLE participations ADD COLUMN restarts INTEGER NOT NULL DEFAULT 0",
                       NULL, NULL, NULL);
    rc = fs_db_prepare(s, "SELECT COUNT(*) FROM participations WHERE state='running'", &st, err);
    if (rc != 0) {
        goto out;
    }
    if (sqlite3_step(st) != SQLITE_ROW) {
        rc = fs_db_err(s, err, "counting running participations");
        goto out;
    }
    if (n_running != NULL) {
        *n_running = (unsigned)sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
    st = NULL;
    /* Credentials never stay at rest in the clear: a stored invitation holds
     * neither the party token nor (as an older version stored it) a mask
     * token. Scrub what an older version left, with secure_delete so that
     * the old page contents are overwritten (it also overwrites the sealed
     * resume state of ended participations), then fold the WAL into the
     * database. */
    if (sqlite3_exec(fs_db_conn(s),
                     "PRAGMA secure_delete = ON;"
                     "UPDATE participations SET invitation = json_remove(invitation, "
                     "'$.mask_token', '$.token') WHERE json_valid(invitation) AND "
                     "(json_type(invitation, '$.mask_token') IS NOT NULL OR "
                     "json_type(invitation, '$.token') IS NOT NULL);"
                     "DELETE FROM resume_state WHERE id NOT IN "
                     "(SELECT id FROM participations WHERE state='running');"
                     "DELETE FROM sent_messages WHERE id NOT IN "
                     "(SELECT id FROM participations WHERE state='running');"
                     "PRAGMA wal_checkpoint(TRUNCATE);",
                     NULL, NULL, NULL) != SQLITE_OK) {
        rc = fs_db_err(s, err, "scrubbing stored invitations");
        goto out;
    }
out:
    sqlite3_finalize(st);
    if (rc != 0) {
        fs_db_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

int ca_store_insert(fs_db *s, const struct ca_part_rec *r, const char *invitation_json,
                    const uint8_t *sealed, size_t sealed_len, const char *dataset_sha256,
                    struct fs_err *err)
{
    sqlite3_stmt *st = NULL;
    int began = 0;
    int rc = 0;

    fs_db_lock(s);
    if (sqlite3_exec(fs_db_conn(s), "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) {
        rc = fs_db_err(s, err, "begin");
        goto out;
    }
    began = 1;
    rc = fs_db_prepare(s,
                       "INSERT INTO participations (" COLS ", invitation) VALUES "
                       "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                       &st, err);
    if (rc != 0) {
        goto out;
    }
    sqlite3_bind_text(st, 1, r->id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, r->job_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, r->party);
    sqlite3_bind_text(st, 4, r->algorithm, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, r->state, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 6, r->phase, -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 7, r->progress);
    sqlite3_bind_int64(st, 8, (sqlite3_int64)r->bytes_sent);
    sqlite3_bind_int64(st, 9, (sqlite3_int64)r->bytes_received);
    sqlite3_bind_text(st, 10, r->error, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 11, r->created_at, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 12, r->updated_at, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 13, r->dataset_path, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 14, r->dataset_format, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 15, (sqlite3_int64)r->rows);
    sqlite3_bind_int64(st, 16, (sqlite3_int64)r->cols);
    sqlite3_bind_text(st, 17, r->fail_at, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 18, r->job_url, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 19, (sqlite3_int64)r->restarts);
    sqlite3_bind_text(st, 20, invitation_json, -1, SQLITE_STATIC);
    if (sqlite3_step(st) != SQLITE_DONE) {
        rc = fs_db_err(s, err, "insert");
        goto out;
    }
    sqlite3_finalize(st);
    st = NULL;
    rc = fs_db_prepare(s, "INSERT INTO resume_state (id, sealed, dataset_sha256) VALUES (?,?,?)",
                       &st, err);
    if (rc != 0) {
        goto out;
    }
    sqlite3_bind_text(st, 1, r->id, -1, SQLITE_STATIC);
    sqlite3_bind_blob(st, 2, sealed, (int)sealed_len, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, dataset_sha256, -1, SQLITE_STATIC);
    if (sqlite3_step(st) != SQLITE_DONE) {
        rc = fs_db_err(s, err, "insert resume state");
        goto out;
    }
    if (sqlite3_exec(fs_db_conn(s), "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        rc = fs_db_err(s, err, "commit");
        goto out;
    }
    began = 0;
out:
    sqlite3_finalize(st);
    if (began) {
        (void)sqlite3_exec(fs_db_conn(s), "ROLLBACK", NULL, NULL, NULL);
    }
    fs_db_unlock(s);
    return rc;
}

int ca_store_resume_get(fs_db *s, const char *id, uint8_t *sealed, size_t cap, size_t *len,
                        char sha256_hex[65], struct fs_err *err)
{
    sqlite3_stmt *st = NULL;
    int rc = 0;
    int step;

    *len = 0;
    fs_db_lock(s);
    rc = fs_db_prepare(s, "SELECT sealed, dataset_sha256 FROM resume_state WHERE id=?", &st, err);
    if (rc != 0) {
        goto out;
    }
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    step = sqlite3_step(st);
    if (step == SQLITE_ROW) {
        const void *b = sqlite3_column_blob(st, 0);
        size_t n = (size_t)sqlite3_column_bytes(st, 0);
        if (b == NULL || n > cap) {
            rc = fs_err_set(err, FS_EFORMAT, "the stored resume state has %zu bytes", n);
        } else {
            memcpy(sealed, b, n);
            *len = n;
            fs_db_col_text(st, 1, sha256_hex, 65);
        }
    } else if (step == SQLITE_DONE) {
        rc = fs_err_set(err, FS_ENOTFOUND, "no resume state");
    } else {
        rc = fs_db_err(s, err, "select resume state");
    }
out:
    sqlite3_finalize(st);
    fs_db_unlock(s);
    return rc;
}

void ca_store_resume_drop(fs_db *s, const char *id)
{
    sqlite3_stmt *st = NULL;
    static const char *const sql[] = {"DELETE FROM resume_state WHERE id=?",
                                      "DELETE FROM sent_messages WHERE id=?"};

    fs_db_lock(s);
    for (size_t i = 0; i < sizeof sql / sizeof sql[0]; i++) {
        if (fs_db_prepare(s, sql[i], &st, NULL) == 0) {
            sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
            if (sqlite3_step(st) != SQLITE_DONE) {
                fs_log(FS_LOG_WARN, "cannot delete a participation's resume state", NULL);
            }
        }
        sqlite3_finalize(st);
        st = NULL;
    }
    fs_db_unlock(s);
}

int ca_store_restarted(fs_db *s, const char *id, uint32_t *restarts, struct fs_err *err)
{
    sqlite3_stmt *st = NULL;
    int rc = 0;

    fs_db_lock(s);
    rc = fs_db_prepare(s,
                       "UPDATE participations SET restarts = restarts + 1 WHERE id=? AND "
                       "state='running' RETURNING restarts",
                       &st, err);
    if (rc != 0) {
        goto out;
    }
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW) {
        *restarts = (uint32_t)sqlite3_column_int64(st, 0);
    } else {
        rc = fs_db_err(s, err, "counting a restart");
    }
out:
    sqlite3_finalize(st);
    fs_db_unlock(s);
    return rc;
}

int ca_store_invitation(fs_db *s, const char *id, char **json, struct fs_err *err)
{
    sqlite3_stmt *st = NULL;
    int rc = 0;

    *json = NULL;
    fs_db_lock(s);
    rc = fs_db_prepare(s, "SELECT invitation FROM participations WHERE id=?", &st, err);
    if (rc != 0) {
        goto out;
    }
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0) != NULL) {
        *json = strdup((const char *)sqlite3_column_text(st, 0));
        if (*json == NULL) {
            rc = fs_err_set(err, FS_ENOMEM, "out of memory");
        }
    } else {
        rc = fs_err_set(err, FS_ENOTFOUND, "no stored invitation");
    }
out:
    sqlite3_finalize(st);
    fs_db_unlock(s);
    return rc;
}

int ca_store_wal(fs_db *s, const char *id, const char *path, const uint8_t sha256[32], int *repeat,
                 struct fs_err *err)
{
    sqlite3_stmt *st = NULL;
    int rc = 0;
    int step;

    *repeat = 0;
    fs_db_lock(s);
    rc = fs_db_prepare(s, "SELECT sha256 FROM sent_messages WHERE id=? AND path=?", &st, err);
    if (rc != 0) {
        goto out;
    }
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, path, -1, SQLITE_STATIC);
    step = sqlite3_step(st);
    if (step == SQLITE_ROW) {
        const void *b = sqlite3_column_blob(st, 0);
        if (b == NULL || sqlite3_column_bytes(st, 0) != 32 || !fs_ct_eq(b, sha256, 32)) {
            rc = fs_err_set(err, FS_ESTATE,
                            "cannot resume after restart: the message rebuilt for %s differs "
                            "from the one sent before",
                            path);
        } else {
            *repeat = 1;
        }
        goto out;
    }
    if (step != SQLITE_DONE) {
        rc = fs_db_err(s, err, "select sent message");
        goto out;
    }
    sqlite3_finalize(st);
    st = NULL;
    rc = fs_db_prepare(s, "INSERT INTO sent_messages (id, path, sha256) VALUES (?,?,?)", &st, err);
    if (rc != 0) {
        goto out;
    }
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, path, -1, SQLITE_STATIC);
    sqlite3_bind_blob(st, 3, sha256, 32, SQLITE_STATIC);
    if (sqlite3_step(st) != SQLITE_DONE) {
        rc = fs_db_err(s, err, "insert sent message");
    }
out:
    sqlite3_finalize(st);
    fs_db_unlock(s);
    return rc;
}

int ca_store_progress(fs_db *s, const struct ca_part_rec *r, struct fs_err *err)
{
    sqlite3_stmt *st = NULL;
    int rc = 0;

    fs_db_lock(s);
    rc = fs_db_prepare(s,
                       "UPDATE participations SET state=?, phase=?, progress=?, "
                       "bytes_sent=?, bytes_received=?, error=?, updated_at=? "
                       "WHERE id=? AND state='running'",
                       &st, err);
    if (rc != 0) {
        goto out;
    }
    sqlite3_bind_text(st, 1, r->state, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, r->phase, -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 3, r->progress);
    sqlite3_bind_int64(st, 4, (sqlite3_int64)r->bytes_sent);
    sqlite3_bind_int64(st, 5, (sqlite3_int64)r->bytes_received);
    sqlite3_bind_text(st, 6, r->error, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 7, r->updated_at, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 8, r->id, -1, SQLITE_STATIC);
    if (sqlite3_step(st) != SQLITE_DONE) {
        rc = fs_db_err(s, err, "update");
    } else if (sqlite3_changes(fs_db_conn(s)) == 0) {
        rc = fs_err_set(err, FS_ESTATE, "participation %s is no longer running", r->id);
    }
out:
    sqlite3_finalize(st);
    fs_db_unlock(s);
    return rc;
}

static void row_to_rec(sqlite3_stmt *st, struct ca_part_rec *r)
{
    memset(r, 0, sizeof *r);
    fs_db_col_text(st, 0, r->id, sizeof r->id);
    fs_db_col_text(st, 1, r->job_id, sizeof r->job_id);
    r->party = (uint32_t)sqlite3_column_int64(st, 2);
    fs_db_col_text(st, 3, r->algorithm, sizeof r->algorithm);
    fs_db_col_text(st, 4, r->state, sizeof r->state);
    fs_db_col_text(st, 5, r->phase, sizeof r->phase);
    r->progress = sqlite3_column_double(st, 6);
    r->bytes_sent = (uint64_t)sqlite3_column_int64(st, 7);
    r->bytes_received = (uint64_t)sqlite3_column_int64(st, 8);
    fs_db_col_text(st, 9, r->error, sizeof r->error);
    fs_db_col_text(st, 10, r->created_at, sizeof r->created_at);
    fs_db_col_text(st, 11, r->updated_at, sizeof r->updated_at);
    fs_db_col_text(st, 12, r->dataset_path, sizeof r->dataset_path);
    fs_db_col_text(st, 13, r->dataset_format, sizeof r->dataset_format);
    r->rows = (uint64_t)sqlite3_column_int64(st, 14);
    r->cols = (uint64_t)sqlite3_column_int64(st, 15);
    fs_db_col_text(st, 16, r->fail_at, sizeof r->fail_at);
    fs_db_col_text(st, 17, r->job_url, sizeof r->job_url);
    r->restarts = (uint32_t)sqlite3_column_int64(st, 18);
}

int ca_store_get(fs_db *s, const char *id, struct ca_part_rec *r, struct fs_err *err)
{
    sqlite3_stmt *st = NULL;
    int rc = 0;
    int step;

    fs_db_lock(s);
    rc = fs_db_prepare(s, "SELECT " COLS " FROM participations WHERE id=?", &st, err);
    if (rc != 0) {
        goto out;
    }
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    step = sqlite3_step(st);
    if (step == SQLITE_ROW) {
        row_to_rec(st, r);
    } else if (step == SQLITE_DONE) {
        rc = fs_err_set(err, FS_ENOTFOUND, "no such participation");
    } else {
        rc = fs_db_err(s, err, "select");
    }
out:
    sqlite3_finalize(st);
    fs_db_unlock(s);
    return rc;
}

static int list_where(fs_db *s, const char *sql, size_t max, struct ca_part_rec **out, size_t *n,
                      struct fs_err *err);

int ca_store_list(fs_db *s, size_t max, struct ca_part_rec **out, size_t *n, struct fs_err *err)
{
    return list_where(s, "SELECT " COLS " FROM participations ORDER BY rowid DESC LIMIT ?", max,
                      out, n, err);
}

int ca_store_running(fs_db *s, size_t max, struct ca_part_rec **out, size_t *n, struct fs_err *err)
{
    return list_where(s,
                      "SELECT " COLS " FROM participations WHERE state='running' "
                      "ORDER BY rowid LIMIT ?",
                      max, out, n, err);
}

static int list_where(fs_db *s, const char *sql, size_t max, struct ca_part_rec **out, size_t *n,
                      struct fs_err *err)
{
    sqlite3_stmt *st = NULL;
    struct ca_part_rec *recs = NULL;
    size_t k = 0;
    int rc = 0;
    int step;

    *out = NULL;
    *n = 0;
    recs = calloc(max + 1, sizeof *recs);
    if (recs == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    fs_db_lock(s);
    rc = fs_db_prepare(s, sql, &st, err);
    if (rc != 0) {
        goto out;
    }
    sqlite3_bind_int64(st, 1, (sqlite3_int64)max);
    while ((step = sqlite3_step(st)) == SQLITE_ROW && k < max) {
        row_to_rec(st, &recs[k++]);
    }
    if (step != SQLITE_DONE && step != SQLITE_ROW) {
        rc = fs_db_err(s, err, "list");
    }
out:
    sqlite3_finalize(st);
    fs_db_unlock(s);
    if (rc != 0) {
        free(recs);
        return rc;
    }
    *out = recs;
    *n = k;
    return 0;
}

int ca_store_exists_live(fs_db *s, const char *job_id, uint32_t party, struct fs_err *err)
{
    sqlite3_stmt *st = NULL;
    int rc;

    fs_db_lock(s);
    rc = fs_db_prepare(s,
                       "SELECT 1 FROM participations WHERE job_id=? AND party=? AND "
                       "state IN ('running','done') LIMIT 1",
                       &st, err);
    if (rc != 0) {
        goto out;
    }
    sqlite3_bind_text(st, 1, job_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, party);
    switch (sqlite3_step(st)) {
    case SQLITE_ROW:
        rc = 1;
        break;
    case SQLITE_DONE:
        rc = 0;
        break;
    default:
        rc = fs_db_err(s, err, "exists");
        break;
    }
out:
    sqlite3_finalize(st);
    fs_db_unlock(s);
    return rc;
}

int ca_store_counts(fs_db *s, uint64_t *running, uint64_t *done, uint64_t *failed,
                    struct fs_err *err)
{
    sqlite3_stmt *st = NULL;
    int rc = 0;
    int step;

    *running = 0;
    *done = 0;
    *failed = 0;
    fs_db_lock(s);
    rc = fs_db_prepare(s, "SELECT state, COUNT(*) FROM participations GROUP BY state", &st, err);
    if (rc != 0) {
        goto out;
    }
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        const char *state = (const char *)sqlite3_column_text(st, 0);
        uint64_t c = (uint64_t)sqlite3_column_int64(st, 1);
        if (state == NULL) {
            continue;
        }
        if (strcmp(state, "running") == 0) {
            *running = c;
        } else if (strcmp(state, "done") == 0) {
            *done = c;
        } else if (strcmp(state, "failed") == 0) {
            *failed = c;
        }
    }
    if (step != SQLITE_DONE) {
        rc = fs_db_err(s, err, "counts");
    }
out:
    sqlite3_finalize(st);
    fs_db_unlock(s);
    return rc;
}
