/* cancel: generation that Ctrl-C (SIGINT) stops cleanly. specula_session_cancel() is async-signal-safe, so the
 * handler calls it directly; the generate call then returns SPECULA_ERR_CANCELLED at the next token, the tokens
 * produced so far stay in the session, and the session can go on.
 *   cancel [model.gguf] [--self-signal N]
 * With --self-signal N the program raises SIGINT itself after N tokens (what the test runs). */
#define _POSIX_C_SOURCE 200809L /* sigaction */
#include "common.h"

#include <signal.h>
#include <string.h>

static specula_session *volatile g_session = NULL; /* what the handler cancels; cleared before destroy */

static void on_sigint(int sig) {
    (void)sig;
    specula_session_cancel(g_session); /* accepts NULL */
}

typedef struct {
    int count;
    int raise_after;
} progress;

static int32_t on_token(const specula_token_event *ev, void *user_data) {
    progress *p = (progress *)user_data;
    fwrite(ev->text, 1, ev->text_len, stdout);
    fflush(stdout);
    if (ev->token != SPECULA_TOKEN_NULL && ++p->count == p->raise_after) raise(SIGINT);
    return 1;
}

int main(int argc, char **argv) {
    const char *prompt = "Once upon a time";
    progress p = {0, -1};
    specula_model *model = NULL;
    specula_session *session = NULL;
    specula_generate_options gen;
    specula_stop_reason stop = SPECULA_STOP_NONE;
    specula_status st;
    specula_error *err = NULL;
    struct sigaction sa;
    int i, n_before, n_after;

    for (i = 1; i < argc; ++i)
        if (strcmp(argv[i], "--self-signal") == 0 && i + 1 < argc) p.raise_after = atoi(argv[i + 1]);
    CHECK_CALL(specula_model_load(example_model_path(argc > 1 && argv[1][0] != '-' ? argc : 1, argv), NULL, &model, &err));
    CHECK_CALL(specula_session_create(model, NULL, NULL, &session, &err));
    CHECK_CALL(specula_session_append_text(session, prompt, strlen(prompt), SPECULA_TOKENIZE_ADD_SPECIAL, &err));

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    g_session = session;

    specula_generate_options_init(&gen);
    gen.max_tokens = -1; /* until the context is full, or Ctrl-C */
    gen.stop_at_eog = 0;
    fputs(prompt, stdout);
    st = specula_session_generate(session, &gen, on_token, &p, &stop, &err);
    fprintf(stderr, "\n[%s after %d tokens: %s]\n", specula_status_string(st), p.count, specula_stop_reason_string(stop));
    specula_error_destroy(err);
    err = NULL;
    if (st != SPECULA_ERR_CANCELLED) {
        g_session = NULL;
        specula_session_destroy(session);
        specula_model_destroy(model);
        return st == SPECULA_OK && p.raise_after < 0 ? 0 : 1;
    }

    /* The session is intact: its tokens are kept and it generates on from where it stopped. */
    n_before = specula_session_n_tokens(session);
    gen.max_tokens = 8;
    CHECK_CALL(specula_session_generate(session, &gen, NULL, NULL, &stop, &err));
    n_after = specula_session_n_tokens(session);
    fprintf(stderr, "[resumed: %d -> %d tokens in the context]\n", n_before, n_after);

    g_session = NULL; /* the handler must not reach a destroyed session */
    signal(SIGINT, SIG_DFL);
    specula_session_destroy(session);
    specula_model_destroy(model);
    return n_after > n_before ? 0 : 1;
}
