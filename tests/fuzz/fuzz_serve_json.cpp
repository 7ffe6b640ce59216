// serve_json: `specula serve`'s request layer on request bodies built structure first, to reach what byte-level
// mutation of short inputs never does (a body nested 300,000 deep crashed the server: issue 44). The input is a
// program, not JSON: a wrapper byte, then 3-byte instructions (op, a, b) that open arrays or objects by the
// hundreds of thousands, close them, write strings of up to 4 MiB, arrays of up to a million numbers, objects of
// thousands of members, and known request fields (prompt, messages, stop, logit_bias, ...) whose values are the
// structures. The text it writes (at most 17 MiB, past the server's 16 MiB body limit) is then one request body
// through serve_body_checks.h: json_limits.h's SAX pass, the parse, every endpoint's field reads, a short generation.
// At exit it prints the deepest nesting, the largest body and the most values it produced, and which of those the
// request layer accepted (the closing note of issue 44 quotes them).
#include "serve_body_checks.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace {

constexpr size_t kMaxText = size_t(17) << 20;

const char *const kFields[] = {"prompt", "messages", "content", "role", "tokens", "stop", "n_predict", "temperature",
                               "logit_bias", "samplers", "input_extra", "input_prefix", "input_suffix", "response_fields",
                               "stream_options", "n_probs", "id_slot", "text", "type", "filename"};

struct Stats {
    size_t inputs = 0, accepted = 0;
    size_t deepest = 0, deepest_accepted = 0;
    size_t largest = 0, largest_accepted = 0;
    size_t most_values = 0, most_values_accepted = 0;
} g_stats;

void print_stats() {
    std::fprintf(stderr,
                 "serve_json: %zu bodies, %zu parsed as requests; deepest nesting %zu (deepest accepted %zu), largest body "
                 "%zu bytes (largest accepted %zu), most values %zu (most accepted %zu)\n",
                 g_stats.inputs, g_stats.accepted, g_stats.deepest, g_stats.deepest_accepted, g_stats.largest,
                 g_stats.largest_accepted, g_stats.most_values, g_stats.most_values_accepted);
}

// Writes JSON text from instructions, keeping it well-formed as long as the input asks for well-formed structure:
// commas and keys are added where a container needs them.
class Builder {
public:
    std::string text;
    size_t depth = 0, max_depth = 0, values = 0;

    bool full() const { return text.size() >= kMaxText; }

    void open(char bracket, const char *key) {
        before_value(key);
        text += bracket;
        stack_.push_back({bracket, false});
        max_depth = std::max(max_depth, ++depth);
    }
    void close() {
        if (stack_.empty()) return;
        text += stack_.back().bracket == '[' ? ']' : '}';
        stack_.pop_back();
        --depth;
    }
    void close_all() {
        while (!stack_.empty()) close();
    }
    void scalar(const std::string &v, const char *key = nullptr) {
        before_value(key);
        text += v;
    }
    void string(size_t n, char c, const char *key = nullptr) {
        before_value(key);
        text += '"';
        if (c == '\\') {
            for (size_t i = 0; i < n / 6; ++i) text += "\\u00e9";  // escapes the lexer decodes
        } else {
            text.append(n, c < 0x20 || c == '"' ? 'x' : c);
        }
        text += '"';
    }

private:
    struct Level {
        char bracket;
        bool has_item;
    };
    // The comma, and in an object the key, before a value.
    void before_value(const char *key) {
        ++values;
        if (stack_.empty()) return;
        Level &l = stack_.back();
        if (l.has_item) text += ',';
        l.has_item = true;
        if (l.bracket == '{') {
            text += '"';
            text += key != nullptr ? key : ("k" + std::to_string(values)).c_str();
            text += "\":";
        }
    }
    std::vector<Level> stack_;
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    serve_fuzz::load_models("serve_json");
    std::atexit(print_stats);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    Builder b;
    // The wrapper: the structure alone, or as the value of a request field.
    const uint8_t wrap = data[0];
    const bool close_at_end = (wrap & 0x80) == 0;
    if (wrap % 4 != 0) {
        b.open('{', nullptr);
        if (wrap % 4 == 2) b.scalar("8", "n_predict");
        if (wrap % 4 == 3) b.scalar("0", "temperature");
    }
    for (size_t i = 1; i < size && !b.full(); i += 3) {
        const uint8_t op = data[i];
        const uint32_t ab = (i + 1 < size ? uint32_t(data[i + 1]) << 8 : 0) | (i + 2 < size ? data[i + 2] : 0);
        const char *field = kFields[op / 16 % (sizeof kFields / sizeof *kFields)];
        switch (op % 8) {
        case 0:  // ab * 8 + 1 nested arrays: up to 524,281 levels in one instruction
            for (uint32_t n = 0; n < ab * 8 + 1 && !b.full(); ++n) b.open('[', n == 0 ? field : nullptr);
            break;
        case 1:  // nested objects, each the value of a key
            for (uint32_t n = 0; n < ab * 2 + 1 && !b.full(); ++n) b.open('{', n == 0 ? field : nullptr);
            break;
        case 2:  // close ab % 64 + 1 levels
            for (uint32_t n = 0; n < ab % 64 + 1; ++n) b.close();
            break;
        case 3:  // a string of up to 4 MiB
            b.string(size_t(ab) * 64, char(op), field);
            break;
        case 4:  // a number: a token id, a negative, a float, a huge integer
            b.scalar(ab % 4 == 0 ? std::to_string(ab) : ab % 4 == 1 ? "-" + std::to_string(ab) : ab % 4 == 2 ? "1e308" : "18446744073709551616",
                     field);
            break;
        case 5: {  // an array of ab * 16 numbers (up to a million): token ids
            b.open('[', field);
            for (uint32_t n = 0; n < ab * 16 && !b.full(); ++n) b.scalar(std::to_string(n % 300));
            b.close();
            break;
        }
        case 6: {  // an object of ab + 1 members
            b.open('{', field);
            for (uint32_t n = 0; n <= ab && !b.full(); ++n) b.scalar("1", nullptr);
            b.close();
            break;
        }
        case 7:  // a scalar of another type, or raw bytes (the text stops being JSON there)
            if (ab % 3 == 0) b.scalar("null", field);
            else if (ab % 3 == 1) b.scalar("true", field);
            else b.text.append(1, char(ab >> 8));
            break;
        }
    }
    if (close_at_end) b.close_all();

    const bool parsed = serve_fuzz::check_body(b.text);
    ++g_stats.inputs;
    g_stats.deepest = std::max(g_stats.deepest, b.max_depth);
    g_stats.largest = std::max(g_stats.largest, b.text.size());
    g_stats.most_values = std::max(g_stats.most_values, b.values);
    if (parsed) {
        ++g_stats.accepted;
        g_stats.deepest_accepted = std::max(g_stats.deepest_accepted, b.max_depth);
        g_stats.largest_accepted = std::max(g_stats.largest_accepted, b.text.size());
        g_stats.most_values_accepted = std::max(g_stats.most_values_accepted, b.values);
    }
    return 0;
}
