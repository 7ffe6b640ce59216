// Rotates the first rope_dim values of each head of row t by the angles of positions[t] (tables computed on the
// host by model/rope.h, as the CPU does). neox: pairs (i, i + rope_dim/2), else (2i, 2i + 1). Workgroup (t, head).
#version 450
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Pos { int positions[]; };
layout(std430, binding = 2) readonly buffer Cos { float cos_t[]; };
layout(std430, binding = 3) readonly buffer Sin { float sin_t[]; };
layout(push_constant) uniform Params { uint n_heads, head_dim, rope_dim, neox, x_off, pos_off; } p;

void main() {
    const uint t = gl_WorkGroupID.x, h = gl_WorkGroupID.y, half_dim = p.rope_dim / 2u;
    const uint v = p.x_off + (t * p.n_heads + h) * p.head_dim;
    const uint table = uint(positions[p.pos_off + t]) * half_dim;
    for (uint i = gl_LocalInvocationID.x; i < half_dim; i += 64u) {
        const uint a = p.neox != 0u ? i : 2u * i, b = p.neox != 0u ? i + half_dim : 2u * i + 1u;
        const float c = cos_t[table + i], s = sin_t[table + i];
        const float x0 = x[v + a], x1 = x[v + b];
        x[v + a] = x0 * c - x1 * s;
        x[v + b] = x0 * s + x1 * c;
    }
}
