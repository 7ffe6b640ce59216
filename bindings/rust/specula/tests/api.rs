//! The rest of the API on the bundled model: information, tokenization, logits, snapshots, prompt caches, chat
//! templates, logging, devices.
mod common;

use std::sync::{Arc, Mutex};

use common::*;
use specula::{
    Backend, ChatMessage, FimToken, LogLevel, Model, ModelOptions, PromptCache, PromptCacheOptions, SamplerOptions,
    Session, SessionOptions, SnapshotOptions, Status, TokenKind, TokenizeFlags,
};

#[test]
fn versions() {
    let (major, minor, _) = specula::version();
    assert_eq!((major, minor), (specula::sys::SPECULA_VERSION_MAJOR, specula::sys::SPECULA_VERSION_MINOR));
    assert_eq!(specula::abi_version(), specula::sys::SPECULA_ABI_VERSION);
    assert!(specula::version_string().starts_with(&format!("{}.{}.", major, minor)));
}

#[test]
fn model_information() {
    let model = load_model();
    assert_eq!(model.arch(), "llama");
    assert_eq!(model.n_vocab(), 512);
    assert_eq!(model.n_layer(), 5);
    assert_eq!(model.n_embd(), 64);
    assert_eq!(model.n_head(), 8);
    assert_eq!(model.n_head_kv(), 4);
    assert!(model.n_ff() > 0 && model.n_ctx_train() > 0);
    assert!(model.n_params() > 200_000);
    assert_eq!(model.file_size(), std::fs::metadata(model_path()).unwrap().len());
    assert!(!model.weight_type().is_empty());
    assert_eq!(model.tokenizer(), "llama");

    let tensors = model.tensors().unwrap();
    assert_eq!(tensors.len(), model.tensor_count());
    assert!(tensors.iter().any(|t| t.name == "token_embd.weight" && t.dims == vec![64, 512]), "{:?}", &tensors[..2]);
    assert_eq!(model.tensor_info(100_000).unwrap_err().status(), Status::InvalidArgument);

    let meta = model.metadata(4).unwrap();
    assert_eq!(meta.len(), model.meta_count());
    assert!(meta.iter().any(|(k, v)| k == "general.architecture" && v.contains("llama")), "{:?}", meta);
    assert_eq!(model.meta_key(100_000), None);

    let fp = model.fingerprint().unwrap();
    assert_eq!(fp.len(), 32);
    assert!(fp.chars().all(|c| c.is_ascii_hexdigit()));
    assert_eq!(model.clone().fingerprint().unwrap(), fp);
}

#[test]
fn vocabulary_and_tokenization() {
    let model = load_model();
    assert_eq!(model.bos(), Some(1));
    assert_eq!(model.eos(), Some(2));
    assert!(model.add_bos());
    assert!(model.is_eog(2));
    assert!(!model.is_eog(403));
    assert_eq!(model.token_kind(1), TokenKind::Control);
    assert_eq!(model.token_kind(403), TokenKind::Normal);
    assert_eq!(model.fim_token(FimToken::Prefix), None);
    let _ = model.eot();
    let _ = model.add_eos();
    let _ = model.pre_tokenizer();

    let text = "Once upon a time, there was a little girl.";
    let tokens = model.tokenize(text, TokenizeFlags::ADD_SPECIAL).unwrap();
    assert_eq!(&tokens[..3], &PROMPT);
    // As llama.cpp's detokenize: SentencePiece's space prefix is removed from the first piece; BOS (rendered as
    // nothing) is that first piece when present.
    assert_eq!(model.detokenize(&tokens[1..], false).unwrap(), text);
    assert_eq!(model.detokenize(&tokens, false).unwrap(), format!(" {}", text));
    assert_eq!(model.tokenize(text, TokenizeFlags::NONE).unwrap(), tokens[1..]);
    assert!(model.detokenize(&tokens, true).unwrap().contains("<s>"));
    let pieces: Vec<u8> = tokens[1..].iter().flat_map(|&t| model.token_to_piece(t, false).unwrap()).collect();
    assert_eq!(String::from_utf8(pieces).unwrap(), format!(" {}", text));
    assert_eq!(model.token_text(403).unwrap(), "▁Once");
    assert!(model.tokenize("", TokenizeFlags::NONE).unwrap().is_empty());
    // Long text: the bindings retry with the size the library asks for.
    let long = "the cat sat on the mat. ".repeat(200);
    let t = model.tokenize(&long, TokenizeFlags::PARSE_SPECIAL | TokenizeFlags::ADD_SPECIAL).unwrap();
    assert_eq!(model.detokenize(&t[1..], false).unwrap(), long);
}

#[test]
fn logits_evaluate_rewind_and_stats() {
    let model = load_model();
    let mut s = greedy_session(&model);
    assert!(s.logits().is_none());
    s.append_tokens(&PROMPT).unwrap();
    s.evaluate().unwrap();
    let logits = s.logits().unwrap().to_vec();
    assert_eq!(logits.len(), 512);
    let argmax = (0..logits.len()).max_by(|&a, &b| logits[a].partial_cmp(&logits[b]).unwrap()).unwrap();
    let first = s.generate_tokens(&gen_opts(10)).unwrap().0;
    assert_eq!(first[0] as usize, argmax);
    let stats = s.stats().unwrap();
    assert_eq!(stats.n_generated, 10);
    assert_eq!(stats.n_ctx_used, (PROMPT.len() + 10) as i32);

    s.rewind(PROMPT.len()).unwrap();
    assert_eq!(s.n_tokens(), PROMPT.len());
    assert_eq!(s.generate_tokens(&gen_opts(10)).unwrap().0, first);
    s.rewind(0).unwrap();
    assert_eq!(s.n_tokens(), 0);

    s.set_sampler(&SamplerOptions { temperature: 0.8, seed: 42, ..SamplerOptions::default() }).unwrap();
    s.append_tokens(&PROMPT).unwrap();
    let a = s.generate_tokens(&gen_opts(10)).unwrap().0;
    s.rewind(0).unwrap();
    s.set_sampler(&SamplerOptions { temperature: 0.8, seed: 42, ..SamplerOptions::default() }).unwrap();
    s.append_tokens(&PROMPT).unwrap();
    assert_eq!(s.generate_tokens(&gen_opts(10)).unwrap().0, a, "same seed, same tokens");
    assert_eq!(s.backend(), "cpu");
    let _ = s.backend_note();
}

#[test]
fn snapshots_resume_exactly() {
    let model = load_model();
    let sampler = SamplerOptions { temperature: 0.8, seed: 7, ..SamplerOptions::default() };
    let mut a = Session::new(&model, &session_options(), &sampler).unwrap();
    a.append_tokens(&PROMPT).unwrap();
    a.generate_tokens(&gen_opts(10)).unwrap();
    let snapshot = a.save_buffer(&SnapshotOptions::default()).unwrap();
    assert!(!snapshot.is_empty());
    let dir = TempDir::new("snapshots");
    let file = dir.path("session.snap");
    a.save_file(&file, &SnapshotOptions { compression_level: 3, ..SnapshotOptions::default() }).unwrap();
    let continued = a.generate_tokens(&gen_opts(10)).unwrap().0;

    // Sampling at temperature 0.8 goes on exactly where the snapshot was taken (a full snapshot holds the RNG).
    let mut b = Session::new(&model, &session_options(), &SamplerOptions::default()).unwrap();
    b.load_buffer(&snapshot).unwrap();
    assert_eq!(b.n_tokens(), PROMPT.len() + 10);
    assert_eq!(b.generate_tokens(&gen_opts(10)).unwrap().0, continued);
    let mut c = Session::new(&model, &session_options(), &SamplerOptions::default()).unwrap();
    c.load_file(&file).unwrap();
    assert_eq!(c.generate_tokens(&gen_opts(10)).unwrap().0, continued);

    // A damaged snapshot is refused and leaves the session as it was.
    let mut d = greedy_session(&model);
    d.append_tokens(&PROMPT).unwrap();
    let mut damaged = snapshot.clone();
    let mid = damaged.len() / 2;
    damaged[mid] ^= 0xff;
    let err = d.load_buffer(&damaged).unwrap_err();
    assert!(matches!(err.status(), Status::Format | Status::Incompatible), "{}", err);
    assert_eq!(d.load_buffer(b"not a snapshot").unwrap_err().status(), Status::Format);
    assert_eq!(d.load_file(dir.path("missing.snap")).unwrap_err().status(), Status::Io);
    assert_eq!(d.tokens().unwrap(), PROMPT);

    // fork: a prefix evaluated once serves another session.
    let mut e = greedy_session(&model);
    d.fork_into(&mut e, &SnapshotOptions::context()).unwrap();
    assert_eq!(e.tokens().unwrap(), PROMPT);
    assert_eq!(e.generate_tokens(&gen_opts(8)).unwrap().0, plain_greedy(&model, &PROMPT, 8));
}

#[test]
fn prompt_cache_restores_a_prefix() {
    let model = load_model();
    let dir = TempDir::new("prompt-cache");
    let cache = PromptCache::open(&dir.0, &PromptCacheOptions::default()).unwrap();
    let prompt = model.tokenize("Once upon a time, there was a little girl named Lily.", TokenizeFlags::ADD_SPECIAL).unwrap();
    let mut a = greedy_session(&model);
    assert_eq!(cache.restore(&mut a, &prompt).unwrap(), 0);
    a.append_tokens(&prompt).unwrap();
    a.evaluate().unwrap();
    cache.store(&mut a).unwrap();

    let mut b = greedy_session(&model);
    let longer = [prompt.clone(), vec![450, 373]].concat();
    let n = cache.restore(&mut b, &longer).unwrap();
    assert!(n > 0 && n <= prompt.len(), "restored {}", n);
    b.append_tokens(&longer[n..]).unwrap();
    assert_eq!(b.generate_tokens(&gen_opts(8)).unwrap().0, plain_greedy(&model, &longer, 8));
    let stats = cache.stats().unwrap();
    assert_eq!((stats.hits, stats.misses, stats.stores), (1, 1, 1));
    assert!(stats.n_entries >= 1 && stats.bytes > 0);
}

#[test]
fn chat_templates() {
    let builtins = specula::builtin_templates();
    assert!(builtins.iter().any(|n| n == "chatml"), "{:?}", builtins);
    let messages = [ChatMessage::system("Be brief."), ChatMessage::user("Hi")];
    let text = specula::apply_chat_template(None, Some("chatml"), &messages, true).unwrap();
    assert!(text.contains("<|im_start|>user\nHi<|im_end|>"), "{:?}", text);
    assert!(text.ends_with("<|im_start|>assistant\n"), "{:?}", text);
    assert_eq!(specula::detect_template(None, Some("chatml")), Some("chatml".to_string()));
    // stories260K has no template of its own.
    let model = load_model();
    let err = model.apply_chat_template(&messages, true).unwrap_err();
    assert_eq!(err.status(), Status::Unsupported, "{}", err);
    let err = specula::apply_chat_template(None, None, &messages, true).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    // Qwen3's thinking switch through specula_chat_format.
    let user = [ChatMessage::user("hi")];
    let off = specula::ChatOptions { enable_thinking: Some(false), ..Default::default() };
    let text = specula::format_chat(None, Some("qwen3"), &user, &off).unwrap();
    assert_eq!(text, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
    let text = specula::format_chat(None, Some("qwen3"), &user, &specula::ChatOptions::default()).unwrap();
    assert_eq!(text, specula::apply_chat_template(None, Some("qwen3"), &user, true).unwrap());
    // Jinja mode (since 0.18): the template's own program, here one of no known family.
    let jinja = specula::ChatOptions { jinja: true, ..Default::default() };
    let text = specula::format_chat(None, Some("{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"), &user, &jinja).unwrap();
    assert_eq!(text, "<user>hi");
    let err = specula::format_chat(None, Some("{% if %}"), &user, &jinja).unwrap_err();
    assert_eq!(err.status(), Status::Unsupported);
}

#[test]
fn logging_devices_and_synthetic() {
    let lines: Arc<Mutex<Vec<(LogLevel, String)>>> = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&lines);
    specula::set_logger(LogLevel::Debug, move |level, msg| sink.lock().unwrap().push((level, msg.to_string())));
    let _ = Model::load(models_dir().join("missing.gguf"), &ModelOptions::default());
    let model = load_model();
    drop(model);
    specula::clear_logger();
    let n = lines.lock().unwrap().len();
    println!("{} log lines, e.g. {:?}", n, lines.lock().unwrap().first());

    assert!(specula::backend_check(Backend::Cpu).is_ok());
    assert_eq!(specula::device_count(Backend::Cpu), 0);
    let cuda = specula::devices(Backend::Cuda).unwrap();
    assert_eq!(cuda.len(), specula::device_count(Backend::Cuda));
    match specula::backend_check(Backend::Cuda) {
        Ok(()) => assert!(!cuda.is_empty()),
        Err(e) => assert_eq!(e.status(), Status::Unsupported),
    }
    // Vulkan the same way: none without a Vulkan backend or driver (the reason says which), or its devices.
    let vulkan = specula::devices(Backend::Vulkan).unwrap();
    assert_eq!(vulkan.len(), specula::device_count(Backend::Vulkan));
    match specula::backend_check(Backend::Vulkan) {
        Ok(()) => assert!(!vulkan.is_empty()),
        Err(e) => {
            assert_eq!(e.status(), Status::Unsupported);
            assert!(vulkan.is_empty());
            assert!(e.message().starts_with("Vulkan: "), "{}", e.message());
        }
    }
    for (i, d) in vulkan.iter().enumerate() {
        assert_eq!((d.backend, d.index as usize), (Backend::Vulkan, i));
        assert!(!d.name.is_empty());
    }
    // Auto is usable iff some GPU backend is; else its reason names every one.
    match specula::backend_check(Backend::Auto) {
        Ok(()) => assert!(!cuda.is_empty() || !vulkan.is_empty()),
        Err(e) => {
            assert!(cuda.is_empty() && vulkan.is_empty());
            assert!(e.message().contains("CUDA: ") && e.message().contains("Vulkan: "), "{}", e.message());
        }
    }
    let model = load_model();
    let strict = SessionOptions { n_threads: 1, backend: Backend::Vulkan, allow_fallback: false, ..SessionOptions::default() };
    match Session::new(&model, &strict, &SamplerOptions::greedy()) {
        Ok(s) => {
            assert!(!vulkan.is_empty());
            assert_eq!(s.backend(), "vulkan");
        }
        Err(e) => {
            assert!(vulkan.is_empty(), "a strict Vulkan session failed with devices: {}", e);
            assert!(matches!(e.status(), Status::Unsupported | Status::OutOfMemory), "{}", e);
        }
    }
    // Auto: the first GPU that can (CUDA, then Vulkan), else the CPU with every GPU backend's reason.
    let auto = SessionOptions { n_threads: 1, backend: Backend::Auto, ..SessionOptions::default() };
    let s = Session::new(&model, &auto, &SamplerOptions::greedy()).unwrap();
    let note = s.backend_note();
    if s.backend() == "cpu" {
        assert!(note.contains("CUDA: ") && note.contains("Vulkan: ") && note.ends_with("running on the CPU"), "{}", note);
    } else {
        assert!(s.backend() == "cuda" || s.backend() == "vulkan", "{}", s.backend());
        assert_eq!(note, "");
    }
    drop(s);
    drop(model);

    let shapes = specula::synthetic::shapes();
    assert!(shapes.iter().any(|s| s == "tiny-llama"), "{:?}", shapes);
    // Cancelled at the first progress report: no file is left.
    let dir = TempDir::new("synthetic");
    let out = dir.path("tiny.gguf");
    let opts = specula::synthetic::SyntheticOptions { n_layer: 1, ..Default::default() }.progress(|_| false);
    let err = specula::synthetic::write_model("tiny-llama", model_path(), &out, &opts).unwrap_err();
    assert_eq!(err.status(), Status::Cancelled);
    assert!(!out.exists());
    let err = specula::synthetic::write_model("no-such-shape", model_path(), &out, &Default::default()).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
}
