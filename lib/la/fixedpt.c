/* Fixed point in Z_2^64. With f chosen so that K B 2^f <= 2^62, one encoding
 * is round(x 2^f) with |round(x 2^f)| <= 2^62/K + 1/2, so the sum of K of
 * them stays below 2^62 + K/2 < 2^63 in magnitude and the ring sum is the
 * exact integer sum. The decoded sum differs from the true sum of the
 * doubles by at most K 2^(-f-1) (rounding each summand) plus one rounding
 * of the result to double (2^-53 relative); with f maximal that is below
 * K^2 B 2^-62 + 2^-53 |sum|.
 *
 * Scaling by 2^f is ldexp, exact for every double (f may be far outside
 * [-63, 63]: tiny bounds give f > 1000, huge ones f < -900). */
#include "fixedpt.h"

#include "../core/cpu.h"

#include <math.h>

__extension__ typedef unsigned __int128 u128;

static int bitlen128(u128 x)
{
    uint64_t hi = (uint64_t)(x >> 64);
    uint64_t lo = (uint64_t)x;

    if (hi != 0) {
        return 128 - __builtin_clzll(hi);
    }
    if (lo != 0) {
        return 64 - __builtin_clzll(lo);
    }
    return 0;
}

int fs_fixedpt_init(struct fs_fixedpt *fp, double bound, unsigned summands, struct fs_err *err)
{
    int e = 0;

    if (fp == NULL) {
        return fs_err_set(err, FS_EINVAL, "fs_fixedpt_init: fp is NULL");
    }
    if (!isfinite(bound) || bound <= 0.0) {
        return fs_err_set(err, FS_EINVAL, "fs_fixedpt_init: bound must be finite and > 0 (got %g)",
                          bound);
    }
    if (summands == 0) {
        return fs_err_set(err, FS_EINVAL, "fs_fixedpt_init: summands must be > 0");
    }
    /* bound = mb 2^eb exactly, mb an integer < 2^53; P = K mb < 2^85 exact.
     * K B 2^f <= 2^62  <=>  P <= 2^(62 - eb - f); the least j with P <= 2^j
     * is bitlen(P), minus one when P is a power of two. */
    double m = frexp(bound, &e);
    uint64_t mb = (uint64_t)ldexp(m, 53);
    int eb = e - 53;
    u128 p = (u128)summands * mb;
    int j = bitlen128(p);
    if ((p & (p - 1)) == 0) {
        j--;
    }
    fp->bound = bound;
    fp->summands = summands;
    fp->frac_bits = 62 - eb - j;
    return 0;
}

/* x 2^f, exactly as ldexp(x, f): when 2^f is a double (f in [-1074, 1023])
 * the product is one correctly rounded IEEE multiplication of the same exact
 * value (exact unless the result is subnormal, where both round alike), and
 * a multiply is several times cheaper than a libm call per element. */
struct scaler {
    double c;
    int f;
    int mul;
};

static struct scaler scaler_of(int f)
{
    struct scaler sc;
    sc.f = f;
    sc.mul = f >= -1074 && f <= 1023;
    sc.c = sc.mul ? ldexp(1.0, f) : 0.0;
    return sc;
}

static inline double scale(const struct scaler *sc, double x)
{
    return sc->mul ? x * sc->c : ldexp(x, sc->f);
}

/* AVX-512 (F + DQ) kernels: 8 values per instruction. VCVTPD2QQ rounds in
 * the current (MXCSR) rounding mode, as llrint does with the C rounding
 * mode, and VCVTQQ2PD as the C conversion from int64_t does, so the results
 * are bit-identical to the scalar loops (test_fixedpt compares the two
 * paths). Used only when 2^f is a double (the multiply), chosen from CPUID at
 * run time; valgrind reports no AVX-512, so it checks the scalar code. */
static int g_force_generic = 0;

void fs_fixedpt_force_generic(int on)
{
    g_force_generic = on != 0;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define FX_TARGET __attribute__((target("avx512f,avx512dq")))

/* out[i] = round(x[i] * c) while every |x[i]| <= bound (false for NaN and
 * +-inf: the bound is finite); returns how many were encoded, less than n
 * at the first group of 8 holding a value out of range (out past the
 * returned count then unspecified). */
FX_TARGET static size_t encode_avx512(const double *x, uint64_t *out, size_t n, double c,
                                      double bound)
{
    const __m512d vb = _mm512_set1_pd(bound);
    const __m512d vc = _mm512_set1_pd(c);
    size_t i = 0;

    for (; i < n; i += 8) {
        __mmask8 live = n - i >= 8 ? (__mmask8)0xff : (__mmask8)((1u << (n - i)) - 1u);
        __m512d v = _mm512_maskz_loadu_pd(live, x + i);
        __m512d a = _mm512_abs_pd(v);
        if (_mm512_mask_cmp_pd_mask(live, a, vb, _CMP_LE_OQ) != live) {
            return i;
        }
        _mm512_mask_storeu_epi64(out + i, live, _mm512_cvtpd_epi64(_mm512_mul_pd(v, vc)));
    }
    return n;
}

FX_TARGET static void decode_avx512(const uint64_t *in, double *out, size_t n, double c)
{
    const __m512d vc = _mm512_set1_pd(c);

    for (size_t i = 0; i < n; i += 8) {
        __mmask8 live = n - i >= 8 ? (__mmask8)0xff : (__mmask8)((1u << (n - i)) - 1u);
        __m512i v = _mm512_maskz_loadu_epi64(live, in + i);
        _mm512_mask_storeu_pd(out + i, live, _mm512_mul_pd(_mm512_cvtepi64_pd(v), vc));
    }
}

static int use_avx512(const struct scaler *sc)
{
    return sc->mul && !g_force_generic && fs_cpu_has(FS_CPU_AVX512DQ);
}
#else
static int use_avx512(const struct scaler *sc)
{
    (void)sc;
    return 0;
}
#endif

int fs_fixedpt_accelerated(void)
{
    struct scaler sc = scaler_of(0);

    return use_avx512(&sc);
}

static int check_fp(const char *fn, const struct fs_fixedpt *fp, struct fs_err *err)
{
    if (fp == NULL || fp->summands == 0 || !isfinite(fp->bound) || fp->bound <= 0.0) {
        return fs_err_set(err, FS_EINVAL, "%s: fixed-point parameters not initialised", fn);
    }
    return 0;
}

int fs_fixedpt_encode(const struct fs_fixedpt *fp, const double *x, uint64_t *out, size_t n,
                      struct fs_err *err)
{
    static const char fn[] = "fs_fixedpt_encode";
    int rc = check_fp(fn, fp, err);

    if (rc != 0) {
        return rc;
    }
    if (n > 0 && (x == NULL || out == NULL)) {
        return fs_err_set(err, FS_EINVAL, "%s: NULL buffer", fn);
    }
#if defined(__x86_64__) && defined(__GNUC__)
    {
        struct scaler sc = scaler_of(fp->frac_bits);
        if (use_avx512(&sc) && encode_avx512(x, out, n, sc.c, fp->bound) == n) {
            return 0;
        }
        /* a value out of range (or no AVX-512): the scalar loops name it */
    }
#endif
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(x[i])) {
            return fs_err_set(err, FS_ERANGE, "%s: value %zu is not finite", fn, i);
        }
        if (fabs(x[i]) > fp->bound) {
            return fs_err_set(err, FS_ERANGE, "%s: value %zu exceeds the bound %g", fn, i,
                              fp->bound);
        }
    }
    {
        struct scaler sc = scaler_of(fp->frac_bits);
        for (size_t i = 0; i < n; i++) {
            long long r = llrint(scale(&sc, x[i]));
            out[i] = (uint64_t)r;
        }
    }
    return 0;
}

int fs_fixedpt_encode_clipped(const struct fs_fixedpt *fp, const double *x, uint64_t *out, size_t n,
                              size_t *clipped, struct fs_err *err)
{
    static const char fn[] = "fs_fixedpt_encode_clipped";
    int rc = check_fp(fn, fp, err);
    size_t nclip = 0;

    if (rc != 0) {
        return rc;
    }
    if (n > 0 && (x == NULL || out == NULL)) {
        return fs_err_set(err, FS_EINVAL, "%s: NULL buffer", fn);
    }
    for (size_t i = 0; i < n; i++) {
        if (isnan(x[i])) {
            return fs_err_set(err, FS_ERANGE, "%s: value %zu is NaN", fn, i);
        }
    }
    struct scaler sc = scaler_of(fp->frac_bits);
    for (size_t i = 0; i < n; i++) {
        double v = x[i];
        if (v > fp->bound) {
            v = fp->bound;
            nclip++;
        } else if (v < -fp->bound) {
            v = -fp->bound;
            nclip++;
        }
        out[i] = (uint64_t)llrint(scale(&sc, v));
    }
    if (clipped != NULL) {
        *clipped = nclip;
    }
    return 0;
}

void fs_fixedpt_decode(const struct fs_fixedpt *fp, const uint64_t *in, double *out, size_t n)
{
    struct scaler sc = scaler_of(-fp->frac_bits);

#if defined(__x86_64__) && defined(__GNUC__)
    if (use_avx512(&sc)) {
        decode_avx512(in, out, n, sc.c);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++) {
        /* Two's complement without relying on implementation-defined
         * unsigned-to-signed conversion. */
        int64_t s = in[i] <= (uint64_t)INT64_MAX ? (int64_t)in[i] : -(int64_t)(~in[i]) - 1;
        out[i] = scale(&sc, (double)s);
    }
}

void fs_fixedpt_add_noise(uint64_t *v, const int64_t *noise, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        v[i] += (uint64_t)noise[i];
    }
}
