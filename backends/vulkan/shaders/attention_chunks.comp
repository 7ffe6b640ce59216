// Split-K attention over each row's logical key list (as backends/cuda/kernels/attention.cu): chunk c covers
// logical keys [c * chunk, (c + 1) * chunk). One workgroup per (chunk, KV head, block of rows) loads each sub-block
// of the chunk's prefix keys into shared memory once for every row of the block and query head of the group (a
// tree's prefix is read once per block of nodes, not once per node), then runs each query's online softmax over it.
// Row i's logical key j is prefix slot j for j < n_prefix, else its tail entry j - n_prefix; a causal batch
// (causal = 1) has key p at slot p. The
// chunk and sub-block boundaries sit at fixed logical positions, so a row's arithmetic is the same whatever the
// batch. Writes per (row, head, chunk): the running max, the sum of exponentials and the unnormalised output.
// A sliding window (has_from = 1, gemma's local layers) starts row i at logical key from[i]: keys keep their
// logical positions (a tree row whose window starts past the prefix lists tail entries from position from[i] on),
// the chunks below the earliest window (min_from) are not dispatched, and partials are indexed from the first
// dispatched chunk. softcap > 0 caps the scores (gemma2): softcap * tanh(score / softcap).
// Workgroup z takes rows [z * rows_per_group, ...): a workgroup's loops stay within the iteration budget that
// vulkan_ops.cpp computes (llvmpipe ends every loop of an invocation past 65535 iterations in all, silently), and
// the loops whose trip count the shader compiler cannot see are few: dot products four dimensions at a time (vec4
// in shared memory, head_dim % 4 == 0), constant-count reductions and output dimensions (unrolled). A key's score
// is one expression whether its K comes from shared memory or from the cache (a tail key), so a key read either
// way gives the same bits.
#version 450
#extension GL_EXT_shader_16bit_storage : require
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Q { float q[]; };
layout(std430, binding = 1) readonly buffer KC { float16_t kc[]; };
layout(std430, binding = 2) readonly buffer VC { float16_t vc[]; };
layout(std430, binding = 3) readonly buffer Ints { int ints[]; };
layout(std430, binding = 4) buffer Partials { float part[]; };
layout(push_constant) uniform Params {
    uint n_rows, n_prefix, max_keys, n_head, n_head_kv, head_dim, chunk, n_chunks, sub;
    uint causal, has_tail, tail_start_off, tail_len_off, tail_slots_off, q_off, dkv;
    float scale;
    uint has_from, from_off, min_from;
    float softcap;
    uint rows_per_group;
} p;

shared vec4 ks[512];   // sub keys x head_dim / 4
shared float vs[2048]; // sub keys x head_dim
shared vec4 qs[64];    // head_dim / 4
shared float ps[64];
shared float red[64];

#define kNegInf uintBitsToFloat(0xff800000u)

vec4 cache_vec4(uint at) { return vec4(float(kc[at]), float(kc[at + 1u]), float(kc[at + 2u]), float(kc[at + 3u])); }

void main() {
    const uint c = gl_WorkGroupID.x, g = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
    const uint hd = p.head_dim, hd4 = hd / 4u, group = p.n_head / p.n_head_kv;
    const uint chunk_begin = (p.min_from / p.chunk + c) * p.chunk, chunk_end = min(chunk_begin + p.chunk, p.max_keys);
    const uint row_lo = gl_WorkGroupID.z * p.rows_per_group, row_hi = min(p.n_rows, row_lo + p.rows_per_group);
    const uint head_offset = g * hd;
    for (uint p0 = chunk_begin; p0 < chunk_end; p0 += p.sub) {
        const uint p1 = min(p0 + p.sub, chunk_end);
        const uint shared_keys = p.causal != 0u ? p1 - p0 : (min(p1, p.n_prefix) > p0 ? min(p1, p.n_prefix) - p0 : 0u);
        for (uint e = tid; e < shared_keys * hd4; e += 64u) {
            const uint key = e / hd4, d4 = e % hd4, src = (p0 + key) * p.dkv + head_offset + 4u * d4;
            ks[e] = cache_vec4(src);
            vs[4u * e] = float(vc[src]);
            vs[4u * e + 1u] = float(vc[src + 1u]);
            vs[4u * e + 2u] = float(vc[src + 2u]);
            vs[4u * e + 3u] = float(vc[src + 3u]);
        }
        barrier();
        for (uint qi = row_lo * group; qi < row_hi * group; ++qi) {
            const uint i = qi / group, h = g * group + qi % group;
            // Row i's keys: logical positions [from_i, keys_i), its tail entries from base_i on.
            const uint from_i = p.has_from != 0u ? uint(ints[p.from_off + i]) : 0u;
            const uint base_i = p.has_tail != 0u && p.causal == 0u ? max(from_i, p.n_prefix) : p.n_prefix;
            const uint keys_i = p.has_tail != 0u ? base_i + uint(ints[p.tail_len_off + i]) : p.n_prefix;
            if (p0 >= keys_i || p1 <= from_i) continue;  // the same for every thread
            const uint n_keys = min(p1, keys_i) - p0, lo = from_i > p0 ? from_i - p0 : 0u;
            const uint tail = p.has_tail != 0u && p.causal == 0u ? p.tail_slots_off + uint(ints[p.tail_start_off + i]) : 0u;
            if (tid < hd4) {
                const uint at = p.q_off + (i * p.n_head + h) * hd + 4u * tid;
                qs[tid] = vec4(q[at], q[at + 1u], q[at + 2u], q[at + 3u]);
            }
            barrier();
            // Scores: thread j takes key j of the sub-block; each dot product runs over the dimensions in order.
            float score = kNegInf;
            const uint j = tid;
            const uint pj_slot = p0 + j;
            if (j >= lo && j < n_keys) {
                const bool in_shared = p.causal != 0u || pj_slot < p.n_prefix;
                uint kr = 0u;
                if (!in_shared) kr = uint(ints[tail + pj_slot - base_i]) * p.dkv + head_offset;
                float dot = 0.0;
                for (uint d4 = 0u; d4 < hd4; ++d4) {
                    vec4 k;
                    if (in_shared) k = ks[j * hd4 + d4];
                    else k = cache_vec4(kr + 4u * d4);
                    const vec4 qv = qs[d4];
                    dot = dot + qv.x * k.x + qv.y * k.y + qv.z * k.z + qv.w * k.w;
                }
                score = dot * p.scale;
                if (p.softcap > 0.0) score = tanh(clamp(score * (1.0 / p.softcap), -10.0, 10.0)) * p.softcap;
            }
            red[tid] = score;
            barrier();
            for (uint r = 0u; r < 6u; ++r) {
                const uint s = 32u >> r;
                if (tid < s) red[tid] = max(red[tid], red[tid + s]);
                barrier();
            }
            const float m_blk = red[0];
            const uint base = ((i * p.n_head + h) * p.n_chunks + c) * (hd + 2u);
            // The row's first sub-block with keys in this chunk starts its partial.
            const bool first = p0 == chunk_begin + (max(chunk_begin, from_i) - chunk_begin) / p.sub * p.sub;
            const float m_old = first ? kNegInf : part[base];
            const float l_old = first ? 0.0 : part[base + 1u];
            const float m_new = max(m_old, m_blk);
            const float pj = j >= lo && j < n_keys ? exp(score - m_new) : 0.0;
            barrier();
            ps[tid] = pj;
            red[tid] = pj;
            barrier();
            for (uint r = 0u; r < 6u; ++r) {
                const uint s = 32u >> r;
                if (tid < s) red[tid] += red[tid + s];
                barrier();
            }
            const float sum = red[0];
            const float alpha = first ? 0.0 : exp(m_old - m_new);
            // Thread tid owns dimensions tid, tid + 64, ... (head_dim <= 256).
            float acc[4] = float[4](0.0, 0.0, 0.0, 0.0);
            for (uint jj = lo; jj < n_keys; ++jj) {
                const uint slot = p0 + jj;
                const bool shared_v = p.causal != 0u || slot < p.n_prefix;
                uint vr = 0u;
                if (!shared_v) vr = uint(ints[tail + slot - base_i]) * p.dkv + head_offset;
                for (uint k = 0u; k < 4u; ++k) {
                    const uint d = tid + 64u * k;
                    if (d >= hd) break;
                    float v;
                    if (shared_v) v = vs[jj * hd + d];
                    else v = float(vc[vr + d]);
                    acc[k] += ps[jj] * v;
                }
            }
            for (uint k = 0u; k < 4u; ++k) {
                const uint d = tid + 64u * k;
                if (d < hd) part[base + 2u + d] = (first ? 0.0 : part[base + 2u + d] * alpha) + acc[k];
            }
            memoryBarrierBuffer();
            barrier();
            if (tid == 0u) {
                part[base] = m_new;
                part[base + 1u] = l_old * alpha + sum;
            }
            memoryBarrierBuffer();
            barrier();
        }
        barrier();
    }
}
