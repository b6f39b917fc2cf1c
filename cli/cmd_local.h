/* The steps of cmd_local.c (secure-sum, fedsvd, fedpca) for the commands
 * that run several jobs on one set of local services (fedsvd lsa: a secure
 * sum, then fedsvd). Each returns a CLI_* exit status as local.h's do. */
#ifndef FS_CLI_CMD_LOCAL_H
#define FS_CLI_CMD_LOCAL_H

#include <jansson.h>

#include "local.h"

/** POST /v1/jobs for L: secure-sum (L->fed 0: shape rows x cols) or fedsvd/fedpca (L->fed 1). */
int local_create_job(struct local *L, json_t **invitations);

/** fedsvd/fedpca: the job's mask set, merged into the invitations. */
int local_create_maskset(struct local *L, json_t *invs);

/** secure-sum: download the job's sum.npy into L->out (checked against its sha256). */
int local_fetch_sum(struct local *L);

/** fedsvd/fedpca: each party's result into L->out (shared) and L->out/party-<i>/ (private). */
int local_fed_collect(struct local *L);

/** fedsvd/fedpca: the summary fedsvd local writes (new reference, or NULL). */
json_t *local_fed_summary(struct local *L, const char *error);

#endif
