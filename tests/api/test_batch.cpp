// Batch groups (specula_batch: continuous batching) through the public API: sessions generating at once on their own
// threads, their forward passes combined, give exactly the tokens each gives alone, with every drafter and sampled
// or greedy; the group really combined passes; bad uses get clear statuses.
#include <specula/specula.hpp>

#include <catch2/catch.hpp>

#include "common/skip.h"

#include <exception>
#include <string>
#include <thread>
#include <vector>

namespace {

const std::string kModelPath = SPECULA_SOURCE_DIR "/models/stories260K.gguf";
const std::string kDraftPath = SPECULA_SOURCE_DIR "/models/drafts/stories260K.longspec.gguf";

const specula::Model &stories() {
    static const specula::Model model = specula::Model::load(kModelPath);
    return model;
}

// How a client's session generates: its prompt, sampler and drafter.
struct Client {
    std::string prompt;
    bool greedy = true;
    uint64_t seed = 0;
    enum Drafter { None, Ngram, LongSpec, LongSpecNgram } drafter = None;
    int32_t n = 48;
};

specula::Session make_session(const Client &c, const specula::Draft &draft) {
    specula::SessionOptions so;
    so.n_ctx = 512;
    so.n_threads = 1;
    specula::SamplerOptions sampler = specula::SamplerOptions::greedy();
    if (!c.greedy) {
        sampler.temperature = 0.9f;
        sampler.seed = c.seed;
    }
    specula::Session s(stories(), so, sampler);
    if (c.drafter != Client::None) {
        specula::SpeculativeOptions o;
        o.ngram = c.drafter == Client::Ngram || c.drafter == Client::LongSpecNgram;
        o.draft = c.drafter == Client::LongSpec || c.drafter == Client::LongSpecNgram ? &draft : nullptr;
        s.set_speculative(o);
    }
    return s;
}

std::vector<int32_t> run(specula::Session &s, const Client &c) {
    s.append_text(c.prompt);
    specula::GenerateOptions go;
    go.max_tokens = c.n;
    go.stop_at_eog = false;
    s.generate(go);
    return s.tokens();
}

}  // namespace

TEST_CASE("sessions in a batch group generate what each generates alone, with every drafter", "[batch][concurrency]") {
    const specula::Draft draft = specula::Draft::load(kDraftPath, stories());
    const std::vector<Client> clients = {
        {"Once upon a time, there was a little girl named Lily.", true, 0, Client::None, 48},
        {"The little dog ran to the park", true, 0, Client::Ngram, 40},
        {"Tom and Sue went to the beach. They", true, 0, Client::LongSpec, 56},
        {"One day, a big bird", false, 7, Client::None, 44},
        {"Lily had a red ball. She", false, 11, Client::LongSpecNgram, 52},
        {"Once upon a time", false, 3, Client::LongSpec, 36},
    };
    std::vector<std::vector<int32_t>> alone;
    for (const Client &c : clients) {
        specula::Session s = make_session(c, draft);
        alone.push_back(run(s, c));
    }

    specula::Batch batch(stories(), 2);
    std::vector<specula::Session> sessions;
    for (const Client &c : clients) {
        sessions.push_back(make_session(c, draft));
        batch.join(sessions.back());
    }
    std::vector<std::vector<int32_t>> together(clients.size());
    std::vector<std::exception_ptr> errors(clients.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < clients.size(); ++i)
        threads.emplace_back([&, i] {
            try {
                together[i] = run(sessions[i], clients[i]);
            } catch (...) {
                errors[i] = std::current_exception();
            }
        });
    for (std::thread &t : threads) t.join();
    for (size_t i = 0; i < clients.size(); ++i) {
        if (errors[i]) std::rethrow_exception(errors[i]);
        INFO("client " << i << ": " << clients[i].prompt);
        CHECK(together[i] == alone[i]);
    }
    const specula_batch_stats st = batch.stats();
    INFO("passes " << st.passes << ", requests " << st.requests << ", rows " << st.rows << ", widest " << st.widest);
    CHECK(st.passes > 0);
    CHECK(st.requests > st.passes);  // passes were shared
    CHECK(st.widest >= 2);

    // Left, a session computes alone again, and goes on exactly.
    specula::Batch::leave(sessions[0]);
    specula::GenerateOptions go;
    go.max_tokens = 8;
    go.stop_at_eog = false;
    sessions[0].generate(go);
    specula::Session ref = make_session(clients[0], draft);
    run(ref, clients[0]);
    ref.generate(go);
    CHECK(sessions[0].tokens() == ref.tokens());
    CHECK(batch.stats().passes == st.passes);
}

TEST_CASE("a session whose group handle is freed keeps generating in its group", "[batch]") {
    specula::SessionOptions so;
    so.n_ctx = 256;
    so.n_threads = 1;
    specula::Session s(stories(), so, specula::SamplerOptions::greedy());
    specula::Session ref(stories(), so, specula::SamplerOptions::greedy());
    {
        specula::Batch batch(stories(), 1);
        batch.join(s);
    }
    for (specula::Session *x : {&s, &ref}) {
        x->append_text("Once upon a time");
        specula::GenerateOptions go;
        go.max_tokens = 24;
        go.stop_at_eog = false;
        x->generate(go);
    }
    CHECK(s.tokens() == ref.tokens());
}

TEST_CASE("batch groups refuse bad arguments with clear statuses", "[batch][errors]") {
    specula_error *err = nullptr;
    specula_batch *b = nullptr;
    CHECK(specula_batch_create(nullptr, nullptr, &b, &err) == SPECULA_ERR_INVALID_ARGUMENT);
    CHECK(b == nullptr);
    specula_error_destroy(err);
    specula_batch_options o;
    specula_batch_options_init(&o);
    o.n_threads = -1;
    CHECK(specula_batch_create(stories().get(), &o, &b, &err) == SPECULA_ERR_INVALID_ARGUMENT);
    specula_error_destroy(err);
    CHECK(specula_session_join_batch(nullptr, nullptr, &err) == SPECULA_ERR_INVALID_ARGUMENT);
    specula_error_destroy(err);
    specula_batch_stats st{};
    CHECK(specula_batch_get_stats(nullptr, &st, &err) == SPECULA_ERR_INVALID_ARGUMENT);
    specula_error_destroy(err);
    specula_batch_free(nullptr);

    // A session of another model: INCOMPATIBLE, and it still generates alone.
    const specula::Model other = specula::Model::load(kModelPath);
    specula::Batch batch(stories(), 1);
    specula::SessionOptions so;
    so.n_ctx = 128;
    so.n_threads = 1;
    specula::Session s(other, so, specula::SamplerOptions::greedy());
    CHECK(specula_session_join_batch(s.get(), batch.get(), &err) == SPECULA_ERR_INCOMPATIBLE);
    CHECK(std::string(specula_error_message(err)).find("model") != std::string::npos);
    specula_error_destroy(err);
    s.append_text("Once upon a time");
    specula::GenerateOptions go;
    go.max_tokens = 4;
    s.generate(go);
    CHECK(s.tokens().size() >= 5);
    CHECK(batch.stats().passes == 0);
}
