#include "infill_prompt.h"

#include "prompt_tokens.h"

#include <algorithm>

namespace specula_serve {

std::string infill_unsupported_reason(const specula::Model &model) {
    std::string err;
    if (model.token_fim(SPECULA_FIM_PRE) == SPECULA_TOKEN_NULL) err += "prefix token is missing. ";
    if (model.token_fim(SPECULA_FIM_SUF) == SPECULA_TOKEN_NULL) err += "suffix token is missing. ";
    if (model.token_fim(SPECULA_FIM_MID) == SPECULA_TOKEN_NULL) err += "middle token is missing. ";
    return err;
}

InfillInput parse_infill_input(const json &body) {
    InfillInput in;
    if (body.contains("prompt") && !body.at("prompt").is_string()) throw bad_request("\"prompt\" must be a string");
    if (!body.contains("input_prefix")) throw bad_request("\"input_prefix\" is required");
    if (!body.contains("input_suffix")) throw bad_request("\"input_suffix\" is required");
    auto mixed = [](const json &v, const char *name) {
        if (v.is_string() || v.is_array()) return v;
        throw bad_request(std::string("\"") + name + "\" must be a string or an array of strings and token ids");
    };
    in.input_prefix = mixed(body.at("input_prefix"), "input_prefix");
    in.input_suffix = mixed(body.at("input_suffix"), "input_suffix");
    in.prompt = body.value("prompt", std::string());
    if (body.contains("input_extra") && !body.at("input_extra").is_null()) {
        const json &extra = body.at("input_extra");
        if (!extra.is_array())
            throw bad_request("\"input_extra\" must be an array of {\"filename\": string, \"text\": string}");
        for (const json &chunk : extra) {
            if (!chunk.is_object() || !chunk.contains("text") || !chunk.at("text").is_string())
                throw bad_request("extra_context chunk must contain a \"text\" field with a string value");
            InfillInput::Chunk c;
            c.text = chunk.at("text").get<std::string>();
            if (chunk.contains("filename")) {
                if (!chunk.at("filename").is_string()) throw bad_request("extra_context chunk's \"filename\" field must be a string");
                c.filename = chunk.at("filename").get<std::string>();
            }
            in.input_extra.push_back(std::move(c));
        }
    }
    return in;
}

std::vector<int32_t> format_infill(const specula::Model &model, const InfillInput &in, const InfillBudget &budget) {
    const int32_t fim_pre = model.token_fim(SPECULA_FIM_PRE), fim_suf = model.token_fim(SPECULA_FIM_SUF),
                  fim_mid = model.token_fim(SPECULA_FIM_MID), fim_rep = model.token_fim(SPECULA_FIM_REP),
                  fim_sep = model.token_fim(SPECULA_FIM_SEP);
    auto plain = [&](const std::string &text) { return model.tokenize(text, 0); };  // no BOS, no special parsing
    auto append = [](std::vector<int32_t> &to, const std::vector<int32_t> &from) { to.insert(to.end(), from.begin(), from.end()); };

    std::vector<int32_t> extra;
    if (fim_rep != SPECULA_TOKEN_NULL) {
        extra.push_back(fim_rep);
        append(extra, plain("myproject\n"));
    }
    for (const InfillInput::Chunk &chunk : in.input_extra) {
        if (fim_sep != SPECULA_TOKEN_NULL) {
            extra.push_back(fim_sep);
            append(extra, plain(chunk.filename + "\n"));
        } else {
            append(extra, plain("\n\n--- snippet ---\n\n"));
        }
        append(extra, plain(chunk.text));
    }
    if (fim_sep != SPECULA_TOKEN_NULL) {
        extra.push_back(fim_sep);
        append(extra, plain("filename\n"));
    }

    std::vector<int32_t> prefix = tokenize_mixed(model, in.input_prefix, false, false, "input_prefix");
    std::vector<int32_t> suffix = tokenize_mixed(model, in.input_suffix, false, false, "input_suffix");
    // The prompt is tokenized with special tokens parsed, as llama-server's tokenize_input_prompts(..., false, true).
    const std::vector<int32_t> prompt = model.tokenize(in.prompt, SPECULA_TOKENIZE_PARSE_SPECIAL);

    // Integer arithmetic exactly as llama-server's (ints, n_batch/4 rounding down).
    const int n_batch = budget.n_batch;
    const int n_prefix_take = std::min<int>(int(prefix.size()), 3 * (n_batch / 4));
    const int n_suffix_take = std::min<int>(int(suffix.size()), std::max<int>(0, (n_batch / 4) - (2 + int(prompt.size()))));
    const int n_extra_take =
        std::min<int>(std::max<int>(0, budget.n_ctx - n_batch - 2 * budget.n_predict), int(extra.size()));

    prefix.erase(prefix.begin(), prefix.begin() + (int(prefix.size()) - n_prefix_take));
    suffix.resize(size_t(n_suffix_take));
    prefix.insert(prefix.begin(), fim_pre);
    append(prefix, prompt);
    suffix.insert(suffix.begin(), fim_suf);

    std::vector<int32_t> out;
    out.reserve(size_t(n_extra_take) + prefix.size() + suffix.size() + 2);
    out.insert(out.end(), extra.end() - n_extra_take, extra.end());
    if (model.add_bos() && model.token_bos() != SPECULA_TOKEN_NULL) out.push_back(model.token_bos());
    append(out, prefix);
    append(out, suffix);
    out.push_back(fim_mid);
    return out;
}

}  // namespace specula_serve
