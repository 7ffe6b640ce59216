// StreamDecoder: token pieces in, only complete and valid UTF-8 out, whatever the split.
#include "test_tokenizer_support.h"

#include "tokenizer/stream_decoder.h"

#include <catch2/catch.hpp>

#include <random>
#include <string>
#include <vector>

using namespace specula::internal;
using tokenizer_test::is_valid_utf8;

namespace {

// Feeds text in pieces of the given lengths; checks every output is valid UTF-8; returns everything emitted.
std::string feed(StreamDecoder &decoder, const std::string &text, const std::vector<size_t> &cuts) {
    std::string out;
    size_t pos = 0;
    for (const size_t n : cuts) {
        const std::string got = decoder.push(std::string_view(text).substr(pos, n));
        INFO("after " << pos + n << " bytes");
        CHECK(is_valid_utf8(got));
        out += got;
        pos += n;
    }
    std::string tail = decoder.push(std::string_view(text).substr(pos));
    tail += decoder.flush();  // after the push: the operands of + are evaluated in no fixed order
    CHECK(is_valid_utf8(tail));
    return out + tail;
}

const std::string kSamples[] = {
    "plain ASCII",
    "\xF0\x9F\x98\x80 \xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD \xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9",  // emoji, skin tone, ZWJ
    "\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C",                                   // CJK
    "e\xCC\x81 n\xCC\x83 a\xCC\x8A\xCC\x81",                                                           // combining marks
    "\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82 \xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7",       // Cyrillic, Arabic
    "\xF4\x8F\xBF\xBF\xEF\xBF\xBD\xC2\x80",                                                            // U+10FFFF, U+FFFD, U+0080
};

}  // namespace

TEST_CASE("StreamDecoder: valid text split at every byte comes out whole", "[tokenizer]") {
    for (const std::string &text : kSamples) {
        INFO("text: " << text);
        // one byte at a time
        StreamDecoder one;
        CHECK(feed(one, text, std::vector<size_t>(text.size(), 1)) == text);
        // every two-piece split
        for (size_t cut = 0; cut <= text.size(); ++cut) {
            StreamDecoder two;
            CHECK(feed(two, text, {cut}) == text);
        }
    }
}

TEST_CASE("StreamDecoder: holds back exactly the incomplete tail", "[tokenizer]") {
    StreamDecoder d;
    CHECK(d.push("ab\xF0\x9F") == "ab");
    CHECK(d.push("\x98") == "");
    CHECK(d.push("\x80" "c") == "\xF0\x9F\x98\x80" "c");
    CHECK(d.flush() == "");
    CHECK(d.push("\xE4\xBD") == "");
    d.reset();
    CHECK(d.push("x") == "x");
}

TEST_CASE("StreamDecoder: invalid bytes become U+FFFD", "[tokenizer]") {
    const std::string fffd = "\xEF\xBF\xBD";
    StreamDecoder d;
    CHECK(d.push("a\xFF" "b") == "a" + fffd + "b");
    CHECK(d.push("\x80") == fffd);                              // stray continuation byte
    CHECK(d.push("\xC0\xAF") == fffd + fffd);                   // overlong: never valid, one each
    CHECK(d.push("\xED\xA0\x80") == fffd + fffd + fffd);        // a surrogate is not UTF-8
    CHECK(d.push("\xF4\x90\x80\x80") == fffd + fffd + fffd + fffd);  // above U+10FFFF
    CHECK(d.push("\xE2\x82" "A") == fffd + "A");                // truncated sequence: one U+FFFD for the subpart
    CHECK(d.push("\xF0\x9F\x98") == "");                        // could still complete...
    CHECK(d.flush() == fffd);                                   // ...but the stream ended
    CHECK(d.flush() == "");
}

TEST_CASE("StreamDecoder: random bytes in random pieces always give valid UTF-8", "[tokenizer]") {
    std::mt19937 rng(1234);
    for (int round = 0; round < 500; ++round) {
        std::string bytes;
        const int n = int(rng() % 40);
        for (int i = 0; i < n; ++i) {
            // Mostly plausible UTF-8 material, sometimes junk.
            static const char *const parts[] = {"a", "\xC3\xA9", "\xE4\xBD\xA0", "\xF0\x9F\x98\x80", "\x80", "\xFF", "\xC3", "\xE4\xBD", "\xF0\x9F"};
            bytes += parts[rng() % 9];
        }
        std::vector<size_t> cuts;
        for (size_t used = 0; used < bytes.size();) {
            const size_t k = std::min<size_t>(bytes.size() - used, rng() % 5);
            cuts.push_back(k);
            used += k;
        }
        StreamDecoder split, whole;
        const std::string a = feed(split, bytes, cuts);
        std::string b = whole.push(bytes);
        b += whole.flush();
        INFO("round " << round);
        CHECK(is_valid_utf8(a));
        CHECK(a == b);  // how the bytes were cut never changes the text
    }
}
