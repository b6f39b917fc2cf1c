/* The client agent's view of the messages it reads (docs/wire-secure-sum.md):
 * the participation request its operator posts (with the invitation), and
 * the job status, aggregation and result documents the aggregation server
 * returns. Every decoder checks types, ranges and caps and names the
 * offending field in err ("invitation.shape[1]: expected a positive
 * integer"); nothing read from the network sizes an allocation unchecked.
 *
 * Ownership: decoders borrow the json_t; structs are caller-owned; arrays
 * inside struct fs_agent_agg are freed by fs_agent_agg_clear. */
#ifndef FS_API_AGENT_MSGS_H
#define FS_API_AGENT_MSGS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "../lib/core/err.h"
#include "../lib/io/matio.h"
#include "../lib/la/fixedpt.h"
#include "../lib/proto/agent_driver.h"
#include "../lib/proto/secagg.h"
#include "jobs.h"
#include "wire.h"

#define FS_AGENT_PATH_MAX        4096       /* bytes of a dataset path, with the NUL */
#define FS_AGENT_MAX_FILES       16         /* files in a result */
#define FS_AGENT_FILE_NAME_MAX   64         /* bytes of a result file name, with the NUL */
#define FS_AGENT_MAX_CHUNK_WORDS (1u << 22) /* 32 MiB per masked chunk, at most */
#define FS_AGENT_ERROR_MAX       512

/* POST /v1/participations body. */
struct fs_agent_request {
    struct fs_invitation inv;          /* holds the party token: wipe */
    char base_url[FS_JOB_URL_MAX + 1]; /* the server: job_url without /v1/jobs/<id> */
    char path[FS_AGENT_PATH_MAX];
    char format[8]; /* "auto", "npy", "csv", "mtx", "idx" */
    enum fs_io_format fmt;
    enum fs_agent_fail_at fail_at;
    uint32_t fail_round; /* "fail_at": "NAME:R" (fs_agent_fail_at_parse_round) */
};

/**
 * Decode {"invitation": {...}, "dataset": {"path": "...", "format": "auto"},
 * "fail_at": null}: no unknown top-level or dataset field; the invitation
 * as fs_invitation_decode (api/jobs.h) plus: algorithm secure-sum, fedsvd,
 * fedpca or a power-method one, rows * cols <= max_elements (also for the pooled matrix of a
 * fedsvd/fedpca job), a job URL without user info, query, fragment or white
 * space; fedsvd/fedpca also need masking_url (same rules) and maskset (the
 * agent fetches its keys with requests signed by its identity key: no
 * credential for them is in the invitation). format defaults to "auto"; fail_at may be absent or
 * null.
 * @return 0, FS_EFORMAT (wrong JSON types: 400), FS_EINVAL (422); the
 *         message names the field. fs_invitation_wipe(&out->inv) afterwards.
 */
FS_WUR int fs_agent_request_parse(const json_t *j, uint64_t max_elements,
                                  struct fs_agent_request *out, struct fs_err *err);

/* GET /v1/jobs/{job}: the fields the agent uses. */
struct fs_agent_job {
    char algorithm[FS_JOB_ALGO_MAX + 1]; /* "" when absent */
    int algo_known;                      /* `algorithm` names an enum fs_algo */
    enum fs_algo algo;                   /* valid when algo_known */
    int is_fed;                          /* fedsvd / fedpca: fed is set */
    struct fs_job_fedsvd fed;
    enum fs_agent_jphase phase;
    char phase_name[32];
    int state; /* 0 running, 1 done, 2 failed */
    uint32_t aggregation;
    uint32_t aggregations;
    uint32_t parties;
    uint32_t threshold;
    uint64_t rows;
    uint64_t cols;
    int secagg;              /* enum fs_job_secagg: "secagg", FULL when absent (older servers) */
    uint32_t secagg_degree;  /* "secagg_degree" (plus), 0 when absent */
    uint32_t secagg_share_t; /* "secagg_share_threshold" (plus), 0 when absent */
    char error[FS_AGENT_ERROR_MAX];
};

/**
 * Decode a job status. Unknown fields are ignored (the server may add
 * some); unknown phases decode as FS_AGENT_J_UNKNOWN.
 * @return 0 or FS_EFORMAT naming the field.
 */
FS_WUR int fs_agent_job_parse(const json_t *j, struct fs_agent_job *out, struct fs_err *err);

/**
 * Set cfg's SecAgg+ fields (cfg->n set) for the job's "secagg" mode,
 * computed here, and refuse (FS_EINVAL) a job whose published degree or
 * share threshold differ from them: a server cannot hand the parties a
 * thinner graph than the mode's parameters call for.
 */
FS_WUR int fs_agent_job_secagg_config(const struct fs_agent_job *job, struct fs_secagg_config *cfg,
                                      struct fs_err *err);

/** The driver's view of a decoded job status (borrows job->error). */
void fs_agent_job_view(const struct fs_agent_job *job, struct fs_agent_job_view *view);

/* GET /v1/jobs/{job}/aggregations/{r}. */
struct fs_agent_agg {
    uint32_t index;
    uint64_t length;
    uint64_t chunk_words;
    uint64_t chunks;
    enum fs_agent_jphase phase;
    uint32_t *active; /* sorted as received */
    size_t nactive;
    int has_survivors;
    uint32_t *survivors;
    size_t nsurvivors;
    int has_signatures;
    uint32_t *sig_ids;
    uint8_t (*sigs)[FS_SECAGG_SIG_LEN];
    size_t nsigs;
    struct fs_fixedpt fp; /* secure-sum only */
    /* fedsvd / fedpca (docs/wire-fedsvd.md): */
    int fed;      /* the document has "kind" */
    int is_stats; /* kind "stats" (else "svd") */
    int has_exponents;
    uint32_t *exp_ids;
    uint8_t (*sealed)[FS_WIRE_SEALED_EXP_LEN];
    size_t nexps;
    int has_sum; /* a statistics aggregation's published sum */
    uint64_t sum_words;
    uint8_t sum_sha256[32];
    /* power-method jobs (docs/wire-fedpower.md): kind "sync" | "rayleigh" */
    int power;
    int is_rayleigh;
    uint32_t iteration; /* the iteration the broadcast Z follows */
    uint64_t z_rows, z_cols;
    uint8_t z_sha256[32];
};

/**
 * Decode an aggregation for a job of n parties whose vectors are
 * expect_len words: index r, length == expect_len, 1 <= chunk_words <=
 * FS_AGENT_MAX_CHUNK_WORDS, chunks == ceil(length / chunk_words), party
 * ids in 1..n, at most n signatures, and (secure-sum) fixed-point parameters
 * that cannot wrap (summands in 1..n, bound > 0 finite,
 * summands * bound * 2^frac_bits <= 2^63). A fedsvd/fedpca aggregation
 * ("kind": "stats" | "svd") has no fixed point (parties choose it) but
 * "exponents" (null or the relayed sealed exponents) and "sum" (null or
 * {"words": length, "sha256": hex}). A power-method aggregation ("kind":
 * "sync" | "rayleigh") has no fixed point either (lib/proto encodes) but
 * "iteration" and "z": {"shape": [d, r], "sha256": hex}.
 * @return 0, FS_EFORMAT (shape of the document), FS_EINVAL (values).
 */
FS_WUR int fs_agent_agg_parse(const json_t *j, uint32_t r, uint32_t n, uint64_t expect_len,
                              struct fs_agent_agg *out, struct fs_err *err);

/** Free the arrays and zero the struct. Accepts NULL. */
void fs_agent_agg_clear(struct fs_agent_agg *a);

/* One file of a result manifest. */
struct fs_agent_file {
    char name[FS_AGENT_FILE_NAME_MAX]; /* [A-Za-z0-9_-]+.npy */
    int ndim;                          /* 1 or 2 */
    uint64_t shape[2];
    uint8_t sha256[32];
};

struct fs_agent_result {
    struct fs_agent_file files[FS_AGENT_MAX_FILES];
    size_t nfiles;
};

/**
 * Decode the files of a result ({"files": [{"name", "shape", "sha256"}]},
 * other fields ignored): at most FS_AGENT_MAX_FILES, safe names, distinct,
 * hex sha256. @return 0 or FS_EFORMAT.
 */
FS_WUR int fs_agent_result_parse(const json_t *j, struct fs_agent_result *out, struct fs_err *err);

/** 1 when name is a safe result file name ([A-Za-z0-9_-]{1,48} + ".npy"). */
int fs_agent_file_name_ok(const char *name);

#endif
