#include <catch2/catch.hpp>

#include "session/stop_strings.h"

using namespace specula::internal;

TEST_CASE("stop strings are never emitted, not even in part", "[stop]") {
    StopStrings s;
    s.set({"\n\n", "END"});
    bool stopped = false;
    CHECK(s.push("Hello", stopped) == "Hello");
    CHECK_FALSE(stopped);
    CHECK(s.push(" wor", stopped) == " wor");
    CHECK(s.push("ld E", stopped) == "ld ");  // "E" could start "END"
    CHECK(s.push("N", stopped) == "");
    CHECK(s.push("Dless", stopped) == "");
    CHECK(stopped);
}

TEST_CASE("held-back text that does not become a stop string is released", "[stop]") {
    StopStrings s;
    s.set({"END"});
    bool stopped = false;
    CHECK(s.push("EN", stopped) == "");
    CHECK(s.push("X", stopped) == "ENX");
    CHECK(s.push("E", stopped) == "");
    CHECK(s.flush() == "E");
}

TEST_CASE("a stop string inside one piece cuts the text before it", "[stop]") {
    StopStrings s;
    s.set({"\n"});
    bool stopped = false;
    CHECK(s.push("abc\ndef", stopped) == "abc");
    CHECK(stopped);
}
