#include "json_limits.h"

#include <nlohmann/json.hpp>

#include <vector>

namespace specula_serve {

namespace {

using json = nlohmann::json;

// Counts while nlohmann's lexer reads; returning false stops the parse at once.
class LimitsChecker {
public:
    explicit LimitsChecker(const JsonLimits &limits) : limits_(limits) {}

    bool null() { return value(); }
    bool boolean(bool) { return value(); }
    bool number_integer(json::number_integer_t) { return value(); }
    bool number_unsigned(json::number_unsigned_t) { return value(); }
    bool number_float(json::number_float_t, const json::string_t &) { return value(); }
    bool string(json::string_t &s) {
        if (s.size() > limits_.max_string_bytes)
            return fail("a string of the request body is longer than " + std::to_string(limits_.max_string_bytes) + " bytes");
        return value();
    }
    bool binary(json::binary_t &) { return value(); }
    bool start_object(std::size_t) { return open(); }
    bool end_object() { return close(); }
    bool start_array(std::size_t) { return open(); }
    bool end_array() { return close(); }
    bool key(json::string_t &k) {
        if (k.size() > limits_.max_key_bytes)
            return fail("a key of the request body is longer than " + std::to_string(limits_.max_key_bytes) + " bytes");
        if (++members_.back() > limits_.max_object_members)
            return fail("an object of the request body has more than " + std::to_string(limits_.max_object_members) + " members");
        if (++all_members_ > limits_.max_members)
            return fail("the request body's objects have more than " + std::to_string(limits_.max_members) + " members in all");
        return true;
    }
    bool parse_error(std::size_t, const std::string &, const nlohmann::detail::exception &) { return false; }

    const std::string &violation() const { return violation_; }

private:
    // A value (scalar or container) in the current container.
    bool value() {
        if (++values_ > limits_.max_values)
            return fail("the request body holds more than " + std::to_string(limits_.max_values) + " JSON values");
        if (!members_.empty() && ++elements_.back() > limits_.max_array_elements)
            return fail("an array of the request body has more than " + std::to_string(limits_.max_array_elements) + " elements");
        return true;
    }
    bool open() {
        if (!value()) return false;
        if (members_.size() >= limits_.max_depth)
            return fail("the request body nests JSON deeper than " + std::to_string(limits_.max_depth) + " levels");
        members_.push_back(0);
        elements_.push_back(0);
        return true;
    }
    bool close() {
        members_.pop_back();
        elements_.pop_back();
        return true;
    }
    bool fail(std::string why) {
        violation_ = std::move(why);
        return false;
    }

    const JsonLimits &limits_;
    size_t values_ = 0, all_members_ = 0;
    // Per open container (at most max_depth of them): object members and array elements seen so far.
    std::vector<size_t> members_, elements_;
    std::string violation_;
};

}  // namespace

std::string json_limits_violation(const std::string &text, const JsonLimits &limits) {
    LimitsChecker checker(limits);
    json::sax_parse(text, &checker, json::input_format_t::json, /*strict=*/true, /*ignore_comments=*/false);
    return checker.violation();
}

}  // namespace specula_serve
