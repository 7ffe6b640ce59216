// Malformed-input catalogue for the GGUF reader: the SDK must never crash on a hostile file. Each case starts
// from a small valid file made by GgufWriter, corrupts it, and checks the status and that the message names the
// culprit. Run this under ASan/UBSan (-DSPECULA_SANITIZE_ADDRESS=ON -DSPECULA_SANITIZE_UNDEFINED=ON).
// The same table is in docs/gguf-validation.md; keep the two in step.
//
// | case                                                        | status      | message mentions                     |
// |-------------------------------------------------------------|-------------|--------------------------------------|
// | file missing / a directory                                  | IO          | the path / "not a regular file"      |
// | truncated at any byte (incl. empty file)                    | FORMAT      | "truncated" / "past the end"         |
// | bad magic (not "GGUF")                                      | FORMAT      | "bad magic"                          |
// | version 1                                                   | UNSUPPORTED | "version 1"                          |
// | version 0, 4, 0xFFFFFFFF                                    | UNSUPPORTED | "unknown version N"                  |
// | tensor count 2^63                                           | FORMAT      | "tensor count"                       |
// | metadata count 2^62                                         | FORMAT      | "metadata count"                     |
// | array length 2^60                                           | FORMAT      | key, "array of N elements"           |
// | more than 2^24 array elements in all metadata               | FORMAT      | key, "more than ... array elements"  |
// | string length 2^62 (value, key or tensor name)              | FORMAT      | (key), "length N is absurd"          |
// | string length past the end of the file                      | FORMAT      | (key), "runs past the end"           |
// | unknown metadata value type (13)                            | FORMAT      | key, "unknown value type 13"         |
// | unknown array element type (13)                             | FORMAT      | key, "unknown array element type 13" |
// | arrays nested more than 4 deep                              | FORMAT      | key, "nested deeper than 4"          |
// | bool value 2                                                | FORMAT      | key, "bool value 2"                  |
// | duplicate metadata key                                      | FORMAT      | "duplicate metadata key 'K'"         |
// | empty metadata key                                          | FORMAT      | "empty metadata key"                 |
// | general.alignment 0, 3, 2^21, -32                           | FORMAT      | "general.alignment N"                |
// | general.alignment of a non-integer type (string)            | FORMAT      | "general.alignment must be an integer"|
// | tensor with 0 or 5 dimensions                               | FORMAT      | name, "N dimensions"                 |
// | tensor dimension 0 or >= 2^63                               | FORMAT      | name, "dimension N"                  |
// | tensor dims whose product overflows (2^40 x 2^40)           | FORMAT      | name, "too many elements"            |
// | tensor byte size overflows 64 bits (F64, 2^61+1 elements)   | FORMAT      | name, "too many elements"            |
// | row not a multiple of the block size (Q8_0, ne0 = 33)       | FORMAT      | name, "row length 33", "Q8_0"        |
// | unknown tensor type id (99)                                 | UNSUPPORTED | name, "unknown type id 99"           |
// | tensor offset not a multiple of the alignment               | FORMAT      | name, "not aligned"                  |
// | tensor data past the end of the file (offset or shape)      | FORMAT      | name, "runs past the end"            |
// | two tensors overlapping                                     | FORMAT      | both names, "overlap"                |
// | duplicate tensor name                                       | FORMAT      | "duplicate tensor name 'N'"          |
// | empty tensor name                                           | FORMAT      | "empty name"                         |
// | any single corrupted byte (fuzz)                            | OK, FORMAT or UNSUPPORTED, never a crash     |
#include <catch2/catch.hpp>

#include "common/gguf_bytes.h"
#include "core/error.h"
#include "gguf/file_bytes.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <random>
#include <unistd.h>

using namespace specula::internal;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

using test_gguf::Bytes;

// The valid file every case corrupts: keys of several kinds (incl. a string and arrays) and 3 tensors whose last
// one ends exactly at the end of the file (no trailing padding, so every truncation really cuts something off).
GgufWriter base_writer() {
    GgufWriter w;
    w.set_string("general.architecture", "llama");
    w.set_u32("test.count", 7);
    w.set_string("test.name", "malformed-base");
    w.set_string_array("test.words", {"alpha", "beta", "gamma"});
    w.set_i32_array("test.ints", {1, -2, 3});
    w.set_array("test.nested", value_array(ValueType::ARRAY, {value_array(ValueType::UINT8, {value_u8(1)})}));
    w.set_bool("test.flag", true);
    w.set_f32("test.scale", 0.5f);
    w.set_u32("test.key_a", 1);
    w.set_u32("test.key_b", 2);
    w.add_tensor("tensor.a", uint32_t(TensorType::F32), {4, 2}, Bytes(32, 0x11));   // data offset 0
    w.add_tensor("tensor.b", uint32_t(TensorType::Q8_0), {32, 2}, Bytes(68, 0x22)); // data offset 32, ends at 100
    w.add_tensor("tensor.c", uint32_t(TensorType::F32), {8}, Bytes(32, 0x33));      // data offset 128, ends at EOF
    return w;
}

Bytes base_file() { return base_writer().to_bytes(); }

GgufFile parse(Bytes bytes) { return GgufFile::parse(FileBytes::from_vector(std::move(bytes))); }

// Parses bytes that must fail; checks the status and that the message contains every given fragment.
void expect_error(Bytes bytes, specula_status status, const std::vector<std::string> &fragments) {
    std::string wanted;
    for (const std::string &f : fragments) wanted += " '" + f + "'";
    INFO("expecting status " << int(status) << " and a message with" << wanted);
    try {
        (void)parse(std::move(bytes));
        FAIL("parse succeeded; expected " << int(status));
    } catch (const Error &e) {
        INFO("message: " << e.what());
        CHECK(e.status() == status);
        for (const std::string &f : fragments) REQUIRE_THAT(std::string(e.what()), Contains(f));
    }
}

// GGUF byte surgery (tests/common/gguf_bytes.h, shared with the API and catalogue tests).
using test_gguf::after_string;
using test_gguf::at_string;
using test_gguf::put_u32;
using test_gguf::put_u64;
using test_gguf::tensor_dim_at;
using test_gguf::tensor_n_dims_at;
using test_gguf::tensor_offset_at;
using test_gguf::tensor_type_at;
void put_u8(Bytes &b, size_t pos, uint8_t v) { b.at(pos) = v; }

}  // namespace

TEST_CASE("gguf malformed: the base file is valid", "[gguf][malformed]") {
    const Bytes bytes = base_file();
    const GgufFile file = parse(bytes);
    REQUIRE(file.metadata().size() == 10);
    REQUIRE(file.tensors().size() == 3);
    const TensorInfo &c = file.tensors()[2];
    CHECK(c.offset == 128);
    CHECK(file.data_offset() + c.offset + c.n_bytes == bytes.size());  // no trailing padding
    Bytes v2 = bytes;
    put_u32(v2, 4, 2);  // v2 has the same layout as v3
    CHECK(parse(v2).version() == 2);
}

TEST_CASE("gguf malformed: missing file, directory", "[gguf][malformed]") {
    const fs::path dir = fs::temp_directory_path() / ("specula-gguf-malformed-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const std::string missing = (dir / "missing.gguf").string();
    for (bool use_mmap : {true, false}) {
        try {
            (void)FileBytes::open(missing, use_mmap);
            FAIL("opened a missing file");
        } catch (const Error &e) {
            CHECK(e.status() == SPECULA_ERR_IO);
            REQUIRE_THAT(std::string(e.what()), Contains("missing.gguf"));
        }
        try {
            (void)FileBytes::open(dir.string(), use_mmap);
            FAIL("opened a directory");
        } catch (const Error &e) {
            CHECK(e.status() == SPECULA_ERR_IO);
            REQUIRE_THAT(std::string(e.what()), Contains("not a regular file"));
        }
        // An empty file opens (there is nothing to map) and then fails to parse.
        const fs::path empty = dir / "empty.gguf";
        { std::FILE *f = std::fopen(empty.string().c_str(), "wb"); REQUIRE(f); std::fclose(f); }
        try {
            (void)GgufFile::parse(FileBytes::open(empty.string(), use_mmap));
            FAIL("parsed an empty file");
        } catch (const Error &e) {
            CHECK(e.status() == SPECULA_ERR_FORMAT);
            REQUIRE_THAT(std::string(e.what()), Contains("truncated"));
        }
    }
    fs::remove_all(dir);
}

TEST_CASE("gguf malformed: truncated at every byte offset", "[gguf][malformed]") {
    const Bytes bytes = base_file();
    size_t failures = 0;
    for (size_t n = 0; n < bytes.size(); ++n) {
        // An exact-size vector, so ASan catches any read past the truncated end.
        Bytes cut(bytes.begin(), bytes.begin() + ptrdiff_t(n));
        try {
            (void)parse(std::move(cut));
            ++failures;
            FAIL_CHECK("truncated at " << n << " of " << bytes.size() << " bytes: parse succeeded");
        } catch (const Error &e) {
            const std::string message = e.what();
            const bool says_why = message.find("truncated") != std::string::npos ||
                                  message.find("past the end") != std::string::npos ||
                                  message.find("cannot fit") != std::string::npos;
            if (e.status() != SPECULA_ERR_FORMAT || !says_why) {
                ++failures;
                FAIL_CHECK("truncated at " << n << ": status " << int(e.status()) << ", message: " << message);
            }
        }
    }
    CHECK(failures == 0);
}

TEST_CASE("gguf malformed: magic and version", "[gguf][malformed]") {
    const Bytes base = base_file();
    Bytes b = base;
    b[0] = 'X';
    expect_error(b, SPECULA_ERR_FORMAT, {"bad magic"});
    b = base;
    std::memcpy(b.data(), "GGJT", 4);  // an old pre-GGUF llama.cpp format
    expect_error(b, SPECULA_ERR_FORMAT, {"bad magic"});

    b = base;
    put_u32(b, 4, 1);
    expect_error(b, SPECULA_ERR_UNSUPPORTED, {"version 1"});
    for (uint32_t version : {0u, 4u, 0xFFFFFFFFu}) {
        b = base;
        put_u32(b, 4, version);
        expect_error(b, SPECULA_ERR_UNSUPPORTED, {"unknown version " + std::to_string(version)});
    }
}

TEST_CASE("gguf malformed: absurd counts and lengths", "[gguf][malformed]") {
    // Each would ask for exabytes if trusted; they must be refused before any allocation (ASan would abort on
    // an allocation that large, and the test would crash rather than fail).
    const Bytes base = base_file();
    Bytes b = base;
    put_u64(b, 8, uint64_t(1) << 63);
    expect_error(b, SPECULA_ERR_FORMAT, {"tensor count 9223372036854775808"});
    b = base;
    put_u64(b, 16, uint64_t(1) << 62);
    expect_error(b, SPECULA_ERR_FORMAT, {"metadata count 4611686018427387904"});

    b = base;  // array: type (4), element type (4), length (8)
    put_u64(b, after_string(b, "test.ints") + 8, uint64_t(1) << 60);
    expect_error(b, SPECULA_ERR_FORMAT, {"array of 1152921504606846976 elements", "'test.ints'"});
    b = base;  // an array of arrays
    put_u64(b, after_string(b, "test.nested") + 8, uint64_t(1) << 60);
    expect_error(b, SPECULA_ERR_FORMAT, {"array of 1152921504606846976 elements", "'test.nested'"});

    b = base;  // string value: type (4), length (8)
    put_u64(b, after_string(b, "test.name") + 4, uint64_t(1) << 62);
    expect_error(b, SPECULA_ERR_FORMAT, {"string value length 4611686018427387904 is absurd", "'test.name'"});
    b = base;
    put_u64(b, at_string(b, "test.count"), uint64_t(1) << 62);
    expect_error(b, SPECULA_ERR_FORMAT, {"metadata key length 4611686018427387904 is absurd"});
    b = base;
    put_u64(b, at_string(b, "tensor.b"), uint64_t(1) << 62);
    expect_error(b, SPECULA_ERR_FORMAT, {"tensor name length 4611686018427387904 is absurd"});
    b = base;  // plausible but longer than the file
    put_u64(b, after_string(b, "test.name") + 4, 1 << 20);
    expect_error(b, SPECULA_ERR_FORMAT, {"string value of length 1048576 runs past the end", "'test.name'"});
}

TEST_CASE("gguf malformed: metadata types and keys", "[gguf][malformed]") {
    const Bytes base = base_file();
    Bytes b = base;
    put_u32(b, after_string(b, "test.count"), 13);
    expect_error(b, SPECULA_ERR_FORMAT, {"test.count", "unknown value type 13"});
    b = base;
    put_u32(b, after_string(b, "test.count"), 0xFFFFFFFF);
    expect_error(b, SPECULA_ERR_FORMAT, {"test.count", "unknown value type 4294967295"});

    b = base;
    put_u32(b, after_string(b, "test.ints") + 4, 13);
    expect_error(b, SPECULA_ERR_FORMAT, {"unknown array element type 13", "'test.ints'"});

    b = base;
    put_u8(b, after_string(b, "test.flag") + 4, 2);
    expect_error(b, SPECULA_ERR_FORMAT, {"bool value 2", "'test.flag'"});

    b = base;
    put_u8(b, after_string(b, "test.key_b") - 1, 'a');  // "test.key_b" -> "test.key_a"
    expect_error(b, SPECULA_ERR_FORMAT, {"duplicate metadata key 'test.key_a'"});

    b = base;
    put_u64(b, at_string(b, "test.count"), 0);
    expect_error(b, SPECULA_ERR_FORMAT, {"empty metadata key"});
}

TEST_CASE("gguf malformed: arrays nested too deep", "[gguf][malformed]") {
    auto nested = [](int depth) {
        Value v = value_u8(1);
        for (int k = 0; k < depth; ++k) {
            const ValueType t = v.type;
            std::vector<Value> items;
            items.push_back(std::move(v));
            v = value_array(t, std::move(items));
        }
        return v;
    };
    GgufWriter w = base_writer();
    w.set_array("test.deep", nested(4));
    CHECK(parse(w.to_bytes()).find("test.deep") != nullptr);  // 4 levels are fine
    w.set_array("test.deep", nested(5));
    expect_error(w.to_bytes(), SPECULA_ERR_FORMAT, {"nested deeper than 4", "'test.deep'"});
    w.set_array("test.deep", nested(1000));  // no unbounded recursion either
    expect_error(w.to_bytes(), SPECULA_ERR_FORMAT, {"nested deeper than 4"});
}

TEST_CASE("gguf malformed: general.alignment", "[gguf][malformed]") {
    for (uint32_t a : {0u, 3u, 48u, 1u << 21}) {
        GgufWriter w = base_writer();
        w.set_u32("general.alignment", a);
        expect_error(w.to_bytes(), SPECULA_ERR_FORMAT, {"general.alignment " + std::to_string(a)});
    }
    {
        GgufWriter w = base_writer();
        w.set_i32("general.alignment", -32);
        expect_error(w.to_bytes(), SPECULA_ERR_FORMAT, {"general.alignment"});
    }
    for (Value v : {value_string("32"), value_f32(32.0f), value_bool(true), value_array(ValueType::UINT32, {value_u32(32)})}) {
        GgufWriter w = base_writer();
        w.set("general.alignment", v);
        expect_error(w.to_bytes(), SPECULA_ERR_FORMAT, {"general.alignment must be an integer"});
    }
    {
        GgufWriter w = base_writer();
        w.set_u8("general.alignment", 16);  // any integer type holding a power of two is accepted
        CHECK(parse(w.to_bytes()).alignment() == 16);
    }
}

TEST_CASE("gguf malformed: tensor shapes and types", "[gguf][malformed]") {
    const Bytes base = base_file();
    Bytes b = base;
    put_u32(b, tensor_n_dims_at(b, "tensor.a"), 0);
    expect_error(b, SPECULA_ERR_FORMAT, {"tensor.a", "0 dimensions"});
    b = base;
    put_u32(b, tensor_n_dims_at(b, "tensor.a"), 5);
    expect_error(b, SPECULA_ERR_FORMAT, {"tensor.a", "5 dimensions"});

    b = base;
    put_u64(b, tensor_dim_at(b, "tensor.a", 1), 0);
    expect_error(b, SPECULA_ERR_FORMAT, {"tensor.a", "dimension 0"});
    b = base;
    put_u64(b, tensor_dim_at(b, "tensor.a", 0), uint64_t(1) << 63);
    expect_error(b, SPECULA_ERR_FORMAT, {"tensor.a", "dimension 9223372036854775808"});

    b = base;
    put_u64(b, tensor_dim_at(b, "tensor.a", 0), uint64_t(1) << 40);
    put_u64(b, tensor_dim_at(b, "tensor.a", 1), uint64_t(1) << 40);
    expect_error(b, SPECULA_ERR_FORMAT, {"tensor.a", "too many elements"});

    b = base;  // F64 with 2^61+1 elements: 8 bytes each would wrap a 64-bit byte count round to 8
    put_u64(b, tensor_dim_at(b, "tensor.a", 0), (uint64_t(1) << 61) + 1);
    put_u64(b, tensor_dim_at(b, "tensor.a", 1), 1);
    put_u32(b, tensor_type_at(b, "tensor.a", 2), uint32_t(TensorType::F64));
    expect_error(b, SPECULA_ERR_FORMAT, {"tensor.a", "too many elements"});

    b = base;
    put_u64(b, tensor_dim_at(b, "tensor.b", 0), 33);
    expect_error(b, SPECULA_ERR_FORMAT, {"tensor.b", "row length 33", "Q8_0 block size 32"});

    b = base;
    put_u32(b, tensor_type_at(b, "tensor.a", 2), 99);
    expect_error(b, SPECULA_ERR_UNSUPPORTED, {"tensor.a", "unknown type id 99"});
    b = base;
    put_u32(b, tensor_type_at(b, "tensor.a", 2), 4);  // a removed ggml type (Q4_2)
    expect_error(b, SPECULA_ERR_UNSUPPORTED, {"tensor.a", "unknown type id 4"});
}

TEST_CASE("gguf malformed: tensor offsets, overlap, names", "[gguf][malformed]") {
    const Bytes base = base_file();
    Bytes b = base;
    put_u64(b, tensor_offset_at(b, "tensor.c", 1), 129);
    expect_error(b, SPECULA_ERR_FORMAT, {"tensor.c", "offset 129 is not aligned to 32"});

    b = base;  // aligned, but the data would end 32 bytes past the end of the file
    put_u64(b, tensor_offset_at(b, "tensor.c", 1), 160);
    expect_error(b, SPECULA_ERR_FORMAT, {"tensor.c", "runs past the end of the file"});
    b = base;  // far past the end; offset + size must not wrap
    put_u64(b, tensor_offset_at(b, "tensor.c", 1), uint64_t(1) << 63);
    expect_error(b, SPECULA_ERR_FORMAT, {"tensor.c", "runs past the end of the file"});
    b = base;  // a shape bigger than its data
    put_u64(b, tensor_dim_at(b, "tensor.c", 0), 16);
    expect_error(b, SPECULA_ERR_FORMAT, {"tensor.c", "runs past the end of the file"});

    b = base;  // tensor.b occupies [32, 100); tensor.c moved to 96
    put_u64(b, tensor_offset_at(b, "tensor.c", 1), 96);
    expect_error(b, SPECULA_ERR_FORMAT, {"'tensor.b' and 'tensor.c' overlap"});
    b = base;  // the same offset as another tensor
    put_u64(b, tensor_offset_at(b, "tensor.c", 1), 0);
    expect_error(b, SPECULA_ERR_FORMAT, {"tensor.a", "tensor.c", "overlap"});

    b = base;
    put_u8(b, after_string(b, "tensor.c") - 1, 'a');  // "tensor.c" -> "tensor.a"
    expect_error(b, SPECULA_ERR_FORMAT, {"duplicate tensor name 'tensor.a'"});
    b = base;
    put_u64(b, at_string(b, "tensor.a"), 0);
    expect_error(b, SPECULA_ERR_FORMAT, {"empty name"});
}

TEST_CASE("gguf malformed: random single-byte corruption never crashes", "[gguf][malformed]") {
    const Bytes base = base_file();
    std::mt19937 rng(12345);
    size_t parsed = 0, rejected = 0;
    for (int k = 0; k < 3000; ++k) {
        Bytes b = base;
        const size_t pos = rng() % b.size();
        b[pos] = k % 2 ? uint8_t(rng()) : uint8_t(b[pos] ^ (1u << (rng() % 8)));
        try {
            const GgufFile file = parse(std::move(b));
            ++parsed;
            for (const TensorInfo &t : file.tensors())
                REQUIRE(file.data_offset() + t.offset + t.n_bytes <= file.file_size());
        } catch (const Error &e) {
            ++rejected;
            const bool expected = e.status() == SPECULA_ERR_FORMAT || e.status() == SPECULA_ERR_UNSUPPORTED;
            if (!expected) FAIL("byte " << pos << ": status " << int(e.status()) << ": " << e.what());
            REQUIRE(std::string(e.what()).rfind("GGUF: ", 0) == 0);
        }
    }
    CHECK(parsed > 0);  // many bytes are payload (tensor data, string contents)
    CHECK(rejected > 0);
}

TEST_CASE("gguf malformed: more metadata array elements than any model needs", "[gguf][malformed]") {
    // One u8 array of 2^24 + 1 elements: every byte is present, but parsing it would cost ~88 bytes per element,
    // so the reader refuses it before allocating (a 1 GiB hostile file could otherwise ask for ~88 GiB).
    const uint64_t count = (uint64_t(1) << 24) + 1;
    const std::string key = "test.huge";
    Bytes b(4 + 4 + 8 + 8);
    put_u32(b, 0, GgufFile::kMagic);
    put_u32(b, 4, 3);
    put_u64(b, 8, 0);   // tensors
    put_u64(b, 16, 1);  // metadata entries
    Bytes entry(8 + key.size() + 4 + 4 + 8);
    put_u64(entry, 0, key.size());
    std::memcpy(entry.data() + 8, key.data(), key.size());
    put_u32(entry, 8 + key.size(), uint32_t(ValueType::ARRAY));
    put_u32(entry, 12 + key.size(), uint32_t(ValueType::UINT8));
    put_u64(entry, 16 + key.size(), count);
    b.insert(b.end(), entry.begin(), entry.end());
    b.resize(b.size() + count, 0x01);
    expect_error(std::move(b), SPECULA_ERR_FORMAT, {"more than", "array elements", "test.huge"});
}
