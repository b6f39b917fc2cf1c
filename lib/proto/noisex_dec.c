/* Seed-mode decryptions of the noise exchange (see noisex_dec.h). */
#include "noisex_dec.h"

#include <gmp.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define NXD_SEED_BITS   (8u * NXD_SEED_LEN)
#define NXD_MAX_SLOTS   ((FS_PAILLIER_MAX_BITS - 1) / NXD_SEED_BITS)
#define NXD_MAX_THREADS 64u

enum nxd_state {
    G_WAIT,   /* members yet to answer */
    G_QUEUED, /* all answered, not started */
    G_BUSY,   /* a thread decrypts it */
    G_DONE    /* m, rc and err are its outcome */
};

/* A group of the plan: plan[first..first+cnt). */
struct nxd_group {
    size_t first;
    size_t cnt;
    size_t need; /* members yet to answer */
    enum nxd_state state;
    int rc;
    struct fs_err err;
    mpz_t m; /* G_DONE: the packed plaintext (secret) */
};

struct nxd {
    struct nxd_src src;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* a group became G_DONE */
    size_t *plan;
    size_t np;
    size_t *group_of; /* k entries: the group of a party yet to answer, else SIZE_MAX */
    size_t k;
    struct nxd_group *g;
    size_t ng;
    pthread_t *tid; /* background threads started, at most ng */
    size_t nt;
    unsigned active; /* of them, still running */
    int stop;
};

static void mpz_wipe_clear(mpz_t z)
{
    /* _mp_d/_mp_alloc are the documented layout of mpz_t in gmp.h. */
    OPENSSL_cleanse(z->_mp_d, (size_t)z->_mp_alloc * sizeof(mp_limb_t));
    mpz_clear(z);
}

/* One group of the plan: its members' answers multiplied (preshift), or
 * the product of c_t^(2^(256 t)), then decrypted; a member without an
 * answer counts as the ciphertext 1, an encryption of 0 (own temporaries:
 * any number of threads may run this at once). */
static int group_decrypt(const struct nxd_src *src, const size_t *members, size_t cnt, mpz_t m,
                         struct fs_err *err)
{
    mpz_t c[NXD_MAX_SLOTS];
    mpz_srcptr cs[NXD_MAX_SLOTS];
    int rc = 0;

    for (size_t t = 0; t < cnt; t++) {
        mpz_init_set_ui(c[t], 1);
        cs[t] = c[t];
    }
    for (size_t t = 0; t < cnt; t++) {
        /* checked when it was added (range, invertibility: a gcd with n,
         * a few percent of a decryption); the decryption checks the range
         * again and that the product is invertible modulo p */
        if (src->resp[members[t]] != NULL) {
            mpz_import(c[t], src->ct_size, 1, 1, 1, 0, src->resp[members[t]]);
        }
    }
    if (rc == 0 && src->preshift && src->mod_p) {
        rc = fs_paillier_decrypt_sum_p(src->sk, m, cs, cnt, err);
    } else if (rc == 0 && src->preshift) {
        /* a key too small for a slot below p: one slot, decrypted modulo n */
        rc = cnt == 1 ? fs_paillier_decrypt(src->sk, m, c[0], err)
                      : fs_err_set(err, FS_EINTERNAL, "noise exchange: %zu slots below n", cnt);
    } else if (rc == 0) {
        rc = src->mod_p ? fs_paillier_decrypt_packed_p(src->sk, m, cs, cnt, NXD_SEED_BITS, err)
                        : fs_paillier_decrypt_packed(src->sk, m, cs, cnt, NXD_SEED_BITS, err);
    }
    for (size_t t = 0; t < cnt; t++) {
        mpz_clear(c[t]); /* ciphertexts: public */
    }
    return rc;
}

/* ---- in the background -------------------------------------------------- */

/* d->mu held: the first queued group, or SIZE_MAX. */
static size_t next_queued(const struct nxd *d)
{
    if (d->stop) {
        return SIZE_MAX;
    }
    for (size_t i = 0; i < d->ng; i++) {
        if (d->g[i].state == G_QUEUED) {
            return i;
        }
    }
    return SIZE_MAX;
}

static void *bg_main(void *arg)
{
    struct nxd *d = arg;
    struct fs_err err;
    mpz_t m;
    size_t i;

    mpz_init(m);
    pthread_mutex_lock(&d->mu);
    while ((i = next_queued(d)) != SIZE_MAX) {
        struct nxd_group *g = &d->g[i];
        int rc;

        g->state = G_BUSY;
        pthread_mutex_unlock(&d->mu);
        fs_err_clear(&err);
        rc = group_decrypt(&d->src, d->plan + g->first, g->cnt, m, &err);
        pthread_mutex_lock(&d->mu);
        mpz_swap(g->m, m); /* m: the group's empty one */
        g->rc = rc;
        g->err = err;
        g->state = G_DONE;
        pthread_cond_broadcast(&d->cv);
    }
    d->active--;
    pthread_mutex_unlock(&d->mu);
    mpz_wipe_clear(m);
    return NULL;
}

/* d->mu held: a group was queued; one more thread when under the cap (else
 * a running one or the final call takes it). */
static void bg_spawn(struct nxd *d)
{
    if (!d->stop && d->active < d->src.threads && d->nt < d->ng &&
        pthread_create(&d->tid[d->nt], NULL, bg_main, d) == 0) {
        d->nt++;
        d->active++;
    }
}

int nxd_new(const struct nxd_src *src, const size_t *plan, size_t np, size_t k, struct nxd **out,
            struct fs_err *err)
{
    struct nxd *d;
    int rc = 0;

    *out = NULL;
    if (src == NULL || src->slots < 1 || src->slots > NXD_MAX_SLOTS || src->threads < 1 || np > k ||
        (np > 0 && plan == NULL)) {
        return fs_err_set(err, FS_EINVAL, "noise exchange: bad decryption plan");
    }
    d = calloc(1, sizeof *d);
    if (d == NULL) {
        return fs_err_set(err, FS_ENOMEM, "noise exchange: out of memory");
    }
    d->src = *src;
    d->np = np;
    d->k = k;
    d->ng = (np + src->slots - 1) / src->slots;
    d->plan = malloc((np > 0 ? np : 1) * sizeof *d->plan);
    d->group_of = malloc((k > 0 ? k : 1) * sizeof *d->group_of);
    d->g = calloc(d->ng > 0 ? d->ng : 1, sizeof *d->g);
    d->tid = calloc(d->ng > 0 ? d->ng : 1, sizeof *d->tid);
    if (d->plan == NULL || d->group_of == NULL || d->g == NULL || d->tid == NULL) {
        free(d->plan);
        free(d->group_of);
        free(d->g);
        free(d->tid);
        free(d);
        return fs_err_set(err, FS_ENOMEM, "noise exchange: out of memory");
    }
    if (pthread_mutex_init(&d->mu, NULL) != 0) {
        rc = 1;
    } else if (pthread_cond_init(&d->cv, NULL) != 0) {
        pthread_mutex_destroy(&d->mu);
        rc = 1;
    }
    if (rc != 0) {
        free(d->plan);
        free(d->group_of);
        free(d->g);
        free(d->tid);
        free(d);
        return fs_err_set(err, FS_ENOMEM, "noise exchange: cannot create a lock");
    }
    if (np > 0) {
        memcpy(d->plan, plan, np * sizeof *plan);
    }
    for (size_t q = 0; q < k; q++) {
        d->group_of[q] = SIZE_MAX;
    }
    pthread_mutex_lock(&d->mu);
    for (size_t i = 0; i < d->ng; i++) {
        struct nxd_group *g = &d->g[i];
        g->first = i * src->slots;
        g->cnt = np - g->first < src->slots ? np - g->first : src->slots;
        mpz_init(g->m);
        for (size_t t = 0; t < g->cnt; t++) {
            size_t q = plan[g->first + t];
            if (src->resp[q] == NULL) {
                d->group_of[q] = i;
                g->need++;
            }
        }
        if (g->need == 0) {
            g->state = G_QUEUED;
            bg_spawn(d);
        }
    }
    pthread_mutex_unlock(&d->mu);
    *out = d;
    return 0;
}

void nxd_answered(struct nxd *d, size_t q)
{
    if (d == NULL || q >= d->k) {
        return;
    }
    pthread_mutex_lock(&d->mu);
    size_t i = d->group_of[q];
    if (i != SIZE_MAX) {
        d->group_of[q] = SIZE_MAX; /* counted once */
        if (--d->g[i].need == 0 && d->g[i].state == G_WAIT) {
            d->g[i].state = G_QUEUED;
            bg_spawn(d);
        }
    }
    pthread_mutex_unlock(&d->mu);
}

size_t nxd_ahead(struct nxd *d)
{
    size_t n = 0;

    if (d == NULL) {
        return 0;
    }
    pthread_mutex_lock(&d->mu);
    for (size_t i = 0; i < d->ng; i++) {
        n += d->g[i].state == G_DONE;
    }
    pthread_mutex_unlock(&d->mu);
    return n;
}

void nxd_free(struct nxd *d)
{
    if (d == NULL) {
        return;
    }
    pthread_mutex_lock(&d->mu);
    d->stop = 1; /* running decryptions finish, queued ones do not start */
    pthread_mutex_unlock(&d->mu);
    for (size_t t = 0; t < d->nt; t++) {
        pthread_join(d->tid[t], NULL);
    }
    for (size_t i = 0; i < d->ng; i++) {
        mpz_wipe_clear(d->g[i].m);
    }
    pthread_cond_destroy(&d->cv);
    pthread_mutex_destroy(&d->mu);
    free(d->plan);
    free(d->group_of);
    free(d->g);
    free(d->tid);
    OPENSSL_cleanse(d, sizeof *d);
    free(d);
}

/* ---- the final call ----------------------------------------------------- */

enum fin_mode {
    F_SKIP,  /* no member answered: nothing to decrypt */
    F_WORK,  /* decrypted now, into the item's m */
    F_CLAIM, /* a queued group of the plan, decrypted now, then kept in it */
    F_WAIT,  /* a group of the plan another thread decrypts */
    F_REUSE  /* a group of the plan decrypted already */
};

struct fin_item {
    const size_t *members; /* the plan's group (index: the group) */
    size_t cnt;
    size_t answered; /* of its members */
    size_t off;      /* its first seed in the output */
    enum fin_mode mode;
    int rc;
    struct fs_err err;
    mpz_t m;
};

struct fin {
    const struct nxd_src *src;
    struct fin_item *it;
    size_t n;
    atomic_size_t next;
};

static void *fin_main(void *arg)
{
    struct fin *f = arg;

    for (;;) {
        size_t i = atomic_fetch_add(&f->next, 1);

        if (i >= f->n) {
            return NULL;
        }
        if (f->it[i].mode != F_WORK && f->it[i].mode != F_CLAIM) {
            continue;
        }
        fs_err_clear(&f->it[i].err);
        f->it[i].rc =
            group_decrypt(f->src, f->it[i].members, f->it[i].cnt, f->it[i].m, &f->it[i].err);
    }
}

/* The items to decrypt now, on up to src->threads threads (this one too). */
static void fin_run(const struct nxd_src *src, struct fin_item *it, size_t n, size_t work)
{
    struct fin f;
    pthread_t tid[NXD_MAX_THREADS];
    unsigned threads = src->threads < NXD_MAX_THREADS ? src->threads : NXD_MAX_THREADS;
    unsigned started = 0;

    if (work == 0) {
        return;
    }
    if (threads > work) {
        threads = (unsigned)work;
    }
    f.src = src;
    f.it = it;
    f.n = n;
    atomic_init(&f.next, 0);
    /* helpers that fail to start leave this thread more */
    while (started + 1 < threads && pthread_create(&tid[started], NULL, fin_main, &f) == 0) {
        started++;
    }
    fin_main(&f);
    for (unsigned t = 0; t < started; t++) {
        pthread_join(tid[t], NULL);
    }
}

/* d->mu held (d not NULL): item a (a group of the plan with an answer)
 * against the background's state of the same group. */
static void fin_match(struct nxd *d, struct fin_item *x, size_t a, unsigned *ahead)
{
    struct nxd_group *g = a < d->ng ? &d->g[a] : NULL;

    x->mode = F_WORK;
    if (g == NULL || g->cnt != x->cnt ||
        memcmp(d->plan + g->first, x->members, x->cnt * sizeof *x->members) != 0) {
        return; /* (another plan: not reached) */
    }
    switch (g->state) {
    case G_DONE:
        x->mode = F_REUSE;
        (*ahead)++;
        break;
    case G_BUSY:
        x->mode = F_WAIT;
        (*ahead)++;
        break;
    case G_QUEUED:
        g->state = G_BUSY;
        x->mode = F_CLAIM;
        break;
    case G_WAIT:
        break; /* a member did not answer: its slot is 0, decrypted now */
    }
}

/* The seeds of the answered members of group x from its plaintext m. */
static int unpack(const struct nxd_src *src, const struct fin_item *x, const mpz_t m,
                  uint32_t round, uint8_t (*out)[NXD_SEED_LEN], mpz_t part, struct fs_err *err)
{
    size_t q = 0;

    if (mpz_sizeinbase(m, 2) > NXD_SEED_BITS * x->cnt) {
        return fs_err_set(err, FS_EFORMAT,
                          "noise exchange: a decrypted seed group exceeds its slots (round %u)",
                          round);
    }
    for (size_t t = 0; t < x->cnt; t++) {
        mpz_tdiv_q_2exp(part, m, (mp_bitcnt_t)(NXD_SEED_BITS * t));
        mpz_tdiv_r_2exp(part, part, NXD_SEED_BITS);
        if (src->resp[x->members[t]] == NULL) {
            if (mpz_sgn(part) != 0) {
                return fs_err_set(err, FS_EFORMAT,
                                  "noise exchange: the slot of a party without an answer is not "
                                  "0 (round %u)",
                                  round);
            }
            continue;
        }
        uint8_t *dst = out[q++];
        size_t count = 0;
        memset(dst, 0, NXD_SEED_LEN);
        /* big-endian, right-aligned in 32 bytes */
        size_t nb = (mpz_sizeinbase(part, 2) + 7) / 8;
        if (mpz_sgn(part) != 0) {
            mpz_export(dst + NXD_SEED_LEN - nb, &count, 1, 1, 1, 0, part);
        }
    }
    return 0;
}

/* d->mu held when d: the outcome in group order (the first error as the
 * sequential loop would meet it). */
static int fin_collect(struct nxd *d, const struct nxd_src *src, struct fin_item *it, size_t n,
                       uint32_t round, uint8_t (*seeds)[NXD_SEED_LEN], unsigned *decryptions,
                       struct fs_err *err)
{
    mpz_t part;
    int rc = 0;

    mpz_init(part);
    for (size_t a = 0; a < n && rc == 0; a++) {
        if (it[a].mode == F_SKIP) {
            continue;
        }
        struct nxd_group *g = it[a].mode == F_WORK ? NULL : &d->g[a];
        mpz_srcptr m = g != NULL ? g->m : it[a].m;
        rc = g != NULL ? g->rc : it[a].rc;
        if (rc != 0) {
            if (err != NULL) {
                *err = g != NULL ? g->err : it[a].err;
            }
            break;
        }
        (*decryptions)++;
        rc = unpack(src, &it[a], m, round, seeds + it[a].off, part, err);
    }
    mpz_wipe_clear(part);
    return rc;
}

/* d->mu held when d: the claimed groups' outcomes kept in d (for a later
 * call: finish after peek), then wait for those another thread decrypts. */
static void fin_settle(struct nxd *d, struct fin_item *it, size_t n)
{
    for (size_t a = 0; a < n; a++) {
        if (it[a].mode == F_CLAIM) {
            struct nxd_group *g = &d->g[a];
            mpz_swap(g->m, it[a].m);
            g->rc = it[a].rc;
            g->err = it[a].err;
            g->state = G_DONE;
            pthread_cond_broadcast(&d->cv);
        }
    }
    for (size_t a = 0; a < n; a++) {
        while (it[a].mode == F_WAIT && d->g[a].state != G_DONE) {
            pthread_cond_wait(&d->cv, &d->mu);
        }
    }
}

int nxd_seeds(struct nxd *d, const struct nxd_src *src, const size_t *plan, size_t np,
              uint32_t round, uint8_t (*seeds)[NXD_SEED_LEN], unsigned *decryptions,
              unsigned *ahead, struct fs_err *err)
{
    size_t n = (np + src->slots - 1) / src->slots;
    struct fin_item *it;
    size_t work = 0;
    size_t off = 0;
    int rc;

    *decryptions = 0;
    *ahead = 0;
    if (n == 0) {
        return 0;
    }
    it = calloc(n, sizeof *it);
    if (it == NULL) {
        return fs_err_set(err, FS_ENOMEM, "noise exchange: out of memory");
    }
    if (d != NULL) {
        pthread_mutex_lock(&d->mu);
    }
    for (size_t a = 0; a < n; a++) {
        it[a].members = plan + a * src->slots;
        it[a].cnt = np - a * src->slots < src->slots ? np - a * src->slots : src->slots;
        for (size_t t = 0; t < it[a].cnt; t++) {
            it[a].answered += src->resp[it[a].members[t]] != NULL;
        }
        it[a].off = off;
        off += it[a].answered;
        mpz_init(it[a].m);
        if (it[a].answered == 0) {
            it[a].mode = F_SKIP;
        } else if (d != NULL) {
            fin_match(d, &it[a], a, ahead);
        } else {
            it[a].mode = F_WORK;
        }
        work += it[a].mode == F_WORK || it[a].mode == F_CLAIM;
    }
    if (d != NULL) {
        pthread_mutex_unlock(&d->mu);
    }
    fin_run(src, it, n, work);
    if (d != NULL) {
        pthread_mutex_lock(&d->mu);
        fin_settle(d, it, n);
    }
    rc = fin_collect(d, src, it, n, round, seeds, decryptions, err);
    if (d != NULL) {
        pthread_mutex_unlock(&d->mu);
    }
    for (size_t a = 0; a < n; a++) {
        mpz_wipe_clear(it[a].m);
    }
    free(it);
    return rc;
}
