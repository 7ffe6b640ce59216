// Gemma 3's chat template against its own Jinja text: unit/data/gemma3_chat_vectors.inc holds the template (as Gemma
// 3's GGUFs carry it) and its rendering by jinja2, as Hugging Face's apply_chat_template renders it, for conversations
// that reach each of its rules (make_gemma3_chat_vectors.py writes it). llama.cpp 2025-02-20 predates Gemma 3; its
// gemma family (google/gemma-7b-it's rules) is what formats it, here as there.
#include <catch2/catch.hpp>

#include "chat/chat_template.h"
#include "unit/data/chat_vectors.h"

#include <string>
#include <vector>

using namespace specula::internal;

namespace {

using chat_vectors::Gemma3Vector;
#include "unit/data/gemma3_chat_vectors.inc"

}  // namespace

TEST_CASE("chat template: Gemma 3's template is detected as gemma and formatted byte-identically to its Jinja", "[chat]") {
    const auto family = chat::detect(kGemma3Template);
    REQUIRE(family.has_value());
    CHECK(std::string(chat::name(*family)) == "gemma");
    REQUIRE(kGemma3Vectors.size() == 12);
    for (const Gemma3Vector &v : kGemma3Vectors) {
        INFO(v.name << " add_generation_prompt " << v.add_generation_prompt);
        std::string expected = v.expected;
        // The one difference, kept for parity with llama-server: llama.cpp's gemma formatter trims the system prompt it
        // merges into the first user turn; Gemma 3's Jinja prepends it as written (it trims only the turns' contents).
        if (std::string(v.name) == "contents are trimmed, the system prompt is not") {
            const std::string as_written = "\n  Be brief.  \n\n";
            REQUIRE(expected.find(as_written) != std::string::npos);
            expected.replace(expected.find(as_written), as_written.size(), "Be brief.\n\n");
        }
        CHECK(chat::apply(*family, v.messages, v.add_generation_prompt) == expected);
    }
}
