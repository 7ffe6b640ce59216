// Which SIMD instruction set the CPU backend's kernels use, chosen at run time: the binary is built for baseline
// x86-64 and carries an AVX2 and an AVX-512 (VNNI) copy of each packed kernel (backends/cpu/packed/).
//
// The environment variable SPECULA_CPU_ISA=scalar|avx2|avx512|amx caps the choice (read once per process), so the
// same binary can be measured or tested at each level. Every level computes bit-identical results (the packed
// kernels reproduce the scalar reference kernels' arithmetic), so the choice changes speed, never tokens.
#pragma once

namespace specula::internal {

// Amx: AVX-512 VNNI plus AMX-INT8 tiles, which the Q8_0 kernel uses for batches of 16 tokens (verification).
enum class CpuIsa { Scalar = 0, Avx2 = 1, Avx512Vnni = 2, Amx = 3 };

// The best level this CPU and OS support.
CpuIsa detected_cpu_isa();
// The level the backend uses: detected_cpu_isa() capped by SPECULA_CPU_ISA, or by set_cpu_isa_cap().
CpuIsa active_cpu_isa();
// Caps the level from now on, for the whole process (benchmarks compare levels in one run). A model's weights are
// packed when its first CPU runner is made at a SIMD level (cpu_weights.h); runners made at the scalar level use the
// scalar kernels on the mapped bytes; a packing serves every SIMD level.
void set_cpu_isa_cap(CpuIsa cap);
const char *cpu_isa_name(CpuIsa isa);

}  // namespace specula::internal
