/* Every byte a SecAgg+ job puts on the wire, pinned: deterministic clients
 * (fs_secagg_client_new_det, as the agents build them) with fixed identity
 * keys, secrets and job id run two aggregations of 8 parties (neighbour
 * degree 4), the second with a party dropping before its masked input, and
 * the SHA-256 of all messages (advertisements and their signatures, share
 * ciphertexts, masked vectors, consistency signatures, unmasking shares)
 * and of both sums must equal the digest this code base produced before its
 * key handling and signature checks were made faster. A change in any
 * message byte, in a key derivation or in the result fails here. */
#include "crypto/ed25519.h"
#include "crypto/sha256.h"
#include "proto/secagg.h"
#include "test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N     8
#define LEN   1000
#define CHUNK 256
#define AGGS  2

/* digest of the whole job (hex), as produced by the code before the change */
static const char WANT[] = "0217006dc7dd3bd76e5579aa382ac924d9c938ade9c99382628484fe7445ee5f";

static fs_sha256_ctx *g_h;

static void absorb(const void *p, size_t n)
{
    struct fs_err err = {0};

    CHECK_OK(fs_sha256_update(g_h, p, n, &err), &err);
}

static void absorb_u32(uint32_t v)
{
    uint8_t b[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};

    absorb(b, sizeof b);
}

static void setup(fs_secagg_server *s, fs_secagg_client **c, const struct fs_secagg_config *cfg)
{
    struct fs_err err = {0};
    const struct fs_secagg_adv *roster;
    size_t k = 0;

    for (uint32_t i = 1; i <= N; i++) {
        uint8_t sk[32], secret[32];
        struct fs_secagg_adv a;
        memset(sk, (int)(0x40 + i), sizeof sk);
        memset(secret, (int)(0x80 + i), sizeof secret);
        CHECK_OK(fs_secagg_client_new_det(cfg, i, sk, secret, &c[i], &err), &err);
        CHECK_OK(fs_secagg_client_advertise(c[i], &a, &err), &err);
        absorb(a.sign_pk, 32);
        absorb(a.c_pk, 32);
        absorb(a.s_pks, (size_t)a.nkeys * 32);
        absorb(a.sig, sizeof a.sig);
        CHECK_OK(fs_secagg_server_add_adv(s, &a, &err), &err);
    }
    CHECK_OK(fs_secagg_server_close_adv(s, &err), &err);
    roster = fs_secagg_server_roster(s, &k);
    for (uint32_t i = 1; i <= N; i++) {
        struct fs_secagg_share_ct *cts = NULL;
        size_t nct = 0;
        CHECK_OK(fs_secagg_client_share_keys(c[i], roster, k, &cts, &nct, &err), &err);
        for (size_t q = 0; q < nct; q++) {
            absorb_u32(cts[q].from);
            absorb_u32(cts[q].to);
            absorb(cts[q].ct, cts[q].len);
        }
        CHECK_OK(fs_secagg_server_add_shares(s, i, cts, nct, &err), &err);
        fs_secagg_share_cts_free(cts, nct);
    }
    CHECK_OK(fs_secagg_server_close_shares(s, &err), &err);
    for (uint32_t i = 1; i <= N; i++) {
        const struct fs_secagg_share_ct **mine = NULL;
        struct fs_secagg_share_ct flat[N];
        size_t km = 0;
        CHECK_OK(fs_secagg_server_shares_for(s, i, &mine, &km, &err), &err);
        for (size_t q = 0; q < km && q < N; q++) {
            flat[q] = *mine[q];
        }
        CHECK_OK(fs_secagg_client_receive_shares(c[i], flat, km, &err), &err);
        free(mine);
    }
}

/* Aggregation r; party `drop` (0: none) sends no masked input. */
static void aggregate(fs_secagg_server *s, fs_secagg_client **c, uint32_t r, uint32_t drop)
{
    struct fs_err err = {0};
    uint64_t x[LEN], want[LEN];
    const uint32_t *set;
    const uint64_t *sum = NULL;
    size_t na = 0, n3 = 0, n4 = 0;

    memset(want, 0, sizeof want);
    CHECK_OK(fs_secagg_server_begin(s, r, LEN, &err), &err);
    set = fs_secagg_server_set(s, 0, &na);
    CHECK(na == N);
    for (uint32_t i = 1; i <= N; i++) {
        for (uint64_t w = 0; w < LEN; w++) {
            x[w] = (uint64_t)i * 0x9E3779B97F4A7C15ull + w * 7 + r;
            want[w] += i == drop ? 0 : x[w];
        }
        CHECK_OK(fs_secagg_client_begin(c[i], r, LEN, set, na, &err), &err);
        CHECK_OK(fs_secagg_client_mask(c[i], 0, x, x, LEN, &err), &err);
        if (i == drop) {
            continue;
        }
        absorb(x, sizeof x);
        for (uint64_t off = 0; off < LEN; off += CHUNK) {
            size_t m = LEN - off < CHUNK ? LEN - off : CHUNK;
            CHECK_OK(fs_secagg_server_add_masked(s, i, off / CHUNK, x + off, m, &err), &err);
        }
    }
    CHECK_OK(fs_secagg_server_close_masked(s, &err), &err);
    set = fs_secagg_server_set(s, 3, &n3);
    CHECK(n3 == (drop != 0 ? N - 1 : N));
    for (size_t q = 0; q < n3; q++) {
        uint8_t sig[FS_SECAGG_SIG_LEN];
        CHECK_OK(fs_secagg_client_consistency(c[set[q]], set, n3, sig, &err), &err);
        absorb(sig, sizeof sig);
        CHECK_OK(fs_secagg_server_add_consistency(s, set[q], sig, &err), &err);
    }
    CHECK_OK(fs_secagg_server_close_consistency(s, &err), &err);
    set = fs_secagg_server_set(s, 4, &n4);
    for (size_t q = 0; q < n4; q++) {
        struct fs_secagg_reveal *rv = NULL;
        size_t nrv = 0;
        CHECK_OK(
            fs_secagg_client_unmask(c[set[q]], set, fs_secagg_server_sigs(s), n4, &rv, &nrv, &err),
            &err);
        for (size_t j = 0; j < nrv; j++) {
            absorb_u32(rv[j].about);
            absorb(&rv[j].kind, 1);
            absorb(rv[j].share, sizeof rv[j].share);
        }
        CHECK_OK(fs_secagg_server_add_reveals(s, set[q], rv, nrv, &err), &err);
        free(rv);
    }
    CHECK_OK(fs_secagg_server_finish(s, &sum, &err), &err);
    CHECK(sum != NULL && memcmp(sum, want, sizeof want) == 0);
    if (sum != NULL) {
        absorb(sum, LEN * sizeof *sum);
    }
}

static void test_job_bytes_pinned(void)
{
    struct fs_err err = {0};
    struct fs_secagg_config cfg;
    fs_secagg_server *s = NULL;
    fs_secagg_client *c[N + 1] = {0};
    uint8_t dig[32];
    char hex[65];

    memset(&cfg, 0, sizeof cfg);
    cfg.n = N;
    cfg.t = 5;
    cfg.aggregations = AGGS;
    cfg.chunk_words = CHUNK;
    cfg.degree = 4;
    cfg.share_t = 3;
    memset(cfg.job_id, 0x5a, sizeof cfg.job_id);
    CHECK_OK(fs_sha256_new(&g_h, &err), &err);
    CHECK_OK(fs_secagg_server_new(&cfg, NULL, &s, &err), &err);
    if (g_h == NULL || s == NULL) {
        return;
    }
    setup(s, c, &cfg);
    aggregate(s, c, 0, 0);
    aggregate(s, c, 1, 8);
    CHECK_OK(fs_sha256_final(g_h, dig, &err), &err);
    for (size_t i = 0; i < 32; i++) {
        snprintf(hex + 2 * i, 3, "%02x", dig[i]);
    }
    CHECK_MSG(strcmp(hex, WANT) == 0, "job digest %s, want %s", hex, WANT);
    fs_sha256_free(g_h);
    fs_secagg_server_free(s);
    for (uint32_t i = 1; i <= N; i++) {
        fs_secagg_client_free(c[i]);
    }
}

int main(void)
{
    RUN(test_job_bytes_pinned);
    return TEST_END("test_secagg_golden");
}
