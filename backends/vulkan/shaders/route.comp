// route[r] = the k largest of softmax(logits[r]) as k expert indices (floats) then their k probabilities, divided by
// their sum when norm (graph.h's route): one invocation per row (n_expert <= 256, k <= n_expert). The softmax sums in
// float (the CPU sums in double: a difference of rounding, held by the backends' tolerance); ties: the lower index.
#version 450
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { float logits[]; };
layout(std430, binding = 1) writeonly buffer R { float route[]; };
layout(push_constant) uniform Params { uint n, n_expert, k, norm, x_off, r_off; } p;

void main() {
    const uint r = gl_GlobalInvocationID.x;
    if (r >= p.n) return;
    const uint x0 = p.x_off + r * p.n_expert, o = p.r_off + r * 2u * p.k;
    float mx = logits[x0];
    for (uint i = 1u; i < p.n_expert; ++i) mx = max(mx, logits[x0 + i]);
    float sum = 0.0;
    for (uint i = 0u; i < p.n_expert; ++i) sum += exp(logits[x0 + i] - mx);
    const float inv = 1.0 / sum;
    uint taken[8] = uint[8](0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u);
    float chosen[256];
    float total = 0.0;
    for (uint j = 0u; j < p.k; ++j) {
        uint best = 0xFFFFFFFFu;
        float best_p = 0.0;
        for (uint i = 0u; i < p.n_expert; ++i) {
            if ((taken[i / 32u] & (1u << (i % 32u))) != 0u) continue;
            const float q = exp(logits[x0 + i] - mx) * inv;
            if (best == 0xFFFFFFFFu || q > best_p) {
                best = i;
                best_p = q;
            }
        }
        taken[best / 32u] |= 1u << (best % 32u);
        route[o + j] = float(best);
        chosen[j] = best_p;
        total += best_p;
    }
    for (uint j = 0u; j < p.k; ++j) route[o + p.k + j] = p.norm != 0u ? chosen[j] / total : chosen[j];
}
