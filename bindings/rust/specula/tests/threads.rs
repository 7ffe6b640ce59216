//! One Model shared by several threads, each with its own Session (Model: Send + Sync), and sessions moved
//! between threads (Session: Send).
mod common;

use std::sync::Arc;
use std::thread;

use common::*;
use specula::{Draft, Model, SpeculativeOptions, Token, TokenizeFlags};

fn prompts(model: &Model) -> Vec<Vec<Token>> {
    ["Once upon a time", "The little dog", "Lily and Tom went", "One day, a bird"]
        .iter()
        .map(|p| model.tokenize(p, TokenizeFlags::ADD_SPECIAL).unwrap())
        .collect()
}

#[test]
fn shared_model_scoped_threads() {
    let model = load_model();
    let prompts = prompts(&model);
    let expected: Vec<Vec<Token>> = prompts.iter().map(|p| plain_greedy(&model, p, 48)).collect();
    let draft = Draft::load(draft_path(), &model).unwrap();
    thread::scope(|scope| {
        let mut joins = Vec::new();
        for round in 0..2 {
            for (i, p) in prompts.iter().enumerate() {
                let (model, draft, expected) = (&model, &draft, &expected[i]);
                joins.push(scope.spawn(move || {
                    let mut s = greedy_session(model);
                    if round == 1 {
                        // The same draft, shared by every thread's session.
                        s.set_speculative(&SpeculativeOptions::longspec(draft)).unwrap();
                    }
                    s.append_tokens(p).unwrap();
                    // Tokenization on the shared model from every thread too.
                    assert_eq!(model.tokenize("Once upon a time", TokenizeFlags::ADD_SPECIAL).unwrap()[0], 1);
                    let (tokens, _) = s.generate_tokens(&gen_opts(48)).unwrap();
                    assert_eq!(&tokens, expected, "thread {} round {}", i, round);
                }));
            }
        }
        for j in joins {
            j.join().unwrap();
        }
    });
}

#[test]
fn model_clones_and_arcs_on_static_threads() {
    let model = load_model();
    let expected = plain_greedy(&model, &PROMPT, 32);
    let arc = Arc::new(model.clone());
    let mut joins = Vec::new();
    for i in 0..4 {
        // Half the threads get a retained handle of their own, half share one Arc<Model>.
        let own = if i % 2 == 0 { Some(model.clone()) } else { None };
        let shared = Arc::clone(&arc);
        joins.push(thread::spawn(move || {
            let m: &Model = own.as_ref().unwrap_or(&shared);
            plain_greedy(m, &PROMPT, 32)
        }));
    }
    // The original handle may go first: the clones keep the model alive.
    drop(model);
    for j in joins {
        assert_eq!(j.join().unwrap(), expected);
    }
}

#[test]
fn session_moves_between_threads() {
    let model = load_model();
    let expected = plain_greedy(&model, &PROMPT, 30);
    let mut s = greedy_session(&model);
    s.append_tokens(&PROMPT).unwrap();
    let first = s.generate_tokens(&gen_opts(10)).unwrap().0;
    // Continue on another thread (one thread at a time), then back here.
    let (s, second) = thread::scope(|scope| {
        scope
            .spawn(move || {
                let mut s = s;
                let t = s.generate_tokens(&gen_opts(10)).unwrap().0;
                (s, t)
            })
            .join()
            .unwrap()
    });
    let mut s = s;
    let third = s.generate_tokens(&gen_opts(10)).unwrap().0;
    assert_eq!([first, second, third].concat(), expected);
}
