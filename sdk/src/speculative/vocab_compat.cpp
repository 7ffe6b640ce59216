#include "vocab_compat.h"

#include "core/error.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace specula::internal {
namespace {

// FNV-1a, 64-bit. Every field is fed length-prefixed or at a fixed width, so that no two different
// vocabularies can give the same byte stream (["ab", "c"] vs ["a", "bc"]).
class Fnv1a64 {
public:
    void bytes(const void *p, size_t n) {
        const auto *b = static_cast<const uint8_t *>(p);
        for (size_t i = 0; i < n; ++i) {
            hash_ ^= b[i];
            hash_ *= 0x100000001b3ull;
        }
    }
    // Little-endian whatever the host, so the fingerprint stored in a file means the same everywhere.
    void u64(uint64_t v) {
        uint8_t b[8];
        for (int i = 0; i < 8; ++i) b[i] = uint8_t(v >> (8 * i));
        bytes(b, 8);
    }
    void i32(int32_t v) {
        const uint32_t u = uint32_t(v);
        uint8_t b[4];
        for (int i = 0; i < 4; ++i) b[i] = uint8_t(u >> (8 * i));
        bytes(b, 4);
    }
    void str(const std::string &s) {
        u64(s.size());
        bytes(s.data(), s.size());
    }
    uint64_t value() const { return hash_; }

private:
    uint64_t hash_ = 0xcbf29ce484222325ull;
};

// A token's text for a message: printable ASCII and UTF-8 as is, other bytes as \xNN.
std::string printable(const std::string &s) {
    std::string out;
    for (const unsigned char c : s) {
        if ((c >= 0x20 && c < 0x7F && c != '\\' && c != '\'') || c >= 0x80) {
            out += char(c);
        } else {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02X", c);
            out += buf;
        }
    }
    return out;
}

}  // namespace

std::string tokenizer_fingerprint(const Vocab &vocab) {
    Fnv1a64 h;
    h.str(vocab.model_name());
    const int32_t n = vocab.n_tokens();
    h.i32(n);
    for (int32_t id = 0; id < n; ++id) {
        h.str(vocab.token_text(id));
        const uint8_t kind = uint8_t(vocab.token_attr(id));
        h.bytes(&kind, 1);
    }
    h.i32(vocab.bos());
    h.i32(vocab.eos());
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h.value()));
    return buf;
}

void check_draft_vocab(const Model &target, const Model &draft) {
    const Vocab &t = target.vocab(), &d = draft.vocab();
    require(t.model_name() == d.model_name(), SPECULA_ERR_INCOMPATIBLE,
            "draft vocabulary: the target's tokenizer model is '" + t.model_name() + "' but the draft's is '" + d.model_name() + "'");
    require(t.bos() == d.bos(), SPECULA_ERR_INCOMPATIBLE,
            "draft vocabulary: the target's BOS token is " + std::to_string(t.bos()) + " but the draft's is " + std::to_string(d.bos()));
    require(t.eos() == d.eos(), SPECULA_ERR_INCOMPATIBLE,
            "draft vocabulary: the target's EOS token is " + std::to_string(t.eos()) + " but the draft's is " + std::to_string(d.eos()));
    // llama.cpp's SPEC_VOCAB_MAX_SIZE_DIFFERENCE: padded vocabularies of one family differ by a few rows.
    constexpr int32_t kMaxSizeDifference = 128;
    require(std::abs(t.n_tokens() - d.n_tokens()) <= kMaxSizeDifference, SPECULA_ERR_INCOMPATIBLE,
            "draft vocabulary: the target has " + std::to_string(t.n_tokens()) + " tokens but the draft has " +
                std::to_string(d.n_tokens()) + " (at most " + std::to_string(kMaxSizeDifference) + " may differ)");
    const int32_t shared = std::min(t.n_tokens(), d.n_tokens());
    for (int32_t id = 0; id < shared; ++id)
        require(t.token_text(id) == d.token_text(id), SPECULA_ERR_INCOMPATIBLE,
                "draft vocabulary: token " + std::to_string(id) + " is '" + printable(t.token_text(id)) +
                    "' in the target but '" + printable(d.token_text(id)) + "' in the draft");
}

}  // namespace specula::internal
