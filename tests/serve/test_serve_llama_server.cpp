// What llama.cpp's own server test suite (release 2025-02-20, examples/server/tests) showed `specula serve` lacked,
// as our own tests: the server-wide sampling flags, the /slots and /metrics switches, ChatML for models without a
// template, several prompts in one request, the token ids of streamed chunks, the n_predict cap reported, the
// OpenAI model name and fingerprint, -c divided among the slots, and context shift. Runs on the bundled model.
#include "server_process.h"

using namespace serve_test;

namespace {

std::vector<int32_t> tokenize(httplib::Client &c, const std::string &content, bool add_special) {
    const Reply r = post(c, "/tokenize", json{{"content", content}, {"add_special", add_special}});
    REQUIRE(r.status == 200);
    return r.data.at("tokens").get<std::vector<int32_t>>();
}

std::string long_text() {
    std::string text;
    for (int i = 0; i < 40; ++i) text += "Lily and Tom went to the park to play with the big red ball. ";
    return text;
}

}  // namespace

TEST_CASE("--temp, --seed and the other sampling flags are the defaults of requests that leave them out", "[serve]") {
    ServerProcess server({"-m", bundled_model(), "-c", "256", "--temp", "0", "--seed", "42", "--top-k", "7", "-n", "16", "--slots"});
    auto c = server.client();
    const Reply props = get(c, "/props");
    REQUIRE(props.status == 200);
    const json &settings = props.data["default_generation_settings"]["params"];
    CHECK(settings["temperature"] == 0.0);
    CHECK(settings["seed"] == 42);
    CHECK(settings["top_k"] == 7);
    CHECK(settings["n_predict"] == 16);
    CHECK(get(c, "/slots").data[0]["params"]["seed"] == 42);

    // At --temp 0 a request without a temperature is greedy: twice the same text, and what temperature 0 gives.
    const json prompt = {{"prompt", "Once upon a time"}};
    const Reply a = post(c, "/completion", prompt), b = post(c, "/completion", prompt);
    REQUIRE(a.status == 200);
    CHECK(a.data["content"] == b.data["content"]);
    CHECK(a.data["content"] == post(c, "/completion", json{{"prompt", "Once upon a time"}, {"temperature", 0}}).data["content"]);
    // The cap that applied is the one reported: the request's 256 within the server's -n 16.
    const Reply capped = post(c, "/completion", json{{"prompt", "Once upon a time"}, {"n_predict", 256}});
    CHECK(capped.data["generation_settings"]["n_predict"] == 16);
    CHECK(capped.data["generation_settings"]["seed"] == 42);
    CHECK(capped.data["tokens_predicted"] == 16);
    // A request's own fields still win.
    CHECK(post(c, "/completion", json{{"prompt", "x"}, {"n_predict", 1}, {"seed", 7}}).data["generation_settings"]["seed"] == 7);
}

TEST_CASE("/slots and /metrics answer 501 unless --slots and --metrics turn them on, as llama-server", "[serve]") {
    ServerProcess server({"-m", bundled_model(), "-c", "128"});
    auto c = server.client();
    check_error(get(c, "/slots"), 501, "not_supported_error");
    check_error(get(c, "/metrics"), 501, "not_supported_error");
    CHECK(get(c, "/props").data["endpoint_slots"] == false);
    CHECK(get(c, "/props").data["endpoint_metrics"] == false);
    CHECK(post(c, "/slots/0?action=erase", std::string()).status == 200);  // the slot actions do not need --slots
}

TEST_CASE("a model without a chat template chats in ChatML, content parts joined by newlines", "[serve]") {
    // stories260K has no tokenizer.chat_template: llama-server falls back to ChatML, so must we.
    ServerProcess server({"-m", bundled_model(), "-c", "256"});
    auto c = server.client();
    CHECK(server.log().find("the model has no chat template: chats use chatml") != std::string::npos);
    const json messages = {{{"role", "system"}, {"content", "Book"}},
                           {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "What is"}}, {{"type", "text"}, {"text", "the best book"}}}}}};
    const Reply applied = post(c, "/apply-template", json{{"messages", messages}});
    REQUIRE(applied.status == 200);
    CHECK(applied.data["prompt"] ==
          "<|im_start|>system\nBook<|im_end|>\n<|im_start|>user\nWhat is\nthe best book<|im_end|>\n<|im_start|>assistant\n");
    const Reply chat = post(c, "/v1/chat/completions", json{{"messages", messages}, {"max_tokens", 4}, {"temperature", 0}});
    REQUIRE(chat.status == 200);
    CHECK(chat.data["usage"]["prompt_tokens"] == tokenize(c, applied.data["prompt"], true).size());
    // OpenAI responses name the model the request named, else the --alias, else gpt-3.5-turbo; the fingerprint is
    // llama-server's "b<build>-<commit>" shape.
    CHECK(chat.data["model"] == "gpt-3.5-turbo");
    CHECK(chat.data["system_fingerprint"].get<std::string>().rfind("b", 0) == 0);
    CHECK(post(c, "/v1/chat/completions", json{{"messages", messages}, {"max_tokens", 1}, {"model", "codellama70b"}}).data["model"] ==
          "codellama70b");

    // Streamed: every chunk before the last has delta.content (the first one "" beside the role), the last one
    // the usage.
    const Reply streamed = post(c, "/v1/chat/completions", json{{"messages", messages}, {"max_tokens", 4}, {"temperature", 0}, {"stream", true}});
    REQUIRE(streamed.status == 200);
    std::string text;
    json last;
    for (const std::string &d : sse_data(streamed.body)) {
        if (d == "[DONE]") break;
        const json chunk = json::parse(d);
        const json &choice = chunk["choices"][0];
        if (choice["finish_reason"].is_null()) {
            REQUIRE(choice["delta"]["content"].is_string());
            text += choice["delta"]["content"].get<std::string>();
        }
        last = chunk;
    }
    CHECK(text == chat.data["choices"][0]["message"]["content"]);
    CHECK(last["usage"]["completion_tokens"] == 4);
    CHECK(last["usage"]["prompt_tokens"] == chat.data["usage"]["prompt_tokens"]);
}

TEST_CASE("several prompts in one request get one answer each, in order, as each alone gets it", "[serve]") {
    ServerProcess server({"-m", bundled_model(), "-c", "256", "--temp", "0"});
    auto c = server.client();
    const std::vector<int32_t> ids = tokenize(c, "Once upon a time", true);
    const std::string other = "The little dog";
    const Reply one = post(c, "/completion", json{{"prompt", ids}, {"n_predict", 8}});
    const Reply two = post(c, "/completion", json{{"prompt", other}, {"n_predict", 8}});
    REQUIRE(one.status == 200);

    const Reply both = post(c, "/completion", json{{"prompt", {ids, other}}, {"n_predict", 8}});
    REQUIRE(both.status == 200);
    REQUIRE(both.data.is_array());
    REQUIRE(both.data.size() == 2);
    CHECK(both.data[0]["index"] == 0);
    CHECK(both.data[1]["index"] == 1);
    CHECK(both.data[0]["content"] == one.data["content"]);
    CHECK(both.data[1]["content"] == two.data["content"]);
    // Strings only: several prompts too. Ids and strings in one flat array: one prompt.
    const Reply strings = post(c, "/completion", json{{"prompt", {"Once upon a time", other}}, {"n_predict", 8}});
    REQUIRE(strings.data.is_array());
    CHECK(strings.data[1]["content"] == two.data["content"]);
    const Reply mixed = post(c, "/completion", json{{"prompt", {1, 2, 3, "Once upon a time"}}, {"n_predict", 2}});
    CHECK(mixed.data.is_object());
    // OpenAI's /v1/completions answers an array too (llama-server's shape), and streams each with its index.
    const Reply oai = post(c, "/v1/completions", json{{"prompt", {"Once upon a time", other}}, {"max_tokens", 8}});
    REQUIRE(oai.data.is_array());
    CHECK(oai.data[1]["choices"][0]["text"] == two.data["content"]);
    const Reply stream = post(c, "/completion", json{{"prompt", {ids, other}}, {"n_predict", 8}, {"stream", true}});
    std::string texts[2];
    for (const std::string &d : sse_data(stream.body)) texts[json::parse(d)["index"].get<int>()] += json::parse(d)["content"].get<std::string>();
    CHECK(texts[0] == one.data["content"]);
    CHECK(texts[1] == two.data["content"]);
}

TEST_CASE("streamed /completion chunks carry their token ids, as llama-server's", "[serve]") {
    ServerProcess server({"-m", bundled_model(), "-c", "256", "--temp", "0"});
    auto c = server.client();
    const Reply whole = post(c, "/completion", json{{"prompt", "Once upon a time"}, {"n_predict", 12}, {"return_tokens", true}});
    REQUIRE(whole.status == 200);
    const Reply stream = post(c, "/completion", json{{"prompt", "Once upon a time"}, {"n_predict", 12}, {"stream", true}});
    std::vector<int32_t> ids;
    for (const std::string &d : sse_data(stream.body)) {
        const json chunk = json::parse(d);
        if (chunk["stop"] == true) break;
        REQUIRE(chunk["tokens"].size() == 1);
        ids.push_back(chunk["tokens"][0].get<int32_t>());
    }
    CHECK(ids == whole.data["tokens"].get<std::vector<int32_t>>());
}

TEST_CASE("context shift: a long prompt is cut as llama-server cuts it, and generation goes past a full context", "[serve]") {
    // -c 256 over 2 slots: 128 tokens each, as llama-server divides -c.
    ServerProcess server({"-m", bundled_model(), "-c", "256", "--parallel", "2", "--temp", "0", "--slots"});
    auto c = server.client();
    CHECK(get(c, "/slots").data[0]["n_ctx"] == 128);
    const std::vector<int32_t> ids = tokenize(c, long_text(), true);
    REQUIRE(ids.size() > 256);
    const Reply cut = post(c, "/completion", json{{"prompt", long_text()}, {"n_predict", 64}});
    REQUIRE(cut.status == 200);
    // n_keep 0: whole blocks of (128 - 0) / 2 = 64 tokens are dropped after the first n_keep, the end kept.
    const int32_t n = int32_t(ids.size()), erased = (n - 64) / 64 * 64;
    CHECK(cut.data["timings"]["prompt_n"] == n - erased);
    CHECK(cut.data["truncated"] == true);
    // 64 tokens from a prompt of more than 64 in 128: the context shifted on the way, and the output is the one
    // plain greedy decoding of the cut prompt gives on a slot of 128 (the server's speculation is lossless).
    CHECK(cut.data["tokens_predicted"] == 64);
    const std::vector<int32_t> kept(ids.end() - (n - erased), ids.end());
    CHECK(post(c, "/completion", json{{"prompt", kept}, {"n_predict", 64}, {"cache_prompt", false}}).data["content"] == cut.data["content"]);

    // --no-context-shift: the long prompt is refused, a short one stops at the end of its context.
    ServerProcess fixed({"-m", bundled_model(), "-c", "256", "--parallel", "2", "--temp", "0", "--no-context-shift"});
    auto f = fixed.client();
    check_error(post(f, "/completion", json{{"prompt", long_text()}, {"n_predict", 64}}), 400, "exceed_context_size_error");
    const Reply full = post(f, "/completion", json{{"prompt", "Hi how are you"}, {"n_predict", -1}, {"ignore_eos", true}});
    REQUIRE(full.status == 200);
    CHECK(full.data["truncated"] == true);
    CHECK(full.data["tokens_evaluated"].get<int>() + full.data["tokens_predicted"].get<int>() == 128);
}
