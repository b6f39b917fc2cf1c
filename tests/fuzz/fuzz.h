/* Shared by the fuzz harnesses (tests/fuzz/fuzz_*.c): each defines
 * LLVMFuzzerTestOneInput and is linked either with libFuzzer (clang,
 * `make fuzz`) or with driver.c, which replays a corpus (`make test`). */
#ifndef FS_TESTS_FUZZ_H
#define FS_TESTS_FUZZ_H

#define _GNU_SOURCE 1
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Largest input the harnesses look at (libFuzzer's -max_len is smaller). */
#define FUZZ_MAX_INPUT (1u << 20)

/* A harness finding a broken invariant (not a mere rejection) aborts, so
 * both libFuzzer and the corpus driver report it. */
#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond);           \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* The input as a JSON document, parsed as the services parse request bodies
 * (duplicate keys rejected). NULL when it is not JSON. */
static inline json_t *fuzz_json(const uint8_t *data, size_t size)
{
    json_error_t e;
    if (size > FUZZ_MAX_INPUT) {
        return NULL;
    }
    return json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &e);
}

/* The input as a NUL-terminated string (malloc'd, free()). */
static inline char *fuzz_str(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (s == NULL) {
        abort();
    }
    if (size > 0) {
        memcpy(s, data, size);
    }
    s[size] = '\0';
    return s;
}

/* The lib/io readers take a path: the input goes to an in-memory file
 * (memfd, a regular file) opened again through /proc/self/fd. The path is
 * valid until the next call. */
static inline const char *fuzz_file(const uint8_t *data, size_t size)
{
    static int fd = -1;
    static char path[64];
    size_t off = 0;

    if (fd < 0) {
        fd = memfd_create("fuzz-input", 0);
        if (fd < 0) {
            perror("memfd_create");
            abort();
        }
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) != 0) {
        abort();
    }
    while (off < size) {
        ssize_t w = pwrite(fd, data + off, size - off, (off_t)off);
        if (w <= 0) {
            abort();
        }
        off += (size_t)w;
    }
    return path;
}

/* An integer member of a JSON object, or def when absent or not an integer
 * (lets a document pick the parameters a decoder is called with). */
static inline uint64_t fuzz_u64(const json_t *j, const char *key, uint64_t def, uint64_t max)
{
    const json_t *v = json_is_object(j) ? json_object_get(j, key) : NULL;
    json_int_t x = 0;
    if (!json_is_integer(v)) {
        return def;
    }
    x = json_integer_value(v);
    if (x < 0 || (uint64_t)x > max) {
        return def;
    }
    return (uint64_t)x;
}

#endif
