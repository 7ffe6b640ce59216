#include "json_out.h"

#include "stats_line.h"

#include <cmath>
#include <cstdint>
#include <cstdio>

namespace specula_cli {
namespace {

// Length of the well-formed UTF-8 sequence at s[i] (RFC 3629: no overlongs, no surrogates, <= U+10FFFF),
// or 0 if it is malformed or truncated.
size_t utf8_sequence_length(std::string_view s, size_t i) {
    const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
    const unsigned char b0 = byte(i);
    size_t n;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (b0 < 0x80) return 1;
    if (b0 >= 0xC2 && b0 <= 0xDF) n = 2;
    else if (b0 >= 0xE0 && b0 <= 0xEF) {
        n = 3;
        if (b0 == 0xE0) lo = 0xA0;  // overlong
        if (b0 == 0xED) hi = 0x9F;  // surrogates
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        n = 4;
        if (b0 == 0xF0) lo = 0x90;  // overlong
        if (b0 == 0xF4) hi = 0x8F;  // > U+10FFFF
    } else {
        return 0;
    }
    if (i + n > s.size()) return 0;
    if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
    for (size_t k = 2; k < n; ++k)
        if ((byte(i + k) & 0xC0) != 0x80) return 0;
    return n;
}

}  // namespace

std::string json_string(std::string_view text) {
    std::string out;
    out.reserve(text.size() + 2);
    out += '"';
    for (size_t i = 0; i < text.size();) {
        const unsigned char c = static_cast<unsigned char>(text[i]);
        if (c >= 0x80) {
            const size_t n = utf8_sequence_length(text, i);
            if (n == 0) {
                out += "\xEF\xBF\xBD";  // U+FFFD REPLACEMENT CHARACTER
                ++i;
            } else {
                out.append(text.substr(i, n));
                i += n;
            }
            continue;
        }
        switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
            if (c < 0x20 || c == 0x7F) {  // DEL is legal JSON, but escaping it keeps terminals sane
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\u%04x", c);
                out += buf;
            } else {
                out += static_cast<char>(c);
            }
        }
        ++i;
    }
    out += '"';
    return out;
}

std::string json_number(double value) {
    if (!std::isfinite(value)) return "null";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", value);
    return buf;
}

std::string json_token_line(const specula_token_event &event, bool speculative) {
    std::string line = "{\"id\":" + std::to_string(event.token) + ",\"text\":" +
                       json_string(std::string_view(event.text != nullptr ? event.text : "", event.text_len));
    if (event.n_top > 0 && event.top_ids != nullptr && event.top_logits != nullptr) {
        line += ",\"top\":[";
        for (int32_t i = 0; i < event.n_top; ++i) {
            if (i > 0) line += ',';
            line += '[' + std::to_string(event.top_ids[i]) + ',' + json_number(event.top_logits[i]) + ']';
        }
        line += ']';
    }
    if (speculative) line += event.drafted ? ",\"accepted\":true" : ",\"accepted\":false";
    line += '}';
    return line;
}

std::string json_stats_line(const specula_stats &stats, specula_stop_reason reason, const std::string &drafter,
                            const std::string &tree) {
    std::string line = "{\"stats\":{\"prompt_tokens\":" + std::to_string(stats.n_prompt_tokens) +
                       ",\"prompt_tokens_per_s\":" + json_number(stats.prompt_tokens_per_s) +
                       ",\"generated_tokens\":" + std::to_string(stats.n_generated) +
                       ",\"decode_tokens_per_s\":" + json_number(stats.decode_tokens_per_s) +
                       ",\"ttft_ms\":" + json_number(stats.ttft_ms) + ",\"stop_reason\":" +
                       json_string(specula_stop_reason_string(reason));
    if (stats.n_restored_tokens > 0) line += ",\"restored_tokens\":" + std::to_string(stats.n_restored_tokens);
    if (stats.n_context_shifts > 0)
        line += ",\"context_shifts\":" + std::to_string(stats.n_context_shifts) + ",\"discarded_tokens\":" + std::to_string(stats.n_discarded_tokens);
    if (!drafter.empty()) {
        const int n_depth = static_cast<int>(sizeof stats.accepted_at_depth / sizeof stats.accepted_at_depth[0]);
        int deepest = 0;
        for (int d = 0; d < n_depth; ++d)
            if (stats.accepted_at_depth[d] > 0) deepest = d + 1;
        std::string depths = "[";
        for (int d = 0; d < deepest; ++d) depths += (d ? "," : "") + std::to_string(stats.accepted_at_depth[d]);
        depths += ']';
        line += ",\"drafter\":" + json_string(drafter) + ",\"tree\":" + json_string(tree) + ",\"tau\":" + json_number(stats.tau) +
                ",\"rounds\":" + std::to_string(stats.n_spec_rounds) + ",\"drafted\":" + std::to_string(stats.n_drafted) +
                ",\"accepted\":" + std::to_string(stats.n_accepted) + ",\"accept_per_depth\":" + depths +
                ",\"draft_ms\":" + json_number(stats.draft_ms) + ",\"verify_ms\":" + json_number(stats.verify_ms) +
                ",\"drafter_bytes\":" + std::to_string(stats.drafter_bytes);
    }
    return line + "}}";
}

}  // namespace specula_cli
