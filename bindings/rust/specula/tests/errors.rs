//! Failures come back as Err(Error) with the library's status and message; panics in callbacks never cross
//! the C library and come back out of the call.
mod common;

use std::panic::{self, AssertUnwindSafe};

use common::*;
use specula::{
    ContextPolicy, Draft, Error, GenerateOptions, Model, ModelOptions, SamplerOptions, Session, SessionOptions, Status, StopReason,
    TokenizeFlags,
};

#[test]
fn missing_file_is_io_with_a_message() {
    let missing = models_dir().join("no-such-model.gguf");
    let err = Model::load(&missing, &ModelOptions::default()).unwrap_err();
    assert_eq!(err.status(), Status::Io);
    assert!(err.message().contains("no-such-model.gguf"), "{}", err.message());
    let shown = err.to_string();
    assert!(shown.starts_with("SPECULA_ERR_IO: "), "{}", shown);
    // Usable as a std error.
    let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(err.clone());
    assert_eq!(boxed.to_string(), shown);
    assert_eq!(Status::Io.name(), "SPECULA_ERR_IO");
    assert_eq!(Status::from_raw(Status::Io.to_raw()), Some(Status::Io));

    let err = Draft::load(models_dir().join("drafts/none.gguf"), &load_model()).unwrap_err();
    assert_eq!(err.status(), Status::Io);
}

#[test]
fn malformed_file_and_bad_paths() {
    let dir = TempDir::new("errors");
    let junk = dir.path("junk.gguf");
    std::fs::write(&junk, b"this is not a GGUF file, just some bytes that are long enough").unwrap();
    let err = Model::load(&junk, &ModelOptions::default()).unwrap_err();
    assert_eq!(err.status(), Status::Format, "{}", err);
    assert!(!err.message().is_empty());

    let err = Model::load("bad\0path.gguf", &ModelOptions::default()).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);

    // A model file is not a LongSpec draft.
    let model = load_model();
    let err = Draft::load(model_path(), &model).unwrap_err();
    assert!(matches!(err.status(), Status::Format | Status::Incompatible), "{}", err);
    // A draft trained for another target.
    let err = Draft::load(models_dir().join("drafts/code-7m.longspec.gguf"), &model).unwrap_err();
    assert_eq!(err.status(), Status::Incompatible, "{}", err);
    assert!(err.message().contains("n_layer"), "{}", err);
}

#[test]
fn bad_token_ids() {
    let model = load_model();
    let mut s = greedy_session(&model);
    s.append_tokens(&PROMPT).unwrap();
    for bad in [model.n_vocab() as i32, 9999, -1] {
        let err = s.append_tokens(&[5, bad]).unwrap_err();
        assert_eq!(err.status(), Status::InvalidToken, "{}", err);
        assert!(!err.message().is_empty());
    }
    // Nothing was appended; the session works on.
    assert_eq!(s.tokens().unwrap(), PROMPT);
    assert_eq!(s.generate_tokens(&gen_opts(8)).unwrap().0, plain_greedy(&model, &PROMPT, 8));

    assert_eq!(model.token_to_piece(9999, false).unwrap_err().status(), Status::InvalidToken);
    assert_eq!(model.detokenize(&[1, 9999], false).unwrap_err().status(), Status::InvalidToken);
    assert_eq!(model.token_text(9999), None);
    assert_eq!(model.token_kind(9999), specula::TokenKind::Invalid);
}

#[test]
fn context_full_and_bad_options() {
    let model = load_model();
    let opts = SessionOptions { n_ctx: 16, ..session_options() };
    let mut s = Session::new(&model, &opts, &SamplerOptions::greedy()).unwrap();
    assert_eq!(s.n_ctx(), 16);
    let err = s.append_tokens(&[5; 17]).unwrap_err();
    assert_eq!(err.status(), Status::ContextFull);
    s.append_tokens(&PROMPT).unwrap();
    // Generation fills the context and reports it as a stop reason.
    let (tokens, stop) = s.generate_tokens(&gen_opts(100)).unwrap();
    assert_eq!(stop, StopReason::ContextFull);
    assert_eq!(tokens.len(), 16 - PROMPT.len());
    let ev = s.next_token(&gen_opts(100)).unwrap();
    assert_eq!((ev.token, ev.stop), (None, Some(StopReason::ContextFull)));

    // A stop string with a NUL byte is refused by the bindings.
    let bad = GenerateOptions { stop_strings: vec!["a\0b".into()], ..GenerateOptions::default() };
    assert_eq!(s.generate(&bad, |_| true).unwrap_err().status(), Status::InvalidArgument);
    let mut it = s.generate_iter(&bad);
    assert_eq!(it.next().unwrap().unwrap_err().status(), Status::InvalidArgument);
    assert!(it.next().is_none());

    // A vocab-only model tokenizes but makes no session.
    let vocab = Model::load(model_path(), &ModelOptions::default().vocab_only(true)).unwrap();
    assert_eq!(vocab.tokenize("Once upon", TokenizeFlags::ADD_SPECIAL).unwrap(), PROMPT);
    assert_eq!(vocab.n_layer(), 0);
    let err = Session::with_defaults(&vocab).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument, "{}", err);
}

#[test]
fn context_shift_goes_on_past_a_full_context() {
    let model = load_model();
    let opts = SessionOptions { n_ctx: 16, context_policy: ContextPolicy::Shift, n_keep: 2, ..session_options() };
    let mut s = Session::new(&model, &opts, &SamplerOptions::greedy()).unwrap();
    s.append_tokens(&PROMPT).unwrap();
    let (tokens, stop) = s.generate_tokens(&gen_opts(40)).unwrap();
    assert_eq!((tokens.len(), stop), (40, StopReason::MaxTokens));
    assert!(s.n_tokens() <= 16);
    let st = s.stats().unwrap();
    // n_ctx 16, 2 kept: each shift drops (16 - 2) / 2 = 7 tokens.
    assert!(st.n_context_shifts >= 4, "{} shifts", st.n_context_shifts);
    assert_eq!(st.n_discarded_tokens, 7 * st.n_context_shifts as i64);
    // n_keep must leave room.
    let bad = SessionOptions { n_keep: 15, ..opts };
    assert_eq!(Session::new(&model, &bad, &SamplerOptions::greedy()).unwrap_err().status(), Status::InvalidArgument);
}

#[test]
fn progress_closure_cancels_and_reports() {
    let mut seen = Vec::new();
    {
        let opts = ModelOptions::default().progress(|p| {
            seen.push(p);
            true
        });
        Model::load(model_path(), &opts).unwrap();
    }
    assert!(!seen.is_empty());
    assert!(seen.iter().all(|p| (0.0..=1.0).contains(p)), "{:?}", seen);

    let opts = ModelOptions::default().progress(|_| false);
    let err = Model::load(model_path(), &opts).unwrap_err();
    assert_eq!(err.status(), Status::Cancelled);
}

#[test]
fn panics_in_callbacks_come_back_out_of_the_call() {
    // Progress closure: the load is cancelled inside the library, the panic resumes in Model::load.
    let opts = ModelOptions::default().progress(|_| panic!("progress panic"));
    let caught = panic::catch_unwind(AssertUnwindSafe(|| Model::load(model_path(), &opts)));
    let payload = caught.unwrap_err();
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"progress panic"));
    // The same options can be used again (the closure is not stuck borrowed).
    let caught = panic::catch_unwind(AssertUnwindSafe(|| Model::load(model_path(), &opts)));
    assert!(caught.is_err());

    // Token closure: generation stops, the panic resumes in generate, the session stays usable.
    let model = load_model();
    let mut s = greedy_session(&model);
    s.append_tokens(&PROMPT).unwrap();
    let mut n = 0;
    let caught = panic::catch_unwind(AssertUnwindSafe(|| {
        s.generate(&gen_opts(50), |_| {
            n += 1;
            if n == 3 {
                panic!("token panic");
            }
            true
        })
    }));
    assert_eq!(caught.unwrap_err().downcast_ref::<&str>(), Some(&"token panic"));
    assert_eq!(n, 3);
    assert_eq!(s.n_tokens(), PROMPT.len() + 3);
    let (more, stop) = s.generate_tokens(&gen_opts(5)).unwrap();
    assert_eq!((more.len(), stop), (5, StopReason::MaxTokens));
}

#[test]
fn errors_are_plain_values() {
    let e = Error::new(Status::Other(99), "from the future");
    assert_eq!(e.status(), Status::Other(99));
    assert!(e.to_string().contains("from the future"));
    let e2 = e.clone();
    drop(e);
    assert_eq!(e2.message(), "from the future");
}
