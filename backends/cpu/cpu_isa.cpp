#include "cpu_isa.h"

#include "core/log.h"

#include <atomic>
#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif
#include <cstdlib>
#include <cstring>

namespace specula::internal {

namespace {

// AMX needs the CPU flags (CPUID.7.0:EDX bits 24 AMX-TILE, 25 AMX-INT8) and Linux's permission for the 8 KiB tile
// state (arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA), asked once for the whole process.
bool amx_usable() {
#if defined(__x86_64__)
    static const bool usable = [] {
        unsigned a = 0, b = 0, c = 0, d = 0;
        if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24)) || !(d & (1u << 25))) return false;
        constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
        return ::syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
    }();
    return usable;
#else
    return false;
#endif
}

// F16C (CPUID.1:ECX bit 29). clang (14) rejects "f16c" in __builtin_cpu_supports ("invalid cpu feature string"),
// which kept the library from compiling with clang at all (the fuzzing build needs it); GCC accepts it. The AVX
// register state the OS must save is the same as for AVX2, which is checked beside it.
bool has_f16c() {
#if defined(__clang__) && defined(__x86_64__)
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0;
#else
    return __builtin_cpu_supports("f16c");
#endif
}

}  // namespace

CpuIsa detected_cpu_isa() {
#if defined(__x86_64__) || defined(__i386__)
    // GCC's __builtin_cpu_supports also checks that the OS saves the AVX/AVX-512 register state (XCR0).
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512vnni") && has_f16c() && __builtin_cpu_supports("fma"))
        return amx_usable() ? CpuIsa::Amx : CpuIsa::Avx512Vnni;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c())
        return CpuIsa::Avx2;
#endif
    return CpuIsa::Scalar;
}

namespace {

std::atomic<int> g_cap{int(CpuIsa::Amx)};

CpuIsa env_capped_isa() {
    static const CpuIsa isa = [] {
        CpuIsa best = detected_cpu_isa();
        const char *cap = std::getenv("SPECULA_CPU_ISA");
        if (cap == nullptr || *cap == '\0') return best;
        CpuIsa wanted = best;
        if (std::strcmp(cap, "scalar") == 0) wanted = CpuIsa::Scalar;
        else if (std::strcmp(cap, "avx2") == 0) wanted = CpuIsa::Avx2;
        else if (std::strcmp(cap, "avx512") == 0) wanted = CpuIsa::Avx512Vnni;
        else if (std::strcmp(cap, "amx") == 0) wanted = CpuIsa::Amx;
        else log(SPECULA_LOG_WARN, "SPECULA_CPU_ISA=%s is not one of scalar, avx2, avx512, amx; using %s", cap, cpu_isa_name(best));
        return int(wanted) < int(best) ? wanted : best;
    }();
    return isa;
}

}  // namespace

CpuIsa active_cpu_isa() {
    const int cap = g_cap.load(std::memory_order_relaxed);
    const CpuIsa isa = env_capped_isa();
    return int(isa) < cap ? isa : CpuIsa(cap);
}

void set_cpu_isa_cap(CpuIsa cap) { g_cap.store(int(cap), std::memory_order_relaxed); }

const char *cpu_isa_name(CpuIsa isa) {
    switch (isa) {
    case CpuIsa::Amx: return "avx512-vnni+amx";
    case CpuIsa::Avx512Vnni: return "avx512-vnni";
    case CpuIsa::Avx2: return "avx2";
    case CpuIsa::Scalar: break;
    }
    return "scalar";
}

}  // namespace specula::internal
