// GBNF grammars (grammar/grammar.h) and following them through text (grammar/grammar_matcher.h): the syntax and
// behaviour llama.cpp documents for its grammars (grammars/README.md), its example grammars' kind of text, hostile
// grammars refused with a message or bounded, and the token masks a sampler uses, checked token by token.
#include "common/fixture_files.h"
#include "core/error.h"
#include "grammar/grammar.h"
#include "grammar/grammar_matcher.h"
#include "model/model.h"

#include <catch2/catch.hpp>

#include <random>
#include <string>
#include <vector>

using namespace specula::internal;

namespace {

// The JSON grammar of llama.cpp's documentation (grammars/json.gbnf), written out here.
const char *kJson = R"g(
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws

# Optional space: by convention, applied in this grammar after literal chars when allowed
ws ::= | " " | "\n" [ \t]{0,20}
)g";

// The arithmetic example of the same documentation.
const char *kArithmetic = R"g(
root  ::= (expr "=" ws term "\n")+
expr  ::= term ([-+*/] term)*
term  ::= ident | num | "(" ws expr ")" ws
ident ::= [a-z] [a-z0-9_]* ws
num   ::= [0-9]+ ws
ws    ::= [ \t\n]*
)g";

enum class Match { kComplete, kPrefix, kRejected };

Match match(const std::string &grammar, const std::string &text) {
    GrammarMatcher m(Grammar::parse(grammar));
    if (!m.accept(text)) return Match::kRejected;
    return m.can_end() ? Match::kComplete : Match::kPrefix;
}

std::string error_of(const std::string &grammar) {
    try {
        Grammar::parse(grammar);
    } catch (const Error &e) {
        CHECK(e.status() == SPECULA_ERR_INVALID_ARGUMENT);
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("grammar: literals, classes, groups, alternatives and repetitions match as llama.cpp documents them", "[grammar]") {
    CHECK(match(R"(root ::= "abc")", "abc") == Match::kComplete);
    CHECK(match(R"(root ::= "abc")", "ab") == Match::kPrefix);
    CHECK(match(R"(root ::= "abc")", "abd") == Match::kRejected);
    CHECK(match(R"(root ::= "abc")", "abcd") == Match::kRejected);
    // Classes: ranges, several ranges, negation, any character.
    CHECK(match(R"(root ::= [a-z0-9_]+)", "ab_9") == Match::kComplete);
    CHECK(match(R"(root ::= [a-z0-9_]+)", "aB") == Match::kRejected);
    CHECK(match(R"(root ::= [^a-c]+)", "xyz") == Match::kComplete);
    CHECK(match(R"(root ::= [^a-c]+)", "xbz") == Match::kRejected);
    CHECK(match(R"(root ::= . . ".")", "a\xC3\xA9.") == Match::kComplete);
    // Alternatives and groups, optional and repeated.
    const std::string yes_no = R"(root ::= ("yes" | "no") ("," ws ("yes" | "no"))* "."
ws ::= " "?)";
    CHECK(match(yes_no, "yes, no,yes.") == Match::kComplete);
    CHECK(match(yes_no, "yes, maybe.") == Match::kRejected);
    // Bounded repetitions: {m}, {m,}, {m,n}, {0,n}.
    const std::string r24 = R"(root ::= "a"{2,4})";
    CHECK(match(r24, "a") == Match::kPrefix);
    CHECK(match(r24, "aa") == Match::kComplete);
    CHECK(match(r24, "aaaa") == Match::kComplete);
    CHECK(match(r24, "aaaaa") == Match::kRejected);
    CHECK(match(R"(root ::= [0-9]{3})", "123") == Match::kComplete);
    CHECK(match(R"(root ::= [0-9]{3})", "1234") == Match::kRejected);
    CHECK(match(R"(root ::= "x"{2,} "y")", "xxxxxxy") == Match::kComplete);
    CHECK(match(R"(root ::= "x"{2,} "y")", "xy") == Match::kRejected);
    CHECK(match(R"(root ::= "x"{0,2} "y")", "y") == Match::kComplete);
    CHECK(match(R"(root ::= "x"{0,2} "y")", "xxxy") == Match::kRejected);
    // Escapes, comments and rules continued over lines.
    CHECK(match("root ::= \"\\x41\\u00e9\\U0001F600\\n\\t\\\\\\\"\" # a comment\n", "A\xC3\xA9\xF0\x9F\x98\x80\n\t\\\"") == Match::kComplete);
    CHECK(match("root ::= (\n  \"a\" |\n  \"b\"\n)+ # comment\n\n", "abba") == Match::kComplete);
    // An empty alternative matches nothing at all.
    CHECK(match(R"(root ::= "a" | )", "") == Match::kComplete);
    // A rule defined after its use, and recursion that reads a character first (balanced parentheses).
    const std::string parens = "root ::= p\np ::= \"(\" p \")\" p | ";
    CHECK(match(parens, "(()(()))") == Match::kComplete);
    CHECK(match(parens, "(()") == Match::kPrefix);
    CHECK(match(parens, "())") == Match::kRejected);
}

TEST_CASE("grammar: the documentation's JSON and arithmetic grammars accept their text and reject what breaks it", "[grammar]") {
    CHECK(match(kJson, R"({"a": [1, 2.5, -3e5, true, null, "x\n\u00e9"], "b": {}})") == Match::kComplete);
    CHECK(match(kJson, "{\n  \"name\": \"Ada\",\n  \"age\": 36\n}") == Match::kComplete);
    CHECK(match(kJson, R"({"a": [1, 2)") == Match::kPrefix);
    CHECK(match(kJson, R"({"a" 1})") == Match::kRejected);
    CHECK(match(kJson, R"({"a": 01})") == Match::kRejected);
    CHECK(match(kJson, "{\"a\": \"tab\there\"}") == Match::kRejected);  // a raw control character in a string
    CHECK(match(kJson, R"([1, 2])") == Match::kRejected);               // the root is an object
    CHECK(match(kArithmetic, "x *(y +10) = 20\nz -1 = x\n") == Match::kComplete);
    CHECK(match(kArithmetic, "x = 2 * \n") == Match::kRejected);
}

TEST_CASE("grammar: text split inside a UTF-8 sequence is followed byte by byte", "[grammar]") {
    const auto g = Grammar::parse(R"(root ::= "日本" [ぁ-ゖ]+ "。")");
    const std::string text = "日本のことば。";
    // Every split of the text into two pieces gives the same answer as the whole.
    for (size_t cut = 0; cut <= text.size(); ++cut) {
        GrammarMatcher m(g);
        REQUIRE(m.accept(text.substr(0, cut)));
        REQUIRE(m.accept(text.substr(cut)));
        CHECK(m.can_end());
    }
    GrammarMatcher m(g);
    REQUIRE(m.accept("日本"));
    CHECK(m.accepts("\xE3"));          // could start a hiragana (U+3041-U+3096: E3 81 81 - E3 82 96)
    CHECK(m.accepts("\xE3\x81"));
    CHECK_FALSE(m.accepts("\xE3\x83"));  // U+30C0-U+30FF: katakana, out of the class
    CHECK_FALSE(m.accepts("\xE4"));      // U+4000-U+4FFF: no hiragana starts so
    CHECK_FALSE(m.accepts("\x81"));      // a continuation byte cannot start a character
    REQUIRE(m.accept("\xE3"));
    CHECK_FALSE(m.can_end());  // a character is still open
    CHECK_FALSE(m.accepts("a"));
    // Only valid UTF-8: overlong forms of "{" (which byte tokens could spell), surrogates, past U+10FFFF.
    GrammarMatcher brace(Grammar::parse(R"(root ::= [{] | [\uD800-\uDFFF] | [\U00110000-\U001FFFFF] | .)"));
    CHECK(brace.accepts("{"));
    CHECK_FALSE(brace.accepts("\xC1\xBB"));
    CHECK_FALSE(brace.accepts("\xE0\x81\xBB"));
    CHECK_FALSE(brace.accepts("\xF0\x80"));  // refused as soon as no valid sequence can follow
    CHECK_FALSE(brace.accepts("\xED\xA0\x80"));  // U+D800
    CHECK_FALSE(brace.accepts("\xF4\x90\x80\x80"));  // U+110000
    CHECK(brace.accepts("\xF4\x8F\xBF\xBF"));  // U+10FFFF
    CHECK(brace.accepts("\xC3\xA9"));
}

TEST_CASE("grammar: malformed grammars are refused with what and where", "[grammar]") {
    CHECK_THAT(error_of(R"(root ::= foo)"), Catch::Contains("undefined rule 'foo'") && Catch::Contains("line 1, column 10"));
    CHECK_THAT(error_of(R"(start ::= "a")"), Catch::Contains("no rule named 'root'"));
    CHECK_THAT(error_of(R"(root ::= "abc)"), Catch::Contains("literal that is never closed"));
    CHECK_THAT(error_of(R"(root ::= [abc)"), Catch::Contains("character class that is never closed"));
    CHECK_THAT(error_of(R"(root ::= ("a" | "b")"), Catch::Contains("group that is never closed"));
    CHECK_THAT(error_of(R"(root ::= [])"), Catch::Contains("empty character class"));
    CHECK_THAT(error_of(R"(root ::= [z-a])"), Catch::Contains("range whose end is below its start"));
    CHECK_THAT(error_of(R"(root ::= "\q")"), Catch::Contains("unknown escape '\\q'"));
    CHECK_THAT(error_of(R"(root ::= "\x4")"), Catch::Contains("hex digits"));
    CHECK_THAT(error_of(R"(root ::= * "a")"), Catch::Contains("repetition with nothing before it"));
    CHECK_THAT(error_of(R"(root ::= "a"{3,2})"), Catch::Contains("maximum is below its minimum"));
    CHECK_THAT(error_of(R"(root ::= "a"{x})"), Catch::Contains("expected a number"));
    CHECK_THAT(error_of(R"(root = "a")"), Catch::Contains("expected ::="));
    CHECK_THAT(error_of("root ::= \"a\"\nroot ::= \"b\""), Catch::Contains("defined twice") && Catch::Contains("line 2"));
    CHECK_THAT(error_of("root ::= \"a\" ) \"b\""), Catch::Contains("expected the end of the line"));
    CHECK_THAT(error_of("root ::= \"\xC3\""), Catch::Contains("invalid UTF-8"));
}

TEST_CASE("grammar: hostile grammars are refused or bounded, never a hang", "[grammar]") {
    // Left recursion, direct, through another rule, and behind rules that can match nothing.
    CHECK_THAT(error_of(R"(root ::= root "a" | "b")"), Catch::Contains("left-recursive"));
    CHECK_THAT(error_of("root ::= a\na ::= b \"x\"\nb ::= a | \"y\""), Catch::Contains("left-recursive"));
    CHECK_THAT(error_of("root ::= e root \"x\" | \"y\"\ne ::= \"\" | \"z\""), Catch::Contains("left-recursive"));
    CHECK_THAT(error_of(R"(root ::= ("a"? root) | "b")"), Catch::Contains("left-recursive"));
    // Right recursion is fine.
    CHECK(error_of(R"(root ::= "a" root | "b")").empty());
    // Sizes past the limits: a huge repetition, a repetition of a repetition, deep nesting.
    CHECK_THAT(error_of(R"(root ::= "a"{1000000})"), Catch::Contains("repetition count above 10000"));
    // (Groups are rules of their own, so a repeated group costs one element per copy; a long literal repeated in place
    // costs its length.)
    std::string copies = "root ::=";
    for (int i = 0; i < 12; ++i) copies += " \"abcdefghij\"{10000}";
    CHECK_THAT(error_of(copies), Catch::Contains("more than 1048576 elements"));
    CHECK_THAT(error_of("root ::= " + std::string(300, '(') + "\"a\"" + std::string(300, ')')), Catch::Contains("nested deeper than 256"));
    // A grammar whose parses multiply with each character: bounded by the matcher's limits, with a message.
    // s ::= "a" s "b" | "a" s "c" | : after n a's, every string of n b's and c's may close the text, 2^n stacks.
    const auto g = Grammar::parse("root ::= s\ns ::= \"a\" s \"b\" | \"a\" s \"c\" | ");
    for (const size_t max_stacks : {size_t(64), GrammarMatchLimits{}.max_stacks}) {
        GrammarMatchLimits limits;
        limits.max_stacks = max_stacks;
        GrammarMatcher m(g, limits);
        bool bounded = false;
        int accepted = 0;
        try {
            for (; accepted < 64; ++accepted)
                if (!m.accept("a")) break;
        } catch (const Error &e) {
            bounded = true;
            CHECK(e.status() == SPECULA_ERR_UNSUPPORTED);
            CHECK_THAT(std::string(e.what()), Catch::Contains("too ambiguous"));
        }
        CHECK(bounded);
        CHECK(size_t(1) << accepted <= max_stacks * 4);
    }
    // Text nested past the matcher's depth: bounded too.
    GrammarMatchLimits shallow;
    shallow.max_depth = 64;
    GrammarMatcher deep(Grammar::parse("root ::= p\np ::= \"(\" p \")\" | \"x\""), shallow);
    CHECK_THROWS_WITH(deep.accept(std::string(100, '(')), Catch::Contains("nested deeper"));
}

TEST_CASE("grammar: generated rules for groups and repetitions", "[grammar]") {
    const auto g = Grammar::parse(R"(root ::= ("a" | [b-d])* "e"{1,3} [^f])");
    CHECK(g->to_gbnf() ==
          "root ::= root_2 [e] root_4 [^f]\n"
          "root_1 ::= [a] | [b-d]\n"
          "root_2 ::= root_1 root_2 | \"\"\n"
          "root_3 ::= [e] | \"\"\n"
          "root_4 ::= [e] root_3 | \"\"\n");
}

TEST_CASE("grammar: the token mask equals each token's own check, on made-up and real vocabularies", "[grammar]") {
    // Pieces that split characters, share prefixes, are empty, and an end-of-generation token.
    std::vector<std::string> pieces = {"", "{", "{\"", "\"", "a", "ab", "abc", ":", " ", "1", "12", ".5", "}", "\xE6", "\x97\xA5",
                                       "\xE6\x97\xA5", "\"\xE6", "\\u00", "e9", "true", "tr", ",", "[", "]", "\n", "nul", "l", "\xFF"};
    std::vector<bool> eog(pieces.size(), false);
    pieces.push_back("</s>");
    eog.push_back(true);
    const GrammarVocab made_up(pieces, eog);
    const auto json = Grammar::parse(kJson);

    auto check_walk = [&](const GrammarVocab &vocab, uint32_t seed, int steps) {
        GrammarMatcher m(json);
        std::mt19937 rng(seed);
        std::vector<uint8_t> mask;
        int checked = 0;
        for (int step = 0; step < steps; ++step) {
            m.allowed_tokens(vocab, mask);
            std::vector<int32_t> allowed;
            for (int32_t t = 0; t < vocab.size(); ++t) {
                INFO("step " << step << ", token " << t);
                REQUIRE(bool(mask[size_t(t)]) == m.allows(vocab, t));
                if (mask[size_t(t)] && !vocab.is_eog(t)) allowed.push_back(t);
            }
            ++checked;
            if (allowed.empty()) break;
            REQUIRE(m.accept_token(vocab, allowed[rng() % allowed.size()]));
        }
        return checked;
    };
    for (uint32_t seed = 1; seed <= 20; ++seed) CHECK(check_walk(made_up, seed, 40) > 1);

    // A real vocabulary: stories260K's (SentencePiece, byte tokens for what it lacks).
    const auto path = test_fixtures::fixtures_dir() / "models/stories260K.gguf";
    if (!test_fixtures::have_fixture(path)) return;
    const auto model = Model::load(path.string(), LoadOptions{});
    const GrammarVocab real(model->vocab());
    for (uint32_t seed = 1; seed <= 6; ++seed) CHECK(check_walk(real, seed, 60) > 2);
}

TEST_CASE("grammar: a parse state saved and restored continues the same, and damaged states are refused", "[grammar][snapshot]") {
    const auto json = Grammar::parse(kJson);
    GrammarMatcher m(json);
    REQUIRE(m.accept("{\"a\": [1, {\"b\": \"\xE6"));  // inside objects, an array and a UTF-8 sequence
    const std::vector<uint32_t> words = m.save();
    GrammarMatcher back = GrammarMatcher::restore(json, words);
    CHECK(back.save() == words);
    for (const char *rest : {"\x97\xA5\"}]}", "\x97\xA5\", \"c\": null}]}", "\x97\xA5\"]}"}) {
        GrammarMatcher a = m, b = back;
        const bool ok = a.accept(rest);
        CHECK(b.accept(rest) == ok);
        CHECK(a.can_end() == b.can_end());
    }
    // Every single-word change is either refused or a state a matcher could hold (never a crash).
    int refused = 0;
    for (size_t i = 0; i < words.size(); ++i) {
        for (const uint32_t v : {0u, 1u, 2u, 7u, 1000u, 0xFFFFFFFFu}) {
            std::vector<uint32_t> bad = words;
            bad[i] = v;
            try {
                GrammarMatcher r = GrammarMatcher::restore(json, bad);
                r.accepts("}");
            } catch (const Error &e) {
                CHECK(e.status() == SPECULA_ERR_FORMAT);
                ++refused;
            }
        }
    }
    CHECK(refused > 0);
    std::vector<uint32_t> cut(words.begin(), words.end() - 1);
    CHECK_THROWS_WITH(GrammarMatcher::restore(json, cut), Catch::Contains("snapshot: the grammar's state"));
}

TEST_CASE("grammar: the text a grammar forces, spelled with the vocabulary's longest tokens", "[grammar]") {
    const auto g = Grammar::parse(R"(root ::= "{\"name\": \"" [a-z]+ "\", \"id\": " [0-9] "}")");
    GrammarMatcher m(g);
    CHECK(m.forced_text(256) == "{\"name\": \"");
    CHECK(m.forced_text(3) == "{\"n");
    REQUIRE(m.accept("{\"name\": \"ab"));
    CHECK(m.forced_text(256).empty());  // another letter or the closing quote: a choice
    REQUIRE(m.accept("\""));
    CHECK(m.forced_text(256) == ", \"id\": ");
    REQUIRE(m.accept(", \"id\": 7"));
    CHECK(m.forced_text(256) == "}");
    REQUIRE(m.accept("}"));
    CHECK(m.forced_text(256).empty());  // complete
    // A one-character range and UTF-8 are forced too; the end of the grammar is a choice beside more text.
    CHECK(GrammarMatcher(Grammar::parse(R"(root ::= [x-x] "日本")")).forced_text(256) == "x日本");
    CHECK(GrammarMatcher(Grammar::parse(R"(root ::= "a" | "ab")")).forced_text(256) == "a");
    CHECK(GrammarMatcher(Grammar::parse(R"(root ::= "" | "a")")).forced_text(256).empty());

    const GrammarVocab v({"{", "{\"", "\"", "name", "na", ": ", ":", " ", "\xE6\x97\xA5", "</s>"}, {false, false, false, false, false, false, false,
                                                                                                  false, false, true});
    size_t len = 0;
    CHECK(v.longest_prefix_token("{\"name\"", len) == 1);
    CHECK(len == 2);
    CHECK(v.longest_prefix_token("name\": ", len) == 3);
    CHECK(v.longest_prefix_token(": x", len) == 5);
    CHECK(v.longest_prefix_token("</s>", len) == -1);  // an end-of-generation token never spells text
    CHECK(len == 0);
}
