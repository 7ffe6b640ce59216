// The CUDA LongSpec drafter's levels as CUDA graphs (cuda_executor.cpp: a stage run with `replay`): each level's
// kernels are captured and replayed through cudaGraphExecUpdate unless SPECULA_CUDA_GRAPHS=0. The trees must be the
// same bit for bit either way (with the device top-k and from full logits), the graphs must really be replayed, and
// greedy speculative decoding must stay lossless. And the work a decode step and a draft round enqueue does not
// grow: the kernels and copies the hand-written passes launched before the graph executor.
#include "backends/cuda/cuda_runner.h"
#include "cuda_draft_fixtures.h"
#include "common/fixture_files.h"
#include "common/session_run.h"
#include "model/model.h"
#include "session/session.h"
#include "speculative/longspec_draft_file.h"
#include "speculative/longspec_drafter.h"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <vector>

using namespace specula::internal;
using namespace specula::internal::SPECULA_CUDA_NAMESPACE;
using namespace cuda_draft_fixtures;

namespace {

std::unique_ptr<CudaRunner> make_runner(const std::shared_ptr<const Model> &model, bool graphs) {
    setenv("SPECULA_CUDA_GRAPHS", graphs ? "1" : "0", 1);
    auto r = std::make_unique<CudaRunner>(model, 256, 0);
    unsetenv("SPECULA_CUDA_GRAPHS");
    return r;
}

#ifdef SPECULA_CUDA_EMULATION
uint64_t graph_launches() { return cuda_emulation::graph_launches(); }
uint64_t launches() { return cuda_emulation::launches(); }
#else
uint64_t graph_launches() { return 0; }
uint64_t launches() { return 0; }
#endif

}  // namespace

TEST_CASE("cuda: the LongSpec drafter's levels replayed as CUDA graphs build the same trees as without graphs", "[cuda][longspec][graphs]") {
    const auto model_path = source_dir() / "models/stories260K.gguf", draft_path = source_dir() / "models/drafts/stories260K.longspec.gguf";
    if (!test_fixtures::have_fixture(model_path) || !test_fixtures::have_fixture(draft_path)) return;
    const auto model = Model::load(model_path.string(), LoadOptions{});
    const auto draft = LongSpecDraft::load(draft_path.string(), model);
    const int32_t n_vocab = model->hparams().n_vocab;
    const std::vector<int32_t> context = story_prompt(*model, 61);
    std::vector<float> scratch(static_cast<size_t>(n_vocab));
    auto with = make_runner(model, true), without = make_runner(model, false);
    REQUIRE(with->graphs_enabled());
    REQUIRE_FALSE(without->graphs_enabled());
    REQUIRE(with->eval(context.data(), 60, 0, scratch.data(), false));
    REQUIRE(without->eval(context.data(), 60, 0, scratch.data(), false));
    for (const bool device_topk : {true, false}) {
        auto g = make_drafter(*with, draft, device_topk), p = make_drafter(*without, draft, device_topk);
        REQUIRE(g != nullptr);
        REQUIRE(p != nullptr);
        const size_t bytes = g->allocated_bytes();
        int32_t compared = 0, rounds = 0;
        // Several rounds per drafter, contexts growing and shrinking (the ring catches up and is reused), shapes
        // alternating (levels of 1 to 32 rows: the same instantiated graphs updated with other grids).
        for (int32_t n : {12, 13, 33, 34, 61, 20, 61}) {  // contexts of n tokens: the target's cache holds the first n - 1
            for (const TreeShape &shape : {TreeShape{}, TreeShape::chain(5), TreeShape{{32, 8}}, TreeShape{{2, 2, 2, 2, 2, 2, 2, 2}}}) {
                DraftRequest req;
                req.tokens = std::span<const int32_t>(context.data(), size_t(n));
                req.n_target_kv = n - 1;
                req.shape = shape;
                req.node_budget = 69;
                DraftTree a, b;
                a.reset(context[size_t(n - 1)]);
                b.reset(context[size_t(n - 1)]);
                const uint64_t graphs0 = graph_launches(), launches0 = launches();
                g->draft(req, a);
                const uint64_t graphs1 = graph_launches(), launches1 = launches();
                p->draft(req, b);
                const uint64_t graphs2 = graph_launches(), launches2 = launches();
                INFO("device top-k " << device_topk << ", context " << n << ", shape " << shape.to_string());
                CHECK(a.size() > 1);
                CHECK(a.tokens() == b.tokens());
                REQUIRE(a.size() == b.size());
                for (int32_t i = 1; i < a.size(); ++i) CHECK(a.parent(i) == b.parent(i));
#ifdef SPECULA_CUDA_EMULATION
                // Every level went through a graph with graphs on, none with them off; the graphs re-ran the
                // same kernels and copies as the direct launches.
                CHECK(graphs1 - graphs0 >= 1);
                CHECK(graphs2 - graphs1 == 0);
                CHECK(launches1 - launches0 == launches2 - launches1);
#endif
                (void)graphs0, (void)graphs1, (void)graphs2, (void)launches0, (void)launches1, (void)launches2;
                compared += a.size() - 1;
                ++rounds;
            }
        }
        CHECK(rounds == 28);
        CHECK(compared > 200);
        CHECK(g->allocated_bytes() == bytes);  // fixed at creation: nothing allocated for the graphs
    }
}

TEST_CASE("cuda: greedy speculative decoding with the LongSpec draft's levels as graphs equals plain greedy",
          "[cuda][longspec][graphs][lossless]") {
    const auto model_path = source_dir() / "models/stories260K.gguf", draft_path = source_dir() / "models/drafts/stories260K.longspec.gguf";
    if (!test_fixtures::have_fixture(model_path) || !test_fixtures::have_fixture(draft_path)) return;
    const auto model = Model::load(model_path.string(), LoadOptions{});
    SamplerConfig greedy;
    greedy.temperature = 0.0f;
    const SessionConfig sc = cuda_session_config();
    const std::vector<int32_t> prompt = story_prompt(*model, 20);
    const int32_t n = 32;
    setenv("SPECULA_CUDA_GRAPHS", "0", 1);
    std::vector<int32_t> expected;
    {
        Session plain(model, sc, greedy);
        expected = test_sessions::generate(plain, prompt, n);
    }
    unsetenv("SPECULA_CUDA_GRAPHS");
    SpeculativeConfig c;
    c.longspec = LongSpecDraft::load(draft_path.string(), model);
    std::vector<int32_t> produced[2];
    SpeculativeStats stats[2];
    for (int graphs = 0; graphs < 2; ++graphs) {
        setenv("SPECULA_CUDA_GRAPHS", graphs ? "1" : "0", 1);
        Session s(model, sc, greedy);
        s.set_speculative(c);
        const uint64_t graphs0 = graph_launches();
        produced[graphs] = test_sessions::generate(s, prompt, n);
        const uint64_t graphs1 = graph_launches();
        stats[graphs] = s.speculative_stats();
        unsetenv("SPECULA_CUDA_GRAPHS");
        INFO("graphs " << graphs);
        CHECK(produced[graphs] == expected);  // lossless either way
        CHECK(stats[graphs].rounds > 0);
#ifdef SPECULA_CUDA_EMULATION
        if (graphs) CHECK(graphs1 - graphs0 >= uint64_t(stats[graphs].rounds));  // at least a level per round
        else CHECK(graphs1 == graphs0);
#endif
        (void)graphs0, (void)graphs1;
    }
    // The same trees: the same rounds, drafted and accepted counts.
    CHECK(stats[0].rounds == stats[1].rounds);
    CHECK(stats[0].drafted == stats[1].drafted);
    CHECK(stats[0].accepted == stats[1].accepted);
    CHECK(stats[0].accepted_at_depth == stats[1].accepted_at_depth);
}

#ifdef SPECULA_CUDA_EMULATION  // the emulator counts launches; on a GPU the test does not exist
TEST_CASE("cuda: a decode step and a draft round launch what the hand-written passes launched", "[cuda][graphs]") {
    // code-7m in F16 (8 layers) with its trained draft: counted under the emulator for the passes written by hand
    // (b04d84e: 255 launches and copies per decode step; 277 for the first draft round of a 69-node tree, 264 for
    // the next), the same when the model and the draft's layer are graphs run by the executor.
    const auto model_path = source_dir() / "models/code-7m-f16.gguf", draft_path = source_dir() / "models/drafts/code-7m.longspec.gguf";
    if (!test_fixtures::have_fixture(model_path) || !test_fixtures::have_fixture(draft_path)) return;
    const auto model = Model::load(model_path.string(), LoadOptions{});
    const auto draft = LongSpecDraft::load(draft_path.string(), model);
    for (bool graphs : {true, false}) {
        INFO("CUDA graphs " << graphs);
        auto r = make_runner(model, graphs);
        std::vector<int32_t> toks;
        for (int i = 0; i < 40; ++i) toks.push_back(3 + (i * 37) % 1000);
        std::vector<float> logits(size_t(model->hparams().n_vocab));
        REQUIRE(r->eval(toks.data(), 39, 0, logits.data(), false));
        for (int step = 0; step < 3; ++step) {
            const uint64_t l0 = launches(), g0 = graph_launches();
            REQUIRE(r->eval(&toks[39], 1, 39 + step, logits.data(), false));
            CHECK(launches() - l0 == 255);
            CHECK(graph_launches() - g0 == (graphs ? 1 : 0));
        }
        auto d = make_longspec_drafter(draft, 68, *r);
        DraftRequest req;
        req.tokens = std::span<const int32_t>(toks.data(), 40);
        req.n_target_kv = 39;
        req.node_budget = 69;
        for (uint64_t expected : {277, 264}) {
            DraftTree t;
            t.reset(toks[39]);
            const uint64_t l0 = launches(), g0 = graph_launches();
            d->draft(req, t);
            CHECK(t.size() == 69);
            CHECK(launches() - l0 == expected);
            CHECK(graph_launches() - g0 == (graphs ? 5 : 0));  // one graph per level
        }
    }
}
#endif
