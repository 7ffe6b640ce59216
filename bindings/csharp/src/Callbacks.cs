// Callbacks.cs - how managed code is called back from the library without a GC crash.
//
// The library calls plain C function pointers. For a managed delegate, the runtime makes a native thunk that lives
// only as long as the delegate object: if the GC collects the delegate while the library still holds the pointer,
// the next callback jumps into freed memory. This binding therefore never hands the library a delegate that could
// be collected:
//   - The three trampolines below (progress, token, log) are stored in static readonly fields: they are created
//     once and stay reachable for the life of the program, so their thunks never go away.
//   - What a callback needs for one call (the user's Func, an exception it threw) lives in a small state object
//     passed through the C `user_data` pointer as a GCHandle. The GCHandle keeps the state alive (the library's
//     copy of the pointer is invisible to the GC) and is freed in a finally block once the call has returned; the
//     library never calls back after the call that took the callback returns (specula.h: callbacks run on the
//     thread that made the call, during it).
//   - The log callback is global: the library may still deliver a message to the callback set before the last
//     specula_log_set (specula.h), so the one static log trampoline is the only pointer ever set and the current
//     handler is read from a static field at each message.
// Exceptions must not unwind through the library: every trampoline catches everything. A progress or token
// callback's exception stops the call (returns 0) and is rethrown, with its stack trace, once the library returned.
// The test `gc_stress` forces full collections from inside these callbacks while streaming.
using System;
using System.Runtime.ExceptionServices;
using System.Runtime.InteropServices;

namespace Specula
{
    internal sealed class ProgressState
    {
        internal Func<float, bool> Fn;
        internal ExceptionDispatchInfo Error;
    }

    internal sealed class TokenState
    {
        internal Func<TokenEvent, bool> Fn;
        internal ExceptionDispatchInfo Error;
    }

    internal static unsafe class Callbacks
    {
        // Never collected (static readonly): see the file comment. Keep the field order: each pointer is made from
        // the delegate initialised just before it.
        internal static readonly NativeMethods.specula_progress_fn Progress = OnProgress;
        internal static readonly IntPtr ProgressPointer = Marshal.GetFunctionPointerForDelegate(Progress);
        internal static readonly NativeMethods.specula_token_fn Token = OnToken;
        internal static readonly NativeMethods.specula_log_fn Log = OnLog;

        private static readonly object LogLock = new object();
        private static volatile Action<LogLevel, string> logHandler;

        private static int OnProgress(float progress, IntPtr userData)
        {
            var state = (ProgressState)GCHandle.FromIntPtr(userData).Target;
            try
            {
                if (state.Error != null) return 0;
                return state.Fn(progress) ? 1 : 0;
            }
            catch (Exception e)
            {
                state.Error = ExceptionDispatchInfo.Capture(e);
                return 0;  // cancels the load / write; rethrown by the caller
            }
        }

        private static int OnToken(NativeMethods.specula_token_event* ev, IntPtr userData)
        {
            var state = (TokenState)GCHandle.FromIntPtr(userData).Target;
            try
            {
                if (state.Error != null) return 0;
                return state.Fn(TokenEvent.FromNative(ev)) ? 1 : 0;
            }
            catch (Exception e)
            {
                state.Error = ExceptionDispatchInfo.Capture(e);
                return 0;  // stops generation (SPECULA_STOP_CALLBACK); rethrown by Session.Generate
            }
        }

        private static void OnLog(LogLevel level, IntPtr message, IntPtr userData)
        {
            Action<LogLevel, string> handler = logHandler;
            if (handler == null) return;
            try
            {
                handler(level, Utf8.FromNative(message));
            }
            catch (Exception)
            {
                // A log handler has nowhere to report its own failure to; it must not unwind into the library.
            }
        }

        internal static void SetLogHandler(Action<LogLevel, string> handler, LogLevel minLevel)
        {
            lock (LogLock)
            {
                logHandler = handler;
                NativeMethods.specula_log_set(handler != null ? Log : null, minLevel, IntPtr.Zero);
            }
        }

        /// <summary>Runs call with a ProgressState in user_data when fn is set (IntPtr.Zero pointers otherwise).</summary>
        internal static Status WithProgress(Func<float, bool> fn, Func<IntPtr, IntPtr, Status> call)
        {
            if (fn == null) return call(IntPtr.Zero, IntPtr.Zero);
            var state = new ProgressState { Fn = fn };
            GCHandle gch = GCHandle.Alloc(state);
            Status status;
            try
            {
                status = call(ProgressPointer, GCHandle.ToIntPtr(gch));
            }
            finally
            {
                gch.Free();
            }
            if (state.Error != null) state.Error.Throw();
            return status;
        }
    }
}
