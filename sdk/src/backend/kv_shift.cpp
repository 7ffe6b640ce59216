#include "kv_shift.h"

#include "backend/kv_rows.h"
#include "model/rope.h"

#include <algorithm>

namespace specula::internal {

void shift_kv_rows(TargetRunner &runner, const HParams &hp, const std::vector<float> &freq_factors, int32_t keep, int32_t discard,
                   int32_t n_used) {
    const KvType type = runner.kv_type();
    const int32_t width = runner.kv_row_width();
    const size_t row_bytes = kv_row_bytes(type, width);
    // The rotation is the same for every key of a layer: the angles of position -discard, with the settings its
    // keys were rotated with (a sliding-window layer may have its own: gemma3), as a pure rotation (the attention
    // factor scaled the keys once, when they were rotated into place).
    std::vector<float> cos_t(size_t(std::max(1, hp.rope_dim / 2))), sin_t(cos_t.size());
    std::vector<float> cos_swa(cos_t.size()), sin_swa(cos_t.size());
    HParams hp_rot = hp;
    hp_rot.rope_attn_factor = 1.0f;
    HParams hp_swa = hp.sliding_rope();
    hp_swa.rope_attn_factor = 1.0f;
    rope_angles(hp_rot, freq_factors, -discard, cos_t.data(), sin_t.data());
    rope_angles(hp_swa, {}, -discard, cos_swa.data(), sin_swa.data());
    // Chunks of rows, in increasing slot order: a chunk's destination lies below its source, so it overwrites only
    // rows already moved or dropped.
    constexpr int32_t kChunk = 512;
    std::vector<uint8_t> bytes(size_t(kChunk) * row_bytes);
    std::vector<float> floats(size_t(kChunk) * size_t(width));
    for (int32_t layer = 0; layer < hp.n_layer; ++layer)
        for (int32_t from = keep + discard; from < n_used; from += kChunk) {
            const int32_t n = std::min(kChunk, n_used - from);
            runner.read_kv(layer, KvPart::Values, from, n, bytes.data());
            runner.write_kv(layer, KvPart::Values, from - discard, n, bytes.data());
            runner.read_kv(layer, KvPart::Keys, from, n, bytes.data());
            for (int32_t i = 0; i < n; ++i) {
                float *key = floats.data() + size_t(i) * size_t(width);
                kv_load_row(type, bytes.data() + size_t(i) * row_bytes, width, key);
                if (hp.rotates_apart(layer)) rope_rotate(key, hp.n_head_kv, hp_swa, cos_swa.data(), sin_swa.data());
                else rope_rotate(key, hp.n_head_kv, hp, cos_t.data(), sin_t.data());
                kv_store_row(type, key, width, bytes.data() + size_t(i) * row_bytes);
            }
            runner.write_kv(layer, KvPart::Keys, from - discard, n, bytes.data());
        }
}

}  // namespace specula::internal
