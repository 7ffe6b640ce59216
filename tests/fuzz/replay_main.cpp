// The main of a fuzz target built without libFuzzer (the normal and sanitizer builds): runs the target once on
// every file of the folders (or files) given on the command line, as libFuzzer would, so that the committed seed
// corpus and every regression input run in the normal test suite (ctest label fuzz-replay).
//
//   fuzz_<target>_replay tests/fuzz/corpus/<target> tests/fuzz/regressions/<target>
//
// A folder that does not exist counts as empty (a target without regressions yet). A missing vocabulary or model
// makes LLVMFuzzerInitialize print why and exit 77 ("skipped"). A crash is the target's: an uncaught exception,
// a trap or a sanitizer report ends the process with the input's name printed just before.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);

int main(int argc, char **argv) {
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    std::vector<std::filesystem::path> files;
    for (int i = 1; i < argc; ++i) {
        const std::filesystem::path p(argv[i]);
        if (std::filesystem::is_directory(p)) {
            for (const auto &e : std::filesystem::directory_iterator(p))
                if (e.is_regular_file() && e.path().filename().string().rfind("README", 0) != 0) files.push_back(e.path());
        } else if (std::filesystem::is_regular_file(p)) {
            files.push_back(p);
        }
    }
    std::sort(files.begin(), files.end());
    for (const auto &f : files) {
        std::ifstream in(f, std::ios::binary);
        const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        std::printf("replay: %s (%zu bytes)\n", f.string().c_str(), bytes.size());
        std::fflush(stdout);
        // A copy of exactly `size` bytes on the heap, as libFuzzer passes it: reading past it is caught by ASan.
        std::vector<uint8_t> copy(bytes);
        static uint8_t empty;
        LLVMFuzzerTestOneInput(copy.empty() ? &empty : copy.data(), copy.size());
    }
    std::printf("replay: %zu inputs, no crash\n", files.size());
    if (files.empty()) {
        std::fprintf(stderr, "replay: no inputs found\n");
        return 1;
    }
    return 0;
}
