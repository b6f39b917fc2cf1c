/* The party side of the power-method jobs (fedpower, fedpower-utility,
 * fedpower-private, dp-ppm; docs/wire-fedpower.md) for the worker: builds
 * the job's lib/proto configuration from the invitation, holds the
 * fs_fedpower_party over the party's dense or sparse (CSR) data, runs the
 * local iterations when a broadcast Z arrives, and hands out the upload of
 * each aggregation (masked ring chunks or the plain matrix) and the noise
 * exchange responses. No HTTP here: worker.c moves the messages. */
#include "agent.h"

#include "crypto/ct.h"
#include "proto/fedpower.h"

#include <stdlib.h>
#include <string.h>

struct ca_power {
    struct fs_fedpower_config cfg;
    uint64_t rows[FS_JOB_MAX_PARTIES];
    uint32_t party;
    uint32_t syncs;
    uint32_t naggs;
    fs_fedpower_party *fp;
    int received; /* aggregation whose Z was received, + 1 (0: none yet) */
    int resuming; /* rebuilt after a restart: the first receive may skip ahead */
};

int ca_power_check(const struct fs_invitation *inv, uint64_t rows, uint64_t cols,
                   struct fs_err *err)
{
    struct fs_fedpower_config cfg;
    uint64_t *pr = calloc(FS_JOB_MAX_PARTIES, sizeof *pr);
    int rc;

    if (pr == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    rc = fs_invitation_fedpower_config(inv, &cfg, pr, err);
    if (rc != 0) {
        fs_err_prefix(err, "invitation: ");
    } else if (cols != cfg.d || rows != pr[inv->party - 1]) {
        rc = fs_err_set(err, FS_EINVAL,
                        "the dataset is %llu x %llu, but the job expects party %u to hold %llu "
                        "rows (party_rows[%u]) of d = %u columns",
                        (unsigned long long)rows, (unsigned long long)cols, inv->party,
                        (unsigned long long)pr[inv->party - 1], inv->party - 1, cfg.d);
    }
    free(pr);
    return rc == 0 ? 0 : FS_EINVAL;
}

int ca_power_new(const struct fs_invitation *inv, const fs_mat *dense, const fs_csr *csr,
                 struct ca_power **out, struct fs_err *err)
{
    struct ca_power *p = calloc(1, sizeof *p);
    int rc;

    *out = NULL;
    if (p == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    rc = fs_invitation_fedpower_config(inv, &p->cfg, p->rows, err);
    if (rc == 0) {
        rc = fs_fedpower_party_new(&p->cfg, p->rows, inv->party, dense, csr, &p->fp, err);
    }
    if (rc != 0) {
        ca_power_free(p);
        return rc;
    }
    p->party = inv->party;
    p->syncs = fs_fedpower_syncs(&p->cfg);
    p->naggs = p->syncs + (p->cfg.eigenvalues ? 1u : 0u);
    *out = p;
    return 0;
}

void ca_power_free(struct ca_power *p)
{
    if (p == NULL) {
        return;
    }
    fs_fedpower_party_free(p->fp);
    fs_wipe(p, sizeof *p);
    free(p);
}

enum fs_agent_power ca_power_kind(const struct ca_power *p)
{
    switch (p->cfg.alg) {
    case FS_FEDPOWER_PLAIN:
        return FS_AGENT_POWER_PLAIN;
    case FS_FEDPOWER_UTILITY:
        return FS_AGENT_POWER_UTILITY;
    default:
        return FS_AGENT_POWER_SECAGG;
    }
}

uint32_t ca_power_aggregations(const struct ca_power *p)
{
    return p->naggs;
}

uint32_t ca_power_exchanges(const struct ca_power *p)
{
    return fs_fedpower_exchanges(&p->cfg);
}

int ca_power_exchange_cheap(const struct ca_power *p)
{
    return p->cfg.noise_exchange == FS_NOISEX_OT;
}

int ca_power_is_rayleigh(const struct ca_power *p, uint32_t r)
{
    return r >= p->syncs;
}

uint64_t ca_power_agg_len(const struct ca_power *p, uint32_t r)
{
    return (uint64_t)p->cfg.r * (ca_power_is_rayleigh(p, r) ? p->cfg.r : p->cfg.d);
}

uint32_t ca_power_d(const struct ca_power *p)
{
    return p->cfg.d;
}

uint32_t ca_power_r(const struct ca_power *p)
{
    return p->cfg.r;
}

int ca_power_receive(struct ca_power *p, uint32_t r, const fs_mat *z, uint32_t iter,
                     struct fs_err *err)
{
    int rc;

    if (p->received == (int)r + 1) {
        return 0; /* a retried BEGIN: Z of this aggregation is in already */
    }
    if (z->rows != p->cfg.d || z->cols != p->cfg.r) {
        return fs_err_set(err, FS_EFORMAT, "Z of aggregation %u is %zu x %zu, expected %u x %u", r,
                          z->rows, z->cols, p->cfg.d, p->cfg.r);
    }
    if (ca_power_is_rayleigh(p, r) != (iter == p->cfg.iterations && p->cfg.eigenvalues)) {
        return fs_err_set(err, FS_EFORMAT, "aggregation %u: iteration %u does not fit its kind", r,
                          iter);
    }
    if (p->resuming) {
        /* the first Z after a restart: the syncs before it are in */
        rc = fs_fedpower_party_resume_at(p->fp, iter, err);
        if (rc != 0) {
            return rc;
        }
        p->resuming = 0;
    }
    rc = fs_fedpower_party_receive(p->fp, z, iter, err);
    if (rc == 0) {
        p->received = (int)r + 1;
    }
    return rc;
}

int ca_power_chunk(struct ca_power *p, fs_secagg_client *c, uint64_t off, uint64_t *y, size_t m,
                   struct fs_err *err)
{
    size_t len = 0;
    const uint64_t *v = fs_fedpower_party_ring_upload(p->fp, &len);

    if (v == NULL || off > len || m > len - off) {
        return fs_err_set(err, FS_ESTATE, "no ring upload for this chunk");
    }
    memcpy(y, v + off, m * sizeof *y);
    return fs_secagg_client_mask(c, off, y, y, m, err);
}

const fs_mat *ca_power_plain(const struct ca_power *p, double *zmax)
{
    return fs_fedpower_party_plain_upload(p->fp, zmax);
}

int ca_power_set_secret(struct ca_power *p, const uint8_t secret[CA_SECRET_LEN], struct fs_err *err)
{
    return fs_fedpower_party_set_secret(p->fp, secret, err);
}

void ca_power_resuming(struct ca_power *p)
{
    p->resuming = 1;
}

int ca_power_set_key(struct ca_power *p, const uint8_t *pk, size_t len, struct fs_err *err)
{
    return fs_fedpower_party_set_exchange_key(p->fp, pk, len, err);
}

int ca_power_key_prepare(const struct ca_power *p, const uint8_t *pk, size_t len,
                         struct fs_noisex_client **nx, struct fs_err *err)
{
    return fs_fedpower_party_exchange_prepare(p->fp, pk, len, nx, err);
}

void ca_power_key_install(struct ca_power *p, struct fs_noisex_client *nx)
{
    fs_fedpower_party_exchange_install(p->fp, nx);
}

size_t ca_power_response_size(const struct ca_power *p)
{
    return fs_fedpower_party_exchange_size(p->fp);
}

int ca_power_exchange(struct ca_power *p, const uint8_t *sel, size_t sel_len, uint8_t *out,
                      size_t out_len, struct fs_err *err)
{
    return fs_fedpower_party_exchange(p->fp, sel, sel_len, out, out_len, err);
}
