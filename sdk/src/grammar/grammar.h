// A GBNF grammar (llama.cpp's grammar format, grammars/README.md of llama.cpp), parsed into rules of elements.
//
// Syntax, as llama.cpp reads it: `name ::= alternatives` rules, one per line (a rule continues on the next lines
// inside parentheses and after `|`); sequences of "literals", [character classes] ([^...] negated, a-z ranges),
// `.` (any character), rule names and ( groups ); the repetitions `*`, `+`, `?`, `{m}`, `{m,}`, `{m,n}`; `#` comments;
// escapes \x.. \u.... \U........ \n \r \t \\ \" \[ \] in literals and classes. Text is UTF-8; a grammar matches code
// points. A grammar is parsed once and shared, immutable, by the matchers that follow it (grammar_matcher.h).
//
// Each rule is a flat list of elements, its alternatives separated by kAlt and closed by kEnd. A character class is
// one kChar (or kCharNot) element followed by kCharAlt elements for its further characters, a kCharRangeUpper after
// an element making that element's value the lower end of a range. Groups and repetitions become generated rules
// (`name_N`): `x*` is `name_N ::= x name_N |`, `x{2,4}` is `x x` then two nested optional copies.
//
// Hostile grammars are refused with a message (Error(INVALID_ARGUMENT, "grammar: ...")), never a hang: undefined or
// left-recursive rules (a matcher would loop on them), repetitions or nesting past the limits below.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace specula::internal {

enum class GrammarOp : uint8_t {
    kEnd,             // the end of a rule
    kAlt,             // the start of the rule's next alternative
    kRuleRef,         // value: a rule id
    kChar,            // value: a code point; the start of a character class (a literal is a one-character class)
    kCharNot,         // value: a code point; the start of a negated class [^...]
    kCharRangeUpper,  // value: the upper end of the range whose lower end is the previous element's value
    kCharAlt,         // value: one more code point of the class
    kCharAny,         // `.`: any code point
};

struct GrammarElement {
    GrammarOp op;
    uint32_t value;
};

// The most a grammar may build (refused above them): the elements of all rules together, a repetition's count, the
// nesting of groups.
struct GrammarLimits {
    size_t max_elements = size_t(1) << 20;
    uint32_t max_repetition = 10000;
    int32_t max_nesting = 256;
};

class Grammar {
public:
    // Parses GBNF text whose start rule is `root`. Throws Error(INVALID_ARGUMENT, "grammar: <what> at line L,
    // column C") for a malformed or hostile grammar.
    static std::shared_ptr<const Grammar> parse(std::string_view text, std::string_view root = "root",
                                                const GrammarLimits &limits = GrammarLimits{});

    uint32_t root() const { return root_; }
    size_t n_rules() const { return rules_.size(); }
    // Rule id's elements, ending with kEnd.
    const std::vector<GrammarElement> &rule(uint32_t id) const { return rules_[id]; }
    const std::string &rule_name(uint32_t id) const { return names_[id]; }
    size_t n_elements() const;

    // The rules written back as GBNF, one per line in id order (generated rules included): for tests and debugging.
    std::string to_gbnf() const;

private:
    friend class GrammarParser;
    std::vector<std::vector<GrammarElement>> rules_;
    std::vector<std::string> names_;
    uint32_t root_ = 0;
};

}  // namespace specula::internal
