/* fedsvd lsa across sites (cmd_lsa_sites.c): the coordinator's
 * `fedsvd job create --algorithm lsa` (dispatched from main.c) and each
 * site's `fedsvd lsa count|df|rows|terms`; the capture form of job create
 * they use (cmd_job.c); and what they share with cmd_lsa.c (lsa_terms.c). */
#ifndef FS_CLI_CMD_LSA_H
#define FS_CLI_CMD_LSA_H

#include <stddef.h>

#include <jansson.h>

#include "la/mat.h"

/** 1 when argv (job create's) asks for --algorithm lsa. */
int cmd_lsa_job_requested(int argc, char **argv);

/** fedsvd job create --algorithm lsa: both jobs, one invitation file per site. */
int cmd_lsa_job_create(int argc, char **argv);

/** fedsvd lsa count|df|rows|terms (argv[0] is "lsa", argv[1] the step). */
int cmd_lsa_site(int argc, char **argv);

/** 1 when argv[1] names a site step (count, df, rows, terms). */
int cmd_lsa_is_site_step(int argc, char **argv);

/**
 * `fedsvd job create` with the given options (argv[0] "create", no
 * --out-dir): *created receives {"job": the job, "invitations": [...]}, a
 * new reference holding every party's token (cmd_job.c).
 */
int cli_job_create_capture(int argc, char **argv, json_t **created);

/**
 * Sign of component j for display and for results: +1 or -1 so that the
 * largest-magnitude entry of column j of v is positive (lsa_terms.c).
 */
double lsa_orient(const fs_mat *v, size_t j);

/**
 * The features (row indices of v) of component j's largest weights once
 * oriented, largest first, at most top of them; only rows with keep[r]
 * (NULL: all). out has room for top; returns the count, 0 also when out of
 * memory (lsa_terms.c).
 */
size_t lsa_top_rows(const fs_mat *v, size_t j, const unsigned char *keep, size_t top, size_t *out);

#endif
