// Writes GGUF v3 files: exactly the layout GgufFile::parse reads. Used by tests (valid files, and valid files
// to corrupt), for LongSpec draft files and for random-weight synthetic models of real shapes.
//
// Layout: header, metadata in insertion order, tensor infos in insertion order, zero padding to the alignment,
// then each tensor's data at an aligned offset, each followed by zero padding up to the alignment (as ggml does).
//
// The writer checks what it needs to produce a self-consistent file (tensor shapes against their data, array
// items against the array's element type) and throws Error(SPECULA_ERR_INVALID_ARGUMENT) otherwise. It does
// not police metadata *values*: general.alignment 0 or 3, or arrays nested deeper than any reader accepts, are
// written as given, so tests can build hostile files.
#pragma once

#include "gguf/gguf_file.h"

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace specula::internal {

// Value builders, for set() / set_array().
Value value_u8(uint8_t v);
Value value_i8(int8_t v);
Value value_u16(uint16_t v);
Value value_i16(int16_t v);
Value value_u32(uint32_t v);
Value value_i32(int32_t v);
Value value_u64(uint64_t v);
Value value_i64(int64_t v);
Value value_f32(float v);
Value value_f64(double v);
Value value_bool(bool v);
Value value_string(std::string v);
// An array; every item must have type element_type (checked when the file is written).
Value value_array(ValueType element_type, std::vector<Value> items);

class GgufWriter {
public:
    // Setting a key that already exists replaces its value and keeps its position. Empty keys are rejected.
    void set(const std::string &key, Value value);
    void set_u8(const std::string &key, uint8_t v) { set(key, value_u8(v)); }
    void set_i8(const std::string &key, int8_t v) { set(key, value_i8(v)); }
    void set_u16(const std::string &key, uint16_t v) { set(key, value_u16(v)); }
    void set_i16(const std::string &key, int16_t v) { set(key, value_i16(v)); }
    void set_u32(const std::string &key, uint32_t v) { set(key, value_u32(v)); }
    void set_i32(const std::string &key, int32_t v) { set(key, value_i32(v)); }
    void set_u64(const std::string &key, uint64_t v) { set(key, value_u64(v)); }
    void set_i64(const std::string &key, int64_t v) { set(key, value_i64(v)); }
    void set_f32(const std::string &key, float v) { set(key, value_f32(v)); }
    void set_f64(const std::string &key, double v) { set(key, value_f64(v)); }
    void set_bool(const std::string &key, bool v) { set(key, value_bool(v)); }
    void set_string(const std::string &key, std::string v) { set(key, value_string(std::move(v))); }
    // array_value must be an ARRAY Value (any element type, nested arrays too).
    void set_array(const std::string &key, Value array_value);
    void set_string_array(const std::string &key, const std::vector<std::string> &items);
    void set_f32_array(const std::string &key, const std::vector<float> &items);
    void set_i32_array(const std::string &key, const std::vector<int32_t> &items);

    // Adds a tensor. dims are in ggml order (dims[0] is contiguous), 1 to 4 of them, all > 0; data is already
    // encoded in type_id's layout and must be exactly the tensor's byte size. Names must be unique and non-empty.
    void add_tensor(const std::string &name, uint32_t type_id, std::vector<int64_t> dims, std::vector<uint8_t> data);

    // Produces rows [first_row, first_row + n_rows) of a streamed tensor's data into dst (n_rows rows of
    // row_bytes each, a row being dims[0] elements). Called while the file is written, in order and in chunks of
    // whole rows; it must give the same bytes for the same rows every time (to_bytes and write_file call it
    // again for each output). An exception thrown here aborts the write and propagates.
    using RowFill = std::function<void(int64_t first_row, int64_t n_rows, size_t row_bytes, uint8_t *dst)>;
    // Adds a tensor whose data is generated while the file is written, one chunk (about kStreamChunkBytes, at
    // least one row) at a time: files far larger than memory (a random 8B-parameter model) can be written.
    // Same checks as add_tensor; the data size follows from the shape and type.
    void add_streamed_tensor(const std::string &name, uint32_t type_id, std::vector<int64_t> dims, RowFill fill);
    static constexpr size_t kStreamChunkBytes = size_t(4) << 20;

    // The whole file. The data alignment is general.alignment when that key holds a power-of-two integer up to 1 MiB,
    // otherwise `alignment` (likewise); when general.alignment is absent and alignment != 32, the writer
    // adds general.alignment (u32) to the metadata so that readers agree.
    std::vector<uint8_t> to_bytes(uint32_t alignment = GgufFile::kDefaultAlignment) const;
    // Same bytes, streamed to a file (no second copy of the tensor data; streamed tensors are generated a chunk at
    // a time). Throws Error(SPECULA_ERR_IO), or whatever a RowFill throws; on failure the partial file is removed.
    void write_file(const std::string &path, uint32_t alignment = GgufFile::kDefaultAlignment) const;

    size_t metadata_count() const { return metadata_.size(); }
    size_t tensor_count() const { return tensors_.size(); }

private:
    struct Tensor {
        std::string name;
        uint32_t type = 0;
        std::vector<int64_t> dims;
        uint64_t n_bytes = 0;
        std::vector<uint8_t> data;  // in-memory tensors
        RowFill fill;               // streamed tensors (data stays empty)
    };

    // Checks name, type and shape; returns the data size the shape needs.
    uint64_t check_tensor(const std::string &name, uint32_t type_id, const std::vector<int64_t> &dims) const;
    // Hands the tensor's data to sink(bytes, n) in order: in one piece, or chunk by chunk for a streamed tensor.
    void emit_data(const Tensor &t, const std::function<void(const uint8_t *, size_t)> &sink) const;
    uint32_t layout_alignment(uint32_t requested) const;
    // Header + metadata + tensor infos + padding; fills the data-section offset of each tensor.
    std::vector<uint8_t> header_bytes(uint32_t alignment, std::vector<uint64_t> &offsets) const;

    std::vector<std::pair<std::string, Value>> metadata_;
    std::vector<Tensor> tensors_;
};

}  // namespace specula::internal
