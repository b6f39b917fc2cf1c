/* What `fedsvd job` and `fedsvd local` share: HTTP clients for the services,
 * the job resource (docs/wire-secure-sum.md), the one-line progress display,
 * verified result downloads, and a few small helpers.
 *
 * Everything here returns 0 or a negative FS_E* code with a caller-owned
 * fs_err (the message names the request and the server's problem+json);
 * the commands turn that into their one-line diagnostics. */
#ifndef FS_CLI_ORCH_H
#define FS_CLI_ORCH_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/err.h"
#include "jobdoc.h"
#include "jobs.h"
#include "net/http_client.h"

#define ORCH_ID_MAX 128 /* job / participation ids we accept, including the NUL */

/** TLS options of every networked command (--insecure, --ca-file, --insecure-http). */
struct orch_tls {
    int insecure;        /* 1: do not verify certificates */
    const char *ca_file; /* PEM bundle, or NULL for the system store; borrowed */
    int insecure_http;   /* 1: allow http:// URLs to hosts that are not loopback */
};

/**
 * A client for base_url with a bearer token (both copied).
 * @param timeout_ms whole-request limit (0 = none: rely on the low-speed limit).
 * @param retries    extra attempts on transport errors.
 * @param tls        may be NULL (verify with the system store).
 * @param out        new client, free with fs_httpc_free.
 */
FS_WUR int orch_client(fs_httpc **out, const char *base_url, const char *token, long timeout_ms,
                       unsigned retries, const struct orch_tls *tls, struct fs_err *err);

/** 1 when s is a plausible resource id: 1..ORCH_ID_MAX-1 chars of [A-Za-z0-9._-]. */
int orch_id_ok(const char *s);

/** 1 when s looks like an http:// or https:// base URL (no trailing spaces). */
int orch_url_ok(const char *s);

/** Copy base_url without trailing '/' into buf. @return 0 or FS_ERANGE. */
FS_WUR int orch_url_trim(const char *base_url, char *buf, size_t cap, struct fs_err *err);

/* ---- pinned identities ---- */

#define ORCH_FPR_LEN 64 /* hex digits of an identity fingerprint */

/**
 * A client-agent's identity fingerprint (GET /v1/identity with the operator
 * token of c), checked (algorithm ed25519, 64 hex digits), lower case, into
 * fpr (65 bytes).
 */
FS_WUR int orch_agent_identity(fs_httpc *c, char fpr[ORCH_FPR_LEN + 1], struct fs_err *err);

/**
 * The pins of a job spec from `--party-key I:FINGERPRINT` values (items, a
 * NULL-terminated list; may be empty): every party 1..parties exactly once,
 * into spec's party_keys (has_pins); with none given, allow_unpinned must be
 * set and so is spec's. @return CLI_OK or CLI_EUSAGE after printing the
 * reason.
 */
int orch_party_keys(const char *cmd, const char *const *items, size_t parties, int allow_unpinned,
                    struct fs_job_spec *spec);

/** The JSON of a job spec to POST (fs_job_spec_encode). *out: new reference. CLI_OK or
 * CLI_ERUNTIME. */
int orch_job_spec_json(const char *cmd, const struct fs_job_spec *spec, json_t **out);

/**
 * Every invitation must carry the spec's party_keys (or none when the spec
 * has none): a server that drops or changes the pins is caught before the
 * invitations go out. @return 0 or FS_EAUTH.
 */
FS_WUR int orch_check_invitation_pins(const struct fs_job_spec *spec, const json_t *invs,
                                      struct fs_err *err);

/**
 * PUT /v1/jobs/{id}/maskset on the aggregation server (admin client c): the
 * job's mask set and its end token (a secret that can only delete that mask
 * set), so that the server ends the mask set when the job ends.
 */
FS_WUR int orch_job_set_maskset(fs_httpc *c, const char *job_id, const char *masking_url,
                                const char *maskset, const char *end_token, struct fs_err *err);

/** GET /v1/jobs/{id}. @param out new reference. */
FS_WUR int orch_job_get(fs_httpc *c, const char *job_id, json_t **out, struct fs_err *err);

/** "running", "done" or "failed" from a Job ("" when it is not one). Static. */
const char *orch_job_state(const json_t *job);

/** orch_job_get, then the Job decoded into *st (api/jobdoc.h). @return 0 or the error. */
FS_WUR int orch_job_poll(fs_httpc *c, const char *job_id, json_t **out, struct fs_job_status *st,
                         struct fs_err *err);

/** Number of entries of an integer array member (0 when absent). */
size_t orch_count(const json_t *obj, const char *key);

/** Lowercase hex SHA-256 of a file (hex: 65 bytes). */
FS_WUR int orch_sha256_file(const char *path, char hex[65], struct fs_err *err);

/**
 * Download `path` from c into dest; when want_sha (64 hex digits) is not
 * NULL the file's SHA-256 must match (else dest is removed, FS_ECRYPTO).
 */
FS_WUR int orch_download_verified(fs_httpc *c, const char *path, const char *dest,
                                  const char *want_sha, uint64_t *bytes, struct fs_err *err);

/** Seconds as "12.5 s", or with hours and minutes ("86399.5 s (23 h 59 min)"). Returns buf. */
const char *orch_duration(double s, char *buf, size_t cap);

/** Human-readable byte count ("12.3 MB") into buf. Returns buf. */
const char *orch_bytes(double n, char *buf, size_t cap);

/* ---- a client-agent's operator API (agent identity, join, participation) ---- */

/** The options of every command that talks to a client-agent as its operator. */
struct orch_agent_opts {
    const char *url;        /* --agent URL */
    const char *token_file; /* --token-file F: the operator token */
    const char *ca_file;    /* --ca-file F */
    const char *format;     /* --format text|json */
    struct orch_tls tls;    /* --insecure, --insecure-http (ca_file set by orch_agent_connect) */
    int json;               /* set by orch_agent_connect */
};

/* Option-table entries of those options (needs cli.h). */
/* clang-format off */
#define ORCH_AGENT_OPTS(o)                                            \
    {"agent", CLI_OPT_VALUE, &(o).url, NULL},                         \
    {"token-file", CLI_OPT_VALUE, &(o).token_file, NULL},             \
    {"insecure", CLI_OPT_FLAG, NULL, &(o).tls.insecure},              \
    {"insecure-http", CLI_OPT_FLAG, NULL, &(o).tls.insecure_http},    \
    {"ca-file", CLI_OPT_VALUE, &(o).ca_file, NULL},                   \
    {"format", CLI_OPT_VALUE, &(o).format, NULL}
/* clang-format on */

/** The help lines of those options but --format. */
void orch_agent_help(void);

/**
 * Check --agent (an http(s) URL), --token-file (required) and --format, load
 * the token and make a client (timeout_ms and retries as orch_client).
 * @return CLI_OK, or CLI_EUSAGE / CLI_ERUNTIME after printing the reason.
 */
int orch_agent_connect(const char *cmd, struct orch_agent_opts *o, long timeout_ms,
                       unsigned retries, fs_httpc **out);

struct fs_participation; /* participation.h */

/**
 * GET /v1/participations/{id} on an agent, decoded into *p
 * (fs_participation_decode); doc (may be NULL) receives the document.
 * @return 0 or the FS_E* code (FS_ENOTFOUND: no such participation).
 */
FS_WUR int orch_participation_get(fs_httpc *c, const char *id, struct fs_participation *p,
                                  json_t **doc, struct fs_err *err);

/** A participation as "key value" lines on stdout (`fedsvd participation status`). */
void orch_participation_print(const struct fs_participation *p);

/* ---- progress line ---- */

struct orch_progress {
    FILE *f;         /* where it goes (stderr) */
    int tty;         /* 1: redraw one line with \r; 0: one line per change */
    double t0;       /* cli_now() at the start */
    char last[256];  /* last line printed (non-tty: print only on change) */
    int open;        /* a tty line is on screen without its newline */
    const char *who; /* prefix, e.g. "local" */
};

/** Start: f (borrowed), prefix who (borrowed). */
void orch_progress_init(struct orch_progress *p, FILE *f, const char *who);

/** Show a Job: phase, aggregation, parties present/dropped, bytes, deadline. */
void orch_progress_job(struct orch_progress *p, const struct fs_job_status *st);

/** Show a free-form status text. */
void orch_progress_text(struct orch_progress *p, const char *text);

/** End the tty line (newline) if one is open. */
void orch_progress_done(struct orch_progress *p);

/** Sleep ms milliseconds (returns early on a signal). */
void orch_sleep_ms(long ms);

/* ---- power-method job parameters (power_opts.c) ---- */

/* The options of `fedsvd local` and `fedsvd job create` that set the
 * parameters of a fedpower, fedpower-utility, fedpower-private or dp-ppm job
 * (docs/cli.md; the fields of the job spec). Strings borrowed from argv;
 * NULL = not given. */
struct orch_power_opts {
    const char *k, *rank, *iterations, *sync_every, *align, *sigma, *sigma_server, *epsilon, *delta,
        *clip_z, *bound_m, *bound_mode, *value_bound, *noise_exchange, *paillier_bits;
    int allow_weak_privacy, no_eigenvalues;
};

/* Option-table entries of every power option but --k (commands that have a
 * --k of their own point its value at .k). */
/* clang-format off */
#define ORCH_POWER_OPTS(o)                                           \
    {"rank", CLI_OPT_VALUE, &(o).rank, NULL},                        \
    {"iterations", CLI_OPT_VALUE, &(o).iterations, NULL},            \
    {"sync-every", CLI_OPT_VALUE, &(o).sync_every, NULL},            \
    {"align", CLI_OPT_VALUE, &(o).align, NULL},                      \
    {"sigma", CLI_OPT_VALUE, &(o).sigma, NULL},                      \
    {"sigma-server", CLI_OPT_VALUE, &(o).sigma_server, NULL},        \
    {"epsilon", CLI_OPT_VALUE, &(o).epsilon, NULL},                  \
    {"delta", CLI_OPT_VALUE, &(o).delta, NULL},                      \
    {"clip-z", CLI_OPT_VALUE, &(o).clip_z, NULL},                    \
    {"bound-m", CLI_OPT_VALUE, &(o).bound_m, NULL},                  \
    {"bound-mode", CLI_OPT_VALUE, &(o).bound_mode, NULL},            \
    {"value-bound", CLI_OPT_VALUE, &(o).value_bound, NULL},          \
    {"noise-exchange", CLI_OPT_VALUE, &(o).noise_exchange, NULL},    \
    {"paillier-bits", CLI_OPT_VALUE, &(o).paillier_bits, NULL},      \
    {"allow-weak-privacy", CLI_OPT_FLAG, NULL, &(o).allow_weak_privacy}, \
    {"no-eigenvalues", CLI_OPT_FLAG, NULL, &(o).no_eigenvalues}
/* clang-format on */

/** 1 when alg is fedpower, fedpower-utility, fedpower-private or dp-ppm. */
int orch_power_algorithm(const char *alg);

/** 1 when any power option other than --k is given. */
int orch_power_given(const struct orch_power_opts *o);

/** The help lines of the power options (--k included). */
void orch_power_help(void);

/**
 * Check the power options for algorithm algo (a power method) and, when out
 * is not NULL, set the job parameters they give (k, rank, iterations,
 * sync_every, align, sigma, ...; party_rows and allow_dropouts are the
 * caller's). d = the features (0: not known yet, --k and --rank are then only
 * checked for form). *value_bound_missing (may be NULL) is set to 1 when the
 * algorithm needs a value_bound that was not given (fedpower-utility,
 * dp-ppm). @return CLI_OK, or CLI_EUSAGE after printing the one-line reason.
 */
int orch_power_params(const char *cmd, enum fs_algo algo, const struct orch_power_opts *o, size_t d,
                      struct fs_job_fedpower *out, int *value_bound_missing);

#endif
