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
#include "../lib/proto/fedpower.h"
#include "../lib/proto/job.h"
#include "../lib/proto/secagg.h"

#define FS_JOB_ID_MAX               64  /* job id string, without NUL */
#define FS_JOB_NAME_MAX             128 /* bytes */
#define FS_JOB_URL_MAX              512 /* server_url / job_url, bytes */
#define FS_JOB_ALGO_MAX             31
#define FS_JOB_DEFAULT_TIMEOUT      60
#define FS_JOB_MAX_TIMEOUT          86400
#define FS_JOB_MAX_JOIN_TIMEOUT     604800 /* 7 days */
#define FS_JOB_DEFAULT_JOIN_TIMEOUT 86400  /* 24 hours: partners join by hand */
#define FS_INVITATION_VERSION       1
#define FS_JOB_MAX_PARTIES          1000 /* = FS_SECAGG_MAX_PARTIES */
#define FS_MASKSET_ID_MAX           64   /* masking-server mask-set id, without NUL */
#define FS_JOB_KEY_LEN              32   /* an Ed25519 identity public key (party_keys) */

/** Every algorithm a job may run, as a phrase for error messages. */
#define FS_ALGO_LIST                                                                               \
    "secure-sum, fedsvd, fedpca, fedpower, fedpower-utility, fedpower-private or dp-ppm"

/** The wire name of an algorithm ("secure-sum", "fedsvd", ...; "unknown" out of range). */
const char *fs_algo_name(enum fs_algo a);

/** The algorithm of a wire name into *out. @return 0, or -1 when name is NULL or unknown. */
int fs_algo_parse(const char *name, enum fs_algo *out);

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
    uint32_t shards; /* aggregation servers holding row ranges of X' (samples only); 0
                        (absent) or 1 = one server; written only when > 1 */
};

#define FS_JOB_MAX_SHARDS 16

/* The parameters of a power-method job ("fedpower", "fedpower-utility",
 * "fedpower-private", "dp-ppm"; docs/wire-fedpower.md), in the job spec, in
 * invitations and in the Job status. Zero for other algorithms. The number
 * of features d is the spec's `cols`. Optional fields hold their default
 * after decoding; has_* tell the nullable ones apart. */
struct fs_job_fedpower {
    uint64_t party_rows[FS_JOB_MAX_PARTIES]; /* s_i of party i+1, `parties` entries, each >= 1 */
    uint32_t k;                              /* target rank, 1..d (required) */
    uint32_t rank;                           /* r, k..min(d, FS_FEDPOWER_MAX_RANK); default k */
    uint32_t iterations;                     /* T, default 92 */
    uint32_t sync_every;                     /* p, default 4 (dp-ppm: 1, nothing else) */
    int align;                               /* enum fs_fedpower_align, default global */
    int has_sigma;                           /* "sigma" given (a number) */
    double sigma;                            /* party noise std (0 = none: fedpower/utility) */
    int has_sigma_server;                    /* "sigma_server" given (fedpower only) */
    double sigma_server;
    int has_epsilon; /* "epsilon" given: sigma calibrated from (epsilon, delta) */
    double epsilon;
    double delta;           /* default 1e-5 */
    double clip_z;          /* fedpower-private: z_hat (required for it, else 0) */
    double bound_m;         /* fedpower-private: m_hat (required for it, else 0) */
    int bound_mode;         /* enum fs_fedpower_bound_mode, default clip (private) */
    double value_bound;     /* public bound on ||M'_i||_2; 0 = absent */
    int noise_exchange;     /* enum fs_noisex_mode, default seed (utility) */
    uint32_t paillier_bits; /* utility seed/elementwise: default 3072; ot: 0 (no key) */
    int eigenvalues;        /* default 1 */
    int allow_weak_privacy; /* default 0 */
    int allow_dropouts;     /* default 0: a party missing from a round fails the job */
    int has_z0_seed;        /* spec: optional (the server draws it); status and
                               invitation: always */
    uint8_t z0_seed[32];    /* public seed of Z_0 ("z0_seed": 64 lower-case hex) */
};

/* How the job's secure aggregation masks ("secagg" on the wire): every pair
 * of parties (Bonawitz et al. 2017), or SecAgg+ neighbours only (Bell et al.
 * 2020; lib/proto/secagg.h). AUTO only in a spec not yet decoded (the
 * decoder resolves it: plus from FS_SECAGG_PLUS_MIN_N parties when the
 * neighbour graph is smaller than the full one, full below). */
enum fs_job_secagg { FS_JOB_SECAGG_AUTO = 0, FS_JOB_SECAGG_FULL = 1, FS_JOB_SECAGG_PLUS = 2 };

/** "full", "plus" ("auto" for FS_JOB_SECAGG_AUTO). */
const char *fs_job_secagg_name(int mode);

/** "full" / "plus" into *out. @return 0, or -1 for any other string (or NULL). */
int fs_job_secagg_parse(const char *name, int *out);

/** The mode a job of `parties` gets when its spec does not say. */
int fs_job_secagg_default(uint32_t parties);

/**
 * The lib/proto SecAgg configuration's graph fields for a job's mode:
 * cfg->degree and cfg->share_t from cfg->n (FS_JOB_SECAGG_PLUS), or zero
 * (full). @return 0 or FS_EINVAL (plus impossible for cfg->n parties).
 */
FS_WUR int fs_job_secagg_config(int mode, struct fs_secagg_config *cfg, struct fs_err *err);

struct fs_job_spec {
    enum fs_algo algo;                   /* "algorithm" on the wire (fs_algo_name) */
    char name[FS_JOB_NAME_MAX + 1];      /* "" when absent */
    uint32_t parties;                    /* 1..FS_SECAGG_MAX_PARTIES */
    uint32_t threshold;                  /* 1..parties; default floor(parties/2)+1 */
    int allow_low_threshold;             /* 1: a threshold below floor(parties/2)+1 is
                                            accepted (refused by default: see docs) */
    int secagg;                          /* enum fs_job_secagg; decoded specs: FULL or PLUS */
    uint64_t rows, cols;                 /* secure-sum: every party's matrix shape;
                                            fedsvd/fedpca: the pooled matrix, N x d */
    uint32_t round_timeout_s;            /* default 60 */
    uint32_t join_timeout_s;             /* R0; default FS_JOB_DEFAULT_JOIN_TIMEOUT */
    char server_url[FS_JOB_URL_MAX + 1]; /* "" = take it from the request; no trailing '/' */
    struct fs_job_fedsvd fed;            /* fedsvd / fedpca only */
    struct fs_job_fedpower power;        /* power-method jobs only: there rows = sum of
                                            party_rows, cols = d */
    /* Pinned identities ("party_keys"): party i+1's Ed25519 identity public
     * key (its fingerprint, lib/crypto/ed25519.h), distinct. A job without
     * pins must say allow_unpinned (then the parties trust the identity keys
     * the server relays). */
    int allow_unpinned;
    int has_pins;
    uint8_t party_keys[FS_JOB_MAX_PARTIES][FS_JOB_KEY_LEN];
};

/**
 * Decode the power-method parameters of a JSON object (a job spec, an
 * invitation, a Job status): every field of struct fs_job_fedpower, with d =
 * cols and `parties` party_rows entries; need_seed: "z0_seed" required.
 * Combinations are checked with fs_fedpower_config_check. Other members are
 * not looked at. @return 0, FS_EFORMAT (missing or wrong JSON type),
 * FS_EINVAL (out of range, bad combination).
 */
FS_WUR int fs_job_fedpower_decode(const json_t *j, enum fs_algo algo, uint32_t parties,
                                  uint32_t threshold, uint64_t cols, int need_seed,
                                  struct fs_job_fedpower *out, struct fs_err *err);

/**
 * Add the power-method parameters to obj ("cols" not included; z0_seed
 * when has_z0_seed; sigma / sigma_server / epsilon null when absent).
 * @return 0 or -1 (out of memory).
 */
int fs_job_fedpower_encode(json_t *obj, enum fs_algo algo, uint32_t parties,
                           const struct fs_job_fedpower *p);

/**
 * The lib/proto configuration of a power-method job and its public row
 * vector rows[0..parties) (rows must have FS_JOB_MAX_PARTIES entries).
 * The spec must carry its z0_seed (the server sets it before calling).
 * @return 0, FS_EINVAL.
 */
FS_WUR int fs_job_fedpower_config(const struct fs_job_spec *spec, struct fs_fedpower_config *cfg,
                                  uint64_t *rows, struct fs_err *err);

/**
 * Decode the fedsvd/fedpca parameters of a JSON object (a job spec, an
 * invitation, a Job status): partition, party_sizes (`parties` entries
 * adding up to rows (samples) or cols (features)), k (1..min(rows, cols) or
 * absent/null), method, standardize (fedpca only), allow_dropouts. Other
 * members are not looked at. @return 0, FS_EFORMAT, FS_EINVAL.
 */
FS_WUR int fs_job_fedsvd_decode(const json_t *j, enum fs_algo algo, uint32_t parties, uint64_t rows,
                                uint64_t cols, struct fs_job_fedsvd *out, struct fs_err *err);

/** Name of a partition ("samples", "features"). */
const char *fs_job_partition_name(int partition);

/**
 * Secure aggregations a job runs: 1, except fedpca on the samples partition
 * (2, or 3 with standardize: the mean and variance rounds, then the SVD) and
 * the power-method jobs (rounds: ceil(T/p) syncs, plus 1 with eigenvalues;
 * plain fedpower's rounds are plain uploads, not secure sums).
 */
uint32_t fs_job_aggregations(const struct fs_job_spec *s);

/**
 * The matrix party `party` (1..parties) holds: secure-sum rows x cols;
 * fedsvd/fedpca samples party_sizes[party-1] x d, features N x
 * party_sizes[party-1]; power-method jobs party_rows[party-1] x d.
 */
void fs_job_party_shape(const struct fs_job_spec *s, uint32_t party, uint64_t *rows,
                        uint64_t *cols);

/**
 * Decode and check a job spec (defaults filled in). rows*cols must be at most
 * max_elements. A spec needs party_keys (fs_job_party_keys_decode) or
 * allow_unpinned true (FS_EINVAL otherwise). @return 0, FS_EFORMAT, FS_EINVAL.
 */
FS_WUR int fs_job_spec_decode(const json_t *j, uint64_t max_elements, struct fs_job_spec *out,
                              struct fs_err *err);

/**
 * A spec for algo holding the decoder's defaults (timeouts, fedsvd exact
 * samples, the power methods' iterations, sync_every, align, delta,
 * bound_mode, noise_exchange, paillier_bits, eigenvalues); threshold 0 (the
 * server's default, floor(parties/2)+1), no pins. The caller sets parties,
 * the shape and the algorithm's parameters, then encodes it.
 */
void fs_job_spec_init(struct fs_job_spec *s, enum fs_algo algo);

/**
 * Encode a spec as POST /v1/jobs takes it: the algorithm's fields from
 * s->algo (the `algorithm` string is not read); name and server_url only
 * when set; threshold only when > 0; "shape" [rows, cols] for secure-sum
 * and fedsvd/fedpca, "cols" and "party_rows" (no shape) for the power
 * methods, whose rank 0 means k; party_keys when has_pins. The same
 * encoder serves the server's stored specs (fs_job_spec_decode gives back
 * the same spec). New reference or NULL (OOM).
 */
json_t *fs_job_spec_encode(const struct fs_job_spec *s);

struct fs_invitation {
    int version; /* FS_INVITATION_VERSION */
    char job_id[FS_JOB_ID_MAX + 1];
    char job_url[FS_JOB_URL_MAX + FS_JOB_ID_MAX + 16]; /* server_url + "/v1/jobs/" + id */
    uint32_t party;
    char token[FS_AUTH_TOKEN_MAX + 1]; /* a secret: wipe with fs_invitation_wipe */
    char algorithm[FS_JOB_ALGO_MAX + 1];
    int algo_known;    /* 1 when `algorithm` names an enum fs_algo (a newer server's
                          algorithm decodes, with algo_known 0: the agent refuses it) */
    enum fs_algo algo; /* valid when algo_known */
    uint32_t parties, threshold;
    uint64_t rows, cols; /* the matrix this party must hold */
    /* fedsvd / fedpca only (is_fedsvd set): */
    int is_fedsvd;
    uint64_t global_rows, global_cols; /* the pooled matrix, N x d */
    struct fs_job_fedsvd fed;
    /* power-method jobs only (is_fedpower set): cols = d, rows = party_rows[party-1] */
    int is_fedpower;
    struct fs_job_fedpower power;
    /* added by whoever created the mask set (fedsvd job create / local), not
     * by the aggregation server: "" when absent */
    char masking_url[FS_JOB_URL_MAX + 1];
    char maskset[FS_MASKSET_ID_MAX + 1];
    /* the job's pinned identities, as in the spec: has_pins = 0 for a job
     * created with allow_unpinned */
    int has_pins;
    uint8_t party_keys[FS_JOB_MAX_PARTIES][FS_JOB_KEY_LEN];
};

/** Encode an invitation. New reference or NULL (OOM). The JSON holds the token. */
json_t *fs_invitation_encode(const struct fs_invitation *inv);

/**
 * Decode an invitation. Unknown fields are ignored (later algorithms add
 * some). For fedsvd/fedpca the job parameters are required and checked
 * (sizes add up, shape is this party's); masking_url and maskset
 * are optional here (the client agent requires them).
 * @return 0, FS_EFORMAT, FS_EINVAL.
 */
FS_WUR int fs_invitation_decode(const json_t *j, struct fs_invitation *out, struct fs_err *err);

/** The invitation's algorithm (FS_ALGO_SECURE_SUM when its name is unknown). */
enum fs_algo fs_invitation_algo(const struct fs_invitation *inv);

/** As fs_job_fedpower_config, from an invitation (identical configuration). */
FS_WUR int fs_invitation_fedpower_config(const struct fs_invitation *inv,
                                         struct fs_fedpower_config *cfg, uint64_t *rows,
                                         struct fs_err *err);

/**
 * Decode a "party_keys" member of j: absent or null gives *has = 0; else an
 * array of exactly `parties` fingerprints (64 hex digits each,
 * fs_ed25519_fpr_parse), pairwise distinct, into keys[0..parties).
 * @return 0, FS_EFORMAT (wrong JSON type), FS_EINVAL (count, digits, repeat).
 */
FS_WUR int fs_job_party_keys_decode(const json_t *j, uint32_t parties, int *has,
                                    uint8_t (*keys)[FS_JOB_KEY_LEN], struct fs_err *err);

/** The "party_keys" array of keys[0..parties) (lower-case fingerprints). New reference or NULL. */
json_t *fs_job_party_keys_encode(const uint8_t (*keys)[FS_JOB_KEY_LEN], uint32_t parties);

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

/* PUT /v1/jobs/{job}/maskset: the mask set of a fedsvd/fedpca job and the
 * end token with which the aggregation server deletes it when the job ends. */
struct fs_job_maskset {
    char masking_url[FS_JOB_URL_MAX + 1];
    char maskset[FS_MASKSET_ID_MAX + 1];
    char end_token[FS_AUTH_TOKEN_MAX + 1]; /* a secret: wipe after use */
};

/**
 * Decode {"masking_url", "maskset", "end_token"}: all three required, no
 * other field; an http(s) URL without user info or white space (trailing
 * '/' trimmed), an id of 1..64 [A-Za-z0-9._-], a valid token.
 * @return 0, FS_EFORMAT (types, missing), FS_EINVAL (values, unknown field).
 */
FS_WUR int fs_job_maskset_decode(const json_t *j, struct fs_job_maskset *out, struct fs_err *err);

/** 1 when s is a mask-set id: 1..FS_MASKSET_ID_MAX of [A-Za-z0-9._-]. */
int fs_maskset_id_valid(const char *s);

/** The 32-byte SecAgg job id (fs_secagg_config.job_id): SHA-256 of the id string. */
FS_WUR int fs_wire_secagg_job_id(const char *job_id, uint8_t out[32], struct fs_err *err);

#endif
