// A long llama.vim session replayed against the real server: the plugin's requests as autoload/llama.vim builds them
// (llama#fim and the ring warm-up of llama#ring_update, default configuration), over this repository's own sources,
// with its ring of extra context filling up and rotating while the "user" moves through files and edits lines.
// Before e8b0658 every request once the ring was full got 400 exceed_context_size_error and the user silently saw no
// suggestion; here every request must answer 200 with a suggestion.
#include "../common/test_scale.h"
#include "fim_model.h"
#include "llama_vim_requests.h"

#include <algorithm>
#include <deque>
#include <random>

using namespace serve_test;

namespace {

std::vector<std::string> read_lines(const std::filesystem::path &path) {
    std::ifstream in(path);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
}

std::string join(const std::vector<std::string> &lines, size_t from, size_t to) {
    std::string out;
    for (size_t i = from; i < std::min(to, lines.size()); ++i) out += lines[i] + "\n";
    return out;
}

// llama.vim's defaults (g:llama_config): n_prefix 256, n_suffix 64, ring_n_chunks 16, ring_chunk_size 64 (the
// request's own, n_predict 128 and its time limits, are in llama_vim_requests.h).
constexpr size_t kPrefixLines = 256, kSuffixLines = 64, kRingChunks = 16, kChunkLines = 64;

}  // namespace

TEST_CASE("a long llama.vim session (ring full and rotating, many edits) gets a suggestion for every request", "[serve][infill]") {
    ScratchDir dir;
    const std::string model = make_fim_model(dir, "deepseek-coder");
    // llama.vim's README line, with a 2048-token context (the size at which its full ring used to overflow).
    ServerProcess server({"-m", model, "-ngl", "99", "-fa", "-ub", "1024", "-b", "1024", "-c", "2048", "--cache-reuse", "256", "-t", "1"});
    auto c = server.client();

    const std::filesystem::path src = SPECULA_SOURCE_DIR;
    const std::vector<std::filesystem::path> files = {src / "tools/serve/server.cpp",       src / "tools/serve/completion.cpp",
                                                      src / "tools/serve/slot_pool.cpp",    src / "sdk/src/session/session.cpp",
                                                      src / "tools/specula/cmd_serve.cpp",  src / "tools/common/fim_prompt.h"};
    std::deque<json> ring;  // oldest first, as llama.vim's s:ring_chunks
    std::mt19937 rng(2025);
    int requests = 0, truncated = 0, warmups = 0;
    // 48 moves (24 under the sanitizers): either way more new chunks than the ring holds.
    const int steps = test_scale::count(48, 24), edits = test_scale::count(3, 1);
    for (int step = 0; step < steps; ++step) {
        std::vector<std::string> lines = read_lines(files[size_t(step) % files.size()]);
        REQUIRE(lines.size() > 80);
        // The user lands on a line of the file (llama.vim picks a chunk around the cursor on such moves)...
        const size_t cursor = 40 + rng() % (lines.size() - 60);
        const size_t start = cursor > kChunkLines / 2 ? cursor - kChunkLines / 2 : 0;
        const json chunk = {{"text", join(lines, start, start + kChunkLines)},
                            {"time", {1732400000 + step, 0}},
                            {"filename", files[size_t(step) % files.size()].filename().string()}};
        if (std::none_of(ring.begin(), ring.end(), [&](const json &c) { return c["text"] == chunk["text"]; })) {
            ring.push_back(chunk);
            if (ring.size() > kRingChunks) ring.pop_front();
            // ... and the ring's update sends the new extra context to be cached (n_predict 0).
            const Reply w = post(c, "/infill", llama_vim_warmup_body(json(ring)));
            INFO(w.body.substr(0, 500));
            REQUIRE(w.status == 200);
            ++warmups;
        }
        // ... then types on that line: a request after each of three edits (one under the sanitizers).
        for (int edit = 0; edit < edits; ++edit) {
            std::string &line = lines[cursor];
            line.insert(std::min(line.size(), size_t(4 + 3 * edit)), "x" + std::to_string(edit));
            const size_t col = std::min(line.size(), size_t(8 + 3 * edit));
            const std::string prefix = join(lines, cursor > kPrefixLines ? cursor - kPrefixLines : 0, cursor);
            const std::string suffix = line.substr(col) + "\n" + join(lines, cursor + 1, cursor + 1 + kSuffixLines);
            const int indent = int(line.find_first_not_of(" \t") == std::string::npos ? 0 : line.find_first_not_of(" \t"));
            const Reply r = post(c, "/infill", llama_vim_fim_body(prefix, line.substr(0, col), suffix, json(ring), indent));
            INFO("step " << step << " edit " << edit << ": " << r.body.substr(0, 500));
            REQUIRE(r.status == 200);
            CHECK(r.data["timings/predicted_n"].get<int>() >= 1);
            CHECK(!r.data["content"].get<std::string>().empty());
            CHECK(r.data["tokens_cached"].get<int>() <= 2048);
            truncated += r.data["truncated"].get<bool>() ? 1 : 0;
            ++requests;
        }
    }
    CHECK(requests == edits * steps);
    CHECK(warmups >= 16);  // the ring filled and rotated
    CHECK(truncated > 0);  // a full ring does not fit the budget: its oldest chunks were dropped, and said so
}
