// Typed reads of request fields. A field that is absent (or null) takes its default; a field of the wrong type or
// out of its range is a 400 that names it, so a malformed request never runs with a value it did not ask for.
#pragma once

#include "http_error.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace specula_serve {

using json = nlohmann::ordered_json;

// Longest string field accepted (prompt, prefix, suffix, chunk texts): the body limit bounds them too.
constexpr size_t kMaxStopStrings = 16;
constexpr size_t kMaxStopLength = 256;

bool has_field(const json &body, const char *key);
int64_t int_field(const json &body, const char *key, int64_t fallback, int64_t min, int64_t max);
double number_field(const json &body, const char *key, double fallback, double min, double max);
bool bool_field(const json &body, const char *key, bool fallback);
std::string string_field(const json &body, const char *key, const std::string &fallback = "");
// "stop": a string or an array of strings (at most kMaxStopStrings of at most kMaxStopLength bytes; empty ones
// are dropped).
std::vector<std::string> stop_field(const json &body, const char *key);
// An array of strings (e.g. "samplers", "response_fields"); a single string is split on ';' like llama-server.
std::vector<std::string> string_list_field(const json &body, const char *key);

// Serialises without throwing on invalid UTF-8 (replaced by U+FFFD): generated text may cut a character.
std::string dump(const json &j);

}  // namespace specula_serve
