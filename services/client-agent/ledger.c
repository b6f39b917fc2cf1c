/* The privacy ledger (docs/privacy-ledger.md): the zCDP rho
 * each dataset has spent in power-method jobs, kept in agent.db next to the
 * participations, checked against --privacy-budget when a participation is
 * created and shown at GET /v1/privacy-ledger. The arithmetic is
 * lib/dp/ledger's; this file stores entries and serves them.
 *
 * Entry states: "reserved" from creation while the participation runs,
 * "spent" once a noisy upload may have left (the worker says so, or the
 * participation ended without the worker saying otherwise), "released" when
 * the worker reports that the participation ended before any noisy upload.
 * Reserved and spent both count against the budget, so a crash at any
 * point never under-counts. */
#include "agent.h"

#include "core/hex.h"
#include "dp/dp.h"
#include "net/reply.h"

#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char LEDGER_SCHEMA[] =
    "CREATE TABLE IF NOT EXISTS privacy_ledger ("
    " participation_id TEXT PRIMARY KEY,"
    " dataset_id TEXT NOT NULL,"
    " dataset_path TEXT NOT NULL,"
    " dataset_sha256 TEXT NOT NULL DEFAULT '',"
    " job_id TEXT NOT NULL,"
    " party INTEGER NOT NULL,"
    " algorithm TEXT NOT NULL,"
    " rho REAL," /* NULL: unbounded (no formal guarantee) */
    " delta REAL NOT NULL,"
    " epsilon REAL," /* at delta; NULL: unbounded */
    " state TEXT NOT NULL,"
    " created_at TEXT NOT NULL,"
    " updated_at TEXT NOT NULL);"
    "CREATE INDEX IF NOT EXISTS privacy_ledger_dataset ON privacy_ledger (dataset_id);";

/* At startup: a reservation whose participation ended without its worker
 * settling it is settled as spent, since no worker can say any more that no
 * noisy upload left. Running participations resume (resume.c) and keep
 * theirs. */
static const char SETTLE_SQL[] =
    "UPDATE privacy_ledger SET state='spent', updated_at=?1 WHERE state='reserved' AND "
    "participation_id IN (SELECT id FROM participations WHERE state <> 'running')";

/* At startup only (no creation is half done then): a reservation without a
 * participation row belongs to a creation that died between the ledger's
 * insert and the participation's; no worker ever ran for it. */
static const char ORPHAN_SQL[] =
    "UPDATE privacy_ledger SET state='released', updated_at=?1 WHERE state='reserved' AND "
    "participation_id NOT IN (SELECT id FROM participations)";

static int db_err(sqlite3 *db, struct fs_err *err, const char *what)
{
    /* disk full, read-only: FS_ESTORAGE (503), nothing charged */
    return fs_err_set(err, fs_db_errcode(sqlite3_extended_errcode(db)),
                      "agent.db: privacy ledger: %s: %s", what, sqlite3_errmsg(db));
}

/* Run SETTLE_SQL or ORPHAN_SQL; the caller holds the store lock. */
static int settle_locked(sqlite3 *db, const char *sql, struct fs_err *err)
{
    sqlite3_stmt *st = NULL;
    char now[32];
    int rc = 0;

    ca_files_now(now);
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
        return db_err(db, err, "prepare settle");
    }
    sqlite3_bind_text(st, 1, now, -1, SQLITE_TRANSIENT);
    if (sqlite3_step(st) != SQLITE_DONE) {
        rc = db_err(db, err, "settle");
    }
    sqlite3_finalize(st);
    return rc;
}

int ca_ledger_init(fs_db *s, struct fs_err *err)
{
    sqlite3 *db = fs_db_lock(s);
    int rc = 0;

    if (sqlite3_exec(db, LEDGER_SCHEMA, NULL, NULL, NULL) != SQLITE_OK) {
        rc = db_err(db, err, "schema");
    } else {
        rc = settle_locked(db, SETTLE_SQL, err);
    }
    if (rc == 0) {
        rc = settle_locked(db, ORPHAN_SQL, err);
    }
    fs_db_unlock(s);
    return rc;
}

static int id_char_ok(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           strchr("._:@/+-", ch) != NULL;
}

int ca_ledger_take_dataset_id(json_t *body, char id[CA_LEDGER_DATASET_ID_MAX + 1],
                              struct fs_err *err)
{
    json_t *ds = json_is_object(body) ? json_object_get(body, "dataset") : NULL;
    json_t *v = json_is_object(ds) ? json_object_get(ds, "id") : NULL;
    const char *s;
    size_t n;

    id[0] = '\0';
    if (v == NULL || json_is_null(v)) {
        if (v != NULL) {
            json_object_del(ds, "id");
        }
        return 0;
    }
    if (!json_is_string(v)) {
        return fs_err_set(err, FS_EFORMAT, "dataset.id: expected a string");
    }
    s = json_string_value(v);
    n = strlen(s);
    if (n == 0 || n > CA_LEDGER_DATASET_ID_MAX || strncmp(s, "sha256:", 7) == 0) {
        return fs_err_set(err, FS_EINVAL,
                          "dataset.id: expected 1..%d characters, not starting with \"sha256:\"",
                          CA_LEDGER_DATASET_ID_MAX);
    }
    for (size_t i = 0; i < n; i++) {
        if (!id_char_ok(s[i])) {
            return fs_err_set(err, FS_EINVAL,
                              "dataset.id: character %zu is not one of A-Z a-z 0-9 . _ : @ / + -",
                              i + 1);
        }
    }
    memcpy(id, s, n + 1);
    json_object_del(ds, "id");
    return 0;
}

int ca_ledger_charge_for(const struct fs_invitation *inv, const char *id, const char *path,
                         struct ca_ledger_charge *c, struct fs_err *err)
{
    struct fs_fedpower_config cfg;
    uint64_t *rows = NULL;
    uint8_t h[32];
    int rc;

    memset(c, 0, sizeof *c);
    if (!inv->algo_known || !fs_algo_is_power(inv->algo)) {
        return 0;
    }
    rows = calloc(FS_JOB_MAX_PARTIES, sizeof *rows);
    if (rows == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    rc = fs_invitation_fedpower_config(inv, &cfg, rows, err);
    if (rc == 0) {
        rc = fs_fedpower_party_rho(&cfg, rows, &c->rho, err);
    }
    free(rows);
    if (rc != 0) {
        if (rc != FS_ENOMEM) {
            fs_err_prefix(err, "the job's privacy cost: ");
            err->code = FS_EINVAL;
            rc = FS_EINVAL;
        }
        return rc;
    }
    c->charged = 1;
    c->delta = cfg.delta;
    c->eps = INFINITY;
    if (isfinite(c->rho) && fs_zcdp_eps_optimal(c->rho, c->delta, &c->eps, NULL) != 0) {
        c->eps = INFINITY;
    }
    if (id != NULL && id[0] != '\0') {
        snprintf(c->dataset, sizeof c->dataset, "%s", id);
        return 0;
    }
    /* the content, not the name: a renamed copy is the same data */
    rc = ca_files_sha256(path, h, err);
    if (rc != 0) {
        return rc;
    }
    fs_hex_encode(h, sizeof h, c->sha256);
    snprintf(c->dataset, sizeof c->dataset, "sha256:%s", c->sha256);
    return 0;
}

/* rho column: NULL is unbounded. */
static double col_rho(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL ? INFINITY : sqlite3_column_double(st, i);
}

static void bind_num(sqlite3_stmt *st, int i, double v)
{
    if (isfinite(v)) {
        sqlite3_bind_double(st, i, v);
    } else {
        sqlite3_bind_null(st, i);
    }
}

/* The counted entries of a dataset, *n of them in a new array (free()). */
static int load_entries(sqlite3 *db, const char *dataset, struct fs_ledger_entry **out, size_t *n,
                        struct fs_err *err)
{
    sqlite3_stmt *st = NULL;
    struct fs_ledger_entry *e = NULL;
    size_t cap = 0;
    size_t k = 0;
    int step;
    int rc = 0;

    *out = NULL;
    *n = 0;
    if (sqlite3_prepare_v2(db, "SELECT rho, state FROM privacy_ledger WHERE dataset_id=?", -1, &st,
                           NULL) != SQLITE_OK) {
        return db_err(db, err, "prepare entries");
    }
    sqlite3_bind_text(st, 1, dataset, -1, SQLITE_STATIC);
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        enum fs_ledger_state s = FS_LEDGER_SPENT;
        if (k == cap) {
            size_t nc = cap == 0 ? 16 : 2 * cap;
            struct fs_ledger_entry *ne = realloc(e, nc * sizeof *ne);
            if (ne == NULL) {
                rc = fs_err_set(err, FS_ENOMEM, "out of memory");
                goto out;
            }
            e = ne;
            cap = nc;
        }
        /* an unreadable state counts as spent: never under-count */
        if (fs_ledger_state_parse((const char *)sqlite3_column_text(st, 1), &s, NULL) != 0) {
            s = FS_LEDGER_SPENT;
        }
        e[k].rho = col_rho(st, 0);
        e[k].state = s;
        k++;
    }
    if (step != SQLITE_DONE) {
        rc = db_err(db, err, "entries");
    }
out:
    sqlite3_finalize(st);
    if (rc != 0) {
        free(e);
        return rc;
    }
    *out = e;
    *n = k;
    return 0;
}

static int insert_entry(sqlite3 *db, const struct ca_part_rec *r, const struct ca_ledger_charge *c,
                        struct fs_err *err)
{
    sqlite3_stmt *st = NULL;
    int rc = 0;

    if (sqlite3_prepare_v2(db,
                           "INSERT INTO privacy_ledger (participation_id, dataset_id, "
                           "dataset_path, dataset_sha256, job_id, party, algorithm, rho, delta, "
                           "epsilon, state, created_at, updated_at) VALUES "
                           "(?,?,?,?,?,?,?,?,?,?,'reserved',?,?)",
                           -1, &st, NULL) != SQLITE_OK) {
        return db_err(db, err, "prepare insert");
    }
    sqlite3_bind_text(st, 1, r->id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, c->dataset, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, r->dataset_path, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, c->sha256, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, r->job_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 6, r->party);
    sqlite3_bind_text(st, 7, r->algorithm, -1, SQLITE_STATIC);
    bind_num(st, 8, c->rho);
    sqlite3_bind_double(st, 9, c->delta);
    bind_num(st, 10, c->eps);
    sqlite3_bind_text(st, 11, r->created_at, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 12, r->created_at, -1, SQLITE_STATIC);
    if (sqlite3_step(st) != SQLITE_DONE) {
        rc = db_err(db, err, "insert");
    }
    sqlite3_finalize(st);
    return rc;
}

int ca_ledger_reserve(struct ca_agent *ag, const struct ca_part_rec *r,
                      const struct ca_ledger_charge *c, struct fs_ledger_decision *d,
                      struct fs_err *err)
{
    sqlite3 *db = fs_db_lock(ag->db);
    struct fs_ledger_entry *e = NULL;
    size_t n = 0;
    int rc;

    memset(d, 0, sizeof *d);
    /* IMMEDIATE: the read and the insert are one decision, also against
     * another process on the same agent.db */
    if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) {
        rc = db_err(db, err, "begin");
        fs_db_unlock(ag->db);
        return rc;
    }
    rc = load_entries(db, c->dataset, &e, &n, err);
    if (rc == 0) {
        rc = fs_ledger_decide(e, n, &ag->cfg.budget, c->rho, d, err);
        if (rc != 0) {
            err->code = FS_EIO; /* stored entries or budget are broken: not the client's */
            rc = FS_EIO;
        }
    }
    if (rc == 0 && d->allowed) {
        rc = insert_entry(db, r, c, err);
    }
    if (rc == 0 && sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        rc = db_err(db, err, "commit");
    }
    if (rc != 0) {
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    }
    fs_db_unlock(ag->db);
    free(e);
    return rc;
}

/* One-statement update of a participation's entry. */
static int exec_for(struct ca_agent *ag, const char *sql, const char *part_id, struct fs_err *err)
{
    sqlite3 *db = fs_db_lock(ag->db);
    sqlite3_stmt *st = NULL;
    char now[32];
    int rc = 0;

    ca_files_now(now);
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
        rc = db_err(db, err, "prepare");
    } else {
        sqlite3_bind_text(st, 1, part_id, -1, SQLITE_STATIC);
        if (sqlite3_bind_parameter_count(st) >= 2) {
            sqlite3_bind_text(st, 2, now, -1, SQLITE_TRANSIENT);
        }
        if (sqlite3_step(st) != SQLITE_DONE) {
            rc = db_err(db, err, "update");
        }
    }
    sqlite3_finalize(st);
    fs_db_unlock(ag->db);
    return rc;
}

void ca_ledger_cancel(struct ca_agent *ag, const char *part_id)
{
    struct fs_err err = {0};

    if (exec_for(ag, "DELETE FROM privacy_ledger WHERE participation_id=?1", part_id, &err) != 0) {
        fs_log_pack(FS_LOG_WARN, "privacy ledger: cannot drop a reservation", "{s:s, s:s}",
                    "participation", part_id, "error", err.msg);
    }
}

int ca_ledger_spend(struct ca_agent *ag, const char *part_id, struct fs_err *err)
{
    return exec_for(ag,
                    "UPDATE privacy_ledger SET state='spent', updated_at=?2 "
                    "WHERE participation_id=?1 AND state='reserved'",
                    part_id, err);
}

int ca_ledger_release(struct ca_agent *ag, const char *part_id, struct fs_err *err)
{
    return exec_for(ag,
                    "UPDATE privacy_ledger SET state='released', updated_at=?2 "
                    "WHERE participation_id=?1 AND state='reserved'",
                    part_id, err);
}

/* ---- JSON ---- */

/* A number, or null for an unbounded (infinite) one. */
static json_t *num(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

static int set_num(json_t *o, const char *key, double v)
{
    return json_object_set_new(o, key, num(v));
}

int ca_ledger_reply_refused(fs_http_resp *resp, const char *algorithm,
                            const struct ca_ledger_charge *c, const struct fs_ledger_decision *d)
{
    char detail[FS_LEDGER_REASON_MAX + 64];
    json_t *o;
    char *s = NULL;

    snprintf(detail, sizeof detail, "%s job refused: %s", algorithm, d->reason);
    o = json_pack("{s:s, s:s, s:i, s:s, s:s, s:s}", "type",
                  FS_HTTP_PROBLEM_TYPE_PREFIX FS_PROBLEM_DP_BUDGET, "title",
                  "Privacy budget exceeded", "status", 403, "detail", detail, "code",
                  FS_PROBLEM_DP_BUDGET, "dataset", c->dataset);
    if (o == NULL || set_num(o, "rho_spent", d->spent) != 0 ||
        set_num(o, "rho_requested", d->requested) != 0 ||
        set_num(o, "rho_budget", d->budget) != 0) {
        json_decref(o);
        return fs_http_problem(resp, 500, FS_PROBLEM_INTERNAL, NULL, "out of memory");
    }
    s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (s == NULL) {
        return fs_http_problem(resp, 500, FS_PROBLEM_INTERNAL, NULL, "out of memory");
    }
    if (fs_http_resp_bytes(resp, 403, "application/problem+json", s, strlen(s)) != 0) {
        free(s);
        return -1;
    }
    free(s);
    return 0;
}

/* One dataset being assembled while rows stream by (ordered by dataset). */
struct ds_acc {
    json_t *obj;     /* the dataset object */
    json_t *entries; /* its entries array (borrowed from obj) */
    struct fs_ledger_entry *e;
    size_t n, cap;
};

static int ds_finish(struct ds_acc *a, const struct fs_ledger_budget *b, json_t *datasets,
                     struct fs_err *err)
{
    struct fs_ledger_totals t;
    int rc;

    if (a->obj == NULL) {
        return 0;
    }
    rc = fs_ledger_totals(a->e, a->n, b, &t, err);
    if (rc == 0 && (set_num(a->obj, "rho_spent", t.rho_spent) != 0 ||
                    set_num(a->obj, "rho_reserved", t.rho_reserved) != 0 ||
                    set_num(a->obj, "epsilon_spent", t.eps_spent) != 0 ||
                    set_num(a->obj, "remaining_rho", t.remaining_rho) != 0 ||
                    json_object_set_new(a->obj, "jobs", json_integer((json_int_t)t.counted)) != 0 ||
                    json_array_append(datasets, a->obj) != 0)) {
        rc = fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    json_decref(a->obj);
    a->obj = NULL;
    a->entries = NULL;
    a->n = 0;
    return rc;
}

static json_t *entry_json(sqlite3_stmt *st, double rho, const char *state)
{
    double eps =
        sqlite3_column_type(st, 9) == SQLITE_NULL ? INFINITY : sqlite3_column_double(st, 9);
    json_t *o = json_pack(
        "{s:s, s:s, s:i, s:s, s:s, s:s, s:b, s:f, s:s, s:s}", "participation",
        (const char *)sqlite3_column_text(st, 0), "job_id",
        (const char *)sqlite3_column_text(st, 4), "party", (int)sqlite3_column_int64(st, 5),
        "algorithm", (const char *)sqlite3_column_text(st, 6), "path",
        (const char *)sqlite3_column_text(st, 2), "state", state, "formal", isfinite(rho), "delta",
        sqlite3_column_double(st, 8), "created_at", (const char *)sqlite3_column_text(st, 11),
        "updated_at", (const char *)sqlite3_column_text(st, 12));

    if (o != NULL && (set_num(o, "rho", rho) != 0 || set_num(o, "epsilon", eps) != 0)) {
        json_decref(o);
        o = NULL;
    }
    return o;
}

/* The ledger document. The caller holds the store lock. */
static int ledger_doc(sqlite3 *db, const struct fs_ledger_budget *b, json_t **out,
                      struct fs_err *err)
{
    sqlite3_stmt *st = NULL;
    struct ds_acc a = {0};
    json_t *doc = NULL;
    json_t *datasets = json_array();
    json_t *budget = NULL;
    char cur[CA_LEDGER_DATASET_ID_MAX + 8] = "";
    size_t listed = 0;
    int truncated = 0;
    int step;
    int rc = 0;

    *out = NULL;
    if (datasets == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    /* No settling here: a participation that is no longer "running" in the
     * store may still have its worker finishing (a cancel marks it failed
     * first), and that worker settles its own entry (spent before its first
     * noisy upload, released if it fails before). Only startup settles the
     * entries of workers that died with the agent. */
    /* rowid order inside a dataset: oldest first */
    if (sqlite3_prepare_v2(db,
                           "SELECT participation_id, dataset_id, dataset_path, dataset_sha256, "
                           "job_id, party, algorithm, rho, delta, epsilon, state, created_at, "
                           "updated_at FROM privacy_ledger ORDER BY dataset_id, rowid",
                           -1, &st, NULL) != SQLITE_OK) {
        rc = db_err(db, err, "prepare list");
        goto out;
    }
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        const char *ds = (const char *)sqlite3_column_text(st, 1);
        const char *sha = (const char *)sqlite3_column_text(st, 3);
        const char *path = (const char *)sqlite3_column_text(st, 2);
        enum fs_ledger_state s = FS_LEDGER_SPENT;
        double rho = col_rho(st, 7);
        if (ds == NULL) {
            continue;
        }
        if (fs_ledger_state_parse((const char *)sqlite3_column_text(st, 10), &s, NULL) != 0) {
            s = FS_LEDGER_SPENT;
        }
        if (a.obj == NULL || strcmp(cur, ds) != 0) {
            rc = ds_finish(&a, b, datasets, err);
            if (rc != 0) {
                goto out;
            }
            snprintf(cur, sizeof cur, "%s", ds);
            a.entries = json_array();
            a.obj = json_pack("{s:s, s:s, s:o}", "dataset", ds, "path", path != NULL ? path : "",
                              "entries", a.entries);
            if (a.obj == NULL ||
                json_object_set_new(a.obj, "sha256",
                                    sha != NULL && sha[0] != '\0' ? json_string(sha)
                                                                  : json_null()) != 0) {
                rc = fs_err_set(err, FS_ENOMEM, "out of memory");
                goto out;
            }
        } else if (path != NULL) {
            /* the newest path the data was seen at */
            json_object_set_new(a.obj, "path", json_string(path));
        }
        if (a.n == a.cap) {
            size_t nc = a.cap == 0 ? 16 : 2 * a.cap;
            struct fs_ledger_entry *ne = realloc(a.e, nc * sizeof *ne);
            if (ne == NULL) {
                rc = fs_err_set(err, FS_ENOMEM, "out of memory");
                goto out;
            }
            a.e = ne;
            a.cap = nc;
        }
        a.e[a.n].rho = rho;
        a.e[a.n].state = s;
        a.n++;
        if (listed < CA_LEDGER_LIST_MAX) {
            if (json_array_append_new(a.entries, entry_json(st, rho, fs_ledger_state_name(s))) !=
                0) {
                rc = fs_err_set(err, FS_ENOMEM, "out of memory");
                goto out;
            }
            listed++;
        } else {
            truncated = 1;
        }
    }
    if (step != SQLITE_DONE) {
        rc = db_err(db, err, "list");
        goto out;
    }
    rc = ds_finish(&a, b, datasets, err);
    if (rc != 0) {
        goto out;
    }
    doc = json_object();
    budget = b->set ? json_pack("{s:f, s:f}", "rho", b->rho, "delta", b->delta) : json_null();
    if (doc == NULL || budget == NULL || (b->set && set_num(budget, "epsilon", b->eps) != 0) ||
        json_object_set(doc, "budget", budget) != 0 ||
        json_object_set_new(doc, "delta", json_real(b->delta)) != 0 ||
        json_object_set(doc, "datasets", datasets) != 0 ||
        json_object_set_new(doc, "truncated", json_boolean(truncated)) != 0) {
        rc = fs_err_set(err, FS_ENOMEM, "out of memory");
        goto out;
    }
    *out = doc;
    doc = NULL;
out:
    sqlite3_finalize(st);
    json_decref(a.obj);
    free(a.e);
    json_decref(datasets);
    json_decref(doc);
    json_decref(budget);
    return rc;
}

int ca_ledger_h_get(fs_http_req *req, fs_http_resp *resp, void *ctx)
{
    struct ca_agent *ag = ctx;
    struct fs_err err = {0};
    json_t *doc = NULL;
    sqlite3 *db;
    int rc;

    (void)req;
    db = fs_db_lock(ag->db);
    rc = ledger_doc(db, &ag->cfg.budget, &doc, &err);
    fs_db_unlock(ag->db);
    if (rc != 0) {
        fs_log_pack(FS_LOG_ERROR, "privacy ledger: cannot read", "{s:s}", "error", err.msg);
        return fs_http_problem(resp, 500, FS_PROBLEM_INTERNAL, NULL, "internal error");
    }
    return fs_http_resp_json(resp, 200, doc);
}
