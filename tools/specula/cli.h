// Shared declarations of the `specula` command-line tool.
//
// Each subcommand lives in its own cmd_*.cpp: it registers its options with CLI11 and returns a function that
// runs it after parsing. Parsing first and running afterwards (instead of CLI11 callbacks) keeps the exit-code
// policy in one place, main.cpp.
#pragma once

#include <functional>
#include <stdexcept>

namespace CLI {
class App;
}

namespace specula_cli {

// Exit codes: 0 success, 1 runtime failure (bad file, library error), 2 usage error, 130 interrupted by Ctrl-C
// (the shell convention 128 + SIGINT).
enum ExitCode : int { kExitOk = 0, kExitFailure = 1, kExitUsage = 2, kExitInterrupted = 130 };

// An argument that parsed but makes no sense (e.g. malformed --prompt-ids): reported like a CLI11 usage error.
struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct Command {
    CLI::App *app;            // the subcommand, to ask whether it was given
    std::function<int()> run; // runs it with the parsed options; returns the exit code
};

Command add_generate_command(CLI::App &parent);
Command add_info_command(CLI::App &parent);

}  // namespace specula_cli
