// A `specula serve` process for the integration tests: the real binary, started on a free loopback port (--port 0;
// the port is read from its "server is listening on" line), stopped with SIGTERM at the end of the test.
#pragma once

#include <catch2/catch.hpp>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char **environ;

namespace serve_test {

using json = nlohmann::json;

// Reports the test as skipped (ctest shows "Skipped": SKIP_RETURN_CODE 77) instead of passing without checking.
[[noreturn]] inline void skip_test(const std::string &why) {
    std::fprintf(stdout, "SKIPPED: %s\n", why.c_str());
    std::fflush(stdout);
    std::_Exit(77);
}

inline std::filesystem::path fixtures_dir() {
    const char *env = std::getenv("SPECULA_FIXTURES_DIR");
    return env != nullptr && *env != '\0' ? std::filesystem::path(env) : std::filesystem::path(SPECULA_FIXTURES_DIR);
}

inline std::filesystem::path require_fixture(const std::filesystem::path &relative) {
    const std::filesystem::path p = fixtures_dir() / relative;
    if (!std::filesystem::exists(p)) skip_test("fixture " + p.string() + " is missing (set SPECULA_FIXTURES_DIR)");
    return p;
}

// A TCP connection to 127.0.0.1:port, for tests that send raw bytes (slow, hanging-up and hostile clients).
inline int connect_loopback(int port) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(uint16_t(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(connect(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) == 0);
    return fd;
}

inline std::string bundled_model() { return std::string(SPECULA_SOURCE_DIR) + "/models/stories260K.gguf"; }

// A scratch directory removed at the end of the test.
struct ScratchDir {
    std::filesystem::path path;
    ScratchDir() {
        char tmpl[] = "/tmp/specula-serve-test-XXXXXX";
        path = mkdtemp(tmpl);
    }
    ~ScratchDir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
};

// Runs a command, returns its stdout (stderr to /dev/null) and sets *status to its exit status.
inline std::string run_command(const std::vector<std::string> &argv, int *status = nullptr) {
    int out[2];
    REQUIRE(pipe(out) == 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    std::vector<char *> args;
    for (const std::string &a : argv) args.push_back(const_cast<char *>(a.c_str()));
    args.push_back(nullptr);
    pid_t pid = 0;
    REQUIRE(posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ) == 0);
    posix_spawn_file_actions_destroy(&actions);
    close(out[1]);
    std::string text;
    char buf[4096];
    ssize_t n = 0;
    while ((n = read(out[0], buf, sizeof buf)) > 0) text.append(buf, size_t(n));
    close(out[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    if (status != nullptr) *status = st;
    return text;
}

// `specula generate` on exactly these prompt tokens, greedy and without drafting: the ids it generates.
inline std::vector<int32_t> cli_greedy_tokens(const std::string &model, const std::vector<int32_t> &prompt, int n_predict,
                                              int n_ctx = 0) {
    std::string ids;
    for (size_t i = 0; i < prompt.size(); ++i) ids += (i ? "," : "") + std::to_string(prompt[i]);
    std::vector<std::string> argv = {SPECULA_CLI, "generate", "-m", model, "--prompt-ids", ids, "-n", std::to_string(n_predict),
                                     "--temp", "0", "--spec", "none", "--format", "jsonl", "-t", "1"};
    if (n_ctx > 0) argv.insert(argv.end(), {"-c", std::to_string(n_ctx)});
    int status = 0;
    const std::string out = run_command(argv, &status);
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
    std::vector<int32_t> tokens;
    std::istringstream lines(out);
    std::string line;
    while (std::getline(lines, line)) {
        const json j = json::parse(line);
        if (j.contains("id") && j.at("id").get<int>() >= 0) tokens.push_back(j.at("id").get<int32_t>());
    }
    return tokens;
}

class ServerProcess {
public:
    explicit ServerProcess(const std::vector<std::string> &args) {
        log_path_ = std::filesystem::temp_directory_path() / ("specula-serve-" + std::to_string(getpid()) + "-" +
                                                              std::to_string(counter()++) + ".log");
        std::vector<std::string> argv = {SPECULA_CLI, "serve", "--port", "0"};
        argv.insert(argv.end(), args.begin(), args.end());
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        posix_spawn_file_actions_addopen(&actions, 2, log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
        std::vector<char *> cargs;
        for (const std::string &a : argv) cargs.push_back(const_cast<char *>(a.c_str()));
        cargs.push_back(nullptr);
        REQUIRE(posix_spawn(&pid_, cargs[0], &actions, nullptr, cargs.data(), environ) == 0);
        posix_spawn_file_actions_destroy(&actions);
        // Up to 120 s for the model to load (sanitizer builds are slow).
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
        const std::string marker = "server is listening on http://127.0.0.1:";
        while (port_ == 0) {
            const std::string text = log();
            const size_t at = text.find(marker);
            if (at != std::string::npos && text.find('\n', at) != std::string::npos) {
                port_ = std::atoi(text.c_str() + at + marker.size());
                break;
            }
            int status = 0;
            if (waitpid(pid_, &status, WNOHANG) == pid_) {
                pid_ = -1;
                FAIL("specula serve exited before listening:\n" << text);
            }
            if (std::chrono::steady_clock::now() > deadline) FAIL("specula serve did not start listening:\n" << text);
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    }
    // Stops the server with SIGTERM. A server that does not exit cleanly with 0, or that a sanitizer reported on
    // (UBSan's reports do not change the exit code), fails the test process: its log goes to stderr.
    ~ServerProcess() {
        const bool running = pid_ > 0;
        const int status = running ? stop(SIGTERM) : 0;
        const std::string text = log();
        const bool clean = !running || (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
        const bool reported = text.find("runtime error:") != std::string::npos || text.find("Sanitizer") != std::string::npos;
        std::error_code ec;
        std::filesystem::remove(log_path_, ec);
        if ((!clean || reported) && std::uncaught_exceptions() == 0) {
            std::fprintf(stderr, "specula serve did not end cleanly (wait status %d); its log:\n%s\n", status, text.c_str());
            std::fflush(stderr);
            std::_Exit(3);
        }
    }
    ServerProcess(const ServerProcess &) = delete;
    ServerProcess &operator=(const ServerProcess &) = delete;

    int port() const { return port_; }
    std::string log() const {
        std::ifstream in(log_path_);
        std::ostringstream ss;
        ss << in.rdbuf();
        return ss.str();
    }
    httplib::Client client(int timeout_s = 300) const {
        httplib::Client c("127.0.0.1", port_);
        c.set_read_timeout(timeout_s, 0);
        c.set_write_timeout(timeout_s, 0);
        c.set_tcp_nodelay(true);
        return c;
    }
    // Sends sig and waits (up to timeout) for the exit; returns the wait status, or -1 if it had to be killed.
    int stop(int sig, int timeout_s = 60) {
        if (pid_ <= 0) return -1;
        kill(pid_, sig);
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
        int status = 0;
        while (waitpid(pid_, &status, WNOHANG) != pid_) {
            if (std::chrono::steady_clock::now() > deadline) {
                kill(pid_, SIGKILL);
                waitpid(pid_, &status, 0);
                pid_ = -1;
                return -1;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        pid_ = -1;
        return status;
    }

private:
    static int &counter() {
        static int n = 0;
        return n;
    }
    pid_t pid_ = -1;
    int port_ = 0;
    std::filesystem::path log_path_;
};

// POSTs a JSON body; returns (status, parsed body or null when it is not JSON).
struct Reply {
    int status = 0;
    std::string body;
    json data;
    std::string content_type;
};

inline Reply post(httplib::Client &c, const std::string &path, const std::string &body,
                  const httplib::Headers &headers = {}) {
    Reply r;
    auto res = c.Post(path.c_str(), headers, body, "application/json");
    REQUIRE(res);
    r.status = res->status;
    r.body = res->body;
    r.content_type = res->get_header_value("Content-Type");
    r.data = json::parse(res->body, nullptr, false);
    return r;
}

inline Reply post(httplib::Client &c, const std::string &path, const json &body, const httplib::Headers &headers = {}) {
    return post(c, path, body.dump(), headers);
}

inline Reply get(httplib::Client &c, const std::string &path, const httplib::Headers &headers = {}) {
    Reply r;
    auto res = c.Get(path.c_str(), headers);
    REQUIRE(res);
    r.status = res->status;
    r.body = res->body;
    r.content_type = res->get_header_value("Content-Type");
    r.data = json::parse(res->body, nullptr, false);
    return r;
}

// The `data:` payloads of a server-sent-event body, in order.
inline std::vector<std::string> sse_data(const std::string &body) {
    std::vector<std::string> out;
    size_t at = 0;
    while ((at = body.find("data: ", at)) != std::string::npos) {
        const size_t end = body.find("\n\n", at);
        out.push_back(body.substr(at + 6, (end == std::string::npos ? body.size() : end) - at - 6));
        at = end == std::string::npos ? body.size() : end + 2;
    }
    return out;
}

// The checks every error response must pass: llama-server's {"error": {"code", "message", "type"}}.
// The server's /tokenize of content (a string, or ids and strings mixed).
inline std::vector<int32_t> tokenize(httplib::Client &c, const json &content, bool add_special) {
    const Reply r = post(c, "/tokenize", json{{"content", content}, {"add_special", add_special}});
    REQUIRE(r.status == 200);
    return r.data.at("tokens").get<std::vector<int32_t>>();
}

inline void check_error(const Reply &r, int status, const std::string &type) {
    INFO(r.body);
    CHECK(r.status == status);
    REQUIRE(r.data.is_object());
    REQUIRE(r.data.contains("error"));
    CHECK(r.data["error"]["code"] == status);
    CHECK(r.data["error"]["type"] == type);
    CHECK(r.data["error"]["message"].is_string());
    CHECK(!r.data["error"]["message"].get<std::string>().empty());
}

}  // namespace serve_test
