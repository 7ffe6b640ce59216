// `specula serve` as clients use it: the real server process on a loopback port, the requests llama-server's
// clients send, llama-server's response shapes, and at temperature 0 the very tokens `specula generate` gives on the
// same prompt tokens. Runs on the repository's bundled model, so it needs no fixtures.
#include "server_process.h"

using namespace serve_test;

TEST_CASE("health, props, models and metrics answer in llama-server's shapes", "[serve]") {
    // -c is the server's context, divided among the slots (llama-server's -c 256 -np 2: 128 each).
    ServerProcess server({"-m", bundled_model(), "-c", "512", "--parallel", "2", "--slots", "--metrics"});
    auto c = server.client();

    const Reply health = get(c, "/health");
    CHECK(health.status == 200);
    CHECK(health.data == json{{"status", "ok"}});
    CHECK(health.content_type.find("application/json") == 0);

    const Reply props = get(c, "/props");
    REQUIRE(props.status == 200);
    CHECK(props.data["total_slots"] == 2);
    CHECK(props.data["default_generation_settings"]["n_ctx"] == 256);
    CHECK(props.data["endpoint_slots"] == true);
    CHECK(props.data["endpoint_metrics"] == true);
    CHECK(props.data["default_generation_settings"]["params"]["temperature"].is_number());
    CHECK(props.data["bos_token"] == "<s>");
    CHECK(props.data["eos_token"] == "</s>");
    CHECK(props.data["model_path"].get<std::string>().find("stories260K.gguf") != std::string::npos);
    // n-gram drafting is on by default, its tree sized by what a pass costs here (which may be "off" on a busy
    // machine with one thread per slot): the measurement is reported either way.
    const std::string drafter = props.data["speculative"]["drafter"];
    CHECK((drafter == "ngram" || drafter.empty()));
    CHECK(props.data["speculative"]["calibration"].get<std::string>().find("n-gram drafting") == 0);
    CHECK(props.data["infill"] == false);

    const Reply models = get(c, "/v1/models");
    REQUIRE(models.status == 200);
    CHECK(models.data["object"] == "list");
    REQUIRE(models.data["data"].size() == 1);
    CHECK(models.data["data"][0]["id"] == "stories260K.gguf");
    CHECK(models.data["data"][0]["object"] == "model");
    CHECK(models.data["data"][0]["meta"]["n_vocab"] == 512);
    CHECK(get(c, "/models").data["data"][0]["id"] == "stories260K.gguf");

    const Reply slots = get(c, "/slots");
    REQUIRE(slots.status == 200);
    CHECK(slots.data.size() == 2);
    CHECK(slots.data[0]["n_ctx"] == 256);
    CHECK(slots.data[0]["params"]["temperature"].is_number());

    // One completion, then the counters show it.
    REQUIRE(post(c, "/completion", json{{"prompt", "Once upon a time"}, {"n_predict", 8}, {"temperature", 0}}).status == 200);
    const Reply metrics = get(c, "/metrics");
    REQUIRE(metrics.status == 200);
    CHECK(metrics.content_type.find("text/plain") == 0);
    for (const char *name : {"llamacpp:prompt_tokens_total", "llamacpp:tokens_predicted_total", "llamacpp:predicted_tokens_seconds",
                             "llamacpp:requests_processing", "specula:requests_total{endpoint=\"/completion\"} 1",
                             "specula:draft_tokens_total", "specula:draft_acceptance_ratio", "specula:tau",
                             "specula:prompt_cache_hits_total"})
        CHECK(metrics.body.find(name) != std::string::npos);
    CHECK(metrics.body.find("llamacpp:tokens_predicted_total 8\n") != std::string::npos);
}

TEST_CASE("/tokenize and /detokenize round-trip, with pieces", "[serve]") {
    ServerProcess server({"-m", bundled_model(), "-c", "256"});
    auto c = server.client();
    const std::vector<int32_t> ids = tokenize(c, "Once upon a time", true);
    REQUIRE(ids.size() > 2);
    CHECK(ids[0] == 1);  // BOS with add_special
    CHECK(tokenize(c, "Once upon a time", false) == std::vector<int32_t>(ids.begin() + 1, ids.end()));

    const Reply pieces = post(c, "/tokenize", json{{"content", "Once upon"}, {"with_pieces", true}});
    REQUIRE(pieces.status == 200);
    REQUIRE(pieces.data["tokens"].is_array());
    std::string joined;
    for (const json &p : pieces.data["tokens"]) {
        CHECK(p["id"].is_number_integer());
        joined += p["piece"].get<std::string>();
    }
    CHECK(joined == " Once upon");

    const Reply text = post(c, "/detokenize", json{{"tokens", std::vector<int32_t>(ids.begin() + 1, ids.end())}});
    REQUIRE(text.status == 200);
    CHECK(text.data["content"] == " Once upon a time");
    check_error(post(c, "/detokenize", json{{"tokens", {1, 99999}}}), 400, "invalid_request_error");
    check_error(post(c, "/tokenize", json{{"content", 5}}), 400, "invalid_request_error");
}

TEST_CASE("/completion at temperature 0 gives exactly the tokens of specula generate, streamed or not", "[serve]") {
    // A fixed tree: with auto, whether a 64-token request drafts at all depends on the machine's timings.
    ServerProcess server({"-m", bundled_model(), "-c", "512", "--ngram-nodes", "4", "--tree", "fixed"});
    auto c = server.client();
    const std::string prompt = "Once upon a time, there was a little dog named Max. Max loved to";
    const std::vector<int32_t> prompt_ids = tokenize(c, prompt, true);
    const std::vector<int32_t> expected = cli_greedy_tokens(bundled_model(), prompt_ids, 64, 512);
    REQUIRE(expected.size() == 64);

    const Reply r = post(c, "/completion", json{{"prompt", prompt}, {"n_predict", 64}, {"temperature", 0}, {"return_tokens", true}});
    REQUIRE(r.status == 200);
    INFO(r.body);
    CHECK(r.data["tokens"].get<std::vector<int32_t>>() == expected);
    CHECK(r.data["stop"] == true);
    CHECK(r.data["stop_type"] == "limit");
    CHECK(r.data["tokens_predicted"] == 64);
    CHECK(r.data["tokens_evaluated"] == int(prompt_ids.size()));
    CHECK(r.data["truncated"] == false);
    CHECK(r.data["id_slot"] == 0);
    CHECK(r.data["model"] == "stories260K.gguf");
    const json &t = r.data["timings"];
    for (const char *k : {"cache_n", "prompt_n", "prompt_ms", "prompt_per_token_ms", "prompt_per_second", "predicted_n", "predicted_ms",
                          "predicted_per_token_ms", "predicted_per_second", "draft_n", "draft_n_accepted"})
        CHECK(t.contains(k));
    CHECK(t["predicted_n"] == 64);
    CHECK(t["prompt_n"] == int(prompt_ids.size()));
    CHECK(t["draft_n"].get<int>() > 0);  // n-gram drafting ran: stories repeat themselves
    CHECK(t["draft_n_accepted"].get<int>() <= t["draft_n"].get<int>());
    const std::string content = r.data["content"];
    CHECK(content == post(c, "/detokenize", json{{"tokens", expected}}).data["content"].get<std::string>());

    // The same prompt again, streamed: the events' content adds up to the same text, the cache serves the prompt.
    const Reply s = post(c, "/completion", json{{"prompt", prompt}, {"n_predict", 64}, {"temperature", 0}, {"stream", true}});
    REQUIRE(s.status == 200);
    CHECK(s.content_type.find("text/event-stream") == 0);
    const std::vector<std::string> events = sse_data(s.body);
    REQUIRE(events.size() >= 2);
    std::string streamed;
    for (size_t i = 0; i + 1 < events.size(); ++i) {
        const json e = json::parse(events[i]);
        CHECK(e["stop"] == false);
        CHECK(e.contains("tokens_predicted"));
        streamed += e["content"].get<std::string>();
    }
    const json last = json::parse(events.back());
    CHECK(last["stop"] == true);
    CHECK(last["content"] == "");
    CHECK(last["timings"]["predicted_n"] == 64);
    CHECK(last["timings"]["cache_n"].get<int>() >= int(prompt_ids.size()) - 1);
    CHECK(streamed == content);
    CHECK(s.body.find("[DONE]") == std::string::npos);  // llama-server's own endpoints end without it

    // response_fields flattens "a/b" paths, keyed by the path.
    const Reply f = post(c, "/completion", json{{"prompt", prompt}, {"n_predict", 4}, {"temperature", 0},
                                               {"response_fields", {"content", "timings/predicted_n", "generation_settings/n_predict", "no/such"}}});
    REQUIRE(f.status == 200);
    CHECK(f.data.size() == 3);
    CHECK(f.data["timings/predicted_n"] == 4);
    CHECK(f.data["generation_settings/n_predict"] == 4);
    CHECK(f.data["content"].is_string());

    // Token prompts and mixed prompts are read as llama-server reads them.
    const Reply ids = post(c, "/completion", json{{"prompt", prompt_ids}, {"n_predict", 16}, {"temperature", 0}, {"return_tokens", true}});
    REQUIRE(ids.status == 200);
    CHECK(ids.data["tokens"].get<std::vector<int32_t>>() == std::vector<int32_t>(expected.begin(), expected.begin() + 16));
}

TEST_CASE("stop strings, EOS and n_predict end a completion as llama-server reports it", "[serve]") {
    ServerProcess server({"-m", bundled_model(), "-c", "512"});
    auto c = server.client();
    const Reply free_run = post(c, "/completion", json{{"prompt", "Once upon a time"}, {"n_predict", 48}, {"temperature", 0}});
    REQUIRE(free_run.status == 200);
    const std::string text = free_run.data["content"];
    REQUIRE(text.size() > 20);
    const std::string word = text.substr(10, 3);
    const Reply stopped = post(c, "/completion", json{{"prompt", "Once upon a time"}, {"n_predict", 48}, {"temperature", 0}, {"stop", {word}}});
    REQUIRE(stopped.status == 200);
    CHECK(stopped.data["stop_type"] == "word");
    CHECK(stopped.data["stopping_word"] == word);
    CHECK(stopped.data["content"] == text.substr(0, text.find(word)));
}

TEST_CASE("OpenAI completions and chat, streamed and not, end streams with [DONE]", "[serve]") {
    ServerProcess server({"-m", bundled_model(), "-c", "512", "--chat-template", "chatml", "-a", "stories"});
    auto c = server.client();
    const std::string prompt = "Once upon a time";
    const std::vector<int32_t> expected = cli_greedy_tokens(bundled_model(), tokenize(c, prompt, true), 24, 512);
    const std::string expected_text = post(c, "/detokenize", json{{"tokens", expected}}).data["content"];

    const Reply r = post(c, "/v1/completions", json{{"model", "whatever"}, {"prompt", prompt}, {"max_tokens", 24}, {"temperature", 0}});
    REQUIRE(r.status == 200);
    INFO(r.body);
    CHECK(r.data["object"] == "text_completion");
    CHECK(r.data["model"] == "whatever");  // the request's model, as llama-server echoes it (the alias without one)
    CHECK(r.data["id"].get<std::string>().rfind("cmpl-", 0) == 0);
    CHECK(r.data["created"].is_number_integer());
    REQUIRE(r.data["choices"].size() == 1);
    CHECK(r.data["choices"][0]["text"] == expected_text);
    CHECK(r.data["choices"][0]["index"] == 0);
    CHECK(r.data["choices"][0]["finish_reason"] == "length");
    CHECK(r.data["usage"]["completion_tokens"] == 24);
    CHECK(r.data["usage"]["total_tokens"] == r.data["usage"]["completion_tokens"].get<int>() + r.data["usage"]["prompt_tokens"].get<int>());

    const Reply s = post(c, "/v1/completions", json{{"prompt", prompt}, {"max_tokens", 24}, {"temperature", 0}, {"stream", true}});
    REQUIRE(s.status == 200);
    std::vector<std::string> events = sse_data(s.body);
    REQUIRE(events.size() >= 3);
    CHECK(events.back() == "[DONE]");
    std::string streamed;
    for (size_t i = 0; i + 1 < events.size(); ++i) {
        const json e = json::parse(events[i]);
        CHECK(e["object"] == "text_completion");
        streamed += e["choices"][0]["text"].get<std::string>();
    }
    CHECK(streamed == expected_text);
    CHECK(json::parse(events[events.size() - 2])["choices"][0]["finish_reason"] == "length");

    // Chat: the prompt is the chat template's text; greedy content equals `specula generate` on its tokens.
    const json messages = {{{"role", "system"}, {"content", "You tell stories."}}, {{"role", "user"}, {"content", "Tell me about Max."}}};
    const std::string chat_prompt = post(c, "/apply-template", json{{"messages", messages}}).data["prompt"];
    CHECK(chat_prompt == "<|im_start|>system\nYou tell stories.<|im_end|>\n<|im_start|>user\nTell me about Max.<|im_end|>\n<|im_start|>assistant\n");
    const std::vector<int32_t> chat_expected = cli_greedy_tokens(bundled_model(), tokenize(c, chat_prompt, true), 20, 512);
    const std::string chat_text = post(c, "/detokenize", json{{"tokens", chat_expected}}).data["content"];
    const Reply chat = post(c, "/v1/chat/completions", json{{"messages", messages}, {"max_tokens", 20}, {"temperature", 0}});
    REQUIRE(chat.status == 200);
    CHECK(chat.data["object"] == "chat.completion");
    CHECK(chat.data["id"].get<std::string>().rfind("chatcmpl-", 0) == 0);
    CHECK(chat.data["choices"][0]["message"]["role"] == "assistant");
    CHECK(chat.data["choices"][0]["message"]["content"] == chat_text);
    CHECK(chat.data["choices"][0]["finish_reason"] == "length");

    const Reply cs = post(c, "/v1/chat/completions",
                          json{{"messages", messages}, {"max_tokens", 20}, {"temperature", 0}, {"stream", true}, {"stream_options", {{"include_usage", true}}}});
    REQUIRE(cs.status == 200);
    events = sse_data(cs.body);
    REQUIRE(events.size() >= 4);
    CHECK(events.back() == "[DONE]");
    const json first = json::parse(events[0]);
    CHECK(first["object"] == "chat.completion.chunk");
    CHECK(first["choices"][0]["delta"]["role"] == "assistant");
    std::string chat_streamed;
    for (size_t i = 0; i + 3 < events.size(); ++i) chat_streamed +=  // the role rides on the first content chunk
         json::parse(events[i])["choices"][0]["delta"]["content"].get<std::string>();
    CHECK(chat_streamed == chat_text);
    const json finish = json::parse(events[events.size() - 3]);
    CHECK(finish["choices"][0]["finish_reason"] == "length");
    const json usage = json::parse(events[events.size() - 2]);
    CHECK(usage["choices"].empty());
    CHECK(usage["usage"]["completion_tokens"] == 20);

    // llama.vim's instruction mode (llama#inst, llama#inst_send): a warm-up with n_predict 0 and an empty sampler
    // chain, then a streamed request with its own chain; id_slot counts requests, past the server's slots.
    const Reply inst_warm = post(c, "/v1/chat/completions", json{{"id_slot", 3}, {"messages", messages}, {"samplers", json::array()},
                                                                 {"n_predict", 0}, {"stream", false}, {"cache_prompt", true},
                                                                 {"response_fields", {""}}});
    INFO(inst_warm.body);
    CHECK(inst_warm.status == 200);
    CHECK(inst_warm.data["usage"]["completion_tokens"] == 0);
    const Reply inst = post(c, "/v1/chat/completions", json{{"id_slot", 4}, {"messages", messages}, {"min_p", 0.1}, {"temperature", 0.1},
                                                            {"samplers", {"min_p", "temperature"}}, {"stream", true}, {"cache_prompt", true},
                                                            {"n_predict", 16}});
    REQUIRE(inst.status == 200);
    events = sse_data(inst.body);
    REQUIRE(events.size() >= 3);
    CHECK(events.back() == "[DONE]");
    CHECK(json::parse(events[events.size() - 2])["timings"]["cache_n"].get<int>() > 0);  // the warm-up's prompt was reused

    // Content parts are joined; images are refused.
    const Reply parts = post(c, "/v1/chat/completions", json{{"messages", {{{"role", "user"}, {"content", {{{"type", "text"}, {"text", "Tell me about Max."}}}}}}},
                                                              {"max_tokens", 4}, {"temperature", 0}});
    CHECK(parts.status == 200);
    check_error(post(c, "/v1/chat/completions", json{{"messages", {{{"role", "user"}, {"content", {{{"type", "image_url"}, {"image_url", "x"}}}}}}}}),
                400, "invalid_request_error");
    check_error(post(c, "/v1/completions", json{{"prompt", prompt}, {"n", 2}}), 400, "invalid_request_error");
    check_error(post(c, "/v1/completions", json{{"prompt", prompt}, {"echo", true}}), 400, "invalid_request_error");
}

TEST_CASE("chat_template_kwargs enable_thinking switches Qwen3's thinking, as in llama-server", "[serve]") {
    ServerProcess server({"-m", bundled_model(), "-c", "512", "--chat-template", "qwen3"});
    auto c = server.client();
    const json messages = {{{"role", "user"}, {"content", "2+2?"}}, {{"role", "assistant"}, {"content", "<think>\nAdd.\n</think>\n\n4"}},
                           {{"role", "user"}, {"content", "thanks"}}};
    const std::string history = "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>\n<|im_start|>user\nthanks<|im_end|>\n";
    CHECK(post(c, "/apply-template", json{{"messages", messages}}).data["prompt"] == history + "<|im_start|>assistant\n");
    CHECK(post(c, "/apply-template", json{{"messages", messages}, {"chat_template_kwargs", {{"enable_thinking", false}}}}).data["prompt"] ==
          history + "<|im_start|>assistant\n<think>\n\n</think>\n\n");
    CHECK(post(c, "/apply-template", json{{"messages", messages}, {"chat_template_kwargs", {{"enable_thinking", true}}}}).data["prompt"] ==
          history + "<|im_start|>assistant\n");
    const Reply bad = post(c, "/v1/chat/completions", json{{"messages", messages}, {"chat_template_kwargs", {{"enable_thinking", "no"}}}});
    CHECK(bad.status == 400);
    CHECK_THAT(bad.body, Catch::Matchers::Contains("enable_thinking"));
    const Reply ok = post(c, "/v1/chat/completions",
                          json{{"messages", messages}, {"max_tokens", 4}, {"chat_template_kwargs", {{"enable_thinking", false}}}});
    CHECK(ok.status == 200);
    // the prompt the completion ran on is the one with the empty thinking block
    CHECK(ok.data["usage"]["prompt_tokens"] == tokenize(c, history + "<|im_start|>assistant\n<think>\n\n</think>\n\n", true).size());
}

TEST_CASE("malformed requests get llama-server's error object and the server stays up", "[serve]") {
    ServerProcess server({"-m", bundled_model(), "-c", "128", "--max-body", "1"});
    auto c = server.client();
    check_error(post(c, "/completion", std::string("{\"prompt\": ")), 400, "invalid_request_error");
    check_error(post(c, "/completion", std::string("[1, 2, 3]")), 400, "invalid_request_error");
    check_error(post(c, "/completion", std::string("")), 400, "invalid_request_error");
    check_error(post(c, "/completion", json{{"n_predict", 4}}), 400, "invalid_request_error");
    check_error(post(c, "/completion", json{{"prompt", "x"}, {"n_predict", "many"}}), 400, "invalid_request_error");
    check_error(post(c, "/completion", json{{"prompt", "x"}, {"temperature", "hot"}}), 400, "invalid_request_error");
    check_error(post(c, "/completion", json{{"prompt", "x"}, {"top_p", -1}}), 400, "invalid_request_error");
    check_error(post(c, "/completion", json{{"prompt", "x"}, {"stop", {1, 2}}}), 400, "invalid_request_error");
    check_error(post(c, "/completion", json{{"prompt", "x"}, {"stream", "yes"}}), 400, "invalid_request_error");
    check_error(post(c, "/completion", json{{"prompt", {1, -5}}}), 400, "invalid_request_error");
    check_error(post(c, "/completion", json{{"prompt", {1, 1u << 31}}}), 400, "invalid_request_error");
    check_error(post(c, "/completion", json{{"prompt", {"a", {1, {2}}}}}), 400, "invalid_request_error");
    check_error(post(c, "/completion", json{{"prompt", json::object()}}), 400, "invalid_request_error");
    check_error(post(c, "/completion", json{{"prompt", "x"}, {"id_slot", -2}}), 400, "invalid_request_error");
    CHECK(post(c, "/completion", json{{"prompt", "x"}, {"id_slot", 7}, {"n_predict", 2}}).status == 200);  // no such slot: any
    check_error(post(c, "/v1/chat/completions", json{{"messages", "hi"}}), 400, "invalid_request_error");
    check_error(post(c, "/v1/chat/completions", json{{"messages", {{{"role", "user"}, {"content", {{{"type", "image_url"}}}}}}}}), 400,
                "invalid_request_error");
    check_error(get(c, "/no/such/endpoint"), 404, "not_found_error");
    // A body over --max-body (1 MiB): 413 before it is read into a request.
    const Reply big = post(c, "/completion", json{{"prompt", std::string(2u << 20, 'a')}});
    CHECK(big.status == 413);
    // Deep nesting, odd bytes: still a 400, still up.
    check_error(post(c, "/completion", std::string(100000, '[')), 400, "invalid_request_error");
    check_error(post(c, "/completion", std::string("{\"prompt\": \"\xff\xfe\"}")), 400, "invalid_request_error");
    CHECK(get(c, "/health").status == 200);
    const Reply ok = post(c, "/completion", json{{"prompt", "Once"}, {"n_predict", 2}});
    CHECK(ok.status == 200);
}

TEST_CASE("the --api-key guards everything but /health and /models", "[serve]") {
    ServerProcess server({"-m", bundled_model(), "-c", "128", "--api-key", "sekret"});
    auto c = server.client();
    CHECK(get(c, "/health").status == 200);
    CHECK(get(c, "/v1/models").status == 200);
    check_error(get(c, "/props"), 401, "authentication_error");
    check_error(post(c, "/completion", json{{"prompt", "Once"}, {"n_predict", 2}}), 401, "authentication_error");
    check_error(post(c, "/completion", json{{"prompt", "Once"}, {"n_predict", 2}}, {{"Authorization", "Bearer wrong"}}), 401,
                "authentication_error");
    CHECK(post(c, "/completion", json{{"prompt", "Once"}, {"n_predict", 2}}, {{"Authorization", "Bearer sekret"}}).status == 200);
    CHECK(post(c, "/completion", json{{"prompt", "Once"}, {"n_predict", 2}}, {{"X-Api-Key", "sekret"}}).status == 200);
}
