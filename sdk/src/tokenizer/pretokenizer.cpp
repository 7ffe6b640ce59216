#include "tokenizer/pretokenizer.h"

#include "core/error.h"
#include "tokenizer/unicode.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cstdint>
#include <utility>

namespace specula::internal {
namespace {

// The \p{..} classes llama.cpp rewrites for the collapsed text, what byte stands for each, and the ASCII
// members that keep their own bytes there. Every letter subclass collapses to "letter", as in llama.cpp.
// '~' joined the symbols in llama.cpp in 2026 (it is Sm; before, " ~" split in two pre-tokens).
struct Category {
    const char *name;
    char collapsed;
    const char *ascii;
};
constexpr Category kCategories[] = {
    {"\\p{N}", '\xD1', "0-9"},
    {"\\p{L}", '\xD2', "A-Za-z"},
    {"\\p{P}", '\xD3', "!-#%-*,-/:-;?-@\\[-\\]_\\{\\}"},
    {"\\p{M}", '\xD4', ""},
    {"\\p{S}", '\xD5', "\\$\\+<->^`\\|\\~"},
    {"\\p{Lu}", '\xD2', "A-Za-z"},
    {"\\p{Ll}", '\xD2', "A-Za-z"},
    {"\\p{Lt}", '\xD2', "A-Za-z"},
    {"\\p{Lm}", '\xD2', "A-Za-z"},
    {"\\p{Lo}", '\xD2', "A-Za-z"},
};

const Category *find_category(std::string_view name) {
    for (const Category &c : kCategories)
        if (name == c.name) return &c;
    return nullptr;
}

char collapsed_byte(uint32_t cp) {
    if (cp < 128) return char(cp);
    const uint16_t flags = codepoint_flags(cp);
    if (flags & kCpWhitespace) return '\x0B';  // a whitespace byte \s matches in any engine
    switch (flags & kCpCategoryMask) {
    case kCpNumber: return '\xD1';
    case kCpLetter: return '\xD2';
    case kCpPunctuation: return '\xD3';
    case kCpMark: return '\xD4';
    case kCpSymbol: return '\xD5';
    default: return '\xD0';
    }
}

// Stand-in, in the UTF-8 text the non-category regexes see, for codepoints that UTF-8 cannot carry
// (surrogates from lenient decoding, values above U+10FFFF). Like them it is in no class any of these
// regexes names, so it matches exactly where they would.
constexpr uint32_t kUnencodableStandIn = 0x10FFFF;

}  // namespace

bool regex_uses_categories(const std::string &regex) {
    for (const Category &c : kCategories)
        if (regex.find(c.name) != std::string::npos) return true;
    return false;
}

std::string collapse_regex(const std::string &regex) {
    // A transcription of llama.cpp's rewrite, including how it tracks brackets (nested [] are not expected).
    std::string out;
    bool inside = false;
    for (size_t i = 0; i < regex.size(); ++i) {
        if (regex[i] == '[' && (i == 0 || regex[i - 1] != '\\')) {
            out += '[';
            inside = true;
            continue;
        }
        if (inside && regex[i] == ']' && regex[i - 1] != '\\') {
            out += ']';
            inside = false;
            continue;
        }
        if (regex[i] == '\\' && i + 3 < regex.size() && regex[i + 1] == 'p' && regex[i + 2] == '{') {
            const size_t closing = regex.find('}', i + 3);
            if (closing != std::string::npos && closing <= i + 10) {
                if (const Category *c = find_category(std::string_view(regex).substr(i, closing - i + 1))) {
                    if (!inside) out += '[';
                    out += c->collapsed;
                    out += c->ascii;
                    if (!inside) out += ']';
                    i = closing;
                    continue;
                }
            }
        }
        out += regex[i];
    }
    return out;
}

struct PreTokenizer::Regex {
    pcre2_code *code = nullptr;
    bool collapsed = false;  // runs on the collapsed text, else on the UTF-8 text

    Regex(const std::string &source) {
        collapsed = regex_uses_categories(source);
        const std::string pattern = collapsed ? collapse_regex(source) : source;
        // ECMAScript semantics as in std::regex: '$' only at the very end. The collapsed text is one byte per
        // codepoint, so no UTF mode there; the other text is real UTF-8, but \s, \d, \w stay ASCII-only (no
        // PCRE2_UCP) like std::wregex in the C locale.
        uint32_t options = PCRE2_DOLLAR_ENDONLY;
        if (!collapsed) options |= PCRE2_UTF | PCRE2_NO_UTF_CHECK;
        int error = 0;
        PCRE2_SIZE error_offset = 0;
        code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options, &error, &error_offset, nullptr);
        if (code == nullptr) {
            PCRE2_UCHAR message[256];
            pcre2_get_error_message(error, message, sizeof message);
            throw Error(SPECULA_ERR_UNSUPPORTED, "tokenizer: cannot compile pre-tokenizer regex '" + source + "': " +
                                                     reinterpret_cast<const char *>(message) + " at offset " + std::to_string(error_offset));
        }
        // JIT is an optimisation only: if the platform lacks it, pcre2_match interprets.
        pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    }
    ~Regex() { pcre2_code_free(code); }
    Regex(const Regex &) = delete;
    Regex &operator=(const Regex &) = delete;
};

PreTokenizer::PreTokenizer(const std::vector<std::string> &regexes) {
    for (const std::string &r : regexes) {
        auto compiled = std::make_shared<const Regex>(r);
        if (compiled->collapsed) need_collapse_ = true;
        else need_wide_ = true;
        regexes_.push_back(std::move(compiled));
    }
}

namespace {

// One pcre2_match call; returns false on no match. Grows the JIT stack when a pathological input needs it.
class Matcher {
public:
    explicit Matcher(const pcre2_code *code) : code_(code), data_(pcre2_match_data_create_from_pattern(code, nullptr)) {
        if (data_ == nullptr) throw Error(SPECULA_ERR_OUT_OF_MEMORY, "tokenizer: out of memory for regex match data");
    }
    ~Matcher() {
        pcre2_match_data_free(data_);
        pcre2_match_context_free(context_);
        pcre2_jit_stack_free(stack_);
    }
    Matcher(const Matcher &) = delete;
    Matcher &operator=(const Matcher &) = delete;

    bool match(const char *subject, size_t length, size_t start, uint32_t options, size_t &begin, size_t &end) {
        for (;;) {
            const int rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(subject), length, start, options | PCRE2_NO_UTF_CHECK, data_, context_);
            if (rc >= 0) {
                const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(data_);
                begin = ov[0];
                end = ov[1];
                return true;
            }
            if (rc == PCRE2_ERROR_NOMATCH) return false;
            if (rc == PCRE2_ERROR_JIT_STACKLIMIT && stack_size_ < (size_t(256) << 20)) {
                grow_jit_stack();
                continue;
            }
            PCRE2_UCHAR message[256];
            pcre2_get_error_message(rc, message, sizeof message);
            throw Error(SPECULA_ERR_INTERNAL, std::string("tokenizer: pre-tokenizer regex failed: ") + reinterpret_cast<const char *>(message));
        }
    }

private:
    void grow_jit_stack() {
        stack_size_ = stack_size_ ? stack_size_ * 8 : (size_t(1) << 20);
        pcre2_jit_stack_free(stack_);
        stack_ = pcre2_jit_stack_create(32 * 1024, stack_size_, nullptr);
        if (context_ == nullptr) context_ = pcre2_match_context_create(nullptr);
        if (stack_ == nullptr || context_ == nullptr) throw Error(SPECULA_ERR_OUT_OF_MEMORY, "tokenizer: out of memory for the regex stack");
        pcre2_jit_stack_assign(context_, nullptr, stack_);
    }

    const pcre2_code *code_;
    pcre2_match_data *data_;
    pcre2_match_context *context_ = nullptr;
    pcre2_jit_stack *stack_ = nullptr;
    size_t stack_size_ = 0;
};

}  // namespace

std::vector<std::string> PreTokenizer::split(std::string_view text) const {
    const std::vector<uint32_t> cpts = decode_utf8_lenient(text);

    std::string collapsed;
    if (need_collapse_) {
        collapsed.resize(cpts.size());
        for (size_t i = 0; i < cpts.size(); ++i) collapsed[i] = collapsed_byte(cpts[i]);
    }

    // The UTF-8 text for regexes without classes, with a map from byte offsets back to codepoint indices.
    std::string wide;
    std::vector<size_t> wide_offset;  // codepoint index -> byte offset (size n+1)
    std::vector<uint32_t> wide_index;  // byte offset -> codepoint index (valid at boundaries)
    if (need_wide_) {
        wide_offset.reserve(cpts.size() + 1);
        for (uint32_t cp : cpts) {
            wide_offset.push_back(wide.size());
            if (cp > 0x7F && (codepoint_flags(cp) & kCpWhitespace)) cp = 0x0B;  // as llama.cpp does for std::wregex
            if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) cp = kUnencodableStandIn;
            append_utf8(wide, cp);
        }
        wide_offset.push_back(wide.size());
        wide_index.assign(wide.size() + 1, 0);
        for (size_t i = 0; i < wide_offset.size(); ++i) wide_index[wide_offset[i]] = uint32_t(i);
    }

    std::vector<size_t> offsets = {cpts.size()};  // lengths, in codepoints, of the pieces so far
    for (const auto &regex : regexes_) {
        Matcher matcher(regex->code);
        std::vector<size_t> next;
        next.reserve(offsets.size());
        size_t start = 0;  // codepoint index where the current piece begins
        for (const size_t length : offsets) {
            // The piece as its own subject: the regex sees neither what comes before nor what comes after it.
            const char *subject;
            size_t subject_length;
            if (regex->collapsed) {
                subject = collapsed.data() + start;
                subject_length = length;
            } else {
                subject = wide.data() + wide_offset[start];
                subject_length = wide_offset[start + length] - wide_offset[start];
            }
            auto to_cp = [&](size_t byte) -> size_t {
                return regex->collapsed ? byte : wide_index[wide_offset[start] + byte] - start;
            };

            size_t prev_end = 0;  // codepoints into the piece
            size_t pos = 0;       // bytes into the subject
            size_t begin = 0, end = 0;
            while (pos <= subject_length && matcher.match(subject, subject_length, pos, 0, begin, end)) {
                const size_t cb = to_cp(begin), ce = to_cp(end);
                if (cb > prev_end) next.push_back(cb - prev_end);
                next.push_back(ce - cb);  // an empty match gives an empty piece, as in llama.cpp
                prev_end = ce;
                if (end > begin) {
                    pos = end;
                } else {
                    // std::regex_iterator after an empty match: try a non-empty match right here, else move on
                    // one character.
                    if (end >= subject_length) break;
                    size_t b2 = 0, e2 = 0;
                    if (matcher.match(subject, subject_length, end, PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED, b2, e2)) {
                        const size_t cb2 = to_cp(b2), ce2 = to_cp(e2);
                        next.push_back(ce2 - cb2);
                        prev_end = ce2;
                        pos = e2;
                        continue;
                    }
                    pos = end + (regex->collapsed ? 1 : utf8_sequence_length(uint8_t(subject[end])));
                }
            }
            if (prev_end < length) next.push_back(length - prev_end);
            start += length;
        }
        offsets = std::move(next);
    }

    std::vector<std::string> words;
    words.reserve(offsets.size());
    size_t start = 0;
    for (const size_t length : offsets) {
        std::string word;
        for (size_t i = start; i < start + length; ++i) {
            if (!append_utf8(word, cpts[i]))
                throw Error(SPECULA_ERR_INVALID_ARGUMENT, "tokenizer: text contains a byte sequence that decodes beyond U+10FFFF");
        }
        words.push_back(std::move(word));
        start += length;
    }
    return words;
}

}  // namespace specula::internal
