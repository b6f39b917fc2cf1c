/* fs_err: setting, prefixing, and re-coding an error with its own message as
 * an argument (fs_err_set(err, code, "%s", err->msg)), which must keep the
 * text rather than format from a buffer it is overwriting; and the hex
 * encoder and decoders of lib/core/hex. */
#include "core/err.h"
#include "core/hex.h"
#include "test.h"

static void test_set_and_clear(void)
{
    struct fs_err err = {0};

    CHECK(fs_err_set(&err, FS_EIO, "file %s: %d", "x.npy", 3) == FS_EIO);
    CHECK(err.code == FS_EIO && strcmp(err.msg, "file x.npy: 3") == 0);
    fs_err_clear(&err);
    CHECK(err.code == 0 && err.msg[0] == '\0');
    CHECK(fs_err_set(NULL, FS_EINVAL, "ignored") == FS_EINVAL);
    CHECK(strcmp(fs_err_name(FS_ECONFLICT), "conflict") == 0);
}

static void test_own_message_as_argument(void)
{
    struct fs_err err = {0};
    char long_msg[FS_ERR_MSG_MAX + 64];

    fs_err_set(&err, FS_EAUTH, "secagg: party %u's signature on the survivors is invalid", 2u);
    CHECK(fs_err_set(&err, FS_EINVAL, "%s", err.msg) == FS_EINVAL);
    CHECK(err.code == FS_EINVAL);
    CHECK_MSG(strcmp(err.msg, "secagg: party 2's signature on the survivors is invalid") == 0,
              "got \"%s\"", err.msg);
    fs_err_set(&err, FS_EFORMAT, "bad magic");
    fs_err_set(&err, FS_EINVAL, "response: %s", err.msg);
    CHECK_MSG(strcmp(err.msg, "response: bad magic") == 0, "got \"%s\"", err.msg);
    fs_err_set(&err, FS_EINVAL, "%s (%s)", err.msg, err.msg);
    CHECK_MSG(strcmp(err.msg, "response: bad magic (response: bad magic)") == 0, "got \"%s\"",
              err.msg);
    /* too long: cut at the buffer, still terminated */
    memset(long_msg, 'a', sizeof long_msg - 1);
    long_msg[sizeof long_msg - 1] = '\0';
    fs_err_set(&err, FS_EINVAL, "%s", long_msg);
    fs_err_set(&err, FS_EINVAL, "x%s", err.msg);
    CHECK(strlen(err.msg) == FS_ERR_MSG_MAX - 1 && err.msg[0] == 'x' && err.msg[1] == 'a');
}

static void test_prefix(void)
{
    struct fs_err err = {0};

    fs_err_set(&err, FS_EFORMAT, "unknown field \"x\"");
    CHECK(fs_err_prefix(&err, "invitation: ") == FS_EFORMAT);
    CHECK(strcmp(err.msg, "invitation: unknown field \"x\"") == 0);
}

/* lib/core/hex: the one hex table (encode) and the decoders. */
static void test_hex(void)
{
    static const uint8_t in[4] = {0x00, 0x9f, 0xa0, 0xff};
    uint8_t out[4];
    char hex[9];

    fs_hex_encode(in, sizeof in, hex);
    CHECK(strcmp(hex, "009fa0ff") == 0);
    CHECK(fs_hex_decode("009FA0ff", out, 4) == 0 && memcmp(out, in, 4) == 0);
    CHECK(fs_hex_decode_lower("009fa0ff", out, 4) == 0 && memcmp(out, in, 4) == 0);
    CHECK(fs_hex_decode_lower("009FA0ff", out, 4) == -1); /* upper case is not canonical */
    CHECK(fs_hex_decode("009fa0fg", out, 4) == -1);
    CHECK(fs_hex_decode_lower("0x9fa0ff", out, 4) == -1);
    CHECK(strcmp(fs_err_name(FS_EUNAVAILABLE), "unavailable") == 0);
    CHECK(strcmp(fs_err_name(FS_ESTORAGE), "storage") == 0);
    CHECK(strcmp(fs_err_name(FS_EABORTED), "aborted") == 0);
}

int main(void)
{
    RUN(test_set_and_clear);
    RUN(test_own_message_as_argument);
    RUN(test_prefix);
    RUN(test_hex);
    return TEST_END("test_err");
}
