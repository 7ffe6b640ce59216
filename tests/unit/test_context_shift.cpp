// The context shift (backend/kv_shift.h, session.h ContextShift): moved keys equal the keys evaluated at
// their new positions (in layer 0, where a row depends only on its token and position), kept rows stay as they
// were, and generation through many shifts is lossless: greedy speculative output equals plain greedy output with
// the same policy, for every drafter and KV type, and speculation goes on accepting after each shift.
#include "backends/cpu/cpu_runner.h"
#include "backends/cpu/kv_view.h"
#include "common/fixture_files.h"
#include "common/session_run.h"
#include "common/test_inputs.h"
#include "common/test_scale.h"
#include "model/synthetic_model.h"
#include "session/session.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

using namespace specula::internal;

namespace {

std::shared_ptr<const Model> load_fixture(const std::string &rel) {
    const auto path = test_fixtures::fixtures_dir() / rel;
    if (!test_fixtures::have_fixture(path)) return nullptr;
    return Model::load(path.string(), LoadOptions{});
}

// Slots [0, n) of one layer's keys (kind 0) or values (kind 1) as floats.
std::vector<float> rows_as_floats(TargetRunner &runner, int32_t layer, int kind, int32_t n) {
    const int32_t width = runner.kv_row_width();
    const size_t row_bytes = kv_row_bytes(runner.kv_type(), width);
    std::vector<uint8_t> bytes(size_t(n) * row_bytes);
    runner.read_kv(layer, KvPart(kind), 0, n, bytes.data());
    std::vector<float> out(size_t(n) * size_t(width));
    kv_load_head(KvView{bytes.data(), runner.kv_type(), row_bytes}, 0, nullptr, n, 0, width, out.data());
    return out;
}

std::vector<uint8_t> raw_rows(TargetRunner &runner, int32_t layer, int kind, int32_t n) {
    std::vector<uint8_t> bytes(size_t(n) * kv_row_bytes(runner.kv_type(), runner.kv_row_width()));
    runner.read_kv(layer, KvPart(kind), 0, n, bytes.data());
    return bytes;
}

void eval_all(CpuRunner &runner, const Model &model, const std::vector<int32_t> &tokens) {
    std::vector<float> logits(size_t(model.hparams().n_vocab));
    for (int32_t done = 0; done < int32_t(tokens.size());) {
        const int32_t n = std::min<int32_t>(32, int32_t(tokens.size()) - done);
        REQUIRE(runner.eval(tokens.data() + done, n, done, logits.data(), false));
        done += n;
    }
}

}  // namespace

TEST_CASE("a context shift moves layer 0's keys to their new positions and keeps the sinks", "[shift]") {
    const char *const models[] = {"models/stories260K.gguf", "models/synth-qwen2-bias-f32.gguf", "models/synth-llama-gqa-f16.gguf"};
    for (const char *rel : models) {
        const auto model = load_fixture(rel);
        if (!model) continue;
        const HParams &hp = model->hparams();
        for (const KvType type : {KvType::F32, KvType::F16, KvType::Q8_0}) {
            if (!kv_type_fits(type, hp.n_embd_kv())) continue;
            CAPTURE(rel, kv_type_name(type));
            constexpr int32_t n_ctx = 160, n_used = 150, keep = 4, discard = 70;
            const std::vector<int32_t> tokens = test_inputs::model_text_prompt(*model, n_used);
            CpuRunner shifted(model, n_ctx, 2, type);
            eval_all(shifted, *model, tokens);
            std::vector<std::vector<uint8_t>> sinks;
            for (int32_t l = 0; l < hp.n_layer; ++l) sinks.push_back(raw_rows(shifted, l, 0, keep));
            shifted.shift_kv(keep, discard, n_used);

            // The same window evaluated from scratch at its new positions.
            std::vector<int32_t> window(tokens.begin(), tokens.begin() + keep);
            window.insert(window.end(), tokens.begin() + keep + discard, tokens.end());
            CpuRunner fresh(model, n_ctx, 2, type);
            eval_all(fresh, *model, window);
            const int32_t n = int32_t(window.size());

            // Values do not depend on position: moved as stored, bit for bit.
            CHECK(raw_rows(shifted, 0, 1, n) == raw_rows(fresh, 0, 1, n));
            // Keys: rotated back by the shift, equal to evaluating them there up to the rounding of the rotation
            // (and of storing the result again: an F16 ulp, a Q8_0 step of the block's scale).
            const std::vector<float> got = rows_as_floats(shifted, 0, 0, n), want = rows_as_floats(fresh, 0, 0, n);
            double max_abs = 0, max_err = 0;
            for (size_t i = 0; i < got.size(); ++i) {
                max_abs = std::max(max_abs, double(std::fabs(want[i])));
                max_err = std::max(max_err, double(std::fabs(got[i] - want[i])));
            }
            const double tolerance = type == KvType::F32 ? 1e-4 : type == KvType::F16 ? 2e-3 : 2.5e-2;
            CAPTURE(max_abs, max_err);
            CHECK(max_abs > 0.01);
            CHECK(max_err <= tolerance * max_abs);
            // Keys that were not moved are untouched in every layer.
            for (int32_t l = 0; l < hp.n_layer; ++l) CHECK(raw_rows(shifted, l, 0, keep) == sinks[size_t(l)]);
        }
    }
}

namespace {

// A context shift on an F32 cache of `shape` in a session of n_ctx positions: layer 0's keys equal evaluating the
// kept tokens at their new positions (up to the rounding of the rotation; deeper layers' keys depend on the context
// they were computed in, which the shift dropped).
void check_shift_recomputes_keys(const std::string &shape, int32_t n_ctx) {
    constexpr int32_t layer = 0;
    const auto path = std::filesystem::temp_directory_path() / ("specula-shift-" + shape + "-" + std::to_string(::getpid()) + ".gguf");
    SyntheticOptions opt;
    opt.type = SyntheticType::F32;
    write_synthetic_model(*find_synthetic_shape(shape), std::string(SPECULA_SOURCE_DIR) + "/models/stories260K.gguf", path.string(), opt);
    const auto model = Model::load(path.string(), LoadOptions{});
    std::filesystem::remove(path);
    REQUIRE(model->hparams().is_swa_layer(layer));
    constexpr int32_t n_used = 150, keep = 4, discard = 70;
    std::vector<int32_t> tokens;
    for (int32_t i = 0; i < n_used; ++i) tokens.push_back(3 + (i * 37) % 500);
    CpuRunner shifted(model, n_ctx, 2, KvType::F32);
    eval_all(shifted, *model, tokens);
    shifted.shift_kv(keep, discard, n_used);
    std::vector<int32_t> window(tokens.begin(), tokens.begin() + keep);
    window.insert(window.end(), tokens.begin() + keep + discard, tokens.end());
    CpuRunner fresh(model, n_ctx, 2, KvType::F32);
    eval_all(fresh, *model, window);
    const int32_t n = int32_t(window.size());
    const std::vector<float> got = rows_as_floats(shifted, layer, 0, n), want = rows_as_floats(fresh, layer, 0, n);
    double max_abs = 0, max_err = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        max_abs = std::max(max_abs, double(std::fabs(want[i])));
        max_err = std::max(max_err, double(std::fabs(got[i] - want[i])));
    }
    CAPTURE(shape, n_ctx, max_abs, max_err);
    CHECK(max_abs > 0.01);
    CHECK(max_err <= 1e-4 * max_abs);
}

}  // namespace

TEST_CASE("a context shift re-rotates a sliding-window layer's keys with that layer's RoPE (gemma3)", "[shift][gemma3]") {
    // tiny-gemma3's layer 0 is local: RoPE base 1e4 without scaling, where its global layers use base 1e6 scaled x8.
    check_shift_recomputes_keys("tiny-gemma3", 160);
}

TEST_CASE("a context shift re-rotates phi3's keys with the session's LongRoPE factors and without a second attention factor",
          "[shift][phi3]") {
    // tiny-phi3's layers are all windowed but rotate with the global settings: LongRoPE's short factors up to 512
    // positions, the long ones past it, each with the attention factor (1.19) that scaled the keys once when they
    // were rotated into place: the shift is a pure rotation.
    REQUIRE(find_synthetic_shape("tiny-phi3")->longrope_original_ctx == 512);
    for (const int32_t n_ctx : {160, 1024}) check_shift_recomputes_keys("tiny-phi3", n_ctx);
}

namespace {

struct ShiftRun {
    std::vector<int32_t> tokens;
    int32_t shifts = 0;
    SpeculativeStats spec;
};

ShiftRun run_with_shift(const std::shared_ptr<const Model> &model, const SpeculativeConfig *spec, KvType type, int32_t n_gen) {
    SessionConfig sc;
    sc.n_ctx = 128;
    sc.n_threads = 2;
    sc.backend.kv_type = type;
    sc.shift.enabled = true;
    sc.shift.keep = 4;
    SamplerConfig greedy;
    greedy.temperature = 0.0f;
    Session s(model, sc, greedy);
    if (spec) s.set_speculative(*spec);
    ShiftRun r;
    r.tokens = test_sessions::generate(s, test_inputs::model_text_prompt(*model, 40), n_gen);
    r.shifts = s.n_context_shifts();
    r.spec = s.speculative_stats();
    CHECK(s.tokens().size() <= 128);
    return r;
}

}  // namespace

TEST_CASE("greedy speculative decoding through context shifts equals plain greedy decoding with the same shifts", "[shift][speculative][lossless]") {
    const auto model = load_fixture("models/stories260K.gguf");
    if (!model) return;
    RandomDraftOptions opt;
    opt.window = 16;
    opt.seed = 5;
    const auto longspec = test_inputs::random_longspec_draft(model, opt, "shift-draft");

    for (const KvType type : {KvType::F16, KvType::Q8_0}) {
        CAPTURE(kv_type_name(type));
        // 40 prompt tokens in a context of 128, 62 dropped per shift: 9 shifts (4 under the sanitizers).
        constexpr int32_t n_gen = test_scale::count(600, 300);
        const ShiftRun plain = run_with_shift(model, nullptr, type, n_gen);
        REQUIRE(int32_t(plain.tokens.size()) == n_gen);
        CHECK(plain.shifts >= (40 + n_gen - 128) / 62);

        struct Case {
            const char *label;
            SpeculativeConfig spec;
        };
        std::vector<Case> cases;
        SpeculativeConfig c;
        c.ngram = true;
        cases.push_back({"n-gram", c});
        c = {};
        c.longspec = longspec;
        c.shape = TreeShape{};
        cases.push_back({"LongSpec, default tree", c});
        c.shape = TreeShape::chain(6);
        c.ngram = true;
        cases.push_back({"LongSpec chain 6 + n-gram", c});
        c = {};
        c.draft_model = model;  // the target as its own draft: its cache shifts with the target's
        c.shape = TreeShape::chain(5);
        cases.push_back({"target as draft model", c});
        c.auto_tree = true;
        c.shape_is_bound = false;
        cases.push_back({"target as draft model, auto tree", c});
        for (const Case &k : cases) {
            CAPTURE(k.label);
            const ShiftRun got = run_with_shift(model, &k.spec, type, n_gen);
            CHECK(got.shifts == plain.shifts);
            REQUIRE(got.tokens.size() == plain.tokens.size());
            for (size_t i = 0; i < got.tokens.size(); ++i) {
                INFO("token " << i);
                REQUIRE(got.tokens[i] == plain.tokens[i]);
            }
            CHECK(got.spec.rounds > 0);
        }
        // Speculation keeps working across shifts: the target as its own draft has every token accepted, so its
        // rounds produce many tokens each, which they could not if a shift left its cache behind the target's.
        const ShiftRun self = run_with_shift(model, &cases[3].spec, type, n_gen);
        CHECK(double(self.spec.produced) / self.spec.rounds > 4.0);
    }
}

TEST_CASE("context shift options are checked when the session is made", "[shift]") {
    const auto model = load_fixture("models/stories260K.gguf");
    if (!model) return;
    SessionConfig sc;
    sc.n_ctx = 64;
    sc.shift.enabled = true;
    sc.shift.keep = 62;
    CHECK_NOTHROW(Session(model, sc, SamplerConfig{}));
    sc.shift.keep = 63;
    CHECK_THROWS_AS(Session(model, sc, SamplerConfig{}), Error);
    sc.shift.keep = 4;
    sc.shift.discard = 59;
    CHECK_NOTHROW(Session(model, sc, SamplerConfig{}));
    sc.shift.discard = 60;
    CHECK_THROWS_AS(Session(model, sc, SamplerConfig{}), Error);
    sc.shift.discard = -1;
    CHECK_THROWS_AS(Session(model, sc, SamplerConfig{}), Error);
    sc.shift.discard = 0;
    Session s(model, sc, SamplerConfig{});
    CHECK(s.shift_discard() == 30);  // half of the 60 tokens after the 4 kept
}
