/* The key setup's second round (R1) of a secure aggregation that a unit
 * test drives in one process: shared by the secure-aggregation, fedsvd and
 * fedpower tests. Static: each test is one program. */
#ifndef FS_TEST_SECAGG_UTIL_H
#define FS_TEST_SECAGG_UTIL_H

#include <stdint.h>
#include <stdlib.h>

#include "proto/secagg.h"

/* After R1: party id (client c) fetches the share ciphertexts addressed to
 * it from the server and takes them. 0, or the failing call's status. */
static inline int sa_receive(fs_secagg_server *s, fs_secagg_client *c, uint32_t id,
                             struct fs_err *err)
{
    const struct fs_secagg_share_ct **mine = NULL;
    struct fs_secagg_share_ct *flat = NULL;
    size_t km = 0;
    int rc = fs_secagg_server_shares_for(s, id, &mine, &km, err);

    if (rc == 0) {
        flat = calloc(km + 1, sizeof *flat);
        rc = flat == NULL ? fs_err_set(err, FS_ENOMEM, "out of memory") : 0;
    }
    for (size_t q = 0; rc == 0 && q < km; q++) {
        flat[q] = *mine[q];
    }
    if (rc == 0) {
        rc = fs_secagg_client_receive_shares(c, flat, km, err);
    }
    free(flat);
    free(mine);
    return rc;
}

/* Close R0 and run R1 for parties 1..n, every one of which advertised (c[i]
 * its client): each shares its keys, then receives the shares for it.
 * 0, or the failing call's status with err set. */
static inline int sa_share_all(fs_secagg_server *s, fs_secagg_client *const *c, uint32_t n,
                               struct fs_err *err)
{
    const struct fs_secagg_adv *roster;
    size_t k = 0;
    int rc = fs_secagg_server_close_adv(s, err);

    roster = rc == 0 ? fs_secagg_server_roster(s, &k) : NULL;
    for (uint32_t i = 1; rc == 0 && i <= n; i++) {
        struct fs_secagg_share_ct *cts = NULL;
        size_t nct = 0;
        rc = fs_secagg_client_share_keys(c[i], roster, k, &cts, &nct, err);
        if (rc == 0) {
            rc = fs_secagg_server_add_shares(s, i, cts, nct, err);
        }
        fs_secagg_share_cts_free(cts, nct);
    }
    if (rc == 0) {
        rc = fs_secagg_server_close_shares(s, err);
    }
    for (uint32_t i = 1; rc == 0 && i <= n; i++) {
        rc = sa_receive(s, c[i], i, err);
    }
    return rc;
}

#endif
