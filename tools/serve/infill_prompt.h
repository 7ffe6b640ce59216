// Fill-in-the-middle prompts, built exactly as llama-server's format_infill builds them (tools/server: the repository
// pattern of Qwen2.5-Coder, arXiv 2409.12186, when the model has FIM_REP/FIM_SEP tokens, else "--- snippet ---"
// separators), with the same token budgets:
//
//   [extra tail] [BOS if the model adds one] FIM_PRE prefix-tail prompt FIM_SUF suffix-head FIM_MID
//
// where the extra context is
//   FIM_REP "myproject\n" { FIM_SEP filename "\n" text }... FIM_SEP "filename\n"     (repository form)
//   { "\n\n--- snippet ---\n\n" text }...                                            (otherwise)
// and the budgets are: the prefix keeps its last 3*(n_batch/4) tokens, the suffix its first
// max(0, n_batch/4 - (2 + |prompt|)), the extra context its last max(0, n_ctx - n_batch - 2*n_predict), where n_batch
// is the server's logical batch, n_ctx the slot's context and n_predict the server's -n (-1 by default, as there).
#pragma once

#include "json_fields.h"

#include <specula/specula.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace specula_serve {

struct InfillInput {
    json input_prefix = "";  // a string, or an array of strings and token ids
    json input_suffix = "";
    struct Chunk {
        std::string filename = "tmp";
        std::string text;
    };
    std::vector<Chunk> input_extra;
    std::string prompt;  // text continuing the prefix before FIM_SUF (llama-server puts it there)
};

struct InfillBudget {
    int32_t n_batch = 2048;
    int32_t n_predict = -1;
    int32_t n_ctx = 4096;
};

// "" when the model can do FIM, else llama-server's reason ("prefix token is missing. suffix token is missing. ").
std::string infill_unsupported_reason(const specula::Model &model);

// Reads and checks the /infill fields (400 with llama-server's messages when malformed).
InfillInput parse_infill_input(const json &body);

std::vector<int32_t> format_infill(const specula::Model &model, const InfillInput &in, const InfillBudget &budget);

}  // namespace specula_serve
