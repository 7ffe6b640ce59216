// bench_cuda: the CUDA backend on a model at several context lengths, all in one run:
//   decode     one token per step (CUDA graph, argmax on the device), tokens/s
//   verify     a speculation tree (default [4,16,16,16,16] = 69 nodes) evaluated with the lazy LM head and the
//              depth + 1 rows a verifier reads, divided by one decode step (LongSpec's goal: <= 1.15 at 32K)
//   accept     after the tree's pass, sampling at T = 0.8 (top-k 40, top-p 0.95, min-p 0.05): the host verifier
//              (depth + 1 rows copied, the chain on each) against the walk on the device (verify_tree_on_device)
//   draft      one LongSpec draft round on the device (beam search on the host), per level, divided by one
//              target decode step (goal <= 0.08)
//   memory     the drafter's bytes at each context (must not change) and the session's device bytes
//   bandwidth  bytes a decode step must read (weights + the KV cache it attends) / step time, against the card's
//              peak and against a device-to-device copy measured here
// Timings are medians of --reps runs after a warm-up; nothing here asserts a timing.
#include "backends/cuda/cuda_devices.h"
#include "backends/cuda/cuda_runner.h"
#include "backends/cuda/device_buffer.h"
#include "backend/kv_type.h"
#include "bench_common.h"
#include "model/model.h"
#include "speculative/drafter.h"
#include "speculative/longspec_draft_file.h"
#include "speculative/longspec_drafter.h"
#include "speculative/tree_sampling_plan.h"
#include "speculative/verifier.h"
#include "tree_widths.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <sstream>

using namespace specula::internal;
using specula::internal::cuda::CudaRunner;
using specula::internal::cuda::TreeAttention;

namespace {

struct Args {
    std::string model;
    std::string contexts = "1024,8192,32768";
    std::string tree = "4,16,16,16,16";
    std::string draft;           // a LongSpec draft file; default: a random one written for the model
    int32_t draft_window = 512;
    int32_t decode = 32;
    int32_t reps = 10;
    int32_t threads = 8;
    int32_t prefill_batch = 256;
    int32_t prefill_max = 0;  // 0: prefill every context token; else prefill this many and tile their cache rows
    bool skip_draft = false;
};

std::vector<int32_t> parse_list(const std::string &s) {
    std::vector<int32_t> out;
    std::stringstream ss(s);
    for (std::string item; std::getline(ss, item, ',');) out.push_back(std::stoi(item));
    return out;
}

// A full beam tree of the given level widths: level l's nodes hang under the first nodes of level l - 1, as many
// per parent as the width allows (what a beam drafter builds when every beam survives).
DraftTree make_tree(const std::vector<int32_t> &widths, int32_t n_vocab, std::mt19937 &rng) {
    DraftTree t;
    t.reset(int32_t(rng() % uint32_t(n_vocab)));
    std::vector<int32_t> level = {0};
    for (int32_t width : widths) {
        std::vector<int32_t> next;
        for (int32_t k = 0; k < width; ++k) {
            const int32_t parent = level[size_t(k) % level.size()];
            int32_t child = -1;
            while (child < 0 || t.parent(child) != parent || std::find(next.begin(), next.end(), child) != next.end())
                child = t.add(parent, int32_t(rng() % uint32_t(n_vocab)));
            next.push_back(child);
        }
        level = next;
    }
    return t;
}

double copy_bandwidth_gbs() {
    const size_t bytes = size_t(1) << 30;
    cuda::DeviceBuffer a(bytes), b(bytes);
    cudaMemset(a.as(), 1, bytes);
    cudaMemcpy(b.as(), a.as(), bytes, cudaMemcpyDeviceToDevice);
    cudaDeviceSynchronize();
    std::vector<double> t;
    for (int i = 0; i < 5; ++i) {
        const double t0 = bench::now_s();
        cudaMemcpy(b.as(), a.as(), bytes, cudaMemcpyDeviceToDevice);
        cudaDeviceSynchronize();
        t.push_back(bench::now_s() - t0);
    }
    return 2.0 * double(bytes) / bench::median(t) / 1e9;  // read + write
}

}  // namespace

int main(int argc, char **argv) {
    Args a;
    CLI::App app{"bench_cuda: decode, tree verification and drafting on the CUDA backend at several contexts"};
    app.add_option("--model", a.model, "GGUF model (e.g. from `specula synth --shape llama-3.1-8b --type f16`)")->required()->check(CLI::ExistingFile);
    app.add_option("--contexts", a.contexts, "context lengths, comma-separated")->capture_default_str();
    app.add_option("--tree", a.tree, "verification tree widths per level")->capture_default_str();
    app.add_option("--draft", a.draft, "LongSpec draft for the model (default: random weights, --draft-window)");
    app.add_option("--draft-window", a.draft_window, "window of the random draft")->capture_default_str();
    app.add_option("--decode", a.decode, "decode steps timed per context")->capture_default_str()->check(CLI::Range(2, 100000));
    app.add_option("--reps", a.reps, "repetitions of the verify and draft timings")->capture_default_str()->check(CLI::Range(1, 1000));
    app.add_option("--threads", a.threads, "CPU threads (the drafter)")->capture_default_str()->check(CLI::Range(1, 512));
    app.add_option("--prefill-batch", a.prefill_batch, "tokens per prefill pass")->capture_default_str()->check(CLI::Range(1, 4096));
    app.add_option("--prefill-max", a.prefill_max,
                   "prefill at most this many tokens of a context and fill the rest of its cache by repeating their K/V rows "
                   "(timings do not depend on the cache's values; 0: prefill it all)")
        ->capture_default_str()
        ->check(CLI::Range(0, 1 << 22));
    app.add_flag("--skip-draft", a.skip_draft, "do not time the LongSpec drafter");
    CLI11_PARSE(app, argc, argv);

    try {
        std::string reason;
        const auto devices = cuda::list_devices(&reason);
        if (devices.empty()) {
            std::fprintf(stderr, "bench_cuda: no CUDA device: %s\n", reason.c_str());
            return 2;
        }
        const DeviceInfo &dev = devices[0];
        const auto model = Model::load(a.model, LoadOptions{});
        const HParams &hp = model->hparams();
        const std::vector<int32_t> widths = specula_apps::parse_tree_widths(a.tree);
        std::printf("specula bench_cuda | %s, compute %d.%d, %d SMs, %.0f GiB, peak %.0f GB/s | %s\n", dev.name.c_str(), dev.compute_major,
                    dev.compute_minor, dev.multiprocessors, double(dev.total_memory) / double(1ull << 30), dev.peak_bandwidth_gbs,
                    bench::cpu_name().c_str());
        std::printf("model: %s (%s, %s, %d layers, n_embd %d, vocab %d, %.2fB params)\n", a.model.c_str(), hp.arch_name.c_str(), model->weight_type(),
                    hp.n_layer, hp.n_embd, hp.n_vocab, double(model->n_params()) / 1e9);
        const double copy_gbs = copy_bandwidth_gbs();
        std::printf("device-to-device copy: %.0f GB/s (read + write)\n", copy_gbs);

        std::shared_ptr<const LongSpecDraft> draft;
        std::filesystem::path temp_draft;
        if (!a.skip_draft) {
            if (a.draft.empty()) {
                temp_draft = std::filesystem::temp_directory_path() / ("bench-cuda-draft-" + std::to_string(::getpid()) + ".gguf");
                RandomDraftOptions opt;
                opt.window = a.draft_window;
                write_random_longspec_draft(*model, temp_draft.string(), opt);
                draft = LongSpecDraft::load(temp_draft.string(), model);
                std::filesystem::remove(temp_draft);
            } else {
                draft = LongSpecDraft::load(a.draft, model);
            }
        }

        std::mt19937 rng(7);
        {
            // Prefill through cuBLAS against our batch-invariant kernels, same prompt, same batches, one run each
            // (after a warm-up pass that pays for cuBLAS's first-call set-up).
            const int32_t n = std::min(1024, parse_list(a.contexts).front());
            std::vector<int32_t> prompt(static_cast<size_t>(n));
            for (int32_t &t : prompt) t = int32_t(rng() % uint32_t(hp.n_vocab));
            std::vector<float> logits(static_cast<size_t>(hp.n_vocab));
            auto prefill_tok_s = [&](CudaRunner &r) {
                r.eval(prompt.data(), std::min(n, a.prefill_batch), 0, logits.data(), false);  // warm-up
                cudaDeviceSynchronize();
                const double t0 = bench::now_s();
                for (int32_t i = 0; i < n; i += a.prefill_batch) r.eval(prompt.data() + i, std::min(a.prefill_batch, n - i), i, logits.data(), false);
                return double(n) / (bench::now_s() - t0);
            };
            CudaRunner fast(model, n + 8, 0);
            setenv("SPECULA_CUDA_CUBLAS", "0", 1);
            CudaRunner invariant(model, n + 8, 0);
            unsetenv("SPECULA_CUDA_CUBLAS");
            const double fast_tps = prefill_tok_s(fast), inv_tps = prefill_tok_s(invariant);
            std::printf("prefill of %d tokens in batches of %d: %s %.0f tok/s, batch-invariant kernels %.0f tok/s: %.2fx\n", n, a.prefill_batch,
                        fast.prefill_library() ? (std::string("cuBLAS (") + fast.prefill_library() + ")").c_str() : fast.prefill_note().c_str(),
                        fast_tps, inv_tps, fast_tps / inv_tps);
        }
        const DraftTree tree = make_tree(widths, hp.n_vocab, rng);
        std::printf("tree: [%s] = %d nodes, depth %d\n", a.tree.c_str(), tree.size(), tree.max_depth());
        if (a.prefill_max > 0)
            std::printf("contexts above %d tokens: that many prefilled (the prefill column), the rest of the cache their rows repeated\n",
                        a.prefill_max);
        std::printf("\n");
        std::printf("| context | prefill tok/s | decode ms | decode tok/s | verify ms (exact) | verify/decode | verify ms (hybrid) | hybrid/decode "
                    "| accept ms, host | accept ms, device | draft ms/level | draft round/decode | draft round ms, host top-k | host/device top-k | drafter bytes | session device MiB "
                    "| decode GB/s | of peak |\n");
        std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");

        for (const int32_t ctx : parse_list(a.contexts)) {
            const int32_t n_ctx = ctx + tree.size() + a.decode + 8;
            CudaRunner runner(model, n_ctx, 0);
            std::vector<int32_t> prompt(static_cast<size_t>(ctx));
            for (int32_t &t : prompt) t = int32_t(rng() % uint32_t(hp.n_vocab));
            std::vector<float> logits(static_cast<size_t>(hp.n_vocab));
            // Prefill.
            const int32_t prefilled = a.prefill_max > 0 ? std::min(ctx, a.prefill_max) : ctx;
            const double p0 = bench::now_s();
            for (int32_t i = 0; i < prefilled; i += a.prefill_batch) {
                const int32_t n = std::min(a.prefill_batch, prefilled - i);
                runner.eval(prompt.data() + i, n, i, logits.data(), false);
            }
            const double prefill_s = bench::now_s() - p0;
            if (prefilled < ctx) {
                // The rest of the cache: the prefilled rows again, block after block (a 32K prefill through the
                // attention kernels took longer than a device call could spare on the first GPU run).
                const size_t row = kv_row_bytes(runner.kv_type(), runner.kv_row_width());
                std::vector<uint8_t> rows(size_t(prefilled) * row);
                for (int32_t layer = 0; layer < hp.n_layer; ++layer)
                    for (const KvPart part : {KvPart::Keys, KvPart::Values}) {
                        runner.read_kv(layer, part, 0, prefilled, rows.data());
                        for (int32_t at = prefilled; at < ctx; at += prefilled)
                            runner.write_kv(layer, part, at, std::min(prefilled, ctx - at), rows.data());
                    }
            }
            // Decode: greedy on the device, one token fed back per step.
            int32_t token = prompt.back(), n_past = ctx;
            std::vector<double> steps;
            for (int32_t i = 0; i < a.decode; ++i) {
                const double t0 = bench::now_s();
                runner.eval_argmax(&token, 1, n_past, &token);
                steps.push_back(bench::now_s() - t0);
                ++n_past;
            }
            steps.erase(steps.begin());  // graph instantiation
            const double decode_s = bench::median(steps);
            // Verify: the tree after the context, lazy head, depth + 1 rows of logits.
            std::vector<uint8_t> mask;
            tree.ancestor_mask(mask);
            std::vector<int32_t> positions(static_cast<size_t>(tree.size()));
            for (int32_t i = 0; i < tree.size(); ++i) positions[size_t(i)] = n_past + tree.depth(i);
            auto verify = [&](TreeAttention mode) {
                runner.set_tree_attention(mode);
                std::vector<double> t;
                for (int32_t r = 0; r <= a.reps; ++r) {
                    const double t0 = bench::now_s();
                    runner.eval_tree(tree.tokens().data(), tree.size(), n_past, 0, positions.data(), mask.data(), nullptr);
                    for (int32_t d = 0; d <= tree.max_depth(); ++d) runner.tree_logits(d, logits.data());
                    if (r > 0) t.push_back(bench::now_s() - t0);
                }
                return bench::median(t);
            };
            const double verify_exact = verify(TreeAttention::Exact), verify_hybrid = verify(TreeAttention::Hybrid);
            runner.set_tree_attention(TreeAttention::Exact);
            // Accept: the same tree's rows, sampled. The host verifier copies each visited row and runs the chain
            // on it; the device walk gets the plan and returns the path. Random logits: mostly the root's row only,
            // so the host side is timed on all depth + 1 rows (a fully accepted round), the device on its walk.
            double accept_host = 0, accept_device = 0;
            {
                SamplerConfig sc;
                sc.temperature = 0.8f;
                sc.top_k = 40;
                sc.top_p = 0.95f;
                sc.min_p = 0.05f;
                Sampler sampler(sc);
                std::vector<int32_t> context(static_cast<size_t>(n_past) + 1, 1);
                runner.eval_tree(tree.tokens().data(), tree.size(), n_past, 0, positions.data(), mask.data(), nullptr);
                std::vector<double> th, td;
                for (int32_t r = 0; r <= a.reps; ++r) {
                    double t0 = bench::now_s();
                    for (int32_t d = 0; d <= tree.max_depth(); ++d) {
                        runner.tree_logits(d, logits.data());
                        (void)sampler.sample(logits.data(), hp.n_vocab, context);
                    }
                    if (r > 0) th.push_back(bench::now_s() - t0);
                    t0 = bench::now_s();
                    TreeSamplingPlan plan;
                    VerifyOutcome outcome;
                    const bool ok = plan_tree_sampling(tree, sampler, context, hp.n_vocab, plan) && runner.verify_tree_on_device(plan, outcome);
                    if (r > 0 && ok) td.push_back(bench::now_s() - t0);
                }
                accept_host = bench::median(th);
                accept_device = td.empty() ? 0.0 : bench::median(td);
            }
            // Draft: one round of the LongSpec drafter over the same context.
            double draft_level_s = 0, draft_round_s = 0, draft_round_full_s = 0;
            size_t drafter_bytes = 0;
            // One drafter with each level's top-k on the device (the default), one copying full logits rows to the
            // host for the beam search (SPECULA_CUDA_DEVICE_TOPK=0, read when the drafter is made): same rounds.
            for (const bool device_topk : {false, true}) {
                if (!draft) break;
                if (!device_topk) setenv("SPECULA_CUDA_DEVICE_TOPK", "0", 1);
                auto drafter = make_longspec_drafter(draft, tree.size() - 1, runner);
                unsetenv("SPECULA_CUDA_DEVICE_TOPK");
                std::vector<int32_t> context(prompt.begin(), prompt.end());
                context.resize(static_cast<size_t>(n_past), 0);  // the decoded tokens' ids do not matter here
                context.push_back(token);
                DraftRequest req;
                req.tokens = context;
                req.n_target_kv = n_past;
                req.shape = TreeShape{widths};
                req.node_budget = tree.size();
                std::vector<double> t;
                for (int32_t r = 0; r <= std::min(a.reps, 3); ++r) {
                    DraftTree out;
                    out.reset(token);
                    const double t0 = bench::now_s();
                    drafter->draft(req, out);
                    if (r > 0) t.push_back(bench::now_s() - t0);
                }
                (device_topk ? draft_round_s : draft_round_full_s) = bench::median(t);
                draft_level_s = draft_round_s / double(widths.size());
                drafter_bytes = drafter->allocated_bytes();
            }
            const double kv_read = 2.0 * double(hp.n_layer) * double(ctx) * double(hp.n_embd_kv()) * 2.0;
            const double gbs = (double(runner.weight_bytes()) + kv_read) / decode_s / 1e9;
            std::printf("| %d | %.0f | %.3f | %.1f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %s | %s | %s | %s | %zu | %.0f | %.0f | %.0f%% |\n", ctx,
                        double(prefilled) / prefill_s, decode_s * 1e3, 1.0 / decode_s, verify_exact * 1e3, verify_exact / decode_s, verify_hybrid * 1e3,
                        verify_hybrid / decode_s, accept_host * 1e3, accept_device * 1e3, draft ? bench::fmt(draft_level_s * 1e3, "%.3f").c_str() : "-",
                        draft ? bench::fmt(draft_round_s / decode_s, "%.3f").c_str() : "-",
                        draft ? bench::fmt(draft_round_full_s * 1e3, "%.3f").c_str() : "-",
                        draft ? bench::fmt(draft_round_full_s / draft_round_s, "%.2f").c_str() : "-",
                        drafter_bytes, double(runner.session_device_bytes()) / double(1 << 20), gbs,
                        dev.peak_bandwidth_gbs > 0 ? 100.0 * gbs / dev.peak_bandwidth_gbs : 0.0);
            std::fflush(stdout);
        }
        std::printf("\nweights on the device: %.2f GiB; decode GB/s counts the weights plus the K/V the step attends.\n",
                    double(CudaRunner(model, 64, 0).weight_bytes()) / double(1ull << 30));
    } catch (const std::exception &e) {
        std::fprintf(stderr, "bench_cuda: %s\n", e.what());
        return 1;
    }
    return 0;
}
