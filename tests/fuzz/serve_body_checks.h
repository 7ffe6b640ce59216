// The request layer of `specula serve` run on one request body, as fuzz_serve_request.cpp's header describes: shared
// by serve_request (the body is the fuzz input) and serve_json (the body is built from the input, structure first).
#pragma once

#include "fuzz_common.h"

#include "completion.h"
#include "http_error.h"
#include "infill_prompt.h"
#include "json_fields.h"
#include "request_body.h"
#include "responses.h"
#include "slot_pool.h"

#include <specula/specula.hpp>
#include <specula/specula_experimental.h>

#include <cstdlib>
#include <memory>
#include <unistd.h>

namespace serve_fuzz {

using namespace specula_serve;

inline std::unique_ptr<specula::Model> g_model;
inline std::unique_ptr<specula::Model> g_fim_model;  // nullptr without the fixtures
constexpr int32_t kNCtx = 64;
constexpr int32_t kMaxGenerated = 4;

// Runs fn; HttpError and non-INTERNAL specula::Error are the answers a client gets. Returns whether fn succeeded.
template <typename Fn> inline bool answer(Fn &&fn) {
    try {
        fn();
        return true;
    } catch (const HttpError &e) {
        (void)dump(error_json(e.type, e.what()));
        return false;
    } catch (const specula::Error &e) {
        if (e.status() == SPECULA_ERR_INTERNAL) {
            std::fprintf(stderr, "fuzz: INTERNAL error: %s\n", e.what());
            __builtin_trap();
        }
        return false;
    }
}

inline void generate(const std::vector<int32_t> &prompt, const CompletionParams &params, bool chat) {
    if (prompt.empty() || int32_t(prompt.size()) >= kNCtx) return;
    specula::SessionOptions so;
    so.n_ctx = kNCtx;
    so.n_threads = 1;
    so.backend = SPECULA_BACKEND_CPU;
    so.allow_fallback = 0;
    Slot slot{0, specula::Session(*g_model, so), {}, false, 0, kNCtx};
    const CompletionRunner runner(*g_model, /*context_shift=*/false);
    CompletionParams p = params;
    p.t_max_predict_ms = 0;  // time-dependent stops would make inputs irreproducible
    size_t pieces = 0;
    const CompletionResult r = runner.run(slot, prompt, p, [&](const Piece &) { return ++pieces < 64; }, [] { return false; });
    FUZZ_CHECK(int32_t(r.tokens.size()) <= kMaxGenerated);
    ResponseContext ctx;
    ctx.model = "fuzz";
    ctx.n_ctx = kNCtx;
    ctx.id = chat ? "chatcmpl-fuzz" : "cmpl-fuzz";
    ctx.prompt_text = g_model->detokenize(prompt, true);
    ctx.model_vocab = g_model.get();
    ctx.post_sampling_probs = p.post_sampling_probs;
    (void)dump(completion_final(r, p, ctx));
    (void)dump(oai_completion_final(r, ctx));
    (void)dump(oai_chat_final(r, ctx));
    (void)dump(oai_usage_chunk(r, ctx, chat));
    if (!p.response_fields.empty()) (void)dump(pick_response_fields(p.response_fields, completion_final(r, p, ctx)));
}


// Loads the models once (LLVMFuzzerInitialize).
inline void load_models(const char *target) {
    const std::string model = fuzz::require_file(fuzz::source_dir() / "models" / "stories260K.gguf", "serve_request's model");
    g_model = std::make_unique<specula::Model>(specula::Model::load(model));
    const std::filesystem::path vocab = fuzz::fixtures_dir() / "tokenizer" / "ggml-vocab-deepseek-coder.gguf";
    if (std::filesystem::is_regular_file(vocab)) {
        // A model with FIM tokens for /infill's prompt (tests/serve/fim_model.h's recipe), written once, loaded, removed.
        char dir[] = "/tmp/specula-fuzz-XXXXXX";
        if (mkdtemp(dir) != nullptr) {
            const std::string path = std::string(dir) + "/fim.gguf";
            specula_synthetic_options opts;
            specula_synthetic_options_init(&opts);
            opts.n_layer = 1;
            specula_error *err = nullptr;
            if (specula_synthetic_model_write("tiny-llama", vocab.c_str(), path.c_str(), &opts, &err) == SPECULA_OK) {
                g_fim_model = std::make_unique<specula::Model>(specula::Model::load(path));
            }
            specula_error_destroy(err);
            std::filesystem::remove_all(dir);
        }
    }
    if (!g_fim_model)
        std::printf("%s: no FIM model (%s is missing): /infill prompts are not built\n", target, vocab.c_str());
}


// What every endpoint does with the body `text`. Returns whether it parsed as a request body.
inline bool check_body(const std::string &text) {
    json body;
    if (!answer([&] { body = parse_json_body(text); })) return false;

    CompletionParams params;
    // The server's -n is kMaxGenerated here: every request's n_predict is capped by it.
    if (!answer([&] { params = parse_completion_params(body, SamplingDefaults(), kMaxGenerated); })) return false;
    (void)dump(generation_settings(params, kNCtx));

    std::vector<std::vector<int32_t>> completion, oai_completion;
    std::vector<int32_t> chat;
    answer([&] { completion = completion_prompts(*g_model, body, false); });
    answer([&] { oai_completion = completion_prompts(*g_model, body, true); });
    answer([&] { chat = chat_prompt(*g_model, body, "chatml", false); });
    answer([&] {  // --jinja: ChatML's Jinja gives the built-in family's tokens for any messages
        const std::vector<int32_t> rendered = chat_prompt(*g_model, body, "chatml", true);
        FUZZ_CHECK(rendered == chat_prompt(*g_model, body, "chatml", false));
    });
    answer([&] { (void)dump(json{{"prompt", g_model->apply_chat_template(chat_messages(body), true, "chatml")}}); });
    answer([&] {
        (void)infill_unsupported_reason(*g_model);
        const InfillInput in = parse_infill_input(body);
        if (g_fim_model) {
            FUZZ_CHECK(infill_unsupported_reason(*g_fim_model).empty());
            const std::vector<int32_t> prompt = format_infill(*g_fim_model, in, InfillBudget{2048, params.n_predict, 4096});
            for (const int32_t id : prompt) FUZZ_CHECK(id >= 0 && id < g_fim_model->n_vocab());
        }
    });
    answer([&] { (void)dump(tokenize_response(*g_model, body)); });
    answer([&] { (void)dump(detokenize_response(*g_model, body)); });

    // One generation, for the endpoint the body is shaped for.
    const bool is_chat = body.contains("messages");
    answer([&] {
        if (is_chat) generate(chat, params, true);
        for (size_t i = 0; i < std::min<size_t>(completion.size(), 4); ++i) generate(completion[i], params, false);
    });
    return true;
}

}  // namespace serve_fuzz
