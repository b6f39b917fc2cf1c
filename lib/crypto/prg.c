#include "prg.h"

#include "../core/cpu.h"

#include <math.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

/* Words produced per EVP call when adding a stream to a vector: 8 KiB keeps
 * the scratch buffer in L1 while amortising the call overhead (measured:
 * 32 KiB chunks drop to ~4.3 GB/s on 64 MiB vectors, 8 KiB give ~5.6). */
#define PRG_CHUNK_WORDS 1024

struct fs_prg {
    EVP_CIPHER_CTX *ctx;
    uint8_t key[32]; /* kept for fs_prg_seek; wiped on free */
    uint8_t iv[16];
    uint64_t scratch[PRG_CHUNK_WORDS];
};

int fs_prg_new(fs_prg **out, const uint8_t key[32], const uint8_t *iv, struct fs_err *err)
{
    static const uint8_t zero_iv[16] = {0};
    fs_prg *prg = NULL;

    *out = NULL;
    prg = calloc(1, sizeof *prg);
    if (prg == NULL) {
        return fs_err_set(err, FS_ENOMEM, "prg: out of memory");
    }
    memcpy(prg->key, key, sizeof prg->key);
    memcpy(prg->iv, iv != NULL ? iv : zero_iv, sizeof prg->iv);
    prg->ctx = EVP_CIPHER_CTX_new();
    if (prg->ctx == NULL || EVP_EncryptInit_ex(prg->ctx, EVP_aes_256_ctr(), NULL, key,
                                               iv != NULL ? iv : zero_iv) != 1) {
        fs_prg_free(prg);
        return fs_err_set(err, FS_ECRYPTO, "prg: AES-256-CTR init failed");
    }
    *out = prg;
    return 0;
}

int fs_prg_bytes(fs_prg *prg, void *buf, size_t n, struct fs_err *err)
{
    /* The keystream is AES-CTR of zeros: encrypt a constant zero block out of
     * place, which saves a pass of memset over large outputs. */
    static const unsigned char zeros[8192];
    unsigned char *p = buf;

    while (n > 0) {
        int chunk = n > sizeof zeros ? (int)sizeof zeros : (int)n;
        int outl = 0;
        if (EVP_EncryptUpdate(prg->ctx, p, &outl, zeros, chunk) != 1 || outl != chunk) {
            return fs_err_set(err, FS_ECRYPTO, "prg: AES-256-CTR update failed");
        }
        p += chunk;
        n -= (size_t)chunk;
    }
    return 0;
}

int fs_prg_u64(fs_prg *prg, uint64_t *out, size_t n, struct fs_err *err)
{
    int rc = fs_prg_bytes(prg, out, n * sizeof *out, err);

#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    for (size_t i = 0; rc == 0 && i < n; i++) {
        out[i] = __builtin_bswap64(out[i]);
    }
#endif
    return rc;
}

static int prg_combine(fs_prg *prg, uint64_t *vec, size_t n, int sign, struct fs_err *err)
{
    while (n > 0) {
        size_t m = n < PRG_CHUNK_WORDS ? n : PRG_CHUNK_WORDS;
        int rc = fs_prg_u64(prg, prg->scratch, m, err);
        if (rc != 0) {
            return rc;
        }
        if (sign > 0) {
            for (size_t i = 0; i < m; i++) {
                vec[i] += prg->scratch[i];
            }
        } else {
            for (size_t i = 0; i < m; i++) {
                vec[i] -= prg->scratch[i];
            }
        }
        vec += m;
        n -= m;
    }
    return 0;
}

int fs_prg_add_u64(fs_prg *prg, uint64_t *vec, size_t n, struct fs_err *err)
{
    return prg_combine(prg, vec, n, 1, err);
}

int fs_prg_sub_u64(fs_prg *prg, uint64_t *vec, size_t n, struct fs_err *err)
{
    return prg_combine(prg, vec, n, -1, err);
}

int fs_prg_uniform(fs_prg *prg, double *out, struct fs_err *err)
{
    uint64_t x;
    int rc = fs_prg_u64(prg, &x, 1, err);

    if (rc != 0) {
        return rc;
    }
    *out = (double)(x >> 11) * 0x1.0p-53;
    return 0;
}

/* Box-Muller: z[2q] = r cos(2 pi u2), z[2q + 1] = r sin(2 pi u2) with
 * r = sqrt(-2 log u1), u1 in (0, 1] (so the logarithm is finite) and u2 in
 * [0, 1) from the top 53 bits of words w[2q] and w[2q + 1]. */
static void box_muller_scalar(const uint64_t *w, size_t pairs, double *z)
{
    for (size_t q = 0; q < pairs; q++) {
        double u1 = (double)((w[2 * q] >> 11) + 1) * 0x1.0p-53;
        double u2 = (double)(w[2 * q + 1] >> 11) * 0x1.0p-53;
        double r = sqrt(-2.0 * log(u1));

        z[2 * q] = r * cos(2.0 * M_PI * u2);
        z[2 * q + 1] = r * sin(2.0 * M_PI * u2);
    }
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(FS_NO_LIBMVEC)
#include <immintrin.h>

/* glibc's libmvec, AVX2 variants (x86-64 vector function ABI: 4 doubles in
 * a ymm register); within 4 ulp of the scalar functions. */
__attribute__((target("avx2,fma"))) __m256d _ZGVdN4v_log(__m256d x);
__attribute__((target("avx2,fma"))) __m256d _ZGVdN4v_sin(__m256d x);
__attribute__((target("avx2,fma"))) __m256d _ZGVdN4v_cos(__m256d x);

/* The same formula four pairs at a time (about 3x faster than the scalar
 * libm calls). Every pair goes through the vector functions, the last group
 * padded, so a value depends only on its two words, not on how the stream
 * was split into calls. Results differ from box_muller_scalar's by a few
 * ulp: masks from one seed agree to rounding level between CPUs with and
 * without AVX2 (as between BLAS kernels, haar.h). */
__attribute__((target("avx2,fma"))) static void box_muller_avx2(const uint64_t *w, size_t pairs,
                                                                double *z)
{
    const __m256d minus2 = _mm256_set1_pd(-2.0);
    const __m256d twopi = _mm256_set1_pd(2.0 * M_PI);

    for (size_t q = 0; q < pairs; q += 4) {
        double a[4], b[4], c[4], s[4];
        size_t m = pairs - q < 4 ? pairs - q : 4;

        for (size_t k = 0; k < 4; k++) {
            size_t p = q + (k < m ? k : 0);
            a[k] = (double)((w[2 * p] >> 11) + 1) * 0x1.0p-53;
            b[k] = (double)(w[2 * p + 1] >> 11) * 0x1.0p-53;
        }
        {
            __m256d r = _mm256_sqrt_pd(_mm256_mul_pd(minus2, _ZGVdN4v_log(_mm256_loadu_pd(a))));
            __m256d t = _mm256_mul_pd(twopi, _mm256_loadu_pd(b));

            _mm256_storeu_pd(c, _mm256_mul_pd(r, _ZGVdN4v_cos(t)));
            _mm256_storeu_pd(s, _mm256_mul_pd(r, _ZGVdN4v_sin(t)));
        }
        for (size_t k = 0; k < m; k++) {
            z[2 * (q + k)] = c[k];
            z[2 * (q + k) + 1] = s[k];
        }
    }
}

static void box_muller(const uint64_t *w, size_t pairs, double *z)
{
    if (fs_cpu_has(FS_CPU_AVX2_FMA)) {
        box_muller_avx2(w, pairs, z);
    } else {
        box_muller_scalar(w, pairs, z);
    }
}
#else
static void box_muller(const uint64_t *w, size_t pairs, double *z)
{
    box_muller_scalar(w, pairs, z);
}
#endif

int fs_prg_normal(fs_prg *prg, double *out, size_t n, struct fs_err *err)
{
    enum { PAIRS = 256 };
    uint64_t w[2 * PAIRS];
    double z[2 * PAIRS];
    size_t i = 0;

    /* Draw the stream in batches (same words, same order as one pair at a
     * time) to amortise the EVP call. */
    while (i < n) {
        size_t pairs = (n - i + 1) / 2;
        size_t take;
        int rc;

        if (pairs > PAIRS) {
            pairs = PAIRS;
        }
        rc = fs_prg_u64(prg, w, 2 * pairs, err);
        if (rc != 0) {
            return rc;
        }
        box_muller(w, pairs, z);
        /* an odd n drops the last pair's sine, as one pair at a time would */
        take = n - i < 2 * pairs ? n - i : 2 * pairs;
        memcpy(out + i, z, take * sizeof *z);
        i += take;
    }
    return 0;
}

int fs_prg_below(fs_prg *prg, uint64_t bound, uint64_t *out, struct fs_err *err)
{
    uint64_t x;
    uint64_t limit;

    if (bound == 0) {
        return fs_err_set(err, FS_EINVAL, "prg: bound is 0");
    }
    limit = UINT64_MAX - (UINT64_MAX % bound);
    do {
        int rc = fs_prg_u64(prg, &x, 1, err);
        if (rc != 0) {
            return rc;
        }
    } while (x >= limit);
    *out = x % bound;
    return 0;
}

int fs_prg_seek(fs_prg *prg, uint64_t offset, struct fs_err *err)
{
    uint8_t iv[16];
    uint8_t skip[16];
    uint64_t blocks = offset / 16;
    unsigned carry = 0;

    /* The CTR counter is the whole 16-byte block, big-endian: add `blocks`. */
    memcpy(iv, prg->iv, sizeof iv);
    for (int i = 15; i >= 0; i--) {
        unsigned sum = (unsigned)iv[i] + (unsigned)(blocks & 0xff) + carry;
        iv[i] = (uint8_t)sum;
        carry = sum >> 8;
        blocks >>= 8;
    }
    if (EVP_EncryptInit_ex(prg->ctx, NULL, NULL, prg->key, iv) != 1) {
        return fs_err_set(err, FS_ECRYPTO, "prg: AES-256-CTR re-init failed");
    }
    return fs_prg_bytes(prg, skip, (size_t)(offset % 16), err);
}

void fs_prg_free(fs_prg *prg)
{
    if (prg == NULL) {
        return;
    }
    EVP_CIPHER_CTX_free(prg->ctx);
    OPENSSL_cleanse(prg->key, sizeof prg->key);
    OPENSSL_cleanse(prg->scratch, sizeof prg->scratch);
    free(prg);
}
