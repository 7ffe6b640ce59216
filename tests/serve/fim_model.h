// Models with fill-in-the-middle tokens for the /infill tests: random weights of a small real shape (tiny-llama,
// one layer) with a real code tokenizer from the fixtures. The text they write is noise, but the prompt format, the
// token budgets, the cache and greedy exactness are the same as with trained coders of those vocabularies:
//   deepseek-coder: FIM_PRE/SUF/MID only        -> the "--- snippet ---" form of the extra context
//   qwen2 (Qwen2.5-Coder): also FIM_REP/FIM_SEP -> the repository form
#pragma once

#include "server_process.h"

#include <specula/specula_experimental.h>

namespace serve_test {

inline std::string make_fim_model(const ScratchDir &dir, const std::string &vocab, const char *weight_type = "q8_0") {
    const std::filesystem::path vocab_path = require_fixture("tokenizer/ggml-vocab-" + vocab + ".gguf");
    const std::string out = (dir.path / ("fim-" + vocab + ".gguf")).string();
    specula_synthetic_options opts;
    specula_synthetic_options_init(&opts);
    opts.weight_type = weight_type;
    opts.n_layer = 1;
    specula_error *err = nullptr;
    const specula_status st = specula_synthetic_model_write("tiny-llama", vocab_path.c_str(), out.c_str(), &opts, &err);
    INFO(specula_error_message(err));
    specula_error_destroy(err);
    REQUIRE(st == SPECULA_OK);
    return out;
}

}  // namespace serve_test
