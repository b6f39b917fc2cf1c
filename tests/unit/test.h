/* A tiny unit-test harness: each tests/unit/test_<module>.c is one program
 * whose main() calls RUN(test_fn) for each case and returns TEST_END().
 * CHECK* macros count failures and print file:line; the program prints
 *   "<name>: P passed, F failed"
 * and exits non-zero if any case failed. tests/run_unit.sh adds them up. */
#ifndef FS_TEST_H
#define FS_TEST_H

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int t_passed;
static int t_failed;
static int t_case_failed;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "  FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);                      \
            t_case_failed = 1;                                                                     \
        }                                                                                          \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                       \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "  FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                      \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            t_case_failed = 1;                                                                     \
        }                                                                                          \
    } while (0)

/* |a - b| <= tol, printing both values on failure. */
#define CHECK_NEAR(a, b, tol)                                                                      \
    do {                                                                                           \
        double t_a_ = (double)(a);                                                                 \
        double t_b_ = (double)(b);                                                                 \
        if (!(fabs(t_a_ - t_b_) <= (tol))) {                                                       \
            fprintf(stderr, "  FAIL %s:%d: %s = %.17g, %s = %.17g, tol %g\n", __FILE__, __LINE__,  \
                    #a, t_a_, #b, t_b_, (double)(tol));                                            \
            t_case_failed = 1;                                                                     \
        }                                                                                          \
    } while (0)

/* A call returning 0 on success; on failure print the fs_err message. */
#define CHECK_OK(call, errp)                                                                       \
    do {                                                                                           \
        int t_rc_ = (call);                                                                        \
        if (t_rc_ != 0) {                                                                          \
            fprintf(stderr, "  FAIL %s:%d: %s returned %d: %s\n", __FILE__, __LINE__, #call,       \
                    t_rc_, (errp)->msg);                                                           \
            t_case_failed = 1;                                                                     \
        }                                                                                          \
    } while (0)

#define RUN(fn)                                                                                    \
    do {                                                                                           \
        t_case_failed = 0;                                                                         \
        fn();                                                                                      \
        if (t_case_failed) {                                                                       \
            t_failed++;                                                                            \
            fprintf(stderr, "not ok %s\n", #fn);                                                   \
        } else {                                                                                   \
            t_passed++;                                                                            \
            printf("ok %s\n", #fn);                                                                \
        }                                                                                          \
    } while (0)

#define TEST_END(name)                                                                             \
    (printf("%s: %d passed, %d failed\n", (name), t_passed, t_failed), t_failed ? 1 : 0)

/* UNDER_SAN: 1 in an AddressSanitizer build (slow: tests run fewer rounds). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_UNDEFINED__)
#define UNDER_SAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_SAN 1
#endif
#endif
#ifndef UNDER_SAN
#define UNDER_SAN 0
#endif

/* 1 in a sanitizer build or with FS_TEST_QUICK set (and not "0"), as
 * `make test-valgrind` sets it: the slow tests then run fewer rounds. */
static inline int t_quick(void)
{
    const char *q = getenv("FS_TEST_QUICK");
    return UNDER_SAN || (q != NULL && q[0] != '\0' && q[0] != '0');
}

/* n, or n / 10 when t_quick(). */
static inline size_t t_scale(size_t n)
{
    return t_quick() ? n / 10 : n;
}

#endif
