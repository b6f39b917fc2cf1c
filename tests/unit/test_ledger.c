/* Privacy ledger accounting (lib/dp/ledger): budgets from rho and from
 * (eps, delta) (largest rho of the optimal conversion), totals over
 * reserved / spent / released entries, allow / refuse decisions with their
 * numbers, unbounded (no formal guarantee) jobs, and rejected inputs. */
#include <stdlib.h>

#include "dp/dp.h"
#include "dp/ledger.h"
#include "test.h"

static void test_state_names(void)
{
    struct fs_err err = {0};
    enum fs_ledger_state s = FS_LEDGER_SPENT;

    CHECK(strcmp(fs_ledger_state_name(FS_LEDGER_RESERVED), "reserved") == 0);
    CHECK(strcmp(fs_ledger_state_name(FS_LEDGER_SPENT), "spent") == 0);
    CHECK(strcmp(fs_ledger_state_name(FS_LEDGER_RELEASED), "released") == 0);
    CHECK(fs_ledger_state_name((enum fs_ledger_state)7) == NULL);
    CHECK_OK(fs_ledger_state_parse("released", &s, &err), &err);
    CHECK(s == FS_LEDGER_RELEASED);
    CHECK_OK(fs_ledger_state_parse("reserved", &s, &err), &err);
    CHECK(s == FS_LEDGER_RESERVED);
    CHECK(fs_ledger_state_parse("Spent", &s, &err) == FS_EINVAL);
    CHECK(fs_ledger_state_parse("", &s, &err) == FS_EINVAL);
    CHECK(fs_ledger_state_parse(NULL, &s, &err) == FS_EINVAL);
}

static void test_budget_from_rho(void)
{
    struct fs_err err = {0};
    struct fs_ledger_budget b;
    double eps = 0.0;

    CHECK_OK(fs_ledger_budget_from_rho(0.05, 0, &b, &err), &err);
    CHECK(b.set == 1);
    CHECK(b.rho == 0.05);
    CHECK(b.delta == 1e-5);
    CHECK_OK(fs_zcdp_eps_optimal(0.05, 1e-5, &eps, &err), &err);
    CHECK(b.eps == eps);
    /* the optimal conversion is below the simple one */
    CHECK(b.eps < 0.05 + 2.0 * sqrt(0.05 * log(1e5)));
    CHECK_OK(fs_ledger_budget_from_rho(0.05, 1e-8, &b, &err), &err);
    CHECK(b.delta == 1e-8);
    CHECK(b.eps > eps);
    CHECK(fs_ledger_budget_from_rho(0.0, 0, &b, &err) == FS_EINVAL);
    CHECK(fs_ledger_budget_from_rho(-1.0, 0, &b, &err) == FS_EINVAL);
    CHECK(fs_ledger_budget_from_rho(INFINITY, 0, &b, &err) == FS_EINVAL);
    CHECK(fs_ledger_budget_from_rho(NAN, 0, &b, &err) == FS_EINVAL);
    CHECK(fs_ledger_budget_from_rho(0.05, 1.0, &b, &err) == FS_EINVAL);
    CHECK(fs_ledger_budget_from_rho(0.05, -1e-5, &b, &err) == FS_EINVAL);
    CHECK_OK(fs_ledger_budget_none(0, &b, &err), &err);
    CHECK(b.set == 0 && isinf(b.rho) && b.delta == 1e-5);
}

/* The largest rho of an (eps, delta) pair: its conversion is within eps and
 * a hair more is not. */
static void test_rho_for_eps(void)
{
    static const double cases[][2] = {
        {1.0, 1e-5}, {0.1, 1e-5}, {3.0, 1e-6}, {10.0, 1e-5}, {0.5, 1e-3}};
    struct fs_err err = {0};

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double eps = cases[i][0];
        double delta = cases[i][1];
        double L = log(1.0 / delta);
        double rho = 0.0;
        double e = 0.0;
        double simple;
        CHECK_OK(fs_zcdp_rho_for_eps(eps, delta, &rho, &err), &err);
        CHECK_OK(fs_zcdp_eps_optimal(rho, delta, &e, &err), &err);
        CHECK_MSG(e <= eps, "eps %g delta %g: rho %.17g converts to %.17g", eps, delta, rho, e);
        CHECK_MSG(e >= eps * (1.0 - 1e-9), "eps %g: rho %.17g converts to %.17g only", eps, rho, e);
        CHECK_OK(fs_zcdp_eps_optimal(rho * (1.0 + 1e-9), delta, &e, &err), &err);
        CHECK(e > eps);
        /* the simple conversion's rho solves rho + 2 sqrt(rho L) = eps; the
         * optimal conversion is tighter, so it allows more */
        simple = pow(sqrt(L + eps) - sqrt(L), 2.0);
        CHECK_MSG(rho > simple, "eps %g: rho %.17g <= simple %.17g", eps, rho, simple);
    }
    {
        struct fs_ledger_budget b;
        double rho = 0.0;
        CHECK_OK(fs_ledger_budget_from_eps(1.0, 1e-5, &b, &err), &err);
        CHECK_OK(fs_zcdp_rho_for_eps(1.0, 1e-5, &rho, &err), &err);
        CHECK(b.set == 1 && b.rho == rho && b.eps == 1.0 && b.delta == 1e-5);
        /* 0.03056 (CKS20 at eps 1, delta 1e-5); the simple conversion allows 0.0214 */
        CHECK_NEAR(rho, 0.030557, 1e-6);
    }
    {
        struct fs_ledger_budget b;
        double rho = 0.0;
        CHECK(fs_ledger_budget_from_eps(0.0, 1e-5, &b, &err) == FS_EINVAL);
        CHECK(fs_ledger_budget_from_eps(INFINITY, 1e-5, &b, &err) == FS_EINVAL);
        CHECK(fs_ledger_budget_from_eps(1.0, 2.0, &b, &err) == FS_EINVAL);
        CHECK(fs_zcdp_rho_for_eps(-1.0, 1e-5, &rho, &err) == FS_EINVAL);
    }
}

static void test_totals(void)
{
    struct fs_err err = {0};
    struct fs_ledger_budget b;
    struct fs_ledger_totals t;
    const struct fs_ledger_entry e[] = {
        {0.01, FS_LEDGER_SPENT},
        {0.02, FS_LEDGER_RESERVED},
        {0.5, FS_LEDGER_RELEASED},
        {0.005, FS_LEDGER_SPENT},
    };
    double eps = 0.0;

    CHECK_OK(fs_ledger_budget_from_rho(0.1, 0, &b, &err), &err);
    CHECK_OK(fs_ledger_totals(e, 4, &b, &t, &err), &err);
    CHECK_NEAR(t.rho_spent, 0.035, 1e-15);
    CHECK_NEAR(t.rho_reserved, 0.02, 1e-15);
    CHECK_NEAR(t.rho_released, 0.5, 1e-15);
    CHECK_NEAR(t.remaining_rho, 0.065, 1e-15);
    CHECK(t.counted == 3);
    CHECK_OK(fs_zcdp_eps_optimal(t.rho_spent, 1e-5, &eps, &err), &err);
    CHECK(t.eps_spent == eps);

    /* nothing spent */
    CHECK_OK(fs_ledger_totals(NULL, 0, &b, &t, &err), &err);
    CHECK(t.rho_spent == 0.0 && t.eps_spent == 0.0 && t.remaining_rho == 0.1 && t.counted == 0);

    /* no budget: remaining unbounded */
    CHECK_OK(fs_ledger_budget_none(1e-6, &b, &err), &err);
    CHECK_OK(fs_ledger_totals(e, 4, &b, &t, &err), &err);
    CHECK(isinf(t.remaining_rho));
    CHECK_OK(fs_zcdp_eps_optimal(0.035, 1e-6, &eps, &err), &err);
    CHECK_NEAR(t.eps_spent, eps, 1e-12);

    /* over budget (recorded before a budget was set): remaining 0, never negative */
    CHECK_OK(fs_ledger_budget_from_rho(0.03, 0, &b, &err), &err);
    CHECK_OK(fs_ledger_totals(e, 4, &b, &t, &err), &err);
    CHECK(t.remaining_rho == 0.0);
}

static void test_totals_unbounded(void)
{
    struct fs_err err = {0};
    struct fs_ledger_budget b;
    struct fs_ledger_totals t;
    const struct fs_ledger_entry e[] = {{0.01, FS_LEDGER_SPENT}, {INFINITY, FS_LEDGER_SPENT}};
    const struct fs_ledger_entry r[] = {{0.01, FS_LEDGER_SPENT}, {INFINITY, FS_LEDGER_RELEASED}};

    CHECK_OK(fs_ledger_budget_none(0, &b, &err), &err);
    CHECK_OK(fs_ledger_totals(e, 2, &b, &t, &err), &err);
    CHECK(isinf(t.rho_spent) && isinf(t.eps_spent));
    /* a released unbounded job does not count */
    CHECK_OK(fs_ledger_totals(r, 2, &b, &t, &err), &err);
    CHECK(t.rho_spent == 0.01 && isfinite(t.eps_spent) && isinf(t.rho_released));
    CHECK_OK(fs_ledger_budget_from_rho(1.0, 0, &b, &err), &err);
    CHECK_OK(fs_ledger_totals(e, 2, &b, &t, &err), &err);
    CHECK(t.remaining_rho == 0.0);
}

static void test_totals_rejects(void)
{
    struct fs_err err = {0};
    struct fs_ledger_budget b;
    struct fs_ledger_totals t;
    struct fs_ledger_entry e[] = {{0.01, FS_LEDGER_SPENT}};

    CHECK_OK(fs_ledger_budget_from_rho(1.0, 0, &b, &err), &err);
    e[0].rho = NAN;
    CHECK(fs_ledger_totals(e, 1, &b, &t, &err) == FS_EINVAL);
    e[0].rho = -0.5;
    CHECK(fs_ledger_totals(e, 1, &b, &t, &err) == FS_EINVAL);
    e[0].rho = 0.5;
    e[0].state = (enum fs_ledger_state)9;
    CHECK(fs_ledger_totals(e, 1, &b, &t, &err) == FS_EINVAL);
    CHECK(fs_ledger_totals(NULL, 1, &b, &t, &err) == FS_EINVAL);
    CHECK(fs_ledger_totals(e, 0, NULL, &t, &err) == FS_EINVAL);
}

static void test_decide_no_budget(void)
{
    struct fs_err err = {0};
    struct fs_ledger_budget b;
    struct fs_ledger_decision d;
    const struct fs_ledger_entry e[] = {{5.0, FS_LEDGER_SPENT}, {INFINITY, FS_LEDGER_SPENT}};

    CHECK_OK(fs_ledger_budget_none(0, &b, &err), &err);
    CHECK_OK(fs_ledger_decide(e, 2, &b, 0.3, &d, &err), &err);
    CHECK(d.allowed == 1);
    CHECK(isinf(d.budget));
    CHECK_OK(fs_ledger_decide(NULL, 0, &b, INFINITY, &d, &err), &err);
    CHECK(d.allowed == 1 && isinf(d.requested));
    CHECK(strstr(d.reason, "no privacy budget") != NULL);
}

static void test_decide_budget(void)
{
    struct fs_err err = {0};
    struct fs_ledger_budget b;
    struct fs_ledger_decision d;
    struct fs_ledger_entry e[8];
    size_t n = 0;

    CHECK_OK(fs_ledger_budget_from_rho(0.3, 0, &b, &err), &err);
    /* 0.1 + 0.2 = 0.30000000000000004 in doubles: exactly the budget, accepted */
    e[n++] = (struct fs_ledger_entry){0.1, FS_LEDGER_SPENT};
    CHECK_OK(fs_ledger_decide(e, n, &b, 0.2, &d, &err), &err);
    CHECK(d.allowed == 1);
    CHECK(d.spent == 0.1 && d.requested == 0.2 && d.budget == 0.3);
    e[n++] = (struct fs_ledger_entry){0.2, FS_LEDGER_RESERVED};
    /* full: the smallest further job is refused, naming the numbers */
    CHECK_OK(fs_ledger_decide(e, n, &b, 1e-6, &d, &err), &err);
    CHECK(d.allowed == 0);
    CHECK_NEAR(d.spent, 0.3, 1e-15);
    CHECK_MSG(strstr(d.reason, "needs rho 1e-06") != NULL && strstr(d.reason, "spent rho 0.3") &&
                  strstr(d.reason, "budget 0.3"),
              "%s", d.reason);
    /* the reserved job ends before any noisy upload: its rho comes back */
    e[1].state = FS_LEDGER_RELEASED;
    CHECK_OK(fs_ledger_decide(e, n, &b, 0.15, &d, &err), &err);
    CHECK(d.allowed == 1);
    CHECK_NEAR(d.after, 0.25, 1e-15);
    CHECK_OK(fs_ledger_decide(e, n, &b, 0.2000001, &d, &err), &err);
    CHECK(d.allowed == 0);
}

static void test_decide_sequence(void)
{
    /* budget rho_max, jobs of rho_max / 3: three fit, the fourth does not */
    struct fs_err err = {0};
    struct fs_ledger_budget b;
    struct fs_ledger_decision d;
    struct fs_ledger_entry e[8];
    size_t n = 0;
    int accepted = 0;

    CHECK_OK(fs_ledger_budget_from_eps(1.0, 1e-5, &b, &err), &err);
    for (int i = 0; i < 6; i++) {
        CHECK_OK(fs_ledger_decide(e, n, &b, b.rho / 3.0, &d, &err), &err);
        if (d.allowed) {
            e[n++] = (struct fs_ledger_entry){b.rho / 3.0, FS_LEDGER_SPENT};
            accepted++;
        }
    }
    CHECK_MSG(accepted == 3, "accepted %d", accepted);
}

static void test_decide_unbounded(void)
{
    struct fs_err err = {0};
    struct fs_ledger_budget b;
    struct fs_ledger_decision d;
    const struct fs_ledger_entry e[] = {{INFINITY, FS_LEDGER_SPENT}};

    CHECK_OK(fs_ledger_budget_from_rho(10.0, 0, &b, &err), &err);
    /* no formal guarantee: refused under any budget, even on a fresh dataset */
    CHECK_OK(fs_ledger_decide(NULL, 0, &b, INFINITY, &d, &err), &err);
    CHECK(d.allowed == 0);
    CHECK_MSG(strstr(d.reason, "no formal differential-privacy guarantee") != NULL, "%s", d.reason);
    /* a dataset that ran one before the budget was set: nothing more fits */
    CHECK_OK(fs_ledger_decide(e, 1, &b, 1e-9, &d, &err), &err);
    CHECK(d.allowed == 0);
    CHECK_MSG(strstr(d.reason, "without a formal guarantee") != NULL, "%s", d.reason);
    /* bad requests */
    CHECK(fs_ledger_decide(NULL, 0, &b, NAN, &d, &err) == FS_EINVAL);
    CHECK(fs_ledger_decide(NULL, 0, &b, -1e-3, &d, &err) == FS_EINVAL);
    /* rho 0 (nothing released) always fits */
    CHECK_OK(fs_ledger_decide(NULL, 0, &b, 0.0, &d, &err), &err);
    CHECK(d.allowed == 1);
}

int main(void)
{
    RUN(test_state_names);
    RUN(test_budget_from_rho);
    RUN(test_rho_for_eps);
    RUN(test_totals);
    RUN(test_totals_unbounded);
    RUN(test_totals_rejects);
    RUN(test_decide_no_budget);
    RUN(test_decide_budget);
    RUN(test_decide_sequence);
    RUN(test_decide_unbounded);
    return TEST_END("test_ledger");
}
