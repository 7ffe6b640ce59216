// out[t] = (x[t] - mean) / sqrt(var + eps) * weight (the CPU's LayerNorm: deviations as floats, scaled, times the
// weight; sums in float here, by a fixed tree): one workgroup of 256 per row.
#version 450
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer W { float weight[]; };
layout(std430, binding = 2) writeonly buffer Out { float outv[]; };
layout(push_constant) uniform Params { uint d; float eps; uint x_off, w_off, out_off; } p;

shared float partial[256];

float row_sum(float v, uint tid) {
    partial[tid] = v;
    barrier();
    for (uint s = 128u; s > 0u; s >>= 1) {
        if (tid < s) partial[tid] += partial[tid + s];
        barrier();
    }
    const float total = partial[0];
    barrier();
    return total;
}

void main() {
    const uint t = gl_WorkGroupID.x, tid = gl_LocalInvocationID.x;
    const uint row = p.x_off + t * p.d;
    float sum = 0.0;
    for (uint i = tid; i < p.d; i += 256u) sum += x[row + i];
    const float mean = row_sum(sum, tid) / float(p.d);
    float sum2 = 0.0;
    for (uint i = tid; i < p.d; i += 256u) {
        const float v = x[row + i] - mean;
        sum2 += v * v;
    }
    const float scale = 1.0 / sqrt(row_sum(sum2, tid) / float(p.d) + p.eps);
    for (uint i = tid; i < p.d; i += 256u) outv[p.out_off + t * p.d + i] = ((x[row + i] - mean) * scale) * weight[p.w_off + i];
}
