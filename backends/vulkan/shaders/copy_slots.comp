// Commits a tree path in one layer: for i = 0 .. n-1 in order, slot moves[2i] -> slot moves[2i+1] (K and V). Each
// thread moves the same elements of every slot, so the order of the moves holds without barriers.
#version 450
#extension GL_EXT_shader_16bit_storage : require
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer KC { float16_t kc[]; };
layout(std430, binding = 1) buffer VC { float16_t vc[]; };
layout(std430, binding = 2) readonly buffer Moves { int moves[]; };
layout(push_constant) uniform Params { uint n, dkv, moves_off; } p;

void main() {
    for (uint e = gl_LocalInvocationID.x; e < p.dkv; e += 256u) {
        for (uint i = 0u; i < p.n; ++i) {
            const uint from = uint(moves[p.moves_off + 2u * i]) * p.dkv + e, to = uint(moves[p.moves_off + 2u * i + 1u]) * p.dkv + e;
            kc[to] = kc[from];
            vc[to] = vc[from];
        }
    }
}
