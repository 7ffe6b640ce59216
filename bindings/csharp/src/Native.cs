// Native.cs - P/Invoke declarations for the whole C ABI of specula.h (ABI version 1, library 0.8).
//
// Every function of specula.h has exactly one [DllImport] here, named as in C (the test `abi_coverage` checks the
// list against the installed header, and `struct_layout` checks every struct's size and field offsets against the C
// compiler). Nothing in this file is public except the enums: the safe API (Model, Session, ...) is built on top.
//
// Conventions:
//   - Library handles are SafeHandles (ModelHandle, SessionHandle, DraftHandle, PromptCacheHandle, ErrorHandle).
//     The marshaller adds a reference to the SafeHandle for the duration of each call, so a handle can never be
//     destroyed (by Dispose on another thread, or by the finalizer) while a call that uses it is running.
//     The *_destroy functions take IntPtr: only the SafeHandles' ReleaseHandle calls them.
//   - `const char *` inputs are NUL-terminated UTF-8 byte arrays (Utf8.Z), never `string`: Mono marshals string as
//     UTF-8 but .NET on Windows as ANSI, and the library wants UTF-8 everywhere.
//   - `const char *` outputs are IntPtr, decoded with Utf8.FromNative (borrowed: never freed here).
//   - size_t is UIntPtr; option/output structs are passed as pointers so that NULL ("defaults") stays expressible.
//   - All structs are blittable (no bool, no string, no managed arrays; fixed buffers for C arrays), so the
//     pointers passed are the structs themselves, and struct_size means exactly what the C side expects.
//   - Callbacks are cdecl delegates. The safe API passes only delegates stored in static fields (they are never
//     collected) and carries per-call state in a GCHandle through user_data; see Callbacks.cs.
using System;
using System.Runtime.InteropServices;

namespace Specula
{
    /// <summary>specula_status: the result of every fallible call.</summary>
    public enum Status
    {
        Ok = 0,
        InvalidArgument = 1,
        Io = 2,
        Format = 3,
        Unsupported = 4,
        OutOfMemory = 5,
        Cancelled = 6,
        ContextFull = 7,
        InvalidToken = 8,
        Incompatible = 9,
        BufferTooSmall = 10,
        Backend = 11,
        Internal = 12,
    }

    /// <summary>specula_log_level.</summary>
    public enum LogLevel
    {
        Debug = 0,
        Info = 1,
        Warn = 2,
        Error = 3,
    }

    /// <summary>specula_fim_token: the fill-in-the-middle tokens a model may have.</summary>
    public enum FimToken
    {
        Pre = 0,
        Suf = 1,
        Mid = 2,
        Pad = 3,
        Rep = 4,
        Sep = 5,
    }

    /// <summary>SPECULA_TOKENIZE_* flags.</summary>
    [Flags]
    public enum TokenizeFlags
    {
        None = 0,
        /// <summary>Add BOS/EOS as the model's metadata asks (in a session: BOS only when the context is empty).</summary>
        AddSpecial = 1,
        /// <summary>Recognise control tokens such as "&lt;s&gt;" written in the text.</summary>
        ParseSpecial = 2,
    }

    /// <summary>specula_token_kind.</summary>
    public enum TokenKind
    {
        Invalid = 0,
        Normal = 1,
        Unknown = 2,
        Control = 3,
        UserDefined = 4,
        Unused = 5,
        Byte = 6,
    }

    /// <summary>specula_backend: where a session runs its target model.</summary>
    public enum Backend
    {
        /// <summary>The first GPU backend built in whose usable device has room (CUDA, then Vulkan), else the CPU
        /// (the default).</summary>
        Auto = 0,
        /// <summary>The CPU reference backend.</summary>
        Cpu = 1,
        /// <summary>An NVIDIA GPU (compute capability 8.0 or newer).</summary>
        Cuda = 2,
        /// <summary>A GPU through the Vulkan loader: AMD, Intel, integrated, or NVIDIA (since 0.9; a library built
        /// with -DSPECULA_VULKAN=ON; Library.BackendUnavailableReason says why not).</summary>
        Vulkan = 3,
    }

    /// <summary>specula_kv_type: the element type of the target's key/value cache (since 0.8).</summary>
    public enum KvType
    {
        /// <summary>F16, as llama.cpp.</summary>
        Default = 0,
        F32 = 1,
        F16 = 2,
        /// <summary>ggml's 32-value blocks; the model's n_embd_kv must be a multiple of 32.</summary>
        Q8_0 = 3,
    }

    /// <summary>specula_context_policy: what generation does when the context is full (since 0.9).</summary>
    public enum ContextPolicy
    {
        /// <summary>The run stops with StopReason.ContextFull (the default).</summary>
        Stop = 0,
        /// <summary>Drop NDiscard tokens after the first NKeep and go on (attention sinks plus a recent window).</summary>
        Shift = 1,
    }

    /// <summary>specula_tree_mode: how each speculative round's tree is chosen (since 0.8).</summary>
    public enum TreeMode
    {
        /// <summary>Auto, unless TreeWidths are given: then Fixed.</summary>
        Default = 0,
        /// <summary>Each round the tree the session expects to be fastest, plain decoding included.</summary>
        Auto = 1,
        /// <summary>Every round drafts TreeWidths (or [4, 16, 16, 16, 16]) and NgramNodes.</summary>
        Fixed = 2,
    }

    /// <summary>specula_sampled_drafts: how chains drafted by sampling (temperature &gt; 0) are drawn and verified (since 0.12). Both are exact.</summary>
    public enum SampledDrafts
    {
        /// <summary>The draft draws each position with the target's random key: for a seed, the text is plain sampling's whatever drafts (the default).</summary>
        Coupled = 0,
        /// <summary>Leviathan et al.'s accept/reject rule: up to ~14% more tokens per round with weak drafts; the text for a seed depends on the drafts.</summary>
        Leviathan = 1,
    }

    /// <summary>specula_draw_rule: how a sampled token is drawn for a seed (since 0.16). Either way a seed fixes the text and speculation gives plain sampling's tokens.</summary>
    public enum DrawRule
    {
        /// <summary>An exponential race keyed per output position: sampled drafts agree with the target as often as a coupling can (the default).</summary>
        Race = 0,
        /// <summary>llama.cpp's dist sampler (std::mt19937 seeded with the seed's low 32 bits, std::discrete_distribution over the candidates in logit order): llama.cpp's text for the same model, prompt, seed and settings.</summary>
        LlamaCpp = 1,
    }

    /// <summary>specula_stop_reason: why generation stopped (None while it goes on).</summary>
    public enum StopReason
    {
        None = 0,
        MaxTokens = 1,
        /// <summary>An end-of-generation token was sampled (it is neither added nor emitted).</summary>
        Eos = 2,
        /// <summary>A stop string appeared; text from it on is not emitted.</summary>
        StopString = 3,
        Cancelled = 4,
        ContextFull = 5,
        /// <summary>The token callback returned false.</summary>
        Callback = 6,
    }

    /// <summary>specula_snapshot_scope.</summary>
    public enum SnapshotScope
    {
        /// <summary>Everything: an exact resume (the default).</summary>
        Full = 0,
        /// <summary>The context only: tokens, keys/values, last logits (what a prompt cache keeps).</summary>
        Context = 1,
    }

    internal static unsafe class NativeMethods
    {
        internal const string Lib = "specula";  // mapped to libspecula.so.1 by Specula.dll.config (Mono dllmap)

        /// <summary>SPECULA_ABI_VERSION of the specula.h this binding mirrors.</summary>
        internal const uint AbiVersion = 1;
        internal const int TokenNull = -1;

        // ---- structs (field names and order exactly as in specula.h) -------------------------------------------

        [StructLayout(LayoutKind.Sequential)]
        internal struct specula_model_options
        {
            public uint struct_size;
            public int use_mmap;
            public IntPtr progress;            // specula_progress_fn
            public IntPtr progress_user_data;
            public int vocab_only;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct specula_tensor_info
        {
            public uint struct_size;
            public IntPtr name;                // borrowed, valid while the model lives
            public IntPtr type;                // borrowed, static
            public int n_dims;
            public fixed long dims[4];
            public ulong offset;
            public ulong n_bytes;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct specula_chat_message
        {
            public IntPtr role;                // UTF-8, NUL-terminated
            public IntPtr content;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct specula_chat_options
        {
            public uint struct_size;
            public int add_assistant;
            public int enable_thinking;        // -1 the template's default, 1 think, 0 its empty thinking block
            public int jinja;                  // 1: the template's own Jinja (since 0.18)
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct specula_device_info
        {
            public uint struct_size;
            public int backend;
            public int index;
            public fixed byte name[256];
            public ulong total_memory;
            public ulong free_memory;
            public int compute_capability;
            public int multiprocessors;
            public double peak_bandwidth_gbs;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct specula_session_options
        {
            public uint struct_size;
            public int n_ctx;
            public int n_threads;
            public int n_batch;
            public int backend;
            public int device;
            public int allow_fallback;
            public int kv_type;
            public int context_policy;
            public int n_keep;
            public int n_discard;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct specula_sampler_options
        {
            public uint struct_size;
            public float temperature;
            public int top_k;
            public float top_p;
            public float min_p;
            public float repeat_penalty;
            public float presence_penalty;
            public float frequency_penalty;
            public int penalty_last_n;
            public ulong seed;
            public float context_penalty;
            public int context_penalty_window;
            public IntPtr grammar;             // since 0.13: const char *, borrowed for the call (SamplerOptions.Grammar)
            public IntPtr grammar_root;        // since 0.13
            public int draw;                   // since 0.16: specula_draw_rule
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct specula_generate_options
        {
            public uint struct_size;
            public int max_tokens;
            public int stop_at_eog;
            public IntPtr stop_strings;        // const char *const *, borrowed for the call
            public int n_stop_strings;
            public int top_logits;
            public int top_probs;              // since 0.11
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct specula_stats
        {
            public uint struct_size;
            public int n_prompt_tokens;
            public int n_generated;
            public int n_ctx_used;
            public double load_ms;
            public double prompt_ms;
            public double decode_ms;
            public double ttft_ms;
            public double prompt_tokens_per_s;
            public double decode_tokens_per_s;
            public int n_spec_rounds;
            public int n_drafted;
            public int n_accepted;
            public double tau;
            public double draft_ms;
            public double verify_ms;
            public fixed int accepted_at_depth[16];
            public UIntPtr drafter_bytes;
            public int n_restored_tokens;
            public int n_context_shifts;
            public long n_discarded_tokens;
            public int n_grammar_drafted;      // since 0.13
            public int n_grammar_accepted;
            public int n_grammar_pruned;
            public int n_ctx_evaluated;        // since 0.16
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct specula_token_event
        {
            public uint struct_size;
            public int token;
            public IntPtr text;                // borrowed: during the callback / until the next call on the session
            public UIntPtr text_len;
            public int n_top;
            public IntPtr top_ids;             // const int32_t *
            public IntPtr top_logits;          // const float *
            public int drafted;
            public StopReason stop;            // a C enum: int-sized
            public IntPtr stats;               // const specula_stats *
            // since 0.11
            public float logsumexp;
            public float token_logit;
            public int n_top_probs;
            public IntPtr top_prob_ids;        // const int32_t *
            public IntPtr top_probs;           // const float *
            public float token_prob;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct specula_speculative_options
        {
            public uint struct_size;
            public IntPtr draft;               // const specula_draft *, borrowed for the call
            public IntPtr draft_model;         // specula_model *, borrowed for the call
            public int ngram;
            public IntPtr tree_widths;         // const int32_t *, borrowed for the call
            public int n_tree_levels;
            public int ngram_nodes;
            public int ngram_lookup_min;
            public int ngram_lookup_max;
            public int ngram_max_chain;
            public int ngram_table_n;
            public int ngram_table_topk;
            public int ngram_lag;
            public int tree_mode;              // since 0.8
            public int sampled_drafts;         // since 0.12
            public int grammar;                // since 0.14
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct specula_snapshot_options
        {
            public uint struct_size;
            public int scope;
            public int compression_level;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct specula_prompt_cache_options
        {
            public uint struct_size;
            public ulong max_bytes;
            public int compression_level;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct specula_batch_options
        {
            public uint struct_size;
            public int n_threads;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct specula_batch_stats
        {
            public uint struct_size;
            public ulong passes;
            public ulong requests;
            public ulong rows;
            public uint widest;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct specula_prompt_cache_stats
        {
            public uint struct_size;
            public long n_entries;
            public ulong bytes;
            public long hits;
            public long misses;
            public long stores;
            public long evictions;
            public long restored_tokens;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct specula_synthetic_options
        {
            public uint struct_size;
            public IntPtr weight_type;         // const char *
            public ulong seed;
            public int n_layer;
            public IntPtr progress;            // specula_progress_fn
            public IntPtr progress_user_data;
        }

        // ---- callback types --------------------------------------------------------------------------------------

        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        internal delegate void specula_log_fn(LogLevel level, IntPtr message, IntPtr user_data);

        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        internal delegate int specula_progress_fn(float progress, IntPtr user_data);

        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        internal delegate int specula_token_fn(specula_token_event* ev, IntPtr user_data);

        // ---- versions --------------------------------------------------------------------------------------------

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern uint specula_version();
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr specula_version_string();
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern uint specula_abi_version();

        // ---- status codes and error objects ----------------------------------------------------------------------

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr specula_status_string(Status status);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status specula_error_status(ErrorHandle err);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr specula_error_message(ErrorHandle err);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void specula_error_destroy(IntPtr err);

        // ---- logging ---------------------------------------------------------------------------------------------

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void specula_log_set(specula_log_fn fn, LogLevel min_level, IntPtr user_data);

        // ---- models ----------------------------------------------------------------------------------------------

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void specula_model_options_init_sized(specula_model_options* opts, UIntPtr struct_size);
        // The header's specula_model_options_init macro: the defaults written into this struct's bytes only (since 0.17).
        internal static void specula_model_options_init(specula_model_options* opts) => specula_model_options_init_sized(opts, (UIntPtr)sizeof(specula_model_options));
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status specula_model_load(byte[] path, specula_model_options* opts,
                                                         out ModelHandle model, out ErrorHandle err);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern ModelHandle specula_model_retain(ModelHandle model);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void specula_model_destroy(IntPtr model);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr specula_model_arch(ModelHandle model);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr specula_model_name(ModelHandle model);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int specula_model_n_vocab(ModelHandle model);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int specula_model_n_ctx_train(ModelHandle model);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int specula_model_n_layer(ModelHandle model);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int specula_model_n_embd(ModelHandle model);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int specula_model_n_head(ModelHandle model);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int specula_model_n_head_kv(ModelHandle model);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int specula_model_n_ff(ModelHandle model);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern ulong specula_model_n_params(ModelHandle model);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern ulong specula_model_file_size(ModelHandle model);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr specula_model_weight_type(ModelHandle model);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int specula_model_tensor_count(ModelHandle model);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status specula_model_tensor_info(ModelHandle model, int index, specula_tensor_info* info,
                                                                out ErrorHandle err);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int specula_model_meta_count(ModelHandle model);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr specula_model_meta_key(ModelHandle model, int index);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status specula_model_meta_value(ModelHandle model, int index, int max_array,
                                                               [Out] byte[] buf, UIntPtr buf_size, out UIntPtr len,
                                                               out ErrorHandle err);

        // ---- vocabulary and tokenization -------------------------------------------------------------------------

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int specula_model_token_bos(ModelHandle model);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int specula_model_token_eos(ModelHandle model);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int specula_model_token_eot(ModelHandle model);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int specula_model_add_bos(ModelHandle model);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int specula_model_add_eos(ModelHandle model);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int specula_model_token_fim(ModelHandle model, FimToken which);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int specula_model_token_is_eog(ModelHandle model, int token);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status specula_model_tokenize(ModelHandle model, byte[] text, UIntPtr len, int flags,
                                                             [Out] int[] tokens, UIntPtr capacity, out UIntPtr n_tokens,
                                                             out ErrorHandle err);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status specula_model_detokenize(ModelHandle model, int[] tokens, UIntPtr n_tokens,
                                                               int render_special, [Out] byte[] buf, UIntPtr buf_size,
                                                               out UIntPtr len, out ErrorHandle err);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status specula_model_token_to_piece(ModelHandle model, int token, int render_special,
                                                                   [Out] byte[] buf, UIntPtr buf_size, out UIntPtr len,
                                                                   out ErrorHandle err);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr specula_model_token_text(ModelHandle model, int token);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern TokenKind specula_model_token_kind(ModelHandle model, int token);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr specula_model_tokenizer(ModelHandle model);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr specula_model_pre_tokenizer(ModelHandle model);

        // ---- chat templates --------------------------------------------------------------------------------------

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status specula_chat_apply_template(ModelHandle model, byte[] tmpl,
                                                                  specula_chat_message[] messages, UIntPtr n_messages,
                                                                  int add_assistant, [Out] byte[] buf, UIntPtr buf_size,
                                                                  out UIntPtr len, out ErrorHandle err);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void specula_chat_options_init_sized(specula_chat_options* opts, UIntPtr struct_size);
        // The header's specula_chat_options_init macro: the defaults written into this struct's bytes only (since 0.17).
        internal static void specula_chat_options_init(specula_chat_options* opts) => specula_chat_options_init_sized(opts, (UIntPtr)sizeof(specula_chat_options));
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status specula_chat_format(ModelHandle model, byte[] tmpl, specula_chat_message[] messages,
                                                          UIntPtr n_messages, specula_chat_options* opts, [Out] byte[] buf,
                                                          UIntPtr buf_size, out UIntPtr len, out ErrorHandle err);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status specula_json_schema_to_grammar(byte[] schema, UIntPtr len, [Out] byte[] buf, UIntPtr buf_size,
                                                                     out UIntPtr grammar_len, out ErrorHandle err);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr specula_chat_template_detect(ModelHandle model, byte[] tmpl);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr specula_chat_template_builtin(int index);

        // ---- devices ---------------------------------------------------------------------------------------------

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int specula_device_count(int backend);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status specula_device_get_info(int backend, int index, specula_device_info* info,
                                                              out ErrorHandle err);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status specula_backend_check(int backend, out ErrorHandle err);

        // ---- sessions --------------------------------------------------------------------------------------------

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void specula_session_options_init_sized(specula_session_options* opts, UIntPtr struct_size);
        // The header's specula_session_options_init macro: the defaults written into this struct's bytes only (since 0.17).
        internal static void specula_session_options_init(specula_session_options* opts) => specula_session_options_init_sized(opts, (UIntPtr)sizeof(specula_session_options));
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void specula_sampler_options_init_sized(specula_sampler_options* opts, UIntPtr struct_size);
        // The header's specula_sampler_options_init macro: the defaults written into this struct's bytes only (since 0.17).
        internal static void specula_sampler_options_init(specula_sampler_options* opts) => specula_sampler_options_init_sized(opts, (UIntPtr)sizeof(specula_sampler_options));
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status specula_session_create(ModelHandle model, specula_session_options* opts,
                                                             specula_sampler_options* sampler,
                                                             out SessionHandle session, out ErrorHandle err);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void specula_session_destroy(IntPtr session);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status specula_session_set_sampler(SessionHandle session, specula_sampler_options* sampler,
                                                                  out ErrorHandle err);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status specula_session_append_text(SessionHandle session, byte[] text, UIntPtr len,
                                                                  int flags, out ErrorHandle err);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status specula_session_append_tokens(SessionHandle session, int[] tokens, UIntPtr n_tokens,
                                                                    out ErrorHandle err);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status specula_session_rewind(SessionHandle session, int n_tokens, out ErrorHandle err);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int specula_session_n_ctx(SessionHandle session);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr specula_session_backend(SessionHandle session);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr specula_session_backend_note(SessionHandle session);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int specula_session_n_tokens(SessionHandle session);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status specula_session_tokens(SessionHandle session, [Out] int[] tokens, UIntPtr capacity,
                                                             out UIntPtr n_tokens, out ErrorHandle err);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr specula_stop_reason_string(StopReason reason);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void specula_generate_options_init_sized(specula_generate_options* opts, UIntPtr struct_size);
        // The header's specula_generate_options_init macro: the defaults written into this struct's bytes only (since 0.17).
        internal static void specula_generate_options_init(specula_generate_options* opts) => specula_generate_options_init_sized(opts, (UIntPtr)sizeof(specula_generate_options));
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status specula_session_generate(SessionHandle session, specula_generate_options* opts,
                                                               specula_token_fn on_token, IntPtr user_data,
                                                               out StopReason stop_reason, out ErrorHandle err);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status specula_session_evaluate(SessionHandle session, out ErrorHandle err);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status specula_session_next(SessionHandle session, specula_generate_options* opts,
                                                           specula_token_event* ev, out ErrorHandle err);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void specula_session_cancel(SessionHandle session);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status specula_session_stats(SessionHandle session, specula_stats* stats,
                                                            out ErrorHandle err);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr specula_session_logits(SessionHandle session);  // const float *

        // ---- speculative decoding --------------------------------------------------------------------------------

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status specula_draft_load(byte[] path, ModelHandle target, out DraftHandle draft,
                                                         out ErrorHandle err);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern DraftHandle specula_draft_retain(DraftHandle draft);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void specula_draft_destroy(IntPtr draft);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int specula_draft_window(DraftHandle draft);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern ulong specula_draft_n_params(DraftHandle draft);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status specula_draft_write_random(ModelHandle target, byte[] path, ulong seed, int window,
                                                                 out ErrorHandle err);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void specula_speculative_options_init_sized(specula_speculative_options* opts, UIntPtr struct_size);
        // The header's specula_speculative_options_init macro: the defaults written into this struct's bytes only (since 0.17).
        internal static void specula_speculative_options_init(specula_speculative_options* opts) => specula_speculative_options_init_sized(opts, (UIntPtr)sizeof(specula_speculative_options));
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status specula_session_set_speculative(SessionHandle session,
                                                                      specula_speculative_options* opts,
                                                                      out ErrorHandle err);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr specula_session_drafter_name(SessionHandle session);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr specula_session_tree_shape(SessionHandle session);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int specula_session_accepted_at_depth(SessionHandle session, [Out] int[] counts, int capacity);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status specula_session_draft_logits(SessionHandle session, [Out] float[] logits,
                                                                   UIntPtr capacity, out ErrorHandle err);

        // ---- snapshots and prompt caches -------------------------------------------------------------------------

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void specula_snapshot_options_init_sized(specula_snapshot_options* opts, UIntPtr struct_size);
        // The header's specula_snapshot_options_init macro: the defaults written into this struct's bytes only (since 0.17).
        internal static void specula_snapshot_options_init(specula_snapshot_options* opts) => specula_snapshot_options_init_sized(opts, (UIntPtr)sizeof(specula_snapshot_options));
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status specula_session_save_file(SessionHandle session, byte[] path,
                                                                specula_snapshot_options* opts, out ErrorHandle err);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status specula_session_load_file(SessionHandle session, byte[] path, out ErrorHandle err);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status specula_session_save_buffer(SessionHandle session, specula_snapshot_options* opts,
                                                                  [Out] byte[] buf, UIntPtr capacity, out UIntPtr size,
                                                                  out ErrorHandle err);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status specula_session_load_buffer(SessionHandle session, byte[] buf, UIntPtr size,
                                                                  out ErrorHandle err);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status specula_session_fork(SessionHandle src, SessionHandle dst,
                                                           specula_snapshot_options* opts, out ErrorHandle err);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status specula_model_fingerprint(ModelHandle model, [Out] byte[] buf, UIntPtr buf_size,
                                                                out UIntPtr len, out ErrorHandle err);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void specula_prompt_cache_options_init_sized(specula_prompt_cache_options* opts, UIntPtr struct_size);
        // The header's specula_prompt_cache_options_init macro: the defaults written into this struct's bytes only (since 0.17).
        internal static void specula_prompt_cache_options_init(specula_prompt_cache_options* opts) => specula_prompt_cache_options_init_sized(opts, (UIntPtr)sizeof(specula_prompt_cache_options));
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status specula_prompt_cache_open(byte[] dir, specula_prompt_cache_options* opts,
                                                                out PromptCacheHandle cache, out ErrorHandle err);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void specula_prompt_cache_destroy(IntPtr cache);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status specula_prompt_cache_restore(PromptCacheHandle cache, SessionHandle session,
                                                                   int[] tokens, UIntPtr n_tokens, out UIntPtr n_restored,
                                                                   out ErrorHandle err);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status specula_prompt_cache_store(PromptCacheHandle cache, SessionHandle session,
                                                                 out ErrorHandle err);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status specula_prompt_cache_get_stats(PromptCacheHandle cache,
                                                                     specula_prompt_cache_stats* stats,
                                                                     out ErrorHandle err);

        // ---- batch groups (since 0.15) -----------------------------------------------------------------------------
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void specula_batch_options_init_sized(specula_batch_options* opts, UIntPtr struct_size);
        // The header's specula_batch_options_init macro: the defaults written into this struct's bytes only (since 0.17).
        internal static void specula_batch_options_init(specula_batch_options* opts) => specula_batch_options_init_sized(opts, (UIntPtr)sizeof(specula_batch_options));
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status specula_batch_create(ModelHandle model, specula_batch_options* opts, out BatchHandle batch,
                                                           out ErrorHandle err);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void specula_batch_free(IntPtr batch);
        // batch: a BatchHandle's value (Batch.Join holds a reference during the call), or IntPtr.Zero to leave.
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status specula_session_join_batch(SessionHandle session, IntPtr batch, out ErrorHandle err);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status specula_batch_get_stats(BatchHandle batch, specula_batch_stats* stats, out ErrorHandle err);

        // ---- synthetic models ------------------------------------------------------------------------------------

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr specula_synthetic_shape(int index);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void specula_synthetic_options_init_sized(specula_synthetic_options* opts, UIntPtr struct_size);
        // The header's specula_synthetic_options_init macro: the defaults written into this struct's bytes only (since 0.17).
        internal static void specula_synthetic_options_init(specula_synthetic_options* opts) => specula_synthetic_options_init_sized(opts, (UIntPtr)sizeof(specula_synthetic_options));
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status specula_synthetic_model_write(byte[] shape, byte[] vocab_path, byte[] path,
                                                                    specula_synthetic_options* opts, out ErrorHandle err);
    }
}
