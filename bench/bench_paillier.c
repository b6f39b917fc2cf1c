/* Paillier at 3072 bits on one core: key generation, textbook / DJN /
 * DJN + fixed-base table encryption, CRT and non-CRT decryption, homomorphic
 * addition, scalar multiplication by a 64-bit constant, serialization and
 * packing; ratios against the baselines and the published figures
 * (docs/references.md); the seed-mode noise exchange's operations with the
 * arithmetic before and after the CRT / comb work (party response and base,
 * server base, 20 selectors, 19 seeds decrypted; CPU ms and ratio; the 19
 * seeds of answers shifted into their slots at decryption against answers
 * to selectors that carry the slots; and one product modulo n^2 by mpz and
 * by Montgomery); a window-width sweep for the
 * DJN table; CRT decryption on two threads; the server's decryption of a
 * sync's 19 seeds on 1 and N threads and ahead; the same exchange in ot
 * mode (Bellare-Micali oblivious transfer on P-256) next to seed mode, per
 * job and per sync, through noise_exchange.h; peak RSS. Asserts nothing;
 * about 50 s. */
#include "crypto/paillier.h"
#include "crypto/paillier_mont.h"
#include "crypto/rand.h"
#include "proto/noise_exchange.h"

#include <openssl/crypto.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define BITS     FS_PAILLIER_DEFAULT_BITS
#define NCIPHERS 64 /* distinct inputs cycled through by the loops */

static double clock_s(clockid_t id)
{
    struct timespec ts;

    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double now(void)
{
    return clock_s(CLOCK_MONOTONIC);
}

static void die(const char *what, const struct fs_err *err)
{
    fprintf(stderr, "bench_paillier: %s: %s\n", what, err->msg);
    exit(1);
}

static void rand_below(mpz_t x, mpz_srcptr bound)
{
    uint8_t buf[FS_PAILLIER_MAX_BITS / 8 + 8];
    size_t nb = (mpz_sizeinbase(bound, 2) + 7) / 8 + 8;
    struct fs_err err = {0};

    if (fs_rand_bytes(buf, nb, &err) != 0) {
        die("rand", &err);
    }
    mpz_import(x, nb, 1, 1, 1, 0, buf);
    mpz_mod(x, x, bound);
}

struct ctx {
    fs_paillier_sk *sk;
    const fs_paillier_pk *pk;
    const fs_paillier_djn *djn; /* the randomizer under test, NULL = textbook */
    mpz_t m[NCIPHERS];
    mpz_t c[NCIPHERS];
    mpz_t k;
    mpz_t out;
    uint8_t *buf;
    struct fs_paillier_packing pp;
    int64_t v[64];
};

typedef int (*op_fn)(struct ctx *x, int i, struct fs_err *err);

static int op_encrypt(struct ctx *x, int i, struct fs_err *err)
{
    return fs_paillier_encrypt(x->pk, x->djn, x->out, x->m[i % NCIPHERS], err);
}

static int op_decrypt(struct ctx *x, int i, struct fs_err *err)
{
    return fs_paillier_decrypt(x->sk, x->out, x->c[i % NCIPHERS], err);
}

static int op_decrypt_nocrt(struct ctx *x, int i, struct fs_err *err)
{
    return fs_paillier_decrypt_nocrt(x->sk, x->out, x->c[i % NCIPHERS], err);
}

static int op_add(struct ctx *x, int i, struct fs_err *err)
{
    return fs_paillier_add(x->pk, x->out, x->c[i % NCIPHERS], x->c[(i + 1) % NCIPHERS], err);
}

static int op_mul_scalar(struct ctx *x, int i, struct fs_err *err)
{
    /* a full 64-bit constant, top bit set */
    mpz_set_ui(x->k, 0x8000000000000000ul | (0x9e3779b97f4a7c15ul * (unsigned long)(i + 1)));
    return fs_paillier_mul_scalar(x->pk, x->out, x->c[i % NCIPHERS], x->k, err);
}

static int op_ct_export(struct ctx *x, int i, struct fs_err *err)
{
    return fs_paillier_ct_export(x->pk, x->c[i % NCIPHERS], x->buf, fs_paillier_ct_size(x->pk),
                                 err);
}

static int op_ct_import(struct ctx *x, int i, struct fs_err *err)
{
    (void)i;
    return fs_paillier_ct_import(x->pk, x->out, x->buf, fs_paillier_ct_size(x->pk), err);
}

static int op_pack(struct ctx *x, int i, struct fs_err *err)
{
    (void)i;
    return fs_paillier_pack(&x->pp, x->pk, x->v, x->pp.slots, x->out, err);
}

static int op_unpack(struct ctx *x, int i, struct fs_err *err)
{
    (void)i;
    return fs_paillier_unpack(&x->pp, x->pk, x->out, x->v, x->pp.slots, err);
}

struct timing {
    double cpu; /* seconds per op, best round, process CPU time */
    double wall;
};

/* Best of `rounds` rounds of `iters` calls each: other jobs on a shared
 * machine only ever make a round slower. */
static struct timing measure(op_fn op, struct ctx *x, int iters, int rounds)
{
    struct timing best = {1e30, 1e30};
    struct fs_err err = {0};

    for (int r = 0; r < rounds; r++) {
        double c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
        double w0 = now();
        for (int i = 0; i < iters; i++) {
            if (op(x, r * iters + i, &err) != 0) {
                die("operation", &err);
            }
        }
        double c = (clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0) / iters;
        double w = (now() - w0) / iters;
        best.cpu = c < best.cpu ? c : best.cpu;
        best.wall = w < best.wall ? w : best.wall;
    }
    return best;
}

static void fmt_time(char *out, size_t len, double s)
{
    if (s < 1e-4) {
        snprintf(out, len, "%.2f us", 1e6 * s);
    } else {
        snprintf(out, len, "%.3f ms", 1e3 * s);
    }
}

static void row(const char *name, int iters, int rounds, struct timing t, const char *ref)
{
    char cpu[32];
    char wall[32];

    fmt_time(cpu, sizeof cpu, t.cpu);
    fmt_time(wall, sizeof wall, t.wall);
    printf("| %-42s | %3d x %-5d | %11s | %11s | %9.1f | %-9s |\n", name, rounds, iters, cpu, wall,
           1.0 / t.cpu, ref);
}

struct thread_arg {
    struct ctx *x;
    int iters;
    int offset;
};

static void *decrypt_thread(void *p)
{
    struct thread_arg *a = p;
    struct fs_err err = {0};
    mpz_t m;

    mpz_init(m);
    for (int i = 0; i < a->iters; i++) {
        if (fs_paillier_decrypt(a->x->sk, m, a->x->c[(i + a->offset) % NCIPHERS], &err) != 0) {
            die("decrypt", &err);
        }
    }
    mpz_clear(m);
    return NULL;
}

static double bench_decrypt_threads(struct ctx *x, int nthreads, int iters_each)
{
    pthread_t th[8];
    struct thread_arg args[8];
    double t0 = now();

    for (int t = 0; t < nthreads; t++) {
        args[t].x = x;
        args[t].iters = iters_each;
        args[t].offset = t * 7;
        if (pthread_create(&th[t], NULL, decrypt_thread, &args[t]) != 0) {
            fprintf(stderr, "bench_paillier: pthread_create failed\n");
            exit(1);
        }
    }
    for (int t = 0; t < nthreads; t++) {
        pthread_join(th[t], NULL);
    }
    return now() - t0;
}

static void window_sweep(struct ctx *x)
{
    static const unsigned widths[] = {3, 4, 5, 6, 7, 8};

    printf("\nDJN fixed-base table, L = %u-bit exponent, by window width w "
           "(best of 3 x 50 encryptions, CPU time):\n\n",
           FS_PAILLIER_DJN_EXP_BITS);
    printf("| w | table MiB | build ms | encryption ms |\n|---|---|---|---|\n");
    for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++) {
        struct fs_err err = {0};
        fs_paillier_djn *d = NULL;
        double t0 = now();
        double build;
        struct timing t;

        if (fs_paillier_djn_new(&d, x->pk, 0, widths[i], &err) != 0) {
            die("djn_new", &err);
        }
        build = now() - t0;
        x->djn = d;
        t = measure(op_encrypt, x, 50, 3);
        printf("| %u | %.1f | %.0f | %.3f |\n", widths[i],
               (double)fs_paillier_djn_table_bytes(d) / (1 << 20), 1e3 * build, 1e3 * t.cpu);
        fs_paillier_djn_free(d);
    }
    x->djn = NULL;
}

/* ---- the seed-mode noise exchange: old and new arithmetic ---------------- */

#define NX_PARTIES 20 /* the ratio job: 20 parties, 19 seeds recovered per sync */
#define NX_SEED    256u

/* Best CPU seconds of `rounds` runs of fn(arg). */
static double best_cpu(void (*fn)(void *), void *arg, int rounds)
{
    double best = 1e30;

    for (int r = 0; r < rounds; r++) {
        double c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
        fn(arg);
        double c = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
        best = c < best ? c : best;
    }
    return best;
}

struct nx {
    const fs_paillier_sk *sk;
    const fs_paillier_pk *pk;
    const fs_paillier_djn *djn; /* selector or party randomizer */
    unsigned window;
    int crt;  /* server: fs_paillier_djn_new_crt */
    int comb; /* party: fs_paillier_djn_new_comb */
    mpz_t sel, seed, out, n2;
    mpz_t resp[NX_PARTIES - 1];
    mpz_t resp_sh[NX_PARTIES - 1]; /* answers to selectors of 2^(256 t) */
    mpz_t got[2];
    mpz_t got_sh;
    size_t slots;                         /* seed group size */
    int packed_p;                         /* 1: decrypt_packed_p, 0: decrypt_packed (both primes) */
    const fs_paillier_djn *variant[2][2]; /* [party, server][old, new] */
};

enum nx_row { NX_RESPONSE, NX_PARTY_BASE, NX_SERVER_BASE, NX_SELECTORS, NX_DECRYPT };

/* Configure x for one row's old (which 0) or new (1) arithmetic. */
static void nx_set(struct nx *x, enum nx_row row, int which)
{
    unsigned bits = fs_paillier_pk_bits(x->pk);

    x->crt = row == NX_SERVER_BASE && which;
    x->comb = row == NX_PARTY_BASE && which;
    x->window = row == NX_PARTY_BASE ? 3 : FS_PAILLIER_DJN_WINDOW;
    x->djn = x->variant[row == NX_SELECTORS][which];
    x->packed_p = which;
    x->slots = which ? (bits / 2 - 1) / NX_SEED : (bits - 1) / NX_SEED;
}

/* Best CPU seconds of old and new, run alternately `rounds` times each (a
 * loaded machine slows both alike). */
static void paired(struct nx *x, void (*fn)(void *), enum nx_row row, int rounds, double *old_s,
                   double *new_s)
{
    *old_s = *new_s = 1e30;
    for (int r = 0; r < rounds; r++) {
        for (int which = 0; which < 2; which++) {
            nx_set(x, row, which);
            double c = best_cpu(fn, x, 1);
            double *best = which ? new_s : old_s;
            *best = c < *best ? c : *best;
        }
    }
}

static void nx_die(int rc, const char *what, const struct fs_err *err)
{
    if (rc != 0) {
        die(what, err);
    }
}

/* A party's response: selector^seed (mpz_powm_sec) re-randomized by hs^a. */
static void nx_response(void *p)
{
    struct nx *x = p;
    struct fs_err err = {0};

    mpz_powm_sec(x->out, x->sel, x->seed, x->n2);
    nx_die(fs_paillier_rerandomize(x->pk, x->djn, x->out, x->out, &err), "rerandomize", &err);
}

static void nx_djn_new(void *p)
{
    struct nx *x = p;
    struct fs_err err = {0};
    fs_paillier_djn *d = NULL;

    nx_die(x->crt    ? fs_paillier_djn_new_crt(&d, x->sk, 0, x->window, NULL, &err)
           : x->comb ? fs_paillier_djn_new_comb(&d, x->pk, 0, NULL, &err)
                     : fs_paillier_djn_new(&d, x->pk, 0, x->window, &err),
           "djn_new", &err);
    fs_paillier_djn_free(d);
}

static void nx_selectors(void *p)
{
    struct nx *x = p;
    struct fs_err err = {0};

    for (int i = 0; i < NX_PARTIES; i++) {
        mpz_set_ui(x->seed, i == 7 ? 0u : 1u);
        nx_die(fs_paillier_encrypt(x->pk, x->djn, x->out, x->seed, &err), "encrypt", &err);
    }
}

static void nx_decrypt_groups(void *p)
{
    struct nx *x = p;
    struct fs_err err = {0};
    mpz_srcptr cs[NX_PARTIES - 1];
    size_t n = NX_PARTIES - 1;

    for (size_t i = 0; i < n; i++) {
        cs[i] = x->resp[i];
    }
    mpz_set_ui(x->got[x->packed_p], 0);
    for (size_t g0 = 0; g0 < n; g0 += x->slots) {
        size_t cnt = n - g0 < x->slots ? n - g0 : x->slots;
        nx_die(x->packed_p
                   ? fs_paillier_decrypt_packed_p(x->sk, x->out, cs + g0, cnt, NX_SEED, &err)
                   : fs_paillier_decrypt_packed(x->sk, x->out, cs + g0, cnt, NX_SEED, &err),
               "decrypt", &err);
        /* all seeds of all groups, for the comparison */
        mpz_mul_2exp(x->out, x->out, NX_SEED * g0);
        mpz_add(x->got[x->packed_p], x->got[x->packed_p], x->out);
    }
}

/* The 19 seeds from answers to selectors that carry the slots: each
 * group's answers multiplied modulo p^2, decrypted once modulo p. */
static void nx_decrypt_sums(void *p)
{
    struct nx *x = p;
    struct fs_err err = {0};
    mpz_srcptr cs[NX_PARTIES - 1];
    size_t n = NX_PARTIES - 1;

    for (size_t i = 0; i < n; i++) {
        cs[i] = x->resp_sh[i];
    }
    mpz_set_ui(x->got_sh, 0);
    for (size_t g0 = 0; g0 < n; g0 += x->slots) {
        size_t cnt = n - g0 < x->slots ? n - g0 : x->slots;
        nx_die(fs_paillier_decrypt_sum_p(x->sk, x->out, cs + g0, cnt, &err), "decrypt", &err);
        mpz_mul_2exp(x->out, x->out, NX_SEED * g0);
        mpz_add(x->got_sh, x->got_sh, x->out);
    }
}

static double ratio_row(const char *what, double old_s, double new_s)
{
    printf("| %-44s | %9.2f | %9.2f | %5.2f |\n", what, 1e3 * old_s, 1e3 * new_s, old_s / new_s);
    return old_s - new_s;
}

/* One modular multiplication modulo n^2 (the step of a party's djn_pow):
 * mpz_mul + mpz_mod against a constant-time Montgomery product. */
static void mont_step_compare(const fs_paillier_pk *pk)
{
    struct fs_err err = {0};
    struct fs_mont mt;
    mpz_t n2, a, b;
    mp_limb_t *x, *y, *tp;
    const int iters = 2000;
    double c0, t_old, t_new;

    mpz_inits(n2, a, b, NULL);
    mpz_mul(n2, fs_paillier_pk_n(pk), fs_paillier_pk_n(pk));
    rand_below(a, n2);
    rand_below(b, n2);
    nx_die(fs_mont_init(&mt, n2, &err), "mont", &err);
    x = calloc((size_t)mt.n, sizeof *x);
    y = calloc((size_t)mt.n, sizeof *y);
    tp = calloc((size_t)fs_mont_scratch(&mt), sizeof *tp);
    if (x == NULL || y == NULL || tp == NULL) {
        die("alloc", &err);
    }
    mpn_copyi(x, mpz_limbs_read(a), (mp_size_t)mpz_size(a));
    mpn_copyi(y, mpz_limbs_read(b), (mp_size_t)mpz_size(b));
    c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
    for (int i = 0; i < iters; i++) {
        mpz_mul(a, a, b);
        mpz_mod(a, a, n2);
    }
    t_old = (clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0) / iters;
    c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
    for (int i = 0; i < iters; i++) {
        fs_mont_mul(&mt, x, x, y, tp);
    }
    t_new = (clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0) / iters;
    printf("  one product modulo n^2 (a party's djn_pow step): mpz_mul + mpz_mod %.2f us, "
           "Montgomery (mpn_sec_mul + REDC) %.2f us (%.2fx)\n",
           1e6 * t_old, 1e6 * t_new, t_old / t_new);
    free(x);
    free(y);
    free(tp);
    fs_mont_clear(&mt);
    mpz_clears(n2, a, b, NULL);
}

/* Wall seconds now. */
static double wall_s(void)
{
    return clock_s(CLOCK_MONOTONIC);
}

/* Wall seconds of the server's finish of one sync of NX_PARTIES parties
 * (its selectors restored, every response added; answers `gap_ms` apart
 * when > 0), on `threads` threads, with or without groups decrypted ahead. */
static double nx_finish_once(fs_noisex_server *s, const uint32_t *ids, const uint8_t *sel,
                             const uint8_t *resp, size_t rs, unsigned threads, int ahead,
                             long gap_ms, uint8_t *digest, unsigned *ahead_n)
{
    struct fs_err err = {0};
    struct fs_noisex_result res = {0};
    struct timespec gap = {0, gap_ms * 1000000L};
    size_t cs = fs_noisex_server_ct_size(s);
    double t0;

    nx_die(fs_noisex_server_restore(s, 1, ids, NX_PARTIES, sel, NX_PARTIES * cs, &err), "restore",
           &err);
    fs_noisex_server_set_threads(s, threads, ahead);
    for (uint32_t i = 0; i < NX_PARTIES; i++) {
        nx_die(fs_noisex_server_add_response(s, ids[i], resp + i * rs, rs, &err), "response", &err);
        if (gap_ms > 0) {
            nanosleep(&gap, NULL);
        }
    }
    t0 = wall_s();
    nx_die(fs_noisex_server_finish(s, &res, &err), "finish", &err);
    t0 = wall_s() - t0;
    /* the seeds, folded: equal for every configuration */
    memset(digest, 0, 32);
    for (size_t q = 0; q < res.removed; q++) {
        for (int b = 0; b < 32; b++) {
            digest[b] ^= (uint8_t)(res.seeds[q][b] + 31 * q);
        }
    }
    *ahead_n = res.ahead;
    fs_noisex_result_clear(&res);
    return t0;
}

/* The 19 seeds of a sync decrypted by the noise exchange server itself: the
 * groups on 1 and on N threads (wall ms, best of 5 alternate runs), and with
 * the complete groups decrypted in the background while the answers came. */
static void nx_threads_section(const fs_paillier_sk *sk)
{
    struct fs_err err = {0};
    struct fs_noisex_params p = {FS_NOISEX_SEED, NX_PARTIES, 0, 0};
    fs_noisex_server *s = NULL;
    fs_noisex_client *cl = NULL;
    uint32_t ids[NX_PARTIES];
    uint8_t *skb = NULL, *pk = NULL, *sel = NULL, *resp = NULL;
    uint8_t seed[32], dg[3][32];
    size_t skl = fs_paillier_sk_size(sk), pkl, cs, rs, len = 0;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned n = cpus < 2 ? 2u : cpus > 64 ? 64u : (unsigned)cpus;
    double best[3] = {1e30, 1e30, 1e30};
    unsigned ahead_n[3] = {0, 0, 0};

    skb = malloc(skl);
    nx_die(skb == NULL ? FS_ENOMEM : fs_paillier_sk_export(sk, skb, skl, &err), "sk", &err);
    nx_die(fs_noisex_server_new_from_key(&p, skb, skl, &s, &err), "server", &err);
    OPENSSL_cleanse(skb, skl);
    free(skb);
    pkl = fs_noisex_server_pk_size(s);
    cs = fs_noisex_server_ct_size(s);
    rs = fs_noisex_server_response_size(s);
    pk = malloc(pkl);
    sel = malloc(NX_PARTIES * cs);
    resp = malloc(NX_PARTIES * rs);
    nx_die(pk == NULL || sel == NULL || resp == NULL ? FS_ENOMEM
                                                     : fs_noisex_server_pk_export(s, pk, pkl, &err),
           "pk", &err);
    nx_die(fs_noisex_client_new(&p, pk, pkl, &cl, &err), "client", &err);
    for (uint32_t i = 0; i < NX_PARTIES; i++) {
        ids[i] = i + 1;
    }
    nx_die(fs_noisex_server_begin(s, 1, ids, NX_PARTIES, &err), "begin", &err);
    memcpy(sel, fs_noisex_server_selectors(s, &len), NX_PARTIES * cs);
    for (uint32_t i = 0; i < NX_PARTIES; i++) {
        nx_die(fs_rand_bytes(seed, sizeof seed, &err), "seed", &err);
        nx_die(fs_noisex_client_respond_seed(cl, sel + i * cs, cs, seed, resp + i * rs, rs, &err),
               "respond", &err);
    }
    fs_noisex_server_end(s);
    for (int r = 0; r < 5; r++) {
        for (int v = 0; v < 3; v++) {
            double w = nx_finish_once(s, ids, sel, resp, rs, v == 0 ? 1u : n, v == 2,
                                      v == 2 ? 2 : 0, dg[v], &ahead_n[v]);
            best[v] = w < best[v] ? w : best[v];
        }
    }
    printf("\nserver: decrypt 19 seeds (a sync), threaded (wall ms, best of 5 alternate runs, "
           "%u online CPUs):\n\n",
           (unsigned)(cpus < 1 ? 1 : cpus));
    printf("| %-58s | %9s |\n|---|---|\n", "finish of a sync's noise exchange", "wall ms");
    printf("| %-58s | %9.2f |\n", "1 thread, nothing ahead (as before)", 1e3 * best[0]);
    char what[96];
    snprintf(what, sizeof what, "%u threads, nothing ahead", n);
    printf("| %-58s | %9.2f |\n", what, 1e3 * best[1]);
    snprintf(
        what, sizeof what, "%u threads, answers 2 ms apart, %u of %u groups ahead", n, ahead_n[2],
        (unsigned)((NX_PARTIES - 1 + fs_noisex_server_slots(s) - 1) / fs_noisex_server_slots(s)));
    printf("| %-58s | %9.2f |\n", what, 1e3 * best[2]);
    printf("  (1 / %u threads: %.2fx; the same seeds: %s)\n", n, best[0] / best[1],
           memcmp(dg[0], dg[1], 32) == 0 && memcmp(dg[0], dg[2], 32) == 0 ? "yes" : "NO");
    fs_noisex_client_free(cl);
    fs_noisex_server_free(s);
    free(pk);
    free(sel);
    free(resp);
}

static void noise_exchange_section(struct ctx *c, const fs_paillier_djn *server_old)
{
    static struct nx x;
    struct fs_err err = {0};
    fs_paillier_djn *party = NULL;
    fs_paillier_djn *party_comb = NULL;
    fs_paillier_djn *server_new = NULL;
    unsigned bits = fs_paillier_pk_bits(c->pk);
    double old_s, new_s, saved = 0;
    int same;

    x.sk = c->sk;
    x.pk = c->pk;
    mpz_inits(x.sel, x.seed, x.out, x.n2, x.got[0], x.got[1], x.got_sh, NULL);
    for (int i = 0; i < NX_PARTIES - 1; i++) {
        mpz_init(x.resp[i]);
        mpz_init(x.resp_sh[i]);
    }
    nx_die(fs_paillier_djn_new(&party, c->pk, 0, 3, &err), "djn", &err);
    nx_die(fs_paillier_djn_new_comb(&party_comb, c->pk, 0, NULL, &err), "djn", &err);
    nx_die(fs_paillier_djn_new_crt(&server_new, c->sk, 0, FS_PAILLIER_DJN_WINDOW, NULL, &err),
           "djn_crt", &err);
    printf("\nseed-mode noise exchange, %d parties (CPU ms, best of 5-7 alternate runs; old: "
           "window tables modulo "
           "n^2, seed groups modulo p and q; new: party comb, server CRT tables, seed groups "
           "modulo p):\n\n",
           NX_PARTIES);
    printf("| %-44s | %9s | %9s | %5s |\n|---|---|---|---|\n", "operation", "old ms", "new ms",
           "old/new");
    /* a selector and a seed for the party's response */
    mpz_set_ui(x.seed, 1);
    nx_die(fs_paillier_encrypt(c->pk, server_old, x.sel, x.seed, &err), "encrypt", &err);
    rand_below(x.seed, c->m[0]);
    mpz_fdiv_r_2exp(x.seed, x.seed, NX_SEED);
    mpz_mul(x.n2, fs_paillier_pk_n(c->pk), fs_paillier_pk_n(c->pk));
    x.variant[0][0] = party;
    x.variant[0][1] = party_comb;
    x.variant[1][0] = server_old;
    x.variant[1][1] = server_new;
    paired(&x, nx_response, NX_RESPONSE, 7, &old_s, &new_s);
    ratio_row("party: one response (w=3 table / comb)", old_s, new_s);
    paired(&x, nx_djn_new, NX_PARTY_BASE, 5, &old_s, &new_s);
    ratio_row("party: DJN base + w=3 table / comb (a job)", old_s, new_s);
    /* the server */
    paired(&x, nx_djn_new, NX_SERVER_BASE, 5, &old_s, &new_s);
    ratio_row("server: DJN base + table w=5 (once a job)", old_s, new_s);
    paired(&x, nx_selectors, NX_SELECTORS, 5, &old_s, &new_s);
    saved += ratio_row("server: 20 selector encryptions (a sync)", old_s, new_s);
    for (int i = 0; i < NX_PARTIES - 1; i++) {
        rand_below(x.seed, c->m[i]);
        mpz_fdiv_r_2exp(x.seed, x.seed, NX_SEED);
        nx_die(fs_paillier_encrypt(c->pk, server_old, x.resp[i], x.seed, &err), "encrypt", &err);
        /* the same seed in its slot of a group of (bits/2 - 1)/256 */
        mpz_mul_2exp(x.seed, x.seed, NX_SEED * ((unsigned)i % ((bits / 2 - 1) / NX_SEED)));
        nx_die(fs_paillier_encrypt(c->pk, server_old, x.resp_sh[i], x.seed, &err), "encrypt", &err);
    }
    paired(&x, nx_decrypt_groups, NX_DECRYPT, 5, &old_s, &new_s);
    same = mpz_cmp(x.got[0], x.got[1]) == 0;
    saved += ratio_row("server: decrypt 19 seeds (a sync)", old_s, new_s);
    printf("  (seed groups: old %u slots modulo p and q on two threads, new %u slots modulo p; "
           "the same seeds: %s)\n",
           (bits - 1) / NX_SEED, (bits / 2 - 1) / NX_SEED, same ? "yes" : "NO");
    /* the slots placed by the selectors: no squarings before the product */
    nx_set(&x, NX_DECRYPT, 1);
    old_s = new_s = 1e30;
    for (int r = 0; r < 5; r++) {
        double a = best_cpu(nx_decrypt_groups, &x, 1);
        double b = best_cpu(nx_decrypt_sums, &x, 1);
        old_s = a < old_s ? a : old_s;
        new_s = b < new_s ? b : new_s;
    }
    saved += ratio_row("server: 19 seeds, slots by selectors", old_s, new_s);
    printf("  (old: answers shifted into their slots, 256 squarings modulo p^2 per slot; new: "
           "selectors of 2^(256 t), answers multiplied; the same seeds: %s)\n",
           mpz_cmp(x.got[1], x.got_sh) == 0 ? "yes" : "NO");
    printf("  server CPU saved per sync: %.1f ms\n", 1e3 * saved);
    mont_step_compare(c->pk);
    for (int i = 0; i < NX_PARTIES - 1; i++) {
        mpz_clear(x.resp[i]);
        mpz_clear(x.resp_sh[i]);
    }
    mpz_clears(x.sel, x.seed, x.out, x.n2, x.got[0], x.got[1], x.got_sh, NULL);
    fs_paillier_djn_free(party);
    fs_paillier_djn_free(party_comb);
    fs_paillier_djn_free(server_new);
}

/* ---- ot mode next to seed mode, through noise_exchange.h ---------------- */

/* One mode's server, a party and a sync of NX_PARTIES parties. */
struct nxm {
    struct fs_noisex_params p;
    const uint8_t *sk; /* seed mode: the bench's key (the server without keygen) */
    size_t sk_len;
    fs_noisex_server *s;
    fs_noisex_client *c;
    uint8_t *pk, *sel, *resp;
    size_t pk_len, cs, rs;
    uint32_t ids[NX_PARTIES];
    uint32_t round;
    uint8_t seeds[NX_PARTIES][32];
};

static void m_server_new(void *p)
{
    struct nxm *m = p;
    struct fs_err err = {0};
    fs_noisex_server *s = NULL;

    nx_die(m->sk != NULL ? fs_noisex_server_new_from_key(&m->p, m->sk, m->sk_len, &s, &err)
                         : fs_noisex_server_new(&m->p, BITS, &s, &err),
           "server", &err);
    fs_noisex_server_free(s);
}

static void m_client_new(void *p)
{
    struct nxm *m = p;
    struct fs_err err = {0};
    fs_noisex_client *c = NULL;

    nx_die(fs_noisex_client_new(&m->p, m->pk, m->pk_len, &c, &err), "client", &err);
    fs_noisex_client_free(c);
}

static void m_begin(void *p)
{
    struct nxm *m = p;
    struct fs_err err = {0};

    nx_die(fs_noisex_server_begin(m->s, ++m->round, m->ids, NX_PARTIES, &err), "begin", &err);
}

static void m_respond(void *p)
{
    struct nxm *m = p;
    struct fs_err err = {0};

    nx_die(fs_noisex_client_respond_seed(m->c, m->sel, m->cs, m->seeds[0], m->resp, m->rs, &err),
           "respond", &err);
}

static void m_peek(void *p)
{
    struct nxm *m = p;
    struct fs_err err = {0};
    struct fs_noisex_result res = {0};

    nx_die(fs_noisex_server_peek(m->s, &res, &err), "peek", &err);
    fs_noisex_result_clear(&res);
}

/* m's server and party, and a round every party answered; 1 if the server
 * opens exactly the seeds of the parties but j. */
static int nxm_setup(struct nxm *m)
{
    struct fs_err err = {0};
    struct fs_noisex_result res = {0};
    int ok;

    nx_die(m->sk != NULL ? fs_noisex_server_new_from_key(&m->p, m->sk, m->sk_len, &m->s, &err)
                         : fs_noisex_server_new(&m->p, BITS, &m->s, &err),
           "server", &err);
    fs_noisex_server_set_threads(m->s, 1, 0); /* CPU of one thread, nothing ahead */
    m->pk_len = fs_noisex_server_pk_size(m->s);
    m->cs = fs_noisex_server_ct_size(m->s);
    m->rs = fs_noisex_server_response_size(m->s);
    m->pk = malloc(m->pk_len);
    m->sel = malloc(m->cs);
    m->resp = malloc(m->rs);
    if (m->pk == NULL || m->sel == NULL || m->resp == NULL) {
        die("setup", &err);
    }
    nx_die(fs_noisex_server_pk_export(m->s, m->pk, m->pk_len, &err), "pk", &err);
    nx_die(fs_noisex_client_new(&m->p, m->pk, m->pk_len, &m->c, &err), "client", &err);
    nx_die(fs_rand_bytes(m->seeds, sizeof m->seeds, &err), "rand", &err);
    for (uint32_t i = 0; i < NX_PARTIES; i++) {
        m->ids[i] = i + 1;
    }
    m_begin(m);
    for (uint32_t i = 0; i < NX_PARTIES; i++) {
        nx_die(fs_noisex_server_selector(m->s, i + 1, m->sel, m->cs, &err), "selector", &err);
        nx_die(
            fs_noisex_client_respond_seed(m->c, m->sel, m->cs, m->seeds[i], m->resp, m->rs, &err),
            "respond", &err);
        nx_die(fs_noisex_server_add_response(m->s, i + 1, m->resp, m->rs, &err), "add", &err);
    }
    nx_die(fs_noisex_server_peek(m->s, &res, &err), "peek", &err);
    ok = res.removed == NX_PARTIES - 1;
    for (size_t q = 0; ok && q < res.removed; q++) {
        ok = memcmp(res.seeds[q], m->seeds[res.ids[q] - 1], 32) == 0;
    }
    fs_noisex_result_clear(&res);
    return ok;
}

static void nxm_free(struct nxm *m)
{
    fs_noisex_client_free(m->c);
    fs_noisex_server_free(m->s);
    free(m->pk);
    free(m->sel);
    free(m->resp);
}

static void ot_row(const char *what, double seed_s, double ot_s)
{
    printf("| %-46s | %11.1f | %9.1f | %8.0f |\n", what, 1e6 * seed_s, 1e6 * ot_s, seed_s / ot_s);
}

/* Seed mode (Paillier at BITS bits) and ot mode (Bellare-Micali OT on
 * P-256) through the public API, NX_PARTIES parties: what a job and a sync
 * cost the server and a party (CPU us, best of several runs). keygen_s:
 * the Paillier key generation measured above (seed mode's per-job key). */
static void ot_section(const fs_paillier_sk *sk, double keygen_s)
{
    static struct nxm m[2];
    struct fs_err err = {0};
    double t[2];
    int ok[2];
    size_t skl = fs_paillier_sk_size(sk);
    uint8_t *skb = malloc(skl);

    if (skb == NULL) {
        die("setup", &err);
    }
    nx_die(fs_paillier_sk_export(sk, skb, skl, &err), "sk", &err);
    memset(m, 0, sizeof m);
    for (int k = 0; k < 2; k++) {
        m[k].p.mode = k == 0 ? FS_NOISEX_SEED : FS_NOISEX_OT;
        m[k].p.parties = NX_PARTIES;
        m[k].sk = k == 0 ? skb : NULL;
        m[k].sk_len = skl;
        ok[k] = nxm_setup(&m[k]);
    }
    printf("\nnoise exchange, seed (Paillier %u) vs ot (Bellare-Micali OT, P-256), %d parties, "
           "through noise_exchange.h (CPU us, best of 5; 1 thread, nothing ahead):\n\n",
           BITS, NX_PARTIES);
    printf("| %-46s | %11s | %9s | %8s |\n|---|---|---|---|\n", "operation", "seed us", "ot us",
           "seed/ot");
    for (int k = 0; k < 2; k++) {
        t[k] = best_cpu(m_server_new, &m[k], k == 0 ? 3 : 20);
    }
    ot_row("job, server: key (seed: keygen + DJN tables)", keygen_s + t[0], t[1]);
    for (int k = 0; k < 2; k++) {
        t[k] = best_cpu(m_client_new, &m[k], k == 0 ? 3 : 20);
    }
    ot_row("job, party: client from the public key", t[0], t[1]);
    for (int k = 0; k < 2; k++) {
        t[k] = best_cpu(m_respond, &m[k], k == 0 ? 7 : 50);
    }
    ot_row("sync, party: one response", t[0], t[1]);
    for (int k = 0; k < 2; k++) {
        t[k] = best_cpu(m_peek, &m[k], 5);
    }
    ot_row("sync, server: open 19 seeds (finish)", t[0], t[1]);
    printf("| %-46s | %11.1f | %9.1f |          |\n", "  the same, per seed", 1e6 * t[0] / 19,
           1e6 * t[1] / 19);
    for (int k = 0; k < 2; k++) {
        t[k] = best_cpu(m_begin, &m[k], 5);
    }
    ot_row("sync, server: 20 selectors (begin)", t[0], t[1]);
    printf("| %-46s | %11.1f | %9.1f |          |\n", "  the same, per selector",
           1e6 * t[0] / NX_PARTIES, 1e6 * t[1] / NX_PARTIES);
    printf("  (sizes seed / ot: public key %zu / %zu, selector %zu / %zu, response %zu / %zu "
           "bytes; the seeds of all parties but j recovered: seed %s, ot %s)\n",
           m[0].pk_len, m[1].pk_len, m[0].cs, m[1].cs, m[0].rs, m[1].rs, ok[0] ? "yes" : "NO",
           ok[1] ? "yes" : "NO");
    for (int k = 0; k < 2; k++) {
        nxm_free(&m[k]);
    }
    OPENSSL_cleanse(skb, skl);
    free(skb);
}

int main(void)
{
    static struct ctx x;
    struct fs_err err = {0};
    fs_paillier_djn *djn_table = NULL;
    fs_paillier_djn *djn_plain = NULL;
    struct rusage ru;
    struct timing t_kg = {0, 0}, t_text, t_djn, t_tab, t_crt, t_nocrt, t_add, t_smul;
    double kg_min = 1e9, kg_max = 0;
    double t0;
    const int n_kg = 3;

    printf("Paillier, %u-bit n, g = n + 1, GMP %s, one core unless noted; "
           "time per op is the best of R rounds of N ops\n\n",
           BITS, gmp_version);

    /* key generation */
    for (int i = 0; i < n_kg; i++) {
        fs_paillier_sk *sk = NULL;
        double c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
        double w0 = now();
        double w;
        if (fs_paillier_keygen(&sk, BITS, &err) != 0) {
            die("keygen", &err);
        }
        t_kg.cpu += (clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0) / n_kg;
        w = now() - w0;
        t_kg.wall += w / n_kg;
        kg_min = w < kg_min ? w : kg_min;
        kg_max = w > kg_max ? w : kg_max;
        if (i + 1 < n_kg) {
            fs_paillier_sk_free(sk);
        } else {
            x.sk = sk;
        }
    }
    x.pk = fs_paillier_sk_pub(x.sk);
    mpz_init(x.out);
    mpz_init(x.k);
    for (int i = 0; i < NCIPHERS; i++) {
        mpz_init(x.m[i]);
        mpz_init(x.c[i]);
        rand_below(x.m[i], fs_paillier_pk_n(x.pk));
        if (fs_paillier_encrypt(x.pk, NULL, x.c[i], x.m[i], &err) != 0) {
            die("encrypt", &err);
        }
    }
    t0 = now();
    if (fs_paillier_djn_new(&djn_table, x.pk, 0, FS_PAILLIER_DJN_WINDOW, &err) != 0) {
        die("djn_new", &err);
    }
    printf("DJN: L = %u bits, window w = %u, table %.1f MiB (hs and table built in %.0f ms)\n\n",
           FS_PAILLIER_DJN_EXP_BITS, FS_PAILLIER_DJN_WINDOW,
           (double)fs_paillier_djn_table_bytes(djn_table) / (1 << 20), 1e3 * (now() - t0));
    if (fs_paillier_djn_new(&djn_plain, x.pk, 0, 0, &err) != 0) {
        die("djn_new", &err);
    }

    x.djn = NULL;
    t_text = measure(op_encrypt, &x, 10, 4);
    x.djn = djn_plain;
    t_djn = measure(op_encrypt, &x, 25, 4);
    x.djn = djn_table;
    t_tab = measure(op_encrypt, &x, 100, 4);
    x.djn = NULL;
    t_crt = measure(op_decrypt, &x, 50, 4);
    t_nocrt = measure(op_decrypt_nocrt, &x, 10, 4);
    t_add = measure(op_add, &x, 5000, 4);
    t_smul = measure(op_mul_scalar, &x, 250, 4);

    printf("| operation                                  | R x N       | CPU / op    | wall / op   "
           "| ops/s CPU | reference |\n");
    printf("|---|---|---|---|---|---|\n");
    row("key generation (mean of 3)", 1, n_kg, t_kg, "-");
    row("encryption, textbook r^n", 10, 4, t_text, "33 ms");
    row("encryption, DJN short exponent (powm_sec)", 25, 4, t_djn, "15.6 ms");
    row("encryption, DJN + fixed-base table", 100, 4, t_tab, "3.7 ms");
    row("decryption, CRT (mpz_powm_sec)", 50, 4, t_crt, "11.2 ms");
    row("decryption, no CRT (baseline)", 10, 4, t_nocrt, "-");
    row("homomorphic addition", 5000, 4, t_add, "11 us");
    row("scalar multiplication, 64-bit constant", 250, 4, t_smul, "0.78 ms");

    x.buf = malloc(fs_paillier_ct_size(x.pk));
    if (x.buf == NULL || fs_paillier_packing_init(&x.pp, x.pk, 57, 100, &err) != 0) {
        die("setup", &err);
    }
    for (unsigned s = 0; s < x.pp.slots; s++) {
        x.v[s] = (int64_t)(s * 0x9e3779b97f4a7c15ull >> 8) - ((int64_t)1 << 55);
    }
    row("ciphertext export (768 bytes)", 2000, 3, measure(op_ct_export, &x, 2000, 3), "-");
    row("ciphertext import (range + gcd check)", 2000, 3, measure(op_ct_import, &x, 2000, 3), "-");
    row("pack 47 slots (57-bit values, K = 100)", 2000, 3, measure(op_pack, &x, 2000, 3), "-");
    row("unpack 47 slots", 2000, 3, measure(op_unpack, &x, 2000, 3), "-");
    {
        int each = 100;
        double w = bench_decrypt_threads(&x, 2, each);
        printf("| %-42s | %3d x %-5d | %11s | %8.3f ms | %9s | %-9s |\n",
               "decryption, CRT, 2 threads", 2, each, "-", 1e3 * w / (2 * each), "-", "-");
        printf("  (2 threads: %.1f decryptions/s wall)\n", 2 * each / w);
    }
    /* the same CRT decryption with GMP's heap blocks wiped on free */
    fs_paillier_gmp_wipe_on_free();
    row("decryption, CRT, wiping GMP allocator", 50, 4, measure(op_decrypt, &x, 50, 4), "-");

    printf("\nratios (CPU time):\n");
    printf("  CRT / non-CRT decryption            %.3f (CRT %.2fx faster)\n",
           t_crt.cpu / t_nocrt.cpu, t_nocrt.cpu / t_crt.cpu);
    printf("  DJN / textbook encryption           %.3f (%.2fx faster)\n", t_djn.cpu / t_text.cpu,
           t_text.cpu / t_djn.cpu);
    printf("  DJN+table / textbook encryption     %.3f (%.2fx faster)\n", t_tab.cpu / t_text.cpu,
           t_text.cpu / t_tab.cpu);
    printf("  DJN+table / DJN encryption          %.3f (%.2fx faster)\n", t_tab.cpu / t_djn.cpu,
           t_djn.cpu / t_tab.cpu);
    printf("  keygen wall min / max               %.0f / %.0f ms\n", 1e3 * kg_min, 1e3 * kg_max);
    printf("  targets: CRT decryption <= 12 ms: %s; encryption with precomputation <= 5 ms: %s\n",
           1e3 * t_crt.cpu <= 12.0 ? "met" : "MISSED", 1e3 * t_tab.cpu <= 5.0 ? "met" : "MISSED");

    noise_exchange_section(&x, djn_table);
    nx_threads_section(x.sk);
    ot_section(x.sk, t_kg.cpu);
    window_sweep(&x);

    getrusage(RUSAGE_SELF, &ru);
    printf("\npeak RSS: %.1f MiB\n", (double)ru.ru_maxrss / 1024.0);

    for (int i = 0; i < NCIPHERS; i++) {
        mpz_clear(x.m[i]);
        mpz_clear(x.c[i]);
    }
    mpz_clear(x.out);
    mpz_clear(x.k);
    free(x.buf);
    fs_paillier_djn_free(djn_plain);
    fs_paillier_djn_free(djn_table);
    fs_paillier_sk_free(x.sk);
    return 0;
}
