// gguf_model: a GGUF file's bytes, parsed and bound as a model, in memory (no file per input).
// Covers the GGUF reader (header, metadata of every value type, arrays, tensor directory, alignment, data bounds:
// sdk/src/gguf), the hyperparameters (sdk/src/model/hparams.cpp, rope scaling), the weight binding (shapes and
// types of every tensor the architecture needs: weights.cpp), the tokenizer's loading from tokenizer.ggml.*
// (sdk/src/tokenizer/vocab_loader.cpp) and, when the model loads, a tokenize/detokenize of a fixed text with its
// vocabulary. Each input is loaded twice: as a full model and vocab-only (what tokenizer tools do).
#include "fuzz_common.h"

#include "gguf/file_bytes.h"
#include "gguf/gguf_file.h"
#include "model/model.h"

using namespace specula::internal;

namespace {

void exercise(const Model &model) {
    const Vocab &vocab = model.vocab();
    // Every metadata value renders (what `specula info` prints).
    for (const auto &kv : model.file().metadata()) (void)kv.second.to_string(4);
    if (vocab.n_tokens() == 0) return;
    const std::string text = "Hello world! <s>\n\t 12345 \xC3\xA9\xE2\x96\x81\xF0\x9F\x98\x80";
    for (int special = 0; special < 2; ++special) {
        const std::vector<int32_t> ids = vocab.tokenize(text, special != 0, special != 0);
        for (const int32_t id : ids) FUZZ_CHECK(id >= 0 && id < vocab.n_tokens());
        (void)vocab.detokenize(ids, special != 0);
    }
    // A few pieces, from both ends of the vocabulary.
    for (int32_t id = 0; id < vocab.n_tokens() && id < 8; ++id) (void)vocab.token_to_piece(id, true);
    (void)vocab.token_to_piece(vocab.n_tokens() - 1, false);
}

void load(const uint8_t *data, size_t size, bool vocab_only) {
    LoadOptions options;
    options.vocab_only = vocab_only;
    try {
        const auto model = Model::load_bytes(FileBytes::from_vector(std::vector<uint8_t>(data, data + size)), options, "fuzz");
        exercise(*model);
    } catch (const Error &e) {
        fuzz::expected_error(e);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    load(data, size, false);
    load(data, size, true);
    return 0;
}
