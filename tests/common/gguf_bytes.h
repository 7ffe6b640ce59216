// Byte-level surgery on GGUF files for the malformed-input tests: find a GGUF string (u64 length + bytes) in a
// file's bytes, patch integers in place, and read/write whole files. Header-only and public-API-free, for the unit,
// API and catalogue tests. Callers check with Catch that the patched places exist (REQUIRE in after_string).
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace test_gguf {

using Bytes = std::vector<uint8_t>;

inline Bytes read_bytes(const std::filesystem::path &path) {
    std::ifstream in(path, std::ios::binary);
    REQUIRE(in.good());
    in.seekg(0, std::ios::end);
    Bytes bytes(size_t(in.tellg()));
    in.seekg(0);
    in.read(reinterpret_cast<char *>(bytes.data()), std::streamsize(bytes.size()));
    REQUIRE(in.good());
    return bytes;
}

inline void write_bytes(const std::filesystem::path &path, const Bytes &bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char *>(bytes.data()), std::streamsize(bytes.size()));
    REQUIRE(out.good());
}

// Offset just past the GGUF string `s` (u64 length + bytes) in the file; the string must occur exactly once.
inline size_t after_string(const Bytes &bytes, const std::string &s) {
    Bytes pattern(8);
    const uint64_t n = s.size();
    std::memcpy(pattern.data(), &n, 8);
    pattern.insert(pattern.end(), s.begin(), s.end());
    const auto it = std::search(bytes.begin(), bytes.end(), pattern.begin(), pattern.end());
    INFO("GGUF string '" << s << "'");
    REQUIRE(it != bytes.end());
    REQUIRE(std::search(it + 1, bytes.end(), pattern.begin(), pattern.end()) == bytes.end());
    return size_t(it - bytes.begin()) + pattern.size();
}
// Offset of the u64 length in front of the string `s`.
inline size_t at_string(const Bytes &bytes, const std::string &s) { return after_string(bytes, s) - s.size() - 8; }

// Replaces the GGUF string `from` by `to` of the same length (the layout stays valid).
inline void rename_string(Bytes &bytes, const std::string &from, const std::string &to) {
    REQUIRE(from.size() == to.size());
    const size_t end = after_string(bytes, from);
    std::memcpy(bytes.data() + end - from.size(), to.data(), to.size());
}

inline void put_u32(Bytes &b, size_t pos, uint32_t v) {
    REQUIRE(pos + 4 <= b.size());
    std::memcpy(b.data() + pos, &v, 4);
}
inline void put_u64(Bytes &b, size_t pos, uint64_t v) {
    REQUIRE(pos + 8 <= b.size());
    std::memcpy(b.data() + pos, &v, 8);
}
inline uint32_t get_u32(const Bytes &b, size_t pos) {
    REQUIRE(pos + 4 <= b.size());
    uint32_t v;
    std::memcpy(&v, b.data() + pos, 4);
    return v;
}
inline uint64_t get_u64(const Bytes &b, size_t pos) {
    REQUIRE(pos + 8 <= b.size());
    uint64_t v;
    std::memcpy(&v, b.data() + pos, 8);
    return v;
}

// Tensor info fields after the name: n_dims (u32), dims (u64 each), type (u32), offset (u64).
inline size_t tensor_n_dims_at(const Bytes &b, const std::string &name) { return after_string(b, name); }
inline size_t tensor_dim_at(const Bytes &b, const std::string &name, int d) { return after_string(b, name) + 4 + 8 * size_t(d); }
inline size_t tensor_type_at(const Bytes &b, const std::string &name, int n_dims) { return tensor_dim_at(b, name, n_dims); }
inline size_t tensor_offset_at(const Bytes &b, const std::string &name, int n_dims) { return tensor_dim_at(b, name, n_dims) + 4; }

}  // namespace test_gguf
