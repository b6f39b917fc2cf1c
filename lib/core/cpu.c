#include "cpu.h"

#if defined(__x86_64__) && defined(__GNUC__)
#if defined(__clang__)
#include <cpuid.h>

/* clang's __builtin_cpu_supports has no "vaes" before clang 16: CPUID leaf 7,
 * sub-leaf 0, ECX bit 9 (the fuzzing build uses clang) */
static int has_vaes(void)
{
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (c & (1u << 9)) != 0;
}
#else
static int has_vaes(void)
{
    return __builtin_cpu_supports("vaes");
}
#endif

static int probe(enum fs_cpu_feature f)
{
    __builtin_cpu_init();
    switch (f) {
    case FS_CPU_AVX2_FMA:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case FS_CPU_AVX512DQ:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
    case FS_CPU_VAES512:
        return __builtin_cpu_supports("aes") && __builtin_cpu_supports("avx512f") &&
               __builtin_cpu_supports("avx512bw") && has_vaes();
    default:
        return 0;
    }
}

int fs_cpu_has(enum fs_cpu_feature f)
{
    /* 0 not probed yet, 1 absent, 2 present; racing probes store the same value */
    static int cache[FS_CPU_NFEATURES];
    int v;

    if ((unsigned)f >= FS_CPU_NFEATURES) {
        return 0;
    }
    v = __atomic_load_n(&cache[f], __ATOMIC_RELAXED);
    if (v == 0) {
        v = probe(f) ? 2 : 1;
        __atomic_store_n(&cache[f], v, __ATOMIC_RELAXED);
    }
    return v == 2;
}
#else
int fs_cpu_has(enum fs_cpu_feature f)
{
    (void)f;
    return 0;
}
#endif
