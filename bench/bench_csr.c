/* The parties' local power iteration at the Netflix size of the scale
 * experiment (bench/scale_fedpower.sh: 324 468 users x 17 711 items, 96 M
 * ratings over 100 parties, so one party holds about 3 245 x 17 711 with
 * 960 000 ratings; r = k = 10): the implicit covariance product
 * Y = A^T (A Z) / rows of fs_csr_ata_mul against the column-by-column loop it
 * replaced (copied here as the reference), timed alternately, medians of the
 * wall and CPU time per call, and checked bit for bit. Then the rest of one
 * local iteration (copy and orthonormalisation of the d x k iterate) and the
 * peak RSS.
 *
 * The ratings are synthetic like `fedsvd gen ratings` (item popularity
 * rank^-1, ratings 1..5); FS_BENCH_CSR_MTX=party.mtx times a real party file
 * instead (e.g. one of the scale experiment's). Asserts nothing but exits 1
 * when the two products differ; about two seconds. */
#include "io/matio.h"
#include "la/csr.h"
#include "la/qr.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define ROWS  3245
#define ITEMS 17711
#define NNZ   960000
#define RANK  10
#ifndef REPS
#define REPS 9
#endif

static double now(clockid_t clk)
{
    struct timespec ts;
    clock_gettime(clk, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static double unit(uint64_t *s)
{
    return (double)(mix(s) >> 11) * (1.0 / 9007199254740992.0);
}

/* About NNZ distinct ratings: each row rates NNZ / ROWS items on average
 * (uniformly 1 to 2 NNZ / ROWS - 1), drawn by rank^-1 (inverse CDF of the
 * continuous 1/x law on [1, ITEMS + 1)) without repeats. */
static fs_csr *synthetic(struct fs_err *err)
{
    size_t cap = 2 * NNZ;
    uint64_t s = 21;
    size_t *ri = malloc(cap * sizeof *ri);
    size_t *ci = malloc(cap * sizeof *ci);
    double *v = malloc(cap * sizeof *v);
    uint32_t *seen = calloc(ITEMS, sizeof *seen);
    double lg = log((double)ITEMS + 1.0);
    size_t nnz = 0;
    fs_csr *a = NULL;

    if (ri == NULL || ci == NULL || v == NULL || seen == NULL) {
        goto out;
    }
    for (size_t i = 0; i < ROWS; i++) {
        size_t m = 1 + (size_t)(mix(&s) % (2 * NNZ / ROWS - 1));
        for (size_t q = 0; q < m && nnz < cap;) {
            size_t j = (size_t)exp(unit(&s) * lg) - 1;
            j = j < ITEMS ? j : ITEMS - 1;
            if (seen[j] == i + 1) {
                continue;
            }
            seen[j] = (uint32_t)(i + 1);
            ri[nnz] = i;
            ci[nnz] = j;
            v[nnz] = (double)(1 + mix(&s) % 5);
            nnz++;
            q++;
        }
    }
    if (fs_csr_from_coo(ROWS, ITEMS, nnz, ri, ci, v, &a, err) != 0) {
        a = NULL;
    }
out:
    free(ri);
    free(ci);
    free(v);
    free(seen);
    return a;
}

/* The product as first written: per column of Z one sum over the row, then
 * one scatter per column (k gathers from columns d doubles apart). */
static void ata_columns(const fs_csr *a, const fs_mat *z, double scale, fs_mat *y)
{
    double t[RANK];

    fs_mat_zero(y);
    for (size_t i = 0; i < a->rows; i++) {
        size_t p0 = a->rowptr[i];
        size_t p1 = a->rowptr[i + 1];
        if (p0 == p1) {
            continue;
        }
        for (size_t c = 0; c < RANK; c++) {
            const double *zc = z->data + c * z->ld;
            double s = 0.0;
            for (size_t p = p0; p < p1; p++) {
                s += a->vals[p] * zc[a->colidx[p]];
            }
            t[c] = s * scale;
        }
        for (size_t c = 0; c < RANK; c++) {
            double *yc = y->data + c * y->ld;
            for (size_t p = p0; p < p1; p++) {
                yc[a->colidx[p]] += a->vals[p] * t[c];
            }
        }
    }
}

static int dcmp(const void *pa, const void *pb)
{
    double a = *(const double *)pa;
    double b = *(const double *)pb;
    return (a > b) - (a < b);
}

static double median(double *x, size_t n)
{
    qsort(x, n, sizeof *x, dcmp);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

int main(void)
{
    const char *path = getenv("FS_BENCH_CSR_MTX");
    struct fs_err err = {0};
    fs_csr *a = NULL;
    fs_mat *z = NULL;
    fs_mat *y_old = NULL;
    fs_mat *y_new = NULL;
    double w_old[REPS], w_new[REPS], c_old[REPS], c_new[REPS], w_qr[REPS], q_cpu[REPS];
    double scale, mo, mn;
    uint64_t s = 5;
    int same = 1;
    int rc = 1;

    if (path != NULL && path[0] != '\0') {
        if (fs_io_load_sparse(path, FS_FMT_AUTO, NULL, &a, &err) != 0) {
            fprintf(stderr, "bench_csr: %s: %s\n", path, err.msg);
            return 1;
        }
    } else {
        a = synthetic(&err);
    }
    if (a == NULL) {
        fprintf(stderr, "bench_csr: no matrix: %s\n", err.msg);
        goto out;
    }
    z = fs_mat_new(a->cols, RANK);
    y_old = fs_mat_new(a->cols, RANK);
    y_new = fs_mat_new(a->cols, RANK);
    if (z == NULL || y_old == NULL || y_new == NULL) {
        fprintf(stderr, "bench_csr: out of memory\n");
        goto out;
    }
    for (size_t c = 0; c < RANK; c++) {
        for (size_t j = 0; j < a->cols; j++) {
            FS_MAT_AT(z, j, c) = unit(&s) - 0.5;
        }
    }
    if (fs_qr_orth(z, NULL, &err) != 0) {
        fprintf(stderr, "bench_csr: qr: %s\n", err.msg);
        goto out;
    }
    scale = 1.0 / (double)(a->rows > 0 ? a->rows : 1);
    printf("one party: %zu x %zu, %zu ratings (%s), k = %d; median of %d calls each, "
           "alternating\n",
           a->rows, a->cols, a->nnz, path != NULL && path[0] != '\0' ? path : "synthetic", RANK,
           REPS);
    for (int r = 0; r < REPS; r++) {
        double w0 = now(CLOCK_MONOTONIC);
        double c0 = now(CLOCK_PROCESS_CPUTIME_ID);
        ata_columns(a, z, scale, y_old);
        double w1 = now(CLOCK_MONOTONIC);
        double c1 = now(CLOCK_PROCESS_CPUTIME_ID);
        if (fs_csr_ata_mul(a, z, scale, y_new, &err) != 0) {
            fprintf(stderr, "bench_csr: ata_mul: %s\n", err.msg);
            goto out;
        }
        double w2 = now(CLOCK_MONOTONIC);
        double c2 = now(CLOCK_PROCESS_CPUTIME_ID);
        /* the rest of a local iteration: the next iterate is orth(Y) */
        if (fs_mat_copy(z, y_new, &err) != 0 || fs_qr_orth(z, NULL, &err) != 0) {
            fprintf(stderr, "bench_csr: qr: %s\n", err.msg);
            goto out;
        }
        w_qr[r] = now(CLOCK_MONOTONIC) - w2;
        q_cpu[r] = now(CLOCK_PROCESS_CPUTIME_ID) - c2;
        w_old[r] = w1 - w0;
        w_new[r] = w2 - w1;
        c_old[r] = c1 - c0;
        c_new[r] = c2 - c1;
        for (size_t c = 0; c < RANK; c++) {
            same &= memcmp(y_old->data + c * y_old->ld, y_new->data + c * y_new->ld,
                           a->cols * sizeof(double)) == 0;
        }
    }
    mo = median(w_old, REPS);
    mn = median(w_new, REPS);
    printf("  A^T (A Z), column by column (old)   %8.2f ms wall %8.2f ms CPU\n", 1e3 * mo,
           1e3 * median(c_old, REPS));
    printf("  A^T (A Z), row-major (new)          %8.2f ms wall %8.2f ms CPU\n", 1e3 * mn,
           1e3 * median(c_new, REPS));
    printf("  old / new                           %8.2f x   (CPU %.2f x)\n", mo / mn,
           median(c_old, REPS) / median(c_new, REPS));
    printf("  results bit for bit identical       %8s\n", same ? "yes" : "NO");
    printf("  rest of the iteration (copy + QR)   %8.2f ms wall %8.2f ms CPU\n",
           1e3 * median(w_qr, REPS), 1e3 * median(q_cpu, REPS));
    {
        struct rusage ru;
        if (getrusage(RUSAGE_SELF, &ru) == 0) {
            printf("  peak RSS                            %8.1f MiB\n",
                   (double)ru.ru_maxrss / 1024.0);
        }
    }
    rc = same ? 0 : 1;
out:
    fs_csr_free(a);
    fs_mat_free(z);
    fs_mat_free(y_old);
    fs_mat_free(y_new);
    return rc;
}
