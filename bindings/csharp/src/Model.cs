// Model.cs - a loaded model: tokenizer, metadata, tensors, chat templates.
using System;
using System.Collections.Generic;
using System.Text;

namespace Specula
{
    /// <summary>One tensor of a model file (specula_tensor_info).</summary>
    public sealed class TensorInfo
    {
        public string Name { get; internal set; }
        /// <summary>"F32", "Q4_0", ...</summary>
        public string Type { get; internal set; }
        /// <summary>ggml order: Dims[0] is the contiguous (row) dimension.</summary>
        public long[] Dims { get; internal set; }
        /// <summary>Byte offset of the data in the file.</summary>
        public ulong Offset { get; internal set; }
        public ulong NBytes { get; internal set; }
    }

    /// <summary>One message of a conversation for <see cref="Model.ApplyChatTemplate"/>.</summary>
    public sealed class ChatMessage
    {
        public ChatMessage(string role, string content) { Role = role; Content = content; }
        /// <summary>"system", "user", "assistant", ...</summary>
        public string Role { get; set; }
        public string Content { get; set; }
    }

    /// <summary>
    /// A loaded GGUF model (specula_model). Immutable and reference counted by the library: every member is
    /// thread-safe, and many sessions on many threads may share one Model. Sessions and drafts keep their own
    /// references, so disposing a Model while sessions created from it live is allowed (they keep working).
    /// Dispose releases this object's reference; the finalizer does it if you forget.
    /// </summary>
    public sealed class Model : IDisposable
    {
        /// <summary>SPECULA_TOKEN_NULL: "no such token".</summary>
        public const int TokenNull = NativeMethods.TokenNull;

        private readonly ModelHandle handle;

        internal Model(ModelHandle handle) { this.handle = handle; }

        /// <summary>The SafeHandle owning this object's reference, for interop with other native code.</summary>
        public ModelHandle Handle { get { return handle; } }

        /// <summary>
        /// Loads a GGUF model. Throws SpeculaException (Io, Format, Unsupported, OutOfMemory, Cancelled), or what
        /// the progress callback threw. Thread-safe.
        /// </summary>
        public static unsafe Model Load(string path, ModelOptions options = null)
        {
            if (path == null) throw new ArgumentNullException("path");
            Library.EnsureAbi();
            options = options ?? new ModelOptions();
            byte[] cpath = Utf8.Z(path);
            ModelHandle model = null;
            ErrorHandle err = null;
            try
            {
                Status st = Callbacks.WithProgress(options.Progress, (fn, user) =>
                {
                    NativeMethods.specula_model_options c;
                    NativeMethods.specula_model_options_init(&c);
                    c.use_mmap = options.UseMmap ? 1 : 0;
                    c.vocab_only = options.VocabOnly ? 1 : 0;
                    c.progress = fn;
                    c.progress_user_data = user;
                    return NativeMethods.specula_model_load(cpath, &c, out model, out err);
                });
                SpeculaException.Check(st, err);
                err = null;
                var result = new Model(model);
                model = null;
                return result;
            }
            finally
            {
                if (err != null) err.Dispose();
                if (model != null) model.Dispose();
            }
        }

        /// <summary>
        /// A second, independent reference to the same loaded model (specula_model_retain): the native model lives
        /// until both are disposed. Drafts loaded for either may be attached to sessions of either.
        /// </summary>
        public Model AddReference() { return new Model(NativeMethods.specula_model_retain(handle)); }

        public void Dispose() { handle.Dispose(); }

        public bool IsDisposed { get { return handle.IsClosed; } }

        // ---- information (thread-safe) --------------------------------------------------------------------------

        /// <summary>"llama", "qwen2", ...</summary>
        public string Arch { get { return Utf8.FromNative(NativeMethods.specula_model_arch(handle)); } }
        /// <summary>general.name or "".</summary>
        public string Name { get { return Utf8.FromNative(NativeMethods.specula_model_name(handle)); } }
        public int NVocab { get { return NativeMethods.specula_model_n_vocab(handle); } }
        public int NCtxTrain { get { return NativeMethods.specula_model_n_ctx_train(handle); } }
        public int NLayer { get { return NativeMethods.specula_model_n_layer(handle); } }
        public int NEmbd { get { return NativeMethods.specula_model_n_embd(handle); } }
        public int NHead { get { return NativeMethods.specula_model_n_head(handle); } }
        public int NHeadKv { get { return NativeMethods.specula_model_n_head_kv(handle); } }
        public int NFf { get { return NativeMethods.specula_model_n_ff(handle); } }
        public ulong NParams { get { return NativeMethods.specula_model_n_params(handle); } }
        public ulong FileSize { get { return NativeMethods.specula_model_file_size(handle); } }
        /// <summary>The weight format ("Q4_K_M", "F16", "F32", ...).</summary>
        public string WeightType { get { return Utf8.FromNative(NativeMethods.specula_model_weight_type(handle)); } }
        /// <summary>Tokenizer family: "llama" (SentencePiece), "gpt2" (byte-level BPE), ...</summary>
        public string Tokenizer { get { return Utf8.FromNative(NativeMethods.specula_model_tokenizer(handle)); } }
        /// <summary>Pre-tokenizer of byte-level BPE vocabularies ("llama-bpe", "qwen2", ...), "" otherwise.</summary>
        public string PreTokenizer { get { return Utf8.FromNative(NativeMethods.specula_model_pre_tokenizer(handle)); } }

        public int TensorCount { get { return NativeMethods.specula_model_tensor_count(handle); } }

        public unsafe TensorInfo GetTensor(int index)
        {
            NativeMethods.specula_tensor_info c = default(NativeMethods.specula_tensor_info);
            c.struct_size = (uint)sizeof(NativeMethods.specula_tensor_info);
            ErrorHandle err;
            Status st = NativeMethods.specula_model_tensor_info(handle, index, &c, out err);
            SpeculaException.Check(st, err);
            int n = Math.Max(0, Math.Min(c.n_dims, 4));
            var dims = new long[n];
            for (int d = 0; d < n; ++d) dims[d] = c.dims[d];
            return new TensorInfo
            {
                Name = Utf8.FromNative(c.name), Type = Utf8.FromNative(c.type), Dims = dims,
                Offset = c.offset, NBytes = c.n_bytes,
            };
        }

        public IList<TensorInfo> Tensors
        {
            get
            {
                var list = new List<TensorInfo>();
                for (int i = 0, n = TensorCount; i < n; ++i) list.Add(GetTensor(i));
                return list;
            }
        }

        public int MetaCount { get { return NativeMethods.specula_model_meta_count(handle); } }

        /// <summary>Key of metadata entry index, null when out of range.</summary>
        public string MetaKey(int index) { return Utf8.FromNativeOrNull(NativeMethods.specula_model_meta_key(handle, index)); }

        /// <summary>Value of metadata entry index rendered as text; arrays abbreviated after maxArray items.</summary>
        public string MetaValue(int index, int maxArray = 8)
        {
            return TwoCall.Text((byte[] buf, UIntPtr size, out UIntPtr len, out ErrorHandle err) =>
                NativeMethods.specula_model_meta_value(handle, index, maxArray, buf, size, out len, out err));
        }

        /// <summary>All metadata as key/value text (arrays abbreviated after maxArray items).</summary>
        public IDictionary<string, string> Metadata(int maxArray = 8)
        {
            var map = new Dictionary<string, string>();
            for (int i = 0, n = MetaCount; i < n; ++i) map[MetaKey(i)] = MetaValue(i, maxArray);
            return map;
        }

        /// <summary>XXH3-128 of the whole GGUF as 32 hex digits (what snapshots are bound to). Reads the file once.</summary>
        public string Fingerprint
        {
            get
            {
                return TwoCall.Text((byte[] buf, UIntPtr size, out UIntPtr len, out ErrorHandle err) =>
                    NativeMethods.specula_model_fingerprint(handle, buf, size, out len, out err));
            }
        }

        // ---- vocabulary (thread-safe) ---------------------------------------------------------------------------

        /// <summary>BOS token, or TokenNull.</summary>
        public int TokenBos { get { return NativeMethods.specula_model_token_bos(handle); } }
        public int TokenEos { get { return NativeMethods.specula_model_token_eos(handle); } }
        /// <summary>End of turn (&lt;|eot_id|&gt;, &lt;|im_end|&gt;, ...), or TokenNull.</summary>
        public int TokenEot { get { return NativeMethods.specula_model_token_eot(handle); } }
        /// <summary>Whether tokenizing with AddSpecial adds BOS.</summary>
        public bool AddBos { get { return NativeMethods.specula_model_add_bos(handle) != 0; } }
        public bool AddEos { get { return NativeMethods.specula_model_add_eos(handle) != 0; } }
        /// <summary>The model's fill-in-the-middle token of that kind, or TokenNull.</summary>
        public int TokenFim(FimToken which) { return NativeMethods.specula_model_token_fim(handle, which); }
        /// <summary>Whether token ends generation (EOS, EOT and the like).</summary>
        public bool IsEog(int token) { return NativeMethods.specula_model_token_is_eog(handle, token) != 0; }
        /// <summary>The token's text as stored in the vocabulary ("▁dog", "&lt;0x0A&gt;"); null for an invalid id.</summary>
        public string TokenText(int token) { return Utf8.FromNativeOrNull(NativeMethods.specula_model_token_text(handle, token)); }
        public TokenKind GetTokenKind(int token) { return NativeMethods.specula_model_token_kind(handle, token); }

        /// <summary>Tokenizes UTF-8 text (flags: AddSpecial adds BOS/EOS as the model asks).</summary>
        public int[] Tokenize(string text, TokenizeFlags flags = TokenizeFlags.AddSpecial)
        {
            if (text == null) throw new ArgumentNullException("text");
            int len;
            byte[] bytes = Utf8.Bytes(text, out len);
            // Byte fallback gives at most one token per byte, plus specials: this guess almost always fits.
            var tokens = new int[len + 8];
            for (int attempt = 0; ; ++attempt)
            {
                UIntPtr n;
                ErrorHandle err;
                Status st = NativeMethods.specula_model_tokenize(handle, bytes, (UIntPtr)len, (int)flags, tokens,
                                                                 (UIntPtr)tokens.Length, out n, out err);
                if (st == Status.Ok)
                {
                    SpeculaException.Discard(err);
                    Array.Resize(ref tokens, (int)n.ToUInt64());
                    return tokens;
                }
                if (st != Status.BufferTooSmall || attempt == 1) throw SpeculaException.FromError(st, err);
                SpeculaException.Discard(err);
                tokens = new int[(int)n.ToUInt64()];
            }
        }

        /// <summary>Text of a token sequence (special tokens rendered only when renderSpecial).</summary>
        public string Detokenize(int[] tokens, bool renderSpecial = false)
        {
            if (tokens == null) throw new ArgumentNullException("tokens");
            return TwoCall.Text((byte[] buf, UIntPtr size, out UIntPtr len, out ErrorHandle err) =>
                NativeMethods.specula_model_detokenize(handle, tokens, (UIntPtr)tokens.Length, renderSpecial ? 1 : 0,
                                                       buf, size, out len, out err));
        }

        /// <summary>
        /// Bytes of one token (may be an incomplete UTF-8 sequence: decode pieces together, or use the text of the
        /// session's events, which is always complete). Throws Status.InvalidToken for an id outside the vocabulary.
        /// </summary>
        public byte[] TokenToPiece(int token, bool renderSpecial = false)
        {
            return TwoCall.Bytes((byte[] buf, UIntPtr size, out UIntPtr len, out ErrorHandle err) =>
                NativeMethods.specula_model_token_to_piece(handle, token, renderSpecial ? 1 : 0, buf, size, out len,
                                                           out err));
        }

        // ---- chat templates (thread-safe) -----------------------------------------------------------------------

        /// <summary>
        /// A conversation formatted as prompt text, as llama.cpp's llama_chat_apply_template does: with the model's
        /// own template when template is null, else with a built-in family name (Library.ChatTemplateBuiltins) or
        /// the text of a Jinja template. Append the result with AddSpecial | ParseSpecial. Throws
        /// Status.Unsupported when there is no template or it belongs to no known family.
        /// </summary>
        public string ApplyChatTemplate(IList<ChatMessage> messages, bool addAssistant = true, string template = null)
        {
            return ApplyChatTemplate(handle, messages, addAssistant, template);
        }

        /// <summary>ApplyChatTemplate without a model: template (a family name or Jinja text) is required.</summary>
        public static string ApplyChatTemplate(string template, IList<ChatMessage> messages, bool addAssistant = true)
        {
            if (template == null) throw new ArgumentNullException("template");
            return ApplyChatTemplate(ModelHandle.Null(), messages, addAssistant, template);
        }

        /// <summary>
        /// ApplyChatTemplate with the template's thinking switch (specula_chat_format, since 0.10): for qwen3,
        /// enableThinking false opens the reply with its empty thinking block (llama-server's
        /// chat_template_kwargs enable_thinking); null leaves it to the template. Families without a switch ignore it.
        /// </summary>
        public string FormatChat(IList<ChatMessage> messages, bool? enableThinking, bool addAssistant = true, string template = null)
        {
            return ApplyChatTemplate(handle, messages, addAssistant, template, enableThinking);
        }

        /// <summary>
        /// The conversation through the template's own Jinja (specula_chat_options.jinja, since 0.18), as llama-server
        /// --jinja renders it: any template, also one of no known family. template null: the model's own.
        /// </summary>
        public string FormatChatJinja(IList<ChatMessage> messages, bool? enableThinking = null, bool addAssistant = true, string template = null)
        {
            return ApplyChatTemplate(handle, messages, addAssistant, template, enableThinking, true);
        }

        /// <summary>FormatChat without a model: template (a family name or Jinja text) is required.</summary>
        public static string FormatChat(string template, IList<ChatMessage> messages, bool? enableThinking, bool addAssistant = true)
        {
            if (template == null) throw new ArgumentNullException("template");
            return ApplyChatTemplate(ModelHandle.Null(), messages, addAssistant, template, enableThinking);
        }

        private static string ApplyChatTemplate(ModelHandle model, IList<ChatMessage> messages, bool addAssistant,
                                                string template)
        {
            return ApplyChatTemplate(model, messages, addAssistant, template, null);
        }

        private static unsafe string ApplyChatTemplate(ModelHandle model, IList<ChatMessage> messages, bool addAssistant,
                                                       string template, bool? enableThinking, bool jinja = false)
        {
            if (messages == null) throw new ArgumentNullException("messages");
            var strings = new List<string>();
            foreach (ChatMessage m in messages)
            {
                if (m == null || m.Role == null || m.Content == null)
                    throw new ArgumentException("every message needs a role and a content", "messages");
                strings.Add(m.Role);
                strings.Add(m.Content);
            }
            byte[] tmpl = Utf8.Z(template);
            using (NativeBuffer text = NativeBuffer.StringArray(strings))
            {
                var c = new NativeMethods.specula_chat_message[messages.Count];
                for (int i = 0; i < c.Length; ++i)
                {
                    c[i].role = System.Runtime.InteropServices.Marshal.ReadIntPtr(text.Pointer, 2 * i * IntPtr.Size);
                    c[i].content = System.Runtime.InteropServices.Marshal.ReadIntPtr(text.Pointer, (2 * i + 1) * IntPtr.Size);
                }
                if (enableThinking == null && !jinja)
                    return TwoCall.Text((byte[] buf, UIntPtr size, out UIntPtr len, out ErrorHandle err) =>
                        NativeMethods.specula_chat_apply_template(model, tmpl, c.Length == 0 ? null : c, (UIntPtr)c.Length,
                                                                  addAssistant ? 1 : 0, buf, size, out len, out err));
                NativeMethods.specula_chat_options init;
                NativeMethods.specula_chat_options_init(&init);
                init.add_assistant = addAssistant ? 1 : 0;
                init.enable_thinking = enableThinking == null ? -1 : enableThinking.Value ? 1 : 0;
                init.jinja = jinja ? 1 : 0;
                NativeMethods.specula_chat_options opts = init;  // the lambda's copy (a captured local has no address)
                return TwoCall.Text((byte[] buf, UIntPtr size, out UIntPtr len, out ErrorHandle err) =>
                {
                    NativeMethods.specula_chat_options o = opts;
                    return NativeMethods.specula_chat_format(model, tmpl, c.Length == 0 ? null : c, (UIntPtr)c.Length, &o,
                                                             buf, size, out len, out err);
                });
            }
        }

        /// <summary>The built-in family of the model's own chat template ("chatml", "llama3", ...), null if none.</summary>
        public string ChatTemplateFamily
        {
            get { return Utf8.FromNativeOrNull(NativeMethods.specula_chat_template_detect(handle, null)); }
        }

        /// <summary>The built-in family a template text belongs to, null if none is recognised.</summary>
        public static string DetectChatTemplate(string template)
        {
            if (template == null) throw new ArgumentNullException("template");
            return Utf8.FromNativeOrNull(NativeMethods.specula_chat_template_detect(ModelHandle.Null(), Utf8.Z(template)));
        }
    }
}
