/* speculative: the same greedy generation with and without speculative decoding, which must give the same tokens
 * (lossless), with the drafter's statistics.
 *   speculative [model.gguf] [draft.gguf|ngram] [n_tokens]
 * The second argument names a LongSpec draft trained for the model, or "ngram" for n-gram drafting (no file). */
#include "common.h"

#include <string.h>

#define MAX_TOKENS 4096

typedef struct {
    int32_t ids[MAX_TOKENS];
    int n;
    int drafted;
} token_list;

static int32_t collect(const specula_token_event *ev, void *user_data) {
    token_list *list = (token_list *)user_data;
    if (ev->token != SPECULA_TOKEN_NULL && list->n < MAX_TOKENS) {
        list->ids[list->n++] = ev->token;
        list->drafted += ev->drafted;
    }
    return 1;
}

/* Greedy generation of n tokens after the prompt; with opts != NULL through speculative decoding. */
static void generate(specula_model *model, const specula_speculative_options *opts, int n, token_list *out,
                     specula_stats *stats) {
    const char *prompt = "Once upon a time, there was a little girl named Lily. She loved to";
    specula_sampler_options sampler;
    specula_generate_options gen;
    specula_session *session = NULL;
    specula_sampler_options_init(&sampler);
    sampler.temperature = 0.0f;
    CHECK_CALL(specula_session_create(model, NULL, &sampler, &session, &err));
    if (opts != NULL) CHECK_CALL(specula_session_set_speculative(session, opts, &err));
    CHECK_CALL(specula_session_append_text(session, prompt, strlen(prompt), SPECULA_TOKENIZE_ADD_SPECIAL, &err));
    specula_generate_options_init(&gen);
    gen.max_tokens = n;
    gen.stop_at_eog = 0;
    out->n = 0;
    out->drafted = 0;
    CHECK_CALL(specula_session_generate(session, &gen, collect, out, NULL, &err));
    stats->struct_size = sizeof *stats;
    CHECK_CALL(specula_session_stats(session, stats, &err));
    if (opts != NULL)
        printf("drafter: %s, last tree: %s\n", specula_session_drafter_name(session), specula_session_tree_shape(session));
    specula_session_destroy(session);
}

int main(int argc, char **argv) {
    const char *drafter = argc > 2 ? argv[2] : "ngram";
    const int n = argc > 3 ? atoi(argv[3]) : 200;
    static token_list plain, spec;
    specula_stats plain_stats, spec_stats;
    specula_speculative_options opts;
    specula_model *model = NULL;
    specula_draft *draft = NULL;
    int i;

    if (n <= 0 || n > MAX_TOKENS) {
        fprintf(stderr, "n_tokens must be in 1..%d\n", MAX_TOKENS);
        return 2;
    }
    CHECK_CALL(specula_model_load(example_model_path(argc, argv), NULL, &model, &err));
    specula_speculative_options_init(&opts);
    /* Every round drafts the given tree, so that the comparison exercises the drafter. By default (SPECULA_TREE_AUTO
     * unless widths are given) the session drafts only while it measures that drafting pays, which on a model as
     * small as the bundled one is rarely: the output is the same either way. */
    opts.tree_mode = SPECULA_TREE_FIXED;
    if (strcmp(drafter, "ngram") == 0) {
        opts.ngram = 1;
    } else {
        static const int32_t chain[] = {1, 1, 1, 1}; /* a chain of four drafted tokens per round */
        CHECK_CALL(specula_draft_load(drafter, model, &draft, &err));
        opts.draft = draft;
        opts.tree_widths = chain;
        opts.n_tree_levels = 4;
    }

    generate(model, NULL, n, &plain, &plain_stats);
    generate(model, &opts, n, &spec, &spec_stats);
    specula_draft_destroy(draft); /* the session held its own reference while it ran */

    if (plain.n != spec.n) {
        fprintf(stderr, "LOSSLESS VIOLATION: %d plain tokens, %d speculative\n", plain.n, spec.n);
        return 1;
    }
    for (i = 0; i < plain.n; ++i) {
        if (plain.ids[i] != spec.ids[i]) {
            fprintf(stderr, "LOSSLESS VIOLATION at token %d: %d plain, %d speculative\n", i, plain.ids[i], spec.ids[i]);
            return 1;
        }
    }
    printf("identical: %d tokens, %d of them drafted and accepted\n", spec.n, spec.drafted);
    printf("rounds %d, drafted %d, accepted %d, tau %.2f\n", spec_stats.n_spec_rounds, spec_stats.n_drafted,
           spec_stats.n_accepted, spec_stats.tau);
    printf("plain %.1f tokens/s, speculative %.1f tokens/s\n", plain_stats.decode_tokens_per_s,
           spec_stats.decode_tokens_per_s);
    specula_model_destroy(model);
    return spec.drafted > 0 ? 0 : 1; /* the drafter must have contributed, or the comparison proved little */
}
