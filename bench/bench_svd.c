/* bench_svd: the centralised thin SVD that every federated result is
 * compared with (`fedsvd svd`), at the sizes of the FedSVD paper.
 *
 * For each size X (rows = samples x cols = features) it times
 *   - fs_svd_thin (lib/la, LAPACK dgesdd behind a copy, V^T -> V, sign fix),
 *   - LAPACKE_dgesdd called directly on a copy of the same matrix: the ratio
 *     shows the wrapper's overhead,
 *   - fs_svd_topk, randomized, k = 10 (4 power iterations, oversampling 10):
 *     the ratio shows what top-k saves, and its accuracy against the thin SVD,
 * and the peak RSS of the process that ran that size (each size runs in its
 * own child process, so the figures do not accumulate).
 *
 * The paper writes its data as features x samples (m = 1000 features, n =
 * 10K..100K samples: "1000 x 10000"); our convention is samples x features,
 * so the default sizes are 10000 x 1000 and 50000 x 1000, plus the
 * transposed 1000 x 10000 once to show that the orientation costs the same.
 * Sizes can be given as arguments: bench_svd 20000x500 1000x10000 ...
 * The matrix is Gaussian with column j scaled by (j+1)^(-1/2) (features of
 * decaying variance), seeded, so runs are comparable.
 *
 * BENCH_REPS=N in the environment reports the best of N runs (default 1).
 * Prints figures; asserts nothing. Exit status non-zero only on failure. */
#include <errno.h>
#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "crypto/prg.h"
#include "la/mat.h"
#include "la/svd.h"

#define TOPK 10

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double peak_rss_mib(void)
{
    struct rusage ru;

    if (getrusage(RUSAGE_SELF, &ru) != 0) {
        return -1;
    }
    return (double)ru.ru_maxrss / 1024.0; /* ru_maxrss is in KiB on Linux */
}

static int make_matrix(size_t m, size_t n, fs_mat **out, struct fs_err *err)
{
    static const uint8_t key[32] = {0x62, 0x65, 0x6e, 0x63, 0x68, 0x5f, 0x73, 0x76, 0x64};
    fs_prg *prg = NULL;
    fs_mat *a = NULL;
    int rc;

    *out = NULL;
    a = fs_mat_new_uninit(m, n);
    if (a == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory for %zu x %zu", m, n);
    }
    rc = fs_prg_new(&prg, key, NULL, err);
    if (rc == 0) {
        rc = fs_mat_fill_normal(a, prg, err);
    }
    fs_prg_free(prg);
    if (rc != 0) {
        fs_mat_free(a);
        return rc;
    }
    for (size_t j = 0; j < n; j++) {
        double sc = 1.0 / sqrt((double)(j + 1));
        for (size_t i = 0; i < m; i++) {
            FS_MAT_AT(a, i, j) *= sc;
        }
    }
    *out = a;
    return 0;
}

/* The same work fs_svd_thin must do at minimum: copy (dgesdd destroys its
 * input), allocate the factors, dgesdd. */
static int direct_dgesdd(const fs_mat *a, double *s_out, size_t r, double *secs)
{
    size_t m = a->rows;
    size_t n = a->cols;
    double t0 = now();
    double *work = malloc(m * n * sizeof *work);
    double *u = malloc(m * r * sizeof *u);
    double *vt = malloc(r * n * sizeof *vt);
    lapack_int info = -1;

    if (work != NULL && u != NULL && vt != NULL) {
        for (size_t j = 0; j < n; j++) {
            memcpy(work + j * m, a->data + j * a->ld, m * sizeof *work);
        }
        info = LAPACKE_dgesdd(LAPACK_COL_MAJOR, 'S', (lapack_int)m, (lapack_int)n, work,
                              (lapack_int)m, s_out, u, (lapack_int)m, vt, (lapack_int)r);
    }
    *secs = now() - t0;
    free(vt);
    free(u);
    free(work);
    return info == 0 ? 0 : -1;
}

static int bench_size(size_t m, size_t n, int reps)
{
    struct fs_err err;
    fs_mat *a = NULL;
    fs_svd thin;
    fs_svd top;
    struct fs_svd_opts o = fs_svd_opts_default();
    static const uint8_t sketch_seed[32] = {7};
    size_t r = m < n ? m : n;
    double *s_direct = NULL;
    double t0, t_thin, t_direct, t_top, d_direct = 0, d_top = 0;
    int rc = 1;

    memset(&thin, 0, sizeof thin);
    memset(&top, 0, sizeof top);
    fs_err_clear(&err);
    printf("bench_svd: X = %zu x %zu (samples x features), %.0f MiB, best of %d\n", m, n,
           (double)m * (double)n * 8.0 / 1048576.0, reps);
    fflush(stdout);
    if (make_matrix(m, n, &a, &err) != 0) {
        fprintf(stderr, "bench_svd: %s\n", err.msg);
        goto out;
    }
    s_direct = malloc(r * sizeof *s_direct);
    if (s_direct == NULL) {
        fprintf(stderr, "bench_svd: out of memory\n");
        goto out;
    }

    /* Best of `reps` runs for each contender (BENCH_REPS, default 1). */
    t_thin = INFINITY;
    t_direct = INFINITY;
    for (int rep = 0; rep < reps; rep++) {
        double t;
        fs_svd_clear(&thin);
        t0 = now();
        if (fs_svd_thin(a, &thin, &err) != 0) {
            fprintf(stderr, "bench_svd: fs_svd_thin: %s\n", err.msg);
            goto out;
        }
        t = now() - t0;
        t_thin = t < t_thin ? t : t_thin;
        if (direct_dgesdd(a, s_direct, r, &t) != 0) {
            fprintf(stderr, "bench_svd: LAPACKE_dgesdd failed\n");
            goto out;
        }
        t_direct = t < t_direct ? t : t_direct;
    }
    printf("  fs_svd_thin                  %8.3f s\n", t_thin);
    for (size_t i = 0; i < r; i++) {
        double d = fabs(s_direct[i] - thin.s[i]) / thin.s[0];
        d_direct = d > d_direct ? d : d_direct;
    }
    printf("  LAPACKE_dgesdd (direct)      %8.3f s   fs_svd_thin / direct = %.3f"
           "   (max |ds|/s1 = %.1e)\n",
           t_direct, t_thin / t_direct, d_direct);
    fflush(stdout);

    o.method = FS_TOPK_RANDOMIZED;
    o.seed = sketch_seed;
    t_top = INFINITY;
    for (int rep = 0; rep < reps; rep++) {
        double t;
        fs_svd_clear(&top);
        t0 = now();
        if (fs_svd_topk(a, TOPK, &o, &top, &err) != 0) {
            fprintf(stderr, "bench_svd: fs_svd_topk: %s\n", err.msg);
            goto out;
        }
        t = now() - t0;
        t_top = t < t_top ? t : t_top;
    }
    for (size_t i = 0; i < TOPK; i++) {
        double d = fabs(top.s[i] - thin.s[i]) / thin.s[0];
        d_top = d > d_top ? d : d_top;
    }
    printf("  fs_svd_topk randomized k=%d  %8.3f s   thin / randomized = %.1f"
           "   (top-%d max |ds|/s1 = %.1e)\n",
           TOPK, t_top, t_thin / t_top, TOPK, d_top);
    printf("  peak RSS                     %8.0f MiB\n", peak_rss_mib());
    rc = 0;
out:
    fflush(stdout);
    fs_svd_clear(&top);
    fs_svd_clear(&thin);
    free(s_direct);
    fs_mat_free(a);
    return rc;
}

static int parse_size(const char *s, size_t *m, size_t *n)
{
    char *end = NULL;
    unsigned long long a;
    unsigned long long b;

    errno = 0;
    a = strtoull(s, &end, 10);
    if (end == s || (*end != 'x' && *end != 'X') || errno != 0) {
        return -1;
    }
    s = end + 1;
    b = strtoull(s, &end, 10);
    if (end == s || *end != '\0' || errno != 0 || a == 0 || b == 0 || a > (1ULL << 24) ||
        b > (1ULL << 24)) {
        return -1;
    }
    *m = (size_t)a;
    *n = (size_t)b;
    return 0;
}

/* Run one size in a child so each peak RSS figure is its own. */
static int run_isolated(size_t m, size_t n, int reps)
{
    pid_t pid;
    int status = 0;

    fflush(stdout);
    pid = fork();
    if (pid < 0) {
        return bench_size(m, n, reps);
    }
    if (pid == 0) {
        _exit(bench_size(m, n, reps) == 0 ? 0 : 1);
    }
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "bench_svd: %zu x %zu failed\n", m, n);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    static const size_t defaults[][2] = {{10000, 1000}, {1000, 10000}, {50000, 1000}};
    const char *env = getenv("BENCH_REPS");
    int reps = 1;
    int failed = 0;

    if (env != NULL) {
        char *end = NULL;
        long v = strtol(env, &end, 10);
        if (end == env || *end != '\0' || v < 1 || v > 100) {
            fprintf(stderr, "bench_svd: BENCH_REPS: expected 1..100, got '%s'\n", env);
            return 2;
        }
        reps = (int)v;
    }

    if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        printf("Usage: [BENCH_REPS=N] bench_svd [ROWSxCOLS ...]\n"
               "       (default sizes 10000x1000 1000x10000 50000x1000)\n");
        return 0;
    }
    if (argc > 1) {
        for (int i = 1; i < argc; i++) {
            size_t m = 0;
            size_t n = 0;
            if (parse_size(argv[i], &m, &n) != 0) {
                fprintf(stderr, "bench_svd: expected ROWSxCOLS, got '%s'\n", argv[i]);
                return 2;
            }
            failed |= run_isolated(m, n, reps);
        }
        return failed;
    }
    for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++) {
        failed |= run_isolated(defaults[i][0], defaults[i][1], reps);
    }
    return failed;
}
