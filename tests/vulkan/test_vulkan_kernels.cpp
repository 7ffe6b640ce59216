// Each Vulkan shader against the core's reference arithmetic: the matrix product and the embedding rows of every
// weight type the shaders dequantize (random blocks in the GGUF layouts, dequantized by formats/ for the
// reference), RMSNorm, RoPE in both layouts, SwiGLU and the residual add, and attention over causal rows with the
// log-sum-exp merge against a host softmax. A row's result is also checked to be the same, bit for bit, whatever
// the batch it is computed in.
#include "backends/vulkan/vulkan_ops.h"

#include "formats/half.h"
#include "formats/type_kernels.h"
#include "gguf/tensor_type.h"
#include "model/weights.h"

#include <catch2/catch.hpp>

#include <cctype>
#include <climits>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace specula::internal;
using namespace specula::internal::vulkan;

namespace {

Buffer device_buffer(Stream &s, size_t bytes) { return Buffer(s.shared_device(), bytes, Buffer::Kind::Device, "test"); }

Buffer upload_floats(Stream &s, const std::vector<float> &v) {
    Buffer b = device_buffer(s, v.size() * 4);
    s.upload(b, 0, v.data(), v.size() * 4);
    return b;
}

std::vector<float> download_floats(Stream &s, const Buffer &b, size_t n) {
    std::vector<float> out(n);
    s.download(b, 0, out.data(), n * 4);
    s.finish();
    return out;
}

std::vector<float> random_floats(std::mt19937 &rng, size_t n, float scale = 1.0f) {
    std::normal_distribution<float> dist(0.0f, scale);
    std::vector<float> v(n);
    for (float &x : v) x = dist(rng);
    return v;
}

void put_half(std::vector<uint8_t> &bytes, size_t at, float v) {
    const uint16_t h = float_to_half(v);
    std::memcpy(bytes.data() + at, &h, 2);
}

// A random matrix of `rows` x `cols` in type `type`'s GGUF layout (scales kept small and positive, quants random).
std::vector<uint8_t> random_matrix(std::mt19937 &rng, TensorType type, int64_t rows, int64_t cols, size_t &row_bytes) {
    const TensorTypeLayout *layout = tensor_type_layout(uint32_t(type));
    row_bytes = size_t(cols / layout->block_size) * layout->type_size;
    std::vector<uint8_t> bytes(row_bytes * size_t(rows));
    std::uniform_int_distribution<int> byte(0, 255);
    std::uniform_real_distribution<float> scale(0.001f, 0.02f);
    std::normal_distribution<float> value(0.0f, 0.5f);
    for (uint8_t &b : bytes) b = uint8_t(byte(rng));
    const size_t blocks = bytes.size() / layout->type_size;
    for (size_t blk = 0; blk < blocks; ++blk) {
        const size_t at = blk * layout->type_size;
        switch (type) {
        case TensorType::F32:
            for (uint32_t j = 0; j < layout->block_size; ++j) {
                const float f = value(rng);
                std::memcpy(bytes.data() + at + 4 * j, &f, 4);
            }
            break;
        case TensorType::F16:
            for (uint32_t j = 0; j < layout->block_size; ++j) put_half(bytes, at + 2 * j, value(rng));
            break;
        case TensorType::Q8_0:
        case TensorType::Q4_0: put_half(bytes, at, scale(rng)); break;
        case TensorType::Q4_K:
        case TensorType::Q5_K:
            put_half(bytes, at, scale(rng));
            put_half(bytes, at + 2, scale(rng));
            break;
        case TensorType::Q6_K: put_half(bytes, at + 208, scale(rng) * 0.1f); break;
        default: FAIL("no generator for this type");
        }
    }
    return bytes;
}

AttentionShape attention_shape(uint32_t n_head, uint32_t n_head_kv, uint32_t head_dim, uint32_t chunk, float scale) {
    AttentionShape a;
    a.n_head = n_head;
    a.n_head_kv = n_head_kv;
    a.head_dim = head_dim;
    a.chunk = chunk;
    a.scale = scale;
    return a;
}
// A random F16 key/value cache on the device (`values` halves each; keys drawn with spread k_scale), with its
// halves kept for host references. The first nan_values of each hold NaN: keys a row must never read.
struct RandomCache {
    std::vector<uint16_t> k, v;
    Buffer kc, vc;
};
RandomCache random_cache(Stream &s, std::mt19937 &rng, size_t values, float k_scale = 1.0f, size_t nan_values = 0) {
    RandomCache c;
    const std::vector<float> kr = random_floats(rng, values, k_scale), vr = random_floats(rng, values);
    for (size_t i = 0; i < values; ++i) {
        c.k.push_back(i < nan_values ? uint16_t(0x7E00) : float_to_half(kr[i]));
        c.v.push_back(i < nan_values ? uint16_t(0x7E00) : float_to_half(vr[i]));
    }
    c.kc = device_buffer(s, values * 2);
    c.vc = device_buffer(s, values * 2);
    s.upload(c.kc, 0, c.k.data(), values * 2);
    s.upload(c.vc, 0, c.v.data(), values * 2);
    return c;
}
// Query head h of row i (q: rows x n_head x head_dim) attending to the cache slots `keys`, in double on the host:
// scaled (and, with a.softcap > 0, capped) scores, their softmax, the weighted sum of V. head_dim values.
std::vector<double> host_attention(const AttentionShape &a, const RandomCache &c, const std::vector<float> &q, uint32_t i, uint32_t h,
                                   const std::vector<uint32_t> &keys) {
    const uint32_t dkv = a.n_head_kv * a.head_dim, g = h / (a.n_head / a.n_head_kv);
    std::vector<double> sc;
    double m = -1e300;
    for (uint32_t p : keys) {
        double dot = 0;
        for (uint32_t d = 0; d < a.head_dim; ++d) dot += double(q[(i * a.n_head + h) * a.head_dim + d]) * half_to_float(c.k[p * dkv + g * a.head_dim + d]);
        const double x = dot * a.scale;
        sc.push_back(a.softcap > 0.0f ? std::tanh(x / a.softcap) * a.softcap : x);
        m = std::max(m, sc.back());
    }
    double l = 0;
    for (double &v : sc) l += (v = std::exp(v - m));
    std::vector<double> out(a.head_dim, 0.0);
    for (uint32_t d = 0; d < a.head_dim; ++d) {
        for (size_t j = 0; j < keys.size(); ++j) out[d] += sc[j] * half_to_float(c.v[keys[j] * dkv + g * a.head_dim + d]);
        out[d] /= l;
    }
    return out;
}

}  // namespace

TEST_CASE("vulkan matmul and embed match the reference dequantization of every shader type and are batch invariant", "[vulkan][kernels]") {
    std::shared_ptr<Device> dev = get_device(0);
    Stream s(dev);
    std::mt19937 rng(7);
    const int64_t rows = 70, cols = 512;
    const uint32_t n = 13;
    for (TensorType type : {TensorType::F32, TensorType::F16, TensorType::Q8_0, TensorType::Q4_0, TensorType::Q4_K, TensorType::Q5_K,
                            TensorType::Q6_K}) {
        INFO(tensor_type_name(uint32_t(type)));
        size_t row_bytes = 0;
        const std::vector<uint8_t> bytes = random_matrix(rng, type, rows, cols, row_bytes);
        WeightView w;
        w.data = bytes.data();
        w.type = uint32_t(type);
        w.cols = cols;
        w.rows = rows;
        w.row_bytes = row_bytes;
        Uploads up(s);
        const Matrix m = up.matrix(w);
        std::string native = tensor_type_name(uint32_t(type));
        for (char &c : native) c = char(std::tolower(static_cast<unsigned char>(c)));
        CHECK(m.suffix == native);  // read in its GGUF layout by its own shader variant, not converted
        const TypeKernels *k = find_type_kernels(uint32_t(type));
        REQUIRE(k != nullptr);
        std::vector<float> deq(size_t(rows * cols));
        for (int64_t r = 0; r < rows; ++r) k->to_float(bytes.data() + size_t(r) * row_bytes, deq.data() + size_t(r * cols), cols);

        const std::vector<float> x = random_floats(rng, size_t(n) * size_t(cols));
        Buffer xb = upload_floats(s, x), yb = device_buffer(s, size_t(n) * size_t(rows) * 4);
        matmul(s, m, View{&xb, 0}, n, View{&yb, 0});
        const std::vector<float> y = download_floats(s, yb, size_t(n) * size_t(rows));
        double worst = 0;
        for (uint32_t t = 0; t < n; ++t)
            for (int64_t r = 0; r < rows; ++r) {
                double ref = 0, mag = 0;
                for (int64_t c = 0; c < cols; ++c) {
                    ref += double(deq[size_t(r * cols + c)]) * double(x[size_t(t) * cols + size_t(c)]);
                    mag += std::fabs(double(deq[size_t(r * cols + c)]) * double(x[size_t(t) * cols + size_t(c)]));
                }
                worst = std::max(worst, std::fabs(double(y[size_t(t) * rows + size_t(r)]) - ref) / std::max(mag, 1e-30));
            }
        INFO("worst relative error " << worst);
        CHECK(worst < 1e-5);
        // Batch invariance: token 5 alone gives the bits it got inside the batch of 13.
        Buffer one = device_buffer(s, size_t(rows) * 4);
        matmul(s, m, View{&xb, uint32_t(5 * cols)}, 1, View{&one, 0});
        const std::vector<float> alone = download_floats(s, one, size_t(rows));
        CHECK(std::memcmp(alone.data(), y.data() + 5 * rows, size_t(rows) * 4) == 0);

        // Embedding rows: tokens 3, 0, 69 dequantized exactly as the reference does.
        const std::vector<int32_t> tokens = {3, 0, 69};
        Buffer tb = device_buffer(s, 12), eb = device_buffer(s, 3 * size_t(cols) * 4);
        s.upload(tb, 0, tokens.data(), 12);
        embed(s, m, View{&tb, 0}, 3, View{&eb, 0});
        const std::vector<float> e = download_floats(s, eb, 3 * size_t(cols));
        for (size_t i = 0; i < tokens.size(); ++i) {
            INFO("token " << tokens[i]);
            double diff = 0;
            for (int64_t c = 0; c < cols; ++c)
                diff = std::max(diff, std::fabs(double(e[i * size_t(cols) + size_t(c)]) - double(deq[size_t(tokens[i] * cols + c)])));
            CHECK(diff <= 1e-6 * 8);
        }
    }
}

TEST_CASE("vulkan rmsnorm, rope, swiglu and add match host loops", "[vulkan][kernels]") {
    std::shared_ptr<Device> dev = get_device(0);
    Stream s(dev);
    std::mt19937 rng(11);
    const uint32_t n = 5, d = 96;
    const std::vector<float> x = random_floats(rng, n * d), w = random_floats(rng, d), y = random_floats(rng, n * d);
    Buffer xb = upload_floats(s, x), wb = upload_floats(s, w), yb = upload_floats(s, y), ob = device_buffer(s, n * d * 4);

    rmsnorm(s, View{&xb, 0}, View{&wb, 0}, n, d, 1e-5f, View{&ob, 0});
    std::vector<float> got = download_floats(s, ob, n * d);
    for (uint32_t t = 0; t < n; ++t) {
        double ss = 0;
        for (uint32_t i = 0; i < d; ++i) ss += double(x[t * d + i]) * x[t * d + i];
        const double scale = 1.0 / std::sqrt(ss / d + 1e-5);
        for (uint32_t i = 0; i < d; ++i) CHECK(std::fabs(got[t * d + i] - x[t * d + i] * scale * w[i]) <= 1e-5 * (1 + std::fabs(x[t * d + i] * scale * w[i])));
    }

    // RoPE: 2 heads of 48, rope_dim 32, both pair layouts, positions 0, 3, 9, 1, 7 from a table of 10 positions.
    const uint32_t heads = 2, hd = 48, rd = 32, half = rd / 2;
    std::vector<float> cos_t(10 * half), sin_t(10 * half);
    for (uint32_t p = 0; p < 10; ++p)
        for (uint32_t i = 0; i < half; ++i) {
            const double theta = p * std::pow(10000.0, -2.0 * i / rd);
            cos_t[p * half + i] = float(std::cos(theta));
            sin_t[p * half + i] = float(std::sin(theta));
        }
    const std::vector<int32_t> pos = {0, 3, 9, 1, 7};
    Buffer cb = upload_floats(s, cos_t), sb = upload_floats(s, sin_t), pb = device_buffer(s, pos.size() * 4);
    s.upload(pb, 0, pos.data(), pos.size() * 4);
    for (const bool neox : {false, true}) {
        INFO("neox " << neox);
        Buffer rb = upload_floats(s, x);  // n rows of heads * hd = 96
        rope(s, View{&rb, 0}, n, heads, hd, rd, neox, View{&pb, 0}, cb, sb);
        got = download_floats(s, rb, n * d);
        for (uint32_t t = 0; t < n; ++t)
            for (uint32_t h = 0; h < heads; ++h) {
                std::vector<float> ref(x.begin() + (t * heads + h) * hd, x.begin() + (t * heads + h + 1) * hd);
                for (uint32_t i = 0; i < half; ++i) {
                    const uint32_t a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
                    const float c = cos_t[uint32_t(pos[t]) * half + i], sn = sin_t[uint32_t(pos[t]) * half + i];
                    const float x0 = ref[a], x1 = ref[b];
                    ref[a] = x0 * c - x1 * sn;
                    ref[b] = x0 * sn + x1 * c;
                }
                for (uint32_t i = 0; i < hd; ++i) CHECK(got[(t * heads + h) * hd + i] == Approx(ref[i]).margin(1e-6));
            }
    }

    Buffer gb = upload_floats(s, x);
    swiglu(s, View{&gb, 0}, View{&yb, 0}, n * d);
    got = download_floats(s, gb, n * d);
    for (uint32_t i = 0; i < n * d; ++i) CHECK(got[i] == Approx(x[i] / (1.0f + std::exp(-x[i])) * y[i]).margin(1e-6));
    Buffer ab = upload_floats(s, x);
    add(s, View{&ab, 0}, View{&yb, 0}, n * d);
    add_bias(s, View{&ab, 0}, View{&wb, 0}, n, d);
    got = download_floats(s, ab, n * d);
    for (uint32_t i = 0; i < n * d; ++i) CHECK(got[i] == x[i] + y[i] + w[i % d]);
}

TEST_CASE("vulkan attention: split-K chunks over causal rows and a tree's tails, merged, agree with a host softmax", "[vulkan][kernels]") {
    std::shared_ptr<Device> dev = get_device(0);
    Stream s(dev);
    std::mt19937 rng(5);
    // 4 query heads over 2 KV heads of 64; 150 cached slots, chunks of 64 (three chunks, the last partial).
    AttentionShape a = attention_shape(4, 2, 64, 64, 0.125f);
    const uint32_t dkv = a.n_head_kv * a.head_dim, slots = 150, n_prefix = 140, rows = 3;
    const RandomCache cache = random_cache(s, rng, size_t(slots) * dkv);
    const std::vector<float> q = random_floats(rng, rows * a.n_head * a.head_dim);
    Buffer qb = upload_floats(s, q);
    // Two layouts of the rows' keys: causal (row i sees slots [0, n_prefix + i]) and tree tails (row i sees the
    // prefix, then slots listed for it: here 145, 141 + i).
    for (const bool causal : {true, false}) {
        INFO((causal ? "causal rows" : "tree tails"));
        std::vector<int32_t> ints(2 * rows);
        std::vector<std::vector<uint32_t>> keys(rows);
        for (uint32_t i = 0; i < rows; ++i) {
            for (uint32_t p = 0; p < n_prefix; ++p) keys[i].push_back(p);
            ints[i] = int32_t(ints.size() - 2 * rows);
            if (causal) {
                for (uint32_t p = n_prefix; p <= n_prefix + i; ++p) keys[i].push_back(p);
            } else {
                for (uint32_t p : {145u, 141u + i}) {
                    keys[i].push_back(p);
                    ints.push_back(int32_t(p));
                }
            }
            ints[rows + i] = int32_t(keys[i].size() - n_prefix);
        }
        Buffer ib = device_buffer(s, ints.size() * 4);
        s.upload(ib, 0, ints.data(), ints.size() * 4);
        AttentionRows r;
        r.n = rows;
        r.n_prefix = n_prefix;
        r.max_keys = 0;
        for (const auto &k : keys) r.max_keys = std::max<uint32_t>(r.max_keys, uint32_t(k.size()));
        r.has_tail = true;
        r.causal = causal;
        r.ints = View{&ib, 0};
        r.tail_start = 0;
        r.tail_len = rows;
        r.tail_slots = 2 * rows;
        Buffer part = device_buffer(s, attention_partials_floats(a, rows, r.max_keys) * 4), out = device_buffer(s, q.size() * 4);
        attention_chunks(s, View{&qb, 0}, cache.kc, cache.vc, dkv, r, a, part);
        attention_merge(s, part, nullptr, r, a, View{&out, 0});
        const std::vector<float> got = download_floats(s, out, q.size());
        for (uint32_t i = 0; i < rows; ++i)
            for (uint32_t h = 0; h < a.n_head; ++h) {
                const std::vector<double> want = host_attention(a, cache, q, i, h, keys[i]);
                for (uint32_t d = 0; d < a.head_dim; ++d) CHECK(got[(i * a.n_head + h) * a.head_dim + d] == Approx(want[d]).margin(1e-5));
            }
    }
}

TEST_CASE("vulkan attention: sliding windows and soft-capped scores agree with a host softmax, and a windowed tree row has "
          "its decoding's bits",
          "[vulkan][kernels]") {
    std::shared_ptr<Device> dev = get_device(0);
    Stream s(dev);
    std::mt19937 rng(9);
    AttentionShape a = attention_shape(4, 2, 64, 64, 0.125f);
    const uint32_t dkv = a.n_head_kv * a.head_dim, slots = 260, n_prefix = 200;
    // Slots below every window hold NaN: a window must never read them.
    const RandomCache cache = random_cache(s, rng, size_t(slots) * dkv, 2.0f, size_t(100) * dkv);
    const Buffer &kc = cache.kc, &vc = cache.vc;

    // Rows at positions pos[i] whose keys are the slots keys[i] (logical positions from[i] on), laid out as
    // graph/batch_rows.cpp lays a window's lists: causal (the run), or tree tails (a chain in slots n_prefix.. whose
    // nodes before the window are dropped).
    struct Rows {
        uint32_t n_prefix = 0;
        bool causal = false;
        std::vector<uint32_t> from, tails_len;
        std::vector<std::vector<uint32_t>> tails, keys;
    };
    const auto run = [&](const Rows &rr, const std::vector<float> &q) {
        const uint32_t n = uint32_t(rr.from.size());
        std::vector<int32_t> ints(3 * n);
        uint32_t max_end = 0, min_from = UINT32_MAX;
        for (uint32_t i = 0; i < n; ++i) {
            ints[i] = int32_t(ints.size() - 3 * n);
            ints[n + i] = int32_t(rr.tails_len[i]);
            ints[2 * n + i] = int32_t(rr.from[i]);
            for (uint32_t slot : rr.tails[i]) ints.push_back(int32_t(slot));
            max_end = std::max(max_end, (rr.causal ? rr.n_prefix : std::max(rr.from[i], rr.n_prefix)) + rr.tails_len[i]);
            min_from = std::min(min_from, rr.from[i]);
        }
        ints.push_back(0);
        Buffer ib = device_buffer(s, ints.size() * 4), qb = upload_floats(s, q);
        s.upload(ib, 0, ints.data(), ints.size() * 4);
        AttentionRows r;
        r.n = n;
        r.n_prefix = rr.n_prefix;
        r.max_keys = max_end;
        r.has_tail = true;
        r.causal = rr.causal;
        r.has_from = true;
        r.ints = View{&ib, 0};
        r.tail_start = 0;
        r.tail_len = n;
        r.from = 2 * n;
        r.tail_slots = 3 * n;
        r.min_from = min_from;
        Buffer part = device_buffer(s, attention_partials_floats(a, n, max_end) * 4), out = device_buffer(s, q.size() * 4);
        attention_chunks(s, View{&qb, 0}, kc, vc, dkv, r, a, part);
        attention_merge(s, part, nullptr, r, a, View{&out, 0});
        return download_floats(s, out, q.size());
    };
    const auto check_host = [&](const Rows &rr, const std::vector<float> &q, const std::vector<float> &got) {
        for (uint32_t i = 0; i < rr.from.size(); ++i)
            for (uint32_t h = 0; h < a.n_head; ++h) {
                const std::vector<double> want = host_attention(a, cache, q, i, h, rr.keys[i]);
                for (uint32_t d = 0; d < a.head_dim; ++d) CHECK(got[(i * a.n_head + h) * a.head_dim + d] == Approx(want[d]).margin(1e-5));
            }
    };
    for (const float cap : {0.0f, 0.75f}) {
        a.softcap = cap;
        INFO("soft cap " << cap);
        // A causal batch of 40 rows after the prefix, window 24: later rows' windows start past the prefix.
        Rows causal;
        causal.n_prefix = n_prefix;
        causal.causal = true;
        for (uint32_t i = 0; i < 40; ++i) {
            const uint32_t pos = n_prefix + i, from = pos + 1 - 24;
            causal.from.push_back(from);
            causal.tails_len.push_back(i + 1);
            causal.tails.emplace_back();
            causal.keys.emplace_back();
            for (uint32_t p = from; p <= pos; ++p) causal.keys.back().push_back(p);
        }
        const std::vector<float> qc = random_floats(rng, 40 * a.n_head * a.head_dim);
        check_host(causal, qc, run(causal, qc));

        // A chain of 12 tree nodes in slots n_prefix.. (node i at position n_prefix + i), window 5.
        Rows tree;
        tree.n_prefix = n_prefix;
        for (uint32_t i = 0; i < 12; ++i) {
            const uint32_t pos = n_prefix + i, from = pos + 1 - 5;
            tree.from.push_back(from);
            tree.tails.emplace_back();
            tree.keys.emplace_back();
            for (uint32_t p = from; p < n_prefix; ++p) tree.keys.back().push_back(p);
            for (uint32_t p = std::max(from, n_prefix); p <= pos; ++p) {
                tree.tails.back().push_back(p);
                tree.keys.back().push_back(p);
            }
            tree.tails_len.push_back(uint32_t(tree.tails.back().size()));
        }
        const std::vector<float> qt = random_floats(rng, 12 * a.n_head * a.head_dim);
        const std::vector<float> got = run(tree, qt);
        check_host(tree, qt, got);
        // Each node decoded alone (a causal row after its path) gives the same bits.
        for (uint32_t i : {0u, 3u, 4u, 5u, 11u}) {
            Rows one;
            one.n_prefix = n_prefix + i;
            one.causal = true;
            one.from = {tree.from[i]};
            one.tails_len = {1};
            one.tails = {{}};
            one.keys = {tree.keys[i]};
            const std::vector<float> qi(qt.begin() + i * a.n_head * a.head_dim, qt.begin() + (i + 1) * a.n_head * a.head_dim);
            const std::vector<float> alone = run(one, qi);
            INFO("node " << i);
            CHECK(std::memcmp(alone.data(), got.data() + i * a.n_head * a.head_dim, alone.size() * 4) == 0);
        }
    }
}

TEST_CASE("vulkan attention: a workgroup at the loop budget (the largest chunk and the most rows one workgroup takes) "
          "computes all of its keys",
          "[vulkan][kernels]") {
    // llvmpipe ends every loop of a shader invocation after 65535 iterations in all and says nothing: before the
    // budget (vulkan_ops.cpp), a tree of 40 rows with heads of 128 lost its last rows' last keys. Here each
    // workgroup runs as much as the budget allows (every row reads every key of the largest chunk), and each row
    // must agree with a host softmax and, bit for bit, with itself computed alone.
    std::shared_ptr<Device> dev = get_device(0);
    Stream s(dev);
    std::mt19937 rng(11);
    for (const uint32_t head_dim : {128u, 256u}) {
        AttentionShape a = attention_shape(8, 2, head_dim, 0, 1.0f / std::sqrt(float(head_dim)));
        a.chunk = attention_chunk(a, 1024);
        const uint32_t per_group = attention_rows_per_workgroup(a), rows = per_group + 2;
        INFO("head_dim " << head_dim << ": chunks of " << a.chunk << ", " << per_group << " rows per workgroup");
        CHECK(a.chunk >= 64);
        const uint32_t dkv = a.n_head_kv * a.head_dim, n_prefix = a.chunk, slots = n_prefix + 8;
        const RandomCache cache = random_cache(s, rng, size_t(slots) * dkv);
        const std::vector<float> q = random_floats(rng, size_t(rows) * a.n_head * a.head_dim);
        Buffer qb = upload_floats(s, q);
        // Row i: the whole prefix (one chunk), then tail slots n_prefix + 3 and n_prefix + i % 5 (a tree's layout).
        std::vector<int32_t> ints(2 * rows);
        std::vector<std::vector<uint32_t>> keys(rows);
        for (uint32_t i = 0; i < rows; ++i) {
            for (uint32_t p = 0; p < n_prefix; ++p) keys[i].push_back(p);
            ints[i] = int32_t(ints.size() - 2 * rows);
            for (uint32_t p : {n_prefix + 3, n_prefix + i % 5}) {
                keys[i].push_back(p);
                ints.push_back(int32_t(p));
            }
            ints[rows + i] = 2;
        }
        Buffer ib = device_buffer(s, ints.size() * 4);
        s.upload(ib, 0, ints.data(), ints.size() * 4);
        AttentionRows r;
        r.n = rows;
        r.n_prefix = n_prefix;
        r.max_keys = n_prefix + 2;
        r.has_tail = true;
        r.ints = View{&ib, 0};
        r.tail_start = 0;
        r.tail_len = rows;
        r.tail_slots = 2 * rows;
        const size_t out_floats = size_t(a.n_head) * a.head_dim;
        Buffer part = device_buffer(s, attention_partials_floats(a, rows, r.max_keys) * 4), out = device_buffer(s, q.size() * 4);
        attention_chunks(s, View{&qb, 0}, cache.kc, cache.vc, dkv, r, a, part);
        attention_merge(s, part, nullptr, r, a, View{&out, 0});
        const std::vector<float> got = download_floats(s, out, q.size());
        double worst = 0;
        for (uint32_t i = 0; i < rows; ++i) {
            for (uint32_t h = 0; h < a.n_head; ++h) {
                const std::vector<double> want = host_attention(a, cache, q, i, h, keys[i]);
                for (uint32_t d = 0; d < a.head_dim; ++d) worst = std::max(worst, std::fabs(double(got[(i * a.n_head + h) * a.head_dim + d]) - want[d]));
            }
            // Row i alone: one row in its workgroup, the same bits.
            AttentionRows one = r;
            one.n = 1;
            one.tail_start = i;
            one.tail_len = rows + i;
            attention_chunks(s, View{&qb, uint32_t(i * out_floats)}, cache.kc, cache.vc, dkv, one, a, part);
            attention_merge(s, part, nullptr, one, a, View{&out, 0});
            const std::vector<float> alone = download_floats(s, out, out_floats);
            INFO("row " << i);
            CHECK(std::memcmp(alone.data(), got.data() + i * out_floats, out_floats * 4) == 0);
        }
        INFO("worst deviation from the host softmax " << worst);
        CHECK(worst < 1e-5);
    }
}
