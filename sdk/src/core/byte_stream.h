// Little-endian records for snapshot sections: ByteWriter appends fixed-size values, arrays and strings to a byte
// vector; ByteReader reads them back with every length checked against what is left, so a hostile or truncated
// section can only ever produce Error(FORMAT), never a read out of bounds or an absurd allocation.
#pragma once

#include "core/error.h"

#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace specula::internal {

static_assert(std::endian::native == std::endian::little, "snapshots are written little-endian; a big-endian host needs byte swaps here");

class ByteWriter {
public:
    template <class T> void put(T value) {
        static_assert(std::is_trivially_copyable_v<T>);
        const size_t at = bytes_.size();
        bytes_.resize(at + sizeof(T));
        std::memcpy(bytes_.data() + at, &value, sizeof(T));
    }
    // A u64 count followed by the elements.
    template <class T> void put_array(std::span<const T> values) {
        static_assert(std::is_trivially_copyable_v<T>);
        put<uint64_t>(values.size());
        put_raw(values.data(), values.size_bytes());
    }
    void put_string(std::string_view s) { put_array(std::span<const char>(s.data(), s.size())); }
    void put_raw(const void *data, size_t n) {
        if (n == 0) return;
        const size_t at = bytes_.size();
        bytes_.resize(at + n);
        std::memcpy(bytes_.data() + at, data, n);
    }

    std::vector<uint8_t> &bytes() { return bytes_; }
    std::vector<uint8_t> take() { return std::move(bytes_); }

private:
    std::vector<uint8_t> bytes_;
};

class ByteReader {
public:
    // what: the section's name for error messages ("snapshot: SESSION section: ...").
    ByteReader(std::span<const uint8_t> bytes, std::string what) : bytes_(bytes), what_(std::move(what)) {}

    template <class T> T get() {
        static_assert(std::is_trivially_copyable_v<T>);
        T value;
        std::memcpy(&value, take(sizeof(T)), sizeof(T));
        return value;
    }
    // An array of at most max_count elements (a bound the caller knows from the header or the model).
    template <class T> std::vector<T> get_array(uint64_t max_count) {
        const uint64_t n = get<uint64_t>();
        require(n <= max_count, SPECULA_ERR_FORMAT, what_ + ": an array of " + std::to_string(n) + " elements exceeds its bound " + std::to_string(max_count));
        std::vector<T> out(static_cast<size_t>(n));
        if (n > 0) std::memcpy(out.data(), take(size_t(n) * sizeof(T)), size_t(n) * sizeof(T));
        return out;
    }
    std::string get_string(uint64_t max_length) {
        const std::vector<char> chars = get_array<char>(max_length);
        return std::string(chars.begin(), chars.end());
    }
    // A boolean stored as one byte that must be 0 or 1.
    bool get_bool() {
        const uint8_t b = get<uint8_t>();
        require(b <= 1, SPECULA_ERR_FORMAT, what_ + ": a flag byte is " + std::to_string(b));
        return b == 1;
    }
    const uint8_t *take(size_t n) {
        require(n <= bytes_.size() - pos_, SPECULA_ERR_FORMAT, what_ + ": ends early (needs " + std::to_string(n) + " more bytes, has " + std::to_string(bytes_.size() - pos_) + ")");
        const uint8_t *p = bytes_.data() + pos_;
        pos_ += n;
        return p;
    }
    size_t remaining() const { return bytes_.size() - pos_; }
    void expect_end() const {
        require(pos_ == bytes_.size(), SPECULA_ERR_FORMAT, what_ + ": " + std::to_string(bytes_.size() - pos_) + " unexpected bytes at the end");
    }
    // Throws Error(FORMAT) with this reader's context unless ok.
    void check(bool ok, const std::string &message) const { require(ok, SPECULA_ERR_FORMAT, what_ + ": " + message); }
    const std::string &what() const { return what_; }

private:
    std::span<const uint8_t> bytes_;
    size_t pos_ = 0;
    std::string what_;
};

}  // namespace specula::internal
