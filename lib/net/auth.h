/* Bearer-token authentication (compared in constant time).
 *
 * A token is a printable-ASCII string (0x21..0x7e, no spaces) of at least
 * FS_AUTH_TOKEN_MIN characters. Servers keep only the SHA-256 digest of each
 * allowed token and compare digests with CRYPTO_memcmp, so neither the
 * content nor the length of a presented token leaks through timing, and a
 * stolen memory dump or database holds no usable credential.
 *
 * An fs_auth is a set of (digest, label) pairs; the label ("admin",
 * "party:3", "job:ab12/party:0") tells the caller whose token matched. It is
 * safe to check from many threads while another thread adds or removes
 * entries (internal rwlock).
 *
 * Tokens are secrets: never log them, wipe copies with fs_auth_token_free. */
#ifndef FS_NET_AUTH_H
#define FS_NET_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "../core/err.h"

#define FS_AUTH_TOKEN_MIN     16  /* shortest token accepted anywhere */
#define FS_AUTH_TOKEN_MAX     512 /* longest token accepted anywhere */
#define FS_AUTH_TOKEN_GEN_LEN 43  /* fs_auth_token_generate: 32 bytes as base64url, no padding */
#define FS_AUTH_LABEL_MAX     96  /* label buffer size, including the NUL */
#define FS_AUTH_DIGEST_LEN    32

typedef struct fs_auth fs_auth;

/** New empty set. @return 0 or FS_ENOMEM. Free with fs_auth_free. */
FS_WUR int fs_auth_new(fs_auth **out, struct fs_err *err);

/** Free the set (digests are wiped). Accepts NULL. */
void fs_auth_free(fs_auth *a);

/**
 * Allow a token. Only its SHA-256 is kept; `token` is borrowed and may be
 * wiped by the caller afterwards. `label` (< FS_AUTH_LABEL_MAX bytes) is copied.
 * @return 0, FS_EINVAL (token too short/long or not printable ASCII, bad label),
 *         FS_ENOMEM, FS_ECRYPTO.
 */
FS_WUR int fs_auth_add(fs_auth *a, const char *token, const char *label, struct fs_err *err);

/** Allow a token by its digest (e.g. loaded from a database). Label copied. */
FS_WUR int fs_auth_add_digest(fs_auth *a, const uint8_t digest[FS_AUTH_DIGEST_LEN],
                              const char *label, struct fs_err *err);

/** fs_auth_token_load(path) then fs_auth_add; the token copy is wiped. */
FS_WUR int fs_auth_add_file(fs_auth *a, const char *path, const char *label, struct fs_err *err);

/** Remove every entry with this label. @return how many were removed. */
size_t fs_auth_remove(fs_auth *a, const char *label);

/** Number of entries. */
size_t fs_auth_count(const fs_auth *a);

/**
 * Check an Authorization header value ("Bearer <token>") against the set.
 * Every entry is compared (no early exit).
 * @param authorization header value, may be NULL (missing header).
 * @param label_out     if not NULL, receives the matching entry's label
 *                      (buffer of FS_AUTH_LABEL_MAX bytes); "" on failure.
 * @return 0 on a match, FS_EAUTH when missing, malformed or not allowed
 *         (the message says which, never the token), FS_ECRYPTO.
 */
FS_WUR int fs_auth_check_header(const fs_auth *a, const char *authorization, char *label_out,
                                struct fs_err *err);

/** As fs_auth_check_header for a bare token of `len` bytes. */
FS_WUR int fs_auth_check_token(const fs_auth *a, const char *token, size_t len, char *label_out,
                               struct fs_err *err);

/**
 * Parse "Bearer <token>" (scheme case-insensitive, spaces around the token
 * tolerated, nothing after it). On success *token points into `header`
 * (borrowed) and *len is its length.
 * @return 0, or FS_EAUTH (missing, other scheme, empty, too long, bad characters).
 */
FS_WUR int fs_auth_parse_bearer(const char *header, const char **token, size_t *len,
                                struct fs_err *err);

/** SHA-256 of a token. @return 0 or FS_ECRYPTO. */
FS_WUR int fs_auth_digest(const char *token, size_t len, uint8_t out[FS_AUTH_DIGEST_LEN],
                          struct fs_err *err);

/**
 * Constant-time check of one presented token against one stored digest
 * (for services that keep digests per job in their own storage).
 * @return 1 when they match, 0 otherwise (also on a crypto failure).
 */
int fs_auth_token_matches(const char *token, size_t len,
                          const uint8_t expected[FS_AUTH_DIGEST_LEN]);

/** 1 when `token` (len bytes) is acceptable as a token: length and charset. */
int fs_auth_token_valid(const char *token, size_t len);

/**
 * Read a token from a file (--token-file). Trailing whitespace/newlines are
 * trimmed; the rest must be a valid token (>= FS_AUTH_TOKEN_MIN chars). The
 * file must be a regular file of at most 4 KiB. A file readable or writable
 * by group or others is accepted but logged as a warning (the path, never the
 * content); services document that token files should be 0600.
 * @param out receives a new string; free with fs_auth_token_free.
 * @return 0, FS_EIO, FS_EINVAL, FS_ENOMEM.
 */
FS_WUR int fs_auth_token_load(const char *path, char **out, struct fs_err *err);

/** Wipe and free a token string. Accepts NULL. */
void fs_auth_token_free(char *token);

/**
 * A fresh random token: 32 CSPRNG bytes as unpadded base64url
 * (FS_AUTH_TOKEN_GEN_LEN chars + NUL written to out).
 * @return 0 or FS_ECRYPTO.
 */
FS_WUR int fs_auth_token_generate(char out[FS_AUTH_TOKEN_GEN_LEN + 1], struct fs_err *err);

/**
 * Write a token to `path` with mode 0600 (temp file in the same directory,
 * fsync, rename), followed by a newline.
 * @return 0, FS_EINVAL (invalid token), FS_EIO.
 */
FS_WUR int fs_auth_token_write_file(const char *path, const char *token, struct fs_err *err);

#endif
