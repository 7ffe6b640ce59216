#include "infill_prompt.h"

#include "prompt_tokens.h"

namespace specula_serve {

std::string infill_unsupported_reason(const specula::Model &model) { return specula_apps::fim_unsupported_reason(model); }

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

std::vector<int32_t> format_infill(const specula::Model &model, const InfillInput &in, const InfillBudget &budget, bool *trimmed) {
    specula_apps::FimParts parts;
    parts.extra = in.input_extra;
    parts.prefix = tokenize_mixed(model, in.input_prefix, false, false, "input_prefix");
    parts.suffix = tokenize_mixed(model, in.input_suffix, false, false, "input_suffix");
    // The prompt is tokenized with special tokens parsed, as llama-server's tokenize_input_prompts(..., false, true).
    parts.prompt = model.tokenize(in.prompt, SPECULA_TOKENIZE_PARSE_SPECIAL);
    return specula_apps::fim_prompt(model, parts, budget, trimmed);
}

}  // namespace specula_serve
