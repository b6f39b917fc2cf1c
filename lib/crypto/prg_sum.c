/* Sums of PRG streams (fs_prg_sum, prg.h): the SecAgg masks and unmasking.
 *
 * Two implementations with bit-identical results:
 *   - generic: each stream through OpenSSL's EVP AES-256-CTR into an L1
 *     buffer, added to an L1 accumulator, the accumulator then added to the
 *     vector (one pass over the vector however many streams);
 *   - x86-64 with VAES and AVX-512 (F, BW): the keystream of 4 counter blocks
 *     per instruction, added straight into the vector piece, which stays in
 *     L1 while every stream goes over it. OpenSSL 3.0's CTR mode uses 128-bit
 *     AES-NI only, so this halves the AES time on CPUs whose AES units take
 *     256- or 512-bit operands, and the keystream is never stored.
 * Which one runs is decided once from CPUID (and the OS's AVX-512 state
 * support, which GCC's __builtin_cpu_supports checks); valgrind reports no
 * AVX-512, so it runs the generic path. Unit tests compare both against
 * fs_prg_u64.
 */
#include "prg.h"

#include "../core/cpu.h"

#include <stdlib.h>
#include <string.h>

#include "ct.h"

/* Words per piece of the vector: 8 KiB, the piece and a stream's block of
 * keystream stay in L1. */
#define SUM_PIECE_WORDS 1024

static int g_force_generic = 0;

void fs_prg_sum_force_generic(int on)
{
    g_force_generic = on != 0;
}

static int sum_generic(const struct fs_prg_term *t, size_t nt, uint64_t word0, uint64_t *v,
                       size_t m, struct fs_err *err)
{
    uint64_t acc[SUM_PIECE_WORDS];
    uint64_t buf[SUM_PIECE_WORDS];
    fs_prg **p = NULL;
    int rc = 0;

    p = calloc(nt, sizeof *p);
    if (p == NULL) {
        return fs_err_set(err, FS_ENOMEM, "prg: out of memory for %zu streams", nt);
    }
    for (size_t s = 0; rc == 0 && s < nt; s++) {
        rc = fs_prg_new(&p[s], t[s].key, NULL, err);
        if (rc == 0 && word0 != 0) {
            rc = fs_prg_seek(p[s], word0 * 8, err);
        }
    }
    for (size_t pos = 0; rc == 0 && pos < m; pos += SUM_PIECE_WORDS) {
        size_t w = m - pos < SUM_PIECE_WORDS ? m - pos : SUM_PIECE_WORDS;

        memset(acc, 0, w * sizeof *acc);
        for (size_t s = 0; rc == 0 && s < nt; s++) {
            rc = fs_prg_u64(p[s], buf, w, err);
            if (t[s].sign > 0) {
                for (size_t i = 0; i < w; i++) {
                    acc[i] += buf[i];
                }
            } else {
                for (size_t i = 0; i < w; i++) {
                    acc[i] -= buf[i];
                }
            }
        }
        for (size_t i = 0; rc == 0 && i < w; i++) {
            v[pos + i] += acc[i];
        }
    }
    for (size_t s = 0; s < nt; s++) {
        fs_prg_free(p[s]);
    }
    free(p);
    fs_wipe(acc, sizeof acc);
    fs_wipe(buf, sizeof buf);
    return rc;
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(FS_NO_VAES)
#include <immintrin.h>

#define VAES_TARGET __attribute__((target("aes,avx2,avx512f,avx512bw,vaes")))

/* AES-256 key expansion (FIPS-197 §5.2, Nk = 8): round key 2j from round key
 * 2j - 2 and SubWord(RotWord(last word of 2j - 1)) ^ Rcon (the shuffle 0xff
 * of AESKEYGENASSIST); round key 2j + 1 from 2j - 1 and SubWord(last word of
 * 2j) (shuffle 0xaa, no rotation, no Rcon). */
VAES_TARGET static __m128i expand_step(__m128i prev, __m128i t)
{
    __m128i k = prev;

    /* each word of the new key is the previous key's word xor the new word before it */
    k = _mm_xor_si128(k, _mm_slli_si128(k, 4));
    k = _mm_xor_si128(k, _mm_slli_si128(k, 4));
    k = _mm_xor_si128(k, _mm_slli_si128(k, 4));
    return _mm_xor_si128(k, t);
}

VAES_TARGET static __m128i expand_even(__m128i prev, __m128i assist)
{
    return expand_step(prev, _mm_shuffle_epi32(assist, 0xff));
}

VAES_TARGET static __m128i expand_odd(__m128i prev, __m128i even)
{
    return expand_step(prev, _mm_shuffle_epi32(_mm_aeskeygenassist_si128(even, 0), 0xaa));
}

VAES_TARGET static void expand_key(const uint8_t key[32], __m128i rk[15])
{
    rk[0] = _mm_loadu_si128((const __m128i *)(const void *)key);
    rk[1] = _mm_loadu_si128((const __m128i *)(const void *)(key + 16));
    /* the round constant is an immediate operand: one line per step */
    rk[2] = expand_even(rk[0], _mm_aeskeygenassist_si128(rk[1], 0x01));
    rk[3] = expand_odd(rk[1], rk[2]);
    rk[4] = expand_even(rk[2], _mm_aeskeygenassist_si128(rk[3], 0x02));
    rk[5] = expand_odd(rk[3], rk[4]);
    rk[6] = expand_even(rk[4], _mm_aeskeygenassist_si128(rk[5], 0x04));
    rk[7] = expand_odd(rk[5], rk[6]);
    rk[8] = expand_even(rk[6], _mm_aeskeygenassist_si128(rk[7], 0x08));
    rk[9] = expand_odd(rk[7], rk[8]);
    rk[10] = expand_even(rk[8], _mm_aeskeygenassist_si128(rk[9], 0x10));
    rk[11] = expand_odd(rk[9], rk[10]);
    rk[12] = expand_even(rk[10], _mm_aeskeygenassist_si128(rk[11], 0x20));
    rk[13] = expand_odd(rk[11], rk[12]);
    rk[14] = expand_even(rk[12], _mm_aeskeygenassist_si128(rk[13], 0x40));
}

/* Keystream block b (zero IV: the counter block is b as a 128-bit big-endian
 * number) as two little-endian words. */
VAES_TARGET static void block1(const __m128i rk[15], uint64_t b, uint64_t out[2])
{
    __m128i x = _mm_set_epi64x((long long)__builtin_bswap64(b), 0);

    x = _mm_xor_si128(x, rk[0]);
    for (int r = 1; r < 14; r++) {
        x = _mm_aesenc_si128(x, rk[r]);
    }
    x = _mm_aesenclast_si128(x, rk[14]);
    _mm_storeu_si128((__m128i *)(void *)out, x);
}

/* Four rounds keys broadcast to the four 128-bit lanes. */
struct zkeys {
    __m512i k[15];
};

#define ZROUND(i)                                                                                  \
    do {                                                                                           \
        a = _mm512_aesenc_epi128(a, z->k[i]);                                                      \
        b = _mm512_aesenc_epi128(b, z->k[i]);                                                      \
        c = _mm512_aesenc_epi128(c, z->k[i]);                                                      \
        d = _mm512_aesenc_epi128(d, z->k[i]);                                                      \
    } while (0)

/* v[0 .. 8 q) += sign * keystream words of blocks b0 .. b0 + 4 q. */
VAES_TARGET static void blocks_zmm(const struct zkeys *z, uint64_t b0, uint64_t *v, size_t q,
                                   int sign)
{
    /* byte order of each 128-bit lane's high word reversed: counters are
     * kept native in the high words (the low words are the IV's zeros) */
    const __m512i swap =
        _mm512_broadcast_i32x4(_mm_set_epi8(8, 9, 10, 11, 12, 13, 14, 15, 7, 6, 5, 4, 3, 2, 1, 0));
    const __m512i four = _mm512_set_epi64(4, 0, 4, 0, 4, 0, 4, 0);
    __m512i ctr = _mm512_set_epi64((long long)(b0 + 3), 0, (long long)(b0 + 2), 0,
                                   (long long)(b0 + 1), 0, (long long)b0, 0);
    size_t i = 0;

    for (; i + 4 <= q; i += 4) {
        __m512i a = _mm512_shuffle_epi8(ctr, swap);
        __m512i b = _mm512_shuffle_epi8(_mm512_add_epi64(ctr, four), swap);
        __m512i c = _mm512_shuffle_epi8(_mm512_add_epi64(ctr, _mm512_add_epi64(four, four)), swap);
        __m512i d = _mm512_shuffle_epi8(
            _mm512_add_epi64(ctr, _mm512_add_epi64(four, _mm512_add_epi64(four, four))), swap);
        uint64_t *p = v + 8 * i;

        ctr = _mm512_add_epi64(ctr, _mm512_slli_epi64(four, 2));
        a = _mm512_xor_si512(a, z->k[0]);
        b = _mm512_xor_si512(b, z->k[0]);
        c = _mm512_xor_si512(c, z->k[0]);
        d = _mm512_xor_si512(d, z->k[0]);
        ZROUND(1);
        ZROUND(2);
        ZROUND(3);
        ZROUND(4);
        ZROUND(5);
        ZROUND(6);
        ZROUND(7);
        ZROUND(8);
        ZROUND(9);
        ZROUND(10);
        ZROUND(11);
        ZROUND(12);
        ZROUND(13);
        a = _mm512_aesenclast_epi128(a, z->k[14]);
        b = _mm512_aesenclast_epi128(b, z->k[14]);
        c = _mm512_aesenclast_epi128(c, z->k[14]);
        d = _mm512_aesenclast_epi128(d, z->k[14]);
        if (sign > 0) {
            _mm512_storeu_si512(p, _mm512_add_epi64(_mm512_loadu_si512(p), a));
            _mm512_storeu_si512(p + 8, _mm512_add_epi64(_mm512_loadu_si512(p + 8), b));
            _mm512_storeu_si512(p + 16, _mm512_add_epi64(_mm512_loadu_si512(p + 16), c));
            _mm512_storeu_si512(p + 24, _mm512_add_epi64(_mm512_loadu_si512(p + 24), d));
        } else {
            _mm512_storeu_si512(p, _mm512_sub_epi64(_mm512_loadu_si512(p), a));
            _mm512_storeu_si512(p + 8, _mm512_sub_epi64(_mm512_loadu_si512(p + 8), b));
            _mm512_storeu_si512(p + 16, _mm512_sub_epi64(_mm512_loadu_si512(p + 16), c));
            _mm512_storeu_si512(p + 24, _mm512_sub_epi64(_mm512_loadu_si512(p + 24), d));
        }
    }
    for (; i < q; i++) {
        __m512i a = _mm512_shuffle_epi8(ctr, swap);
        uint64_t *p = v + 8 * i;

        ctr = _mm512_add_epi64(ctr, four);
        a = _mm512_xor_si512(a, z->k[0]);
        for (int r = 1; r < 14; r++) {
            a = _mm512_aesenc_epi128(a, z->k[r]);
        }
        a = _mm512_aesenclast_epi128(a, z->k[14]);
        _mm512_storeu_si512(p, sign > 0 ? _mm512_add_epi64(_mm512_loadu_si512(p), a)
                                        : _mm512_sub_epi64(_mm512_loadu_si512(p), a));
    }
}

/* v[0 .. m) += sign * stream words word0 .. word0 + m. */
VAES_TARGET static void words_one(const __m128i rk[15], const struct zkeys *z, uint64_t word0,
                                  uint64_t *v, size_t m, int sign)
{
    uint64_t ks[2];
    size_t i = 0;
    size_t q;

    if ((word0 & 1) != 0 && m > 0) {
        block1(rk, word0 >> 1, ks);
        v[0] = sign > 0 ? v[0] + ks[1] : v[0] - ks[1];
        i = 1;
    }
    q = (m - i) / 8;
    blocks_zmm(z, (word0 + i) >> 1, v + i, q, sign);
    i += 8 * q;
    while (i < m) {
        block1(rk, (word0 + i) >> 1, ks);
        for (int h = 0; h < 2 && i < m; h++, i++) {
            v[i] = sign > 0 ? v[i] + ks[h] : v[i] - ks[h];
        }
    }
    fs_wipe(ks, sizeof ks);
}

VAES_TARGET static int sum_vaes(const struct fs_prg_term *t, size_t nt, uint64_t word0, uint64_t *v,
                                size_t m, struct fs_err *err)
{
    __m128i *rk = NULL;
    struct zkeys *z = NULL;
    int rc = 0;

    /* C11: the size a multiple of the alignment (15 keys of 16 bytes, 64 per zmm) */
    rk = aligned_alloc(64, (nt * 15 * sizeof *rk + 63) & ~(size_t)63);
    z = aligned_alloc(64, sizeof *z);
    if (rk == NULL || z == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "prg: out of memory for %zu streams", nt);
        goto out;
    }
    for (size_t s = 0; s < nt; s++) {
        expand_key(t[s].key, rk + 15 * s);
    }
    for (size_t pos = 0; pos < m; pos += SUM_PIECE_WORDS) {
        size_t w = m - pos < SUM_PIECE_WORDS ? m - pos : SUM_PIECE_WORDS;

        for (size_t s = 0; s < nt; s++) {
            for (int r = 0; r < 15; r++) {
                z->k[r] = _mm512_broadcast_i32x4(rk[15 * s + (size_t)r]);
            }
            words_one(rk + 15 * s, z, word0 + pos, v + pos, w, t[s].sign);
        }
    }
out:
    if (rk != NULL) {
        fs_wipe(rk, nt * 15 * sizeof *rk);
    }
    if (z != NULL) {
        fs_wipe(z, sizeof *z);
    }
    free(rk);
    free(z);
    return rc;
}

int fs_prg_sum_accelerated(void)
{
    return !g_force_generic && fs_cpu_has(FS_CPU_VAES512);
}
#else
int fs_prg_sum_accelerated(void)
{
    return 0;
}
#endif

int fs_prg_sum(const struct fs_prg_term *t, size_t nt, uint64_t word0, uint64_t *v, size_t m,
               struct fs_err *err)
{
    if (nt == 0 || m == 0) {
        return 0;
    }
    if (t == NULL || v == NULL) {
        return fs_err_set(err, FS_EINVAL, "prg: NULL argument");
    }
    if (nt > ((size_t)1 << 20)) {
        return fs_err_set(err, FS_EINVAL, "prg: %zu streams (at most 2^20)", nt);
    }
    if (word0 > (UINT64_MAX >> 4) || m > (UINT64_MAX >> 4) - word0) {
        /* keeps 8 * word offsets and block counters in range */
        return fs_err_set(err, FS_ERANGE, "prg: words %llu + %zu out of range",
                          (unsigned long long)word0, m);
    }
#if defined(__x86_64__) && defined(__GNUC__) && !defined(FS_NO_VAES)
    if (fs_prg_sum_accelerated()) {
        return sum_vaes(t, nt, word0, v, m, err);
    }
#endif
    return sum_generic(t, nt, word0, v, m, err);
}
