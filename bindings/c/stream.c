/* stream: load a model, append a prompt and print the tokens as they are generated (greedy).
 *   stream [model.gguf] [prompt] [n_tokens]                                                                  */
#include "common.h"

#include <string.h>

static int32_t on_token(const specula_token_event *ev, void *user_data) {
    int *count = (int *)user_data;
    fwrite(ev->text, 1, ev->text_len, stdout);
    fflush(stdout);
    if (ev->token != SPECULA_TOKEN_NULL) ++*count;
    return 1; /* 0 would stop the generation here */
}

int main(int argc, char **argv) {
    const char *prompt = argc > 2 ? argv[2] : "Once upon a time";
    const int n_tokens = argc > 3 ? atoi(argv[3]) : 48;
    specula_model *model = NULL;
    specula_session *session = NULL;
    specula_sampler_options sampler;
    specula_generate_options gen;
    specula_stop_reason stop = SPECULA_STOP_NONE;
    specula_stats stats;
    int count = 0;

    CHECK_CALL(specula_model_load(example_model_path(argc, argv), NULL, &model, &err));
    specula_sampler_options_init(&sampler);
    sampler.temperature = 0.0f; /* greedy: the same text on every run */
    CHECK_CALL(specula_session_create(model, NULL, &sampler, &session, &err));
    CHECK_CALL(specula_session_append_text(session, prompt, strlen(prompt), SPECULA_TOKENIZE_ADD_SPECIAL, &err));

    specula_generate_options_init(&gen);
    gen.max_tokens = n_tokens;
    fputs(prompt, stdout);
    CHECK_CALL(specula_session_generate(session, &gen, on_token, &count, &stop, &err));

    stats.struct_size = sizeof stats;
    CHECK_CALL(specula_session_stats(session, &stats, &err));
    fprintf(stderr, "\n%d tokens (%s), %.1f tokens/s on %s\n", count, specula_stop_reason_string(stop),
            stats.decode_tokens_per_s, specula_session_backend(session));
    specula_session_destroy(session);
    specula_model_destroy(model);
    return count > 0 ? 0 : 1;
}
