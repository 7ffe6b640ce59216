// LongSpec's masked tree attention (hybrid mode): row i over the tree slots first_slot + j (j < n_tree) whose mask
// entry is set, 64 keys at a time, as one more partial (max, sum, unnormalised output) per (row, head).
// Workgroup (row, head).
#version 450
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : require
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Q { float q[]; };
layout(std430, binding = 1) readonly buffer KC { float16_t kc[]; };
layout(std430, binding = 2) readonly buffer VC { float16_t vc[]; };
layout(std430, binding = 3) readonly buffer Mask { uint8_t mask[]; };
layout(std430, binding = 4) writeonly buffer Out { float outp[]; };
layout(push_constant) uniform Params { uint n_head, n_head_kv, head_dim, first_slot, n_tree, dkv, q_off; float scale, softcap; } p;

shared float qs[256];
shared float ps[64];
shared float red[64];
#define kNegInf uintBitsToFloat(0xff800000u)

void main() {
    const uint i = gl_WorkGroupID.x, h = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x, hd = p.head_dim;
    const uint head_offset = (h / (p.n_head / p.n_head_kv)) * hd;
    for (uint d = tid; d < hd; d += 64u) qs[d] = q[p.q_off + (i * p.n_head + h) * hd + d];
    barrier();
    float m = kNegInf, l = 0.0;
    float o[4] = float[4](0.0, 0.0, 0.0, 0.0);  // dims tid, tid + 64, ... (head_dim <= 256)
    for (uint j0 = 0u; j0 < p.n_tree; j0 += 64u) {
        const uint j = j0 + tid;
        const bool visible = j < p.n_tree && uint(mask[i * p.n_tree + j]) != 0u;
        float score = kNegInf;
        if (visible) {
            const uint kr = (p.first_slot + j) * p.dkv + head_offset;
            float dot = 0.0;
            for (uint d = 0u; d < hd; ++d) dot += qs[d] * float(kc[kr + d]);
            score = dot * p.scale;
            if (p.softcap > 0.0) score = tanh(clamp(score * (1.0 / p.softcap), -10.0, 10.0)) * p.softcap;
        }
        red[tid] = score;
        barrier();
        for (uint s = 32u; s > 0u; s >>= 1) {
            if (tid < s) red[tid] = max(red[tid], red[tid + s]);
            barrier();
        }
        const float m_blk = red[0];
        barrier();
        if (m_blk == kNegInf) continue;  // nothing visible in these 64 slots (the same for every thread)
        const float m_new = max(m, m_blk);
        const float pj = visible ? exp(score - m_new) : 0.0;
        ps[tid] = pj;
        red[tid] = pj;
        barrier();
        for (uint s = 32u; s > 0u; s >>= 1) {
            if (tid < s) red[tid] += red[tid + s];
            barrier();
        }
        const float sum = red[0];
        const float alpha = m == kNegInf ? 0.0 : exp(m - m_new);
        const uint n_keys = min(64u, p.n_tree - j0);
        for (uint k = 0u; k < 4u; ++k) {
            const uint d = tid + 64u * k;
            if (d >= hd) break;
            float acc = 0.0;
            for (uint jj = 0u; jj < n_keys; ++jj)
                if (ps[jj] != 0.0) acc += ps[jj] * float(vc[(p.first_slot + j0 + jj) * p.dkv + head_offset + d]);
            o[k] = o[k] * alpha + acc;
        }
        l = l * alpha + sum;
        m = m_new;
        barrier();
    }
    const uint base = (i * p.n_head + h) * (hd + 2u);
    for (uint k = 0u; k < 4u; ++k)
        if (tid + 64u * k < hd) outp[base + 2u + tid + 64u * k] = o[k];
    if (tid == 0u) {
        outp[base] = m;
        outp[base + 1u] = l;
    }
}
