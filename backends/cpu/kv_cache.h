// The target's key/value cache on the CPU: for every layer, n_ctx slots of one row of n_embd_kv values for K (after
// RoPE) and one for V, stored as the session's KvType (F16 by default, F32, or Q8_0 in 32-element blocks). Slot i
// holds the token at position i. Allocated once per session; its size is fixed by n_ctx and the type.
// A cache may hold only some layers ([first_layer, first_layer + n_held)): a GPU backend keeps such a host
// mirror of the one layer a LongSpec draft cross-attends to.
//
// Stored head-major: a layer's keys are the KV heads one after another, each head's n_ctx slots contiguous (and the
// same for the values), because attention reads one head over many slots. With slot-major rows a head's slice of
// each slot sits a row (a kilobyte on a 1B model) from the next one, and one core read such a cache at 8-10 GB/s
// against 23-25 GB/s for the same bytes read in order (measured on this project's 2-core EPYC VM): decoding at 8K
// spent most of its attention waiting on memory. A head that Q8_0 cannot store by itself (head_dim not a multiple
// of 32) keeps whole rows, as does a cache built without a head size. Whole-slot rows (snapshots, prompt caches,
// the GPU mirrors' transfers) are gathered and scattered by read_rows/write_rows, so the format outside is the same.
//
// Rows are rounded to the type when stored and read back through KvView (kv_view.h), so everything that attends
// (plain decoding, a tree node, the draft's cross-attention) sees the very same stored values.
#pragma once

#include "backend/kv_type.h"
#include "backends/cpu/kv_view.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace specula::internal {

class KvCache {
public:
    KvCache(int32_t n_layer, int32_t n_ctx, int32_t n_embd_kv, KvType type, int32_t head_dim = 0)
        : KvCache(0, n_layer, n_ctx, n_embd_kv, type, head_dim) {}
    // Holds only layers [first_layer, first_layer + n_held). Throws INVALID_ARGUMENT when n_embd_kv does not fit
    // the type (Q8_0 needs a multiple of 32). head_dim: the elements attention reads per head (stored head-major,
    // above); 0 keeps whole rows.
    KvCache(int32_t first_layer, int32_t n_held, int32_t n_ctx, int32_t n_embd_kv, KvType type, int32_t head_dim = 0);

    KvType type() const { return type_; }
    int32_t n_ctx() const { return n_ctx_; }
    int32_t n_embd_kv() const { return n_embd_kv_; }
    size_t row_bytes() const { return row_bytes_; }  // one slot's whole row, as read_rows writes it
    size_t bytes() const { return k_.size() + v_.size(); }
    int32_t group_width() const { return group_width_; }  // elements stored together per slot: head_dim, or the whole row

    // Rounds and stores one slot's key and value rows (n_embd_kv floats each).
    void store(int32_t layer, int32_t slot, const float *k, const float *v);
    // Slots [first, first + n) of a layer's keys or values as whole rows one after another (row_bytes() each), and
    // back.
    void read_rows(int32_t layer, KvPart part, int32_t first, int32_t n, void *dst) const;
    void write_rows(int32_t layer, KvPart part, int32_t first, int32_t n, const void *src);
    // Slot `from`'s keys and values copied to slot `to` (a layer).
    void copy_slot(int32_t layer, int32_t to, int32_t from);
    // One layer's keys or values as attention reads them.
    KvView keys(int32_t layer) const { return view(k_, layer); }
    KvView values(int32_t layer) const { return view(v_, layer); }

private:
    // Group g's row of a slot in layer `layer`.
    size_t offset(int32_t layer, int32_t group, int32_t slot) const {
        return ((size_t(layer - first_layer_) * size_t(n_groups_) + size_t(group)) * size_t(n_ctx_) + size_t(slot)) * group_bytes_;
    }
    KvView view(const std::vector<uint8_t> &rows, int32_t layer) const {
        return KvView{rows.data() + offset(layer, 0, 0), type_, group_bytes_, size_t(n_ctx_) * group_bytes_, group_width_};
    }

    int32_t first_layer_;
    int32_t n_ctx_;
    int32_t n_embd_kv_;
    KvType type_;
    int32_t group_width_, n_groups_;
    size_t group_bytes_, row_bytes_;
    std::vector<uint8_t> k_, v_;
};

}  // namespace specula::internal
