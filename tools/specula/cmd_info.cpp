// `specula info MODEL`: what a GGUF file contains - hyperparameters, all metadata, and the tensor table.
#include "cli.h"
#include "model_path.h"

#include <specula/specula.hpp>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace specula_cli {
namespace {

struct InfoArgs {
    std::string model;
    int32_t max_array = 8;
};

// 260352 -> "260.4K"; keeps the exact count next to it for people who need it.
std::string human_count(uint64_t n) {
    const char *suffix[] = {"", "K", "M", "B", "T"};
    double v = static_cast<double>(n);
    int i = 0;
    while (v >= 1000.0 && i < 4) {
        v /= 1000.0;
        ++i;
    }
    char buf[64];
    if (i == 0) std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(n));
    else std::snprintf(buf, sizeof buf, "%.1f%s (%llu)", v, suffix[i], static_cast<unsigned long long>(n));
    return buf;
}

std::string human_bytes(uint64_t n) {
    const char *suffix[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = static_cast<double>(n);
    int i = 0;
    while (v >= 1024.0 && i < 4) {
        v /= 1024.0;
        ++i;
    }
    char buf[64];
    if (i == 0) std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(n));
    else std::snprintf(buf, sizeof buf, "%.2f %s (%llu bytes)", v, suffix[i], static_cast<unsigned long long>(n));
    return buf;
}

std::string dims_text(const std::vector<int64_t> &dims) {
    std::string s;
    for (size_t i = 0; i < dims.size(); ++i) {
        if (i > 0) s += " x ";
        s += std::to_string(dims[i]);
    }
    return s.empty() ? "-" : s;
}

// Metadata values can hold newlines (chat templates); keep one entry per line.
std::string one_line(std::string s) {
    std::string out;
    for (char c : s) {
        if (c == '\n') out += "\\n";
        else if (c == '\r') out += "\\r";
        else if (c == '\t') out += "\\t";
        else out += c;
    }
    return out;
}

int run_info(const InfoArgs &a) {
    const std::string path = resolve_model_path(a.model);
    specula::Model model;
    try {
        model = specula::Model::load(path);
    } catch (const specula::Error &e) {
        throw specula::Error(e.status(), "cannot load model '" + path + "': " + e.what());
    }

    std::printf("file:          %s\n", path.c_str());
    std::printf("arch:          %s\n", model.arch().c_str());
    std::printf("name:          %s\n", model.name().c_str());
    std::printf("n_vocab:       %d\n", model.n_vocab());
    std::printf("n_ctx_train:   %d\n", model.n_ctx_train());
    std::printf("n_layer:       %d\n", model.n_layer());
    std::printf("n_embd:        %d\n", model.n_embd());
    std::printf("n_head:        %d\n", model.n_head());
    std::printf("n_head_kv:     %d\n", model.n_head_kv());
    std::printf("n_ff:          %d\n", model.n_ff());
    std::printf("params:        %s\n", human_count(model.n_params()).c_str());
    std::printf("file size:     %s\n", human_bytes(model.file_size()).c_str());
    std::printf("weight type:   %s\n", model.weight_type().c_str());
    std::printf("bos / eos:     %d / %d\n", model.token_bos(), model.token_eos());

    const int32_t n_meta = model.meta_count();
    std::printf("\nmetadata (%d entries):\n", n_meta);
    for (int32_t i = 0; i < n_meta; ++i)
        std::printf("  %s = %s\n", model.meta_key(i).c_str(), one_line(model.meta_value(i, a.max_array)).c_str());

    const std::vector<specula::TensorInfo> tensors = model.tensors();
    size_t w_name = 4, w_type = 4, w_dims = 4;
    uint64_t total = 0;
    std::vector<std::string> dims;
    for (const auto &t : tensors) {
        dims.push_back(dims_text(t.dims));
        w_name = std::max(w_name, t.name.size());
        w_type = std::max(w_type, t.type.size());
        w_dims = std::max(w_dims, dims.back().size());
        total += t.n_bytes;
    }
    const int wn = static_cast<int>(w_name), wt = static_cast<int>(w_type), wd = static_cast<int>(w_dims);
    std::printf("\ntensors (%zu, %s):\n", tensors.size(), human_bytes(total).c_str());
    std::printf("  %-*s  %-*s  %-*s  %12s\n", wn, "name", wt, "type", wd, "dims", "bytes");
    for (size_t i = 0; i < tensors.size(); ++i) {
        const auto &t = tensors[i];
        std::printf("  %-*s  %-*s  %-*s  %12llu\n", wn, t.name.c_str(), wt, t.type.c_str(), wd, dims[i].c_str(),
                    static_cast<unsigned long long>(t.n_bytes));
    }
    return kExitOk;
}

}  // namespace

Command add_info_command(CLI::App &parent) {
    auto args = std::make_shared<InfoArgs>();
    CLI::App *cmd = parent.add_subcommand("info", "Show a model's hyperparameters, metadata and tensors");
    cmd->add_option("model", args->model, "GGUF model file (default: $SPECULA_MODEL, else the bundled model)");
    cmd->add_option("--max-array", args->max_array, "Array items shown per metadata value")
        ->capture_default_str()->check(CLI::Range(0, 1 << 20));
    return Command{cmd, [args] { return run_info(*args); }};
}

}  // namespace specula_cli
