// x[i] += y[i] (op 0), x[i] += y[i % d] (op 1: a bias), x[i] = silu(x[i]) * y[i] (op 2: SwiGLU),
// x[i] = gelu(x[i]) * y[i] (op 3: GeGLU, ggml's tanh approximation), x[i] *= value (op 4),
// x[i] = value * tanh(x[i] / value) (op 5: soft-capping), x[i] = gelu(x[i]) (op 6, with the CPU's F16 roundings),
// for count values (the CPU's formulas, backends/cpu/ops.cpp).
// tanh's argument is clamped to +-10 (where tanh is 1 in float): some drivers' tanh overflows to NaN beyond ~44.
#version 450
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Y { float y[]; };
layout(push_constant) uniform Params { uint count, op, d, x_off, y_off; float value; } p;

void main() {
    const uint i = gl_GlobalInvocationID.y * (gl_NumWorkGroups.x * 256u) + gl_GlobalInvocationID.x;
    if (i >= p.count) return;
    const uint xi = p.x_off + i;
    if (p.op == 0u) {
        x[xi] += y[p.y_off + i];
    } else if (p.op == 1u) {
        x[xi] += y[p.y_off + i % p.d];
    } else if (p.op == 2u) {
        const float g = x[xi];
        x[xi] = g / (1.0 + exp(-g)) * y[p.y_off + i];
    } else if (p.op == 3u) {
        const float g = x[xi];
        x[xi] = 0.5 * g * (1.0 + tanh(clamp(0.79788456080286535587989211986876 * g * (1.0 + 0.044715 * g * g), -10.0, 10.0))) * y[p.y_off + i];
    } else if (p.op == 4u) {
        x[xi] *= p.value;
    } else if (p.op == 6u) {  // the CPU's GELU: x and the result rounded to F16 between -10 and 10
        const float v = x[xi];
        if (v <= -10.0) {
            x[xi] = 0.0;
        } else if (v < 10.0) {
            const float g = unpackHalf2x16(packHalf2x16(vec2(v, 0.0))).x;
            const float r = 0.5 * g * (1.0 + tanh(clamp(0.79788456080286535587989211986876 * g * (1.0 + 0.044715 * g * g), -10.0, 10.0)));
            x[xi] = unpackHalf2x16(packHalf2x16(vec2(r, 0.0))).x;
        }
    } else {
        x[xi] = tanh(clamp(x[xi] * (1.0 / p.value), -10.0, 10.0)) * p.value;
    }
}
