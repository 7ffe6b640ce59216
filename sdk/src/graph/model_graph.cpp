#include "graph/model_graph.h"

#include "core/error.h"
#include "model/model.h"

#include <cmath>

namespace specula::internal {

std::shared_ptr<const Graph> build_model_graph(const std::shared_ptr<const Model> &model, int32_t n_ctx) {
    auto g = std::make_shared<Graph>();
    const HParams &hp = model->hparams();
    g->name = hp.arch_name;
    g->hp = hp;
    g->rope_freq_factors = model->weights().rope_freq_factors_for(hp, n_ctx);
    g->attention_scale = hp.attention_scale > 0.0f ? hp.attention_scale : 1.0f / std::sqrt(float(hp.head_dim));
    if (hp.n_swa > 0) {
        g->hp_sliding = hp.sliding_rope();
        g->sliding_window = hp.n_swa;
        g->sliding_rope = hp.swa_own_rope;
    }
    g->n_model_layers = hp.n_layer;
    g->sources.push_back(WeightSource{&model->file().bytes(), &model->backend_cache(), model});
    switch (hp.arch) {
    case Architecture::Llama:
    case Architecture::Qwen2:
    case Architecture::Qwen3:
    case Architecture::Qwen2Moe:
    case Architecture::Qwen3Moe:
    case Architecture::Phi3: build_llama_graph(*model, *g); break;
    case Architecture::Gemma2:
    case Architecture::Gemma3: build_gemma_graph(*model, *g); break;
    case Architecture::Starcoder2: build_starcoder2_graph(*model, *g); break;
    default: throw Error(SPECULA_ERR_UNSUPPORTED, "model: no graph for architecture '" + hp.arch_name + "'");
    }
    return g;
}

}  // namespace specula::internal
