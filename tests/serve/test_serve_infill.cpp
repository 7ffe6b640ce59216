// /infill as the IDE plugins use it: llama.vim's and llama.vscode's request bodies replayed byte for byte, the FIM
// prompt checked token for token against llama-server's format, greedy output against `specula generate` on those
// tokens, and the slot cache serving a one-line edit by evaluating only the changed tail.
#include "fim_model.h"
#include "infill_prompt.h"
#include "llama_vim_requests.h"

#include <specula/specula.hpp>

using namespace serve_test;

namespace {

// A Python file around the cursor, and two ring chunks from other files, as llama.vim gathers them.
const std::string kPrefix =
    "import json\nimport os\n\n\ndef load_config(path):\n    \"\"\"Read a JSON config file.\"\"\"\n    with open(path) as f:\n"
    "        data = json.load(f)\n    for key in (\"name\", \"version\"):\n        if key not in data:\n";
const std::string kMiddle = "            raise ";
const std::string kSuffix = "\n    return data\n\n\ndef save_config(path, data):\n    with open(path, \"w\") as f:\n        json.dump(data, f)\n";
// llama.vim's ring chunks: {text, time: reltime() (a [seconds, microseconds] list in JSON), filename}.
const json kExtra = json::array({{{"text", "def read_text(path):\n    with open(path) as f:\n        return f.read()\n"},
                                  {"time", {1732400000, 250000}},
                                  {"filename", "utils/io.py"}},
                                 {{"text", "class ConfigError(Exception):\n    pass\n"}, {"time", {1732400003, 500000}}, {"filename", "errors.py"}}});

// llama.vim's FIM request (autoload/llama.vim, llama#fim), with its default configuration.
json llama_vim_body() { return llama_vim_fim_body(kPrefix, kMiddle, kSuffix, kExtra, 12); }

// llama.vim's ring-buffer warm-up (llama#ring_update): evaluates the extra context, generates nothing.
json llama_vim_warmup_body() { return serve_test::llama_vim_warmup_body(kExtra); }

// llama.vscode's chunks carry time as Date.now() (milliseconds).
json vscode_chunks() {
    json chunks = kExtra;
    for (json &c : chunks) c["time"] = 1732400000250LL;
    return chunks;
}

// llama.vscode's /infill request (src/llama-server.ts, createRequestPayload with its defaultRequestParams and
// default configuration); n_cmpl asks newer llama-servers for 3 completions, read back as one here.
json llama_vscode_body() {
    return {{"id_slot", 0},
            {"input_prefix", kPrefix},
            {"input_suffix", kSuffix},
            {"input_extra", vscode_chunks()},
            {"prompt", kMiddle},
            {"n_predict", 128},
            {"n_cmpl", 3},
            {"top_k", 40},
            {"top_p", 0.99},
            {"stream", false},
            {"samplers", {"top_k", "top_p", "infill"}},
            {"cache_prompt", true},
            {"n_indent", 12},
            {"t_max_prompt_ms", 500},
            {"t_max_predict_ms", 2500}};
}

// llama.vscode's warm-up (updateExtraContext -> createRequestPayload(noPredict = true)).
json llama_vscode_warmup_body() {
    return {{"id_slot", 0},        {"input_prefix", ""},     {"input_suffix", ""},     {"input_extra", vscode_chunks()},
            {"prompt", ""},        {"n_predict", 0},         {"samplers", json::array()}, {"cache_prompt", true},
            {"t_max_prompt_ms", 500}, {"t_max_predict_ms", 1}};
}

// The prompt llama-server builds for the snippet form (no FIM_REP/FIM_SEP), written out independently of the server.
std::vector<int32_t> expected_snippet_prompt(const specula::Model &m, const json &extra, const std::string &prefix,
                                             const std::string &middle, const std::string &suffix) {
    auto tok = [&](const std::string &s) { return m.tokenize(s, 0); };
    auto add = [](std::vector<int32_t> &to, const std::vector<int32_t> &from) { to.insert(to.end(), from.begin(), from.end()); };
    std::vector<int32_t> out;
    for (const json &c : extra) {
        add(out, tok("\n\n--- snippet ---\n\n"));
        add(out, tok(c["text"].get<std::string>()));
    }
    if (m.add_bos()) out.push_back(m.token_bos());
    out.push_back(m.token_fim(SPECULA_FIM_PRE));
    add(out, tok(prefix));
    add(out, m.tokenize(middle, SPECULA_TOKENIZE_PARSE_SPECIAL));
    out.push_back(m.token_fim(SPECULA_FIM_SUF));
    add(out, tok(suffix));
    out.push_back(m.token_fim(SPECULA_FIM_MID));
    return out;
}

}  // namespace

TEST_CASE("a model without FIM tokens answers /infill with a clear 400", "[serve][infill]") {
    ServerProcess server({"-m", bundled_model(), "-c", "256"});
    auto c = server.client();
    const Reply r = post(c, "/infill", llama_vim_body());
    check_error(r, 400, "invalid_request_error");
    CHECK(r.data["error"]["message"].get<std::string>().find("Infill is not supported by this model") == 0);
}

TEST_CASE("llama.vim's warm-up and FIM requests, replayed, get the fields llama.vim reads", "[serve][infill]") {
    ScratchDir dir;
    const std::string model = make_fim_model(dir, "deepseek-coder");
    ServerProcess server({"-m", model, "-c", "2048", "-b", "512", "-t", "1"});
    auto c = server.client();

    CHECK(get(c, "/props").data["infill"] == true);
    const Reply warm = post(c, "/infill", llama_vim_warmup_body());
    INFO(warm.body);
    REQUIRE(warm.status == 200);
    CHECK(warm.data == json::object());  // response_fields [""] keeps nothing, as in llama-server

    const Reply fim = post(c, "/infill", llama_vim_body());
    INFO(fim.body);
    REQUIRE(fim.status == 200);
    for (const char *k : {"content", "timings/prompt_n", "timings/prompt_ms", "timings/prompt_per_token_ms", "timings/prompt_per_second",
                          "timings/predicted_n", "timings/predicted_ms", "timings/predicted_per_token_ms",
                          "timings/predicted_per_second", "truncated", "tokens_cached"})
        CHECK(fim.data.contains(k));
    CHECK(fim.data.size() == 11);
    CHECK(fim.data["content"].is_string());
    CHECK(fim.data["truncated"] == false);
    // The warm-up cached the ring chunks: the FIM request evaluated only what follows them.
    const specula::Model vocab = specula::Model::load(model, [] {
        specula::ModelOptions o;
        o.vocab_only = true;
        return o;
    }());
    const std::vector<int32_t> prompt = expected_snippet_prompt(vocab, kExtra, kPrefix, kMiddle, kSuffix);
    CHECK(fim.data["timings/prompt_n"].get<int>() < int(prompt.size()) - 20);
    CHECK(fim.data["tokens_cached"].get<int>() >= int(prompt.size()));

    const Reply vscode_warm = post(c, "/infill", llama_vscode_warmup_body());
    REQUIRE(vscode_warm.status == 200);
    CHECK(vscode_warm.data["tokens_predicted"] == 0);
    CHECK(vscode_warm.data["content"] == "");
    const Reply vscode = post(c, "/infill", llama_vscode_body());
    INFO(vscode.body);
    REQUIRE(vscode.status == 200);
    for (const char *k : {"content", "tokens", "id_slot", "stop", "model", "tokens_predicted", "tokens_evaluated", "generation_settings",
                          "prompt", "has_new_line", "truncated", "stop_type", "stopping_word", "tokens_cached", "timings"})
        CHECK(vscode.data.contains(k));
    CHECK(vscode.data["tokens_evaluated"] == int(prompt.size()));
    CHECK(vscode.data["generation_settings"]["n_indent"] == 12);
}

TEST_CASE("the llama-server command line of llama.vim's README starts the server, each llama-server flag mapped or ignored "
          "with a line, and FIM requests are served",
          "[serve][infill]") {
    // llama.vim's README: llama-server --fim-qwen-7b-default, or -hf ... --port 8012 -ngl 99 -fa -ub 1024 -b 1024
    // --ctx-size 0 --cache-reuse 256; its wiki adds -dt 0.1, the server docs -np and -ctk/-ctv.
    ScratchDir dir;
    const std::string model = make_fim_model(dir, "deepseek-coder");
    ServerProcess server({"-m", model, "-ngl", "99", "-fa", "-ub", "1024", "-b", "1024", "--ctx-size", "0", "--cache-reuse", "256", "-dt",
                          "0.1", "-np", "1", "-ctk", "q8_0", "-ctv", "q8_0", "--draft-max", "16", "--jinja", "-t", "1"});
    const std::string log = server.log();
    INFO(log);
    for (const char *line : {"specula serve: -ngl 99 ignored: the whole model runs on the --backend device",
                             "specula serve: -fa ignored: attention is always fused", "specula serve: -ub 1024 ignored:",
                             "specula serve: --cache-reuse 256 ignored:", "specula serve: -dt 0.1 ignored:",
                             "specula serve: -np 1 read as --parallel 1", "specula serve: -ctk q8_0 read as --kv-type q8_0",
                             "specula serve: --draft-max 16 ignored:"})
        CHECK(log.find(line) != std::string::npos);
    auto c = server.client();
    REQUIRE(post(c, "/infill", llama_vim_warmup_body()).status == 200);
    const Reply fim = post(c, "/infill", llama_vim_body());
    INFO(fim.body);
    CHECK(fim.status == 200);
    CHECK(fim.data["content"].is_string());
    // --ctx-size 0: the model's trained context (over the one slot), as llama-server gives.
    const specula::Model loaded = specula::Model::load(model);
    REQUIRE(loaded.n_ctx_train() > 0);
    CHECK(get(c, "/props").data["default_generation_settings"]["n_ctx"].get<int>() == loaded.n_ctx_train());
    {
        // Divided among the slots, as llama-server divides it (not given, each slot gets min(trained, 4096)).
        ServerProcess two({"-m", model, "-c", "0", "-np", "2", "-t", "1"});
        auto c2 = two.client();
        CHECK(get(c2, "/props").data["default_generation_settings"]["n_ctx"].get<int>() == loaded.n_ctx_train() / 2);
    }

    // Different key and value types, and flags that download a model, are refused with a message and exit status 2.
    for (const std::vector<std::string> &refused : std::vector<std::vector<std::string>>{
             {"-ctk", "q8_0", "-ctv", "f16"}, {"-hf", "ggml-org/Qwen2.5-Coder-1.5B-Q8_0-GGUF"}, {"--fim-qwen-7b-default"}}) {
        std::vector<std::string> argv = {SPECULA_CLI, "serve", "-m", model, "--port", "0"};
        argv.insert(argv.end(), refused.begin(), refused.end());
        int status = 0;
        run_command(argv, &status);
        INFO(refused.front());
        CHECK(WIFEXITED(status));
        CHECK(WEXITSTATUS(status) == 2);
    }
}

TEST_CASE("a full ring of extra context never pushes an /infill prompt past n_ctx: whole chunks go, oldest first, and "
          "truncated says so",
          "[serve][infill]") {
    // llama-server's budgets (prefix 3/4 of -b, suffix 1/4, extra n_ctx - n_batch + 2) can add up to n_ctx + 4:
    // llama.vim, once its ring of chunks filled, got 400 exceed_context_size_error on every request.
    ScratchDir dir;
    const std::string model = make_fim_model(dir, "deepseek-coder");
    ServerProcess server({"-m", model, "-c", "1024", "-b", "512", "-t", "1"});
    auto c = server.client();
    std::string prefix, suffix;
    for (int i = 0; i < 120; ++i) prefix += "    total_" + std::to_string(i) + " = total_" + std::to_string(i) + " + 1\n";
    for (int i = 0; i < 60; ++i) suffix += "    return value_" + std::to_string(i) + "\n";
    json ring = json::array();
    for (int k = 0; k < 24; ++k) {
        std::string text;
        for (int i = 0; i < 8; ++i) text += "def chunk_" + std::to_string(k) + "_" + std::to_string(i) + "(x): return x * " + std::to_string(i) + "\n";
        ring.push_back({{"filename", "file" + std::to_string(k) + ".py"}, {"text", text}});
    }
    const json body = {{"input_prefix", prefix}, {"input_suffix", suffix}, {"input_extra", ring}, {"n_predict", 64}, {"temperature", 0}};
    const Reply r = post(c, "/infill", body);
    INFO(r.body.substr(0, 2000));
    REQUIRE(r.status == 200);
    CHECK(r.data["truncated"] == true);
    CHECK(r.data["tokens_evaluated"].get<int>() <= 1024 - 64);
    const std::string prompt = r.data["prompt"].get<std::string>();
    CHECK(prompt.rfind("\n\n--- snippet ---\n\n", 0) == 0);  // starts with a whole chunk
    CHECK(prompt.find("def chunk_23_7(x)") != std::string::npos);  // the newest chunk is kept
    CHECK(prompt.find("def chunk_0_0(x)") == std::string::npos);   // the oldest is gone

    // Without the ring the same request fits: nothing is dropped.
    json small = body;
    small["input_extra"] = json::array({ring[23]});
    const Reply fits = post(c, "/infill", small);
    REQUIRE(fits.status == 200);
    CHECK(fits.data["truncated"] == false);
}

TEST_CASE("/infill builds llama-server's FIM prompt and at temperature 0 generates what specula generate does", "[serve][infill]") {
    ScratchDir dir;
    const std::string model = make_fim_model(dir, "deepseek-coder");
    ServerProcess server({"-m", model, "-c", "2048", "-b", "512", "-t", "1"});
    auto c = server.client();
    const specula::Model vocab = specula::Model::load(model, [] {
        specula::ModelOptions o;
        o.vocab_only = true;
        return o;
    }());
    REQUIRE(vocab.token_fim(SPECULA_FIM_REP) == SPECULA_TOKEN_NULL);  // the snippet form

    json body = llama_vim_body();
    body.erase("samplers");
    body.erase("response_fields");
    body["temperature"] = 0;
    body["n_indent"] = 0;
    body["t_max_predict_ms"] = 0;
    body["n_predict"] = 40;
    body["ignore_eos"] = true;
    body["return_tokens"] = true;
    const Reply r = post(c, "/infill", body);
    INFO(r.body);
    REQUIRE(r.status == 200);
    const std::vector<int32_t> prompt = expected_snippet_prompt(vocab, kExtra, kPrefix, kMiddle, kSuffix);
    CHECK(r.data["tokens_evaluated"] == int(prompt.size()));
    CHECK(r.data["prompt"] == vocab.detokenize(prompt, true));
    const std::vector<int32_t> expected = cli_greedy_tokens(model, prompt, 40, 2048);
    // The CLI stops at EOS where the request said ignore_eos: compare what both produced.
    const std::vector<int32_t> got = r.data["tokens"].get<std::vector<int32_t>>();
    REQUIRE(!expected.empty());
    CHECK(std::vector<int32_t>(got.begin(), got.begin() + std::min(got.size(), expected.size())) == expected);

    // Streamed: the same text.
    body["stream"] = true;
    const Reply s = post(c, "/infill", body);
    REQUIRE(s.status == 200);
    std::string streamed;
    for (const std::string &e : sse_data(s.body)) streamed += json::parse(e)["content"].get<std::string>();
    CHECK(streamed == r.data["content"].get<std::string>());
}

TEST_CASE("after a one-line edit /infill evaluates only the changed tail and answers as a cold request", "[serve][infill]") {
    ScratchDir dir;
    const std::string model = make_fim_model(dir, "deepseek-coder");
    ServerProcess server({"-m", model, "-c", "2048", "-b", "512", "-t", "1"});
    auto c = server.client();
    json body = llama_vim_body();
    body.erase("samplers");
    body.erase("response_fields");
    body["temperature"] = 0;
    body["n_indent"] = 0;
    body["t_max_predict_ms"] = 0;
    body["n_predict"] = 24;
    body["return_tokens"] = true;

    const Reply first = post(c, "/infill", body);
    REQUIRE(first.status == 200);
    const int full = first.data["tokens_evaluated"];
    CHECK(first.data["timings"]["prompt_n"] == full);  // cold: everything evaluated

    // The user edits the last line of the prefix.
    body["input_prefix"] = kPrefix.substr(0, kPrefix.rfind("        if key")) + "        if key not in data or not data[key]:\n";
    const Reply edited = post(c, "/infill", body);
    INFO(edited.body);
    REQUIRE(edited.status == 200);
    const int evaluated = edited.data["timings"]["prompt_n"];
    const int cached = edited.data["timings"]["cache_n"];
    CHECK(cached + evaluated == edited.data["tokens_evaluated"].get<int>());
    CHECK(cached > 0);
    CHECK(evaluated < edited.data["tokens_evaluated"].get<int>() / 3);
    CHECK(edited.data["tokens_cached"].get<int>() == edited.data["tokens_evaluated"].get<int>() + int(edited.data["tokens"].size()));

    // The same request cold (cache_prompt false re-evaluates the whole prompt): the same tokens.
    body["cache_prompt"] = false;
    const Reply cold = post(c, "/infill", body);
    REQUIRE(cold.status == 200);
    CHECK(cold.data["timings"]["cache_n"] == 0);
    CHECK(cold.data["timings"]["prompt_n"] == cold.data["tokens_evaluated"]);
    CHECK(cold.data["tokens"] == edited.data["tokens"]);
    CHECK(cold.data["content"] == edited.data["content"]);
}

TEST_CASE("the repository FIM form of a Qwen2.5-Coder vocabulary, token budgets included", "[serve][infill]") {
    const std::filesystem::path vocab_path = require_fixture("tokenizer/ggml-vocab-qwen2.gguf");
    specula::ModelOptions o;
    o.vocab_only = true;
    const specula::Model m = specula::Model::load(vocab_path.string(), o);
    const int32_t pre = m.token_fim(SPECULA_FIM_PRE), suf = m.token_fim(SPECULA_FIM_SUF), mid = m.token_fim(SPECULA_FIM_MID),
                  rep = m.token_fim(SPECULA_FIM_REP), sep = m.token_fim(SPECULA_FIM_SEP);
    CHECK(m.token_text(pre) == "<|fim_prefix|>");
    CHECK(m.token_text(suf) == "<|fim_suffix|>");
    CHECK(m.token_text(mid) == "<|fim_middle|>");
    CHECK(m.token_text(rep) == "<|repo_name|>");
    CHECK(m.token_text(sep) == "<|file_sep|>");

    auto tok = [&](const std::string &s) { return m.tokenize(s, 0); };
    auto add = [](std::vector<int32_t> &to, const std::vector<int32_t> &from) { to.insert(to.end(), from.begin(), from.end()); };
    specula_serve::InfillInput in = specula_serve::parse_infill_input(llama_vim_body());
    REQUIRE(in.input_extra.size() == 2);
    CHECK(in.input_extra[0].filename == "utils/io.py");

    // Budgets large enough for everything: [FIM_REP]myproject\n {[FIM_SEP]file\n text} [FIM_SEP]filename\n, then
    // (no BOS: Qwen2 does not add one) [FIM_PRE]prefix prompt [FIM_SUF]suffix [FIM_MID].
    std::vector<int32_t> extra;
    extra.push_back(rep);
    add(extra, tok("myproject\n"));
    for (const json &chunk : kExtra) {
        extra.push_back(sep);
        add(extra, tok(chunk["filename"].get<std::string>() + "\n"));
        add(extra, tok(chunk["text"].get<std::string>()));
    }
    extra.push_back(sep);
    add(extra, tok("filename\n"));
    const std::vector<int32_t> prefix = tok(kPrefix), suffix = tok(kSuffix), middle = m.tokenize(kMiddle, SPECULA_TOKENIZE_PARSE_SPECIAL);
    std::vector<int32_t> expected = extra;
    CHECK_FALSE(m.add_bos());
    expected.push_back(pre);
    add(expected, prefix);
    add(expected, middle);
    expected.push_back(suf);
    add(expected, suffix);
    expected.push_back(mid);
    CHECK(specula_serve::format_infill(m, in, {2048, -1, 8192}) == expected);

    // Tight budgets (n_batch 64, n_ctx 100, n_predict 10): the prefix keeps its last 48 tokens, the suffix its first
    // 16 - 2 - |prompt|, the extra context its last 100 - 64 - 20 = 16 tokens.
    const int n_suffix = std::max(0, 16 - 2 - int(middle.size()));
    std::vector<int32_t> tight(extra.end() - 16, extra.end());
    tight.push_back(pre);
    tight.insert(tight.end(), prefix.end() - 48, prefix.end());
    add(tight, middle);
    tight.push_back(suf);
    tight.insert(tight.end(), suffix.begin(), suffix.begin() + std::min<int>(n_suffix, int(suffix.size())));
    tight.push_back(mid);
    CHECK(specula_serve::format_infill(m, in, {64, 10, 100}) == tight);
}

TEST_CASE("malformed /infill fields get llama-server's messages", "[serve][infill]") {
    ScratchDir dir;
    const std::string model = make_fim_model(dir, "deepseek-coder");
    ServerProcess server({"-m", model, "-c", "512", "-t", "1"});
    auto c = server.client();
    auto message = [&](const json &body) {
        const Reply r = post(c, "/infill", body);
        check_error(r, 400, "invalid_request_error");
        return r.data["error"]["message"].get<std::string>();
    };
    CHECK(message({{"input_suffix", ""}}) == "\"input_prefix\" is required");
    CHECK(message({{"input_prefix", ""}}) == "\"input_suffix\" is required");
    CHECK(message({{"input_prefix", ""}, {"input_suffix", ""}, {"prompt", 5}}) == "\"prompt\" must be a string");
    CHECK(message({{"input_prefix", ""}, {"input_suffix", ""}, {"input_extra", "x"}}) ==
          "\"input_extra\" must be an array of {\"filename\": string, \"text\": string}");
    CHECK(message({{"input_prefix", ""}, {"input_suffix", ""}, {"input_extra", {{{"filename", "a"}}}}}) ==
          "extra_context chunk must contain a \"text\" field with a string value");
    CHECK(message({{"input_prefix", ""}, {"input_suffix", ""}, {"input_extra", {{{"text", "a"}, {"filename", 3}}}}}) ==
          "extra_context chunk's \"filename\" field must be a string");
    CHECK(get(c, "/health").status == 200);
}
