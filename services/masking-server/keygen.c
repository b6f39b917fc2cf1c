/* One party's keys: see keygen.h. */
#include "keygen.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/memfd.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "proto/fedsvd.h"

#ifndef F_ADD_SEALS
#define F_ADD_SEALS   1033
#define F_SEAL_SEAL   0x0001
#define F_SEAL_SHRINK 0x0002
#define F_SEAL_GROW   0x0004
#define F_SEAL_WRITE  0x0008
#endif

struct msk_keygen {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned slots; /* free slots */
    int closing;
    struct msk_keygen_stats st;
};

int msk_keygen_new(unsigned concurrency, msk_keygen **out, struct fs_err *err)
{
    msk_keygen *kg = calloc(1, sizeof *kg);

    if (kg == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    pthread_mutex_init(&kg->mu, NULL);
    pthread_cond_init(&kg->cv, NULL);
    kg->slots = concurrency > 0 ? concurrency : 1;
    *out = kg;
    return 0;
}

void msk_keygen_close(msk_keygen *kg)
{
    if (kg == NULL) {
        return;
    }
    pthread_mutex_lock(&kg->mu);
    kg->closing = 1;
    pthread_cond_broadcast(&kg->cv);
    pthread_mutex_unlock(&kg->mu);
}

void msk_keygen_free(msk_keygen *kg)
{
    if (kg == NULL) {
        return;
    }
    pthread_cond_destroy(&kg->cv);
    pthread_mutex_destroy(&kg->mu);
    free(kg);
}

void msk_keygen_stats(msk_keygen *kg, struct msk_keygen_stats *out)
{
    pthread_mutex_lock(&kg->mu);
    *out = kg->st;
    pthread_mutex_unlock(&kg->mu);
}

static int slot_acquire(msk_keygen *kg, struct fs_err *err)
{
    int rc = 0;

    pthread_mutex_lock(&kg->mu);
    kg->st.waiting++;
    while (kg->slots == 0 && !kg->closing) {
        pthread_cond_wait(&kg->cv, &kg->mu);
    }
    kg->st.waiting--;
    if (kg->closing) {
        rc = fs_err_set(err, FS_ESTATE, "the server is shutting down");
    } else {
        kg->slots--;
        kg->st.running++;
    }
    pthread_mutex_unlock(&kg->mu);
    return rc;
}

static void slot_release(msk_keygen *kg, int ok, double secs)
{
    pthread_mutex_lock(&kg->mu);
    kg->slots++;
    kg->st.running--;
    if (ok) {
        kg->st.done++;
        kg->st.seconds_sum += secs;
        if (secs > kg->st.seconds_max) {
            kg->st.seconds_max = secs;
        }
    } else {
        kg->st.failed++;
    }
    pthread_cond_signal(&kg->cv);
    pthread_mutex_unlock(&kg->mu);
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The blob in a sealed memfd; -1 when memfd is unavailable. */
static int to_memfd(const uint8_t *buf, size_t len)
{
    int fd = (int)syscall(SYS_memfd_create, "fedsvd-keys", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    size_t off = 0;

    if (fd < 0) {
        return -1;
    }
    while (off < len) {
        ssize_t w = write(fd, buf + off, len - off);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            close(fd);
            return -1;
        }
        off += (size_t)w;
    }
    /* Read-only from now on; sealing is best effort (older kernels, sandboxes). */
    (void)fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
    return fd;
}

int msk_keygen_party(msk_keygen *kg, const struct msk_spec *spec, const uint8_t seed[MSK_SEED_LEN],
                     uint32_t party, struct msk_keys_out *out, struct fs_err *err)
{
    struct fs_fedsvd_job job;
    fs_fedsvd_maskset *ms = NULL;
    struct fs_fedsvd_keys *keys = NULL;
    uint8_t *blob = NULL;
    size_t len = 0;
    double t0;
    int rc;

    memset(out, 0, sizeof *out);
    out->fd = -1;
    rc = slot_acquire(kg, err);
    if (rc != 0) {
        return rc;
    }
    t0 = now_s();
    msk_spec_job(spec, &job);
    rc = fs_fedsvd_maskset_new(&job, seed, &ms, err);
    if (rc == 0) {
        rc = fs_fedsvd_maskset_party(ms, party, &keys, err);
    }
    fs_fedsvd_maskset_free(ms); /* wipes the derived seeds and the permutation */
    if (rc == 0) {
        rc = fs_fedsvd_keys_encode(keys, &blob, &len, err);
    }
    fs_fedsvd_keys_free(keys); /* wipes the slab */
    if (rc == 0) {
        out->fd = to_memfd(blob, len);
        if (out->fd >= 0) {
            fs_fedsvd_wipe_free(blob, len);
        } else {
            out->buf = blob;
        }
        blob = NULL;
        out->len = len;
        out->seconds = now_s() - t0;
    }
    fs_fedsvd_wipe_free(blob, len);
    slot_release(kg, rc == 0, out->seconds);
    return rc;
}

void msk_keys_out_release(struct msk_keys_out *out)
{
    if (out == NULL) {
        return;
    }
    if (out->fd >= 0) {
        close(out->fd);
    }
    fs_fedsvd_wipe_free(out->buf, (size_t)out->len);
    out->fd = -1;
    out->buf = NULL;
    out->len = 0;
}
