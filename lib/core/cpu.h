/* CPU features for run-time dispatch between a vector kernel and its
 * portable fallback. Each feature is tested once (CPUID through GCC's
 * __builtin_cpu_supports) and cached. valgrind reports no AVX-512, so under
 * it the fallbacks run. Always 0 off x86-64/GCC. */
#ifndef FS_CORE_CPU_H
#define FS_CORE_CPU_H

enum fs_cpu_feature {
    FS_CPU_AVX2_FMA, /* AVX2 and FMA (libmvec's 4-wide functions) */
    FS_CPU_AVX512DQ, /* AVX-512 F and DQ (64-bit integer <-> double conversions) */
    FS_CPU_VAES512,  /* AES-NI, AVX-512 F and BW, VAES (4 AES blocks per instruction) */
    FS_CPU_NFEATURES
};

/** 1 if the CPU has every extension of f, else 0. Thread-safe. */
int fs_cpu_has(enum fs_cpu_feature f);

#endif
