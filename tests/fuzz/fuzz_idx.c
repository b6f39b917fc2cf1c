/* The IDX reader (plain or gzip'ed, the Fashion-MNIST files): dense load,
 * check pass and sparse conversion. */
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
    rc1 = fuzz_io_dense(path, FS_FMT_IDX, &rows, &cols);
    fuzz_io_check_agrees(path, FS_FMT_IDX, rc1, rows, cols);
    fuzz_io_sparse(path, FS_FMT_IDX);
    return 0;
}
