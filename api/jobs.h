/* The job resource of docs/wire-secure-sum.md: the job spec (POST /v1/jobs),
 * invitations, job ids, and the SecAgg job-id derivation both sides use.
 * Shared by aggregation-server, client-agent and the CLI.
 *
 * Decoder error codes as in wire.h: FS_EFORMAT malformed (400), FS_EINVAL
 * well-formed but invalid, including unknown fields of the job spec (422). */
#ifndef FS_API_JOBS_H
#define FS_API_JOBS_H

#include <jansson.h>
#include <stdint.h>

#include "../lib/core/err.h"
#include "../lib/net/auth.h"

#define FS_JOB_ID_MAX           64  /* job id string, without NUL */
#define FS_JOB_NAME_MAX         128 /* bytes */
#define FS_JOB_URL_MAX          512 /* server_url / job_url, bytes */
#define FS_JOB_ALGO_MAX         31
#define FS_JOB_DEFAULT_TIMEOUT  60
#define FS_JOB_MAX_TIMEOUT      86400
#define FS_JOB_MAX_JOIN_TIMEOUT 604800
#define FS_INVITATION_VERSION   1
#define FS_JOB_MAX_PARTIES      1000 /* = FS_SECAGG_MAX_PARTIES */
#define FS_MASKSET_ID_MAX       64   /* masking-server mask-set id, without NUL */

/* The parameters of a fedsvd / fedpca job (docs/wire-fedsvd.md), in the job
 * spec and in invitations. Zero for other algorithms. */
enum fs_job_partition { FS_JOB_SAMPLES = 0, FS_JOB_FEATURES = 1 };
enum fs_job_method { FS_JOB_EXACT = 0, FS_JOB_RANDOMIZED = 1 };

struct fs_job_fedsvd {
    int partition;                            /* enum fs_job_partition */
    uint64_t party_sizes[FS_JOB_MAX_PARTIES]; /* rows (samples) or columns (features) of
                                                 party i+1; `parties` entries, sum = N or d */
    uint64_t k;                               /* 0 = thin SVD, else top-k */
    int method;                               /* enum fs_job_method (top-k only) */
    int standardize;                          /* fedpca: scale to unit variance */
    int allow_dropouts;                       /* 1: survivors' exact result; 0: fail */
};

struct fs_job_spec {
    char algorithm[FS_JOB_ALGO_MAX + 1]; /* "secure-sum", ... */
    char name[FS_JOB_NAME_MAX + 1];      /* "" when absent */
    uint32_t parties;                    /* 1..FS_SECAGG_MAX_PARTIES */
    uint32_t threshold;                  /* 1..parties; default floor(parties/2)+1 */
    uint64_t rows, cols;                 /* secure-sum: every party's matrix shape;
                                            fedsvd/fedpca: the pooled matrix, N x d */
    uint32_t round_timeout_s;            /* default 60 */
    uint32_t join_timeout_s;             /* R0; default round_timeout_s */
    char server_url[FS_JOB_URL_MAX + 1]; /* "" = take it from the request; no trailing '/' */
    struct fs_job_fedsvd fed;            /* fedsvd / fedpca only */
};

/**
 * Decode the fedsvd/fedpca parameters of a JSON object (a job spec, an
 * invitation, a Job status): partition, party_sizes (`parties` entries
 * adding up to rows (samples) or cols (features)), k (1..min(rows, cols) or
 * absent/null), method, standardize (fedpca only), allow_dropouts. Other
 * members are not looked at. @return 0, FS_EFORMAT, FS_EINVAL.
 */
FS_WUR int fs_job_fedsvd_decode(const json_t *j, const char *algorithm, uint32_t parties,
                                uint64_t rows, uint64_t cols, struct fs_job_fedsvd *out,
                                struct fs_err *err);

/** 1 for "fedsvd" and "fedpca" (the lossless jobs of DESIGN.md sec. 5.2). */
int fs_job_is_fedsvd(const char *algorithm);

/** Name of a partition ("samples", "features"). */
const char *fs_job_partition_name(int partition);

/**
 * Secure aggregations a job runs: 1, except fedpca on the samples partition
 * (2, or 3 with standardize: the mean and variance rounds, then the SVD).
 */
uint32_t fs_job_aggregations(const struct fs_job_spec *s);

/**
 * The matrix party `party` (1..parties) holds: secure-sum rows x cols;
 * fedsvd/fedpca samples party_sizes[party-1] x d, features N x
 * party_sizes[party-1].
 */
void fs_job_party_shape(const struct fs_job_spec *s, uint32_t party, uint64_t *rows,
                        uint64_t *cols);

/** 1 when `name` is an algorithm of DESIGN.md §1 ("secure-sum", "fedsvd", ...). */
int fs_job_algorithm_known(const char *name);

/**
 * Decode and check a job spec (defaults filled in). rows*cols must be at most
 * max_elements. @return 0, FS_EFORMAT, FS_EINVAL.
 */
FS_WUR int fs_job_spec_decode(const json_t *j, uint64_t max_elements, struct fs_job_spec *out,
                              struct fs_err *err);

/** Encode every field (server_url/name only when set). New reference or NULL (OOM). */
json_t *fs_job_spec_encode(const struct fs_job_spec *s);

struct fs_invitation {
    int version; /* FS_INVITATION_VERSION */
    char job_id[FS_JOB_ID_MAX + 1];
    char job_url[FS_JOB_URL_MAX + FS_JOB_ID_MAX + 16]; /* server_url + "/v1/jobs/" + id */
    uint32_t party;
    char token[FS_AUTH_TOKEN_MAX + 1]; /* a secret: wipe with fs_invitation_wipe */
    char algorithm[FS_JOB_ALGO_MAX + 1];
    uint32_t parties, threshold;
    uint64_t rows, cols; /* the matrix this party must hold */
    /* fedsvd / fedpca only (is_fedsvd set): */
    int is_fedsvd;
    uint64_t global_rows, global_cols; /* the pooled matrix, N x d */
    struct fs_job_fedsvd fed;
    /* added by whoever created the mask set (fedsvd job create / local), not
     * by the aggregation server: "" when absent */
    char masking_url[FS_JOB_URL_MAX + 1];
    char mask_token[FS_AUTH_TOKEN_MAX + 1]; /* a secret */
    char maskset[FS_MASKSET_ID_MAX + 1];
};

/** Encode an invitation. New reference or NULL (OOM). The JSON holds the token. */
json_t *fs_invitation_encode(const struct fs_invitation *inv);

/**
 * Decode an invitation. Unknown fields are ignored (later algorithms add
 * some). For fedsvd/fedpca the job parameters are required and checked
 * (sizes add up, shape is this party's); masking_url, mask_token and maskset
 * are optional here (the client agent requires them).
 * @return 0, FS_EFORMAT, FS_EINVAL.
 */
FS_WUR int fs_invitation_decode(const json_t *j, struct fs_invitation *out, struct fs_err *err);

/** Wipe an invitation (it holds a token). */
void fs_invitation_wipe(struct fs_invitation *inv);

/**
 * The base URL of the server from an invitation's job_url (everything
 * before "/v1/jobs/<id>"), into out (cap bytes). @return 0 or FS_EINVAL.
 */
FS_WUR int fs_invitation_server_url(const struct fs_invitation *inv, char *out, size_t cap,
                                    struct fs_err *err);

/** 1 when s is a job id as the server issues them: "j-" and 32 lower-case hex digits. */
int fs_job_id_valid(const char *s);

/**
 * A fresh job id ("j-" + 32 hex digits from the CSPRNG) into out.
 * @return 0 or FS_ECRYPTO.
 */
FS_WUR int fs_job_id_generate(char out[FS_JOB_ID_MAX + 1], struct fs_err *err);

/** The 32-byte SecAgg job id (fs_secagg_config.job_id): SHA-256 of the id string. */
FS_WUR int fs_wire_secagg_job_id(const char *job_id, uint8_t out[32], struct fs_err *err);

#endif
