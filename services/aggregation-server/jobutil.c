/* The job manager's helpers that hold no job state: clocks, files, id
 * lists (see jobmgr_internal.h). */
#define _GNU_SOURCE /* O_DIRECT */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/fdio.h"
#include "core/hex.h"
#include "crypto/sha256.h"
#include "jobmgr_internal.h"

double agg_now_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double agg_now_wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void agg_iso_time(double t, char out[32])
{
    time_t s = (time_t)t;
    struct tm tm;
    gmtime_r(&s, &tm);
    strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* The CLOCK_REALTIME time ms milliseconds from now: the deadline of a
 * pthread_cond_timedwait on a condition variable with the default clock. */
void agg_deadline_in(struct timespec *ts, unsigned ms)
{
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

/* Remove a directory tree (our own layout: a few levels, no symlinks followed). */
void agg_rm_tree(const char *path)
{
    DIR *d = opendir(path);
    struct dirent *e;

    if (d == NULL) {
        (void)unlink(path);
        return;
    }
    while ((e = readdir(d)) != NULL) {
        char sub[4600];
        struct stat st;
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
            continue;
        }
        if ((size_t)snprintf(sub, sizeof sub, "%s/%s", path, e->d_name) >= sizeof sub) {
            continue;
        }
        if (lstat(sub, &st) == 0 && S_ISDIR(st.st_mode)) {
            agg_rm_tree(sub);
        } else {
            (void)unlink(sub);
        }
    }
    closedir(d);
    (void)rmdir(path);
}

/* Internal failures (not a bad message): the job cannot go on safely. */
int agg_is_internal(int code)
{
    return code == FS_ENOMEM || code == FS_EIO || code == FS_ECRYPTO || code == FS_EINTERNAL ||
           code == FS_ENUMERIC;
}

json_t *agg_ids_where(const uint8_t *flags, const uint8_t *unless, uint32_t n)
{
    json_t *a = json_array();
    for (uint32_t v = 1; a != NULL && v <= n; v++) {
        if (flags[v] && (unless == NULL || !unless[v])) {
            json_array_append_new(a, json_integer(v));
        }
    }
    return a;
}

void agg_le64_decode(uint64_t *y, const uint8_t *b, size_t m)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if ((const void *)y != (const void *)b) {
        memmove(y, b, m * 8); /* already the host's order; y and b may overlap */
    }
#else
    for (size_t i = 0; i < m; i++) {
        const uint8_t *p = b + 8 * i;
        y[i] = (uint64_t)p[0] | ((uint64_t)p[1] << 8) | ((uint64_t)p[2] << 16) |
               ((uint64_t)p[3] << 24) | ((uint64_t)p[4] << 32) | ((uint64_t)p[5] << 40) |
               ((uint64_t)p[6] << 48) | ((uint64_t)p[7] << 56);
    }
#endif
}

/* Words [off, off + m) of a party's upload file, decoded. */
int agg_read_words(const char *path, uint64_t off, uint64_t *y, size_t m, struct fs_err *err)
{
    size_t want = m * 8;
    size_t got = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    if (fd < 0) {
        return fs_err_set(err, FS_EIO, "upload file: %s", strerror(errno));
    }
    while (got < want) {
        ssize_t r = pread(fd, (uint8_t *)y + got, want - got, (off_t)(off * 8 + got));
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            close(fd);
            return fs_err_set(err, FS_EIO, "upload file: short read");
        }
        got += (size_t)r;
    }
    close(fd);
    agg_le64_decode(y, (const uint8_t *)y, m); /* in place */
    return 0;
}

/* Encode m words little-endian (in place is allowed: y and b may alias). */
void agg_le64_encode(uint8_t *b, const uint64_t *y, size_t m)
{
    for (size_t i = 0; i < m; i++) {
        uint64_t v = y[i];
        for (int k = 0; k < 8; k++) {
            b[8 * i + (size_t)k] = (uint8_t)(v >> (8 * k));
        }
    }
}

/* Write n bytes at off into path (created 0600). The 4 KiB-aligned part goes
 * through O_DIRECT when the buffer allows it: it skips the page-cache copy,
 * which on some hosts costs more CPU than receiving the bytes did (measured:
 * 2.0 s of system time per 800 MB buffered, 0.5 s direct), and the data is
 * still there for a restarted process. The rest, or all of it when O_DIRECT
 * is refused (tmpfs, unaligned chunk sizes), is written normally.
 * @return 0 or an errno value. */
int agg_write_upload(const char *path, const uint8_t *p, size_t n, off_t off, int sync)
{
    size_t direct = ((uintptr_t)p % 4096 == 0 && off % 4096 == 0) ? n / 4096 * 4096 : 0;
    int fd = -1;
    int e = 0;

    if (direct > 0) {
        fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_DIRECT, 0600);
        if (fd >= 0 && fs_pwrite_all(fd, p, direct, off) != 0) {
            direct = 0; /* e.g. EINVAL from a file system without O_DIRECT */
        }
        if (fd >= 0 && sync && direct > 0 && fdatasync(fd) != 0) {
            e = errno;
        }
        if (fd >= 0) {
            close(fd);
        } else {
            direct = 0;
        }
    }
    if (e == 0 && direct < n) {
        fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0) {
            return errno;
        }
        if (fs_pwrite_all(fd, p + direct, n - direct, off + (off_t)direct) != 0 ||
            (sync && fdatasync(fd) != 0)) {
            e = errno != 0 ? errno : EIO;
        }
        close(fd);
    }
    return e;
}

/* Write m words little-endian at byte offset off into path (an uploaded
 * chunk, agg_write_upload); FS_ENOMEM, or the write's error (a full disk:
 * the chunk is not folded, and its sender is answered 503 and sends it again). */
int agg_write_upload_words(const char *path, const uint64_t *y, size_t m, off_t off, int sync,
                           struct fs_err *err)
{
    uint8_t *le = NULL;
    const uint8_t *bytes = (const uint8_t *)y;
    int rc;

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
    le = malloc(m * 8 == 0 ? 1 : m * 8);
    if (le == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    agg_le64_encode(le, y, m);
    bytes = le;
#endif
    rc = agg_write_upload(path, bytes, m * 8, off, sync);
    free(le);
    return rc != 0 ? fs_err_set(err, fs_io_errcode(rc), "upload file: %s", strerror(rc)) : 0;
}

int agg_file_sha256_hex(const char *path, char hex[65], struct fs_err *err)
{
    fs_sha256_ctx *h = NULL;
    uint8_t buf[65536];
    uint8_t d[32];
    FILE *f = fopen(path, "rb");
    size_t r;
    int rc;

    if (f == NULL) {
        return fs_err_set(err, FS_EIO, "%s: %s", path, strerror(errno));
    }
    rc = fs_sha256_new(&h, err);
    while (rc == 0 && (r = fread(buf, 1, sizeof buf, f)) > 0) {
        rc = fs_sha256_update(h, buf, r, err);
    }
    if (rc == 0 && ferror(f)) {
        rc = fs_err_set(err, FS_EIO, "%s: read error", path);
    }
    if (rc == 0) {
        rc = fs_sha256_final(h, d, err);
    }
    fs_sha256_free(h);
    fclose(f);
    if (rc == 0) {
        fs_hex_encode(d, 32, hex);
    }
    return rc;
}
