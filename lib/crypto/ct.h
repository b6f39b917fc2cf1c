/* Constant-time comparison and wiping of secrets.
 *
 * Use these for keys, tags, tokens and anything derived from them: a plain
 * memcmp returns at the first differing byte and so leaks, through timing,
 * how long a guessed prefix is; a plain memset before free can be removed by
 * the compiler. */
#ifndef FS_CRYPTO_CT_H
#define FS_CRYPTO_CT_H

#include <stddef.h>

/**
 * Compare n bytes in time that depends only on n.
 * @param a, b borrowed, n bytes each (may be NULL only when n == 0).
 * @return 1 if equal, 0 if not.
 */
int fs_ct_eq(const void *a, const void *b, size_t n);

/**
 * Compare two byte strings of possibly different lengths (bearer tokens,
 * MACs received from the network). The time depends on the lengths only,
 * never on the contents, so it leaks at most whether the lengths differ.
 * @return 1 if alen == blen and the bytes are equal, 0 otherwise.
 */
int fs_ct_eq_len(const void *a, size_t alen, const void *b, size_t blen);

/**
 * @return 1 if all n bytes are zero, 0 otherwise, in time depending on n only
 *         (e.g. the low-order check of an X25519 shared secret).
 */
int fs_ct_is_zero(const void *p, size_t n);

/** Overwrite n bytes with zeros in a way the compiler cannot elide. Accepts NULL. */
void fs_wipe(void *p, size_t n);

#endif
