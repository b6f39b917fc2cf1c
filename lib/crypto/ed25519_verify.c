/* Ed25519 signature verification (RFC 8032 §5.1.7), written from the
 * mathematics of RFC 8032 and of Bernstein, Duif, Lange, Schwabe and Yang,
 * "High-speed high-security signatures" (2012).
 *
 * Why our own: OpenSSL 3.0's Ed25519 is its portable code, about 2.5x slower
 * than this, and every party checks every other party's signature in each
 * consistency round of secure aggregation. Only verification is here: its
 * inputs (key, message, signature) are public, so the code may branch and
 * index tables on them (it is NOT constant time and must never see a
 * secret). Key generation and signing stay on OpenSSL.
 *
 * Field GF(p), p = 2^255 - 19: five 51-bit limbs (radix 2^51), products in
 * 128 bits. Curve: -x^2 + y^2 = 1 + d x^2 y^2, d = -121665/121666, points in
 * extended coordinates (X:Y:Z:T), x = X/Z, y = Y/Z, xy = T/Z, with the
 * unified a = -1 addition and doubling of Hisil, Wong, Carter and Dawson,
 * "Twisted Edwards curves revisited" (2008). [S]B - [h]A is one interleaved
 * (Straus) double-scalar multiplication over signed sliding windows (w-NAF):
 * width 5 for A (8 odd multiples built per call), width 8 for the base point
 * B (64 odd multiples, affine, built once per process).
 *
 * Decisions: the same as OpenSSL's cofactorless check on every input except
 * two public-key encodings that RFC 8032 §5.1.3 says do not decode and that
 * OpenSSL 3.0 accepts: a y coordinate >= p (non-canonical) and x = 0 with the
 * sign bit set. We reject both. (A non-canonical R never verifies in either:
 * the computed point is encoded canonically and compared byte for byte.) */
#include "ed25519_int.h"

#include <openssl/err.h>
#include <openssl/evp.h>

#include <pthread.h>
#include <string.h>

__extension__ typedef unsigned __int128 u128;

/* ---- the field GF(2^255 - 19) ---- */

#define MASK51 ((uint64_t)0x7ffffffffffff)

/* Limbs are "loose": results of fe_mul/fe_sq/fe_sub/fe_carry have limbs
 * below 2^52; a sum of two of them (fe_add, no carry) stays below 2^53, and
 * fe_mul/fe_sq accept limbs below 2^54. fe_sub needs its subtrahend below
 * 2^53 (it adds 4p first). */
typedef struct {
    uint64_t v[5];
} fe;

static void fe_set(fe *h, uint64_t small)
{
    h->v[0] = small;
    h->v[1] = 0;
    h->v[2] = 0;
    h->v[3] = 0;
    h->v[4] = 0;
}

static void fe_carry(fe *h)
{
    uint64_t c;

    c = h->v[0] >> 51;
    h->v[0] &= MASK51;
    h->v[1] += c;
    c = h->v[1] >> 51;
    h->v[1] &= MASK51;
    h->v[2] += c;
    c = h->v[2] >> 51;
    h->v[2] &= MASK51;
    h->v[3] += c;
    c = h->v[3] >> 51;
    h->v[3] &= MASK51;
    h->v[4] += c;
    c = h->v[4] >> 51;
    h->v[4] &= MASK51;
    h->v[0] += 19 * c; /* 2^255 = 19 (mod p) */
}

static void fe_add(fe *h, const fe *f, const fe *g)
{
    for (int i = 0; i < 5; i++) {
        h->v[i] = f->v[i] + g->v[i];
    }
}

/* h = f - g, as f + 4p - g (every limb stays nonnegative), then carried. */
static void fe_sub(fe *h, const fe *f, const fe *g)
{
    h->v[0] = f->v[0] + 4 * (MASK51 - 18) - g->v[0];
    for (int i = 1; i < 5; i++) {
        h->v[i] = f->v[i] + 4 * MASK51 - g->v[i];
    }
    fe_carry(h);
}

static void fe_neg(fe *h, const fe *f)
{
    fe z;

    fe_set(&z, 0);
    fe_sub(h, &z, f);
}

/* Five 128-bit column sums to loose limbs. Each sum is below 2^115, so
 * every carry but the last fits 64 bits; the last one times 19 may not. */
/* Inlined: its five 128-bit arguments would otherwise pass through memory. */
__attribute__((always_inline)) static inline void fe_reduce128(fe *h, u128 r0, u128 r1, u128 r2,
                                                               u128 r3, u128 r4)
{
    uint64_t c;
    u128 t;

    r1 += (uint64_t)(r0 >> 51);
    r2 += (uint64_t)(r1 >> 51);
    r3 += (uint64_t)(r2 >> 51);
    r4 += (uint64_t)(r3 >> 51);
    c = (uint64_t)(r4 >> 51);
    t = ((u128)((uint64_t)r0 & MASK51)) + (u128)c * 19;
    h->v[0] = (uint64_t)t & MASK51;
    h->v[1] = ((uint64_t)r1 & MASK51) + (uint64_t)(t >> 51);
    h->v[2] = (uint64_t)r2 & MASK51;
    h->v[3] = (uint64_t)r3 & MASK51;
    h->v[4] = (uint64_t)r4 & MASK51;
}

/* Schoolbook product; the limbs of weight 2^255 and above fold back times
 * 19 (2^255 = 19 mod p). */
static void fe_mul(fe *h, const fe *f, const fe *g)
{
    const uint64_t *a = f->v;
    const uint64_t *b = g->v;
    uint64_t b1 = 19 * b[1];
    uint64_t b2 = 19 * b[2];
    uint64_t b3 = 19 * b[3];
    uint64_t b4 = 19 * b[4];
    u128 r0, r1, r2, r3, r4;

    r0 = (u128)a[0] * b[0] + (u128)a[1] * b4 + (u128)a[2] * b3 + (u128)a[3] * b2 + (u128)a[4] * b1;
    r1 =
        (u128)a[0] * b[1] + (u128)a[1] * b[0] + (u128)a[2] * b4 + (u128)a[3] * b3 + (u128)a[4] * b2;
    r2 = (u128)a[0] * b[2] + (u128)a[1] * b[1] + (u128)a[2] * b[0] + (u128)a[3] * b4 +
         (u128)a[4] * b3;
    r3 = (u128)a[0] * b[3] + (u128)a[1] * b[2] + (u128)a[2] * b[1] + (u128)a[3] * b[0] +
         (u128)a[4] * b4;
    r4 = (u128)a[0] * b[4] + (u128)a[1] * b[3] + (u128)a[2] * b[2] + (u128)a[3] * b[1] +
         (u128)a[4] * b[0];
    fe_reduce128(h, r0, r1, r2, r3, r4);
}

/* The product with itself: the 10 cross terms appear twice. */
static void fe_sq(fe *h, const fe *f)
{
    const uint64_t *a = f->v;
    uint64_t a0x2 = 2 * a[0];
    uint64_t a1x2 = 2 * a[1];
    uint64_t a2x2 = 2 * a[2];
    uint64_t a3x2 = 2 * a[3];
    uint64_t a3x19 = 19 * a[3];
    uint64_t a4x19 = 19 * a[4];
    u128 r0, r1, r2, r3, r4;

    r0 = (u128)a[0] * a[0] + (u128)a1x2 * a4x19 + (u128)a2x2 * a3x19;
    r1 = (u128)a0x2 * a[1] + (u128)a2x2 * a4x19 + (u128)a[3] * a3x19;
    r2 = (u128)a0x2 * a[2] + (u128)a[1] * a[1] + (u128)a3x2 * a4x19;
    r3 = (u128)a0x2 * a[3] + (u128)a1x2 * a[2] + (u128)a[4] * a4x19;
    r4 = (u128)a0x2 * a[4] + (u128)a1x2 * a[3] + (u128)a[2] * a[2];
    fe_reduce128(h, r0, r1, r2, r3, r4);
}

/* h = f^(2^n) */
static void fe_sqn(fe *h, const fe *f, int n)
{
    fe_sq(h, f);
    for (int i = 1; i < n; i++) {
        fe_sq(h, h);
    }
}

static uint64_t load64(const uint8_t *p)
{
    uint64_t x = 0;

    for (int i = 7; i >= 0; i--) {
        x = (x << 8) | p[i];
    }
    return x;
}

/* The low 255 bits of s (bit 255, the sign of x in a point, is ignored);
 * not reduced: values p .. 2^255 - 1 come through as they are. */
static void fe_frombytes(fe *h, const uint8_t s[32])
{
    h->v[0] = load64(s) & MASK51;
    h->v[1] = (load64(s + 6) >> 3) & MASK51;
    h->v[2] = (load64(s + 12) >> 6) & MASK51;
    h->v[3] = (load64(s + 19) >> 1) & MASK51;
    h->v[4] = (load64(s + 24) >> 12) & MASK51;
}

/* The canonical encoding: the unique representative in [0, p), little
 * endian. */
static void fe_tobytes(uint8_t s[32], const fe *f)
{
    fe h = *f;
    uint64_t q;
    uint64_t w[4];

    fe_carry(&h);
    fe_carry(&h); /* now h < 2^255 + 19*2, below 2p */
    /* q = 1 iff h >= p, i.e. iff h + 19 carries out of bit 255 */
    q = (h.v[0] + 19) >> 51;
    q = (h.v[1] + q) >> 51;
    q = (h.v[2] + q) >> 51;
    q = (h.v[3] + q) >> 51;
    q = (h.v[4] + q) >> 51;
    h.v[0] += 19 * q;
    h.v[1] += h.v[0] >> 51;
    h.v[0] &= MASK51;
    h.v[2] += h.v[1] >> 51;
    h.v[1] &= MASK51;
    h.v[3] += h.v[2] >> 51;
    h.v[2] &= MASK51;
    h.v[4] += h.v[3] >> 51;
    h.v[3] &= MASK51;
    h.v[4] &= MASK51; /* subtracts q * 2^255: together h - q p */
    w[0] = h.v[0] | (h.v[1] << 51);
    w[1] = (h.v[1] >> 13) | (h.v[2] << 38);
    w[2] = (h.v[2] >> 26) | (h.v[3] << 25);
    w[3] = (h.v[3] >> 39) | (h.v[4] << 12);
    for (int i = 0; i < 4; i++) {
        for (int j = 0; j < 8; j++) {
            s[8 * i + j] = (uint8_t)(w[i] >> (8 * j));
        }
    }
}

static int fe_eq(const fe *f, const fe *g)
{
    uint8_t a[32], b[32];

    fe_tobytes(a, f);
    fe_tobytes(b, g);
    return memcmp(a, b, 32) == 0;
}

static int fe_iszero(const fe *f)
{
    static const uint8_t zero[32];
    uint8_t a[32];

    fe_tobytes(a, f);
    return memcmp(a, zero, 32) == 0;
}

static int fe_isodd(const fe *f)
{
    uint8_t a[32];

    fe_tobytes(a, f);
    return a[0] & 1;
}

/* t = z^(2^250 - 1) and z11 = z^11, the common start of the two
 * exponentiations below (a chain of 254 squarings and 11 products). */
static void fe_pow2_250_1(fe *t, fe *z11, const fe *z)
{
    fe z2, z9, a, b, c;

    fe_sq(&z2, z);         /* 2 */
    fe_sqn(&a, &z2, 2);    /* 8 */
    fe_mul(&z9, &a, z);    /* 9 */
    fe_mul(z11, &z9, &z2); /* 11 */
    fe_sq(&a, z11);        /* 22 */
    fe_mul(&a, &a, &z9);   /* 31 = 2^5 - 1 */
    fe_sqn(&b, &a, 5);
    fe_mul(&a, &b, &a); /* 2^10 - 1 */
    fe_sqn(&b, &a, 10);
    fe_mul(&b, &b, &a); /* 2^20 - 1 */
    fe_sqn(&c, &b, 20);
    fe_mul(&c, &c, &b); /* 2^40 - 1 */
    fe_sqn(&c, &c, 10);
    fe_mul(&a, &c, &a); /* 2^50 - 1 */
    fe_sqn(&b, &a, 50);
    fe_mul(&b, &b, &a); /* 2^100 - 1 */
    fe_sqn(&c, &b, 100);
    fe_mul(&c, &c, &b); /* 2^200 - 1 */
    fe_sqn(&c, &c, 50);
    fe_mul(t, &c, &a); /* 2^250 - 1 */
}

/* h = z^(p - 2) = 1/z (Fermat); 0 for z = 0. */
static void fe_invert(fe *h, const fe *z)
{
    fe t, z11;

    fe_pow2_250_1(&t, &z11, z);
    fe_sqn(&t, &t, 5);   /* 2^255 - 32 */
    fe_mul(h, &t, &z11); /* 2^255 - 21 = p - 2 */
}

/* h = z^((p - 5) / 8) = z^(2^252 - 3), for square roots. */
static void fe_pow22523(fe *h, const fe *z)
{
    fe t, z11;

    fe_pow2_250_1(&t, &z11, z);
    fe_sqn(&t, &t, 2); /* 2^252 - 4 */
    fe_mul(h, &t, z);
}

/* ---- points ---- */

typedef struct {
    fe X, Y, Z, T;
} pt_ext; /* extended: x = X/Z, y = Y/Z, xy = T/Z */

typedef struct {
    fe X, Y, Z;
} pt_proj; /* projective, enough to double */

typedef struct {
    fe E, F, G, H;
} pt_done; /* a sum or double before its last products: X = EF, Y = GH, Z = FG, T = EH */

typedef struct {
    fe YpX, YmX, Z2, T2d;
} pt_cached; /* an addend: Y + X, Y - X, 2Z, 2dT */

typedef struct {
    fe YpX, YmX, T2d;
} pt_affine; /* an addend with Z = 1: y + x, y - x, 2dxy */

/* Constants, computed once (see setup): d, 2d, sqrt(-1), the odd multiples
 * B, 3B, ..., 127B, the SHA-512 implementation. */
#define WA 5 /* window of A: odd multiples up to 15 A */
#define WB 8 /* window of B: odd multiples up to 127 B */
static fe c_d, c_d2, c_sqrtm1;
static pt_affine c_btab[1 << (WB - 2)];
static EVP_MD *c_sha512;
static int c_ok;
static pthread_once_t c_once = PTHREAD_ONCE_INIT;

static void done_to_proj(pt_proj *r, const pt_done *p)
{
    fe_mul(&r->X, &p->E, &p->F);
    fe_mul(&r->Y, &p->G, &p->H);
    fe_mul(&r->Z, &p->F, &p->G);
}

static void done_to_ext(pt_ext *r, const pt_done *p)
{
    fe_mul(&r->X, &p->E, &p->F);
    fe_mul(&r->Y, &p->G, &p->H);
    fe_mul(&r->Z, &p->F, &p->G);
    fe_mul(&r->T, &p->E, &p->H);
}

static void ext_to_proj(pt_proj *r, const pt_ext *p)
{
    r->X = p->X;
    r->Y = p->Y;
    r->Z = p->Z;
}

static void ext_to_cached(pt_cached *r, const pt_ext *p)
{
    fe_add(&r->YpX, &p->Y, &p->X);
    fe_sub(&r->YmX, &p->Y, &p->X);
    fe_add(&r->Z2, &p->Z, &p->Z);
    fe_mul(&r->T2d, &p->T, &c_d2);
}

/* 2P for a = -1 (doubling formulas of Hisil et al., with E, F, G, H all
 * negated, which leaves X, Y, Z, T unchanged):
 * A = X^2, B = Y^2, C = 2Z^2, E = A + B - (X + Y)^2, G = A - B, F = C + G,
 * H = A + B. */
static void pt_dbl(pt_done *r, const pt_proj *p)
{
    fe a, b, c, s;

    fe_sq(&a, &p->X);
    fe_sq(&b, &p->Y);
    fe_sq(&c, &p->Z);
    fe_add(&c, &c, &c);
    fe_add(&s, &p->X, &p->Y);
    fe_sq(&s, &s);
    fe_add(&r->H, &a, &b);
    fe_sub(&r->E, &r->H, &s);
    fe_sub(&r->G, &a, &b);
    fe_add(&r->F, &c, &r->G);
}

/* P + Q (neg = 0) or P - Q (neg = 1) for Q given as (Y + X, Y - X, 2d T)
 * and d = 2 Z1 Z2: -Q swaps Y + X and Y - X and negates T, which turns
 * F = D - C into D + C and G = D + C into D - C.
 * A = (Y1 - X1)(Y2 - X2), B = (Y1 + X1)(Y2 + X2), C = 2d T1 T2,
 * E = B - A, F = D - C, G = D + C, H = B + A. */
static void pt_add_with(pt_done *r, const pt_ext *p, const fe *ypx, const fe *ymx, const fe *t2d,
                        const fe *d, int neg)
{
    fe a, b, c, t;

    fe_sub(&t, &p->Y, &p->X);
    fe_mul(&a, &t, neg ? ypx : ymx);
    fe_add(&t, &p->Y, &p->X);
    fe_mul(&b, &t, neg ? ymx : ypx);
    fe_mul(&c, &p->T, t2d);
    fe_sub(&r->E, &b, &a);
    fe_add(&r->H, &b, &a);
    if (neg) {
        fe_add(&r->F, d, &c);
        fe_sub(&r->G, d, &c);
    } else {
        fe_sub(&r->F, d, &c);
        fe_add(&r->G, d, &c);
    }
}

/* P +- Q for a cached Q (D = Z1 2 Z2). */
static void pt_add_cached(pt_done *r, const pt_ext *p, const pt_cached *q, int neg)
{
    fe d;

    fe_mul(&d, &p->Z, &q->Z2);
    pt_add_with(r, p, &q->YpX, &q->YmX, &q->T2d, &d, neg);
}

/* The same with an affine addend (Z2 = 1, so D = 2 Z1). */
static void pt_add_affine(pt_done *r, const pt_ext *p, const pt_affine *q, int neg)
{
    fe d;

    fe_add(&d, &p->Z, &p->Z);
    pt_add_with(r, p, &q->YpX, &q->YmX, &q->T2d, &d, neg);
}

static void pt_tobytes(uint8_t s[32], const pt_proj *p)
{
    fe zi, x, y;

    fe_invert(&zi, &p->Z);
    fe_mul(&x, &p->X, &zi);
    fe_mul(&y, &p->Y, &zi);
    fe_tobytes(s, &y);
    s[31] |= (uint8_t)(fe_isodd(&x) << 7);
}

/* RFC 8032 §5.1.3, strictly: y must be below p; x^2 = (y^2 - 1)/(d y^2 + 1)
 * must have a root x = u v^3 (u v^7)^((p-5)/8), possibly times sqrt(-1);
 * x = 0 with the sign bit set is not an encoding. 0 if s does not decode. */
static int pt_frombytes(pt_ext *r, const uint8_t s[32])
{
    fe u, v, v3, vxx, t;
    int sign = s[31] >> 7;
    int i;

    /* y >= p iff bits 0..254 are 2^255 - 19 .. 2^255 - 1 */
    for (i = 1; i < 31 && s[i] == 0xff; i++) {
    }
    if (i == 31 && (s[31] & 0x7f) == 0x7f && s[0] >= 0xed) {
        return 0;
    }
    fe_frombytes(&r->Y, s);
    fe_set(&r->Z, 1);
    fe_sq(&u, &r->Y);
    fe_mul(&v, &u, &c_d);
    fe_sub(&u, &u, &r->Z); /* y^2 - 1 */
    fe_add(&v, &v, &r->Z); /* d y^2 + 1 */
    fe_sq(&v3, &v);
    fe_mul(&v3, &v3, &v); /* v^3 */
    fe_sq(&t, &v3);
    fe_mul(&t, &t, &v);
    fe_mul(&t, &t, &u); /* u v^7 */
    fe_pow22523(&t, &t);
    fe_mul(&t, &t, &v3);
    fe_mul(&r->X, &t, &u); /* u v^3 (u v^7)^((p-5)/8) */
    fe_sq(&vxx, &r->X);
    fe_mul(&vxx, &vxx, &v);
    if (!fe_eq(&vxx, &u)) {
        fe_neg(&t, &u);
        if (!fe_eq(&vxx, &t)) {
            return 0; /* x^2 is not a square */
        }
        fe_mul(&r->X, &r->X, &c_sqrtm1);
    }
    if (fe_iszero(&r->X) && sign) {
        return 0;
    }
    if (fe_isodd(&r->X) != sign) {
        fe_neg(&r->X, &r->X);
    }
    fe_mul(&r->T, &r->X, &r->Y);
    return 1;
}

/* ---- scalars modulo L = 2^252 + 27742317777372353535851937790883648493 ---- */

static const uint64_t sc_L[4] = {0x5812631a5cf5d3edULL, 0x14def9dea2f79cd6ULL, 0, 1ULL << 60};

/* r = (r * 2^32 + w) mod L, for r < L: the quotient is t >> 252 or one less
 * (t / 2^252 exceeds t / L by less than 1 for t < 2^285). */
static void sc_shift_in(uint64_t r[5], uint32_t w)
{
    uint64_t q, borrow = 0, carry = 0;
    uint64_t t[5];

    t[4] = (r[4] << 32) | (r[3] >> 32);
    t[3] = (r[3] << 32) | (r[2] >> 32);
    t[2] = (r[2] << 32) | (r[1] >> 32);
    t[1] = (r[1] << 32) | (r[0] >> 32);
    t[0] = (r[0] << 32) | w;
    q = (t[3] >> 60) | (t[4] << 4);
    for (int i = 0; i < 5; i++) { /* t -= q L */
        u128 m = (u128)q * (i < 4 ? sc_L[i] : 0) + carry;
        uint64_t lo = (uint64_t)m;
        carry = (uint64_t)(m >> 64);
        u128 d = (u128)t[i] - lo - borrow;
        t[i] = (uint64_t)d;
        borrow = (uint64_t)(d >> 64) & 1;
    }
    if (borrow) { /* q was one too many: add L back */
        carry = 0;
        for (int i = 0; i < 5; i++) {
            u128 s = (u128)t[i] + (i < 4 ? sc_L[i] : 0) + carry;
            t[i] = (uint64_t)s;
            carry = (uint64_t)(s >> 64);
        }
    }
    memcpy(r, t, sizeof t);
}

void fs_ed25519_sc_reduce64(uint8_t out[32], const uint8_t x[64])
{
    uint64_t r[5] = {0, 0, 0, 0, 0};

    for (int i = 60; i >= 0; i -= 4) {
        uint32_t w = (uint32_t)x[i] | (uint32_t)x[i + 1] << 8 | (uint32_t)x[i + 2] << 16 |
                     (uint32_t)x[i + 3] << 24;
        sc_shift_in(r, w);
    }
    for (int i = 0; i < 32; i++) {
        out[i] = (uint8_t)(r[i / 8] >> (8 * (i % 8)));
    }
}

/* 1 iff the 32-byte little-endian s is below L. */
static int sc_canonical(const uint8_t s[32])
{
    for (int i = 31; i >= 0; i--) {
        uint8_t l = (uint8_t)(sc_L[i / 8] >> (8 * (i % 8)));
        if (s[i] != l) {
            return s[i] < l;
        }
    }
    return 0; /* s == L */
}

/* Width-w NAF of s < 2^253: out[i] odd in (-2^(w-1), 2^(w-1)) or 0, at least
 * w - 1 zeros after each nonzero digit, s = sum out[i] 2^i. A scan with a
 * carry: at an odd position the next w bits v (plus the carry) become the
 * digit v or v - 2^w; the latter leaves a carry of 1 above the window. */
static void sc_wnaf(int8_t out[256], const uint8_t s[32], int w)
{
    uint64_t k[4];
    uint64_t carry = 0;
    int pos = 0;

    for (int i = 0; i < 4; i++) {
        k[i] = load64(s + 8 * i);
    }
    memset(out, 0, 256);
    while (pos < 256) {
        int idx = pos / 64;
        int sh = pos % 64;
        uint64_t v = k[idx] >> sh;
        if (sh + w > 64 && idx < 3) {
            v |= k[idx + 1] << (64 - sh);
        }
        v &= ((uint64_t)1 << w) - 1;
        if (((v ^ carry) & 1) == 0) {
            pos++;
            continue;
        }
        v += carry;
        if (v & ((uint64_t)1 << (w - 1))) {
            out[pos] = (int8_t)((int64_t)v - ((int64_t)1 << w));
            carry = 1;
        } else {
            out[pos] = (int8_t)v;
            carry = 0;
        }
        pos += w;
    }
}

/* ---- one-time setup ---- */

/* z^e for a 256-bit little-endian exponent (setup only). */
static void fe_pow(fe *h, const fe *z, const uint8_t e[32])
{
    fe r;

    fe_set(&r, 1);
    for (int i = 255; i >= 0; i--) {
        fe_sq(&r, &r);
        if ((e[i / 8] >> (i % 8)) & 1) {
            fe_mul(&r, &r, z);
        }
    }
    *h = r;
}

static void setup_btab(const pt_ext *b)
{
    pt_ext acc = *b, b2;
    pt_cached c2;
    pt_done t;
    pt_proj pp;

    ext_to_proj(&pp, b);
    pt_dbl(&t, &pp);
    done_to_ext(&b2, &t);
    ext_to_cached(&c2, &b2);
    for (size_t i = 0; i < sizeof c_btab / sizeof c_btab[0]; i++) {
        fe zi, x, y, xy;
        if (i > 0) {
            pt_add_cached(&t, &acc, &c2, 0); /* (2i + 1) B */
            done_to_ext(&acc, &t);
        }
        fe_invert(&zi, &acc.Z);
        fe_mul(&x, &acc.X, &zi);
        fe_mul(&y, &acc.Y, &zi);
        fe_add(&c_btab[i].YpX, &y, &x);
        fe_sub(&c_btab[i].YmX, &y, &x);
        fe_mul(&xy, &x, &y);
        fe_mul(&c_btab[i].T2d, &xy, &c_d2);
    }
}

static void setup(void)
{
    uint8_t e[32], enc[32];
    fe t, u;
    pt_ext b;

    /* d = -121665 / 121666 */
    fe_set(&t, 121666);
    fe_invert(&t, &t);
    fe_set(&u, 121665);
    fe_mul(&t, &t, &u);
    fe_neg(&c_d, &t);
    fe_add(&c_d2, &c_d, &c_d);
    fe_carry(&c_d2);
    /* sqrt(-1) = 2^((p - 1) / 4), (p - 1) / 4 = 2^253 - 5 */
    memset(e, 0xff, sizeof e);
    e[0] = 0xfb;
    e[31] = 0x1f;
    fe_set(&t, 2);
    fe_pow(&c_sqrtm1, &t, e);
    /* B: y = 4/5, x even */
    fe_set(&t, 5);
    fe_invert(&t, &t);
    fe_set(&u, 4);
    fe_mul(&t, &t, &u);
    fe_tobytes(enc, &t);
    if (!pt_frombytes(&b, enc)) {
        return; /* cannot happen; c_ok stays 0 */
    }
    setup_btab(&b);
    c_sha512 = EVP_MD_fetch(NULL, "SHA512", NULL);
    c_ok = c_sha512 != NULL;
    ERR_clear_error();
}

/* ---- verification ---- */

/* The odd multiples A, 3A, ..., 15A as addends. */
static void build_atab(pt_cached tab[1 << (WA - 2)], const pt_ext *a)
{
    pt_ext a2, acc = *a;
    pt_cached a2c;
    pt_proj pp;
    pt_done t;

    ext_to_cached(&tab[0], a);
    ext_to_proj(&pp, a);
    pt_dbl(&t, &pp);
    done_to_ext(&a2, &t);
    ext_to_cached(&a2c, &a2);
    for (size_t j = 1; j < (size_t)1 << (WA - 2); j++) {
        pt_add_cached(&t, &acc, &a2c, 0);
        done_to_ext(&acc, &t);
        ext_to_cached(&tab[j], &acc);
    }
}

/* r = [s]B - [h]A, interleaved: one doubling per bit, one addition per
 * nonzero digit of either w-NAF. Between additions only X, Y, Z are
 * carried (doubling needs no T), and so is the result. */
static void double_scalarmult(pt_proj *r, const uint8_t h[32], const pt_ext *a, const uint8_t s[32])
{
    int8_t dh[256], ds[256];
    pt_cached atab[1 << (WA - 2)];
    pt_ext e;
    pt_done t;
    int i;

    sc_wnaf(dh, h, WA);
    sc_wnaf(ds, s, WB);
    build_atab(atab, a);
    fe_set(&r->X, 0);
    fe_set(&r->Y, 1);
    fe_set(&r->Z, 1);
    for (i = 255; i >= 0 && dh[i] == 0 && ds[i] == 0; i--) {
    }
    for (; i >= 0; i--) {
        pt_dbl(&t, r);
        if (dh[i] == 0 && ds[i] == 0) {
            done_to_proj(r, &t);
            continue;
        }
        done_to_ext(&e, &t);
        if (dh[i] != 0) { /* - [h]A: subtract positive digits, add negative ones */
            pt_add_cached(&t, &e, &atab[(dh[i] > 0 ? dh[i] : -dh[i]) / 2], dh[i] > 0);
            if (ds[i] != 0) {
                done_to_ext(&e, &t);
            }
        }
        if (ds[i] != 0) {
            pt_add_affine(&t, &e, &c_btab[(ds[i] > 0 ? ds[i] : -ds[i]) / 2], ds[i] < 0);
        }
        done_to_proj(r, &t);
    }
}

int fs_ed25519_point_ok(const uint8_t enc[32])
{
    pt_ext p;

    pthread_once(&c_once, setup);
    return c_ok && pt_frombytes(&p, enc);
}

static int hram(uint8_t h[32], const uint8_t sig[64], const uint8_t pub[32], const void *msg,
                size_t msg_len)
{
    uint8_t d[64];
    unsigned int dlen = 0;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    int ok = md != NULL && EVP_DigestInit_ex(md, c_sha512, NULL) == 1 &&
             EVP_DigestUpdate(md, sig, 32) == 1 && EVP_DigestUpdate(md, pub, 32) == 1 &&
             (msg_len == 0 || EVP_DigestUpdate(md, msg, msg_len) == 1) &&
             EVP_DigestFinal_ex(md, d, &dlen) == 1 && dlen == 64;

    EVP_MD_CTX_free(md);
    if (!ok) {
        ERR_clear_error();
        return -1;
    }
    fs_ed25519_sc_reduce64(h, d);
    return 0;
}

int fs_ed25519_verify_sig(const uint8_t sig[64], const uint8_t pub[32], const void *msg,
                          size_t msg_len)
{
    uint8_t h[32], rcheck[32];
    pt_ext a;
    pt_proj r;

    pthread_once(&c_once, setup);
    if (!c_ok) {
        return -1;
    }
    if (!sc_canonical(sig + 32) || !pt_frombytes(&a, pub)) {
        return 0;
    }
    if (hram(h, sig, pub, msg, msg_len) != 0) {
        return -1;
    }
    double_scalarmult(&r, h, &a, sig + 32);
    pt_tobytes(rcheck, &r);
    return memcmp(rcheck, sig, 32) == 0;
}
