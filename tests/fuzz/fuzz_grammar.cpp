// grammar: GBNF grammars (sdk/src/grammar) parsed and followed through text.
//
// Input: a flags byte, then the grammar text up to a 0x00 byte, then text to follow. The grammar is parsed with the
// start rule "root"; a malformed one must be INVALID_ARGUMENT with a message. When it parses, its rules written back
// (to_gbnf) must parse into as many rules and elements, and the text is fed in pieces cut where flags' bits choose (inside UTF-8
// sequences too), checking that accepts() predicts accept(), that a refused piece leaves the state unchanged, that a
// saved state restores to the same words, and that the token mask over a small vocabulary equals each token's own
// check. Limits are those of the library (grammar.h, grammar_matcher.h): a hostile grammar must be refused or
// bounded within the fuzzer's 10 s. Grammar text starting with '^' is a JSON schema pattern instead (translated by
// grammar/json_pattern.h, then checked the same way).
#include "fuzz_common.h"

#include "grammar/grammar.h"
#include "grammar/grammar_matcher.h"
#include "grammar/json_pattern.h"

using namespace specula::internal;

namespace {

// Pieces that split characters, share prefixes, and an end-of-generation token.
const GrammarVocab &vocab() {
    static const GrammarVocab v(
        {"{", "}", "[", "]", "\"", ":", ",", " ", "\n", "a", "ab", "abc", "0", "12", "-", ".", "e", "true", "null", "\\", "\\u", "x",
         "\xE6", "\x97\xA5", "\xE6\x97\xA5", "\xC3\xA9", "\xF0\x9F", "\x98\x80", "(", ")", "+", "*", "/", "=", "</s>", ""},
        {false, false, false, false, false, false, false, false, false, false, false, false, false, false, false, false, false, false, false,
         false, false, false, false, false, false, false, false, false, false, false, false, false, false, false, true, false});
    return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz::Reader in(data, size);
    const uint8_t flags = in.byte();
    const std::string_view grammar_text = in.until('\0');
    const std::string_view text = in.bytes(512);
    std::shared_ptr<const Grammar> g;
    // Text starting with '^' (never a GBNF rule) is a JSON schema's string pattern (json_pattern.h): refused with
    // INVALID_ARGUMENT or UNSUPPORTED, or translated into an expression that must parse; its grammar is then followed.
    std::string pattern_grammar;
    if (!grammar_text.empty() && grammar_text[0] == '^') {
        try {
            pattern_grammar = "root ::= " + json_pattern_to_gbnf(std::string(grammar_text));
        } catch (const Error &e) {
            fuzz::expected_error(e);
            FUZZ_CHECK(e.status() == SPECULA_ERR_INVALID_ARGUMENT || e.status() == SPECULA_ERR_UNSUPPORTED);
            return 0;
        }
        try {
            g = Grammar::parse(pattern_grammar);
        } catch (const Error &e) {
            const std::string why = e.what();
            FUZZ_CHECK(e.status() == SPECULA_ERR_INVALID_ARGUMENT &&
                       (why.find("more than") != std::string::npos || why.find("above") != std::string::npos ||
                        why.find("deeper") != std::string::npos || why.find("left-recursive") != std::string::npos));
            return 0;  // only the grammar's size limits, or a repeated group that matches the empty string (a rule the
                       // parser refuses as left-recursive, e.g. ^(a|)*$), may refuse a translation
        }
    }
    try {
        if (!g) g = Grammar::parse(grammar_text);
    } catch (const Error &e) {
        fuzz::expected_error(e);
        FUZZ_CHECK(e.status() == SPECULA_ERR_INVALID_ARGUMENT);
        return 0;
    }
    FUZZ_CHECK(g->n_elements() <= GrammarLimits{}.max_elements);
    try {
        // The rules written back (generated rules and all) parse again into as many rules and elements.
        const auto again = Grammar::parse(g->to_gbnf());
        FUZZ_CHECK(again->n_rules() == g->n_rules() && again->n_elements() == g->n_elements());
        GrammarMatcher m(g);
        std::vector<uint8_t> mask;
        size_t at = 0, step = 0;
        while (at < text.size()) {
            const size_t len = 1 + ((flags >> (step % 8)) & 3);
            ++step;
            const std::string_view piece = text.substr(at, len);
            at += piece.size();
            const std::vector<uint32_t> before = m.save();
            const bool predicted = m.accepts(piece);
            FUZZ_CHECK(m.accept(piece) == predicted);
            if (!predicted) FUZZ_CHECK(m.save() == before);
            FUZZ_CHECK(GrammarMatcher::restore(g, m.save()).save() == m.save());
            if (step % 4 == 0) {
                m.allowed_tokens(vocab(), mask);
                for (int32_t t = 0; t < vocab().size(); ++t) FUZZ_CHECK(bool(mask[size_t(t)]) == m.allows(vocab(), t));
            }
            if (!predicted) break;
        }
    } catch (const Error &e) {
        fuzz::expected_error(e);
        FUZZ_CHECK(e.status() == SPECULA_ERR_UNSUPPORTED);  // a limit of the matcher
    }
    return 0;
}
