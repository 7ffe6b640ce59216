// Qwen3's chat template against its own Jinja text: unit/data/qwen3_chat_vectors.inc holds the template (as Qwen3's
// GGUFs carry it) and its rendering by jinja2, as Hugging Face's apply_chat_template renders it, for conversations
// that reach each of its rules (make_qwen3_chat_vectors.py writes it). llama.cpp 2a20c85a has no test for this
// template: its built-in formatter treats it as chatml.
#include <catch2/catch.hpp>

#include "chat/chat_template.h"
#include "unit/data/chat_vectors.h"

#include <string>
#include <vector>

using namespace specula::internal;

namespace {

using chat_vectors::Qwen3Vector;
#include "unit/data/qwen3_chat_vectors.inc"

}  // namespace

TEST_CASE("chat template: Qwen3's template is detected as qwen3 and formatted byte-identically to its Jinja", "[chat]") {
    const auto family = chat::detect(kQwen3Template);
    REQUIRE(family.has_value());
    CHECK(std::string(chat::name(*family)) == "qwen3");
    CHECK(chat::from_name("qwen3") == chat::Family::Qwen3);
    REQUIRE(kQwen3Vectors.size() == 54);
    for (const Qwen3Vector &v : kQwen3Vectors) {
        INFO(v.name << " add_generation_prompt " << v.add_generation_prompt << " thinking " << int(v.thinking));
        CHECK(chat::apply(*family, v.messages, v.add_generation_prompt, v.thinking) == v.expected);
    }
}

TEST_CASE("chat template: Qwen3's rules differ from chatml where the template says", "[chat]") {
    // The cases llama.cpp's chatml gets wrong for Qwen3, spelled out (the vectors above hold the same bytes).
    const std::vector<chat::Message> history{{"user", "2+2?"}, {"assistant", "<think>\nAdd.\n</think>\n\n4"}, {"user", "thanks"}};
    CHECK(chat::apply(chat::Family::Qwen3, history, true) ==
          "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>\n<|im_start|>user\nthanks<|im_end|>\n<|im_start|>assistant\n");
    const std::vector<chat::Message> one{{"user", "hi"}};
    CHECK(chat::apply(chat::Family::Qwen3, one, true, chat::Thinking::Off) == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
    CHECK(chat::apply(chat::Family::Qwen3, one, true, chat::Thinking::On) == chat::apply(chat::Family::Chatml, one, true));
    // A family without a thinking switch ignores it.
    CHECK(chat::apply(chat::Family::Chatml, one, true, chat::Thinking::Off) == chat::apply(chat::Family::Chatml, one, true));
    CHECK(chat::apply(chat::Family::Qwen3, std::vector<chat::Message>{}, true) == "<|im_start|>assistant\n");
}
