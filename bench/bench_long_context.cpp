// How the CPU backend's costs grow with context, and what speculation gains there, measured in one run:
//   decode    ms per token with C tokens in the KV cache;
//   verify    ms of one tree of n nodes (a beam-shaped tree, as the drafters build) at C, and its ratio to decode;
//   draft     ms of one LongSpec draft round (--draft) at C, and its ratio to decode;
//   e2e       plain vs speculative greedy tokens/s after a real prompt of C tokens (--text; same tokens checked), per
//             drafter with a chain of 4, the default tree and auto (the session's choice each round).
//
//   bench_long_context --model M [--draft D] [--text FILE] [--contexts 1024,8192,32768] [--kv-type f16] [-t 2]
//
// Filling 32K tokens of cache through the model takes minutes on a few cores, so for decode/verify/draft the cache
// holds a real prompt of up to --real tokens, and the slots past it repeat those rows (what attention reads costs
// the same whatever the values). The end-to-end runs use only real text: they run at the contexts --text covers.
#include "backends/cpu/cpu_runner.h"
#include "backends/cpu/kv_cache.h"
#include "bench_common.h"
#include "machine_limits.h"
#include "common/session_run.h"
#include "model/model.h"
#include "session/session.h"
#include "speculative/draft_tree.h"
#include "speculative/longspec_draft_file.h"
#include "speculative/longspec_drafter.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

using namespace specula::internal;

namespace {

// A tree of n nodes below the root, level widths as the beam drafter's default (4, then 16 per level), each node
// a child of the best one above: what verification of an n-node budget evaluates.
DraftTree beam_tree(int32_t root, int32_t n, int32_t n_vocab, std::mt19937 &rng) {
    std::uniform_int_distribution<int32_t> tok(3, n_vocab - 1);
    DraftTree t;
    t.reset(root);
    std::vector<int32_t> level{0};
    int32_t left = n;
    for (int32_t depth = 0; left > 0; ++depth) {
        const int32_t width = std::min(left, depth == 0 ? 4 : 16);
        std::vector<int32_t> next;
        for (int32_t i = 0; i < width; ++i) {
            int32_t id = -1;
            while (id < 0) id = t.add(level[size_t(i) % level.size()], tok(rng));
            next.push_back(id);
        }
        left -= width;
        level = next;
    }
    return t;
}

KvType parse_kv(const std::string &s) { return s == "f32" ? KvType::F32 : s == "q8_0" ? KvType::Q8_0 : KvType::F16; }

}  // namespace

int main(int argc, char **argv) {
    CLI::App app{"Decode, verification and draft costs against context length, and speculative vs plain tokens/s"};
    std::string model_path, draft_path, text_path, kv = "f16", contexts_s = "1024,8192,32768", nodes_s = "1,2,4,8,16,32,69";
    int threads = 2, reps = 5, real = 1024, gen = 64;
    app.add_option("--model", model_path, "Target GGUF")->required();
    app.add_option("--draft", draft_path, "LongSpec draft of the target (draft round cost, e2e with it)");
    app.add_option("--text", text_path, "Real text for the prompt (e2e runs at the contexts it covers)");
    app.add_option("--contexts", contexts_s, "Context lengths")->capture_default_str();
    app.add_option("--nodes", nodes_s, "Tree sizes to verify")->capture_default_str();
    app.add_option("--kv-type", kv, "KV cache type")->check(CLI::IsMember({"f16", "f32", "q8_0"}))->capture_default_str();
    app.add_option("-t,--threads", threads)->capture_default_str();
    app.add_option("--reps", reps, "Repetitions per timing (median)")->capture_default_str();
    app.add_option("--real", real, "Real tokens evaluated into the cache before the repeated rows")->capture_default_str();
    app.add_option("-n,--gen", gen, "Tokens generated per e2e run")->capture_default_str();
    CLI11_PARSE(app, argc, argv);

    const auto model = Model::load(model_path, LoadOptions{});
    const HParams &hp = model->hparams();
    const std::vector<int32_t> contexts = bench::parse_int_list(contexts_s), nodes = bench::parse_int_list(nodes_s);
    std::shared_ptr<const LongSpecDraft> draft = draft_path.empty() ? nullptr : LongSpecDraft::load(draft_path, model);
    std::vector<int32_t> text_tokens;
    if (!text_path.empty()) {
        std::ifstream in(text_path, std::ios::binary);
        std::stringstream ss;
        ss << in.rdbuf();
        text_tokens = model->vocab().tokenize(ss.str(), true, false);
    }
    std::mt19937 rng(7);
    std::uniform_int_distribution<int32_t> tok(3, hp.n_vocab - 1);
    std::printf("model %s: %d layers, %d heads / %d KV heads x %d, KV %s, %d threads, %s\n", model_path.c_str(), hp.n_layer, hp.n_head,
                hp.n_head_kv, hp.head_dim, kv.c_str(), threads, bench::cpu_name().c_str());

    // The limits the figures are printed against, measured in this run (machine_limits.h).
    const double bandwidth = bench_limits::read_bandwidth(threads), peak = bench_limits::fma_peak(threads);
    const double weight_bytes = bench_limits::weight_bytes_per_token(*model);
    std::printf("machine: read bandwidth %.1f GB/s, F32 FMA peak %.0f GFLOP/s (%d threads); weights read per token %.0f MB\n", bandwidth, peak,
                threads, weight_bytes / 1e6);

    std::vector<float> logits(size_t(hp.n_vocab) * 70);
    for (const int32_t ctx : contexts) {
        CpuRunner r(model, ctx + 80, threads, parse_kv(kv));
        // The cache: real tokens, then their rows repeated up to ctx.
        const int32_t n_real = std::min(ctx, real);
        std::vector<int32_t> prompt(size_t(n_real) + 1);
        for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = i < text_tokens.size() ? text_tokens[i] : tok(rng);
        for (int32_t i = 0; i < n_real; i += 256) r.eval(prompt.data() + i, std::min(256, n_real - i), i, logits.data(), false);
        {
            std::vector<uint8_t> rows(size_t(n_real) * kv_row_bytes(r.kv_type(), r.kv_row_width()));
            for (int32_t layer = 0; layer < hp.n_layer; ++layer)
                for (int kind = 0; kind < 2; ++kind) {
                    r.read_kv(layer, KvPart(kind), 0, n_real, rows.data());
                    for (int32_t s = n_real; s < ctx; s += n_real) r.write_kv(layer, KvPart(kind), s, std::min(n_real, ctx - s), rows.data());
                }
        }
        const int32_t root = prompt.back();
        std::vector<double> t;
        for (int i = 0; i < reps; ++i) {
            const double t0 = bench::now_s();
            r.eval(&root, 1, ctx, logits.data(), false);
            t.push_back((bench::now_s() - t0) * 1e3);
        }
        const double decode = bench::median(t);
        // A step reads the weights and every layer's keys and values of ctx slots once; the attention of n rows
        // does 4 n x heads x ctx x head_dim flops per layer (scores and weighted values).
        const double kv_read = 2.0 * hp.n_layer * double(ctx) * double(kv_row_bytes(r.kv_type(), r.kv_row_width()));
        const double bytes_ms = (weight_bytes + kv_read) / (bandwidth * 1e9) * 1e3;
        auto attention_ms = [&](int32_t n) { return 4.0 * n * hp.n_layer * hp.n_head * double(ctx) * hp.head_dim / (peak * 1e9) * 1e3; };
        std::printf("\ncontext %6d: decode %8.2f ms/token (%.2f tokens/s); KV cache %.1f MB; bytes bound %.2f ms (%.2fx it: weights %.0f MB + KV "
                    "%.0f MB)\n",
                    ctx, decode, 1e3 / decode, r.kv_bytes() / 1e6, bytes_ms, decode / bytes_ms, weight_bytes / 1e6, kv_read / 1e6);
        for (const int32_t n : nodes) {
            const DraftTree tree = beam_tree(root, n - 1, hp.n_vocab, rng);  // n nodes with the root
            std::vector<uint8_t> mask;
            tree.ancestor_mask(mask);
            std::vector<int32_t> pos(size_t(tree.size()));
            for (int32_t i = 0; i < tree.size(); ++i) pos[size_t(i)] = ctx + tree.depth(i);
            t.clear();
            for (int i = 0; i < reps; ++i) {
                const double t0 = bench::now_s();
                r.eval_tree(tree.tokens().data(), tree.size(), ctx, 0, pos.data(), mask.data(), nullptr);
                t.push_back((bench::now_s() - t0) * 1e3);
            }
            const double v = bench::median(t);
            std::printf("  verify %2d nodes %8.2f ms  = %5.2fx decode; its attention's flops bound %.2f ms\n", tree.size(), v, v / decode,
                        attention_ms(tree.size()));
        }
        if (draft) {
            auto drafter = make_longspec_drafter(draft, 69, r);
            std::vector<int32_t> tokens(size_t(ctx) + 1);
            for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = prompt[i % prompt.size()];
            for (const TreeShape &shape : {TreeShape{{1, 1, 1, 1}}, TreeShape{}}) {
                t.clear();
                for (int i = 0; i < reps + 1; ++i) {
                    DraftTree tree;
                    tree.reset(tokens.back());
                    DraftRequest req;
                    req.tokens = tokens;
                    req.n_target_kv = ctx;
                    req.node_budget = 69;
                    req.shape = shape;
                    const double t0 = bench::now_s();
                    drafter->draft(req, tree);
                    if (i > 0) t.push_back((bench::now_s() - t0) * 1e3);  // the first catches the draft's ring up
                }
                const double d = bench::median(t);
                std::printf("  draft round, tree %-14s %8.2f ms  = %5.3fx decode; draft memory %zu bytes\n",
                            shape.is_chain() ? "1,1,1,1" : "4,16,16,16,16", d, d / decode, drafter->allocated_bytes());
            }
        }
        // End to end on real text only.
        if (int32_t(text_tokens.size()) < ctx) {
            std::printf("  e2e: skipped (--text gives %zu tokens, fewer than %d)\n", text_tokens.size(), ctx);
            continue;
        }
        SessionConfig sc;
        sc.n_ctx = ctx + gen + 80;
        sc.n_threads = threads;
        sc.n_batch = 256;
        sc.backend.kind = BackendKind::Cpu;
        sc.backend.kv_type = parse_kv(kv);
        SamplerConfig greedy;
        greedy.temperature = 0.0f;
        Session s(model, sc, greedy);
        const std::vector<int32_t> p(text_tokens.begin(), text_tokens.begin() + ctx);
        s.append_tokens(p.data(), p.size());
        auto run = [&](const char *name, const SpeculativeConfig *spec, const std::vector<int32_t> *want) {
            s.rewind(ctx);
            if (spec) s.set_speculative(*spec);
            const SpeculativeStats before = s.speculative_stats();
            const double t0 = bench::now_s();
            const std::vector<int32_t> out = test_sessions::generate_more(s, gen);
            const double secs = bench::now_s() - t0;
            const SpeculativeStats after = s.speculative_stats();
            const int32_t rounds = after.rounds - before.rounds;
            std::printf("  e2e %-22s %7.2f tokens/s", name, out.size() / secs);
            if (spec) std::printf("  tau %.2f (%d rounds)", rounds ? double(after.produced - before.produced) / rounds : 0.0, rounds);
            if (want) std::printf("  %s", out == *want ? "same tokens as plain" : "TOKENS DIFFER FROM PLAIN");
            std::printf("\n");
            return std::make_pair(out, secs);
        };
        // Prefill once (the first plain run evaluates the prompt); time the second.
        run("(prefill)", nullptr, nullptr);
        const auto plain = run("plain", nullptr, nullptr);
        SpeculativeConfig ngram;
        ngram.ngram = true;
        const auto ng = run("ngram", &ngram, &plain.first);
        ngram.auto_tree = true;
        ngram.shape_is_bound = false;
        const auto nga = run("ngram auto", &ngram, &plain.first);
        std::printf("      speedup ngram %.2fx, auto %.2fx (last %s)\n", plain.second / ng.second, plain.second / nga.second,
                    s.speculative_stats().tree.c_str());
        if (draft) {
            for (const char *label : {"1,1,1,1", "default", "auto"}) {
                SpeculativeConfig ls;
                ls.longspec = draft;
                ls.shape = std::string(label) == "1,1,1,1" ? TreeShape{{1, 1, 1, 1}} : TreeShape{};
                ls.auto_tree = std::string(label) == "auto";
                ls.shape_is_bound = false;
                const std::string name = std::string("longspec ") + label;
                const auto l = run(name.c_str(), &ls, &plain.first);
                ls.ngram = true;
                const auto m = run((name + "+ngram").c_str(), &ls, &plain.first);
                std::printf("      speedup %s %.2fx, merged %.2fx%s%s\n", name.c_str(), plain.second / l.second, plain.second / m.second,
                            ls.auto_tree ? " (merged's last tree " : "", ls.auto_tree ? (s.speculative_stats().tree + ")").c_str() : "");
            }
        }
        s.set_speculative(SpeculativeConfig{});
    }
    return 0;
}
