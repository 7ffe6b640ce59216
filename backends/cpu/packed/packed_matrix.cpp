#include "packed_matrix.h"

#include "formats/k_quants.h"
#include "formats/q4_0.h"
#include "formats/q8_0.h"
#include "core/error.h"
#include "gguf/tensor_type.h"

#include <cstring>
#include <sys/mman.h>

namespace specula::internal {
namespace {

size_t round64(size_t n) { return (n + 63) & ~size_t(63); }

// Where lane `lane`'s four bytes of interleaved vector `vec` start.
size_t lane_offset(size_t vec, int lane) { return vec * 64 + size_t(lane) * 4; }

// Region sizes per group, in bytes, for `blocks` blocks per row; fills view.region and view.group_bytes.
void layout(PackedView &v, std::initializer_list<size_t> region_bytes) {
    size_t offset = 0;
    int i = 0;
    for (size_t bytes : region_bytes) {
        v.region[i++] = offset;
        offset += round64(bytes);
    }
    v.group_bytes = offset;
}

// Q8_0: region 0 the 16 rows' fp16 scales per block; region 1 per block eight vectors of 16 x 4 weights, each
// stored as w + 128 (an unsigned byte, the operand VPDPBUSD multiplies unsigned).
void pack_q8_0(const WeightView &w, PackedView &v, uint8_t *dst) {
    const int64_t kb = w.cols / kQ8_0Block;
    for (int64_t g = 0; g < v.n_groups; ++g) {
        uint8_t *grp = dst + size_t(g) * v.group_bytes;
        uint16_t *d = reinterpret_cast<uint16_t *>(grp + v.region[0]);
        uint8_t *qs = grp + v.region[1];
        std::memset(qs, 0x80, size_t(kb) * 512);  // padding rows: weight 0
        for (int lane = 0; lane < kPackRows && g * kPackRows + lane < w.rows; ++lane) {
            const BlockQ8_0 *row = reinterpret_cast<const BlockQ8_0 *>(w.row(g * kPackRows + lane));
            for (int64_t k = 0; k < kb; ++k) {
                d[k * kPackRows + lane] = row[k].d;
                for (int q = 0; q < 8; ++q)
                    for (int b = 0; b < 4; ++b)
                        qs[lane_offset(size_t(k) * 8 + q, lane) + b] = uint8_t(row[k].qs[4 * q + b]) ^ 0x80;
            }
        }
    }
}

// Q4_0: region 0 the fp16 scales; region 1 per block four vectors of 16 x 4 bytes, byte b of vector q being the
// block's byte 4q + b unchanged (low nibble: weight 4q + b, high nibble: weight 16 + 4q + b).
void pack_q4_0(const WeightView &w, PackedView &v, uint8_t *dst) {
    const int64_t kb = w.cols / kQ4_0Block;
    for (int64_t g = 0; g < v.n_groups; ++g) {
        uint8_t *grp = dst + size_t(g) * v.group_bytes;
        uint16_t *d = reinterpret_cast<uint16_t *>(grp + v.region[0]);
        uint8_t *qs = grp + v.region[1];
        for (int lane = 0; lane < kPackRows && g * kPackRows + lane < w.rows; ++lane) {
            const BlockQ4_0 *row = reinterpret_cast<const BlockQ4_0 *>(w.row(g * kPackRows + lane));
            for (int64_t k = 0; k < kb; ++k) {
                d[k * kPackRows + lane] = row[k].d;
                for (int q = 0; q < 4; ++q) std::memcpy(qs + lane_offset(size_t(k) * 4 + q, lane), row[k].qs + 4 * q, 4);
            }
        }
    }
}

// Q4_K: per super-block (packed_gemm.h: kQ4K*) d, dmin, scales, minimum pairs, then for each pair p of sub-blocks
// eight vectors, byte b of vector q being the block's qs[32p + 4q + b] (low nibble: weight 64p + 4q + b of
// sub-block 2p; high nibble: weight 64p + 32 + 4q + b of sub-block 2p + 1). Q5_K (Block = BlockQ5_K): the same,
// then the fifth bits of its two nibbles' weights, qh[4q + b] bits 2p and 2p + 1, in bits 2j and 2j + 1 of high
// vector v for quant vector 4v + j (packed_gemm.h).
template <class Block> void pack_q45_k(const WeightView &w, PackedView &v, uint8_t *dst) {
    constexpr bool kFive = sizeof(Block) == sizeof(BlockQ5_K);
    const int64_t nsb = w.cols / QK_K;
    for (int64_t g = 0; g < v.n_groups; ++g) {
        uint8_t *grp = dst + size_t(g) * v.group_bytes;
        for (int lane = 0; lane < kPackRows && g * kPackRows + lane < w.rows; ++lane) {
            const Block *row = reinterpret_cast<const Block *>(w.row(g * kPackRows + lane));
            for (int64_t s = 0; s < nsb; ++s) {
                uint8_t *sb = grp + size_t(s) * (kFive ? kQ5KSuperBytes : kQ4KSuperBytes);
                reinterpret_cast<uint16_t *>(sb)[lane] = row[s].d;
                reinterpret_cast<uint16_t *>(sb + kQ4KDmin)[lane] = row[s].dmin;
                for (int j = 0; j < 8; ++j) {
                    int32_t sc = 0, mn = 0;
                    scale_min_k4(j, row[s].scales, sc, mn);
                    sb[kQ4KScales + size_t(j) * kPackRows + size_t(lane)] = uint8_t(sc);
                    sb[kQ4KMins + size_t(j / 2) * 32 + size_t(lane) * 2 + size_t(j % 2)] = uint8_t(mn);
                }
                for (int p = 0; p < 4; ++p)
                    for (int q = 0; q < 8; ++q) {
                        std::memcpy(sb + kQ4KQuants + lane_offset(size_t(p * 8 + q), lane), row[s].qs + 32 * p + 4 * q, 4);
                        if constexpr (kFive)
                            for (int b = 0; b < 4; ++b) {
                                const uint8_t h = row[s].qh[4 * q + b];
                                const int vec = p * 8 + q;  // its fifth bits: bits 2 (vec % 4) and 2 (vec % 4) + 1 of high vector vec / 4
                                sb[kQ5KHigh + lane_offset(size_t(vec / 4), lane) + size_t(b)] |=
                                    uint8_t((((h >> (2 * p)) & 1) | (((h >> (2 * p + 1)) & 1) << 1)) << (2 * (vec % 4)));
                            }
                    }
            }
        }
    }
}

// Q6_K: region d (fp16), the sixteen signed sub-block scales ([sub][lane]), then per 16-weight sub-block three
// vectors: low nibbles (weights 0-3 | 4-7 << 4), low nibbles (8-11 | 12-15 << 4), and the high two bits of all
// sixteen (bits 0-1: weights 0-3, 2-3: 4-7, 4-5: 8-11, 6-7: 12-15), each as stored (0..63, offset 32).
void pack_q6_k(const WeightView &w, PackedView &v, uint8_t *dst) {
    const int64_t nsb = w.cols / QK_K;
    KBlockInts u;
    for (int64_t g = 0; g < v.n_groups; ++g) {
        uint8_t *grp = dst + size_t(g) * v.group_bytes;
        uint16_t *d = reinterpret_cast<uint16_t *>(grp + v.region[0]);
        int8_t *scales = reinterpret_cast<int8_t *>(grp + v.region[1]);
        uint8_t *q = grp + v.region[2];
        for (int lane = 0; lane < kPackRows && g * kPackRows + lane < w.rows; ++lane) {
            const BlockQ6_K *row = reinterpret_cast<const BlockQ6_K *>(w.row(g * kPackRows + lane));
            for (int64_t s = 0; s < nsb; ++s) {
                unpack(row[s], u);
                d[s * kPackRows + lane] = row[s].d;
                for (int sub = 0; sub < 16; ++sub) {
                    scales[(s * 16 + sub) * kPackRows + lane] = int8_t(u.scale[sub]);
                    auto raw = [&](int i) { return uint8_t(u.q[16 * sub + i] + 32); };
                    const size_t vec = size_t(s * 16 + sub) * 3;
                    for (int b = 0; b < 4; ++b) {
                        q[lane_offset(vec, lane) + b] = uint8_t((raw(b) & 0xF) | ((raw(4 + b) & 0xF) << 4));
                        q[lane_offset(vec + 1, lane) + b] = uint8_t((raw(8 + b) & 0xF) | ((raw(12 + b) & 0xF) << 4));
                        q[lane_offset(vec + 2, lane) + b] =
                            uint8_t((raw(b) >> 4) | ((raw(4 + b) >> 4) << 2) | ((raw(8 + b) >> 4) << 4) | ((raw(12 + b) >> 4) << 6));
                    }
                }
            }
        }
    }
}

// F32, F16, BF16: region 0 the values transposed per group, [col][16 rows], element size `bytes`.
void pack_float(const WeightView &w, PackedView &v, uint8_t *dst, size_t bytes) {
    for (int64_t g = 0; g < v.n_groups; ++g) {
        uint8_t *grp = dst + size_t(g) * v.group_bytes + v.region[0];
        for (int lane = 0; lane < kPackRows && g * kPackRows + lane < w.rows; ++lane) {
            const uint8_t *row = w.row(g * kPackRows + lane);
            for (int64_t c = 0; c < w.cols; ++c) std::memcpy(grp + (size_t(c) * kPackRows + size_t(lane)) * bytes, row + size_t(c) * bytes, bytes);
        }
    }
}

}  // namespace

void q8_0_block_sums(const uint8_t *xq, int64_t cols, int32_t *sums) {
    const BlockQ8_0 *blocks = reinterpret_cast<const BlockQ8_0 *>(xq);
    for (int64_t k = 0; k < cols / kQ8_0Block; ++k) {
        int32_t s = 0;
        for (int i = 0; i < kQ8_0Block; ++i) s += blocks[k].qs[i];
        sums[k] = s;
    }
}

bool PackedMatrix::packable(uint32_t type) {
    return type == uint32_t(TensorType::Q8_0) || type == uint32_t(TensorType::Q4_0) || type == uint32_t(TensorType::Q4_K) || type == uint32_t(TensorType::Q5_K) || type == uint32_t(TensorType::Q6_K) || type == uint32_t(TensorType::F32) || type == uint32_t(TensorType::F16) ||
           type == uint32_t(TensorType::BF16);
}

std::unique_ptr<PackedMatrix> PackedMatrix::pack(const WeightView &w) {
    require(packable(w.type), SPECULA_ERR_INTERNAL, "packed matrix: unsupported type");
    std::unique_ptr<PackedMatrix> m(new PackedMatrix());
    PackedView &v = m->view_;
    v.type = w.type;
    v.rows = w.rows;
    v.cols = w.cols;
    v.n_groups = (w.rows + kPackRows - 1) / kPackRows;
    const size_t kb32 = size_t(w.cols / 32), nsb = size_t(w.cols / QK_K);
    switch (w.type) {
    case uint32_t(TensorType::Q8_0): layout(v, {kb32 * 2 * kPackRows, kb32 * 512}); break;
    case uint32_t(TensorType::Q4_0): layout(v, {kb32 * 2 * kPackRows, kb32 * 256}); break;
    case uint32_t(TensorType::Q4_K): layout(v, {nsb * kQ4KSuperBytes}); break;
    case uint32_t(TensorType::Q5_K): layout(v, {nsb * kQ5KSuperBytes}); break;
    case uint32_t(TensorType::Q6_K): layout(v, {nsb * 32, nsb * 256, nsb * 16 * 192}); break;
    case uint32_t(TensorType::F32): layout(v, {size_t(w.cols) * kPackRows * 4}); break;
    case uint32_t(TensorType::F16):
    case uint32_t(TensorType::BF16): layout(v, {size_t(w.cols) * kPackRows * 2}); break;
    }
    // Large matrices go on 2 MiB-aligned memory the kernel may back with huge pages: decoding streams every
    // weight once per token, and with 4 KiB pages that is a TLB miss every 4 KiB.
    const size_t kHuge = size_t(2) << 20;
    const size_t align = v.n_groups * v.group_bytes >= kHuge ? kHuge : 64;
    const size_t total = (size_t(v.n_groups) * v.group_bytes + align - 1) / align * align;
    uint8_t *p = static_cast<uint8_t *>(std::aligned_alloc(align, total));
    if (p == nullptr) throw Error(SPECULA_ERR_OUT_OF_MEMORY, "packed matrix: cannot allocate " + std::to_string(total) + " bytes");
    m->storage_.reset(p);
#ifdef MADV_HUGEPAGE
    if (align == kHuge) ::madvise(p, total, MADV_HUGEPAGE);
#endif
    std::memset(p, 0, total);
    switch (w.type) {
    case uint32_t(TensorType::Q8_0): pack_q8_0(w, v, p); break;
    case uint32_t(TensorType::Q4_0): pack_q4_0(w, v, p); break;
    case uint32_t(TensorType::Q4_K): pack_q45_k<BlockQ4_K>(w, v, p); break;
    case uint32_t(TensorType::Q5_K): pack_q45_k<BlockQ5_K>(w, v, p); break;
    case uint32_t(TensorType::Q6_K): pack_q6_k(w, v, p); break;
    case uint32_t(TensorType::F32): pack_float(w, v, p, 4); break;
    case uint32_t(TensorType::F16):
    case uint32_t(TensorType::BF16): pack_float(w, v, p, 2); break;
    }
    v.data = p;
    return m;
}

PackedGemmFn packed_gemm(uint32_t type, CpuIsa isa) {
    switch (isa) {
    case CpuIsa::Amx: return packed_gemm_amx(type);
    case CpuIsa::Avx512Vnni: return packed_gemm_avx512(type);
    case CpuIsa::Avx2: return packed_gemm_avx2(type);
    case CpuIsa::Scalar: break;
    }
    return nullptr;
}

PackedConvertFn packed_convert(uint32_t dot_type, CpuIsa isa) {
    switch (isa) {
    case CpuIsa::Amx:
    case CpuIsa::Avx512Vnni: return packed_convert_avx512(dot_type);
    case CpuIsa::Avx2: return packed_convert_avx2(dot_type);
    case CpuIsa::Scalar: break;
    }
    return nullptr;
}

}  // namespace specula::internal
