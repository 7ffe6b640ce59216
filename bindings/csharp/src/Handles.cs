// Handles.cs - one SafeHandle per kind of library object.
//
// A SafeHandle owns exactly one library reference (or, for an error, the error object) and releases it once: on
// Dispose, or from the finalizer if the owner forgot. The P/Invoke marshaller adds a reference to the SafeHandle
// around every call it is passed to, so the release always waits for calls in flight (e.g. a Session disposed on
// one thread while another thread is inside specula_session_cancel) and a call after the release throws
// ObjectDisposedException instead of touching freed memory.
//
// Release order does not matter: the library reference counts models and drafts, and sessions, drafts and
// prompt-cache operations hold their own references to what they use (specula.h, "Ownership").
using System;
using System.Runtime.InteropServices;

namespace Specula
{
    /// <summary>Base of the library's handles: NULL is invalid.</summary>
    public abstract class SpeculaHandle : SafeHandle
    {
        protected SpeculaHandle() : base(IntPtr.Zero, true) { }

        public override bool IsInvalid { get { return handle == IntPtr.Zero; } }
    }

    /// <summary>One reference to a specula_model (specula_model_destroy on release). Thread-safe.</summary>
    public sealed class ModelHandle : SpeculaHandle
    {
        public ModelHandle() { }

        /// <summary>A NULL specula_model*, for the calls that accept one (e.g. a chat template given as text).</summary>
        internal static ModelHandle Null() { return new ModelHandle(); }

        protected override bool ReleaseHandle()
        {
            NativeMethods.specula_model_destroy(handle);
            return true;
        }
    }

    /// <summary>A specula_session (specula_session_destroy on release). Single-threaded except cancel.</summary>
    public sealed class SessionHandle : SpeculaHandle
    {
        public SessionHandle() { }

        protected override bool ReleaseHandle()
        {
            // Runs only when no call holds a reference (see the file comment), which is exactly what
            // specula_session_destroy requires: no other call on the session, cancel included, during or after it.
            NativeMethods.specula_session_destroy(handle);
            return true;
        }
    }

    /// <summary>One reference to a specula_draft (specula_draft_destroy on release). Thread-safe.</summary>
    public sealed class DraftHandle : SpeculaHandle
    {
        public DraftHandle() { }

        protected override bool ReleaseHandle()
        {
            NativeMethods.specula_draft_destroy(handle);
            return true;
        }
    }

    /// <summary>A specula_prompt_cache (specula_prompt_cache_destroy on release; the directory stays).</summary>
    public sealed class PromptCacheHandle : SpeculaHandle
    {
        public PromptCacheHandle() { }

        protected override bool ReleaseHandle()
        {
            NativeMethods.specula_prompt_cache_destroy(handle);
            return true;
        }
    }

    public sealed class BatchHandle : SpeculaHandle
    {
        public BatchHandle() { }

        protected override bool ReleaseHandle()
        {
            NativeMethods.specula_batch_free(handle);
            return true;
        }
    }

    /// <summary>A specula_error (specula_error_destroy on release). NULL (invalid) after a successful call.</summary>
    public sealed class ErrorHandle : SpeculaHandle
    {
        public ErrorHandle() { }

        protected override bool ReleaseHandle()
        {
            NativeMethods.specula_error_destroy(handle);
            return true;
        }
    }

    /// <summary>
    /// Native memory (Marshal.AllocHGlobal) that a call borrows: UTF-8 strings and arrays of pointers to them, for
    /// the C structs that point to text (stop strings, chat messages, a weight type). Freed on Dispose or by the
    /// finalizer, so an abandoned token stream does not leak it.
    /// </summary>
    internal sealed class NativeBuffer : SafeHandle
    {
        internal NativeBuffer(int size) : base(IntPtr.Zero, true)
        {
            SetHandle(Marshal.AllocHGlobal(Math.Max(size, 1)));
        }

        public override bool IsInvalid { get { return handle == IntPtr.Zero; } }

        internal IntPtr Pointer { get { return handle; } }

        protected override bool ReleaseHandle()
        {
            Marshal.FreeHGlobal(handle);
            return true;
        }

        /// <summary>
        /// strings as a C array of NUL-terminated UTF-8 strings (const char *const *) in one block: the pointer
        /// table first, then the bytes. Pointer is the table; an empty list gives a valid block and count 0.
        /// </summary>
        internal static NativeBuffer StringArray(System.Collections.Generic.IList<string> strings)
        {
            int n = strings == null ? 0 : strings.Count;
            var encoded = new byte[n][];
            int tableBytes = n * IntPtr.Size, total = tableBytes;
            for (int i = 0; i < n; ++i)
            {
                if (strings[i] == null) throw new ArgumentNullException("strings", "a string of the list is null");
                encoded[i] = Utf8.Z(strings[i]);
                total += encoded[i].Length;
            }
            var buffer = new NativeBuffer(total);
            int offset = tableBytes;
            for (int i = 0; i < n; ++i)
            {
                IntPtr at = IntPtr.Add(buffer.handle, offset);
                Marshal.Copy(encoded[i], 0, at, encoded[i].Length);
                Marshal.WriteIntPtr(buffer.handle, i * IntPtr.Size, at);
                offset += encoded[i].Length;
            }
            return buffer;
        }
    }
}
