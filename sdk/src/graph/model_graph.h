// The target model's graph for its architecture (graph/graph.h): what every backend's runner executes. Stage
// kBody runs over every row of a batch and leaves the normed final states in graph.hidden; stage kHead maps rows of
// graph.hidden to graph.logits, run only for the rows whose logits are wanted (a prompt's last, a tree's visited).
// An architecture is one builder function (graph/llama_graph.cpp for llama, qwen2, qwen3 and phi3, gemma_graph.cpp for
// gemma2 and gemma3, starcoder2_graph.cpp); backends are not touched. docs/architectures.md lists them and their tests.
#pragma once

#include "graph/graph.h"

#include <memory>

namespace specula::internal {

class Model;

constexpr int32_t kBodyStage = 0;
constexpr int32_t kHeadStage = 1;

// For a session of n_ctx positions (LongRoPE's factors depend on it). Throws Error(UNSUPPORTED) for an architecture
// without a builder (read_hparams refuses those first).
std::shared_ptr<const Graph> build_model_graph(const std::shared_ptr<const Model> &model, int32_t n_ctx);

// The builders, one per family of architectures.
void build_llama_graph(const Model &model, Graph &g);
void build_gemma_graph(const Model &model, Graph &g);
void build_starcoder2_graph(const Model &model, Graph &g);

}  // namespace specula::internal
