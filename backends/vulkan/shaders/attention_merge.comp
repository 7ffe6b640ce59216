// Merges each row's chunk partials (and, with has_tree, its tree partial) by log-sum-exp in chunk order:
// m = max m_c, l = sum l_c e^(m_c - m), out = sum o_c e^(m_c - m) / l. Workgroup (row, head), threads over dims.
// With a window (has_from), row i's chunks run from its window's first; partials count from min_from's chunk.
#version 450
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Partials { float part[]; };
layout(std430, binding = 1) readonly buffer Tree { float tree[]; };
layout(std430, binding = 2) readonly buffer Ints { int ints[]; };
layout(std430, binding = 3) writeonly buffer Out { float outv[]; };
layout(push_constant) uniform Params {
    uint n_prefix, n_head, head_dim, chunk, n_chunks, has_tail, tail_len_off, has_tree, out_off;
    uint causal, has_from, from_off, min_from;
} p;

#define kNegInf uintBitsToFloat(0xff800000u)

void main() {
    const uint i = gl_WorkGroupID.x, h = gl_WorkGroupID.y, hd = p.head_dim, stride = hd + 2u;
    const uint from_i = p.has_from != 0u ? uint(ints[p.from_off + i]) : 0u, c_lo = p.min_from / p.chunk;
    const uint base_i = p.has_tail != 0u && p.causal == 0u ? max(from_i, p.n_prefix) : p.n_prefix;
    const uint keys_i = p.has_tail != 0u ? base_i + uint(ints[p.tail_len_off + i]) : p.n_prefix;
    const uint c0 = from_i / p.chunk - c_lo, n_c = (keys_i + p.chunk - 1u) / p.chunk - c_lo;
    const uint base = (i * p.n_head + h) * p.n_chunks * stride;
    const uint t = (i * p.n_head + h) * stride;
    float m = p.has_tree != 0u ? tree[t] : kNegInf;
    for (uint c = c0; c < n_c; ++c) m = max(m, part[base + c * stride]);
    float l = 0.0;
    for (uint c = c0; c < n_c; ++c) {
        const float mc = part[base + c * stride];
        if (mc != kNegInf) l += part[base + c * stride + 1u] * exp(mc - m);
    }
    if (p.has_tree != 0u && tree[t] != kNegInf) l += tree[t + 1u] * exp(tree[t] - m);
    const float inv = l > 0.0 ? 1.0 / l : 0.0;
    for (uint d = gl_LocalInvocationID.x; d < hd; d += 64u) {
        float o = 0.0;
        for (uint c = c0; c < n_c; ++c) {
            const float mc = part[base + c * stride];
            if (mc != kNegInf) o += part[base + c * stride + 2u + d] * exp(mc - m);
        }
        if (p.has_tree != 0u && tree[t] != kNegInf) o += tree[t + 2u + d] * exp(tree[t] - m);
        outv[p.out_off + (i * p.n_head + h) * hd + d] = o * inv;
    }
}
