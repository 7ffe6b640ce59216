#include "request_body.h"

#include "json_limits.h"
#include "prompt_tokens.h"
#include "utf8_check.h"

#include <algorithm>

namespace specula_serve {

using specula_apps::valid_utf8;

json parse_json_body(const std::string &text) {
    // Bounded before any tree exists: depth, values, sizes (json_limits.h).
    const std::string violation = json_limits_violation(text);
    if (!violation.empty()) throw bad_request(violation);
    json body = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (body.is_discarded()) throw bad_request("the request body is not valid JSON");
    if (!body.is_object()) throw bad_request("the request body must be a JSON object");
    return body;
}

std::string message_content(const json &content) {
    if (content.is_null()) return "";
    if (content.is_string()) return content.get<std::string>();
    if (!content.is_array()) throw bad_request("a message's \"content\" must be a string or an array of content parts");
    std::string text;
    for (const json &part : content) {
        if (!part.is_object() || part.value("type", std::string()) != "text" || !part.contains("text") || !part.at("text").is_string())
            throw bad_request("only text content parts ({\"type\": \"text\", \"text\": ...}) are supported");
        if (!text.empty()) text += '\n';
        text += part.at("text").get<std::string>();
    }
    return text;
}

std::vector<std::pair<std::string, std::string>> chat_messages(const json &body) {
    if (!body.contains("messages") || !body.at("messages").is_array() || body.at("messages").empty())
        throw bad_request("\"messages\" must be a non-empty array of {\"role\", \"content\"}");
    if (body.at("messages").size() > 4096) throw bad_request("\"messages\": too many messages");
    std::vector<std::pair<std::string, std::string>> out;
    for (const json &m : body.at("messages")) {
        if (!m.is_object() || !m.contains("role") || !m.at("role").is_string())
            throw bad_request("each message must be an object with a string \"role\"");
        out.emplace_back(m.at("role").get<std::string>(), message_content(m.value("content", json())));
    }
    return out;
}

std::vector<std::vector<int32_t>> completion_prompts(const specula::Model &model, const json &body, bool oai) {
    if (oai) {
        if (body.contains("echo") && body.at("echo").is_boolean() && body.at("echo").get<bool>()) throw bad_request("Only no echo is supported");
        for (const char *unsupported : {"best_of", "suffix"})
            if (body.contains(unsupported) && !body.at(unsupported).is_null()) throw bad_request(std::string("Unsupported param: ") + unsupported);
        if (int_field(body, "n", 1, 1, 1 << 20) != 1) throw bad_request("Only one completion choice is allowed");
    }
    if (!body.contains("prompt") || body.at("prompt").is_null()) throw bad_request("\"prompt\" is required");
    const json &p = body.at("prompt");  // read in place: request JSON is never copied
    std::vector<std::vector<int32_t>> prompts;
    // One prompt: a string, or a flat array with at least one id (ids, or ids and strings). Any other array: a list.
    const bool flat = p.is_array() && std::all_of(p.begin(), p.end(), [](const json &x) { return x.is_string() || x.is_number_integer(); });
    const bool has_id = p.is_array() && std::any_of(p.begin(), p.end(), [](const json &x) { return x.is_number_integer(); });
    if (p.is_array() && !p.empty() && !(flat && has_id)) {
        if (p.size() > 64) throw bad_request("\"prompt\": at most 64 prompts in one request");
        for (const json &one : p) {
            if (!one.is_string() && !one.is_array())
                throw bad_request("\"prompt\": each of several prompts must be a string or an array of token ids and strings");
            prompts.push_back(tokenize_mixed(model, one, true, true, "prompt"));
        }
    } else {
        prompts.push_back(tokenize_mixed(model, p, true, true, "prompt"));
    }
    return prompts;
}

std::optional<bool> enable_thinking(const json &body) {
    if (!has_field(body, "chat_template_kwargs")) return std::nullopt;
    const json &kwargs = body.at("chat_template_kwargs");
    if (!kwargs.is_object()) throw bad_request("\"chat_template_kwargs\" must be an object");
    if (!has_field(kwargs, "enable_thinking")) return std::nullopt;
    if (!kwargs.at("enable_thinking").is_boolean()) throw bad_request("\"chat_template_kwargs.enable_thinking\" must be a boolean");
    return kwargs.at("enable_thinking").get<bool>();
}

std::string chat_text(const specula::Model &model, const json &body, const std::string &chat_template, bool jinja) {
    return model.apply_chat_template(chat_messages(body), chat_template, true, enable_thinking(body), jinja);
}

std::vector<int32_t> chat_prompt(const specula::Model &model, const json &body, const std::string &chat_template, bool jinja) {
    if (int_field(body, "n", 1, 1, 1 << 20) != 1) throw bad_request("Only one completion choice is allowed");
    const std::string text = chat_text(model, body, chat_template, jinja);
    return model.tokenize(text, SPECULA_TOKENIZE_ADD_SPECIAL | SPECULA_TOKENIZE_PARSE_SPECIAL);
}

json tokenize_response(const specula::Model &model, const json &body) {
    json tokens = json::array();
    if (body.contains("content") && !body.at("content").is_null()) {
        const bool add_special = bool_field(body, "add_special", false);
        const bool parse_special = bool_field(body, "parse_special", true);
        const bool with_pieces = bool_field(body, "with_pieces", false);
        const std::vector<int32_t> ids = tokenize_mixed(model, body.at("content"), add_special, parse_special, "content");
        if (!with_pieces) {
            tokens = ids;
        } else {
            for (const int32_t id : ids) {
                const std::string piece = model.token_to_piece(id, true);
                json p;
                if (valid_utf8(piece)) {
                    p = piece;
                } else {
                    p = json::array();  // not UTF-8 on its own (part of a character): its bytes
                    for (const unsigned char c : piece) p.push_back(int(c));
                }
                tokens.push_back({{"id", id}, {"piece", p}});
            }
        }
    }
    return {{"tokens", tokens}};
}

json detokenize_response(const specula::Model &model, const json &body) {
    std::string content;
    if (body.contains("tokens") && !body.at("tokens").is_null()) {
        const json &t = body.at("tokens");
        if (!t.is_array()) throw bad_request("\"tokens\" must be an array of token ids");
        const int32_t n_vocab = model.n_vocab();
        for (const json &id : t) {
            if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= n_vocab)
                throw bad_request("\"tokens\" must hold token ids in [0, " + std::to_string(n_vocab) + ")");
            content += model.token_to_piece(int32_t(id.get<int64_t>()), true);
        }
    }
    return {{"content", content}};
}

}  // namespace specula_serve
