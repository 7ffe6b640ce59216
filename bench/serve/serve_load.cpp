// serve_load: N clients post requests to a running `specula serve` (or llama-server) for a fixed time and report
// latency percentiles, requests/s and generated tokens/s, from the server's own `timings` of every response.
//
//   serve_load --port 8080 --clients 4 --seconds 30 --endpoint completion --source /usr/lib/python3.11/json
//
// Prompts: code completions cut from the *.py files under --source (a prefix ending at a random line, and for
// /infill the suffix after it plus two other files' snippets as llama.vim's ring chunks), else a few built-in story
// openings. --dump-prompts DIR writes the completion prompts to files, so `specula generate -f` can run the very same
// ones. Exit code: 0 when every request got a 200 with content, 1 otherwise (a load test that errs fails).
#include <CLI/CLI.hpp>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using json = nlohmann::json;

namespace {

struct Sample {
    double latency_ms;
    int predicted_n, prompt_n, cache_n, draft_n, draft_accepted;
    double predicted_ms;
};

struct Snippet {
    std::string prefix, suffix, path;
};

std::vector<Snippet> load_snippets(const std::string &dir, size_t prefix_chars, size_t suffix_chars, size_t count, uint64_t seed) {
    std::vector<std::filesystem::path> files;
    if (!dir.empty())
        for (const auto &e : std::filesystem::recursive_directory_iterator(dir))
            if (e.is_regular_file() && e.path().extension() == ".py" && e.file_size() > 2000) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    std::vector<Snippet> out;
    if (files.empty()) {
        for (const char *p : {"Once upon a time", "The little dog", "Lily wanted to", "One day, Tom", "The sun was", "Max loved to"})
            out.push_back({p, "", ""});
        return out;
    }
    std::mt19937_64 rng(seed);
    for (size_t i = 0; i < count; ++i) {
        const std::filesystem::path &f = files[i % files.size()];
        std::ifstream in(f, std::ios::binary);
        std::stringstream ss;
        ss << in.rdbuf();
        const std::string text = ss.str();
        // Cut at the start of a line between 40% and 90% of the file, as if the cursor were there.
        size_t cut = text.size() * (40 + rng() % 50) / 100;
        cut = text.rfind('\n', cut);
        cut = cut == std::string::npos ? text.size() / 2 : cut + 1;
        const size_t from = cut > prefix_chars ? text.find('\n', cut - prefix_chars) + 1 : 0;
        out.push_back({text.substr(from, cut - from), text.substr(cut, suffix_chars), f.filename().string()});
    }
    return out;
}

json request_body(const std::string &endpoint, const std::vector<Snippet> &snippets, size_t i, int n_predict, double temperature) {
    const Snippet &s = snippets[i % snippets.size()];
    if (endpoint == "infill") {
        // llama.vim's request, with two other snippets as its ring chunks.
        json extra = json::array();
        for (size_t k = 1; k <= 2 && snippets.size() > 2; ++k) {
            const Snippet &o = snippets[(i + k) % snippets.size()];
            extra.push_back({{"text", o.prefix.substr(0, 512)}, {"time", 0}, {"filename", o.path}});
        }
        return {{"input_prefix", s.prefix}, {"input_suffix", s.suffix}, {"input_extra", extra}, {"prompt", ""},
                {"n_predict", n_predict},   {"temperature", temperature}, {"cache_prompt", true}, {"stream", false}};
    }
    if (endpoint == "chat")
        return {{"messages", {{{"role", "user"}, {"content", s.prefix}}}}, {"max_tokens", n_predict}, {"temperature", temperature}};
    if (endpoint == "oai-completion") return {{"prompt", s.prefix}, {"max_tokens", n_predict}, {"temperature", temperature}};
    return {{"prompt", s.prefix}, {"n_predict", n_predict}, {"temperature", temperature}, {"cache_prompt", true}};
}

std::string path_of(const std::string &endpoint) {
    if (endpoint == "infill") return "/infill";
    if (endpoint == "chat") return "/v1/chat/completions";
    if (endpoint == "oai-completion") return "/v1/completions";
    return "/completion";
}

double percentile(std::vector<double> v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const size_t i = std::min(v.size() - 1, size_t(p / 100.0 * double(v.size() - 1) + 0.5));
    return v[i];
}

}  // namespace

int main(int argc, char **argv) {
    CLI::App app{"serve_load - concurrent clients against specula serve / llama-server"};
    std::string host = "127.0.0.1", endpoint = "completion", source, dump, api_key;
    int port = 8080, clients = 4, n_predict = 32, requests_per_client = 0;
    double seconds = 10, temperature = 0;
    size_t prefix_chars = 1500, suffix_chars = 300, n_snippets = 64;
    uint64_t seed = 1;
    bool json_out = false;
    app.add_option("--host", host)->capture_default_str();
    app.add_option("--port", port)->required();
    app.add_option("--clients", clients, "Concurrent clients")->capture_default_str()->check(CLI::Range(1, 1024));
    app.add_option("--seconds", seconds, "How long to send requests")->capture_default_str();
    app.add_option("--requests", requests_per_client, "Requests per client instead of --seconds (0: use --seconds)");
    app.add_option("--endpoint", endpoint, "completion, infill, oai-completion or chat")->capture_default_str()
        ->check(CLI::IsMember({"completion", "infill", "oai-completion", "chat"}));
    app.add_option("--source", source, "Directory of .py files to cut code prompts from (default: story openings)");
    app.add_option("--prefix-chars", prefix_chars, "Prompt prefix length in bytes")->capture_default_str();
    app.add_option("--suffix-chars", suffix_chars, "Infill suffix length in bytes")->capture_default_str();
    app.add_option("--snippets", n_snippets, "Distinct prompts")->capture_default_str();
    app.add_option("-n,--n-predict", n_predict, "Tokens per request")->capture_default_str();
    app.add_option("--temp", temperature, "Temperature")->capture_default_str();
    app.add_option("--seed", seed, "Seed of the prompt cuts")->capture_default_str();
    app.add_option("--api-key", api_key, "Bearer key");
    app.add_option("--dump-prompts", dump, "Write the prompts to DIR/prompt_NNN.txt and exit");
    app.add_flag("--json", json_out, "Print one JSON object instead of the table");
    CLI11_PARSE(app, argc, argv);

    const std::vector<Snippet> snippets = load_snippets(source, prefix_chars, suffix_chars, n_snippets, seed);
    if (!dump.empty()) {
        std::filesystem::create_directories(dump);
        for (size_t i = 0; i < snippets.size(); ++i) {
            char name[32];
            std::snprintf(name, sizeof name, "prompt_%03zu.txt", i);
            std::ofstream(std::filesystem::path(dump) / name, std::ios::binary) << snippets[i].prefix;
        }
        std::printf("wrote %zu prompts to %s\n", snippets.size(), dump.c_str());
        return 0;
    }

    std::mutex mutex;
    std::vector<Sample> samples;
    std::vector<std::string> errors;
    std::atomic<size_t> next{0};
    const auto t_start = std::chrono::steady_clock::now();
    const auto deadline = t_start + std::chrono::duration<double>(seconds);
    std::vector<std::thread> threads;
    for (int c = 0; c < clients; ++c) {
        threads.emplace_back([&] {
            httplib::Client cli(host, port);
            cli.set_read_timeout(600, 0);
            cli.set_write_timeout(600, 0);
            cli.set_keep_alive(true);
            cli.set_tcp_nodelay(true);
            httplib::Headers headers;
            if (!api_key.empty()) headers.emplace("Authorization", "Bearer " + api_key);
            for (int done = 0;; ++done) {
                if (requests_per_client > 0 ? done >= requests_per_client : std::chrono::steady_clock::now() >= deadline) break;
                const size_t i = next++;
                const std::string body = request_body(endpoint, snippets, i, n_predict, temperature).dump();
                const auto t0 = std::chrono::steady_clock::now();
                auto res = cli.Post(path_of(endpoint).c_str(), headers, body, "application/json");
                const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
                std::lock_guard<std::mutex> lock(mutex);
                if (!res) {
                    errors.push_back("request failed: " + httplib::to_string(res.error()));
                    continue;
                }
                const json r = json::parse(res->body, nullptr, false);
                if (res->status != 200 || r.is_discarded() || !r.contains("timings")) {
                    errors.push_back("HTTP " + std::to_string(res->status) + ": " + res->body.substr(0, 200));
                    continue;
                }
                const json &t = r["timings"];
                samples.push_back({ms, t.value("predicted_n", 0), t.value("prompt_n", 0), t.value("cache_n", 0), t.value("draft_n", 0),
                                   t.value("draft_n_accepted", 0), t.value("predicted_ms", 0.0)});
            }
        });
    }
    for (std::thread &t : threads) t.join();
    const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();

    std::vector<double> lat;
    long long tokens = 0, prompt = 0, cached = 0, drafted = 0, accepted = 0;
    double decode_ms = 0;
    for (const Sample &s : samples) {
        lat.push_back(s.latency_ms);
        tokens += s.predicted_n, prompt += s.prompt_n, cached += s.cache_n, drafted += s.draft_n, accepted += s.draft_accepted;
        decode_ms += s.predicted_ms;
    }
    const json summary = {{"endpoint", path_of(endpoint)},
                          {"clients", clients},
                          {"seconds", wall_s},
                          {"requests", samples.size()},
                          {"errors", errors.size()},
                          {"latency_ms", {{"p50", percentile(lat, 50)}, {"p90", percentile(lat, 90)}, {"p99", percentile(lat, 99)},
                                          {"max", lat.empty() ? 0.0 : *std::max_element(lat.begin(), lat.end())}}},
                          {"requests_per_s", double(samples.size()) / wall_s},
                          {"tokens_generated", tokens},
                          {"tokens_per_s", double(tokens) / wall_s},
                          {"decode_tokens_per_s_per_request", decode_ms > 0 ? 1e3 * double(tokens) / decode_ms : 0.0},
                          {"prompt_tokens_evaluated", prompt},
                          {"prompt_tokens_cached", cached},
                          {"draft_acceptance", drafted > 0 ? double(accepted) / double(drafted) : 0.0},
                          {"tau", tokens > accepted ? double(tokens) / double(tokens - accepted) : 0.0}};
    if (json_out) {
        std::printf("%s\n", summary.dump().c_str());
    } else {
        std::printf("%s, %d clients, %.1f s: %zu requests, %zu errors\n", path_of(endpoint).c_str(), clients, wall_s, samples.size(),
                    errors.size());
        std::printf("latency ms: p50 %.1f  p90 %.1f  p99 %.1f  max %.1f\n", percentile(lat, 50), percentile(lat, 90), percentile(lat, 99),
                    summary["latency_ms"]["max"].get<double>());
        std::printf("throughput: %.2f req/s, %.1f generated tok/s (%lld tokens); decode %.1f tok/s per request\n",
                    summary["requests_per_s"].get<double>(), summary["tokens_per_s"].get<double>(), tokens,
                    summary["decode_tokens_per_s_per_request"].get<double>());
        std::printf("prompt tokens: %lld evaluated, %lld from the slot cache; drafts accepted %.1f%%, tau %.2f\n", prompt, cached,
                    100.0 * summary["draft_acceptance"].get<double>(), summary["tau"].get<double>());
    }
    for (size_t i = 0; i < errors.size() && i < 5; ++i) std::fprintf(stderr, "error: %s\n", errors[i].c_str());
    return errors.empty() && !samples.empty() ? 0 : 1;
}
