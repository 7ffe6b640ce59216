#include "json_fields.h"

#include <cmath>

namespace specula_serve {

namespace {
const json *field(const json &body, const char *key) {
    const auto it = body.find(key);
    if (it == body.end() || it->is_null()) return nullptr;
    return &*it;
}
}  // namespace

bool has_field(const json &body, const char *key) { return field(body, key) != nullptr; }

int64_t int_field(const json &body, const char *key, int64_t fallback, int64_t min, int64_t max) {
    const json *v = field(body, key);
    if (v == nullptr) return fallback;
    int64_t x = 0;
    if (v->is_number_integer()) {
        x = v->is_number_unsigned() ? (v->get<uint64_t>() > uint64_t(INT64_MAX) ? INT64_MAX : int64_t(v->get<uint64_t>()))
                                    : v->get<int64_t>();
    } else if (v->is_number_float() && std::isfinite(v->get<double>()) && v->get<double>() == std::floor(v->get<double>()) &&
               std::fabs(v->get<double>()) < 9.0e18) {
        x = int64_t(v->get<double>());  // 128.0 is an integer too
    } else {
        throw bad_request(std::string("\"") + key + "\" must be an integer");
    }
    if (x < min || x > max)
        throw bad_request(std::string("\"") + key + "\" must be in [" + std::to_string(min) + ", " + std::to_string(max) +
                          "], got " + std::to_string(x));
    return x;
}

double number_field(const json &body, const char *key, double fallback, double min, double max) {
    const json *v = field(body, key);
    if (v == nullptr) return fallback;
    if (!v->is_number()) throw bad_request(std::string("\"") + key + "\" must be a number");
    const double x = v->get<double>();
    if (!std::isfinite(x) || x < min || x > max)
        throw bad_request(std::string("\"") + key + "\" must be in [" + std::to_string(min) + ", " + std::to_string(max) + "]");
    return x;
}

bool bool_field(const json &body, const char *key, bool fallback) {
    const json *v = field(body, key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) throw bad_request(std::string("\"") + key + "\" must be a boolean");
    return v->get<bool>();
}

std::string string_field(const json &body, const char *key, const std::string &fallback) {
    const json *v = field(body, key);
    if (v == nullptr) return fallback;
    if (!v->is_string()) throw bad_request(std::string("\"") + key + "\" must be a string");
    return v->get<std::string>();
}

std::vector<std::string> stop_field(const json &body, const char *key) {
    const json *v = field(body, key);
    std::vector<std::string> out;
    if (v == nullptr) return out;
    auto add = [&](const json &s) {
        if (!s.is_string()) throw bad_request(std::string("\"") + key + "\" must be a string or an array of strings");
        std::string text = s.get<std::string>();
        if (text.size() > kMaxStopLength)
            throw bad_request(std::string("\"") + key + "\": a stop string is longer than " + std::to_string(kMaxStopLength) + " bytes");
        if (!text.empty()) out.push_back(std::move(text));
    };
    if (v->is_array()) {
        for (const json &s : *v) add(s);
    } else {
        add(*v);
    }
    if (out.size() > kMaxStopStrings)
        throw bad_request(std::string("\"") + key + "\": at most " + std::to_string(kMaxStopStrings) + " stop strings");
    return out;
}

std::vector<std::string> string_list_field(const json &body, const char *key) {
    const json *v = field(body, key);
    std::vector<std::string> out;
    if (v == nullptr) return out;
    if (v->is_string()) {
        const std::string s = v->get<std::string>();
        size_t start = 0;
        while (start <= s.size()) {
            const size_t end = std::min(s.find(';', start), s.size());
            if (end > start) out.push_back(s.substr(start, end - start));
            start = end + 1;
        }
        return out;
    }
    if (!v->is_array()) throw bad_request(std::string("\"") + key + "\" must be an array of strings");
    for (const json &s : *v) {
        if (!s.is_string()) throw bad_request(std::string("\"") + key + "\" must be an array of strings");
        out.push_back(s.get<std::string>());
    }
    if (out.size() > 256) throw bad_request(std::string("\"") + key + "\": too many entries");
    return out;
}

std::string dump(const json &j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace specula_serve
