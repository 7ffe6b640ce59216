// The server under the conditions a desktop service meets: several clients at once, a full queue, clients that hang
// up mid-generation, and SIGTERM while generating.
#include "server_process.h"

#include <specula/specula_experimental.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <future>

using namespace serve_test;

namespace {

// A model slow enough on one thread that a long generation is still running while the test acts: one layer of
// Llama 3.2 1B's shape (random weights) with the bundled model's vocabulary, ~60 MB.
std::string make_slow_model(const ScratchDir &dir) {
    const std::string out = (dir.path / "slow.gguf").string();
    specula_synthetic_options opts;
    specula_synthetic_options_init(&opts);
    opts.n_layer = 1;
    specula_error *err = nullptr;
    const specula_status st = specula_synthetic_model_write("llama-3.2-1b", bundled_model().c_str(), out.c_str(), &opts, &err);
    INFO(specula_error_message(err));
    specula_error_destroy(err);
    REQUIRE(st == SPECULA_OK);
    return out;
}

// A streaming request on a raw socket that reads until it has `bytes` bytes of response, then hangs up (what a
// closed editor buffer or a killed curl does).
class HangingUpClient {
public:
    HangingUpClient(int port, const std::string &body) {
        fd_ = connect_loopback(port);
        const std::string request = "POST /completion HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
                                    std::to_string(body.size()) + "\r\n\r\n" + body;
        REQUIRE(send(fd_, request.data(), request.size(), 0) == ssize_t(request.size()));
    }
    // Reads until the first streamed event has arrived whole (or the server closed); returns what arrived.
    std::string read_first_event() {
        std::string got;
        char buf[4096];
        for (;;) {
            const size_t data = got.find("data: ");
            if (data != std::string::npos && got.find("\n\n", data) != std::string::npos) break;
            const ssize_t n = recv(fd_, buf, sizeof buf, 0);
            if (n <= 0) break;
            got.append(buf, size_t(n));
        }
        return got;
    }
    void hang_up() {
        if (fd_ >= 0) close(fd_);
        fd_ = -1;
    }
    ~HangingUpClient() { hang_up(); }

private:
    int fd_ = -1;
};

double metric(const std::string &text, const std::string &name) {
    const size_t at = text.find("\n" + name + " ");
    return at == std::string::npos ? -1.0 : std::atof(text.c_str() + at + name.size() + 2);
}

}  // namespace

TEST_CASE("concurrent clients on two slots each get exactly their greedy continuation", "[serve][concurrency]") {
    ServerProcess server({"-m", bundled_model(), "-c", "512", "--parallel", "2", "-t", "1"});
    const std::vector<std::string> prompts = {"Once upon a time", "The little dog", "Lily wanted to", "One day, Tom",
                                              "The sun was", "Max loved to"};
    // Each prompt alone first.
    std::vector<json> alone;
    {
        auto c = server.client();
        for (const std::string &p : prompts) {
            const Reply r = post(c, "/completion", json{{"prompt", p}, {"n_predict", 48}, {"temperature", 0}, {"return_tokens", true}});
            REQUIRE(r.status == 200);
            alone.push_back(r.data["tokens"]);
        }
    }
    // Then all at once, three rounds, from six threads.
    std::vector<std::future<json>> results;
    for (int round = 0; round < 3; ++round)
        for (size_t i = 0; i < prompts.size(); ++i)
            results.push_back(std::async(std::launch::async, [&, i] {
                auto c = server.client();
                auto res = c.Post("/completion", json{{"prompt", prompts[i]}, {"n_predict", 48}, {"temperature", 0}, {"return_tokens", true}}.dump(),
                                  "application/json");
                if (!res) return json{{"client_error", httplib::to_string(res.error())}};
                return res->status == 200 ? json::parse(res->body)["tokens"] : json{{"status", res->status}, {"body", res->body}};
            }));
    for (size_t k = 0; k < results.size(); ++k) CHECK(results[k].get() == alone[k % prompts.size()]);
    INFO(server.log());
    auto after = server.client();
    CHECK(get(after, "/health").status == 200);
}

TEST_CASE("a full queue answers 503, a client that hangs up frees its slot at once", "[serve][concurrency]") {
    ScratchDir dir;
    const std::string model = make_slow_model(dir);
    ServerProcess server({"-m", model, "--ngram-nodes", "4", "-c", "4096", "--parallel", "1", "--max-queue", "0", "-t", "1", "--metrics"});
    auto c = server.client();

    // A long stream occupies the only slot.
    HangingUpClient stream(server.port(), json{{"prompt", "Once upon a time"}, {"n_predict", 4000}, {"ignore_eos", true},
                                                {"stream", true}}.dump());
    // (The first token, not 2000 bytes of them: a token of this model took ~2 s under ThreadSanitizer.)
    const std::string head = stream.read_first_event();
    REQUIRE(head.find("200") != std::string::npos);
    REQUIRE(head.find("data: ") != std::string::npos);

    // No slot and no room in the queue: 503 right away.
    check_error(post(c, "/completion", json{{"prompt", "Hello"}, {"n_predict", 2}}), 503, "unavailable_error");

    // The streaming client hangs up; its generation stops and the slot serves the next request.
    stream.hang_up();
    const auto t0 = std::chrono::steady_clock::now();
    Reply next;
    for (int attempt = 0; attempt < 200; ++attempt) {
        next = post(c, "/completion", json{{"prompt", "Hello"}, {"n_predict", 2}});
        if (next.status == 200) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    CHECK(next.status == 200);
    const double waited_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(waited_s < 60.0);  // not a speed figure: 4000 tokens on this model take minutes on one thread
    const std::string metrics = get(c, "/metrics").body;
    CHECK(metric(metrics, "specula:completions_cancelled_total") == 1.0);
    CHECK(metric(metrics, "llamacpp:tokens_predicted_total") < 4000.0);
}

TEST_CASE("a non-streamed request whose client hangs up stops generating too", "[serve]") {
    ScratchDir dir;
    const std::string model = make_slow_model(dir);
    ServerProcess server({"-m", model, "--ngram-nodes", "4", "-c", "4096", "--parallel", "1", "-t", "1", "--metrics"});
    {
        HangingUpClient quitter(server.port(), json{{"prompt", "Once upon a time"}, {"n_predict", 4000}, {"ignore_eos", true}}.dump());
        std::this_thread::sleep_for(std::chrono::milliseconds(500));  // it is generating now
    }  // hangs up without reading anything
    auto c = server.client();
    std::string metrics;
    for (int attempt = 0; attempt < 200; ++attempt) {
        metrics = get(c, "/metrics").body;
        if (metric(metrics, "specula:completions_cancelled_total") == 1.0) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    CHECK(metric(metrics, "specula:completions_cancelled_total") == 1.0);
    CHECK(post(c, "/completion", json{{"prompt", "Hello"}, {"n_predict", 2}}).status == 200);
}

TEST_CASE("SIGTERM and SIGINT stop the server cleanly, even mid-generation", "[serve]") {
    ScratchDir dir;
    const std::string model = make_slow_model(dir);
    for (const int sig : {SIGTERM, SIGINT}) {
        ServerProcess server({"-m", model, "--ngram-nodes", "4", "-c", "4096", "-t", "1"});
        HangingUpClient stream(server.port(), json{{"prompt", "Once upon a time"}, {"n_predict", 4000}, {"ignore_eos", true},
                                                    {"stream", true}}.dump());
        REQUIRE(stream.read_first_event().find("data: ") != std::string::npos);
        const auto t0 = std::chrono::steady_clock::now();
        const int status = server.stop(sig, 30);
        const double took_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        INFO(server.log());
        REQUIRE(status != -1);
        CHECK(WIFEXITED(status));
        CHECK(WEXITSTATUS(status) == 0);
        CHECK(took_s < 30.0);  // the generation it interrupted would run for minutes
        CHECK(server.log().find("stopped") != std::string::npos);
    }
}

TEST_CASE("continuous batching: slots share forward passes and each client gets exactly what it gets alone", "[serve][concurrency]") {
    // The same requests on a server whose slots compute apart, one at a time: the reference.
    const std::vector<std::string> prompts = {"Once upon a time", "The little dog", "Lily wanted to", "One day, Tom"};
    auto body = [&](size_t i) {
        json b{{"prompt", prompts[i]}, {"n_predict", 40}, {"return_tokens", true}};
        if (i % 2 == 0) b["temperature"] = 0;
        else b.update(json{{"temperature", 0.9}, {"seed", 100 + int(i)}});  // seeded sampling must not change either
        return b;
    };
    std::vector<json> alone;
    {
        ServerProcess apart({"-m", bundled_model(), "-c", "1024", "--parallel", "4", "-t", "1", "--no-cont-batching"});
        auto c = apart.client();
        for (size_t i = 0; i < prompts.size(); ++i) {
            const Reply r = post(c, "/completion", body(i));
            REQUIRE(r.status == 200);
            alone.push_back(r.data["tokens"]);
        }
    }
    ServerProcess server({"-m", bundled_model(), "-c", "1024", "--parallel", "4", "-t", "1", "--metrics"});
    CHECK(server.log().find("continuous batching: 4 slots share each forward pass") != std::string::npos);
    std::vector<std::future<json>> results;
    for (int round = 0; round < 2; ++round)
        for (size_t i = 0; i < prompts.size(); ++i)
            results.push_back(std::async(std::launch::async, [&, i] {
                auto c = server.client();
                auto res = c.Post("/completion", body(i).dump(), "application/json");
                if (!res) return json{{"client_error", httplib::to_string(res.error())}};
                return res->status == 200 ? json::parse(res->body)["tokens"] : json{{"status", res->status}, {"body", res->body}};
            }));
    for (size_t k = 0; k < results.size(); ++k) CHECK(results[k].get() == alone[k % prompts.size()]);
    auto c = server.client();
    const Reply m = get(c, "/metrics");
    REQUIRE(m.status == 200);
    INFO(m.body);
    CHECK(metric(m.body, "llamacpp:n_decode_total") > 0);
    CHECK(metric(m.body, "llamacpp:n_busy_slots_per_decode") > 1.0);  // passes held several slots
}
