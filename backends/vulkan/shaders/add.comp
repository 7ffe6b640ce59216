// x[i] += y[i] (op 0), x[i] += y[i % d] (op 1: a bias), x[i] = silu(x[i]) * y[i] (op 2: SwiGLU), for count values.
#version 450
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Y { float y[]; };
layout(push_constant) uniform Params { uint count, op, d, x_off, y_off; } p;

void main() {
    const uint i = gl_GlobalInvocationID.y * (gl_NumWorkGroups.x * 256u) + gl_GlobalInvocationID.x;
    if (i >= p.count) return;
    const uint xi = p.x_off + i;
    if (p.op == 0u) {
        x[xi] += y[p.y_off + i];
    } else if (p.op == 1u) {
        x[xi] += y[p.y_off + i % p.d];
    } else {
        const float g = x[xi];
        x[xi] = g / (1.0 + exp(-g)) * y[p.y_off + i];
    }
}
