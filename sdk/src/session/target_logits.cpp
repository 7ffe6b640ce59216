#include "session/target_logits.h"

#include "core/error.h"

#include <algorithm>

namespace specula::internal {

void TargetLogits::init(int32_t n_vocab) {
    n_vocab_ = n_vocab;
    plain_.assign(size_t(n_vocab), 0.0f);
}

const float *TargetLogits::current() const {
    if (!valid_) return nullptr;
    return current_ == kPlain ? plain_.data() : path_row(current_);
}

void TargetLogits::set_evaluated() {
    current_ = kPlain;
    valid_ = true;
}

void TargetLogits::invalidate() {
    current_ = kPlain;
    valid_ = false;
}

void TargetLogits::restore_plain(std::vector<float> row) {
    plain_ = std::move(row);
    set_evaluated();
}

void TargetLogits::begin_round(TargetRunner &runner, int32_t n_nodes) {
    release_runner();
    rows_.resize(size_t(n_nodes) * size_t(n_vocab_));
    ready_.assign(size_t(n_nodes), 0);
    path_.clear();
    runner_ = &runner;
    runner.hold_rows(this);
}

const float *TargetLogits::node_row(int32_t node) const {
    float *r = rows_.data() + size_t(node) * size_t(n_vocab_);
    if (!ready_[size_t(node)]) {
        require(runner_ != nullptr, SPECULA_ERR_INTERNAL, "speculative: a row of the round is gone");
        runner_->tree_logits(node, r);
        ready_[size_t(node)] = 1;
    }
    return r;
}

void TargetLogits::point_at(size_t i) {
    current_ = i;
    valid_ = true;
}

void TargetLogits::restore_round(std::vector<float> rows, size_t n) {
    release_runner();
    rows_ = std::move(rows);
    ready_.assign(n, 1);
    path_.resize(n);
    for (size_t i = 0; i < n; ++i) path_[i] = int32_t(i);
}

// The runner is about to overwrite its rows: the ones the session may still read come over now.
void TargetLogits::before_overwrite() {
    if (runner_ == nullptr) return;
    const size_t from = valid_ && current_ != kPlain ? current_ : path_.size();
    for (size_t i = from; i < path_.size(); ++i) path_row(i);
    runner_ = nullptr;  // the runner forgot this holder when it told it
}

void TargetLogits::release_runner() {
    if (runner_ != nullptr) runner_->drop_holder(this);
    runner_ = nullptr;
}

}  // namespace specula::internal
