#include "cpu_isa.h"

#include "core/log.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace specula::internal {

CpuIsa detected_cpu_isa() {
#if defined(__x86_64__) || defined(__i386__)
    // GCC's __builtin_cpu_supports also checks that the OS saves the AVX/AVX-512 register state (XCR0).
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("f16c") && __builtin_cpu_supports("fma"))
        return CpuIsa::Avx512Vnni;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))
        return CpuIsa::Avx2;
#endif
    return CpuIsa::Scalar;
}

namespace {

std::atomic<int> g_cap{int(CpuIsa::Avx512Vnni)};

CpuIsa env_capped_isa() {
    static const CpuIsa isa = [] {
        CpuIsa best = detected_cpu_isa();
        const char *cap = std::getenv("SPECULA_CPU_ISA");
        if (cap == nullptr || *cap == '\0') return best;
        CpuIsa wanted = best;
        if (std::strcmp(cap, "scalar") == 0) wanted = CpuIsa::Scalar;
        else if (std::strcmp(cap, "avx2") == 0) wanted = CpuIsa::Avx2;
        else if (std::strcmp(cap, "avx512") == 0) wanted = CpuIsa::Avx512Vnni;
        else log(SPECULA_LOG_WARN, "SPECULA_CPU_ISA=%s is not one of scalar, avx2, avx512; using %s", cap, cpu_isa_name(best));
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
    case CpuIsa::Avx512Vnni: return "avx512-vnni";
    case CpuIsa::Avx2: return "avx2";
    case CpuIsa::Scalar: break;
    }
    return "scalar";
}

}  // namespace specula::internal
