// Errors.cs - SpeculaException, the status check, UTF-8 helpers and the two-call pattern.
using System;
using System.Text;

namespace Specula
{
    /// <summary>
    /// A failed specula_* call: <see cref="Status"/> is the library's specula_status and Message its message
    /// (the status name when the library gave none).
    /// </summary>
    [Serializable]
    public class SpeculaException : Exception
    {
        public SpeculaException(Status status, string message) : base(message) { Status = status; }

        /// <summary>The specula_status of the failed call (never Status.Ok).</summary>
        public Status Status { get; private set; }

        public override string ToString() { return "SpeculaException(" + Status + "): " + base.ToString(); }

        /// <summary>
        /// Takes ownership of err and frees it. Does nothing for Status.Ok; otherwise throws SpeculaException with
        /// the library's message.
        /// </summary>
        internal static void Check(Status status, ErrorHandle err)
        {
            if (status == Status.Ok)
            {
                if (err != null) err.Dispose();
                return;
            }
            throw FromError(status, err);
        }

        /// <summary>The exception for a failed call; takes ownership of err and frees it.</summary>
        internal static SpeculaException FromError(Status status, ErrorHandle err)
        {
            string message = "";
            if (err != null)
            {
                if (!err.IsInvalid) message = Utf8.FromNative(NativeMethods.specula_error_message(err));
                err.Dispose();
            }
            if (string.IsNullOrEmpty(message)) message = Utf8.FromNative(NativeMethods.specula_status_string(status));
            return new SpeculaException(status, message);
        }

        /// <summary>Frees err without looking at it (for statuses the caller handles itself).</summary>
        internal static void Discard(ErrorHandle err)
        {
            if (err != null) err.Dispose();
        }
    }

    internal static unsafe class Utf8
    {
        // No BOM; invalid bytes (never produced by the library except in token pieces) decode as U+FFFD.
        private static readonly UTF8Encoding Encoder = new UTF8Encoding(false, false);

        /// <summary>NUL-terminated UTF-8 bytes of s (for `const char *` arguments); null stays null.</summary>
        internal static byte[] Z(string s)
        {
            if (s == null) return null;
            int n = Encoder.GetByteCount(s);
            var bytes = new byte[n + 1];
            Encoder.GetBytes(s, 0, s.Length, bytes, 0);
            return bytes;
        }

        /// <summary>UTF-8 bytes of s followed by a NUL that the length does not count (text + len arguments).</summary>
        internal static byte[] Bytes(string s, out int length)
        {
            byte[] z = Z(s ?? "");
            length = z.Length - 1;
            return z;
        }

        /// <summary>A borrowed NUL-terminated UTF-8 string; "" for NULL.</summary>
        internal static string FromNative(IntPtr p)
        {
            if (p == IntPtr.Zero) return "";
            byte* s = (byte*)p;
            int n = 0;
            while (s[n] != 0) ++n;
            return Encoder.GetString(s, n);
        }

        /// <summary>A borrowed NUL-terminated UTF-8 string; null for NULL.</summary>
        internal static string FromNativeOrNull(IntPtr p) { return p == IntPtr.Zero ? null : FromNative(p); }

        internal static string FromNative(IntPtr p, int length)
        {
            if (p == IntPtr.Zero || length <= 0) return "";
            return Encoder.GetString((byte*)p, length);
        }

        internal static string FromBuffer(byte* p, int capacity)
        {
            int n = 0;
            while (n < capacity && p[n] != 0) ++n;
            return Encoder.GetString(p, n);
        }
    }

    /// <summary>The two-call pattern of the text getters (specula_model_meta_value and friends).</summary>
    internal static class TwoCall
    {
        internal delegate Status TextCall(byte[] buf, UIntPtr size, out UIntPtr len, out ErrorHandle err);

        /// <summary>The bytes (without the NUL) the call writes: a 256-byte try, then exactly the size asked for.</summary>
        internal static byte[] Bytes(TextCall call)
        {
            var buf = new byte[256];
            for (int attempt = 0; ; ++attempt)
            {
                UIntPtr len;
                ErrorHandle err;
                Status st = call(buf, (UIntPtr)buf.Length, out len, out err);
                ulong n = len.ToUInt64();
                if (st == Status.Ok)
                {
                    SpeculaException.Discard(err);
                    var result = new byte[n];
                    Array.Copy(buf, result, (long)n);
                    return result;
                }
                if (st != Status.BufferTooSmall || attempt == 1 || n >= int.MaxValue) throw SpeculaException.FromError(st, err);
                SpeculaException.Discard(err);
                buf = new byte[n + 1];
            }
        }

        internal static string Text(TextCall call) { return Encoding.UTF8.GetString(Bytes(call)); }
    }
}
