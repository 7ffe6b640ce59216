//! Every handle frees itself on Drop, in any order the borrow checker allows (the library's reference counts
//! cover the rest).
mod common;

use common::*;
use specula::{Draft, Model, ModelOptions, PromptCache, PromptCacheOptions, SamplerOptions, Session, SpeculativeOptions, Token, TokenEvent};

#[test]
fn model_clone_outlives_the_original() {
    let model = load_model();
    let expected = plain_greedy(&model, &PROMPT, 16);
    let clone = model.clone();
    drop(model);
    assert_eq!(clone.n_vocab(), 512);
    assert_eq!(plain_greedy(&clone, &PROMPT, 16), expected);
}

#[test]
fn drafters_dropped_before_the_session_uses_them() {
    let model = load_model();
    let expected = plain_greedy(&model, &PROMPT, 32);
    let mut s = greedy_session(&model);
    {
        let draft = Draft::load(draft_path(), &model).unwrap();
        let draft2 = draft.clone();
        s.set_speculative(&SpeculativeOptions { ngram: true, ..SpeculativeOptions::longspec(&draft2) }).unwrap();
        drop(draft);
        // draft2 goes at the end of this block
    }
    s.append_tokens(&PROMPT).unwrap();
    assert_eq!(s.generate_tokens(&gen_opts(32)).unwrap().0, expected);

    // A draft outliving its target's handle keeps the target's weights alive.
    let target = Model::load(model_path(), &ModelOptions::default()).unwrap();
    let draft = Draft::load(draft_path(), &target).unwrap();
    drop(target);
    assert!(draft.window() > 0);
    drop(draft);
}

#[test]
fn sessions_dropped_in_any_order() {
    let model = load_model();
    let expected = plain_greedy(&model, &PROMPT, 12);
    let mut sessions: Vec<Session<'_>> = (0..4).map(|_| greedy_session(&model)).collect();
    let mut events: Vec<TokenEvent> = Vec::new();
    for s in sessions.iter_mut() {
        s.append_tokens(&PROMPT).unwrap();
        events.extend(s.generate_iter(&gen_opts(12)).map(|e| e.unwrap()));
    }
    // Drop the second, then the last, then the rest.
    drop(sessions.remove(1));
    drop(sessions.pop());
    drop(sessions);
    // Events are owned copies: they outlive the sessions.
    let tokens: Vec<Token> = events.iter().filter_map(|e| e.token).collect();
    assert_eq!(tokens, expected.repeat(4));
}

#[test]
fn iterator_dropped_midway_and_handles_after_sessions() {
    let model = load_model();
    let mut s = Session::new(&model, &session_options(), &SamplerOptions::greedy()).unwrap();
    s.append_tokens(&PROMPT).unwrap();
    let handle = {
        let mut it = s.generate_iter(&gen_opts(64));
        it.next().unwrap().unwrap();
        it.cancel_handle()
        // the iterator is dropped here, mid-run
    };
    assert!(handle.is_alive());
    assert_eq!(s.n_tokens(), PROMPT.len() + 1);
    let cache_dir = TempDir::new("drop-order");
    let cache = PromptCache::open(&cache_dir.0, &PromptCacheOptions::default()).unwrap();
    s.generate_tokens(&gen_opts(3)).unwrap();
    cache.store(&mut s).unwrap();
    drop(s);
    // The cache, the handle and the model outlive the session.
    assert!(!handle.cancel());
    assert!(cache.stats().unwrap().stores >= 1);
    drop(model);
    drop(cache);
    drop(handle);
}
