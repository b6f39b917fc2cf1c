/* The server factorization's memory (fs_fedsvd_server_factorize, samples
 * partition, m >= n): after the QR the matrix shrinks to R, so that the SVD
 * of R must not need more than the m x n matrix it came from. Measured in a
 * child process: large blocks are mmapped (M_MMAP_THRESHOLD, so that a
 * freed block leaves the resident set and a reused one counts again), the
 * peak is reset (/proc/self/clear_refs) after the matrix is filled, and the
 * peak above the filled matrix must stay under 0.4 x m*n*8. Also: the
 * singular values and V match the centralised thin SVD. */
#include "la/svd.h"
#include "proto/fedsvd.h"
#include "test.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

/* VmRSS or VmHWM of this process in bytes, or -1. */
static long long status_kb(const char *key)
{
    char line[256];
    long long v = -1;
    size_t kl = strlen(key);
    FILE *f = fopen("/proc/self/status", "r");

    if (f == NULL) {
        return -1;
    }
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, key, kl) == 0) {
            v = strtoll(line + kl, NULL, 10) * 1024;
            break;
        }
    }
    fclose(f);
    return v;
}

/* Reset VmHWM to the current RSS (Linux >= 4.0); 0 on success. */
static int reset_peak(void)
{
    int fd = open("/proc/self/clear_refs", O_WRONLY);
    int ok;

    if (fd < 0) {
        return -1;
    }
    ok = write(fd, "5", 1) == 1;
    close(fd);
    return ok ? 0 : -1;
}

/* A fixed m x n matrix with singular values spread over three decades. */
static fs_mat *test_matrix(size_t m, size_t n)
{
    fs_mat *a = fs_mat_new_uninit(m, n);
    uint64_t x = 0x9e3779b97f4a7c15ULL;

    if (a == NULL) {
        return NULL;
    }
    for (size_t j = 0; j < n; j++) {
        double scale = pow(10.0, -3.0 * (double)j / (double)n);
        for (size_t i = 0; i < m; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            FS_MAT_AT(a, i, j) = scale * ((double)(x >> 11) / 9007199254740992.0 - 0.5);
        }
    }
    return a;
}

#if defined(__SANITIZE_ADDRESS__)
#define MEM_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MEM_SANITIZED 1
#endif
#endif

/* In the child: 0 if the peak above the matrix is within the limit. */
static int child_peak(size_t m, size_t n)
{
    struct fs_err err = {0};
    struct fs_fedsvd_published pub = {0};
    double nd8 = (double)m * (double)n * 8.0;
    long long base;
    long long peak;
    fs_mat *a;

#ifdef __GLIBC__
    (void)mallopt(M_MMAP_THRESHOLD, 64 * 1024);
#endif
    /* once first: code, BLAS buffers and threads are in place */
    a = test_matrix(m, n);
    if (a == NULL || fs_fedsvd_server_factorize(a, 0, FS_TOPK_AUTO, NULL, &pub, &err) != 0) {
        fprintf(stderr, "  warm-up: %s\n", err.msg);
        return 2;
    }
    fs_fedsvd_published_clear(&pub);
    fs_mat_free(a);
    a = test_matrix(m, n);
    if (a == NULL) {
        return 2;
    }
    base = status_kb("VmRSS:");
    if (base < 0 || reset_peak() != 0) {
        printf("  (no /proc/self/clear_refs: peak not measured)\n");
        fs_mat_free(a);
        return 0;
    }
    if (fs_fedsvd_server_factorize(a, 0, FS_TOPK_AUTO, NULL, &pub, &err) != 0) {
        fprintf(stderr, "  factorize: %s\n", err.msg);
        return 2;
    }
    peak = status_kb("VmHWM:");
    printf("  %zu x %zu: peak %.2f MB above the filled %.2f MB matrix (%.2f x m*n*8)\n", m, n,
           (double)(peak - base) / 1e6, nd8 / 1e6, (double)(peak - base) / nd8);
    fs_fedsvd_published_clear(&pub);
    fs_mat_free(a);
    return (double)(peak - base) <= 0.4 * nd8 ? 0 : 1;
}

static void check_peak(size_t m, size_t n)
{
    int st = 0;
    pid_t pid;

#ifdef MEM_SANITIZED
    printf("  (sanitizer build: its allocator sets the peak; not measured)\n");
    return;
#endif
    if (getenv("FS_TEST_QUICK") != NULL) {
        printf("  (FS_TEST_QUICK, e.g. under valgrind: peak not measured)\n");
        return;
    }
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        int rc = child_peak(m, n);
        fflush(stdout);
        fflush(stderr);
        _exit(rc);
    }
    if (pid > 0) {
        CHECK(waitpid(pid, &st, 0) == pid);
        CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%zu x %zu: child status %d", m, n, st);
    }
}

/* m = 3n: below 7n rows per column, where dgesdd's workspace on R (some
 * 6 n^2 words) would be twice the matrix. */
static void test_peak_3n(void)
{
    check_peak(1200, 400);
}

/* m = 10n: the default path (dgesdd on R), also within the matrix. */
static void test_peak_10n(void)
{
    check_peak(4000, 400);
}

/* The values and V of both paths against fs_svd_thin of the same matrix. */
static void check_values(size_t m, size_t n)
{
    struct fs_err err = {0};
    struct fs_fedsvd_published pub = {0};
    fs_svd ref = {0};
    fs_mat *a = test_matrix(m, n);
    fs_mat *b = test_matrix(m, n);

    CHECK(a != NULL && b != NULL);
    if (a == NULL || b == NULL) {
        goto out;
    }
    CHECK_OK(fs_svd_thin(b, &ref, &err), &err);
    CHECK_OK(fs_fedsvd_server_factorize(a, 0, FS_TOPK_AUTO, NULL, &pub, &err), &err);
    if (pub.s == NULL || ref.s == NULL) {
        goto out;
    }
    CHECK(pub.r == n);
    for (size_t i = 0; i < n; i++) {
        double dot = 0.0;
        CHECK_NEAR(pub.s[i], ref.s[i], 1e-12 * ref.s[0]);
        for (size_t k = 0; k < n; k++) {
            dot += FS_MAT_AT(pub.vc, k, i) * FS_MAT_AT(ref.v, k, i);
        }
        /* the same singular vector up to its sign (values well separated) */
        CHECK_NEAR(fabs(dot), 1.0, 1e-6);
    }
out:
    fs_fedsvd_published_clear(&pub);
    fs_svd_clear(&ref);
    fs_mat_free(a);
    fs_mat_free(b);
}

static void test_values_3n_and_10n(void)
{
    check_values(600, 200);
    check_values(2000, 200);
}

int main(void)
{
    RUN(test_peak_3n);
    RUN(test_peak_10n);
    RUN(test_values_3n_and_10n);
    return TEST_END("test_fedsvd_mem");
}
