//! Batch groups: sessions on scoped threads whose passes are combined generate exactly what each generates alone.
mod common;

use std::thread;

use common::*;
use specula::{Batch, Draft, SpeculativeOptions, Token, TokenizeFlags};

#[test]
fn batched_sessions_match_sessions_alone() {
    let model = load_model();
    let draft = Draft::load(draft_path(), &model).unwrap();
    let prompts: Vec<Vec<Token>> = ["Once upon a time", "The little dog", "Lily and Tom went", "One day, a bird"]
        .iter()
        .map(|p| model.tokenize(p, TokenizeFlags::ADD_SPECIAL).unwrap())
        .collect();
    let expected: Vec<Vec<Token>> = prompts.iter().map(|p| plain_greedy(&model, p, 40)).collect();
    let batch = Batch::new(&model, 2).unwrap();
    thread::scope(|scope| {
        let mut joins = Vec::new();
        for (i, p) in prompts.iter().enumerate() {
            let mut s = greedy_session(&model);
            if i % 2 == 1 {
                s.set_speculative(&SpeculativeOptions::longspec(&draft)).unwrap();
            }
            batch.join(&mut s).unwrap();
            let expected = &expected[i];
            joins.push(scope.spawn(move || {
                s.append_tokens(p).unwrap();
                let (tokens, _) = s.generate_tokens(&gen_opts(40)).unwrap();
                assert_eq!(&tokens, expected, "session {}", i);
            }));
        }
        for j in joins {
            j.join().unwrap();
        }
    });
    let st = batch.stats().unwrap();
    assert!(st.passes > 0 && st.requests > st.passes && st.widest >= 2, "{:?}", st);
}

#[test]
fn a_session_of_another_model_is_refused() {
    let model = load_model();
    let other = load_model();
    let batch = Batch::new(&other, 1).unwrap();
    let mut s = greedy_session(&model);
    let e = batch.join(&mut s).unwrap_err();
    assert_eq!(e.status(), specula::Status::Incompatible);
    Batch::leave(&mut s).unwrap();
}
