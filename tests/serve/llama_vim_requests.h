// llama.vim's request bodies as autoload/llama.vim builds them with its default configuration: the FIM request of
// llama#fim and the ring-buffer warm-up of llama#ring_update. Shared by the /infill tests and the long-session replay.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace serve_test {

// llama#fim: n_predict 128, top_k 40, top_p 0.90, t_max_prompt_ms 500, t_max_predict_ms 1000, the response fields it
// reads; n_indent is the cursor line's indentation.
inline nlohmann::json llama_vim_fim_body(const std::string &prefix, const std::string &middle, const std::string &suffix,
                                         const nlohmann::json &extra, int n_indent) {
    return {{"id_slot", 0},
            {"input_prefix", prefix},
            {"input_suffix", suffix},
            {"input_extra", extra},
            {"prompt", middle},
            {"n_predict", 128},
            {"stop", nlohmann::json::array()},
            {"n_indent", n_indent},
            {"top_k", 40},
            {"top_p", 0.90},
            {"samplers", {"top_k", "top_p", "infill"}},
            {"stream", false},
            {"cache_prompt", true},
            {"t_max_prompt_ms", 500},
            {"t_max_predict_ms", 1000},
            {"response_fields",
             {"content", "timings/prompt_n", "timings/prompt_ms", "timings/prompt_per_token_ms", "timings/prompt_per_second",
              "timings/predicted_n", "timings/predicted_ms", "timings/predicted_per_token_ms", "timings/predicted_per_second",
              "truncated", "tokens_cached"}}};
}

// llama#ring_update: evaluates the extra context into the slot's cache, generates nothing.
inline nlohmann::json llama_vim_warmup_body(const nlohmann::json &extra) {
    return {{"id_slot", 0},
            {"input_prefix", ""},
            {"input_suffix", ""},
            {"input_extra", extra},
            {"prompt", ""},
            {"n_predict", 0},
            {"temperature", 0.0},
            {"samplers", nlohmann::json::array()},
            {"stream", false},
            {"cache_prompt", true},
            {"t_max_prompt_ms", 1},
            {"t_max_predict_ms", 1},
            {"response_fields", {""}}};
}

}  // namespace serve_test
