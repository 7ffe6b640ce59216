// GGUF reader and writer: round trips of every metadata type and several tensor types, layout facts, and the real
// fixture models (parsed with mmap and with read, and rewritten byte for byte). Hostile input: test_gguf_malformed.cpp.
#include <catch2/catch.hpp>

#include "common/skip.h"
#include "common/error_status.h"
#include "core/error.h"
#include "gguf/file_bytes.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <unistd.h>

using namespace specula::internal;
namespace fs = std::filesystem;

namespace {

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<uint8_t> v(n);
    for (auto &b : v) b = uint8_t(rng());
    return v;
}

// Exact equality, bit for bit on floats (NaN included).
bool same_value(const Value &a, const Value &b) {
    if (a.type != b.type) return false;
    switch (a.type) {
    case ValueType::UINT8: case ValueType::UINT16: case ValueType::UINT32: case ValueType::UINT64: case ValueType::BOOL:
        return a.u == b.u;
    case ValueType::INT8: case ValueType::INT16: case ValueType::INT32: case ValueType::INT64: return a.i == b.i;
    case ValueType::FLOAT32: case ValueType::FLOAT64: return std::memcmp(&a.f, &b.f, sizeof a.f) == 0;
    case ValueType::STRING: return a.s == b.s;
    case ValueType::ARRAY:
        if (a.element_type != b.element_type || a.items.size() != b.items.size()) return false;
        for (size_t k = 0; k < a.items.size(); ++k)
            if (!same_value(a.items[k], b.items[k])) return false;
        return true;
    }
    return false;
}

// Nested array: depth levels of arrays around one u8.
Value nested(int depth) {
    if (depth == 0) return value_u8(42);
    Value inner = nested(depth - 1);
    const ValueType t = inner.type;
    return value_array(t, {inner});
}

struct TensorSpec {
    std::string name;
    TensorType type;
    std::vector<int64_t> dims;
    size_t n_bytes;
};

fs::path temp_dir() {
    fs::path dir = fs::temp_directory_path() / ("specula-gguf-reader-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    return dir;
}

std::vector<uint8_t> read_all(const fs::path &path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("gguf round trip: every metadata value type", "[gguf]") {
    const std::vector<std::pair<std::string, Value>> values = {
        {"t.u8", value_u8(255)},
        {"t.i8", value_i8(-128)},
        {"t.u16", value_u16(65535)},
        {"t.i16", value_i16(-32768)},
        {"t.u32", value_u32(4294967295u)},
        {"t.i32", value_i32(std::numeric_limits<int32_t>::min())},
        {"t.u64", value_u64(std::numeric_limits<uint64_t>::max())},
        {"t.i64", value_i64(std::numeric_limits<int64_t>::min())},
        {"t.f32", value_f32(-1.5e-7f)},
        {"t.f32_inf", value_f32(std::numeric_limits<float>::infinity())},
        {"t.f64", value_f64(3.141592653589793)},
        {"t.true", value_bool(true)},
        {"t.false", value_bool(false)},
        {"t.string", value_string("h\xC3\xA9llo, w\xC3\xB6rld")},
        {"t.string_empty", value_string("")},
        {"t.string_nul", value_string(std::string("a\0b", 3))},
        {"t.arr_u8", value_array(ValueType::UINT8, {value_u8(0), value_u8(255)})},
        {"t.arr_i8", value_array(ValueType::INT8, {value_i8(-1), value_i8(127)})},
        {"t.arr_u16", value_array(ValueType::UINT16, {value_u16(1), value_u16(65535)})},
        {"t.arr_i16", value_array(ValueType::INT16, {value_i16(-2), value_i16(300)})},
        {"t.arr_u32", value_array(ValueType::UINT32, {value_u32(7)})},
        {"t.arr_i32", value_array(ValueType::INT32, {value_i32(-7), value_i32(0), value_i32(1 << 30)})},
        {"t.arr_u64", value_array(ValueType::UINT64, {value_u64(uint64_t(1) << 63)})},
        {"t.arr_i64", value_array(ValueType::INT64, {value_i64(-(int64_t(1) << 62))})},
        {"t.arr_f32", value_array(ValueType::FLOAT32, {value_f32(0.25f), value_f32(-0.0f)})},
        {"t.arr_f64", value_array(ValueType::FLOAT64, {value_f64(1e300), value_f64(-2.5)})},
        {"t.arr_bool", value_array(ValueType::BOOL, {value_bool(true), value_bool(false), value_bool(true)})},
        {"t.arr_string", value_array(ValueType::STRING, {value_string("a"), value_string(""), value_string("ccc")})},
        {"t.arr_nested", value_array(ValueType::ARRAY, {value_array(ValueType::INT32, {value_i32(1), value_i32(2)}),
                                                        value_array(ValueType::STRING, {value_string("x")}),
                                                        value_array(ValueType::UINT8, {})})},
        {"t.arr_nested4", nested(4)},  // the deepest the reader accepts
        {"t.empty_u8", value_array(ValueType::UINT8, {})},
        {"t.empty_string", value_array(ValueType::STRING, {})},
        {"t.empty_array", value_array(ValueType::ARRAY, {})},
    };
    GgufWriter w;
    for (const auto &[key, value] : values) w.set(key, value);
    w.set_string_array("t.helper_strings", {"one", "two"});
    w.set_f32_array("t.helper_f32", {1.0f, -2.0f});
    w.set_i32_array("t.helper_i32", {3, -4});
    REQUIRE(w.metadata_count() == values.size() + 3);

    const GgufFile file = GgufFile::parse(FileBytes::from_vector(w.to_bytes()));
    CHECK(file.version() == 3);
    CHECK(file.alignment() == 32);
    CHECK(file.tensors().empty());
    REQUIRE(file.metadata().size() == values.size() + 3);
    for (size_t k = 0; k < values.size(); ++k) {
        INFO(values[k].first);
        CHECK(file.metadata()[k].first == values[k].first);  // file order is insertion order
        CHECK(same_value(file.metadata()[k].second, values[k].second));
    }
    CHECK(file.get_int("t.i64") == std::numeric_limits<int64_t>::min());
    CHECK(file.get_int("t.u16") == 65535);
    CHECK(file.get_float("t.f32") == Approx(-1.5e-7));
    CHECK(file.get_bool("t.true") == true);
    CHECK(file.get_string("t.string_nul") == std::string("a\0b", 3));
    const std::vector<Value> *strings = file.get_array("t.helper_strings", ValueType::STRING);
    REQUIRE(strings != nullptr);
    REQUIRE(strings->size() == 2);
    CHECK((*strings)[1].s == "two");
    const std::vector<Value> *f32s = file.get_array("t.helper_f32", ValueType::FLOAT32);
    REQUIRE(f32s != nullptr);
    CHECK((*f32s)[1].f == -2.0);
    const std::vector<Value> *i32s = file.get_array("t.helper_i32", ValueType::INT32);
    REQUIRE(i32s != nullptr);
    CHECK((*i32s)[1].i == -4);
    CHECK(file.get_array("t.absent", ValueType::INT32) == nullptr);
    CHECK_FALSE(file.get_int("t.absent").has_value());
}

TEST_CASE("gguf round trip: tensors of several types and shapes, alignment 64", "[gguf]") {
    const std::vector<TensorSpec> specs = {
        {"f32.vector", TensorType::F32, {7}, 28},
        {"f32.matrix", TensorType::F32, {8, 3}, 96},
        {"f16.4d", TensorType::F16, {2, 3, 4, 5}, 2 * 120},
        {"bf16.3d", TensorType::BF16, {4, 2, 3}, 2 * 24},
        {"q8_0.matrix", TensorType::Q8_0, {64, 3}, 2 * 3 * 34},
        {"q4_0.4d", TensorType::Q4_0, {32, 1, 2, 2}, 4 * 18},
        {"q4_0.vector", TensorType::Q4_0, {96}, 3 * 18},
    };
    GgufWriter w;
    w.set_string("general.architecture", "test");
    w.set_u32("test.block_count", 2);
    std::vector<std::vector<uint8_t>> data;
    for (size_t k = 0; k < specs.size(); ++k) {
        data.push_back(random_bytes(specs[k].n_bytes, uint32_t(k + 1)));
        w.add_tensor(specs[k].name, uint32_t(specs[k].type), specs[k].dims, data.back());
    }
    REQUIRE(w.tensor_count() == specs.size());
    const std::vector<uint8_t> bytes = w.to_bytes(64);
    REQUIRE(bytes.size() % 64 == 0);

    // base: where the parsed bytes start in memory.
    auto check = [&](const GgufFile &file, const uint8_t *base) {
        CHECK(file.version() == 3);
        CHECK(file.alignment() == 64);
        CHECK(file.get_int("general.alignment") == 64);  // added by the writer, as alignment != 32
        CHECK(file.get_int("test.block_count") == 2);
        CHECK(file.file_size() == bytes.size());
        CHECK(file.data_offset() % 64 == 0);
        REQUIRE(file.tensors().size() == specs.size());
        uint64_t expected_offset = 0;
        for (size_t k = 0; k < specs.size(); ++k) {
            const TensorInfo &t = file.tensors()[k];
            INFO(specs[k].name);
            CHECK(t.name == specs[k].name);
            CHECK(file.find_tensor(specs[k].name) == &t);
            CHECK(t.type == uint32_t(specs[k].type));
            CHECK(t.n_dims == specs[k].dims.size());
            int64_t elements = 1;
            for (size_t d = 0; d < 4; ++d) {
                const int64_t expect = d < specs[k].dims.size() ? specs[k].dims[d] : 1;
                CHECK(t.dims[d] == expect);
                elements *= expect;
            }
            CHECK(t.n_elements() == elements);
            CHECK(t.offset == expected_offset);  // packed at 64-byte boundaries, in order
            expected_offset = (t.offset + t.n_bytes + 63) / 64 * 64;
            CHECK(t.n_bytes == specs[k].n_bytes);
            CHECK(t.data == base + file.data_offset() + t.offset);
            CHECK(std::memcmp(t.data, data[k].data(), data[k].size()) == 0);
        }
        CHECK(file.find_tensor("absent") == nullptr);
        CHECK(file.data_offset() + expected_offset == bytes.size());  // data section padded to the alignment
    };

    SECTION("in memory") {
        std::vector<uint8_t> copy = bytes;
        const uint8_t *base = copy.data();  // the vector's buffer moves into FileBytes unchanged
        const GgufFile file = GgufFile::parse(FileBytes::from_vector(std::move(copy)));
        CHECK_FALSE(file.mapped());
        check(file, base);
    }
    SECTION("through a file, mmap and read") {
        const fs::path dir = temp_dir();
        const fs::path path = dir / "tensors.gguf";
        w.write_file(path.string(), 64);
        const bool same_bytes = read_all(path) == bytes;
        CHECK(same_bytes);  // write_file streams exactly the bytes to_bytes builds
        for (bool use_mmap : {true, false}) {
            INFO("mmap " << use_mmap);
            FileBytes fb = FileBytes::open(path.string(), use_mmap);
            const uint8_t *base = fb.data();
            const GgufFile file = GgufFile::parse(std::move(fb));
            CHECK(file.mapped() == use_mmap);
            check(file, base);
        }
        fs::remove_all(dir);
    }
}

TEST_CASE("gguf writer: general.alignment set by the caller decides the layout", "[gguf]") {
    GgufWriter w;
    w.set_u64("general.alignment", 128);
    w.add_tensor("a", uint32_t(TensorType::F32), {3}, random_bytes(12, 1));
    w.add_tensor("b", uint32_t(TensorType::F16), {5}, random_bytes(10, 2));
    const std::vector<uint8_t> bytes = w.to_bytes();  // default argument 32 loses to the key
    const GgufFile file = GgufFile::parse(FileBytes::from_vector(bytes));
    CHECK(file.alignment() == 128);
    CHECK(file.metadata().size() == 1);  // no second general.alignment added
    CHECK(file.data_offset() % 128 == 0);
    CHECK(file.find_tensor("b")->offset == 128);
    CHECK(bytes.size() == file.data_offset() + 256);
}

TEST_CASE("gguf writer: exact bytes of a tiny file", "[gguf]") {
    GgufWriter w;
    w.set_u32("k", 0x01020304);
    w.add_tensor("t", uint32_t(TensorType::F32), {1}, {0xAA, 0xBB, 0xCC, 0xDD});
    const std::vector<uint8_t> expected = {
        'G', 'G', 'U', 'F', 3, 0, 0, 0,              // magic, version 3
        1, 0, 0, 0, 0, 0, 0, 0,                      // tensor count
        1, 0, 0, 0, 0, 0, 0, 0,                      // metadata count
        1, 0, 0, 0, 0, 0, 0, 0, 'k',                 // key
        4, 0, 0, 0, 4, 3, 2, 1,                      // u32 value
        1, 0, 0, 0, 0, 0, 0, 0, 't',                 // tensor name
        1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0,          // n_dims, dims
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,          // type F32, offset 0
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,             // header padding: 74 -> 96
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0xAA, 0xBB, 0xCC, 0xDD,                      // data
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,    // data padding: 100 -> 128
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    };
    REQUIRE(expected.size() == 128);
    CHECK(w.to_bytes() == expected);
}

TEST_CASE("gguf writer: streamed tensors give the bytes of in-memory ones, generated a chunk at a time", "[gguf]") {
    // A row's bytes are a pure function of the tensor and the row, as add_streamed_tensor requires.
    auto row_bytes_of = [](uint32_t tensor, int64_t row, size_t n, uint8_t *dst) {
        std::mt19937 rng(uint32_t(tensor * 1000003u + uint32_t(row)));
        for (size_t i = 0; i < n; ++i) dst[i] = uint8_t(rng());
    };
    struct Spec {
        std::string name;
        TensorType type;
        std::vector<int64_t> dims;
        size_t row_bytes;
        int64_t rows;
    };
    // The F32 matrix is 8 MiB: two chunks of kStreamChunkBytes. The 3-D tensor's rows are its dims[1] * dims[2].
    const std::vector<Spec> specs = {
        {"big", TensorType::F32, {1024, 2048}, 4096, 2048},
        {"vec", TensorType::F32, {7}, 28, 1},
        {"q8", TensorType::Q8_0, {64, 3, 5}, 68, 15},
        {"wide", TensorType::F16, {int64_t(GgufWriter::kStreamChunkBytes / 2 + 16), 2}, GgufWriter::kStreamChunkBytes + 32, 2},  // rows over a chunk
    };
    GgufWriter streamed, in_memory;
    for (GgufWriter *w : {&streamed, &in_memory}) w->set_string("general.name", "streamed");
    std::vector<std::vector<std::pair<int64_t, int64_t>>> calls(specs.size());
    for (size_t k = 0; k < specs.size(); ++k) {
        const Spec &sp = specs[k];
        std::vector<uint8_t> data(sp.row_bytes * size_t(sp.rows));
        for (int64_t r = 0; r < sp.rows; ++r) row_bytes_of(uint32_t(k), r, sp.row_bytes, data.data() + size_t(r) * sp.row_bytes);
        in_memory.add_tensor(sp.name, uint32_t(sp.type), sp.dims, std::move(data));
        streamed.add_streamed_tensor(sp.name, uint32_t(sp.type), sp.dims,
                                     [&, k](int64_t first, int64_t n, size_t row_bytes, uint8_t *dst) {
                                         CHECK(row_bytes == specs[k].row_bytes);
                                         calls[k].emplace_back(first, n);
                                         for (int64_t r = 0; r < n; ++r) row_bytes_of(uint32_t(k), first + r, row_bytes, dst + size_t(r) * row_bytes);
                                     });
    }
    const std::vector<uint8_t> expected = in_memory.to_bytes();
    CHECK(streamed.to_bytes() == expected);

    // The pass over each tensor covered its rows once, in order, in chunks of at most kStreamChunkBytes (or one row).
    for (size_t k = 0; k < specs.size(); ++k) {
        REQUIRE(!calls[k].empty());
        int64_t next = 0;
        for (const auto &[first, n] : calls[k]) {
            CHECK(first == next);
            CHECK((size_t(n) * specs[k].row_bytes <= GgufWriter::kStreamChunkBytes || n == 1));
            next = first + n;
        }
        CHECK(next == specs[k].rows);
    }
    CHECK(calls[0].size() == 2);

    const fs::path dir = temp_dir();
    const fs::path path = dir / "streamed.gguf";
    streamed.write_file(path.string());
    CHECK(read_all(path) == expected);
    const GgufFile file = GgufFile::parse(FileBytes::open(path.string(), true));
    REQUIRE(file.find_tensor("q8") != nullptr);
    CHECK(file.find_tensor("q8")->n_bytes == 68 * 15);

    // A fill that throws aborts the write, and the partial file is removed.
    GgufWriter failing;
    failing.add_tensor("ok", uint32_t(TensorType::F32), {1}, {0, 0, 0, 0});
    failing.add_streamed_tensor("bad", uint32_t(TensorType::F32), {1024, 4096}, [](int64_t first, int64_t, size_t, uint8_t *) {
        if (first > 0) throw Error(SPECULA_ERR_CANCELLED, "stop");
    });
    const fs::path failed = dir / "failed.gguf";
    CHECK_THROWS_AS(failing.write_file(failed.string()), Error);
    CHECK_FALSE(fs::exists(failed));
    fs::remove_all(dir);
}

TEST_CASE("gguf writer: rejects inconsistent input", "[gguf]") {
    GgufWriter w;
    const auto f32 = uint32_t(TensorType::F32);
    CHECK(test_fixtures::error_status([&] { w.set_u8("", 1); }) == SPECULA_ERR_INVALID_ARGUMENT);
    CHECK(test_fixtures::error_status([&] { w.set_array("k", value_u8(1)); }) == SPECULA_ERR_INVALID_ARGUMENT);
    CHECK(test_fixtures::error_status([&] { w.add_tensor("", f32, {1}, {0, 0, 0, 0}); }) == SPECULA_ERR_INVALID_ARGUMENT);
    CHECK(test_fixtures::error_status([&] { w.add_tensor("t", f32, {}, {}); }) == SPECULA_ERR_INVALID_ARGUMENT);
    CHECK(test_fixtures::error_status([&] { w.add_tensor("t", f32, {1, 1, 1, 1, 1}, {0, 0, 0, 0}); }) == SPECULA_ERR_INVALID_ARGUMENT);
    CHECK(test_fixtures::error_status([&] { w.add_tensor("t", f32, {0}, {}); }) == SPECULA_ERR_INVALID_ARGUMENT);
    CHECK(test_fixtures::error_status([&] { w.add_tensor("t", f32, {2}, {0, 0, 0, 0}); }) == SPECULA_ERR_INVALID_ARGUMENT);
    CHECK(test_fixtures::error_status([&] { w.add_tensor("t", 99, {1}, {0, 0, 0, 0}); }) == SPECULA_ERR_INVALID_ARGUMENT);
    CHECK(test_fixtures::error_status([&] { w.add_tensor("t", uint32_t(TensorType::Q8_0), {33}, std::vector<uint8_t>(34)); }) ==
          SPECULA_ERR_INVALID_ARGUMENT);
    CHECK(w.tensor_count() == 0);
    w.add_tensor("t", f32, {1}, {0, 0, 0, 0});
    CHECK(test_fixtures::error_status([&] { w.add_tensor("t", f32, {1}, {0, 0, 0, 0}); }) == SPECULA_ERR_INVALID_ARGUMENT);
    CHECK(test_fixtures::error_status([&] { (void)w.to_bytes(48); }) == SPECULA_ERR_INVALID_ARGUMENT);
    w.set("bad", value_array(ValueType::INT32, {value_u8(1)}));  // item type differs from the element type
    CHECK(test_fixtures::error_status([&] { (void)w.to_bytes(); }) == SPECULA_ERR_INVALID_ARGUMENT);
    w.set_u8("bad", 1);  // replacing a key keeps one entry
    CHECK(w.metadata_count() == 1);
    CHECK(test_fixtures::error_status([&] { (void)w.to_bytes(); }) == SPECULA_OK);
    CHECK(test_fixtures::error_status([&] { w.write_file("/nonexistent-dir/x.gguf"); }) == SPECULA_ERR_IO);
}

namespace {

std::vector<fs::path> fixture_models() {
    std::vector<fs::path> out;
    const fs::path dir = fs::path(SPECULA_FIXTURES_DIR) / "models";
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) return out;
    for (const auto &entry : fs::recursive_directory_iterator(dir, ec))
        if (entry.is_regular_file() && entry.path().extension() == ".gguf") out.push_back(entry.path());
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace

TEST_CASE("gguf: the real fixture models parse with mmap and with read", "[gguf][fixtures]") {
    const std::vector<fs::path> models = fixture_models();
    if (models.empty()) {
        SPECULA_SKIP("no fixture models under " SPECULA_FIXTURES_DIR "/models");
        return;
    }
    for (const fs::path &path : models) {
        INFO(path.string());
        const GgufFile mapped = GgufFile::parse(FileBytes::open(path.string(), true));
        const GgufFile read = GgufFile::parse(FileBytes::open(path.string(), false));
        CHECK(mapped.mapped());
        CHECK_FALSE(read.mapped());
        CHECK(mapped.file_size() == fs::file_size(path));
        CHECK((mapped.version() == 2 || mapped.version() == 3));
        CHECK(mapped.version() == read.version());
        CHECK(mapped.alignment() == read.alignment());
        CHECK(mapped.data_offset() == read.data_offset());
        REQUIRE(mapped.metadata().size() == read.metadata().size());
        for (size_t k = 0; k < mapped.metadata().size(); ++k) {
            CHECK(mapped.metadata()[k].first == read.metadata()[k].first);
            CHECK(same_value(mapped.metadata()[k].second, read.metadata()[k].second));
        }
        CHECK(mapped.get_string("general.architecture").has_value());
        REQUIRE(mapped.tensors().size() == read.tensors().size());
        for (size_t k = 0; k < mapped.tensors().size(); ++k) {
            const TensorInfo &a = mapped.tensors()[k];
            const TensorInfo &b = read.tensors()[k];
            CHECK(a.name == b.name);
            CHECK(a.offset == b.offset);
            CHECK(a.n_bytes == b.n_bytes);
            CHECK(a.offset % mapped.alignment() == 0);
            CHECK(mapped.data_offset() + a.offset + a.n_bytes <= mapped.file_size());
            CHECK(std::memcmp(a.data, b.data, size_t(a.n_bytes)) == 0);
        }
    }
}

TEST_CASE("gguf: stories260K facts", "[gguf][fixtures]") {
    const fs::path path = fs::path(SPECULA_FIXTURES_DIR) / "models" / "stories260K.gguf";
    if (!fs::exists(path)) {
        SPECULA_SKIP("fixture " << path.string() << " absent");
        return;
    }
    const GgufFile file = GgufFile::parse(FileBytes::open(path.string(), true));
    CHECK(file.version() == 3);
    CHECK(file.tensors().size() == 48);
    CHECK(file.metadata().size() == 19);
    CHECK(file.alignment() == 32);
    CHECK(file.find("general.alignment") == nullptr);
    CHECK(file.data_offset() % 32 == 0);
    CHECK(file.get_string("general.architecture") == "llama");
    CHECK(file.get_int("llama.context_length") == 2048);
    CHECK(file.get_int("llama.embedding_length") == 64);
    CHECK(file.get_int("llama.block_count") == 5);
    CHECK(file.get_int("llama.attention.head_count") == 8);
    CHECK(file.get_int("llama.attention.head_count_kv") == 4);
    CHECK(file.get_int("llama.feed_forward_length") == 172);
    const std::vector<Value> *tokens = file.get_array("tokenizer.ggml.tokens", ValueType::STRING);
    REQUIRE(tokens != nullptr);
    CHECK(tokens->size() == 512);
    const TensorInfo *embd = file.find_tensor("token_embd.weight");
    REQUIRE(embd != nullptr);
    CHECK(embd->type == uint32_t(TensorType::F32));
    CHECK(embd->n_dims == 2);
    CHECK(embd->dims[0] == 64);
    CHECK(embd->dims[1] == 512);
    CHECK(embd->n_bytes == 64 * 512 * 4);
    const TensorInfo *output = file.find_tensor("output.weight");
    REQUIRE(output != nullptr);
    CHECK(std::memcmp(output->data, embd->data, size_t(embd->n_bytes)) == 0);  // see fixtures README
}

TEST_CASE("gguf writer: rewriting a fixture model reproduces it byte for byte", "[gguf][fixtures]") {
    const std::vector<fs::path> models = fixture_models();
    if (models.empty()) {
        SPECULA_SKIP("no fixture models under " SPECULA_FIXTURES_DIR "/models");
        return;
    }
    size_t rewritten = 0;
    for (const fs::path &path : models) {
        INFO(path.string());
        const GgufFile file = GgufFile::parse(FileBytes::open(path.string(), true));
        if (file.version() != 3) continue;  // the writer writes v3 only
        GgufWriter w;
        for (const auto &[key, value] : file.metadata()) w.set(key, value);
        for (const TensorInfo &t : file.tensors())
            w.add_tensor(t.name, t.type, std::vector<int64_t>(t.dims, t.dims + t.n_dims),
                         std::vector<uint8_t>(t.data, t.data + t.n_bytes));
        const std::vector<uint8_t> bytes = w.to_bytes();
        const FileBytes original = FileBytes::open(path.string(), true);
        REQUIRE(bytes.size() == original.size());
        // Compare without letting Catch print megabytes on failure: report the first differing byte instead.
        size_t first_difference = bytes.size();
        if (std::memcmp(bytes.data(), original.data(), bytes.size()) != 0)
            for (first_difference = 0; bytes[first_difference] == original.data()[first_difference];) ++first_difference;
        CHECK(first_difference == bytes.size());
        ++rewritten;
    }
    CHECK(rewritten > 0);
}
