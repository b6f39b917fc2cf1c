/* The MatrixMarket reader (coordinate and array; real/integer;
 * general/symmetric): sparse and dense loads, the check pass, and format
 * detection by content (auto). */
#include "fuzz_io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = NULL;
    size_t rows = 0;
    size_t cols = 0;
    int rc1 = 0;

    if (size > FUZZ_MAX_INPUT) {
        return 0;
    }
    path = fuzz_file(data, size);
    fuzz_io_sparse(path, FS_FMT_MTX);
    rc1 = fuzz_io_dense(path, FS_FMT_MTX, &rows, &cols);
    fuzz_io_check_agrees(path, FS_FMT_MTX, rc1, rows, cols);
    (void)fuzz_io_dense(path, FS_FMT_AUTO, &rows, &cols);
    (void)fs_io_is_sparse_file(path);
    return 0;
}
