// Chat templates rendered by their own Jinja text, as llama-server does with `--jinja`: the template engine is minja
// (third_party/minja, the engine llama.cpp vendors), with llama.cpp's inputs (messages as {role, content} objects,
// bos_token and eos_token from the vocabulary, add_generation_prompt, minja's polyfills for templates without a
// system role) and its post-processing (a leading BOS and a trailing EOS are cut: the tokenizer adds them).
// Where the built-in families (chat_template.h) recognise a template by its tell-tale substrings, this renders any
// template exactly as its author wrote it, including ones no family covers.
// Thread-safe. Each template text is parsed once per process (a small cache: minja's parse is quadratic in the text).
#pragma once

#include "chat/chat_template.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace specula::internal::chat {

// llama.cpp's CHATML_TEMPLATE_SRC: what "chatml" names in Jinja mode, as in llama-server.
extern const char *const kChatmlJinja;

// The conversation through the template's Jinja. `source` is the template text ("chatml": kChatmlJinja); bos and
// eos are the vocabulary's pieces ("" when it has none). Thinking::On/Off sets the template variable
// enable_thinking (llama-server's chat_template_kwargs), Default leaves it undefined.
// Throws Error(UNSUPPORTED, "chat template: the Jinja does not parse: ...") for text minja cannot parse, and
// Error(INVALID_ARGUMENT, "chat template: rendering failed: ...") when the template fails on these messages
// (raise_exception, an undefined call): both name minja's reason. Bounds, each an UNSUPPORTED or INVALID_ARGUMENT
// error rather than a crash or a hang: text longer than kMaxJinjaBytes, nested deeper than kMaxJinjaNesting
// brackets or blocks (refused before parsing), 128 levels of blocks and macro calls while rendering, more loop
// iterations in a render than kJinjaLoopBase + kJinjaLoopPerMessage per message, range() of 100,000 elements,
// strings repeated past 1 MiB, integer overflow and division by zero (third_party/minja/README.md). Parsing and
// rendering run on a thread with a kJinjaStackBytes stack.
std::string apply_jinja(const std::string &source, const std::string &bos, const std::string &eos, std::span<const Message> messages,
                        bool add_assistant, Thinking thinking = Thinking::Default);

inline constexpr int kMaxJinjaNesting = 256;
inline constexpr size_t kMaxJinjaBytes = 32 * 1024;  // real templates: 1-16 KB
inline constexpr size_t kJinjaStackBytes = 64u << 20;
inline constexpr int64_t kJinjaLoopBase = 10'000;  // loop iterations per render: this plus kJinjaLoopPerMessage each
inline constexpr int64_t kJinjaLoopPerMessage = 1'000;

}  // namespace specula::internal::chat
