/* What the services share around their HTTP API: the table of flags (each
 * with its FEDSVD_* environment variable and default), the port file, and
 * where openapi.yaml is.
 *
 * A service describes its configuration struct with a table of fs_svc_opt
 * (offsets into the struct) and lets fs_svc_opts_parse fill it: a flag given
 * on the command line wins over its environment variable, which wins over the
 * default. Every value, defaults included, goes through the same checks.
 * An entry whose def is NULL is another spelling of the entry above it with
 * the same field (an older flag name and its variable): the last of their
 * flags given wins, then the first of their variables set, then the default
 * of the first entry. */
#ifndef FS_NET_SVC_H
#define FS_NET_SVC_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <jansson.h>

#include "../core/err.h"

struct sqlite3;

enum fs_svc_opt_kind {
    FS_SVC_STR,   /* char[size] */
    FS_SVC_U64,   /* uint64_t in lo..hi */
    FS_SVC_U32,   /* uint32_t in lo..hi (hi at most UINT32_MAX) */
    FS_SVC_LEVEL, /* enum fs_log_level (net/log.h) */
    FS_SVC_BOOL   /* int: 1/true/yes or 0/false/no */
};

struct fs_svc_opt {
    const char *flag; /* "--listen", or "--listen HOST:PORT" (--help shows the word after it) */
    const char *env;  /* "FEDSVD_LISTEN" */
    enum fs_svc_opt_kind kind;
    size_t off;      /* offsetof the field in the configuration struct */
    size_t size;     /* FS_SVC_STR: the buffer's size, terminator included */
    const char *def; /* the default, as it would be written on the command line; NULL: see above */
    uint64_t lo, hi; /* FS_SVC_U64 / FS_SVC_U32 bounds */
    const char *help;
};

/**
 * Fill the configuration struct cfg from argv (--flag value or --flag=value;
 * a boolean flag alone, not followed by 0/1/true/false/yes/no, means 1),
 * then the environment (an empty variable counts as unset), then the
 * defaults. cfg is not cleared first. "--help" / "-h" set *help to 1 and the
 * rest is still parsed. Prints nothing.
 * @return 0, or FS_EINVAL naming the flag, variable or default at fault
 *         (unknown argument, missing value, out of range, too long).
 */
FS_WUR int fs_svc_opts_parse(const struct fs_svc_opt *opts, size_t nopts, void *cfg, int argc,
                             char **argv, int *help, struct fs_err *err);

/**
 * The checks both servers make after parsing: an admin token file is
 * required (--admin-token-file), and --tls-cert and --tls-key come together.
 * @return 0 or FS_EINVAL saying which.
 */
FS_WUR int fs_svc_check_admin_tls(const char *admin_token_file, const char *tls_cert,
                                  const char *tls_key, struct fs_err *err);

/**
 * The rule every service applies to its --listen host: plain HTTP only on
 * loopback (fs_http_host_is_loopback: 127.0.0.0/8, ::1, localhost). Without
 * TLS on any other address (0.0.0.0 included) it refuses unless insecure_http
 * (--insecure-http, FEDSVD_INSECURE_HTTP=1), and then logs a warning (call it
 * at every start, after the log level is set).
 * @return 0, or FS_EINVAL with the message to print before exiting.
 */
FS_WUR int fs_svc_check_listen(const char *host, int tls, int insecure_http, struct fs_err *err);

/**
 * Create the data directory path (and its parents) 0700; an existing one
 * that group or others may access is made 0700 with a warning in the log
 * (one this user does not own and cannot chmod, such as a volume root given
 * to the service's group, is only warned about).
 * @return 0, or FS_EIO (cannot create, not a directory, chmod failed).
 */
FS_WUR int fs_svc_private_dir(const char *path, struct fs_err *err);

/**
 * The document GET /healthz answers in every service: {"status": "ok",
 * "version": fs_version(), "revision": fs_revision()}, the revision left out
 * when it is "". NULL when out of memory.
 */
json_t *fs_svc_health_doc(void);

/**
 * When argv holds "--version", print "<name> <version>" (fs_version_string)
 * on stdout. Services call it first thing, so --version works whatever else
 * the command line or the environment holds.
 * @return 1 if it printed (exit 0), else 0.
 */
int fs_svc_version_flag(const char *name, int argc, char **argv);

/** Print intro, then every flag with its variable, default and help, then --help and --version. */
void fs_svc_opts_usage(FILE *out, const char *intro, const struct fs_svc_opt *opts, size_t nopts);

/**
 * Write "<port>\n" to path atomically (fs_write_file_atomic), so that whoever
 * waits for the file reads the whole port or nothing.
 * @return 0, FS_EINVAL, FS_EIO.
 */
FS_WUR int fs_svc_write_port_file(const char *path, uint16_t port, struct fs_err *err);

/**
 * Where openapi.yaml is: flag when it is not empty; else the repository's
 * (the binary in <repo>/<build>/bin/), an install prefix's
 * (<prefix>/bin/../share/fedsvd/), or /usr/share/fedsvd's, the first that
 * can be read.
 * @param out buffer of cap bytes receiving the path, "" when none was found
 * @return out, or NULL when none was found.
 */
const char *fs_svc_find_openapi(const char *flag, char *out, size_t cap);

/**
 * Make SIGTERM and SIGINT wait for fs_svc_wait_signal: block them in the
 * calling thread (call it before any thread starts, threads inherit the
 * mask) and put them in *sigs; a thread that a library started earlier with
 * the signals unblocked hands them on to the calling thread instead of
 * letting them kill the process; ignore SIGPIPE (a peer that went away is an
 * error return, not a death) and SIGXFSZ (a write over a file-size limit
 * fails with EFBIG, a storage error, instead of killing the service).
 */
void fs_svc_block_signals(sigset_t *sigs);

/**
 * Whether process pid holds the socket listening on 127.0.0.1:port (or on
 * the IPv4 wildcard): 1 yes, 0 no (another process, or nobody, listens
 * there), -1 unknown (no /proc, or pid's file descriptors are not readable).
 * A process started on a port picked in advance can find the port taken by
 * someone else; a readiness probe that only asks the port would then talk
 * to that other process.
 */
int fs_svc_pid_listens(pid_t pid, uint16_t port);

/**
 * Wait for one of sigs, log "shutting down" with its name, return it.
 */
int fs_svc_wait_signal(const sigset_t *sigs);

/**
 * The base URL a server reachable on host:port is known by when a request
 * does not say (no Host header): scheme from tls, IPv6 hosts in brackets,
 * a wildcard (0.0.0.0, ::) as the machine's host name.
 */
void fs_svc_base_url(char *out, size_t cap, int tls, const char *host, uint16_t port);

/**
 * Open (creating it if need be) the SQLite database of a service's state at
 * path: the file is created 0600 (so are its -wal and -shm, which SQLite
 * gives the database's permissions); an existing database or side file that
 * group or others may read is made 0600 with a warning in the log. Then a
 * connection serialized by SQLite (FULLMUTEX), a 5 s busy timeout,
 * WAL, synchronous=FULL when fsync_full (survives power loss) else NORMAL
 * (survives a killed process), foreign keys enforced; then run schema, which
 * must be idempotent (CREATE ... IF NOT EXISTS).
 * @param out receives the connection, close with sqlite3_close_v2.
 * @return 0 or FS_EIO naming path and SQLite's reason (nothing stays open).
 */
FS_WUR int fs_svc_db_open(const char *path, int fsync_full, const char *schema,
                          struct sqlite3 **out, struct fs_err *err);

#endif
