// The CUDA runner: the model's graph (graph/model_graph.h) on the CUDA executor, on one stream. The architecture
// is not written here; a runner plans each batch's rows (graph/batch_rows.h), slices batches to its buffers
// (kMaxRows rows), replays decode steps as CUDA graphs, sends long prompt batches through cuBLAS, and keeps a
// tree's rows on the device for the verification there.
#include "backends/cuda/cuda_runner.h"

#include "backend/attention_split.h"
#include "backend/kv_shift.h"
#include "backends/cuda/graph_replay.h"
#include "backends/cuda/kernels/sampling.h"
#include "core/log.h"
#include "graph/model_graph.h"
#include "model/model.h"
#include "model/rope.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

namespace specula::internal::SPECULA_CUDA_NAMESPACE {
namespace {

constexpr size_t kMiB = size_t(1) << 20;

std::string mib(size_t bytes) { return std::to_string((bytes + kMiB - 1) / kMiB) + " MiB"; }

}  // namespace

CudaRunner::CudaRunner(std::shared_ptr<const Model> model, int32_t n_ctx, int device, std::shared_ptr<const Graph> graph)
    : model_(std::move(model)), device_(device), n_ctx_(n_ctx) {
    const HParams &hp = model_->hparams();
    require(hp.head_dim <= 256, SPECULA_ERR_UNSUPPORTED, "CUDA: head_dim " + std::to_string(hp.head_dim) + " > 256 is not supported");
    if (!graph) graph = build_model_graph(model_, n_ctx);
    check(cudaSetDevice(device_), "cudaSetDevice");
    if (const char *env = std::getenv("SPECULA_CUDA_GRAPHS")) use_graphs_ = std::strcmp(env, "0") != 0;
    if (!CudaExecutor::replayable(*graph)) use_graphs_ = false;  // experts: the host groups rows mid-stage
    if (const char *env = std::getenv("SPECULA_CUDA_DEVICE_VERIFY")) device_verify_ = std::strcmp(env, "0") != 0;
    chunk_ = fixed_split_chunk(n_ctx);

    // Sizes first, so that a device without room is reported before anything is allocated.
    const int64_t dkv = hp.n_embd_kv();
    const size_t kv_bytes_each = size_t(hp.n_layer) * size_t(n_ctx) * size_t(dkv) * 2;
    const size_t rope_bytes = size_t(n_ctx) * size_t(std::max(1, hp.rope_dim / 2)) * 4;
    CudaContext sizing;
    sizing.n_ctx = n_ctx;
    sizing.cache_chunk = chunk_;
    const size_t session_bytes = 2 * kv_bytes_each + 2 * rope_bytes + CudaExecutor::bytes_needed(*graph, kMaxRows, sizing);
    size_t free_b = 0, total_b = 0;
    check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
    const size_t weights_bytes = DeviceWeights::bytes_needed(*graph);
    const size_t margin = 256 * kMiB;
    // The weights may already be on the device (another session); check for the worst case only when they are not.
    if (session_bytes + weights_bytes + margin > free_b) {
        std::string detail = "CUDA: not enough device memory: the KV cache (" + mib(2 * kv_bytes_each) + " for n_ctx " + std::to_string(n_ctx) +
                             ") and scratch need " + mib(session_bytes) + ", the weights " + mib(weights_bytes) + ", and device " +
                             std::to_string(device_) + " has " + mib(free_b) + " free of " + mib(total_b);
        require(session_bytes + margin <= free_b, SPECULA_ERR_OUT_OF_MEMORY, detail);
        weights_ = DeviceWeights::get(*model_, *graph, device_);  // shared copy already resident: only the session must fit
        check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
        require(session_bytes + margin <= free_b, SPECULA_ERR_OUT_OF_MEMORY, detail);
    } else {
        weights_ = DeviceWeights::get(*model_, *graph, device_);
    }

    kv_k_ = DeviceBuffer(kv_bytes_each);
    kv_v_ = DeviceBuffer(kv_bytes_each);
    check(cudaMemset(kv_k_.as(), 0, kv_bytes_each), "cudaMemset (KV)");
    check(cudaMemset(kv_v_.as(), 0, kv_bytes_each), "cudaMemset (KV)");
    argmax_ = DeviceBuffer(sizeof(int32_t));

    // RoPE angles for every position, computed by the core's reference code.
    std::vector<float> cos_t, sin_t;
    rope_table(hp, graph->rope_freq_factors, n_ctx, cos_t, sin_t);
    rope_cos_ = DeviceBuffer(rope_bytes);
    rope_sin_ = DeviceBuffer(rope_bytes);
    check(cudaMemcpy(rope_cos_.as(), cos_t.data(), rope_bytes, cudaMemcpyHostToDevice), "cudaMemcpy (RoPE table)");
    check(cudaMemcpy(rope_sin_.as(), sin_t.data(), rope_bytes, cudaMemcpyHostToDevice), "cudaMemcpy (RoPE table)");

    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    prefill_ = PrefillGemm::create(stream_, &prefill_note_);
    if (!prefill_) log(SPECULA_LOG_INFO, "CUDA: prompt batches stay on the batch-invariant kernels: %s", prefill_note_.c_str());
    exec_ = std::make_unique<CudaExecutor>(std::move(graph), kMaxRows, context());
    host_logits_.reserve(size_t(kMaxRows) * size_t(hp.n_vocab) * 4);
}

CudaContext CudaRunner::context() const {
    CudaContext c;
    c.device = device_;
    c.stream = stream_;
    c.kv_k = kv_k_.as<__half>();
    c.kv_v = kv_v_.as<__half>();
    c.n_ctx = n_ctx_;
    c.rope_cos = rope_cos_.as<float>();
    c.rope_sin = rope_sin_.as<float>();
    c.rope_hp = &model_->hparams();
    c.rope_freq_factors = &model_->weights().rope_freq_factors_for(model_->hparams(), n_ctx_);
    c.cache_chunk = chunk_;
    c.graphs = use_graphs_;
    c.weights = weights_;
    return c;
}

std::unique_ptr<GraphExecutor> CudaRunner::make_executor(const ExecutorRequest &request) {
    check(cudaSetDevice(device_), "cudaSetDevice");
    return std::make_unique<CudaExecutor>(request.graph, request.max_rows, context());
}

CudaRunner::~CudaRunner() {
    cudaSetDevice(device_);
    if (decode_graph_ != nullptr) cudaGraphExecDestroy(decode_graph_);
    prefill_.reset();  // its handle is bound to the stream: released first
    if (stream_ != nullptr) {
        cudaStreamSynchronize(stream_);
        cudaStreamDestroy(stream_);
    }
    (void)cudaGetLastError();
}

int32_t CudaRunner::kv_width() const { return model_->hparams().n_embd_kv(); }

size_t CudaRunner::session_device_bytes() const {
    size_t total = 0;
    for (const DeviceBuffer *b : {&kv_k_, &kv_v_, &rope_cos_, &rope_sin_, &argmax_, &hidden_}) total += b->bytes();
    return total + exec_->device_bytes();
}

bool CudaRunner::evaluate(const int32_t *tokens, int32_t n, int32_t n_past, float *logits, bool all_logits) {
    return forward(tokens, n, n_past, nullptr, Output::HostLogits, logits, all_logits);
}

bool CudaRunner::eval_argmax(const int32_t *tokens, int32_t n, int32_t n_past, int32_t *next) {
    release_rows();
    if (!forward(tokens, n, n_past, nullptr, Output::Argmax, nullptr, false)) return false;
    check(cudaMemcpy(next, argmax_.as(), sizeof(int32_t), cudaMemcpyDeviceToHost), "cudaMemcpy (argmax)");
    return true;
}

bool CudaRunner::evaluate_tree(const int32_t *tokens, int32_t n, int32_t n_past, int32_t tree_offset, const int32_t *positions, const uint8_t *mask,
                           float *logits) {
    const TreeBatch tree{tree_offset, positions, mask, tree_offset + n};
    return forward(tokens, n, n_past, &tree, logits ? Output::HostLogits : Output::KeepHidden, logits, true);
}

bool CudaRunner::forward(const int32_t *tokens, int32_t n, int32_t n_past, const TreeBatch *tree, Output output, float *logits, bool all_logits) {
    check(cudaSetDevice(device_), "cudaSetDevice");
    const int32_t n_vocab = model_->hparams().n_vocab;
    if (n <= 0) return true;
    device_logit_rows_ = 0;  // every pass writes logits_
    if (output == Output::KeepHidden) {
        const size_t bytes = size_t(n) * size_t(model_->hparams().n_embd) * 4;
        if (hidden_.bytes() < bytes) hidden_ = DeviceBuffer(bytes);
        hidden_rows_ = n;
        // A tree that fits one slice gets every row's logits in one pass over the output matrix, kept on the device:
        // the verifier then copies the rows it visits, instead of reading the whole matrix again per visited row
        // (1 GB per row for Llama 3 8B's F16 head). Same bits either way: the GEMM is batch-invariant.
        device_logit_rows_ = n <= kMaxRows ? n : 0;
    }

    // A single decoded token: capture the step as a graph and replay it (kernel arguments change with n_past;
    // cudaGraphExecUpdate patches them into the instantiated graph without rebuilding it).
    if (use_graphs_ && tree == nullptr && n == 1) {
        if (cancelled()) return false;
        launch_as_graph(stream_, decode_graph_, [&] { enqueue_batch(tokens, 1, n_past, nullptr, 0, output, false, true); });
        check(cudaStreamSynchronize(stream_), "decode step");
        if (output == Output::HostLogits) std::memcpy(logits, host_logits_.as<float>(), size_t(n_vocab) * 4);
        return true;
    }

    for (int32_t a = 0; a < n; a += kMaxRows) {
        const int32_t m = std::min(kMaxRows, n - a);
        const bool last = a + m == n;
        TreeBatch sub{};
        if (tree) sub = TreeBatch{tree->offset + a, tree->positions + a, tree->mask + size_t(a) * size_t(tree->mask_stride), tree->mask_stride};
        // A causal batch continues at slot n_past + a; a tree keeps n_past and moves its offset.
        if (!enqueue_batch(tokens + a, m, tree ? n_past : n_past + a, tree ? &sub : nullptr, a, last || all_logits ? output : Output::None,
                           all_logits, false)) {
            check(cudaStreamSynchronize(stream_), "cancelled forward pass");
            return false;
        }
        check(cudaStreamSynchronize(stream_), "forward pass");
        if (output == Output::HostLogits && all_logits) std::memcpy(logits + size_t(a) * n_vocab, host_logits_.as<float>(), size_t(m) * n_vocab * 4);
        if (output == Output::HostLogits && !all_logits && last) std::memcpy(logits, host_logits_.as<float>(), size_t(n_vocab) * 4);
    }
    return true;
}

// Enqueues one batch of m <= kMaxRows rows. For a tree, `tree` is this batch's slice: its offset counts the tree
// nodes before the batch and its mask rows keep the full tree's stride (offset + rows after it are zero).
bool CudaRunner::enqueue_batch(const int32_t *tokens, int32_t m, int32_t n_past, const TreeBatch *tree, int32_t first_row, Output output,
                               bool all_logits, bool capturing) {
    const HParams &hp = model_->hparams();
    const int64_t d = hp.n_embd;
    const int32_t n_vocab = hp.n_vocab;
    const int32_t window = exec_->graph().sliding_window;
    if (tree) plan_tree_rows(rows_, tokens, m, n_past, tree->offset, tree->positions, tree->mask, tree->mask_stride, window);
    else plan_causal_rows(rows_, tokens, m, n_past, window);
    if (tree_attention_ != TreeAttention::Hybrid) rows_.mask = nullptr;  // only the split form reads it
    exec_->upload_rows(rows_, capturing);
    CudaExecutor::Enqueue how;
    // Long causal batches (a prompt) multiply through cuBLAS; decoded tokens and trees never do (prefill_gemm.h).
    how.cublas = tree == nullptr ? prefill_.get() : nullptr;
    how.tree_attention = tree_attention_;
    how.cancel = capturing ? nullptr : cancel_flag();
    if (!exec_->enqueue(kBodyStage, rows_, 0, m, how)) return false;

    // Output head: all rows, or the last one.
    if (output == Output::None) return true;
    const Graph &g = exec_->graph();
    const int32_t first = all_logits || output == Output::KeepHidden ? 0 : m - 1;
    const int32_t out_rows = m - first;
    cudaStream_t st = stream_;
    const CudaExecutor::Enqueue head{how.cublas};
    if (output == Output::KeepHidden) {
        check(cudaMemcpyAsync(hidden_.as<float>() + int64_t(first_row) * d, exec_->row(g.hidden, 0), size_t(out_rows) * size_t(d) * 4,
                              cudaMemcpyDeviceToDevice, st),
              "cudaMemcpyAsync (hidden rows)");
        if (device_logit_rows_ > 0) exec_->enqueue(kHeadStage, rows_, 0, out_rows, head);
        return true;
    }
    exec_->enqueue(kHeadStage, rows_, first, out_rows, head);
    const float *out = exec_->row(g.logits, first);
    if (output == Output::Argmax) {
        argmax(out + size_t(out_rows - 1) * n_vocab, n_vocab, argmax_.as<int32_t>(), st);
    } else {
        check(cudaMemcpyAsync(host_logits_.as(), out, size_t(out_rows) * size_t(n_vocab) * 4, cudaMemcpyDeviceToHost, st), "cudaMemcpyAsync (logits)");
    }
    return true;
}

void CudaRunner::tree_logits(int32_t i, float *logits) {
    require(i >= 0 && i < hidden_rows_, SPECULA_ERR_INTERNAL, "CUDA: tree_logits row out of range");
    check(cudaSetDevice(device_), "cudaSetDevice");
    const HParams &hp = model_->hparams();
    const Graph &g = exec_->graph();
    const float *row = exec_->row(g.logits, i);
    if (i >= device_logit_rows_) {  // a tree longer than one slice: this row's head now
        check(cudaMemcpyAsync(exec_->row(g.hidden, 0), hidden_.as<float>() + int64_t(i) * hp.n_embd, size_t(hp.n_embd) * 4, cudaMemcpyDeviceToDevice,
                              stream_),
              "cudaMemcpyAsync (hidden row)");
        exec_->enqueue(kHeadStage, rows_, 0, 1, CudaExecutor::Enqueue{});
        row = exec_->row(g.logits, 0);
        device_logit_rows_ = 0;  // the buffer's rows are no longer the tree's
    }
    check(cudaMemcpyAsync(host_logits_.as(), row, size_t(hp.n_vocab) * 4, cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync (logits)");
    check(cudaStreamSynchronize(stream_), "tree logits");
    std::memcpy(logits, host_logits_.as(), size_t(hp.n_vocab) * 4);
}

namespace {

// Appends `n` elements to the byte image `bytes` at an offset aligned for T; returns the offset.
template <typename T> size_t put(std::vector<uint8_t> &bytes, const T *data, size_t n) {
    const size_t at = (bytes.size() + alignof(double) - 1) / alignof(double) * alignof(double);
    bytes.resize(at + n * sizeof(T));
    if (n > 0) std::memcpy(bytes.data() + at, data, n * sizeof(T));
    return at;
}

}  // namespace

bool CudaRunner::verify_tree_on_device(const TreeSamplingPlan &plan, VerifyOutcome &outcome) {
    const int32_t n = plan.size();
    const int32_t n_vocab = model_->hparams().n_vocab;
    const int32_t k = plan.greedy ? 1 : plan.top_k;
    // The rows must all be in logits_ (eval_tree(..., nullptr) of at most kMaxRows nodes, no row recomputed since).
    if (!device_verify_ || n < 1 || n != hidden_rows_ || n != device_logit_rows_ || k < 1 || k > kSampleMaxK || k > n_vocab)
        return false;
    SamplingChain chain;
    chain.k = k;
    chain.greedy = plan.greedy;
    chain.top_p_on = plan.top_p < 1.0f;
    chain.top_p = plan.top_p;
    chain.min_p_on = plan.min_p > 0.0f;
    chain.min_p = plan.min_p;
    chain.temperature = plan.temperature;
    chain.penalties = plan.penalties;
    chain.repeat = plan.repeat;
    chain.frequency = plan.frequency;
    chain.presence = plan.presence;
    chain.contextual = plan.contextual;
    chain.theta = plan.theta;

    // One upload: the walk's keys, the tree, the edits.
    std::vector<uint8_t> &image = verify_image_;
    image.clear();
    const size_t n_edits = plan.edit_ids.size();
    const size_t o_keys = put(image, plan.keys.data(), plan.keys.size());
    const size_t o_parents = put(image, plan.parents.data(), size_t(n));
    const size_t o_tokens = put(image, plan.tokens.data(), size_t(n));
    const size_t o_first = put(image, plan.edit_first.data(), size_t(n) + 1);
    const size_t o_ids = put(image, plan.edit_ids.data(), n_edits);
    const size_t o_counts = put(image, plan.edit_counts.data(), n_edits);
    const size_t o_context = put(image, plan.edit_in_context.data(), n_edits);
    check(cudaSetDevice(device_), "cudaSetDevice");
    host_verify_in_.reserve(image.size());
    verify_in_.reserve(image.size());
    const size_t cand_bytes = size_t(n) * size_t(kSampleMaxK) * (sizeof(int32_t) + sizeof(float)) + size_t(n) * sizeof(int32_t);
    verify_cands_.reserve(cand_bytes);
    verify_out_.reserve((size_t(n) + 2) * sizeof(int32_t));
    host_verify_out_.reserve((size_t(n) + 2) * sizeof(int32_t));
    std::memcpy(host_verify_in_.as(), image.data(), image.size());
    uint8_t *in = verify_in_.as<uint8_t>();
    check(cudaMemcpyAsync(in, host_verify_in_.as(), image.size(), cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync (verify plan)");
    int32_t *cand_ids = verify_cands_.as<int32_t>();
    float *cand_p = reinterpret_cast<float *>(cand_ids + size_t(n) * kSampleMaxK);
    int32_t *cand_n = reinterpret_cast<int32_t *>(cand_p + size_t(n) * kSampleMaxK);
    sample_chain_rows(exec_->row(exec_->graph().logits, 0), n, n_vocab, n_vocab, reinterpret_cast<const int32_t *>(in + o_first),
                      reinterpret_cast<const int32_t *>(in + o_ids), reinterpret_cast<const int32_t *>(in + o_counts), in + o_context, chain,
                      cand_ids, cand_p, cand_n, stream_);
    walk_tree(reinterpret_cast<const int32_t *>(in + o_parents), reinterpret_cast<const int32_t *>(in + o_tokens), n, cand_ids, cand_p,
              cand_n, reinterpret_cast<const uint64_t *>(in + o_keys), plan.greedy, verify_out_.as<int32_t>(), stream_);
    check(cudaMemcpyAsync(host_verify_out_.as(), verify_out_.as(), (size_t(n) + 2) * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_),
          "cudaMemcpyAsync (verify result)");
    check(cudaStreamSynchronize(stream_), "device verification");
    const int32_t *out = host_verify_out_.as<int32_t>();
    const int32_t m = out[0];
    require(m >= 0 && m < n && out[m + 1] >= 0 && out[m + 1] < n_vocab, SPECULA_ERR_INTERNAL, "CUDA: the device verification's result is out of range");
    outcome.path.assign(out + 1, out + 1 + m);
    outcome.bonus = out[m + 1];
    for (int32_t i = 0; i < m; ++i)
        require(outcome.path[size_t(i)] > 0 && outcome.path[size_t(i)] < n &&
                    plan.parents[size_t(outcome.path[size_t(i)])] == (i == 0 ? 0 : outcome.path[size_t(i) - 1]),
                SPECULA_ERR_INTERNAL, "CUDA: the device verification's path is not a path of the tree");
    ++device_verifications_;
    return true;
}

void CudaRunner::commit_tree_path(int32_t n_past, const int32_t *nodes, int32_t n) {
    check(cudaSetDevice(device_), "cudaSetDevice");
    const HParams &hp = model_->hparams();
    const size_t layer_stride = size_t(n_ctx_) * size_t(hp.n_embd_kv());
    // In path order: a later move may read a slot an earlier one left, never one it wrote (nodes[i] >= i).
    for (int32_t i = 0; i < n; ++i)
        copy_kv_slot(kv_k_.as<__half>(), kv_v_.as<__half>(), hp.n_layer, layer_stride, hp.n_embd_kv(), n_past + nodes[i], n_past + i, stream_);
    check(cudaStreamSynchronize(stream_), "commit tree path");
}

void CudaRunner::shift_kv(int32_t keep, int32_t discard, int32_t n_used) {
    shift_kv_rows(*this, model_->hparams(), model_->weights().rope_freq_factors_for(model_->hparams(), n_ctx_), keep, discard, n_used);
}

void CudaRunner::read_kv(int32_t layer, KvPart part, int32_t first, int32_t n, void *dst) {
    check(cudaSetDevice(device_), "cudaSetDevice");
    const size_t dkv = size_t(kv_width()), offset = (size_t(layer) * size_t(n_ctx_) + size_t(first)) * dkv;
    const __half *src = (part == KvPart::Keys ? kv_k_ : kv_v_).as<__half>() + offset;
    check(cudaStreamSynchronize(stream_), "KV read");
    check(cudaMemcpy(dst, src, size_t(n) * dkv * 2, cudaMemcpyDeviceToHost), "cudaMemcpy (KV read)");
}

void CudaRunner::write_kv(int32_t layer, KvPart part, int32_t first, int32_t n, const void *src) {
    check(cudaSetDevice(device_), "cudaSetDevice");
    const size_t dkv = size_t(kv_width()), offset = (size_t(layer) * size_t(n_ctx_) + size_t(first)) * dkv;
    __half *dst = (part == KvPart::Keys ? kv_k_ : kv_v_).as<__half>() + offset;
    check(cudaStreamSynchronize(stream_), "KV write");
    check(cudaMemcpy(dst, src, size_t(n) * dkv * 2, cudaMemcpyHostToDevice), "cudaMemcpy (KV write)");
}

std::unique_ptr<TargetRunner> CudaRunner::make_draft_runner(std::shared_ptr<const Model> draft, int32_t n_ctx) {
    try {
        return std::make_unique<CudaRunner>(std::move(draft), n_ctx, device_);
    } catch (const Error &e) {
        if (e.status() != SPECULA_ERR_OUT_OF_MEMORY && e.status() != SPECULA_ERR_UNSUPPORTED) throw;
        log(SPECULA_LOG_INFO, "CUDA: the draft model runs on the CPU (%s)", e.what());
        return nullptr;
    }
}

}  // namespace specula::internal::SPECULA_CUDA_NAMESPACE
