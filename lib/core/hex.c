#include "hex.h"

int fs_hex_digit(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

void fs_hex_encode(const uint8_t *in, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";

    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 15];
    }
    out[2 * n] = '\0';
}

int fs_hex_decode(const char *s, uint8_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int hi = fs_hex_digit(s[2 * i]);
        int lo = hi < 0 ? -1 : fs_hex_digit(s[2 * i + 1]);

        if (lo < 0) {
            return -1;
        }
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

int fs_hex_decode_lower(const char *s, uint8_t *out, size_t n)
{
    for (size_t i = 0; i < 2 * n; i++) {
        if (s[i] >= 'A' && s[i] <= 'F') {
            return -1;
        }
    }
    return fs_hex_decode(s, out, n);
}
