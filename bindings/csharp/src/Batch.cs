// Batch.cs - a batch group (specula_batch, since 0.15): continuous batching of sessions' forward passes.
using System;

namespace Specula
{
    /// <summary>Counters of a batch group (specula_batch_stats).</summary>
    public sealed class BatchStats
    {
        /// <summary>Combined passes run.</summary>
        public ulong Passes { get; internal set; }
        /// <summary>Sessions' forward passes they held.</summary>
        public ulong Requests { get; internal set; }
        /// <summary>Rows (tokens, tree nodes) they computed.</summary>
        public ulong Rows { get; internal set; }
        /// <summary>The most sessions one pass held.</summary>
        public uint Widest { get; internal set; }
    }

    /// <summary>
    /// A batch group (specula_batch): sessions of one model that join it compute their forward passes together, each
    /// weight read once per step for all of them (as llama-server's slots); their tokens do not change. Used by its
    /// sessions' threads at once. Sessions that joined keep the group alive, so it may be disposed before them.
    /// </summary>
    public sealed class Batch : IDisposable
    {
        private readonly BatchHandle handle;

        /// <summary>A group for sessions of model; nThreads computes its passes (0: the cores, at most 8).</summary>
        public unsafe Batch(Model model, int nThreads = 0)
        {
            if (model == null) throw new ArgumentNullException("model");
            Library.EnsureAbi();
            NativeMethods.specula_batch_options c;
            NativeMethods.specula_batch_options_init(&c);
            c.n_threads = nThreads;
            BatchHandle b;
            ErrorHandle err;
            Status st = NativeMethods.specula_batch_create(model.Handle, &c, out b, out err);
            if (st != Status.Ok)
            {
                if (b != null) b.Dispose();
                throw SpeculaException.FromError(st, err);
            }
            SpeculaException.Discard(err);
            handle = b;
        }

        public BatchHandle Handle { get { return handle; } }

        /// <summary>The session's passes join this group's (not while it generates on another thread). Throws
        /// SpeculaException: Incompatible (another model), Unsupported (a backend that does not batch).</summary>
        public void Join(Session session)
        {
            if (session == null) throw new ArgumentNullException("session");
            bool added = false;
            try
            {
                handle.DangerousAddRef(ref added);
                ErrorHandle err;
                Status st = NativeMethods.specula_session_join_batch(session.Handle, handle.DangerousGetHandle(), out err);
                SpeculaException.Check(st, err);
            }
            finally
            {
                if (added) handle.DangerousRelease();
            }
        }

        /// <summary>The session computes alone again.</summary>
        public static void Leave(Session session)
        {
            if (session == null) throw new ArgumentNullException("session");
            ErrorHandle err;
            Status st = NativeMethods.specula_session_join_batch(session.Handle, IntPtr.Zero, out err);
            SpeculaException.Check(st, err);
        }

        public unsafe BatchStats GetStats()
        {
            NativeMethods.specula_batch_stats c = default(NativeMethods.specula_batch_stats);
            c.struct_size = (uint)sizeof(NativeMethods.specula_batch_stats);
            ErrorHandle err;
            Status st = NativeMethods.specula_batch_get_stats(handle, &c, out err);
            SpeculaException.Check(st, err);
            return new BatchStats { Passes = c.passes, Requests = c.requests, Rows = c.rows, Widest = c.widest };
        }

        public void Dispose() { handle.Dispose(); }
    }
}
