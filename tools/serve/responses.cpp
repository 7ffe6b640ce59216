#include "responses.h"

#include "utf8_check.h"

#include <cmath>
#include <limits>
#include <random>
#include <sstream>

namespace specula_serve {

json pick_response_fields(const std::vector<std::string> &paths, const json &full) {
    json out = json::object();
    for (const std::string &path : paths) {
        const json *current = &full;
        bool valid = true;
        size_t start = 0;
        while (valid && start <= path.size()) {
            const size_t end = std::min(path.find('/', start), path.size());
            const std::string key = path.substr(start, end - start);
            if (current->is_object() && current->contains(key)) {
                current = &current->at(key);
            } else {
                valid = false;
            }
            start = end + 1;
        }
        if (valid) out[path] = *current;
    }
    return out;
}

json token_probs_json(const std::vector<TokenProbs> &probs, const ResponseContext &c) {
    // nlohmann::json writes -inf as null: a probability of 0 is the lowest float as a logprob, as llama-server.
    auto value = [&](float v) { return c.post_sampling_probs || v > -INFINITY ? v : std::numeric_limits<float>::lowest(); };
    auto piece = [&](int32_t id, json &entry) {
        const std::string text = c.model_vocab != nullptr ? c.model_vocab->token_to_piece(id, true) : std::string();
        std::vector<int> bytes;
        for (const unsigned char b : text) bytes.push_back(int(b));
        entry["id"] = id;
        entry["token"] = text.substr(0, specula_apps::valid_utf8_prefix(text));
        entry["bytes"] = bytes;
    };
    const char *name = c.post_sampling_probs ? "prob" : "logprob";
    json out = json::array();
    for (const TokenProbs &tp : probs) {
        json entry;
        piece(tp.token, entry);
        entry[name] = value(tp.value);
        json top = json::array();
        for (const auto &[id, v] : tp.top) {
            json t;
            piece(id, t);
            t[name] = value(v);
            top.push_back(std::move(t));
        }
        entry[c.post_sampling_probs ? "top_probs" : "top_logprobs"] = std::move(top);
        out.push_back(std::move(entry));
    }
    return out;
}

json completion_final(const CompletionResult &r, const CompletionParams &p, const ResponseContext &c) {
    json res = {{"index", c.index},
                {"content", p.stream ? std::string() : r.content},
                {"tokens", p.stream || !p.return_tokens ? std::vector<int32_t>() : r.tokens},
                {"id_slot", r.id_slot},
                {"stop", true},
                {"model", c.model},
                {"tokens_predicted", int32_t(r.tokens.size())},
                {"tokens_evaluated", int32_t(r.prompt_tokens.size())},
                {"generation_settings", generation_settings(p, c.n_ctx)},
                {"prompt", c.prompt_text},
                {"has_new_line", r.has_new_line},
                {"truncated", r.truncated},
                {"stop_type", stop_type_name(r.stop_type)},
                {"stopping_word", r.stopping_word},
                {"tokens_cached", r.tokens_cached},
                {"timings", r.timings.to_json()}};
    if (!p.stream && !r.probs.empty()) res["completion_probabilities"] = token_probs_json(r.probs, c);
    return p.response_fields.empty() ? res : pick_response_fields(p.response_fields, res);
}

json completion_partial(const std::string &text, int32_t token, const TokenProbs *probs, int32_t n_decoded, int32_t n_prompt,
                        int id_slot, const ResponseContext &c) {
    json res = {{"index", c.index},
                {"content", text},
                {"tokens", token >= 0 ? std::vector<int32_t>{token} : std::vector<int32_t>()},
                {"stop", false},
                {"id_slot", id_slot},
                {"tokens_predicted", n_decoded},
                {"tokens_evaluated", n_prompt}};
    if (probs != nullptr) res["completion_probabilities"] = token_probs_json({*probs}, c);
    return res;
}

const char *finish_reason(const CompletionResult &r) {
    return r.stop_type == StopType::Eos || r.stop_type == StopType::Word ? "stop" : "length";
}

namespace {
json usage(const CompletionResult &r) {
    const int32_t n = int32_t(r.tokens.size()), np = int32_t(r.prompt_tokens.size());
    return {{"completion_tokens", n}, {"prompt_tokens", np}, {"total_tokens", n + np}};
}
// OpenAI's logprobs object as llama-server fills it ({"content": [...]}), null without n_probs.
json logprobs(const std::vector<TokenProbs> &probs, const ResponseContext &c) {
    return probs.empty() ? json() : json{{"content", token_probs_json(probs, c)}};
}
json envelope(const ResponseContext &c, const char *object, json choices) {
    return {{"choices", std::move(choices)},
            {"created", c.created},
            {"model", c.model},
            {"system_fingerprint", c.build_info},
            {"object", object},
            {"id", c.id}};
}
}  // namespace

json oai_completion_final(const CompletionResult &r, const ResponseContext &c) {
    json res = envelope(c, "text_completion",
                        json::array({{{"text", r.content}, {"index", c.index}, {"logprobs", logprobs(r.probs, c)}, {"finish_reason", finish_reason(r)}}}));
    res["usage"] = usage(r);
    res["timings"] = r.timings.to_json();
    return res;
}

json oai_completion_chunk(const std::string &text, const TokenProbs *probs, const ResponseContext &c) {
    return envelope(c, "text_completion",
                    json::array({{{"text", text}, {"index", c.index}, {"logprobs", probs ? logprobs({*probs}, c) : json()}, {"finish_reason", nullptr}}}));
}

json oai_completion_last_chunk(const CompletionResult &r, const ResponseContext &c) {
    json res = envelope(c, "text_completion",
                        json::array({{{"text", ""}, {"index", c.index}, {"logprobs", nullptr}, {"finish_reason", finish_reason(r)}}}));
    res["usage"] = usage(r);
    res["timings"] = r.timings.to_json();
    return res;
}

json oai_chat_final(const CompletionResult &r, const ResponseContext &c) {
    json res = envelope(c, "chat.completion",
                        json::array({{{"finish_reason", finish_reason(r)},
                                      {"index", 0},
                                      {"message", {{"role", "assistant"}, {"content", r.content}}}}}));
    if (!r.probs.empty()) res["choices"][0]["logprobs"] = logprobs(r.probs, c);
    res["usage"] = usage(r);
    res["timings"] = r.timings.to_json();
    return res;
}

json oai_chat_role_chunk(const ResponseContext &c) {
    // OpenAI's first chunk: the role with empty content (clients that append every delta's content read "").
    return envelope(c, "chat.completion.chunk",
                    json::array({{{"finish_reason", nullptr}, {"index", 0}, {"delta", {{"role", "assistant"}, {"content", ""}}}}}));
}

json oai_chat_chunk(const std::string &text, const TokenProbs *probs, const ResponseContext &c) {
    json res = envelope(c, "chat.completion.chunk", json::array({{{"finish_reason", nullptr}, {"index", 0}, {"delta", {{"content", text}}}}}));
    if (probs != nullptr) res["choices"][0]["logprobs"] = logprobs({*probs}, c);
    return res;
}

json oai_chat_last_chunk(const CompletionResult &r, const ResponseContext &c) {
    json res = envelope(c, "chat.completion.chunk",
                        json::array({{{"finish_reason", finish_reason(r)}, {"index", 0}, {"delta", json::object()}}}));
    res["usage"] = usage(r);  // llama-server puts the usage in the last chunk, asked for or not
    res["timings"] = r.timings.to_json();
    return res;
}

json oai_usage_chunk(const CompletionResult &r, const ResponseContext &c, bool chat) {
    json res = envelope(c, chat ? "chat.completion.chunk" : "text_completion", json::array());
    res["usage"] = usage(r);
    return res;
}

std::string random_id(const char *prefix) {
    static const char alphabet[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    thread_local std::mt19937_64 rng{std::random_device{}()};
    std::string id = prefix;
    for (int i = 0; i < 32; ++i) id += alphabet[rng() % (sizeof alphabet - 1)];
    return id;
}

}  // namespace specula_serve
