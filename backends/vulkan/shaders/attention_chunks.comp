// Split-K attention over each row's logical key list (as backends/cuda/kernels/attention.cu): chunk c covers
// logical keys [c * chunk, (c + 1) * chunk). One workgroup per (chunk, KV head) loads each sub-block of the chunk's
// prefix keys into shared memory once for every row and query head of the group (a tree's prefix is read once per
// round, not once per node), then runs each query's online softmax over it. Row i's logical key j is prefix slot
// j for j < n_prefix, else its tail entry j - n_prefix; a causal batch (causal = 1) has key p at slot p. The
// chunk and sub-block boundaries sit at fixed logical positions, so a row's arithmetic is the same whatever the
// batch. Writes per (row, head, chunk): the running max, the sum of exponentials and the unnormalised output.
// A sliding window (has_from = 1, gemma's local layers) starts row i at logical key from[i]: keys keep their
// logical positions (a tree row whose window starts past the prefix lists tail entries from position from[i] on),
// the chunks below the earliest window (min_from) are not dispatched, and partials are indexed from the first
// dispatched chunk. softcap > 0 caps the scores (gemma2): softcap * tanh(score / softcap).
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
} p;

shared float ks[2048];
shared float vs[2048];
shared float qs[256];
shared float ps[64];
shared float red[64];

#define kNegInf uintBitsToFloat(0xff800000u)

void main() {
    const uint c = gl_WorkGroupID.x, g = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
    const uint hd = p.head_dim, group = p.n_head / p.n_head_kv;
    const uint chunk_begin = (p.min_from / p.chunk + c) * p.chunk, chunk_end = min(chunk_begin + p.chunk, p.max_keys);
    const uint n_queries = p.n_rows * group, head_offset = g * hd;
    for (uint p0 = chunk_begin; p0 < chunk_end; p0 += p.sub) {
        const uint p1 = min(p0 + p.sub, chunk_end);
        const uint shared_keys = p.causal != 0u ? p1 - p0 : (min(p1, p.n_prefix) > p0 ? min(p1, p.n_prefix) - p0 : 0u);
        for (uint e = tid; e < shared_keys * hd; e += 64u) {
            const uint key = e / hd, d = e % hd, src = (p0 + key) * p.dkv + head_offset + d;
            ks[key * hd + d] = float(kc[src]);
            vs[key * hd + d] = float(vc[src]);
        }
        barrier();
        for (uint qi = 0u; qi < n_queries; ++qi) {
            const uint i = qi / group, h = g * group + qi % group;
            // Row i's keys: logical positions [from_i, keys_i), its tail entries from base_i on.
            const uint from_i = p.has_from != 0u ? uint(ints[p.from_off + i]) : 0u;
            const uint base_i = p.has_tail != 0u && p.causal == 0u ? max(from_i, p.n_prefix) : p.n_prefix;
            const uint keys_i = p.has_tail != 0u ? base_i + uint(ints[p.tail_len_off + i]) : p.n_prefix;
            if (p0 >= keys_i || p1 <= from_i) continue;  // the same for every thread
            const uint n_keys = min(p1, keys_i) - p0, lo = from_i > p0 ? from_i - p0 : 0u;
            const uint tail = p.has_tail != 0u && p.causal == 0u ? p.tail_slots_off + uint(ints[p.tail_start_off + i]) : 0u;
            for (uint d = tid; d < hd; d += 64u) qs[d] = q[p.q_off + (i * p.n_head + h) * hd + d];
            barrier();
            // Scores: thread j takes key j of the sub-block; each dot product runs d = 0 .. hd-1 in order.
            float score = kNegInf;
            const uint j = tid;
            const uint pj_slot = p0 + j;
            const bool in_shared = p.causal != 0u || pj_slot < p.n_prefix;
            if (j >= lo && j < n_keys) {
                float dot = 0.0;
                if (in_shared) {
                    for (uint d = 0u; d < hd; ++d) dot += qs[d] * ks[j * hd + d];
                } else {
                    const uint kr = uint(ints[tail + pj_slot - base_i]) * p.dkv + head_offset;
                    for (uint d = 0u; d < hd; ++d) dot += qs[d] * float(kc[kr + d]);
                }
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
            for (uint s = 32u; s > 0u; s >>= 1) {
                if (tid < s) red[tid] += red[tid + s];
                barrier();
            }
            const float sum = red[0];
            const float alpha = first ? 0.0 : exp(m_old - m_new);
            for (uint d = tid; d < hd; d += 64u) {
                float acc = 0.0;
                for (uint jj = lo; jj < n_keys; ++jj) {
                    const uint slot = p0 + jj;
                    float v;
                    if (p.causal != 0u || slot < p.n_prefix) v = vs[jj * hd + d];
                    else v = float(vc[uint(ints[tail + slot - base_i]) * p.dkv + head_offset + d]);
                    acc += ps[jj] * v;
                }
                part[base + 2u + d] = (first ? 0.0 : part[base + 2u + d] * alpha) + acc;
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
