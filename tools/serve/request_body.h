// The request bodies of the prompt-taking endpoints read into what the server acts on: the JSON object itself, the
// prompt tokens of /completion, /v1/completions and /v1/chat/completions, the chat messages (/apply-template too),
// and the answers of /tokenize and /detokenize. Free functions of the model and the body, with no HTTP in them, so
// that server.cpp's handlers and the fuzz target tests/fuzz/fuzz_serve_request.cpp run the same checks. Every
// malformed body is a 400 (HttpError) with llama-server's message where it has one.
#pragma once

#include "json_fields.h"

#include <specula/specula.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace specula_serve {

// A request body: a JSON object within json_limits.h's bounds (checked before it is parsed), else a 400.
json parse_json_body(const std::string &text);

// The text of an OpenAI message's content: a string, or an array of text parts joined with newlines (as llama.cpp's
// common_chat_msgs_to_json_oaicompat joins them for templates that take a string).
std::string message_content(const json &content);

// "messages" as (role, content) pairs, for Model::apply_chat_template.
std::vector<std::pair<std::string, std::string>> chat_messages(const json &body);

// The prompts of /completion (oai = false) and /v1/completions (oai = true, with the OpenAI parameters Specula
// refuses), as llama-server's tokenize_input_prompts reads "prompt": a string, or one array of token ids and
// strings, is one prompt; any other array holds several (strings, or arrays of ids and strings), each answered in
// turn. BOS and special tokens parsed. At most 64 prompts.
std::vector<std::vector<int32_t>> completion_prompts(const specula::Model &model, const json &body, bool oai);

// chat_template_kwargs.enable_thinking (llama-server's way to switch Qwen3's thinking off): nullopt when absent.
std::optional<bool> enable_thinking(const json &body);
// The messages through the chat template (chat_template as in chat_prompt), with the body's thinking switch.
// jinja: the template's own Jinja (--jinja) rather than its built-in family.
std::string chat_text(const specula::Model &model, const json &body, const std::string &chat_template, bool jinja);
// The prompt of /v1/chat/completions: the messages through the chat template (chat_template as
// `specula serve --chat-template` names it), tokenized with BOS and special tokens parsed.
std::vector<int32_t> chat_prompt(const specula::Model &model, const json &body, const std::string &chat_template, bool jinja);

// /tokenize's answer, {"tokens": [...]}: ids, or {"id", "piece"} objects with "with_pieces" (a piece that is not
// UTF-8 on its own given as its bytes).
json tokenize_response(const specula::Model &model, const json &body);

// /detokenize's answer, {"content": "..."}.
json detokenize_response(const specula::Model &model, const json &body);

}  // namespace specula_serve
