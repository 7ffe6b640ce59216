// bench_backends: the same model on each backend of the registry, side by side in one run:
//   decode   one token per step with its logits copied to the host (what a session does), tokens/s
//   verify   a 16-node speculation tree (a binary tree, depth 4) evaluated with the lazy LM head and the depth + 1
//            rows a verifier reads, divided by one decode step on the same backend
// at the context lengths given (the prompt is prefilled first). Medians of --reps runs after a warm-up; nothing
// here asserts a timing. On CI's lavapipe the Vulkan figures are a software rasterizer's, not a GPU's: the figures
// that matter come from a machine with a GPU (bench/gpu/run.sh runs this with --backends cuda,vulkan).
//
//   bench_backends -m model.gguf [--backends cpu,vulkan,cuda] [--contexts 1024,8192] [--reps 10]
#include "backend/backend_registry.h"
#include "graph/model_graph.h"
#include "bench_common.h"
#include "core/thread_pool.h"
#include "model/model.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <random>
#include <sstream>

using namespace specula::internal;

namespace {

std::vector<std::string> split(const std::string &s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    for (std::string item; std::getline(ss, item, ',');) out.push_back(item);
    return out;
}

}  // namespace

int main(int argc, char **argv) {
    std::string model_path, backends = "cpu,cuda,vulkan", contexts = "1024";
    int reps = 10, threads = 2, decode = 16;
    CLI::App app{"Decode speed and 16-node verification cost of each backend on one model"};
    app.add_option("-m,--model", model_path, "GGUF model")->required();
    app.add_option("--backends", backends, "Comma-separated backends to run (those without a device are reported and skipped)");
    app.add_option("--contexts", contexts, "Comma-separated prompt lengths to measure at");
    app.add_option("--reps", reps, "Timed repetitions (median reported)");
    app.add_option("--decode", decode, "Decode steps per repetition");
    app.add_option("-t,--threads", threads, "CPU threads");
    CLI11_PARSE(app, argc, argv);

    std::shared_ptr<const Model> model;
    try {
        model = Model::load(model_path, LoadOptions{});
    } catch (const std::exception &e) {
        std::fprintf(stderr, "bench_backends: %s\n", e.what());
        return 1;
    }
    const HParams &hp = model->hparams();
    std::printf("model %s: %d layers, n_embd %d, vocab %d\n", model_path.c_str(), hp.n_layer, hp.n_embd, hp.n_vocab);
    // The tree: node i's parent is (i - 1) / 2 (a binary tree of 16 nodes, depth 4); the verifier reads one path.
    const int32_t n_tree = 16;
    std::vector<int32_t> parent(n_tree), depth(n_tree, 0);
    for (int32_t i = 1; i < n_tree; ++i) {
        parent[size_t(i)] = (i - 1) / 2;
        depth[size_t(i)] = depth[size_t(parent[size_t(i)])] + 1;
    }
    std::vector<uint8_t> mask(size_t(n_tree) * n_tree, 0);
    for (int32_t i = 0; i < n_tree; ++i)
        for (int32_t j = i; j >= 0; j = j == 0 ? -1 : parent[size_t(j)]) mask[size_t(i) * n_tree + size_t(j)] = 1;
    std::vector<int32_t> path;
    for (int32_t j = n_tree - 1; j >= 0; j = j == 0 ? -1 : parent[size_t(j)]) path.push_back(j);

    ThreadPool pool(threads);
    std::mt19937 rng(1);
    std::printf("%-8s %8s %12s %14s %12s\n", "backend", "context", "decode tok/s", "verify 16 (ms)", "verify/decode");
    for (const std::string &name : split(backends)) {
        const BackendDesc *desc = nullptr;
        for (const BackendDesc &b : builtin_backends())
            if (name == b.name) desc = &b;
        if (desc == nullptr) {
            std::printf("%-8s not built into this library\n", name.c_str());
            continue;
        }
        std::string why;
        if (desc->has_devices && desc->devices(&why).empty()) {
            std::printf("%-8s no device: %s\n", name.c_str(), why.c_str());
            continue;
        }
        for (const std::string &c : split(contexts)) {
            const int32_t n_prompt = std::stoi(c), n_ctx = n_prompt + decode * (reps + 1) + n_tree + 8;
            std::unique_ptr<TargetRunner> runner;
            try {
                runner = desc->make_runner(RunnerRequest{model, build_model_graph(model, n_ctx), n_ctx, &pool, 0, std::nullopt});
            } catch (const std::exception &e) {
                std::printf("%-8s %8d refused: %s\n", name.c_str(), n_prompt, e.what());
                continue;
            }
            std::uniform_int_distribution<int32_t> tok(3, hp.n_vocab - 1);
            std::vector<int32_t> prompt(static_cast<size_t>(n_prompt));
            for (int32_t &t : prompt) t = tok(rng);
            std::vector<float> logits(static_cast<size_t>(hp.n_vocab));
            runner->eval(prompt.data(), n_prompt, 0, logits.data(), false);
            int32_t n_past = n_prompt;
            std::vector<double> step_s, verify_s;
            std::vector<int32_t> tree_tokens(n_tree), positions(n_tree);
            for (int r = 0; r <= reps; ++r) {
                const double t0 = bench::now_s();
                for (int i = 0; i < decode; ++i) {
                    const int32_t t = tok(rng);
                    runner->eval(&t, 1, n_past++, logits.data(), false);
                }
                const double t1 = bench::now_s();
                for (int32_t i = 0; i < n_tree; ++i) {
                    tree_tokens[size_t(i)] = tok(rng);
                    positions[size_t(i)] = n_past + depth[size_t(i)];
                }
                runner->eval_tree(tree_tokens.data(), n_tree, n_past, 0, positions.data(), mask.data(), nullptr);
                for (int32_t node : path) runner->tree_logits(node, logits.data());
                const double t2 = bench::now_s();
                if (r == 0) continue;  // warm-up
                step_s.push_back((t1 - t0) / decode);
                verify_s.push_back(t2 - t1);
            }
            const double step = bench::median(step_s), verify = bench::median(verify_s);
            std::printf("%-8s %8d %12.1f %14.3f %12.2f\n", name.c_str(), n_prompt, 1.0 / step, verify * 1e3, verify / step);
        }
    }
    return 0;
}
