/* PRG throughput on one core: fs_prg_bytes, fs_prg_u64 and fs_prg_add_u64
 * over 1 GiB each, for several buffer sizes, against baselines measured in
 * the same run: memset and memcpy of the same buffer (memory bandwidth) and
 * OpenSSL's AES-256-CTR called directly (EVP_EncryptUpdate in place, the
 * cipher without fs_prg's extra pass). Then fs_prg_sum (the SecAgg masks:
 * 10 streams summed into a 64 MiB vector) on its default path against its
 * generic EVP path in the same run, and fs_fixedpt_encode/_decode (default
 * path against the scalar loops). Prints GB/s (10^9 bytes per second of
 * keystream, best of 3 rounds), ratios and peak RSS. Asserts nothing; about
 * 20 s. */
#include "crypto/prg.h"
#include "la/fixedpt.h"

#include <math.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define TOTAL_BYTES ((size_t)1 << 30)
#define ROUNDS      3
#define TARGET_GBS  4.0

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

enum op { OP_MEMSET, OP_MEMCPY, OP_EVP, OP_BYTES, OP_U64, OP_ADD };

static const char *op_name[] = {
    "memset (baseline)", "memcpy (baseline)", "EVP AES-256-CTR in place (baseline)",
    "fs_prg_bytes",      "fs_prg_u64",        "fs_prg_add_u64",
};

struct state {
    fs_prg *prg;
    EVP_CIPHER_CTX *evp;
    uint64_t *buf;
    uint64_t *src;
    size_t words;
};

static void die(const char *what)
{
    fprintf(stderr, "bench_prg: %s failed\n", what);
    exit(1);
}

/* One pass over the buffer. */
static void run_once(struct state *s, enum op op)
{
    struct fs_err err = {0};
    size_t bytes = s->words * sizeof *s->buf;
    int outl = 0;

    switch (op) {
    case OP_MEMSET:
        memset(s->buf, (int)(s->buf[0] & 0x7f), bytes);
        break;
    case OP_MEMCPY:
        memcpy(s->buf, s->src, bytes);
        break;
    case OP_EVP:
        if (EVP_EncryptUpdate(s->evp, (unsigned char *)s->buf, &outl, (unsigned char *)s->buf,
                              (int)bytes) != 1) {
            die("EVP_EncryptUpdate");
        }
        break;
    case OP_BYTES:
        if (fs_prg_bytes(s->prg, s->buf, bytes, &err) != 0) {
            die("fs_prg_bytes");
        }
        break;
    case OP_U64:
        if (fs_prg_u64(s->prg, s->buf, s->words, &err) != 0) {
            die("fs_prg_u64");
        }
        break;
    case OP_ADD:
        if (fs_prg_add_u64(s->prg, s->buf, s->words, &err) != 0) {
            die("fs_prg_add_u64");
        }
        break;
    }
}

/* GB/s over TOTAL_BYTES, best of ROUNDS. */
static double throughput(struct state *s, enum op op)
{
    size_t bytes = s->words * sizeof *s->buf;
    size_t passes = TOTAL_BYTES / bytes;
    double best = 0;

    run_once(s, op); /* warm up: page faults, caches */
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = now();
        double gbs;
        for (size_t p = 0; p < passes; p++) {
            run_once(s, op);
        }
        gbs = (double)(passes * bytes) / (now() - t0) / 1e9;
        best = gbs > best ? gbs : best;
    }
    return best;
}

/* Keystream GB/s of fs_prg_sum with 10 streams over a 64 MiB vector, best of ROUNDS. */
static double sum_gbs(const struct fs_prg_term *t, size_t nt, uint64_t *v, size_t words)
{
    struct fs_err err = {0};
    double best = 0;

    for (int r = 0; r <= ROUNDS; r++) {
        double t0 = now();
        double gbs;

        if (fs_prg_sum(t, nt, 0, v, words, &err) != 0) {
            die("fs_prg_sum");
        }
        gbs = (double)(nt * words * sizeof *v) / (now() - t0) / 1e9;
        if (r > 0) { /* round 0 warms up */
            best = gbs > best ? gbs : best;
        }
    }
    return best;
}

static void sum_streams(void)
{
    enum { NT = 10 };
    size_t words = ((size_t)64 << 20) / sizeof(uint64_t);
    struct fs_prg_term t[NT];
    uint64_t *v = aligned_alloc(64, words * sizeof *v);
    double fast, generic;

    if (v == NULL) {
        die("aligned_alloc");
    }
    memset(v, 3, words * sizeof *v);
    for (size_t s = 0; s < NT; s++) {
        memset(t[s].key, (int)s + 1, sizeof t[s].key);
        t[s].sign = s % 2 == 0 ? 1 : -1;
    }
    fast = sum_gbs(t, NT, v, words);
    fs_prg_sum_force_generic(1);
    generic = sum_gbs(t, NT, v, words);
    fs_prg_sum_force_generic(0);
    printf("\nfs_prg_sum, %d streams into a 64 MiB vector (SecAgg masking), keystream GB/s:\n"
           "  default path (%s) %.2f, generic EVP path (baseline) %.2f, ratio %.2f\n",
           NT, fs_prg_sum_accelerated() ? "VAES/AVX-512" : "EVP", fast, generic, fast / generic);
    free(v);
}

/* ns per value of fs_fixedpt_encode / _decode over 64 Ki values (an agent's
 * masking piece, in cache), best of ROUNDS x 200 calls. */
static void fixedpt_ns(const struct fs_fixedpt *fp, const double *x, uint64_t *y, double *back,
                       size_t n, double *enc, double *dec)
{
    struct fs_err err = {0};

    *enc = *dec = 1e30;
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = now();
        for (int k = 0; k < 200; k++) {
            if (fs_fixedpt_encode(fp, x, y, n, &err) != 0) {
                die("fs_fixedpt_encode");
            }
        }
        double t1 = now();
        for (int k = 0; k < 200; k++) {
            fs_fixedpt_decode(fp, y, back, n);
        }
        double t2 = now();
        double per = 1e9 / (200.0 * (double)n);
        *enc = fmin(*enc, (t1 - t0) * per);
        *dec = fmin(*dec, (t2 - t1) * per);
    }
}

static void fixedpt(void)
{
    enum { N = 65536 };
    double *x = malloc(N * sizeof *x);
    double *back = malloc(N * sizeof *back);
    uint64_t *y = malloc(N * sizeof *y);
    struct fs_fixedpt fp;
    struct fs_err err = {0};
    double e1, d1, e0, d0;

    if (x == NULL || y == NULL || back == NULL || fs_fixedpt_init(&fp, 1.0, 10, &err) != 0) {
        die("fixedpt setup");
    }
    for (size_t i = 0; i < N; i++) {
        x[i] = i % 5 == 0 ? 0.0 : sin((double)i) * 0.9;
    }
    fixedpt_ns(&fp, x, y, back, N, &e1, &d1);
    fs_fixedpt_force_generic(1);
    fixedpt_ns(&fp, x, y, back, N, &e0, &d0);
    fs_fixedpt_force_generic(0);
    printf("\nfixed-point encoding (SecAgg inputs), 64 Ki values, ns per value:\n"
           "  default path (%s): encode %.3f, decode %.3f; scalar loops (baseline): encode "
           "%.3f, decode %.3f; ratios %.1f, %.1f\n",
           fs_fixedpt_accelerated() ? "AVX-512" : "scalar", e1, d1, e0, d0, e0 / e1, d0 / d1);
    free(x);
    free(y);
    free(back);
}

int main(void)
{
    static const size_t sizes[] = {(size_t)32 << 10, (size_t)1 << 20, (size_t)64 << 20};
    static const uint8_t key[32] = {1, 2, 3, 4, 5, 6, 7, 8};
    struct fs_err err = {0};
    struct state s;
    struct rusage ru;
    double worst_u64 = 1e30;
    double worst_add = 1e30;

    memset(&s, 0, sizeof s);
    if (fs_prg_new(&s.prg, key, NULL, &err) != 0) {
        die("fs_prg_new");
    }
    s.evp = EVP_CIPHER_CTX_new();
    if (s.evp == NULL || EVP_EncryptInit_ex(s.evp, EVP_aes_256_ctr(), NULL, key, NULL) != 1) {
        die("EVP init");
    }
    printf("PRG (AES-256-CTR) throughput, one core, %zu MiB per round, best of %d rounds, GB/s = "
           "1e9 B/s\n\n",
           TOTAL_BYTES >> 20, ROUNDS);
    printf("| buffer | memset | memcpy | EVP CTR | fs_prg_bytes | fs_prg_u64 | fs_prg_add_u64 | "
           "u64 / EVP | add / EVP |\n");
    printf("|---|---|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        double g[6];
        s.words = sizes[i] / sizeof(uint64_t);
        s.buf = aligned_alloc(64, sizes[i]);
        s.src = aligned_alloc(64, sizes[i]);
        if (s.buf == NULL || s.src == NULL) {
            die("aligned_alloc");
        }
        memset(s.buf, 1, sizes[i]);
        memset(s.src, 2, sizes[i]);
        for (int op = OP_MEMSET; op <= OP_ADD; op++) {
            g[op] = throughput(&s, (enum op)op);
        }
        printf("| %zu KiB | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n",
               sizes[i] >> 10, g[OP_MEMSET], g[OP_MEMCPY], g[OP_EVP], g[OP_BYTES], g[OP_U64],
               g[OP_ADD], g[OP_U64] / g[OP_EVP], g[OP_ADD] / g[OP_EVP]);
        worst_u64 = g[OP_U64] < worst_u64 ? g[OP_U64] : worst_u64;
        worst_add = g[OP_ADD] < worst_add ? g[OP_ADD] : worst_add;
        free(s.buf);
        free(s.src);
    }
    printf("\n(columns: %s, %s, %s, %s, %s, %s)\n", op_name[0], op_name[1], op_name[2], op_name[3],
           op_name[4], op_name[5]);
    printf("target >= %.1f GB/s per core: fs_prg_u64 worst %.2f (%s), fs_prg_add_u64 worst %.2f "
           "(%s)\n",
           TARGET_GBS, worst_u64, worst_u64 >= TARGET_GBS ? "met" : "MISSED", worst_add,
           worst_add >= TARGET_GBS ? "met" : "MISSED");
    sum_streams();
    fixedpt();
    getrusage(RUSAGE_SELF, &ru);
    printf("peak RSS: %.1f MiB\n", (double)ru.ru_maxrss / 1024.0);
    EVP_CIPHER_CTX_free(s.evp);
    fs_prg_free(s.prg);
    return 0;
}
