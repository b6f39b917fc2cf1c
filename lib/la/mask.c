#include "mask.h"

#include <openssl/crypto.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../crypto/prg.h"
#include "haar.h"
#include "la_internal.h"

struct fs_mask {
    size_t n;
    size_t block; /* maximum block size requested */
    size_t nblocks;
    size_t base;  /* every block has base or base + 1 rows ... */
    size_t extra; /* ... the first `extra` blocks have base + 1 */
    size_t *perm; /* M[perm[i], :] = D[i, :] */
    uint8_t key[32];
    uint8_t cache_id[32]; /* names the mask in a fs_mask_cache (a PRF output of key) */
    fs_haar **kept;       /* fs_mask_keep: per block, drawn once for products, or NULL */
};

static void put_be64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        p[i] = (uint8_t)(v & 0xff);
        v >>= 8;
    }
}

/* out = first 32 bytes of AES-256-CTR(key, iv = tag || be64(v)): AES as a PRF
 * gives domain-separated sub-keys without a separate KDF. */
static int derive(const uint8_t key[32], const char tag[8], uint64_t v, uint8_t out[32],
                  struct fs_err *err)
{
    uint8_t iv[16];
    fs_prg *prg = NULL;
    int rc;

    memcpy(iv, tag, 8);
    put_be64(iv + 8, v);
    rc = fs_prg_new(&prg, key, iv, err);
    if (rc == 0) {
        rc = fs_prg_bytes(prg, out, 32, err);
    }
    fs_prg_free(prg);
    return rc;
}

/* PRG for stream s under the mask key: IV = be64(s) || 0^64, so streams
 * occupy disjoint counter ranges for any realistic length (< 2^68 bytes). */
static int mask_stream(const fs_mask *m, uint64_t s, fs_prg **prg, struct fs_err *err)
{
    uint8_t iv[16] = {0};

    put_be64(iv, s);
    return fs_prg_new(prg, m->key, iv, err);
}

size_t fs_mask_choose_block(size_t n, size_t other_dim, size_t max_block)
{
    size_t t;
    size_t nb;
    size_t b;

    if (max_block == 0) {
        max_block = 4 * (size_t)FS_MASK_DENSE_MAX;
    }
    if (n <= FS_MASK_DENSE_MAX) {
        return n;
    }
    /* target: at least the other dimension and FS_MASK_MIN_BLOCK */
    t = other_dim > FS_MASK_MIN_BLOCK ? other_dim : FS_MASK_MIN_BLOCK;
    if (t > max_block) {
        t = max_block;
    }
    if (t >= n) {
        return n;
    }
    /* at most floor(n / t) balanced blocks (fs_mask_new makes ceil(n / b)),
     * so every block, not just the largest, has at least t rows */
    nb = n / t;
    b = n / nb + (n % nb != 0);
    return b < max_block ? b : max_block;
}

size_t fs_mask_dim(const fs_mask *m)
{
    return m != NULL ? m->n : 0;
}

size_t fs_mask_nblocks(const fs_mask *m)
{
    return m != NULL ? m->nblocks : 0;
}

const size_t *fs_mask_perm(const fs_mask *m)
{
    return m != NULL ? m->perm : NULL;
}

void fs_mask_block_range(const fs_mask *m, size_t t, size_t *off, size_t *size)
{
    *off = t * m->base + (t < m->extra ? t : m->extra);
    *size = m->base + (t < m->extra ? 1 : 0);
}

size_t fs_mask_block_of(const fs_mask *m, size_t i)
{
    size_t big = m->extra * (m->base + 1); /* rows covered by the larger blocks */

    if (i < big) {
        return i / (m->base + 1);
    }
    return m->extra + (i - big) / m->base;
}

void fs_mask_free(fs_mask *m)
{
    if (m == NULL) {
        return;
    }
    if (m->perm != NULL) {
        OPENSSL_cleanse(m->perm, m->n * sizeof *m->perm);
        free(m->perm);
    }
    if (m->kept != NULL) {
        for (size_t t = 0; t < m->nblocks; t++) {
            fs_haar_free(m->kept[t]);
        }
        free(m->kept);
    }
    OPENSSL_cleanse(m->key, sizeof m->key);
    OPENSSL_cleanse(m->cache_id, sizeof m->cache_id);
    free(m);
}

int fs_mask_keep(fs_mask *m, size_t max_bytes, struct fs_err *err)
{
    double bytes = 0.0;

    if (m == NULL) {
        return fs_err_set(err, FS_EINVAL, "mask: NULL mask");
    }
    if (m->kept != NULL) {
        return 0;
    }
    for (size_t t = 0; t < m->nblocks; t++) {
        size_t off;
        size_t sz;
        fs_mask_block_range(m, t, &off, &sz);
        bytes += (double)sz * (double)sz * 8.0; /* the reflectors; T adds about 1/64 */
    }
    if (bytes > (double)max_bytes) {
        return 0;
    }
    m->kept = calloc(m->nblocks, sizeof *m->kept);
    if (m->kept == NULL) {
        return fs_err_set(err, FS_ENOMEM, "mask: out of memory");
    }
    return 0;
}

static int make_perm(fs_mask *m, struct fs_err *err)
{
    fs_prg *prg = NULL;
    int rc;

    for (size_t i = 0; i < m->n; i++) {
        m->perm[i] = i;
    }
    rc = mask_stream(m, 0, &prg, err);
    /* Fisher–Yates: position i receives a uniform pick among 0..i. */
    for (size_t i = m->n; rc == 0 && i > 1; i--) {
        uint64_t j = 0;
        rc = fs_prg_below(prg, (uint64_t)i, &j, err);
        if (rc == 0) {
            size_t tmp = m->perm[i - 1];
            m->perm[i - 1] = m->perm[j];
            m->perm[j] = tmp;
        }
    }
    fs_prg_free(prg);
    return rc;
}

int fs_mask_new(size_t n, size_t block, const uint8_t seed[32], fs_mask **out, struct fs_err *err)
{
    uint8_t k1[32];
    fs_mask *m = NULL;
    size_t bytes = 0;
    int rc;

    if (out == NULL || seed == NULL) {
        return fs_err_set(err, FS_EINVAL, "mask: NULL argument");
    }
    *out = NULL;
    if (n == 0) {
        return fs_err_set(err, FS_EINVAL, "mask: dimension 0");
    }
    if (block == 0) {
        block = FS_MASK_DENSE_MAX;
    }
    if (block > n) {
        block = n;
    }
    if (!la_fits_int(block)) {
        return fs_err_set(err, FS_ERANGE, "mask: block size %zu exceeds the LAPACK int range",
                          block);
    }
    if (!la_mul_size(n, sizeof(size_t), &bytes)) {
        return fs_err_set(err, FS_ERANGE, "mask: dimension %zu too large", n);
    }
    m = calloc(1, sizeof *m);
    if (m == NULL) {
        return fs_err_set(err, FS_ENOMEM, "mask: out of memory");
    }
    m->n = n;
    m->block = block;
    m->nblocks = n / block + (n % block != 0);
    m->base = n / m->nblocks;
    m->extra = n % m->nblocks;
    m->perm = malloc(bytes);
    if (m->perm == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "mask: out of memory for a %zu permutation", n);
        goto out;
    }
    rc = derive(seed, "fsmask01", (uint64_t)n, k1, err);
    if (rc == 0) {
        rc = derive(k1, "fsblock1", (uint64_t)block, m->key, err);
    }
    if (rc == 0) {
        rc = derive(m->key, "fscache1", 0, m->cache_id, err);
    }
    if (rc == 0) {
        rc = make_perm(m, err);
    }
out:
    OPENSSL_cleanse(k1, sizeof k1);
    if (rc != 0) {
        fs_mask_free(m);
        return rc;
    }
    *out = m;
    return 0;
}

/* Wipe then free a matrix holding mask material. */
static void free_secret(fs_mat *q)
{
    fs_mat_wipe(q);
    fs_mat_free(q);
}

/* Block t in factored form, its first k reflectors (0 = all): stream t + 1
 * of the mask key. */
static int gen_block(const fs_mask *m, size_t t, size_t k, fs_haar **out, struct fs_err *err)
{
    size_t off;
    size_t sz;
    fs_prg *prg = NULL;
    int rc;

    *out = NULL;
    fs_mask_block_range(m, t, &off, &sz);
    rc = mask_stream(m, (uint64_t)t + 1, &prg, err);
    if (rc == 0) {
        rc = fs_haar_gen_prefix(sz, k == 0 || k > sz ? sz : k, prg, out, err);
    }
    fs_prg_free(prg);
    return rc;
}

/* New dense copy of columns [lc0, lc0 + w) of block t (all its rows). */
static int block_columns(const fs_mask *m, size_t t, size_t lc0, size_t w, fs_mat **out,
                         struct fs_err *err)
{
    size_t off;
    size_t sz;
    fs_haar *h = NULL;
    fs_mat *q = NULL;
    int rc;

    *out = NULL;
    fs_mask_block_range(m, t, &off, &sz);
    q = fs_mat_new_uninit(sz, w);
    if (q == NULL) {
        return fs_err_set(err, FS_ENOMEM, "mask: out of memory for %zux%zu", sz, w);
    }
    /* columns below lc0 + w need only the reflectors up to about there */
    rc = gen_block(m, t, fs_haar_prefix_for(sz, lc0 + w), &h, err);
    if (rc == 0) {
        rc = fs_haar_columns(h, lc0, q, err);
    }
    fs_haar_free(h);
    if (rc != 0) {
        free_secret(q);
        return rc;
    }
    *out = q;
    return 0;
}

int fs_mask_block(const fs_mask *m, size_t t, fs_mat **out, struct fs_err *err)
{
    if (out == NULL) {
        return fs_err_set(err, FS_EINVAL, "mask: out is NULL");
    }
    *out = NULL;
    if (m == NULL || t >= m->nblocks) {
        return fs_err_set(err, FS_EINVAL, "mask: no block %zu", t);
    }
    {
        size_t off;
        size_t sz;
        fs_mask_block_range(m, t, &off, &sz);
        return block_columns(m, t, 0, sz, out, err);
    }
}

int fs_mask_dense(const fs_mask *m, fs_mat **out, struct fs_err *err)
{
    fs_mat *d = NULL;
    int rc = 0;

    if (out == NULL || m == NULL) {
        return fs_err_set(err, FS_EINVAL, "mask: NULL argument");
    }
    *out = NULL;
    d = fs_mat_new(m->n, m->n);
    if (d == NULL) {
        return fs_err_set(err, FS_ENOMEM, "mask: out of memory for a dense %zux%zu", m->n, m->n);
    }
    for (size_t t = 0; rc == 0 && t < m->nblocks; t++) {
        size_t off;
        size_t sz;
        fs_mat *q = NULL;
        fs_mask_block_range(m, t, &off, &sz);
        rc = block_columns(m, t, 0, sz, &q, err);
        for (size_t c = 0; rc == 0 && c < sz; c++) {
            for (size_t a = 0; a < sz; a++) {
                FS_MAT_AT(d, m->perm[off + a], off + c) = FS_MAT_AT(q, a, c);
            }
        }
        free_secret(q);
    }
    if (rc != 0) {
        free_secret(d);
        return rc;
    }
    *out = d;
    return 0;
}

static int op_check(char op, int *trans, struct fs_err *err)
{
    if (op == 'N' || op == 'n') {
        *trans = 0;
    } else if (op == 'T' || op == 't') {
        *trans = 1;
    } else {
        return fs_err_set(err, FS_EINVAL, "mask: op must be 'N' or 'T'");
    }
    return 0;
}

static int mul_check(const fs_mask *m, const fs_mat *x, const fs_mat *y, int left,
                     struct fs_err *err)
{
    size_t dim;

    if (m == NULL || !la_mat_ok(x) || !la_mat_ok(y)) {
        return fs_err_set(err, FS_EINVAL, "mask: invalid argument");
    }
    dim = left ? x->rows : x->cols;
    if (dim != m->n || x->rows != y->rows || x->cols != y->cols) {
        return fs_err_set(err, FS_EINVAL,
                          "mask: %s product of a %zux%zu mask with %zux%zu into %zux%zu",
                          left ? "left" : "right", m->n, m->n, x->rows, x->cols, y->rows, y->cols);
    }
    if (fs_mat_overlap(x, y)) {
        return fs_err_set(err, FS_EINVAL, "mask: x and y overlap");
    }
    if (!la_mat_fits_int(x) || !la_mat_fits_int(y)) {
        return fs_err_set(err, FS_ERANGE, "mask: dimension exceeds the BLAS int range");
    }
    return 0;
}

/* One block of y = op(M) x with h = Q_t; tmp is an sz x k scratch. */
static int left_block(const fs_mask *m, int trans, fs_haar *h, size_t off, const fs_mat *x,
                      fs_mat *y, fs_mat *tmp, struct fs_err *err)
{
    size_t sz = tmp->rows;
    size_t k = x->cols;
    int rc;

    if (!trans) {
        /* (M x)[perm[off + a], :] = (Q_t x[off:off+sz, :])[a, :] */
        fs_mat xs = fs_mat_view(x, off, 0, sz, k);
        rc = fs_mat_copy(tmp, &xs, err);
        if (rc == 0) {
            rc = fs_haar_apply_left(h, 'N', tmp, err);
        }
        for (size_t c = 0; rc == 0 && c < k; c++) {
            for (size_t a = 0; a < sz; a++) {
                FS_MAT_AT(y, m->perm[off + a], c) = FS_MAT_AT(tmp, a, c);
            }
        }
        return rc;
    }
    /* (M^T x)[off:off+sz, :] = Q_t^T g with g[a, :] = x[perm[off + a], :], formed in place */
    fs_mat ys = fs_mat_view(y, off, 0, sz, k);
    for (size_t c = 0; c < k; c++) {
        for (size_t a = 0; a < sz; a++) {
            FS_MAT_AT(&ys, a, c) = FS_MAT_AT(x, m->perm[off + a], c);
        }
    }
    return fs_haar_apply_left(h, 'T', &ys, err);
}

/* One block of y = x op(M) with h = Q_t; tmp is a k x sz scratch. */
static int right_block(const fs_mask *m, int trans, fs_haar *h, size_t off, const fs_mat *x,
                       fs_mat *y, fs_mat *tmp, struct fs_err *err)
{
    size_t sz = tmp->cols;
    size_t k = x->rows;
    int rc;

    if (!trans) {
        /* (x M)[:, off:off+sz] = g Q_t with g[:, a] = x[:, perm[off + a]], formed in place */
        fs_mat ys = fs_mat_view(y, 0, off, k, sz);
        for (size_t a = 0; a < sz && k > 0; a++) {
            memcpy(&FS_MAT_AT(&ys, 0, a), &FS_MAT_AT(x, 0, m->perm[off + a]), k * sizeof(double));
        }
        return fs_haar_apply_right(h, 'N', &ys, err);
    }
    /* (x M^T)[:, perm[off + a]] = (x[:, off:off+sz] Q_t^T)[:, a] */
    fs_mat xs = fs_mat_view(x, 0, off, k, sz);
    rc = fs_mat_copy(tmp, &xs, err);
    if (rc == 0) {
        rc = fs_haar_apply_right(h, 'T', tmp, err);
    }
    for (size_t a = 0; rc == 0 && a < sz && k > 0; a++) {
        memcpy(&FS_MAT_AT(y, 0, m->perm[off + a]), &FS_MAT_AT(tmp, 0, a), k * sizeof(double));
    }
    return rc;
}

static int mask_mul(const fs_mask *m, char op, const fs_mat *x, fs_mat *y, int left,
                    struct fs_err *err)
{
    fs_mat *tmp = NULL;
    int trans = 0;
    size_t k;
    size_t bmax;
    int rc = op_check(op, &trans, err);

    if (rc == 0) {
        rc = mul_check(m, x, y, left, err);
    }
    if (rc != 0) {
        return rc;
    }
    k = left ? x->cols : x->rows;
    bmax = m->base + (m->extra > 0);
    /* M x and x M^T go through a scratch block; M^T x and x M are formed in
     * place in y (left_block, right_block), where a scratch would be a few MB
     * allocated, faulted in by the wipe alone and freed unused. */
    if (left != trans) {
        tmp = left ? fs_mat_new_uninit(bmax, k) : fs_mat_new_uninit(k, bmax);
        if (tmp == NULL) {
            return fs_err_set(err, FS_ENOMEM, "mask: out of memory");
        }
    }
    for (size_t t = 0; rc == 0 && t < m->nblocks; t++) {
        size_t off;
        size_t sz;
        fs_haar *h = m->kept != NULL ? m->kept[t] : NULL;
        fs_mask_block_range(m, t, &off, &sz);
        if (h == NULL) {
            rc = gen_block(m, t, 0, &h, err);
            if (rc == 0 && m->kept != NULL) {
                m->kept[t] = h; /* the mask owns it now (fs_mask_keep) */
            }
        }
        if (rc == 0) {
            /* without a scratch, a view of the right shape and no data */
            fs_mat none = {.rows = left ? sz : k, .cols = left ? k : sz, .ld = left ? sz : k};
            fs_mat tv = tmp == NULL ? none
                        : left      ? fs_mat_view(tmp, 0, 0, sz, k)
                                    : fs_mat_view(tmp, 0, 0, k, sz);
            rc = left ? left_block(m, trans, h, off, x, y, &tv, err)
                      : right_block(m, trans, h, off, x, y, &tv, err);
        }
        if (m->kept == NULL) {
            fs_haar_free(h);
        }
    }
    free_secret(tmp);
    return rc;
}

int fs_mask_mul_left(const fs_mask *m, char op, const fs_mat *x, fs_mat *y, struct fs_err *err)
{
    return mask_mul(m, op, x, y, 1, err);
}

int fs_mask_mul_right(const fs_mask *m, char op, const fs_mat *x, fs_mat *y, struct fs_err *err)
{
    return mask_mul(m, op, x, y, 0, err);
}

void fs_mask_slab_free(fs_mask_slab *s)
{
    if (s == NULL) {
        return;
    }
    for (size_t p = 0; p < s->npieces && s->pieces != NULL; p++) {
        fs_mask_piece *pc = &s->pieces[p];
        if (pc->rows != NULL && pc->q != NULL) {
            OPENSSL_cleanse(pc->rows, pc->q->rows * sizeof *pc->rows);
        }
        free(pc->rows);
        free_secret(pc->q);
    }
    free(s->pieces);
    free(s);
}

/* ------------------------------------------------------------ block cache */

/* Formed chunks kept per block: those a request wanted only part of. */
#define CACHE_CHUNKS 4

struct cache_ent {
    struct cache_ent *next;
    uint8_t id[32]; /* the mask's cache_id */
    size_t t;       /* block */
    size_t sz;      /* its size */
    fs_haar *h;     /* the reflectors drawn so far */
    fs_prg *prg;    /* the block's stream, where h stopped; NULL once h is truncated */
    size_t nchunks;
    size_t chunk_a[CACHE_CHUNKS]; /* chunk index */
    fs_mat *chunk[CACHE_CHUNKS];  /* its columns, all sz rows */
    size_t served;                /* columns of the block handed out so far */
    uint64_t used;                /* LRU tick */
};

struct fs_mask_cache {
    pthread_mutex_t mu;
    size_t cap;
    size_t bytes;
    uint64_t tick;
    struct cache_ent *list;
    struct fs_mask_cache_stats st;
};

static _Thread_local fs_mask_cache *tl_cache;

static size_t ent_bytes(const struct cache_ent *e)
{
    /* the drawn reflectors, and about as much as their T factors take */
    size_t b = e->h != NULL ? e->sz * (fs_haar_reflectors(e->h) + 64) * sizeof(double) : 0;

    for (size_t i = 0; i < e->nchunks; i++) {
        b += e->chunk[i]->rows * e->chunk[i]->cols * sizeof(double);
    }
    return b;
}

static void ent_free(struct cache_ent *e)
{
    if (e == NULL) {
        return;
    }
    fs_haar_free(e->h);
    fs_prg_free(e->prg);
    for (size_t i = 0; i < e->nchunks; i++) {
        free_secret(e->chunk[i]);
    }
    OPENSSL_cleanse(e, sizeof *e);
    free(e);
}

int fs_mask_cache_new(size_t max_bytes, fs_mask_cache **out, struct fs_err *err)
{
    fs_mask_cache *c;

    if (out == NULL) {
        return fs_err_set(err, FS_EINVAL, "mask: out is NULL");
    }
    c = calloc(1, sizeof *c);
    if (c == NULL) {
        return fs_err_set(err, FS_ENOMEM, "mask: out of memory");
    }
    if (pthread_mutex_init(&c->mu, NULL) != 0) {
        free(c);
        return fs_err_set(err, FS_ENOMEM, "mask: cannot create a mutex");
    }
    c->cap = max_bytes;
    *out = c;
    return 0;
}

void fs_mask_cache_free(fs_mask_cache *c)
{
    if (c == NULL) {
        return;
    }
    while (c->list != NULL) {
        struct cache_ent *e = c->list;
        c->list = e->next;
        ent_free(e);
    }
    pthread_mutex_destroy(&c->mu);
    free(c);
}

fs_mask_cache *fs_mask_cache_attach(fs_mask_cache *c)
{
    fs_mask_cache *prev = tl_cache;

    tl_cache = c;
    return prev;
}

void fs_mask_cache_stats(fs_mask_cache *c, struct fs_mask_cache_stats *out)
{
    pthread_mutex_lock(&c->mu);
    *out = c->st;
    pthread_mutex_unlock(&c->mu);
}

/* Take block t of the mask named id out of c (NULL when absent): the caller
 * has it alone until cache_put. */
static struct cache_ent *cache_take(fs_mask_cache *c, const uint8_t id[32], size_t t)
{
    struct cache_ent **pp;
    struct cache_ent *e = NULL;

    pthread_mutex_lock(&c->mu);
    for (pp = &c->list; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->t == t && CRYPTO_memcmp((*pp)->id, id, 32) == 0) {
            e = *pp;
            *pp = e->next;
            e->next = NULL;
            c->bytes -= ent_bytes(e);
            c->st.entries--;
            break;
        }
    }
    if (e != NULL) {
        c->st.hits++;
    } else {
        c->st.misses++;
    }
    c->st.bytes = c->bytes;
    pthread_mutex_unlock(&c->mu);
    return e;
}

/* Give e back (or free it: every column served, or a copy is already in),
 * then evict least recently used entries over the cap (e included). */
static void cache_put(fs_mask_cache *c, struct cache_ent *e)
{
    struct cache_ent *drop = NULL;

    pthread_mutex_lock(&c->mu);
    if (e->served >= e->sz) {
        drop = e;
    } else {
        for (struct cache_ent *o = c->list; o != NULL; o = o->next) {
            if (o->t == e->t && CRYPTO_memcmp(o->id, e->id, 32) == 0) {
                o->served += e->served; /* taken twice at once: keep the first */
                drop = e;
                break;
            }
        }
    }
    if (drop == NULL) {
        e->used = ++c->tick;
        e->next = c->list;
        c->list = e;
        c->bytes += ent_bytes(e);
        c->st.entries++;
    }
    while (c->bytes > c->cap && c->list != NULL) {
        struct cache_ent **lru = &c->list;
        struct cache_ent *victim;
        for (struct cache_ent **pp = &c->list; *pp != NULL; pp = &(*pp)->next) {
            if ((*pp)->used < (*lru)->used) {
                lru = pp;
            }
        }
        victim = *lru;
        *lru = victim->next;
        c->bytes -= ent_bytes(victim);
        c->st.entries--;
        c->st.evicted++;
        ent_free(victim);
    }
    c->st.bytes = c->bytes;
    pthread_mutex_unlock(&c->mu);
    ent_free(drop);
}

/*
 * block_columns through cache c: the block's reflectors (drawn only as far
 * as needed, extended on the same stream later) and any chunk formed only in
 * part stay for the next request, e.g. the neighbouring party's slab. Every
 * column comes from fs_haar_columns on the same reflectors with the same
 * chunking, so the bits are those without a cache.
 */
static int block_columns_cached(const fs_mask *m, fs_mask_cache *c, size_t t, size_t lc0, size_t w,
                                fs_mat **out, struct fs_err *err)
{
    size_t off;
    size_t sz;
    size_t need;
    struct cache_ent *e;
    fs_mat *q = NULL;
    int rc = 0;

    *out = NULL;
    fs_mask_block_range(m, t, &off, &sz);
    need = fs_haar_prefix_for(sz, lc0 + w);
    q = fs_mat_new_uninit(sz, w);
    e = cache_take(c, m->cache_id, t);
    if (e == NULL) {
        e = calloc(1, sizeof *e);
        if (e != NULL) {
            memcpy(e->id, m->cache_id, 32);
            e->t = t;
            e->sz = sz;
        }
    }
    if (q == NULL || e == NULL) {
        free_secret(q);
        ent_free(e);
        return fs_err_set(err, FS_ENOMEM, "mask: out of memory");
    }
    if (e->h != NULL && fs_haar_reflectors(e->h) < need && e->prg == NULL) {
        fs_haar_free(e->h); /* truncated: its stream cannot go on, draw anew */
        e->h = NULL;
    }
    if (e->h == NULL) {
        rc = mask_stream(m, (uint64_t)t + 1, &e->prg, err);
        if (rc == 0) {
            rc = fs_haar_gen_prefix(sz, need, e->prg, &e->h, err);
        }
    } else if (fs_haar_reflectors(e->h) < need) {
        rc = fs_haar_extend(e->h, need, e->prg, err);
    }
    for (size_t a = lc0 / FS_HAAR_COL_CHUNK; rc == 0 && a * FS_HAAR_COL_CHUNK < lc0 + w; a++) {
        size_t lo = a * FS_HAAR_COL_CHUNK;
        size_t cw = sz - lo < FS_HAAR_COL_CHUNK ? sz - lo : FS_HAAR_COL_CHUNK;
        size_t from = lc0 > lo ? lc0 : lo;
        size_t to = lc0 + w < lo + cw ? lc0 + w : lo + cw;
        fs_mat *ch = NULL;
        for (size_t i = 0; i < e->nchunks; i++) {
            if (e->chunk_a[i] == a) {
                ch = e->chunk[i];
            }
        }
        if (ch == NULL && from == lo && to == lo + cw) { /* all of it: no need to keep it */
            fs_mat dst = fs_mat_view(q, 0, lo - lc0, sz, cw);
            rc = fs_haar_columns(e->h, lo, &dst, err);
            continue;
        }
        if (ch == NULL) {
            ch = fs_mat_new_uninit(sz, cw);
            if (ch == NULL) {
                rc = fs_err_set(err, FS_ENOMEM, "mask: out of memory");
                break;
            }
            rc = fs_haar_columns(e->h, lo, ch, err);
            if (rc != 0 || e->nchunks == CACHE_CHUNKS) {
                fs_mat src = fs_mat_view(ch, 0, from - lo, sz, to - from);
                fs_mat dst = fs_mat_view(q, 0, from - lc0, sz, to - from);
                if (rc == 0) {
                    rc = fs_mat_copy(&dst, &src, err);
                }
                free_secret(ch);
                continue;
            }
            e->chunk_a[e->nchunks] = a;
            e->chunk[e->nchunks++] = ch;
        }
        {
            fs_mat src = fs_mat_view(ch, 0, from - lo, sz, to - from);
            fs_mat dst = fs_mat_view(q, 0, from - lc0, sz, to - from);
            rc = fs_mat_copy(&dst, &src, err);
        }
    }
    if (rc != 0) {
        ent_free(e); /* possibly half extended: not kept */
        free_secret(q);
        return rc;
    }
    e->served += w;
    if (lc0 > 0 && lc0 + w == sz) {
        /* the block's tail is out: the columns left, all below lc0, need no
         * more reflectors than that (about halves what the entry holds) */
        size_t keep = fs_haar_prefix_for(sz, lc0);
        if (keep < fs_haar_reflectors(e->h) && fs_haar_truncate(e->h, keep, NULL) == 0) {
            fs_prg_free(e->prg);
            e->prg = NULL;
        }
    }
    cache_put(c, e);
    *out = q;
    return 0;
}

/* Fill piece p with the columns [lc0, lc0 + w) of block t. */
static int make_piece(const fs_mask *m, size_t t, size_t lc0, size_t w, fs_mask_piece *pc,
                      struct fs_err *err)
{
    size_t off;
    size_t sz;

    fs_mask_block_range(m, t, &off, &sz);
    pc->block = t;
    pc->col0 = off + lc0;
    pc->rows = malloc(sz * sizeof *pc->rows);
    if (pc->rows == NULL) {
        return fs_err_set(err, FS_ENOMEM, "mask: out of memory");
    }
    memcpy(pc->rows, m->perm + off, sz * sizeof *pc->rows);
    if (tl_cache != NULL) {
        return block_columns_cached(m, tl_cache, t, lc0, w, &pc->q, err);
    }
    return block_columns(m, t, lc0, w, &pc->q, err);
}

int fs_mask_slab_new(const fs_mask *m, size_t c0, size_t nc, fs_mask_slab **out, struct fs_err *err)
{
    fs_mask_slab *s = NULL;
    size_t t0;
    size_t t1;
    int rc = 0;

    if (out == NULL || m == NULL) {
        return fs_err_set(err, FS_EINVAL, "mask: NULL argument");
    }
    *out = NULL;
    if (nc == 0 || c0 >= m->n || nc > m->n - c0) {
        return fs_err_set(err, FS_EINVAL, "mask: slab [%zu, %zu+%zu) outside 0..%zu", c0, c0, nc,
                          m->n);
    }
    t0 = fs_mask_block_of(m, c0);
    t1 = fs_mask_block_of(m, c0 + nc - 1);
    s = calloc(1, sizeof *s);
    if (s == NULL) {
        return fs_err_set(err, FS_ENOMEM, "mask: out of memory");
    }
    s->n = m->n;
    s->c0 = c0;
    s->nc = nc;
    s->pieces = calloc(t1 - t0 + 1, sizeof *s->pieces);
    if (s->pieces == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "mask: out of memory");
        goto out;
    }
    for (size_t t = t0; rc == 0 && t <= t1; t++) {
        size_t off;
        size_t sz;
        fs_mask_block_range(m, t, &off, &sz);
        size_t lo = c0 > off ? c0 : off;
        size_t hi = (c0 + nc < off + sz) ? c0 + nc : off + sz;
        s->npieces++;
        rc = make_piece(m, t, lo - off, hi - lo, &s->pieces[t - t0], err);
    }
out:
    if (rc != 0) {
        fs_mask_slab_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

/* Bounds of piece pc within slab s: every row index < n, columns inside the slab. */
static int piece_ok(const fs_mask_slab *s, const fs_mask_piece *pc)
{
    if (pc->rows == NULL || !la_mat_ok(pc->q) || pc->q->rows > s->n || pc->col0 < s->c0 ||
        pc->q->cols > s->nc || pc->col0 - s->c0 > s->nc - pc->q->cols) {
        return 0;
    }
    for (size_t a = 0; a < pc->q->rows; a++) {
        if (pc->rows[a] >= s->n) {
            return 0;
        }
    }
    return 1;
}

static int slab_check(const fs_mask_slab *s, struct fs_err *err)
{
    if (s == NULL || (s->npieces > 0 && s->pieces == NULL)) {
        return fs_err_set(err, FS_EINVAL, "mask: invalid slab");
    }
    for (size_t p = 0; p < s->npieces; p++) {
        if (!piece_ok(s, &s->pieces[p])) {
            return fs_err_set(err, FS_EINVAL, "mask: slab piece %zu out of bounds", p);
        }
    }
    return 0;
}

int fs_mask_slab_to_dense(const fs_mask_slab *s, fs_mat **out, struct fs_err *err)
{
    fs_mat *d = NULL;
    int rc;

    if (out == NULL) {
        return fs_err_set(err, FS_EINVAL, "mask: out is NULL");
    }
    *out = NULL;
    rc = slab_check(s, err);
    if (rc != 0) {
        return rc;
    }
    d = fs_mat_new(s->n, s->nc);
    if (d == NULL) {
        return fs_err_set(err, FS_ENOMEM, "mask: out of memory for %zux%zu", s->n, s->nc);
    }
    for (size_t p = 0; p < s->npieces; p++) {
        const fs_mask_piece *pc = &s->pieces[p];
        for (size_t c = 0; c < pc->q->cols; c++) {
            for (size_t a = 0; a < pc->q->rows; a++) {
                FS_MAT_AT(d, pc->rows[a], pc->col0 - s->c0 + c) = FS_MAT_AT(pc->q, a, c);
            }
        }
    }
    *out = d;
    return 0;
}

int fs_mask_slab_dense(const fs_mask *m, size_t c0, size_t nc, fs_mat **out, struct fs_err *err)
{
    fs_mask_slab *s = NULL;
    int rc;

    if (out == NULL) {
        return fs_err_set(err, FS_EINVAL, "mask: out is NULL");
    }
    *out = NULL;
    rc = fs_mask_slab_new(m, c0, nc, &s, err);
    if (rc == 0) {
        rc = fs_mask_slab_to_dense(s, out, err);
    }
    fs_mask_slab_free(s);
    return rc;
}

int fs_mask_slab_mul(const fs_mask_slab *s, const fs_mat *x, fs_mat *y, struct fs_err *err)
{
    fs_mat *tmp = NULL;
    size_t k;
    size_t bmax = 0;
    int rc = slab_check(s, err);

    if (rc != 0) {
        return rc;
    }
    if (!la_mat_ok(x) || !la_mat_ok(y) || x->rows != s->nc || y->rows != s->n ||
        y->cols != x->cols) {
        return fs_err_set(err, FS_EINVAL, "mask: slab %zux%zu times %zux%zu into %zux%zu", s->n,
                          s->nc, x != NULL ? x->rows : 0, x != NULL ? x->cols : 0,
                          y != NULL ? y->rows : 0, y != NULL ? y->cols : 0);
    }
    if (fs_mat_overlap(x, y)) {
        return fs_err_set(err, FS_EINVAL, "mask: x and y overlap");
    }
    k = x->cols;
    for (size_t p = 0; p < s->npieces; p++) {
        if (s->pieces[p].q->rows > bmax) {
            bmax = s->pieces[p].q->rows;
        }
    }
    fs_mat_zero(y);
    tmp = fs_mat_new_uninit(bmax, k);
    if (tmp == NULL) {
        return fs_err_set(err, FS_ENOMEM, "mask: out of memory");
    }
    for (size_t p = 0; rc == 0 && p < s->npieces; p++) {
        const fs_mask_piece *pc = &s->pieces[p];
        fs_mat xs = fs_mat_view(x, pc->col0 - s->c0, 0, pc->q->cols, k);
        fs_mat tv = fs_mat_view(tmp, 0, 0, pc->q->rows, k);
        rc = fs_mat_gemm('N', 'N', 1.0, pc->q, &xs, 0.0, &tv, err);
        for (size_t c = 0; rc == 0 && c < k; c++) {
            for (size_t a = 0; a < pc->q->rows; a++) {
                FS_MAT_AT(y, pc->rows[a], c) += FS_MAT_AT(&tv, a, c);
            }
        }
    }
    free_secret(tmp);
    return rc;
}

size_t fs_mask_slab_rows(const fs_mask_slab *s)
{
    size_t r = 0;

    for (size_t p = 0; s != NULL && p < s->npieces; p++) {
        r += s->pieces[p].q != NULL ? s->pieces[p].q->rows : 0;
    }
    return r;
}

int fs_mask_slab_mul_compact(const fs_mask_slab *s, const fs_mat *x, fs_mat *y, struct fs_err *err)
{
    size_t off = 0;
    int rc = slab_check(s, err);

    if (rc != 0) {
        return rc;
    }
    if (!la_mat_ok(x) || !la_mat_ok(y) || x->rows != s->nc || y->rows != fs_mask_slab_rows(s) ||
        y->cols != x->cols) {
        return fs_err_set(err, FS_EINVAL, "mask: compact slab %zux%zu times %zux%zu into %zux%zu",
                          fs_mask_slab_rows(s), s->nc, x != NULL ? x->rows : 0,
                          x != NULL ? x->cols : 0, y != NULL ? y->rows : 0,
                          y != NULL ? y->cols : 0);
    }
    if (fs_mat_overlap(x, y)) {
        return fs_err_set(err, FS_EINVAL, "mask: x and y overlap");
    }
    for (size_t p = 0; rc == 0 && p < s->npieces; p++) {
        const fs_mask_piece *pc = &s->pieces[p];
        fs_mat xs = fs_mat_view(x, pc->col0 - s->c0, 0, pc->q->cols, x->cols);
        fs_mat ys = fs_mat_view(y, off, 0, pc->q->rows, y->cols);
        rc = fs_mat_gemm('N', 'N', 1.0, pc->q, &xs, 0.0, &ys, err);
        off += pc->q->rows;
    }
    return rc;
}
