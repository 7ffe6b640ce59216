// Everything a loaded vocabulary knows, shared (read-only) by the tokenizer algorithms. Built once by
// load_vocab_data() (vocab_loader.cpp); the Vocab class is the public face.
#pragma once

#include "tokenizer/pretokenizer.h"
#include "tokenizer/string_index.h"

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace specula::internal {

class GgufFile;

// llama.cpp's llama_token_attr bits. A token's attributes start from its GGUF token type and are then adjusted
// by name-based rules at load time (EOG and FIM tokens become control, Phi-3 specials strip spaces, ...).
enum TokenAttrBits : uint16_t {
    kAttrUndefined = 0,
    kAttrUnknown = 1 << 0,
    kAttrUnused = 1 << 1,
    kAttrNormal = 1 << 2,
    kAttrControl = 1 << 3,
    kAttrUserDefined = 1 << 4,
    kAttrByte = 1 << 5,
    kAttrNormalized = 1 << 6,
    kAttrLstrip = 1 << 7,
    kAttrRstrip = 1 << 8,
    kAttrSingleWord = 1 << 9,
};

enum class VocabKind { Spm, Bpe };

constexpr int32_t kNoToken = -1;

// std::hash<std::string_view> hashes exactly like std::hash<std::string>, so a map keyed this way iterates in
// the same order as llama.cpp's std::unordered_map<std::string, llama_token> built by the same inserts; some
// load-time rules ("the first token found named X") depend on that order.
struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

struct TokenData {
    std::string text;
    float score = 0.0f;
    uint16_t attr = kAttrNormal;
};

struct VocabData {
    VocabKind kind = VocabKind::Spm;
    std::string model_name;  // tokenizer.ggml.model
    std::string pre_name;    // tokenizer.ggml.pre ("" when absent)

    std::vector<TokenData> tokens;
    TokenMap token_to_id;
    // BPE merges: "left right" -> rank (position in tokenizer.ggml.merges; the first occurrence wins).
    StringIndex bpe_ranks;
    PreTokenizer pretokenizer;  // BPE only

    int32_t bos = kNoToken, eos = kNoToken, eot = kNoToken, eom = kNoToken, unk = kNoToken, sep = kNoToken,
            pad = kNoToken, mask = kNoToken, linefeed = kNoToken;
    int32_t fim_pre = kNoToken, fim_suf = kNoToken, fim_mid = kNoToken, fim_pad = kNoToken, fim_rep = kNoToken,
            fim_sep = kNoToken;

    bool add_space_prefix = false;
    bool add_bos = false;
    bool add_eos = false;
    bool add_sep = false;
    bool ignore_merges = false;
    bool clean_spaces = false;
    bool remove_extra_whitespaces = false;
    bool escape_whitespaces = true;

    std::set<int32_t> eog;
    // Control, user-defined and unknown tokens, longest text first: the order special tokens are cut out of
    // text in (llama.cpp's cache_special_tokens).
    std::vector<int32_t> special_tokens;
    // token_to_piece(id, render_special = true) for every id, computed at load like llama.cpp's cache.
    std::vector<std::string> pieces;

    // Bit (a << 8 | b) is set when some token text holds byte a directly followed by byte b. Where two
    // neighbouring characters of a text give a pair that is not set, no token can span them, so no merge ever
    // crosses that point: the SentencePiece merge loop runs on each side independently (same result, smaller
    // queues).
    std::vector<uint64_t> adjacent_bytes = std::vector<uint64_t>(65536 / 64);
    bool bytes_adjacent_in_a_token(uint8_t a, uint8_t b) const {
        const unsigned bit = unsigned(a) << 8 | b;
        return (adjacent_bytes[bit / 64] >> (bit % 64)) & 1;
    }

    int32_t n_tokens() const { return int32_t(tokens.size()); }
    bool valid(int32_t id) const { return id >= 0 && id < n_tokens(); }

    int32_t text_to_token(std::string_view text) const {
        auto it = token_to_id.find(text);
        return it == token_to_id.end() ? kNoToken : it->second;
    }
    // Rank of merging left and right, -1 if that merge does not exist.
    int32_t bpe_rank(std::string_view left, std::string_view right) const;
    // The token for one raw byte: SentencePiece byte-fallback tokens are "<0xAB>" (or the bare byte as a
    // fallback), BPE ones the GPT-2 byte character. kNoToken if the vocabulary has none.
    int32_t byte_to_token(uint8_t byte) const;
};

// Reads tokenizer.ggml.* from file. Throws Error(FORMAT) for malformed data, Error(UNSUPPORTED) for tokenizer
// models or pre-tokenizers we do not implement.
VocabData load_vocab_data(const GgufFile &file);

}  // namespace specula::internal
