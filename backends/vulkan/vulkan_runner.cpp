// The llama-family forward pass on a Vulkan device, dispatch by dispatch in the order of backends/cpu/cpu_runner.cpp:
//   x = embed(tokens)
//   per layer: x += Wo · attention(rope(Wq·norm(x) [+bq]), rope(Wk·norm(x) [+bk]), Wv·norm(x) [+bv])
//              x += Wdown · (silu(Wgate·norm(x)) * Wup·norm(x))
//   logits = Wout · norm(x)
// Attention reads each row's logical key list (vulkan_ops.h: AttentionRows): a causal batch, or a tree node's
// committed prefix followed by its ancestors. TreeAttention::Hybrid runs LongSpec's split form instead.
#include "backends/vulkan/vulkan_runner.h"

#include "backend/kv_shift.h"
#include "core/log.h"
#include "model/model.h"
#include "model/rope.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

namespace specula::internal::vulkan {
namespace {

constexpr size_t kMiB = size_t(1) << 20;
std::string mib(size_t bytes) { return std::to_string((bytes + kMiB - 1) / kMiB) + " MiB"; }

// Keys per split-K chunk: fixed for the session (a row's arithmetic must not depend on the batch), about 32 chunks
// over a full context, between 64 and 1024 keys (as on CUDA).
uint32_t choose_chunk(int32_t n_ctx) {
    const int32_t chunk = (n_ctx / 32 + 63) / 64 * 64;
    return uint32_t(std::clamp(chunk, 64, 1024));
}

}  // namespace

VulkanRunner::VulkanRunner(std::shared_ptr<const Model> model, int32_t n_ctx, std::shared_ptr<Device> device)
    : model_(std::move(model)), device_(std::move(device)), n_ctx_(n_ctx) {
    const HParams &hp = model_->hparams();
    require(hp.head_dim <= 256, SPECULA_ERR_UNSUPPORTED, "Vulkan: head_dim " + std::to_string(hp.head_dim) + " > 256 is not supported");
    require(n_ctx > 0, SPECULA_ERR_INVALID_ARGUMENT, "Vulkan: n_ctx must be positive");
    shape_.n_head = uint32_t(hp.n_head);
    shape_.n_head_kv = uint32_t(hp.n_head_kv);
    shape_.head_dim = uint32_t(hp.head_dim);
    shape_.chunk = choose_chunk(n_ctx);
    shape_.scale = 1.0f / std::sqrt(float(hp.head_dim));

    // Sizes first, so that a device without room is refused, with the sizes, before anything is allocated.
    const size_t d = size_t(hp.n_embd), dq = size_t(hp.n_embd_q()), dkv = size_t(hp.n_embd_kv()), dff = size_t(hp.n_ff);
    const size_t R = size_t(kMaxRows), n_vocab = size_t(hp.n_vocab);
    const size_t kv_layer = size_t(n_ctx) * dkv * 2;
    const size_t kv_total = 2 * size_t(hp.n_layer) * kv_layer;
    const size_t partials = attention_partials_floats(shape_, kMaxRows, uint32_t(n_ctx)) * 4;
    const size_t rope_bytes = size_t(n_ctx) * size_t(std::max(1, hp.rope_dim / 2)) * 4;
    const size_t scratch = R * (d + std::max(d, dq) + dq + 2 * dkv + dq + 2 * dff + n_vocab) * 4 + partials +
                           R * size_t(hp.n_head) * (size_t(hp.head_dim) + 2) * 4 + 2 * rope_bytes;
    const size_t session_bytes = kv_total + scratch;
    const size_t weights_bytes = Weights::bytes_needed(*model_);
    const size_t free_b = device_->free_memory();
    const std::string where = "device " + std::to_string(device_->index()) + " (" + device_->name() + ") has " + mib(free_b) + " free of " +
                              mib(device_->total_memory());
    if (session_bytes + weights_bytes > free_b) {
        const std::string detail = "Vulkan: not enough device memory: the KV cache (" + mib(kv_total) + " for n_ctx " + std::to_string(n_ctx) +
                                   ") and scratch need " + mib(session_bytes) + ", the weights " + mib(weights_bytes) + ", and " + where;
        require(session_bytes <= free_b, SPECULA_ERR_OUT_OF_MEMORY, detail);
    }
    const size_t max_range = device_->limits().maxStorageBufferRange;
    require(kv_layer <= max_range && partials <= max_range && R * n_vocab * 4 <= max_range, SPECULA_ERR_UNSUPPORTED,
            "Vulkan: one layer's KV cache (" + mib(kv_layer) + " for n_ctx " + std::to_string(n_ctx) + ") or the logits of a batch exceed this device's " +
                "largest storage buffer (" + mib(max_range) + ")");

    stream_ = std::make_unique<Stream>(device_);
    weights_ = Weights::get(model_, *stream_);
    const auto buf = [&](size_t bytes, const char *what) { return Buffer(device_, std::max<size_t>(bytes, 16), Buffer::Kind::Device, what); };
    for (int32_t il = 0; il < hp.n_layer; ++il) {
        kv_k_.push_back(buf(kv_layer, "the KV cache"));
        kv_v_.push_back(buf(kv_layer, "the KV cache"));
        stream_->fill_zero(kv_k_.back());
        stream_->fill_zero(kv_v_.back());
    }
    x_ = buf(R * d * 4, "scratch");
    xb_ = buf(R * std::max(d, dq) * 4, "scratch");
    q_ = buf(R * dq * 4, "scratch");
    k_ = buf(R * dkv * 4, "scratch");
    v_ = buf(R * dkv * 4, "scratch");
    att_ = buf(R * dq * 4, "scratch");
    gate_ = buf(R * dff * 4, "scratch");
    up_ = buf(R * dff * 4, "scratch");
    logits_ = buf(R * n_vocab * 4, "logits");
    partials_ = buf(partials, "attention partials");
    tree_partials_ = buf(R * size_t(hp.n_head) * (size_t(hp.head_dim) + 2) * 4, "attention partials");
    ints_ = buf(size_t(64) << 10, "row data");
    mask_ = buf(size_t(64) << 10, "tree mask");

    // RoPE angles for every position, computed by the CPU reference's code.
    const int half = std::max(1, hp.rope_dim / 2);
    std::vector<float> cos_t(size_t(n_ctx) * size_t(half)), sin_t(cos_t.size());
    for (int32_t p = 0; p < n_ctx; ++p)
        rope_angles(hp, model_->weights().rope_freq_factors, p, cos_t.data() + size_t(p) * half, sin_t.data() + size_t(p) * half);
    rope_cos_ = buf(rope_bytes, "RoPE tables");
    rope_sin_ = buf(rope_bytes, "RoPE tables");
    stream_->upload(rope_cos_, 0, cos_t.data(), rope_bytes);
    stream_->upload(rope_sin_, 0, sin_t.data(), rope_bytes);
    stream_->finish();
}

VulkanRunner::~VulkanRunner() {
    try {
        if (stream_) stream_->finish();
    } catch (...) {
    }
}

int32_t VulkanRunner::kv_width() const { return model_->hparams().n_embd_kv(); }

size_t VulkanRunner::kv_bytes() const {
    size_t total = 0;
    for (const Buffer &b : kv_k_) total += b.bytes();
    for (const Buffer &b : kv_v_) total += b.bytes();
    return total;
}

size_t VulkanRunner::session_device_bytes() const {
    size_t total = kv_bytes();
    for (const Buffer *b : {&rope_cos_, &rope_sin_, &x_, &xb_, &q_, &k_, &v_, &att_, &gate_, &up_, &logits_, &partials_, &tree_partials_, &ints_, &mask_,
                            &hidden_})
        total += b->bytes();
    return total;
}

void VulkanRunner::ensure(Buffer &b, size_t bytes, const char *what) {
    if (b.bytes() >= bytes) return;
    stream_->finish();
    b = Buffer(device_, std::max(bytes, 2 * b.bytes()), Buffer::Kind::Device, what);
}

bool VulkanRunner::eval(const int32_t *tokens, int32_t n, int32_t n_past, float *logits, bool all_logits) {
    return forward(tokens, n, n_past, nullptr, Output::HostLogits, logits, all_logits);
}

bool VulkanRunner::eval_tree(const int32_t *tokens, int32_t n, int32_t n_past, int32_t tree_offset, const int32_t *positions, const uint8_t *mask,
                             float *logits) {
    const TreeBatch tree{tree_offset, positions, mask, tree_offset + n};
    return forward(tokens, n, n_past, &tree, logits ? Output::HostLogits : Output::KeepHidden, logits, true);
}

bool VulkanRunner::forward(const int32_t *tokens, int32_t n, int32_t n_past, const TreeBatch *tree, Output output, float *logits, bool all_logits) {
    const int32_t n_vocab = model_->hparams().n_vocab;
    if (n <= 0) return true;
    if (output == Output::KeepHidden) {
        ensure(hidden_, size_t(n) * size_t(model_->hparams().n_embd) * 4, "tree hidden states");
        hidden_rows_ = n;
    }
    for (int32_t a = 0; a < n; a += kMaxRows) {
        const int32_t m = std::min(kMaxRows, n - a);
        const bool last = a + m == n;
        TreeBatch sub{};
        if (tree) sub = TreeBatch{tree->offset + a, tree->positions + a, tree->mask + size_t(a) * size_t(tree->mask_stride), tree->mask_stride};
        float *dst = nullptr;
        if (output == Output::HostLogits) dst = all_logits ? logits + size_t(a) * size_t(n_vocab) : (last ? logits : nullptr);
        const Output out = last || all_logits ? output : Output::None;
        // A causal batch continues at slot n_past + a; a tree keeps n_past and moves its offset.
        if (!enqueue_batch(tokens + a, m, tree ? n_past : n_past + a, tree ? &sub : nullptr, a, out, all_logits, dst)) return false;
        stream_->finish();
    }
    return true;
}

bool VulkanRunner::enqueue_batch(const int32_t *tokens, int32_t m, int32_t n_past, const TreeBatch *tree, int32_t first_row, Output output,
                                 bool all_logits, float *logits) {
    const HParams &hp = model_->hparams();
    const Weights &w = *weights_;
    Stream &st = *stream_;
    const uint32_t d = uint32_t(hp.n_embd), dq = uint32_t(hp.n_embd_q()), dkv = uint32_t(hp.n_embd_kv()), dff = uint32_t(hp.n_ff);
    const uint32_t n_vocab = uint32_t(hp.n_vocab), M = uint32_t(m);

    // ---- the rows' integer data: tokens, positions, tail starts, tail lengths, tail slots ---------------------
    std::vector<int32_t> &ints = int_staging_;
    ints.clear();
    const int32_t mask_width = tree ? tree->mask_stride : 0;
    ints.insert(ints.end(), tokens, tokens + m);
    for (int32_t i = 0; i < m; ++i) ints.push_back(tree ? tree->positions[i] : n_past + i);
    const size_t tail_start_at = ints.size();
    ints.resize(ints.size() + 2 * size_t(m));
    const size_t slots_at = ints.size();
    int32_t max_tail = 0;
    for (int32_t i = 0; i < m; ++i) {
        int32_t len = i + 1;
        if (tree) {
            const uint8_t *row = tree->mask + size_t(i) * size_t(mask_width);
            ints[tail_start_at + size_t(i)] = int32_t(ints.size() - slots_at);
            len = 0;
            for (int32_t j = 0; j < mask_width; ++j)
                if (row[j]) {
                    ints.push_back(n_past + j);
                    ++len;
                }
        }
        ints[tail_start_at + size_t(m) + size_t(i)] = len;
        max_tail = std::max(max_tail, len);
    }
    ensure(ints_, ints.size() * 4, "row data");
    st.upload(ints_, 0, ints.data(), ints.size() * 4);
    const View v_tokens{&ints_, 0}, v_positions{&ints_, M};
    AttentionRows rows;
    rows.n = M;
    rows.n_prefix = uint32_t(n_past);
    rows.max_keys = uint32_t(n_past + max_tail);
    rows.has_tail = true;
    rows.causal = tree == nullptr;
    rows.ints = View{&ints_, 0};
    rows.tail_start = uint32_t(tail_start_at);
    rows.tail_len = uint32_t(tail_start_at) + M;
    rows.tail_slots = uint32_t(slots_at);
    const bool hybrid = tree && tree_attention_ == TreeAttention::Hybrid;
    if (hybrid) {
        const size_t mask_bytes = size_t(m) * size_t(mask_width);
        ensure(mask_, mask_bytes, "tree mask");
        st.upload(mask_, 0, tree->mask, mask_bytes);
    }
    const uint32_t first_slot = uint32_t(n_past + (tree ? tree->offset : 0));

    const View x{&x_, 0}, xb{&xb_, 0}, q{&q_, 0}, k{&k_, 0}, v{&v_, 0}, att{&att_, 0}, gate{&gate_, 0}, up{&up_, 0};
    embed(st, w.token_embd, v_tokens, M, x);
    const bool neox = hp.rope_type == RopeType::Neox;
    for (int32_t il = 0; il < hp.n_layer; ++il) {
        // A long batch is submitted layer by layer, so that a cancel stops it within a layer.
        if (m > 1 && il > 0) st.finish();
        if (cancelled()) {
            st.finish();
            return false;
        }
        const Layer &l = w.layers[size_t(il)];
        const Buffer &kc = kv_k_[size_t(il)], &vc = kv_v_[size_t(il)];

        // Attention block.
        rmsnorm(st, x, View{l.attn_norm, 0}, M, d, hp.norm_eps, xb);
        matmul(st, l.wq, xb, M, q);
        matmul(st, l.wk, xb, M, k);
        matmul(st, l.wv, xb, M, v);
        add_bias(st, q, View{l.bq, 0}, M, dq);
        add_bias(st, k, View{l.bk, 0}, M, dkv);
        add_bias(st, v, View{l.bv, 0}, M, dkv);
        rope(st, q, M, uint32_t(hp.n_head), uint32_t(hp.head_dim), uint32_t(hp.rope_dim), neox, v_positions, rope_cos_, rope_sin_);
        rope(st, k, M, uint32_t(hp.n_head_kv), uint32_t(hp.head_dim), uint32_t(hp.rope_dim), neox, v_positions, rope_cos_, rope_sin_);
        store_kv(st, k, v, M * dkv, kc, vc, first_slot * dkv);
        if (hybrid) {
            AttentionRows prefix = rows;
            prefix.max_keys = uint32_t(n_past);
            prefix.has_tail = false;
            prefix.causal = false;
            attention_chunks(st, q, kc, vc, dkv, prefix, shape_, partials_);
            attention_tree(st, q, kc, vc, dkv, M, uint32_t(n_past), uint32_t(mask_width), mask_, shape_, tree_partials_);
            attention_merge(st, partials_, &tree_partials_, prefix, shape_, att);
        } else {
            attention_chunks(st, q, kc, vc, dkv, rows, shape_, partials_);
            attention_merge(st, partials_, nullptr, rows, shape_, att);
        }
        matmul(st, l.wo, att, M, xb);
        add(st, x, xb, M * d);

        // Feed-forward block (SwiGLU).
        rmsnorm(st, x, View{l.ffn_norm, 0}, M, d, hp.norm_eps, xb);
        matmul(st, l.ffn_gate, xb, M, gate);
        matmul(st, l.ffn_up, xb, M, up);
        swiglu(st, gate, up, M * dff);
        matmul(st, l.ffn_down, gate, M, xb);
        add(st, x, xb, M * d);
    }

    // Output head: all rows, or the last one.
    if (output == Output::None) return true;
    const uint32_t first = all_logits || output == Output::KeepHidden ? 0 : M - 1;
    const uint32_t out_rows = M - first;
    rmsnorm(st, x.at(first * d), View{w.output_norm, 0}, out_rows, d, hp.norm_eps, xb);
    if (output == Output::KeepHidden) {
        st.copy(xb_, 0, hidden_, size_t(first_row) * d * 4, size_t(out_rows) * d * 4);
        return true;
    }
    matmul(st, w.output, xb, out_rows, View{&logits_, 0});
    st.download(logits_, 0, logits, size_t(out_rows) * n_vocab * 4);
    return true;
}

void VulkanRunner::tree_logits(int32_t i, float *logits) {
    require(i >= 0 && i < hidden_rows_, SPECULA_ERR_INTERNAL, "Vulkan: tree_logits row out of range");
    const HParams &hp = model_->hparams();
    matmul(*stream_, weights_->output, View{&hidden_, uint32_t(i) * uint32_t(hp.n_embd)}, 1, View{&logits_, 0});
    stream_->download(logits_, 0, logits, size_t(hp.n_vocab) * 4);
    stream_->finish();
}

void VulkanRunner::commit_tree_path(int32_t n_past, const int32_t *nodes, int32_t n) {
    if (n <= 0) return;
    std::vector<int32_t> &moves = int_staging_;
    moves.clear();
    // In path order: a later move may read a slot an earlier one left, never one it wrote (nodes[i] >= i).
    for (int32_t i = 0; i < n; ++i)
        if (nodes[i] != i) {
            moves.push_back(n_past + nodes[i]);
            moves.push_back(n_past + i);
        }
    if (moves.empty()) return;
    ensure(ints_, moves.size() * 4, "row data");
    stream_->upload(ints_, 0, moves.data(), moves.size() * 4);
    for (size_t il = 0; il < kv_k_.size(); ++il)
        copy_slots(*stream_, kv_k_[il], kv_v_[il], View{&ints_, 0}, uint32_t(moves.size() / 2), uint32_t(kv_width()));
    stream_->finish();
}

void VulkanRunner::shift_kv(int32_t keep, int32_t discard, int32_t n_used) {
    shift_kv_rows(*this, model_->hparams(), model_->weights().rope_freq_factors, keep, discard, n_used);
}

void VulkanRunner::read_kv(int32_t layer, int kind, int32_t first, int32_t n, void *dst) {
    const size_t row = size_t(kv_width()) * 2;
    stream_->download((kind == 0 ? kv_k_ : kv_v_)[size_t(layer)], size_t(first) * row, dst, size_t(n) * row);
    stream_->finish();
}

void VulkanRunner::write_kv(int32_t layer, int kind, int32_t first, int32_t n, const void *src) {
    const size_t row = size_t(kv_width()) * 2;
    stream_->upload((kind == 0 ? kv_k_ : kv_v_)[size_t(layer)], size_t(first) * row, src, size_t(n) * row);
    stream_->finish();
}

std::unique_ptr<TargetRunner> VulkanRunner::make_draft_runner(std::shared_ptr<const Model> draft, int32_t n_ctx) {
    try {
        return std::make_unique<VulkanRunner>(std::move(draft), n_ctx, device_);
    } catch (const Error &e) {
        if (e.status() != SPECULA_ERR_OUT_OF_MEMORY && e.status() != SPECULA_ERR_UNSUPPORTED) throw;
        log(SPECULA_LOG_INFO, "Vulkan: the draft model runs on the CPU (%s)", e.what());
        return nullptr;
    }
}

}  // namespace specula::internal::vulkan
