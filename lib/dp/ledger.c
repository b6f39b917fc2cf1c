/* Privacy ledger accounting: see ledger.h. */
#include "ledger.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dp.h"

/* Relative slack of "exceeds": rounding of sums of doubles only. */
#define LEDGER_SLACK 1e-12

const char *fs_ledger_state_name(enum fs_ledger_state s)
{
    switch (s) {
    case FS_LEDGER_RESERVED:
        return "reserved";
    case FS_LEDGER_SPENT:
        return "spent";
    case FS_LEDGER_RELEASED:
        return "released";
    }
    return NULL;
}

int fs_ledger_state_parse(const char *s, enum fs_ledger_state *out, struct fs_err *err)
{
    static const enum fs_ledger_state all[] = {FS_LEDGER_RESERVED, FS_LEDGER_SPENT,
                                               FS_LEDGER_RELEASED};

    for (size_t i = 0; s != NULL && i < sizeof all / sizeof all[0]; i++) {
        if (strcmp(s, fs_ledger_state_name(all[i])) == 0) {
            *out = all[i];
            return 0;
        }
    }
    return fs_err_set(err, FS_EINVAL, "ledger state: expected reserved, spent or released");
}

static int check_delta(double *delta, struct fs_err *err)
{
    if (*delta == 0.0) {
        *delta = FS_LEDGER_DEFAULT_DELTA;
    }
    if (!isfinite(*delta) || *delta <= 0.0 || *delta >= 1.0) {
        return fs_err_set(err, FS_EINVAL, "privacy budget: delta must be in (0, 1) (got %g)",
                          *delta);
    }
    return 0;
}

/* The optimal conversion, +INFINITY for an unbounded rho. */
static int eps_of(double rho, double delta, double *eps, struct fs_err *err)
{
    int rc;

    if (isinf(rho)) {
        *eps = INFINITY;
        return 0;
    }
    rc = fs_zcdp_eps_optimal(rho, delta, eps, err);
    if (rc == FS_ENUMERIC) {
        *eps = INFINITY;
        return 0;
    }
    return rc;
}

int fs_ledger_budget_none(double delta, struct fs_ledger_budget *out, struct fs_err *err)
{
    int rc = check_delta(&delta, err);

    if (rc != 0) {
        return rc;
    }
    memset(out, 0, sizeof *out);
    out->rho = INFINITY;
    out->eps = INFINITY;
    out->delta = delta;
    return 0;
}

int fs_ledger_budget_from_rho(double rho, double delta, struct fs_ledger_budget *out,
                              struct fs_err *err)
{
    int rc = check_delta(&delta, err);

    if (rc != 0) {
        return rc;
    }
    if (!isfinite(rho) || rho <= 0.0) {
        return fs_err_set(err, FS_EINVAL, "privacy budget: rho must be finite and > 0 (got %g)",
                          rho);
    }
    memset(out, 0, sizeof *out);
    out->set = 1;
    out->rho = rho;
    out->delta = delta;
    return eps_of(rho, delta, &out->eps, err);
}

int fs_zcdp_rho_for_eps(double eps, double delta, double *rho, struct fs_err *err)
{
    double sigma = 0.0;
    double r;
    double e = 0.0;
    int rc;

    /* sigma_for bisects the largest total rho with eps_optimal(rho) <= eps;
     * one release of sensitivity 1 has rho = 1 / (2 sigma^2). */
    rc = fs_zcdp_sigma_for(eps, delta, 1.0, 1, &sigma, err);
    if (rc != 0) {
        return rc;
    }
    r = 1.0 / (2.0 * sigma * sigma);
    /* the round trip through sigma may land an ulp or two above */
    for (int i = 0; i < 64; i++) {
        rc = fs_zcdp_eps_optimal(r, delta, &e, err);
        if (rc != 0) {
            return rc;
        }
        if (e <= eps) {
            *rho = r;
            return 0;
        }
        r = nextafter(r, 0.0);
    }
    return fs_err_set(err, FS_ENUMERIC, "fs_zcdp_rho_for_eps: no rho for eps %g at delta %g", eps,
                      delta);
}

int fs_ledger_budget_from_eps(double eps, double delta, struct fs_ledger_budget *out,
                              struct fs_err *err)
{
    double rho = 0.0;
    int rc = check_delta(&delta, err);

    if (rc != 0) {
        return rc;
    }
    if (!isfinite(eps) || eps <= 0.0) {
        return fs_err_set(err, FS_EINVAL, "privacy budget: epsilon must be finite and > 0 (got %g)",
                          eps);
    }
    rc = fs_zcdp_rho_for_eps(eps, delta, &rho, err);
    if (rc != 0) {
        return rc;
    }
    memset(out, 0, sizeof *out);
    out->set = 1;
    out->rho = rho;
    out->eps = eps;
    out->delta = delta;
    return 0;
}

static int check_rho(double rho, const char *what, struct fs_err *err)
{
    if (isnan(rho) || rho < 0.0) {
        return fs_err_set(err, FS_EINVAL, "privacy ledger: %s rho must be >= 0 (got %g)", what,
                          rho);
    }
    return 0;
}

int fs_ledger_totals(const struct fs_ledger_entry *e, size_t n, const struct fs_ledger_budget *b,
                     struct fs_ledger_totals *out, struct fs_err *err)
{
    int rc;

    memset(out, 0, sizeof *out);
    if (b == NULL || (n > 0 && e == NULL)) {
        return fs_err_set(err, FS_EINVAL, "fs_ledger_totals: NULL argument");
    }
    for (size_t i = 0; i < n; i++) {
        rc = check_rho(e[i].rho, "an entry's", err);
        if (rc != 0) {
            return rc;
        }
        switch (e[i].state) {
        case FS_LEDGER_RESERVED:
            out->rho_reserved += e[i].rho;
            out->rho_spent += e[i].rho;
            out->counted++;
            break;
        case FS_LEDGER_SPENT:
            out->rho_spent += e[i].rho;
            out->counted++;
            break;
        case FS_LEDGER_RELEASED:
            out->rho_released += e[i].rho;
            break;
        default:
            return fs_err_set(err, FS_EINVAL, "privacy ledger: entry %zu has an unknown state", i);
        }
    }
    if (!b->set) {
        out->remaining_rho = INFINITY;
    } else if (isinf(out->rho_spent) || out->rho_spent >= b->rho) {
        out->remaining_rho = 0.0;
    } else {
        out->remaining_rho = b->rho - out->rho_spent;
    }
    return eps_of(out->rho_spent, b->delta, &out->eps_spent, err);
}

int fs_ledger_decide(const struct fs_ledger_entry *e, size_t n, const struct fs_ledger_budget *b,
                     double request, struct fs_ledger_decision *out, struct fs_err *err)
{
    struct fs_ledger_totals t;
    int rc;

    memset(out, 0, sizeof *out);
    rc = check_rho(request, "the job's", err);
    if (rc == 0) {
        rc = fs_ledger_totals(e, n, b, &t, err);
    }
    if (rc != 0) {
        return rc;
    }
    out->spent = t.rho_spent;
    out->requested = request;
    out->budget = b->set ? b->rho : INFINITY;
    out->after = t.rho_spent + request;
    if (!b->set) {
        out->allowed = 1;
        snprintf(out->reason, sizeof out->reason,
                 "no privacy budget is configured (recorded only)");
    } else if (isinf(request)) {
        snprintf(out->reason, sizeof out->reason,
                 "the job has no formal differential-privacy guarantee (zCDP rho unbounded); "
                 "a privacy budget of rho %.6g is configured for every dataset",
                 b->rho);
    } else if (isinf(t.rho_spent)) {
        snprintf(out->reason, sizeof out->reason,
                 "the dataset already took part in a job without a formal guarantee (spent rho "
                 "unbounded); budget rho %.6g",
                 b->rho);
    } else if (out->after > b->rho * (1.0 + LEDGER_SLACK)) {
        snprintf(out->reason, sizeof out->reason,
                 "the job needs rho %.6g; the dataset has spent rho %.6g of its budget %.6g "
                 "(remaining %.6g)",
                 request, t.rho_spent, b->rho, t.remaining_rho);
    } else {
        out->allowed = 1;
        snprintf(out->reason, sizeof out->reason, "within budget: rho %.6g + %.6g <= %.6g",
                 t.rho_spent, request, b->rho);
    }
    return 0;
}
