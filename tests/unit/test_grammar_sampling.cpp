// Sampling under a grammar (SamplerConfig::grammar): the text follows the grammar, greedy and seeded sampled text
// is the same with every drafter and tree as without one (the verifier constrains each node by the grammar's state
// after its path), an end-of-generation token comes only where the grammar is complete, and a snapshot in the
// middle of constrained text resumes exactly.
#include "common/fixture_files.h"
#include "common/session_run.h"
#include "common/test_scale.h"
#include "core/error.h"
#include "grammar/grammar_matcher.h"
#include "sampling/sampler.h"
#include "session/session.h"
#include "speculative/grammar_draft.h"
#include "speculative/longspec_draft_file.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace specula::internal;

namespace {

// A list of little records a story model can fill: names, words, numbers, nested punctuation.
const char *kRecords = R"g(
root  ::= "[" item ("," ws item)* "]"
item  ::= "{\"who\": \"" name "\", \"did\": \"" words "\", \"n\": " num "}"
name  ::= [A-Z] [a-z]{1,8}
words ::= [a-z]+ (" " [a-z]+){0,5}
num   ::= [1-9] [0-9]{0,2}
ws    ::= " "?
)g";

std::shared_ptr<const Model> load(const std::string &rel) {
    const auto path = test_fixtures::fixtures_dir() / rel;
    if (!test_fixtures::have_fixture(path)) return nullptr;
    return Model::load(path.string(), LoadOptions{});
}

// Tokens until an end-of-generation token (not included) or n.
std::vector<int32_t> until_end(Session &s, const std::vector<int32_t> &prompt, int32_t n, bool *ended = nullptr) {
    s.rewind(0);
    s.append_tokens(prompt.data(), prompt.size());
    return test_sessions::generate_more(s, n, true, ended);
}

// The tokens' text as the grammar reads it (each token's piece, special tokens rendered).
std::string pieces(const Model &model, const std::vector<int32_t> &tokens) {
    std::string text;
    for (const int32_t t : tokens) text += model.vocab().token_to_piece(t, true);
    return text;
}

struct NamedDrafter {
    std::string name;
    SpeculativeConfig spec;
};

std::vector<NamedDrafter> every_drafter(const std::shared_ptr<const Model> &model) {
    std::vector<NamedDrafter> drafters;
    const auto trained = LongSpecDraft::load(std::string(SPECULA_SOURCE_DIR) + "/models/drafts/stories260K.longspec.gguf", model);
    SpeculativeConfig c;
    c.ngram = true;
    drafters.push_back({"n-grams", c});
    c = {};
    c.longspec = trained;
    drafters.push_back({"LongSpec", c});
    c.ngram = true;
    drafters.push_back({"LongSpec + n-grams", c});
    c = {};
    c.draft_model = model;
    drafters.push_back({"target as draft", c});
    if (const auto small = load("models/stories260K-L3.gguf")) {
        c = {};
        c.draft_model = small;
        drafters.push_back({"stories260K-L3", c});
    }
    return drafters;
}

std::vector<SpeculativeConfig> every_tree(const SpeculativeConfig &drafter) {
    std::vector<SpeculativeConfig> out;
    for (const TreeShape &shape : {TreeShape::chain(1), TreeShape::chain(5), TreeShape{{4, 4}}, TreeShape{}}) {
        SpeculativeConfig c = drafter;
        c.shape = shape;
        out.push_back(c);
    }
    SpeculativeConfig automatic = drafter;
    automatic.auto_tree = true;
    automatic.shape_is_bound = false;
    out.push_back(automatic);
    return out;
}

// Each drafter runs the automatic tree with every sampler, and each fixed tree with every sampler when `exhaustive`
// (the [slow] case), with every other sampler otherwise (each drafter's trees still meet greedy and sampled text).
void check_grammar_text_with_every_drafter(bool exhaustive) {
    const auto model = load("models/stories260K.gguf");
    if (!model) return;
    const std::vector<int32_t> prompt = model->vocab().tokenize("Once upon a time, there was a little dog.", true, false);
    const auto grammar = Grammar::parse(kRecords);
    const int32_t n = test_scale::count(120, 48);

    std::vector<SamplerConfig> samplers;
    SamplerConfig sc;
    sc.temperature = 0.0f;
    sc.grammar = kRecords;
    samplers.push_back(sc);
    sc.temperature = 0.8f;
    sc.seed = 11;
    samplers.push_back(sc);  // top-k 40: the constrained top-40 found among the most likely tokens or the whole vocabulary
    sc.temperature = 1.0f;
    sc.top_k = 0;
    sc.top_p = 1.0f;
    sc.min_p = 0.0f;
    sc.seed = 5;
    samplers.push_back(sc);  // the whole constrained distribution
    sc.temperature = 0.0f;
    sc.repeat_penalty = 1.3f;
    samplers.push_back(sc);

    int32_t accepted = 0;
    for (size_t k = 0; k < samplers.size(); ++k) {
        const SamplerConfig &config = samplers[k];
        CAPTURE(config.temperature, config.top_k, config.repeat_penalty);
        SessionConfig session;
        session.n_ctx = 512;
        Session plain(model, session, config);
        const std::vector<int32_t> want = until_end(plain, prompt, n);
        REQUIRE(want.size() > 20);
        // The text is a prefix of the grammar's language (or all of it).
        GrammarMatcher m(grammar);
        const std::string text = pieces(*model, want);
        CAPTURE(text);
        CHECK(m.accept(text));
        for (const NamedDrafter &d : every_drafter(model)) {
            const std::vector<SpeculativeConfig> trees = every_tree(d.spec);
            for (size_t t = 0; t < trees.size(); ++t) {
                const SpeculativeConfig &spec = trees[t];
                if (!exhaustive && !spec.auto_tree && (t + k) % 2 == 1) continue;
                CAPTURE(d.name, spec.auto_tree ? std::string("auto") : spec.shape.to_string());
                Session s(model, session, config);
                s.set_speculative(spec);
                CHECK(until_end(s, prompt, n) == want);
                accepted += s.speculative_stats().accepted;
            }
        }
        // The grammar alone (no tree of its own: each round is the text it forces).
        SpeculativeConfig alone;
        alone.grammar = true;
        Session s(model, session, config);
        s.set_speculative(alone);
        CHECK(std::string(s.drafter_name()) == "grammar");
        CHECK(until_end(s, prompt, n) == want);
        CHECK(s.speculative_stats().grammar_drafted > 0);
    }
    CHECK(accepted > 0);
}

}  // namespace

TEST_CASE("grammar sampling: the text follows the grammar, and greedy and seeded sampled text is the same with every drafter and tree",
          "[grammar][speculative][lossless]") {
    check_grammar_text_with_every_drafter(false);
}

TEST_CASE("grammar sampling: every drafter and every tree with each sampler", "[grammar][speculative][lossless][slow]") {
    check_grammar_text_with_every_drafter(true);
}

TEST_CASE("grammar sampling: an end-of-generation token only where the grammar is complete, and an impossible grammar is an error",
          "[grammar]") {
    const auto model = load("models/stories260K.gguf");
    if (!model) return;
    const std::vector<int32_t> prompt = model->vocab().tokenize("Once upon a time", true, false);
    SamplerConfig sc;
    sc.temperature = 0.0f;
    // Two fixed words then the end: the model must stop right after them.
    sc.grammar = R"(root ::= " the dog" "." )";
    SessionConfig session;
    session.n_ctx = 256;
    Session s(model, session, sc);
    bool ended = false;
    const std::vector<int32_t> got = until_end(s, prompt, 64, &ended);
    CHECK(ended);
    CHECK(pieces(*model, got) == " the dog.");
    // A code point no UTF-8 sequence encodes (byte tokens give this vocabulary every sequence): an error, not a
    // made-up token.
    sc.grammar = "root ::= \"\\UFFFFFFFF\"";
    Session bad(model, session, sc);
    bool threw = false;
    try {
        until_end(bad, prompt, 8);
    } catch (const Error &e) {
        threw = true;
        CHECK(e.status() == SPECULA_ERR_INVALID_ARGUMENT);
        CHECK_THAT(std::string(e.what()), Catch::Contains("grammar: no token"));
    }
    CHECK(threw);
    // A grammar that does not parse is refused when the sampler is made.
    sc.grammar = "root ::= (";
    CHECK_THROWS_WITH(Session(model, session, sc), Catch::Contains("grammar: a group that is never closed"));
}

TEST_CASE("grammar sampling: a snapshot in the middle of constrained text resumes it exactly, with a drafter", "[grammar][snapshot]") {
    const auto model = load("models/stories260K.gguf");
    if (!model) return;
    const std::vector<int32_t> prompt = model->vocab().tokenize("Once upon a time, there was a little dog.", true, false);
    SamplerConfig sc;
    sc.temperature = 0.9f;
    sc.seed = 3;
    sc.grammar = kRecords;
    SessionConfig session;
    session.n_ctx = 512;
    SpeculativeConfig spec;
    spec.longspec = LongSpecDraft::load(std::string(SPECULA_SOURCE_DIR) + "/models/drafts/stories260K.longspec.gguf", model);
    spec.ngram = true;
    Session whole(model, session, sc);
    whole.set_speculative(spec);
    const std::vector<int32_t> want = test_sessions::generate(whole, prompt, 70);
    for (const int32_t at : {7, 23, 41}) {
        CAPTURE(at);
        Session first(model, session, sc);
        first.set_speculative(spec);
        std::vector<int32_t> got = test_sessions::generate(first, prompt, at);
        std::vector<uint8_t> bytes;
        first.save_snapshot(SnapshotOptions{}, [&](const void *p, size_t len) {
            bytes.insert(bytes.end(), static_cast<const uint8_t *>(p), static_cast<const uint8_t *>(p) + len);
        });
        SamplerConfig other;  // the snapshot brings its own sampler, grammar and grammar state
        Session second(model, session, other);
        second.set_speculative(spec);
        second.load_snapshot(bytes);
        const std::vector<int32_t> rest = test_sessions::generate_more(second, 70 - at);
        got.insert(got.end(), rest.begin(), rest.end());
        CHECK(got == want);
    }
}

TEST_CASE("grammar sampling: the grammar drafts the text it forces and drops the drafts it rejects, the output unchanged",
          "[grammar][speculative]") {
    const auto model = load("models/stories260K.gguf");
    if (!model) return;
    const std::vector<int32_t> prompt = model->vocab().tokenize("Once upon a time, there was a little dog.", true, false);
    SamplerConfig sc;
    sc.temperature = 0.0f;
    sc.grammar = kRecords;
    SessionConfig session;
    session.n_ctx = 512;
    Session plain(model, session, sc);
    const std::vector<int32_t> want = until_end(plain, prompt, 120);
    // n-grams propose what the context repeats (often text the grammar rejects); the grammar adds what it forces.
    SpeculativeConfig spec;
    spec.ngram = true;
    spec.shape = TreeShape::chain(4);
    Session s(model, session, sc);
    s.set_speculative(spec);
    CHECK(until_end(s, prompt, 120) == want);
    const SpeculativeStats &st = s.speculative_stats();
    INFO("grammar drafted " << st.grammar_drafted << ", accepted " << st.grammar_accepted << ", pruned " << st.grammar_pruned
                            << "; drafted " << st.drafted << ", accepted " << st.accepted << " in " << st.rounds << " rounds");
    CHECK(st.grammar_drafted > 0);
    CHECK(st.grammar_accepted > 0);
    CHECK(st.grammar_accepted <= st.accepted);
    // Through the C ABI's counters too.
    const specula_stats c = s.stats();
    CHECK(c.n_grammar_drafted == st.grammar_drafted);
    CHECK(c.n_grammar_accepted == st.grammar_accepted);
    CHECK(c.n_grammar_pruned == st.grammar_pruned);
}

TEST_CASE("grammar sampling: forced text is drafted as the model spelled it before, else with the longest tokens",
          "[grammar][speculative]") {
    // A made-up vocabulary in which the forced text {"a": has two spellings: the longest tokens ({" a ":) and the
    // one a model wrote ({ "a ":).
    const std::vector<std::string> pieces = {"{", "\"", "{\"", "a", "\":", "\"a", "1", "2", "}", "\":1"};
    auto vocab = std::make_shared<const GrammarVocab>(pieces, std::vector<bool>(pieces.size(), false));
    SamplerConfig sc;
    sc.temperature = 0.0f;
    sc.grammar = R"(root ::= ("{\"a\":" [12] "}")+)";
    Sampler sampler(sc);
    sampler.bind_vocab(vocab);
    const GrammarMatcher start = *sampler.grammar_state();
    auto drafted = [&](const GrammarSpellings *spellings) {
        DraftTree tree;
        tree.reset(8);  // any root: the sampler's state is the grammar's start
        std::vector<uint8_t> forced;
        const GrammarDraftCounts counts = shape_tree_by_grammar(tree, sampler, 64, 32, 16, forced, spellings);
        std::vector<int32_t> tokens;
        for (int32_t i = 1; i < tree.size(); ++i) {
            CHECK(forced[size_t(i)] == 1);
            tokens.push_back(tree.token(i));
        }
        CHECK(counts.forced == int32_t(tokens.size()));
        return tokens;
    };
    CHECK(drafted(nullptr) == std::vector<int32_t>{2, 3, 4});  // {" a ":
    GrammarSpellings spellings;
    CHECK(drafted(&spellings) == std::vector<int32_t>{2, 3, 4});  // nothing learned yet
    // The model wrote { "a ": 1 }: that spelling of {"a": is learned (and of "a": after the {).
    spellings.learn(start, sampler, std::vector<int32_t>{0, 5, 4, 6, 8});
    CHECK(spellings.size() == 4);  // {"a": then "a": then ": then }
    REQUIRE(spellings.find("{\"a\":") != nullptr);
    CHECK(*spellings.find("{\"a\":") == std::vector<int32_t>{0, 5, 4});
    CHECK(drafted(&spellings) == std::vector<int32_t>{0, 5, 4});
    // Tokens the grammar does not allow are learned no further than they follow it.
    GrammarSpellings other;
    other.learn(start, sampler, std::vector<int32_t>{7});
    CHECK(other.size() == 0);
    // A spelling whose token runs past the forced text into what another grammar refuses there: that grammar gets
    // the longest tokens instead. Learned from { "a ":1 }, the forced ": is spelled ":1 ...
    GrammarSpellings past;
    past.learn(start, sampler, std::vector<int32_t>{0, 5, 9, 8});
    REQUIRE(past.find("\":") != nullptr);
    CHECK(*past.find("\":") == std::vector<int32_t>{9});
    // ... which a grammar that wants a 2 or a 3 there refuses: after { "a it drafts the longest ": instead.
    SamplerConfig two = sc;
    two.grammar = R"(root ::= "{\"a\":" [23] "}")";
    Sampler sampler2(two);
    sampler2.bind_vocab(vocab);
    sampler2.accept(0);
    sampler2.accept(5);
    DraftTree tree;
    tree.reset(5);
    std::vector<uint8_t> forced;
    shape_tree_by_grammar(tree, sampler2, 64, 32, 16, forced, &past);
    REQUIRE(tree.size() == 2);
    CHECK(tree.token(1) == 4);
}
