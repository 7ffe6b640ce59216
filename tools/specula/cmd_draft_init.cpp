// `specula draft-init`: write an untrained (random-weight) LongSpec draft for a target model.
//
// The file is what a trainer starts from, and a valid draft for trying --draft: it drafts poorly, but speculative
// decoding is lossless, so the output is unchanged (only the speed differs). The written file is loaded back
// against the target before reporting success.
//
// Output: one line on stdout, "wrote DRAFT: LongSpec draft for TARGET (window W, N parameters)".
#include "cli.h"
#include "model_path.h"

#include <specula/specula.hpp>

#include <CLI/CLI.hpp>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

namespace specula_cli {
namespace {

struct DraftInitArgs {
    std::string model;
    std::string out;
    int32_t window = 512;
    uint64_t seed = 1;
};

int run_draft_init(const DraftInitArgs &a) {
    const std::string path = resolve_model_path(a.model);
    specula::Model model;
    try {
        model = specula::Model::load(path);
    } catch (const specula::Error &e) {
        throw specula::Error(e.status(), "cannot load model '" + path + "': " + e.what());
    }
    try {
        specula::Draft::write_random(model, a.out, a.seed, a.window);
    } catch (const specula::Error &e) {
        throw specula::Error(e.status(), "cannot write draft '" + a.out + "': " + e.what());
    }
    const specula::Draft draft = specula::Draft::load(a.out, model);
    std::printf("wrote %s: LongSpec draft for %s (window %d, %llu parameters, untrained)\n", a.out.c_str(), path.c_str(),
                draft.window(), static_cast<unsigned long long>(draft.n_params()));
    return kExitOk;
}

}  // namespace

Command add_draft_init_command(CLI::App &parent) {
    auto args = std::make_shared<DraftInitArgs>();
    DraftInitArgs &a = *args;
    CLI::App *cmd = parent.add_subcommand("draft-init", "Write an untrained (random) LongSpec draft for a model");
    cmd->add_option("-m,--model", a.model, "Target GGUF model (default: $SPECULA_MODEL, else the bundled stories260K)");
    cmd->add_option("-o,--out", a.out, "Draft file to write")->required();
    cmd->add_option("--window", a.window, "Self-attention window of the draft in tokens")->capture_default_str()
        ->check(CLI::Range(1, 1 << 20));
    cmd->add_option("--seed", a.seed, "Seed of the random weights")->capture_default_str();
    return Command{cmd, [args] { return run_draft_init(*args); }};
}

}  // namespace specula_cli
