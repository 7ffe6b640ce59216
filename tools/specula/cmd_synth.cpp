// `specula synth`: write a random-weight model of a real model's shape, for speed measurements.
//
// The file has the real model's tensors, shapes, tensor types (llama.cpp's mix for the chosen type), hyperparameters
// and tokenizer (copied from --vocab, e.g. a vocab-only GGUF), so it runs exactly as fast as the real model; its
// text is noise. The written file is loaded back before reporting success.
//
// Output: one line on stdout,
//   "wrote FILE: SHAPE TYPE, L layers, vocab V, P parameters, B bytes in S s".
#include "cli.h"
#include "interrupt.h"
#include "progress_bar.h"

#include <specula/specula.hpp>

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace specula_cli {
namespace {

struct SynthArgs {
    std::string shape;
    std::string type = "q8_0";
    std::string vocab;
    std::string out;
    uint64_t seed = 1;
    int32_t layers = 0;
};

int run_synth(const SynthArgs &a) {
    InterruptHandler interrupt;  // Ctrl-C cancels the write (and the library removes the partial file)
    const auto t0 = std::chrono::steady_clock::now();
    {
        ProgressBar bar("writing model");
        specula::SyntheticOptions o;
        o.weight_type = a.type;
        o.seed = a.seed;
        o.n_layer = a.layers;
        o.progress = [&bar](float p) {
            bar.update(p);
            return !InterruptHandler::interrupted();
        };
        try {
            specula::write_synthetic_model(a.shape, a.vocab, a.out, o);
        } catch (const specula::Error &e) {
            bar.clear();
            if (e.status() == SPECULA_ERR_CANCELLED && InterruptHandler::interrupted()) {
                std::fprintf(stderr, "specula: interrupted; '%s' was not written\n", a.out.c_str());
                return kExitInterrupted;
            }
            throw specula::Error(e.status(), "cannot write '" + a.out + "': " + e.what());
        }
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    specula::Model model;
    try {
        model = specula::Model::load(a.out);
    } catch (const specula::Error &e) {
        throw specula::Error(e.status(), "wrote '" + a.out + "' but cannot load it back: " + e.what());
    }
    std::printf("wrote %s: %s %s, %d layers, vocab %d, %llu parameters, %llu bytes in %.1f s\n", a.out.c_str(), a.shape.c_str(),
                model.weight_type().c_str(), model.n_layer(), model.n_vocab(), static_cast<unsigned long long>(model.n_params()),
                static_cast<unsigned long long>(model.file_size()), seconds);
    return kExitOk;
}

}  // namespace

Command add_synth_command(CLI::App &parent) {
    auto args = std::make_shared<SynthArgs>();
    SynthArgs &a = *args;
    const std::vector<std::string> shapes = specula::synthetic_shapes();
    std::string shape_list;
    for (const std::string &s : shapes) shape_list += (shape_list.empty() ? "" : ", ") + s;

    CLI::App *cmd = parent.add_subcommand("synth", "Write a random-weight model of a real model's shape (for speed measurements)");
    cmd->add_option("--shape", a.shape, "Model shape: " + shape_list)->required()->check(CLI::IsMember(shapes));
    cmd->add_option("--type", a.type, "Weight type: f32, f16, q8_0, q4_0, q4_k_m (llama.cpp's mix)")
        ->capture_default_str()
        ->check(CLI::IsMember({"f32", "f16", "q8_0", "q4_0", "q4_k_m"}, CLI::ignore_case));
    cmd->add_option("--vocab", a.vocab, "GGUF whose tokenizer to copy (a vocab-only GGUF is enough)")->required()->check(CLI::ExistingFile);
    cmd->add_option("-o,--out", a.out, "File to write")->required();
    cmd->add_option("--seed", a.seed, "Seed of the random weights")->capture_default_str();
    cmd->add_option("--layers", a.layers, "Number of layers instead of the shape's (quick tests)")->check(CLI::Range(1, 4096));
    return Command{cmd, [args] { return run_synth(*args); }};
}

}  // namespace specula_cli
