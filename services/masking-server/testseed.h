/* The insecure, test-only deterministic master seed of each mask set under
 * --insecure-test-mask-seed (docs/security.md, "Deterministic test masks").
 *
 * Normally each mask set's 32-byte master seed comes from the OS CSPRNG, so
 * two runs of the same job draw different random orthogonal masks and their
 * lossless results differ in the last bits. With a test seed the master seed
 * is HKDF-SHA256 of that seed and the mask set's public geometry (partition,
 * party sizes, shared dimension, requested block sizes): two runs of the same
 * job on the same data get the same masks, whatever their job and mask-set
 * ids, and their results can be compared bit for bit. Anyone who knows the
 * test seed knows every mask, and mask sets of equal geometry share their
 * masks: never in production. The server refuses the option unless it
 * listens on loopback only. */
#ifndef MASK_TESTSEED_H
#define MASK_TESTSEED_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "spec.h"
#include "store.h"

#define MASK_TEST_SEED_MAX 64 /* bytes (128 hex digits) */

/**
 * Decode a test seed: 2..128 hex digits, an even number of them.
 * @param out MASK_TEST_SEED_MAX bytes; *len receives the count.
 * @return 0, or FS_EINVAL (a message without the value).
 */
FS_WUR int mask_test_seed_parse(const char *hex, uint8_t out[MASK_TEST_SEED_MAX], size_t *len,
                                struct fs_err *err);

/**
 * The master seed of a mask set created under test seed (seed, len):
 * HKDF-SHA256(ikm = seed, salt = a fixed label, info = the spec's geometry).
 * The job id, the identities and ttl_s do not enter it.
 * @return 0, FS_EINVAL or FS_ECRYPTO (out zeroed).
 */
FS_WUR int mask_test_seed_derive(const uint8_t *seed, size_t len, const struct mask_spec *spec,
                                 uint8_t out[MASK_SEED_LEN], struct fs_err *err);

#endif
