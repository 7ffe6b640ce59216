// The element-wise parts of a mixture of experts (graph.h), one element per invocation:
// op 0 gather: dst[i * w + c] = src[(s / k) * src_width + (per_slot ? (s % k) * w : 0) + c], s = slots[i]
// op 1 scatter: dst[(s / k) * dst_width + (s % k) * w + c] = src[i * w + c]
// op 2 mix: dst[r * w + c] = sum over j in order of route[r]'s weight j * src[r][j * w + c]
// op 3 sigmoid gate: dst[r * w + c] *= sigmoid(src[r]) as llama.cpp's silu(g) / g
// (count = rows * w elements; the CPU's formulas, backends/cpu/ops.cpp).
#version 450
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer Dst { float dst[]; };
layout(std430, binding = 1) readonly buffer Src { float src[]; };
layout(std430, binding = 2) readonly buffer Ints { int ints[]; };
layout(std430, binding = 3) readonly buffer Route { float route[]; };
layout(push_constant) uniform Params { uint count, op, w, k, per_slot, width, dst_off, src_off, ints_off, route_off; } p;

void main() {
    const uint e = gl_GlobalInvocationID.y * (gl_NumWorkGroups.x * 256u) + gl_GlobalInvocationID.x;
    if (e >= p.count) return;
    const uint i = e / p.w, c = e % p.w;
    if (p.op == 0u) {
        const uint s = uint(ints[p.ints_off + i]);
        dst[p.dst_off + e] = src[p.src_off + (s / p.k) * p.width + (p.per_slot != 0u ? (s % p.k) * p.w : 0u) + c];
    } else if (p.op == 1u) {
        const uint s = uint(ints[p.ints_off + i]);
        dst[p.dst_off + (s / p.k) * p.width + (s % p.k) * p.w + c] = src[p.src_off + e];
    } else if (p.op == 2u) {
        const uint base = p.src_off + i * p.k * p.w + c, wr = p.route_off + i * 2u * p.k + p.k;
        float v = src[base] * route[wr];
        for (uint j = 1u; j < p.k; ++j) v += src[base + j * p.w] * route[wr + j];
        dst[p.dst_off + e] = v;
    } else {
        const float g = src[p.src_off + i];
        dst[p.dst_off + e] *= g / (1.0 + exp(-g)) / g;
    }
}
