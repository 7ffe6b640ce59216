#include "slot_pool.h"

#include "backend_option.h"
#include "http_error.h"
#include "ngram_calibration.h"
#include "prompt_tokens.h"

#include <algorithm>
#include <chrono>
#include <thread>

namespace specula_serve {

SlotPool::SlotPool(const specula::Model &model, const ServeConfig &config) : max_queue_(std::max(0, config.max_queue)) {
    specula::SessionOptions so;
    so.n_ctx = config.n_ctx;
    if (config.n_threads > 0) {
        so.n_threads = config.n_threads;
    } else {
        // The slots share the cores: each gets its part (llama-server's -t is the whole server's too).
        const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
        so.n_threads = int32_t(std::max(1u, std::min(8u, cores / unsigned(std::max(1, config.n_parallel)))));
    }
    so.backend = specula_apps::backend_from_name(config.backend);
    so.kv_type = config.kv_type == "f32" ? SPECULA_KV_F32 : config.kv_type == "q8_0" ? SPECULA_KV_Q8_0 : SPECULA_KV_F16;
    if (config.context_shift) {
        // llama-server's context shift: keep the BOS, drop half of the rest, go on (lossless with the drafters:
        // the library shifts the target's cache and re-rotates its keys, and the drafters follow).
        so.context_policy = SPECULA_CONTEXT_SHIFT;
        so.n_keep = model.add_bos() ? 1 : 0;
        so.n_discard = 0;
    }

    specula::Draft draft;
    specula::Model draft_model;
    if (!config.draft.empty()) {
        try {
            draft = specula::Draft::load(config.draft, model);
        } catch (const specula::Error &e) {
            throw specula::Error(e.status(), "cannot load draft '" + config.draft + "': " + e.what());
        }
    }
    if (!config.draft_model.empty()) {
        try {
            draft_model = specula::Model::load(config.draft_model);
        } catch (const specula::Error &e) {
            throw specula::Error(e.status(), "cannot load draft model '" + config.draft_model + "': " + e.what());
        }
    }
    bool ngram = config.ngram;
    int32_t ngram_nodes = config.ngram_nodes;
    if (ngram && ngram_nodes < 0) {
        const NgramChoice choice = calibrate_ngram_nodes(model, so);
        spec_report_ = choice.report;
        ngram_nodes = choice.nodes;
        // With a model drafter the n-gram candidates share its tree: keep them then, with the measured share.
        if (ngram_nodes == 0 && !draft && !draft_model) ngram = false;
        if (ngram_nodes == 0) ngram_nodes = 2;
    }
    for (int i = 0; i < std::max(1, config.n_parallel); ++i) {
        auto slot = std::make_unique<Slot>();
        slot->id = i;
        slot->session = specula::Session(model, so, specula::SamplerOptions());
        if (ngram || draft || draft_model) {
            specula::SpeculativeOptions spec;
            spec.draft = draft ? &draft : nullptr;
            spec.draft_model = draft_model ? &draft_model : nullptr;
            spec.ngram = ngram;
            spec.tree = config.tree;
            if (config.fixed_tree) spec.tree_mode = SPECULA_TREE_FIXED;
            if (ngram && ngram_nodes >= 0) spec.ngram_nodes = ngram_nodes;
            slot->session.set_speculative(spec);
        }
        slot->n_ctx = slot->session.n_ctx();
        drafter_name_ = slot->session.drafter_name();
        backend_note_ = slot->session.backend_note();
        slots_.push_back(std::move(slot));
    }
    // Continuous batching (llama-server's default): the slots' forward passes run as one pass on all the threads,
    // each weight read once per step for every generating slot. A backend that does not batch leaves each slot on
    // its own (the note says why).
    if (config.cont_batching && slots_.size() > 1) {
        const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
        const int32_t threads = config.n_threads > 0 ? int32_t(std::min<int64_t>(int64_t(config.n_threads) * int64_t(slots_.size()), cores)) : 0;
        try {
            specula::Batch batch(model, threads);
            for (const auto &s : slots_) batch.join(s->session);
            batch_ = std::move(batch);
            batch_note_ = "continuous batching: " + std::to_string(slots_.size()) + " slots share each forward pass";
        } catch (const specula::Error &e) {
            for (const auto &s : slots_) specula::Batch::leave(s->session);
            batch_note_ = std::string("continuous batching off: ") + e.what();
        }
    }
}

specula_batch_stats SlotPool::batch_stats() const {
    if (!batch_) {
        specula_batch_stats none{};
        none.struct_size = sizeof none;
        return none;
    }
    return batch_.stats();
}

SlotPool::Lease SlotPool::acquire(const std::vector<int32_t> &prompt, int id_slot, const std::function<bool()> &gone) {
    // A slot that does not exist means no preference: llama.vim numbers its instruction requests 0, 1, 2, ... in
    // id_slot whatever the server's slot count.
    if (id_slot >= int(slots_.size())) id_slot = -1;
    std::unique_lock<std::mutex> lock(mutex_);
    auto pick = [&]() -> Slot * {
        Slot *best = nullptr;
        size_t best_prefix = 0;
        for (const auto &s : slots_) {
            if (s->busy || (id_slot >= 0 && s->id != id_slot)) continue;
            const size_t p = common_prefix(s->cached_tokens, prompt);
            if (best == nullptr || p > best_prefix || (p == best_prefix && s->last_used < best->last_used)) {
                best = s.get();
                best_prefix = p;
            }
        }
        return best;
    };
    // First come, first served: a request waits while an older one waits (only the oldest looks for a slot), so
    // that under load no request starves behind luckier newcomers.
    Slot *slot = waiting_queue_.empty() ? pick() : nullptr;
    if (slot == nullptr) {
        if (int(waiting_queue_.size()) >= max_queue_)
            throw HttpError(ErrorType::Unavailable, "the server is busy: all " + std::to_string(slots_.size()) +
                                                        " slots are generating and " + std::to_string(waiting_queue_.size()) +
                                                        " requests are waiting (--max-queue)");
        const uint64_t ticket = ++tickets_;
        waiting_queue_.push_back(ticket);
        for (;;) {
            if (waiting_queue_.front() == ticket && (slot = pick()) != nullptr) break;
            idle_.wait_for(lock, std::chrono::milliseconds(100));
            if (gone && gone()) {
                waiting_queue_.erase(std::find(waiting_queue_.begin(), waiting_queue_.end(), ticket));
                idle_.notify_all();  // the next in line may be first now
                throw HttpError(ErrorType::Unavailable, "the client closed the connection while waiting for a slot");
            }
        }
        waiting_queue_.pop_front();
        idle_.notify_all();  // the next in line may take another idle slot
    }
    slot->busy = true;
    slot->last_used = ++clock_;
    return Lease(this, slot);
}

void SlotPool::release(Slot *slot) {
    // The pool's copy of the context follows the session's, whatever the request did (under the lock: /slots and
    // /metrics read the copies of busy slots too).
    std::vector<int32_t> tokens;
    try {
        tokens = slot->session.tokens();
    } catch (...) {
        tokens.clear();  // out of memory: the next request simply finds no cached prefix here
    }
    {
        std::lock_guard<std::mutex> lock(mutex_);
        slot->cached_tokens = std::move(tokens);
        slot->busy = false;
    }
    idle_.notify_all();
}

void SlotPool::cancel_all() {
    // cancel is thread-safe on a busy session; the sessions live as long as the pool.
    for (const auto &s : slots_) s->session.cancel();
}

int SlotPool::busy() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return int(std::count_if(slots_.begin(), slots_.end(), [](const auto &s) { return s->busy; }));
}

int SlotPool::waiting() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return int(waiting_queue_.size());
}

std::vector<SlotPool::SlotInfo> SlotPool::info() const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<SlotInfo> out;
    for (const auto &s : slots_) out.push_back({s->id, s->n_ctx, s->busy, s->cached_tokens.size()});
    return out;
}

}  // namespace specula_serve
