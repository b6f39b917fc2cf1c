/* The .npy reader: header parser (from memory, every prefix length), dense
 * load and the streaming check pass, <u8 vectors, and the sparse load
 * (dense formats converted). */
#include "fuzz_io.h"

static void header_prefixes(const uint8_t *data, size_t size)
{
    struct fs_io_caps caps = fuzz_io_caps();
    struct fs_npy_header h;
    struct fs_err err = {0};
    size_t n = size < 4096 ? size : 4096;
    int rc = fs_npy_parse_header(data, n, &caps, &h, &err);

    if (rc == 0) {
        uint8_t buf[256];
        size_t len = 0;
        FUZZ_CHECK(h.header_len <= n);
        FUZZ_CHECK(h.ndim == 1 || h.ndim == 2);
        FUZZ_CHECK(h.dtype == FS_NPY_F8 || h.dtype == FS_NPY_U8);
        /* a parsed header formats and parses back to the same fields */
        if (fs_npy_format_header(&h, buf, sizeof buf, &len, &err) == 0) {
            struct fs_npy_header h2;
            FUZZ_CHECK(fs_npy_parse_header(buf, len, &caps, &h2, &err) == 0);
            FUZZ_CHECK(h2.dtype == h.dtype && h2.ndim == h.ndim &&
                       h2.fortran_order == h.fortran_order && h2.shape[0] == h.shape[0] &&
                       h2.shape[1] == h.shape[1]);
        }
        /* every shorter prefix is "need more bytes" or malformed, never a success */
        for (size_t k = 0; k < h.header_len; k += 7) {
            struct fs_npy_header hk;
            FUZZ_CHECK(fs_npy_parse_header(data, k, &caps, &hk, &err) != 0);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = NULL;
    size_t rows = 0;
    size_t cols = 0;
    int rc1 = 0;
    struct fs_err err = {0};
    uint64_t *v = NULL;
    size_t n = 0;
    int rc = 0;

    if (size > FUZZ_MAX_INPUT) {
        return 0;
    }
    header_prefixes(data, size);
    path = fuzz_file(data, size);
    rc1 = fuzz_io_dense(path, FS_FMT_NPY, &rows, &cols);
    fuzz_io_check_agrees(path, FS_FMT_NPY, rc1, rows, cols);
    fuzz_io_sparse(path, FS_FMT_NPY);
    rc = fs_npy_read_u64(path, 1u << 20, &v, &n, &err);
    fuzz_io_check_err(rc, &err);
    FUZZ_CHECK(rc != 0 || n <= (1u << 20));
    free(v);
    return 0;
}
