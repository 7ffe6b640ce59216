// Backend choice through the C ABI: device enumeration, the CPU fallback with its reason, strict requests that
// fail with that reason, and versioned options from callers built against 0.4 (no backend fields). Every test
// holds on a machine with or without a GPU, and in a build with or without each GPU backend (CUDA, Vulkan): it
// asks the library which case it is in and checks that case.
#include <specula/specula.hpp>

#include <catch2/catch.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace {

const std::string kModelPath = SPECULA_SOURCE_DIR "/models/stories260K.gguf";

specula::Model &model() {
    static specula::Model m = specula::Model::load(kModelPath);
    return m;
}

std::string message_of(specula_error *err) {
    std::string m = err != nullptr ? specula_error_message(err) : "";
    specula_error_destroy(err);
    return m;
}

std::vector<int32_t> greedy_tokens(specula::Session &s, int32_t n) {
    s.append_text("Once upon a time");
    specula::GenerateOptions go(n);
    go.stop_at_eog = 0;
    s.generate(go);
    return s.tokens();
}

bool have_cuda() { return specula_device_count(SPECULA_BACKEND_CUDA) > 0; }
bool have_vulkan() { return specula_device_count(SPECULA_BACKEND_VULKAN) > 0; }

// Whether this build has a Vulkan backend at all: without one, every Vulkan reason is the not-built one.
const char *const kNoVulkanBuild = "this build has no Vulkan backend (configure with -DSPECULA_VULKAN=ON, libvulkan-dev and glslc)";
bool vulkan_built() { return specula::backend_unavailable_reason(SPECULA_BACKEND_VULKAN).find(kNoVulkanBuild) == std::string::npos; }

}  // namespace

TEST_CASE("backends: the CPU is always usable and devices are listed consistently", "[backend][api]") {
    specula_error *err = nullptr;
    CHECK(specula_backend_check(SPECULA_BACKEND_CPU, &err) == SPECULA_OK);
    CHECK(specula_device_count(SPECULA_BACKEND_CPU) == 0);
    CHECK(specula_device_count(SPECULA_BACKEND_AUTO) == 0);
    CHECK(specula_device_count(12345) == 0);
    const specula_status cuda = specula_backend_check(SPECULA_BACKEND_CUDA, &err);
    if (have_cuda()) {
        CHECK(cuda == SPECULA_OK);
        const auto devices = specula::devices();
        REQUIRE(!devices.empty());
        CHECK(std::string(devices[0].name).size() > 0);
        CHECK(devices[0].total_memory > 0);
        CHECK(devices[0].compute_capability >= 80);
    } else {
        CHECK(cuda == SPECULA_ERR_UNSUPPORTED);
        const std::string why = message_of(err);
        INFO(why);
        CHECK(why.rfind("CUDA: ", 0) == 0);
        CHECK(why.size() > 10);
        CHECK(specula::devices().empty());
        CHECK(specula::backend_unavailable_reason(SPECULA_BACKEND_CUDA) == why);
    }
    CHECK(specula::backend_unavailable_reason(SPECULA_BACKEND_CPU).empty());
}

TEST_CASE("backends: Vulkan is listed like CUDA, and a build without it says how to get it", "[backend][api]") {
    specula_error *err = nullptr;
    const specula_status vulkan = specula_backend_check(SPECULA_BACKEND_VULKAN, &err);
    if (have_vulkan()) {
        CHECK(vulkan == SPECULA_OK);
        const auto devices = specula::devices(SPECULA_BACKEND_VULKAN);
        REQUIRE(!devices.empty());
        for (size_t i = 0; i < devices.size(); ++i) {
            CHECK(devices[i].backend == SPECULA_BACKEND_VULKAN);
            CHECK(devices[i].index == int32_t(i));
            CHECK(std::string(devices[i].name).size() > 0);
        }
    } else {
        CHECK(vulkan == SPECULA_ERR_UNSUPPORTED);
        const std::string why = message_of(err);
        INFO(why);
        CHECK(why.rfind("Vulkan: ", 0) == 0);
        CHECK(specula_device_count(SPECULA_BACKEND_VULKAN) == 0);
        CHECK(specula::devices(SPECULA_BACKEND_VULKAN).empty());
        CHECK(specula::backend_unavailable_reason(SPECULA_BACKEND_VULKAN) == why);
        if (!vulkan_built()) CHECK(why == std::string("Vulkan: ") + kNoVulkanBuild);
    }
    specula_device_info info{};
    info.struct_size = sizeof info;
    CHECK(specula_device_get_info(SPECULA_BACKEND_VULKAN, specula_device_count(SPECULA_BACKEND_VULKAN), &info, &err) ==
          SPECULA_ERR_INVALID_ARGUMENT);
    const std::string out_of_range = message_of(err);
    CHECK(out_of_range.find("out of range") != std::string::npos);
    if (!vulkan_built()) CHECK(out_of_range.find(kNoVulkanBuild) != std::string::npos);
}

TEST_CASE("backends: AUTO is usable when any GPU backend is, else its reason names each", "[backend][api]") {
    specula_error *err = nullptr;
    const specula_status st = specula_backend_check(SPECULA_BACKEND_AUTO, &err);
    const std::string why = message_of(err);
    INFO(why);
    if (have_cuda() || have_vulkan()) {
        CHECK(st == SPECULA_OK);
        CHECK(why.empty());
    } else {
        CHECK(st == SPECULA_ERR_UNSUPPORTED);
        // Every GPU kind in AUTO's order, joined by "; ".
        CHECK(why.rfind("CUDA: ", 0) == 0);
        const size_t vulkan = why.find("; Vulkan: ");
        REQUIRE(vulkan != std::string::npos);
        CHECK(why.substr(0, vulkan) == specula::backend_unavailable_reason(SPECULA_BACKEND_CUDA));
        CHECK(why.substr(vulkan + 2) == specula::backend_unavailable_reason(SPECULA_BACKEND_VULKAN));
        if (!vulkan_built()) CHECK(why.find(kNoVulkanBuild) != std::string::npos);
    }
}

TEST_CASE("backends: bad device queries are INVALID_ARGUMENT with a message", "[backend][api]") {
    specula_error *err = nullptr;
    specula_device_info info{};
    info.struct_size = sizeof info;
    CHECK(specula_device_get_info(SPECULA_BACKEND_CUDA, specula_device_count(SPECULA_BACKEND_CUDA), &info, &err) == SPECULA_ERR_INVALID_ARGUMENT);
    CHECK(message_of(err).find("out of range") != std::string::npos);
    CHECK(specula_device_get_info(SPECULA_BACKEND_CUDA, -1, &info, &err) == SPECULA_ERR_INVALID_ARGUMENT);
    message_of(err);
    CHECK(specula_device_get_info(SPECULA_BACKEND_CPU, 0, &info, &err) == SPECULA_ERR_INVALID_ARGUMENT);
    message_of(err);
    CHECK(specula_device_get_info(SPECULA_BACKEND_CUDA, 0, nullptr, &err) == SPECULA_ERR_INVALID_ARGUMENT);
    message_of(err);
    CHECK(specula_backend_check(99, &err) == SPECULA_ERR_INVALID_ARGUMENT);
    message_of(err);
    CHECK(specula_backend_check(SPECULA_BACKEND_VULKAN + 1, &err) == SPECULA_ERR_INVALID_ARGUMENT);
    message_of(err);
    CHECK(specula_backend_check(-1, &err) == SPECULA_ERR_INVALID_ARGUMENT);
    message_of(err);
    CHECK(specula_device_get_info(SPECULA_BACKEND_AUTO, 0, &info, &err) == SPECULA_ERR_INVALID_ARGUMENT);
    message_of(err);
}

TEST_CASE("backends: asking for CUDA falls back to the CPU with the reason or runs on CUDA", "[backend][api]") {
    specula::SessionOptions o;
    o.n_ctx = 256;
    o.backend = SPECULA_BACKEND_CUDA;
    specula::Session s(model(), o, specula::SamplerOptions::greedy());
    if (have_cuda()) {
        CHECK(s.backend() == "cuda");
        CHECK(s.backend_note().empty());
    } else {
        CHECK(s.backend() == "cpu");
        INFO(s.backend_note());
        CHECK(s.backend_note().rfind("CUDA: ", 0) == 0);
        CHECK(s.backend_note().find("running on the CPU") != std::string::npos);
    }
    // Whatever it runs on, it generates the CPU's greedy tokens (stories260K is F32: the CUDA backend keeps F32).
    specula::SessionOptions cpu_o;
    cpu_o.n_ctx = 256;
    cpu_o.backend = SPECULA_BACKEND_CPU;
    specula::Session cpu(model(), cpu_o, specula::SamplerOptions::greedy());
    CHECK(cpu.backend() == "cpu");
    CHECK(cpu.backend_note().empty());
    CHECK(greedy_tokens(s, 32) == greedy_tokens(cpu, 32));
}

TEST_CASE("backends: a strict CUDA request without a device fails with the reason and no session", "[backend][api]") {
    specula_session_options o;
    specula_session_options_init(&o);
    o.backend = SPECULA_BACKEND_CUDA;
    o.allow_fallback = 0;
    o.n_ctx = 256;
    specula_session *s = reinterpret_cast<specula_session *>(0x1);
    specula_error *err = nullptr;
    const specula_status st = specula_session_create(model().get(), &o, nullptr, &s, &err);
    if (have_cuda()) {
        CHECK(st == SPECULA_OK);
        CHECK(std::string(specula_session_backend(s)) == "cuda");
        specula_session_destroy(s);
    } else {
        CHECK(st == SPECULA_ERR_UNSUPPORTED);
        CHECK(s == nullptr);
        CHECK(message_of(err).rfind("CUDA: ", 0) == 0);
    }
    // A device that does not exist is an argument error even with fallback allowed.
    o.allow_fallback = 1;
    o.device = 999;
    err = nullptr;
    const specula_status bad = specula_session_create(model().get(), &o, nullptr, &s, &err);
    const std::string why = message_of(err);
    if (have_cuda()) {
        CHECK(bad == SPECULA_ERR_INVALID_ARGUMENT);
    } else {
        CHECK(bad == SPECULA_OK);  // no CUDA at all: the fallback applies, and says why
        CHECK(std::string(specula_session_backend_note(s)).find("running on the CPU") != std::string::npos);
        specula_session_destroy(s);
    }
    o.device = -1;
    CHECK(specula_session_create(model().get(), &o, nullptr, &s, &err) == SPECULA_ERR_INVALID_ARGUMENT);
    message_of(err);
    o.device = 0;
    o.backend = 7;
    CHECK(specula_session_create(model().get(), &o, nullptr, &s, &err) == SPECULA_ERR_INVALID_ARGUMENT);
    message_of(err);
    o.backend = SPECULA_BACKEND_VULKAN + 1;
    CHECK(specula_session_create(model().get(), &o, nullptr, &s, &err) == SPECULA_ERR_INVALID_ARGUMENT);
    message_of(err);
    CHECK(std::string(specula_session_backend(nullptr)).empty());
    CHECK(std::string(specula_session_backend_note(nullptr)).empty());
}

TEST_CASE("backends: a strict Vulkan request without a device fails UNSUPPORTED with the reason", "[backend][api]") {
    specula_session_options o;
    specula_session_options_init(&o);
    o.backend = SPECULA_BACKEND_VULKAN;
    o.allow_fallback = 0;
    o.n_ctx = 256;
    specula_session *s = reinterpret_cast<specula_session *>(0x1);
    specula_error *err = nullptr;
    const specula_status st = specula_session_create(model().get(), &o, nullptr, &s, &err);
    const std::string why = message_of(err);
    INFO(why);
    if (have_vulkan()) {
        CHECK(st == SPECULA_OK);
        CHECK(std::string(specula_session_backend(s)) == "vulkan");
        CHECK(std::string(specula_session_backend_note(s)).empty());
        specula_session_destroy(s);
    } else {
        CHECK(st == SPECULA_ERR_UNSUPPORTED);
        CHECK(s == nullptr);
        CHECK(why.rfind("Vulkan: ", 0) == 0);
        if (!vulkan_built()) CHECK(why == std::string("Vulkan: ") + kNoVulkanBuild);
        // With fallback: the CPU, and the same reason in the note.
        o.allow_fallback = 1;
        REQUIRE(specula_session_create(model().get(), &o, nullptr, &s, &err) == SPECULA_OK);
        CHECK(std::string(specula_session_backend(s)) == "cpu");
        CHECK(std::string(specula_session_backend_note(s)) == why + "; running on the CPU");
        specula_session_destroy(s);
    }
}

TEST_CASE("backends: AUTO tries CUDA, then Vulkan, then the CPU, and its note names every GPU it could not use", "[backend][api]") {
    specula::SessionOptions o;
    o.n_ctx = 256;
    specula::Session s(model(), o, specula::SamplerOptions::greedy());
    const std::string backend = s.backend(), note = s.backend_note();
    INFO(backend << ": " << note);
    if (backend == "cpu") {
        // No GPU could take it: none listed, or (with AUTO) one passed by, e.g. a software Vulkan device such as
        // lavapipe, which computes on the CPU's cores only slower. Each GPU kind's reason in AUTO's order, then the
        // fallback.
        CHECK(!have_cuda());
        const size_t vulkan = note.find("; Vulkan: ");
        REQUIRE(vulkan != std::string::npos);
        CHECK(note.rfind("CUDA: ", 0) == 0);
        CHECK(note.size() > vulkan + 10);
        CHECK(note.substr(note.size() - std::string("; running on the CPU").size()) == "; running on the CPU");
        if (!vulkan_built())
            CHECK(note.substr(vulkan + 2) == std::string("Vulkan: ") + kNoVulkanBuild + "; running on the CPU");
    } else {
        // A GPU: CUDA when it can, else Vulkan; AUTO got what it asked for, so no note.
        CHECK((backend == "cuda" || backend == "vulkan"));
        if (backend == "vulkan") CHECK(have_vulkan());
        if (backend == "cuda") CHECK(have_cuda());
        CHECK(note.empty());
    }
}

TEST_CASE("backends: options from a 0.4 caller (no backend fields) get AUTO with fallback", "[backend][api]") {
    specula_session_options o;
    specula_session_options_init(&o);
    o.backend = 7;  // garbage beyond the old struct_size must be ignored
    o.allow_fallback = 0;
    o.struct_size = offsetof(specula_session_options, backend);
    o.n_ctx = 128;
    specula_session *s = nullptr;
    specula_error *err = nullptr;
    REQUIRE(specula_session_create(model().get(), &o, nullptr, &s, &err) == SPECULA_OK);
    const std::string backend = specula_session_backend(s);
    if (have_cuda()) CHECK(backend == "cuda");
    else if (backend != "vulkan") CHECK(backend == "cpu");  // Vulkan when it has a device with room
    specula_session_destroy(s);
}
