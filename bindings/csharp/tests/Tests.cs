// Tests.cs - the C# binding's test runner (no NUnit: Debian's Mono has none).
//
//   mono SpeculaTests.exe <model.gguf> <draft.gguf> [test ...]      run the named tests (none: all)
//   mono SpeculaTests.exe --list                                     print the test names
//   mono SpeculaTests.exe --check-list <name ...>                    fail unless the names are exactly the tests
//
// One line per test ("PASS name (12 ms)" / "FAIL name: ..."), then exactly "N passed, M failed"; exit 1 on a failure,
// 2 for an unknown test name or bad usage. run_tests.sh sets the environment:
//   SPECULA_PREFIX    the installed prefix (its bin/specula is the CLI reference, its header the ABI to check)
//   SPECULA_CS_SIZES  the output of tests/sizes.c compiled against that header
//   SPECULA_CS_TMP    a scratch directory
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Globalization;
using System.IO;
using System.Linq;
using System.Reflection;
using System.Runtime.InteropServices;
using System.Text;
using System.Text.RegularExpressions;
using System.Threading;

namespace Specula.Tests
{
    [AttributeUsage(AttributeTargets.Method)]
    internal sealed class TestAttribute : Attribute
    {
        public TestAttribute(string name) { Name = name; }
        public string Name { get; private set; }
    }

    internal sealed class AssertionException : Exception
    {
        public AssertionException(string message) : base(message) { }
    }

    internal static class Assert
    {
        public static void True(bool condition, string what)
        {
            if (!condition) throw new AssertionException(what);
        }

        public static void Equal<T>(T expected, T actual, string what)
        {
            if (!EqualityComparer<T>.Default.Equals(expected, actual))
                throw new AssertionException(what + ": expected <" + expected + ">, got <" + actual + ">");
        }

        public static void SeqEqual<T>(IList<T> expected, IList<T> actual, string what)
        {
            int n = Math.Min(expected.Count, actual.Count);
            for (int i = 0; i < n; ++i)
                if (!EqualityComparer<T>.Default.Equals(expected[i], actual[i]))
                    throw new AssertionException(what + ": first difference at [" + i + "]: expected " + expected[i] +
                                                 ", got " + actual[i] + "\n  expected " + Show(expected) + "\n  got      " +
                                                 Show(actual));
            if (expected.Count != actual.Count)
                throw new AssertionException(what + ": expected " + expected.Count + " items, got " + actual.Count +
                                             "\n  expected " + Show(expected) + "\n  got      " + Show(actual));
        }

        public static string Show<T>(IEnumerable<T> items) { return "[" + string.Join(",", items) + "]"; }

        public static TException Throws<TException>(Action action, string what) where TException : Exception
        {
            try
            {
                action();
            }
            catch (TException e)
            {
                return e;
            }
            catch (Exception e)
            {
                throw new AssertionException(what + ": expected " + typeof(TException).Name + ", got " + e.GetType().Name +
                                             ": " + e.Message);
            }
            throw new AssertionException(what + ": expected " + typeof(TException).Name + ", nothing was thrown");
        }

        /// <summary>SpeculaException with that status and a non-empty message.</summary>
        public static SpeculaException Status(Status status, Action action, string what)
        {
            SpeculaException e = Throws<SpeculaException>(action, what);
            Equal(status, e.Status, what + " (status; message: " + e.Message + ")");
            True(!string.IsNullOrEmpty(e.Message), what + ": the exception has a message");
            return e;
        }
    }

    internal static class Program
    {
        internal static string ModelPath;
        internal static string DraftPath;
        internal static string Prefix;
        internal static string SizesFile;
        internal static string TmpRoot;
        internal static string TestTmp;  // a fresh directory per test

        private static SortedDictionary<string, MethodInfo> Discover()
        {
            var tests = new SortedDictionary<string, MethodInfo>(StringComparer.Ordinal);
            foreach (MethodInfo m in typeof(Tests).GetMethods(BindingFlags.Static | BindingFlags.Public | BindingFlags.NonPublic))
            {
                var attr = (TestAttribute)Attribute.GetCustomAttribute(m, typeof(TestAttribute));
                if (attr == null) continue;
                if (tests.ContainsKey(attr.Name)) throw new InvalidOperationException("duplicate test name " + attr.Name);
                tests[attr.Name] = m;
            }
            return tests;
        }

        private static int Usage()
        {
            Console.Error.WriteLine("usage: mono SpeculaTests.exe <model.gguf> <draft.gguf> [test ...]\n" +
                                    "       mono SpeculaTests.exe --list | --check-list <name ...>");
            return 2;
        }

        public static int Main(string[] args)
        {
            SortedDictionary<string, MethodInfo> tests = Discover();
            if (args.Length >= 1 && args[0] == "--list")
            {
                foreach (string name in tests.Keys) Console.WriteLine(name);
                return 0;
            }
            if (args.Length >= 1 && args[0] == "--check-list")
            {
                // The CMake list registers one ctest entry per name: it must name every test, and nothing else.
                var given = new HashSet<string>(args.Skip(1));
                var missing = tests.Keys.Where(n => !given.Contains(n)).ToList();
                var unknown = given.Where(n => !tests.ContainsKey(n)).OrderBy(n => n, StringComparer.Ordinal).ToList();
                foreach (string n in missing) Console.WriteLine("not registered in CMakeLists.txt: " + n);
                foreach (string n in unknown) Console.WriteLine("registered but not a test: " + n);
                Console.WriteLine(missing.Count == 0 && unknown.Count == 0
                                      ? "the test list matches (" + tests.Count + " tests)"
                                      : "the test list does not match");
                return missing.Count == 0 && unknown.Count == 0 ? 0 : 1;
            }
            if (args.Length < 2) return Usage();

            ModelPath = Path.GetFullPath(args[0]);
            DraftPath = Path.GetFullPath(args[1]);
            Prefix = Environment.GetEnvironmentVariable("SPECULA_PREFIX");
            SizesFile = Environment.GetEnvironmentVariable("SPECULA_CS_SIZES");
            TmpRoot = Environment.GetEnvironmentVariable("SPECULA_CS_TMP");
            if (string.IsNullOrEmpty(TmpRoot))
                TmpRoot = Path.Combine(Path.GetTempPath(), "specula-cs-" + Process.GetCurrentProcess().Id);

            var selected = new List<string>();
            foreach (string name in args.Skip(2))
            {
                if (!tests.ContainsKey(name))
                {
                    Console.WriteLine("unknown test: " + name + " (tests: " + string.Join(" ", tests.Keys) + ")");
                    Console.WriteLine("0 passed, 1 failed");
                    return 2;
                }
                if (!selected.Contains(name)) selected.Add(name);
            }
            if (selected.Count == 0) selected.AddRange(tests.Keys);

            int passed = 0, failed = 0;
            foreach (string name in selected)
            {
                TestTmp = Path.Combine(TmpRoot, name);
                if (Directory.Exists(TestTmp)) Directory.Delete(TestTmp, true);
                Directory.CreateDirectory(TestTmp);
                var watch = Stopwatch.StartNew();
                try
                {
                    tests[name].Invoke(null, null);
                    ++passed;
                    Console.WriteLine("PASS " + name + " (" + watch.ElapsedMilliseconds + " ms)");
                    try { Directory.Delete(TestTmp, true); } catch (IOException) { }
                }
                catch (TargetInvocationException e)
                {
                    ++failed;
                    Exception inner = e.InnerException ?? e;
                    Console.WriteLine("FAIL " + name + " (" + watch.ElapsedMilliseconds + " ms): " +
                                      (inner is AssertionException ? inner.Message : inner.ToString()));
                    if (inner is AssertionException) Console.WriteLine("  at " + Where(inner));
                }
                Console.Out.Flush();
            }
            // Run the finalizers of whatever the tests left behind before the library is unloaded.
            GC.Collect();
            GC.WaitForPendingFinalizers();
            Console.WriteLine(passed + " passed, " + failed + " failed");
            return failed == 0 ? 0 : 1;
        }

        private static string Where(Exception e)
        {
            string[] lines = (e.StackTrace ?? "").Split('\n');
            foreach (string line in lines)
                if (!line.Contains("Specula.Tests.Assert")) return line.Trim();
            return "?";
        }
    }

    internal static partial class Tests
    {
        // ---- helpers ---------------------------------------------------------------------------------------------

        private const string Story = "Once upon a time";

        private static Model LoadModel() { return Model.Load(Program.ModelPath); }

        /// <summary>Sessions of the tests: CPU, one thread (the machine is small; results do not depend on it).</summary>
        private static SessionOptions CpuOptions(int nCtx = 0)
        {
            return new SessionOptions { Backend = Backend.Cpu, NThreads = 1, NCtx = nCtx };
        }

        private static Session GreedySession(Model model, int nCtx = 0)
        {
            return new Session(model, CpuOptions(nCtx), SamplerOptions.Greedy());
        }

        private static GenerateOptions Exactly(int n) { return new GenerateOptions(n) { StopAtEog = false }; }

        /// <summary>Plain greedy continuation of prompt (push style, a fresh session): the reference of many tests.</summary>
        private static int[] Greedy(Model model, int[] prompt, int n)
        {
            using (Session s = GreedySession(model))
            {
                s.AppendTokens(prompt);
                var tokens = new List<int>();
                StopReason r = s.Generate(Exactly(n), ev =>
                {
                    if (ev.HasToken) tokens.Add(ev.Token);
                    return true;
                });
                Assert.Equal(StopReason.MaxTokens, r, "reference run stop reason");
                Assert.Equal(n, tokens.Count, "reference run tokens");
                return tokens.ToArray();
            }
        }

        private static List<int> TokensOf(IEnumerable<TokenEvent> events)
        {
            return events.Where(e => e.HasToken).Select(e => e.Token).ToList();
        }

        private static string TextOf(IEnumerable<TokenEvent> events)
        {
            return string.Concat(events.Select(e => e.Text));
        }

        private static int[] Concat(int[] a, IList<int> b) { return a.Concat(b).ToArray(); }

        private static string Tmp(string name) { return Path.Combine(Program.TestTmp, name); }

        private static void FullGc()
        {
            GC.Collect();
            GC.WaitForPendingFinalizers();
            GC.Collect();
        }

        // ---- library, ABI and layout -----------------------------------------------------------------------------

        [Test("version")]
        private static void Version()
        {
            Assert.Equal(1u, Library.AbiVersion, "specula_abi_version");
            Assert.Equal(Library.BindingAbiVersion, Library.AbiVersion, "binding ABI");
            Match m = Regex.Match(Library.VersionString, @"^(\d+)\.(\d+)\.(\d+)$");
            Assert.True(m.Success, "version string \"" + Library.VersionString + "\" is MAJOR.MINOR.PATCH");
            uint expected = (uint.Parse(m.Groups[1].Value) << 16) | (uint.Parse(m.Groups[2].Value) << 8) |
                            uint.Parse(m.Groups[3].Value);
            Assert.Equal(expected, Library.Version, "specula_version matches the string");
            Assert.True(Library.Version >= 0x000800, "library 0.8 or newer (this binding's header)");
            Assert.Equal("SPECULA_ERR_FORMAT", Library.StatusString(Status.Format), "status string");
            Assert.Equal("SPECULA_OK", Library.StatusString(Status.Ok), "status string");
            Assert.Equal("max_tokens", Library.StopReasonString(StopReason.MaxTokens), "stop reason string");
            Assert.Equal("callback", Library.StopReasonString(StopReason.Callback), "stop reason string");
            Assert.Equal("unknown", Library.StopReasonString((StopReason)99), "unknown stop reason");

            // The tests run against the installed library only: the mapped libspecula.so.1 is the one under PREFIX/lib.
            Assert.True(!string.IsNullOrEmpty(Program.Prefix), "SPECULA_PREFIX is set");
            string libDir = Path.GetFullPath(Path.Combine(Program.Prefix, "lib"));
            var mapped = File.ReadAllLines("/proc/self/maps")
                             .Select(l => l.Split(new[] { ' ' }, StringSplitOptions.RemoveEmptyEntries))
                             .Where(f => f.Length >= 6 && f[5].Contains("libspecula"))
                             .Select(f => f[5]).Distinct().ToList();
            Assert.Equal(1, mapped.Count, "one libspecula mapped (" + string.Join(", ", mapped) + ")");
            string real = RealPath(mapped[0]);
            Assert.True(real == RealPath(Path.Combine(libDir, "libspecula.so.1")),
                        "the mapped library " + real + " is the installed " + Path.Combine(libDir, "libspecula.so.1"));
        }

        [DllImport("libc", EntryPoint = "realpath")]
        private static extern IntPtr realpath(string path, IntPtr resolved);
        [DllImport("libc", EntryPoint = "free")]
        private static extern void free(IntPtr p);

        private static string RealPath(string path)
        {
            IntPtr p = realpath(path, IntPtr.Zero);
            if (p == IntPtr.Zero) return path;
            string s = Marshal.PtrToStringAnsi(p);
            free(p);
            return s;
        }

        [DllImport("libdl.so.2")]
        private static extern IntPtr dlopen(string file, int mode);
        [DllImport("libdl.so.2")]
        private static extern IntPtr dlsym(IntPtr handle, string name);

        // The installed headers: specula.h (the stable ABI) and specula_experimental.h (the tools outside it, which
        // the bindings wrap as well).
        private static string HeaderText()
        {
            string text = "";
            foreach (string name in new[] { "specula.h", "specula_experimental.h" })
            {
                string header = Path.Combine(Program.Prefix ?? "", "include", "specula", name);
                Assert.True(File.Exists(header), "the installed header " + header + " exists");
                text += File.ReadAllText(header);
            }
            return text;
        }

        [Test("abi_coverage")]
        private static void AbiCoverage()
        {
            // Every function the installed header declares has exactly one [DllImport] of that name, and nothing else.
            string text = HeaderText();
            var declared = new SortedSet<string>(StringComparer.Ordinal);
            foreach (Match m in Regex.Matches(text, @"SPECULA_API\s[^;{]*?\b(specula_[a-z0-9_]+)\s*\("))
                declared.Add(m.Groups[1].Value);
            Assert.True(declared.Count >= 90, "the header declares the C ABI (" + declared.Count + " functions found)");

            var bound = new SortedSet<string>(StringComparer.Ordinal);
            var methods = typeof(NativeMethods).GetMethods(BindingFlags.Static | BindingFlags.NonPublic | BindingFlags.Public)
                                               .Where(mi => (mi.Attributes & MethodAttributes.PinvokeImpl) != 0).ToList();
            foreach (MethodInfo mi in methods)
            {
                Assert.True(bound.Add(mi.Name), "one declaration per function: " + mi.Name);
                var dll = (DllImportAttribute)Attribute.GetCustomAttribute(mi, typeof(DllImportAttribute));
                Assert.True(dll != null, mi.Name + " has a DllImport attribute");
                Assert.Equal("specula", dll.Value, mi.Name + " imports from \"specula\"");
                Assert.True(dll.EntryPoint == null || dll.EntryPoint == mi.Name, mi.Name + " has no other entry point");
                Assert.Equal(CallingConvention.Cdecl, dll.CallingConvention, mi.Name + " calling convention");
            }
            // The *_options_init functions are kept for applications built against headers before 0.17 (the header's
            // macros of those names call *_init_sized); C# calls *_init_sized with its own struct's size instead.
            var missing = declared.Except(bound).Where(f => !(f.EndsWith("_options_init", StringComparison.Ordinal) &&
                                                             bound.Contains(f + "_sized"))).ToList();
            var extra = bound.Except(declared).ToList();
            Assert.True(missing.Count == 0, "functions of the headers without a P/Invoke declaration: " + string.Join(", ", missing));
            Assert.True(extra.Count == 0, "P/Invoke declarations not in the headers: " + string.Join(", ", extra));

            // Every one resolves in the installed library (dlsym), and the runtime binds it (Marshal.Prelink).
            IntPtr lib = dlopen("libspecula.so.1", 2 /* RTLD_NOW */);
            Assert.True(lib != IntPtr.Zero, "dlopen libspecula.so.1");
            foreach (MethodInfo mi in methods)
            {
                Assert.True(dlsym(lib, mi.Name) != IntPtr.Zero, "libspecula.so.1 exports " + mi.Name);
                Marshal.Prelink(mi);
            }
            Console.WriteLine("  " + declared.Count + " functions declared in specula.h, all bound and resolved");
        }

        private static string CamelCase(string upper)
        {
            var sb = new StringBuilder();
            foreach (string part in upper.Split('_'))
            {
                if (part.Length == 0) continue;
                // Digits on both sides of an underscore keep it: SPECULA_KV_Q8_0 is KvType.Q8_0.
                if (sb.Length > 0 && char.IsDigit(sb[sb.Length - 1]) && char.IsDigit(part[0])) sb.Append('_');
                sb.Append(part.Substring(0, 1)).Append(part.Substring(1).ToLowerInvariant());
            }
            return sb.ToString();
        }

        /// <summary>The C# value of a constant of specula.h, by the binding's naming rule.</summary>
        private static long CSharpConstant(string name)
        {
            if (name == "SPECULA_ABI_VERSION") return NativeMethods.AbiVersion;
            if (name == "SPECULA_TOKEN_NULL") return Model.TokenNull;
            if (name == "SPECULA_OK") return (long)Status.Ok;
            var prefixes = new[]
            {
                Tuple.Create("SPECULA_ERR_", typeof(Status)), Tuple.Create("SPECULA_LOG_", typeof(LogLevel)),
                Tuple.Create("SPECULA_FIM_", typeof(FimToken)), Tuple.Create("SPECULA_TOKENIZE_", typeof(TokenizeFlags)),
                Tuple.Create("SPECULA_TOKEN_KIND_", typeof(TokenKind)), Tuple.Create("SPECULA_BACKEND_", typeof(Backend)),
                Tuple.Create("SPECULA_KV_", typeof(KvType)),
                Tuple.Create("SPECULA_CONTEXT_", typeof(ContextPolicy)),
                Tuple.Create("SPECULA_TREE_", typeof(TreeMode)), Tuple.Create("SPECULA_SAMPLED_DRAFTS_", typeof(SampledDrafts)),
                Tuple.Create("SPECULA_DRAW_", typeof(DrawRule)),
                Tuple.Create("SPECULA_STOP_", typeof(StopReason)), Tuple.Create("SPECULA_SNAPSHOT_", typeof(SnapshotScope)),
            };
            foreach (var p in prefixes)
            {
                if (!name.StartsWith(p.Item1, StringComparison.Ordinal)) continue;
                string member = CamelCase(name.Substring(p.Item1.Length));
                Assert.True(Enum.IsDefined(p.Item2, member), name + " has the C# counterpart " + p.Item2.Name + "." + member);
                return Convert.ToInt64(Enum.Parse(p.Item2, member));
            }
            throw new AssertionException("no C# counterpart known for " + name);
        }

        private static int FieldSize(FieldInfo f)
        {
            Type t = f.FieldType;
            if (t.IsEnum) t = Enum.GetUnderlyingType(t);
            if (t == typeof(IntPtr) || t == typeof(UIntPtr)) return IntPtr.Size;
            return Marshal.SizeOf(t);  // fixed buffers: their generated struct has the buffer's size
        }

        [Test("struct_layout")]
        private static unsafe void StructLayout()
        {
            Assert.True(!string.IsNullOrEmpty(Program.SizesFile) && File.Exists(Program.SizesFile),
                        "SPECULA_CS_SIZES names the output of tests/sizes.c (" + Program.SizesFile + ")");
            string[] lines = File.ReadAllLines(Program.SizesFile);
            var structs = new Dictionary<string, Type>();
            var fieldCounts = new Dictionary<string, int>();
            var constants = new HashSet<string>();
            int checkedFields = 0;
            foreach (string line in lines)
            {
                string[] f = line.Split(' ');
                switch (f[0])
                {
                    case "struct":
                    {
                        Type t = typeof(NativeMethods).GetNestedType(f[1], BindingFlags.NonPublic | BindingFlags.Public);
                        Assert.True(t != null, "C# declares struct " + f[1]);
                        Assert.True(t.IsLayoutSequential && t.IsValueType, f[1] + " is a sequential struct");
                        Assert.Equal(int.Parse(f[2]), Marshal.SizeOf(t), "sizeof(" + f[1] + ")");
                        structs[f[1]] = t;
                        fieldCounts[f[1]] = 0;
                        break;
                    }
                    case "field":
                    {
                        Type t = structs[f[1]];
                        FieldInfo fi = t.GetField(f[2], BindingFlags.Instance | BindingFlags.Public | BindingFlags.NonPublic);
                        Assert.True(fi != null, "C# " + f[1] + " has the field " + f[2]);
                        Assert.Equal(long.Parse(f[3]), Marshal.OffsetOf(t, f[2]).ToInt64(), "offsetof(" + f[1] + ", " + f[2] + ")");
                        Assert.Equal(int.Parse(f[4]), FieldSize(fi), "sizeof(" + f[1] + "." + f[2] + ")");
                        fieldCounts[f[1]]++;
                        ++checkedFields;
                        break;
                    }
                    case "enumsize":
                        Assert.Equal(4, int.Parse(f[2]), "sizeof(" + f[1] + ") (C# enums are int)");
                        break;
                    case "enum":
                        Assert.Equal(long.Parse(f[2]), CSharpConstant(f[1]), f[1]);
                        constants.Add(f[1]);
                        break;
                    default:
                        throw new AssertionException("unexpected line in " + Program.SizesFile + ": " + line);
                }
            }
            foreach (var kv in structs)
            {
                int csharpFields = kv.Value.GetFields(BindingFlags.Instance | BindingFlags.Public | BindingFlags.NonPublic).Length;
                Assert.Equal(fieldCounts[kv.Key], csharpFields, "fields of " + kv.Key + " (C vs C#)");
            }

            // sizes.c lists every struct and enum constant of the header, and C# declares no struct it does not list.
            string text = HeaderText();
            foreach (Match m in Regex.Matches(text, @"typedef struct (specula_\w+) \{"))
                Assert.True(structs.ContainsKey(m.Groups[1].Value), "tests/sizes.c checks " + m.Groups[1].Value);
            foreach (Match m in Regex.Matches(text, @"^\s*(SPECULA_[A-Z0-9_]+)\s*=\s*-?\d+", RegexOptions.Multiline))
                Assert.True(constants.Contains(m.Groups[1].Value), "tests/sizes.c checks " + m.Groups[1].Value);
            foreach (Type t in typeof(NativeMethods).GetNestedTypes(BindingFlags.NonPublic | BindingFlags.Public))
                if (t.IsValueType && t.Name.StartsWith("specula_", StringComparison.Ordinal))
                    Assert.True(structs.ContainsKey(t.Name), "C# struct " + t.Name + " is checked against C");

            // The *_init_sized functions (which the C# *_init helpers call with the C# sizeof) set struct_size to the
            // size they are given but never past the library's own struct: a C# struct longer than C's would show here.
            NativeMethods.specula_model_options mo;
            NativeMethods.specula_model_options_init(&mo);
            Assert.Equal((uint)sizeof(NativeMethods.specula_model_options), mo.struct_size, "model options struct_size");
            NativeMethods.specula_session_options so;
            NativeMethods.specula_session_options_init(&so);
            Assert.Equal((uint)sizeof(NativeMethods.specula_session_options), so.struct_size, "session options struct_size");
            NativeMethods.specula_sampler_options sp;
            NativeMethods.specula_sampler_options_init(&sp);
            Assert.Equal((uint)sizeof(NativeMethods.specula_sampler_options), sp.struct_size, "sampler options struct_size");
            NativeMethods.specula_generate_options go;
            NativeMethods.specula_generate_options_init(&go);
            Assert.Equal((uint)sizeof(NativeMethods.specula_generate_options), go.struct_size, "generate options struct_size");
            NativeMethods.specula_speculative_options spec;
            NativeMethods.specula_speculative_options_init(&spec);
            Assert.Equal((uint)sizeof(NativeMethods.specula_speculative_options), spec.struct_size, "speculative options struct_size");
            NativeMethods.specula_snapshot_options snap;
            NativeMethods.specula_snapshot_options_init(&snap);
            Assert.Equal((uint)sizeof(NativeMethods.specula_snapshot_options), snap.struct_size, "snapshot options struct_size");
            NativeMethods.specula_prompt_cache_options pc;
            NativeMethods.specula_prompt_cache_options_init(&pc);
            Assert.Equal((uint)sizeof(NativeMethods.specula_prompt_cache_options), pc.struct_size, "prompt cache options struct_size");
            NativeMethods.specula_chat_options chat;
            NativeMethods.specula_chat_options_init(&chat);
            Assert.Equal((uint)sizeof(NativeMethods.specula_chat_options), chat.struct_size, "chat options struct_size");
            Assert.Equal(-1, chat.enable_thinking, "default enable_thinking");
            NativeMethods.specula_synthetic_options syn;
            NativeMethods.specula_synthetic_options_init(&syn);
            Assert.Equal((uint)sizeof(NativeMethods.specula_synthetic_options), syn.struct_size, "synthetic options struct_size");
            // Defaults the header documents arrive through the structs (the fields are where C puts them).
            Assert.Equal(1, mo.use_mmap, "default use_mmap");
            Assert.Equal(0.8f, sp.temperature, "default temperature");
            Assert.Equal(40, sp.top_k, "default top_k");
            Assert.Equal(1.0f, sp.context_penalty, "default context_penalty");
            Assert.Equal(1024, sp.context_penalty_window, "default context_penalty_window");
            Assert.Equal(256, go.max_tokens, "default max_tokens");
            Assert.Equal(1, go.stop_at_eog, "default stop_at_eog");
            Assert.Equal(1, so.allow_fallback, "default allow_fallback");
            Assert.Equal(16, spec.ngram_nodes, "default ngram_nodes");
            Assert.Equal(20, spec.ngram_table_topk, "default ngram_table_topk");
            Assert.Equal(1, snap.compression_level, "default snapshot compression");
            Assert.Equal(1UL << 30, pc.max_bytes, "default prompt cache size");
            Assert.Equal(1UL, syn.seed, "default synthetic seed");
            Console.WriteLine("  " + structs.Count + " structs, " + checkedFields + " fields, " + constants.Count +
                              " constants match the C compiler");
        }

        // ---- model -----------------------------------------------------------------------------------------------

        [Test("model_info")]
        private static void ModelInfo()
        {
            var progress = new List<float>();
            using (Model model = Model.Load(Program.ModelPath, new ModelOptions { Progress = p => { progress.Add(p); return true; } }))
            {
                Assert.True(progress.Count >= 1, "the progress callback was called");
                for (int i = 0; i < progress.Count; ++i)
                {
                    Assert.True(progress[i] >= 0 && progress[i] <= 1, "progress in [0, 1]: " + progress[i]);
                    if (i > 0) Assert.True(progress[i] >= progress[i - 1], "progress does not go back");
                }
                Assert.Equal(1.0f, progress[progress.Count - 1], "progress ends at 1");

                Assert.Equal("llama", model.Arch, "arch");
                Assert.Equal(512, model.NVocab, "n_vocab");
                Assert.Equal(5, model.NLayer, "n_layer");
                Assert.Equal(64, model.NEmbd, "n_embd");
                Assert.Equal(8, model.NHead, "n_head");
                Assert.Equal(4, model.NHeadKv, "n_head_kv");
                Assert.True(model.NFf > 0 && model.NCtxTrain > 0, "n_ff, n_ctx_train");
                Assert.True(model.NParams > 200000 && model.NParams < 400000, "about 260K parameters: " + model.NParams);
                Assert.Equal((ulong)new FileInfo(Program.ModelPath).Length, model.FileSize, "file size");
                Assert.Equal("F32", model.WeightType, "weight type");
                Assert.Equal("llama", model.Tokenizer, "tokenizer");
                Assert.True(model.PreTokenizer != null, "pre-tokenizer");

                IList<TensorInfo> tensors = model.Tensors;
                Assert.Equal(model.TensorCount, tensors.Count, "tensor count");
                Assert.Equal(tensors.Count, tensors.Select(t => t.Name).Distinct().Count(), "tensor names are unique");
                TensorInfo embd = tensors.FirstOrDefault(t => t.Name == "token_embd.weight");
                Assert.True(embd != null, "token_embd.weight exists");
                Assert.SeqEqual(new long[] { 64, 512 }, embd.Dims, "token_embd dims (ggml order)");
                Assert.Equal("F32", embd.Type, "token_embd type");
                Assert.Equal(64UL * 512 * 4, embd.NBytes, "token_embd bytes");
                foreach (TensorInfo t in tensors)
                    Assert.True(t.Offset + t.NBytes <= model.FileSize, t.Name + " lies within the file");
                Assert.Status(Status.InvalidArgument, () => model.GetTensor(tensors.Count), "tensor index out of range");

                IDictionary<string, string> meta = model.Metadata();
                Assert.Equal(model.MetaCount, meta.Count, "metadata count");
                Assert.True(meta.ContainsKey("general.architecture"), "general.architecture present");
                Assert.True(meta["general.architecture"].Contains("llama"), "general.architecture = llama");
                Assert.True(model.MetaKey(-1) == null && model.MetaKey(model.MetaCount) == null, "meta key out of range is null");
                Assert.Throws<SpeculaException>(() => model.MetaValue(model.MetaCount), "meta value out of range");

                string fp = model.Fingerprint;
                Assert.True(Regex.IsMatch(fp, "^[0-9a-f]{32}$"), "fingerprint is 32 hex digits: " + fp);

                Assert.Equal(1, model.TokenBos, "BOS");
                Assert.Equal(2, model.TokenEos, "EOS");
                Assert.True(model.AddBos && !model.AddEos, "add BOS, not EOS");
                Assert.True(model.IsEog(2) && !model.IsEog(100), "EOS ends generation, 100 does not");
                Assert.Equal(TokenKind.Control, model.GetTokenKind(1), "BOS is a control token");
                Assert.Equal(TokenKind.Invalid, model.GetTokenKind(99999), "invalid id");
                Assert.Equal("<s>", model.TokenText(1), "BOS text");
                Assert.True(model.TokenText(99999) == null, "invalid id has no text");
                Assert.Equal(Model.TokenNull, model.TokenFim(FimToken.Pre), "no FIM tokens");

                // A second reference outlives the first.
                using (Model second = model.AddReference())
                {
                    model.Dispose();
                    Assert.True(model.IsDisposed, "first reference disposed");
                    Assert.Equal(512, second.NVocab, "the second reference still works");
                    Assert.Equal(fp, second.Fingerprint, "same model");
                    Assert.Throws<ObjectDisposedException>(() => { int n = model.NVocab; }, "a disposed Model throws");
                }
            }

            // Vocab-only: the tokenizer works, the hyperparameters are 0, sessions refuse it.
            using (Model vocab = Model.Load(Program.ModelPath, new ModelOptions { VocabOnly = true, UseMmap = false }))
            {
                Assert.Equal(512, vocab.NVocab, "vocab-only n_vocab");
                Assert.Equal(0, vocab.NLayer, "vocab-only n_layer");
                Assert.True(vocab.Tokenize(Story).Length >= 2, "vocab-only tokenizes");
                Assert.Status(Status.InvalidArgument, () => new Session(vocab), "a session on a vocab-only model");
            }
        }

        [Test("tokenize")]
        private static void Tokenize()
        {
            using (Model model = LoadModel())
            {
                int[] tokens = model.Tokenize(Story);
                Assert.True(tokens.Length >= 2, "tokens");
                Assert.Equal(model.TokenBos, tokens[0], "AddSpecial adds BOS");
                int[] plain = model.Tokenize(Story, TokenizeFlags.None);
                Assert.SeqEqual(tokens.Skip(1).ToList(), plain, "without AddSpecial: the same tokens minus BOS");
                Assert.True(model.Detokenize(plain).Contains(Story), "detokenize gives the text back");
                Assert.SeqEqual(new[] { model.TokenBos }, model.Tokenize(""), "empty text: BOS only");
                Assert.Equal(0, model.Tokenize("", TokenizeFlags.None).Length, "empty text, no specials: nothing");

                // Control tokens written in the text: recognised only with ParseSpecial; rendered only with renderSpecial.
                Assert.True(model.Tokenize("<s>hi", TokenizeFlags.ParseSpecial).Contains(1), "ParseSpecial finds <s>");
                Assert.True(!model.Tokenize("<s>hi", TokenizeFlags.None).Contains(1), "without ParseSpecial <s> is text");
                Assert.True(model.Detokenize(new[] { 1, plain[0] }, true).Contains("<s>"), "render special");
                Assert.True(!model.Detokenize(new[] { 1, plain[0] }, false).Contains("<s>"), "control tokens hidden");

                // Non-ASCII text goes through SentencePiece's byte fallback and comes back byte for byte.
                const string unicode = "héllo wörld ✓ 日本";
                int[] u = model.Tokenize(unicode, TokenizeFlags.None);
                Assert.True(u.Any(t => model.GetTokenKind(t) == TokenKind.Byte), "byte-fallback tokens");
                Assert.True(model.Detokenize(u).Contains(unicode), "detokenize restores UTF-8: " + model.Detokenize(u));
                var bytes = new List<byte>();
                foreach (int t in u) bytes.AddRange(model.TokenToPiece(t));
                string pieces = Encoding.UTF8.GetString(bytes.ToArray());
                Assert.True(pieces.Contains(unicode), "token pieces concatenate to the UTF-8 text: " + pieces);
                Assert.True(u.Any(t => model.TokenToPiece(t).Length == 1 && model.TokenToPiece(t)[0] >= 0x80),
                            "a byte token's piece is its single (non-ASCII) byte");

                // A long text takes the second round of the two-call pattern.
                string longText = string.Concat(Enumerable.Repeat("The little dog ran to the park. ", 40));
                int[] many = model.Tokenize(longText, TokenizeFlags.None);
                Assert.True(many.Length > 200, "many tokens");
                Assert.True(model.Detokenize(many).Contains(longText.TrimEnd()), "long detokenize");

                Assert.Status(Status.InvalidToken, () => model.TokenToPiece(99999), "piece of an invalid token");
                Assert.Throws<ArgumentNullException>(() => model.Tokenize(null), "null text");
            }
        }

        // ---- generation ------------------------------------------------------------------------------------------

        [Test("greedy_determinism")]
        private static void GreedyDeterminism()
        {
            const int n = 60;
            using (Model model = LoadModel())
            {
                int[] prompt = model.Tokenize(Story);
                int[] reference = Greedy(model, prompt, n);

                // The token stream (specula_session_next) of another session gives the same tokens.
                using (Session s = GreedySession(model))
                {
                    s.AppendText(Story);
                    Assert.SeqEqual(prompt, s.Tokens(), "AppendText tokenizes like Model.Tokenize");
                    List<TokenEvent> events = s.Generate(Exactly(n)).ToList();
                    Assert.SeqEqual(reference, TokensOf(events), "stream == push-style generation");
                    Assert.Equal(StopReason.MaxTokens, events.Last().Stop, "the stream ends with max_tokens");
                    Assert.True(events.Take(events.Count - 1).All(e => e.Stop == StopReason.None), "only the last event stops");
                    Assert.SeqEqual(Concat(prompt, reference), s.Tokens(), "the context holds prompt + generated");
                    string text = TextOf(events);
                    Assert.True(text.Length > 20, "text was generated: " + text);
                    Assert.True(model.Detokenize(s.Tokens()).EndsWith(text, StringComparison.Ordinal),
                                "event text == detokenized tokens: \"" + text + "\"");
                    Assert.True(events.All(e => e.Stats != null), "every event carries stats");
                    Assert.Equal(n, events.Last().Stats.NGenerated, "stats at the last event");

                    Stats stats = s.GetStats();
                    Assert.Equal(prompt.Length, stats.NPromptTokens, "prompt tokens");
                    Assert.Equal(n, stats.NGenerated, "generated tokens");
                    Assert.Equal(prompt.Length + n, stats.NCtxUsed, "context used");
                    Assert.True(stats.DecodeMs > 0 && stats.DecodeTokensPerS > 0, "decode timing");
                    Assert.Equal(0, stats.NSpecRounds, "no speculative rounds");
                    Assert.Equal(16, stats.AcceptedAtDepth.Length, "accepted_at_depth");

                    // Rewind to the prompt: the same tokens again, pull style one at a time.
                    s.Rewind(prompt.Length);
                    Assert.Equal(prompt.Length, s.NTokens, "rewound");
                    var pulled = new List<int>();
                    for (int i = 0; i < n + 2; ++i)
                    {
                        TokenEvent ev = s.Next(Exactly(n));
                        if (ev.HasToken) pulled.Add(ev.Token);
                        if (ev.Stop != StopReason.None) break;
                    }
                    Assert.SeqEqual(reference, pulled, "Next() after a rewind");
                }

                // A third session, with the model's text API: same again.
                using (Session s = GreedySession(model))
                {
                    s.AppendTokens(prompt);
                    var tokens = new List<int>();
                    StopReason r = s.Generate(n, ev => { if (ev.HasToken) tokens.Add(ev.Token); return true; });
                    // StopAtEog is on here: the story may end early, but never differently.
                    Assert.True(r == StopReason.MaxTokens || r == StopReason.Eos, "stop reason " + r);
                    Assert.SeqEqual(reference.Take(tokens.Count).ToList(), tokens, "a third session");
                }
            }
        }

        /// <summary>Runs the installed CLI; returns its stdout.</summary>
        private static string RunCli(string args)
        {
            string cli = Path.Combine(Program.Prefix, "bin", "specula");
            Assert.True(File.Exists(cli), "the installed CLI " + cli + " exists");
            var psi = new ProcessStartInfo(cli, args)
            {
                UseShellExecute = false, RedirectStandardOutput = true, RedirectStandardError = true,
            };
            using (Process p = Process.Start(psi))
            {
                string stderr = null;
                var errThread = new Thread(() => stderr = p.StandardError.ReadToEnd());
                errThread.Start();
                string stdout = p.StandardOutput.ReadToEnd();
                p.WaitForExit();
                errThread.Join();
                Assert.Equal(0, p.ExitCode, "specula " + args + " exit code (stderr: " + stderr + ")");
                return stdout;
            }
        }

        private static string JsonUnescape(string s)
        {
            return Regex.Unescape(s);  // the CLI writes \" \\ \n \uXXXX: the same escapes as a .NET regex
        }

        [Test("cli_reference")]
        private static void CliReference()
        {
            const int n = 40;
            using (Model model = LoadModel())
            {
                int[] prompt = model.Tokenize("Once upon a time, there was a dog");
                string args = string.Format(CultureInfo.InvariantCulture,
                                            "generate -m \"{0}\" --prompt-ids {1} --temp 0 -n {2} --format jsonl --backend cpu -t 1",
                                            Program.ModelPath, string.Join(",", prompt), n);
                string stdout = RunCli(args);
                var cliTokens = new List<int>();
                var cliText = new StringBuilder();
                string cliStop = null;
                foreach (string line in stdout.Split('\n'))
                {
                    Match m = Regex.Match(line, "^\\{\"id\":(-?\\d+),\"text\":\"((?:[^\"\\\\]|\\\\.)*)\"");
                    if (m.Success)
                    {
                        cliTokens.Add(int.Parse(m.Groups[1].Value));
                        cliText.Append(JsonUnescape(m.Groups[2].Value));
                        continue;
                    }
                    Match s = Regex.Match(line, "\"stop_reason\":\"([a-z_]+)\"");
                    if (s.Success) cliStop = s.Groups[1].Value;
                }
                Assert.True(cliTokens.Count > 0, "the CLI printed tokens:\n" + stdout);

                // Same settings through the binding: greedy, n tokens, stop at end of generation.
                using (Session session = GreedySession(model))
                {
                    session.AppendTokens(prompt);
                    List<TokenEvent> events = session.Generate(n).ToList();
                    Assert.SeqEqual(cliTokens, TokensOf(events), "binding tokens == `specula generate` tokens");
                    Assert.Equal(cliText.ToString(), TextOf(events), "binding text == CLI text");
                    Assert.Equal(cliStop, Library.StopReasonString(events.Last().Stop), "stop reason");
                }
                Console.WriteLine("  CLI and binding agree on " + cliTokens.Count + " tokens: \"" + cliText + "\"");

                // llama.cpp's own greedy tokens and top logits, when the shared fixtures are next to the repository.
                string fixture = Path.GetFullPath(Path.Combine(Path.GetDirectoryName(Program.ModelPath), "..", "..", "shared",
                                                               "fixtures", "reference", "stories260K_dog.json"));
                if (!File.Exists(fixture))
                {
                    Console.WriteLine("  (llama.cpp reference " + fixture + " absent: that part is not checked)");
                    return;
                }
                string json = File.ReadAllText(fixture);
                int[] refPrompt = Regex.Match(json, "\"prompt_ids\":\\s*\\[([^\\]]*)\\]").Groups[1].Value
                                      .Split(',').Select(x => int.Parse(x.Trim())).ToArray();
                Assert.SeqEqual(refPrompt, prompt, "the binding tokenizes the prompt as llama.cpp");
                MatchCollection steps = Regex.Matches(json, "\\{\"token\":\\s*(\\d+),\\s*\"top\":\\s*\\[(\\[[^\\]]*\\](?:,\\s*\\[[^\\]]*\\])*)\\]");
                Assert.True(steps.Count >= 20, "reference steps");
                // llama.cpp made its references with an F32 KV cache (docs/parity.md); the default F16 one is 2e-4 off.
                SessionOptions f32 = CpuOptions(0);
                f32.KvType = KvType.F32;
                using (Session session = new Session(model, f32, SamplerOptions.Greedy()))
                {
                    session.AppendTokens(refPrompt);
                    var opts = Exactly(20);
                    opts.TopLogits = 5;
                    opts.TopProbs = 3;
                    List<TokenEvent> events = session.Generate(opts).Where(e => e.HasToken).ToList();
                    Assert.Equal(20, events.Count, "20 tokens");
                    for (int i = 0; i < 20; ++i)
                    {
                        // Greedy: the token has the largest logit, a log-probability <= 0 and, after the chain, p = 1.
                        Assert.Equal(events[i].TopLogits[0], events[i].TokenLogit, "token logit " + i);
                        Assert.True(events[i].TokenLogit - events[i].LogSumExp <= 0, "log-probability " + i);
                        Assert.Equal(3, events[i].TopProbs.Length, "top probs " + i);
                        Assert.Equal(events[i].Token, events[i].TopProbIds[0], "most likely " + i);
                        Assert.Equal(1.0f, events[i].TokenProb, "token prob " + i);
                        Assert.Equal(int.Parse(steps[i].Groups[1].Value), events[i].Token, "llama.cpp token " + i);
                        MatchCollection top = Regex.Matches(steps[i].Groups[2].Value, "\\[(\\d+),\\s*([-0-9.eE]+)\\]");
                        Assert.Equal(events[i].TopIds.Length, Math.Min(5, top.Count), "top count");
                        for (int k = 0; k < events[i].TopIds.Length; ++k)
                        {
                            Assert.Equal(int.Parse(top[k].Groups[1].Value), events[i].TopIds[k], "top id " + k + " of step " + i);
                            double logit = double.Parse(top[k].Groups[2].Value, CultureInfo.InvariantCulture);
                            Assert.True(Math.Abs(logit - events[i].TopLogits[k]) < 1e-3,
                                        "top logit " + k + " of step " + i + ": " + events[i].TopLogits[k] + " vs " + logit);
                        }
                    }
                }
                Console.WriteLine("  and llama.cpp's reference on 20 tokens with their top-5 logits");
            }
        }

        private const string LilyPrompt = "Once upon a time, there was a little girl named Lily. Lily liked to play. " +
                                          "Lily liked to play with her dog.";

        // A seed fixes the sampled text whatever speculates (docs/speculative.md): the trained draft's coupled
        // chains, its automatic tree and n-grams give plain sampling's tokens; Leviathan's rule stays selectable.
        [Test("seeded_sampling")]
        private static void SeededSampling()
        {
            const int n = 80;
            using (Model model = LoadModel())
            using (Draft draft = Draft.Load(Program.DraftPath, model))
            {
                var sampler = new SamplerOptions { Temperature = 0.9f, Seed = 21 };
                Func<SpeculativeOptions, int[]> run = opts =>
                {
                    using (Session s = new Session(model, CpuOptions(), sampler))
                    {
                        if (opts != null) s.SetSpeculative(opts);
                        s.AppendText(LilyPrompt);
                        return s.Generate(Exactly(n)).Where(e => e.Token != Model.TokenNull).Select(e => e.Token).ToArray();
                    }
                };
                int[] plain = run(null);
                Assert.Equal(n, plain.Length, "plain sampling's tokens");
                Assert.SeqEqual(plain, run(new SpeculativeOptions { Draft = draft, TreeWidths = SpeculativeOptions.Chain(4) }), "a coupled chain");
                Assert.SeqEqual(plain, run(new SpeculativeOptions { Draft = draft, Ngram = true }), "the automatic tree with n-grams");
                Assert.SeqEqual(plain, run(new SpeculativeOptions { Ngram = true, TreeMode = TreeMode.Fixed }), "n-grams");
                Assert.Equal(SampledDrafts.Coupled, new SpeculativeOptions().SampledDrafts, "the default rule");
                int[] leviathan = run(new SpeculativeOptions { Draft = draft, TreeWidths = SpeculativeOptions.Chain(4), SampledDrafts = SampledDrafts.Leviathan });
                Assert.Equal(n, leviathan.Length, "Leviathan's rule runs");
            }
        }

        // llama.cpp's draws (DrawRule.LlamaCpp, since 0.16): a seed fixes the text with drafters too, another text
        // than the race's for the same seed.
        [Test("llama_cpp_draws")]
        private static void LlamaCppDraws()
        {
            const int n = 80;
            using (Model model = LoadModel())
            using (Draft draft = Draft.Load(Program.DraftPath, model))
            {
                Assert.Equal(DrawRule.Race, new SamplerOptions().Draw, "the default draw rule");
                Func<SamplerOptions, SpeculativeOptions, int[]> run = (sampler, opts) =>
                {
                    using (Session s = new Session(model, CpuOptions(), sampler))
                    {
                        if (opts != null) s.SetSpeculative(opts);
                        s.AppendText(LilyPrompt);
                        return s.Generate(Exactly(n)).Where(e => e.Token != Model.TokenNull).Select(e => e.Token).ToArray();
                    }
                };
                var llama = new SamplerOptions { Temperature = 0.9f, Seed = 21, Draw = DrawRule.LlamaCpp };
                int[] plain = run(llama, null);
                Assert.Equal(n, plain.Length, "plain sampling's tokens");
                Assert.SeqEqual(plain, run(llama, new SpeculativeOptions { Draft = draft, TreeWidths = SpeculativeOptions.Chain(4) }), "a coupled chain");
                Assert.SeqEqual(plain, run(llama, new SpeculativeOptions { Draft = draft, Ngram = true }), "the automatic tree with n-grams");
                int[] race = run(new SamplerOptions { Temperature = 0.9f, Seed = 21 }, null);
                Assert.True(!race.SequenceEqual(plain), "the race draws other tokens for the seed");
            }
        }

        [Test("grammar")]
        private static void GrammarConstrained()
        {
            const string gbnf = "root ::= \" the \" [a-z]+ (\" \" [a-z]+){2,9} \".\"";
            using (Model model = LoadModel())
            using (Draft draft = Draft.Load(Program.DraftPath, model))
            {
                var sampler = new SamplerOptions { Temperature = 0.0f, Grammar = gbnf };
                Func<SpeculativeOptions, string> run = opts =>
                {
                    using (Session s = new Session(model, CpuOptions(), sampler))
                    {
                        if (opts != null) s.SetSpeculative(opts);
                        s.AppendText("Once upon a time");
                        return TextOf(s.Generate(new GenerateOptions(64)));
                    }
                };
                string plain = run(null);
                Assert.True(Regex.IsMatch(plain, "^ the [a-z]+( [a-z]+){2,9}\\.$"), "the text follows the grammar: '" + plain + "'");
                Assert.Equal(plain, run(new SpeculativeOptions { Draft = draft, Ngram = true }), "the same text with drafters");
                // A JSON schema's grammar: an object with the required key, whatever the model would rather say.
                sampler.Grammar = Library.JsonSchemaToGrammar("{\"type\": \"object\", \"properties\": {\"n\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 9}}, \"required\": [\"n\"]}");
                string json = run(null);
                Assert.True(Regex.IsMatch(json, "^\\{ ?\"n\" ?: ?[1-9] ?\\}\\s*$"), "the schema's JSON: '" + json + "'");
                Assert.Equal(json, run(new SpeculativeOptions { Draft = draft, Ngram = true }), "the same JSON with drafters");
                Assert.Equal(json, run(new SpeculativeOptions { Grammar = true }), "the same JSON with the grammar drafting alone");
                SpeculaException bad = Assert.Throws<SpeculaException>(() => Library.JsonSchemaToGrammar("{\"type\": "), "a schema that is not JSON");
                Assert.Equal(Status.InvalidArgument, bad.Status, "its status");
                sampler.Grammar = "root ::= missing";
                SpeculaException e = Assert.Throws<SpeculaException>(() => run(null), "a grammar that does not parse");
                Assert.Equal(Status.InvalidArgument, e.Status, "its status");
                Assert.True(e.Message.Contains("undefined rule 'missing'"), "its message: " + e.Message);
            }
        }

        [Test("speculative_draft")]
        private static void SpeculativeDraft()
        {
            const int n = 120;
            using (Model model = LoadModel())
            using (Draft draft = Draft.Load(Program.DraftPath, model))
            {
                Assert.True(draft.Window > 0, "draft window");
                Assert.True(draft.NParams > 0, "draft parameters");
                int[] prompt = model.Tokenize(LilyPrompt);
                int[] reference = Greedy(model, prompt, n);

                Func<SpeculativeOptions, string, Stats> check = (spec, name) =>
                {
                    using (Session s = GreedySession(model))
                    {
                        s.SetSpeculative(spec);
                        Assert.Equal(name, s.DrafterName, "drafter name");
                        s.AppendTokens(prompt);
                        List<TokenEvent> events = s.Generate(Exactly(n)).ToList();
                        Assert.SeqEqual(reference, TokensOf(events), name + ": speculative greedy == plain greedy");
                        Stats st = s.GetStats();
                        Assert.True(st.NSpecRounds > 0, name + ": speculative rounds ran");
                        Assert.True(st.NAccepted > 0 && st.NAccepted <= st.NDrafted, name + ": drafted tokens were accepted");
                        Assert.True(st.Tau > 1.0, name + ": more than one token per round (tau " + st.Tau + ")");
                        // Accepted tokens beyond max_tokens wait for the next call (specula.h): not all were emitted.
                        int drafted = events.Count(e => e.Drafted);
                        Assert.True(drafted > 0 && drafted <= st.NAccepted && drafted >= st.NAccepted - 32,
                                    name + ": events marked drafted (" + drafted + ") vs accepted (" + st.NAccepted + ")");
                        Assert.True(st.AcceptedAtDepth[0] > 0 && st.AcceptedAtDepth.Sum() <= st.NSpecRounds * 16,
                                    name + ": accepted_at_depth");
                        Assert.True(st.DrafterBytes > 0, name + ": drafter memory");
                        return st;
                    }
                };
                // Fixed trees: every round drafts, so acceptance can be checked. (Auto may decode plainly on this
                // tiny model, where a draft step costs about a target step.)
                Stats tree = check(new SpeculativeOptions { Draft = draft, TreeMode = TreeMode.Fixed }, "longspec");
                check(new SpeculativeOptions { Draft = draft, TreeWidths = SpeculativeOptions.Chain(3) }, "longspec");
                check(new SpeculativeOptions { Draft = draft, Ngram = true, TreeMode = TreeMode.Fixed }, "longspec+ngram");
                using (Session s = GreedySession(model))
                {
                    s.SetSpeculative(new SpeculativeOptions { Draft = draft, Ngram = true });
                    Assert.Equal("", s.TreeShape, "no round yet");
                    s.AppendTokens(prompt);
                    Assert.SeqEqual(reference, TokensOf(s.Generate(Exactly(n)).ToList()), "auto: speculative greedy == plain greedy");
                    Assert.True(s.TreeShape.StartsWith("auto:", StringComparison.Ordinal), "auto tree shape: " + s.TreeShape);
                }
                Console.WriteLine(string.Format(CultureInfo.InvariantCulture, "  longspec tree: tau {0:F2}, {1}/{2} drafted tokens accepted",
                                                tree.Tau, tree.NAccepted, tree.NDrafted));

                // The draft's own distribution: n_vocab logits, only for a single LongSpec drafter.
                using (Session s = GreedySession(model))
                {
                    Assert.Status(Status.InvalidArgument, () => s.DraftLogits(), "draft logits without a drafter");
                    s.SetSpeculative(draft);
                    s.AppendTokens(prompt);
                    float[] logits = s.DraftLogits();
                    Assert.Equal(512, logits.Length, "draft logits");
                    Assert.True(logits.All(x => !float.IsNaN(x) && !float.IsInfinity(x)), "finite draft logits");
                    s.SetSpeculative(new SpeculativeOptions { Ngram = true });
                    Assert.Status(Status.Unsupported, () => s.DraftLogits(), "draft logits of an n-gram drafter");
                }

                // An untrained draft drafts poorly but never changes the output.
                string random = Tmp("random.longspec.gguf");
                Draft.WriteRandom(model, random, 7, 64);
                using (Draft poor = Draft.Load(random, model))
                {
                    Assert.Equal(64, poor.Window, "random draft window");
                    using (Session s = GreedySession(model))
                    {
                        // A short chain keeps the (mostly rejected) rounds cheap.
                        s.SetSpeculative(new SpeculativeOptions { Draft = poor, TreeWidths = SpeculativeOptions.Chain(2) });
                        s.AppendTokens(prompt);
                        Assert.SeqEqual(reference.Take(40).ToList(), TokensOf(s.Generate(Exactly(40))),
                                        "random draft: output unchanged");
                        Assert.True(s.GetStats().NSpecRounds > 0, "random draft: rounds ran");
                    }
                }

                // A draft belongs to the model handle it was loaded for (or references of it).
                using (Model other = LoadModel())
                using (Session s = GreedySession(other))
                {
                    Assert.Status(Status.Incompatible, () => s.SetSpeculative(draft), "a draft of another model handle");
                    Assert.Equal("", s.DrafterName, "nothing attached after the failure");
                }
                using (Model again = model.AddReference())
                using (Session s = GreedySession(again))
                {
                    s.SetSpeculative(draft);
                    Assert.Equal("longspec", s.DrafterName, "a retained reference of the target accepts the draft");
                }
            }
        }

        [Test("speculative_ngram")]
        private static void SpeculativeNgram()
        {
            const int n = 120;
            using (Model model = LoadModel())
            {
                int[] prompt = model.Tokenize(LilyPrompt);
                int[] reference = Greedy(model, prompt, n);
                using (Session s = GreedySession(model))
                {
                    // Fixed: every round drafts, so drafted tokens can be counted (auto may decode plainly here).
                    s.SetSpeculative(new SpeculativeOptions { Ngram = true, TreeMode = TreeMode.Fixed });
                    Assert.Equal("ngram", s.DrafterName, "drafter name");
                    s.AppendTokens(prompt);
                    var tokens = new List<int>();
                    int drafted = 0;
                    StopReason r = s.Generate(Exactly(n), ev =>
                    {
                        if (ev.HasToken) tokens.Add(ev.Token);
                        if (ev.Drafted) ++drafted;
                        return true;
                    });
                    Assert.Equal(StopReason.MaxTokens, r, "stop reason");
                    Assert.SeqEqual(reference, tokens, "n-gram greedy == plain greedy");
                    Stats st = s.GetStats();
                    Assert.True(st.NSpecRounds > 0 && st.Tau >= 1.0, "n-gram rounds ran (tau " + st.Tau + ")");
                    Assert.True(drafted > 0 && drafted <= st.NAccepted && drafted >= st.NAccepted - 32,
                                "drafted events (" + drafted + ") vs accepted tokens (" + st.NAccepted + ")");

                    // Bad settings are refused and the previous drafter stays attached.
                    Assert.Status(Status.InvalidArgument, () => s.SetSpeculative(new SpeculativeOptions { Ngram = true, NgramNodes = -1 }),
                                  "ngram_nodes -1");
                    Assert.Status(Status.InvalidArgument,
                                  () => s.SetSpeculative(new SpeculativeOptions { Ngram = true, NgramTableN = 1 }), "table n 1");
                    Assert.Equal("ngram", s.DrafterName, "the n-gram drafter is still attached");
                    s.ClearSpeculative();
                    Assert.Equal("", s.DrafterName, "detached");
                    s.SetSpeculative(new SpeculativeOptions());
                    Assert.Equal("", s.DrafterName, "options without drafters detach");
                }

                // An independent draft model (here the target itself: same vocabulary) is exact too, alone and with n-grams.
                using (Model draftModel = LoadModel())
                using (Session s = GreedySession(model))
                {
                    s.SetSpeculative(new SpeculativeOptions { DraftModel = draftModel, TreeWidths = SpeculativeOptions.Chain(4) });
                    Assert.Equal("draft-model", s.DrafterName, "drafter name");
                    draftModel.Dispose();  // the session holds its own reference
                    s.AppendTokens(prompt);
                    Assert.SeqEqual(reference, TokensOf(s.Generate(Exactly(n))), "draft-model greedy == plain greedy");
                    Stats st = s.GetStats();
                    Assert.True(st.NAccepted > 0, "the target as its own draft is accepted");
                }
                using (Model draftModel = LoadModel())
                using (Draft draft = Draft.Load(Program.DraftPath, model))
                using (Session s = GreedySession(model))
                {
                    Assert.Status(Status.InvalidArgument,
                                  () => s.SetSpeculative(new SpeculativeOptions { Draft = draft, DraftModel = draftModel }),
                                  "both a draft and a draft model");
                }
            }
        }

        [Test("batch")]
        private static void BatchGroup()
        {
            // Four sessions on their own threads, their passes combined: each generates what it generates alone.
            const int n = 40;
            string[] prompts = { "Once upon a time", "The little dog", "Lily and Tom went", "One day, a bird" };
            using (Model model = LoadModel())
            using (Draft draft = Draft.Load(Program.DraftPath, model))
            using (Batch batch = new Batch(model, 2))
            {
                int[][] tokens = prompts.Select(p => model.Tokenize(p)).ToArray();
                int[][] reference = tokens.Select(p => Greedy(model, p, n)).ToArray();
                var sessions = new List<Session>();
                var results = new List<int>[prompts.Length];
                var errors = new Exception[prompts.Length];
                try
                {
                    for (int i = 0; i < prompts.Length; ++i)
                    {
                        Session s = GreedySession(model);
                        sessions.Add(s);
                        if (i % 2 == 1) s.SetSpeculative(new SpeculativeOptions { Draft = draft });
                        batch.Join(s);
                    }
                    var threads = new List<Thread>();
                    for (int i = 0; i < prompts.Length; ++i)
                    {
                        int k = i;
                        var t = new Thread(() =>
                        {
                            try
                            {
                                sessions[k].AppendTokens(tokens[k]);
                                results[k] = TokensOf(sessions[k].Generate(Exactly(n)));
                            }
                            catch (Exception e) { errors[k] = e; }
                        });
                        t.Start();
                        threads.Add(t);
                    }
                    foreach (Thread t in threads) t.Join();
                    for (int i = 0; i < prompts.Length; ++i)
                    {
                        Assert.True(errors[i] == null, "session " + i + ": " + errors[i]);
                        Assert.SeqEqual(reference[i], results[i], "batched session " + i + " == alone");
                    }
                    BatchStats st = batch.GetStats();
                    Assert.True(st.Passes > 0 && st.Requests > st.Passes && st.Widest >= 2,
                                "passes were shared (" + st.Passes + " passes, " + st.Requests + " requests, widest " + st.Widest + ")");
                    Batch.Leave(sessions[0]);
                }
                finally
                {
                    foreach (Session s in sessions) s.Dispose();
                }
                using (Model other = LoadModel())
                using (Session s = GreedySession(other))
                    Assert.Status(Status.Incompatible, () => batch.Join(s), "a session of another model");
            }
        }

        // ---- cancellation ----------------------------------------------------------------------------------------

        [Test("cancel")]
        private static void Cancel()
        {
            using (Model model = LoadModel())
            {
                int[] prompt = model.Tokenize(Story);
                int[] reference = Greedy(model, prompt, 200);

                // 1. A token stream cancelled from another thread while it runs.
                using (Session s = GreedySession(model))
                using (var cts = new CancellationTokenSource())
                using (var reached = new ManualResetEventSlim())
                {
                    var canceller = new Thread(() =>
                    {
                        reached.Wait();
                        cts.Cancel();
                    });
                    canceller.Start();
                    s.AppendTokens(prompt);
                    var events = new List<TokenEvent>();
                    foreach (TokenEvent ev in s.Generate(new GenerateOptions(-1) { StopAtEog = false }, cts.Token))
                    {
                        events.Add(ev);
                        if (events.Count == 20)
                        {
                            reached.Set();
                            Assert.True(cts.Token.WaitHandle.WaitOne(10000), "the other thread cancelled");
                        }
                    }
                    canceller.Join();
                    List<int> got = TokensOf(events);
                    Assert.Equal(StopReason.Cancelled, events.Last().Stop, "the stream ends as cancelled");
                    Assert.Equal(20, got.Count, "a stream that saw the cancel makes no further token");
                    Assert.SeqEqual(reference.Take(got.Count).ToList(), got, "tokens before the cancel");
                    Assert.SeqEqual(Concat(prompt, got), s.Tokens(), "the context holds what was streamed");

                    // The session stays usable and continues exactly where it stopped.
                    var more = new List<int>();
                    StopReason r = s.Generate(Exactly(30), ev => { if (ev.HasToken) more.Add(ev.Token); return true; });
                    Assert.Equal(StopReason.MaxTokens, r, "after the cancel: generation runs to its end");
                    Assert.SeqEqual(reference.Skip(got.Count).Take(30).ToList(), more, "continuation after the cancel");
                }

                // 2. Push style: cancelled from another thread while the library is inside specula_session_generate.
                using (Session s = GreedySession(model))
                using (var cts = new CancellationTokenSource())
                {
                    s.AppendTokens(prompt);
                    var got = new List<int>();
                    Thread canceller = null;
                    StopReason r = s.Generate(Exactly(150), ev =>
                    {
                        if (ev.HasToken) got.Add(ev.Token);
                        if (got.Count == 10)
                        {
                            canceller = new Thread(() => cts.Cancel());
                            canceller.Start();
                            canceller.Join();  // cancelled now; the library sees it at its next step
                        }
                        return true;
                    }, cts.Token);
                    Assert.Equal(StopReason.Cancelled, r, "push-style generation cancelled");
                    Assert.True(got.Count >= 10 && got.Count <= 11, "stopped at the next step: " + got.Count + " tokens");
                    Assert.SeqEqual(reference.Take(got.Count).ToList(), got, "tokens before the cancel");
                    var next = TokensOf(s.Generate(new GenerateOptions(got.Count + 5) { StopAtEog = false }));
                    Assert.SeqEqual(reference.Skip(got.Count).Take(5).ToList(), next, "the stream continues after it");
                }

                // 3. Real concurrency: CancelAfter from a timer thread during a slow consumer; no coordination.
                using (Session s = GreedySession(model))
                using (var cts = new CancellationTokenSource())
                {
                    s.AppendTokens(prompt);
                    var watch = Stopwatch.StartNew();
                    cts.CancelAfter(100);
                    List<TokenEvent> events = s.Generate(new GenerateOptions(-1) { StopAtEog = false }, cts.Token)
                                               .Select(ev => { Thread.Sleep(2); return ev; }).ToList();
                    Assert.Equal(StopReason.Cancelled, events.Last().Stop, "timer cancel");
                    Assert.True(TokensOf(events).Count < s.NCtx - prompt.Length, "stopped before the context was full");
                    Assert.True(watch.ElapsedMilliseconds < 3000, "stopped soon: " + watch.ElapsedMilliseconds + " ms");
                    Assert.SeqEqual(reference.Take(Math.Min(200, TokensOf(events).Count)).ToList(),
                                    TokensOf(events).Take(200).ToList(), "tokens before the timer cancel");
                }

                // 4. An already-cancelled token stops at once; the request is consumed, the next run is normal.
                using (Session s = GreedySession(model))
                {
                    s.AppendTokens(prompt);
                    List<TokenEvent> events = s.Generate(10, new CancellationToken(true)).ToList();
                    Assert.Equal(1, events.Count, "one event");
                    Assert.True(!events[0].HasToken && events[0].Stop == StopReason.Cancelled, "cancelled before any token");
                    Assert.SeqEqual(reference.Take(10).ToList(), TokensOf(s.Generate(Exactly(10))), "the next run is not cancelled");
                }

                // 5. Cancelled after the last step (the consumer breaks out): the request must not leak into the next run.
                using (Session s = GreedySession(model))
                using (var cts = new CancellationTokenSource())
                {
                    s.AppendTokens(prompt);
                    int count = 0;
                    foreach (TokenEvent ev in s.Generate(Exactly(100), cts.Token))
                    {
                        if (++count == 5)
                        {
                            cts.Cancel();  // specula_session_cancel runs now, while no call is in flight
                            break;
                        }
                    }
                    List<TokenEvent> events = s.Generate(Exactly(10)).ToList();
                    Assert.True(events[0].HasToken && events[0].Stop == StopReason.None, "the next stream is not cancelled: " + events[0]);
                    Assert.SeqEqual(reference.Skip(5).Take(5).ToList(), TokensOf(events), "and continues after the 5 tokens");
                }

                // 6. Evaluate with a cancelled token throws Cancelled; the session then evaluates normally.
                using (Session s = GreedySession(model))
                {
                    s.AppendTokens(prompt);
                    Assert.Status(Status.Cancelled, () => s.Evaluate(new CancellationToken(true)), "cancelled evaluation");
                    s.Evaluate();
                    Assert.True(s.Logits() != null, "evaluated");
                    s.Cancel();  // a direct request is consumed by the next run, as in C
                    Assert.Equal(StopReason.Cancelled, s.Next().Stop, "a pending Cancel() stops the next step");
                    Assert.Equal(reference[0], s.Next(Exactly(5)).Token, "then generation goes on");
                }
            }
        }

        // ---- errors ----------------------------------------------------------------------------------------------

        [Test("errors")]
        private static unsafe void Errors()
        {
            SpeculaException e = Assert.Status(Status.Io, () => Model.Load("/nonexistent/dir/model.gguf"), "missing model file");
            Assert.True(e.Message != Library.StatusString(Status.Io), "the library's message, not just the status: " + e.Message);
            Assert.True(e.ToString().Contains("Io"), "ToString names the status");

            string notGguf = Tmp("not.gguf");
            File.WriteAllText(notGguf, "this is not a GGUF file, just some text that is long enough to be read");
            Assert.Status(Status.Format, () => Model.Load(notGguf), "a file that is not a GGUF");
            string truncated = Tmp("truncated.gguf");
            byte[] bytes = File.ReadAllBytes(Program.ModelPath);
            File.WriteAllBytes(truncated, bytes.Take(bytes.Length / 2).ToArray());
            Assert.Status(Status.Format, () => Model.Load(truncated), "a truncated GGUF");
            Assert.Throws<ArgumentNullException>(() => Model.Load(null), "null path");

            // Progress callbacks: false cancels; an exception cancels and comes back unchanged.
            Assert.Status(Status.Cancelled, () => Model.Load(Program.ModelPath, new ModelOptions { Progress = p => false }),
                          "progress returned false");
            var thrown = Assert.Throws<InvalidOperationException>(
                () => Model.Load(Program.ModelPath, new ModelOptions { Progress = p => { throw new InvalidOperationException("from progress"); } }),
                "progress threw");
            Assert.Equal("from progress", thrown.Message, "the callback's exception");

            using (Model model = LoadModel())
            {
                Assert.Status(Status.Io, () => Draft.Load("/nonexistent/draft.gguf", model), "missing draft");
                Assert.Status(Status.Format, () => Draft.Load(Program.ModelPath, model), "a model is not a LongSpec draft");

                using (Session s = GreedySession(model, 16))
                {
                    Assert.Equal(16, s.NCtx, "n_ctx");
                    Assert.Status(Status.InvalidToken, () => s.AppendTokens(1, 99999), "token outside the vocabulary");
                    Assert.Status(Status.InvalidToken, () => s.AppendTokens(-5), "negative token");
                    Assert.Equal(0, s.NTokens, "nothing appended");
                    Assert.Status(Status.ContextFull, () => s.AppendTokens(Enumerable.Repeat(300, 17).ToArray()), "17 tokens in 16");
                    Assert.Equal(0, s.NTokens, "nothing appended");
                    s.AppendTokens(Enumerable.Repeat(300, 14).ToArray());
                    List<TokenEvent> events = s.Generate(Exactly(10)).ToList();
                    Assert.Equal(StopReason.ContextFull, events.Last().Stop, "generation stops at a full context");
                    Assert.Equal(16, s.NTokens, "the context is full");
                    Assert.Equal(StopReason.ContextFull, s.Generate(Exactly(10), null), "push style: context full is a stop reason");
                    Assert.Status(Status.ContextFull, () => s.AppendText("more"), "appending to a full context");
                    Assert.Status(Status.InvalidArgument, () => s.Rewind(17), "rewind past the end");
                    Assert.Status(Status.InvalidArgument, () => s.SetSampler(new SamplerOptions { ContextPenalty = 0 }),
                                  "context penalty 0");
                    Assert.Status(Status.Format, () => s.Load(new byte[] { 1, 2, 3, 4, 5, 6, 7, 8 }), "garbage snapshot");
                    Assert.Status(Status.Io, () => s.LoadFile("/nonexistent/snapshot"), "missing snapshot file");
                }

                // With ContextPolicy.Shift a full context drops old tokens instead of stopping.
                SessionOptions shifting = CpuOptions(16);
                shifting.ContextPolicy = ContextPolicy.Shift;
                shifting.NKeep = 2;
                using (Session s = new Session(model, shifting, SamplerOptions.Greedy()))
                {
                    s.AppendTokens(Enumerable.Repeat(300, 14).ToArray());
                    List<TokenEvent> shifted = s.Generate(Exactly(30)).ToList();
                    Assert.Equal(StopReason.MaxTokens, shifted.Last().Stop, "generation goes on past a full context");
                    Assert.Equal(30, shifted.Count(ev => ev.HasToken), "30 tokens");
                    Stats shiftStats = s.GetStats();
                    Assert.True(shiftStats.NContextShifts >= 3 && shiftStats.NDiscardedTokens == 7L * shiftStats.NContextShifts,
                                "shifts of 7 tokens: " + shiftStats.NContextShifts + ", " + shiftStats.NDiscardedTokens);
                    Assert.True(s.NTokens <= 16, "the context stays within n_ctx");
                }
                shifting.NKeep = 15;
                Assert.Status(Status.InvalidArgument, () => new Session(model, shifting, null), "n_keep leaves no room");

                // A token callback's exception stops generation and is rethrown; the session stays usable.
                using (Session s = GreedySession(model))
                {
                    s.AppendText(Story);
                    int calls = 0;
                    var ex = Assert.Throws<FormatException>(() => s.Generate(Exactly(50), ev =>
                    {
                        if (++calls == 3) throw new FormatException("from the token callback");
                        return true;
                    }), "token callback threw");
                    Assert.Equal("from the token callback", ex.Message, "the callback's exception");
                    Assert.Equal(3, calls, "no call after the exception");
                    int stopAfter = 0;
                    Assert.Equal(StopReason.Callback, s.Generate(Exactly(50), ev => ++stopAfter < 4), "returning false stops");
                    Assert.Equal(4, stopAfter, "calls until false");
                    Assert.True(s.Generate(Exactly(5)).Count(ev => ev.HasToken) > 0, "the session still generates");
                }

                // The C ABI's own argument checks, through the raw P/Invoke layer: struct_size below 4, NULL out.
                NativeMethods.specula_session_options so;
                NativeMethods.specula_session_options_init(&so);
                so.struct_size = 2;
                SessionHandle raw;
                ErrorHandle err;
                Status st = NativeMethods.specula_session_create(model.Handle, &so, null, out raw, out err);
                Assert.Equal(Status.InvalidArgument, st, "struct_size 2");
                Assert.True(raw == null || raw.IsInvalid, "no session on failure");
                Assert.Equal(Status.InvalidArgument, NativeMethods.specula_error_status(err), "the error object's status");
                Assert.True(Utf8.FromNative(NativeMethods.specula_error_message(err)).Length > 0, "the error object's message");
                err.Dispose();
                so.struct_size = (uint)sizeof(NativeMethods.specula_session_options);
                so.backend = (int)Backend.Cpu;
                st = NativeMethods.specula_session_create(model.Handle, &so, null, out raw, out err);
                Assert.Equal(Status.Ok, st, "struct_size right");
                Assert.True(err.IsInvalid, "*err is NULL on success");
                raw.Dispose();

                Assert.Status(Status.InvalidArgument, () => Library.GetDevice(Backend.Cpu, 0), "device info of the CPU");
                Assert.Status(Status.Unsupported, () => model.ApplyChatTemplate(new[] { new ChatMessage("user", "hi") }),
                              "a model without a chat template");
                Assert.Throws<ArgumentNullException>(() => new Session(null), "null model");
            }

            string file = Tmp("a-file");
            File.WriteAllText(file, "x");
            Assert.Status(Status.Io, () => new PromptCache(Path.Combine(file, "sub")), "a cache directory under a file");
        }

        // ---- lifetime --------------------------------------------------------------------------------------------

        [Test("gc_stress")]
        private static void GcStress()
        {
            const int n = 250;
            using (Model model = LoadModel())
            {
                int[] prompt = model.Tokenize(Story);
                int[] reference = Greedy(model, prompt, n);

                // Push style: full collections from inside the native callback, every token, while finalizers of
                // abandoned sessions and models run on the finalizer thread.
                using (Session s = GreedySession(model))
                {
                    s.AppendTokens(prompt);
                    var got = new List<int>();
                    var garbage = new List<byte[]>();
                    StopReason r = s.Generate(Exactly(n), ev =>
                    {
                        if (ev.HasToken) got.Add(ev.Token);
                        garbage.Add(new byte[1024 * (got.Count % 7 + 1)]);
                        if (garbage.Count > 50) garbage.Clear();
                        if (got.Count % 25 == 0) Abandon(model);
                        GC.Collect();
                        GC.WaitForPendingFinalizers();
                        return true;
                    });
                    Assert.Equal(StopReason.MaxTokens, r, "stop reason");
                    Assert.SeqEqual(reference, got, "tokens under GC pressure (push)");
                }

                // Pull style: collections between the steps, with an enumerator that is itself only reachable from
                // the stack, and stop strings living in native memory owned by the stream.
                using (Session s = GreedySession(model))
                {
                    s.AppendTokens(prompt);
                    var got = new List<int>();
                    var opts = Exactly(n);
                    opts.StopStrings.Add("\u0001never\u0002");  // never matches; its buffer must survive the collections
                    foreach (TokenEvent ev in s.Generate(opts))
                    {
                        if (ev.HasToken) got.Add(ev.Token);
                        GC.Collect();
                        GC.WaitForPendingFinalizers();
                    }
                    Assert.SeqEqual(reference, got, "tokens under GC pressure (stream)");
                }

                // Progress and log callbacks under collections.
                var messages = new List<string>();
                Library.SetLogHandler((level, message) =>
                {
                    lock (messages) messages.Add(message);
                    GC.Collect();
                }, LogLevel.Debug);
                try
                {
                    for (int i = 0; i < 3; ++i)
                    {
                        int calls = 0;
                        using (Model m = Model.Load(Program.ModelPath, new ModelOptions
                               {
                                   Progress = p => { ++calls; GC.Collect(); GC.WaitForPendingFinalizers(); return true; }
                               }))
                        {
                            Assert.True(calls > 0, "progress calls");
                        }
                        FullGc();
                    }
                }
                finally
                {
                    Library.SetLogHandler(null);
                }
                Assert.True(messages.Count >= 3, "log messages arrived under GC pressure: " + messages.Count);
            }
            FullGc();
        }

        /// <summary>Objects left to the finalizers (no Dispose): each releases its own reference, in any order.</summary>
        private static void Abandon(Model model)
        {
            Session s = GreedySession(model);
            s.AppendText("abandoned");
            Model extra = model.AddReference();
            Session s2 = new Session(extra, CpuOptions());
            GC.KeepAlive(s);
            GC.KeepAlive(s2);
        }

        [Test("dispose_order")]
        private static void DisposeOrder()
        {
            const int n = 50;
            int[] reference;
            int[] prompt;
            using (Model m = LoadModel())
            {
                prompt = m.Tokenize(LilyPrompt);
                reference = Greedy(m, prompt, n);
            }

            // Model and draft disposed before the session: specula.h says sessions hold their own references.
            Model model = LoadModel();
            Session session = GreedySession(model);
            Draft draft = Draft.Load(Program.DraftPath, model);
            session.SetSpeculative(draft, true);
            draft.Dispose();
            model.Dispose();
            Assert.True(model.IsDisposed && draft.IsDisposed, "model and draft disposed");
            FullGc();
            Assert.Equal(512, session.Model.NVocab, "the session's model is alive");
            Assert.Equal("longspec+ngram", session.DrafterName, "the drafters stay attached");
            session.AppendTokens(prompt);
            Assert.SeqEqual(reference, TokensOf(session.Generate(Exactly(n))), "generation after the model was disposed");
            Assert.Throws<ObjectDisposedException>(() => model.Tokenize("x"), "a disposed model throws");
            Assert.Throws<ObjectDisposedException>(() => Draft.Load(Program.DraftPath, model), "loading a draft for a disposed model");
            Assert.Throws<ObjectDisposedException>(() => new Session(model), "a session on a disposed model");
            model.Dispose();  // twice is fine
            draft.Dispose();

            // A stream whose session goes away: the next step throws ObjectDisposedException, nothing crashes.
            session.Rewind(prompt.Length);
            IEnumerator<TokenEvent> stream = session.Generate(Exactly(n)).GetEnumerator();
            Assert.True(stream.MoveNext() && stream.Current.HasToken, "first step");
            session.Dispose();
            Assert.True(session.IsDisposed && session.Model.IsDisposed, "session and its model reference disposed");
            Assert.Throws<ObjectDisposedException>(() => stream.MoveNext(), "a step after Dispose");
            stream.Dispose();
            Assert.Throws<ObjectDisposedException>(() => session.AppendText("x"), "a disposed session throws");
            Assert.Throws<ObjectDisposedException>(() => session.Generate(5), "Generate on a disposed session");
            session.Cancel();  // a no-op, never a use after free
            session.Dispose();

            // Cancel from another thread racing with Dispose: the SafeHandle keeps destroy after every cancel call.
            using (Model m = LoadModel())
            {
                for (int round = 0; round < 20; ++round)
                {
                    Session s = GreedySession(m);
                    s.AppendTokens(prompt);
                    var stop = new ManualResetEventSlim();
                    int cancels = 0;
                    var canceller = new Thread(() =>
                    {
                        while (!stop.IsSet)
                        {
                            s.Cancel();
                            ++cancels;
                        }
                    });
                    canceller.Start();
                    while (cancels < 10) Thread.Yield();
                    s.Generate(Exactly(20)).ToList();  // mostly cancelled at once; fine either way
                    s.Dispose();
                    for (int i = 0; i < 100; ++i) s.Cancel();
                    stop.Set();
                    canceller.Join();
                }
            }

            // Everything left to the finalizers, many times, in whatever order they run.
            for (int round = 0; round < 10; ++round)
            {
                LeakEverything(prompt);
                FullGc();
            }
        }

        private static void LeakEverything(int[] prompt)
        {
            Model m = LoadModel();
            Session s = GreedySession(m);
            Draft d = Draft.Load(Program.DraftPath, m);
            s.SetSpeculative(d);
            s.AppendTokens(prompt);
            s.Generate(Exactly(3)).ToList();
            var cache = new PromptCache(Tmp("leaked-cache"));
            cache.Store(s);
            IEnumerator<TokenEvent> e = s.Generate(Exactly(100)).GetEnumerator();
            e.MoveNext();  // an abandoned stream: its native stop-string buffer and registration are finalized too
        }

        // ---- snapshots and caches --------------------------------------------------------------------------------

        [Test("snapshots")]
        private static void Snapshots()
        {
            using (Model model = LoadModel())
            {
                // Sampling at temperature 1: an exact resume needs the sampler's random state too.
                var sampler = new SamplerOptions { Temperature = 1.0f, Seed = 3 };
                var other = new SamplerOptions { Temperature = 1.0f, Seed = 4 };
                using (Session a = new Session(model, CpuOptions(), sampler))
                using (Session b = new Session(model, CpuOptions(), other))
                using (Session c = new Session(model, CpuOptions(), other))
                using (Session d = new Session(model, CpuOptions(), other))
                {
                    a.AppendText(Story);
                    a.Generate(Exactly(8)).ToList();
                    byte[] snapshot = a.Save();
                    Assert.True(snapshot.Length > 100, "snapshot bytes: " + snapshot.Length);

                    byte[] damaged = (byte[])snapshot.Clone();
                    damaged[damaged.Length / 2] ^= 1;
                    Assert.Status(Status.Format, () => b.Load(damaged), "a damaged snapshot");
                    Assert.Equal(0, b.NTokens, "the session is unchanged after a refused load");
                    b.Load(snapshot);
                    Assert.SeqEqual(a.Tokens(), b.Tokens(), "loaded context");

                    string path = Tmp("a.snapshot");
                    a.SaveFile(path, new SnapshotOptions { CompressionLevel = 3 });
                    Assert.True(File.Exists(path) && new FileInfo(path).Length > 100, "snapshot file");
                    c.LoadFile(path);
                    a.ForkInto(d);

                    // All four continue identically (same tokens at temperature 1).
                    List<int> ta = TokensOf(a.Generate(Exactly(24))), tb = TokensOf(b.Generate(Exactly(24)));
                    List<int> tc = TokensOf(c.Generate(Exactly(24))), td = TokensOf(d.Generate(Exactly(24)));
                    Assert.True(ta.Count > 0, "tokens after the snapshot");
                    Assert.SeqEqual(ta, tb, "buffer snapshot resumes exactly");
                    Assert.SeqEqual(ta, tc, "file snapshot resumes exactly");
                    Assert.SeqEqual(ta, td, "fork resumes exactly");
                    Assert.Equal(a.GetStats().NGenerated, b.GetStats().NGenerated, "Full snapshots carry the stats");
                }

                // A Context snapshot keeps the receiving session's sampler; its tokens count as restored.
                using (Session a = GreedySession(model))
                using (Session b = GreedySession(model))
                {
                    a.AppendText(Story);
                    a.Evaluate();
                    byte[] context = a.Save(new SnapshotOptions(SnapshotScope.Context));
                    b.Load(context);
                    Assert.Equal(a.NTokens, b.GetStats().NRestoredTokens, "restored tokens");
                    Assert.SeqEqual(TokensOf(a.Generate(Exactly(10))), TokensOf(b.Generate(Exactly(10))),
                                    "greedy continuation of a Context snapshot");
                }

                // Snapshots are bound to their model file.
                string synthetic = Tmp("tiny.gguf");
                Library.WriteSyntheticModel("tiny-llama", Program.ModelPath, synthetic,
                                            new SyntheticOptions { WeightType = "f32", NLayer = 1 });
                using (Model tiny = Model.Load(synthetic))
                using (Session a = GreedySession(model))
                using (Session t = new Session(tiny, CpuOptions(), SamplerOptions.Greedy()))
                {
                    a.AppendText(Story);
                    a.Evaluate();
                    byte[] snapshot = a.Save();
                    Assert.Status(Status.Incompatible, () => t.Load(snapshot), "a snapshot of another model");
                }
            }
        }

        [Test("prompt_cache")]
        private static void PromptCacheTest()
        {
            using (Model model = LoadModel())
            using (var cache = new PromptCache(Tmp("cache"), new PromptCacheOptions { MaxBytes = 64UL << 20 }))
            {
                int[] prompt = model.Tokenize(LilyPrompt);
                int[] reference = Greedy(model, prompt, 20);
                using (Session s = GreedySession(model))
                {
                    Assert.Equal(0, cache.Restore(s, prompt), "a miss on an empty cache");
                    s.AppendTokens(prompt);
                    s.Evaluate();
                    cache.Store(s);
                }
                PromptCacheStats st = cache.GetStats();
                Assert.Equal(1L, st.Stores, "stores");
                Assert.Equal(1L, st.Misses, "misses");
                Assert.True(st.NEntries >= 1 && st.Bytes > 0, "entries on disk");

                using (Session s = GreedySession(model))
                {
                    int restored = cache.Restore(s, prompt);
                    Assert.True(restored > prompt.Length / 2 && restored <= prompt.Length, "restored the prefix: " + restored);
                    Assert.Equal(restored, s.NTokens, "the context holds the restored prefix");
                    s.AppendTokens(prompt.Skip(restored).ToArray());
                    Assert.SeqEqual(reference, TokensOf(s.Generate(Exactly(20))), "generation after a restore");
                    Assert.Equal(restored, s.GetStats().NRestoredTokens, "the session counts the restored tokens");
                }
                using (Session s = GreedySession(model))
                {
                    Assert.Equal(0, cache.Restore(s, new[] { 300, 301, 302 }), "an unrelated prompt misses");
                }
                st = cache.GetStats();
                Assert.Equal(1L, st.Hits, "hits");
                Assert.Equal(2L, st.Misses, "misses");
                Assert.True(st.RestoredTokens > 0, "restored tokens");

                // One cache from several threads (each with its own session): calls are serialised.
                var threads = Enumerable.Range(0, 2).Select(i => new Thread(() =>
                {
                    using (Session s = GreedySession(model))
                        for (int k = 0; k < 5; ++k) cache.Restore(s, prompt);
                })).ToList();
                threads.ForEach(t => t.Start());
                threads.ForEach(t => t.Join());
                Assert.Equal(11L, cache.GetStats().Hits, "hits from two threads");
            }
        }

        // ---- chat, options, devices, synthetic models, logging ----------------------------------------------------

        [Test("chat_template")]
        private static void ChatTemplate()
        {
            IList<string> builtins = Library.ChatTemplateBuiltins;
            Assert.True(builtins.Contains("chatml") && builtins.Contains("llama3"), "built-ins: " + string.Join(" ", builtins));
            var messages = new[]
            {
                new ChatMessage("system", "You are terse."), new ChatMessage("user", "Héllo ✓"),
            };
            string chatml = Model.ApplyChatTemplate("chatml", messages);
            Assert.Equal("<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHéllo ✓<|im_end|>\n<|im_start|>assistant\n",
                         chatml, "chatml");
            string noAssistant = Model.ApplyChatTemplate("chatml", messages, false);
            Assert.True(!noAssistant.EndsWith("assistant\n", StringComparison.Ordinal), "without the assistant opening");
            Assert.True(Model.ApplyChatTemplate("llama3", messages).Contains("<|start_header_id|>user<|end_header_id|>"), "llama3");
            Assert.Equal("", Model.ApplyChatTemplate("chatml", new ChatMessage[0], false), "no messages");
            Assert.Equal("chatml", Model.DetectChatTemplate("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"),
                         "detect chatml");
            Assert.True(Model.DetectChatTemplate("no template here") == null, "nothing detected");
            var hi = new[] { new ChatMessage("user", "hi") };
            Assert.Equal("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
                         Model.FormatChat("qwen3", hi, false), "qwen3 with thinking off");
            Assert.Equal(Model.ApplyChatTemplate("qwen3", hi), Model.FormatChat("qwen3", hi, true), "qwen3 with thinking on");
            Assert.Status(Status.Unsupported, () => Model.ApplyChatTemplate("no such family", messages), "unknown family");
            Assert.Throws<ArgumentException>(() => Model.ApplyChatTemplate("chatml", new[] { new ChatMessage(null, "x") }), "null role");
            using (Model model = LoadModel())
            {
                Assert.True(model.ChatTemplateFamily == null, "stories260K has no chat template");
                Assert.Equal(chatml, model.ApplyChatTemplate(messages, true, "chatml"), "an explicit template on a model");
                // Jinja mode (since 0.18): ChatML's Jinja gives the chatml family's text; a template of no known family
                // renders as its program says; one that does not parse is Unsupported.
                Assert.Equal(chatml, model.FormatChatJinja(messages, null, true, "chatml"), "chatml as Jinja");
                Assert.Equal("<user>hi", model.FormatChatJinja(hi, null, true, "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"),
                             "a template of no known family, as Jinja");
                Assert.Status(Status.Unsupported, () => model.FormatChatJinja(hi, null, true, "{% if %}"), "Jinja that does not parse");
            }
        }

        [Test("generate_options")]
        private static void GenerateOptionsTest()
        {
            using (Model model = LoadModel())
            {
                int[] prompt = model.Tokenize(Story);
                string plainText;
                using (Session s = GreedySession(model))
                {
                    s.AppendTokens(prompt);
                    plainText = TextOf(s.Generate(Exactly(40)));
                }
                int at = plainText.IndexOf("was", StringComparison.Ordinal);
                Assert.True(at > 0, "the story has a \"was\": " + plainText);

                // A stop string: the text stops right before it.
                using (Session s = GreedySession(model))
                {
                    s.AppendTokens(prompt);
                    var opts = Exactly(40);
                    opts.StopStrings = new List<string> { "was", "never appears" };
                    List<TokenEvent> events = s.Generate(opts).ToList();
                    Assert.Equal(StopReason.StopString, events.Last().Stop, "stop reason");
                    Assert.Equal(plainText.Substring(0, at), TextOf(events), "text up to the stop string");
                }
                using (Session s = GreedySession(model))
                {
                    s.AppendTokens(prompt);
                    var text = new StringBuilder();
                    var opts = Exactly(40);
                    opts.StopStrings.Add("was");
                    Assert.Equal(StopReason.StopString, s.Generate(opts, ev => { text.Append(ev.Text); return true; }),
                                 "push style stop string");
                    Assert.Equal(plainText.Substring(0, at), text.ToString(), "push style text");
                }

                // Top logits: greedy picks the first; they come sorted; Logits() agrees.
                using (Session s = GreedySession(model))
                {
                    s.AppendTokens(prompt);
                    s.Evaluate();
                    float[] logits = s.Logits();
                    Assert.Equal(512, logits.Length, "logits");
                    int argmax = Array.IndexOf(logits, logits.Max());
                    var opts = Exactly(10);
                    opts.TopLogits = 8;
                    List<TokenEvent> events = s.Generate(opts).Where(e => e.HasToken).ToList();
                    Assert.Equal(argmax, events[0].Token, "greedy takes the argmax of Logits()");
                    Assert.Equal(logits[argmax], events[0].TopLogits[0], "the top logit is the logit");
                    foreach (TokenEvent ev in events)
                    {
                        Assert.Equal(8, ev.TopIds.Length, "8 top ids");
                        Assert.Equal(ev.Token, ev.TopIds[0], "greedy token == top id");
                        for (int k = 1; k < 8; ++k) Assert.True(ev.TopLogits[k] <= ev.TopLogits[k - 1], "sorted");
                    }
                    s.Rewind(0);
                    Assert.True(s.Logits() == null, "no logits after a rewind");
                    Assert.Equal(0, s.NTokens, "cleared");
                }

                // The stream's max_tokens counts since the last append (specula_session_next), the callback's per call.
                using (Session s = GreedySession(model))
                {
                    s.AppendTokens(prompt);
                    Assert.Equal(10, TokensOf(s.Generate(Exactly(10))).Count, "10 tokens");
                    List<TokenEvent> again = s.Generate(Exactly(10)).ToList();
                    Assert.True(again.Count == 1 && !again[0].HasToken && again[0].Stop == StopReason.MaxTokens,
                                "the stream's limit was reached already");
                    Assert.Equal(5, TokensOf(s.Generate(Exactly(15))).Count, "5 more, up to 15 since the append");
                    int pushed = 0;
                    s.Generate(Exactly(7), ev => { if (ev.HasToken) ++pushed; return true; });
                    Assert.Equal(7, pushed, "push style counts per call");
                    Assert.Equal(prompt.Length + 22, s.NTokens, "context");
                }

                // Sampling: the same seed gives the same tokens, another seed (almost surely) others.
                Func<ulong, List<int>> sample = seed =>
                {
                    using (Session s = new Session(model, CpuOptions(), new SamplerOptions { Temperature = 1.0f, Seed = seed, TopK = 0 }))
                    {
                        s.AppendTokens(prompt);
                        return TokensOf(s.Generate(Exactly(30)));
                    }
                };
                Assert.SeqEqual(sample(11), sample(11), "same seed, same tokens");
                Assert.True(!sample(11).SequenceEqual(sample(12)), "another seed, other tokens");
            }
        }

        [Test("devices")]
        private static void Devices()
        {
            Assert.Equal(0, Library.DeviceCount(Backend.Cpu), "no CPU devices");
            Assert.True(Library.BackendUnavailableReason(Backend.Cpu) == null, "the CPU is always usable");
            int cuda = Library.DeviceCount(Backend.Cuda);
            Assert.True(cuda >= 0, "cuda devices");
            IList<DeviceInfo> devices = Library.Devices(Backend.Cuda);
            Assert.Equal(cuda, devices.Count, "device list");
            string reason = Library.BackendUnavailableReason(Backend.Cuda);
            Assert.Equal(cuda > 0, reason == null, "CUDA usable iff it has devices (" + reason + ")");
            for (int i = 0; i < devices.Count; ++i)
            {
                DeviceInfo d = devices[i];
                Assert.Equal(Backend.Cuda, d.Backend, "backend");
                Assert.Equal(i, d.Index, "index");
                Assert.True(d.Name.Length > 0 && d.TotalMemory > 0 && d.ComputeCapability >= 50 && d.Multiprocessors > 0,
                            "device " + d.Name + " cc " + d.ComputeCapability);
                Console.WriteLine("  CUDA device " + i + ": " + d.Name + ", " + (d.TotalMemory >> 20) + " MiB, cc " +
                                  d.ComputeCapability);
            }
            Assert.Status(Status.InvalidArgument, () => Library.GetDevice(Backend.Cuda, cuda), "device index out of range");

            // Vulkan the same way: none without a Vulkan backend or driver (the reason says which), or its devices.
            int vulkan = Library.DeviceCount(Backend.Vulkan);
            Assert.True(vulkan >= 0, "vulkan devices");
            IList<DeviceInfo> vulkanDevices = Library.Devices(Backend.Vulkan);
            Assert.Equal(vulkan, vulkanDevices.Count, "Vulkan device list");
            string vulkanReason = Library.BackendUnavailableReason(Backend.Vulkan);
            Assert.Equal(vulkan > 0, vulkanReason == null, "Vulkan usable iff it has devices (" + vulkanReason + ")");
            if (vulkanReason != null) Assert.True(vulkanReason.StartsWith("Vulkan: ", StringComparison.Ordinal), "reason: " + vulkanReason);
            for (int i = 0; i < vulkanDevices.Count; ++i)
            {
                DeviceInfo d = vulkanDevices[i];
                Assert.Equal(Backend.Vulkan, d.Backend, "backend");
                Assert.Equal(i, d.Index, "index");
                Assert.True(d.Name.Length > 0, "Vulkan device name");
                Console.WriteLine("  Vulkan device " + i + ": " + d.Name + ", " + (d.TotalMemory >> 20) + " MiB");
            }
            Assert.Status(Status.InvalidArgument, () => Library.GetDevice(Backend.Vulkan, vulkan), "Vulkan device index out of range");
            // Auto is usable iff some GPU backend is; else its reason names every one.
            string autoReason = Library.BackendUnavailableReason(Backend.Auto);
            Assert.Equal(cuda > 0 || vulkan > 0, autoReason == null, "Auto usable iff a GPU is (" + autoReason + ")");
            if (autoReason != null)
                Assert.True(autoReason.Contains("CUDA: ") && autoReason.Contains("Vulkan: "), "Auto's reason: " + autoReason);

            using (Model model = LoadModel())
            {
                using (Session s = new Session(model, CpuOptions()))
                {
                    Assert.Equal("cpu", s.BackendName, "CPU session");
                    Assert.Equal("", s.BackendNote, "no note when the backend asked for is used");
                }
                var strict = new SessionOptions { Backend = Backend.Cuda, AllowFallback = false, NThreads = 1 };
                if (cuda == 0)
                {
                    SpeculaException e = Assert.Throws<SpeculaException>(() => new Session(model, strict), "CUDA without a device");
                    Assert.True(e.Status == Status.Unsupported || e.Status == Status.OutOfMemory, "status " + e.Status);
                    using (Session s = new Session(model, new SessionOptions { Backend = Backend.Cuda, NThreads = 1 }))
                    {
                        Assert.Equal("cpu", s.BackendName, "fallback to the CPU");
                        Assert.True(s.BackendNote.Length > 0, "the fallback is explained: " + s.BackendNote);
                    }
                }
                else
                {
                    int[] prompt = model.Tokenize(Story);
                    using (Session s = new Session(model, strict, SamplerOptions.Greedy()))
                    {
                        Assert.Equal("cuda", s.BackendName, "CUDA session");
                        s.AppendTokens(prompt);
                        List<int> got = TokensOf(s.Generate(Exactly(20)));
                        Assert.Equal(20, got.Count, "CUDA generates");
                        Console.WriteLine("  CUDA greedy: " + Assert.Show(got) + " (CPU: " + Assert.Show(Greedy(model, prompt, 20)) + ")");
                    }
                }

                var strictVulkan = new SessionOptions { Backend = Backend.Vulkan, AllowFallback = false, NThreads = 1 };
                if (vulkan == 0)
                {
                    SpeculaException e = Assert.Throws<SpeculaException>(() => new Session(model, strictVulkan), "Vulkan without a device");
                    Assert.True(e.Status == Status.Unsupported || e.Status == Status.OutOfMemory, "status " + e.Status);
                    using (Session s = new Session(model, new SessionOptions { Backend = Backend.Vulkan, NThreads = 1 }))
                    {
                        Assert.Equal("cpu", s.BackendName, "Vulkan falls back to the CPU");
                        Assert.True(s.BackendNote.StartsWith("Vulkan: ", StringComparison.Ordinal), "the fallback is explained: " + s.BackendNote);
                    }
                }
                else
                {
                    using (Session s = new Session(model, strictVulkan, SamplerOptions.Greedy()))
                    {
                        Assert.Equal("vulkan", s.BackendName, "Vulkan session");
                        s.AppendTokens(model.Tokenize(Story));
                        Assert.Equal(20, TokensOf(s.Generate(Exactly(20))).Count, "Vulkan generates");
                    }
                }

                // Auto: the first GPU that can (CUDA, then Vulkan), else the CPU with every GPU backend's reason.
                using (Session s = new Session(model, new SessionOptions { Backend = Backend.Auto, NThreads = 1 }))
                {
                    string note = s.BackendNote;
                    if (s.BackendName == "cpu")
                        Assert.True(note.Contains("CUDA: ") && note.Contains("Vulkan: ") && note.EndsWith("running on the CPU", StringComparison.Ordinal),
                                    "Auto on the CPU names every GPU backend: " + note);
                    else
                        Assert.True((s.BackendName == "cuda" || s.BackendName == "vulkan") && note == "",
                                    "Auto on a GPU (" + s.BackendName + ") has no note: " + note);
                }
            }
        }

        [Test("synthetic")]
        private static void Synthetic()
        {
            IList<string> shapes = Library.SyntheticShapes;
            Assert.True(shapes.Contains("tiny-llama") && shapes.Contains("llama-3.2-1b"), "shapes: " + string.Join(" ", shapes));
            string a = Tmp("a.gguf"), b = Tmp("b.gguf");
            var progress = new List<float>();
            var opts = new SyntheticOptions { WeightType = "f32", NLayer = 1, Seed = 5, Progress = p => { progress.Add(p); return true; } };
            Assert.Equal("q8_0", new SyntheticOptions().WeightType ?? "q8_0", "default weight type");
            Library.WriteSyntheticModel("tiny-llama", Program.ModelPath, a, opts);
            Library.WriteSyntheticModel("tiny-llama", Program.ModelPath, b, opts);
            Assert.True(progress.Count > 0, "progress reported");
            Assert.SeqEqual(File.ReadAllBytes(a), File.ReadAllBytes(b), "same seed, same file");
            using (Model m = Model.Load(a))
            {
                Assert.Equal(1, m.NLayer, "one layer");
                Assert.Equal(256, m.NEmbd, "tiny-llama width");
                Assert.True(m.NVocab >= 512, "the stories vocabulary (padded)");
                Assert.Equal("F32", m.WeightType, "weight type");
                using (Session s = new Session(m, CpuOptions(), SamplerOptions.Greedy()))
                {
                    s.AppendText(Story);
                    Assert.Equal(5, TokensOf(s.Generate(Exactly(5))).Count, "a synthetic model generates");
                }
            }
            string c = Tmp("c.gguf");
            Assert.Status(Status.Cancelled, () => Library.WriteSyntheticModel("tiny-llama", Program.ModelPath, c,
                                                                               new SyntheticOptions { NLayer = 1, Progress = p => false }),
                          "cancelled by progress");
            Assert.True(!File.Exists(c), "no partial file");
            Assert.Status(Status.InvalidArgument, () => Library.WriteSyntheticModel("no-such-shape", Program.ModelPath, c), "unknown shape");
            Assert.Status(Status.InvalidArgument,
                          () => Library.WriteSyntheticModel("tiny-llama", Program.ModelPath, c, new SyntheticOptions { WeightType = "q3_x" }),
                          "unknown weight type");
        }

        [Test("example")]
        private static void Example()
        {
            // The README's example program (examples/Example.cs) prints the greedy story and a summary line.
            var output = new StringWriter();
            StopReason stop = SpeculaExample.Program.Run(Program.ModelPath, Story, 30, output, CancellationToken.None);
            Assert.True(stop == StopReason.MaxTokens || stop == StopReason.Eos, "stop reason " + stop);
            string[] lines = output.ToString().TrimEnd('\n').Split('\n');
            using (Model model = LoadModel())
            using (Session s = GreedySession(model))
            {
                s.AppendText(Story);
                string expected = Story + TextOf(s.Generate(30));
                Assert.Equal(expected, string.Join("\n", lines.Take(lines.Length - 1)), "the example's story");
            }
            Assert.True(Regex.IsMatch(lines.Last(), @"^\[(max_tokens|eos): \d+ tokens, \d+ tokens/s, [0-9.]+ tokens per target pass\]$"),
                        "summary line: " + lines.Last());
        }

        [Test("logging")]
        private static void Logging()
        {
            var messages = new List<KeyValuePair<LogLevel, string>>();
            Action<LogLevel, string> handler = (level, message) => { lock (messages) messages.Add(new KeyValuePair<LogLevel, string>(level, message)); };
            try
            {
                Library.SetLogHandler(handler, LogLevel.Info);
                using (Model m = LoadModel()) { }
                Assert.True(messages.Any(kv => kv.Key == LogLevel.Info && kv.Value.Contains("loaded")),
                            "the load was logged: " + string.Join(" | ", messages.Select(kv => kv.Value)));
                Assert.True(messages.All(kv => kv.Key >= LogLevel.Info && !kv.Value.EndsWith("\n", StringComparison.Ordinal)),
                            "levels at or above Info, no trailing newline");

                int before = messages.Count;
                Library.SetLogHandler(handler, LogLevel.Error);
                using (Model m = LoadModel()) { }
                Assert.Equal(before, messages.Count, "Info messages filtered at Error");

                Library.SetLogHandler((level, message) => { throw new InvalidOperationException("a bad handler"); }, LogLevel.Debug);
                using (Model m = LoadModel()) { Assert.Equal(512, m.NVocab, "a throwing log handler does not break the load"); }

                Library.SetLogHandler(null);
                before = messages.Count;
                using (Model m = LoadModel()) { }
                Assert.Equal(before, messages.Count, "silenced");
            }
            finally
            {
                Library.SetLogHandler(null);
            }
        }
    }
}
