// A weight matrix repacked for the SIMD kernels (layout: packed_gemm.h). Built once when a model loads, from the
// GGUF's own blocks: the quantized values and scales are the file's, only their order changes, so a packed
// matrix holds about the same bytes as its source (Q8_0, Q4_0, Q6_K: exactly; Q4_K: +3%, its six-bit scales and
// minimums are stored as bytes).
#pragma once

#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/packed/packed_gemm.h"
#include "model/weights.h"

#include <cstdlib>
#include <memory>
#include <vector>

namespace specula::internal {

class PackedMatrix {
public:
    // Whether the packed kernels handle this ggml type.
    static bool packable(uint32_t type);
    // Repacks w (which must be packable and have whole blocks per row). Throws Error(OUT_OF_MEMORY).
    static std::unique_ptr<PackedMatrix> pack(const WeightView &w);

    const PackedView &view() const { return view_; }
    size_t bytes() const { return size_t(view_.n_groups) * view_.group_bytes; }

private:
    struct Free {
        void operator()(uint8_t *p) const { std::free(p); }
    };
    PackedView view_;
    std::unique_ptr<uint8_t, Free> storage_;
};

// The sum of each Q8_0 block's 32 int8 values of one converted activation row of `cols` values
// (PackedActs::block_sums: the kernels undo the weights' +128 offset with it).
void q8_0_block_sums(const uint8_t *xq, int64_t cols, int32_t *sums);

// The packed kernel for a type at an instruction-set level, or nullptr (scalar level, or a type without one).
PackedGemmFn packed_gemm(uint32_t type, CpuIsa isa);
// The vector conversion of activations to a dot type at a level, or nullptr (the scalar from_float then).
PackedConvertFn packed_convert(uint32_t dot_type, CpuIsa isa);

}  // namespace specula::internal
