// Chat templates rendered by their own Jinja (chat/jinja_template.h: minja, as llama-server's --jinja). The reference
// is jinja2, Hugging Face's renderer: Qwen3's and Gemma 3's templates and jinja2's renderings of conversations that
// reach each of their rules (unit/data/*_chat_vectors.inc, written by make_*_chat_vectors.py), byte for byte. Then
// what llama-server's --jinja does around the engine (ChatML for "chatml", BOS/EOS cut, a literal text), and
// hostile templates: each bound is an error with minja's reason, never a crash or a hang.
#include <catch2/catch.hpp>

#include "chat/jinja_template.h"
#include "core/error.h"
#include "unit/data/chat_vectors.h"

#include <string>
#include <vector>

using namespace specula::internal;

namespace {

using chat_vectors::Gemma3Vector;
using chat_vectors::Qwen3Vector;
#include "unit/data/gemma3_chat_vectors.inc"
#include "unit/data/qwen3_chat_vectors.inc"

const std::vector<chat::Message> kConversation = {
    {"system", "You are a helpful assistant"}, {"user", "Hello"}, {"assistant", "Hi there"}, {"user", "Who are you"}};

// The error a call throws: its status and message ("" and OK when it does not throw).
std::pair<specula_status, std::string> error_of(const std::string &source) {
    try {
        chat::apply_jinja(source, "", "", kConversation, true);
    } catch (const Error &e) {
        return {e.status(), e.what()};
    }
    return {SPECULA_OK, ""};
}

}  // namespace

TEST_CASE("jinja chat templates: Qwen3's template renders as jinja2 renders it, thinking switch included", "[chat][jinja]") {
    for (const Qwen3Vector &v : kQwen3Vectors) {
        CAPTURE(v.name, v.add_generation_prompt, int(v.thinking));
        CHECK(chat::apply_jinja(kQwen3Template, "", "<|im_end|>", v.messages, v.add_generation_prompt, v.thinking) == v.expected);
    }
}

TEST_CASE("jinja chat templates: Gemma 3's template renders as jinja2 renders it, its leading BOS cut", "[chat][jinja]") {
    for (const Gemma3Vector &v : kGemma3Vectors) {
        CAPTURE(v.name, v.add_generation_prompt);
        // The template opens with {{ bos_token }}: with the vocabulary's "<bos>" the text starts with it, and it is
        // cut (the tokenizer adds BOS), which gives jinja2's rendering with an empty bos_token.
        CHECK(chat::apply_jinja(kGemma3Template, "<bos>", "<eos>", v.messages, v.add_generation_prompt) == v.expected);
    }
}

TEST_CASE("jinja chat templates: \"chatml\", a literal text and the built-in families' Jinja", "[chat][jinja]") {
    // "chatml" is llama.cpp's ChatML Jinja, whose text is the built-in chatml family's.
    for (const bool add : {true, false})
        CHECK(chat::apply_jinja("chatml", "<s>", "</s>", kConversation, add) == chat::apply(chat::Family::Chatml, kConversation, add));
    // Text without Jinja is itself (llama-server's test_chat_completion renders "This is not a chat template, it is").
    CHECK(chat::apply_jinja("This is not a chat template, it is", "<s>", "</s>", kConversation, true) == "This is not a chat template, it is");
    // A template's own EOS at the end is cut, one inside stays; a missing BOS or EOS ("") cuts nothing.
    const std::string eos_template = "{% for m in messages %}{{ m.content }}{{ eos_token }}{% endfor %}";
    CHECK(chat::apply_jinja(eos_template, "", "</s>", kConversation, true) == "You are a helpful assistant</s>Hello</s>Hi there</s>Who are you");
    CHECK(chat::apply_jinja(eos_template, "", "", kConversation, true) == "You are a helpful assistantHelloHi thereWho are you");
    // A template without a system role gets minja's polyfill (the system prompt joins the first user turn), as llama-server.
    const std::string no_system = "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('System role not supported') }}"
                                  "{% endif %}[{{ m.role }}] {{ m.content }}\n{% endfor %}";
    CHECK(chat::apply_jinja(no_system, "", "", kConversation, false) ==
          "[user] You are a helpful assistant\nHello\n[assistant] Hi there\n[user] Who are you\n");
}

TEST_CASE("jinja chat templates: the Python features real templates use, with Python's results", "[chat][jinja]") {
    // What third_party/minja/README.md lists as added: each expected text is what Python (and jinja2) give.
    const std::pair<const char *, const char *> cases[] = {
        {"{{ 'abcdef'[::-1] }}", "fedcba"},
        {"{{ 'abcdef'[1:5:2] }}|{{ 'abcdef'[-2:] }}|{{ 'abcdef'[:-4] }}|{{ 'abc'[10:] }}|{{ 'abc'[-10:2] }}", "bd|ef|ab||ab"},
        {"{{ 'abc'[::9223372036854775807] }}|{{ 'abc'[::-9223372036854775807] }}|{{ 'abcdef'[4:1:-2] }}", "a|c|ec"},
        {"{% for m in messages[::-1] %}{{ m.role[:1] }}{% endfor %}|{{ (messages[1:3] | length) }}", "auau|2"},
        {"{{ 'a</think>b'.split('</think>')[-1] }}|{{ '  a  b '.split() | length }}|{{ 'a,b,c'.split(',', 1)[1] }}", "b|2|b,c"},
        {"[{{ '\n\nx\n'.lstrip('\n') }}][{{ 'x\n\n'.rstrip('\n') }}][{{ '--x--'.strip('-') }}]", "[x\n][x][x]"},
        {"{{ 'Ab'.lower() }}{{ 'Ab'.upper() }}{{ 'aXbXc'.replace('X', '-') }}{{ 'aXbXc'.replace('X', '-', 1) }}", "abABa-b-ca-bXc"},
        {"{{ 'th' in 'think' }}|{{ 'x' in 'think' }}|{{ 'x' not in 'think' }}|{{ 'a' not in {'a': 1} }}", "True|False|True|False"},
        {"{{ false is false }}|{{ true is false }}|{{ 0 is false }}|{{ true is true }}", "True|False|False|True"},
        {"{{ 'tool'.startswith('to') }}|{{ 'tool'.endswith('ol') }}", "True|True"},
    };
    // No system message: these templates do not print one, so minja would fold it into the first user turn.
    const std::vector<chat::Message> turns = {{"user", "u1"}, {"assistant", "a1"}, {"user", "u2"}, {"assistant", "a2"}};
    for (const auto &[source, expected] : cases) {
        CAPTURE(source);
        CHECK(chat::apply_jinja(source, "", "", turns, false) == expected);
    }
}

TEST_CASE("jinja chat templates: hostile and broken templates are errors that say why", "[chat][jinja]") {
    // Does not parse: UNSUPPORTED, with minja's reason and place.
    auto [status, what] = error_of("{% if %}");
    CHECK(status == SPECULA_ERR_UNSUPPORTED);
    CHECK_THAT(what, Catch::Contains("does not parse") && Catch::Contains("row 1, column"));
    // The template refuses the conversation: INVALID_ARGUMENT with its message.
    std::tie(status, what) = error_of("{{ raise_exception('Conversation roles must alternate') }}");
    CHECK(status == SPECULA_ERR_INVALID_ARGUMENT);
    CHECK_THAT(what, Catch::Contains("Conversation roles must alternate"));
    // Bounds on text that would overflow minja's recursive parser or its regex matcher before any error.
    std::tie(status, what) = error_of("{{ " + std::string(10000, '(') + " }}");
    CHECK(status == SPECULA_ERR_UNSUPPORTED);
    CHECK_THAT(what, Catch::Contains("nested deeper"));
    // Parentheses inside string literals do not hide the ones around them: ('x)' + ('x)' + ... 300 levels deep.
    std::string hidden;
    for (int i = 0; i < 300; ++i) hidden += "('x)' + ";
    std::tie(status, what) = error_of("{{ " + hidden + "'y'" + std::string(300, ')') + " }}");
    CHECK(status == SPECULA_ERR_UNSUPPORTED);
    CHECK_THAT(what, Catch::Contains("nested deeper"));
    // ... and 100 levels, within the bound, render (the parser's recursion fits the renderer's stack).
    hidden.clear();
    for (int i = 0; i < 100; ++i) hidden += "('x)' + ";
    CHECK(error_of("{{ " + hidden + "'y'" + std::string(100, ')') + " }}").first == SPECULA_OK);
    std::tie(status, what) = error_of("{# " + std::string(chat::kMaxJinjaBytes, 'x') + " #}");
    CHECK(status == SPECULA_ERR_UNSUPPORTED);
    CHECK_THAT(what, Catch::Contains("bytes"));
    // A comment, a name and whitespace just under the size bound parse (the parser runs on a stack sized for them).
    CHECK(error_of("{# " + std::string(chat::kMaxJinjaBytes - 16, 'x') + " #}ok").first == SPECULA_OK);
    CHECK(error_of("{{ " + std::string(chat::kMaxJinjaBytes - 16, 'a') + " }}").first == SPECULA_OK);
    CHECK(error_of("x" + std::string(chat::kMaxJinjaBytes - 64, ' ') + "{%- if true %}ok{% endif %}").first == SPECULA_OK);
    // Bounds while rendering: each an error, not a stack overflow, a hang, all memory or a signal.
    const char *const failing[] = {
        "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}",                          // recursion without end
        "{% for i in range(1000000000) %}{% endfor %}",                            // a list of 10^9 values
        "{% for i in range(5, 0, 0) %}x{% endfor %}",                              // a step of zero (looped forever)
        "{% for i in range(1000) %}{% for j in range(1000) %}{% for k in range(1000) %}{% endfor %}{% endfor %}{% endfor %}",
        "{{ 'x' * 1000000000 }}",                                                  // a string of 1 GB
        "{{ 1 // 0 }}", "{{ 1 % 0 }}", "{{ 9223372036854775807 + 1 }}", "{{ -9223372036854775807 - 2 }}",
        "{{ 9223372036854775807 * 2 }}",
    };
    for (const char *t : failing) {
        CAPTURE(t);
        std::tie(status, what) = error_of(t);
        CHECK(status == SPECULA_ERR_INVALID_ARGUMENT);
        CHECK(what.size() < 1200);  // the reason and the innermost place, not one copy per nested level
    }
    // range() counts without overflow at int64's ends.
    CHECK(chat::apply_jinja("{% for i in range(-9223372036854775807, 9223372036854775807, 9223372036854775807) %}{{ i }},{% endfor %}",
                            "", "", kConversation, true) == "-9223372036854775807,0,");
}
