/* JSON-lines logger: one object per line on stderr.
 *
 *   {"ts":"2024-05-01T12:00:00.123Z","level":"info","msg":"request","status":200,...}
 *
 * The keys "ts", "level" and "msg" come first and are reserved; callers add
 * key/values as a Jansson object. Lines are written whole under a mutex, so
 * concurrent threads never interleave. Output is ASCII (non-ASCII escaped).
 *
 * Never pass tokens, keys, masks or data values to the logger: it cannot tell
 * them apart from anything else. */
#ifndef FS_NET_LOG_H
#define FS_NET_LOG_H

#include <jansson.h>
#include <stdio.h>

#include "../core/err.h"

enum fs_log_level {
    FS_LOG_DEBUG = 0,
    FS_LOG_INFO = 1,
    FS_LOG_WARN = 2,
    FS_LOG_ERROR = 3,
    FS_LOG_OFF = 4 /* only as a threshold: log nothing */
};

/**
 * Parse a level name from configuration: "debug", "info", "warn"/"warning",
 * "error", "off" (case-insensitive).
 * @return 0, or FS_EINVAL for anything else.
 */
FS_WUR int fs_log_level_parse(const char *s, enum fs_log_level *out, struct fs_err *err);

/** Lower-case name of a level ("info"). */
const char *fs_log_level_name(enum fs_log_level level);

/** Set the threshold (default FS_LOG_INFO). Thread-safe. */
void fs_log_set_level(enum fs_log_level level);

/** Current threshold. */
enum fs_log_level fs_log_get_level(void);

/** 1 when a record at `level` would be written. Use it to skip costly fields. */
int fs_log_enabled(enum fs_log_level level);

/**
 * Redirect output (tests). NULL restores stderr. The stream is borrowed and
 * must stay open until it is replaced.
 */
void fs_log_set_stream(FILE *stream);

/**
 * Write one record.
 * @param msg    short constant-ish message; NULL is logged as "".
 * @param fields JSON object of extra key/values, or NULL. Steals the
 *               reference (also when the record is filtered out). Keys
 *               "ts", "level" and "msg" in it are ignored.
 */
void fs_log(enum fs_log_level level, const char *msg, json_t *fields);

/**
 * Write one record whose extra fields are built with json_pack(fmt, ...),
 * e.g. fs_log_pack(FS_LOG_INFO, "started", "{s:s, s:i}", "listen", addr, "port", p).
 * fmt must describe an object. Use "s?" for strings that may be NULL.
 * A malformed fmt logs the message with a "log_error" field instead.
 */
void fs_log_pack(enum fs_log_level level, const char *msg, const char *fmt, ...);

/** Write one record whose message is printf-formatted (no extra fields). */
void fs_logf(enum fs_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
