#include "completion.h"

#include "http_error.h"
#include "prompt_tokens.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <random>

namespace specula_serve {

namespace {
bool listed(const std::vector<std::string> &names, std::initializer_list<const char *> any) {
    for (const std::string &n : names)
        for (const char *a : any)
            if (n == a) return true;
    return false;
}

double now_ms() {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

CompletionParams parse_completion_params(const json &body, const SamplingDefaults &d, int32_t server_n_predict) {
    if (!body.is_object()) throw bad_request("the request body must be a JSON object");
    CompletionParams p;
    // max_tokens / max_completion_tokens are the OpenAI names of n_predict (n_predict wins when both are given).
    const int64_t max_tokens = int_field(body, "max_tokens", int_field(body, "max_completion_tokens", -1, -1, 1 << 24), -1, 1 << 24);
    p.n_predict = int32_t(int_field(body, "n_predict", max_tokens, -1, 1 << 24));
    if (server_n_predict >= 0 && (p.n_predict < 0 || p.n_predict > server_n_predict)) p.n_predict = server_n_predict;
    p.n_keep = int32_t(int_field(body, "n_keep", 0, -1, 1 << 24));
    p.n_indent = int32_t(int_field(body, "n_indent", 0, 0, 1 << 16));
    p.t_max_predict_ms = int_field(body, "t_max_predict_ms", 0, -1, int64_t(1) << 40);
    p.t_max_prompt_ms = int_field(body, "t_max_prompt_ms", 0, -1, int64_t(1) << 40);
    p.stream = bool_field(body, "stream", false);
    p.cache_prompt = bool_field(body, "cache_prompt", true);
    p.return_tokens = bool_field(body, "return_tokens", false);
    p.ignore_eos = bool_field(body, "ignore_eos", false);
    p.id_slot = int(int_field(body, "id_slot", -1, -1, 1 << 16));
    p.stop = stop_field(body, "stop");
    p.samplers = string_list_field(body, "samplers");
    p.has_samplers = has_field(body, "samplers");
    p.response_fields = string_list_field(body, "response_fields");
    p.seed = int_field(body, "seed", d.seed, -1, INT64_MAX);
    // n_probs, or OpenAI's logprobs: a number on /v1/completions, true with top_logprobs (20 by default) on chat.
    p.n_probs = int32_t(int_field(body, "n_probs", 0, 0, 64));
    p.post_sampling_probs = bool_field(body, "post_sampling_probs", false);
    p.timings_per_token = bool_field(body, "timings_per_token", false);
    const bool logprobs_flag = has_field(body, "logprobs") && body.at("logprobs").is_boolean();
    const bool logprobs_on = logprobs_flag && body.at("logprobs").get<bool>();
    if (!has_field(body, "n_probs") && has_field(body, "logprobs")) {
        if (logprobs_on) p.n_probs = int32_t(int_field(body, "top_logprobs", 20, 0, 64));
        else if (!logprobs_flag) p.n_probs = int32_t(int_field(body, "logprobs", 0, 0, 64));
    }
    if (has_field(body, "top_logprobs") && !logprobs_on) throw bad_request("top_logprobs requires logprobs to be set to true");

    // The server's defaults (its --temp, --top-k, ...; llama-server's common_params_sampling unless given).
    specula::SamplerOptions &s = p.sampler;
    const specula::SamplerOptions &ds = d.sampler;
    s.temperature = float(number_field(body, "temperature", ds.temperature, -1e6, 1e6));
    s.top_k = int32_t(int_field(body, "top_k", ds.top_k, -1, 1 << 24));
    s.top_p = float(number_field(body, "top_p", ds.top_p, 0.0, 1e6));
    s.min_p = float(number_field(body, "min_p", ds.min_p, 0.0, 1.0));
    s.repeat_penalty = float(number_field(body, "repeat_penalty", ds.repeat_penalty, 1e-6, 1e6));
    s.presence_penalty = float(number_field(body, "presence_penalty", ds.presence_penalty, -1e6, 1e6));
    s.frequency_penalty = float(number_field(body, "frequency_penalty", ds.frequency_penalty, -1e6, 1e6));
    s.penalty_last_n = int32_t(int_field(body, "repeat_last_n", ds.penalty_last_n, -1, 1 << 24));
    s.draw = ds.draw;
    // A sampler chain names the steps that run: the ones left out are off, as in llama.cpp's chain (without
    // "temperature" the logits are sampled as they are, i.e. at temperature 1; an empty chain samples the raw
    // distribution). "infill" and the other steps of llama.cpp that Specula does not have are ignored.
    if (p.has_samplers) {
        if (!listed(p.samplers, {"top_k"})) s.top_k = 0;
        if (!listed(p.samplers, {"top_p"})) s.top_p = 1.0f;
        if (!listed(p.samplers, {"min_p"})) s.min_p = 0.0f;
        if (!listed(p.samplers, {"temperature"})) s.temperature = 1.0f;
        if (!listed(p.samplers, {"penalties"})) {
            s.repeat_penalty = 1.0f;
            s.presence_penalty = 0.0f;
            s.frequency_penalty = 0.0f;
        }
    }
    if (s.temperature < 0.0f) s.temperature = 0.0f;  // llama.cpp: a temperature <= 0 picks the most likely token
    // A GBNF grammar (docs/grammars.md): parsed when the slot's sampler is set (a 400 there when it does not parse).
    const std::string grammar = string_field(body, "grammar");
    if (!grammar.empty()) s.set_grammar(grammar);
    // A JSON schema: "json_schema", or OpenAI's "response_format" (as llama-server reads them), made into a grammar.
    std::optional<json> schema;
    if (has_field(body, "json_schema") && !body.at("json_schema").is_null()) schema = body.at("json_schema");
    if (has_field(body, "response_format")) {
        const json &rf = body.at("response_format");
        if (!rf.is_object()) throw bad_request("\"response_format\" must be an object");
        const std::string type = string_field(rf, "type");
        // As llama-server's json_value: a missing or null member is {}, any other value is the schema (and a schema
        // that is not one is refused by the converter).
        const auto object_in = [](const json &j, const char *key) {
            return j.is_object() && j.contains(key) && !j.at(key).is_null() ? j.at(key) : json::object();
        };
        if (type == "json_object") schema = object_in(rf, "schema");
        else if (type == "json_schema") schema = object_in(object_in(rf, "json_schema"), "schema");
        else if (!type.empty() && type != "text")
            throw bad_request("response_format type must be one of \"text\" or \"json_object\", but got: " + type);
    }
    if (schema) {
        if (!grammar.empty()) throw bad_request("Either \"json_schema\" or \"grammar\" can be specified, but not both");
        try {
            s.set_grammar(specula::json_schema_to_grammar(schema->dump()));
        } catch (const specula::Error &e) {
            throw bad_request(std::string("\"json_schema\": ") + e.what());
        }
    }
    s.seed = p.seed < 0 ? (uint64_t{std::random_device{}()} << 32 | std::random_device{}()) : uint64_t(p.seed);
    return p;
}

json generation_settings(const CompletionParams &p, int32_t n_ctx) {
    const specula_sampler_options &s = p.sampler;
    return {{"n_ctx", n_ctx},
            {"n_predict", p.n_predict},
            {"n_keep", p.n_keep},
            {"seed", p.seed < 0 ? int64_t(0xFFFFFFFF) : p.seed},
            {"temperature", s.temperature},
            {"top_k", s.top_k},
            {"top_p", s.top_p},
            {"min_p", s.min_p},
            {"repeat_last_n", s.penalty_last_n},
            {"repeat_penalty", s.repeat_penalty},
            {"presence_penalty", s.presence_penalty},
            {"frequency_penalty", s.frequency_penalty},
            {"stop", p.stop},
            {"max_tokens", p.n_predict},
            {"n_indent", p.n_indent},
            {"t_max_predict_ms", p.t_max_predict_ms},
            {"ignore_eos", p.ignore_eos},
            {"stream", p.stream},
            {"cache_prompt", p.cache_prompt},
            {"n_probs", p.n_probs},
            {"post_sampling_probs", p.post_sampling_probs},
            {"grammar", p.sampler.grammar_text()},
            {"samplers", p.has_samplers ? p.samplers : std::vector<std::string>{"penalties", "top_k", "top_p", "min_p", "temperature"}}};
}

const char *stop_type_name(StopType t) {
    switch (t) {
    case StopType::None: return "none";
    case StopType::Eos: return "eos";
    case StopType::Word: return "word";
    case StopType::Limit: return "limit";
    }
    return "none";
}

json Timings::to_json() const {
    auto per = [](double ms, int32_t n) { return n > 0 ? ms / n : 0.0; };
    auto rate = [](double ms, int32_t n) { return ms > 0 ? 1e3 * n / ms : 0.0; };
    json j = {{"cache_n", cache_n},
              {"prompt_n", prompt_n},
              {"prompt_ms", prompt_ms},
              {"prompt_per_token_ms", per(prompt_ms, prompt_n)},
              {"prompt_per_second", rate(prompt_ms, prompt_n)},
              {"predicted_n", predicted_n},
              {"predicted_ms", predicted_ms},
              {"predicted_per_token_ms", per(predicted_ms, predicted_n)},
              {"predicted_per_second", rate(predicted_ms, predicted_n)}};
    // Always present (llama-server leaves them out without drafts): a client can tell "no speculation" from 0 here.
    j["draft_n"] = draft_n;
    j["draft_n_accepted"] = draft_n_accepted;
    return j;
}

HttpError exceeds_context(size_t n_prompt, int32_t n_ctx) {
    return HttpError(ErrorType::ExceedContext, "the request exceeds the available context size (" + std::to_string(n_prompt) +
                                                   " prompt tokens, n_ctx " + std::to_string(n_ctx) + "), try increasing it");
}

std::vector<int32_t> cut_prompt_to_context(const std::vector<int32_t> &prompt, int32_t n_ctx, int32_t n_keep) {
    const int32_t n_prompt = int32_t(prompt.size());
    if (n_prompt < n_ctx) return prompt;
    if (n_keep < 0) n_keep = n_prompt;
    n_keep = std::max(0, std::min(n_ctx - 4, n_keep));
    const int32_t block = std::max(1, (n_ctx - n_keep) / 2);
    const int32_t erased_blocks = (n_prompt - n_keep - block) / block;
    std::vector<int32_t> out(prompt.begin(), prompt.begin() + n_keep);
    out.insert(out.end(), prompt.begin() + n_keep + int64_t(erased_blocks) * block, prompt.end());
    return out;
}

CompletionResult CompletionRunner::run(Slot &slot, const std::vector<int32_t> &whole_prompt, const CompletionParams &params,
                                       const PieceSink &sink, const std::function<bool()> &gone) const {
    CompletionResult r;
    r.id_slot = slot.id;
    r.truncated = params.prompt_trimmed;
    if (whole_prompt.empty()) throw bad_request("the prompt is empty");
    // As llama-server: with context shift on, a prompt that does not fit loses blocks from its middle.
    const std::vector<int32_t> prompt =
        context_shift_ ? cut_prompt_to_context(whole_prompt, slot.n_ctx, params.n_keep) : whole_prompt;
    if (prompt.size() != whole_prompt.size()) r.truncated = true;
    r.prompt_tokens = prompt;
    if (int64_t(prompt.size()) >= slot.n_ctx) throw exceeds_context(prompt.size(), slot.n_ctx);

    specula::Session &s = slot.session;
    const size_t cached = params.cache_prompt ? common_prefix(s.tokens(), prompt) : 0;
    const specula_stats before = s.stats();
    try {
        s.set_sampler(params.sampler);
    } catch (const specula::Error &e) {
        // llama-server's answer to a grammar that does not parse, with the parser's line and column.
        if (e.status() == SPECULA_ERR_INVALID_ARGUMENT && !params.sampler.grammar_text().empty())
            throw bad_request(std::string("Failed to parse grammar: ") + e.what());
        throw;
    }
    s.rewind(int32_t(cached));
    s.append_tokens(prompt.data() + cached, prompt.size() - cached);

    int32_t n_predict = params.n_predict;
    // Without a cap, a shifting context never fills: llama-server stops at the trained context then (truncated).
    bool capped_by_training = false;
    if (n_predict < 0 && context_shift_) {
        n_predict = std::max(1, model_.n_ctx_train() - int32_t(prompt.size()));
        capped_by_training = true;
    }

    // The timings of this request so far (the final ones at the end).
    auto timings_now = [&] {
        const specula_stats now = s.stats();
        Timings t;
        t.cache_n = int32_t(cached);
        t.prompt_n = int32_t(prompt.size() - cached);
        t.prompt_ms = now.prompt_ms - before.prompt_ms;
        t.predicted_n = int32_t(r.tokens.size());
        t.predicted_ms = now.decode_ms - before.decode_ms;
        t.draft_n = now.n_drafted - before.n_drafted;
        t.draft_n_accepted = now.n_accepted - before.n_accepted;
        return t;
    };
    Timings running;
    specula_stop_reason reason = SPECULA_STOP_NONE;
    if (n_predict == 0) {
        // A cache warm-up (llama.vim sends these while the user types): evaluate the prompt, generate nothing.
        try {
            s.evaluate();
            reason = SPECULA_STOP_MAX_TOKENS;
        } catch (const specula::Error &e) {
            if (e.status() != SPECULA_ERR_CANCELLED) throw;
            reason = SPECULA_STOP_CANCELLED;
        }
    } else {
        specula::GenerateOptions go(n_predict);
        go.stop_at_eog = !params.ignore_eos;
        go.stop_strings = params.stop;
        if (params.n_probs > 0) (params.post_sampling_probs ? go.top_probs : go.top_logits) = params.n_probs;
        double t_first = 0;
        size_t last_nl_pos = 0;
        bool own_stop = false;
        reason = s.generate(go, [&](const specula_token_event &ev) {
            const TokenProbs *probs = nullptr;
            if (ev.token != SPECULA_TOKEN_NULL) {
                r.tokens.push_back(ev.token);
                if (t_first == 0) t_first = now_ms();
                if (params.n_probs > 0) {
                    TokenProbs tp;
                    tp.token = ev.token;
                    if (params.post_sampling_probs) {
                        tp.value = ev.token_prob;
                        for (int32_t i = 0; i < ev.n_top_probs; ++i) tp.top.emplace_back(ev.top_prob_ids[i], ev.top_probs[i]);
                    } else {
                        tp.value = ev.token_logit - ev.logsumexp;
                        for (int32_t i = 0; i < ev.n_top; ++i) tp.top.emplace_back(ev.top_ids[i], ev.top_logits[i] - ev.logsumexp);
                    }
                    r.probs.push_back(std::move(tp));
                    probs = &r.probs.back();
                }
            }
            const size_t old_size = r.content.size();
            r.content.append(ev.text, ev.text_len);
            // llama-server's code-completion limits (server_context::process_token), in its order.
            if (r.has_new_line && params.n_indent > 0) {
                if (last_nl_pos > 0) {
                    size_t pos = last_nl_pos;
                    int n_indent = 0;
                    while (pos < r.content.size() && (r.content[pos] == ' ' || r.content[pos] == '\t')) ++n_indent, ++pos;
                    if (pos < r.content.size() && n_indent < params.n_indent) {
                        own_stop = true;
                        r.content.erase(pos);  // cut the line that is indented too little
                    }
                }
                const size_t pos = r.content.find('\n', last_nl_pos);
                if (pos != std::string::npos) last_nl_pos = pos + 1;
            }
            if (std::string_view(ev.text, ev.text_len).find('\n') != std::string_view::npos) {
                r.has_new_line = true;
                if (params.t_max_predict_ms > 0 && now_ms() - t_first > double(params.t_max_predict_ms)) own_stop = true;
            }
            const bool has_text = r.content.size() > old_size;
            if (sink && (has_text || (ev.token != SPECULA_TOKEN_NULL && ev.stop == SPECULA_STOP_NONE && !own_stop))) {
                // (a token whose text is held back still makes an event)
                Piece piece;
                if (has_text) piece.text = r.content.substr(old_size);
                piece.token = ev.token;
                piece.probs = probs;
                if (params.timings_per_token) {
                    running = timings_now();
                    piece.timings = &running;
                }
                if (!sink(piece)) {
                    r.cancelled = true;
                    return false;
                }
            }
            if (gone && gone()) {
                r.cancelled = true;
                return false;
            }
            return !own_stop;
        });
        if (reason == SPECULA_STOP_CALLBACK && own_stop) reason = SPECULA_STOP_MAX_TOKENS;
    }

    switch (reason) {
    case SPECULA_STOP_EOS: r.stop_type = StopType::Eos; break;
    case SPECULA_STOP_STOP_STRING: {
        r.stop_type = StopType::Word;
        // The session cuts the text at the stop string; name the one that matched first in the raw pieces.
        std::string raw;
        for (int32_t t : r.tokens) raw += model_.token_to_piece(t);
        size_t best = std::string::npos;
        for (const std::string &w : params.stop) {
            const size_t at = raw.find(w, std::min(raw.size(), r.content.size() > 0 ? r.content.size() - 1 : 0));
            const size_t first = at != std::string::npos ? at : raw.find(w);
            if (first != std::string::npos && (best == std::string::npos || first < best)) best = first, r.stopping_word = w;
        }
        break;
    }
    case SPECULA_STOP_CONTEXT_FULL:
        r.stop_type = StopType::Limit;
        r.truncated = true;
        break;
    case SPECULA_STOP_CANCELLED:
    case SPECULA_STOP_CALLBACK:
        r.stop_type = StopType::Limit;
        r.cancelled = r.cancelled || reason == SPECULA_STOP_CANCELLED;
        break;
    case SPECULA_STOP_MAX_TOKENS:
        r.stop_type = StopType::Limit;
        r.truncated = r.truncated || (capped_by_training && int32_t(r.tokens.size()) >= n_predict);
        break;
    default: r.stop_type = StopType::Limit; break;
    }

    r.timings = timings_now();
    r.tokens_cached = s.n_tokens();
    return r;
}

}  // namespace specula_serve
