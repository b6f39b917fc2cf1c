/* The agent's data directory: identity key, atomic writes, hashing. */
#include "agent.h"

#include "core/fdio.h"
#include "crypto/aead.h"
#include "crypto/ct.h"
#include "crypto/ed25519.h"
#include "crypto/rand.h"
#include "crypto/sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define IDENTITY_FILE  "identity.key"
#define AGENT_KEY_FILE "agent.key" /* seals the resume state in agent.db */

void ca_files_now(char out[32])
{
    time_t t = time(NULL);
    struct tm tm;

    gmtime_r(&t, &tm);
    strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static int key_path(const char *data_dir, const char *name, char *buf, size_t cap,
                    struct fs_err *err)
{
    if (snprintf(buf, cap, "%s/%s", data_dir, name) >= (int)cap) {
        return fs_err_set(err, FS_EINVAL, "data dir path too long");
    }
    return 0;
}

static int identity_path(const char *data_dir, char *buf, size_t cap, struct fs_err *err)
{
    return key_path(data_dir, IDENTITY_FILE, buf, cap, err);
}

/* A 32-byte key file of the data directory, 0600. */
static int key_load(const char *data_dir, const char *name, uint8_t sk[32], struct fs_err *err)
{
    char path[CA_PATH_MAX];
    struct stat sb;
    ssize_t got;
    uint8_t extra;
    int fd;
    int rc = key_path(data_dir, name, path, sizeof path, err);

    if (rc != 0) {
        return rc;
    }
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        return fs_err_set(err, errno == ENOENT ? FS_ENOTFOUND : FS_EIO, "%s: cannot open: %s", path,
                          strerror(errno));
    }
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        rc = fs_err_set(err, FS_EIO, "%s: not a regular file", path);
    } else if ((sb.st_mode & 077) != 0) {
        rc = fs_err_set(err, FS_EINVAL,
                        "%s: readable or writable by group or others (mode %03o); it must be "
                        "0600",
                        path, (unsigned)(sb.st_mode & 0777));
    } else {
        got = read(fd, sk, 32);
        if (got != 32 || read(fd, &extra, 1) != 0) {
            rc = fs_err_set(err, FS_EFORMAT, "%s: expected exactly 32 bytes", path);
        }
    }
    close(fd);
    if (rc != 0) {
        fs_wipe(sk, 32);
    }
    return rc;
}

int ca_files_identity_load(const char *data_dir, uint8_t sk[32], struct fs_err *err)
{
    return key_load(data_dir, IDENTITY_FILE, sk, err);
}

int ca_files_agent_key_ensure(const char *data_dir, struct fs_err *err)
{
    char path[CA_PATH_MAX];
    uint8_t key[32];
    int rc = key_load(data_dir, AGENT_KEY_FILE, key, err);

    fs_wipe(key, sizeof key);
    if (rc != FS_ENOTFOUND) {
        return rc;
    }
    rc = key_path(data_dir, AGENT_KEY_FILE, path, sizeof path, err);
    if (rc == 0) {
        rc = fs_rand_bytes(key, sizeof key, err);
    }
    if (rc == 0) {
        rc = fs_write_file_atomic(path, key, sizeof key, err);
    }
    fs_wipe(key, sizeof key);
    if (rc == 0) {
        fs_log_pack(FS_LOG_INFO, "resume-state key created", "{s:s}", "file", AGENT_KEY_FILE);
    }
    return rc;
}

/* Associated data: the purpose and the participation id, so a sealed state
 * cannot be moved to another row. */
static int resume_ad(const char *id, char *ad, size_t cap, size_t *len)
{
    int n = snprintf(ad, cap, "fedsvd/agent-resume/v1/%s", id);

    if (n < 0 || (size_t)n >= cap) {
        return FS_EINVAL;
    }
    *len = (size_t)n;
    return 0;
}

int ca_files_seal_resume(const char *data_dir, const char *id, const uint8_t secret[CA_SECRET_LEN],
                         const char *token, uint8_t *out, size_t *out_len, struct fs_err *err)
{
    uint8_t pt[CA_SECRET_LEN + FS_AUTH_TOKEN_MAX + 1];
    uint8_t key[32];
    char ad[96];
    size_t adlen = 0;
    size_t tl = strlen(token);
    int rc;

    *out_len = 0;
    if (tl > FS_AUTH_TOKEN_MAX || resume_ad(id, ad, sizeof ad, &adlen) != 0) {
        return fs_err_set(err, FS_EINVAL, "resume state: token or id too long");
    }
    memcpy(pt, secret, CA_SECRET_LEN);
    memcpy(pt + CA_SECRET_LEN, token, tl + 1);
    rc = key_load(data_dir, AGENT_KEY_FILE, key, err);
    if (rc == 0) {
        rc = fs_aead_box_seal(out, CA_SEALED_MAX, out_len, key, ad, adlen, pt,
                              CA_SECRET_LEN + tl + 1, err);
    }
    fs_wipe(key, sizeof key);
    fs_wipe(pt, sizeof pt);
    return rc;
}

int ca_files_open_resume(const char *data_dir, const char *id, const uint8_t *in, size_t in_len,
                         uint8_t secret[CA_SECRET_LEN], char *token, struct fs_err *err)
{
    uint8_t pt[CA_SEALED_MAX];
    uint8_t key[32];
    char ad[96];
    size_t adlen = 0;
    size_t n = 0;
    int rc;

    if (resume_ad(id, ad, sizeof ad, &adlen) != 0) {
        return fs_err_set(err, FS_EINVAL, "resume state: id too long");
    }
    rc = key_load(data_dir, AGENT_KEY_FILE, key, err);
    if (rc == 0) {
        rc = fs_aead_box_open(pt, sizeof pt, &n, key, ad, adlen, in, in_len, err);
        if (rc != 0) {
            rc = fs_err_set(err, FS_EAUTH, "the sealed state does not open under %s (another key?)",
                            AGENT_KEY_FILE);
        }
    }
    fs_wipe(key, sizeof key);
    if (rc == 0 && (n < CA_SECRET_LEN + 1 || pt[n - 1] != '\0' ||
                    memchr(pt + CA_SECRET_LEN, '\0', n - CA_SECRET_LEN) != pt + n - 1)) {
        rc = fs_err_set(err, FS_EFORMAT, "the sealed state is malformed");
    }
    if (rc == 0) {
        memcpy(secret, pt, CA_SECRET_LEN);
        memcpy(token, pt + CA_SECRET_LEN, n - CA_SECRET_LEN);
    }
    fs_wipe(pt, sizeof pt);
    return rc;
}

int ca_files_identity_ensure(const char *data_dir, struct fs_err *err)
{
    char path[CA_PATH_MAX];
    uint8_t sk[32];
    uint8_t pk[32];
    int rc = ca_files_identity_load(data_dir, sk, err);

    if (rc == 0) {
        rc = fs_ed25519_public(pk, sk, err); /* a usable key */
        fs_wipe(sk, sizeof sk);
        return rc;
    }
    if (rc != FS_ENOTFOUND) {
        return rc;
    }
    rc = identity_path(data_dir, path, sizeof path, err);
    if (rc == 0) {
        rc = fs_ed25519_keygen(sk, pk, err);
    }
    if (rc == 0) {
        rc = fs_write_file_atomic(path, sk, sizeof sk, err);
    }
    fs_wipe(sk, sizeof sk);
    if (rc == 0) {
        fs_log_pack(FS_LOG_INFO, "identity key created", "{s:s}", "file", IDENTITY_FILE);
    }
    return rc;
}

int ca_files_identity_public(const char *data_dir, uint8_t pk[32], struct fs_err *err)
{
    uint8_t sk[32];
    int rc = ca_files_identity_load(data_dir, sk, err);

    if (rc == 0) {
        rc = fs_ed25519_public(pk, sk, err);
    }
    fs_wipe(sk, sizeof sk);
    return rc;
}

int ca_files_sha256(const char *path, uint8_t out[32], struct fs_err *err)
{
    fs_sha256_ctx *h = NULL;
    uint8_t *buf = NULL;
    FILE *f = NULL;
    size_t got;
    int rc;

    rc = fs_sha256_new(&h, err);
    if (rc != 0) {
        return rc;
    }
    buf = malloc(1 << 16);
    f = fopen(path, "rb");
    if (buf == NULL || f == NULL) {
        rc = fs_err_set(err, FS_EIO, "%s: cannot read", path);
        goto out;
    }
    while ((got = fread(buf, 1, 1 << 16, f)) > 0) {
        rc = fs_sha256_update(h, buf, got, err);
        if (rc != 0) {
            goto out;
        }
    }
    if (ferror(f)) {
        rc = fs_err_set(err, FS_EIO, "%s: read error", path);
        goto out;
    }
    rc = fs_sha256_final(h, out, err);
out:
    if (f != NULL) {
        fclose(f);
    }
    free(buf);
    fs_sha256_free(h);
    return rc;
}
