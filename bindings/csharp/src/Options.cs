// Options.cs - the options classes. Each starts from the library's own defaults (the matching *_init function), so
// a default-constructed object means what NULL means in C, and fields this binding does not know yet keep their
// defaults. They are plain mutable objects: build one, set what you need, pass it; a call copies what it needs.
using System;
using System.Collections.Generic;

namespace Specula
{
    /// <summary>Options of <see cref="Model.Load"/> (specula_model_options).</summary>
    public sealed class ModelOptions
    {
        /// <summary>Map the file read-only (the default) instead of reading it into memory.</summary>
        public bool UseMmap { get; set; }

        /// <summary>Load only the tokenizer and metadata; sessions refuse such a model.</summary>
        public bool VocabOnly { get; set; }

        /// <summary>
        /// Called on the loading thread with progress in [0, 1]; return false to cancel the load (SpeculaException
        /// with Status.Cancelled). If it throws, the load is cancelled and the exception is rethrown by Load.
        /// </summary>
        public Func<float, bool> Progress { get; set; }

        public unsafe ModelOptions()
        {
            NativeMethods.specula_model_options c;
            NativeMethods.specula_model_options_init(&c);
            UseMmap = c.use_mmap != 0;
            VocabOnly = c.vocab_only != 0;
        }
    }

    /// <summary>Options of a <see cref="Session"/> (specula_session_options).</summary>
    public sealed class SessionOptions
    {
        internal NativeMethods.specula_session_options Native;

        public unsafe SessionOptions()
        {
            fixed (NativeMethods.specula_session_options* p = &Native) NativeMethods.specula_session_options_init(p);
        }

        /// <summary>Context length in tokens; 0 = min(n_ctx_train, 4096).</summary>
        public int NCtx { get { return Native.n_ctx; } set { Native.n_ctx = value; } }
        /// <summary>Compute threads; 0 = number of cores (at most 8).</summary>
        public int NThreads { get { return Native.n_threads; } set { Native.n_threads = value; } }
        /// <summary>Prompt tokens evaluated per forward pass; 0 = 64.</summary>
        public int NBatch { get { return Native.n_batch; } set { Native.n_batch = value; } }
        /// <summary>Where the target model runs; default Backend.Auto.</summary>
        public Backend Backend { get { return (Backend)Native.backend; } set { Native.backend = (int)value; } }
        /// <summary>Device index for GPU backends (see Library.DeviceCount).</summary>
        public int Device { get { return Native.device; } set { Native.device = value; } }
        /// <summary>
        /// True (default): run on the CPU when the backend cannot be used, with the reason in Session.BackendNote;
        /// false: fail with Status.Unsupported or Status.OutOfMemory instead.
        /// </summary>
        public bool AllowFallback { get { return Native.allow_fallback != 0; } set { Native.allow_fallback = value ? 1 : 0; } }
        /// <summary>Element type of the KV cache; default KvType.Default (F16). CUDA and Vulkan keep F16 only.</summary>
        public KvType KvType { get { return (KvType)Native.kv_type; } set { Native.kv_type = (int)value; } }
        /// <summary>What generation does when the context is full; default ContextPolicy.Stop.</summary>
        public ContextPolicy ContextPolicy { get { return (ContextPolicy)Native.context_policy; } set { Native.context_policy = (int)value; } }
        /// <summary>With ContextPolicy.Shift: leading tokens always kept (attention sinks, a system prompt); default 4.</summary>
        public int NKeep { get { return Native.n_keep; } set { Native.n_keep = value; } }
        /// <summary>With ContextPolicy.Shift: tokens dropped per shift; 0 (default) = half of those after NKeep.</summary>
        public int NDiscard { get { return Native.n_discard; } set { Native.n_discard = value; } }
    }

    /// <summary>Sampling settings (specula_sampler_options). Temperature &lt;= 0 is greedy.</summary>
    public sealed class SamplerOptions
    {
        internal NativeMethods.specula_sampler_options Native;

        public unsafe SamplerOptions()
        {
            fixed (NativeMethods.specula_sampler_options* p = &Native) NativeMethods.specula_sampler_options_init(p);
        }

        /// <summary>Greedy decoding: argmax, ties to the lowest id.</summary>
        public static SamplerOptions Greedy()
        {
            var s = new SamplerOptions();
            s.Temperature = 0.0f;
            return s;
        }

        /// <summary>&lt;= 0: greedy. Default 0.8.</summary>
        public float Temperature { get { return Native.temperature; } set { Native.temperature = value; } }
        /// <summary>&lt;= 0: off. Default 40.</summary>
        public int TopK { get { return Native.top_k; } set { Native.top_k = value; } }
        /// <summary>&gt;= 1: off. Default 0.95.</summary>
        public float TopP { get { return Native.top_p; } set { Native.top_p = value; } }
        /// <summary>&lt;= 0: off. Default 0.05.</summary>
        public float MinP { get { return Native.min_p; } set { Native.min_p = value; } }
        /// <summary>1: off (default).</summary>
        public float RepeatPenalty { get { return Native.repeat_penalty; } set { Native.repeat_penalty = value; } }
        /// <summary>0: off (default).</summary>
        public float PresencePenalty { get { return Native.presence_penalty; } set { Native.presence_penalty = value; } }
        /// <summary>0: off (default).</summary>
        public float FrequencyPenalty { get { return Native.frequency_penalty; } set { Native.frequency_penalty = value; } }
        /// <summary>Window of recent tokens the penalties look at; default 64; -1 = whole context.</summary>
        public int PenaltyLastN { get { return Native.penalty_last_n; } set { Native.penalty_last_n = value; } }
        /// <summary>RNG seed: same seed and inputs, same output.</summary>
        public ulong Seed { get { return Native.seed; } set { Native.seed = value; } }
        /// <summary>TokenSwift's contextual penalty theta; 1 = off (default); must be &gt; 0.</summary>
        public float ContextPenalty { get { return Native.context_penalty; } set { Native.context_penalty = value; } }
        /// <summary>Tokens of history the contextual penalty looks at; default 1024; -1 = all; 0 = off.</summary>
        public int ContextPenaltyWindow { get { return Native.context_penalty_window; } set { Native.context_penalty_window = value; } }
        /// <summary>
        /// A GBNF grammar (llama.cpp's format, docs/grammars.md) the generated text must follow; null or "" (default):
        /// none. Tokens it cannot continue with are never drawn; an end-of-generation token only where it is complete.
        /// One that does not parse makes the session constructor or SetSampler throw InvalidArgument with the parser's
        /// message. Since 0.13.
        /// </summary>
        public string Grammar { get; set; }
        /// <summary>The grammar's start rule; null (default): "root".</summary>
        public string GrammarRoot { get; set; }
        /// <summary>How a sampled token is drawn for the seed; default DrawRule.Race. Since 0.16.</summary>
        public DrawRule Draw { get { return (DrawRule)Native.draw; } set { Native.draw = (int)value; } }
    }

    /// <summary>Options of one generation (specula_generate_options).</summary>
    public sealed class GenerateOptions
    {
        public unsafe GenerateOptions()
        {
            NativeMethods.specula_generate_options c;
            NativeMethods.specula_generate_options_init(&c);
            MaxTokens = c.max_tokens;
            StopAtEog = c.stop_at_eog != 0;
            TopLogits = c.top_logits;
            TopProbs = c.top_probs;
            StopStrings = new List<string>();
        }

        public GenerateOptions(int maxTokens) : this() { MaxTokens = maxTokens; }

        /// <summary>
        /// Tokens to generate; &lt; 0: until the context is full. Default 256. For the callback form of
        /// Session.Generate it counts per call; for the token stream (specula_session_next) it counts since the
        /// last append or rewind.
        /// </summary>
        public int MaxTokens { get; set; }
        /// <summary>Stop when an end-of-generation token is sampled (default true).</summary>
        public bool StopAtEog { get; set; }
        /// <summary>Generation stops before the first occurrence of any of these (their text is not emitted).</summary>
        public IList<string> StopStrings { get; set; }
        /// <summary>Report the K largest raw logits with each token, and their log-sum-exp (0 = none, at most 64).</summary>
        public int TopLogits { get; set; }
        /// <summary>Report the K most likely tokens after the sampler chain, with their probabilities (0 = none, at most 64).</summary>
        public int TopProbs { get; set; }

        /// <summary>The C struct; stop_strings points into strings (which the caller keeps alive and disposes).</summary>
        internal NativeMethods.specula_generate_options ToNative(out NativeBuffer strings)
        {
            NativeMethods.specula_generate_options c;
            unsafe { NativeMethods.specula_generate_options_init(&c); }
            c.max_tokens = MaxTokens;
            c.stop_at_eog = StopAtEog ? 1 : 0;
            c.top_logits = TopLogits;
            c.top_probs = TopProbs;
            strings = null;
            if (StopStrings != null && StopStrings.Count > 0)
            {
                strings = NativeBuffer.StringArray(StopStrings);
                c.stop_strings = strings.Pointer;
                c.n_stop_strings = StopStrings.Count;
            }
            return c;
        }
    }

    /// <summary>
    /// What <see cref="Session.SetSpeculative"/> attaches (specula_speculative_options). The session keeps its own
    /// references to the draft and the draft model: they may be disposed right after the call. With no Draft, no
    /// DraftModel, Ngram and Grammar off, it detaches the drafters. The output never changes (exact verification), only speed.
    /// </summary>
    public sealed class SpeculativeOptions
    {
        public unsafe SpeculativeOptions()
        {
            NativeMethods.specula_speculative_options c;
            NativeMethods.specula_speculative_options_init(&c);
            Ngram = c.ngram != 0;
            Grammar = c.grammar != 0;
            NgramNodes = c.ngram_nodes;
            NgramLookupMin = c.ngram_lookup_min;
            NgramLookupMax = c.ngram_lookup_max;
            NgramMaxChain = c.ngram_max_chain;
            NgramTableN = c.ngram_table_n;
            NgramTableTopK = c.ngram_table_topk;
            NgramLag = c.ngram_lag;
            TreeMode = (TreeMode)c.tree_mode;
            SampledDrafts = (SampledDrafts)c.sampled_drafts;
        }

        /// <summary>A LongSpec draft loaded for the session's model (the same Model handle or one retained from it).</summary>
        public Draft Draft { get; set; }
        /// <summary>Or an independent draft model with the target's vocabulary (at most one of Draft and DraftModel).</summary>
        public Model DraftModel { get; set; }
        /// <summary>N-gram drafting (prompt lookup + token reuse), alone or merged into the tree of the above.</summary>
        public bool Ngram { get; set; }
        /// <summary>The sampler's grammar drafts alone (since 0.14): with no other drafter, each round drafts the text the
        /// grammar forces, as the model spelled it before. With other drafters the forced text joins their trees anyway.</summary>
        public bool Grammar { get; set; }
        /// <summary>Nodes per tree level (beam widths), 1..32 levels of 1..256; null or empty: [4, 16, 16, 16, 16].</summary>
        public int[] TreeWidths { get; set; }
        /// <summary>Tree nodes reserved for n-gram candidates (alone: the whole tree); 0..1024; default 16.</summary>
        public int NgramNodes { get; set; }
        /// <summary>Prompt lookup: shortest context suffix matched; default 1.</summary>
        public int NgramLookupMin { get; set; }
        /// <summary>Prompt lookup: longest suffix matched; NgramLookupMin..64; default 4.</summary>
        public int NgramLookupMax { get; set; }
        /// <summary>Longest prompt-lookup chain proposed; default 8.</summary>
        public int NgramMaxChain { get; set; }
        /// <summary>N-gram size of the token-reuse table, 2..64; default 4.</summary>
        public int NgramTableN { get; set; }
        /// <summary>N-grams proposed per root from the table; 0 = no table; default 20.</summary>
        public int NgramTableTopK { get; set; }
        /// <summary>The table ignores the newest NgramLag tokens; default 0.</summary>
        public int NgramLag { get; set; }
        /// <summary>How each round's tree is chosen: by default Auto (the fastest tree as measured, plain decoding
        /// included; TreeWidths and NgramNodes then bound it) unless TreeWidths are given. Outputs are lossless
        /// either way, and with the default SampledDrafts a seed gives the same text whatever the tree.</summary>
        public TreeMode TreeMode { get; set; }
        /// <summary>How chains drafted by sampling are drawn and verified: Coupled by default (a seed fixes the
        /// text, as plain sampling's), or Leviathan (exact in distribution, more accepted tokens with weak drafts).</summary>
        public SampledDrafts SampledDrafts { get; set; }

        /// <summary>A chain of length drafted tokens per round instead of a tree (TreeWidths = [1, 1, ...]).</summary>
        public static int[] Chain(int length)
        {
            var widths = new int[length];
            for (int i = 0; i < length; ++i) widths[i] = 1;
            return widths;
        }
    }

    /// <summary>Options of snapshot saves and forks (specula_snapshot_options).</summary>
    public sealed class SnapshotOptions
    {
        internal NativeMethods.specula_snapshot_options Native;

        public unsafe SnapshotOptions()
        {
            fixed (NativeMethods.specula_snapshot_options* p = &Native) NativeMethods.specula_snapshot_options_init(p);
        }

        public SnapshotOptions(SnapshotScope scope) : this() { Scope = scope; }

        /// <summary>Full (default: exact resume) or Context (tokens, keys/values, last logits).</summary>
        public SnapshotScope Scope { get { return (SnapshotScope)Native.scope; } set { Native.scope = (int)value; } }
        /// <summary>zstd level: 1 (default) .. 19; negative: faster; 0: uncompressed.</summary>
        public int CompressionLevel { get { return Native.compression_level; } set { Native.compression_level = value; } }
    }

    /// <summary>Options of <see cref="PromptCache"/> (specula_prompt_cache_options).</summary>
    public sealed class PromptCacheOptions
    {
        internal NativeMethods.specula_prompt_cache_options Native;

        public unsafe PromptCacheOptions()
        {
            fixed (NativeMethods.specula_prompt_cache_options* p = &Native) NativeMethods.specula_prompt_cache_options_init(p);
        }

        /// <summary>Size limit of the directory's entries; default 1 GiB; 0 = no limit.</summary>
        public ulong MaxBytes { get { return Native.max_bytes; } set { Native.max_bytes = value; } }
        /// <summary>zstd level of new entries; default 1.</summary>
        public int CompressionLevel { get { return Native.compression_level; } set { Native.compression_level = value; } }
    }

    /// <summary>Options of <see cref="Library.WriteSyntheticModel"/> (specula_synthetic_options).</summary>
    public sealed class SyntheticOptions
    {
        public unsafe SyntheticOptions()
        {
            NativeMethods.specula_synthetic_options c;
            NativeMethods.specula_synthetic_options_init(&c);
            WeightType = Utf8.FromNativeOrNull(c.weight_type);
            Seed = c.seed;
            NLayer = c.n_layer;
        }

        /// <summary>"f32", "f16", "q8_0", "q4_0", "q4_k_m" (any case); null = "q8_0".</summary>
        public string WeightType { get; set; }
        /// <summary>Same seed, shape and type: the same file. Default 1.</summary>
        public ulong Seed { get; set; }
        /// <summary>&gt; 0: this many layers instead of the shape's.</summary>
        public int NLayer { get; set; }
        /// <summary>Fraction of the file written; return false to cancel. An exception cancels and is rethrown.</summary>
        public Func<float, bool> Progress { get; set; }
    }
}
