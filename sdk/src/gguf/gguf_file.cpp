#include "gguf_file.h"

#include "core/error.h"

#include <algorithm>
#include <cinttypes>
#include <cstring>
#include <limits>

namespace specula::internal {
namespace {

// Limits that no real model comes near; they stop hostile counts from turning into huge allocations.
constexpr uint64_t kMaxStringLength = uint64_t(1) << 30;
constexpr uint32_t kMaxArrayDepth = 4;
// Array elements over all metadata. Each parsed value costs ~88 bytes of memory, so this bounds what a hostile
// file can make the parser allocate (~1.5 GiB) far above real needs (a 256K vocabulary plus its merges is ~0.6M).
constexpr uint64_t kMaxMetadataValues = uint64_t(1) << 24;
constexpr uint32_t kMaxDims = 4;

[[noreturn]] void fail(const std::string &message) { throw Error(SPECULA_ERR_FORMAT, "GGUF: " + message); }

// Bounds-checked little-endian reader over the file bytes.
class Cursor {
public:
    Cursor(const uint8_t *data, size_t size) : data_(data), size_(size) {}

    size_t position() const { return pos_; }
    size_t remaining() const { return size_ - pos_; }

    template <typename T> T read(const char *what) {
        if (remaining() < sizeof(T)) fail(std::string("file truncated while reading ") + what + " at byte " + std::to_string(pos_));
        T value;
        std::memcpy(&value, data_ + pos_, sizeof(T));
        pos_ += sizeof(T);
        return value;
    }

    std::string read_string(const char *what) {
        const uint64_t length = read<uint64_t>(what);
        if (length > kMaxStringLength) fail(std::string(what) + " length " + std::to_string(length) + " is absurd");
        if (length > remaining()) fail(std::string(what) + " of length " + std::to_string(length) + " runs past the end of the file");
        std::string s(reinterpret_cast<const char *>(data_ + pos_), static_cast<size_t>(length));
        pos_ += static_cast<size_t>(length);
        return s;
    }

    // Accounts for `count` more array elements against kMaxMetadataValues.
    void spend_values(uint64_t count) {
        if (count > values_left_) fail("metadata holds more than " + std::to_string(kMaxMetadataValues) + " array elements");
        values_left_ -= count;
    }

private:
    const uint8_t *data_;
    size_t size_;
    size_t pos_ = 0;
    uint64_t values_left_ = kMaxMetadataValues;
};

// Smallest number of bytes one value of this type occupies in a file; used to reject counts that cannot fit.
uint64_t min_encoded_size(ValueType type) {
    switch (type) {
    case ValueType::UINT8: case ValueType::INT8: case ValueType::BOOL: return 1;
    case ValueType::UINT16: case ValueType::INT16: return 2;
    case ValueType::UINT32: case ValueType::INT32: case ValueType::FLOAT32: return 4;
    case ValueType::UINT64: case ValueType::INT64: case ValueType::FLOAT64: return 8;
    case ValueType::STRING: return 8;
    case ValueType::ARRAY: return 12;
    }
    return 1;
}

bool known_value_type(uint32_t t) { return t <= uint32_t(ValueType::FLOAT64); }

Value read_value(Cursor &cur, ValueType type, uint32_t depth) {
    Value v;
    v.type = type;
    switch (type) {
    case ValueType::UINT8: v.u = cur.read<uint8_t>("u8 value"); break;
    case ValueType::INT8: v.i = cur.read<int8_t>("i8 value"); break;
    case ValueType::UINT16: v.u = cur.read<uint16_t>("u16 value"); break;
    case ValueType::INT16: v.i = cur.read<int16_t>("i16 value"); break;
    case ValueType::UINT32: v.u = cur.read<uint32_t>("u32 value"); break;
    case ValueType::INT32: v.i = cur.read<int32_t>("i32 value"); break;
    case ValueType::UINT64: v.u = cur.read<uint64_t>("u64 value"); break;
    case ValueType::INT64: v.i = cur.read<int64_t>("i64 value"); break;
    case ValueType::FLOAT32: v.f = cur.read<float>("f32 value"); break;
    case ValueType::FLOAT64: v.f = cur.read<double>("f64 value"); break;
    case ValueType::BOOL: {
        const uint8_t b = cur.read<uint8_t>("bool value");
        if (b > 1) fail("bool value " + std::to_string(b) + " is neither 0 nor 1");
        v.u = b;
        break;
    }
    case ValueType::STRING: v.s = cur.read_string("string value"); break;
    case ValueType::ARRAY: {
        if (depth >= kMaxArrayDepth) fail("arrays nested deeper than " + std::to_string(kMaxArrayDepth));
        const uint32_t element = cur.read<uint32_t>("array element type");
        if (!known_value_type(element)) fail("unknown array element type " + std::to_string(element));
        v.element_type = ValueType(element);
        const uint64_t count = cur.read<uint64_t>("array length");
        if (count > cur.remaining() / min_encoded_size(v.element_type))
            fail("array of " + std::to_string(count) + " elements cannot fit in the " + std::to_string(cur.remaining()) + " bytes left");
        cur.spend_values(count);
        v.items.reserve(static_cast<size_t>(count));
        for (uint64_t k = 0; k < count; ++k) v.items.push_back(read_value(cur, v.element_type, depth + 1));
        break;
    }
    }
    return v;
}

}  // namespace

const char *value_type_name(ValueType type) {
    static const char *const names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};
    const auto t = uint32_t(type);
    return t < sizeof names / sizeof names[0] ? names[t] : "unknown";
}

bool Value::is_integer() const {
    switch (type) {
    case ValueType::UINT8: case ValueType::INT8: case ValueType::UINT16: case ValueType::INT16:
    case ValueType::UINT32: case ValueType::INT32: case ValueType::UINT64: case ValueType::INT64: return true;
    default: return false;
    }
}

std::string Value::to_string(size_t max_items) const {
    switch (type) {
    case ValueType::UINT8: case ValueType::UINT16: case ValueType::UINT32: case ValueType::UINT64: return std::to_string(u);
    case ValueType::INT8: case ValueType::INT16: case ValueType::INT32: case ValueType::INT64: return std::to_string(i);
    case ValueType::FLOAT32: case ValueType::FLOAT64: {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.9g", f);
        return buf;
    }
    case ValueType::BOOL: return u ? "true" : "false";
    case ValueType::STRING: return s;
    case ValueType::ARRAY: {
        std::string out = std::string("[") + value_type_name(element_type) + " x " + std::to_string(items.size()) + "]";
        if (items.empty() || max_items == 0) return out;
        out += " [";
        for (size_t k = 0; k < items.size() && k < max_items; ++k) {
            if (k) out += ", ";
            out += items[k].type == ValueType::STRING ? "'" + items[k].s + "'" : items[k].to_string(max_items);
        }
        out += items.size() > max_items ? ", ...]" : "]";
        return out;
    }
    }
    return "?";
}

GgufFile GgufFile::parse(FileBytes bytes) {
    GgufFile file;
    file.bytes_ = std::move(bytes);
    Cursor cur(file.bytes_.data(), file.bytes_.size());

    const uint32_t magic = cur.read<uint32_t>("magic");
    if (magic != kMagic) fail("bad magic (not a GGUF file)");
    file.version_ = cur.read<uint32_t>("version");
    if (file.version_ == 1) throw Error(SPECULA_ERR_UNSUPPORTED, "GGUF: version 1 files are not supported (convert them with a current llama.cpp)");
    if (file.version_ != 2 && file.version_ != 3)
        throw Error(SPECULA_ERR_UNSUPPORTED, "GGUF: unknown version " + std::to_string(file.version_));

    const uint64_t n_tensors = cur.read<uint64_t>("tensor count");
    const uint64_t n_metadata = cur.read<uint64_t>("metadata count");
    // Each metadata entry takes at least 8 (key length) + 4 (type) + 1 bytes; each tensor info at least 8+4+4+8.
    if (n_metadata > cur.remaining() / 13)
        fail("metadata count " + std::to_string(n_metadata) + " cannot fit in the file (" + std::to_string(cur.remaining()) +
             " bytes left): truncated or corrupt");
    if (n_tensors > cur.remaining() / 24)
        fail("tensor count " + std::to_string(n_tensors) + " cannot fit in the file (" + std::to_string(cur.remaining()) +
             " bytes left): truncated or corrupt");

    for (uint64_t k = 0; k < n_metadata; ++k) {
        std::string key = cur.read_string("metadata key");
        if (key.empty()) fail("empty metadata key");
        const uint32_t type = cur.read<uint32_t>("metadata value type");
        if (!known_value_type(type)) fail("metadata '" + key + "' has unknown value type " + std::to_string(type));
        Value value;
        try {
            value = read_value(cur, ValueType(type), 0);
        } catch (const Error &e) {  // name the key: "unknown array element type 13" alone does not say where
            throw Error(e.status(), std::string(e.what()) + " (metadata '" + key + "')");
        }
        if (file.metadata_index_.count(key)) fail("duplicate metadata key '" + key + "'");
        file.metadata_index_[key] = file.metadata_.size();
        file.metadata_.emplace_back(std::move(key), std::move(value));
    }

    if (const Value *a = file.find("general.alignment")) {
        if (!a->is_integer()) fail("general.alignment must be an integer");
        const uint64_t align = a->type == ValueType::INT32 || a->type == ValueType::INT64 || a->type == ValueType::INT16 || a->type == ValueType::INT8 ? uint64_t(a->i) : a->u;
        if (align == 0 || (align & (align - 1)) != 0 || align > (1u << 20)) fail("general.alignment " + std::to_string(align) + " is not a power of two up to 1 MiB");
        file.alignment_ = static_cast<uint32_t>(align);
    }

    file.tensors_.reserve(static_cast<size_t>(n_tensors));
    for (uint64_t k = 0; k < n_tensors; ++k) {
        TensorInfo t;
        t.name = cur.read_string("tensor name");
        if (t.name.empty()) fail("tensor " + std::to_string(k) + " has an empty name");
        t.n_dims = cur.read<uint32_t>("tensor dimension count");
        if (t.n_dims == 0 || t.n_dims > kMaxDims) fail("tensor '" + t.name + "' has " + std::to_string(t.n_dims) + " dimensions (1 to 4 allowed)");
        for (uint32_t d = 0; d < t.n_dims; ++d) {
            const uint64_t dim = cur.read<uint64_t>("tensor dimension");
            if (dim == 0 || dim > uint64_t(std::numeric_limits<int64_t>::max())) fail("tensor '" + t.name + "' has dimension " + std::to_string(dim));
            t.dims[d] = int64_t(dim);
        }
        t.type = cur.read<uint32_t>("tensor type");
        t.offset = cur.read<uint64_t>("tensor offset");

        const TensorTypeLayout *layout = tensor_type_layout(t.type);
        if (layout == nullptr) throw Error(SPECULA_ERR_UNSUPPORTED, "GGUF: tensor '" + t.name + "' has unknown type id " + std::to_string(t.type));
        // Element count without overflow: the product must stay below 2^62.
        uint64_t elements = 1;
        for (uint32_t d = 0; d < t.n_dims; ++d) {
            if (uint64_t(t.dims[d]) > (uint64_t(1) << 62) / elements) fail("tensor '" + t.name + "' has too many elements");
            elements *= uint64_t(t.dims[d]);
        }
        if (t.dims[0] % layout->block_size != 0)
            fail("tensor '" + t.name + "' row length " + std::to_string(t.dims[0]) + " is not a multiple of the " + layout->name + " block size " + std::to_string(layout->block_size));
        // The byte count must not wrap either (8-byte types reach 2^64 below 2^62 elements).
        const uint64_t blocks = elements / layout->block_size;
        if (blocks > std::numeric_limits<uint64_t>::max() / layout->type_size) fail("tensor '" + t.name + "' has too many elements");
        t.n_bytes = blocks * layout->type_size;
        if (t.offset % file.alignment_ != 0) fail("tensor '" + t.name + "' offset " + std::to_string(t.offset) + " is not aligned to " + std::to_string(file.alignment_));
        if (file.tensor_index_.count(t.name)) fail("duplicate tensor name '" + t.name + "'");
        file.tensor_index_[t.name] = file.tensors_.size();
        file.tensors_.push_back(std::move(t));
    }

    const uint64_t header_end = cur.position();
    file.data_offset_ = (header_end + file.alignment_ - 1) / file.alignment_ * file.alignment_;
    const uint64_t size = file.bytes_.size();
    if (!file.tensors_.empty() && file.data_offset_ > size) fail("data section starts past the end of the file");
    const uint64_t data_size = size > file.data_offset_ ? size - file.data_offset_ : 0;

    // Every tensor must lie inside the data section, and no two may overlap.
    std::vector<const TensorInfo *> by_offset;
    for (TensorInfo &t : file.tensors_) {
        if (t.offset > data_size || t.n_bytes > data_size - t.offset)
            fail("tensor '" + t.name + "' (" + std::to_string(t.n_bytes) + " bytes at data offset " + std::to_string(t.offset) + ") runs past the end of the file");
        t.data = file.bytes_.data() + file.data_offset_ + t.offset;
        by_offset.push_back(&t);
    }
    std::sort(by_offset.begin(), by_offset.end(), [](const TensorInfo *a, const TensorInfo *b) { return a->offset < b->offset; });
    for (size_t k = 1; k < by_offset.size(); ++k)
        if (by_offset[k - 1]->offset + by_offset[k - 1]->n_bytes > by_offset[k]->offset)
            fail("tensors '" + by_offset[k - 1]->name + "' and '" + by_offset[k]->name + "' overlap");
    return file;
}

const Value *GgufFile::find(const std::string &key) const {
    auto it = metadata_index_.find(key);
    return it == metadata_index_.end() ? nullptr : &metadata_[it->second].second;
}

std::optional<std::string> GgufFile::get_string(const std::string &key) const {
    const Value *v = find(key);
    if (!v) return std::nullopt;
    if (v->type != ValueType::STRING) fail("metadata '" + key + "' must be a string, not " + value_type_name(v->type));
    return v->s;
}

std::optional<int64_t> GgufFile::get_int(const std::string &key) const {
    const Value *v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_integer()) fail("metadata '" + key + "' must be an integer, not " + value_type_name(v->type));
    switch (v->type) {
    case ValueType::INT8: case ValueType::INT16: case ValueType::INT32: case ValueType::INT64: return v->i;
    default:
        if (v->u > uint64_t(std::numeric_limits<int64_t>::max())) fail("metadata '" + key + "' value is out of range");
        return int64_t(v->u);
    }
}

std::optional<double> GgufFile::get_float(const std::string &key) const {
    const Value *v = find(key);
    if (!v) return std::nullopt;
    if (v->is_float()) return v->f;
    if (v->is_integer()) return double(*get_int(key));
    fail("metadata '" + key + "' must be a number, not " + value_type_name(v->type));
}

std::optional<bool> GgufFile::get_bool(const std::string &key) const {
    const Value *v = find(key);
    if (!v) return std::nullopt;
    if (v->type == ValueType::BOOL) return v->u != 0;
    if (v->is_integer()) return *get_int(key) != 0;
    fail("metadata '" + key + "' must be a bool, not " + value_type_name(v->type));
}

const std::vector<Value> *GgufFile::get_array(const std::string &key, ValueType element_type) const {
    const Value *v = find(key);
    if (!v) return nullptr;
    if (v->type != ValueType::ARRAY || v->element_type != element_type)
        fail("metadata '" + key + "' must be an array of " + value_type_name(element_type));
    return &v->items;
}

const TensorInfo *GgufFile::find_tensor(const std::string &name) const {
    auto it = tensor_index_.find(name);
    return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace specula::internal
