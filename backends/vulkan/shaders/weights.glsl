// Weight rows as the matrix shaders read them: binding 0 holds the matrix in its GGUF layout, and load_unit()
// dequantizes unit u of a row (values 32u .. 32u+31) into floats. A unit is one block of Q8_0/Q4_0, one
// 32-value group of a Q4_K/Q5_K/Q6_K super-block, or 32 consecutive F32/F16 values, so every type's row is cut at
// the same places and a thread's share of a row is the same whatever the batch.
// row_base: the row's first element (F32, F16) or byte (quantized) in binding 0.
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : require

#if defined(WEIGHT_F32)
layout(std430, binding = 0) readonly buffer Weights { float wdata[]; };
#elif defined(WEIGHT_F16)
layout(std430, binding = 0) readonly buffer Weights { float16_t wdata[]; };
#else
layout(std430, binding = 0) readonly buffer Weights { uint8_t wbytes[]; };
uint wbyte(uint i) { return uint(wbytes[i]); }
float whalf(uint i) { return unpackHalf2x16(wbyte(i) | (wbyte(i + 1u) << 8)).x; }
#endif

// n: values of the unit inside the row (32, or fewer at the end of an F32/F16 row whose width is not a multiple
// of 32; the quantized types' rows are whole blocks). Values past n are 0.
void load_unit(uint row_base, uint u, uint n, out float w[32]) {
#if defined(WEIGHT_F32) || defined(WEIGHT_F16)
    for (uint j = 0u; j < 32u; ++j) w[j] = j < n ? float(wdata[row_base + 32u * u + j]) : 0.0;
#elif defined(WEIGHT_Q8_0)
    // block: f16 d, 32 x int8
    const uint b = row_base + 34u * u;
    const float d = whalf(b);
    for (uint j = 0u; j < 32u; ++j) w[j] = d * float(int(wbyte(b + 2u + j) << 24) >> 24);
#elif defined(WEIGHT_Q4_0)
    // block: f16 d, 16 bytes; value j < 16 is the low nibble of byte j, value j >= 16 the high nibble of byte j - 16
    const uint b = row_base + 18u * u;
    const float d = whalf(b);
    for (uint j = 0u; j < 16u; ++j) {
        const uint q = wbyte(b + 2u + j);
        w[j] = d * float(int(q & 15u) - 8);
        w[j + 16u] = d * float(int(q >> 4) - 8);
    }
#elif defined(WEIGHT_Q4_K) || defined(WEIGHT_Q5_K)
    // super-block (Q4_K, 144 bytes): f16 d, f16 dmin, 12 bytes of six-bit scales/minimums, 128 bytes of nibbles.
    // Group g (0..7) of 32 values: 64-value pair g/2 uses bytes 32*(g/2) .. +31, low nibbles for even g.
    // Q5_K (176 bytes): 32 bytes of fifth bits before the nibbles, value l of group g taking bit g of byte l.
#if defined(WEIGHT_Q5_K)
    const uint b = row_base + 176u * (u / 8u), g = u % 8u, nibbles = 48u;
#else
    const uint b = row_base + 144u * (u / 8u), g = u % 8u, nibbles = 16u;
#endif
    const float d = whalf(b), dmin = whalf(b + 2u);
    const uint s = b + 4u;
    uint sc, m;
    if (g < 4u) {
        sc = wbyte(s + g) & 63u;
        m = wbyte(s + g + 4u) & 63u;
    } else {
        sc = (wbyte(s + g + 4u) & 15u) | ((wbyte(s + g - 4u) >> 6) << 4);
        m = (wbyte(s + g + 4u) >> 4) | ((wbyte(s + g) >> 6) << 4);
    }
    const float dl = d * float(sc), ml = dmin * float(m);
    const uint q = b + nibbles + 32u * (g / 2u);
    const uint shift = (g % 2u) * 4u;
#if defined(WEIGHT_Q5_K)
    for (uint j = 0u; j < 32u; ++j) w[j] = dl * float(((wbyte(q + j) >> shift) & 15u) | (((wbyte(b + 16u + j) >> g) & 1u) << 4)) - ml;
#else
    for (uint j = 0u; j < 32u; ++j) w[j] = dl * float((wbyte(q + j) >> shift) & 15u) - ml;
#endif
#elif defined(WEIGHT_Q6_K)
    // super-block (210 bytes): ql[128] low nibbles, qh[64] high bit pairs, int8 scales[16], f16 d.
    // Half h (0..1) of 128 values, quarter k (0..3) of 32 within it: value l of quarter k takes
    // ql[64h + l + 32(k&1)] (low nibble for k < 2, high for k >= 2) and bits 2k.. of qh[32h + l]; scale 8h + 2k + l/16.
    const uint b = row_base + 210u * (u / 8u), g = u % 8u;
    const uint h = g / 4u, k = g % 4u;
    const float d = whalf(b + 208u);
    for (uint l = 0u; l < 32u; ++l) {
        const uint lo = wbyte(b + 64u * h + l + 32u * (k & 1u));
        const uint nib = k < 2u ? (lo & 15u) : (lo >> 4);
        const uint hi = (wbyte(b + 128u + 32u * h + l) >> (2u * k)) & 3u;
        const int q = int(nib | (hi << 4)) - 32;
        const int sc = int(wbyte(b + 192u + 8u * h + 2u * k + l / 16u) << 24) >> 24;
        w[l] = d * float(sc) * float(q);
    }
#else
#error "define one WEIGHT_<type>"
#endif
}
