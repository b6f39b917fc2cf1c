#include "auth.h"

#include "../core/fdio.h"
#include "../crypto/rand.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define TOKEN_FILE_MAX 4096

struct entry {
    uint8_t digest[FS_AUTH_DIGEST_LEN];
    char label[FS_AUTH_LABEL_MAX];
};

struct fs_auth {
    pthread_rwlock_t lock; /* readers: checks; writers: add/remove */
    struct entry *v;
    size_t n;
    size_t cap;
};

int fs_auth_new(fs_auth **out, struct fs_err *err)
{
    fs_auth *a = calloc(1, sizeof *a);

    *out = NULL;
    if (a == NULL) {
        return fs_err_set(err, FS_ENOMEM, "auth: out of memory");
    }
    if (pthread_rwlock_init(&a->lock, NULL) != 0) {
        free(a);
        return fs_err_set(err, FS_ENOMEM, "auth: cannot create lock");
    }
    *out = a;
    return 0;
}

void fs_auth_free(fs_auth *a)
{
    if (a == NULL) {
        return;
    }
    if (a->v != NULL) {
        OPENSSL_cleanse(a->v, a->cap * sizeof *a->v);
    }
    free(a->v);
    pthread_rwlock_destroy(&a->lock);
    free(a);
}

int fs_auth_token_valid(const char *token, size_t len)
{
    if (token == NULL || len < FS_AUTH_TOKEN_MIN || len > FS_AUTH_TOKEN_MAX) {
        return 0;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)token[i];
        if (c < 0x21 || c > 0x7e) {
            return 0;
        }
    }
    return 1;
}

int fs_auth_digest(const char *token, size_t len, uint8_t out[FS_AUTH_DIGEST_LEN],
                   struct fs_err *err)
{
    unsigned int dlen = 0;

    if (EVP_Digest(token, len, out, &dlen, EVP_sha256(), NULL) != 1 || dlen != FS_AUTH_DIGEST_LEN) {
        return fs_err_set(err, FS_ECRYPTO, "auth: SHA-256 failed");
    }
    return 0;
}

int fs_auth_token_matches(const char *token, size_t len, const uint8_t expected[FS_AUTH_DIGEST_LEN])
{
    uint8_t d[FS_AUTH_DIGEST_LEN];
    int ok = 0;

    if (token == NULL || expected == NULL) {
        return 0;
    }
    if (fs_auth_digest(token, len, d, NULL) != 0) {
        return 0;
    }
    ok = CRYPTO_memcmp(d, expected, sizeof d) == 0;
    OPENSSL_cleanse(d, sizeof d);
    return ok;
}

static int check_label(const char *label, struct fs_err *err)
{
    if (label == NULL || strnlen(label, FS_AUTH_LABEL_MAX) >= FS_AUTH_LABEL_MAX) {
        return fs_err_set(err, FS_EINVAL, "auth: label missing or longer than %d bytes",
                          FS_AUTH_LABEL_MAX - 1);
    }
    return 0;
}

int fs_auth_add_digest(fs_auth *a, const uint8_t digest[FS_AUTH_DIGEST_LEN], const char *label,
                       struct fs_err *err)
{
    int rc = check_label(label, err);

    if (rc != 0) {
        return rc;
    }
    pthread_rwlock_wrlock(&a->lock);
    if (a->n == a->cap) {
        size_t ncap = a->cap == 0 ? 8 : a->cap * 2;
        struct entry *nv = calloc(ncap, sizeof *nv);
        if (nv == NULL) {
            rc = fs_err_set(err, FS_ENOMEM, "auth: out of memory");
            goto out;
        }
        if (a->v != NULL) {
            memcpy(nv, a->v, a->n * sizeof *nv);
            OPENSSL_cleanse(a->v, a->cap * sizeof *a->v);
            free(a->v);
        }
        a->v = nv;
        a->cap = ncap;
    }
    memcpy(a->v[a->n].digest, digest, FS_AUTH_DIGEST_LEN);
    snprintf(a->v[a->n].label, sizeof a->v[a->n].label, "%s", label);
    a->n++;
out:
    pthread_rwlock_unlock(&a->lock);
    return rc;
}

int fs_auth_add(fs_auth *a, const char *token, const char *label, struct fs_err *err)
{
    uint8_t d[FS_AUTH_DIGEST_LEN];
    size_t len = token != NULL ? strnlen(token, FS_AUTH_TOKEN_MAX + 1) : 0;
    int rc = 0;

    if (!fs_auth_token_valid(token, len)) {
        return fs_err_set(err, FS_EINVAL,
                          "auth: token must be %d..%d printable ASCII characters without spaces",
                          FS_AUTH_TOKEN_MIN, FS_AUTH_TOKEN_MAX);
    }
    rc = fs_auth_digest(token, len, d, err);
    if (rc == 0) {
        rc = fs_auth_add_digest(a, d, label, err);
    }
    OPENSSL_cleanse(d, sizeof d);
    return rc;
}

int fs_auth_add_file(fs_auth *a, const char *path, const char *label, struct fs_err *err)
{
    char *tok = NULL;
    int rc = fs_auth_token_load(path, &tok, err);

    if (rc == 0) {
        rc = fs_auth_add(a, tok, label, err);
    }
    fs_auth_token_free(tok);
    return rc;
}

size_t fs_auth_remove(fs_auth *a, const char *label)
{
    size_t removed = 0;
    size_t j = 0;

    if (a == NULL || label == NULL) {
        return 0;
    }
    pthread_rwlock_wrlock(&a->lock);
    for (size_t i = 0; i < a->n; i++) {
        if (strcmp(a->v[i].label, label) == 0) {
            removed++;
            continue;
        }
        if (i != j) {
            a->v[j] = a->v[i];
        }
        j++;
    }
    if (j < a->n) {
        OPENSSL_cleanse(a->v + j, (a->n - j) * sizeof *a->v);
    }
    a->n = j;
    pthread_rwlock_unlock(&a->lock);
    return removed;
}

size_t fs_auth_count(const fs_auth *a)
{
    size_t n = 0;
    /* The lock is logically mutable state; checks take const sets. */
    fs_auth *m = (fs_auth *)a;

    if (a == NULL) {
        return 0;
    }
    pthread_rwlock_rdlock(&m->lock);
    n = m->n;
    pthread_rwlock_unlock(&m->lock);
    return n;
}

int fs_auth_parse_bearer(const char *header, const char **token, size_t *len, struct fs_err *err)
{
    const char *p = header;
    const char *start = NULL;
    size_t n = 0;

    *token = NULL;
    *len = 0;
    if (header == NULL || *header == '\0') {
        return fs_err_set(err, FS_EAUTH, "missing Authorization header");
    }
    while (*p == ' ' || *p == '\t') {
        p++;
    }
    if (strncasecmp(p, "Bearer", 6) != 0 || (p[6] != ' ' && p[6] != '\t')) {
        return fs_err_set(err, FS_EAUTH, "Authorization scheme must be Bearer");
    }
    p += 6;
    while (*p == ' ' || *p == '\t') {
        p++;
    }
    start = p;
    while (*p != '\0' && *p != ' ' && *p != '\t') {
        p++;
        n++;
        if (n > FS_AUTH_TOKEN_MAX) {
            return fs_err_set(err, FS_EAUTH, "bearer token too long");
        }
    }
    while (*p == ' ' || *p == '\t') {
        p++;
    }
    if (*p != '\0') {
        return fs_err_set(err, FS_EAUTH, "malformed Authorization header");
    }
    if (n == 0) {
        return fs_err_set(err, FS_EAUTH, "empty bearer token");
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)start[i];
        if (c < 0x21 || c > 0x7e) {
            return fs_err_set(err, FS_EAUTH, "bearer token has invalid characters");
        }
    }
    *token = start;
    *len = n;
    return 0;
}

int fs_auth_check_token(const fs_auth *a, const char *token, size_t len, char *label_out,
                        struct fs_err *err)
{
    uint8_t d[FS_AUTH_DIGEST_LEN];
    fs_auth *m = (fs_auth *)a; /* see fs_auth_count */
    int found = 0;
    int rc = 0;

    if (label_out != NULL) {
        label_out[0] = '\0';
    }
    if (a == NULL || token == NULL) {
        return fs_err_set(err, FS_EAUTH, "invalid bearer token");
    }
    rc = fs_auth_digest(token, len, d, err);
    if (rc != 0) {
        return rc;
    }
    pthread_rwlock_rdlock(&m->lock);
    /* Compare against every entry; the only data-dependent branch is on a
     * match, which the caller reveals anyway by answering differently. */
    for (size_t i = 0; i < m->n; i++) {
        int eq = CRYPTO_memcmp(d, m->v[i].digest, sizeof d) == 0;
        if (eq && !found && label_out != NULL) {
            snprintf(label_out, FS_AUTH_LABEL_MAX, "%s", m->v[i].label);
        }
        found |= eq;
    }
    pthread_rwlock_unlock(&m->lock);
    OPENSSL_cleanse(d, sizeof d);
    if (!found) {
        return fs_err_set(err, FS_EAUTH, "invalid bearer token");
    }
    return 0;
}

int fs_auth_check_header(const fs_auth *a, const char *authorization, char *label_out,
                         struct fs_err *err)
{
    const char *tok = NULL;
    size_t len = 0;
    int rc = 0;

    if (label_out != NULL) {
        label_out[0] = '\0';
    }
    rc = fs_auth_parse_bearer(authorization, &tok, &len, err);
    if (rc != 0) {
        return rc;
    }
    return fs_auth_check_token(a, tok, len, label_out, err);
}

void fs_auth_token_free(char *token)
{
    if (token == NULL) {
        return;
    }
    OPENSSL_cleanse(token, strlen(token));
    free(token);
}

int fs_auth_token_load(const char *path, char **out, struct fs_err *err)
{
    char buf[TOKEN_FILE_MAX + 1];
    struct stat st;
    size_t n = 0;
    int fd = -1;
    int rc = 0;

    *out = NULL;
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        return fs_err_set(err, FS_EIO, "%s: %s", path, strerror(errno));
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        rc = fs_err_set(err, FS_EIO, "%s: not a regular file", path);
        goto out;
    }
    if (st.st_size > TOKEN_FILE_MAX) {
        rc =
            fs_err_set(err, FS_EINVAL, "%s: token file larger than %d bytes", path, TOKEN_FILE_MAX);
        goto out;
    }
    if ((st.st_mode & 077) != 0) {
        fs_log_pack(FS_LOG_WARN, "token file is accessible by group or others; use mode 0600",
                    "{s:s, s:i}", "path", path, "mode", (int)(st.st_mode & 0777));
    }
    while (n < TOKEN_FILE_MAX) {
        ssize_t r = read(fd, buf + n, TOKEN_FILE_MAX - n);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r < 0) {
            rc = fs_err_set(err, FS_EIO, "%s: %s", path, strerror(errno));
            goto out;
        }
        if (r == 0) {
            break;
        }
        n += (size_t)r;
    }
    while (n > 0 &&
           (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ' || buf[n - 1] == '\t')) {
        n--;
    }
    buf[n] = '\0';
    if (n < FS_AUTH_TOKEN_MIN) {
        rc = fs_err_set(err, FS_EINVAL, "%s: token shorter than %d characters", path,
                        FS_AUTH_TOKEN_MIN);
        goto out;
    }
    if (!fs_auth_token_valid(buf, n)) {
        rc = fs_err_set(err, FS_EINVAL,
                        "%s: token must be one line of printable ASCII without spaces", path);
        goto out;
    }
    *out = strdup(buf);
    if (*out == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "%s: out of memory", path);
    }
out:
    OPENSSL_cleanse(buf, sizeof buf);
    close(fd);
    return rc;
}

int fs_auth_token_generate(char out[FS_AUTH_TOKEN_GEN_LEN + 1], struct fs_err *err)
{
    static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    uint8_t raw[33] = {0}; /* 32 random bytes + a zero pad byte for the last group */
    size_t o = 0;
    int rc = fs_rand_bytes(raw, 32, err);

    if (rc != 0) {
        return rc;
    }
    for (size_t i = 0; i < 33; i += 3) {
        uint32_t v = ((uint32_t)raw[i] << 16) | ((uint32_t)raw[i + 1] << 8) | raw[i + 2];
        for (int k = 3; k >= 0 && o < FS_AUTH_TOKEN_GEN_LEN; k--) {
            out[o++] = b64url[(v >> (6 * k)) & 63];
        }
    }
    out[o] = '\0';
    OPENSSL_cleanse(raw, sizeof raw);
    return 0;
}

int fs_auth_token_write_file(const char *path, const char *token, struct fs_err *err)
{
    char tmp[4096];
    size_t len = token != NULL ? strnlen(token, FS_AUTH_TOKEN_MAX + 1) : 0;
    int fd = -1;
    int rc = 0;
    int n = 0;

    if (!fs_auth_token_valid(token, len)) {
        return fs_err_set(err, FS_EINVAL, "%s: refusing to write an invalid token", path);
    }
    n = snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path);
    if (n < 0 || (size_t)n >= sizeof tmp) {
        return fs_err_set(err, FS_EINVAL, "%s: path too long", path);
    }
    fd = mkstemp(tmp); /* creates the file with mode 0600 */
    if (fd < 0) {
        return fs_err_set(err, fs_io_errcode(errno), "%s: %s", tmp, strerror(errno));
    }
    if (fchmod(fd, 0600) != 0 || fs_write_all(fd, token, len) != 0 ||
        fs_write_all(fd, "\n", 1) != 0 || fsync(fd) != 0) {
        rc = fs_err_set(err, fs_io_errcode(errno), "%s: %s", tmp, strerror(errno));
        goto out;
    }
    if (close(fd) != 0) {
        fd = -1;
        rc = fs_err_set(err, fs_io_errcode(errno), "%s: %s", tmp, strerror(errno));
        goto out;
    }
    fd = -1;
    if (rename(tmp, path) != 0) {
        rc = fs_err_set(err, fs_io_errcode(errno), "%s: %s", path, strerror(errno));
        goto out;
    }
out:
    if (fd >= 0) {
        close(fd);
    }
    if (rc != 0) {
        unlink(tmp);
    }
    return rc;
}
