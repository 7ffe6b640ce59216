#include "grammar/grammar.h"

#include "core/error.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>

namespace specula::internal {

// A recursive-descent reader of GBNF; the structure (rules, alternatives, sequences, repetitions) follows the
// grammar's own definition in llama.cpp's grammars/README.md.
class GrammarParser {
public:
    GrammarParser(std::string_view text, const GrammarLimits &limits) : src_(text), limits_(limits) {}

    std::shared_ptr<const Grammar> parse(std::string_view root_name) {
        skip_space(true);
        while (pos_ < src_.size()) parse_rule();
        auto g = std::make_shared<Grammar>();
        // Every referenced rule is defined; the root exists; no rule can reach itself without reading a character.
        for (size_t id = 0; id < rules_.size(); ++id)
            if (rules_[id].empty()) fail_at(first_use_[id], "undefined rule '" + names_[id] + "'");
        const auto root = ids_.find(std::string(root_name));
        if (root == ids_.end())
            throw Error(SPECULA_ERR_INVALID_ARGUMENT, "grammar: the grammar has no rule named '" + std::string(root_name) + "' (its start rule)");
        check_left_recursion();
        g->rules_ = std::move(rules_);
        g->names_ = std::move(names_);
        g->root_ = root->second;
        return g;
    }

private:
    std::string_view src_;
    GrammarLimits limits_;
    size_t pos_ = 0;
    std::map<std::string, uint32_t, std::less<>> ids_;
    std::vector<std::string> names_;
    std::vector<std::vector<GrammarElement>> rules_;  // empty = referenced but not (yet) defined
    std::vector<size_t> first_use_;
    size_t n_elements_ = 0;
    int32_t nesting_ = 0;

    [[noreturn]] void fail_at(size_t at, const std::string &what) const {
        size_t line = 1, column = 1;
        for (size_t i = 0; i < at && i < src_.size(); ++i) {
            if (src_[i] == '\n') {
                ++line;
                column = 1;
            } else {
                ++column;
            }
        }
        throw Error(SPECULA_ERR_INVALID_ARGUMENT,
                    "grammar: " + what + " at line " + std::to_string(line) + ", column " + std::to_string(column));
    }
    [[noreturn]] void fail(const std::string &what) const { fail_at(pos_, what); }

    bool at_end() const { return pos_ >= src_.size(); }
    char peek(size_t ahead = 0) const { return pos_ + ahead < src_.size() ? src_[pos_ + ahead] : '\0'; }

    static bool is_name_char(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
    }
    static bool is_digit(char c) { return c >= '0' && c <= '9'; }

    // Spaces, tabs and comments; line ends too where a rule may continue on the next line.
    void skip_space(bool newlines) {
        while (!at_end()) {
            const char c = peek();
            if (c == '#') {
                while (!at_end() && peek() != '\n' && peek() != '\r') ++pos_;
            } else if (c == ' ' || c == '\t' || (newlines && (c == '\r' || c == '\n'))) {
                ++pos_;
            } else {
                break;
            }
        }
    }

    uint32_t symbol(const std::string &name, size_t used_at) {
        const auto it = ids_.find(name);
        if (it != ids_.end()) return it->second;
        const uint32_t id = uint32_t(names_.size());
        ids_.emplace(name, id);
        names_.push_back(name);
        rules_.emplace_back();
        first_use_.push_back(used_at);
        return id;
    }
    uint32_t generated_symbol(const std::string &base) {
        std::string name = base + "_" + std::to_string(names_.size());
        while (ids_.count(name)) name += "_";
        return symbol(name, pos_);
    }

    void count(size_t n) {
        n_elements_ += n;
        if (n_elements_ > limits_.max_elements)
            fail("the grammar would have more than " + std::to_string(limits_.max_elements) + " elements");
    }
    void define(uint32_t id, std::vector<GrammarElement> elements) {
        count(elements.size());
        rules_[id] = std::move(elements);
    }

    std::string parse_name() {
        const size_t start = pos_;
        while (!at_end() && is_name_char(peek())) ++pos_;
        if (pos_ == start) fail("expected a rule name");
        return std::string(src_.substr(start, pos_ - start));
    }

    uint32_t parse_int() {
        const size_t start = pos_;
        uint64_t v = 0;
        while (!at_end() && is_digit(peek())) {
            v = v * 10 + uint64_t(peek() - '0');
            if (v > limits_.max_repetition) fail_at(start, "a repetition count above " + std::to_string(limits_.max_repetition));
            ++pos_;
        }
        if (pos_ == start) fail("expected a number");
        return uint32_t(v);
    }

    uint32_t parse_hex(int digits) {
        uint32_t v = 0;
        for (int i = 0; i < digits; ++i) {
            const char c = peek();
            uint32_t d;
            if (c >= '0' && c <= '9') d = uint32_t(c - '0');
            else if (c >= 'a' && c <= 'f') d = uint32_t(c - 'a' + 10);
            else if (c >= 'A' && c <= 'F') d = uint32_t(c - 'A' + 10);
            else fail("expected " + std::to_string(digits) + " hex digits");
            v = v * 16 + d;
            ++pos_;
        }
        return v;
    }

    // One character of a literal or a class: an escape or one UTF-8 encoded code point.
    uint32_t parse_char() {
        if (at_end()) fail("unexpected end of the grammar");
        const unsigned char c = static_cast<unsigned char>(peek());
        if (c == '\\') {
            ++pos_;
            const char e = peek();
            ++pos_;
            switch (e) {
            case 'x': return parse_hex(2);
            case 'u': return parse_hex(4);
            case 'U': return parse_hex(8);
            case 't': return '\t';
            case 'r': return '\r';
            case 'n': return '\n';
            case '\\': case '"': case '[': case ']': case '-': case '^': return uint32_t(e);
            default: fail_at(pos_ - 2, std::string("unknown escape '\\") + (e ? std::string(1, e) : std::string()) + "'");
            }
        }
        int n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
        if (n == 0 || pos_ + size_t(n) > src_.size()) fail("invalid UTF-8");
        uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1Fu) : n == 3 ? (c & 0x0Fu) : (c & 0x07u);
        for (int i = 1; i < n; ++i) {
            const unsigned char cc = static_cast<unsigned char>(src_[pos_ + size_t(i)]);
            if ((cc & 0xC0) != 0x80) fail("invalid UTF-8");
            cp = (cp << 6) | (cc & 0x3Fu);
        }
        pos_ += size_t(n);
        return cp;
    }

    void parse_rule() {
        const size_t start = pos_;
        const std::string name = parse_name();
        skip_space(false);
        if (src_.substr(pos_, 3) != "::=") fail("expected ::=");
        pos_ += 3;
        skip_space(true);
        const uint32_t id = symbol(name, start);
        if (!rules_[id].empty()) fail_at(start, "rule '" + name + "' is defined twice");
        parse_alternates(name, id, false);
        if (peek() == '\r') pos_ += peek(1) == '\n' ? 2 : 1;
        else if (peek() == '\n') ++pos_;
        else if (!at_end()) fail("expected the end of the line");
        skip_space(true);
    }

    void parse_alternates(const std::string &rule_name, uint32_t id, bool nested) {
        std::vector<GrammarElement> rule;
        parse_sequence(rule_name, rule, nested);
        while (peek() == '|') {
            rule.push_back({GrammarOp::kAlt, 0});
            ++pos_;
            skip_space(true);
            parse_sequence(rule_name, rule, nested);
        }
        rule.push_back({GrammarOp::kEnd, 0});
        define(id, std::move(rule));
    }

    // `item{min,max}` (max UINT32_MAX: unbounded) in place of the item out[last_start..]: min copies, then the optional
    // rest as generated rules (an unbounded tail right-recursive, a bounded one nested so each copy is optional).
    void repeat(const std::string &rule_name, std::vector<GrammarElement> &out, size_t last_start, uint32_t min, uint32_t max,
                size_t op_at) {
        if (last_start == out.size()) fail_at(op_at, "a repetition with nothing before it");
        if (max < min) fail_at(op_at, "a repetition whose maximum is below its minimum");
        const std::vector<GrammarElement> item(out.begin() + ptrdiff_t(last_start), out.end());
        const bool unbounded = max == UINT32_MAX;
        const size_t n_optional = unbounded ? 1 : size_t(max - min);
        if (double(item.size()) * (double(min) + double(n_optional)) + double(n_elements_) > double(limits_.max_elements))
            fail_at(op_at, "the repetition would build more than " + std::to_string(limits_.max_elements) + " elements");
        out.resize(last_start);
        for (uint32_t i = 0; i < min; ++i) out.insert(out.end(), item.begin(), item.end());
        uint32_t inner = 0;  // the rule holding the copies after this one (none yet)
        for (size_t i = 0; i < n_optional; ++i) {
            const uint32_t id = generated_symbol(rule_name);
            std::vector<GrammarElement> r = item;
            if (unbounded) r.push_back({GrammarOp::kRuleRef, id});
            else if (i > 0) r.push_back({GrammarOp::kRuleRef, inner});
            r.push_back({GrammarOp::kAlt, 0});
            r.push_back({GrammarOp::kEnd, 0});
            define(id, std::move(r));
            inner = id;
        }
        if (n_optional > 0) out.push_back({GrammarOp::kRuleRef, inner});
    }

    void parse_sequence(const std::string &rule_name, std::vector<GrammarElement> &out, bool nested) {
        size_t last_start = out.size();
        while (!at_end()) {
            const char c = peek();
            const size_t at = pos_;
            if (c == '"') {
                ++pos_;
                last_start = out.size();
                while (peek() != '"') {
                    if (at_end()) fail_at(at, "a literal that is never closed");
                    out.push_back({GrammarOp::kChar, parse_char()});
                }
                ++pos_;
                skip_space(nested);
            } else if (c == '[') {
                ++pos_;
                GrammarOp first = GrammarOp::kChar;
                if (peek() == '^') {
                    ++pos_;
                    first = GrammarOp::kCharNot;
                }
                last_start = out.size();
                while (peek() != ']') {
                    if (at_end()) fail_at(at, "a character class that is never closed");
                    const uint32_t cp = parse_char();
                    out.push_back({out.size() > last_start ? GrammarOp::kCharAlt : first, cp});
                    if (peek() == '-' && peek(1) != ']') {
                        ++pos_;
                        const uint32_t upper = parse_char();
                        if (upper < cp) fail("a character range whose end is below its start");
                        out.push_back({GrammarOp::kCharRangeUpper, upper});
                    }
                }
                if (out.size() == last_start) fail_at(at, "an empty character class");
                ++pos_;
                skip_space(nested);
            } else if (is_name_char(c)) {
                const std::string name = parse_name();
                const uint32_t id = symbol(name, at);
                skip_space(nested);
                last_start = out.size();
                out.push_back({GrammarOp::kRuleRef, id});
            } else if (c == '(') {
                ++pos_;
                if (++nesting_ > limits_.max_nesting) fail("groups nested deeper than " + std::to_string(limits_.max_nesting));
                skip_space(true);
                const uint32_t id = generated_symbol(rule_name);
                parse_alternates(rule_name, id, true);
                --nesting_;
                last_start = out.size();
                out.push_back({GrammarOp::kRuleRef, id});
                if (peek() != ')') fail_at(at, "a group that is never closed");
                ++pos_;
                skip_space(nested);
            } else if (c == '.') {
                ++pos_;
                last_start = out.size();
                out.push_back({GrammarOp::kCharAny, 0});
                skip_space(nested);
            } else if (c == '*' || c == '+' || c == '?') {
                ++pos_;
                skip_space(nested);
                repeat(rule_name, out, last_start, c == '+' ? 1 : 0, c == '?' ? 1 : UINT32_MAX, at);
            } else if (c == '{') {
                ++pos_;
                skip_space(nested);
                const uint32_t min = parse_int();
                skip_space(nested);
                uint32_t max = min;
                if (peek() == ',') {
                    ++pos_;
                    skip_space(nested);
                    max = is_digit(peek()) ? parse_int() : UINT32_MAX;
                    skip_space(nested);
                }
                if (peek() != '}') fail("expected '}'");
                ++pos_;
                skip_space(nested);
                repeat(rule_name, out, last_start, min, max, at);
            } else {
                break;
            }
        }
    }

    // A rule that can reach itself before reading a character would make a matcher expand it forever.
    void check_left_recursion() const {
        const size_t n = rules_.size();
        // Which rules can match the empty string (a fixed point: an alternative of empty-matching references).
        std::vector<bool> nullable(n, false);
        for (bool changed = true; changed;) {
            changed = false;
            for (size_t id = 0; id < n; ++id) {
                if (nullable[id]) continue;
                bool alt_nullable = true;
                for (const GrammarElement &e : rules_[id]) {
                    if (e.op == GrammarOp::kAlt || e.op == GrammarOp::kEnd) {
                        if (alt_nullable) {
                            nullable[id] = true;
                            changed = true;
                            break;
                        }
                        alt_nullable = true;
                    } else if (e.op != GrammarOp::kRuleRef || !nullable[e.value]) {
                        alt_nullable = false;
                    }
                }
            }
        }
        // The rules each rule may start with: references preceded only by empty-matching references.
        std::vector<std::vector<uint32_t>> starts(n);
        for (size_t id = 0; id < n; ++id) {
            bool leading = true;
            for (const GrammarElement &e : rules_[id]) {
                if (e.op == GrammarOp::kAlt || e.op == GrammarOp::kEnd) {
                    leading = true;
                } else if (leading && e.op == GrammarOp::kRuleRef) {
                    starts[id].push_back(e.value);
                    leading = nullable[e.value];
                } else {
                    leading = false;
                }
            }
        }
        // A cycle in that graph (iterative depth-first search: grammars can be deep).
        std::vector<uint8_t> state(n, 0);  // 0 new, 1 on the path, 2 done
        for (size_t s = 0; s < n; ++s) {
            if (state[s]) continue;
            std::vector<std::pair<uint32_t, size_t>> path{{uint32_t(s), 0}};
            state[s] = 1;
            while (!path.empty()) {
                auto &[id, next] = path.back();
                if (next == starts[id].size()) {
                    state[id] = 2;
                    path.pop_back();
                    continue;
                }
                const uint32_t to = starts[id][next++];
                if (state[to] == 1) {
                    // Name the user's rule, not a generated one: the first named rule on the cycle.
                    throw Error(SPECULA_ERR_INVALID_ARGUMENT, "grammar: rule '" + names_[to] + "' is left-recursive");
                }
                if (state[to] == 0) {
                    state[to] = 1;
                    path.emplace_back(to, 0);
                }
            }
        }
    }
};

std::shared_ptr<const Grammar> Grammar::parse(std::string_view text, std::string_view root, const GrammarLimits &limits) {
    return GrammarParser(text, limits).parse(root);
}

size_t Grammar::n_elements() const {
    size_t n = 0;
    for (const auto &r : rules_) n += r.size();
    return n;
}

namespace {

void append_escaped(std::string &out, uint32_t cp, bool in_class) {
    if (cp == '\\' || cp == '"' || (in_class && (cp == ']' || cp == '-' || cp == '^' || cp == '['))) {
        out += '\\';
        out += char(cp);
    } else if (cp == '\n') {
        out += "\\n";
    } else if (cp == '\r') {
        out += "\\r";
    } else if (cp == '\t') {
        out += "\\t";
    } else if (cp < 0x20 || cp == 0x7F) {
        static const char *hex = "0123456789ABCDEF";
        out += "\\x";
        out += hex[cp >> 4];
        out += hex[cp & 15];
    } else if (cp < 0x80) {
        out += char(cp);
    } else {
        char buf[12];
        std::snprintf(buf, sizeof buf, cp <= 0xFFFF ? "\\u%04X" : "\\U%08X", unsigned(cp));
        out += buf;
    }
}

}  // namespace

std::string Grammar::to_gbnf() const {
    std::string out;
    for (size_t id = 0; id < rules_.size(); ++id) {
        out += names_[id] + " ::=";
        const auto &r = rules_[id];
        bool empty_alternative = true;  // written "" (a bare `|` at the end of a line would continue the rule)
        for (size_t i = 0; i < r.size(); ++i) {
            const GrammarElement &e = r[i];
            if (e.op == GrammarOp::kEnd || e.op == GrammarOp::kAlt) {
                if (empty_alternative) out += " \"\"";
                if (e.op == GrammarOp::kAlt) out += " |";
                empty_alternative = true;
                continue;
            }
            empty_alternative = false;
            switch (e.op) {
            case GrammarOp::kEnd:
            case GrammarOp::kAlt: break;
            case GrammarOp::kRuleRef: out += " " + names_[e.value]; break;
            case GrammarOp::kCharAny: out += " ."; break;
            case GrammarOp::kChar:
            case GrammarOp::kCharNot: {
                out += e.op == GrammarOp::kChar ? " [" : " [^";
                append_escaped(out, e.value, true);
                while (i + 1 < r.size() && (r[i + 1].op == GrammarOp::kCharAlt || r[i + 1].op == GrammarOp::kCharRangeUpper)) {
                    ++i;
                    if (r[i].op == GrammarOp::kCharRangeUpper) out += '-';
                    append_escaped(out, r[i].value, true);
                }
                out += ']';
                break;
            }
            case GrammarOp::kCharAlt:
            case GrammarOp::kCharRangeUpper: break;  // written with their class
            }
        }
        out += '\n';
    }
    return out;
}

}  // namespace specula::internal
