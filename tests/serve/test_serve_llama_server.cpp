// What llama.cpp's own server test suite (release 2025-02-20, examples/server/tests) showed `specula serve` lacked,
// as our own tests: the server-wide sampling flags, the /slots and /metrics switches, ChatML for models without a
// template, several prompts in one request, the token ids of streamed chunks, the n_predict cap reported, the
// OpenAI model name and fingerprint, -c divided among the slots, and context shift. Runs on the bundled model.
#include "server_process.h"

#include <cmath>
#include <fstream>

using namespace serve_test;

namespace {

std::string long_text() {
    std::string text;
    for (int i = 0; i < 40; ++i) text += "Lily and Tom went to the park to play with the big red ball. ";
    return text;
}

}  // namespace

TEST_CASE("the sampling flags (--temp, --seed, ...) are the defaults of requests that leave them out", "[serve]") {
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

TEST_CASE("n_probs and OpenAI logprobs report each token's probabilities, streamed or not", "[serve]") {
    ServerProcess server({"-m", bundled_model(), "-c", "256", "--temp", "0"});
    auto c = server.client();
    const Reply r = post(c, "/completion", json{{"prompt", "Once upon a time"}, {"n_predict", 5}, {"n_probs", 10}});
    REQUIRE(r.status == 200);
    const json &probs = r.data["completion_probabilities"];
    REQUIRE(probs.size() == 5);
    std::string text;
    for (const json &tok : probs) {
        CHECK(tok["logprob"].get<double>() <= 0.0);
        REQUIRE(tok["top_logprobs"].size() == 10);
        // Greedy: the token is the most likely one, and the log-probabilities come in order and sum below 1.
        CHECK(tok["top_logprobs"][0]["id"] == tok["id"]);
        CHECK(tok["top_logprobs"][0]["logprob"] == tok["logprob"]);
        double mass = 0.0;
        for (size_t k = 0; k < 10; ++k) {
            mass += std::exp(tok["top_logprobs"][k]["logprob"].get<double>());
            if (k > 0) CHECK(tok["top_logprobs"][k]["logprob"] <= tok["top_logprobs"][k - 1]["logprob"]);
        }
        CHECK(mass <= 1.0 + 1e-6);
        std::string bytes;
        for (const json &b : tok["bytes"]) bytes += char(b.get<int>());
        CHECK(bytes == tok["token"]);  // stories260K's pieces are whole characters
        text += tok["token"].get<std::string>();
    }
    CHECK(text == r.data["content"]);

    // After the sampler chain: greedy leaves the argmax alone with p = 1.
    const Reply post_sampling =
        post(c, "/completion", json{{"prompt", "Once upon a time"}, {"n_predict", 5}, {"n_probs", 4}, {"post_sampling_probs", true}});
    for (const json &tok : post_sampling.data["completion_probabilities"]) {
        CHECK(tok["prob"] == 1.0);
        REQUIRE(tok["top_probs"].size() == 4);
        CHECK(tok["top_probs"][0]["prob"] == 1.0);
        CHECK(tok["top_probs"][1]["prob"] == 0.0);
    }

    // Streamed: one report per chunk, the same as the whole response's.
    const Reply stream = post(c, "/completion", json{{"prompt", "Once upon a time"}, {"n_predict", 5}, {"n_probs", 10}, {"stream", true}});
    json streamed = json::array();
    for (const std::string &d : sse_data(stream.body)) {
        const json chunk = json::parse(d);
        if (chunk["stop"] == true) break;
        REQUIRE(chunk["completion_probabilities"].size() == 1);
        streamed.push_back(chunk["completion_probabilities"][0]);
    }
    CHECK(streamed == probs);

    // OpenAI chat: logprobs + top_logprobs; the tokens' texts make the reply. top_logprobs alone is refused.
    const json messages = {{{"role", "user"}, {"content", "Tell me a story"}}};
    const Reply chat = post(c, "/v1/chat/completions", json{{"messages", messages}, {"max_tokens", 5}, {"logprobs", true}, {"top_logprobs", 3}});
    REQUIRE(chat.status == 200);
    const json &content = chat.data["choices"][0]["logprobs"]["content"];
    REQUIRE(content.size() == 5);
    std::string reply;
    for (const json &tok : content) {
        reply += tok["token"].get<std::string>();
        CHECK(tok["top_logprobs"].size() == 3);
    }
    CHECK(reply == chat.data["choices"][0]["message"]["content"]);
    CHECK(post(c, "/v1/chat/completions", json{{"messages", messages}, {"max_tokens", 1}}).data["choices"][0].contains("logprobs") == false);
    check_error(post(c, "/v1/chat/completions", json{{"messages", messages}, {"top_logprobs", 3}}), 400, "invalid_request_error");
    // OpenAI text completions: logprobs is a number there.
    const Reply oai = post(c, "/v1/completions", json{{"prompt", "Once upon a time"}, {"max_tokens", 5}, {"logprobs", 2}});
    CHECK(oai.data["choices"][0]["logprobs"]["content"].size() == 5);
    CHECK(post(c, "/v1/completions", json{{"prompt", "Once"}, {"max_tokens", 1}}).data["choices"][0]["logprobs"].is_null());
    // Streamed chat: every chunk before the last has its token's logprobs (the first one the role too).
    const Reply chat_stream = post(c, "/v1/chat/completions",
                                   json{{"messages", messages}, {"max_tokens", 5}, {"logprobs", true}, {"top_logprobs", 3}, {"stream", true}});
    std::string streamed_reply;
    int chunks = 0;
    for (const std::string &d : sse_data(chat_stream.body)) {
        if (d == "[DONE]") break;
        const json chunk = json::parse(d);
        const json &choice = chunk["choices"][0];
        if (!choice["finish_reason"].is_null()) break;
        if (chunks++ == 0) CHECK(choice["delta"]["role"] == "assistant");
        REQUIRE(choice["logprobs"]["content"].size() == 1);
        streamed_reply += choice["logprobs"]["content"][0]["token"].get<std::string>();
    }
    CHECK(streamed_reply == reply);
}

TEST_CASE("timings_per_token puts the timings so far in every streamed chunk", "[serve]") {
    ServerProcess server({"-m", bundled_model(), "-c", "256", "--temp", "0"});
    auto c = server.client();
    const Reply stream = post(c, "/v1/chat/completions", json{{"messages", {{{"role", "user"}, {"content", "test"}}}},
                                                                {"max_tokens", 10}, {"stream", true}, {"timings_per_token", true}});
    int n = 0, last_predicted = 0;
    for (const std::string &d : sse_data(stream.body)) {
        if (d == "[DONE]") break;
        const json chunk = json::parse(d);
        REQUIRE(chunk.contains("timings"));
        const int predicted = chunk["timings"]["predicted_n"];
        CHECK(predicted <= 10);
        CHECK(predicted >= last_predicted);
        CHECK(chunk["timings"].contains("prompt_per_second"));
        last_predicted = predicted;
        ++n;
    }
    CHECK(n >= 2);
    CHECK(last_predicted == 10);
}

TEST_CASE("with -v, OpenAI responses carry llama-server's __verbose: the prompt as the model saw it", "[serve]") {
    ServerProcess server({"-m", bundled_model(), "-c", "256", "--chat-template", "llama3", "-v"});
    auto c = server.client();
    const json messages = {{{"role", "system"}, {"content", "Book"}}, {{"role", "user"}, {"content", "What is the best book"}}};
    const Reply r = post(c, "/v1/chat/completions", json{{"messages", messages}, {"max_tokens", 4}});
    REQUIRE(r.status == 200);
    REQUIRE(r.data.contains("__verbose"));
    CHECK(r.data["__verbose"]["prompt"] ==
          "<s> <|start_header_id|>system<|end_header_id|>\n\nBook<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWhat is the best "
          "book<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
    CHECK(r.data["__verbose"]["tokens_predicted"] == 4);
    // Without -v: no such field.
    ServerProcess quiet({"-m", bundled_model(), "-c", "256"});
    auto q = quiet.client();
    CHECK_FALSE(post(q, "/v1/chat/completions", json{{"messages", messages}, {"max_tokens", 1}}).data.contains("__verbose"));
}

// A seed means the same text on the server too (docs/speculative.md): the same sampled request gives plain
// sampling's content whether the server drafts with the trained LongSpec draft and n-grams (automatic tree), with
// n-grams alone or not at all, and on either of two slots.
TEST_CASE("a seeded sampled request gets the same text with and without a drafter, on any slot", "[serve][seed]") {
    const std::string draft = std::string(SPECULA_SOURCE_DIR) + "/models/drafts/stories260K.longspec.gguf";
    const json body = {{"prompt", "Once upon a time, there was a little dog"}, {"n_predict", 64}, {"temperature", 0.9},
                       {"seed", 1234}, {"cache_prompt", false}};
    std::vector<std::string> texts;
    for (const std::vector<std::string> &flags : std::vector<std::vector<std::string>>{
             {"--spec", "none"}, {"--spec", "ngram"}, {"--draft", draft}, {"--draft", draft, "--tree", "1,1,1,1"}}) {
        std::vector<std::string> args = {"-m", bundled_model(), "-c", "1024", "-np", "2"};
        args.insert(args.end(), flags.begin(), flags.end());
        ServerProcess server(args);
        auto c = server.client();
        for (int slot : {0, 1}) {
            json b = body;
            b["id_slot"] = slot;
            const Reply r = post(c, "/completion", b);
            INFO(flags.back() << " slot " << slot << ": " << r.body.substr(0, 300));
            REQUIRE(r.status == 200);
            CHECK(r.data["tokens_predicted"] == 64);
            texts.push_back(r.data["content"].get<std::string>());
        }
    }
    for (size_t i = 1; i < texts.size(); ++i) {
        INFO("run " << i);
        CHECK(texts[i] == texts[0]);
    }
    CHECK(!texts[0].empty());
}

TEST_CASE("a grammar or a JSON schema constrains /completion and /v1/chat/completions, with a drafter too, and a bad one is a 400",
          "[serve][grammar]") {
    const std::string draft = std::string(SPECULA_SOURCE_DIR) + "/models/drafts/stories260K.longspec.gguf";
    for (const std::vector<std::string> &flags : std::vector<std::vector<std::string>>{{"--spec", "none"}, {"--draft", draft, "--spec", "ngram"}}) {
        std::vector<std::string> args = {"-m", bundled_model(), "-c", "512"};
        args.insert(args.end(), flags.begin(), flags.end());
        ServerProcess server(args);
        auto c = server.client();
        // llama-server's own case (test_completion_with_grammar): five a's, then the end, within 6 tokens.
        const Reply five = post(c, "/completion", json{{"prompt", "Once upon a time"}, {"n_predict", 6}, {"temperature", 0},
                                                       {"grammar", "root ::= \"a\"{5,5}"}});
        INFO(flags.back() << ": " << five.body.substr(0, 400));
        REQUIRE(five.status == 200);
        CHECK(five.data["content"] == "aaaaa");
        CHECK(five.data["stop_type"] == "eos");
        CHECK(five.data["generation_settings"]["grammar"] == "root ::= \"a\"{5,5}");
        // Sampled, in a chat: one of the grammar's words.
        const Reply chat = post(c, "/v1/chat/completions",
                                json{{"messages", {{{"role", "user"}, {"content", "Yes or no?"}}}}, {"max_tokens", 8}, {"temperature", 1.0}, {"seed", 3},
                                     {"grammar", "root ::= (\"yes\" | \"no\") \".\""}});
        REQUIRE(chat.status == 200);
        const std::string answer = chat.data["choices"][0]["message"]["content"];
        CHECK((answer == "yes." || answer == "no."));
        const Reply bad = post(c, "/completion", json{{"prompt", "x"}, {"n_predict", 4}, {"grammar", "root ::= (\"a\""}});
        CHECK(bad.status == 400);
        CHECK_THAT(bad.body, Catch::Contains("Failed to parse grammar") && Catch::Contains("never closed"));
        // JSON schemas: "json_schema", and OpenAI's response_format (json_schema and json_object).
        const json schema = {{"type", "object"},
                             {"properties", {{"n", {{"type", "integer"}, {"minimum", 1}, {"maximum", 9}}}}},
                             {"required", {"n"}}};
        const Reply schema_reply = post(c, "/completion", json{{"prompt", "Once upon a time"}, {"n_predict", 32}, {"temperature", 0}, {"json_schema", schema}});
        REQUIRE(schema_reply.status == 200);
        const json value = json::parse(schema_reply.data["content"].get<std::string>());
        CHECK((value.is_object() && value.size() == 1 && value["n"].is_number_integer() && value["n"] >= 1 && value["n"] <= 9));
        const json messages = {{{"role", "user"}, {"content", "Give me a number as JSON."}}};
        const Reply formatted = post(c, "/v1/chat/completions",
                                     json{{"messages", messages}, {"max_tokens", 32}, {"temperature", 0},
                                          {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "n"}, {"schema", schema}}}}}});
        REQUIRE(formatted.status == 200);
        CHECK(json::parse(formatted.data["choices"][0]["message"]["content"].get<std::string>()) == value);
        const Reply object = post(c, "/v1/chat/completions", json{{"messages", messages}, {"max_tokens", 48}, {"temperature", 0},
                                                                   {"response_format", {{"type", "json_object"}}}});
        REQUIRE(object.status == 200);
        if (object.data["choices"][0]["finish_reason"] == "stop")  // a whole object within the tokens
            CHECK(json::parse(object.data["choices"][0]["message"]["content"].get<std::string>()).is_object());
        CHECK(post(c, "/v1/chat/completions", json{{"messages", messages}, {"response_format", {{"type", "xml"}}}}).status == 400);
        CHECK(post(c, "/v1/chat/completions", json{{"messages", messages}, {"response_format", {{"type", "json_object"}, {"schema", 123}}}}).status == 400);
        CHECK(post(c, "/completion", json{{"prompt", "x"}, {"grammar", "root ::= \"a\""}, {"json_schema", schema}}).status == 400);
        // A string pattern constrains the string (grammar/json_pattern.h); one it cannot translate is a 400.
        const Reply pattern = post(c, "/completion", json{{"prompt", "x"}, {"n_predict", 8}, {"temperature", 0},
                                                          {"json_schema", {{"type", "string"}, {"pattern", "^a[bc]$"}}}});
        REQUIRE(pattern.status == 200);
        const std::string text = pattern.data["content"].get<std::string>();
        INFO(text);
        CHECK((text.rfind("\"ab\"", 0) == 0 || text.rfind("\"ac\"", 0) == 0));
        const Reply backreference =
            post(c, "/completion", json{{"prompt", "x"}, {"json_schema", {{"type", "string"}, {"pattern", "^(a)\\1$"}}}});
        CHECK(backreference.status == 400);
        CHECK_THAT(backreference.body, Catch::Contains("json_schema") && Catch::Contains("backreferences"));
    }
}

// llama-server's text for a seed: by default `specula serve` draws sampled tokens as llama.cpp does (std::mt19937 and
// std::discrete_distribution, SPECULA_DRAW_LLAMA_CPP), so a seeded request gets the tokens llama-server gave for it
// (tests/api/data/llama_cpp_sampling: llama-server 2025-02-20 on this model), with the server's n-gram drafter on;
// `--draw race` draws Specula's race instead (other tokens for the seed).
TEST_CASE("a seeded request gets llama-server's sampled tokens, drafting or not, and --draw race draws others", "[serve][sampling]") {
    std::ifstream in(SPECULA_SOURCE_DIR "/tests/api/data/llama_cpp_sampling/stories260K.json");
    REQUIRE(in);
    const json refs = json::parse(in);
    // An F32 KV cache, as the references were made (their make_references.py says why).
    ServerProcess server({"-m", bundled_model(), "-c", "512", "--kv-type", "f32", "--slots"});
    ServerProcess race({"-m", bundled_model(), "-c", "512", "--kv-type", "f32", "--draw", "race"});
    auto c = server.client();
    auto r = race.client();
    int checked = 0, differ = 0;
    for (const json &ref : refs["cases"]) {
        if (ref["settings"] != "defaults" && ref["settings"] != "penalties") continue;  // the others: tests/api
        json body = ref["sampler"];
        body["prompt"] = ref["prompt"];
        body["n_predict"] = ref["tokens"].size();
        body["return_tokens"] = true;
        INFO(ref["settings"] << ", seed " << ref["sampler"]["seed"] << ": llama-server's \"" << ref["text"].get<std::string>() << "\"");
        const Reply got = post(c, "/completion", body);
        REQUIRE(got.status == 200);
        CHECK(got.data["tokens"] == ref["tokens"]);
        CHECK(got.data["content"] == ref["text"]);
        const Reply other = post(r, "/completion", body);
        REQUIRE(other.status == 200);
        differ += other.data["tokens"] != ref["tokens"];
        ++checked;
    }
    CHECK(checked == 18);
    CHECK(differ > 0);
}

// llama-server's test_slot_save.py: n_saved and n_restored are the tokens of the slot's KV cache, the prompt and the
// generated tokens but the last (sampled, never evaluated); the snapshot holds that one too, so a restore continues.
TEST_CASE("n_saved and n_restored count the tokens of the cache, as llama-server: the prompt and all generated tokens but the last",
          "[serve]") {
    ScratchDir dir;
    ServerProcess server({"-m", bundled_model(), "-c", "512", "-np", "2", "--temp", "0", "--slot-save-path", (dir.path / "slots").string()});
    auto c = server.client();
    const Reply done = post(c, "/completion", json{{"prompt", "What is the capital of France?"}, {"id_slot", 1}, {"n_predict", 24}});
    REQUIRE(done.status == 200);
    const int prompt_n = done.data["timings"]["prompt_n"].get<int>(), predicted_n = done.data["timings"]["predicted_n"].get<int>();
    REQUIRE(predicted_n == 24);
    const Reply saved = post(c, "/slots/1?action=save", json{{"filename", "slot1.bin"}});
    REQUIRE(saved.status == 200);
    CHECK(saved.data["n_saved"] == prompt_n + predicted_n - 1);
    const Reply restored = post(c, "/slots/0?action=restore", json{{"filename", "slot1.bin"}});
    REQUIRE(restored.status == 200);
    CHECK(restored.data["n_restored"] == saved.data["n_saved"]);
    // Both slots continue alike from the cache: only the new tail of the prompt is evaluated.
    const json next = {{"prompt", "What is the capital of Germany?"}, {"n_predict", 8}};
    json on1 = next, on0 = next;
    on1["id_slot"] = 1;
    on0["id_slot"] = 0;
    const Reply a = post(c, "/completion", on1), b = post(c, "/completion", on0);
    CHECK(a.data["content"] == b.data["content"]);
    CHECK(a.data["timings"]["prompt_n"] == b.data["timings"]["prompt_n"]);
    CHECK(b.data["timings"]["prompt_n"].get<int>() < prompt_n);
}

TEST_CASE("with --jinja the chat template's own Jinja is rendered, as llama-server --jinja: literal text, ChatML, a template's refusal",
          "[serve]") {
    const json messages = {{{"role", "system"}, {"content", "Book"}}, {{"role", "user"}, {"content", "What is the best book"}}};
    {
        // llama-server's test_chat_completion: a template without Jinja in it is the prompt, whatever the messages.
        ServerProcess server({"-m", bundled_model(), "-c", "256", "--jinja", "--chat-template", "This is not a chat template, it is"});
        auto c = server.client();
        CHECK(post(c, "/apply-template", json{{"messages", messages}}).data["prompt"] == "This is not a chat template, it is");
        const Reply chat = post(c, "/v1/chat/completions", json{{"messages", messages}, {"max_tokens", 4}, {"temperature", 0}});
        REQUIRE(chat.status == 200);
        CHECK(chat.data["usage"]["prompt_tokens"] == tokenize(c, "This is not a chat template, it is", true).size());
    }
    {
        // The model has no template: ChatML's Jinja, the same text as the built-in chatml family's.
        ServerProcess server({"-m", bundled_model(), "-c", "256", "--jinja"});
        auto c = server.client();
        CHECK(post(c, "/apply-template", json{{"messages", messages}}).data["prompt"] ==
              "<|im_start|>system\nBook<|im_end|>\n<|im_start|>user\nWhat is the best book<|im_end|>\n<|im_start|>assistant\n");
    }
    {
        // A template that refuses the conversation answers 400 with its message; one that does not parse is replaced
        // by ChatML's at start, with a log line (llama-server: "failed to parse chat template (defaulting to chatml)").
        ServerProcess refusing({"-m", bundled_model(), "-c", "256", "--jinja", "--chat-template",
                                "{% if messages|length > 2 %}{{ raise_exception('two messages at most') }}{% endif %}"
                                "{% for m in messages %}{{ m.content }}{% endfor %}"});
        auto c = refusing.client();
        CHECK(post(c, "/v1/chat/completions", json{{"messages", messages}, {"max_tokens", 1}}).status == 200);
        json three = messages;
        three.push_back({{"role", "assistant"}, {"content", "Dune"}});
        const Reply refused = post(c, "/v1/chat/completions", json{{"messages", three}, {"max_tokens", 1}});
        CHECK(refused.status == 400);
        CHECK(refused.data.dump().find("two messages at most") != std::string::npos);
        ServerProcess broken({"-m", bundled_model(), "-c", "256", "--jinja", "--chat-template", "{% if %}"});
        CHECK(broken.log().find("cannot be used as Jinja") != std::string::npos);
        auto b = broken.client();
        CHECK(post(b, "/apply-template", json{{"messages", messages}}).data["prompt"] ==
              "<|im_start|>system\nBook<|im_end|>\n<|im_start|>user\nWhat is the best book<|im_end|>\n<|im_start|>assistant\n");
    }
}

TEST_CASE("GET / serves the chat page, and --no-webui answers 404 there, as llama-server", "[serve]") {
    {
        ServerProcess server({"-m", bundled_model(), "-c", "128"});
        auto c = server.client();
        const auto res = c.Get("/");
        REQUIRE(res);
        CHECK(res->status == 200);
        CHECK(res->get_header_value("Content-Type") == "text/html; charset=utf-8");
        CHECK(res->body.find("<html>") != std::string::npos);  // what llama-server's test_no_webui looks for
        // The page talks to this server's chat endpoint and loads nothing from elsewhere.
        CHECK(res->body.find("/v1/chat/completions") != std::string::npos);
        CHECK(res->body.find("http://") == std::string::npos);
        CHECK(res->body.find("https://") == std::string::npos);
        CHECK(res->get_header_value("Content-Security-Policy").find("default-src 'none'") != std::string::npos);
        CHECK(res->get_header_value("Content-Security-Policy").find("connect-src 'self'") != std::string::npos);
        const auto again = c.Get("/index.html");
        REQUIRE(again);
        CHECK(again->body == res->body);
    }
    ServerProcess server({"-m", bundled_model(), "-c", "128", "--no-webui"});
    CHECK(server.log().find("--no-webui ignored") == std::string::npos);
    auto c = server.client();
    const auto res = c.Get("/");
    REQUIRE(res);
    CHECK(res->status == 404);
}
