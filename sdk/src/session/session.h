// A generation session: the token context, its KV cache on a backend, the sampler, and streaming state.
// Single-threaded, except cancel(), which any thread may call.
//
// Lifecycle of a token: append_* puts tokens in the context (not yet evaluated). A generation step first
// evaluates every pending token in batches (prompt processing), samples the next token from the last logits,
// appends it to the context (it is evaluated at the start of the next step), and streams its text.
#pragma once

#include "backend/backend_choice.h"
#include "backend/target_runner.h"
#include "core/thread_pool.h"
#include "model/model.h"
#include "sampling/sampler.h"
#include "session/session_state.h"
#include "session/speculative_round.h"
#include "session/target_logits.h"
#include "session/stop_strings.h"
#include "snapshot/snapshot_file.h"
#include "tokenizer/stream_decoder.h"

#include <specula/specula.h>

#include <atomic>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace specula::internal {

// What generation does when the context is full (docs/long-outputs.md). Off: the run stops with
// SPECULA_STOP_CONTEXT_FULL. On: the session drops `discard` tokens after the first `keep` (StreamingLLM's attention
// sinks, or a system prompt) from the context and the target's cache, moves the newer ones down (keys re-rotated,
// backend/kv_shift.h) and goes on: TokenSwift's window of sinks plus recent tokens, llama.cpp's context shift.
// The shift happens when a produced token finds the context full, with every context token evaluated; a
// speculative round never drafts past the end of the cache, so plain and speculative decoding shift at the same
// token with the same cache and greedy speculative output stays equal to plain output under the same policy.
struct ContextShift {
    bool enabled = false;
    int32_t keep = 4;
    int32_t discard = 0;  // 0: half of the tokens after `keep`
};

struct SessionConfig {
    int32_t n_ctx = 0;      // 0 = min(n_ctx_train, 4096)
    int32_t n_threads = 0;  // 0 = cores, at most 8
    int32_t n_batch = 64;
    BackendChoice backend;  // which backend runs the target (auto: CUDA when usable, else Vulkan, else the CPU)
    ContextShift shift;
    // Internal: builds the target's runner instead of `backend` (tests run the CUDA backend's CPU emulation
    // through a real session this way).
    std::function<std::unique_ptr<TargetRunner>(std::shared_ptr<const Model>, int32_t n_ctx, ThreadPool &pool)> make_runner;
};

struct GenerateConfig {
    int32_t max_tokens = 256;  // < 0: until the context is full
    bool stop_at_eog = true;
    std::vector<std::string> stop_strings;
    int32_t top_logits = 0;
    int32_t top_probs = 0;  // the K most likely tokens after the sampler chain, with their probabilities
};

// How a snapshot is written (session_snapshot.cpp).
struct SnapshotOptions {
    SnapshotScope scope = SnapshotScope::Full;
    int level = 1;  // zstd level; 0 = uncompressed (in-memory forks)
};

// What a snapshot save wrote, for reports and benchmarks.
struct SnapshotReport {
    uint64_t bytes = 0;         // the whole snapshot
    uint64_t kv_raw_bytes = 0;  // KV rows saved, before compression
};

// One step's result; the strings and arrays stay valid until the next call on the session.
struct StepResult {
    int32_t token = SPECULA_TOKEN_NULL;
    std::string text;
    specula_stop_reason stop = SPECULA_STOP_NONE;
    std::vector<int32_t> top_ids;
    std::vector<float> top_logits;
    float logsumexp = 0.0f;    // of the raw logits (with top_logits): a logit minus it is its log-probability
    float token_logit = 0.0f;  // the token's raw logit (with top_logits)
    std::vector<int32_t> top_prob_ids;  // with top_probs: the chain's most likely tokens, most likely first
    std::vector<float> top_probs;
    float token_prob = 0.0f;            // with top_probs: the probability the token was drawn with
    bool drafted = false;  // proposed by a drafter and accepted by the target
};

class Session {
public:
    Session(std::shared_ptr<const Model> model, const SessionConfig &config, const SamplerConfig &sampler);

    const Model &model() const { return *model_; }
    int32_t n_ctx() const { return runner_->n_ctx(); }
    // The backend running the target ("cpu", "cuda", "vulkan") and, when it is not the one asked for (auto included),
    // why: e.g. "CUDA: no device found (cudaErrorNoDevice)". Empty when the first choice was used.
    const char *backend() const { return runner_->backend(); }
    const std::string &backend_note() const { return backend_note_; }
    // Bytes of the target's KV cache.
    size_t kv_bytes() const { return runner_->kv_bytes(); }
    KvType kv_type() const { return runner_->kv_type(); }
    // The session's threads: the CPU backend computes on them, drafters that run on the CPU share them, and
    // between calls they hash a model for its fingerprint or compress a snapshot.
    ThreadPool &pool() { return *pool_; }
    // Context tokens whose keys/values are in the cache.
    int32_t n_evaluated() const { return n_evaluated_; }
    // The target's runner, for benchmarks and tests that look below the session (e.g. at the cache's rows).
    TargetRunner &runner() { return *runner_; }
    const std::vector<int32_t> &tokens() const { return tokens_; }

    // Cross-session batching (backend/session_batch.h): the target's forward passes join the group's, or go back
    // to passes of their own. Throws as TargetRunner::join_batch.
    void join_batch(BatchGroup &group) { runner_->join_batch(group); }
    void leave_batch() { runner_->leave_batch(); }

    void set_sampler(const SamplerConfig &config);
    // Attaches (or, with an empty config, detaches) drafters. Throws Error(INCOMPATIBLE) for a draft made for
    // another model or a draft model with another vocabulary, Error(INVALID_ARGUMENT) for conflicting choices.
    void set_speculative(const SpeculativeConfig &config);
    bool speculative() const { return spec_.attached(); }
    const char *drafter_name() const { return spec_.attached() ? spec_.drafter()->name() : ""; }
    // The tuner choosing each round's tree (auto), or nullptr.
    const TreeTuner *tree_tuner() const { return spec_.tuner(); }
    size_t drafter_bytes() const { return spec_.attached() ? spec_.drafter()->allocated_bytes() : 0; }
    const SpeculativeStats &speculative_stats() const { return spec_.stats(); }
    // The attached drafter's raw logits for the token after the context (n_vocab floats), computed as the first
    // step of a speculative round computes them: the context's last token is the root, the target's KV holds
    // every token before it. Evaluates pending context first. Throws Error(INVALID_ARGUMENT) without a drafter
    // or with an empty context, Error(UNSUPPORTED) for drafters without one distribution (n-gram, merged).
    // Returns false if cancelled while evaluating.
    bool draft_logits(float *logits);
    // Throws Error(INVALID_TOKEN / CONTEXT_FULL); nothing is appended on error.
    void append_tokens(const int32_t *tokens, size_t n);
    void append_text(std::string_view text, bool add_special, bool parse_special);
    void rewind(int32_t n_tokens);

    // Sets max tokens, stop conditions and top-logit reporting for the following steps.
    void configure_run(const GenerateConfig &config);
    // Starts a generation run (a generate call): resets the per-run token count and the time-to-first-token
    // clock. Appends and rewinds do the same, so pull-style next() counts from the last of those.
    void begin_run();
    // Produces at most one token. stop != NONE ends the run (the token, if any, is the last one). Returns the
    // status to report: OK, CANCELLED or CONTEXT_FULL.
    specula_status step(StepResult &out);
    // Evaluates the pending context tokens (a prompt) without generating: what a cache warm-up needs. With a
    // drafter the last token stays pending, as before every round (it is the root of the next tree). False when
    // cancelled (the cancel request is consumed); the tokens evaluated before the cancel stay evaluated.
    bool evaluate();

    void cancel() { cancel_requested_.store(true, std::memory_order_relaxed); }
    // Every counter of specula_stats, the speculative ones included (SpeculativeRound keeps those).
    specula_stats stats() const;

    // Snapshots (session_snapshot.cpp; the layout is snapshot/snapshot_file.h). save_snapshot streams the state to
    // `sink` in order and does not change the session. A Full snapshot holds everything a later session needs to
    // continue exactly where this one is (after any emitted token): context, the target's filled KV rows, the last
    // logits, the sampler with its generator's position, the drafters' state and a round's accepted tokens not
    // emitted yet, the stream's held-back text and the stats. A Context snapshot holds the context only.
    SnapshotReport save_snapshot(const SnapshotOptions &options, const std::function<void(const void *, size_t)> &sink);
    // The same in two steps, for callers that need the size bound before writing (a caller's buffer, a fork):
    // prepare_snapshot() builds everything but the KV rows once; write_snapshot() streams it with the rows. The
    // session must not change between the two.
    struct PreparedSnapshot;
    PreparedSnapshot prepare_snapshot(const SnapshotOptions &options);
    SnapshotReport write_snapshot(const PreparedSnapshot &prepared, const std::function<void(const void *, size_t)> &sink);
    // Loads a snapshot saved by a session on the same model file (fingerprint), KV type and drafters (when it
    // carries drafter state). Everything is checked before anything changes: on any error it throws (FORMAT for
    // damaged or truncated bytes, UNSUPPORTED for another format version, INCOMPATIBLE for another model, draft,
    // drafter set or KV type, CONTEXT_FULL when the context does not fit n_ctx) and the session is as it was.
    // keep_tokens >= 0 restores only that many leading tokens of the snapshot's context (prompt caches: only the
    // KV chunks they need are decompressed). A Context snapshot keeps this session's sampler, drafters (which
    // catch up from the restored context) and stats. Returns the tokens restored.
    int32_t load_snapshot(std::span<const uint8_t> bytes, int32_t keep_tokens = -1);
    // Tokens whose keys/values came from snapshots instead of being evaluated, since the session began.
    int32_t n_restored_tokens() const { return n_restored_tokens_; }
    // Context shifts since the session began, and the tokens they dropped.
    int32_t n_context_shifts() const { return n_shifts_; }
    int64_t n_discarded_tokens() const { return n_discarded_; }
    // Tokens a shift drops (config.shift.discard, or its default for this n_ctx).
    int32_t shift_discard() const { return shift_discard_; }

    // Raw logits of the last evaluated position, or nullptr.
    const float *logits() const { return logits_.current(); }

private:
    // Evaluates every context token without KV yet. Returns false if cancelled (progress is kept).
    bool evaluate_pending();
    // The context is full and every token of it evaluated: drops shift_discard_ tokens after the first keep
    // (ContextShift), from the context, the target's cache and the drafters.
    void shift_context();
    bool take_cancel() { return cancel_requested_.exchange(false, std::memory_order_relaxed); }
    void reset_stream();
    // What a step reports of the distribution its token came from (GenerateConfig's top_logits and top_probs).
    void report_distribution(int32_t token, StepResult &out) const;
    // One draft + verify round of the tuner's choice `choice` (auto; -1: the configured tree), around
    // SpeculativeRound::run: fills its queue with the accepted tokens and the bonus token.
    bool speculate(int32_t choice);
    // The run ended (stop = why): flushes held-back text into out.text and resets the stream.
    void finish_run(specula_stop_reason reason, StepResult &out);
    void drop_ready() { spec_.drop_ready(); }
    // Snapshots (session_snapshot.cpp; the parts' layouts: session_state.h).
    SessionPart session_part(bool full) const;
    void apply_session_part(SessionPart &&part, bool full);
    void check_speculative_part(const SpeculativePart &part, const SnapshotHeader &h, const SessionPart &session, size_t n_tokens,
                                const ByteReader &r) const;

    std::shared_ptr<const Model> model_;
    SessionConfig config_;
    std::string backend_note_;
    std::unique_ptr<ThreadPool> pool_;  // before runner_ and spec_: they compute on it
    std::unique_ptr<TargetRunner> runner_;
    Sampler sampler_;
    GenerateConfig run_;
    std::vector<int32_t> tokens_;
    int32_t n_evaluated_ = 0;
    bool last_token_generated_ = false;  // the unevaluated tail is one generated token (decode, not prompt)
    // A drafter was attached to a context already evaluated (set_speculative after the prompt, a restored snapshot):
    // it catches up at the next evaluation, as part of prompt processing, as it does with a prompt.
    bool drafter_behind_ = false;
    // The logits the session may still read (the last evaluation's row, or a round's rows): target_logits.h. After
    // runner_ (it is the runner's rows holder until it is destroyed).
    TargetLogits logits_;
    StreamDecoder decoder_;
    StopStrings stops_;
    int32_t n_run_generated_ = 0;
    bool run_first_token_ = true;
    double run_start_ms_ = 0;
    std::atomic<bool> cancel_requested_{false};

    // Speculative decoding: the drafters (made by runner_, so declared after it), the tuner, a round's buffers and
    // its queue of tokens not emitted yet, the speculative stats.
    SpeculativeRound spec_;

    // Stats.
    int32_t n_prompt_tokens_ = 0;
    int32_t n_generated_ = 0;
    int32_t n_restored_tokens_ = 0;
    int32_t shift_discard_ = 0;
    int32_t n_shifts_ = 0;
    int64_t n_discarded_ = 0;
    double prompt_ms_ = 0, decode_ms_ = 0, ttft_ms_ = 0;
};

// Everything of a snapshot but the KV rows (Session::prepare_snapshot): the header and the small sections.
struct Session::PreparedSnapshot {
    SnapshotOptions options;
    SnapshotHeader header;
    std::vector<uint8_t> tokens, session, sampler, speculative;  // raw sections (sampler, speculative: Full only)
    std::vector<KvChunkId> plan;                                 // the target's KV chunks
    TargetRunner *own = nullptr;                                 // a draft model's own cache, saved after the target's
    std::vector<KvChunkId> own_plan;                             // and its chunks
    // At least the bytes write_snapshot() writes (every section counted uncompressed).
    uint64_t bound() const;
};

}  // namespace specula::internal
