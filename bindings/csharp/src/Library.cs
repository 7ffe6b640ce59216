// Library.cs - process-wide functions: versions, logging, devices, built-in names, synthetic models.
using System;
using System.Collections.Generic;

namespace Specula
{
    /// <summary>A GPU the library can run sessions on (specula_device_info).</summary>
    public sealed class DeviceInfo
    {
        public Backend Backend { get; internal set; }
        /// <summary>The value for SessionOptions.Device.</summary>
        public int Index { get; internal set; }
        public string Name { get; internal set; }
        public ulong TotalMemory { get; internal set; }
        public ulong FreeMemory { get; internal set; }
        /// <summary>CUDA: major * 10 + minor, e.g. 90; 0 for other backends.</summary>
        public int ComputeCapability { get; internal set; }
        /// <summary>CUDA: streaming multiprocessors; Vulkan: compute units where the driver says (0 if unknown).</summary>
        public int Multiprocessors { get; internal set; }
        /// <summary>Memory bandwidth in GB/s from the driver's clock and bus width; 0 if unknown.</summary>
        public double PeakBandwidthGbs { get; internal set; }
    }

    /// <summary>Process-wide functions of the library. All thread-safe.</summary>
    public static class Library
    {
        /// <summary>SPECULA_ABI_VERSION of the header this binding was written against.</summary>
        public const uint BindingAbiVersion = NativeMethods.AbiVersion;

        private static volatile bool abiChecked;

        /// <summary>Library version as (major &lt;&lt; 16) | (minor &lt;&lt; 8) | patch.</summary>
        public static uint Version { get { return NativeMethods.specula_version(); } }
        /// <summary>"MAJOR.MINOR.PATCH".</summary>
        public static string VersionString { get { return Utf8.FromNative(NativeMethods.specula_version_string()); } }
        /// <summary>ABI version of the loaded library (the SONAME suffix); must equal BindingAbiVersion.</summary>
        public static uint AbiVersion { get { return NativeMethods.specula_abi_version(); } }

        /// <summary>Throws Status.Incompatible when the loaded library has another ABI than this binding.</summary>
        internal static void EnsureAbi()
        {
            if (abiChecked) return;
            uint abi = AbiVersion;
            if (abi != BindingAbiVersion)
                throw new SpeculaException(Status.Incompatible, "libspecula has ABI version " + abi +
                                           ", this binding was written for " + BindingAbiVersion);
            abiChecked = true;
        }

        /// <summary>Short English name of a status ("SPECULA_ERR_FORMAT").</summary>
        public static string StatusString(Status status) { return Utf8.FromNative(NativeMethods.specula_status_string(status)); }

        /// <summary>Stable lower-case name of a stop reason ("max_tokens", "eos", ...).</summary>
        public static string StopReasonString(StopReason reason)
        {
            return Utf8.FromNative(NativeMethods.specula_stop_reason_string(reason));
        }

        /// <summary>
        /// Routes library log messages at or above minLevel to handler (null: silence, the default). Global for the
        /// process. The handler runs on the thread of the call that logs, so it must be thread-safe and must not
        /// call into the session that is logging; its exceptions are swallowed (they cannot cross the library).
        /// The library may still deliver a message that was in flight when the handler was replaced: the binding
        /// only ever sets one static trampoline, which reads the current handler at each message, so such a
        /// message goes to the new handler (or nowhere after null).
        /// </summary>
        public static void SetLogHandler(Action<LogLevel, string> handler, LogLevel minLevel = LogLevel.Info)
        {
            Callbacks.SetLogHandler(handler, minLevel);
        }

        // ---- devices ----------------------------------------------------------------------------------------------

        /// <summary>Usable devices of a GPU backend, Cuda or Vulkan (0 when none, or without that backend; 0 for Cpu
        /// and Auto).</summary>
        public static int DeviceCount(Backend backend) { return NativeMethods.specula_device_count((int)backend); }

        public static unsafe DeviceInfo GetDevice(Backend backend, int index)
        {
            NativeMethods.specula_device_info c = default(NativeMethods.specula_device_info);
            c.struct_size = (uint)sizeof(NativeMethods.specula_device_info);
            ErrorHandle err;
            Status st = NativeMethods.specula_device_get_info((int)backend, index, &c, out err);
            SpeculaException.Check(st, err);
            return new DeviceInfo
            {
                Backend = (Backend)c.backend, Index = c.index, Name = Utf8.FromBuffer(c.name, 256),
                TotalMemory = c.total_memory, FreeMemory = c.free_memory, ComputeCapability = c.compute_capability,
                Multiprocessors = c.multiprocessors, PeakBandwidthGbs = c.peak_bandwidth_gbs,
            };
        }

        /// <summary>The usable devices of a GPU backend.</summary>
        public static IList<DeviceInfo> Devices(Backend backend = Backend.Cuda)
        {
            var list = new List<DeviceInfo>();
            for (int i = 0, n = DeviceCount(backend); i < n; ++i) list.Add(GetDevice(backend, i));
            return list;
        }

        /// <summary>
        /// The GBNF grammar of the JSON text a JSON schema admits (specula_json_schema_to_grammar, since 0.13), for
        /// SamplerOptions.Grammar. Throws SpeculaException: InvalidArgument (not JSON, not a schema), Unsupported
        /// ("pattern").
        /// </summary>
        public static string JsonSchemaToGrammar(string schema)
        {
            if (schema == null) throw new ArgumentNullException("schema");
            int n;
            byte[] bytes = Utf8.Bytes(schema, out n);
            return TwoCall.Text((byte[] buf, UIntPtr size, out UIntPtr len, out ErrorHandle err) =>
                NativeMethods.specula_json_schema_to_grammar(bytes, (UIntPtr)n, buf, size, out len, out err));
        }

        /// <summary>Why backend cannot be used now (no driver, no device, built without it, ...); null when it can.
        /// Auto: null when any GPU backend can, else every GPU backend's reason ("CUDA: ...; Vulkan: ...").</summary>
        public static string BackendUnavailableReason(Backend backend)
        {
            ErrorHandle err;
            Status st = NativeMethods.specula_backend_check((int)backend, out err);
            if (st == Status.Ok)
            {
                SpeculaException.Discard(err);
                return null;
            }
            return SpeculaException.FromError(st, err).Message;
        }

        // ---- built-in names ---------------------------------------------------------------------------------------

        /// <summary>The built-in chat template names (for Model.ApplyChatTemplate's template argument).</summary>
        public static IList<string> ChatTemplateBuiltins
        {
            get { return List(NativeMethods.specula_chat_template_builtin); }
        }

        /// <summary>The built-in shapes of WriteSyntheticModel ("llama-3.2-1b", ..., "tiny-llama").</summary>
        public static IList<string> SyntheticShapes { get { return List(NativeMethods.specula_synthetic_shape); } }

        private static IList<string> List(Func<int, IntPtr> at)
        {
            var names = new List<string>();
            for (int i = 0; i < 100000; ++i)
            {
                IntPtr p = at(i);
                if (p == IntPtr.Zero) break;
                names.Add(Utf8.FromNative(p));
            }
            return names;
        }

        /// <summary>
        /// Writes a random-weight model of a real model's shape (for speed measurements) with the tokenizer of the
        /// GGUF at vocabPath. Throws SpeculaException (InvalidArgument, Io, Format, Cancelled, OutOfMemory) or what
        /// the progress callback threw; no partial file is left on failure.
        /// </summary>
        public static unsafe void WriteSyntheticModel(string shape, string vocabPath, string path,
                                                      SyntheticOptions options = null)
        {
            if (shape == null) throw new ArgumentNullException("shape");
            if (vocabPath == null) throw new ArgumentNullException("vocabPath");
            if (path == null) throw new ArgumentNullException("path");
            options = options ?? new SyntheticOptions();
            byte[] cshape = Utf8.Z(shape), cvocab = Utf8.Z(vocabPath), cpath = Utf8.Z(path);
            byte[] weightType = Utf8.Z(options.WeightType);
            ErrorHandle err = null;
            try
            {
                Status st = Callbacks.WithProgress(options.Progress, (fn, user) =>
                {
                    fixed (byte* wt = weightType)
                    {
                        NativeMethods.specula_synthetic_options c;
                        NativeMethods.specula_synthetic_options_init(&c);
                        c.weight_type = (IntPtr)wt;  // NULL when WeightType is null: the library's default
                        c.seed = options.Seed;
                        c.n_layer = options.NLayer;
                        c.progress = fn;
                        c.progress_user_data = user;
                        return NativeMethods.specula_synthetic_model_write(cshape, cvocab, cpath, &c, out err);
                    }
                });
                SpeculaException.Check(st, err);
                err = null;
            }
            finally
            {
                if (err != null) err.Dispose();
            }
        }
    }
}
