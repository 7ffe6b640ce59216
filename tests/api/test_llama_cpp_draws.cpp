// SPECULA_DRAW_LLAMA_CPP through the public API: the sampled tokens llama.cpp's server gives for a seed, model,
// prompt and sampler settings (references in data/llama_cpp_sampling/, made by its make_references.py with
// llama-server of llama.cpp 2025-02-20 on the bundled stories260K), with and without a drafter; and a snapshot
// taken mid-way continues with the same draws.
#include <specula/specula.hpp>

#include "common/temp_dir.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fstream>
#include <string>
#include <vector>

namespace {

using json = nlohmann::json;

const std::string kModelPath = SPECULA_SOURCE_DIR "/models/stories260K.gguf";
const std::string kDraftPath = SPECULA_SOURCE_DIR "/models/drafts/stories260K.longspec.gguf";

const specula::Model &stories() {
    static const specula::Model model = specula::Model::load(kModelPath);
    return model;
}

json references() {
    std::ifstream in(SPECULA_SOURCE_DIR "/tests/api/data/llama_cpp_sampling/stories260K.json");
    REQUIRE(in);
    return json::parse(in);
}

// llama-server's sampler for a case: its defaults (common_params_sampling) and the case's settings.
specula::SamplerOptions sampler_of(const json &c) {
    specula::SamplerOptions s;
    s.draw = SPECULA_DRAW_LLAMA_CPP;
    const json &o = c.at("sampler");
    s.seed = o.at("seed").get<uint64_t>();
    s.temperature = o.value("temperature", 0.8f);
    s.top_k = o.value("top_k", 40);
    s.top_p = o.value("top_p", 0.95f);
    s.min_p = o.value("min_p", 0.05f);
    s.repeat_penalty = o.value("repeat_penalty", 1.0f);
    s.presence_penalty = o.value("presence_penalty", 0.0f);
    s.frequency_penalty = o.value("frequency_penalty", 0.0f);
    s.penalty_last_n = o.value("repeat_last_n", 64);
    return s;
}

std::vector<int32_t> generate(specula::Session &s, const std::vector<int32_t> &prompt, size_t n) {
    s.append_tokens(prompt);
    specula::GenerateOptions g;
    g.max_tokens = int32_t(n);
    g.stop_at_eog = true;
    std::vector<int32_t> out;
    s.generate(g, [&](const specula_token_event &ev) {
        out.push_back(ev.token);
        return true;
    });
    return out;
}

specula::SessionOptions session_options() {
    specula::SessionOptions so;
    so.n_ctx = 256;
    so.n_threads = 1;
    so.kv_type = SPECULA_KV_F32;  // as the references (llama-server -ctk f32 -ctv f32): F16 rounds differently there
    return so;
}

}  // namespace

TEST_CASE("api: llama.cpp's draw rule gives llama.cpp's sampled tokens for a seed, with and without a drafter", "[api][sampling][parity]") {
    const json refs = references();
    REQUIRE(refs.at("cases").size() >= 40);
    const specula::Draft draft = specula::Draft::load(kDraftPath, stories());
    int checked = 0, equal = 0;
    for (const json &c : refs.at("cases")) {
        const std::vector<int32_t> prompt = c.at("prompt").get<std::vector<int32_t>>();
        const std::vector<int32_t> want = c.at("tokens").get<std::vector<int32_t>>();
        INFO(c.at("settings").get<std::string>() << ", seed " << c.at("sampler").at("seed") << ": llama.cpp's \""
                                                 << c.at("text").get<std::string>() << "\"");
        specula::Session plain(stories(), session_options(), sampler_of(c));
        const std::vector<int32_t> got = generate(plain, prompt, want.size());
        ++checked;
        equal += got == want;
        CHECK(got == want);
        // Every drafter gives plain sampling's tokens under this rule too (the host verifier draws in order).
        for (int drafter = 0; drafter < 3; ++drafter) {
            specula::Session s(stories(), session_options(), sampler_of(c));
            specula::SpeculativeOptions o;
            if (drafter == 0) o.ngram = true;
            if (drafter == 1) o.draft = &draft;
            if (drafter == 2) {
                o.draft_model = &stories();
                o.tree = specula::SpeculativeOptions::chain(4);  // a sampled chain: drawn with the peeked words
            }
            s.set_speculative(o);
            INFO("drafter " << drafter);
            CHECK(generate(s, prompt, want.size()) == got);
        }
    }
    INFO(equal << " of " << checked << " cases equal llama.cpp's");
    CHECK(equal == checked);
}

TEST_CASE("api: llama.cpp's draw rule is saved in a snapshot and the restored session continues with the same draws", "[api][sampling][snapshot]") {
    specula::SamplerOptions s;
    s.draw = SPECULA_DRAW_LLAMA_CPP;
    s.seed = 3000000000u;
    s.temperature = 1.0f;
    const std::vector<int32_t> prompt = stories().tokenize("Once upon a time");
    specula::Session whole(stories(), session_options(), s);
    const std::vector<int32_t> all = generate(whole, prompt, 40);
    REQUIRE(all.size() == 40);

    specula::Session first(stories(), session_options(), s);
    const std::vector<int32_t> head = generate(first, prompt, 15);
    REQUIRE(head == std::vector<int32_t>(all.begin(), all.begin() + 15));
    const std::vector<uint8_t> bytes = first.save();
    specula::Session restored(stories(), session_options(), specula::SamplerOptions::greedy());
    restored.load(bytes);
    specula::GenerateOptions g;
    g.max_tokens = 25;
    std::vector<int32_t> tail;
    restored.generate(g, [&](const specula_token_event &ev) {
        tail.push_back(ev.token);
        return true;
    });
    CHECK(tail == std::vector<int32_t>(all.begin() + 15, all.end()));

    // The other rule, same seed: other draws (the rule is part of what a seed means).
    specula::SamplerOptions race = s;
    race.draw = SPECULA_DRAW_RACE;
    specula::Session other(stories(), session_options(), race);
    CHECK(generate(other, prompt, 40) != all);
}

TEST_CASE("api: a draw rule out of range is INVALID_ARGUMENT", "[api][sampling]") {
    specula::SamplerOptions s;
    s.draw = 2;
    try {
        specula::Session bad(stories(), session_options(), s);
        FAIL("a session was made with draw = 2");
    } catch (const specula::Error &e) {
        CHECK(e.status() == SPECULA_ERR_INVALID_ARGUMENT);
        CHECK(std::string(e.what()).find("draw") != std::string::npos);
    }
}
