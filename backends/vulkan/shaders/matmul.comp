// Y[t][r] = sum_k W[r][k] * X[t][k] for the n rows t of X: a workgroup of 64 threads computes 16 output rows, 4
// threads per row. Thread i of a row takes the units i, i + 4, ... of the row (weights.glsl) and keeps one running
// sum per token of a tile of 8; the 4 sums of a token are added by a fixed tree. A token's result therefore never
// depends on how many tokens share the dispatch or where it sits in the batch (batch invariance: a tree node's
// logits equal decoding its path). The weight row is read once per tile of 8 tokens: decoding is one pass over the
// matrix. (16 rows per workgroup: one workgroup per row made the vocabulary-sized LM head 32000+ workgroups.)
#version 450
#include "weights.glsl"

layout(local_size_x = 64) in;
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };
layout(push_constant) uniform Params {
    uint rows, cols, n;
    uint row_stride;  // elements (F32, F16) or bytes (quantized) between rows of W
    uint w_off;       // first element / byte of W
    uint x_off, x_stride, y_off, y_stride;  // in floats
} p;

const uint kTile = 8u;
const uint kLanes = 4u;          // threads per row
const uint kRows = 64u / kLanes; // rows per workgroup
shared float red[kTile][64];

void main() {
    const uint tid = gl_LocalInvocationID.x, lane = tid % kLanes;
    const uint r_raw = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * kRows + tid / kLanes;
    const bool live = r_raw < p.rows;  // threads past the last row compute row 0 and store nothing (barriers need all)
    const uint r = live ? r_raw : 0u;
    const uint units = (p.cols + 31u) / 32u;
    const uint row_base = p.w_off + r * p.row_stride;
    for (uint t0 = 0u; t0 < p.n; t0 += kTile) {
        const uint nt = min(kTile, p.n - t0);
        float acc[kTile];
        for (uint t = 0u; t < kTile; ++t) acc[t] = 0.0;
        for (uint u = lane; u < units; u += kLanes) {
            const uint len = min(32u, p.cols - 32u * u);
            float w[32];
            load_unit(row_base, u, len, w);
            for (uint t = 0u; t < nt; ++t) {
                const uint xb = p.x_off + (t0 + t) * p.x_stride + 32u * u;
                float s = 0.0;
                for (uint j = 0u; j < len; ++j) s += w[j] * x[xb + j];
                acc[t] += s;
            }
        }
        for (uint t = 0u; t < kTile; ++t) red[t][tid] = acc[t];
        barrier();
        for (uint s = kLanes / 2u; s > 0u; s >>= 1) {
            if (lane < s)
                for (uint t = 0u; t < kTile; ++t) red[t][tid] += red[t][tid + s];
            barrier();
        }
        if (live && lane == 0u)
            for (uint t = 0u; t < nt; ++t) y[p.y_off + (t0 + t) * p.y_stride + r] = red[t][tid];
        barrier();
    }
}
