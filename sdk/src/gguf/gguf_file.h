// A parsed GGUF file (versions 2 and 3): metadata and tensor directory, with tensor data left in place in the
// mapped bytes. Parsing validates every count, length, offset and size against the file before using it, so
// a truncated or hostile file yields Error(SPECULA_ERR_FORMAT / UNSUPPORTED) and never a crash.
#pragma once

#include "gguf/file_bytes.h"
#include "gguf/tensor_type.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace specula::internal {

// GGUF metadata value types (gguf_type); stored in files, never renumber.
enum class ValueType : uint32_t {
    UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6, BOOL = 7,
    STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};

const char *value_type_name(ValueType type);

struct Value {
    ValueType type = ValueType::UINT8;
    ValueType element_type = ValueType::UINT8;  // for ARRAY
    uint64_t u = 0;      // unsigned integers and BOOL
    int64_t i = 0;       // signed integers
    double f = 0;        // FLOAT32 / FLOAT64
    std::string s;       // STRING
    std::vector<Value> items;  // ARRAY

    bool is_integer() const;
    bool is_float() const { return type == ValueType::FLOAT32 || type == ValueType::FLOAT64; }
    // Human-readable rendering; arrays show at most max_items items.
    std::string to_string(size_t max_items = 8) const;
};

struct TensorInfo {
    std::string name;
    uint32_t n_dims = 0;
    int64_t dims[4] = {1, 1, 1, 1};  // ggml order: dims[0] is contiguous
    uint32_t type = 0;               // ggml type id (TensorType)
    uint64_t offset = 0;             // relative to the start of the data section
    uint64_t n_bytes = 0;
    const uint8_t *data = nullptr;   // points into the file bytes

    int64_t n_elements() const { return dims[0] * dims[1] * dims[2] * dims[3]; }
};

class GgufFile {
public:
    static constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
    static constexpr uint32_t kDefaultAlignment = 32;

    // Parses the bytes (which it keeps). Throws Error on any problem.
    static GgufFile parse(FileBytes bytes);

    uint32_t version() const { return version_; }
    uint32_t alignment() const { return alignment_; }
    uint64_t data_offset() const { return data_offset_; }
    size_t file_size() const { return bytes_.size(); }
    bool mapped() const { return bytes_.mapped(); }
    const FileBytes &bytes() const { return bytes_; }

    // Metadata, in file order.
    const std::vector<std::pair<std::string, Value>> &metadata() const { return metadata_; }
    const Value *find(const std::string &key) const;

    // Typed getters: nullopt when the key is absent; Error(FORMAT) when it exists with an unusable type.
    std::optional<std::string> get_string(const std::string &key) const;
    std::optional<int64_t> get_int(const std::string &key) const;     // any integer type (bounded to int64)
    std::optional<double> get_float(const std::string &key) const;     // any float or integer type
    std::optional<bool> get_bool(const std::string &key) const;
    // Arrays: nullptr when absent; Error(FORMAT) if not an array of the wanted kind.
    const std::vector<Value> *get_array(const std::string &key, ValueType element_type) const;

    const std::vector<TensorInfo> &tensors() const { return tensors_; }
    const TensorInfo *find_tensor(const std::string &name) const;

private:
    FileBytes bytes_;
    uint32_t version_ = 0;
    uint32_t alignment_ = kDefaultAlignment;
    uint64_t data_offset_ = 0;
    std::vector<std::pair<std::string, Value>> metadata_;
    std::map<std::string, size_t> metadata_index_;
    std::vector<TensorInfo> tensors_;
    std::map<std::string, size_t> tensor_index_;
};

}  // namespace specula::internal
