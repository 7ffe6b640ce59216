// The target's logits a session may still read, held in one place: the row of the last plain evaluation, or the rows
// of a speculative round's verified path (what the session samples from and reports, one token at a time). Session
// and SpeculativeRound read and write logits only through this.
//
// A round verified on the device leaves its rows in the runner (TargetRunner::tree_logits); a row comes over when
// first read. Before the runner overwrites them (its next eval or eval_tree), it tells this holder
// (TargetRunner::RowsHolder), which then brings over every row the session may still read: the current one and the
// path's rows not emitted yet. So no caller has to remember to settle rows before the runner runs again.
#pragma once

#include "backend/target_runner.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace specula::internal {

class TargetLogits final : public TargetRunner::RowsHolder {
public:
    TargetLogits() = default;
    TargetLogits(const TargetLogits &) = delete;
    TargetLogits &operator=(const TargetLogits &) = delete;
    ~TargetLogits() { release_runner(); }

    void init(int32_t n_vocab);
    int32_t n_vocab() const { return n_vocab_; }

    // ---- the current logits: what the next token is sampled from ----
    bool valid() const { return valid_; }
    const float *current() const;  // null when not valid
    // The row a plain evaluation writes into; set_evaluated() makes it the current logits once it succeeded.
    float *eval_row() { return plain_.data(); }
    void set_evaluated();
    void invalidate();
    // A snapshot's row, as the current logits.
    void restore_plain(std::vector<float> row);

    // ---- a speculative round ----
    // `runner` evaluated a tree of n_nodes nodes and keeps their rows (fetched when first read).
    void begin_round(TargetRunner &runner, int32_t n_nodes);
    // Node `node`'s row (the host verifier's access).
    const float *node_row(int32_t node) const;
    // The verified path, root first: entry i's row is what the round's token i was sampled from.
    void set_path(const std::vector<int32_t> &path) { path_ = path; }
    const float *path_row(size_t i) const { return node_row(path_[i]); }
    // The current logits become path row i (the rows before it are never read again).
    void point_at(size_t i);
    // A snapshot's round: path rows 0 .. n-1 given on the host (n_vocab floats each).
    void restore_round(std::vector<float> rows, size_t n);

    void before_overwrite() override;

private:
    void release_runner();

    static constexpr size_t kPlain = ~size_t(0);
    int32_t n_vocab_ = 0;
    std::vector<float> plain_;
    size_t current_ = kPlain;  // kPlain: plain_, else an index into path_
    bool valid_ = false;
    // The round: rows by node, fetched from runner_ on first read.
    mutable std::vector<float> rows_;
    mutable std::vector<uint8_t> ready_;
    std::vector<int32_t> path_;
    TargetRunner *runner_ = nullptr;  // keeps the rows not fetched yet (and has this as its holder)
};

}  // namespace specula::internal
