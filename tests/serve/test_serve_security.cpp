// `specula serve` against what a hostile request or web page does (issue 44; docs/server.md "Who may connect"):
// bodies nested or sized to exhaust it, slow and idle clients, foreign Host headers (DNS rebinding), browser
// origins, simple text/plain requests, guessed API keys and slot file names that climb out of their folder. Every
// test runs the real server process on a loopback port; the request policy's pieces are also checked in-process.
#include "server_process.h"

#include "json_limits.h"
#include "request_policy.h"
#include "slot_files.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

using namespace serve_test;

namespace {

// A connection that sends exactly what it is told, when it is told (what slow, idle and hostile clients do).
class RawClient {
public:
    explicit RawClient(int port) {
        fd_ = connect_loopback(port);
    }
    ~RawClient() {
        if (fd_ >= 0) close(fd_);
    }
    RawClient(const RawClient &) = delete;
    RawClient &operator=(const RawClient &) = delete;
    bool send_text(const std::string &text) { return ::send(fd_, text.data(), text.size(), MSG_NOSIGNAL) == ssize_t(text.size()); }
    // What arrives until the server closes the connection or timeout_ms pass without data.
    std::string read_all(int timeout_ms) {
        std::string got;
        char buf[4096];
        for (;;) {
            pollfd p{fd_, POLLIN, 0};
            if (poll(&p, 1, timeout_ms) <= 0) break;
            const ssize_t n = recv(fd_, buf, sizeof buf, 0);
            if (n <= 0) break;
            got.append(buf, size_t(n));
        }
        return got;
    }

private:
    int fd_ = -1;
};

int status_of(const std::string &response) {
    return response.rfind("HTTP/1.1 ", 0) == 0 ? std::atoi(response.c_str() + 9) : 0;
}

std::string body_of(const std::string &response) {
    const size_t at = response.find("\r\n\r\n");
    return at == std::string::npos ? "" : response.substr(at + 4);
}

Reply post_typed(httplib::Client &c, const std::string &path, const std::string &body, const std::string &content_type,
                 const httplib::Headers &headers = {}) {
    Reply r;
    auto res = c.Post(path.c_str(), headers, body, content_type.c_str());
    REQUIRE(res);
    r.status = res->status;
    r.body = res->body;
    r.data = json::parse(res->body, nullptr, false);
    return r;
}

const json kSmallCompletion = {{"prompt", "Once"}, {"n_predict", 2}, {"temperature", 0}};

}  // namespace

TEST_CASE("a body nested 300,000 deep is a 400 and the server stays up, and so are bodies too wide or too long", "[serve][security]") {
    ServerProcess server({"-m", bundled_model(), "-c", "128"});
    auto c = server.client();
    // The request of issue 44: 600 KB of well-formed JSON that crashed the server (a recursive copy overflowed the stack).
    const std::string deep = "{\"prompt\": " + std::string(300000, '[') + std::string(300000, ']') + "}";
    const Reply r = post(c, "/completion", deep);
    check_error(r, 400, "invalid_request_error");
    CHECK(r.data["error"]["message"].get<std::string>().find("deeper than 64") != std::string::npos);
    for (const char *path : {"/v1/chat/completions", "/infill", "/tokenize", "/v1/completions"})
        check_error(post(c, path, deep), 400, "invalid_request_error");
    // At the limit it is read (and refused for what it says, not how it nests); one level more is refused unread.
    const std::string at_limit = "{\"prompt\": " + std::string(63, '[') + std::string(63, ']') + "}";
    const Reply r63 = post(c, "/completion", at_limit);
    check_error(r63, 400, "invalid_request_error");
    CHECK(r63.data["error"]["message"].get<std::string>().find("deeper") == std::string::npos);
    const std::string over = "{\"prompt\": " + std::string(64, '[') + std::string(64, ']') + "}";
    CHECK(post(c, "/completion", over).data["error"]["message"].get<std::string>().find("deeper than 64") != std::string::npos);
    // 1.2 million token ids (7 MB, under the 16 MiB body limit): more values than any request needs.
    std::string wide = "{\"prompt\": [";
    for (int i = 0; i < 1200000; ++i) wide += i ? ",1" : "1";
    wide += "]}";
    const Reply rw = post(c, "/completion", wide);
    check_error(rw, 400, "invalid_request_error");
    CHECK(rw.data["error"]["message"].get<std::string>().find("JSON values") != std::string::npos);
    // A key of 2 KB.
    check_error(post(c, "/completion", "{\"" + std::string(2048, 'k') + "\": 1, \"prompt\": \"Once\"}"), 400, "invalid_request_error");
    CHECK(get(c, "/health").status == 200);
    CHECK(post(c, "/completion", kSmallCompletion).status == 200);
}

TEST_CASE("256 slow clients attached: /health still answers at once, and the slow ones get 408", "[serve][security][concurrency]") {
    ServerProcess server({"-m", bundled_model(), "-c", "128", "--request-timeout", "4"});
    // Each sends a request line and a header, then a header line now and then: slowloris. Before issue 44 64 of them
    // held every worker of the pool and /health got no answer within 60 s.
    std::vector<std::unique_ptr<RawClient>> slow;
    for (int i = 0; i < 256; ++i) {
        slow.push_back(std::make_unique<RawClient>(server.port()));
        REQUIRE(slow.back()->send_text("POST /completion HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"));
    }
    for (int round = 0; round < 2; ++round) {
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        for (auto &s : slow) s->send_text("X-Slow: 1\r\n");
        auto c = server.client(5);  // a functional bound: without the fix the answer never comes
        const auto t0 = std::chrono::steady_clock::now();
        auto res = c.Get("/health");
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        REQUIRE(res);
        CHECK(res->status == 200);
        std::printf("/health with 256 slow clients attached: %.1f ms\n", ms);
        // A real request is served too.
        CHECK(post(c, "/completion", kSmallCompletion).status == 200);
    }
    // The request timeout (4 s from each connection's start) ends them with a 408 and a closed connection.
    const std::string answer = slow.front()->read_all(10000);
    INFO(answer);
    CHECK(status_of(answer) == 408);
    CHECK(body_of(answer).find("timeout_error") != std::string::npos);
    // An idle connection (nothing sent) is closed at the same deadline.
    RawClient idle(server.port());
    CHECK(idle.read_all(10000).empty());
}

TEST_CASE("connections over the caps per client and in total get a clear 503", "[serve][security][concurrency]") {
    SECTION("per client address") {
        ServerProcess server({"-m", bundled_model(), "-c", "128", "--max-connections-per-client", "4"});
        std::vector<std::unique_ptr<RawClient>> held;
        for (int i = 0; i < 4; ++i) held.push_back(std::make_unique<RawClient>(server.port()));
        std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the server has taken the four
        RawClient fifth(server.port());
        fifth.send_text("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
        const std::string answer = fifth.read_all(5000);
        INFO(answer);
        CHECK(status_of(answer) == 503);
        CHECK(answer.find("Connection: close") != std::string::npos);
        CHECK(body_of(answer).find("--max-connections-per-client 4") != std::string::npos);
        held.clear();
        // Once they are gone, connections are served again.
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        int status = 0;
        while (status != 200 && std::chrono::steady_clock::now() < until) {
            auto c = server.client(5);
            auto res = c.Get("/health");
            status = res ? res->status : 0;
            if (status != 200) std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        CHECK(status == 200);
    }
    SECTION("in total") {
        ServerProcess server({"-m", bundled_model(), "-c", "128", "--max-connections", "3"});
        std::vector<std::unique_ptr<RawClient>> held;
        for (int i = 0; i < 3; ++i) held.push_back(std::make_unique<RawClient>(server.port()));
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        RawClient fourth(server.port());
        fourth.send_text("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
        const std::string answer = fourth.read_all(5000);
        INFO(answer);
        CHECK(status_of(answer) == 503);
        CHECK(body_of(answer).find("--max-connections 3") != std::string::npos);
    }
}

TEST_CASE("a foreign Host header is refused with 403 (DNS rebinding) while loopback names and --allow-host are served", "[serve][security]") {
    ServerProcess server({"-m", bundled_model(), "-c", "128"});
    auto c = server.client();
    const std::string port = std::to_string(server.port());
    check_error(get(c, "/health", {{"Host", "evil.example:" + port}}), 403, "permission_error");
    check_error(post(c, "/completion", kSmallCompletion, {{"Host", "rebind.attacker.test"}}), 403, "permission_error");
    CHECK(get(c, "/health", {{"Host", "localhost:" + port}}).status == 200);
    CHECK(get(c, "/health", {{"Host", "127.0.0.1:" + port}}).status == 200);
    CHECK(get(c, "/health", {{"Host", "[::1]:" + port}}).status == 200);
    CHECK(get(c, "/health", {{"Host", "app.localhost"}}).status == 200);
    // With no Host at all (an HTTP/1.0 tool) the request is served.
    RawClient old(server.port());
    old.send_text("GET /health HTTP/1.0\r\n\r\n");
    CHECK(status_of(old.read_all(5000)) == 200);

    ServerProcess allowing({"-m", bundled_model(), "-c", "128", "--allow-host", "llm.lan"});
    auto a = allowing.client();
    CHECK(get(a, "/health", {{"Host", "llm.lan:8080"}}).status == 200);
    check_error(get(a, "/health", {{"Host", "evil.example"}}), 403, "permission_error");
}

TEST_CASE("browser origins are refused unless loopback or allowed with --cors-origin", "[serve][security]") {
    ServerProcess server({"-m", bundled_model(), "-c", "128"});
    auto c = server.client();
    // A preflight from a foreign page: 403, and no CORS header that would let the page go on.
    auto pre = c.Options("/completion", {{"Origin", "http://evil.example"}, {"Access-Control-Request-Method", "POST"}});
    REQUIRE(pre);
    CHECK(pre->status == 403);
    CHECK(!pre->has_header("Access-Control-Allow-Origin"));
    // The request itself from that page, in every form, generates nothing.
    const Reply r = post(c, "/completion", kSmallCompletion, {{"Origin", "http://evil.example"}});
    check_error(r, 403, "permission_error");
    CHECK(r.data["error"]["message"].get<std::string>().find("--cors-origin") != std::string::npos);
    check_error(get(c, "/props", {{"Origin", "null"}}), 403, "permission_error");  // a sandboxed frame or a file:// page
    // A page served from this machine is allowed, with the CORS headers it needs.
    auto local = c.Options("/completion", {{"Origin", "http://localhost:5173"}, {"Access-Control-Request-Method", "POST"}});
    REQUIRE(local);
    CHECK(local->status == 200);
    CHECK(local->get_header_value("Access-Control-Allow-Origin") == "http://localhost:5173");
    auto res = c.Post("/completion", {{"Origin", "http://127.0.0.1:3000"}}, kSmallCompletion.dump(), "application/json");
    REQUIRE(res);
    CHECK(res->status == 200);
    CHECK(res->get_header_value("Access-Control-Allow-Origin") == "http://127.0.0.1:3000");

    ServerProcess allowing({"-m", bundled_model(), "-c", "128", "--cors-origin", "https://editor.example"});
    auto a = allowing.client();
    auto ok = a.Post("/completion", {{"Origin", "https://editor.example"}}, kSmallCompletion.dump(), "application/json");
    REQUIRE(ok);
    CHECK(ok->status == 200);
    CHECK(ok->get_header_value("Access-Control-Allow-Origin") == "https://editor.example");
    check_error(post(a, "/completion", kSmallCompletion, {{"Origin", "https://other.example"}}), 403, "permission_error");

    // `*` on purpose: llama-server's behaviour, every origin echoed.
    ServerProcess any({"-m", bundled_model(), "-c", "128", "--cors-origin", "*"});
    auto y = any.client();
    auto echoed = y.Options("/completion", {{"Origin", "http://web.mydomain.fr"}});
    REQUIRE(echoed);
    CHECK(echoed->status == 200);
    CHECK(echoed->get_header_value("Access-Control-Allow-Origin") == "http://web.mydomain.fr");
}

TEST_CASE("POST bodies must be declared JSON: a text/plain simple request is refused", "[serve][security]") {
    ServerProcess server({"-m", bundled_model(), "-c", "128"});
    auto c = server.client();
    const std::string body = kSmallCompletion.dump();
    // What a page can send without a preflight: text/plain, a form, multipart. Refused before the body is read.
    check_error(post_typed(c, "/completion", body, "text/plain;charset=UTF-8"), 415, "invalid_request_error");
    check_error(post_typed(c, "/completion", body, "application/x-www-form-urlencoded"), 415, "invalid_request_error");
    check_error(post_typed(c, "/v1/chat/completions", body, "multipart/form-data; boundary=x"), 415, "invalid_request_error");
    // JSON declared in any of its spellings is served.
    CHECK(post_typed(c, "/completion", body, "application/json").status == 200);
    CHECK(post_typed(c, "/completion", body, "Application/JSON; charset=utf-8").status == 200);
    CHECK(post_typed(c, "/completion", body, "application/vnd.api+json").status == 200);
    // No Content-Type at all: served from a tool (no Origin), refused from a page (a typeless Blob body needs no preflight).
    RawClient tool(server.port());
    tool.send_text("POST /completion HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: " +
                   std::to_string(body.size()) + "\r\n\r\n" + body);
    CHECK(status_of(tool.read_all(30000)) == 200);
    RawClient page(server.port());
    page.send_text("POST /completion HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: http://localhost:8000\r\nContent-Length: " +
                   std::to_string(body.size()) + "\r\n\r\n" + body);
    CHECK(status_of(page.read_all(5000)) == 415);
    // A POST without a body (curl -X POST) is read as empty at once, not waited on until the request timeout.
    RawClient empty(server.port());
    empty.send_text("POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    CHECK(status_of(empty.read_all(5000)) == 400);
}

TEST_CASE("with an API key, wrong keys are refused and an address that keeps guessing is rate-limited", "[serve][security]") {
    ServerProcess server({"-m", bundled_model(), "-c", "128", "--api-key", "sekret"});
    auto c = server.client();
    const std::string good = "Bearer sekret";
    CHECK(post(c, "/completion", kSmallCompletion, {{"Authorization", good}}).status == 200);
    // Keys that share a prefix with the real one, are longer or shorter: all the same 401.
    for (const char *guess : {"s", "sekre", "sekret2", "sekreT", "", "xxxxxxxxxxxxxxxxxxxxxxxxxx", "SEKRET", "Bearer"})
        check_error(post(c, "/completion", kSmallCompletion, {{"Authorization", std::string("Bearer ") + guess}}), 401,
                    "authentication_error");
    check_error(post(c, "/completion", kSmallCompletion, {{"X-Api-Key", "guess"}}), 401, "authentication_error");
    check_error(post(c, "/completion", kSmallCompletion, {{"X-Api-Key", "guess2"}}), 401, "authentication_error");
    // The 11th failure within a minute: 429 with Retry-After, even for the right key, until the minute is over.
    auto res = c.Post("/completion", {{"Authorization", "Bearer guess"}}, kSmallCompletion.dump(), "application/json");
    REQUIRE(res);
    CHECK(res->status == 429);
    CHECK(std::atoi(res->get_header_value("Retry-After").c_str()) >= 1);
    check_error(post(c, "/completion", kSmallCompletion, {{"Authorization", good}}), 429, "rate_limit_error");
    CHECK(get(c, "/health").status == 200);  // public endpoints stay public
}

TEST_CASE("slot files: save, restore and erase inside --slot-save-path, and names that leave it are refused", "[serve][security]") {
    ScratchDir dir;
    const std::filesystem::path slots = dir.path / "slots";
    std::filesystem::create_directories(dir.path / "outside");
    ServerProcess server({"-m", bundled_model(), "-c", "128", "--slot-save-path", slots.string(), "--slots"});
    auto c = server.client();
    REQUIRE(post(c, "/completion", kSmallCompletion).status == 200);
    const Reply saved = post(c, "/slots/0?action=save", json{{"filename", "slot1.bin"}});
    INFO(saved.body);
    REQUIRE(saved.status == 200);
    CHECK(saved.data["n_saved"].get<int>() > 0);
    CHECK(saved.data["n_written"].get<long long>() == (long long)std::filesystem::file_size(slots / "slot1.bin"));
    const Reply erased = post(c, "/slots/0?action=erase", std::string());
    CHECK(erased.status == 200);
    CHECK(erased.data["n_erased"] == saved.data["n_saved"]);
    CHECK(get(c, "/slots").data[0]["tokens_cached"] == 0);
    const Reply restored = post(c, "/slots/0?action=restore", json{{"filename", "slot1.bin"}});
    CHECK(restored.status == 200);
    CHECK(restored.data["n_restored"] == saved.data["n_saved"]);
    // n_saved counts the cache's tokens, as llama-server; the slot also holds the last generated token, not yet
    // evaluated (the snapshot keeps it: a restore continues exactly).
    const int cached = get(c, "/slots").data[0]["tokens_cached"].get<int>(), n_saved = saved.data["n_saved"].get<int>();
    CHECK((cached == n_saved || cached == n_saved + 1));

    // Every way out of the folder, for save and restore.
    std::filesystem::create_symlink(dir.path / "outside" / "target.bin", slots / "link.bin");
    const std::vector<std::string> escapes = {"../outside/x.bin", "..", ".", "/tmp/x.bin", "a/b.bin", "..\\x.bin", ".hidden", "",
                                              std::string(300, 'a'), std::string("x\0y", 3), "link.bin", "%2e%2e%2fx"};
    for (const std::string &name : escapes) {
        for (const char *action : {"save", "restore"}) {
            const Reply r = post(c, std::string("/slots/0?action=") + action, json{{"filename", name}});
            INFO(action << " " << name << ": " << r.body);
            check_error(r, 400, "invalid_request_error");
        }
    }
    CHECK(!std::filesystem::exists(dir.path / "outside" / "x.bin"));
    CHECK(!std::filesystem::exists(dir.path / "outside" / "target.bin"));
    CHECK(!std::filesystem::exists(dir.path / "x.bin"));
    check_error(post(c, "/slots/0?action=restore", json{{"filename", "missing.bin"}}), 400, "invalid_request_error");
    check_error(post(c, "/slots/7?action=save", json{{"filename", "a.bin"}}), 400, "invalid_request_error");
    check_error(post(c, "/slots/0?action=fly", json{{"filename", "a.bin"}}), 400, "invalid_request_error");

    // Without --slot-save-path: save and restore are not offered (llama-server's 501), erase still works.
    ServerProcess plain({"-m", bundled_model(), "-c", "128"});
    auto p = plain.client();
    check_error(post(p, "/slots/0?action=save", json{{"filename", "slot1.bin"}}), 501, "not_supported_error");
    CHECK(post(p, "/slots/0?action=erase", std::string()).status == 200);
}

TEST_CASE("request policy and JSON limits, in-process", "[serve][security]") {
    using namespace specula_serve;
    CHECK(host_of("[::1]:8080") == "::1");
    CHECK(host_of("LocalHost:80") == "localhost");
    CHECK(host_of("localhost.") == "localhost");
    CHECK(is_loopback_host("127.3.4.5"));
    CHECK(is_loopback_host("::ffff:127.0.0.1"));
    CHECK(!is_loopback_host("localhost.evil.example"));
    CHECK(!is_loopback_host("128.0.0.1"));
    RequestPolicy policy;
    policy.bound_host = "127.0.0.1";
    CHECK(policy.host_allowed(""));
    CHECK(!policy.host_allowed("192.168.1.5:8080"));
    policy.bound_host = "0.0.0.0";
    policy.machine_name = "devbox";
    CHECK(policy.host_allowed("192.168.1.5:8080"));  // an IP literal cannot be rebound
    CHECK(policy.host_allowed("devbox:8080"));
    CHECK(!policy.host_allowed("evil.example"));
    CHECK(is_loopback_origin("http://localhost:3000"));
    CHECK(is_loopback_origin("https://[::1]"));
    CHECK(!is_loopback_origin("http://localhost.evil.example"));
    CHECK(!is_loopback_origin("http://localhost@evil.example"));
    CHECK(!is_loopback_origin("null"));
    CHECK(!is_loopback_origin("file://"));
    CHECK(is_json_content_type(" application/json ; charset=utf-8"));
    CHECK(!is_json_content_type("text/json"));
    CHECK(!is_json_content_type("application/jsonx"));
    CHECK(constant_time_equals("sekret", "sekret"));
    CHECK(!constant_time_equals(std::string("sekret\0", 7), "sekret"));
    CHECK(!constant_time_equals("", "sekret"));
    CHECK(!constant_time_equals("sekre", "sekret"));

    AuthThrottle throttle(3, std::chrono::seconds(60));
    const auto t0 = AuthThrottle::Clock::now();
    for (int i = 0; i < 3; ++i) throttle.failed("10.0.0.1", t0);
    CHECK(throttle.retry_after("10.0.0.1", t0) > 0);
    CHECK(throttle.retry_after("10.0.0.2", t0) == 0);
    CHECK(throttle.retry_after("10.0.0.1", t0 + std::chrono::seconds(61)) == 0);

    CHECK(json_limits_violation("[" + std::string(63, '[') + std::string(64, ']')).empty());
    CHECK(!json_limits_violation(std::string(65, '[') + std::string(65, ']')).empty());
    CHECK(json_limits_violation("not json").empty());  // the parser says what is wrong with it
    JsonLimits small;
    small.max_string_bytes = 4;
    CHECK(!json_limits_violation("[\"12345\"]", small).empty());
    CHECK(json_limits_violation("[\"1234\"]", small).empty());
    std::string members = "{";
    for (int i = 0; i < 1025; ++i) members += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":0";
    CHECK(json_limits_violation(members + "}").find("1024 members") != std::string::npos);

    CHECK(slot_filename_problem("slot-1_a.bin").empty());
    CHECK(slot_filename_problem("é.bin").empty());
    CHECK(!slot_filename_problem("../a").empty());
    CHECK(!slot_filename_problem("a/b").empty());
    CHECK(!slot_filename_problem("a:b").empty());
    CHECK(!slot_filename_problem("\xff").empty());
}
