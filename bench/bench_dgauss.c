/* The exact discrete Gaussian samplers side by side, on one core: the fast
 * one (fs_dgauss_sample_prg, block inversion, batches of word-wise
 * proposals), the previous map of the same blocks (fs_dgauss_sample_prg_v1,
 * 32-bit comparisons one proposal at a time) and the reference one
 * (fs_dgauss_sample_reference_prg, CKS20 in GMP), all driven by the
 * AES-256-CTR stream as in the seed mode of the noise exchange, for the
 * integer sigma of the power methods' seeded noise, sigma w_i 2^f:
 * 7.0368744177664e11 = 0.1 * 0.05 * 2^47 for the 20-party fedpower-utility
 * configuration of bench/run.sh (sigma 0.1, w_i = 1/20, f = 47), 3.5e10 at
 * Netflix size (100 parties, f = 45), and for small ones. Samples per
 * second of thread CPU time (what one core gives, whatever else runs on the
 * machine) and of wall time. Then the server's regeneration of 19 parties'
 * seeded noise (d r = 60 000 values each, the fedpower-utility
 * configuration of bench/run.sh) on 1 thread (its CPU time and wall time)
 * and on every core. Asserts nothing; about 10 s. */
#include "crypto/prg.h"
#include "dp/dgauss.h"
#include "proto/fedpower.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double clk(clockid_t id)
{
    struct timespec ts;

    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef int (*sampler_fn)(fs_prg *, double, int64_t *, size_t, struct fs_err *);

/* Samples per second (CPU, wall) of n samples, best of 3. */
static void rate(sampler_fn f, double sigma, int64_t *v, size_t n, double *cpu, double *wall)
{
    uint8_t key[32] = {5};
    struct fs_err err = {0};

    *cpu = *wall = 0;
    for (int r = 0; r < 3; r++) {
        fs_prg *prg = NULL;
        if (fs_prg_new(&prg, key, NULL, &err) != 0) {
            fprintf(stderr, "bench_dgauss: %s\n", err.msg);
            exit(1);
        }
        double c0 = clk(CLOCK_THREAD_CPUTIME_ID), w0 = clk(CLOCK_MONOTONIC);
        if (f(prg, sigma, v, n, &err) != 0) {
            fprintf(stderr, "bench_dgauss: %s\n", err.msg);
            exit(1);
        }
        double c = n / (clk(CLOCK_THREAD_CPUTIME_ID) - c0), w = n / (clk(CLOCK_MONOTONIC) - w0);
        *cpu = c > *cpu ? c : *cpu;
        *wall = w > *wall ? w : *wall;
        fs_prg_free(prg);
    }
}

static void regeneration(void)
{
    enum { K = 19, N = 60000 };
    uint8_t(*seeds)[32] = malloc(K * sizeof *seeds);
    double sig[K];
    uint64_t *v = calloc(N, sizeof *v);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned all = cpus < 1 ? 1u : (unsigned)cpus;
    struct fs_err err = {0};
    double t[2] = {0, 0}, cpu1 = 0;

    if (seeds == NULL || v == NULL) {
        fprintf(stderr, "bench_dgauss: out of memory\n");
        exit(1);
    }
    for (int q = 0; q < K; q++) {
        memset(seeds[q], q + 1, 32);
        sig[q] = 7.0368744177664e11 * (1.0 + 0.01 * q);
    }
    for (int i = -1; i < 2; i++) { /* i = -1: a warm-up run, not shown */
        double w0 = clk(CLOCK_MONOTONIC), c0 = clk(CLOCK_PROCESS_CPUTIME_ID);
        if (fs_fedpower_noise_remove((const uint8_t(*)[32])seeds, sig, K, v, N, i ? all : 1,
                                     &err) != 0) {
            fprintf(stderr, "bench_dgauss: %s\n", err.msg);
            exit(1);
        }
        if (i >= 0) {
            t[i] = clk(CLOCK_MONOTONIC) - w0;
            cpu1 = i == 0 ? clk(CLOCK_PROCESS_CPUTIME_ID) - c0 : cpu1;
        }
    }
    printf(
        "  server regeneration, %d parties x %d values: 1 thread %.1f ms CPU, %.1f ms (%.1f M/s), "
        "%u threads %.1f ms (%.1f M/s), %.2fx (wall time; the machine's other load counts)\n",
        K, N, 1e3 * cpu1, 1e3 * t[0], K * N / t[0] / 1e6, all, 1e3 * t[1], K * N / t[1] / 1e6,
        t[0] / t[1]);
    free(seeds);
    free(v);
}

int main(void)
{
    const double sig[] = {16.0, 1000.0, 3.5e10, 7.0368744177664e11};
    enum { N_FAST = 4000000, N_REF = 400000 };
    int64_t *v = malloc(N_FAST * sizeof *v);

    if (v == NULL) {
        fprintf(stderr, "bench_dgauss: out of memory\n");
        return 1;
    }
    printf("-- exact discrete Gaussian, one core, AES-256-CTR stream (M samples/s: thread CPU time "
           "| wall time)\n");
    printf("  %-12s %20s %20s %20s %8s %8s\n", "sigma", "reference (CKS20)", "old (v1 blocks)",
           "fast (batches)", "cpu x", "vs old");
    for (size_t k = 0; k < sizeof sig / sizeof sig[0]; k++) {
        double rc, rw, oc, ow, fc, fw;
        memset(v, 0, N_FAST * sizeof *v); /* the pages are touched before any timing */
        rate(fs_dgauss_sample_reference_prg, sig[k], v, N_REF, &rc, &rw);
        rate(fs_dgauss_sample_prg_v1, sig[k], v, N_FAST, &oc, &ow);
        rate(fs_dgauss_sample_prg, sig[k], v, N_FAST, &fc, &fw);
        printf("  %-12g %9.2f | %8.2f %9.2f | %8.2f %9.2f | %8.2f %7.1fx %7.2fx\n", sig[k],
               rc / 1e6, rw / 1e6, oc / 1e6, ow / 1e6, fc / 1e6, fw / 1e6, fc / rc, fc / oc);
    }
    regeneration();
    free(v);
    return 0;
}
