#include "grammar/json_pattern.h"

#include "core/error.h"
#include "tokenizer/unicode.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace specula::internal {
namespace {

[[noreturn]] void invalid(const std::string &what) { throw Error(SPECULA_ERR_INVALID_ARGUMENT, "json schema: pattern: " + what); }
[[noreturn]] void unsupported(const std::string &what) { throw Error(SPECULA_ERR_UNSUPPORTED, "json schema: pattern: " + what); }

constexpr uint32_t kMaxCodePoint = 0x10FFFF;
constexpr int64_t kMaxRepetition = 10000;  // the grammar parser's own bound (grammar.h)

// A set of code points as sorted, disjoint, non-adjacent ranges.
using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

Ranges normalized(Ranges r) {
    std::sort(r.begin(), r.end());
    Ranges out;
    for (const auto &[lo, hi] : r) {
        if (!out.empty() && lo <= out.back().second + 1) out.back().second = std::max(out.back().second, hi);
        else out.push_back({lo, hi});
    }
    return out;
}

Ranges complement(const Ranges &r) {
    Ranges out;
    uint32_t next = 0;
    for (const auto &[lo, hi] : normalized(r)) {
        if (lo > next) out.push_back({next, lo - 1});
        next = hi + 1;
    }
    if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
    return out;
}

Ranges minus(const Ranges &a, const Ranges &b) {
    Ranges both = complement(b);
    Ranges out;
    for (const auto &[alo, ahi] : normalized(a))
        for (const auto &[blo, bhi] : both) {
            const uint32_t lo = std::max(alo, blo), hi = std::min(ahi, bhi);
            if (lo <= hi) out.push_back({lo, hi});
        }
    return normalized(out);
}

bool contains(const Ranges &r, uint32_t cp) {
    return std::any_of(r.begin(), r.end(), [cp](const auto &x) { return x.first <= cp && cp <= x.second; });
}

const Ranges kDigit = {{'0', '9'}};
const Ranges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const Ranges kSpace = {{'\t', '\r'}, {' ', ' '}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A}, {0x2028, 0x2029},
                       {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
const Ranges kLineBreaks = {{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}};
// What a JSON string cannot hold raw: control characters, the quote and the backslash (the last two are written
// escaped instead).
const Ranges kNotRaw = {{0x00, 0x1F}, {'"', '"'}, {'\\', '\\'}, {0x7F, 0x7F}};

// A code point inside a GBNF class or literal.
std::string class_char(uint32_t cp) {
    static const char *hex = "0123456789ABCDEF";
    auto esc = [&](int digits, char tag) {
        std::string s = "\\";
        s += tag;
        for (int i = digits - 1; i >= 0; --i) s += hex[(cp >> (4 * i)) & 15];
        return s;
    };
    if (cp < 0x20 || cp == 0x7F) return esc(2, 'x');
    if (cp == ']' || cp == '[' || cp == '\\' || cp == '-' || cp == '^' || cp == '"') return std::string("\\") + char(cp);
    if (cp < 0x80) return std::string(1, char(cp));
    return cp <= 0xFFFF ? esc(4, 'u') : esc(8, 'U');
}

// The JSON text of a set of characters: one class of the raw ones, and the escaped quote and backslash.
std::string set_expression(const Ranges &set) {
    const Ranges raw = minus(set, kNotRaw);
    std::vector<std::string> alts;
    if (!raw.empty()) {
        std::string c = "[";
        for (const auto &[lo, hi] : raw) c += lo == hi ? class_char(lo) : class_char(lo) + "-" + class_char(hi);
        alts.push_back(c + "]");
    }
    if (contains(set, '"')) alts.push_back(R"("\\\"")");
    if (contains(set, '\\')) alts.push_back(R"("\\\\")");
    if (alts.empty()) invalid("a class that matches no character a JSON string may hold");
    if (alts.size() == 1) return alts[0];
    std::string out = "(";
    for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
    return out + ")";
}

// The JSON text of one literal character, as a GBNF literal.
std::string literal_char(uint32_t cp) {
    if (cp == '"') return R"("\\\"")";
    if (cp == '\\') return R"("\\\\")";
    if (cp < 0x20 || cp == 0x7F) invalid("a control character (JSON writes it escaped; use a class such as \\s)");
    std::string s;
    append_utf8(s, cp);
    return "\"" + s + "\"";
}

class Translator {
public:
    explicit Translator(std::vector<uint32_t> cps) : p_(std::move(cps)) {}

    std::string run() {
        if (p_.empty() || p_.front() != '^' || p_.back() != '$' || (p_.size() >= 2 && p_[p_.size() - 2] == '\\'))
            unsupported("a pattern must start with '^' and end with '$' (llama.cpp's converter asks the same)");
        i_ = 1;
        end_ = p_.size() - 1;
        std::string out = alternation();
        if (i_ != end_) invalid(at() == ')' ? "an unmatched ')'" : "unexpected '" + std::string(1, char(at())) + "'");
        return out;
    }

private:
    std::vector<uint32_t> p_;
    size_t i_ = 0, end_ = 0;
    int depth_ = 0;

    bool done() const { return i_ >= end_; }
    uint32_t at() const { return i_ < end_ ? p_[i_] : 0; }

    std::string alternation() {
        std::vector<std::string> alts = {sequence()};
        while (!done() && at() == '|') {
            ++i_;
            alts.push_back(sequence());
        }
        if (alts.size() == 1) return alts[0];
        std::string out;
        for (size_t k = 0; k < alts.size(); ++k) out += (k ? " | " : "") + alts[k];
        return out;
    }

    std::string sequence() {
        std::vector<std::string> items;
        while (!done() && at() != '|' && at() != ')') {
            std::string a = atom();
            a += quantifier();
            items.push_back(a);
        }
        if (items.empty()) return R"("")";
        std::string out;
        for (size_t k = 0; k < items.size(); ++k) out += (k ? " " : "") + items[k];
        return out;
    }

    std::string atom() {
        const uint32_t c = at();
        if (c == '*' || c == '+' || c == '?' || c == '{') {
            // "{" not followed by a valid bound is a literal in ECMAScript's Annex B; keep it strict: refuse.
            invalid("a quantifier with nothing before it at character " + std::to_string(i_));
        }
        ++i_;
        switch (c) {
            case '(': return group();
            case '[': return char_class();
            case '.': return set_expression(complement(kLineBreaks));
            case '\\': return escape_outside_class();
            case '^':
            case '$': unsupported("anchors inside the pattern ('^' and '$' only at its ends)");
            default: return literal_char(c);
        }
    }

    std::string group() {
        if (at() == '?') {
            if (i_ + 1 < end_ && p_[i_ + 1] == ':') {
                i_ += 2;
            } else {
                unsupported("lookarounds and named groups ('(?=', '(?!', '(?<')");
            }
        }
        if (++depth_ > 256) unsupported("groups nested deeper than 256");
        std::string inner = alternation();
        --depth_;
        if (done() || at() != ')') invalid("an unclosed '('");
        ++i_;
        return "(" + inner + ")";
    }

    // \d \w \s and their negations, as sets (false: another escape).
    bool class_escape(uint32_t e, Ranges &set) {
        switch (e) {
            case 'd': set = kDigit; return true;
            case 'D': set = complement(kDigit); return true;
            case 'w': set = kWord; return true;
            case 'W': set = complement(kWord); return true;
            case 's': set = kSpace; return true;
            case 'S': set = complement(kSpace); return true;
            default: return false;
        }
    }

    uint32_t hex_digits(int n) {
        uint32_t v = 0;
        for (int k = 0; k < n; ++k) {
            if (done()) invalid("a truncated \\x or \\u escape");
            const uint32_t h = at();
            ++i_;
            int d = -1;
            if (h >= '0' && h <= '9') d = int(h - '0');
            else if (h >= 'a' && h <= 'f') d = int(h - 'a' + 10);
            else if (h >= 'A' && h <= 'F') d = int(h - 'A' + 10);
            if (d < 0) invalid("a bad hexadecimal digit in a \\x or \\u escape");
            v = v * 16 + uint32_t(d);
        }
        return v;
    }

    // The character a single-character escape stands for.
    uint32_t escaped_char(uint32_t e) {
        switch (e) {
            case 't': return '\t';
            case 'n': return '\n';
            case 'r': return '\r';
            case 'f': return '\f';
            case 'v': return '\v';
            case '0': return 0;
            case 'x': return hex_digits(2);
            case 'u': return hex_digits(4);
            default: break;
        }
        if (e >= '1' && e <= '9') unsupported("backreferences");
        if (e == 'b' || e == 'B') unsupported("word boundaries (\\b, \\B)");
        if (e == 'k' || e == 'p' || e == 'P' || e == 'c') unsupported(std::string("the escape \\") + char(e));
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) invalid(std::string("an unknown escape \\") + char(e));
        return e;  // escaped punctuation (or any other character) is itself
    }

    std::string escape_outside_class() {
        if (done()) invalid("a trailing backslash");
        const uint32_t e = at();
        ++i_;
        Ranges set;
        if (class_escape(e, set)) return set_expression(set);
        return literal_char(escaped_char(e));  // a control character is refused there, with why
    }

    std::string char_class() {
        bool negated = false;
        if (at() == '^') {
            negated = true;
            ++i_;
        }
        Ranges set;
        bool first = true;
        while (true) {
            if (done()) invalid("an unclosed '['");
            if (at() == ']' && !first) break;
            first = false;
            uint32_t lo = 0;
            if (!class_member(set, lo)) continue;  // \d and the like went into set
            if (at() == '-' && i_ + 1 < end_ && p_[i_ + 1] != ']') {
                ++i_;
                uint32_t hi = 0;
                Ranges unused;
                if (!class_member(unused, hi)) invalid("a class escape (\\d, \\w, \\s) as a range's end");
                if (hi < lo) invalid("a range out of order in a class");
                set.push_back({lo, hi});
            } else {
                set.push_back({lo, lo});
            }
        }
        ++i_;  // ']'
        return set_expression(negated ? complement(set) : normalized(set));
    }

    // One class member: a character (returned in c, true) or a class escape added to set (false).
    bool class_member(Ranges &set, uint32_t &c) {
        const uint32_t x = at();
        ++i_;
        if (x != '\\') {
            c = x;
            return true;
        }
        if (done()) invalid("a trailing backslash");
        const uint32_t e = at();
        ++i_;
        Ranges s;
        if (class_escape(e, s)) {
            set.insert(set.end(), s.begin(), s.end());
            return false;
        }
        c = e == 'b' ? '\b' : escaped_char(e);  // inside a class, \b is the backspace
        return true;
    }

    int64_t number() {
        int64_t v = 0;
        bool any = false;
        while (!done() && at() >= '0' && at() <= '9') {
            v = std::min<int64_t>(v * 10 + int64_t(at() - '0'), kMaxRepetition + 1);
            ++i_;
            any = true;
        }
        return any ? v : -1;
    }

    std::string quantifier() {
        if (done()) return "";
        std::string q;
        const uint32_t c = at();
        if (c == '*' || c == '+' || c == '?') {
            ++i_;
            q = std::string(1, char(c));
        } else if (c == '{') {
            ++i_;
            const int64_t m = number();
            if (m < 0) invalid("a '{' quantifier without a count");
            int64_t n = m;
            bool open = false;
            if (at() == ',') {
                ++i_;
                n = number();
                open = n < 0;
            }
            if (done() || at() != '}') invalid("an unclosed '{' quantifier");
            ++i_;
            if (m > kMaxRepetition || n > kMaxRepetition) unsupported("a repetition count above 10000");
            if (!open && n < m) invalid("a '{m,n}' quantifier with n < m");
            q = "{";
            q += std::to_string(m);
            if (open) {
                q += ",";
            } else if (n != m) {
                q += ",";
                q += std::to_string(n);
            }
            q += "}";
        } else {
            return "";
        }
        if (!done() && at() == '?') ++i_;  // lazy: the same strings
        if (!done() && (at() == '*' || at() == '+' || at() == '?' || at() == '{')) invalid("a quantifier after a quantifier");
        return q;
    }
};

}  // namespace

std::string json_pattern_to_gbnf(const std::string &pattern) {
    for (size_t i = 0; i < pattern.size();) {
        bool incomplete = false;
        const size_t n = valid_utf8_prefix_length(std::string_view(pattern).substr(i), incomplete);
        if (n == 0) invalid("not valid UTF-8");
        i += n;
    }
    return Translator(decode_utf8_lenient(pattern)).run();
}

}  // namespace specula::internal
