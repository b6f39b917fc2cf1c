/* One SQLite connection behind a mutex: see db.h. */
#include "db.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "storage.h"
#include "svc.h"

struct fs_db {
    sqlite3 *conn;
    pthread_mutex_t mu;
    char name[64];
};

/* A commit reached the write-ahead log: storage works (ends a storage
 * episode). Installing a hook replaces SQLite's automatic checkpoint, so it
 * is done here at the same threshold (1000 pages). */
static int wal_hook(void *ctx, sqlite3 *conn, const char *schema, int frames)
{
    (void)ctx;
    fs_storage_ok();
    if (frames >= 1000) {
        (void)sqlite3_wal_checkpoint_v2(conn, schema, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
    }
    return SQLITE_OK;
}

int fs_db_errcode(int sqlite_rc)
{
    switch (sqlite_rc & 0xff) {
    case SQLITE_FULL:
    case SQLITE_READONLY:
    case SQLITE_IOERR:
        return FS_ESTORAGE;
    default:
        return FS_EIO;
    }
}

int fs_db_open(const char *path, const char *name, int fsync_full, const char *schema, fs_db **out,
               struct fs_err *err)
{
    fs_db *db = calloc(1, sizeof *db);
    int rc;

    *out = NULL;
    if (db == NULL) {
        return fs_err_set(err, FS_ENOMEM, "%s: out of memory", name);
    }
    snprintf(db->name, sizeof db->name, "%s", name);
    pthread_mutex_init(&db->mu, NULL);
    rc = fs_svc_db_open(path, fsync_full, schema, &db->conn, err);
    if (rc != 0) {
        fs_db_close(db);
        return rc;
    }
    sqlite3_wal_hook(db->conn, wal_hook, NULL);
    *out = db;
    return 0;
}

void fs_db_close(fs_db *db)
{
    if (db == NULL) {
        return;
    }
    sqlite3_close_v2(db->conn); /* accepts NULL */
    pthread_mutex_destroy(&db->mu);
    free(db);
}

sqlite3 *fs_db_lock(fs_db *db)
{
    pthread_mutex_lock(&db->mu);
    return db->conn;
}

void fs_db_unlock(fs_db *db)
{
    pthread_mutex_unlock(&db->mu);
}

sqlite3 *fs_db_conn(fs_db *db)
{
    return db->conn;
}

int fs_db_err(fs_db *db, struct fs_err *err, const char *what)
{
    struct fs_err local;
    struct fs_err *e = err != NULL ? err : &local;
    int rc = fs_err_set(e, fs_db_errcode(sqlite3_extended_errcode(db->conn)), "%s: %s: %s",
                        db->name, what, sqlite3_errmsg(db->conn));

    fs_storage_failed(e);
    return rc;
}

int fs_db_prepare(fs_db *db, const char *sql, sqlite3_stmt **st, struct fs_err *err)
{
    *st = NULL;
    if (sqlite3_prepare_v2(db->conn, sql, -1, st, NULL) != SQLITE_OK) {
        return fs_db_err(db, err, "prepare");
    }
    return 0;
}

int fs_db_exec(fs_db *db, const char *sql, const char *what, struct fs_err *err)
{
    char *msg = NULL;
    int rc = 0;

    if (sqlite3_exec(db->conn, sql, NULL, NULL, &msg) != SQLITE_OK) {
        struct fs_err local;
        struct fs_err *e = err != NULL ? err : &local;
        rc = fs_err_set(e, fs_db_errcode(sqlite3_extended_errcode(db->conn)), "%s: %s: %s",
                        db->name, what, msg != NULL ? msg : sqlite3_errmsg(db->conn));
        fs_storage_failed(e);
    }
    sqlite3_free(msg);
    return rc;
}

int fs_db_ping(fs_db *db)
{
    int ok;

    pthread_mutex_lock(&db->mu);
    ok = sqlite3_exec(db->conn, "SELECT 1;", NULL, NULL, NULL) == SQLITE_OK;
    pthread_mutex_unlock(&db->mu);
    return ok;
}

int fs_db_has_column(fs_db *db, const char *table, const char *col)
{
    sqlite3_stmt *s = NULL;
    char sql[96];
    int found = 0;

    snprintf(sql, sizeof sql, "PRAGMA table_info(%s);", table);
    if (sqlite3_prepare_v2(db->conn, sql, -1, &s, NULL) == SQLITE_OK) {
        while (!found && sqlite3_step(s) == SQLITE_ROW) {
            const char *name = (const char *)sqlite3_column_text(s, 1);
            found = name != NULL && strcmp(name, col) == 0;
        }
    }
    sqlite3_finalize(s);
    return found;
}

void fs_db_col_text(sqlite3_stmt *st, int i, char *buf, size_t cap)
{
    const unsigned char *t = sqlite3_column_text(st, i);

    snprintf(buf, cap, "%s", t != NULL ? (const char *)t : "");
}
