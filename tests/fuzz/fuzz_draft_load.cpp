// draft_load: a LongSpec draft file's bytes (models/drafts/*.longspec.gguf), loaded in memory against the
// bundled target models/stories260K.gguf (loaded once). Covers the draft's GGUF parse, its metadata
// (sdk/src/speculative/longspec_draft_file.cpp: sizes, heads, window, cross layer, rope settings), the checks
// against the target (architecture, sizes, vocabulary size, tokenizer fingerprint) and the binding of its 16
// tensors (names, shapes, types).
//
// Seeds (corpus/draft_load): the bundled trained draft, and small random drafts the library writes itself
// (write_random_longspec_draft: F32 and F16, small n_ff and window), which SPECULA_FUZZ_WRITE_SEEDS=<dir> makes
// LLVMFuzzerInitialize write there before it exits (README.md).
#include "fuzz_common.h"

#include "gguf/file_bytes.h"
#include "model/model.h"
#include "speculative/longspec_draft_file.h"

using namespace specula::internal;

namespace {
std::shared_ptr<const Model> g_target;
}

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    const std::string path = fuzz::require_file(fuzz::source_dir() / "models" / "stories260K.gguf", "draft_load's target model");
    g_target = Model::load(path, LoadOptions{});
    if (const char *dir = std::getenv("SPECULA_FUZZ_WRITE_SEEDS")) {
        RandomDraftOptions o;
        o.window = 8;
        o.n_ff = 16;
        write_random_longspec_draft(*g_target, std::string(dir) + "/random-f32-ff16-w8.gguf", o);
        o.weight_type = 1;
        o.n_ff = 8;
        o.window = 1;
        write_random_longspec_draft(*g_target, std::string(dir) + "/random-f16-ff8-w1.gguf", o);
        std::printf("draft_load: seeds written to %s\n", dir);
        std::exit(0);
    }
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    try {
        const auto draft = LongSpecDraft::load_bytes(FileBytes::from_vector(std::vector<uint8_t>(data, data + size)), g_target);
        const LongSpecDraftConfig &c = draft->config();
        FUZZ_CHECK(c.n_embd == g_target->hparams().n_embd && c.n_vocab == g_target->hparams().n_vocab);
        FUZZ_CHECK(c.window >= 1);
        FUZZ_CHECK(c.cross_layer >= 0 && c.cross_layer < g_target->hparams().n_layer);
        (void)draft->n_params();
    } catch (const Error &e) {
        fuzz::expected_error(e);
    }
    return 0;
}
