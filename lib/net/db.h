/* A service's SQLite database: one connection (fs_svc_db_open: private
 * files, WAL, busy timeout, the schema) shared by the HTTP threads and the
 * workers behind one mutex, and the small helpers every store repeats.
 * Error messages start with the database's name ("agent.db: ..."). */
#ifndef FS_NET_DB_H
#define FS_NET_DB_H

#include <stddef.h>

#include "../core/err.h"

struct sqlite3;
struct sqlite3_stmt;

typedef struct fs_db fs_db;

/**
 * Open (create) the database at path (fs_svc_db_open) and run schema.
 * @param name the file's name in error messages ("agent.db"), copied.
 * @return 0, FS_ENOMEM, FS_EIO (nothing stays open).
 */
FS_WUR int fs_db_open(const char *path, const char *name, int fsync_full, const char *schema,
                      fs_db **out, struct fs_err *err);

/** Close. Accepts NULL. */
void fs_db_close(fs_db *db);

/** Take the connection's mutex; every statement runs under it. */
struct sqlite3 *fs_db_lock(fs_db *db);
void fs_db_unlock(fs_db *db);

/** The connection (for sqlite3_changes, sqlite3_errmsg ...: hold the lock). */
struct sqlite3 *fs_db_conn(fs_db *db);

/**
 * The fs_err code of a failed SQLite call: FS_ESTORAGE for SQLITE_FULL,
 * SQLITE_READONLY* and SQLITE_IOERR* (disk full, quota, read-only file
 * system, a file-size limit: the service answers 503 and goes on once space
 * is back), else FS_EIO. sqlite_rc may be an extended code.
 */
int fs_db_errcode(int sqlite_rc);

/**
 * "<name>: <what>: <SQLite's message>" with fs_db_errcode of the
 * connection's last error (FS_ESTORAGE or FS_EIO); a storage failure is
 * noted (net/storage.h). A commit that succeeds ends the episode.
 */
int fs_db_err(fs_db *db, struct fs_err *err, const char *what);

/** sqlite3_prepare_v2 (lock held). @return 0 or fs_db_err(what = "prepare"). */
FS_WUR int fs_db_prepare(fs_db *db, const char *sql, struct sqlite3_stmt **st, struct fs_err *err);

/** sqlite3_exec of sql (lock held). @return 0, or FS_EIO / FS_ESTORAGE naming what. */
int fs_db_exec(fs_db *db, const char *sql, const char *what, struct fs_err *err);

/** 1 when a trivial statement runs (readiness probes), else 0. Takes the lock. */
int fs_db_ping(fs_db *db);

/** 1 when table has column col (lock held). */
int fs_db_has_column(fs_db *db, const char *table, const char *col);

/** Text column i into buf (cap bytes, truncated, "" for NULL). */
void fs_db_col_text(struct sqlite3_stmt *st, int i, char *buf, size_t cap);

#endif
