#include "gguf_writer.h"

#include "core/error.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

namespace specula::internal {
namespace {

constexpr uint32_t kVersion = 3;

[[noreturn]] void invalid(const std::string &message) {
    throw Error(SPECULA_ERR_INVALID_ARGUMENT, "GGUF writer: " + message);
}

bool is_power_of_two(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

uint64_t pad_to(uint64_t n, uint64_t alignment) { return (n + alignment - 1) / alignment * alignment; }

class Out {
public:
    explicit Out(std::vector<uint8_t> &bytes) : bytes_(bytes) {}

    template <typename T> void put(T v) {
        const size_t at = bytes_.size();
        bytes_.resize(at + sizeof(T));
        std::memcpy(bytes_.data() + at, &v, sizeof(T));
    }
    void put_string(const std::string &s) {
        put<uint64_t>(s.size());
        bytes_.insert(bytes_.end(), s.begin(), s.end());
    }

    // The value's payload (no type tag); a top-level value's tag is written by the caller.
    void put_value(const Value &v, const std::string &key) {
        switch (v.type) {
        case ValueType::UINT8: put<uint8_t>(uint8_t(v.u)); return;
        case ValueType::INT8: put<int8_t>(int8_t(v.i)); return;
        case ValueType::UINT16: put<uint16_t>(uint16_t(v.u)); return;
        case ValueType::INT16: put<int16_t>(int16_t(v.i)); return;
        case ValueType::UINT32: put<uint32_t>(uint32_t(v.u)); return;
        case ValueType::INT32: put<int32_t>(int32_t(v.i)); return;
        case ValueType::UINT64: put<uint64_t>(v.u); return;
        case ValueType::INT64: put<int64_t>(v.i); return;
        case ValueType::FLOAT32: put<float>(float(v.f)); return;
        case ValueType::FLOAT64: put<double>(v.f); return;
        case ValueType::BOOL: put<uint8_t>(v.u != 0 ? 1 : 0); return;
        case ValueType::STRING: put_string(v.s); return;
        case ValueType::ARRAY:
            if (uint32_t(v.element_type) > uint32_t(ValueType::FLOAT64))
                invalid("metadata '" + key + "': array element type " + std::to_string(uint32_t(v.element_type)) + " is not a GGUF type");
            put<uint32_t>(uint32_t(v.element_type));
            put<uint64_t>(v.items.size());
            for (const Value &item : v.items) {
                if (item.type != v.element_type)
                    invalid("metadata '" + key + "': array of " + value_type_name(v.element_type) + " holds an item of type " +
                            value_type_name(item.type));
                put_value(item, key);
            }
            return;
        }
        invalid("metadata '" + key + "': value type " + std::to_string(uint32_t(v.type)) + " is not a GGUF type");
    }

    void pad(uint64_t alignment) { bytes_.resize(pad_to(bytes_.size(), alignment), 0); }

private:
    std::vector<uint8_t> &bytes_;
};

}  // namespace

Value value_u8(uint8_t v) { Value r; r.type = ValueType::UINT8; r.u = v; return r; }
Value value_i8(int8_t v) { Value r; r.type = ValueType::INT8; r.i = v; return r; }
Value value_u16(uint16_t v) { Value r; r.type = ValueType::UINT16; r.u = v; return r; }
Value value_i16(int16_t v) { Value r; r.type = ValueType::INT16; r.i = v; return r; }
Value value_u32(uint32_t v) { Value r; r.type = ValueType::UINT32; r.u = v; return r; }
Value value_i32(int32_t v) { Value r; r.type = ValueType::INT32; r.i = v; return r; }
Value value_u64(uint64_t v) { Value r; r.type = ValueType::UINT64; r.u = v; return r; }
Value value_i64(int64_t v) { Value r; r.type = ValueType::INT64; r.i = v; return r; }
Value value_f32(float v) { Value r; r.type = ValueType::FLOAT32; r.f = v; return r; }
Value value_f64(double v) { Value r; r.type = ValueType::FLOAT64; r.f = v; return r; }
Value value_bool(bool v) { Value r; r.type = ValueType::BOOL; r.u = v ? 1 : 0; return r; }
Value value_string(std::string v) { Value r; r.type = ValueType::STRING; r.s = std::move(v); return r; }

Value value_array(ValueType element_type, std::vector<Value> items) {
    Value r;
    r.type = ValueType::ARRAY;
    r.element_type = element_type;
    r.items = std::move(items);
    return r;
}

void GgufWriter::set(const std::string &key, Value value) {
    if (key.empty()) invalid("empty metadata key");
    for (auto &kv : metadata_)
        if (kv.first == key) {
            kv.second = std::move(value);
            return;
        }
    metadata_.emplace_back(key, std::move(value));
}

void GgufWriter::set_array(const std::string &key, Value array_value) {
    if (array_value.type != ValueType::ARRAY) invalid("set_array('" + key + "') needs an array value");
    set(key, std::move(array_value));
}

void GgufWriter::set_string_array(const std::string &key, const std::vector<std::string> &items) {
    std::vector<Value> values;
    values.reserve(items.size());
    for (const std::string &s : items) values.push_back(value_string(s));
    set(key, value_array(ValueType::STRING, std::move(values)));
}

void GgufWriter::set_f32_array(const std::string &key, const std::vector<float> &items) {
    std::vector<Value> values;
    values.reserve(items.size());
    for (float f : items) values.push_back(value_f32(f));
    set(key, value_array(ValueType::FLOAT32, std::move(values)));
}

void GgufWriter::set_i32_array(const std::string &key, const std::vector<int32_t> &items) {
    std::vector<Value> values;
    values.reserve(items.size());
    for (int32_t i : items) values.push_back(value_i32(i));
    set(key, value_array(ValueType::INT32, std::move(values)));
}

uint64_t GgufWriter::check_tensor(const std::string &name, uint32_t type_id, const std::vector<int64_t> &dims) const {
    if (name.empty()) invalid("empty tensor name");
    for (const Tensor &t : tensors_)
        if (t.name == name) invalid("duplicate tensor name '" + name + "'");
    const TensorTypeLayout *layout = tensor_type_layout(type_id);
    if (layout == nullptr) invalid("tensor '" + name + "': unknown type id " + std::to_string(type_id));
    if (dims.empty() || dims.size() > 4) invalid("tensor '" + name + "': " + std::to_string(dims.size()) + " dimensions (1 to 4 allowed)");
    uint64_t elements = 1;
    for (int64_t d : dims) {
        if (d <= 0) invalid("tensor '" + name + "': dimension " + std::to_string(d));
        if (uint64_t(d) > (uint64_t(1) << 62) / elements) invalid("tensor '" + name + "': too many elements");
        elements *= uint64_t(d);
    }
    if (dims[0] % layout->block_size != 0)
        invalid("tensor '" + name + "': row length " + std::to_string(dims[0]) + " is not a multiple of the " + layout->name +
                " block size " + std::to_string(layout->block_size));
    return elements / layout->block_size * layout->type_size;
}

void GgufWriter::add_tensor(const std::string &name, uint32_t type_id, std::vector<int64_t> dims, std::vector<uint8_t> data) {
    const uint64_t expected = check_tensor(name, type_id, dims);
    if (data.size() != expected)
        invalid("tensor '" + name + "': " + std::to_string(data.size()) + " bytes of data, its shape needs " + std::to_string(expected));
    tensors_.push_back(Tensor{name, type_id, std::move(dims), expected, std::move(data), {}});
}

void GgufWriter::add_streamed_tensor(const std::string &name, uint32_t type_id, std::vector<int64_t> dims, RowFill fill) {
    const uint64_t n_bytes = check_tensor(name, type_id, dims);
    if (!fill) invalid("tensor '" + name + "': no fill function");
    tensors_.push_back(Tensor{name, type_id, std::move(dims), n_bytes, {}, std::move(fill)});
}

void GgufWriter::emit_data(const Tensor &t, const std::function<void(const uint8_t *, size_t)> &sink) const {
    if (!t.fill) {
        sink(t.data.data(), t.data.size());
        return;
    }
    int64_t rows = 1;  // every dimension past the first (all > 0, so at least one row of at least one block)
    for (size_t d = 1; d < t.dims.size(); ++d) rows *= t.dims[d];
    const size_t row_bytes = size_t(t.n_bytes / uint64_t(rows));
    const int64_t chunk_rows = std::max<int64_t>(1, int64_t(kStreamChunkBytes / row_bytes));
    std::vector<uint8_t> chunk(size_t(std::min(chunk_rows, rows)) * row_bytes);
    for (int64_t r = 0; r < rows; r += chunk_rows) {
        const int64_t n = std::min(chunk_rows, rows - r);
        t.fill(r, n, row_bytes, chunk.data());
        sink(chunk.data(), size_t(n) * row_bytes);
    }
}

uint32_t GgufWriter::layout_alignment(uint32_t requested) const {
    if (!is_power_of_two(requested) || requested > (1u << 20))
        invalid("alignment " + std::to_string(requested) + " is not a power of two up to 1 MiB");
    for (const auto &[key, v] : metadata_) {
        if (key != "general.alignment") continue;
        uint64_t a = 0;
        switch (v.type) {
        case ValueType::UINT8: case ValueType::UINT16: case ValueType::UINT32: case ValueType::UINT64: a = v.u; break;
        case ValueType::INT8: case ValueType::INT16: case ValueType::INT32: case ValueType::INT64: a = v.i > 0 ? uint64_t(v.i) : 0; break;
        default: break;
        }
        // An unusable value (a hostile test file) is written as given; the data is then laid out at `requested`.
        return is_power_of_two(a) && a <= (uint64_t(1) << 20) ? uint32_t(a) : requested;
    }
    return requested;
}

std::vector<uint8_t> GgufWriter::header_bytes(uint32_t alignment, std::vector<uint64_t> &offsets) const {
    bool has_alignment_key = false;
    for (const auto &kv : metadata_) has_alignment_key |= kv.first == "general.alignment";
    const bool add_alignment_key = !has_alignment_key && alignment != GgufFile::kDefaultAlignment;

    std::vector<uint8_t> bytes;
    Out out(bytes);
    out.put<uint32_t>(GgufFile::kMagic);
    out.put<uint32_t>(kVersion);
    out.put<uint64_t>(tensors_.size());
    out.put<uint64_t>(metadata_.size() + (add_alignment_key ? 1 : 0));
    for (const auto &[key, value] : metadata_) {
        out.put_string(key);
        out.put<uint32_t>(uint32_t(value.type));
        out.put_value(value, key);
    }
    if (add_alignment_key) {
        out.put_string("general.alignment");
        out.put<uint32_t>(uint32_t(ValueType::UINT32));
        out.put<uint32_t>(alignment);
    }
    offsets.clear();
    uint64_t offset = 0;
    for (const Tensor &t : tensors_) {
        out.put_string(t.name);
        out.put<uint32_t>(uint32_t(t.dims.size()));
        for (int64_t d : t.dims) out.put<uint64_t>(uint64_t(d));
        out.put<uint32_t>(t.type);
        out.put<uint64_t>(offset);
        offsets.push_back(offset);
        offset = pad_to(offset + t.n_bytes, alignment);
    }
    out.pad(alignment);
    return bytes;
}

std::vector<uint8_t> GgufWriter::to_bytes(uint32_t alignment) const {
    const uint32_t align = layout_alignment(alignment);
    std::vector<uint64_t> offsets;
    std::vector<uint8_t> bytes = header_bytes(align, offsets);
    const size_t data_start = bytes.size();
    for (size_t k = 0; k < tensors_.size(); ++k) {
        bytes.resize(data_start + offsets[k], 0);
        emit_data(tensors_[k], [&](const uint8_t *data, size_t n) { bytes.insert(bytes.end(), data, data + n); });
    }
    bytes.resize(data_start + pad_to(bytes.size() - data_start, align), 0);
    return bytes;
}

void GgufWriter::write_file(const std::string &path, uint32_t alignment) const {
    const uint32_t align = layout_alignment(alignment);
    std::vector<uint64_t> offsets;
    const std::vector<uint8_t> header = header_bytes(align, offsets);

    struct Closer {
        void operator()(std::FILE *f) const { std::fclose(f); }
    };
    std::unique_ptr<std::FILE, Closer> file(std::fopen(path.c_str(), "wb"));
    if (!file) throw Error(SPECULA_ERR_IO, "cannot create '" + path + "': " + std::strerror(errno));
    auto write = [&](const void *data, size_t n) {
        if (n != 0 && std::fwrite(data, 1, n, file.get()) != n)
            throw Error(SPECULA_ERR_IO, "cannot write '" + path + "': " + std::strerror(errno));
    };
    try {
        write(header.data(), header.size());
        const std::vector<uint8_t> zeros(align, 0);
        uint64_t written = 0;  // bytes of the data section so far
        for (size_t k = 0; k < tensors_.size(); ++k) {
            write(zeros.data(), size_t(offsets[k] - written));
            emit_data(tensors_[k], write);
            written = offsets[k] + tensors_[k].n_bytes;
        }
        write(zeros.data(), size_t(pad_to(written, align) - written));
        std::FILE *f = file.release();
        if (std::fclose(f) != 0) throw Error(SPECULA_ERR_IO, "cannot write '" + path + "': " + std::strerror(errno));
    } catch (...) {
        // A half-written file (disk full, a cancelled or failing generator) would look like a truncated model.
        file.reset();
        std::remove(path.c_str());
        throw;
    }
}

}  // namespace specula::internal
