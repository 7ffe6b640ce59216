// A model's computation written once, as a list of operations on named tensors (in the manner of llama.cpp's
// build_llama over ggml operations, without a general framework): the core builds the list for an architecture
// (model/model_graph.h for the target, speculative/longspec_graph.h for LongSpec's draft layer) and every backend
// executes it with its own kernels, buffers and scheduling (backend/graph_executor.h). A new architecture is a new
// list of the same operations and touches no backend; a new backend implements the operations and touches no
// architecture.
//
// Every operation works row by row on the rows of one batch (a prompt slice, a decoded token, a tree's nodes): a
// tensor is `width` floats per row. What a row sees beyond its own values (its position, which keys it attends
// to, where its key and value are stored) comes with the batch (graph/batch_rows.h).
//
// Rules the backends keep for every operation (tested per backend by tests/backends/test_graph_ops.cpp and
// test_backend_ops.cpp): a row's result never depends on the other rows of its batch (batch invariance), so a tree
// node's logits are bit for bit those of decoding its path; the CPU backend's straight implementation is the
// reference the others are compared with.
#pragma once

#include "gguf/file_bytes.h"
#include "model/backend_cache.h"
#include "model/hparams.h"
#include "model/weights.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace specula::internal {

using TensorId = int32_t;

// An activation tensor: `width` floats per batch row.
struct GraphTensor {
    std::string name;
    int32_t width = 0;
};

// Where an operation's keys and values live: the runner's KV cache (one layer of it), or a buffer the graph's
// executor owns (LongSpec's ring of recent positions and its tree slots: Graph::local_kv_slots rows).
enum class KvStore : uint8_t { Model, Local };

enum class OpKind : uint8_t {
    Embed,      // dst = rows tokens[r] of the table `weight`, as floats
    RmsNorm,    // dst = src / sqrt(mean(src^2) + eps) * weight (ggml's arithmetic: squares summed in double), over
                // the whole row, or (n_heads > 1) over each of its n_heads equal parts with one weight for all
    MatMul,     // dst = weight . src (one dot product per weight row; activations in the weight type's dot type)
    AddBias,    // dst += weight (an F32 vector of dst's width)
    Rope,       // dst's n_heads heads of head_dim rotated at the rows' positions (the graph's RoPE settings)
    StoreKv,    // src (keys) and src2 (values) rounded to the store's type, written to the batch's store runs
    Attention,  // dst = softmax(src . K^T * scale) V over each row's key list `keys` of the store (GQA: n_head / n_head_kv)
    SwiGlu,     // dst = silu(dst) * src
    Add,        // dst += src (the residual stream)
    GeGlu,      // dst = gelu(dst) * src, GELU with the tanh approximation (gemma's feed-forward)
    Scale,      // dst *= value (gemma's embeddings times sqrt(n_embd))
    SoftCap,    // dst = value * tanh(dst / value) (gemma2's final logits)
    LayerNorm,  // dst = (src - mean(src)) / sqrt(var(src) + eps) * weight (ggml's norm then mul: sums in double;
                // a bias is an AddBias after it: starcoder2)
    Gelu,       // dst = gelu(dst), the tanh approximation with ggml's CPU roundings to F16 (starcoder2's MLP)
    // Mixture of experts (as llama.cpp's build_moe_ffn): a row's route is its top_k experts and their weights.
    Route,      // dst = the route of src's router logits: softmax over the n experts (ggml's: exponentials summed in
                // double), the top_k largest (ties: the lower index first) as top_k expert indices (exact floats),
                // then their top_k probabilities, divided by their sum when norm_weights
    ExpertMatMul,  // dst's top_k slots = experts[route index j] . src (src: one input for every slot, or top_k
                   // inputs, one per slot); src2: the route. A backend groups a batch's rows by expert, so each
                   // selected expert's weights are read once per batch; a slot's arithmetic is MatMul's
    MixExperts, // dst = sum over j in order of weight_j * src's slot j (ggml's mul, then adds from slot 0 on);
                // src2: the route
    SigmoidGate,  // dst *= sigmoid(src[0]), one gate value per row (qwen2moe's shared expert), computed as
                  // llama.cpp does: silu(g) / g
};
constexpr int kOpKinds = 18;
const char *op_kind_name(OpKind kind);

struct Op {
    OpKind kind = OpKind::Add;
    TensorId dst = -1;
    TensorId src = -1;
    TensorId src2 = -1;                  // StoreKv: the values; ExpertMatMul, MixExperts: the route
    const WeightView *weight = nullptr;  // Embed: table; RmsNorm, LayerNorm: scale; MatMul: matrix; AddBias: bias
    float eps = 0.0f;                    // RmsNorm, LayerNorm
    int32_t n_heads = 0;                 // Rope: heads per row; RmsNorm: parts normed apart (0: the row)
    KvStore store = KvStore::Model;      // StoreKv, Attention
    int32_t kv_layer = 0;                // StoreKv, Attention: the layer of the store
    int32_t keys = 0;                    // Attention: which of the batch's key lists (BatchRows::lists)
    int32_t block = -1;                  // the model layer the operation belongs to: a cancel lands between layers
    float value = 0.0f;                  // Scale: the factor; SoftCap: the cap; Attention: a soft-cap of the scores
                                         // (gemma2: cap * tanh(score / cap) before the softmax; 0: none)
    // A sliding-window layer's operation (gemma3's local layers): Rope rotates with Graph::hp_sliding's settings,
    // Attention reads a windowed key list (each row's run starts at its window: BatchRows::run_from). A backend
    // that has not implemented these says so in its supports(op).
    bool sliding = false;
    // ExpertMatMul: the experts' matrices (n_experts of them, same shape); Route, ExpertMatMul, MixExperts: the
    // experts a row uses; Route: whether the chosen weights are renormalized to sum 1.
    const WeightView *experts = nullptr;
    int32_t n_experts = 0;
    int32_t top_k = 0;
    bool norm_weights = false;
};

// A file the graph's weights are views into: backends keep what they derive from its weights (the CPU's packed
// matrices, a GPU's uploaded copies) in its BackendCache or by its identity, and a weight belongs to the source
// whose bytes hold its data.
struct WeightSource {
    const FileBytes *bytes = nullptr;
    const BackendCache *cache = nullptr;
    std::shared_ptr<const void> owner;  // keeps the bytes (and the views into them) alive as long as the graph
    bool holds(const WeightView &w) const {
        return bytes != nullptr && w.data >= bytes->data() && w.data < bytes->data() + bytes->size();
    }
};

struct Graph {
    std::string name;                        // "llama", "qwen2", "longspec", ... (messages)
    HParams hp;                              // heads, head_dim and RoPE settings the operations use
    std::vector<float> rope_freq_factors;    // RoPE's per-frequency divisors (llama3; phi3: LongRoPE's for the
                                             // session's context), or empty
    float attention_scale = 1.0f;            // softmax scale of every Attention
    HParams hp_sliding;                      // the RoPE settings of sliding-window layers (Op::sliding)
    int32_t sliding_window = 0;              // keys a sliding layer's row sees (0: no such layer); runners plan
                                             // key list kSlidingKeys with it
    bool sliding_rope = false;               // some Rope is sliding (gemma): backends tabulate hp_sliding's angles
    std::vector<GraphTensor> tensors;
    // Op lists over the same tensors, run one at a time over a batch's rows (the target: the body, then the output
    // head over the rows whose logits are wanted; LongSpec: the ring's catch-up, then one tree level).
    std::vector<std::vector<Op>> stages;
    TensorId hidden = -1;                    // the rows the output head reads (the target: normed final states)
    TensorId logits = -1;                    // the rows of logits the last stage writes
    int32_t n_model_layers = 0;              // layers of the runner's cache the graph reads or writes
    int32_t local_kv_slots = 0;              // rows of the executor's own key/value buffer (0: none)
    std::vector<WeightSource> sources;

    TensorId add_tensor(const std::string &tensor_name, int32_t width) {
        tensors.push_back(GraphTensor{tensor_name, width});
        return TensorId(tensors.size() - 1);
    }
    TensorId find(const std::string &tensor_name) const;  // -1 when absent
    // Bytes of every tensor for batches of `rows` rows (F32).
    size_t activation_bytes(int32_t rows) const {
        size_t total = 0;
        for (const GraphTensor &t : tensors) total += size_t(rows) * size_t(t.width) * 4;
        return total;
    }
    // Every operation kind the graph uses (a backend refuses a graph with one it lacks).
    std::vector<OpKind> kinds() const;
    // The source holding w's bytes (nullptr for a view into none: a bug).
    const WeightSource *source_of(const WeightView &w) const;
    // Distinct weights of the stages (each once, by data), in first-use order, with whether an Embed gathers rows
    // of it (then its mapped pages stay needed even when a backend keeps a copy for matrix products).
    struct WeightUse {
        const WeightView *w;
        bool matrix;      // used by MatMul or Embed (else a vector: RmsNorm, AddBias)
        bool multiplied;  // used by MatMul
        bool gathered;    // used by Embed
    };
    std::vector<WeightUse> weights() const;
};

// A backend's value for every operation of every stage, [stage][op]: what an executor resolves once when it is made
// (a weight's packed or device copy), so that running a stage looks nothing up.
template <class T> using PerOp = std::vector<std::vector<T>>;
template <class T, class Fn> PerOp<T> per_op(const Graph &g, Fn value) {
    PerOp<T> out;
    for (const std::vector<Op> &stage : g.stages) {
        out.emplace_back();
        for (const Op &op : stage) out.back().push_back(value(op));
    }
    return out;
}
// Whether the operation reads its weight as a matrix (MatMul multiplies, Embed gathers rows) rather than as a vector.
inline bool reads_matrix(const Op &op) { return op.kind == OpKind::MatMul || op.kind == OpKind::Embed; }
// Bytes a backend needs for the graph's weights: matrix_bytes(w) for each matrix, F32 for each vector.
template <class Fn> size_t weight_bytes(const Graph &g, Fn matrix_bytes) {
    size_t total = 0;
    for (const Graph::WeightUse &u : g.weights()) total += u.matrix ? matrix_bytes(*u.w) : size_t(u.w->rows) * size_t(u.w->cols) * sizeof(float);
    return total;
}

// Appends ops to a stage, tagging each with the current layer (a builder's helper, so architectures read as a
// list of operations).
class GraphBuilder {
public:
    GraphBuilder(Graph &g, int32_t stage) : g_(g), stage_(size_t(stage)) {
        if (g_.stages.size() <= stage_) g_.stages.resize(stage_ + 1);
    }
    void layer(int32_t block) { block_ = block; }
    void embed(TensorId dst, const WeightView &table) { push(Op{OpKind::Embed, dst, -1, -1, &table}); }
    void rmsnorm(TensorId dst, TensorId src, const WeightView &scale, float eps) {
        Op op{OpKind::RmsNorm, dst, src, -1, &scale};
        op.eps = eps;
        push(op);
    }
    // Each of a row's n_heads heads normed apart (qwen3's query and key norms).
    void rmsnorm_heads(TensorId dst, TensorId src, const WeightView &scale, float eps, int32_t n_heads) {
        Op op{OpKind::RmsNorm, dst, src, -1, &scale};
        op.eps = eps;
        op.n_heads = n_heads;
        push(op);
    }
    void matmul(TensorId dst, TensorId src, const WeightView &w) { push(Op{OpKind::MatMul, dst, src, -1, &w}); }
    // Adds the bias when the model has it (optional tensors are absent views).
    void add_bias(TensorId dst, const WeightView &bias) {
        if (bias) push(Op{OpKind::AddBias, dst, -1, -1, &bias});
    }
    void rope(TensorId dst, int32_t n_heads) {
        Op op{OpKind::Rope, dst};
        op.n_heads = n_heads;
        push(op);
    }
    void store_kv(KvStore store, int32_t layer, TensorId k, TensorId v) {
        Op op{OpKind::StoreKv, -1, k, v};
        op.store = store;
        op.kv_layer = layer;
        push(op);
    }
    // softcap > 0: scores become softcap * tanh(score / softcap) before the softmax (gemma2).
    void attention(TensorId dst, TensorId q, KvStore store, int32_t layer, int32_t keys, float softcap = 0.0f) {
        push(attention_op(dst, q, store, layer, keys, softcap));
    }
    // A sliding-window layer's rotation (Graph::hp_sliding's settings).
    void rope_sliding(TensorId dst, int32_t n_heads) {
        Op op{OpKind::Rope, dst};
        op.n_heads = n_heads;
        op.sliding = true;
        push(op);
    }
    // Attention over the windowed key list of a sliding-window layer.
    void attention_sliding(TensorId dst, TensorId q, int32_t layer, int32_t keys, float softcap = 0.0f) {
        Op op = attention_op(dst, q, KvStore::Model, layer, keys, softcap);
        op.sliding = true;
        push(op);
    }
    void softcap(TensorId dst, float cap) {
        Op op{OpKind::SoftCap, dst};
        op.value = cap;
        push(op);
    }
    // LayerNorm over the whole row times `scale` (its bias: add_bias).
    void layernorm(TensorId dst, TensorId src, const WeightView &scale, float eps) {
        Op op{OpKind::LayerNorm, dst, src, -1, &scale};
        op.eps = eps;
        push(op);
    }
    void gelu(TensorId dst) { push(Op{OpKind::Gelu, dst}); }
    void swiglu(TensorId gate, TensorId up) { push(Op{OpKind::SwiGlu, gate, up}); }
    void geglu(TensorId gate, TensorId up) { push(Op{OpKind::GeGlu, gate, up}); }
    void scale(TensorId dst, float value) {
        Op op{OpKind::Scale, dst};
        op.value = value;
        push(op);
    }
    void add(TensorId dst, TensorId src) { push(Op{OpKind::Add, dst, src}); }
    // Mixture of experts: route (2 * top_k floats a row) from router logits; each slot's expert times the input;
    // the weighted sum of the slots; qwen2moe's sigmoid gate.
    void route(TensorId dst, TensorId logits, int32_t top_k, bool norm_weights) {
        Op op{OpKind::Route, dst, logits};
        op.top_k = top_k;
        op.norm_weights = norm_weights;
        push(op);
    }
    void expert_matmul(TensorId dst, TensorId src, TensorId route, const std::vector<WeightView> &experts, int32_t top_k) {
        Op op{OpKind::ExpertMatMul, dst, src, route};
        op.experts = experts.data();
        op.n_experts = int32_t(experts.size());
        op.top_k = top_k;
        push(op);
    }
    void mix_experts(TensorId dst, TensorId src, TensorId route, int32_t top_k) {
        Op op{OpKind::MixExperts, dst, src, route};
        op.top_k = top_k;
        push(op);
    }
    void sigmoid_gate(TensorId dst, TensorId gate) { push(Op{OpKind::SigmoidGate, dst, gate}); }

private:
    static Op attention_op(TensorId dst, TensorId q, KvStore store, int32_t layer, int32_t keys, float softcap) {
        Op op{OpKind::Attention, dst, q};
        op.store = store;
        op.kv_layer = layer;
        op.keys = keys;
        op.value = softcap;
        return op;
    }
    void push(Op op) {
        op.block = block_;
        g_.stages[stage_].push_back(op);
    }
    Graph &g_;
    size_t stage_;
    int32_t block_ = -1;
};

}  // namespace specula::internal
