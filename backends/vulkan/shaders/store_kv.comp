// Writes count floats of k and v as F16 into the caches from element dst_off (a run of whole slots).
#version 450
#extension GL_EXT_shader_16bit_storage : require
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer K { float k[]; };
layout(std430, binding = 1) readonly buffer V { float v[]; };
layout(std430, binding = 2) writeonly buffer KC { float16_t kc[]; };
layout(std430, binding = 3) writeonly buffer VC { float16_t vc[]; };
layout(push_constant) uniform Params { uint count, src_off, dst_off; } p;

void main() {
    const uint i = gl_GlobalInvocationID.y * (gl_NumWorkGroups.x * 256u) + gl_GlobalInvocationID.x;
    if (i >= p.count) return;
    kc[p.dst_off + i] = float16_t(k[p.src_off + i]);
    vc[p.dst_off + i] = float16_t(v[p.src_off + i]);
}
