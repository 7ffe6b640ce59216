// Logging goes to the host's callback and nowhere else: silent by default, never stdout or stderr.
#include <catch2/catch.hpp>
#include <specula/specula.h>

#include <cstdio>
#include <fcntl.h>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

const std::string kModel = std::string(SPECULA_SOURCE_DIR) + "/models/stories260K.gguf";

struct Captured {
    std::vector<std::pair<specula_log_level, std::string>> messages;
};

void capture(specula_log_level level, const char *message, void *user_data) {
    static_cast<Captured *>(user_data)->messages.emplace_back(level, message);
}

// Loads the bundled model, generates a few tokens and cleans up.
void load_and_generate() {
    specula_model *model = nullptr;
    REQUIRE(specula_model_load(kModel.c_str(), nullptr, &model, nullptr) == SPECULA_OK);
    specula_session *session = nullptr;
    REQUIRE(specula_session_create(model, nullptr, nullptr, &session, nullptr) == SPECULA_OK);
    REQUIRE(specula_session_append_text(session, "Once", 4, SPECULA_TOKENIZE_ADD_SPECIAL, nullptr) == SPECULA_OK);
    specula_generate_options go;
    specula_generate_options_init(&go);
    go.max_tokens = 4;
    REQUIRE(specula_session_generate(session, &go, nullptr, nullptr, nullptr, nullptr) == SPECULA_OK);
    specula_session_destroy(session);
    specula_model_destroy(model);
}

// Runs fn with file descriptors 1 and 2 redirected to a temporary file; returns what was written to them.
template <typename Fn> std::string output_of(Fn fn) {
    std::fflush(stdout);
    std::fflush(stderr);
    char path[] = "/tmp/specula-log-test-XXXXXX";
    const int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    const int saved_out = dup(1), saved_err = dup(2);
    dup2(fd, 1);
    dup2(fd, 2);
    fn();
    std::fflush(stdout);
    std::fflush(stderr);
    dup2(saved_out, 1);
    dup2(saved_err, 2);
    close(saved_out);
    close(saved_err);
    std::string text;
    char buf[4096];
    lseek(fd, 0, SEEK_SET);
    for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) text.append(buf, size_t(n));
    close(fd);
    unlink(path);
    return text;
}

}  // namespace

TEST_CASE("the library writes nothing to stdout or stderr, with or without a log callback", "[logging]") {
    specula_log_set(nullptr, SPECULA_LOG_DEBUG, nullptr);
    CHECK(output_of(load_and_generate).empty());
    Captured captured;
    specula_log_set(capture, SPECULA_LOG_DEBUG, &captured);
    CHECK(output_of(load_and_generate).empty());
    specula_log_set(nullptr, SPECULA_LOG_DEBUG, nullptr);
}

TEST_CASE("log messages reach the callback at or above its level, and stop when it is cleared", "[logging]") {
    Captured captured;
    specula_log_set(capture, SPECULA_LOG_INFO, &captured);
    load_and_generate();
    REQUIRE_FALSE(captured.messages.empty());
    bool saw_load = false;
    for (const auto &[level, text] : captured.messages) {
        CHECK(level >= SPECULA_LOG_INFO);
        CHECK(text.find('\n') == std::string::npos);
        saw_load |= text.find("loaded") != std::string::npos;
    }
    CHECK(saw_load);

    Captured above;
    specula_log_set(capture, SPECULA_LOG_ERROR, &above);
    load_and_generate();
    CHECK(above.messages.empty());  // a successful run logs nothing at ERROR

    specula_log_set(nullptr, SPECULA_LOG_INFO, nullptr);
    const size_t before = captured.messages.size();
    load_and_generate();
    CHECK(captured.messages.size() == before);
}
