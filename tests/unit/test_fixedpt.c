/* Fixed point in Z_2^64: choice of f (largest with K B 2^f <= 2^62), the
 * decoded ring sum of K encodings against the exact sum (compensated long
 * double reference) for K = 2..1000 and bounds 1e-300..1e300, no wrap at the
 * extremes, masking (secure aggregation) leaves the sum intact, noise
 * addition, and rejected inputs. Prints the measured error figures. */
#include "la/fixedpt.h"
#include "test.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Test-only PRNG (splitmix64): reproducible, not for anything secret. */
static uint64_t rng_state = 0x243f6a8885a308d3ull;

static uint64_t rng_u64(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double rng_unit(void)
{
    return (double)(rng_u64() >> 11) * 0x1p-53;
}

/* An entry in [-B, B] of varying magnitude: exactly +-B, B times a uniform,
 * or B 2^-k for k up to 60, with random sign. */
static double rng_entry(double bound)
{
    double s = (rng_u64() & 1) ? -1.0 : 1.0;
    switch (rng_u64() % 4) {
    case 0:
        return s * bound;
    case 1:
        return s * bound * rng_unit();
    case 2:
        return s * ldexp(bound * (0.5 + 0.5 * rng_unit()), -(int)(rng_u64() % 61));
    default:
        return s * bound * rng_unit() * rng_unit();
    }
}

/* Reference sum as an unevaluated pair hi + lo: TwoSum makes every addition
 * error-free, the errors are summed in lo. Accurate to ~2^-100 of sum |x|
 * plus K ulps of lo: far below what is asserted. Plain doubles (not long
 * double) so that it also holds under valgrind, which computes x87 long
 * double in 64-bit precision. */
struct dd {
    double hi;
    double lo;
};

static struct dd ref_sum(const double *x, size_t n)
{
    struct dd r = {0, 0};

    for (size_t i = 0; i < n; i++) {
        double s = r.hi + x[i];
        double bp = s - r.hi;
        double err = (r.hi - (s - bp)) + (x[i] - bp);
        r.hi = s;
        r.lo += err;
    }
    return r;
}

/* K B 2^f <= 2^62, exactly: y = B 2^f is exact (a power-of-two scaling),
 * and K y = p + e exactly with p = fl(K y), e = fma(K, y, -p). */
static int kb_le_2_62(unsigned k, double b, int f)
{
    double y = ldexp(b, f);
    double p = (double)k * y;
    double e = fma((double)k, y, -p);
    return p < 0x1p62 || (p == 0x1p62 && e <= 0);
}

static void test_frac_bits(void)
{
    struct fs_fixedpt fp;
    struct fs_err err = {0};

    CHECK_OK(fs_fixedpt_init(&fp, 1.0, 2, &err), &err);
    CHECK(fp.frac_bits == 61);
    CHECK_OK(fs_fixedpt_init(&fp, 1.0, 1, &err), &err);
    CHECK(fp.frac_bits == 62);
    CHECK_OK(fs_fixedpt_init(&fp, 1.0, 1000, &err), &err);
    CHECK(fp.frac_bits == 52);
    CHECK_OK(fs_fixedpt_init(&fp, 0.75, 4, &err), &err);
    CHECK(fp.frac_bits == 60); /* 3 * 2^60 <= 2^62 < 3 * 2^61 */
    CHECK_OK(fs_fixedpt_init(&fp, 0x1p70, 1, &err), &err);
    CHECK(fp.frac_bits == -8);

    /* Largest f: K B 2^f <= 2^62 < K B 2^(f+1), checked exactly over many
     * (B, K). */
    const double bounds[] = {
        1e-300, 1e-3, 0.1, 1, 3, 1e6, 123456.789, 1e300, DBL_MAX, DBL_MIN, 4.9406564584124654e-324};
    const unsigned ks[] = {1, 2, 3, 7, 10, 100, 1000, 1u << 20, 4000000000u};
    for (size_t i = 0; i < sizeof bounds / sizeof bounds[0]; i++) {
        for (size_t k = 0; k < sizeof ks / sizeof ks[0]; k++) {
            CHECK_OK(fs_fixedpt_init(&fp, bounds[i], ks[k], &err), &err);
            CHECK_MSG(kb_le_2_62(ks[k], bounds[i], fp.frac_bits) &&
                          !kb_le_2_62(ks[k], bounds[i], fp.frac_bits + 1),
                      "B %g K %u: f %d", bounds[i], ks[k], fp.frac_bits);
        }
    }
}

/* Encode K random vectors, sum in the ring, decode, compare. */
static void run_sum_case(double bound, unsigned k, size_t len, double *worst_rel,
                         double *worst_naive)
{
    struct fs_fixedpt fp;
    struct fs_err err = {0};
    double *x = malloc(len * k * sizeof *x);
    uint64_t *enc = malloc(len * sizeof *enc);
    uint64_t *acc = calloc(len, sizeof *acc);
    double *dec = malloc(len * sizeof *dec);
    double *col = malloc(k * sizeof *col);

    if (x == NULL || enc == NULL || acc == NULL || dec == NULL || col == NULL) {
        CHECK(0);
        goto out;
    }
    CHECK_OK(fs_fixedpt_init(&fp, bound, k, &err), &err);
    for (unsigned p = 0; p < k; p++) {
        for (size_t i = 0; i < len; i++) {
            x[p * len + i] = rng_entry(bound);
        }
        CHECK_OK(fs_fixedpt_encode(&fp, x + p * len, enc, len, &err), &err);
        for (size_t i = 0; i < len; i++) {
            acc[i] += enc[i];
        }
    }
    fs_fixedpt_decode(&fp, acc, dec, len);
    double unit = ldexp(1.0, -fp.frac_bits);
    double maxabs = 0; /* the largest entry of all K vectors */
    double worst = 0;
    double worst_plain = 0;
    for (size_t i = 0; i < len * k; i++) {
        maxabs = fmax(maxabs, fabs(x[i]));
    }
    for (size_t i = 0; i < len; i++) {
        double sabs = 0;
        double plain = 0;
        for (unsigned p = 0; p < k; p++) {
            col[p] = x[p * len + i];
            sabs += fabs(col[p]);
            plain += col[p];
        }
        struct dd ref = ref_sum(col, k);
        double e = fabs((dec[i] - ref.hi) - ref.lo);
        /* Proven: K/2 units of rounding, one double rounding of the result,
         * plus the reference's own error. */
        double lim = k * 0.5 * unit + 0x1p-53 * fabs(ref.hi) + 0x1p-62 * sabs + DBL_TRUE_MIN;
        CHECK_MSG(e <= lim, "B %g K %u entry %zu: error %g > %g", bound, k, i, e, lim);
        worst = fmax(worst, e);
        worst_plain = fmax(worst_plain, fabs((plain - ref.hi) - ref.lo));
    }
    *worst_rel = worst / maxabs;
    *worst_naive = worst_plain / maxabs;
out:
    free(x);
    free(enc);
    free(acc);
    free(dec);
    free(col);
}

static void test_sums(void)
{
    const unsigned ks[] = {2, 10, 100, 1000};
    const double bounds[] = {1e-3, 1, 1e6, 1e300, 1e-300};

    /* Figures are max |error| over the vector / the largest entry of all K
     * vectors (the secure-sum accuracy measure); "bound" is the proven worst case
     * K 2^-(f+1) / max|x| + K 2^-53 (summand rounding + output rounding);
     * "naive" is a plain double loop over the parties, for comparison. */
    printf("  K     B       f     max|err|/max|x|  bound       naive double sum\n");
    for (size_t j = 0; j < sizeof ks / sizeof ks[0]; j++) {
        for (size_t b = 0; b < sizeof bounds / sizeof bounds[0]; b++) {
            struct fs_fixedpt fp;
            struct fs_err err = {0};
            double rel = 0;
            double naive = 0;
            size_t len = ks[j] >= 1000 ? 200 : 1000;
            run_sum_case(bounds[b], ks[j], len, &rel, &naive);
            CHECK_OK(fs_fixedpt_init(&fp, bounds[b], ks[j], &err), &err);
            /* The vectors contain +-B entries (1 in 4 is exactly +-B). */
            double proven =
                (double)ks[j] * ldexp(0.5, -fp.frac_bits) / bounds[b] + (double)ks[j] * 0x1p-53;
            printf("  %-5u %-7g %-5d %-16.3e %-11.3e %.3e\n", ks[j], bounds[b], fp.frac_bits, rel,
                   proven, naive);
            CHECK_MSG(rel <= proven * (1 + 1e-9), "K %u B %g: %g > %g", ks[j], bounds[b], rel,
                      proven);
        }
    }
}

/* All K summands at +B (or -B): the largest possible sum does not wrap. */
static void test_extremes_no_wrap(void)
{
    const unsigned ks[] = {1, 2, 10, 1000, 65536};
    const double bounds[] = {1, 0.3, 1e6, 1e300, DBL_MAX / 70000};
    struct fs_err err = {0};

    for (size_t j = 0; j < sizeof ks / sizeof ks[0]; j++) {
        for (size_t b = 0; b < sizeof bounds / sizeof bounds[0]; b++) {
            struct fs_fixedpt fp;
            double xs[2] = {bounds[b], -bounds[b]};
            uint64_t e[2];
            uint64_t acc[2] = {0, 0};
            double d[2];
            CHECK_OK(fs_fixedpt_init(&fp, bounds[b], ks[j], &err), &err);
            CHECK_OK(fs_fixedpt_encode(&fp, xs, e, 2, &err), &err);
            for (unsigned p = 0; p < ks[j]; p++) {
                acc[0] += e[0];
                acc[1] += e[1];
            }
            CHECK(acc[0] < (1ull << 63));
            CHECK(acc[1] > (1ull << 63));
            fs_fixedpt_decode(&fp, acc, d, 2);
            double exact = (double)ks[j] * bounds[b];
            CHECK_MSG(fabs(d[0] - exact) <= 1e-12 * exact, "K %u B %g: %g vs %g", ks[j], bounds[b],
                      d[0], exact);
            CHECK(d[1] == -d[0]);
        }
    }
}

/* Secure aggregation view: random masks that cancel over the parties leave
 * the decoded sum unchanged, however the partial sums wrap. */
static void test_masks_cancel(void)
{
    enum { K = 7, N = 300 };
    struct fs_fixedpt fp;
    struct fs_err err = {0};
    double x[N];
    uint64_t e[N];
    uint64_t plain[N] = {0};
    uint64_t masked[N] = {0};
    uint64_t masksum[N] = {0};
    double d1[N];
    double d2[N];

    CHECK_OK(fs_fixedpt_init(&fp, 2.5, K, &err), &err);
    for (int p = 0; p < K; p++) {
        for (size_t i = 0; i < N; i++) {
            x[i] = rng_entry(2.5);
        }
        CHECK_OK(fs_fixedpt_encode(&fp, x, e, N, &err), &err);
        for (size_t i = 0; i < N; i++) {
            uint64_t m = p < K - 1 ? rng_u64() : (uint64_t)0 - masksum[i];
            masksum[i] += m;
            plain[i] += e[i];
            masked[i] += e[i] + m;
        }
    }
    fs_fixedpt_decode(&fp, plain, d1, N);
    fs_fixedpt_decode(&fp, masked, d2, N);
    CHECK(memcmp(d1, d2, sizeof d1) == 0);
}

static void test_round_trip_and_noise(void)
{
    struct fs_fixedpt fp;
    struct fs_err err = {0};
    const double x[] = {0.0, -0.0, 1.0, -1.0, 0.123456789, -0.999999999, 1e-20, 0.5};
    uint64_t e[8];
    double d[8];
    int64_t noise[8] = {1, -1, 1000, -1000, 0, INT64_C(1) << 40, -(INT64_C(1) << 40), 7};

    CHECK_OK(fs_fixedpt_init(&fp, 1.0, 10, &err), &err);
    CHECK_OK(fs_fixedpt_encode(&fp, x, e, 8, &err), &err);
    fs_fixedpt_decode(&fp, e, d, 8);
    for (size_t i = 0; i < 8; i++) {
        CHECK_NEAR(d[i], x[i], ldexp(0.5, -fp.frac_bits));
    }
    fs_fixedpt_add_noise(e, noise, 8);
    fs_fixedpt_decode(&fp, e, d, 8);
    for (size_t i = 0; i < 8; i++) {
        double want = x[i] + ldexp((double)noise[i], -fp.frac_bits);
        CHECK_NEAR(d[i], want, ldexp(0.5, -fp.frac_bits) + 1e-16 * fabs(want));
    }
    /* Rounds to nearest: 2^-f * 0.5 + tiny goes up, 0.25 units goes to 0. */
    double h[2] = {ldexp(0.75, -fp.frac_bits), ldexp(0.25, -fp.frac_bits)};
    CHECK_OK(fs_fixedpt_encode(&fp, h, e, 2, &err), &err);
    CHECK(e[0] == 1 && e[1] == 0);
}

static void test_clipped(void)
{
    struct fs_fixedpt fp;
    struct fs_err err = {0};
    const double x[] = {0.5, 3.0, -7.0, INFINITY, -INFINITY, -1.0};
    uint64_t e[6];
    double d[6];
    size_t nclip = 0;

    CHECK_OK(fs_fixedpt_init(&fp, 1.0, 4, &err), &err);
    CHECK_OK(fs_fixedpt_encode_clipped(&fp, x, e, 6, &nclip, &err), &err);
    CHECK(nclip == 4);
    fs_fixedpt_decode(&fp, e, d, 6);
    CHECK(d[0] == 0.5 && d[1] == 1.0 && d[2] == -1.0 && d[3] == 1.0 && d[4] == -1.0 &&
          d[5] == -1.0);
    const double bad[] = {0.0, NAN};
    CHECK(fs_fixedpt_encode_clipped(&fp, bad, e, 2, &nclip, &err) == FS_ERANGE);
    CHECK(strstr(err.msg, "value 1") != NULL);
}

/* Encoding and decoding scale by a multiply when 2^f is a double and by
 * ldexp otherwise: bit-identical to llrint(ldexp(x, f)) / ldexp(s, -f) for
 * bounds that put f at and beyond both ends of the double exponent range
 * (subnormal products included). */
static void test_scaling_matches_ldexp(void)
{
    static const double bounds[] = {1e-300, 0x1p-1000, 0x1p-960, 1e-5,  1.0,  3.7,
                                    1e10,   0x1p960,   0x1p1000, 1e300, 1e308};
    static const unsigned ks[] = {1, 2, 7, 1000};
    size_t bad_enc = 0;
    size_t bad_dec = 0;
    size_t n = 0;

    for (size_t b = 0; b < sizeof bounds / sizeof bounds[0]; b++) {
        for (size_t q = 0; q < sizeof ks / sizeof ks[0]; q++) {
            struct fs_fixedpt fp;
            struct fs_err err = {0};
            CHECK_OK(fs_fixedpt_init(&fp, bounds[b], ks[q], &err), &err);
            for (int i = 0; i < 2000; i++) {
                double x = rng_entry(bounds[b]);
                uint64_t y = 0;
                double back = 0.0;
                int64_t sgn;
                if (i % 5 == 0) {
                    x = ldexp(x, -(int)(rng_u64() % 1100)); /* down to subnormal and 0 */
                }
                CHECK_OK(fs_fixedpt_encode(&fp, &x, &y, 1, &err), &err);
                bad_enc += y != (uint64_t)llrint(ldexp(x, fp.frac_bits));
                fs_fixedpt_decode(&fp, &y, &back, 1);
                sgn = y <= (uint64_t)INT64_MAX ? (int64_t)y : -(int64_t)(~y) - 1;
                bad_dec +=
                    memcmp(&back, &(double){ldexp((double)sgn, -fp.frac_bits)}, sizeof back) != 0;
                n++;
            }
        }
    }
    printf("  scaling: %zu values, %zu encodings and %zu decodings differ from ldexp\n", n, bad_enc,
           bad_dec);
    CHECK(bad_enc == 0);
    CHECK(bad_dec == 0);
}

static void test_rejects(void)
{
    struct fs_fixedpt fp;
    struct fs_err err = {0};
    uint64_t e[4];

    CHECK(fs_fixedpt_init(&fp, 0.0, 3, &err) == FS_EINVAL);
    CHECK(fs_fixedpt_init(&fp, -1.0, 3, &err) == FS_EINVAL);
    CHECK(fs_fixedpt_init(&fp, NAN, 3, &err) == FS_EINVAL);
    CHECK(fs_fixedpt_init(&fp, INFINITY, 3, &err) == FS_EINVAL);
    CHECK(fs_fixedpt_init(&fp, 1.0, 0, &err) == FS_EINVAL);

    CHECK_OK(fs_fixedpt_init(&fp, 2.0, 3, &err), &err);
    double over[4] = {0.0, 2.0, -2.0, nextafter(2.0, 3.0)};
    CHECK(fs_fixedpt_encode(&fp, over, e, 4, &err) == FS_ERANGE);
    CHECK_MSG(strstr(err.msg, "value 3") != NULL, "%s", err.msg);
    double under[2] = {-nextafter(2.0, 3.0), 0};
    CHECK(fs_fixedpt_encode(&fp, under, e, 2, &err) == FS_ERANGE);
    CHECK(strstr(err.msg, "value 0") != NULL);
    double nan[3] = {1.0, 0.5, NAN};
    CHECK(fs_fixedpt_encode(&fp, nan, e, 3, &err) == FS_ERANGE);
    CHECK(strstr(err.msg, "value 2") != NULL);
    double inf[1] = {-INFINITY};
    CHECK(fs_fixedpt_encode(&fp, inf, e, 1, &err) == FS_ERANGE);
    /* Exactly the bound is fine. */
    CHECK_OK(fs_fixedpt_encode(&fp, over, e, 3, &err), &err);
    struct fs_fixedpt zero = {0};
    CHECK(fs_fixedpt_encode(&zero, over, e, 1, &err) == FS_EINVAL);
}

/* The AVX-512 kernels against the scalar loops, bit for bit: random entries
 * of every magnitude, exact halves (round half to even), +-0, the bound, for
 * lengths around the 8-wide step; and the first bad value's index. */
static void test_accelerated_matches_scalar(void)
{
    static const double bounds[] = {1e-300, 1e-5, 1.0, 3.7, 1e10, 1e300};
    static const unsigned ks[] = {1, 10, 1000};
    enum { MAXN = 67 };
    double x[MAXN];
    uint64_t e1[MAXN], e2[MAXN];
    double d1[MAXN], d2[MAXN];
    size_t cases = 0, bad = 0, bad_err = 0;

    printf("  accelerated (AVX-512) path: %s\n", fs_fixedpt_accelerated() ? "yes" : "no");
    for (size_t b = 0; b < sizeof bounds / sizeof bounds[0]; b++) {
        for (size_t q = 0; q < sizeof ks / sizeof ks[0]; q++) {
            struct fs_fixedpt fp;
            struct fs_err err = {0};
            CHECK_OK(fs_fixedpt_init(&fp, bounds[b], ks[q], &err), &err);
            for (size_t n = 0; n <= MAXN; n++) {
                for (size_t i = 0; i < n; i++) {
                    switch (rng_u64() % 6) {
                    case 0: /* an exact half of the grid: k + 1/2 units */
                        x[i] = ldexp((double)((int64_t)(rng_u64() % 2001) - 1000) + 0.5,
                                     -fp.frac_bits);
                        if (!(fabs(x[i]) <= fp.bound)) {
                            x[i] = 0.0;
                        }
                        break;
                    case 1:
                        x[i] = (rng_u64() & 1) ? -0.0 : 0.0;
                        break;
                    default:
                        x[i] = rng_entry(bounds[b]);
                    }
                }
                fs_fixedpt_force_generic(1);
                CHECK_OK(fs_fixedpt_encode(&fp, x, e1, n, &err), &err);
                fs_fixedpt_force_generic(0);
                CHECK_OK(fs_fixedpt_encode(&fp, x, e2, n, &err), &err);
                bad += n > 0 && memcmp(e1, e2, n * sizeof *e1) != 0;
                /* decode sums of up to K encodings (here: the encodings and their doubles) */
                for (size_t i = 0; i < n; i++) {
                    e1[i] += e1[i] * (ks[q] > 1);
                }
                fs_fixedpt_force_generic(1);
                fs_fixedpt_decode(&fp, e1, d1, n);
                fs_fixedpt_force_generic(0);
                fs_fixedpt_decode(&fp, e1, d2, n);
                bad += n > 0 && memcmp(d1, d2, n * sizeof *d1) != 0;
                cases++;
                /* one bad value at position p: both name the same index */
                if (n > 0) {
                    static const double worse[] = {NAN, INFINITY, -INFINITY};
                    size_t p = (size_t)(rng_u64() % n);
                    char m1[sizeof err.msg];
                    int r1, r2;
                    double keep = x[p];
                    x[p] = rng_u64() % 4 == 0
                               ? worse[rng_u64() % 3]
                               : (rng_u64() & 1 ? -1 : 1) * nextafter(fp.bound, INFINITY);
                    fs_fixedpt_force_generic(1);
                    r1 = fs_fixedpt_encode(&fp, x, e1, n, &err);
                    snprintf(m1, sizeof m1, "%s", err.msg);
                    fs_fixedpt_force_generic(0);
                    r2 = fs_fixedpt_encode(&fp, x, e2, n, &err);
                    bad_err += r1 != FS_ERANGE || r2 != FS_ERANGE || strcmp(m1, err.msg) != 0;
                    x[p] = keep;
                }
            }
        }
    }
    printf("  %zu vectors: %zu differ between the paths, %zu errors differ\n", cases, bad, bad_err);
    CHECK(bad == 0);
    CHECK(bad_err == 0);
}

int main(void)
{
    RUN(test_frac_bits);
    RUN(test_sums);
    RUN(test_extremes_no_wrap);
    RUN(test_masks_cancel);
    RUN(test_round_trip_and_noise);
    RUN(test_clipped);
    RUN(test_scaling_matches_ldexp);
    RUN(test_rejects);
    RUN(test_accelerated_matches_scalar);
    return TEST_END("test_fixedpt");
}
