#include "err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void fs_err_clear(struct fs_err *err)
{
    if (err == NULL) {
        return;
    }
    err->code = 0;
    err->msg[0] = '\0';
}

int fs_err_set(struct fs_err *err, int code, const char *fmt, ...)
{
    if (err != NULL) {
        /* formatted aside first: an argument may be err->msg itself
         * (re-coding an error keeps its text: "%s", err->msg) */
        char msg[FS_ERR_MSG_MAX];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        err->code = code;
        memcpy(err->msg, msg, sizeof err->msg);
    }
    return code;
}

int fs_err_prefix(struct fs_err *err, const char *fmt, ...)
{
    char pre[FS_ERR_MSG_MAX];
    char old[FS_ERR_MSG_MAX];
    va_list ap;

    if (err == NULL) {
        return FS_EINVAL;
    }
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    old[sizeof old - 1] = '\0';
    {
        size_t lp = strnlen(pre, sizeof err->msg - 1);
        size_t lo = strnlen(old, sizeof err->msg - 1 - lp);
        memcpy(err->msg, pre, lp);
        memcpy(err->msg + lp, old, lo);
        err->msg[lp + lo] = '\0';
    }
    return err->code;
}

const char *fs_err_name(int code)
{
    switch (code) {
    case FS_OK:
        return "ok";
    case FS_EINVAL:
        return "invalid";
    case FS_ENOMEM:
        return "out_of_memory";
    case FS_EIO:
        return "io";
    case FS_EFORMAT:
        return "format";
    case FS_ERANGE:
        return "range";
    case FS_ECRYPTO:
        return "crypto";
    case FS_ENUMERIC:
        return "numeric";
    case FS_ESTATE:
        return "state";
    case FS_EAUTH:
        return "auth";
    case FS_ENOTFOUND:
        return "not_found";
    case FS_ECONFLICT:
        return "conflict";
    case FS_EFORBIDDEN:
        return "forbidden";
    case FS_EABORTED:
        return "aborted";
    case FS_ETOOMANY:
        return "too_many";
    case FS_EUNAVAILABLE:
        return "unavailable";
    case FS_ESTORAGE:
        return "storage";
    default:
        return "internal";
    }
}
