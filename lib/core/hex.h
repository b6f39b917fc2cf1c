/* Hexadecimal digits: the one definition the library, the wire code and the
 * CLI share (seeds, digests, percent-encoding). */
#ifndef FS_CORE_HEX_H
#define FS_CORE_HEX_H

#include <stddef.h>
#include <stdint.h>

/** Value 0..15 of a hex digit (either case), or -1 if c is none. */
int fs_hex_digit(char c);

/**
 * Decode exactly 2n hex digits at s into n bytes. s must have at least 2n
 * readable characters. @return 0, or -1 on a non-hex character (out may
 * then hold a partial result).
 */
int fs_hex_decode(const char *s, uint8_t *out, size_t n);

/**
 * Decode exactly 2n lower-case hex digits at s (what fs_hex_encode writes;
 * the canonical spelling of digests and ids on the wire) into n bytes.
 * @return 0, or -1 on any other character (out may hold a partial result).
 */
int fs_hex_decode_lower(const char *s, uint8_t *out, size_t n);

/** Encode n bytes as 2n lower-case hex digits and a terminator: out holds 2n + 1 chars. */
void fs_hex_encode(const uint8_t *in, size_t n, char *out);

#endif
