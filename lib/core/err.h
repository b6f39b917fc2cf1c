/* fs_err: the caller-owned error record every fallible function fills.
 *
 * Convention: a function that can fail returns int, 0 on
 * success or a negative FS_E* code, and takes `struct fs_err *err` as its
 * last argument (may be NULL when the caller does not want the text). The
 * message carries context (file, line, offset, which value) and never
 * secrets or data values. */
#ifndef FS_CORE_ERR_H
#define FS_CORE_ERR_H

#include <stddef.h>

#define FS_WUR __attribute__((warn_unused_result))

enum fs_errcode {
    FS_OK = 0,
    FS_EINVAL = -1,   /* bad argument or parameter */
    FS_ENOMEM = -2,   /* allocation failed */
    FS_EIO = -3,      /* open/read/write failed */
    FS_EFORMAT = -4,  /* malformed input file or message */
    FS_ERANGE = -5,   /* over a configured cap, or numeric overflow */
    FS_ECRYPTO = -6,  /* a crypto primitive failed or authentication failed */
    FS_ENUMERIC = -7, /* LAPACK or a numerical routine did not converge */
    FS_ESTATE = -8,   /* call not valid in the current state */
    FS_EAUTH = -9,    /* authentication / signature check failed */
    FS_ENOTFOUND = -10,
    FS_ECONFLICT = -11,
    FS_EINTERNAL = -12,
    FS_EFORBIDDEN = -13,   /* authenticated, but not allowed this */
    FS_EABORTED = -14,     /* the job (or participation) it belongs to failed */
    FS_ETOOMANY = -15,     /* a cap on running work is reached: retry later */
    FS_EUNAVAILABLE = -16, /* the service is starting or shutting down: retry */
    FS_ESTORAGE = -17      /* cannot write state (disk full, quota, read-only): retry */
};

#define FS_ERR_MSG_MAX 512

struct fs_err {
    int code;
    char msg[FS_ERR_MSG_MAX];
};

/** Clear an error record. Accepts NULL. */
void fs_err_clear(struct fs_err *err);

/**
 * Fill err (if not NULL) with code and a printf-style message. The
 * arguments may include err->msg (e.g. `fs_err_set(err, FS_EINVAL, "x: %s",
 * err->msg)` re-codes an error and keeps its text).
 * @return code, so callers can write `return fs_err_set(err, FS_EINVAL, ...)`.
 */
int fs_err_set(struct fs_err *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/** Prefix the existing message with more context ("file.npy: " + old). */
int fs_err_prefix(struct fs_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/** Short stable name of a code ("invalid", "format", ...). */
const char *fs_err_name(int code);

#endif
