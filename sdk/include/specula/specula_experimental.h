/*
 * specula_experimental.h - tools of libspecula outside the stable ABI (C99).
 *
 * What trainers, tests and benchmarks need from the library but applications do not: a LongSpec draft with random
 * weights, the attached draft's raw logits, and synthetic models of real shapes. These functions are exported by
 * the same libspecula.so and follow specula.h's contracts (errors, threading, options structs), but they may change
 * or go in any minor version; the ABI check (tools/abi/abi.sh) does not hold them to the SONAME.
 */
#ifndef SPECULA_EXPERIMENTAL_H
#define SPECULA_EXPERIMENTAL_H

#include "specula.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------------------ */
/* LongSpec drafts for trainers and tests                                                                 */
/* ------------------------------------------------------------------------------------------------------ */

/* Writes a LongSpec draft for target with random (untrained) weights to path: the starting point of a trainer,
 * and a draft for tests (it drafts poorly but never changes the output). window: self-attention window in
 * tokens, 0 = 512. seed: same seed, same file.
 * Statuses: INVALID_ARGUMENT (NULL target/path, a vocab-only target, window out of range), IO. Thread-safe. */
SPECULA_API specula_status specula_draft_write_random(const specula_model *target, const char *path, uint64_t seed,
                                                      int32_t window, specula_error **err);

/* Since 0.4. The attached LongSpec draft's raw logits (n_vocab floats) for the token after the session's context,
 * exactly as the first step of a speculative round computes them: the context's last token is the draft's root,
 * and its cross-attention reads the target's keys/values of every context token before that one. Pending
 * context is evaluated first. For trainers and tests that check their own forward pass against the SDK.
 * Statuses: INVALID_ARGUMENT (NULL session/logits, no drafter attached, empty context), BUFFER_TOO_SMALL
 * (capacity < n_vocab), UNSUPPORTED (a drafter without one distribution: n-gram, merged, draft model),
 * CANCELLED. */
SPECULA_API specula_status specula_session_draft_logits(specula_session *session, float *logits, size_t capacity,
                                                        specula_error **err);

/* ------------------------------------------------------------------------------------------------------ */
/* Synthetic models (since 0.3)                                                                           */
/*
 * Random-weight GGUF models of real model shapes, for speed measurements: the tensors, shapes, tensor types
 * (llama.cpp's quantization mix), hyperparameters and tokenizer are the real model's, so they load and run at the
 * real model's speed, but the text they generate is noise. The file is generated while it is written (an 8B
 * model never has to fit in memory).
 */

/* Name of the index-th built-in shape ("llama-3.2-1b", "llama-3.1-8b", "qwen2.5-0.5b", "qwen2.5-7b", "qwen3-0.6b",
 * "qwen3-8b", "gemma2-2b", "gemma2-9b", "gemma3-1b", "gemma3-4b", "phi3-mini", "phi3.5-mini", "phi4-mini", "phi4",
 * "starcoder2-3b", "starcoder2-7b", "starcoder2-15b", "tiny-llama", "tiny-qwen3", "tiny-gemma2", "tiny-gemma3",
 * "tiny-phi3", "tiny-phi4", "tiny-starcoder2", "mixtral-8x7b", "qwen1.5-moe-a2.7b", "qwen3-30b-a3b",
 * "qwen3-coder-30b-a3b", "tiny-mixtral", "tiny-qwen2moe", "tiny-qwen3moe"), NULL past the end (to list them). Static
 * storage. Thread-safe. */
SPECULA_API const char *specula_synthetic_shape(int32_t index);

typedef struct specula_synthetic_options {
    uint32_t struct_size;
    const char *weight_type;         /* "f32", "f16", "q8_0", "q4_0", "q4_k_m" (any case); NULL = "q8_0" */
    uint64_t seed;                   /* same seed, shape and type: the same file. Default 1 */
    int32_t n_layer;                 /* > 0: this many layers instead of the shape's (quick tests); default 0 */
    specula_progress_fn progress;    /* optional: fraction of the file written; return 0 to cancel */
    void *progress_user_data;
} specula_synthetic_options;

/* Fills *opts with defaults; the macro passes the size of your struct (see "Options structs" above). */
SPECULA_API void specula_synthetic_options_init_sized(specula_synthetic_options *opts, size_t struct_size);
SPECULA_API void specula_synthetic_options_init(specula_synthetic_options *opts);
#define specula_synthetic_options_init(opts) specula_synthetic_options_init_sized((opts), sizeof *(opts))

/* Writes a synthetic model of the built-in shape `shape` to path, with the tokenizer of the GGUF at vocab_path
 * (every tokenizer.* key is copied; a vocab-only GGUF is enough). The vocabulary size is the real model's
 * embedding size where the tokenizer has fewer tokens (padded with unused tokens, as llama.cpp's converter does
 * for Qwen2.5), else the tokenizer's token count.
 * Statuses: INVALID_ARGUMENT (NULL shape/vocab_path/path, unknown shape or weight type, n_layer < 0 or > 4096),
 * IO, FORMAT (vocab_path has no tokens), CANCELLED (the progress callback returned 0), OUT_OF_MEMORY. On failure
 * no partial file is left at path. Thread-safe. */
SPECULA_API specula_status specula_synthetic_model_write(const char *shape, const char *vocab_path, const char *path,
                                                         const specula_synthetic_options *opts, specula_error **err);

#ifdef __cplusplus
}
#endif

#endif /* SPECULA_EXPERIMENTAL_H */
