// The SPIR-V modules of backends/vulkan/shaders/, compiled by glslc at build time and embedded in the library
// (cmake/embed_spirv.cmake generates the definition). Typed shaders have one module per weight type:
// "matmul_q4_k", "embed_f16", ...
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace specula::internal::vulkan {

// The words of a module, or an empty span for a name this build does not have.
std::span<const uint32_t> find_spirv(const char *name);

}  // namespace specula::internal::vulkan
