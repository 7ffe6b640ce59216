// Response bodies in llama-server's shapes (/completion, /infill) and OpenAI's (/v1/completions,
// /v1/chat/completions), for whole responses and for the events of a stream.
#pragma once

#include "completion.h"

#include <string>
#include <vector>

namespace specula_serve {

struct ResponseContext {
    std::string model;       // the name the response reports
    std::string build_info;  // system_fingerprint
    std::string prompt_text; // the prompt detokenized (llama-server's "prompt" field)
    int32_t n_ctx = 0;
    std::string id;          // "chatcmpl-..." / "cmpl-..." of an OpenAI response
    long long created = 0;   // Unix seconds
    int index = 0;           // which of the request's prompts this answers (several prompts: llama-server's "index")
    const specula::Model *model_vocab = nullptr;  // names the tokens of n_probs reports
    bool post_sampling_probs = false;             // those reports are probabilities after the chain, not logprobs
};

// llama-server's probs_vector_to_json: per token {id, token, bytes, logprob|prob, top_logprobs|top_probs}.
json token_probs_json(const std::vector<TokenProbs> &probs, const ResponseContext &c);

// llama-server's json_get_nested_values: keeps the listed "a/b" paths, keyed by the path string.
json pick_response_fields(const std::vector<std::string> &paths, const json &full);

// /completion and /infill.
json completion_final(const CompletionResult &r, const CompletionParams &p, const ResponseContext &c);
// A streamed piece: its text and the id of the token that made it (llama-server sends the ids in every chunk).
json completion_partial(const std::string &text, int32_t token, const TokenProbs *probs, int32_t n_decoded, int32_t n_prompt,
                        int id_slot, const ResponseContext &c);

// OpenAI text completions.
json oai_completion_final(const CompletionResult &r, const ResponseContext &c);
json oai_completion_chunk(const std::string &text, const TokenProbs *probs, const ResponseContext &c);
json oai_completion_last_chunk(const CompletionResult &r, const ResponseContext &c);

// OpenAI chat completions.
json oai_chat_final(const CompletionResult &r, const ResponseContext &c);
json oai_chat_role_chunk(const ResponseContext &c);
json oai_chat_chunk(const std::string &text, const TokenProbs *probs, const ResponseContext &c);
json oai_chat_last_chunk(const CompletionResult &r, const ResponseContext &c);
json oai_usage_chunk(const CompletionResult &r, const ResponseContext &c, bool chat);

// "stop" for EOS and stop strings, "length" otherwise (OpenAI's finish_reason).
const char *finish_reason(const CompletionResult &r);

// A random OpenAI-style id: prefix + 32 alphanumerics.
std::string random_id(const char *prefix);

}  // namespace specula_serve
