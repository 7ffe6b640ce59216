#include "tokenizer/vocab_data.h"

#include "tokenizer/unicode.h"

#include <cstring>

namespace specula::internal {

int32_t VocabData::bpe_rank(std::string_view left, std::string_view right) const {
    // Keys are "left right"; build it on the stack when it fits (this runs for every candidate pair).
    const size_t size = left.size() + 1 + right.size();
    char stack[256];
    std::string heap;
    char *key = stack;
    if (size > sizeof stack) {
        heap.resize(size);
        key = heap.data();
    }
    std::memcpy(key, left.data(), left.size());
    key[left.size()] = ' ';
    std::memcpy(key + left.size() + 1, right.data(), right.size());
    return bpe_ranks.find(std::string_view(key, size), -1);
}

int32_t VocabData::byte_to_token(uint8_t byte) const {
    if (kind == VocabKind::Spm) {
        static const char *const hex = "0123456789ABCDEF";
        const char name[7] = {'<', '0', 'x', hex[byte >> 4], hex[byte & 15], '>', 0};
        const int32_t id = text_to_token(name);
        if (id != kNoToken) return id;
        return text_to_token(std::string(1, char(byte)));
    }
    return text_to_token(gpt2_byte_to_utf8(byte));
}

}  // namespace specula::internal
