// The rows of unit/data/*_chat_vectors.inc (jinja2's renderings of real chat templates, written by
// make_*_chat_vectors.py), shared by the tests that read them: the built-in families (test_chat_qwen3.cpp,
// test_chat_gemma3.cpp) and the Jinja renderer (test_chat_jinja.cpp).
#pragma once

#include "chat/chat_template.h"

#include <vector>

namespace chat_vectors {

using specula::internal::chat::Message;
using specula::internal::chat::Thinking;

struct Qwen3Vector {
    const char *name;
    std::vector<Message> messages;
    bool add_generation_prompt;
    Thinking thinking;
    const char *expected;
};

struct Gemma3Vector {
    const char *name;
    std::vector<Message> messages;
    bool add_generation_prompt;
    const char *expected;
};

}  // namespace chat_vectors
