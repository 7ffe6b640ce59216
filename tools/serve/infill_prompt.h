// The /infill fields and llama-server's FIM prompt (tools/common/fim_prompt.h builds it; the Qt demo shares it).
#pragma once

#include "fim_prompt.h"
#include "json_fields.h"

#include <specula/specula.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace specula_serve {

struct InfillInput {
    json input_prefix = "";  // a string, or an array of strings and token ids
    json input_suffix = "";
    using Chunk = specula_apps::FimChunk;
    std::vector<Chunk> input_extra;
    std::string prompt;  // text continuing the prefix before FIM_SUF (llama-server puts it there)
};

using InfillBudget = specula_apps::FimBudget;

// "" when the model can do FIM, else llama-server's reason ("prefix token is missing. suffix token is missing. ").
std::string infill_unsupported_reason(const specula::Model &model);

// Reads and checks the /infill fields (400 with llama-server's messages when malformed).
InfillInput parse_infill_input(const json &body);

std::vector<int32_t> format_infill(const specula::Model &model, const InfillInput &in, const InfillBudget &budget, bool *trimmed = nullptr);

}  // namespace specula_serve
