// `specula`: the command-line front end of the SDK. It uses only the public API (specula.hpp over specula.h).
//
// Exit codes: 0 ok, 1 runtime failure (missing/bad model file, library error), 2 usage error, 130 Ctrl-C.
#include "cli.h"
#include "llama_server_flags.h"

#include <specula/specula.hpp>

#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <new>
#include <algorithm>
#include <string>
#include <vector>

namespace specula_cli {
Command add_tokenize_command(CLI::App &parent);    // cmd_tokenize.cpp
Command add_draft_init_command(CLI::App &parent);  // cmd_draft_init.cpp
Command add_synth_command(CLI::App &parent);       // cmd_synth.cpp
Command add_devices_command(CLI::App &parent);     // cmd_devices.cpp
Command add_serve_command(CLI::App &parent);       // cmd_serve.cpp
}  // namespace specula_cli

int main(int argc, char **argv) {
    using namespace specula_cli;

    CLI::App app{"specula - local LLM inference with the Specula SDK"};
    app.name("specula");
    std::string version = std::string("specula ") + specula_version_string() + " (ABI " +
                          std::to_string(specula_abi_version()) + ")";
    if (specula_abi_version() != SPECULA_ABI_VERSION)
        version += " - warning: built against ABI " + std::to_string(SPECULA_ABI_VERSION);
    app.set_version_flag("--version", version);
    app.require_subcommand(1);

    const Command commands[] = {add_generate_command(app), add_info_command(app), add_tokenize_command(app),
                               add_draft_init_command(app), add_synth_command(app), add_devices_command(app),
                               add_serve_command(app)};

    // llama-server's flags in `specula serve` (llama_server_flags.h): mapped to ours, or ignored with a line each.
    std::vector<std::string> args(argv + 1, argv + argc);
    if (!args.empty() && args[0] == "serve") {
        std::vector<std::string> rest(args.begin() + 1, args.end());
        const ServerFlagTranslation t = translate_llama_server_flags(rest);
        if (!t.error.empty()) {
            std::fprintf(stderr, "specula serve: %s\n", t.error.c_str());
            return kExitUsage;
        }
        for (const std::string &note : t.notes) std::fprintf(stderr, "specula serve: %s\n", note.c_str());
        args.resize(1);
        args.insert(args.end(), rest.begin(), rest.end());
    }
    std::reverse(args.begin(), args.end());  // CLI11 takes a reversed vector

    try {
        app.parse(args);
    } catch (const CLI::RequiredError &e) {
        // `specula bogus` lands here ("a subcommand is required"); name the real problem instead.
        if (const auto extra = app.remaining(); !extra.empty()) {
            std::fprintf(stderr, "specula: unknown command '%s' (commands: generate, serve, info, tokenize, draft-init, synth, devices)\n"
                                 "Run with --help for more information.\n", extra.front().c_str());
            return kExitUsage;
        }
        return app.exit(e) == 0 ? kExitOk : kExitUsage;
    } catch (const CLI::ParseError &e) {
        // Prints help/version to stdout (code 0) or the error plus a --help hint to stderr.
        return app.exit(e) == 0 ? kExitOk : kExitUsage;
    }

    try {
        for (const Command &c : commands)
            if (c.app->parsed()) return c.run();
        return kExitUsage;  // unreachable: require_subcommand(1)
    } catch (const UsageError &e) {
        std::fprintf(stderr, "specula: %s\nRun with --help for more information.\n", e.what());
        return kExitUsage;
    } catch (const specula::Error &e) {
        std::fprintf(stderr, "specula: error: %s [%s]\n", e.what(), specula_status_string(e.status()));
        return kExitFailure;
    } catch (const std::bad_alloc &) {
        std::fprintf(stderr, "specula: error: out of memory\n");
        return kExitFailure;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "specula: error: %s\n", e.what());
        return kExitFailure;
    }
}
