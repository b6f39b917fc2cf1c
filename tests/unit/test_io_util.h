/* Helpers shared by the tests/unit/test_io_*.c programs: a private temporary
 * directory, writing sample files, checking error codes and messages, a
 * deterministic generator and a truncate/mutate fuzz loop. */
#ifndef FS_TEST_IO_UTIL_H
#define FS_TEST_IO_UTIL_H

#include "io/matio.h"
#include "test.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#define T_UNUSED __attribute__((unused))

static char t_dir[512];

T_UNUSED static void tdir_init(const char *tag)
{
    const char *base = getenv("TMPDIR");
    snprintf(t_dir, sizeof t_dir, "%s/fsio-%s-XXXXXX", base != NULL ? base : "/tmp", tag);
    if (mkdtemp(t_dir) == NULL) {
        perror("mkdtemp");
        exit(2);
    }
}

T_UNUSED static void tdir_cleanup(void)
{
    DIR *d = opendir(t_dir);
    struct dirent *e;
    char p[1024];

    if (d == NULL) {
        return;
    }
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
            continue;
        }
        snprintf(p, sizeof p, "%s/%s", t_dir, e->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(t_dir);
}

/* Count files in the temp dir whose name contains needle. */
T_UNUSED static int tdir_count(const char *needle)
{
    DIR *d = opendir(t_dir);
    struct dirent *e;
    int n = 0;

    if (d == NULL) {
        return -1;
    }
    while ((e = readdir(d)) != NULL) {
        if (strstr(e->d_name, needle) != NULL) {
            n++;
        }
    }
    closedir(d);
    return n;
}

/* Path of name in the temp dir, in one of 4 rotating static buffers. */
T_UNUSED static const char *tpath(const char *name)
{
    static char bufs[4][1024];
    static int k;
    char *b = bufs[k++ & 3];
    snprintf(b, sizeof bufs[0], "%s/%s", t_dir, name);
    return b;
}

T_UNUSED static void write_bytes(const char *path, const void *data, size_t n)
{
    FILE *f;
    /* A new file, not a truncated one: ext4 flushes truncate-and-rewrite on
     * close (auto_da_alloc), which makes the fuzz loops crawl. */
    unlink(path);
    f = fopen(path, "wb");
    if (f == NULL || (n > 0 && fwrite(data, 1, n, f) != n) || fclose(f) != 0) {
        perror(path);
        exit(2);
    }
}

T_UNUSED static void write_str(const char *path, const char *s)
{
    write_bytes(path, s, strlen(s));
}

T_UNUSED static void write_gz(const char *path, const void *data, size_t n)
{
    gzFile g = gzopen(path, "wb");
    if (g == NULL || (n > 0 && gzwrite(g, data, (unsigned)n) != (int)n) || gzclose(g) != Z_OK) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(2);
    }
}

T_UNUSED static const void *t_memmem(const void *hay, size_t n, const void *needle, size_t k)
{
    const uint8_t *h = hay;
    for (size_t i = 0; k <= n && i <= n - k; i++) {
        if (memcmp(h + i, needle, k) == 0) {
            return h + i;
        }
    }
    return NULL;
}

/* Whole file into a malloc'd buffer. */
T_UNUSED static uint8_t *read_all(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    uint8_t *b = NULL;
    long len;

    *n = 0;
    if (f == NULL) {
        return NULL;
    }
    if (fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
        b = malloc((size_t)len + 1);
        if (b != NULL && fread(b, 1, (size_t)len, f) == (size_t)len) {
            *n = (size_t)len;
        } else {
            free(b);
            b = NULL;
        }
    }
    fclose(f);
    return b;
}

/* rc must be code; the message must start with path and contain needle. */
#define EXPECT_ERR(call, errp, code, path, needle)                                                 \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        const char *p_ = (path);                                                                   \
        CHECK_MSG(rc_ == (code), "rc %d (%s), want %d: %s", rc_, fs_err_name(rc_), (code),         \
                  (errp)->msg);                                                                    \
        CHECK_MSG(p_ == NULL || strncmp((errp)->msg, p_, strlen(p_)) == 0,                         \
                  "message does not start with the path: %s", (errp)->msg);                        \
        CHECK_MSG(strstr((errp)->msg, (needle)) != NULL, "message lacks '%s': %s", (needle),       \
                  (errp)->msg);                                                                    \
    } while (0)

/* Load text content written to name with format detection. */
T_UNUSED static int load_text(const char *name, const char *content, const struct fs_io_caps *caps,
                              fs_mat **m, struct fs_err *e)
{
    write_str(tpath(name), content);
    return fs_io_load_dense(tpath(name), FS_FMT_AUTO, caps, m, e);
}

/* Deterministic xorshift64*, no rand(). */
static uint64_t t_rng_state = 0x9e3779b97f4a7c15ull;

T_UNUSED static uint64_t t_rng(void)
{
    uint64_t x = t_rng_state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    t_rng_state = x;
    return x * 0x2545f4914f6cdd1dull;
}

/* Uniform in [-1, 1). */
T_UNUSED static double t_unif(void)
{
    return (double)(t_rng() >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

/* Every prefix of good (and `mutations` random byte edits) must load or fail
 * cleanly: no crash, no leak (ASan), a message starting with the path.
 * Returns how many variants loaded successfully. */
T_UNUSED static int fuzz_file(const char *name, const uint8_t *good, size_t n, int mutations,
                              int sparse)
{
    const char *path = tpath(name);
    uint8_t *b = malloc(n + 1);
    int ok = 0;

    for (int it = 0; it < (int)n + 1 + mutations; it++) {
        struct fs_err e = {0};
        size_t len = n;
        int rc;
        memcpy(b, good, n);
        if (it <= (int)n) {
            len = (size_t)it;
        } else {
            int k = 1 + (int)(t_rng() % 3);
            for (int q = 0; q < k; q++) {
                size_t at = (size_t)(t_rng() % n);
                uint64_t r = t_rng();
                b[at] =
                    (r & 3) == 0 ? (uint8_t) "0123456789,.-e \n%\x93"[r % 18] : (uint8_t)(r >> 8);
            }
        }
        write_bytes(path, b, len);
        if (sparse) {
            fs_csr *a = NULL;
            rc = fs_io_load_sparse(path, FS_FMT_AUTO, NULL, &a, &e);
            fs_csr_free(a);
        } else {
            fs_mat *m = NULL;
            rc = fs_io_load_dense(path, FS_FMT_AUTO, NULL, &m, &e);
            CHECK(rc != 0 || (m != NULL && m->rows > 0 && m->cols > 0));
            fs_mat_free(m);
        }
        if (rc == 0) {
            ok++;
        } else {
            CHECK_MSG(rc < 0 && strncmp(e.msg, path, strlen(path)) == 0,
                      "variant %d: rc %d, message: %s", it, rc, e.msg);
        }
    }
    free(b);
    return ok;
}

#endif
