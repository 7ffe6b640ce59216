// Draft.cs - a LongSpec draft (specula_draft) and the prompt cache (specula_prompt_cache).
using System;

namespace Specula
{
    /// <summary>
    /// A LongSpec draft loaded for one target model (specula_draft): immutable, reference counted, thread-safe. It
    /// keeps the target's weights alive, and can be attached only to sessions of the same loaded model (the same
    /// Model, or one from Model.AddReference). Sessions it is attached to keep their own reference, so it may be
    /// disposed right after <see cref="Session.SetSpeculative"/>.
    /// </summary>
    public sealed class Draft : IDisposable
    {
        private readonly DraftHandle handle;

        private Draft(DraftHandle handle) { this.handle = handle; }

        public DraftHandle Handle { get { return handle; } }

        /// <summary>
        /// Loads a draft file and checks it against target. Throws SpeculaException: Io, Format, Unsupported,
        /// Incompatible (made for another target; the message names the first difference), InvalidArgument (a
        /// vocab-only target), OutOfMemory.
        /// </summary>
        public static Draft Load(string path, Model target)
        {
            if (path == null) throw new ArgumentNullException("path");
            if (target == null) throw new ArgumentNullException("target");
            DraftHandle draft;
            ErrorHandle err;
            Status st = NativeMethods.specula_draft_load(Utf8.Z(path), target.Handle, out draft, out err);
            if (st != Status.Ok)
            {
                if (draft != null) draft.Dispose();
                throw SpeculaException.FromError(st, err);
            }
            SpeculaException.Discard(err);
            return new Draft(draft);
        }

        /// <summary>
        /// Writes an untrained (random-weight) draft for target to path: a trainer's starting point, and a draft
        /// for tests (it drafts poorly but never changes the output). window 0 = 512. Same seed, same file.
        /// </summary>
        public static void WriteRandom(Model target, string path, ulong seed = 1, int window = 0)
        {
            if (target == null) throw new ArgumentNullException("target");
            if (path == null) throw new ArgumentNullException("path");
            ErrorHandle err;
            Status st = NativeMethods.specula_draft_write_random(target.Handle, Utf8.Z(path), seed, window, out err);
            SpeculaException.Check(st, err);
        }

        /// <summary>A second reference to the same draft (specula_draft_retain).</summary>
        public Draft AddReference() { return new Draft(NativeMethods.specula_draft_retain(handle)); }

        /// <summary>Self-attention window in tokens.</summary>
        public int Window { get { return NativeMethods.specula_draft_window(handle); } }

        /// <summary>Parameters stored in the draft file (shared embeddings and LM head not counted).</summary>
        public ulong NParams { get { return NativeMethods.specula_draft_n_params(handle); } }

        public void Dispose() { handle.Dispose(); }

        public bool IsDisposed { get { return handle.IsClosed; } }
    }

    /// <summary>Counters of a <see cref="PromptCache"/> (specula_prompt_cache_stats).</summary>
    public sealed class PromptCacheStats
    {
        /// <summary>Entries in the directory (all models).</summary>
        public long NEntries { get; internal set; }
        /// <summary>Their total size in bytes.</summary>
        public ulong Bytes { get; internal set; }
        /// <summary>Restore calls of this handle that found a prefix.</summary>
        public long Hits { get; internal set; }
        /// <summary>Restore calls of this handle that found none.</summary>
        public long Misses { get; internal set; }
        /// <summary>Entries this handle wrote.</summary>
        public long Stores { get; internal set; }
        /// <summary>Entries this handle removed (size limit, or dominated by a newer entry).</summary>
        public long Evictions { get; internal set; }
        /// <summary>Tokens this handle restored instead of evaluating them.</summary>
        public long RestoredTokens { get; internal set; }
    }

    /// <summary>
    /// A directory of context snapshots shared by any number of processes (specula_prompt_cache). A new prompt
    /// restores the cached context sharing its longest prefix and evaluates only the rest. One PromptCache may be
    /// used from several threads (calls are serialised); the Session passed to a call must not be in use by another
    /// thread during it.
    /// </summary>
    public sealed class PromptCache : IDisposable
    {
        private readonly PromptCacheHandle handle;

        /// <summary>Opens (creating it if needed) a cache directory. Throws SpeculaException (InvalidArgument, Io).</summary>
        public unsafe PromptCache(string directory, PromptCacheOptions options = null)
        {
            if (directory == null) throw new ArgumentNullException("directory");
            Library.EnsureAbi();
            NativeMethods.specula_prompt_cache_options c = (options ?? new PromptCacheOptions()).Native;
            PromptCacheHandle cache;
            ErrorHandle err;
            Status st = NativeMethods.specula_prompt_cache_open(Utf8.Z(directory), &c, out cache, out err);
            if (st != Status.Ok)
            {
                if (cache != null) cache.Dispose();
                throw SpeculaException.FromError(st, err);
            }
            SpeculaException.Discard(err);
            handle = cache;
        }

        public PromptCacheHandle Handle { get { return handle; } }

        /// <summary>
        /// Restores the cached context sharing the longest prefix with tokens into session and returns its length;
        /// append tokens[restored..] yourself. 0 is a miss (the session is unchanged).
        /// </summary>
        public int Restore(Session session, int[] tokens)
        {
            if (session == null) throw new ArgumentNullException("session");
            if (tokens == null) throw new ArgumentNullException("tokens");
            UIntPtr restored;
            ErrorHandle err;
            Status st = NativeMethods.specula_prompt_cache_restore(handle, session.Handle, tokens, (UIntPtr)tokens.Length,
                                                                   out restored, out err);
            SpeculaException.Check(st, err);
            return (int)restored.ToUInt64();
        }

        /// <summary>Stores the session's evaluated context as an entry, then enforces the size limit.</summary>
        public void Store(Session session)
        {
            if (session == null) throw new ArgumentNullException("session");
            ErrorHandle err;
            Status st = NativeMethods.specula_prompt_cache_store(handle, session.Handle, out err);
            SpeculaException.Check(st, err);
        }

        public unsafe PromptCacheStats GetStats()
        {
            NativeMethods.specula_prompt_cache_stats c = default(NativeMethods.specula_prompt_cache_stats);
            c.struct_size = (uint)sizeof(NativeMethods.specula_prompt_cache_stats);
            ErrorHandle err;
            Status st = NativeMethods.specula_prompt_cache_get_stats(handle, &c, out err);
            SpeculaException.Check(st, err);
            return new PromptCacheStats
            {
                NEntries = c.n_entries, Bytes = c.bytes, Hits = c.hits, Misses = c.misses, Stores = c.stores,
                Evictions = c.evictions, RestoredTokens = c.restored_tokens,
            };
        }

        public void Dispose() { handle.Dispose(); }
    }
}
