/* A privacy ledger's accounting (docs/privacy-ledger.md): the zCDP rho a dataset has
 * spent, a budget rho_max, and the decision whether one more job fits.
 * Pure arithmetic over entries the caller keeps (the client agent stores
 * them in agent.db); no I/O, no clock.
 *
 * Units. Every job is charged the zCDP rho its party spends
 * (fs_fedpower_party_rho); zCDP composes additively, so a dataset's total
 * is the plain sum of the rho of its entries that are reserved (a job still
 * running) or spent, and converts to (eps, delta) with the optimal
 * conversion (CKS20, fs_zcdp_eps_optimal). A job without a formal guarantee
 * (fedpower, fedpower-utility) has rho = +INFINITY: recorded when no budget
 * is set, refused under any budget, and a dataset that ever took part in
 * one has an unbounded total (nothing more fits a budget).
 *
 * Rounding. "Exceeds" means spent + requested > rho_max (1 + 1e-12): the
 * relative slack only absorbs the rounding of sums of doubles (a job that
 * fits exactly is accepted). */
#ifndef FS_DP_LEDGER_H
#define FS_DP_LEDGER_H

#include <stddef.h>

#include "../core/err.h"

#define FS_LEDGER_DEFAULT_DELTA 1e-5
#define FS_LEDGER_REASON_MAX    320

enum fs_ledger_state {
    FS_LEDGER_RESERVED = 0, /* the job runs: counted, may still be released */
    FS_LEDGER_SPENT = 1,    /* noisy output left the party (or may have): counted for good */
    FS_LEDGER_RELEASED = 2  /* the job ended before any noisy upload: not counted */
};

/** "reserved", "spent", "released" (NULL for other values). */
const char *fs_ledger_state_name(enum fs_ledger_state s);
/** @return 0 or FS_EINVAL. */
FS_WUR int fs_ledger_state_parse(const char *s, enum fs_ledger_state *out, struct fs_err *err);

/* A budget per dataset. set = 0: none (everything allowed, still recorded). */
struct fs_ledger_budget {
    int set;
    double rho;   /* rho_max, finite > 0 */
    double eps;   /* the optimal conversion of rho at delta (or the eps it was given as) */
    double delta; /* the delta every epsilon of the ledger is reported at */
};

/** No budget; epsilons reported at delta (0 = FS_LEDGER_DEFAULT_DELTA). */
FS_WUR int fs_ledger_budget_none(double delta, struct fs_ledger_budget *out, struct fs_err *err);

/**
 * A budget of rho (finite > 0); out->eps its optimal conversion at delta
 * (0 = FS_LEDGER_DEFAULT_DELTA). @return 0 or FS_EINVAL.
 */
FS_WUR int fs_ledger_budget_from_rho(double rho, double delta, struct fs_ledger_budget *out,
                                     struct fs_err *err);

/**
 * A budget given as (eps, delta): the largest rho whose optimal conversion
 * at delta is at most eps (fs_zcdp_rho_for_eps). @return 0, FS_EINVAL,
 * FS_ENUMERIC (eps unreachable at that delta).
 */
FS_WUR int fs_ledger_budget_from_eps(double eps, double delta, struct fs_ledger_budget *out,
                                     struct fs_err *err);

/**
 * The largest zCDP rho whose optimal (CKS20) conversion at delta is <= eps
 * (eps finite > 0, delta in (0, 1)). @return 0, FS_EINVAL, FS_ENUMERIC.
 */
FS_WUR int fs_zcdp_rho_for_eps(double eps, double delta, double *rho, struct fs_err *err);

/* One job charged to a dataset: its rho (>= 0 or +INFINITY) and state. */
struct fs_ledger_entry {
    double rho;
    enum fs_ledger_state state;
};

/* A dataset's totals. Infinite values stay +INFINITY (callers print them as
 * "unbounded"). */
struct fs_ledger_totals {
    double rho_spent;     /* reserved + spent: what the budget is charged */
    double rho_reserved;  /* the part held by jobs still running */
    double rho_released;  /* given back by jobs that ended before any noisy upload */
    double eps_spent;     /* optimal conversion of rho_spent at the budget's delta */
    double remaining_rho; /* rho_max - rho_spent, >= 0; +INFINITY without a budget */
    size_t counted;       /* entries reserved or spent */
};

/**
 * Add up a dataset's entries (borrowed, n may be 0). @return 0 or FS_EINVAL
 * (a rho that is NaN or negative, an unknown state).
 */
FS_WUR int fs_ledger_totals(const struct fs_ledger_entry *e, size_t n,
                            const struct fs_ledger_budget *b, struct fs_ledger_totals *out,
                            struct fs_err *err);

struct fs_ledger_decision {
    int allowed;
    double spent;                      /* the dataset's rho_spent before the job */
    double requested;                  /* the job's rho */
    double budget;                     /* rho_max, +INFINITY without a budget */
    double after;                      /* spent + requested */
    char reason[FS_LEDGER_REASON_MAX]; /* why, with the numbers (refusals name them) */
};

/**
 * Would a job of rho `request` (>= 0 or +INFINITY) fit the dataset whose
 * entries are e[0..n) under budget b? Without a budget: always. With one:
 * refused when the job has no formal guarantee (request infinite), when
 * the dataset already has an unbounded total, or when spent + request
 * exceeds rho_max. Refusal is not an error: out->allowed = 0 and
 * out->reason says why.
 * @return 0 or FS_EINVAL (NaN or negative rho, bad entries).
 */
FS_WUR int fs_ledger_decide(const struct fs_ledger_entry *e, size_t n,
                            const struct fs_ledger_budget *b, double request,
                            struct fs_ledger_decision *out, struct fs_err *err);

#endif
