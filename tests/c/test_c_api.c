/*
 * test_c_api.c - the C ABI used from plain C99 (built with -std=c99 -pedantic -Werror).
 *
 * Compiling this file at all proves specula.h is valid C99. Running it proves the basic life cycle works from C:
 * load, tokenize, append, generate (push and pull style), stats, and the documented error statuses.
 * Exit 0 on success, 1 on the first failure (with a message), 77 (ctest "skipped") if the bundled model is absent.
 */
#include <specula/specula.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef SPECULA_DEFAULT_MODEL
#error "SPECULA_DEFAULT_MODEL must name the bundled model"
#endif
#ifndef SPECULA_FIXTURES_DIR
#define SPECULA_FIXTURES_DIR ""
#endif

#define N_GENERATE 20
#define N_PULL 5

static int g_failures = 0;

#define CHECK(cond)                                                                                             \
    do {                                                                                                        \
        if (!(cond)) {                                                                                          \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);                            \
            ++g_failures;                                                                                       \
        }                                                                                                       \
    } while (0)

/* Checks status == expected; prints the library's message when it is not. Frees *err either way. */
#define CHECK_STATUS(status, expected, err)                                                                     \
    do {                                                                                                        \
        specula_status st_ = (status);                                                                          \
        if (st_ != (expected)) {                                                                                \
            fprintf(stderr, "%s:%d: %s returned %s, expected %s: %s\n", __FILE__, __LINE__, #status,            \
                    specula_status_string(st_), specula_status_string(expected), specula_error_message(err));   \
            ++g_failures;                                                                                       \
        }                                                                                                       \
        specula_error_destroy(err);                                                                             \
        (err) = NULL;                                                                                           \
    } while (0)

/* Fatal variant for steps everything after depends on. */
#define REQUIRE_OK(status, err)                                                                                 \
    do {                                                                                                        \
        specula_status st_ = (status);                                                                          \
        if (st_ != SPECULA_OK) {                                                                                \
            fprintf(stderr, "%s:%d: %s failed: %s: %s\n", __FILE__, __LINE__, #status,                          \
                    specula_status_string(st_), specula_error_message(err));                                   \
            exit(1);                                                                                            \
        }                                                                                                       \
    } while (0)

/* 1 if s[0..len) is well-formed UTF-8 (no overlongs, surrogates or code points above U+10FFFF). */
static int is_valid_utf8(const char *s, size_t len) {
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        unsigned char c = p[i];
        size_t n, k;
        unsigned char lo = 0x80, hi = 0xBF;
        if (c < 0x80) {
            ++i;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF) {
            n = 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            n = 3;
            if (c == 0xE0) lo = 0xA0;
            if (c == 0xED) hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            n = 4;
            if (c == 0xF0) lo = 0x90;
            if (c == 0xF4) hi = 0x8F;
        } else {
            return 0;
        }
        if (i + n > len || p[i + 1] < lo || p[i + 1] > hi) return 0;
        for (k = 2; k < n; ++k)
            if ((p[i + k] & 0xC0) != 0x80) return 0;
        i += n;
    }
    return 1;
}

/* ---- token callback ------------------------------------------------------------------------------------ */

typedef struct collected {
    char text[4096];
    size_t text_len;
    int32_t tokens[64];
    int n_tokens;
    int n_events;
    int bad_utf8;
    int bad_event;
} collected;

static int32_t collect_token(const specula_token_event *ev, void *user_data) {
    collected *c = (collected *)user_data;
    ++c->n_events;
    if (ev == NULL || ev->text == NULL || ev->text[ev->text_len] != '\0' || ev->stats == NULL) {
        ++c->bad_event;
        return 0;
    }
    if (!is_valid_utf8(ev->text, ev->text_len)) ++c->bad_utf8;
    if (c->text_len + ev->text_len < sizeof c->text) {
        memcpy(c->text + c->text_len, ev->text, ev->text_len);
        c->text_len += ev->text_len;
        c->text[c->text_len] = '\0';
    }
    if (ev->token != SPECULA_TOKEN_NULL && c->n_tokens < 64) c->tokens[c->n_tokens++] = ev->token;
    return 1;
}

/* ---- llama.cpp's reference for the bundled model (fixtures/reference/stories260K_dog.json) ---------------- */
/* A deliberately tiny reader: the file is machine-written, so "find key, read integers" is enough. */

typedef struct reference {
    int32_t prompt[128];
    int n_prompt;
    int32_t steps[N_GENERATE];
    int n_steps;
} reference;

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    char *buf;
    long size;
    if (f == NULL) return NULL;
    if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return NULL;
    }
    buf = (char *)malloc((size_t)size + 1);
    if (buf != NULL && fread(buf, 1, (size_t)size, f) != (size_t)size) {
        free(buf);
        buf = NULL;
    }
    if (buf != NULL) buf[size] = '\0';
    fclose(f);
    return buf;
}

/* Returns 1 if the reference was read. */
static int load_reference(reference *ref) {
    char path[1024];
    char *json, *p;
    memset(ref, 0, sizeof *ref);
    snprintf(path, sizeof path, "%s/reference/stories260K_dog.json", SPECULA_FIXTURES_DIR);
    json = read_file(path);
    if (json == NULL) return 0;
    p = strstr(json, "\"prompt_ids\"");
    if (p != NULL && (p = strchr(p, '[')) != NULL) {
        ++p;
        while (ref->n_prompt < 128) {
            char *end;
            long v = strtol(p, &end, 10);
            if (end == p) break;
            ref->prompt[ref->n_prompt++] = (int32_t)v;
            p = end;
            while (*p == ',' || *p == ' ') ++p;
        }
    }
    p = json;
    while (ref->n_steps < N_GENERATE && (p = strstr(p, "\"token\":")) != NULL) {
        p += strlen("\"token\":");
        ref->steps[ref->n_steps++] = (int32_t)strtol(p, NULL, 10);
    }
    free(json);
    return ref->n_prompt > 0 && ref->n_steps == N_GENERATE;
}

/* ---- the tests ------------------------------------------------------------------------------------------ */

static void test_versions_and_strings(void) {
    int s;
    CHECK(specula_abi_version() == SPECULA_ABI_VERSION);
    CHECK(specula_version() ==
          (((uint32_t)SPECULA_VERSION_MAJOR << 16) | (SPECULA_VERSION_MINOR << 8) | SPECULA_VERSION_PATCH));
    CHECK(specula_version_string() != NULL && strlen(specula_version_string()) >= 5);
    for (s = SPECULA_OK; s <= SPECULA_ERR_INTERNAL; ++s) CHECK(specula_status_string((specula_status)s) != NULL);
    for (s = SPECULA_STOP_NONE; s <= SPECULA_STOP_CALLBACK; ++s)
        CHECK(specula_stop_reason_string((specula_stop_reason)s) != NULL);
    CHECK(specula_error_status(NULL) == SPECULA_OK);
    CHECK(specula_error_message(NULL) != NULL && specula_error_message(NULL)[0] == '\0');
}

/* A C caller may pass any int as the log level (the enum is an int in C): above SPECULA_LOG_ERROR nothing is
 * delivered, below SPECULA_LOG_DEBUG everything. (From C, not C++: there loading 99 as the enum is itself undefined, and
 * clang's UBSan, CI's sanitizer pass, checks that the library never does.) */
static void count_message(specula_log_level level, const char *message, void *user_data) {
    (void)level;
    (void)message;
    ++*(int *)user_data;
}

static int messages_of_a_load(specula_log_level min_level) {
    int count = 0;
    specula_model *m = NULL;
    specula_log_set(count_message, min_level, &count);
    if (specula_model_load(SPECULA_DEFAULT_MODEL, NULL, &m, NULL) == SPECULA_OK) specula_model_destroy(m);
    specula_log_set(NULL, SPECULA_LOG_INFO, NULL);
    return count;
}

static void test_log_levels(void) {
    const int debug = messages_of_a_load(SPECULA_LOG_DEBUG);
    CHECK(debug > 0);
    CHECK(messages_of_a_load((specula_log_level)99) == 0);
    CHECK(messages_of_a_load((specula_log_level)-7) == debug);
}

static void test_error_paths(specula_model *model) {
    specula_error *err = NULL;
    specula_model *m = NULL;
    specula_session *s = NULL;
    specula_model_options mo;
    int32_t token;

    /* NULL handles and pointers. */
    CHECK_STATUS(specula_model_load(NULL, NULL, &m, &err), SPECULA_ERR_INVALID_ARGUMENT, err);
    CHECK(m == NULL);
    CHECK_STATUS(specula_model_load(SPECULA_DEFAULT_MODEL, NULL, NULL, &err), SPECULA_ERR_INVALID_ARGUMENT, err);
    CHECK_STATUS(specula_session_create(NULL, NULL, NULL, &s, &err), SPECULA_ERR_INVALID_ARGUMENT, err);
    CHECK(s == NULL);
    CHECK_STATUS(specula_session_append_text(NULL, "x", 1, 0, &err), SPECULA_ERR_INVALID_ARGUMENT, err);
    CHECK_STATUS(specula_session_generate(NULL, NULL, NULL, NULL, NULL, &err), SPECULA_ERR_INVALID_ARGUMENT, err);
    CHECK_STATUS(specula_session_stats(NULL, NULL, &err), SPECULA_ERR_INVALID_ARGUMENT, err);
    CHECK(specula_model_n_vocab(NULL) == 0);
    CHECK(specula_model_arch(NULL) != NULL && specula_model_arch(NULL)[0] == '\0');
    CHECK(specula_session_n_tokens(NULL) == 0);

    /* err = NULL is always allowed. */
    CHECK(specula_session_append_text(NULL, "x", 1, 0, NULL) == SPECULA_ERR_INVALID_ARGUMENT);

    /* A missing file is an I/O error with a message. */
    specula_model_options_init(&mo);
    CHECK(mo.struct_size == sizeof mo);
    {
        specula_status st = specula_model_load("/nonexistent/dir/model.gguf", &mo, &m, &err);
        CHECK(st == SPECULA_ERR_IO);
        CHECK(err != NULL && specula_error_status(err) == SPECULA_ERR_IO);
        CHECK(err != NULL && strlen(specula_error_message(err)) > 0);
        CHECK(m == NULL);
        specula_error_destroy(err);
        err = NULL;
    }

    /* Out-of-range token ids are refused with a message and append nothing. */
    REQUIRE_OK(specula_session_create(model, NULL, NULL, &s, &err), err);
    token = 99999;
    {
        specula_status st = specula_session_append_tokens(s, &token, 1, &err);
        CHECK(st == SPECULA_ERR_INVALID_TOKEN);
        CHECK(err != NULL && specula_error_status(err) == SPECULA_ERR_INVALID_TOKEN);
        CHECK(err != NULL && strlen(specula_error_message(err)) > 0);
        specula_error_destroy(err);
        err = NULL;
    }
    CHECK(specula_session_n_tokens(s) == 0);

    /* On success *err is set to NULL (whatever it held before). */
    token = 1;
    err = (specula_error *)&token; /* a sentinel the library must overwrite, never dereference */
    CHECK(specula_session_append_tokens(s, &token, 1, &err) == SPECULA_OK);
    CHECK(err == NULL);

    specula_session_destroy(s);
}

static void test_tokenize(specula_model *model) {
    const char *text = "Once upon a time";
    int32_t tokens[64];
    size_t n = 0, len = 0;
    char buf[256];
    specula_error *err = NULL;

    /* Two-call pattern: ask for the size first. */
    CHECK_STATUS(specula_model_tokenize(model, text, strlen(text), SPECULA_TOKENIZE_ADD_SPECIAL, NULL, 0, &n, &err),
                 SPECULA_ERR_BUFFER_TOO_SMALL, err);
    CHECK(n >= 2 && n <= 64);
    REQUIRE_OK(specula_model_tokenize(model, text, strlen(text), SPECULA_TOKENIZE_ADD_SPECIAL, tokens, 64, &n, &err),
               err);
    CHECK(n >= 2);
    CHECK(tokens[0] == specula_model_token_bos(model));

    /* Detokenizing the tokens (without BOS) gives the text back, give or take SentencePiece's leading space. */
    REQUIRE_OK(specula_model_detokenize(model, tokens + 1, n - 1, 0, buf, sizeof buf, &len, &err), err);
    CHECK(len == strlen(buf));
    CHECK(strstr(buf, text) != NULL);
}

static void test_generate(specula_model *model) {
    const char *prompt = "Once upon a time";
    specula_session_options so;
    specula_sampler_options sp;
    specula_generate_options go;
    specula_session *s = NULL;
    specula_error *err = NULL;
    specula_stop_reason reason = SPECULA_STOP_NONE;
    specula_stats stats;
    collected c;
    int32_t n_prompt;
    size_t n_tok = 0;
    int i;

    specula_session_options_init(&so);
    so.n_ctx = 256;
    specula_sampler_options_init(&sp);
    sp.temperature = 0.0f; /* greedy */
    REQUIRE_OK(specula_session_create(model, &so, &sp, &s, &err), err);
    CHECK(specula_session_n_ctx(s) == 256);

    REQUIRE_OK(specula_session_append_text(s, prompt, strlen(prompt), SPECULA_TOKENIZE_ADD_SPECIAL, &err), err);
    n_prompt = specula_session_n_tokens(s);
    CHECK(specula_model_tokenize(model, prompt, strlen(prompt), SPECULA_TOKENIZE_ADD_SPECIAL, NULL, 0, &n_tok, NULL) ==
          SPECULA_ERR_BUFFER_TOO_SMALL);
    CHECK(n_prompt == (int32_t)n_tok);

    specula_generate_options_init(&go);
    go.max_tokens = N_GENERATE;
    go.stop_at_eog = 0; /* exactly N_GENERATE tokens, whatever the story does */
    memset(&c, 0, sizeof c);
    REQUIRE_OK(specula_session_generate(s, &go, collect_token, &c, &reason, &err), err);
    CHECK(reason == SPECULA_STOP_MAX_TOKENS);
    CHECK(c.n_tokens == N_GENERATE);
    CHECK(c.bad_event == 0);
    CHECK(c.bad_utf8 == 0);
    CHECK(c.text_len > 0);
    for (i = 0; i < c.n_tokens; ++i) CHECK(c.tokens[i] >= 0 && c.tokens[i] < specula_model_n_vocab(model));
    printf("greedy: \"%s%s\"\n", prompt, c.text);

    /* Stats reflect what happened. */
    memset(&stats, 0, sizeof stats);
    stats.struct_size = sizeof stats;
    REQUIRE_OK(specula_session_stats(s, &stats, &err), err);
    CHECK(stats.n_prompt_tokens == n_prompt);
    CHECK(stats.n_generated == N_GENERATE);
    CHECK(stats.n_ctx_used == n_prompt + N_GENERATE);
    CHECK(specula_session_n_tokens(s) == n_prompt + N_GENERATE);
    CHECK(stats.decode_ms > 0.0 && stats.decode_tokens_per_s > 0.0);
    CHECK(stats.prompt_ms >= 0.0 && stats.ttft_ms > 0.0);
    CHECK(stats.load_ms >= 0.0);

    /* Pull style: after a rewind to the prompt, specula_session_next yields the same greedy tokens. */
    REQUIRE_OK(specula_session_rewind(s, n_prompt, &err), err);
    CHECK(specula_session_n_tokens(s) == n_prompt);
    go.max_tokens = N_PULL;
    {
        specula_token_event ev;
        int produced = 0, calls = 0;
        for (;;) {
            memset(&ev, 0, sizeof ev);
            ev.struct_size = sizeof ev;
            REQUIRE_OK(specula_session_next(s, &go, &ev, &err), err);
            if (++calls > N_PULL + 2) {
                fprintf(stderr, "specula_session_next did not stop after max_tokens\n");
                ++g_failures;
                break;
            }
            if (ev.stop == SPECULA_STOP_NONE) {
                CHECK(ev.text != NULL && is_valid_utf8(ev.text, ev.text_len));
                CHECK(produced < N_PULL && ev.token == c.tokens[produced]);
                ++produced;
                continue;
            }
            CHECK(ev.stop == SPECULA_STOP_MAX_TOKENS);
            /* The stopping event may carry the last token itself (if not already reported). */
            if (ev.token != SPECULA_TOKEN_NULL && produced < N_PULL && ev.token == c.tokens[produced]) ++produced;
            break;
        }
        CHECK(produced == N_PULL);
        CHECK(specula_session_n_tokens(s) == n_prompt + N_PULL);
    }

    specula_session_destroy(s);
}

/* Greedy tokens of the bundled model must match llama.cpp's (skipped when the fixtures are absent). */
static void test_reference(specula_model *model) {
    reference ref;
    specula_session *s = NULL;
    specula_sampler_options sp;
    specula_generate_options go;
    specula_error *err = NULL;
    collected c;
    int i;

    if (!load_reference(&ref)) {
        printf("SKIP reference check: %s/reference/stories260K_dog.json not readable\n", SPECULA_FIXTURES_DIR);
        return;
    }
    specula_sampler_options_init(&sp);
    sp.temperature = 0.0f;
    REQUIRE_OK(specula_session_create(model, NULL, &sp, &s, &err), err);
    REQUIRE_OK(specula_session_append_tokens(s, ref.prompt, (size_t)ref.n_prompt, &err), err);
    specula_generate_options_init(&go);
    go.max_tokens = N_GENERATE;
    go.stop_at_eog = 0;
    memset(&c, 0, sizeof c);
    REQUIRE_OK(specula_session_generate(s, &go, collect_token, &c, NULL, &err), err);
    CHECK(c.n_tokens == N_GENERATE);
    for (i = 0; i < N_GENERATE && i < c.n_tokens; ++i) {
        if (c.tokens[i] != ref.steps[i]) {
            fprintf(stderr, "reference mismatch at step %d: got %d, llama.cpp %d\n", i, c.tokens[i], ref.steps[i]);
            ++g_failures;
            break;
        }
    }
    specula_session_destroy(s);
}

/* Speculative decoding from C: n-gram drafting gives exactly the plain greedy tokens. */
static void test_speculative(specula_model *model) {
    const char *prompt = "Once upon a time, there was a little girl named Lily.";
    specula_session *s = NULL;
    specula_sampler_options sp;
    specula_generate_options go;
    specula_speculative_options spec;
    specula_stats stats;
    specula_error *err = NULL;
    collected plain, fast;
    int i;

    specula_sampler_options_init(&sp);
    sp.temperature = 0.0f;
    CHECK(sp.context_penalty == 1.0f && sp.context_penalty_window == 1024);
    specula_generate_options_init(&go);
    go.max_tokens = N_GENERATE;
    go.stop_at_eog = 0;

    REQUIRE_OK(specula_session_create(model, NULL, &sp, &s, &err), err);
    REQUIRE_OK(specula_session_append_text(s, prompt, strlen(prompt), SPECULA_TOKENIZE_ADD_SPECIAL, &err), err);
    memset(&plain, 0, sizeof plain);
    REQUIRE_OK(specula_session_generate(s, &go, collect_token, &plain, NULL, &err), err);
    specula_session_destroy(s);
    s = NULL;

    REQUIRE_OK(specula_session_create(model, NULL, &sp, &s, &err), err);
    specula_speculative_options_init(&spec);
    CHECK(spec.struct_size == sizeof spec && spec.draft == NULL && spec.draft_model == NULL && spec.ngram == 0);
    spec.ngram = 1;
    REQUIRE_OK(specula_session_set_speculative(s, &spec, &err), err);
    CHECK(strcmp(specula_session_drafter_name(s), "ngram") == 0);
    REQUIRE_OK(specula_session_append_text(s, prompt, strlen(prompt), SPECULA_TOKENIZE_ADD_SPECIAL, &err), err);
    memset(&fast, 0, sizeof fast);
    REQUIRE_OK(specula_session_generate(s, &go, collect_token, &fast, NULL, &err), err);
    CHECK(fast.n_tokens == N_GENERATE && plain.n_tokens == N_GENERATE);
    for (i = 0; i < N_GENERATE && i < fast.n_tokens; ++i) CHECK(fast.tokens[i] == plain.tokens[i]);

    memset(&stats, 0, sizeof stats);
    stats.struct_size = sizeof stats;
    REQUIRE_OK(specula_session_stats(s, &stats, &err), err);
    CHECK(stats.n_spec_rounds > 0 && stats.tau >= 1.0 && stats.n_accepted <= stats.n_drafted);

    /* NULL options detach; bad options are INVALID_ARGUMENT. */
    REQUIRE_OK(specula_session_set_speculative(s, NULL, &err), err);
    CHECK(specula_session_drafter_name(s)[0] == '\0');
    spec.ngram_nodes = -1;
    CHECK_STATUS(specula_session_set_speculative(s, &spec, &err), SPECULA_ERR_INVALID_ARGUMENT, err);
    CHECK_STATUS(specula_session_set_speculative(NULL, NULL, &err), SPECULA_ERR_INVALID_ARGUMENT, err);
    specula_session_destroy(s);
    specula_draft_destroy(NULL);
}

/* Snapshots from C: a buffer sized by the library's bound, loaded into a second session that then generates what the
 * first one does; a damaged byte is FORMAT and leaves the session as it was. */
static void test_snapshot(specula_model *model) {
    specula_session *a = NULL, *b = NULL;
    specula_error *err = NULL;
    specula_sampler_options sp;
    specula_snapshot_options so;
    unsigned char *buf;
    size_t bound = 0, used = 0;
    int32_t ta[16], tb[16];
    int i;
    specula_sampler_options_init(&sp);
    sp.temperature = 1.0f;
    sp.seed = 3;
    REQUIRE_OK(specula_session_create(model, NULL, &sp, &a, &err), err);
    sp.seed = 4;
    REQUIRE_OK(specula_session_create(model, NULL, &sp, &b, &err), err);
    REQUIRE_OK(specula_session_append_text(a, "Once upon a time", 16, SPECULA_TOKENIZE_ADD_SPECIAL, &err), err);
    {
        specula_generate_options go;
        specula_generate_options_init(&go);
        go.max_tokens = 8;
        REQUIRE_OK(specula_session_generate(a, &go, NULL, NULL, NULL, &err), err);
    }
    specula_snapshot_options_init(&so);
    CHECK_STATUS(specula_session_save_buffer(a, &so, NULL, 0, &bound, &err), SPECULA_ERR_BUFFER_TOO_SMALL, err);
    CHECK(bound > 0);
    buf = (unsigned char *)malloc(bound);
    CHECK(buf != NULL);
    if (buf == NULL) return;
    REQUIRE_OK(specula_session_save_buffer(a, &so, buf, bound, &used, &err), err);
    CHECK(used > 0 && used <= bound);
    buf[used / 2] ^= 1;
    CHECK_STATUS(specula_session_load_buffer(b, buf, used, &err), SPECULA_ERR_FORMAT, err);
    CHECK(specula_session_n_tokens(b) == 0);
    buf[used / 2] ^= 1;
    REQUIRE_OK(specula_session_load_buffer(b, buf, used, &err), err);
    CHECK(specula_session_n_tokens(b) == specula_session_n_tokens(a));
    for (i = 0; i < 16; ++i) {
        specula_token_event ea, eb;
        memset(&ea, 0, sizeof ea);
        memset(&eb, 0, sizeof eb);
        ea.struct_size = sizeof ea;
        eb.struct_size = sizeof eb;
        REQUIRE_OK(specula_session_next(a, NULL, &ea, &err), err);
        REQUIRE_OK(specula_session_next(b, NULL, &eb, &err), err);
        ta[i] = ea.token;
        tb[i] = eb.token;
    }
    CHECK(memcmp(ta, tb, sizeof ta) == 0);
    free(buf);
    specula_session_destroy(a);
    specula_session_destroy(b);
}

int main(void) {
    specula_model *model = NULL;
    specula_error *err = NULL;
    specula_status st;

    test_versions_and_strings();

    st = specula_model_load(SPECULA_DEFAULT_MODEL, NULL, &model, &err);
    if (st == SPECULA_ERR_IO) {
        printf("SKIP: bundled model %s not readable: %s\n", SPECULA_DEFAULT_MODEL, specula_error_message(err));
        specula_error_destroy(err);
        return 77;
    }
    REQUIRE_OK(st, err);
    CHECK(strcmp(specula_model_arch(model), "llama") == 0);
    CHECK(specula_model_n_vocab(model) == 512);

    test_tokenize(model);
    test_generate(model);
    test_reference(model);
    test_speculative(model);
    test_snapshot(model);
    test_error_paths(model);
    test_log_levels();

    /* Every destroy accepts NULL. */
    specula_model_destroy(model);
    specula_model_destroy(NULL);
    specula_session_destroy(NULL);
    specula_error_destroy(NULL);

    if (g_failures != 0) {
        fprintf(stderr, "test_c_api: %d check(s) failed\n", g_failures);
        return 1;
    }
    printf("test_c_api: all checks passed\n");
    return 0;
}
