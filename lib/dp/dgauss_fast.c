/* Exact discrete Gaussian sampling at about 90 million samples a second.
 *
 * Target: P(x) proportional to exp(-x^2 / (2 sigma^2)) on Z, exactly, for
 * sigma the double given (sigma = M 2^e with 2^52 <= M < 2^53, so sigma^2 =
 * M^2 2^(2e) is taken exactly; nothing is rounded).
 *
 * Method: rejection from a step envelope whose steps are blocks of width
 * sigma / L (L = 64) of the magnitude |x|, the "inversion plus rejection"
 * scheme of Devroye (Non-Uniform Random Variate Generation, 1986, ch. II.3
 * and VIII.2), made exact as Karney ("Sampling exactly from the normal
 * distribution", ACM TOMS 42(1), 2016) and Canonne, Kamath & Steinke ("The
 * Discrete Gaussian for Differential Privacy", NeurIPS 2020) do: every random
 * decision compares a uniform real, read lazily (its first 32 or 64 bits,
 * then 32-bit chunks), with a number known exactly or enclosed in rigorous
 * bounds, and draws further bits whenever the bits read so far cannot decide.
 *
 *  1. Block b >= 0 is chosen with probability H_b / S, H_b = exp(-b^2 /
 *     (2 L^2)) (the Gaussian at the block's left end), S = sum of all H_b.
 *     Inversion of a uniform U against the cumulative C_b = (H_0 + ... +
 *     H_b) / S: a table holds 64-bit lower and upper bounds lo_b <= 2^64 C_b
 *     <= hi_b computed once with integer interval arithmetic (GMP, directed
 *     rounding, the series of exp(-1 / (2 L^2)) with its remainder bound and
 *     a geometric bound on the tail of S). U's first 32 bits u decide block b
 *     when hi_(b-1) <= u 2^32 and (u + 1) 2^32 <= lo_b (then C_(b-1) <= U <
 *     C_b whatever U's further bits; a guide table of U's first 12 bits and
 *     a scan from there find the candidate b, and the test itself is what
 *     makes it right). Otherwise (probability about 2^-22) 32 more bits and the
 *     same test on 64 bits, and when those fall between two bounds of one
 *     C_b (probability below 2^-53) the same bounds at 128, 256, ... bits and
 *     more bits of U decide. Blocks past the table (|x| beyond about 10
 *     sigma) come from that exact path too.
 *  2. Block b holds the integers x with b sigma / L <= x < (b + 1) sigma / L,
 *     at most J = ceil(sigma / L) of them: x = ceil(b sigma / L) + j with j
 *     uniform in [0, J), and a sign s uniform in {0, 1}, both from one
 *     uniform integer in [0, 2J) (Lemire's multiply-and-reject, exact: j is
 *     its upper part, s its last bit); x outside the block is rejected.
 *     Every x in block b is thus proposed, with either sign, with
 *     probability (H_b / S) / (2 J).
 *  3. x is accepted with probability exp(-x^2 / (2 sigma^2)) / H_b =
 *     exp(-gamma), gamma = (x^2 - (b sigma / L)^2) / (2 sigma^2) in [0, 1/4)
 *     for b < 1022, by CKS20's Algorithm 1: the first k with a failed
 *     Bernoulli(gamma / k) is odd. gamma = P / Q with P = d (d + 2 b M) and
 *     Q = 2^13 M^2, d = x 2^(6-e) - b M < M: integers below 2^117 and 2^119.
 *     The first coin, Bernoulli(gamma), compares W (uniform) with gamma
 *     through an integer g with g <= 2^64 gamma < g + 3: g = floor(floor(P /
 *     2^53) R / 2^64) with R = min(floor(2^168 / M^2), 2^64 - 1). (Writing P
 *     = 2^53 P1 + P0 and 2^168 / M^2 = R + r, 0 <= r <= 1: 2^64 gamma = P
 *     2^51 / M^2 = P1 (R + r) / 2^64 + P0 2^51 / M^2, where P1 r / 2^64 < 1,
 *     P0 2^51 / M^2 < 2^104 / M^2 <= 1, and the floor loses less than 1.)
 *     With w W's first 32 bits: w 2^32 >= g + 4 means W > gamma (the coin
 *     fails: x is accepted, about 99% of proposals at large sigma), (w + 1)
 *     2^32 <= g means W < gamma (it succeeds), and otherwise W is compared
 *     with P / Q exactly (w Q against P 2^32, then 32-bit chunks, in 192-bit
 *     integer arithmetic). The further coins Bernoulli(gamma / k), k >= 2,
 *     are exact comparisons w Q k against P 2^32 chunk by chunk.
 *  4. -0 is rejected.
 * Every x >= 0 is then output with each sign (x != 0) or once (x = 0) with
 * probability proportional to (H_b / (2 S J)) (exp(-x^2 / (2 sigma^2)) /
 * H_b) = exp(-x^2 / (2 sigma^2)) / (2 S J): exactly the discrete Gaussian.
 * For sigma well above L, about 1.01 proposals and 16 random bytes per
 * sample (two 64-bit words: U's and W's first 32 bits, then j and the sign),
 * 64-bit integer arithmetic and four multiplications on the common path, no
 * division and no floating point (near sigma = 16 most blocks hold no
 * integer: about 4 proposals a sample).
 *
 * The map from the stream to samples: proposals come in batches of 64, the
 * batch's 128 words read first (proposal i: words 2i and 2i + 1). A pass
 * without branches decides the proposals that the common path above decides
 * (U's first 32 bits fix the block within one step of the guide, Lemire's
 * first word is accepted, W's first 32 bits decide the first coin: it fails,
 * or x is past the block, or -0); it computes exactly what the general code
 * (fast2_proposal) computes
 * from the same two words, so it changes the speed, not the samples (a test
 * compares both). A second pass goes over the batch in order, keeps those
 * samples and gives every other proposal (about 1%) to the general code,
 * which reads any further words it needs from the stream after the batch's,
 * in that order. The proposals of a batch left over when n samples are out
 * are dropped: a sample depends on the stream only, not on n. Whether a
 * proposal's extra words come before or after its neighbours' does not
 * matter to the distribution: each proposal still uses fresh words, and its
 * fate depends on them only.
 *
 * fs_dgauss_sample_prg_v1 keeps the map of earlier releases from the random
 * stream to samples (the same blocks and the same distribution; U and j from
 * a 64-bit word each, every coin in 32-bit chunks at 192 bits, the sign from
 * a separate bit; about 20 random bytes and 2.7 times slower) for the
 * benchmark and the tests.
 *
 * The decisions are integer comparisons only, so the output for a given
 * random stream is the same on every machine and compiler (the seeded noise
 * of the noise exchange needs that). */
#include "dgauss.h"

#include <gmp.h>
#include <limits.h>
#include <math.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../crypto/prg.h"
#include "../crypto/rand.h"

__extension__ typedef unsigned __int128 u128;

#define L_BITS      6    /* L = 64 blocks per sigma */
#define TBL_MAX     1024 /* table blocks at most; also the fast path's limit on b */
#define GUIDE_BITS  10
#define GUIDE2_BITS 12  /* the one-step guide of the word-wise path */
#define BATCH       64  /* proposals a batch of the word-wise path */
#define WORDS       512 /* random words per refill (4 KiB) */
#define CHUNK       32
#define SIGMA_MIN   16.0
#define SIGMA_MAX   4503599627370496.0 /* 2^52 */
#define P_MAX       65536              /* bits of U the exact inversion reads at most */

/* ---- the block table (shared, built once) ------------------------------ */

static struct {
    uint64_t lo[TBL_MAX + 2]; /* lo[b] <= 2^64 C_b <= hi[b]; 2^64 - 1 from lo[n] on */
    uint64_t hi[TBL_MAX];
    uint64_t hip[TBL_MAX + 2];          /* hi[b - 1], 0 for b = 0 and past n */
    uint16_t guide[1u << GUIDE_BITS];   /* first b with lo[b] > g 2^54 */
    uint16_t guide2[1u << GUIDE2_BITS]; /* first b with lo[b] > g 2^52 */
    unsigned n;
    int rc;
} g_tbl;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static int g_debug; /* FS_DGAUSS_DEBUG_* bits, tests only */

void fs_dgauss_debug_force(int flags)
{
    g_debug = flags;
}

/* Bounds at precision 2^-p on C_b for b < *n (arrays allocated here, mpz_clear
 * each and free): clo[b] <= 2^p C_b <= chi[b]. Returns 0 or FS_ENOMEM. */
static int cdt_bounds(unsigned p, mpz_t **clo_out, mpz_t **chi_out, unsigned *n_out)
{
    unsigned q = p + 48; /* working precision: guard bits for ~2n roundings */
    mpz_t one, t_lo, t_hi, d, qlo, qhi, q2lo, q2hi, plo, phi, hlo, hhi, slo, shi, tail, lim;
    mpz_t *hl = NULL, *hh = NULL, *clo = NULL, *chi = NULL;
    unsigned cap = 256, n = 0;
    int rc = 0;

    mpz_inits(one, t_lo, t_hi, d, qlo, qhi, q2lo, q2hi, plo, phi, hlo, hhi, slo, shi, tail, lim,
              NULL);
    mpz_setbit(one, q);
    /* q = exp(-1/8192): sum_k (-1)^k 2^q / (8192^k k!) to where a term is
     * below one unit, plus or minus one unit for the remainder */
    mpz_set(qlo, one);
    mpz_set(qhi, one);
    mpz_set_ui(d, 1);
    for (unsigned long k = 1;; k++) {
        mpz_mul_ui(d, d, 8192ul * k);
        mpz_fdiv_q(t_lo, one, d);
        mpz_cdiv_q(t_hi, one, d);
        if (k & 1) {
            mpz_sub(qlo, qlo, t_hi);
            mpz_sub(qhi, qhi, t_lo);
        } else {
            mpz_add(qlo, qlo, t_lo);
            mpz_add(qhi, qhi, t_hi);
        }
        if (mpz_cmp_ui(t_hi, 1) <= 0) {
            break;
        }
    }
    mpz_sub_ui(qlo, qlo, 1);
    mpz_add_ui(qhi, qhi, 1);
    mpz_mul(q2lo, qlo, qlo);
    mpz_fdiv_q_2exp(q2lo, q2lo, q);
    mpz_mul(q2hi, qhi, qhi);
    mpz_cdiv_q_2exp(q2hi, q2hi, q);
    /* H_0 = 1, H_(b+1) = H_b q^(2b+1): until H_b < 2^(q-p-16) */
    mpz_set(hlo, one);
    mpz_set(hhi, one);
    mpz_set(plo, qlo);
    mpz_set(phi, qhi);
    mpz_set_ui(lim, 0);
    mpz_setbit(lim, q - p - 16);
    hl = malloc(cap * sizeof *hl);
    hh = malloc(cap * sizeof *hh);
    if (hl == NULL || hh == NULL) {
        rc = FS_ENOMEM;
        goto out;
    }
    while (mpz_cmp(hhi, lim) >= 0) {
        if (n == cap) {
            mpz_t *a = realloc(hl, 2 * cap * sizeof *hl);
            if (a != NULL) {
                hl = a;
            }
            mpz_t *c = realloc(hh, 2 * cap * sizeof *hh);
            if (c != NULL) {
                hh = c;
            }
            if (a == NULL || c == NULL) {
                rc = FS_ENOMEM;
                goto out;
            }
            cap *= 2;
        }
        mpz_init_set(hl[n], hlo);
        mpz_init_set(hh[n], hhi);
        n++;
        mpz_mul(hlo, hlo, plo);
        mpz_fdiv_q_2exp(hlo, hlo, q);
        mpz_mul(hhi, hhi, phi);
        mpz_cdiv_q_2exp(hhi, hhi, q);
        if (mpz_cmp(hhi, lim) >= 0) {
            mpz_mul(plo, plo, q2lo);
            mpz_fdiv_q_2exp(plo, plo, q);
            mpz_mul(phi, phi, q2hi);
            mpz_cdiv_q_2exp(phi, phi, q);
        }
    }
    /* here hhi bounds H_n and phi bounds q^(2n-1) >= q^(2n): the tail
     * sum_(b >= n) H_b <= H_n / (1 - q^(2n)) */
    mpz_sub(d, one, phi);
    mpz_mul_2exp(tail, hhi, q);
    mpz_cdiv_q(tail, tail, d);
    mpz_set_ui(slo, 0);
    mpz_set(shi, tail);
    for (unsigned b = 0; b < n; b++) {
        mpz_add(slo, slo, hl[b]);
        mpz_add(shi, shi, hh[b]);
    }
    clo = malloc(n * sizeof *clo);
    chi = malloc(n * sizeof *chi);
    if (clo == NULL || chi == NULL) {
        free(clo);
        free(chi);
        clo = chi = NULL;
        rc = FS_ENOMEM;
        goto out;
    }
    mpz_set_ui(hlo, 0); /* running sums */
    mpz_set_ui(hhi, 0);
    for (unsigned b = 0; b < n; b++) {
        mpz_add(hlo, hlo, hl[b]);
        mpz_add(hhi, hhi, hh[b]);
        mpz_init(clo[b]);
        mpz_init(chi[b]);
        mpz_mul_2exp(clo[b], hlo, p);
        mpz_fdiv_q(clo[b], clo[b], shi);
        mpz_mul_2exp(chi[b], hhi, p);
        mpz_cdiv_q(chi[b], chi[b], slo);
    }
out:
    if (hl != NULL && hh != NULL) {
        for (unsigned b = 0; b < n; b++) {
            mpz_clear(hl[b]);
            mpz_clear(hh[b]);
        }
    }
    free(hl);
    free(hh);
    mpz_clears(one, t_lo, t_hi, d, qlo, qhi, q2lo, q2hi, plo, phi, hlo, hhi, slo, shi, tail, lim,
               NULL);
    *clo_out = clo;
    *chi_out = chi;
    *n_out = rc == 0 ? n : 0;
    return rc;
}

static void cdt_free(mpz_t *clo, mpz_t *chi, unsigned n)
{
    for (unsigned b = 0; b < n; b++) {
        mpz_clear(clo[b]);
        mpz_clear(chi[b]);
    }
    free(clo);
    free(chi);
}

static void table_build(void)
{
    mpz_t *clo = NULL, *chi = NULL;
    unsigned n = 0;

    g_tbl.rc = cdt_bounds(64, &clo, &chi, &n);
    if (g_tbl.rc != 0) {
        return;
    }
    g_tbl.n = 0;
    for (unsigned b = 0; b < n && b < TBL_MAX; b++) {
        if (mpz_sizeinbase(chi[b], 2) > 64) {
            break; /* 2^64 C_b may reach 2^64: the exact path decides there */
        }
        g_tbl.lo[b] = (uint64_t)mpz_get_ui(clo[b]);
        g_tbl.hi[b] = (uint64_t)mpz_get_ui(chi[b]);
        g_tbl.n = b + 1;
    }
    cdt_free(clo, chi, n);
    for (unsigned g = 0, b = 0; g < (1u << GUIDE_BITS); g++) {
        uint64_t start = (uint64_t)g << (64 - GUIDE_BITS);
        while (b < g_tbl.n && g_tbl.lo[b] <= start) {
            b++;
        }
        g_tbl.guide[g] = (uint16_t)b;
    }
    for (unsigned b = g_tbl.n; b < TBL_MAX + 2; b++) {
        g_tbl.lo[b] = UINT64_MAX; /* the one-step search reads lo[n] and lo[n + 1] */
    }
    for (unsigned b = 1; b <= g_tbl.n; b++) {
        g_tbl.hip[b] = g_tbl.hi[b - 1];
    }
    for (unsigned g = 0, b = 0; g < (1u << GUIDE2_BITS); g++) {
        uint64_t start = (uint64_t)g << (64 - GUIDE2_BITS);
        while (b < g_tbl.n && g_tbl.lo[b] <= start) {
            b++;
        }
        g_tbl.guide2[g] = (uint16_t)b;
    }
}

/* ---- random words -------------------------------------------------------- */

struct src {
    fs_prg *prg; /* NULL: the OS CSPRNG */
    uint64_t buf[WORDS];
    size_t pos;
    uint64_t half; /* an unread 32-bit chunk */
    int has_half;
    uint64_t bits; /* unread single bits */
    unsigned nbits;
    unsigned chunk; /* bits per chunk: CHUNK (1 for tests) */
    int rc;
    struct fs_err *err;
};

static void src_refill(struct src *s)
{
    if (s->rc == 0) {
        s->rc = s->prg != NULL ? fs_prg_bytes(s->prg, s->buf, sizeof s->buf, s->err)
                               : fs_rand_bytes(s->buf, sizeof s->buf, s->err);
    }
    if (s->rc != 0) {
        memset(s->buf, 0, sizeof s->buf); /* callers see rc before using a result */
    }
    s->pos = 0;
}

static inline uint64_t next_word(struct src *s)
{
    if (__builtin_expect(s->pos == WORDS, 0)) {
        src_refill(s);
    }
    return s->buf[s->pos++];
}

/* The next k words of the stream into dst. */
static void src_words(struct src *s, uint64_t *dst, size_t k)
{
    while (k > 0) {
        if (s->pos == WORDS) {
            src_refill(s);
        }
        size_t m = WORDS - s->pos < k ? WORDS - s->pos : k;
        memcpy(dst, s->buf + s->pos, m * sizeof *dst);
        s->pos += m;
        dst += m;
        k -= m;
    }
}

static inline uint64_t next_chunk(struct src *s)
{
    if (s->chunk != CHUNK) {
        if (s->nbits == 0) {
            s->bits = next_word(s);
            s->nbits = 64;
        }
        uint64_t b = s->bits & 1;
        s->bits >>= 1;
        s->nbits--;
        return b;
    }
    if (s->has_half) {
        s->has_half = 0;
        return s->half;
    }
    uint64_t w = next_word(s);
    s->half = w >> 32;
    s->has_half = 1;
    return w & 0xffffffffu;
}

static inline unsigned next_bit(struct src *s)
{
    if (s->nbits == 0) {
        s->bits = next_word(s);
        s->nbits = 64;
    }
    unsigned b = (unsigned)(s->bits & 1);
    s->bits >>= 1;
    s->nbits--;
    return b;
}

/* Clear a secret multiprecision integer, wiping its limbs first (_mp_d and
 * _mp_alloc are the documented layout of mpz_t in gmp.h). */
static void mpz_wipe(mpz_t z)
{
    OPENSSL_cleanse(z->_mp_d, (size_t)z->_mp_alloc * sizeof(mp_limb_t));
    mpz_clear(z);
}

/* ---- exact comparisons --------------------------------------------------- */

struct u192 {
    uint64_t w[3]; /* little endian */
};

static inline struct u192 mul_128_64(u128 a, uint64_t b)
{
    u128 lo = (u128)(uint64_t)a * b;
    u128 hi = (u128)(uint64_t)(a >> 64) * b;
    u128 mid = (lo >> 64) + (uint64_t)hi;
    struct u192 r = {{(uint64_t)lo, (uint64_t)mid, (uint64_t)(hi >> 64) + (uint64_t)(mid >> 64)}};
    return r;
}

static inline struct u192 shl_128(u128 a, unsigned s) /* 0 < s < 64 */
{
    struct u192 r = {{(uint64_t)(a << s), (uint64_t)(a >> (64 - s)), (uint64_t)(a >> (128 - s))}};
    return r;
}

static inline int cmp192(const struct u192 *a, const struct u192 *b)
{
    for (int i = 2; i >= 0; i--) {
        if (a->w[i] != b->w[i]) {
            return a->w[i] < b->w[i] ? -1 : 1;
        }
    }
    return 0;
}

static inline struct u192 add192_128(struct u192 a, u128 b)
{
    u128 lo = (u128)a.w[0] + (uint64_t)b;
    u128 mid = (u128)a.w[1] + (uint64_t)(b >> 64) + (uint64_t)(lo >> 64);
    a.w[0] = (uint64_t)lo;
    a.w[1] = (uint64_t)mid;
    a.w[2] += (uint64_t)(mid >> 64);
    return a;
}

/* a - b for a >= b, the result below 2^128 */
static inline u128 sub192(const struct u192 *a, const struct u192 *b)
{
    u128 lo = (u128)a->w[0] - b->w[0];
    uint64_t borrow = (uint64_t)(lo >> 64) != 0;
    uint64_t mid = a->w[1] - b->w[1] - borrow;
    return ((u128)mid << 64) | (uint64_t)lo;
}

/* Bernoulli(num / den) for 0 < den < 2^127, num < den: W < num / den for W
 * uniform in [0, 1), read a chunk w at a time: w den against num 2^chunk. */
static int bern_frac(struct src *s, u128 num, u128 den)
{
    for (;;) {
        uint64_t w = next_chunk(s);
        if (s->rc != 0) {
            return 0;
        }
        struct u192 lhs = mul_128_64(den, w);
        struct u192 rhs = shl_128(num, s->chunk);
        if (cmp192(&lhs, &rhs) >= 0) {
            return 0;
        }
        struct u192 lhs1 = add192_128(lhs, den);
        if (cmp192(&lhs1, &rhs) <= 0) {
            return 1;
        }
        num = sub192(&rhs, &lhs); /* in (0, den): the rest of W decides */
    }
}

/* The same for multiprecision num < den (num is clobbered). */
static int bern_frac_mpz(struct src *s, mpz_t num, const mpz_t den, mpz_t t)
{
    for (;;) {
        uint64_t w = next_chunk(s);
        if (s->rc != 0) {
            return 0;
        }
        mpz_mul_2exp(num, num, s->chunk);
        mpz_mul_ui(t, den, (unsigned long)w);
        if (mpz_cmp(t, num) >= 0) {
            return 0;
        }
        mpz_add(t, t, den);
        if (mpz_cmp(t, num) <= 0) {
            return 1;
        }
        mpz_sub(t, t, den);
        mpz_sub(num, num, t);
    }
}

/* ---- sampler ------------------------------------------------------------- */

struct fast {
    uint64_t m;     /* sigma = m 2^e, 2^52 <= m < 2^53 */
    unsigned shift; /* 6 - e: x in units of sigma / (L m) is x << shift */
    uint64_t j;     /* ceil(sigma / L): most integers in a block */
    uint64_t jt;    /* 2^64 mod j (Lemire's threshold) */
    u128 den;       /* 2^13 m^2: gamma = d (d + 2 b m) / den */
    uint64_t j2;    /* 2 j: the word-wise path draws j and the sign together */
    uint64_t jt2;   /* 2^64 mod j2 */
    uint64_t r2;    /* min(floor(2^168 / m^2), 2^64 - 1) */
    int force_exact_cdt;
    int force_generic;
    int force_undecided;
    int check_bounds;
    mpz_t *clo, *chi; /* bounds at 128 bits, kept from the first exact inversion */
    unsigned cn;
};

static void fast_init(struct fast *f, double sigma)
{
    int ex = 0;
    double fr = frexp(sigma, &ex);

    f->m = (uint64_t)ldexp(fr, 53);
    f->shift = (unsigned)(L_BITS - (ex - 53));
    f->j = (f->m + ((uint64_t)1 << f->shift) - 1) >> f->shift;
    f->jt = (0 - f->j) % f->j;
    f->den = ((u128)f->m * f->m) << 13;
    f->j2 = 2 * f->j;
    f->jt2 = (0 - f->j2) % f->j2;
    mpz_t q, m2;
    mpz_inits(q, m2, NULL);
    mpz_set_ui(m2, (unsigned long)f->m);
    mpz_mul(m2, m2, m2);
    mpz_setbit(q, 168);
    mpz_fdiv_q(q, q, m2);
    f->r2 = mpz_sizeinbase(q, 2) > 64 ? UINT64_MAX : (uint64_t)mpz_get_ui(q);
    mpz_clears(q, m2, NULL);
    f->force_exact_cdt = (g_debug & FS_DGAUSS_DEBUG_EXACT_CDT) != 0;
    f->force_generic = (g_debug & FS_DGAUSS_DEBUG_GENERIC) != 0;
    f->force_undecided = (g_debug & FS_DGAUSS_DEBUG_UNDECIDED) != 0;
    f->check_bounds = (g_debug & FS_DGAUSS_DEBUG_CHECK_BOUNDS) != 0;
    f->clo = f->chi = NULL;
    f->cn = 0;
}

/* Block b by inversion with bounds at 128, 256, ... bits; `u` is U's first
 * 64 bits. */
static int cdt_exact(struct src *s, struct fast *f, uint64_t u, uint64_t *b_out)
{
    mpz_t pre;
    unsigned have = 64;
    int rc = 0;

    mpz_init_set_ui(pre, (unsigned long)u);
    for (unsigned p = 128; rc == 0; p *= 2) {
        mpz_t *clo = NULL, *chi = NULL;
        unsigned n = 0;

        if (p > P_MAX) {
            rc = fs_err_set(s->err, FS_ERANGE, "discrete Gaussian: inversion undecided");
            break;
        }
        while (have < p) {
            mpz_mul_2exp(pre, pre, 64);
            mpz_add_ui(pre, pre, (unsigned long)next_word(s));
            have += 64;
        }
        if (s->rc != 0) {
            rc = s->rc;
            break;
        }
        if (p == 128 && f->clo != NULL) {
            clo = f->clo;
            chi = f->chi;
            n = f->cn;
        } else if (cdt_bounds(p, &clo, &chi, &n) != 0) {
            rc = fs_err_set(s->err, FS_ENOMEM, "discrete Gaussian: out of memory");
            break;
        }
        if (p == 128) {
            f->clo = clo;
            f->chi = chi;
            f->cn = n;
        }
        for (unsigned b = 0; b < n; b++) {
            if (mpz_cmp(pre, clo[b]) < 0) {
                if (b == 0 || mpz_cmp(pre, chi[b - 1]) >= 0) {
                    *b_out = b;
                    if (p != 128) {
                        cdt_free(clo, chi, n);
                    }
                    mpz_wipe(pre);
                    return 0;
                }
                break;
            }
        }
        if (p != 128) {
            cdt_free(clo, chi, n);
        }
    }
    mpz_wipe(pre);
    return rc;
}

/* Block b for U's first 64 bits u. */
static inline int pick_block_u(struct src *s, struct fast *f, uint64_t u, uint64_t *b)
{
    unsigned i = g_tbl.guide[u >> (64 - GUIDE_BITS)];

    while (i < g_tbl.n && u >= g_tbl.lo[i]) {
        i++;
    }
    if (__builtin_expect(i < g_tbl.n && (i == 0 || u >= g_tbl.hi[i - 1]) && !f->force_exact_cdt,
                         1)) {
        *b = i;
        return 0;
    }
    return cdt_exact(s, f, u, b);
}

static inline int pick_block(struct src *s, struct fast *f, uint64_t *b)
{
    return pick_block_u(s, f, next_word(s), b);
}

static inline uint64_t uniform_j(struct src *s, const struct fast *f)
{
    if (f->j == 1) {
        return 0;
    }
    u128 m = (u128)next_word(s) * f->j;
    while ((uint64_t)m < f->jt && s->rc == 0) {
        m = (u128)next_word(s) * f->j;
    }
    return (uint64_t)(m >> 64);
}

/* The run of Bernoulli(num / (den k)) for k = k0, k0 + 1, ... (num < den,
 * clobbered) after k0 - 1 successes: *keep = 1 when the first failure is at
 * an odd k (CKS20, Algorithm 1). */
static int chain_mpz(struct src *s, mpz_t num, const mpz_t den, unsigned long k0, int *keep)
{
    mpz_t kden, w, t;

    mpz_inits(kden, w, t, NULL);
    for (unsigned long k = k0;; k++) {
        mpz_mul_ui(kden, den, k);
        mpz_set(w, num);
        if (mpz_sgn(w) == 0 || !bern_frac_mpz(s, w, kden, t)) {
            *keep = (int)(k & 1);
            break;
        }
    }
    mpz_clear(kden);
    mpz_wipe(w);
    mpz_wipe(t);
    return s->rc;
}

/* Steps 2-3 for any block in multiprecision: *keep = 1 and *x set when x is
 * in the block and accepted. */
static int block_generic(struct src *s, const struct fast *f, uint64_t b, uint64_t j, int *keep,
                         uint64_t *x)
{
    mpz_t bm, xb, d, num, den, t;
    int rc = 0;

    *keep = 0;
    mpz_inits(bm, xb, d, num, den, t, NULL);
    mpz_set_ui(bm, (unsigned long)b);
    mpz_mul_ui(bm, bm, (unsigned long)f->m);
    mpz_cdiv_q_2exp(xb, bm, f->shift);
    mpz_add_ui(xb, xb, (unsigned long)j);
    if (mpz_sizeinbase(xb, 2) > 62) {
        rc = fs_err_set(s->err, FS_ERANGE, "discrete Gaussian: sample exceeds int64");
        goto out;
    }
    mpz_mul_2exp(d, xb, f->shift);
    mpz_sub(d, d, bm);
    if (mpz_cmp_ui(d, (unsigned long)f->m) >= 0) {
        goto out; /* past the block */
    }
    /* gamma = d (d + 2 b m) / (2^13 m^2): floor(gamma) Bernoulli(exp(-1)),
     * then Bernoulli(exp(-frac)) by the run of Bernoulli(frac / k) */
    mpz_mul_2exp(num, bm, 1);
    mpz_add(num, num, d);
    mpz_mul(num, num, d);
    mpz_set_ui(den, (unsigned long)f->m);
    mpz_mul(den, den, den);
    mpz_mul_2exp(den, den, 13);
    mpz_fdiv_qr(t, num, num, den);
    for (; mpz_sgn(t) > 0; mpz_sub_ui(t, t, 1)) {
        unsigned long k;
        for (k = 2;; k++) { /* Bernoulli(1/1) always succeeds */
            if (!bern_frac(s, 1, k)) {
                break;
            }
        }
        if (s->rc != 0) {
            rc = s->rc;
            goto out;
        }
        if ((k & 1) == 0) {
            goto out;
        }
    }
    rc = chain_mpz(s, num, den, 1, keep);
    if (rc != 0) {
        goto out;
    }
    *x = (uint64_t)mpz_get_ui(xb);
out:
    mpz_wipe(bm);
    mpz_wipe(xb);
    mpz_wipe(d);
    mpz_wipe(num);
    mpz_clear(den);
    mpz_wipe(t);
    return rc;
}

/* CKS20 Algorithm 1 for gamma = p / den after k - 1 successes: the run of
 * Bernoulli(gamma / k), Bernoulli(gamma / (k + 1)), ...; *keep = 1 when the
 * first failure is at an odd index. */
static int accept_chain(struct src *s, const struct fast *f, u128 p, uint64_t k, int *keep)
{
    int rc = 0;

    while (k < 64 && bern_frac(s, p, f->den * k)) {
        k++;
    }
    if (k == 64) { /* probability below gamma^63 / 63!: on in multiprecision */
        mpz_t num, den;
        mpz_inits(num, den, NULL);
        mpz_import(num, 2, -1, sizeof(uint64_t), 0, 0,
                   (uint64_t[2]){(uint64_t)p, (uint64_t)(p >> 64)});
        mpz_import(den, 2, -1, sizeof(uint64_t), 0, 0,
                   (uint64_t[2]){(uint64_t)f->den, (uint64_t)(f->den >> 64)});
        rc = chain_mpz(s, num, den, 64, keep);
        mpz_wipe(num);
        mpz_clear(den);
    } else {
        *keep = (int)(k & 1);
    }
    return rc;
}

/* One sample, the map of fs_dgauss_sample_prg_v1. */
static int fast_one(struct src *s, struct fast *f, int64_t *out)
{
    for (;;) {
        uint64_t b = 0, x = 0;
        int keep = 0;
        int rc = pick_block(s, f, &b);
        if (rc != 0 || s->rc != 0) {
            return rc != 0 ? rc : s->rc;
        }
        uint64_t j = uniform_j(s, f);
        if (__builtin_expect(b < TBL_MAX && !f->force_generic, 1)) {
            u128 bm = (u128)b * f->m;
            u128 xb = (bm + (((u128)1 << f->shift) - 1)) >> f->shift;
            u128 d = ((xb + j) << f->shift) - bm;
            if (d >= f->m) {
                continue; /* past the block */
            }
            /* < 2^53 (2^53 2049) < 2^117 */
            rc = accept_chain(s, f, d * (d + 2 * bm), 1, &keep);
            x = (uint64_t)(xb + j);
        } else {
            rc = block_generic(s, f, b, j, &keep, &x);
        }
        if (rc != 0 || s->rc != 0) {
            return rc != 0 ? rc : s->rc;
        }
        if (!keep) {
            continue;
        }
        unsigned neg = next_bit(s);
        if (neg && x == 0) {
            continue;
        }
        *out = neg ? -(int64_t)x : (int64_t)x;
        return 0;
    }
}

/* ---- the word-wise path ---------------------------------------------------- */

/* Bernoulli(num / den) (den < 2^127, num < den) when the uniform W's first
 * 32 bits are w: w den against num 2^32, then further chunks as bern_frac. */
static int bern_frac_first(struct src *s, u128 num, u128 den, uint64_t w)
{
    struct u192 lhs = mul_128_64(den, w);
    struct u192 rhs = shl_128(num, 32);

    if (cmp192(&lhs, &rhs) >= 0) {
        return 0;
    }
    struct u192 lhs1 = add192_128(lhs, den);
    if (cmp192(&lhs1, &rhs) <= 0) {
        return 1;
    }
    return bern_frac(s, sub192(&rhs, &lhs), den);
}

/* Block b of fast2_proposal when U's first 32 bits (the high half of u) do
 * not decide: 32 more bits, then the scan or the exact inversion. */
static int fast2_block(struct src *s, struct fast *f, uint64_t u, uint64_t *b)
{
    return pick_block_u(s, f, u | (next_word(s) >> 32), b);
}

/* Block b: x = ceil(b m / 2^shift) + j, accepted with probability
 * exp(-gamma) (*keep), w the first 32 bits of the first coin's uniform. */
static inline int fast2_accept(struct src *s, const struct fast *f, uint64_t b, uint64_t j,
                               uint64_t w, uint64_t *x, int *keep)
{
    /* b m < 2^63, and (x << shift) < (b + 1) m + 2^54 < 2^64 */
    uint64_t bm = b * f->m;
    *x = ((bm + ((uint64_t)1 << f->shift) - 1) >> f->shift) + j;
    uint64_t d = (*x << f->shift) - bm;
    if (d >= f->m) {
        *keep = 0; /* past the block */
        return 0;
    }
    u128 p = (u128)d * (d + 2 * bm); /* d + 2 b m < 2043 m < 2^64; p < 2^117 */
    /* g <= 2^64 gamma < g + 3 < 2^62 (header, step 3) */
    uint64_t g = (uint64_t)(((u128)(uint64_t)(p >> 53) * f->r2) >> 64);
    if (__builtin_expect(f->check_bounds, 0)) {
        struct u192 lo = mul_128_64(f->den, g), hi = mul_128_64(f->den, g + 3);
        struct u192 mid = {{0, (uint64_t)p, (uint64_t)(p >> 64)}};
        if (cmp192(&lo, &mid) > 0 || cmp192(&mid, &hi) >= 0) {
            return fs_err_set(s->err, FS_EINTERNAL, "discrete Gaussian: bounds on gamma violated");
        }
    }
    uint64_t wl = w << 32;
    if (__builtin_expect(wl >= g + 4 && !f->force_undecided, 1)) {
        *keep = 1; /* the first coin fails */
        return 0;
    }
    /* wl + 2^32 <= g: the first coin succeeds (no overflow: wl < g + 4) */
    int first =
        wl + ((uint64_t)1 << 32) <= g && !f->force_undecided ? 1 : bern_frac_first(s, p, f->den, w);
    if (!first) {
        *keep = 1;
        return 0;
    }
    return accept_chain(s, f, p, 2, keep);
}

/* One proposal of the word-wise path from its two words uw and r (the rare
 * branches read further words): *kept = 1 and *out set when it gives a
 * sample. */
static int fast2_proposal(struct src *s, struct fast *f, uint64_t uw, uint64_t r, int64_t *out,
                          int *kept)
{
    uint64_t u = uw & 0xffffffff00000000u, w = uw & 0xffffffffu;
    uint64_t b = g_tbl.guide2[u >> (64 - GUIDE2_BITS)];

    *kept = 0;
    while (u >= g_tbl.lo[b]) { /* stops at n at the latest: lo[n] = 2^64 - 1 > u */
        b++;
    }
    /* decided when hi[b - 1] <= u and u + 2^32 - 1 < lo[b] */
    if ((u | 0xffffffffu) >= g_tbl.lo[b] || b >= g_tbl.n || u < g_tbl.hip[b] ||
        f->force_exact_cdt) {
        int rc = fast2_block(s, f, u, &b);
        if (rc != 0) {
            return rc;
        }
    }
    u128 mj = (u128)r * f->j2;
    while ((uint64_t)mj < f->jt2 && s->rc == 0) {
        mj = (u128)next_word(s) * f->j2;
    }
    if (s->rc != 0) {
        return s->rc;
    }
    uint64_t j = (uint64_t)(mj >> 65);
    unsigned neg = (unsigned)(mj >> 64) & 1;
    uint64_t x = 0;
    int keep = 0;
    int rc = b < TBL_MAX - 2 && !f->force_generic ? fast2_accept(s, f, b, j, w, &x, &keep)
                                                  : block_generic(s, f, b, j, &keep, &x);
    if (rc != 0 || s->rc != 0) {
        return rc != 0 ? rc : s->rc;
    }
    if (keep && !(neg && x == 0)) {
        *out = neg ? -(int64_t)x : (int64_t)x;
        *kept = 1;
    }
    return 0;
}

/* n samples, the map of fs_dgauss_sample_prg: proposals in batches of BATCH,
 * each from two consecutive words of the stream (2 BATCH words a batch, all
 * drawn first). A first pass decides, without branches, the proposals whose
 * block, j and first coin the common path decides (as fast2_proposal would
 * from the same words: accepted, or past the block, or -0); the second pass
 * goes over the batch in order, outputs those and hands every other one to
 * fast2_proposal, whose further words come from the stream in that order.
 * The batch's unused proposals when n is reached are dropped, so a sample
 * depends on the stream only, not on n. */
static int fast2_run(struct src *s, struct fast *f, int64_t *out, size_t n)
{
    uint64_t wd[2 * BATCH];
    int64_t xs[BATCH];
    uint8_t slow[BATCH], take[BATCH];
    const uint64_t m = f->m, j2 = f->j2, jt2 = f->jt2, r2 = f->r2;
    const uint64_t round = ((uint64_t)1 << f->shift) - 1;
    const unsigned shift = f->shift;
    uint64_t nf = f->force_exact_cdt || f->force_generic || f->force_undecided || f->check_bounds ||
                          (g_debug & FS_DGAUSS_DEBUG_ONE_BY_ONE) != 0 || g_tbl.n > TBL_MAX - 2
                      ? 0
                      : g_tbl.n;
    size_t i = 0;
    int rc = 0;

    while (i < n && rc == 0) {
        src_words(s, wd, 2 * BATCH);
        if (s->rc != 0) {
            rc = s->rc;
            break;
        }
        for (size_t k = 0; k < BATCH; k++) {
            uint64_t u = wd[2 * k] & 0xffffffff00000000u, wl = wd[2 * k] << 32;
            uint64_t b = g_tbl.guide2[u >> (64 - GUIDE2_BITS)];
            b += u >= g_tbl.lo[b];
            u128 mj = (u128)wd[2 * k + 1] * j2;
            uint64_t jj = (uint64_t)(mj >> 64);
            /* as fast2_accept; b m and x << shift may wrap when b >= nf (then slow) */
            uint64_t bm = b * m;
            uint64_t x = ((bm + round) >> shift) + (jj >> 1);
            uint64_t d = (x << shift) - bm;
            u128 p = (u128)d * (d + 2 * bm);
            uint64_t g = (uint64_t)(((u128)(uint64_t)(p >> 53) * r2) >> 64);
            slow[k] = (uint8_t)(((u | 0xffffffffu) >= g_tbl.lo[b]) | (b >= nf) |
                                (u < g_tbl.hip[b]) | ((uint64_t)mj < jt2) | (wl < g + 4));
            take[k] = (uint8_t)((d < m) & !((jj & 1) & (x == 0)));
            xs[k] = (jj & 1) ? -(int64_t)x : (int64_t)x;
        }
        for (size_t k = 0; k < BATCH && i < n; k++) {
            if (__builtin_expect(slow[k], 0)) {
                int kept = 0;
                rc = fast2_proposal(s, f, wd[2 * k], wd[2 * k + 1], &out[i], &kept);
                if (rc != 0) {
                    break;
                }
                i += (size_t)kept;
                continue;
            }
            out[i] = xs[k];
            i += take[k];
        }
    }
    OPENSSL_cleanse(wd, sizeof wd);
    OPENSSL_cleanse(xs, sizeof xs);
    return rc;
}

static int fast_run(fs_prg *prg, double sigma, int64_t *out, size_t n, int v1, struct fs_err *err)
{
    struct src *s = NULL;
    struct fast f;
    int rc = 0;

    pthread_once(&g_once, table_build);
    if (g_tbl.rc != 0) {
        return fs_err_set(err, g_tbl.rc, "discrete Gaussian: cannot build the block table");
    }
    s = malloc(sizeof *s);
    if (s == NULL) {
        return fs_err_set(err, FS_ENOMEM, "discrete Gaussian: out of memory");
    }
    memset(s, 0, sizeof *s);
    s->prg = prg;
    s->pos = WORDS;
    s->err = err;
    s->chunk = (g_debug & FS_DGAUSS_DEBUG_BITWISE) != 0 ? 1 : CHUNK;
    fast_init(&f, sigma);
    if (v1) {
        for (size_t i = 0; i < n && rc == 0; i++) {
            rc = fast_one(s, &f, &out[i]);
        }
    } else {
        rc = fast2_run(s, &f, out, n);
    }
    if (f.clo != NULL) {
        cdt_free(f.clo, f.chi, f.cn);
    }
    OPENSSL_cleanse(s, sizeof *s);
    free(s);
    return rc;
}

int fs_dgauss_sample(double sigma, int64_t *out, size_t n, struct fs_err *err)
{
    if (!isfinite(sigma) || sigma < 9.5367431640625e-07 || sigma > SIGMA_MAX) {
        return fs_err_set(err, FS_EINVAL, "fs_dgauss_sample: sigma %g outside [2^-20, 2^52]",
                          sigma);
    }
    if (n > 0 && out == NULL) {
        return fs_err_set(err, FS_EINVAL, "fs_dgauss_sample: out is NULL");
    }
    if (sigma < SIGMA_MIN) {
        return fs_dgauss_sample_reference(sigma, out, n, err);
    }
    return fast_run(NULL, sigma, out, n, 0, err);
}

static int prg_entry(fs_prg *prg, double sigma, int64_t *out, size_t n, int v1, const char *fn,
                     struct fs_err *err)
{
    if (prg == NULL) {
        return fs_err_set(err, FS_EINVAL, "%s: prg is NULL", fn);
    }
    if (!isfinite(sigma) || sigma < 9.5367431640625e-07 || sigma > SIGMA_MAX) {
        return fs_err_set(err, FS_EINVAL, "%s: sigma %g outside [2^-20, 2^52]", fn, sigma);
    }
    if (n > 0 && out == NULL) {
        return fs_err_set(err, FS_EINVAL, "%s: out is NULL", fn);
    }
    if (sigma < SIGMA_MIN) {
        return fs_dgauss_sample_reference_prg(prg, sigma, out, n, err);
    }
    return fast_run(prg, sigma, out, n, v1, err);
}

int fs_dgauss_sample_prg(fs_prg *prg, double sigma, int64_t *out, size_t n, struct fs_err *err)
{
    return prg_entry(prg, sigma, out, n, 0, "fs_dgauss_sample_prg", err);
}

int fs_dgauss_sample_prg_v1(fs_prg *prg, double sigma, int64_t *out, size_t n, struct fs_err *err)
{
    return prg_entry(prg, sigma, out, n, 1, "fs_dgauss_sample_prg_v1", err);
}
