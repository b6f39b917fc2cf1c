/* Signed requests: a party proves to the masking server that a key request
 * comes from the holder of its pinned Ed25519 identity key, so the mask keys
 * are bound to the party and no bearer credential that could fetch them ever
 * exists (nor passes through the job creator).
 *
 * Header (one line, no spaces, fields in this order):
 *
 *   Authorization: Fedsvd-Sig party=<i>,ts=<unix seconds>,nonce=<16 hex>,sig=<128 hex>
 *
 * sig is the Ed25519 signature (RFC 8032) of the domain-separated text
 *
 *   "fedsvd-mask-request-v1\n" METHOD "\n" PATH "\n" MASKSET "\n" PARTY "\n" TS "\n" NONCE
 *
 * where METHOD is the HTTP method ("GET"), PATH the request path relative to
 * the server's base URL without the query string ("/v1/masksets/<id>/parties/
 * <i>/keys/0/rows.npy"), MASKSET the mask-set id and PARTY, TS and NONCE the
 * header's decimal and hex fields as sent. The signature therefore binds one
 * route of one mask set to one party at one time; it is useless for another
 * file, another mask set, another party or, after FS_REQSIG_WINDOW_S, at all.
 *
 * Replays: the verifier keeps no nonce cache. A signed request only yields
 * keys in the response to the connection that carries it; anyone who can read
 * that request (it travels inside TLS off loopback) can read the response as
 * well, so refusing its replay would protect nothing, while the HTTP client's
 * retries (same header, after a 503 or a dropped connection) must keep
 * working. The nonce makes every signature distinct (in logs and audits) and
 * the time window bounds the life of a header that leaks outside TLS. */
#ifndef FS_CRYPTO_REQSIG_H
#define FS_CRYPTO_REQSIG_H

#include <stddef.h>
#include <stdint.h>

#include "../core/err.h"
#include "ed25519.h"

#define FS_REQSIG_SCHEME     "Fedsvd-Sig"
#define FS_REQSIG_DOMAIN     "fedsvd-mask-request-v1"
#define FS_REQSIG_WINDOW_S   300  /* |server clock - ts| accepted, seconds */
#define FS_REQSIG_NONCE_LEN  8    /* bytes; 16 hex digits on the wire */
#define FS_REQSIG_HEADER_MAX 256  /* a header value fs_reqsig_sign writes, with the NUL */
#define FS_REQSIG_PATH_MAX   1024 /* longest PATH signed or verified */
#define FS_REQSIG_ID_MAX     64   /* longest MASKSET */

/** A parsed header: what the client claims. */
struct fs_reqsig {
    uint32_t party;
    int64_t ts;
    char ts_text[24];                        /* ts exactly as sent (decimal) */
    char nonce[2 * FS_REQSIG_NONCE_LEN + 1]; /* lower-case hex as sent */
    uint8_t sig[FS_ED25519_SIG_LEN];
};

/**
 * Sign a request and write the Authorization header value into out.
 * @param priv  the party's Ed25519 private seed (borrowed).
 * @param party 1-based party number the request is for.
 * @param ts    the client's clock, Unix seconds.
 * @param nonce FS_REQSIG_NONCE_LEN bytes, or NULL for fresh CSPRNG bytes.
 * @return 0; FS_EINVAL (empty or over-long method/path/maskset, party 0, a
 *         path with '?' or a control character); FS_ECRYPTO.
 */
FS_WUR int fs_reqsig_sign(const uint8_t priv[FS_ED25519_KEY_LEN], const char *method,
                          const char *path, const char *maskset, uint32_t party, int64_t ts,
                          const uint8_t *nonce, char out[FS_REQSIG_HEADER_MAX], struct fs_err *err);

/**
 * 1 when the header value uses the Fedsvd-Sig scheme (case-insensitive
 * scheme name followed by a space), whatever follows.
 */
int fs_reqsig_is_scheme(const char *header);

/**
 * Parse a header value strictly: the scheme, then party, ts, nonce and sig in
 * this order, decimal party 1..1000 without leading zeros, decimal ts (a
 * leading '-' allowed) without leading zeros, 16 and 128 lower-case hex
 * digits, nothing else.
 * @return 0, or FS_EAUTH naming what is wrong (never echoing the value).
 */
FS_WUR int fs_reqsig_parse(const char *header, struct fs_reqsig *out, struct fs_err *err);

/**
 * Verify a parsed header for this request under pub.
 * @param now  the verifier's clock, Unix seconds.
 * @return 0; FS_EAUTH with a message saying which check failed (timestamp
 *         outside the window, or a signature that does not verify under pub:
 *         another key, another route, mask set or party); FS_ECRYPTO.
 */
FS_WUR int fs_reqsig_verify(const struct fs_reqsig *rs, const uint8_t pub[FS_ED25519_KEY_LEN],
                            const char *method, const char *path, const char *maskset, int64_t now,
                            struct fs_err *err);

#endif
