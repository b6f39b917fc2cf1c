/* Key generation and the key cache: see keygen.h. */
#include "keygen.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/memfd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/bgthread.h"
#include "core/fdio.h"
#include "core/hex.h"
#include "la/mask.h"
#include "maskkeys.h"

#ifndef F_ADD_SEALS
#define F_ADD_SEALS   1033
#define F_SEAL_SEAL   0x0001
#define F_SEAL_SHRINK 0x0002
#define F_SEAL_GROW   0x0004
#define F_SEAL_WRITE  0x0008
#endif

#define SWEEP_EVERY_S 5

/* Cap of one mask set's block cache (lib/la/mask.h fs_mask_cache): what
 * neighbouring parties' slabs share. An entry is at most one block's
 * reflectors and a few chunks (~10 MB for blocks of ~1100, ~5 MB on
 * average), freed as soon as the block's columns have all been handed out;
 * over the cap the least recently used go (and their parties draw again). */
#define MASK_CACHE_BYTES ((size_t)64 << 20)

enum { KS_GENERATING = 0, KS_READY = 1, KS_FAILED = 2 };

struct mask_keyset {
    struct mask_keyset *next; /* in kg->list while linked */
    char id[MASK_ID_LEN + 1];
    uint32_t party;
    unsigned refs; /* the list's (while linked) + the callers' */
    int linked;
    int state;
    struct fs_err err; /* KS_FAILED */
    double last_used;  /* monotonic seconds */
    double seconds;
    struct fs_maskkeys man; /* job_id, maskset, header with the seeds, pieces, keys_id */
    char keys_id[65];
    struct mask_blob *files; /* 2 npieces: piece p's rows at 2p, block at 2p + 1 */
    uint8_t *served;         /* 2 npieces flags */
    size_t nserved;
    uint64_t bytes;
};

/* A mask set's block cache, shared by the generations of its parties. */
struct mcache {
    struct mcache *next; /* in kg->mcaches while linked */
    char id[MASK_ID_LEN + 1];
    fs_mask_cache *c;
    unsigned refs; /* the list's (while linked) + the generations using it */
    int linked;
    double last_used;
};

struct mask_keygen {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned slots; /* free generation slots */
    int closing;
    struct fs_bgthread sweeper; /* on mu and cv: also sweeps when cv is broadcast */
    uint64_t cap;
    double ttl;
    mask_keyset *list;
    struct mcache *mcaches;
    struct mask_keygen_stats st;
};

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------ blobs */

void mask_blob_release(struct mask_blob *b)
{
    if (b == NULL) {
        return;
    }
    if (b->fd >= 0) {
        close(b->fd);
    }
    fs_fedsvd_wipe_free(b->buf, (size_t)b->len);
    b->fd = -1;
    b->buf = NULL;
    b->len = 0;
}

/* An empty blob of len bytes to fill: a memfd, else a heap buffer. */
static int blob_open(struct mask_blob *b, uint64_t len, struct fs_err *err)
{
    b->fd = (int)syscall(SYS_memfd_create, "fedsvd-keys", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    b->buf = NULL;
    b->len = len;
    if (b->fd >= 0) {
        return 0;
    }
    b->buf = malloc(len > 0 ? (size_t)len : 1);
    if (b->buf == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory for %llu bytes", (unsigned long long)len);
    }
    return 0;
}

/* Read-only from now on; sealing is best effort (older kernels, sandboxes). */
static void blob_seal(struct mask_blob *b)
{
    if (b->fd >= 0) {
        (void)fcntl(b->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
    }
}

struct sink {
    struct mask_blob *b;
    uint64_t off;
};

static int sink_write(void *ctx, const uint8_t *buf, size_t n, struct fs_err *err)
{
    struct sink *s = ctx;
    size_t done = 0;

    if (s->off + n > s->b->len) {
        return fs_err_set(err, FS_EINTERNAL, "key file longer than computed");
    }
    if (s->b->fd < 0) {
        memcpy(s->b->buf + s->off, buf, n);
        s->off += n;
        return 0;
    }
    while (done < n) {
        ssize_t w = write(s->b->fd, buf + done, n - done);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            return fs_err_set(err, w < 0 ? fs_io_errcode(errno) : FS_EIO,
                              "cannot write a key file to memory: %s",
                              w < 0 ? strerror(errno) : "short write");
        }
        done += (size_t)w;
    }
    s->off += n;
    return 0;
}

/* A second handle on b for one response. */
static int blob_share(const struct mask_blob *b, struct mask_blob *out, struct fs_err *err)
{
    out->fd = -1;
    out->buf = NULL;
    out->len = b->len;
    if (b->fd >= 0) {
        /* Responses read with pread/sendfile at explicit offsets: a dup is enough. */
        out->fd = fcntl(b->fd, F_DUPFD_CLOEXEC, 0);
        if (out->fd < 0) {
            return fs_err_set(err, FS_EIO, "cannot duplicate a key file: %s", strerror(errno));
        }
        return 0;
    }
    out->buf = malloc(b->len > 0 ? (size_t)b->len : 1);
    if (out->buf == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    memcpy(out->buf, b->buf, (size_t)b->len);
    return 0;
}

/* ------------------------------------------------------------ entries */

static void keyset_free(mask_keyset *ks)
{
    if (ks == NULL) {
        return;
    }
    for (size_t i = 0; ks->files != NULL && i < 2 * ks->man.npieces; i++) {
        mask_blob_release(&ks->files[i]);
    }
    free(ks->files);
    free(ks->served);
    fs_maskkeys_clear(&ks->man);
    OPENSSL_cleanse(ks, sizeof *ks);
    free(ks);
}

/* Unlink ks from the list (kg->mu held); frees it when nobody else holds it. */
static void unlink_locked(mask_keygen *kg, mask_keyset *ks)
{
    mask_keyset **pp = &kg->list;

    if (!ks->linked) {
        return;
    }
    while (*pp != NULL && *pp != ks) {
        pp = &(*pp)->next;
    }
    if (*pp == ks) {
        *pp = ks->next;
    }
    ks->next = NULL;
    ks->linked = 0;
    if (ks->state == KS_READY) {
        kg->st.cache_entries--;
        kg->st.cache_bytes -= ks->bytes;
    }
    if (--ks->refs == 0) {
        keyset_free(ks);
    }
}

/* ------------------------------------------------------------ block caches */

static void mcache_release_locked(mask_keygen *kg, struct mcache *mc)
{
    if (--mc->refs == 0) {
        struct fs_mask_cache_stats cs;
        fs_mask_cache_stats(mc->c, &cs);
        kg->st.block_hits += cs.hits; /* keep the counts of the caches gone */
        kg->st.block_misses += cs.misses;
        fs_mask_cache_free(mc->c);
        free(mc);
    }
}

static void mcache_unlink_locked(mask_keygen *kg, struct mcache *mc)
{
    struct mcache **pp = &kg->mcaches;

    while (*pp != NULL && *pp != mc) {
        pp = &(*pp)->next;
    }
    if (*pp == mc) {
        *pp = mc->next;
    }
    mc->next = NULL;
    mc->linked = 0;
    mcache_release_locked(kg, mc);
}

/* The block cache of mask set id, created if need be; NULL when out of
 * memory (the generation then runs without one). */
static struct mcache *mcache_get(mask_keygen *kg, const char *id)
{
    struct mcache *mc;

    pthread_mutex_lock(&kg->mu);
    for (mc = kg->mcaches; mc != NULL; mc = mc->next) {
        if (strcmp(mc->id, id) == 0) {
            break;
        }
    }
    if (mc == NULL) {
        mc = calloc(1, sizeof *mc);
        if (mc != NULL && fs_mask_cache_new(MASK_CACHE_BYTES, &mc->c, NULL) != 0) {
            free(mc);
            mc = NULL;
        }
        if (mc != NULL) {
            snprintf(mc->id, sizeof mc->id, "%s", id);
            mc->refs = 1;
            mc->linked = 1;
            mc->next = kg->mcaches;
            kg->mcaches = mc;
        }
    }
    if (mc != NULL) {
        mc->refs++;
        mc->last_used = now_s();
    }
    pthread_mutex_unlock(&kg->mu);
    return mc;
}

static void mcache_put(mask_keygen *kg, struct mcache *mc)
{
    if (mc == NULL) {
        return;
    }
    pthread_mutex_lock(&kg->mu);
    mc->last_used = now_s();
    mcache_release_locked(kg, mc);
    pthread_mutex_unlock(&kg->mu);
}

/* Drop entries unused for ttl (kg->mu held). */
static void sweep_locked(mask_keygen *kg, double now)
{
    mask_keyset *ks = kg->list;

    for (struct mcache *mc = kg->mcaches; mc != NULL;) {
        struct mcache *next = mc->next;
        if (now - mc->last_used > kg->ttl) {
            mcache_unlink_locked(kg, mc);
        }
        mc = next;
    }

    while (ks != NULL) {
        mask_keyset *next = ks->next;
        if (ks->state == KS_READY && now - ks->last_used > kg->ttl) {
            unlink_locked(kg, ks);
        }
        ks = next;
    }
}

/* Evict least recently used ready entries but keep (kg->mu held). */
static void enforce_cap_locked(mask_keygen *kg, const mask_keyset *keep)
{
    while (kg->st.cache_bytes > kg->cap) {
        mask_keyset *lru = NULL;
        for (mask_keyset *ks = kg->list; ks != NULL; ks = ks->next) {
            if (ks != keep && ks->state == KS_READY &&
                (lru == NULL || ks->last_used < lru->last_used)) {
                lru = ks;
            }
        }
        if (lru == NULL) {
            return;
        }
        unlink_locked(kg, lru);
    }
}

static void *sweeper_main(void *arg)
{
    mask_keygen *kg = arg;

    while (!fs_bgthread_wait(&kg->sweeper, SWEEP_EVERY_S * 1000)) {
        pthread_mutex_lock(&kg->mu);
        sweep_locked(kg, now_s());
        pthread_mutex_unlock(&kg->mu);
    }
    return NULL;
}

/* ------------------------------------------------------------ generator */

int mask_keygen_new(const struct mask_keygen_opts *o, mask_keygen **out, struct fs_err *err)
{
    mask_keygen *kg = calloc(1, sizeof *kg);

    if (kg == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    pthread_mutex_init(&kg->mu, NULL);
    pthread_cond_init(&kg->cv, NULL);
    fs_bgthread_init_shared(&kg->sweeper, &kg->mu, &kg->cv);
    kg->slots = o->concurrency > 0 ? o->concurrency : 1;
    kg->cap = o->cache_bytes;
    kg->ttl = o->ttl_s > 0 ? (double)o->ttl_s : 1.0;
    if (fs_bgthread_start(&kg->sweeper, sweeper_main, kg, NULL) != 0) {
        mask_keygen_free(kg);
        return fs_err_set(err, FS_ENOMEM, "cannot start the key cache sweeper");
    }
    *out = kg;
    return 0;
}

void mask_keygen_close(mask_keygen *kg)
{
    if (kg == NULL) {
        return;
    }
    pthread_mutex_lock(&kg->mu);
    kg->closing = 1;
    pthread_cond_broadcast(&kg->cv);
    pthread_mutex_unlock(&kg->mu);
}

void mask_keygen_free(mask_keygen *kg)
{
    if (kg == NULL) {
        return;
    }
    fs_bgthread_stop(&kg->sweeper);
    while (kg->list != NULL) {
        unlink_locked(kg, kg->list);
    }
    while (kg->mcaches != NULL) {
        mcache_unlink_locked(kg, kg->mcaches);
    }
    pthread_cond_destroy(&kg->cv);
    pthread_mutex_destroy(&kg->mu);
    free(kg);
}

void mask_keygen_stats(mask_keygen *kg, struct mask_keygen_stats *out)
{
    pthread_mutex_lock(&kg->mu);
    *out = kg->st;
    out->block_bytes = 0;
    for (struct mcache *mc = kg->mcaches; mc != NULL; mc = mc->next) {
        struct fs_mask_cache_stats cs;
        fs_mask_cache_stats(mc->c, &cs);
        out->block_hits += cs.hits;
        out->block_misses += cs.misses;
        out->block_bytes += cs.bytes;
    }
    pthread_mutex_unlock(&kg->mu);
}

static int slot_acquire(mask_keygen *kg, struct fs_err *err)
{
    int rc = 0;

    pthread_mutex_lock(&kg->mu);
    kg->st.waiting++;
    while (kg->slots == 0 && !kg->closing) {
        pthread_cond_wait(&kg->cv, &kg->mu);
    }
    kg->st.waiting--;
    if (kg->closing) {
        rc = fs_err_set(err, FS_EUNAVAILABLE, "the server is shutting down");
    } else {
        kg->slots--;
        kg->st.running++;
    }
    pthread_mutex_unlock(&kg->mu);
    return rc;
}

/* Give the slot back and publish the entry's outcome (rc). */
static void finish_generation(mask_keygen *kg, mask_keyset *ks, int rc, const struct fs_err *err)
{
    pthread_mutex_lock(&kg->mu);
    kg->slots++;
    kg->st.running--;
    if (rc == 0) {
        kg->st.done++;
        kg->st.seconds_sum += ks->seconds;
        if (ks->seconds > kg->st.seconds_max) {
            kg->st.seconds_max = ks->seconds;
        }
        ks->state = KS_READY;
        ks->last_used = now_s();
        if (ks->linked) {
            kg->st.cache_entries++;
            kg->st.cache_bytes += ks->bytes;
            enforce_cap_locked(kg, ks);
        }
    } else {
        kg->st.failed++;
        ks->err = *err;
        ks->state = KS_FAILED;
        unlink_locked(kg, ks); /* the caller still holds a reference */
    }
    pthread_cond_broadcast(&kg->cv);
    pthread_mutex_unlock(&kg->mu);
}

/* Write every piece's two files into ks (secret: the slab is wiped by the caller). */
static int write_files(mask_keyset *ks, const struct fs_fedsvd_keys *keys, struct fs_err *err)
{
    size_t n = keys->a_slab->npieces;
    int rc = 0;

    ks->files = calloc(2 * n, sizeof *ks->files);
    ks->served = calloc(2 * n, 1);
    ks->man.pieces = calloc(n, sizeof *ks->man.pieces);
    if (ks->files == NULL || ks->served == NULL || ks->man.pieces == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < 2 * n; i++) {
        ks->files[i].fd = -1;
    }
    ks->man.npieces = n;
    for (size_t p = 0; rc == 0 && p < n; p++) {
        const fs_mat *q = keys->a_slab->pieces[p].q;
        for (int w = 0; rc == 0 && w < 2; w++) {
            enum fs_fedsvd_keyfile which =
                w == 0 ? FS_FEDSVD_KEYFILE_ROWS : FS_FEDSVD_KEYFILE_BLOCK;
            struct mask_blob *b = &ks->files[2 * p + (size_t)w];
            struct sink s = {b, 0};
            rc = blob_open(b, fs_fedsvd_keyfile_len(q->rows, q->cols, which), err);
            if (rc == 0) {
                rc = fs_fedsvd_keyfile_write(keys, p, which, sink_write, &s, &ks->man.pieces[p],
                                             err);
            }
            if (rc == 0 && s.off != b->len) {
                rc = fs_err_set(err, FS_EINTERNAL, "key file shorter than computed");
            }
            blob_seal(b);
            ks->bytes += b->len;
        }
    }
    return rc;
}

/* Generate ks's contents (no lock held). */
static int generate(mask_keygen *kg, mask_keyset *ks, const struct mask_spec *spec,
                    const uint8_t *seed, struct fs_err *err)
{
    struct fs_fedsvd_job job;
    fs_fedsvd_maskset *ms = NULL;
    struct fs_fedsvd_keys *keys = NULL;
    struct mcache *mc = NULL;
    double t0 = now_s();
    int rc;

    mask_spec_job(spec, &job);
    rc = fs_fedsvd_maskset_new(&job, seed, &ms, err);
    if (rc == 0) {
        /* the slab's blocks through the mask set's block cache: a neighbour's
         * slab reuses what this one drew in a block they share */
        fs_mask_cache *prev;
        mc = mcache_get(kg, ks->id);
        prev = fs_mask_cache_attach(mc != NULL ? mc->c : NULL);
        rc = fs_fedsvd_maskset_party(ms, ks->party, &keys, err);
        (void)fs_mask_cache_attach(prev);
        mcache_put(kg, mc);
    }
    fs_fedsvd_maskset_free(ms); /* wipes the derived seeds and the permutation */
    if (rc == 0) {
        rc = write_files(ks, keys, err);
    }
    if (rc == 0) {
        ks->man.hdr = *keys;
        ks->man.hdr.a_slab = NULL;
        snprintf(ks->man.job_id, sizeof ks->man.job_id, "%s", spec->job_id);
        snprintf(ks->man.maskset, sizeof ks->man.maskset, "%s", ks->id);
        rc = fs_fedsvd_keys_id(keys, ks->man.pieces, ks->man.npieces, ks->man.keys_id, err);
    }
    if (rc == 0) {
        fs_hex_encode(ks->man.keys_id, 32, ks->keys_id);
    }
    fs_fedsvd_keys_free(keys); /* wipes the slab */
#ifdef __GLIBC__
    /* Generations run on the requests' threads, each with its own malloc
     * arena that would keep the slab's freed (wiped) memory resident, up to
     * ~20 MB per thread: give it back (the whole slab is in the memfds now). */
    (void)malloc_trim(0);
#endif
    ks->seconds = now_s() - t0;
    return rc;
}

int mask_keygen_get(mask_keygen *kg, const char *id, const struct mask_spec *spec,
                    const uint8_t seed[MASK_SEED_LEN], uint32_t party, mask_keyset **out,
                    int *generated, struct fs_err *err)
{
    mask_keyset *ks;
    int rc;

    *out = NULL;
    if (generated != NULL) {
        *generated = 0;
    }
    if (strlen(id) > MASK_ID_LEN) {
        return fs_err_set(err, FS_EINVAL, "bad mask set id");
    }
    pthread_mutex_lock(&kg->mu);
    for (ks = kg->list; ks != NULL; ks = ks->next) {
        if (ks->party == party && strcmp(ks->id, id) == 0) {
            break;
        }
    }
    if (ks != NULL) {
        ks->refs++;
        kg->st.cache_hits++;
        while (ks->state == KS_GENERATING && !kg->closing) {
            pthread_cond_wait(&kg->cv, &kg->mu);
        }
        if (ks->state == KS_READY) {
            ks->last_used = now_s();
            pthread_mutex_unlock(&kg->mu);
            *out = ks;
            return 0;
        }
        rc = ks->state == KS_FAILED
                 ? fs_err_set(err, ks->err.code, "%s", ks->err.msg)
                 : fs_err_set(err, FS_EUNAVAILABLE, "the server is shutting down");
        if (--ks->refs == 0) {
            keyset_free(ks);
        }
        pthread_mutex_unlock(&kg->mu);
        return rc;
    }
    if (kg->closing) {
        pthread_mutex_unlock(&kg->mu);
        return fs_err_set(err, FS_EUNAVAILABLE, "the server is shutting down");
    }
    ks = calloc(1, sizeof *ks);
    if (ks == NULL) {
        pthread_mutex_unlock(&kg->mu);
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    snprintf(ks->id, sizeof ks->id, "%s", id);
    ks->party = party;
    ks->refs = 2; /* the list's and ours */
    ks->linked = 1;
    ks->state = KS_GENERATING;
    ks->next = kg->list;
    kg->list = ks;
    pthread_mutex_unlock(&kg->mu);

    rc = slot_acquire(kg, err);
    if (rc != 0) {
        pthread_mutex_lock(&kg->mu);
        ks->err = *err;
        ks->state = KS_FAILED;
        unlink_locked(kg, ks);
        pthread_cond_broadcast(&kg->cv);
        pthread_mutex_unlock(&kg->mu);
        mask_keyset_put(kg, ks);
        return rc;
    }
    rc = generate(kg, ks, spec, seed, err);
    finish_generation(kg, ks, rc, err);
    if (rc != 0) {
        mask_keyset_put(kg, ks);
        return rc;
    }
    if (generated != NULL) {
        *generated = 1;
    }
    *out = ks;
    return 0;
}

void mask_keyset_put(mask_keygen *kg, mask_keyset *ks)
{
    if (ks == NULL) {
        return;
    }
    pthread_mutex_lock(&kg->mu);
    if (--ks->refs == 0) {
        keyset_free(ks);
    }
    pthread_mutex_unlock(&kg->mu);
}

void mask_keygen_drop(mask_keygen *kg, const char *id)
{
    pthread_mutex_lock(&kg->mu);
    for (mask_keyset *ks = kg->list; ks != NULL;) {
        mask_keyset *next = ks->next;
        if (strcmp(ks->id, id) == 0) {
            unlink_locked(kg, ks);
        }
        ks = next;
    }
    for (struct mcache *mc = kg->mcaches; mc != NULL;) {
        struct mcache *next = mc->next;
        if (strcmp(mc->id, id) == 0) {
            mcache_unlink_locked(kg, mc);
        }
        mc = next;
    }
    pthread_mutex_unlock(&kg->mu);
}

/* ------------------------------------------------------------ serving */

int mask_keyset_manifest(const mask_keyset *ks, struct mask_blob *out, struct fs_err *err)
{
    json_t *j = fs_maskkeys_encode(&ks->man);
    char *text = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;
    struct sink s = {out, 0};
    int rc;

    if (j != NULL) { /* jansson frees its strings unwiped: wipe the seeds' copies first */
        const char *keys[] = {"b_seed", "group_key"};
        for (size_t i = 0; i < 2; i++) {
            json_t *v = json_object_get(j, keys[i]);
            if (json_is_string(v)) {
                OPENSSL_cleanse((char *)json_string_value(v), json_string_length(v));
            }
        }
    }
    json_decref(j);
    out->fd = -1;
    out->buf = NULL;
    out->len = 0;
    if (text == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    rc = blob_open(out, strlen(text), err);
    if (rc == 0) {
        rc = sink_write(&s, (const uint8_t *)text, strlen(text), err);
    }
    blob_seal(out);
    OPENSSL_cleanse(text, strlen(text));
    free(text);
    if (rc != 0) {
        mask_blob_release(out);
    }
    return rc;
}

size_t mask_keyset_npieces(const mask_keyset *ks)
{
    return ks->man.npieces;
}

const char *mask_keyset_id(const mask_keyset *ks)
{
    return ks->keys_id;
}

double mask_keyset_seconds(const mask_keyset *ks)
{
    return ks->seconds;
}

uint64_t mask_keyset_bytes(const mask_keyset *ks)
{
    return ks->bytes;
}

int mask_keyset_file(mask_keygen *kg, mask_keyset *ks, size_t p, enum fs_fedsvd_keyfile which,
                     struct mask_blob *out, struct fs_err *err)
{
    size_t i = 2 * p + (which == FS_FEDSVD_KEYFILE_BLOCK ? 1 : 0);
    int rc;

    out->fd = -1;
    out->buf = NULL;
    out->len = 0;
    if (p >= ks->man.npieces) {
        return fs_err_set(err, FS_ENOTFOUND, "no piece %zu (the slab has %zu)", p, ks->man.npieces);
    }
    rc = blob_share(&ks->files[i], out, err);
    if (rc != 0) {
        return rc;
    }
    pthread_mutex_lock(&kg->mu);
    if (!ks->served[i]) {
        ks->served[i] = 1;
        ks->nserved++;
    }
    ks->last_used = now_s();
    if (ks->nserved == 2 * ks->man.npieces) {
        unlink_locked(kg, ks); /* the party has everything: do not keep it */
    }
    pthread_mutex_unlock(&kg->mu);
    return 0;
}

int mask_keyset_all_served(mask_keygen *kg, const mask_keyset *ks)
{
    int all;

    pthread_mutex_lock(&kg->mu);
    all = ks->nserved == 2 * ks->man.npieces;
    pthread_mutex_unlock(&kg->mu);
    return all;
}
