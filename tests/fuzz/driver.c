/* Replays inputs through a fuzz harness without libFuzzer, so the corpus
 * (tests/fuzz/corpus/<harness>/) runs under the normal gcc build and the
 * ASan/UBSan build in `make test`:
 *
 *   <harness> FILE|DIR...
 *
 * Every regular file (directories: their files, in name order) is read and
 * given to LLVMFuzzerTestOneInput once. A harness that finds a broken
 * invariant aborts (as do the sanitizers); otherwise the driver prints
 * "<n> inputs" and exits 0. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_FILE (16u << 20)

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf = NULL;
    size_t n = 0;
    long len = 0;

    if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0 || len > (long)MAX_FILE ||
        fseek(f, 0, SEEK_SET) != 0) {
        fprintf(stderr, "%s: cannot read\n", path);
        if (f != NULL) {
            fclose(f);
        }
        return -1;
    }
    /* an exact-size copy, so reading past the input is caught by ASan */
    buf = malloc(len > 0 ? (size_t)len : 1);
    if (buf == NULL) {
        fclose(f);
        return -1;
    }
    n = fread(buf, 1, (size_t)len, f);
    fclose(f);
    if (n != (size_t)len) {
        free(buf);
        fprintf(stderr, "%s: short read\n", path);
        return -1;
    }
    (void)LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

int main(int argc, char **argv)
{
    size_t count = 0;
    int bad = 0;

    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "%s: not found\n", argv[i]);
            bad = 1;
            continue;
        }
        if (S_ISDIR(st.st_mode)) {
            struct dirent **ents = NULL;
            int k = scandir(argv[i], &ents, NULL, by_name);
            if (k < 0) {
                fprintf(stderr, "%s: cannot list\n", argv[i]);
                bad = 1;
                continue;
            }
            for (int e = 0; e < k; e++) {
                char path[4096];
                struct stat fst;
                snprintf(path, sizeof path, "%s/%s", argv[i], ents[e]->d_name);
                if (stat(path, &fst) == 0 && S_ISREG(fst.st_mode)) {
                    if (run_file(path) != 0) {
                        bad = 1;
                    }
                    count++;
                }
                free(ents[e]);
            }
            free(ents);
        } else {
            if (run_file(argv[i]) != 0) {
                bad = 1;
            }
            count++;
        }
    }
    printf("%zu inputs\n", count);
    return bad;
}
