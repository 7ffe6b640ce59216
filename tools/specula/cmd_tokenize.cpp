// `specula tokenize`: the token ids of a text, like llama.cpp's tokenizer test tool.
//
// Output contract (scripts rely on it):
//   default        - stdout: the ids of the whole text on one line, separated by single spaces, then "\n"
//                    (an empty text gives an empty line).
//   --show-pieces  - stdout: one line per token, `ID 'PIECE'`, where PIECE is the token's bytes as
//                    specula_model_token_to_piece gives them with special tokens rendered. Bytes that would
//                    break the one-line-per-token layout or are not complete UTF-8 (a byte token, half a
//                    character) are written as C escapes: \n \r \t \\ \' and \xNN.
// Flags follow llama.cpp's test-tokenizer-0: add-special is off unless --add-special; parse-special is on
// unless --no-special (so `specula tokenize --no-special` reproduces the .out files of llama.cpp's vectors).
// Only the tokenizer is loaded (vocab-only), so vocab-only GGUFs and models of any architecture work.
#include "cli.h"
#include "model_path.h"

#include <specula/specula.hpp>

#include "utf8_check.h"

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace specula_cli {
namespace {

struct TokenizeArgs {
    std::string model;
    std::string file;
    std::string prompt;
    bool no_special = false;
    bool add_special = false;
    bool show_pieces = false;
};

std::string read_text_file(const std::string &path) {
    if (path == "-") return std::string(std::istreambuf_iterator<char>(std::cin), {});
    std::ifstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error("cannot open file '" + path + "': " + std::strerror(errno));
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (f.bad()) throw std::runtime_error("cannot read file '" + path + "'");
    return text;
}


// A piece as one printable line: complete UTF-8 characters as they are, everything else escaped.
std::string printable_piece(const std::string &piece) {
    std::string out;
    for (size_t i = 0; i < piece.size();) {
        const unsigned char c = static_cast<unsigned char>(piece[i]);
        if (c == '\n') out += "\\n";
        else if (c == '\r') out += "\\r";
        else if (c == '\t') out += "\\t";
        else if (c == '\\') out += "\\\\";
        else if (c == '\'') out += "\\'";
        else if (c >= 0x20 && c < 0x7F) out += static_cast<char>(c);
        else if (const size_t n = c >= 0x80 ? specula_apps::valid_utf8_length(piece, i) : 0; n > 0) {
            out.append(piece, i, n);
            i += n;
            continue;
        } else {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02X", c);
            out += buf;
        }
        ++i;
    }
    return out;
}

std::string token_piece(const specula::Model &model, int32_t token) {
    return specula::detail::fetch_text([&](char *buf, size_t size, size_t *len, specula_error **err) {
        return specula_model_token_to_piece(model.get(), token, /*render_special=*/1, buf, size, len, err);
    });
}

specula::Model load_tokenizer(const std::string &path) {
    specula_model_options opts;
    specula_model_options_init(&opts);
    opts.vocab_only = 1;  // the tokenizer is all we need; accepts vocab-only GGUFs and any architecture
    specula_model *out = nullptr;
    specula_error *err = nullptr;
    const specula_status st = specula_model_load(path.c_str(), &opts, &out, &err);
    try {
        specula::check(st, err);
    } catch (const specula::Error &e) {
        throw specula::Error(e.status(), "cannot load model '" + path + "': " + e.what());
    }
    return specula::Model(out);
}

int run_tokenize(const TokenizeArgs &a) {
    const std::string path = resolve_model_path(a.model);
    const std::string text = a.file.empty() ? a.prompt : read_text_file(a.file);
    const specula::Model model = load_tokenizer(path);

    int32_t flags = 0;
    if (a.add_special) flags |= SPECULA_TOKENIZE_ADD_SPECIAL;
    if (!a.no_special) flags |= SPECULA_TOKENIZE_PARSE_SPECIAL;
    const std::vector<int32_t> ids = model.tokenize(text, flags);

    std::string out;
    out.reserve(ids.size() * 7);
    if (a.show_pieces) {
        for (const int32_t id : ids) {
            out += std::to_string(id);
            out += " '";
            out += printable_piece(token_piece(model, id));
            out += "'\n";
        }
    } else {
        for (size_t i = 0; i < ids.size(); ++i) {
            if (i > 0) out += ' ';
            out += std::to_string(ids[i]);
        }
        out += '\n';
    }
    if (std::fwrite(out.data(), 1, out.size(), stdout) != out.size() || std::fflush(stdout) != 0)
        throw std::runtime_error(std::string("cannot write the output: ") + std::strerror(errno));
    return kExitOk;
}

}  // namespace

Command add_tokenize_command(CLI::App &parent) {
    auto args = std::make_shared<TokenizeArgs>();
    TokenizeArgs &a = *args;
    CLI::App *cmd = parent.add_subcommand("tokenize", "Print the token ids of a text (like llama.cpp's tokenizer tests)");
    cmd->add_option("-m,--model", a.model,
                    "GGUF model or vocab-only file (default: $SPECULA_MODEL, else the bundled stories260K)");
    auto *f = cmd->add_option("-f,--file", a.file, "Text file to tokenize, whole ('-' = stdin)");
    auto *p = cmd->add_option("-p,--prompt", a.prompt, "Text to tokenize, given on the command line");
    f->excludes(p);
    p->excludes(f);
    cmd->add_flag("--no-special", a.no_special,
                  "Do not parse special tokens: text such as \"<s>\" or \"<|im_end|>\" is tokenized as text");
    cmd->add_flag("--add-special", a.add_special, "Add BOS/EOS as the model's metadata asks (off by default)");
    cmd->add_flag("--show-pieces", a.show_pieces, "Print one `ID 'PIECE'` line per token instead of the id list");
    return Command{cmd, [args, f, p] {
                       if (f->count() == 0 && p->count() == 0) throw UsageError("tokenize: give the text with -f FILE or -p TEXT");
                       return run_tokenize(*args);
                   }};
}

}  // namespace specula_cli
