// The Unicode pieces the tokenizers need, with llama.cpp's exact semantics: its lenient UTF-8 decoder (which
// the BPE pre-tokenizer relies on), its codepoint classes (Unicode 15.1, see tools/unicode/gen_unicode_table.mjs), and the
// GPT-2 byte-level mapping between raw bytes and printable codepoints.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace specula::internal {

// Codepoint classes as llama.cpp defines them: exactly one category bit (from the general category) plus the
// White_Space property. Bit values are baked into unicode_table.cpp.
enum CodepointFlags : uint16_t {
    kCpUndefined = 0x001,    // unassigned (Cn), and anything above U+10FFFF
    kCpNumber = 0x002,       // \p{N}
    kCpLetter = 0x004,       // \p{L}
    kCpSeparator = 0x008,    // \p{Z}
    kCpMark = 0x010,         // \p{M}
    kCpPunctuation = 0x020,  // \p{P}
    kCpSymbol = 0x040,       // \p{S}
    kCpControl = 0x080,      // \p{C} other than Cn
    kCpCategoryMask = 0x0FF,
    kCpWhitespace = 0x100,   // White_Space property
};

namespace unicode_detail {
struct CodepointRun {
    uint32_t start;
    uint16_t flags;
};
extern const CodepointRun kCodepointRuns[];
extern const size_t kCodepointRunCount;
}  // namespace unicode_detail

constexpr uint32_t kReplacementCharacter = 0xFFFD;

uint16_t codepoint_flags(uint32_t cp);

// Length of the UTF-8 sequence a lead byte announces, from its top four bits only (llama.cpp's
// unicode_len_utf8): continuation bytes count as 1, 0xF8..0xFF as 4. Used to cut text into symbols.
size_t utf8_sequence_length(uint8_t lead);

// llama.cpp's unicode_cpts_from_utf8: decodes without checking for overlong forms, surrogates or values above
// U+10FFFF; a byte that does not start a complete sequence becomes U+FFFD and decoding resumes at the next byte.
std::vector<uint32_t> decode_utf8_lenient(std::string_view text);

// Appends the UTF-8 encoding of cp (surrogates included, as llama.cpp does). False for cp > 0x10FFFF.
bool append_utf8(std::string &out, uint32_t cp);

// Length of the well-formed UTF-8 sequence at the start of bytes (Unicode table 3-7: no overlongs, no
// surrogates, nothing above U+10FFFF), or 0 if it is not one. `incomplete` is set when the bytes are a proper
// prefix of a well-formed sequence, i.e. more bytes could still complete it (0 is returned then too).
size_t valid_utf8_prefix_length(std::string_view bytes, bool &incomplete);

// GPT-2 byte-level BPE maps every byte to a printable codepoint (bytes_to_unicode); these are the UTF-8 of
// that codepoint, and the reverse lookup for one UTF-8 encoded codepoint (-1 when it is not in the mapping).
const std::string &gpt2_byte_to_utf8(uint8_t byte);
int gpt2_utf8_to_byte(std::string_view utf8_char);

}  // namespace specula::internal
