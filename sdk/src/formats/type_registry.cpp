#include "type_kernels.h"

namespace specula::internal {

extern const TypeKernels kF32Kernels, kF16Kernels, kBF16Kernels, kQ8_0Kernels, kQ4_0Kernels, kQ8_KKernels, kQ4_KKernels,
    kQ5_KKernels, kQ6_KKernels;

const TypeKernels *find_type_kernels(uint32_t type) {
    static const TypeKernels *const kAll[] = {&kF32Kernels, &kF16Kernels, &kBF16Kernels, &kQ8_0Kernels, &kQ4_0Kernels,
                                                &kQ8_KKernels, &kQ4_KKernels, &kQ5_KKernels, &kQ6_KKernels};
    for (const TypeKernels *k : kAll)
        if (k->type == type) return k;
    return nullptr;
}

size_t type_row_bytes(const TypeKernels &kernels, int64_t n) {
    return size_t(n / kernels.block_size) * kernels.type_size;
}

}  // namespace specula::internal
