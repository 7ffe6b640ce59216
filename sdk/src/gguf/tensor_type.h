// ggml tensor types as they appear in GGUF files: ids, names and block layouts (format facts only).
// Which types a backend can compute with is the backend's business (formats/).
#pragma once

#include <cstddef>
#include <cstdint>

namespace specula::internal {

// Values are ggml's `enum ggml_type`; they are stored in files, so never renumber.
enum class TensorType : uint32_t {
    F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
    Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
    IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22, IQ4_XS = 23,
    I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
    TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39,
};

struct TensorTypeLayout {
    const char *name;
    uint32_t block_size;  // elements per block
    uint32_t type_size;   // bytes per block
};

// Layout of a known type id, or nullptr for an id this build does not know.
const TensorTypeLayout *tensor_type_layout(uint32_t type_id);
// Name of a type id ("Q4_0"), "unknown" for an unknown id.
const char *tensor_type_name(uint32_t type_id);

}  // namespace specula::internal
