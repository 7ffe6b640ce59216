// out[t] = row tokens[t] of the embedding matrix, dequantized: one workgroup per token.
#version 450
#include "weights.glsl"

layout(local_size_x = 64) in;
layout(std430, binding = 1) readonly buffer Tokens { int tokens[]; };
layout(std430, binding = 2) writeonly buffer Out { float outv[]; };
layout(push_constant) uniform Params {
    uint cols, row_stride, w_off, tok_off, out_off;
} p;

void main() {
    const uint t = gl_WorkGroupID.x;
    const uint row_base = p.w_off + uint(tokens[p.tok_off + t]) * p.row_stride;
    const uint units = (p.cols + 31u) / 32u;
    for (uint u = gl_LocalInvocationID.x; u < units; u += 64u) {
        const uint len = min(32u, p.cols - 32u * u);
        float w[32];
        load_unit(row_base, u, len, w);
        for (uint j = 0u; j < len; ++j) outv[p.out_off + t * p.cols + 32u * u + j] = w[j];
    }
}
