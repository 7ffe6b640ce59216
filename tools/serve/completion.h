// One completion on one slot: the request's settings (llama-server's field names), the prompt's cached prefix
// reused, the generation with llama-server's stop rules (n_predict, stop strings, EOS, n_indent, t_max_predict_ms,
// context), and what it produced with the timings llama-server reports.
#pragma once

#include "http_error.h"
#include "json_fields.h"
#include "serve_config.h"
#include "slot_pool.h"

#include <specula/specula.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace specula_serve {

struct CompletionParams {
    int32_t n_predict = -1;          // the cap that applies (the request's, within the server's -n); -1: none
    int32_t n_keep = 0;              // prompt tokens kept when a prompt longer than the context is cut (-1: all)
    int32_t n_indent = 0;            // > 0: stop at a line indented less than this (code completion)
    int64_t t_max_predict_ms = 0;    // > 0: after a newline, stop once generation took this long
    int64_t t_max_prompt_ms = 0;     // accepted for llama.vim; llama-server does not act on it either
    bool stream = false;
    bool cache_prompt = true;
    bool return_tokens = false;
    bool ignore_eos = false;
    bool prompt_trimmed = false;  // the server dropped extra context to fit n_ctx (/infill): reported as truncated
    int id_slot = -1;
    std::vector<std::string> stop;
    std::vector<std::string> samplers;         // llama-server's chain names (when has_samplers)
    bool has_samplers = false;                 // "samplers" given, even empty: only the steps it names run
    std::vector<std::string> response_fields;  // "a/b" paths of the final response to keep
    specula::SamplerOptions sampler;
    int64_t seed = -1;                         // -1: a fresh random seed
    int32_t n_probs = 0;                       // report the n most likely tokens of each step (OpenAI: top_logprobs)
    bool post_sampling_probs = false;          // ... after the sampler chain (probabilities), not before (logprobs)
    bool timings_per_token = false;            // streamed chunks carry the timings so far
};

// What a step reports with n_probs: its token's log-probability before sampling (or its probability after the
// sampler chain with post_sampling_probs) and the n most likely tokens with theirs.
struct TokenProbs {
    int32_t token = -1;
    float value = 0.0f;
    std::vector<std::pair<int32_t, float>> top;
};

// Reads the llama-server generation fields of a request (/completion, /infill and the OpenAI ones after their names
// were mapped); the fields it leaves out take the server's defaults, and n_predict is capped by the server's -n
// (server_n_predict, -1: none). 400 on a wrong type or range.
CompletionParams parse_completion_params(const json &body, const SamplingDefaults &defaults = {}, int32_t server_n_predict = -1);
// The settings echoed as generation_settings (/props and final responses).
json generation_settings(const CompletionParams &p, int32_t n_ctx);

enum class StopType { None, Eos, Word, Limit };
const char *stop_type_name(StopType t);

struct Timings {
    int32_t cache_n = 0;           // prompt tokens reused from the slot's cache
    int32_t prompt_n = 0;          // prompt tokens evaluated
    double prompt_ms = 0;
    int32_t predicted_n = 0;
    double predicted_ms = 0;
    int32_t draft_n = 0;           // tokens the drafters proposed
    int32_t draft_n_accepted = 0;  // of them, accepted by the target
    json to_json() const;
};

struct CompletionResult {
    std::string content;
    std::vector<int32_t> tokens;  // generated ids
    std::vector<int32_t> prompt_tokens;
    StopType stop_type = StopType::None;
    std::string stopping_word;
    bool truncated = false;       // stopped by the end of the context
    bool has_new_line = false;
    bool cancelled = false;       // the client left: nothing is sent
    int32_t tokens_cached = 0;    // tokens in the slot's context afterwards (llama-server's n_past)
    int id_slot = 0;
    std::vector<TokenProbs> probs;  // one per generated token, with n_probs > 0
    Timings timings;
};

// A piece of text as it becomes final (for streaming): its token (-1: none), with n_probs that token's report, with
// timings_per_token the timings so far (else nullptr).
struct Piece {
    std::string text;
    int32_t token = -1;
    const TokenProbs *probs = nullptr;
    const Timings *timings = nullptr;
};
// Called with each piece; return false to stop (client gone).
using PieceSink = std::function<bool(const Piece &piece)>;

class CompletionRunner {
public:
    // context_shift: prompts longer than the context are cut as llama-server cuts them (the slots' sessions shift
    // their context when generation fills it); otherwise they are refused.
    CompletionRunner(const specula::Model &model, bool context_shift) : model_(model), context_shift_(context_shift) {}

    // Runs the prompt on the slot. `gone` is polled between tokens: when it says the client left, the generation
    // stops and the result is marked cancelled. Throws HttpError for a prompt that does not fit.
    CompletionResult run(Slot &slot, const std::vector<int32_t> &prompt, const CompletionParams &params, const PieceSink &sink,
                         const std::function<bool()> &gone) const;

private:
    const specula::Model &model_;
    bool context_shift_;
};

// llama-server's exceed_context_size_error for a prompt of n_prompt tokens (400).
HttpError exceeds_context(size_t n_prompt, int32_t n_ctx);

// llama-server's cut of a prompt that does not fit n_ctx: the first n_keep tokens, then the prompt's end, whole
// blocks of (n_ctx - n_keep) / 2 tokens dropped from the middle. Returns the prompt unchanged when it fits.
std::vector<int32_t> cut_prompt_to_context(const std::vector<int32_t> &prompt, int32_t n_ctx, int32_t n_keep);

}  // namespace specula_serve
