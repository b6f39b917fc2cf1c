/* SQLite and seed-file persistence: see store.h. */
#include "store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fdio.h"
#include "net/auth.h"
#include "net/db.h"
#include "spec.h"

#define DIR_MAX 4200

struct mask_store {
    fs_db *db;
    char seeds[DIR_MAX]; /* <data-dir>/seeds */
};

static const char SCHEMA[] =
    "CREATE TABLE IF NOT EXISTS masksets ("
    "  id TEXT PRIMARY KEY,"
    "  job_id TEXT NOT NULL,"
    "  spec TEXT NOT NULL,"
    "  state TEXT NOT NULL,"
    "  created_at TEXT NOT NULL,"
    "  created_unix REAL NOT NULL,"
    "  deleted_at TEXT,"
    "  expires_unix REAL,"
    "  end_digest BLOB);"
    "CREATE UNIQUE INDEX IF NOT EXISTS masksets_active_job ON masksets(job_id) "
    "  WHERE state = 'active';"
    "CREATE TABLE IF NOT EXISTS mask_parties ("
    "  maskset_id TEXT NOT NULL REFERENCES masksets(id),"
    "  party INTEGER NOT NULL,"
    "  identity BLOB NOT NULL,"
    "  downloads INTEGER NOT NULL DEFAULT 0,"
    "  first_download_at TEXT,"
    "  last_download_at TEXT,"
    "  PRIMARY KEY (maskset_id, party));";

/* A database of the version with mask tokens: the token digests become the
 * identity column (those mask sets have no identities: nobody can fetch
 * their keys any more), and the masksets gain expiry and end-token columns. */
static int migrate(mask_store *st, struct fs_err *err)
{
    static const char *const STEPS[][3] = {
        {"mask_parties", "digest", "ALTER TABLE mask_parties RENAME COLUMN digest TO identity;"},
        {"masksets", "-expires_unix", "ALTER TABLE masksets ADD COLUMN expires_unix REAL;"},
        {"masksets", "-end_digest", "ALTER TABLE masksets ADD COLUMN end_digest BLOB;"},
    };

    for (size_t i = 0; i < sizeof STEPS / sizeof STEPS[0]; i++) {
        int absent = STEPS[i][1][0] == '-';
        int has = fs_db_has_column(st->db, STEPS[i][0], STEPS[i][1] + absent);
        int rc = has == absent ? 0 /* rename when present, add when absent */
                               : fs_db_exec(st->db, STEPS[i][2], "upgrade", err);
        if (rc != 0) {
            return rc;
        }
    }
    return fs_db_exec(st->db,
                      "CREATE INDEX IF NOT EXISTS masksets_expiry ON masksets(expires_unix) "
                      "WHERE state = 'active';",
                      "index", err);
}

static int mkdir_0700(const char *path, struct fs_err *err)
{
    if (mkdir(path, 0700) != 0 && errno != EEXIST) {
        return fs_err_set(err, FS_EIO, "mkdir %s: %s", path, strerror(errno));
    }
    if (chmod(path, 0700) != 0) {
        return fs_err_set(err, FS_EIO, "chmod %s: %s", path, strerror(errno));
    }
    return 0;
}

int mask_store_open(const char *dir, int fsync_full, mask_store **out, struct fs_err *err)
{
    mask_store *st = NULL;
    char path[DIR_MAX];
    int rc = 0;

    *out = NULL;
    if ((size_t)snprintf(path, sizeof path, "%s/masking.db", dir) >= sizeof path) {
        return fs_err_set(err, FS_EINVAL, "data dir path too long");
    }
    st = calloc(1, sizeof *st);
    if (st == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    snprintf(st->seeds, sizeof st->seeds, "%s/seeds", dir);
    rc = mkdir_0700(st->seeds, err);
    if (rc != 0) {
        goto out;
    }
    rc = fs_db_open(path, "masking.db", fsync_full, SCHEMA, &st->db, err);
    if (rc == 0) {
        rc = migrate(st, err);
    }
    if (rc != 0) {
        goto out;
    }
    /* The database holds no secret (public keys, end-token digests), but keep it private. */
    (void)chmod(path, 0600);
out:
    if (rc != 0) {
        mask_store_close(st);
        return rc;
    }
    *out = st;
    return 0;
}

void mask_store_close(mask_store *st)
{
    if (st == NULL) {
        return;
    }
    fs_db_close(st->db);
    free(st);
}

int mask_store_ping(mask_store *st)
{
    return fs_db_ping(st->db);
}

/* ------------------------------------------------------------ seeds */

static int seed_path(const mask_store *st, const char *id, const char *suffix, char *out,
                     size_t cap, struct fs_err *err)
{
    if (!mask_id_valid(id)) {
        return fs_err_set(err, FS_EINVAL, "bad mask set id");
    }
    if ((size_t)snprintf(out, cap, "%s/%s%s", st->seeds, id, suffix) >= cap) {
        return fs_err_set(err, FS_EINVAL, "seed path too long");
    }
    return 0;
}

static void fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

int mask_store_seed_write(mask_store *st, const char *id, const uint8_t seed[MASK_SEED_LEN],
                          struct fs_err *err)
{
    char tmp[DIR_MAX + 64];
    char path[DIR_MAX + 64];
    int fd;
    int rc;

    rc = seed_path(st, id, ".seed.tmp", tmp, sizeof tmp, err);
    if (rc == 0) {
        rc = seed_path(st, id, ".seed", path, sizeof path, err);
    }
    if (rc != 0) {
        return rc;
    }
    if (access(path, F_OK) == 0) {
        return fs_err_set(err, FS_ECONFLICT, "seed of %s exists", id);
    }
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        return fs_err_set(err, fs_io_errcode(errno), "create %s: %s", tmp, strerror(errno));
    }
    if (fchmod(fd, 0600) != 0 || fs_write_all(fd, seed, MASK_SEED_LEN) != 0 || fsync(fd) != 0) {
        rc = fs_err_set(err, fs_io_errcode(errno), "write %s: %s", tmp, strerror(errno));
        close(fd);
        (void)unlink(tmp);
        return rc;
    }
    close(fd);
    if (rename(tmp, path) != 0) {
        rc = fs_err_set(err, fs_io_errcode(errno), "rename %s: %s", tmp, strerror(errno));
        (void)unlink(tmp);
        return rc;
    }
    fsync_dir(st->seeds);
    return 0;
}

int mask_store_seed_read(mask_store *st, const char *id, uint8_t seed[MASK_SEED_LEN],
                         struct fs_err *err)
{
    char path[DIR_MAX + 64];
    struct stat sb;
    size_t got = 0;
    int fd;
    int rc = seed_path(st, id, ".seed", path, sizeof path, err);

    if (rc != 0) {
        return rc;
    }
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        return fs_err_set(err, errno == ENOENT ? FS_ENOTFOUND : FS_EIO, "open seed of %s: %s", id,
                          strerror(errno));
    }
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size != MASK_SEED_LEN) {
        close(fd);
        return fs_err_set(err, FS_EIO, "seed of %s: not a %d-byte regular file", id, MASK_SEED_LEN);
    }
    while (got < MASK_SEED_LEN) {
        ssize_t r = read(fd, seed + got, MASK_SEED_LEN - got);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            close(fd);
            OPENSSL_cleanse(seed, MASK_SEED_LEN);
            return fs_err_set(err, FS_EIO, "read seed of %s: %s", id,
                              r < 0 ? strerror(errno) : "short");
        }
        got += (size_t)r;
    }
    close(fd);
    return 0;
}

int mask_store_seed_exists(mask_store *st, const char *id)
{
    char path[DIR_MAX + 64];

    if (seed_path(st, id, ".seed", path, sizeof path, NULL) != 0) {
        return 0;
    }
    return access(path, F_OK) == 0;
}

/* Overwrite a file's bytes with zeros, fsync, unlink. Best effort on
 * journaling/CoW file systems (see docs/wire-fedsvd.md). */
static int destroy_file(const char *path, struct fs_err *err)
{
    static const uint8_t ZERO[256];
    struct stat sb;
    int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);

    if (fd < 0) {
        if (errno == ENOENT) {
            return 0;
        }
        return fs_err_set(err, FS_EIO, "open %s: %s", path, strerror(errno));
    }
    if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode)) {
        off_t left = sb.st_size;
        while (left > 0) {
            size_t k = left > (off_t)sizeof ZERO ? sizeof ZERO : (size_t)left;
            if (fs_write_all(fd, ZERO, k) != 0) {
                break;
            }
            left -= (off_t)k;
        }
        (void)fsync(fd);
    }
    close(fd);
    if (unlink(path) != 0 && errno != ENOENT) {
        return fs_err_set(err, FS_EIO, "unlink %s: %s", path, strerror(errno));
    }
    return 0;
}

int mask_store_seed_destroy(mask_store *st, const char *id, struct fs_err *err)
{
    char path[DIR_MAX + 64];
    int rc = seed_path(st, id, ".seed", path, sizeof path, err);

    if (rc == 0) {
        rc = destroy_file(path, err);
    }
    if (rc == 0) {
        fsync_dir(st->seeds);
    }
    return rc;
}

static int is_active(mask_store *st, const char *id)
{
    sqlite3_stmt *s = NULL;
    int found = 0;

    fs_db_lock(st->db);
    if (sqlite3_prepare_v2(fs_db_conn(st->db),
                           "SELECT 1 FROM masksets WHERE id = ? AND state = 'active';", -1, &s,
                           NULL) == SQLITE_OK) {
        sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
        found = sqlite3_step(s) == SQLITE_ROW;
    } else {
        found = 1; /* cannot tell: keep the seed */
    }
    sqlite3_finalize(s);
    fs_db_unlock(st->db);
    return found;
}

int mask_store_sweep_seeds(mask_store *st, size_t *n, struct fs_err *err)
{
    DIR *d = opendir(st->seeds);
    struct dirent *e;
    size_t count = 0;
    int rc = 0;

    if (n != NULL) {
        *n = 0;
    }
    if (d == NULL) {
        return fs_err_set(err, FS_EIO, "opendir %s: %s", st->seeds, strerror(errno));
    }
    while (rc == 0 && (e = readdir(d)) != NULL) {
        char id[MASK_ID_LEN + 1];
        char path[DIR_MAX + 300];
        size_t len = strlen(e->d_name);
        int orphan;

        if (e->d_name[0] == '.') {
            continue;
        }
        if (len > 9 && strcmp(e->d_name + len - 9, ".seed.tmp") == 0) {
            orphan = 1;
        } else if (len == MASK_ID_LEN + 5 && strcmp(e->d_name + MASK_ID_LEN, ".seed") == 0) {
            memcpy(id, e->d_name, MASK_ID_LEN);
            id[MASK_ID_LEN] = '\0';
            orphan = !mask_id_valid(id) || !is_active(st, id);
        } else {
            continue; /* not ours: leave it */
        }
        if (!orphan) {
            continue;
        }
        snprintf(path, sizeof path, "%s/%s", st->seeds, e->d_name);
        rc = destroy_file(path, err);
        count++;
    }
    closedir(d);
    fsync_dir(st->seeds);
    if (n != NULL) {
        *n = count;
    }
    return rc;
}

/* ------------------------------------------------------------ mask sets */

static int exec_locked(mask_store *st, const char *sql, struct fs_err *err)
{
    char *msg = NULL;

    if (sqlite3_exec(fs_db_conn(st->db), sql, NULL, NULL, &msg) != SQLITE_OK) {
        /* disk full, read-only: FS_ESTORAGE, a 503 */
        int rc = fs_err_set(err, fs_db_errcode(sqlite3_extended_errcode(fs_db_conn(st->db))),
                            "masking.db: %s", msg != NULL ? msg : "exec failed");
        sqlite3_free(msg);
        return rc;
    }
    return 0;
}

int mask_store_insert(mask_store *st, const struct mask_new *m, struct fs_err *err)
{
    sqlite3_stmt *s1 = NULL;
    sqlite3_stmt *s2 = NULL;
    int rc;

    fs_db_lock(st->db);
    rc = exec_locked(st, "BEGIN IMMEDIATE;", err);
    if (rc != 0) {
        goto out;
    }
    if (sqlite3_prepare_v2(fs_db_conn(st->db),
                           "INSERT INTO masksets (id, job_id, spec, state, created_at, "
                           "created_unix, expires_unix, end_digest) VALUES (?, ?, ?, 'active', "
                           "?, ?, ?, ?);",
                           -1, &s1, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(fs_db_conn(st->db),
                           "INSERT INTO mask_parties (maskset_id, party, identity) VALUES (?, ?, "
                           "?);",
                           -1, &s2, NULL) != SQLITE_OK) {
        rc = fs_db_err(st->db, err, "prepare");
        goto rollback;
    }
    sqlite3_bind_text(s1, 1, m->id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s1, 2, m->job_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s1, 3, m->spec_json, -1, SQLITE_STATIC);
    sqlite3_bind_text(s1, 4, m->created_at, -1, SQLITE_STATIC);
    sqlite3_bind_double(s1, 5, m->created_unix);
    sqlite3_bind_double(s1, 6, m->expires_unix);
    sqlite3_bind_blob(s1, 7, m->end_digest, FS_AUTH_DIGEST_LEN, SQLITE_STATIC);
    if (sqlite3_step(s1) != SQLITE_DONE) {
        if (sqlite3_extended_errcode(fs_db_conn(st->db)) == SQLITE_CONSTRAINT_UNIQUE) {
            rc = fs_err_set(err, FS_ECONFLICT,
                            "job %s already has an active mask set (delete it first)", m->job_id);
        } else {
            rc = fs_db_err(st->db, err, "insert mask set");
        }
        goto rollback;
    }
    for (uint32_t i = 0; i < m->parties; i++) {
        sqlite3_reset(s2);
        sqlite3_bind_text(s2, 1, m->id, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s2, 2, (sqlite3_int64)i + 1);
        sqlite3_bind_blob(s2, 3, m->identities[i], 32, SQLITE_STATIC);
        if (sqlite3_step(s2) != SQLITE_DONE) {
            rc = fs_db_err(st->db, err, "insert party");
            goto rollback;
        }
    }
    rc = exec_locked(st, "COMMIT;", err);
    if (rc == 0) {
        goto out;
    }
rollback:
    (void)sqlite3_exec(fs_db_conn(st->db), "ROLLBACK;", NULL, NULL, NULL);
out:
    sqlite3_finalize(s1);
    sqlite3_finalize(s2);
    fs_db_unlock(st->db);
    return rc;
}

static const char *col_text(sqlite3_stmt *s, int i)
{
    return (const char *)sqlite3_column_text(s, i);
}

static int rows_run(mask_store *st, sqlite3_stmt *s, mask_row_fn cb, void *ctx, size_t *count,
                    struct fs_err *err)
{
    int step;
    int rc = 0;

    *count = 0;
    while (rc == 0 && (step = sqlite3_step(s)) == SQLITE_ROW) {
        struct mask_row r;
        r.id = col_text(s, 0);
        r.job_id = col_text(s, 1);
        r.spec = col_text(s, 2);
        r.state = col_text(s, 3);
        r.created_at = col_text(s, 4);
        r.deleted_at = col_text(s, 5);
        r.expires_unix = sqlite3_column_type(s, 6) == SQLITE_NULL ? 0 : sqlite3_column_double(s, 6);
        rc = cb(ctx, &r, err);
        (*count)++;
    }
    if (rc == 0 && step != SQLITE_DONE) {
        rc = fs_db_err(st->db, err, "select");
    }
    return rc;
}

#define ROW_COLS "id, job_id, spec, state, created_at, deleted_at, expires_unix"

int mask_store_get(mask_store *st, const char *id, mask_row_fn cb, void *ctx, struct fs_err *err)
{
    sqlite3_stmt *s = NULL;
    size_t count = 0;
    int rc;

    fs_db_lock(st->db);
    rc = fs_db_prepare(st->db, "SELECT " ROW_COLS " FROM masksets WHERE id = ?;", &s, err);
    if (rc != 0) {
        goto out;
    }
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    rc = rows_run(st, s, cb, ctx, &count, err);
    if (rc == 0 && count == 0) {
        rc =
            fs_err_set(err, FS_ENOTFOUND, "no mask set %s", mask_id_valid(id) ? id : "(malformed)");
    }
out:
    sqlite3_finalize(s);
    fs_db_unlock(st->db);
    return rc;
}

int mask_store_list(mask_store *st, const char *job_id, const char *state, mask_row_fn cb,
                    void *ctx, struct fs_err *err)
{
    sqlite3_stmt *s = NULL;
    size_t count = 0;
    int rc;

    fs_db_lock(st->db);
    rc = fs_db_prepare(st->db,
                       "SELECT " ROW_COLS " FROM masksets WHERE (?1 IS NULL OR job_id = ?1) "
                       "AND (?2 IS NULL OR state = ?2) ORDER BY created_unix DESC, id;",
                       &s, err);
    if (rc != 0) {
        goto out;
    }
    if (job_id != NULL) {
        sqlite3_bind_text(s, 1, job_id, -1, SQLITE_STATIC);
    }
    if (state != NULL) {
        sqlite3_bind_text(s, 2, state, -1, SQLITE_STATIC);
    }
    rc = rows_run(st, s, cb, ctx, &count, err);
out:
    sqlite3_finalize(s);
    fs_db_unlock(st->db);
    return rc;
}

int mask_store_parties(mask_store *st, const char *id, mask_party_fn cb, void *ctx,
                       struct fs_err *err)
{
    sqlite3_stmt *s = NULL;
    int step = SQLITE_DONE;
    int rc = 0;

    fs_db_lock(st->db);
    rc = fs_db_prepare(st->db,
                       "SELECT party, downloads, first_download_at, last_download_at FROM "
                       "mask_parties WHERE maskset_id = ? ORDER BY party;",
                       &s, err);
    if (rc != 0) {
        goto out;
    }
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    while (rc == 0 && (step = sqlite3_step(s)) == SQLITE_ROW) {
        struct mask_party_row r;
        r.party = (uint32_t)sqlite3_column_int64(s, 0);
        r.downloads = (uint64_t)sqlite3_column_int64(s, 1);
        r.first_at = col_text(s, 2);
        r.last_at = col_text(s, 3);
        rc = cb(ctx, &r, err);
    }
    if (rc == 0 && step != SQLITE_DONE) {
        rc = fs_db_err(st->db, err, "select parties");
    }
out:
    sqlite3_finalize(s);
    fs_db_unlock(st->db);
    return rc;
}

int mask_store_match_end(mask_store *st, const char *id, const char *token, size_t len, int *match,
                         struct fs_err *err)
{
    sqlite3_stmt *s = NULL;
    uint8_t d[FS_AUTH_DIGEST_LEN];
    int rc;

    *match = 0;
    rc = fs_auth_digest(token, len, d, err);
    if (rc != 0) {
        return rc;
    }
    fs_db_lock(st->db);
    rc = fs_db_prepare(st->db, "SELECT end_digest FROM masksets WHERE id = ?;", &s, err);
    if (rc != 0) {
        goto out;
    }
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    if (sqlite3_step(s) != SQLITE_ROW) {
        rc = fs_err_set(err, FS_ENOTFOUND, "no mask set");
        goto out;
    }
    if (sqlite3_column_bytes(s, 0) == FS_AUTH_DIGEST_LEN) {
        *match = CRYPTO_memcmp(sqlite3_column_blob(s, 0), d, FS_AUTH_DIGEST_LEN) == 0;
    }
out:
    sqlite3_finalize(s);
    fs_db_unlock(st->db);
    OPENSSL_cleanse(d, sizeof d);
    return rc;
}

int mask_store_expired(mask_store *st, double now_unix, char (*ids)[MASK_ID_LEN + 1], size_t cap,
                       size_t *n, struct fs_err *err)
{
    sqlite3_stmt *s = NULL;
    int step = SQLITE_DONE;
    int rc = 0;

    *n = 0;
    fs_db_lock(st->db);
    rc = fs_db_prepare(st->db,
                       "SELECT id FROM masksets WHERE state = 'active' AND expires_unix IS NOT "
                       "NULL AND expires_unix <= ? ORDER BY expires_unix LIMIT ?;",
                       &s, err);
    if (rc != 0) {
        goto out;
    }
    sqlite3_bind_double(s, 1, now_unix);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)cap);
    while (*n < cap && (step = sqlite3_step(s)) == SQLITE_ROW) {
        const char *id = col_text(s, 0);
        if (id != NULL && mask_id_valid(id)) {
            memcpy(ids[*n], id, MASK_ID_LEN + 1);
            (*n)++;
        }
    }
    if (step != SQLITE_DONE && step != SQLITE_ROW) {
        rc = fs_db_err(st->db, err, "select expired");
    }
out:
    sqlite3_finalize(s);
    fs_db_unlock(st->db);
    return rc;
}

int mask_store_mark_deleted(mask_store *st, const char *id, const char *deleted_at, int *changed,
                            struct fs_err *err)
{
    sqlite3_stmt *s = NULL;
    int rc = 0;

    *changed = 0;
    fs_db_lock(st->db);
    rc = fs_db_prepare(st->db,
                       "UPDATE masksets SET state = 'deleted', deleted_at = ? WHERE id = ? AND "
                       "state = 'active';",
                       &s, err);
    if (rc != 0) {
        goto out;
    }
    sqlite3_bind_text(s, 1, deleted_at, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, id, -1, SQLITE_STATIC);
    if (sqlite3_step(s) != SQLITE_DONE) {
        rc = fs_db_err(st->db, err, "update");
        goto out;
    }
    *changed = sqlite3_changes(fs_db_conn(st->db)) > 0;
out:
    sqlite3_finalize(s);
    fs_db_unlock(st->db);
    return rc;
}

int mask_store_record_download(mask_store *st, const char *id, uint32_t party, const char *at,
                               struct fs_err *err)
{
    sqlite3_stmt *s = NULL;
    int rc = 0;

    fs_db_lock(st->db);
    rc = fs_db_prepare(st->db,
                       "UPDATE mask_parties SET downloads = downloads + 1, "
                       "first_download_at = COALESCE(first_download_at, ?1), "
                       "last_download_at = ?1 WHERE maskset_id = ?2 AND party = ?3;",
                       &s, err);
    if (rc != 0) {
        goto out;
    }
    sqlite3_bind_text(s, 1, at, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, party);
    if (sqlite3_step(s) != SQLITE_DONE) {
        rc = fs_db_err(st->db, err, "update download");
    }
out:
    sqlite3_finalize(s);
    fs_db_unlock(st->db);
    return rc;
}

int mask_store_counts(mask_store *st, uint64_t *active, uint64_t *deleted, struct fs_err *err)
{
    sqlite3_stmt *s = NULL;
    int step;
    int rc = 0;

    *active = 0;
    *deleted = 0;
    fs_db_lock(st->db);
    rc = fs_db_prepare(st->db, "SELECT state, COUNT(*) FROM masksets GROUP BY state;", &s, err);
    if (rc != 0) {
        goto out;
    }
    while ((step = sqlite3_step(s)) == SQLITE_ROW) {
        const char *state = col_text(s, 0);
        uint64_t c = (uint64_t)sqlite3_column_int64(s, 1);
        if (state != NULL && strcmp(state, "active") == 0) {
            *active = c;
        } else if (state != NULL && strcmp(state, "deleted") == 0) {
            *deleted = c;
        }
    }
    if (step != SQLITE_DONE) {
        rc = fs_db_err(st->db, err, "count");
    }
out:
    sqlite3_finalize(s);
    fs_db_unlock(st->db);
    return rc;
}
