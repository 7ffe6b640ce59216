// llama-server's command-line flags in a `specula serve` command line. Editor plugins document llama-server
// command lines (llama.vim's README: `-ngl 99 -fa -ub 1024 -b 1024 --ctx-size 0 --cache-reuse 256`); each of
// llama-server's commonly used flags (llama.cpp's common/arg.cpp, release 2025-02-20) is mapped to specula's own or
// accepted and ignored with one line saying why, never rejected, except those that download a model.
#pragma once

#include <string>
#include <vector>

namespace specula_cli {

struct ServerFlagTranslation {
    std::vector<std::string> notes;  // one line per mapped or ignored flag, for the server's log
    std::string error;               // not empty: the command line cannot be served (the message says why)
};

// Rewrites the arguments that follow "serve" in place: llama-server's names become specula's (-np 4 ->
// --parallel 4), ignored flags are removed with their values. Arguments after "--" are left alone.
ServerFlagTranslation translate_llama_server_flags(std::vector<std::string> &args);

}  // namespace specula_cli
