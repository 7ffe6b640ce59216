#include "tokenizer/stream_decoder.h"

#include "tokenizer/unicode.h"

namespace specula::internal {
namespace {

const char kReplacementUtf8[] = "\xEF\xBF\xBD";

// Length of the maximal ill-formed subpart at the start of bytes: the longest prefix that a valid sequence
// could start with (at least one byte). Called only where valid_utf8_prefix_length() found no valid sequence.
size_t ill_formed_length(std::string_view bytes) {
    for (size_t n = bytes.size() < 3 ? bytes.size() : 3; n > 1; --n) {
        bool incomplete = false;
        if (valid_utf8_prefix_length(bytes.substr(0, n), incomplete) == 0 && incomplete) return n;
    }
    return 1;
}

}  // namespace

std::string StreamDecoder::push(std::string_view bytes) {
    std::string input = std::move(pending_);
    pending_.clear();
    input.append(bytes);

    std::string out;
    out.reserve(input.size());
    std::string_view rest = input;
    while (!rest.empty()) {
        bool incomplete = false;
        const size_t n = valid_utf8_prefix_length(rest, incomplete);
        if (n > 0) {
            out.append(rest.substr(0, n));
            rest.remove_prefix(n);
        } else if (incomplete) {
            pending_.assign(rest);  // may still be completed by the next piece
            break;
        } else {
            out += kReplacementUtf8;
            rest.remove_prefix(ill_formed_length(rest));
        }
    }
    return out;
}

std::string StreamDecoder::flush() {
    std::string out = pending_.empty() ? std::string() : std::string(kReplacementUtf8);
    pending_.clear();
    return out;
}

void StreamDecoder::reset() { pending_.clear(); }

}  // namespace specula::internal
