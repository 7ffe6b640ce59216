// serve_request: the request layer of `specula serve` (tools/serve) on arbitrary request bodies, in process (no
// HTTP). Input: a request body (JSON text, any bytes). What each endpoint does with a body before and around
// generation runs on it, through the server's own functions:
//   every body: request_body.cpp's parse_json_body (server.cpp's parse_body on the request's text), then
//     json_fields.cpp's typed reads through parse_completion_params (/completion, /infill and the OpenAI endpoints)
//     and generation_settings;
//   /completion and /v1/completions: request_body.cpp's completion_prompt (the "prompt" checks, then
//     prompt_tokens.cpp's tokenize_mixed: strings, token ids, mixed arrays, out-of-range ids);
//   /v1/chat/completions and /apply-template: request_body.cpp's chat_prompt and chat_messages (role, string or
//     text-part content) through the model's chat template (chatml, as `specula serve --chat-template chatml`);
//   /infill: infill_prompt.cpp's parse_infill_input, and format_infill + tools/common/fim_prompt.h on a model with
//     FIM tokens (a synthetic tiny-llama with ../shared/fixtures' deepseek-coder vocabulary, made once at start;
//     without the fixtures that part is left out and says so once);
//   /tokenize and /detokenize: request_body.cpp's tokenize_response and detokenize_response (with_pieces, ids out
//     of range);
//   then one generation of at most 4 tokens (completion.cpp's CompletionRunner with the request's sampler, stop
//     strings, n_indent, ...) on a fresh 64-token session of models/stories260K.gguf when the prompt fits, and the
//     response bodies of responses.cpp (completion, OpenAI completion and chat, response_fields) serialised.
// The checks are in serve_body_checks.h, shared with serve_json (bodies built structure first: deep, wide, large).
// Expected outcomes: HttpError (a 4xx answer), specula::Error other than INTERNAL. Anything else (a
// nlohmann::json exception: a 500 where a 400 was due) is reported as a crash.
#include "serve_body_checks.h"

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    serve_fuzz::load_models("serve_request");
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    serve_fuzz::check_body(std::string(reinterpret_cast<const char *>(data), size));
    return 0;
}
