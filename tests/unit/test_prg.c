/* AES-256-CTR PRG: NIST SP 800-38A F.5.5 known answer, chunked streaming
 * equals one call, add/sub are inverse, CSPRNG sanity. */
#include "crypto/prg.h"
#include "crypto/rand.h"
#include "test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void hex(const char *s, uint8_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned v = 0;
        sscanf(s + 2 * i, "%2x", &v);
        out[i] = (uint8_t)v;
    }
}

static void test_nist_ctr_kat(void)
{
    uint8_t key[32], iv[16], pt[32], ct[32], ks[32];
    struct fs_err err = {0};
    fs_prg *p = NULL;

    hex("603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4", key, 32);
    hex("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff", iv, 16);
    hex("6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51", pt, 32);
    hex("601ec313775789a5b7a7f504bbf3d228f443e3ca4d62b59aca84e990cacaf5c5", ct, 32);
    CHECK_OK(fs_prg_new(&p, key, iv, &err), &err);
    if (p == NULL) {
        return;
    }
    CHECK_OK(fs_prg_bytes(p, ks, 32, &err), &err);
    for (size_t i = 0; i < 32; i++) {
        CHECK((uint8_t)(ks[i] ^ pt[i]) == ct[i]);
    }
    fs_prg_free(p);
}

static void test_streaming_equals_oneshot(void)
{
    uint8_t key[32] = {1, 2, 3};
    enum { N = 10007 };
    uint64_t *a = calloc(N, sizeof *a);
    uint64_t *b = calloc(N, sizeof *b);
    struct fs_err err = {0};
    fs_prg *p = NULL;
    fs_prg *q = NULL;

    CHECK_OK(fs_prg_new(&p, key, NULL, &err), &err);
    CHECK_OK(fs_prg_new(&q, key, NULL, &err), &err);
    CHECK_OK(fs_prg_u64(p, a, N, &err), &err);
    for (size_t off = 0, step = 1; off < N; off += step, step = step * 3 + 1) {
        size_t m = off + step > N ? N - off : step;
        CHECK_OK(fs_prg_u64(q, b + off, m, &err), &err);
    }
    CHECK(memcmp(a, b, N * sizeof *a) == 0);
    fs_prg_free(p);
    fs_prg_free(q);
    free(a);
    free(b);
}

static void test_add_sub_inverse(void)
{
    uint8_t key[32] = {9};
    enum { N = 9000 };
    uint64_t v[N];
    uint64_t w[N];
    struct fs_err err = {0};
    fs_prg *p = NULL;
    fs_prg *q = NULL;

    for (size_t i = 0; i < N; i++) {
        v[i] = w[i] = i * 0x9e3779b97f4a7c15ull;
    }
    CHECK_OK(fs_prg_new(&p, key, NULL, &err), &err);
    CHECK_OK(fs_prg_new(&q, key, NULL, &err), &err);
    CHECK_OK(fs_prg_add_u64(p, v, N, &err), &err);
    CHECK(memcmp(v, w, sizeof v) != 0);
    CHECK_OK(fs_prg_sub_u64(q, v, N, &err), &err);
    CHECK(memcmp(v, w, sizeof v) == 0);
    fs_prg_free(p);
    fs_prg_free(q);
}

static void test_normal_moments(void)
{
    uint8_t key[32] = {7};
    enum { N = 200000 };
    double *x = malloc(N * sizeof *x);
    double s = 0, s2 = 0;
    struct fs_err err = {0};
    fs_prg *p = NULL;

    CHECK_OK(fs_prg_new(&p, key, NULL, &err), &err);
    CHECK_OK(fs_prg_normal(p, x, N, &err), &err);
    for (size_t i = 0; i < N; i++) {
        s += x[i];
        s2 += x[i] * x[i];
    }
    /* mean ~ N(0, 1/N): 5 sigma = 0.011; variance sd ~ sqrt(2/N) = 0.0032 */
    CHECK_NEAR(s / N, 0.0, 0.012);
    CHECK_NEAR(s2 / N, 1.0, 0.016);
    fs_prg_free(p);
    free(x);
}

/* fs_prg_normal is Box-Muller on the stream words (to a few ulp: the vector
 * libm may round differently), and a value does not depend on how the
 * stream is split into calls of even sizes. */
static void test_normal_formula(void)
{
    uint8_t key[32] = {9, 8, 7};
    enum { N = 1002 };
    uint64_t w[N];
    double z[N], parts[N];
    struct fs_err err = {0};
    fs_prg *p = NULL;
    size_t i = 0;
    size_t step = 2;

    CHECK_OK(fs_prg_new(&p, key, NULL, &err), &err);
    if (p == NULL) {
        return;
    }
    CHECK_OK(fs_prg_u64(p, w, N, &err), &err);
    fs_prg_free(p);
    CHECK_OK(fs_prg_new(&p, key, NULL, &err), &err);
    CHECK_OK(fs_prg_normal(p, z, N, &err), &err);
    fs_prg_free(p);
    for (size_t q = 0; q < N / 2; q++) {
        double u1 = (double)((w[2 * q] >> 11) + 1) * 0x1.0p-53;
        double u2 = (double)(w[2 * q + 1] >> 11) * 0x1.0p-53;
        double r = sqrt(-2.0 * log(u1));

        CHECK_NEAR(z[2 * q], r * cos(2.0 * M_PI * u2), 1e-14 * (1.0 + r));
        CHECK_NEAR(z[2 * q + 1], r * sin(2.0 * M_PI * u2), 1e-14 * (1.0 + r));
    }
    CHECK_OK(fs_prg_new(&p, key, NULL, &err), &err);
    while (i < N) {
        size_t m = N - i < step ? N - i : step;

        CHECK_OK(fs_prg_normal(p, parts + i, m, &err), &err);
        i += m;
        step = step % 14 + 2; /* 2, 4, ..., 14, 2, ...: every grouping by 4 */
    }
    fs_prg_free(p);
    CHECK(memcmp(parts, z, sizeof z) == 0);
}

static void test_seek(void)
{
    uint8_t key[32] = {5};
    uint8_t iv[16];
    enum { N = 5000 };
    uint8_t all[N];
    uint8_t part[N];
    struct fs_err err = {0};
    fs_prg *p = NULL;
    fs_prg *q = NULL;
    static const size_t offs[] = {0, 1, 15, 16, 17, 255, 256, 4095, 4999};

    /* An IV near the top of the counter space exercises the carry. */
    memset(iv, 0xff, sizeof iv);
    iv[0] = 3;
    CHECK_OK(fs_prg_new(&p, key, iv, &err), &err);
    CHECK_OK(fs_prg_new(&q, key, iv, &err), &err);
    CHECK_OK(fs_prg_bytes(p, all, N, &err), &err);
    for (size_t i = 0; i < sizeof offs / sizeof offs[0]; i++) {
        size_t off = offs[i];
        CHECK_OK(fs_prg_seek(q, off, &err), &err);
        CHECK_OK(fs_prg_bytes(q, part, N - off, &err), &err);
        CHECK(memcmp(all + off, part, N - off) == 0);
    }
    fs_prg_free(p);
    fs_prg_free(q);
}

/* fs_prg_sum against the streams drawn one by one through fs_prg_seek and
 * fs_prg_add_u64/sub_u64, on both implementations: every alignment of the
 * start word against the 2-word AES block and the 8-word vector, lengths
 * around the 32-word unrolled step and the 1024-word piece, mixed signs. */
static void sum_case(size_t nt, uint64_t word0, size_t m)
{
    struct fs_prg_term *t = calloc(nt, sizeof *t);
    uint64_t *v = malloc((m + 1) * sizeof *v);
    uint64_t *want = malloc((m + 1) * sizeof *want);
    struct fs_err err = {0};

    if (t == NULL || v == NULL || want == NULL) {
        CHECK(0);
        goto out;
    }
    CHECK_OK(fs_rand_bytes(v, (m + 1) * sizeof *v, &err), &err);
    memcpy(want, v, (m + 1) * sizeof *v);
    for (size_t s = 0; s < nt; s++) {
        fs_prg *p = NULL;

        CHECK_OK(fs_rand_bytes(t[s].key, 32, &err), &err);
        t[s].sign = (s % 3 == 1) ? -1 : 1;
        CHECK_OK(fs_prg_new(&p, t[s].key, NULL, &err), &err);
        if (p == NULL) {
            goto out;
        }
        CHECK_OK(fs_prg_seek(p, word0 * 8, &err), &err);
        if (t[s].sign > 0) {
            CHECK_OK(fs_prg_add_u64(p, want, m, &err), &err);
        } else {
            CHECK_OK(fs_prg_sub_u64(p, want, m, &err), &err);
        }
        fs_prg_free(p);
    }
    for (int generic = 0; generic <= 1; generic++) {
        uint64_t *got = malloc((m + 1) * sizeof *got);

        if (got == NULL) {
            CHECK(0);
            break;
        }
        memcpy(got, v, (m + 1) * sizeof *v);
        fs_prg_sum_force_generic(generic);
        CHECK_OK(fs_prg_sum(t, nt, word0, got, m, &err), &err);
        CHECK_MSG(memcmp(got, want, (m + 1) * sizeof *got) == 0,
                  "%s path, %zu streams, word0 %llu, m %zu", generic ? "generic" : "default", nt,
                  (unsigned long long)word0, m);
        free(got);
    }
    fs_prg_sum_force_generic(0);
out:
    free(t);
    free(v);
    free(want);
}

static void test_sum_matches_streams(void)
{
    static const uint64_t starts[] = {0, 1, 2, 3, 7, 8, 9, 1023, 1025, 123457, 1ull << 40};
    static const size_t lens[] = {0,  1,  2,  3,  7,    8,    9,    15,  16,
                                  31, 32, 33, 63, 1023, 1024, 1025, 3001};
    static const size_t counts[] = {1, 3, 10};
    struct fs_err err = {0};
    uint64_t x = 7;

    printf("# fs_prg_sum default path: %s\n",
           fs_prg_sum_accelerated() ? "VAES/AVX-512" : "OpenSSL EVP");
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        for (size_t a = 0; a < sizeof starts / sizeof starts[0]; a++) {
            for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
                sum_case(counts[c], starts[a], lens[l]);
            }
        }
    }
    sum_case(4, 5, 200001);
    CHECK(fs_prg_sum(NULL, 1, 0, &x, 1, &err) == FS_EINVAL);
    CHECK(fs_prg_sum(NULL, 0, 0, &x, 1, &err) == 0);
    CHECK(x == 7);
}

static void test_csprng(void)
{
    uint8_t a[32] = {0}, b[32] = {0};
    uint64_t r = 0;
    struct fs_err err = {0};

    CHECK_OK(fs_rand_bytes(a, sizeof a, &err), &err);
    CHECK_OK(fs_rand_bytes(b, sizeof b, &err), &err);
    CHECK(memcmp(a, b, sizeof a) != 0);
    for (int i = 0; i < 1000; i++) {
        CHECK_OK(fs_rand_below(7, &r, &err), &err);
        CHECK(r < 7);
    }
    CHECK(fs_rand_below(0, &r, &err) == FS_EINVAL);
}

int main(void)
{
    RUN(test_nist_ctr_kat);
    RUN(test_streaming_equals_oneshot);
    RUN(test_add_sub_inverse);
    RUN(test_normal_moments);
    RUN(test_normal_formula);
    RUN(test_seek);
    RUN(test_sum_matches_streams);
    RUN(test_csprng);
    return TEST_END("test_prg");
}
