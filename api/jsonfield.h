/* Typed fields of JSON objects, shared by the job codecs: each checks the
 * type and range and names the field in its error (FS_EFORMAT for a wrong
 * type or a missing required field, FS_EINVAL for a value out of range). */
#ifndef FS_API_JSONFIELD_H
#define FS_API_JSONFIELD_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "../lib/core/err.h"

/** 1 if s has no control characters. */
int fs_json_printable(const char *s);

/** Optional printable string field copied into buf (cap bytes with the NUL; "" when absent/null).
 */
FS_WUR int fs_json_opt_string(const json_t *obj, const char *key, char *buf, size_t cap,
                              struct fs_err *err);

/** As fs_json_opt_string, the field required. */
FS_WUR int fs_json_req_string(const json_t *obj, const char *key, char *buf, size_t cap,
                              struct fs_err *err);

/** Integer field in lo..hi; with present != NULL an absent/null field is *present = 0, no error. */
FS_WUR int fs_json_int_field(const json_t *obj, const char *key, long long lo, long long hi,
                             long long *out, int *present, struct fs_err *err);

/** "shape": [rows, cols], both positive, rows * cols <= max_elements. */
FS_WUR int fs_json_shape_field(const json_t *obj, uint64_t max_elements, uint64_t *rows,
                               uint64_t *cols, struct fs_err *err);

/** Optional boolean field (*out = 0 when absent/null). */
FS_WUR int fs_json_bool_field(const json_t *obj, const char *key, int *out, struct fs_err *err);

#endif
