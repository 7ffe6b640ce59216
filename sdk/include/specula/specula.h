/*
 * specula.h - the one C ABI of Specula (C99).
 *
 * Threading contract (applies to every function unless its comment says otherwise):
 *   - A specula_model is immutable after load and reference counted. Every specula_model_* function is
 *     thread-safe; many sessions on many threads may share one model.
 *   - A specula_session is single-threaded: call its functions from one thread at a time. The one exception
 *     is specula_session_cancel(), which any thread (or a signal handler) may call at any time.
 *   - specula_log_set() is thread-safe, but messages already being delivered may still reach the old callback.
 *   - Callbacks run on the thread that made the call that triggers them. They must not throw or unwind
 *     (C++ exceptions, Rust panics) through the library, and must not call back into the same session.
 *
 * Errors: fallible functions return a specula_status and take a last argument `specula_error **err`.
 * On failure, if err is not NULL, *err receives a new error object (status + message) that the caller frees
 * with specula_error_destroy(). On success *err is set to NULL. Passing err = NULL is always allowed.
 * No function aborts, exits, throws, or writes to stdout; log output goes to the callback set by
 * specula_log_set() and nowhere by default.
 *
 * Options structs begin with `uint32_t struct_size`; initialise them with the matching *_init(&opts) and pass them
 * by pointer. *_init is a macro: it calls *_init_sized(&opts, sizeof opts), which writes the defaults into those bytes
 * only and sets struct_size to their count, so a newer library with longer structs never writes past yours (since
 * 0.17; language bindings call *_init_sized with their struct's size; the *_init functions stay exported for
 * applications built against older headers and write the struct as 0.16 declared it).
 * The library reads only the fields within struct_size (the rest keep their defaults), so fields may be appended
 * in later minor versions; a struct_size below 4 is SPECULA_ERR_INVALID_ARGUMENT. Passing NULL for an options
 * pointer means "all defaults". Output structs (stats, tensor info, events) are written only up to the
 * struct_size the caller set in them.
 * Text outputs use the two-call pattern: pass buf = NULL and buf_size = 0 to learn the length.
 *
 * Ownership: "borrowed" pointers returned by the library stay owned by the library; each comment says how
 * long they stay valid. Every *_destroy() accepts NULL.
 *
 * Stability: everything declared here is the stable ABI (SPECULA_ABI_VERSION). Tools for trainers, tests and
 * benchmarks (random drafts, a draft's raw logits, synthetic models) are in specula_experimental.h, outside it.
 *
 * Usage (the whole program; tests/c/header_example.sh compiles and runs it against the library):
 *
 * --- example begin ---
 * #include <specula/specula.h>
 * #include <stdio.h>
 * #include <string.h>
 *
 * static int32_t print_token(const specula_token_event *ev, void *user) {
 *     (void)user;
 *     fwrite(ev->text, 1, ev->text_len, stdout);
 *     return 1;  // 0 would stop generation
 * }
 *
 * int main(int argc, char **argv) {
 *     if (argc < 2) return 2;
 *     specula_error *err = NULL;
 *     specula_model *model = NULL;
 *     specula_session *session = NULL;
 *     if (specula_model_load(argv[1], NULL, &model, &err) != SPECULA_OK) goto fail;
 *     if (specula_session_create(model, NULL, NULL, &session, &err) != SPECULA_OK) goto fail;
 *
 *     // Lossless speculative decoding with n-gram drafts (a LongSpec draft: specula_draft_load, opts.draft).
 *     specula_speculative_options spec;
 *     specula_speculative_options_init(&spec);
 *     spec.ngram = 1;
 *     if (specula_session_set_speculative(session, &spec, &err) != SPECULA_OK) goto fail;
 *
 *     const char *prompt = "Once upon a time";
 *     if (specula_session_append_text(session, prompt, strlen(prompt), SPECULA_TOKENIZE_ADD_SPECIAL, &err) != SPECULA_OK)
 *         goto fail;
 *     specula_generate_options gen;
 *     specula_generate_options_init(&gen);
 *     gen.max_tokens = 32;
 *     if (specula_session_generate(session, &gen, print_token, NULL, NULL, &err) != SPECULA_OK) goto fail;
 *     printf("\n");
 *     specula_session_destroy(session);
 *     specula_model_destroy(model);
 *     return 0;
 * fail:
 *     fprintf(stderr, "error: %s\n", specula_error_message(err));
 *     specula_error_destroy(err);
 *     specula_session_destroy(session);
 *     specula_model_destroy(model);
 *     return 1;
 * }
 * --- example end ---
 */
#ifndef SPECULA_H
#define SPECULA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#  if defined(SPECULA_BUILD)
#    define SPECULA_API __declspec(dllexport)
#  elif defined(SPECULA_SHARED)
#    define SPECULA_API __declspec(dllimport)
#  else
#    define SPECULA_API
#  endif
#else
#  define SPECULA_API __attribute__((visibility("default")))
#endif

#define SPECULA_VERSION_MAJOR 0
#define SPECULA_VERSION_MINOR 18
#define SPECULA_VERSION_PATCH 0
/* Bumped on every incompatible change of this header; equals the SONAME suffix of libspecula.so. */
#define SPECULA_ABI_VERSION 1

/* ------------------------------------------------------------------------------------------------------ */
/* Versions                                                                                               */

/* Library version as (major << 16) | (minor << 8) | patch. Thread-safe. */
SPECULA_API uint32_t specula_version(void);
/* Library version as "MAJOR.MINOR.PATCH"; static storage. Thread-safe. */
SPECULA_API const char *specula_version_string(void);
/* ABI version of the loaded library; bindings compare it with SPECULA_ABI_VERSION. Thread-safe. */
SPECULA_API uint32_t specula_abi_version(void);

/* ------------------------------------------------------------------------------------------------------ */
/* Status codes and error objects                                                                          */

typedef enum specula_status {
    SPECULA_OK = 0,
    SPECULA_ERR_INVALID_ARGUMENT = 1, /* NULL handle, out-of-range value, bad options struct            */
    SPECULA_ERR_IO = 2,               /* file missing, unreadable, mmap failure                           */
    SPECULA_ERR_FORMAT = 3,           /* malformed or hostile file: bad magic, offsets, counts, shapes    */
    SPECULA_ERR_UNSUPPORTED = 4,      /* well-formed but not supported: architecture, tensor type, version */
    SPECULA_ERR_OUT_OF_MEMORY = 5,
    SPECULA_ERR_CANCELLED = 6,        /* a progress callback or specula_session_cancel() stopped the call */
    SPECULA_ERR_CONTEXT_FULL = 7,     /* the session's context has no room for the tokens asked for       */
    SPECULA_ERR_INVALID_TOKEN = 8,    /* a token id outside [0, n_vocab)                                   */
    SPECULA_ERR_INCOMPATIBLE = 9,     /* two objects that do not belong together (e.g. draft vs target)   */
    SPECULA_ERR_BUFFER_TOO_SMALL = 10,/* two-call pattern: the needed size was returned, call again       */
    SPECULA_ERR_BACKEND = 11,         /* a compute backend failed                                         */
    SPECULA_ERR_INTERNAL = 12         /* a bug in Specula; please report it with the message              */
} specula_status;

typedef struct specula_error specula_error;

/* Short English name of a status ("SPECULA_ERR_FORMAT"); static storage; never NULL. Thread-safe. */
SPECULA_API const char *specula_status_string(specula_status status);
/* Status carried by an error; SPECULA_OK for NULL. */
SPECULA_API specula_status specula_error_status(const specula_error *err);
/* Human-readable message; borrowed, valid until specula_error_destroy(err). "" for NULL. */
SPECULA_API const char *specula_error_message(const specula_error *err);
/* Frees an error object. Accepts NULL. */
SPECULA_API void specula_error_destroy(specula_error *err);

/* ------------------------------------------------------------------------------------------------------ */
/* Logging                                                                                                */

typedef enum specula_log_level {
    SPECULA_LOG_DEBUG = 0,
    SPECULA_LOG_INFO = 1,
    SPECULA_LOG_WARN = 2,
    SPECULA_LOG_ERROR = 3
} specula_log_level;

/* message is borrowed for the duration of the call and has no trailing newline. */
typedef void (*specula_log_fn)(specula_log_level level, const char *message, void *user_data);

/* Routes library log messages at or above min_level to fn. fn = NULL silences the library (the default).
 * A min_level above SPECULA_LOG_ERROR delivers nothing, one below SPECULA_LOG_DEBUG everything.
 * Global for the process; thread-safe. */
SPECULA_API void specula_log_set(specula_log_fn fn, specula_log_level min_level, void *user_data);

/* ------------------------------------------------------------------------------------------------------ */
/* Models                                                                                                 */

typedef struct specula_model specula_model;

/* Called during load with progress in [0, 1]. Return 1 to continue, 0 to cancel the load
 * (specula_model_load then returns SPECULA_ERR_CANCELLED and frees everything). */
typedef int32_t (*specula_progress_fn)(float progress, void *user_data);

typedef struct specula_model_options {
    uint32_t struct_size;
    int32_t use_mmap;                /* 1 (default): map the file read-only, no copy; 0: read it into memory */
    specula_progress_fn progress;    /* optional */
    void *progress_user_data;
    int32_t vocab_only;              /* 1: load only the tokenizer (vocab-only GGUFs too); no sessions. Default 0 */
} specula_model_options;

/* Fills *opts with defaults; the macro passes the size of your struct (see "Options structs" above). */
SPECULA_API void specula_model_options_init_sized(specula_model_options *opts, size_t struct_size);
SPECULA_API void specula_model_options_init(specula_model_options *opts);
#define specula_model_options_init(opts) specula_model_options_init_sized((opts), sizeof *(opts))

/* Loads a GGUF model. On success *out holds one reference, released with specula_model_destroy().
 * With opts->vocab_only, only metadata and the tokenizer are loaded: architecture and weights are not checked,
 * the tokenization and chat-template calls work, the hyperparameter getters return 0 (n_vocab excepted), and
 * specula_session_create refuses the model.
 * Statuses: INVALID_ARGUMENT (NULL path/out), IO, FORMAT, UNSUPPORTED, OUT_OF_MEMORY, CANCELLED. Thread-safe. */
SPECULA_API specula_status specula_model_load(const char *path, const specula_model_options *opts,
                                              specula_model **out, specula_error **err);
/* Adds a reference (for bindings that share the handle); returns model. Thread-safe. */
SPECULA_API specula_model *specula_model_retain(specula_model *model);
/* Drops the caller's reference. The model is freed when the last reference goes; sessions created from it hold
 * their own reference, so destroying the model before its sessions is allowed. Accepts NULL. Thread-safe. */
SPECULA_API void specula_model_destroy(specula_model *model);

/* Model information. All thread-safe; return 0 / "" for a NULL model. Strings are borrowed and valid while
 * the model lives. */
SPECULA_API const char *specula_model_arch(const specula_model *model);       /* "llama", "qwen2" */
SPECULA_API const char *specula_model_name(const specula_model *model);       /* general.name or "" */
SPECULA_API int32_t specula_model_n_vocab(const specula_model *model);
SPECULA_API int32_t specula_model_n_ctx_train(const specula_model *model);
SPECULA_API int32_t specula_model_n_layer(const specula_model *model);
SPECULA_API int32_t specula_model_n_embd(const specula_model *model);
SPECULA_API int32_t specula_model_n_head(const specula_model *model);
SPECULA_API int32_t specula_model_n_head_kv(const specula_model *model);
SPECULA_API int32_t specula_model_n_ff(const specula_model *model);
SPECULA_API uint64_t specula_model_n_params(const specula_model *model);
SPECULA_API uint64_t specula_model_file_size(const specula_model *model);
/* The model's weight format: the file's declared quantization (general.file_type: "Q4_K_M", "F16", ...), or else
 * the tensor type that holds most of the weight bytes. */
SPECULA_API const char *specula_model_weight_type(const specula_model *model);

typedef struct specula_tensor_info {
    uint32_t struct_size;
    const char *name;      /* borrowed, valid while the model lives */
    const char *type;      /* "F32", "Q4_0", ... borrowed, static */
    int32_t n_dims;
    int64_t dims[4];       /* ggml order: dims[0] is the contiguous (row) dimension */
    uint64_t offset;       /* byte offset of the data in the file */
    uint64_t n_bytes;
} specula_tensor_info;

SPECULA_API int32_t specula_model_tensor_count(const specula_model *model);
/* Fills *info (set info->struct_size first) for tensor index in [0, count). */
SPECULA_API specula_status specula_model_tensor_info(const specula_model *model, int32_t index,
                                                     specula_tensor_info *info, specula_error **err);

/* GGUF metadata, for inspection. Values are rendered as text (arrays abbreviated after max_array items). */
SPECULA_API int32_t specula_model_meta_count(const specula_model *model);
/* Key of entry index; borrowed, valid while the model lives; NULL if out of range. */
SPECULA_API const char *specula_model_meta_key(const specula_model *model, int32_t index);
/* Two-call pattern: writes at most buf_size bytes including the NUL terminator and sets *len to the full text
 * length (without NUL). Returns BUFFER_TOO_SMALL (with *len set) when buf_size <= *len. */
SPECULA_API specula_status specula_model_meta_value(const specula_model *model, int32_t index, int32_t max_array,
                                                    char *buf, size_t buf_size, size_t *len, specula_error **err);

/* ------------------------------------------------------------------------------------------------------ */
/* Vocabulary and tokenization (thread-safe on a shared model)                                            */

#define SPECULA_TOKEN_NULL (-1)

SPECULA_API int32_t specula_model_token_bos(const specula_model *model); /* SPECULA_TOKEN_NULL if none */
SPECULA_API int32_t specula_model_token_eos(const specula_model *model);
/* Since 0.7. End of turn (<|eot_id|>, <|im_end|>, ...); SPECULA_TOKEN_NULL if none. */
SPECULA_API int32_t specula_model_token_eot(const specula_model *model);
/* Since 0.7. 1 when tokenizing with SPECULA_TOKENIZE_ADD_SPECIAL adds BOS (tokenizer.ggml.add_bos_token, or the
 * tokenizer family's default), else 0; likewise for EOS. */
SPECULA_API int32_t specula_model_add_bos(const specula_model *model);
SPECULA_API int32_t specula_model_add_eos(const specula_model *model);

/* Since 0.7. Fill-in-the-middle tokens, as llama.cpp finds them: the GGUF keys tokenizer.ggml.fim_{pre,suf,mid,pad,
 * rep,sep}_token_id, the older tokenizer.ggml.{prefix,suffix,middle}_token_id, else the known token texts
 * ("<|fim_prefix|>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "<|repo_name|>", "<|file_sep|>", ...). */
typedef enum specula_fim_token {
    SPECULA_FIM_PRE = 0, /* before the prefix */
    SPECULA_FIM_SUF = 1, /* before the suffix */
    SPECULA_FIM_MID = 2, /* where the middle is generated */
    SPECULA_FIM_PAD = 3,
    SPECULA_FIM_REP = 4, /* repository name (repository-level FIM) */
    SPECULA_FIM_SEP = 5  /* file separator (repository-level FIM) */
} specula_fim_token;
/* The model's FIM token of that kind; SPECULA_TOKEN_NULL if it has none (or for a NULL model). Thread-safe. */
SPECULA_API int32_t specula_model_token_fim(const specula_model *model, specula_fim_token which);

/* 1 if token ends generation (EOS, EOT and the like), else 0. */
SPECULA_API int32_t specula_model_token_is_eog(const specula_model *model, int32_t token);

enum {
    SPECULA_TOKENIZE_ADD_SPECIAL = 1,   /* add BOS/EOS as the model's metadata asks */
    SPECULA_TOKENIZE_PARSE_SPECIAL = 2  /* recognise control tokens such as "<s>" written in the text */
};

/* Tokenizes len bytes of UTF-8 text. Two-call pattern: *n_tokens (required) receives the number of tokens; if it
 * exceeds capacity, nothing useful is written and BUFFER_TOO_SMALL is returned. tokens may be NULL when capacity
 * is 0. */
SPECULA_API specula_status specula_model_tokenize(const specula_model *model, const char *text, size_t len,
                                                  int32_t flags, int32_t *tokens, size_t capacity,
                                                  size_t *n_tokens, specula_error **err);
/* Text of a sequence of tokens (special tokens rendered only when render_special is 1). Two-call pattern as
 * specula_model_meta_value. */
SPECULA_API specula_status specula_model_detokenize(const specula_model *model, const int32_t *tokens,
                                                    size_t n_tokens, int32_t render_special, char *buf,
                                                    size_t buf_size, size_t *len, specula_error **err);

/* Bytes of one token as llama.cpp's token-to-piece gives them (SentencePiece '▁' -> ' ', byte tokens -> their
 * byte, byte-level BPE mapping undone; control tokens give "" unless render_special). A piece may be an
 * incomplete UTF-8 sequence: streaming callers use the session's events, which are always complete UTF-8.
 * Two-call pattern as specula_model_meta_value. Statuses: INVALID_TOKEN, BUFFER_TOO_SMALL. */
SPECULA_API specula_status specula_model_token_to_piece(const specula_model *model, int32_t token, int32_t render_special,
                                                        char *buf, size_t buf_size, size_t *len, specula_error **err);
/* The token's text as stored in the vocabulary (e.g. "▁dog", "<0x0A>", "Ġthe"); borrowed, valid while the model
 * lives; NULL for an invalid id. */
SPECULA_API const char *specula_model_token_text(const specula_model *model, int32_t token);

typedef enum specula_token_kind {
    SPECULA_TOKEN_KIND_INVALID = 0,    /* not a valid id */
    SPECULA_TOKEN_KIND_NORMAL = 1,
    SPECULA_TOKEN_KIND_UNKNOWN = 2,
    SPECULA_TOKEN_KIND_CONTROL = 3,    /* BOS, EOS, <|im_start|> ... (not rendered as text by default) */
    SPECULA_TOKEN_KIND_USER_DEFINED = 4,
    SPECULA_TOKEN_KIND_UNUSED = 5,
    SPECULA_TOKEN_KIND_BYTE = 6        /* SentencePiece byte-fallback token <0xNN> */
} specula_token_kind;

SPECULA_API specula_token_kind specula_model_token_kind(const specula_model *model, int32_t token);
/* Tokenizer family: "llama" (SentencePiece), "gpt2" (byte-level BPE), ...; "" for a NULL model. */
SPECULA_API const char *specula_model_tokenizer(const specula_model *model);
/* Pre-tokenizer name of byte-level BPE vocabularies ("llama-bpe", "qwen2", ...), "" otherwise. */
SPECULA_API const char *specula_model_pre_tokenizer(const specula_model *model);

/* ------------------------------------------------------------------------------------------------------ */
/* Chat templates (thread-safe on a shared model)                                                         */

typedef struct specula_chat_message {
    const char *role;     /* "system", "user", "assistant", ... (UTF-8, NUL-terminated) */
    const char *content;  /* UTF-8, NUL-terminated */
} specula_chat_message;

/* Formats a conversation as prompt text with a chat template, as llama.cpp's llama_chat_apply_template does.
 * tmpl = NULL uses the model's own tokenizer.chat_template; otherwise tmpl is either a built-in template name
 * (see specula_chat_template_builtin) or the text of a Jinja chat template, which is recognised by its
 * family. add_assistant = 1 appends the text that opens the assistant's reply.
 * The result is meant to be appended with SPECULA_TOKENIZE_PARSE_SPECIAL, so that markers such as
 * <|im_start|> become their control tokens. Two-call pattern as specula_model_meta_value.
 * Roles are passed through as llama.cpp does: where a family has no slot for a role (a "tool" message in vicuna,
 * a system message in yandex) the message is left out, so the text stays byte-identical to llama.cpp's.
 * Statuses: UNSUPPORTED (the model has no template, or the template belongs to no known family; the message
 * says which), INVALID_ARGUMENT (model and tmpl both NULL, messages NULL with n_messages > 0, a NULL role or
 * content), BUFFER_TOO_SMALL. model may be NULL when tmpl is given. */
SPECULA_API specula_status specula_chat_apply_template(const specula_model *model, const char *tmpl,
                                                       const specula_chat_message *messages, size_t n_messages,
                                                       int32_t add_assistant, char *buf, size_t buf_size, size_t *len,
                                                       specula_error **err);
/* Options of specula_chat_format (since 0.10). */
typedef struct specula_chat_options {
    uint32_t struct_size;
    int32_t add_assistant;    /* 1 (default): append the text that opens the assistant's reply */
    int32_t enable_thinking;  /* templates with a thinking switch (qwen3; llama-server's chat_template_kwargs
                                 enable_thinking): -1 (default) as the template does unasked, 1 think, 0 open the reply
                                 with the template's empty thinking block. Families without a switch ignore it, as a
                                 Jinja template ignores a variable it does not read. */
    int32_t jinja;            /* since 0.18. 0 (default): the template's built-in family, as llama.cpp's
                                 llama_chat_apply_template. 1: the template's own Jinja, rendered as llama-server's
                                 --jinja renders it (minja: any template, also of no known family; bos_token and
                                 eos_token from the model's vocabulary; a leading BOS and a trailing EOS cut; the name
                                 "chatml" is ChatML's Jinja, any other text is Jinja). Errors: UNSUPPORTED for text
                                 that does not parse or exceeds the renderer's bounds (32 KiB, 256 levels of nesting),
                                 INVALID_ARGUMENT when the template fails on the messages (its raise_exception, loops
                                 past 10,000 iterations plus 1,000 per message); the message gives the template's
                                 reason and place. */
} specula_chat_options;

/* Fills *opts with defaults; the macro passes the size of your struct (see "Options structs" above). */
SPECULA_API void specula_chat_options_init_sized(specula_chat_options *opts, size_t struct_size);
SPECULA_API void specula_chat_options_init(specula_chat_options *opts);
#define specula_chat_options_init(opts) specula_chat_options_init_sized((opts), sizeof *(opts))

/* specula_chat_apply_template with options (opts = NULL: the defaults). Statuses as specula_chat_apply_template,
 * and INVALID_ARGUMENT for an enable_thinking other than -1, 0, 1 or a struct_size below 4. Since 0.10. */
SPECULA_API specula_status specula_chat_format(const specula_model *model, const char *tmpl, const specula_chat_message *messages,
                                               size_t n_messages, const specula_chat_options *opts, char *buf,
                                               size_t buf_size, size_t *len, specula_error **err);
/* Name of the built-in family a template text (or, with tmpl = NULL, the model's template) belongs to, such as
 * "llama2", "llama3", "chatml", "qwen3", "phi3", "mistral-v7", "deepseek"; NULL if none is recognised. Static storage. */
SPECULA_API const char *specula_chat_template_detect(const specula_model *model, const char *tmpl);
/* The i-th built-in template name, or NULL past the end (to list them). Static storage. */
SPECULA_API const char *specula_chat_template_builtin(int32_t index);

/* ------------------------------------------------------------------------------------------------------ */
/* Devices (since 0.5)                                                                                    */

typedef struct specula_device_info {
    uint32_t struct_size;
    int32_t backend;              /* specula_backend */
    int32_t index;                /* the value for specula_session_options.device */
    char name[256];               /* e.g. "NVIDIA H100 80GB HBM3" (NUL-terminated) */
    uint64_t total_memory;        /* bytes */
    uint64_t free_memory;         /* bytes free when queried */
    int32_t compute_capability;   /* CUDA: major * 10 + minor, e.g. 90; 0 for other backends */
    int32_t multiprocessors;      /* CUDA: streaming multiprocessors; Vulkan: compute units where the driver says
                                     (0 if unknown) */
    double peak_bandwidth_gbs;    /* memory bandwidth from the clock and bus width the driver reports; 0 if unknown */
} specula_device_info;

/* Parameters and fields that carry an enum's value are int32_t with the enum named beside them: a fixed size for
 * every binding, and a value outside the enum (INVALID_ARGUMENT here) stays defined behaviour in the library,
 * which an enum-typed parameter would not (C++ leaves out-of-range enum values undefined; UBSan reports them). */

/* Number of usable devices of a GPU backend (SPECULA_BACKEND_CUDA or, since 0.9, SPECULA_BACKEND_VULKAN; 0 when
 * none or when the library was built without it). For SPECULA_BACKEND_CPU and AUTO: 0. Thread-safe. */
SPECULA_API int32_t specula_device_count(int32_t backend);
/* Fills *info (set info->struct_size first) for device index in [0, specula_device_count(backend)) of a GPU
 * backend. Statuses: INVALID_ARGUMENT (bad backend, index or info). Thread-safe. */
SPECULA_API specula_status specula_device_get_info(int32_t backend, int32_t index, specula_device_info *info, specula_error **err);
/* OK when the backend has a usable device; otherwise UNSUPPORTED with the reason in *err (no driver, no device,
 * built without that backend, ...). SPECULA_BACKEND_CPU is always OK. SPECULA_BACKEND_AUTO: OK when any GPU backend
 * has a usable device, else UNSUPPORTED with every GPU backend's reason, in AUTO's order, joined by "; " (e.g.
 * "CUDA: ...; Vulkan: ..."); the CPU fallback is not counted. An AUTO session may still run on the CPU where this
 * is OK: a device without room, or one AUTO passes by (a software Vulkan device such as Mesa's lavapipe, slower
 * than the CPU backend); specula_session_backend_note says why. Thread-safe. */
SPECULA_API specula_status specula_backend_check(int32_t backend, specula_error **err);

/* ------------------------------------------------------------------------------------------------------ */
/* Sessions                                                                                               */

typedef struct specula_session specula_session;

/* Where a session runs its target model. */
typedef enum specula_backend {
    SPECULA_BACKEND_AUTO = 0,  /* the first GPU backend built in whose usable device has room (CUDA, then Vulkan;
                                  not a software Vulkan device such as lavapipe), else the CPU (the default) */
    SPECULA_BACKEND_CPU = 1,   /* the CPU reference backend */
    SPECULA_BACKEND_CUDA = 2,  /* an NVIDIA GPU (compute capability 8.0 or newer) */
    SPECULA_BACKEND_VULKAN = 3 /* Since 0.9. A GPU through the Vulkan loader: AMD, Intel, integrated, or NVIDIA
                                  (libspecula built with -DSPECULA_VULKAN=ON; specula_backend_check says why not) */
} specula_backend;

/* Since 0.8. The element type of the target's key/value cache. F16 halves the bytes attention reads at long
 * context (llama.cpp's default); Q8_0 (ggml's 32-element blocks, 34 bytes) halves them again and needs the
 * model's n_embd_kv to be a multiple of 32; F32 keeps every bit of the projections. Speculative decoding is
 * lossless with every type (a tree node and plain decoding read the same stored rows). CUDA and Vulkan keep F16
 * only. */
typedef enum specula_kv_type {
    SPECULA_KV_DEFAULT = 0, /* F16 */
    SPECULA_KV_F32 = 1,
    SPECULA_KV_F16 = 2,
    SPECULA_KV_Q8_0 = 3
} specula_kv_type;

/* Since 0.9. What generation does when the context is full (docs/long-outputs.md). */
typedef enum specula_context_policy {
    SPECULA_CONTEXT_STOP = 0,  /* the run stops with SPECULA_STOP_CONTEXT_FULL (the default) */
    SPECULA_CONTEXT_SHIFT = 1  /* drop n_discard tokens after the first n_keep from the context and its cache, move
                                  the newer ones down (keys re-rotated to their new positions) and go on: attention
                                  sinks plus a recent window, as TokenSwift and llama.cpp's context shift. Greedy
                                  speculative output still equals plain greedy output under the same policy. */
} specula_context_policy;

typedef struct specula_session_options {
    uint32_t struct_size;
    int32_t n_ctx;      /* context length in tokens; 0 = min(n_ctx_train, 4096) */
    int32_t n_threads;  /* compute threads; 0 = number of cores (at most 8) */
    int32_t n_batch;    /* prompt tokens evaluated per forward pass; 0 = 64 */
    /* Since 0.5: */
    int32_t backend;        /* specula_backend; default SPECULA_BACKEND_AUTO */
    int32_t device;         /* device index for GPU backends (see specula_device_count); default 0 */
    int32_t allow_fallback; /* 1 (default): when the backend cannot be used (no device, not enough memory), run on
                               the CPU and report why through specula_session_backend_note(); 0: fail with
                               SPECULA_ERR_UNSUPPORTED or SPECULA_ERR_OUT_OF_MEMORY and that reason instead */
    /* Since 0.8: */
    int32_t kv_type;        /* specula_kv_type; default SPECULA_KV_DEFAULT (F16) */
    /* Since 0.9: */
    int32_t context_policy; /* specula_context_policy; default SPECULA_CONTEXT_STOP */
    int32_t n_keep;         /* SHIFT: leading tokens always kept (attention sinks, a system prompt); default 4 */
    int32_t n_discard;      /* SHIFT: tokens dropped per shift; 0 (default) = half of those after n_keep.
                               n_keep + n_discard must leave at least one token of n_ctx (INVALID_ARGUMENT) */
} specula_session_options;

/* Fills *opts with defaults; the macro passes the size of your struct (see "Options structs" above). */
SPECULA_API void specula_session_options_init_sized(specula_session_options *opts, size_t struct_size);
SPECULA_API void specula_session_options_init(specula_session_options *opts);
#define specula_session_options_init(opts) specula_session_options_init_sized((opts), sizeof *(opts))

/* Since 0.16. How a sampled token is drawn from the sampler's distribution for a seed (specula_sampler_options.draw).
 * Either way a seed fixes the text, and speculative decoding (every drafter, tree and backend) gives plain
 * sampling's tokens for that seed. */
typedef enum specula_draw_rule {
    SPECULA_DRAW_RACE = 0,      /* an exponential race keyed per output position (the default): sampled drafts agree
                                   with the target as often as a coupling can, and a GPU verifies on the device */
    SPECULA_DRAW_LLAMA_CPP = 1, /* llama.cpp's dist sampler: std::mt19937 seeded with the seed's low 32 bits and
                                   std::discrete_distribution over the candidates in logit order, so the same model,
                                   prompt, seed and settings give llama.cpp's text (built with the same C++ library;
                                   the logits' last bits aside). Drafts agree less often; the host verifies */
} specula_draw_rule;

typedef struct specula_sampler_options {
    uint32_t struct_size;
    float temperature;       /* <= 0: greedy (argmax, ties to the lowest id). Default 0.8 */
    int32_t top_k;           /* <= 0: off. Default 40 */
    float top_p;             /* >= 1: off. Default 0.95 */
    float min_p;             /* <= 0: off. Default 0.05 */
    float repeat_penalty;    /* 1: off (default). Divides positive logits of recent tokens, multiplies negative */
    float presence_penalty;  /* 0: off (default). Subtracted once from the logit of every recent token */
    float frequency_penalty; /* 0: off (default). Subtracted once per occurrence of a recent token */
    int32_t penalty_last_n;  /* window of recent tokens the penalties look at; default 64; -1 = whole context */
    uint64_t seed;           /* RNG seed; same seed + same inputs = same output */
    /* Since 0.2: */
    float context_penalty;          /* TokenSwift's contextual penalty theta: logits of tokens seen in the last
                                       context_penalty_window tokens are divided (positive) or multiplied
                                       (negative) by it; 1 = off (default); must be > 0 */
    int32_t context_penalty_window; /* tokens of history the contextual penalty looks at; default 1024;
                                       -1 = the whole context; 0 = off */
    /* Since 0.13: */
    const char *grammar;      /* a GBNF grammar (llama.cpp's grammar format; docs/grammars.md) the generated text
                                 must follow, UTF-8, NUL-terminated, at most 1 MiB; NULL or "" (default): none.
                                 Copied. Tokens the grammar cannot continue with are removed before top-k; an
                                 end-of-generation token is allowed only where the grammar is complete. Its state
                                 follows the tokens generated since the sampler was set (set it again to start
                                 over; rewinding does not take the state back). A grammar that does not parse is
                                 INVALID_ARGUMENT with the parser's message ("grammar: undefined rule 'x' at line
                                 2, column 9"); generation where no token can continue it fails with
                                 INVALID_ARGUMENT ("grammar: no token of the vocabulary can continue the text") */
    const char *grammar_root; /* the grammar's start rule; NULL (default): "root" */
    /* Since 0.16: */
    int32_t draw; /* specula_draw_rule; default SPECULA_DRAW_RACE. Saved in snapshots */
} specula_sampler_options;

/* Fills *opts with defaults; the macro passes the size of your struct (see "Options structs" above). */
SPECULA_API void specula_sampler_options_init_sized(specula_sampler_options *opts, size_t struct_size);
SPECULA_API void specula_sampler_options_init(specula_sampler_options *opts);
#define specula_sampler_options_init(opts) specula_sampler_options_init_sized((opts), sizeof *(opts))

/* Since 0.13. The GBNF grammar (start rule "root") of the JSON text a JSON schema admits, for
 * specula_sampler_options.grammar: what llama.cpp's json_schema_to_grammar makes of `json_schema` and
 * `response_format` (docs/grammars.md lists the keywords read: types, properties and required, additionalProperties,
 * items, prefixItems, min/maxItems, min/maxLength, enum, const, anyOf/oneOf, allOf of objects, $ref into the schema,
 * the date/time/uuid formats, integer bounds). schema: UTF-8 JSON text of len bytes, at most 1 MiB. Two-call
 * pattern: *grammar_len (required) receives the grammar's length without the NUL; buf receives it NUL-terminated
 * when buf_size exceeds that (else BUFFER_TOO_SMALL; buf may be NULL with buf_size 0).
 * Statuses: INVALID_ARGUMENT (not JSON, not a schema, nested deeper than 64, a $ref that does not resolve),
 * UNSUPPORTED ("pattern", references outside the schema), BUFFER_TOO_SMALL. Thread-safe. */
SPECULA_API specula_status specula_json_schema_to_grammar(const char *schema, size_t len, char *buf, size_t buf_size,
                                                          size_t *grammar_len, specula_error **err);

/* Creates a session on model (which it retains). sampler may be NULL for defaults.
 * Statuses: INVALID_ARGUMENT, OUT_OF_MEMORY. Thread-safe with respect to the model. */
SPECULA_API specula_status specula_session_create(specula_model *model, const specula_session_options *opts,
                                                  const specula_sampler_options *sampler,
                                                  specula_session **out, specula_error **err);
/* Frees the session and drops its model reference. Accepts NULL. No other call on the session may run during
 * or after this one, specula_session_cancel() included: a host that cancels from another thread or a signal
 * handler must stop doing so (e.g. clear its pointer to the session) before destroying it. */
SPECULA_API void specula_session_destroy(specula_session *session);

/* Replaces the sampler settings (and reseeds). */
SPECULA_API specula_status specula_session_set_sampler(specula_session *session,
                                                       const specula_sampler_options *sampler,
                                                       specula_error **err);

/* Appends UTF-8 text to the context, tokenized with flags (SPECULA_TOKENIZE_*; ADD_SPECIAL adds BOS only when
 * the context is empty). Evaluation happens lazily on the next generate/next call.
 * Statuses: INVALID_ARGUMENT, CONTEXT_FULL (nothing appended). */
SPECULA_API specula_status specula_session_append_text(specula_session *session, const char *text, size_t len,
                                                       int32_t flags, specula_error **err);
/* Appends token ids. Statuses: INVALID_TOKEN (id outside [0, n_vocab); nothing appended), CONTEXT_FULL. */
SPECULA_API specula_status specula_session_append_tokens(specula_session *session, const int32_t *tokens,
                                                         size_t n_tokens, specula_error **err);
/* Truncates the context to its first n_tokens tokens (0 clears it). Cheap: cached keys/values are kept.
 * Also resets the streaming text state and the generated-token counter. */
SPECULA_API specula_status specula_session_rewind(specula_session *session, int32_t n_tokens,
                                                  specula_error **err);

SPECULA_API int32_t specula_session_n_ctx(const specula_session *session);
/* Since 0.5. The backend running the session's target: "cpu", "cuda" or "vulkan" (static storage; "" for NULL). */
SPECULA_API const char *specula_session_backend(const specula_session *session);
/* Since 0.5. Why the session does not run on the backend asked for (SPECULA_BACKEND_AUTO asks for every GPU
 * backend: CUDA, then Vulkan), each refusal's reason joined by "; ", e.g. "CUDA: no usable CUDA device
 * (cudaErrorNoDevice: no CUDA-capable device is detected); Vulkan: this build has no Vulkan backend (...); running
 * on the CPU"; "" when it does (AUTO: when it runs on a GPU). Valid as long as the session. */
SPECULA_API const char *specula_session_backend_note(const specula_session *session);
SPECULA_API int32_t specula_session_n_tokens(const specula_session *session);
/* Copies the context's token ids (two-call pattern on n_tokens, which is required). */
SPECULA_API specula_status specula_session_tokens(const specula_session *session, int32_t *tokens,
                                                  size_t capacity, size_t *n_tokens, specula_error **err);

typedef enum specula_stop_reason {
    SPECULA_STOP_NONE = 0,         /* not stopped: a token was produced and generation may go on */
    SPECULA_STOP_MAX_TOKENS = 1,
    SPECULA_STOP_EOS = 2,          /* an end-of-generation token was sampled (it is not added or emitted) */
    SPECULA_STOP_STOP_STRING = 3,  /* a stop string appeared; text from it on is not emitted */
    SPECULA_STOP_CANCELLED = 4,
    SPECULA_STOP_CONTEXT_FULL = 5,
    SPECULA_STOP_CALLBACK = 6      /* the token callback returned 0 */
} specula_stop_reason;

/* Stable lower-case name of a stop reason ("none", "max_tokens", "eos", "stop_string", "cancelled",
 * "context_full", "callback"; "unknown" otherwise), fit for machine-readable output. Static storage. */
SPECULA_API const char *specula_stop_reason_string(specula_stop_reason reason);

typedef struct specula_generate_options {
    uint32_t struct_size;
    int32_t max_tokens;               /* tokens to generate per generate call; < 0: until the context is full.
                                         Default 256. For specula_session_next it counts since the last
                                         append/rewind. Since 0.6, tokens a speculative round accepted beyond the
                                         limit are kept for the next call: generating N then M tokens gives what
                                         one call of N + M gives, at any temperature. */
    int32_t stop_at_eog;              /* 1 (default): stop when an end-of-generation token is sampled */
    const char *const *stop_strings;  /* optional; borrowed for the duration of the call */
    int32_t n_stop_strings;
    int32_t top_logits;               /* report the K largest raw logits with each token (0 = none, max 64), and
                                         since 0.11 their log-sum-exp and the token's own logit */
    /* Since 0.11: */
    int32_t top_probs;                /* report the K most likely tokens of the distribution each token was drawn
                                         from (after the sampler chain), with their probabilities (0 = none, max 64) */
} specula_generate_options;

/* Fills *opts with defaults; the macro passes the size of your struct (see "Options structs" above). */
SPECULA_API void specula_generate_options_init_sized(specula_generate_options *opts, size_t struct_size);
SPECULA_API void specula_generate_options_init(specula_generate_options *opts);
#define specula_generate_options_init(opts) specula_generate_options_init_sized((opts), sizeof *(opts))

typedef struct specula_stats {
    uint32_t struct_size;
    int32_t n_prompt_tokens;      /* tokens evaluated as prompt (not generated) since the session began */
    int32_t n_generated;          /* tokens generated since the session began */
    int32_t n_ctx_used;           /* tokens in the context now */
    double load_ms;               /* model load time */
    double prompt_ms;             /* time spent evaluating prompt tokens */
    double decode_ms;             /* time spent producing generated tokens */
    double ttft_ms;               /* time to first token of the last generate/next run */
    double prompt_tokens_per_s;
    double decode_tokens_per_s;
    /* Since 0.2: speculative decoding counters since the session began (all 0 without a drafter). */
    int32_t n_spec_rounds;        /* draft + verify rounds */
    int32_t n_drafted;            /* tokens the drafters proposed (tree nodes, the root not counted) */
    int32_t n_accepted;           /* drafted tokens the target accepted */
    double tau;                   /* mean tokens per round: (n_accepted + n_spec_rounds) / n_spec_rounds, i.e.
                                     every round produces its accepted tokens plus one from the target; 0 when
                                     no round ran */
    double draft_ms;              /* time spent drafting */
    double verify_ms;             /* time spent verifying (the target's tree pass and the acceptance walk) */
    int32_t accepted_at_depth[16];/* [d]: rounds whose accepted path reached depth d + 1, for the first 16
                                     levels; every level (up to 32): specula_session_accepted_at_depth() */
    size_t drafter_bytes;         /* memory the attached drafter holds now (buffers, caches, tables) */
    /* Since 0.6: */
    int32_t n_restored_tokens;    /* context tokens whose keys/values were restored from snapshots or a prompt
                                     cache instead of being evaluated, since the session began */
    /* Since 0.9: */
    int32_t n_context_shifts;     /* context shifts (SPECULA_CONTEXT_SHIFT) since the session began */
    int64_t n_discarded_tokens;   /* tokens those shifts dropped */
    /* Since 0.13: speculation under a grammar (docs/grammars.md), since the session began. */
    int32_t n_grammar_drafted;    /* tokens the grammar drafted (text it forces: punctuation, a schema's keys);
                                     counted in n_drafted too */
    int32_t n_grammar_accepted;   /* those the target accepted (counted in n_accepted too) */
    int32_t n_grammar_pruned;     /* drafted tokens the grammar rejected, dropped before verification (not in
                                     n_drafted) */
    /* Since 0.16: */
    int32_t n_ctx_evaluated;      /* tokens of the context whose keys and values are in the cache (what a snapshot
                                     holds as cache; the rest of n_ctx_used, such as the last generated token, is
                                     evaluated by the next call) */
} specula_stats;

typedef struct specula_token_event {
    uint32_t struct_size;
    int32_t token;                 /* the generated token id */
    const char *text;              /* complete UTF-8 made available by this token (may be empty: held back
                                      until a character or a possible stop string is complete). NUL-terminated.*/
    size_t text_len;
    int32_t n_top;                 /* number of entries in top_ids / top_logits */
    const int32_t *top_ids;        /* the K largest raw logits of the distribution the token came from */
    const float *top_logits;
    int32_t drafted;               /* 1 if the token was proposed by a drafter and accepted by the target
                                      (speculative decoding); 0 for tokens the target produced itself */
    specula_stop_reason stop;      /* SPECULA_STOP_NONE while generation goes on */
    const specula_stats *stats;    /* running stats */
    /* Since 0.11 (0 and NULL unless asked for by the generate options): */
    float logsumexp;               /* top_logits > 0: log(sum(exp(logit))) over the whole vocabulary, so that a raw
                                      logit minus it is that token's log-probability before sampling (llama-server's
                                      n_probs) */
    float token_logit;             /* top_logits > 0: the token's raw logit */
    int32_t n_top_probs;           /* top_probs > 0: entries in top_prob_ids / top_probs */
    const int32_t *top_prob_ids;   /* the most likely tokens of the distribution the token was drawn from (after the
                                      sampler chain; greedy: the argmax with p = 1), most likely first, then tokens
                                      the chain removed (p = 0) by raw logit */
    const float *top_probs;
    float token_prob;              /* top_probs > 0: the probability the token was drawn with */
} specula_token_event;
/* The event a callback receives, and the stats it points to, are the library's: their struct_size is the
 * library's sizeof, which may be smaller than the caller's header when an older library runs (read a field added
 * in a later version only when struct_size covers it) or larger (the extra fields are not the caller's concern).
 * All pointers in a specula_token_event are borrowed: valid during the callback, or for specula_session_next
 * until the next call on the session.
 * The event that ends a run has stop != SPECULA_STOP_NONE and may still carry a new token (e.g. the last token
 * allowed by max_tokens, or the token that completed a stop string). An event may also have
 * token == SPECULA_TOKEN_NULL and carry only text flushed at the end (held back for a stop string or an
 * incomplete character); concatenating the text of all events always gives the whole generated text. */

/* Return 1 to continue, 0 to stop (stop reason SPECULA_STOP_CALLBACK). */
typedef int32_t (*specula_token_fn)(const specula_token_event *event, void *user_data);

/* Evaluates pending context tokens, then generates tokens, calling on_token for each (on_token may be NULL).
 * *stop_reason (optional) receives why it stopped. Returns OK for normal stops, CANCELLED if
 * specula_session_cancel() was called (before or during the call; the cancel request is consumed), or
 * CONTEXT_FULL when no token could be generated because the context is full. Generated tokens stay in the
 * context; text held back for a stop string that never completed is flushed with the last event. */
SPECULA_API specula_status specula_session_generate(specula_session *session, const specula_generate_options *opts,
                                                    specula_token_fn on_token, void *user_data,
                                                    specula_stop_reason *stop_reason, specula_error **err);

/* Since 0.7. Evaluates the context's pending tokens (a prompt appended since the last evaluation) without
 * generating, so that a later generate starts at once: a prompt-cache warm-up. With a drafter attached the last
 * token stays pending (it is the root of the next speculative round). Returns CANCELLED if
 * specula_session_cancel() was called (the tokens evaluated until then stay evaluated). */
SPECULA_API specula_status specula_session_evaluate(specula_session *session, specula_error **err);

/* Pull-style generation: produces at most one token into *event (set event->struct_size first).
 * event->stop == SPECULA_STOP_NONE means a token was produced and more may follow; otherwise generation has
 * stopped (event->token is the last token or SPECULA_TOKEN_NULL, and event->text may carry flushed text).
 * Status semantics as specula_session_generate. */
SPECULA_API specula_status specula_session_next(specula_session *session, const specula_generate_options *opts,
                                                specula_token_event *event, specula_error **err);

/* Requests that the running (or next) generate/next/prompt evaluation stop at the next step boundary.
 * Thread-safe and async-signal-safe; callable from any thread while the session exists. Accepts NULL. */
SPECULA_API void specula_session_cancel(specula_session *session);

/* Fills *stats (set stats->struct_size first). */
SPECULA_API specula_status specula_session_stats(const specula_session *session, specula_stats *stats,
                                                 specula_error **err);

/* Raw logits (n_vocab floats) of the last evaluated position; borrowed, valid until the next call on the
 * session; NULL when none is available (nothing evaluated yet, or after a rewind). */
SPECULA_API const float *specula_session_logits(const specula_session *session);

/* ------------------------------------------------------------------------------------------------------ */
/* Speculative decoding (since 0.2)                                                                       */
/*
 * A session may draft several tokens per round with cheap drafters and verify them all with one pass of its
 * model (the target). Verification is exact: with greedy sampling the output is token for token what plain
 * decoding gives, and with temperature > 0 it has the same distribution. Drafters only change the speed.
 * Drafters:
 *   - a LongSpec draft (specula_draft): one extra decoder layer trained for a given target, which reuses the
 *     target's embeddings, LM head and KV cache;
 *   - an independent draft model: any small model with the target's vocabulary;
 *   - n-gram drafting from the text itself (prompt lookup + TokenSwift's token-reuse table); needs no file and
 *     combines with either of the above (the candidates are merged into one tree).
 */

typedef struct specula_draft specula_draft;

/* Loads a LongSpec draft file and checks it against target (the model it was trained for). The draft keeps
 * target's weights alive; it can only be attached to sessions created from the same loaded model (the same
 * handle, or a handle retained from it). On success *out holds one reference (specula_draft_destroy).
 * Statuses: INVALID_ARGUMENT (NULL path/target/out, a vocab-only target), IO, FORMAT (not a LongSpec draft,
 * malformed), UNSUPPORTED (tensor type, RoPE scaling), INCOMPATIBLE (made for another target: architecture,
 * sizes, vocabulary or RoPE settings differ; the message names the first difference), OUT_OF_MEMORY.
 * Thread-safe. */
SPECULA_API specula_status specula_draft_load(const char *path, specula_model *target, specula_draft **out,
                                              specula_error **err);
/* Adds a reference; returns draft. Thread-safe. */
SPECULA_API specula_draft *specula_draft_retain(specula_draft *draft);
/* Drops the caller's reference; sessions using the draft keep their own. Accepts NULL. Thread-safe. */
SPECULA_API void specula_draft_destroy(specula_draft *draft);
/* The draft's self-attention window in tokens (0 for NULL). */
SPECULA_API int32_t specula_draft_window(const specula_draft *draft);
/* Parameters stored in the draft file (the shared embeddings and LM head not counted; 0 for NULL). */
SPECULA_API uint64_t specula_draft_n_params(const specula_draft *draft);

/* Since 0.8. How each round's tree is chosen. AUTO drafts, every round, the tree the session expects to give the
 * most tokens per second, from what it measures as it runs: the target's verification time by node count at the
 * current context, the draft's time per level and row, and the acceptance per depth. The shapes tried are chains of
 * 1 to 8 tokens and trees up to [4, 16, 16, 16, 16] (bounded by tree_widths when given), each with or without
 * n-gram nodes (at most ngram_nodes), and plain decoding: while no tree pays, rounds draft nothing.
 * specula_session_tree_shape() tells which tree the last round drafted. Output is lossless either way, and with
 * sampled drafts coupled (the default, specula_sampled_drafts) a seed gives the same text whatever AUTO chooses.
 * A session starts from what earlier sessions of the same model, drafter and settings measured in this
 * process (a server's slots, an editor's completions), so only the first one pays for learning; only the speed
 * depends on it. */
typedef enum specula_tree_mode {
    SPECULA_TREE_DEFAULT = 0, /* AUTO, unless tree_widths are given: then FIXED */
    SPECULA_TREE_AUTO = 1,
    SPECULA_TREE_FIXED = 2    /* every round drafts tree_widths (or [4, 16, 16, 16, 16]) and ngram_nodes */
} specula_tree_mode;

/* Since 0.12. How chains drafted by sampling (temperature > 0; a chain of a draft or a draft model) are drawn and
 * verified (docs/speculative.md, "A seed means the same text"). Both are exact: every token is distributed as the
 * target's. */
typedef enum specula_sampled_drafts {
    SPECULA_SAMPLED_DRAFTS_COUPLED = 0,  /* the draft draws each position with the random key the target draws it
                                            with: for a seed the text is plain sampling's, with any drafter, tree,
                                            thread count or automatic choice (default) */
    SPECULA_SAMPLED_DRAFTS_LEVIATHAN = 1 /* Leviathan et al.'s accept/reject rule: up to ~14% more tokens per round
                                            with weak drafts, but the text for a seed depends on the drafts */
} specula_sampled_drafts;

typedef struct specula_speculative_options {
    uint32_t struct_size;
    const specula_draft *draft;    /* a LongSpec draft loaded for the session's model, or NULL */
    specula_model *draft_model;    /* an independent draft model with the target's vocabulary, or NULL.
                                      At most one of draft and draft_model. */
    int32_t ngram;                 /* 1: n-gram drafting (alone, or merged into the tree of the above). Default 0 */
    const int32_t *tree_widths;    /* nodes per tree level for the draft / draft model (beam widths); NULL or
                                      n_tree_levels = 0: the default [4, 16, 16, 16, 16]. A chain of k drafted
                                      tokens is k levels of width 1. Borrowed for the duration of the call.
                                      With SPECULA_TREE_AUTO: the largest tree tried (see tree_mode). */
    int32_t n_tree_levels;         /* 1..32 levels, widths 1..256 */
    int32_t ngram_nodes;           /* tree nodes reserved for n-gram candidates (alone: the whole tree); 0..1024;
                                      default 16 */
    int32_t ngram_lookup_min;      /* prompt lookup: shortest context suffix matched (tokens); default 1 */
    int32_t ngram_lookup_max;      /* longest suffix matched; lookup_min..64; default 4 */
    int32_t ngram_max_chain;       /* longest prompt-lookup chain proposed; default 8 */
    int32_t ngram_table_n;         /* n-gram size of the token-reuse table, 2..64; default 4 */
    int32_t ngram_table_topk;      /* n-grams proposed per root from the table; 0 = no table; default 20 */
    int32_t ngram_lag;             /* the table ignores the newest ngram_lag tokens; default 0 */
    /* Since 0.8: */
    int32_t tree_mode;             /* specula_tree_mode; default SPECULA_TREE_DEFAULT */
    /* Since 0.12: */
    int32_t sampled_drafts;        /* specula_sampled_drafts; default SPECULA_SAMPLED_DRAFTS_COUPLED */
    /* Since 0.14: */
    int32_t grammar;               /* 1: the sampler's grammar drafts alone: with no draft, draft_model or ngram,
                                      each round drafts the text the grammar forces, spelled as the model spelled
                                      it before (docs/grammars.md); without a grammar the rounds are plain. With
                                      other drafters the forced text joins their trees whatever this says.
                                      Default 0 */
} specula_speculative_options;

/* Fills *opts with defaults (no drafter); the macro passes the size of your struct (see "Options structs" above). */
SPECULA_API void specula_speculative_options_init_sized(specula_speculative_options *opts, size_t struct_size);
SPECULA_API void specula_speculative_options_init(specula_speculative_options *opts);
#define specula_speculative_options_init(opts) specula_speculative_options_init_sized((opts), sizeof *(opts))

/* Attaches drafters to the session (replacing any attached before); opts = NULL, or options with no draft,
 * no draft_model, ngram = 0 and grammar = 0, detach them: generation is plain autoregressive again. Takes effect at the
 * next generated token; the context is kept.
 * Ownership: the session keeps its own references to the draft and the draft model; the caller may destroy
 * its handles right after this call.
 * Statuses: INVALID_ARGUMENT (NULL session, both draft and draft_model, a bad tree or n-gram setting),
 * INCOMPATIBLE (a draft loaded for another model handle, a draft model with another vocabulary),
 * OUT_OF_MEMORY. On failure the previous drafters stay attached. */
SPECULA_API specula_status specula_session_set_speculative(specula_session *session,
                                                           const specula_speculative_options *opts,
                                                           specula_error **err);
/* Since 0.8. The tree the last speculative round drafted: level widths of the model drafter with the n-gram
 * nodes, "auto:" first when the session chooses it (SPECULA_TREE_AUTO): "auto:1,1,1,1", "auto:ngram:8",
 * "auto:plain" (no tree paid: the round decoded plainly), "4,16,16,16,16+ngram:16". "" before the first round or
 * without drafters; NULL for a NULL session. Borrowed, valid until the next call on the session. */
SPECULA_API const char *specula_session_tree_shape(const specula_session *session);
/* Since 0.9. How deep the accepted paths of the speculative rounds reached, at every tree level the API accepts
 * (up to 32; specula_stats.accepted_at_depth holds the first 16): counts[d] = rounds whose accepted path reached
 * depth d + 1, for d < min(capacity, levels). Returns the number of levels any round reached (0 without rounds, or
 * for a NULL session); call with counts = NULL and capacity = 0 to learn it. */
SPECULA_API int32_t specula_session_accepted_at_depth(const specula_session *session, int32_t *counts, int32_t capacity);
/* Name of the attached drafter ("ngram", "longspec", "draft-model", "longspec+ngram", ...), "" when none.
 * Borrowed, valid until the next specula_session_set_speculative or specula_session_destroy. */
SPECULA_API const char *specula_session_drafter_name(const specula_session *session);

/* ------------------------------------------------------------------------------------------------------ */
/* Snapshots and prompt caches (since 0.6)                                                                */
/*
 * A snapshot is a session's state in a file or a buffer: compressed with zstd, checked with XXH3 checksums, and
 * bound to the model file it was made with (a fingerprint of every byte of the GGUF) and to the drafters it was made
 * with. Loading checks everything before it changes anything: a snapshot of another model or draft, another format
 * version, a damaged or truncated file is refused with its own status and a message, and the session is left
 * exactly as it was. Only once every check has passed is the snapshot written into the session; if that step fails
 * (a device error, or memory running out: BACKEND, OUT_OF_MEMORY), the session is left with an empty context,
 * never a mix of the two. The format is described in docs/snapshots.md.
 *
 * SPECULA_SNAPSHOT_FULL holds everything a later session needs to continue exactly where this one stopped, after
 * any emitted token: the context, the target's keys/values of the evaluated tokens, the last logits, the sampler's
 * settings and its random generator's position, the drafters' state (the LongSpec draft's ring, the extent of the
 * n-gram tables, a draft model's cache), the accepted tokens of a speculative round not emitted yet, the text held
 * back for a stop string or an incomplete character, and the stats. Generating N tokens, saving, loading into a new
 * session (in another process) and generating M more gives the same N + M tokens as one run, at any temperature.
 * SPECULA_SNAPSHOT_CONTEXT holds the context only (tokens, keys/values, last logits): what a prompt cache keeps.
 *
 * Loading a Full snapshot replaces the session's sampler and stats with the saved ones. If the snapshot carries
 * drafter state, the session must have the same drafters attached (the same draft or draft model file, the same
 * n-gram settings), else INCOMPATIBLE. A snapshot without drafter state (saved without drafters, or a Context
 * snapshot) loads into any session on the same model: its drafters catch up from the restored context. Loading a
 * Context snapshot keeps the session's sampler, drafters and stats (which count the restored tokens in
 * n_restored_tokens).
 * The session's KV cache type must match the snapshot's (the CPU backend keeps F32, CUDA and Vulkan F16): a
 * snapshot is not converted between backends. The snapshot's context must fit the session's n_ctx (CONTEXT_FULL
 * otherwise).
 * Statuses of every load: INVALID_ARGUMENT, IO, FORMAT (not a snapshot, damaged, truncated), UNSUPPORTED (another
 * format version), INCOMPATIBLE (another model, draft, drafter set or KV type), CONTEXT_FULL, OUT_OF_MEMORY.
 */

typedef enum specula_snapshot_scope {
    SPECULA_SNAPSHOT_FULL = 0,    /* everything: exact resume (the default) */
    SPECULA_SNAPSHOT_CONTEXT = 1  /* the context only: tokens, keys/values, last logits */
} specula_snapshot_scope;

typedef struct specula_snapshot_options {
    uint32_t struct_size;
    int32_t scope;              /* specula_snapshot_scope; default SPECULA_SNAPSHOT_FULL */
    int32_t compression_level;  /* zstd level: 1 (default, fast) .. 19 (smaller, slower); negative: faster still;
                                   0: store uncompressed */
} specula_snapshot_options;

/* Fills *opts with defaults; the macro passes the size of your struct (see "Options structs" above). */
SPECULA_API void specula_snapshot_options_init_sized(specula_snapshot_options *opts, size_t struct_size);
SPECULA_API void specula_snapshot_options_init(specula_snapshot_options *opts);
#define specula_snapshot_options_init(opts) specula_snapshot_options_init_sized((opts), sizeof *(opts))

/* Saves a snapshot of the session to path (opts = NULL: defaults). The file is written under a temporary name and
 * renamed, so path holds either the old file or the whole new snapshot, never a part. The session is not changed.
 * Compression runs on the session's threads. Statuses: INVALID_ARGUMENT, IO, OUT_OF_MEMORY. */
SPECULA_API specula_status specula_session_save_file(specula_session *session, const char *path,
                                                     const specula_snapshot_options *opts, specula_error **err);
/* Loads a snapshot file into the session (see above for what is checked and replaced). */
SPECULA_API specula_status specula_session_load_file(specula_session *session, const char *path, specula_error **err);
/* Saves a snapshot into buf. *size (required) receives the bytes written. When buf is NULL or capacity is too
 * small, nothing is written, BUFFER_TOO_SMALL is returned and *size receives an upper bound of the snapshot's size
 * (its uncompressed size: a buffer of that capacity always fits). */
SPECULA_API specula_status specula_session_save_buffer(specula_session *session, const specula_snapshot_options *opts,
                                                       void *buf, size_t capacity, size_t *size, specula_error **err);
/* Loads a snapshot from size bytes at buf (borrowed for the duration of the call). */
SPECULA_API specula_status specula_session_load_buffer(specula_session *session, const void *buf, size_t size,
                                                       specula_error **err);
/* Copies src's state into dst, a session on the same model file, in memory and uncompressed: a prefix evaluated
 * once serves many sessions. opts->scope as for a save (compression_level is ignored); the rules of a load apply to
 * dst. src is not changed. Neither session may be used by another thread during the call. */
SPECULA_API specula_status specula_session_fork(specula_session *src, specula_session *dst,
                                                const specula_snapshot_options *opts, specula_error **err);
/* The model file's fingerprint as 32 hex digits (XXH3-128 over every byte of the GGUF; computed on first use,
 * which reads the whole file once). Two-call pattern as specula_model_meta_value. Thread-safe. */
SPECULA_API specula_status specula_model_fingerprint(const specula_model *model, char *buf, size_t buf_size, size_t *len,
                                                     specula_error **err);

/*
 * A prompt cache is a directory of Context snapshots, one per context seen, shared by any number of processes. A new
 * prompt restores the cached context sharing the longest prefix with it (only the keys/values of that prefix are
 * read back) and evaluates just the rest. Entries are kept per model file and KV type; the directory is held under
 * a size limit by removing the least recently used entries, and an entry whose context is a prefix of a newer one
 * is dropped (the newer one serves every prompt it served). A damaged entry is deleted and counts as a miss.
 * One specula_prompt_cache may be used from several threads; each call is serialised.
 */
typedef struct specula_prompt_cache specula_prompt_cache;

typedef struct specula_prompt_cache_options {
    uint32_t struct_size;
    uint64_t max_bytes;         /* size limit of the directory's entries; default 1 GiB; 0 = no limit */
    int32_t compression_level;  /* zstd level of new entries; default 1 */
} specula_prompt_cache_options;

/* Fills *opts with defaults; the macro passes the size of your struct (see "Options structs" above). */
SPECULA_API void specula_prompt_cache_options_init_sized(specula_prompt_cache_options *opts, size_t struct_size);
SPECULA_API void specula_prompt_cache_options_init(specula_prompt_cache_options *opts);
#define specula_prompt_cache_options_init(opts) specula_prompt_cache_options_init_sized((opts), sizeof *(opts))
/* Opens (creating it if needed) a cache directory. Statuses: INVALID_ARGUMENT, IO, OUT_OF_MEMORY. */
SPECULA_API specula_status specula_prompt_cache_open(const char *dir, const specula_prompt_cache_options *opts,
                                                     specula_prompt_cache **out, specula_error **err);
/* Frees the handle (the directory stays). Accepts NULL. */
SPECULA_API void specula_prompt_cache_destroy(specula_prompt_cache *cache);
/* Looks for the cached context sharing the longest prefix with tokens[0, n_tokens) and, if there is one, replaces
 * the session's context with that prefix: *n_restored (required) receives its length, and the caller appends
 * tokens[*n_restored, n_tokens). On a miss *n_restored is 0 and the session is not changed. The session's sampler
 * and drafters are kept and its stats go on, n_restored_tokens counting the restored tokens (as for a Context
 * snapshot). Statuses: INVALID_ARGUMENT, IO, OUT_OF_MEMORY. */
SPECULA_API specula_status specula_prompt_cache_restore(specula_prompt_cache *cache, specula_session *session,
                                                        const int32_t *tokens, size_t n_tokens, size_t *n_restored,
                                                        specula_error **err);
/* Stores the session's context (tokens and the keys/values evaluated so far) as an entry, then enforces the size
 * limit. An empty or unevaluated context stores nothing. Statuses: INVALID_ARGUMENT, IO, OUT_OF_MEMORY. */
SPECULA_API specula_status specula_prompt_cache_store(specula_prompt_cache *cache, specula_session *session,
                                                      specula_error **err);

typedef struct specula_prompt_cache_stats {
    uint32_t struct_size;
    int64_t n_entries;        /* entries in the directory (all models) */
    uint64_t bytes;           /* their total size */
    int64_t hits, misses;     /* restore calls of this handle that found a prefix / found none */
    int64_t stores;           /* entries this handle wrote */
    int64_t evictions;        /* entries this handle removed for the size limit or as dominated by a newer one */
    int64_t restored_tokens;  /* tokens this handle restored instead of their evaluation */
} specula_prompt_cache_stats;

/* Fills *stats (set stats->struct_size first). Statuses: INVALID_ARGUMENT, IO. */
SPECULA_API specula_status specula_prompt_cache_get_stats(specula_prompt_cache *cache, specula_prompt_cache_stats *stats,
                                                          specula_error **err);

/*
 * Since 0.15. A batch group: continuous batching for servers. Sessions of one model that join the same group hand
 * their target forward passes to it, and the passes waiting at the same time run as one pass on the group's
 * threads, so each weight is read once per step for all of them (as llama-server's slots decode in one batch).
 * Each session still runs its own loop on its own thread (sampling, drafting, verification: plain decoding rows and
 * speculation trees of several sessions share a pass); only when to compute changes, never what: every token is
 * the one the session would produce alone. A pass starts when every session that has been passing recently is
 * waiting, or after a short wait (a quarter of the last pass, at most 5 ms) for those that are not.
 * The CPU backend batches; a session on another backend gets UNSUPPORTED from specula_session_join_batch.
 * Thread-safety: the group is used by its sessions' threads at once; create, join and free are as documented.
 */
typedef struct specula_batch specula_batch;

typedef struct specula_batch_options {
    uint32_t struct_size;
    int32_t n_threads; /* threads of the combined passes; 0 = number of cores (at most 8). A joined session's own
                          threads (specula_session_options.n_threads) still run its drafters */
} specula_batch_options;

/* Fills *opts with defaults; the macro passes the size of your struct (see "Options structs" above). */
SPECULA_API void specula_batch_options_init_sized(specula_batch_options *opts, size_t struct_size);
SPECULA_API void specula_batch_options_init(specula_batch_options *opts);
#define specula_batch_options_init(opts) specula_batch_options_init_sized((opts), sizeof *(opts))
/* A group for sessions of `model` (opts may be NULL). Statuses: INVALID_ARGUMENT, OUT_OF_MEMORY. */
SPECULA_API specula_status specula_batch_create(specula_model *model, const specula_batch_options *opts, specula_batch **out,
                                                specula_error **err);
/* Frees the handle; sessions that joined keep the group until they leave or are destroyed. Accepts NULL. */
SPECULA_API void specula_batch_free(specula_batch *batch);
/* The session's forward passes join the group's (batch NULL: it leaves its group and computes alone again). Not
 * while the session is generating on another thread. Statuses: INVALID_ARGUMENT (NULL session), INCOMPATIBLE (the
 * session's model is not the group's, or its context length rotates positions differently from the group's
 * sessions), UNSUPPORTED (the session's backend does not batch; it stays alone). */
SPECULA_API specula_status specula_session_join_batch(specula_session *session, specula_batch *batch, specula_error **err);

typedef struct specula_batch_stats {
    uint32_t struct_size;
    uint64_t passes;   /* combined passes run */
    uint64_t requests; /* sessions' forward passes they held */
    uint64_t rows;     /* rows (tokens, tree nodes) they computed */
    uint32_t widest;   /* the most sessions one pass held */
} specula_batch_stats;

/* Fills *stats (set stats->struct_size first). Statuses: INVALID_ARGUMENT. Thread-safe. */
SPECULA_API specula_status specula_batch_get_stats(const specula_batch *batch, specula_batch_stats *stats, specula_error **err);

#ifdef __cplusplus
}
#endif

#endif /* SPECULA_H */
