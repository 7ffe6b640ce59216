#include "longspec_drafter.h"

#include "core/error.h"
#include "snapshot/byte_stream.h"
#include "speculative/beam_tree.h"

#include <algorithm>
#include <climits>

namespace specula::internal {

std::vector<uint8_t> LongSpecRing::encode() const {
    ByteWriter w;
    w.put<uint32_t>(uint32_t(type));
    w.put<int32_t>(n_done);
    w.put_array<int32_t>(positions);
    w.put_array<uint8_t>(k);
    w.put_array<uint8_t>(v);
    return w.take();
}

LongSpecRing LongSpecRing::decode(std::span<const uint8_t> bytes, KvType type, int32_t slots, int32_t row_width, int32_t n_tokens) {
    ByteReader r(bytes, "snapshot: LongSpec ring");
    LongSpecRing ring;
    const uint32_t t = r.get<uint32_t>();
    r.check(t == uint32_t(type), std::string("saved with ") + (t == uint32_t(KvType::F16) ? "F16" : t == 0 ? "F32" : "unknown") +
                                     " rows, this drafter keeps " + kv_type_name(type));
    ring.type = type;
    ring.n_done = r.get<int32_t>();
    r.check(ring.n_done >= 0 && ring.n_done <= n_tokens, "caught up to " + std::to_string(ring.n_done) + " tokens of a context of " + std::to_string(n_tokens));
    ring.positions = r.get_array<int32_t>(uint64_t(slots));
    r.check(ring.positions.size() == size_t(slots), "has " + std::to_string(ring.positions.size()) + " slots, the draft's window needs " + std::to_string(slots));
    for (int32_t p : ring.positions) r.check(p >= -1 && p < (1 << 22), "a slot position is out of range");
    const uint64_t row_bytes = uint64_t(slots) * uint64_t(row_width) * kv_type_size(type);
    ring.k = r.get_array<uint8_t>(row_bytes);
    ring.v = r.get_array<uint8_t>(row_bytes);
    r.check(ring.k.size() == row_bytes && ring.v.size() == row_bytes, "the rows have the wrong size");
    r.expect_end();
    return ring;
}

int32_t LongSpecDrafterBase::check_state(std::span<const uint8_t> state, int32_t n_tokens) const {
    LongSpecRing::decode(state, ring_type_, ring_slots_, row_width_, n_tokens);
    return 0;
}

void LongSpecDrafterBase::load_state(std::span<const uint8_t> state) {
    set_ring(LongSpecRing::decode(state, ring_type_, ring_slots_, row_width_, INT32_MAX));
}

void LongSpecDrafterBase::draft(const DraftRequest &request, DraftTree &tree) {
    begin_round(request);
    DraftRequest bounded = request;
    bounded.node_budget = std::min(request.node_budget, max_nodes_ + 1);
    build_beam_tree(bounded, tree, n_vocab_, n_vocab_, n_vocab_,
                    [this](const DraftTree &t, int32_t first, int32_t count, float *logits) { score(t, first, count, logits); },
                    [this](const DraftTree &t, int32_t first, int32_t count, int32_t k, float *logp, int32_t *ids) {
                        return score_topk(t, first, count, k, logp, ids);
                    });
}

bool LongSpecDrafterBase::root_logits(const DraftRequest &request, float *logits) {
    begin_round(request);
    root_tree_.reset(request.tokens.back());
    score(root_tree_, 0, 1, logits);
    return true;
}

}  // namespace specula::internal
