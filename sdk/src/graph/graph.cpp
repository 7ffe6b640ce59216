#include "graph/graph.h"

#include <algorithm>
#include <unordered_map>

namespace specula::internal {

const char *op_kind_name(OpKind kind) {
    switch (kind) {
    case OpKind::Embed: return "embed";
    case OpKind::RmsNorm: return "rms_norm";
    case OpKind::MatMul: return "mat_mul";
    case OpKind::AddBias: return "add_bias";
    case OpKind::Rope: return "rope";
    case OpKind::StoreKv: return "store_kv";
    case OpKind::Attention: return "attention";
    case OpKind::SwiGlu: return "swiglu";
    case OpKind::Add: return "add";
    case OpKind::GeGlu: return "geglu";
    case OpKind::Scale: return "scale";
    case OpKind::SoftCap: return "soft_cap";
    case OpKind::LayerNorm: return "layer_norm";
    case OpKind::Gelu: return "gelu";
    case OpKind::Route: return "route";
    case OpKind::ExpertMatMul: return "expert_mat_mul";
    case OpKind::MixExperts: return "mix_experts";
    case OpKind::SigmoidGate: return "sigmoid_gate";
    }
    return "?";
}

TensorId Graph::find(const std::string &tensor_name) const {
    for (size_t i = 0; i < tensors.size(); ++i)
        if (tensors[i].name == tensor_name) return TensorId(i);
    return -1;
}

std::vector<OpKind> Graph::kinds() const {
    bool seen[kOpKinds] = {};
    for (const std::vector<Op> &stage : stages)
        for (const Op &op : stage) seen[size_t(op.kind)] = true;
    std::vector<OpKind> out;
    for (int k = 0; k < kOpKinds; ++k)
        if (seen[k]) out.push_back(OpKind(k));
    return out;
}

const WeightSource *Graph::source_of(const WeightView &w) const {
    for (const WeightSource &s : sources)
        if (s.holds(w)) return &s;
    return nullptr;
}

std::vector<Graph::WeightUse> Graph::weights() const {
    std::vector<WeightUse> out;
    std::unordered_map<const uint8_t *, size_t> at;
    for (const std::vector<Op> &stage : stages)
        for (const Op &op : stage) {
            for (int32_t e = 0; e < op.n_experts; ++e) {  // an expert's matrix: multiplied, never gathered
                const auto [it, fresh] = at.emplace(op.experts[e].data, out.size());
                if (fresh) out.push_back(WeightUse{&op.experts[e], true, true, false});
                out[it->second].matrix = out[it->second].multiplied = true;
            }
            if (op.weight == nullptr || !*op.weight) continue;
            const bool matrix = op.kind == OpKind::MatMul || op.kind == OpKind::Embed;
            const auto [it, fresh] = at.emplace(op.weight->data, out.size());
            if (fresh) out.push_back(WeightUse{op.weight, matrix, false, false});
            WeightUse &use = out[it->second];
            use.matrix = use.matrix || matrix;
            use.multiplied = use.multiplied || op.kind == OpKind::MatMul;
            use.gathered = use.gathered || op.kind == OpKind::Embed;
        }
    return out;
}

}  // namespace specula::internal
