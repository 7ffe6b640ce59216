/*
 * sizes.c - the C compiler's view of specula.h, for the C# test `struct_layout`.
 *
 * run_tests.sh compiles this against the installed header (cc -I$PREFIX/include) and the test compares every line with
 * the C# declarations in src/Native.cs:
 *   struct <name> <sizeof>
 *   field <struct> <field> <offsetof> <sizeof field>
 *   enum <CONSTANT> <value>
 * A struct of specula.h missing here is caught too: the test also scans the header for "typedef struct ... {".
 */
#include <specula/specula_experimental.h>

#include <stddef.h>
#include <stdio.h>

#define STRUCT(s) printf("struct %s %zu\n", #s, sizeof(s))
#define FIELD(s, f) printf("field %s %s %zu %zu\n", #s, #f, offsetof(s, f), sizeof(((s *)0)->f))
#define ENUM(e) printf("enum %s %ld\n", #e, (long)(e))

int main(void) {
    STRUCT(specula_model_options);
    FIELD(specula_model_options, struct_size);
    FIELD(specula_model_options, use_mmap);
    FIELD(specula_model_options, progress);
    FIELD(specula_model_options, progress_user_data);
    FIELD(specula_model_options, vocab_only);

    STRUCT(specula_tensor_info);
    FIELD(specula_tensor_info, struct_size);
    FIELD(specula_tensor_info, name);
    FIELD(specula_tensor_info, type);
    FIELD(specula_tensor_info, n_dims);
    FIELD(specula_tensor_info, dims);
    FIELD(specula_tensor_info, offset);
    FIELD(specula_tensor_info, n_bytes);

    STRUCT(specula_chat_message);
    FIELD(specula_chat_message, role);
    FIELD(specula_chat_message, content);

    STRUCT(specula_chat_options);
    FIELD(specula_chat_options, struct_size);
    FIELD(specula_chat_options, add_assistant);
    FIELD(specula_chat_options, enable_thinking);
    FIELD(specula_chat_options, jinja);

    STRUCT(specula_device_info);
    FIELD(specula_device_info, struct_size);
    FIELD(specula_device_info, backend);
    FIELD(specula_device_info, index);
    FIELD(specula_device_info, name);
    FIELD(specula_device_info, total_memory);
    FIELD(specula_device_info, free_memory);
    FIELD(specula_device_info, compute_capability);
    FIELD(specula_device_info, multiprocessors);
    FIELD(specula_device_info, peak_bandwidth_gbs);

    STRUCT(specula_session_options);
    FIELD(specula_session_options, struct_size);
    FIELD(specula_session_options, n_ctx);
    FIELD(specula_session_options, n_threads);
    FIELD(specula_session_options, n_batch);
    FIELD(specula_session_options, backend);
    FIELD(specula_session_options, device);
    FIELD(specula_session_options, allow_fallback);
    FIELD(specula_session_options, kv_type);
    FIELD(specula_session_options, context_policy);
    FIELD(specula_session_options, n_keep);
    FIELD(specula_session_options, n_discard);

    STRUCT(specula_sampler_options);
    FIELD(specula_sampler_options, struct_size);
    FIELD(specula_sampler_options, temperature);
    FIELD(specula_sampler_options, top_k);
    FIELD(specula_sampler_options, top_p);
    FIELD(specula_sampler_options, min_p);
    FIELD(specula_sampler_options, repeat_penalty);
    FIELD(specula_sampler_options, presence_penalty);
    FIELD(specula_sampler_options, frequency_penalty);
    FIELD(specula_sampler_options, penalty_last_n);
    FIELD(specula_sampler_options, seed);
    FIELD(specula_sampler_options, context_penalty);
    FIELD(specula_sampler_options, context_penalty_window);
    FIELD(specula_sampler_options, grammar);
    FIELD(specula_sampler_options, grammar_root);
    FIELD(specula_sampler_options, draw);

    STRUCT(specula_generate_options);
    FIELD(specula_generate_options, struct_size);
    FIELD(specula_generate_options, max_tokens);
    FIELD(specula_generate_options, stop_at_eog);
    FIELD(specula_generate_options, stop_strings);
    FIELD(specula_generate_options, n_stop_strings);
    FIELD(specula_generate_options, top_logits);
    FIELD(specula_generate_options, top_probs);

    STRUCT(specula_stats);
    FIELD(specula_stats, struct_size);
    FIELD(specula_stats, n_prompt_tokens);
    FIELD(specula_stats, n_generated);
    FIELD(specula_stats, n_ctx_used);
    FIELD(specula_stats, load_ms);
    FIELD(specula_stats, prompt_ms);
    FIELD(specula_stats, decode_ms);
    FIELD(specula_stats, ttft_ms);
    FIELD(specula_stats, prompt_tokens_per_s);
    FIELD(specula_stats, decode_tokens_per_s);
    FIELD(specula_stats, n_spec_rounds);
    FIELD(specula_stats, n_drafted);
    FIELD(specula_stats, n_accepted);
    FIELD(specula_stats, tau);
    FIELD(specula_stats, draft_ms);
    FIELD(specula_stats, verify_ms);
    FIELD(specula_stats, accepted_at_depth);
    FIELD(specula_stats, drafter_bytes);
    FIELD(specula_stats, n_restored_tokens);
    FIELD(specula_stats, n_context_shifts);
    FIELD(specula_stats, n_discarded_tokens);
    FIELD(specula_stats, n_grammar_drafted);
    FIELD(specula_stats, n_grammar_accepted);
    FIELD(specula_stats, n_grammar_pruned);
    FIELD(specula_stats, n_ctx_evaluated);

    STRUCT(specula_token_event);
    FIELD(specula_token_event, struct_size);
    FIELD(specula_token_event, token);
    FIELD(specula_token_event, text);
    FIELD(specula_token_event, text_len);
    FIELD(specula_token_event, n_top);
    FIELD(specula_token_event, top_ids);
    FIELD(specula_token_event, top_logits);
    FIELD(specula_token_event, drafted);
    FIELD(specula_token_event, stop);
    FIELD(specula_token_event, stats);
    FIELD(specula_token_event, logsumexp);
    FIELD(specula_token_event, token_logit);
    FIELD(specula_token_event, n_top_probs);
    FIELD(specula_token_event, top_prob_ids);
    FIELD(specula_token_event, top_probs);
    FIELD(specula_token_event, token_prob);

    STRUCT(specula_speculative_options);
    FIELD(specula_speculative_options, struct_size);
    FIELD(specula_speculative_options, draft);
    FIELD(specula_speculative_options, draft_model);
    FIELD(specula_speculative_options, ngram);
    FIELD(specula_speculative_options, tree_widths);
    FIELD(specula_speculative_options, n_tree_levels);
    FIELD(specula_speculative_options, ngram_nodes);
    FIELD(specula_speculative_options, ngram_lookup_min);
    FIELD(specula_speculative_options, ngram_lookup_max);
    FIELD(specula_speculative_options, ngram_max_chain);
    FIELD(specula_speculative_options, ngram_table_n);
    FIELD(specula_speculative_options, ngram_table_topk);
    FIELD(specula_speculative_options, ngram_lag);
    FIELD(specula_speculative_options, tree_mode);
    FIELD(specula_speculative_options, sampled_drafts);
    FIELD(specula_speculative_options, grammar);

    STRUCT(specula_snapshot_options);
    FIELD(specula_snapshot_options, struct_size);
    FIELD(specula_snapshot_options, scope);
    FIELD(specula_snapshot_options, compression_level);

    STRUCT(specula_prompt_cache_options);
    FIELD(specula_prompt_cache_options, struct_size);
    FIELD(specula_prompt_cache_options, max_bytes);
    FIELD(specula_prompt_cache_options, compression_level);

    STRUCT(specula_prompt_cache_stats);
    FIELD(specula_prompt_cache_stats, struct_size);
    FIELD(specula_prompt_cache_stats, n_entries);
    FIELD(specula_prompt_cache_stats, bytes);
    FIELD(specula_prompt_cache_stats, hits);
    FIELD(specula_prompt_cache_stats, misses);
    FIELD(specula_prompt_cache_stats, stores);
    FIELD(specula_prompt_cache_stats, evictions);
    FIELD(specula_prompt_cache_stats, restored_tokens);

    STRUCT(specula_batch_options);
    FIELD(specula_batch_options, struct_size);
    FIELD(specula_batch_options, n_threads);

    STRUCT(specula_batch_stats);
    FIELD(specula_batch_stats, struct_size);
    FIELD(specula_batch_stats, passes);
    FIELD(specula_batch_stats, requests);
    FIELD(specula_batch_stats, rows);
    FIELD(specula_batch_stats, widest);

    STRUCT(specula_synthetic_options);
    FIELD(specula_synthetic_options, struct_size);
    FIELD(specula_synthetic_options, weight_type);
    FIELD(specula_synthetic_options, seed);
    FIELD(specula_synthetic_options, n_layer);
    FIELD(specula_synthetic_options, progress);
    FIELD(specula_synthetic_options, progress_user_data);

    /* Enum sizes: C enums passed by value or stored in structs must be int-sized for the C# enums (int). */
    printf("enumsize specula_status %zu\n", sizeof(specula_status));
    printf("enumsize specula_stop_reason %zu\n", sizeof(specula_stop_reason));

    ENUM(SPECULA_ABI_VERSION);
    ENUM(SPECULA_TOKEN_NULL);

    ENUM(SPECULA_OK);
    ENUM(SPECULA_ERR_INVALID_ARGUMENT);
    ENUM(SPECULA_ERR_IO);
    ENUM(SPECULA_ERR_FORMAT);
    ENUM(SPECULA_ERR_UNSUPPORTED);
    ENUM(SPECULA_ERR_OUT_OF_MEMORY);
    ENUM(SPECULA_ERR_CANCELLED);
    ENUM(SPECULA_ERR_CONTEXT_FULL);
    ENUM(SPECULA_ERR_INVALID_TOKEN);
    ENUM(SPECULA_ERR_INCOMPATIBLE);
    ENUM(SPECULA_ERR_BUFFER_TOO_SMALL);
    ENUM(SPECULA_ERR_BACKEND);
    ENUM(SPECULA_ERR_INTERNAL);

    ENUM(SPECULA_LOG_DEBUG);
    ENUM(SPECULA_LOG_INFO);
    ENUM(SPECULA_LOG_WARN);
    ENUM(SPECULA_LOG_ERROR);

    ENUM(SPECULA_FIM_PRE);
    ENUM(SPECULA_FIM_SUF);
    ENUM(SPECULA_FIM_MID);
    ENUM(SPECULA_FIM_PAD);
    ENUM(SPECULA_FIM_REP);
    ENUM(SPECULA_FIM_SEP);

    ENUM(SPECULA_TOKENIZE_ADD_SPECIAL);
    ENUM(SPECULA_TOKENIZE_PARSE_SPECIAL);

    ENUM(SPECULA_TOKEN_KIND_INVALID);
    ENUM(SPECULA_TOKEN_KIND_NORMAL);
    ENUM(SPECULA_TOKEN_KIND_UNKNOWN);
    ENUM(SPECULA_TOKEN_KIND_CONTROL);
    ENUM(SPECULA_TOKEN_KIND_USER_DEFINED);
    ENUM(SPECULA_TOKEN_KIND_UNUSED);
    ENUM(SPECULA_TOKEN_KIND_BYTE);

    ENUM(SPECULA_BACKEND_AUTO);
    ENUM(SPECULA_BACKEND_CPU);
    ENUM(SPECULA_BACKEND_CUDA);
    ENUM(SPECULA_BACKEND_VULKAN);
    ENUM(SPECULA_KV_DEFAULT);
    ENUM(SPECULA_KV_F32);
    ENUM(SPECULA_KV_F16);
    ENUM(SPECULA_KV_Q8_0);
    ENUM(SPECULA_CONTEXT_STOP);
    ENUM(SPECULA_CONTEXT_SHIFT);
    ENUM(SPECULA_TREE_DEFAULT);
    ENUM(SPECULA_TREE_AUTO);
    ENUM(SPECULA_TREE_FIXED);
    ENUM(SPECULA_SAMPLED_DRAFTS_COUPLED);
    ENUM(SPECULA_SAMPLED_DRAFTS_LEVIATHAN);
    ENUM(SPECULA_DRAW_RACE);
    ENUM(SPECULA_DRAW_LLAMA_CPP);

    ENUM(SPECULA_STOP_NONE);
    ENUM(SPECULA_STOP_MAX_TOKENS);
    ENUM(SPECULA_STOP_EOS);
    ENUM(SPECULA_STOP_STOP_STRING);
    ENUM(SPECULA_STOP_CANCELLED);
    ENUM(SPECULA_STOP_CONTEXT_FULL);
    ENUM(SPECULA_STOP_CALLBACK);

    ENUM(SPECULA_SNAPSHOT_FULL);
    ENUM(SPECULA_SNAPSHOT_CONTEXT);
    return 0;
}
