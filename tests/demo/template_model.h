// A copy of a GGUF model with a tokenizer.chat_template added, written by the SDK's own GGUF writer (an internal API:
// no fixture model carries a chat template). For the chat-template path of the summarization prompt.
#pragma once

#include <string>

namespace demo_test {
// Throws on failure.
void write_with_chat_template(const std::string &src, const std::string &dst, const std::string &chat_template);
}
