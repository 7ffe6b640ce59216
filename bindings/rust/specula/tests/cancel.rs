//! Cancellation from another thread: it stops a long generation at the next step, the session stays usable,
//! and a CancelHandle is safe to use whatever the session does (even after it is dropped).
mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use common::*;
use specula::{Session, StopReason, Token};

/// Deterministic: the generating thread asks the other one to cancel after 10 tokens and waits until it has.
#[test]
fn cancel_from_another_thread_stops_the_iterator() {
    let model = load_model();
    let expected = plain_greedy(&model, &PROMPT, 40);
    let mut s = greedy_session(&model);
    s.append_tokens(&PROMPT).unwrap();

    let handle = s.cancel_handle();
    let (ask, asked) = mpsc::channel::<()>();
    let (done, cancelled) = mpsc::channel::<bool>();
    let canceller = thread::spawn(move || {
        asked.recv().unwrap();
        done.send(handle.cancel()).unwrap();
    });

    let mut tokens: Vec<Token> = Vec::new();
    let mut stop = None;
    // max_tokens < 0: until the context is full (2048), unless cancelled.
    for ev in s.generate_iter(&gen_opts(-1)) {
        let ev = ev.unwrap();
        tokens.extend(ev.token);
        stop = ev.stop;
        if tokens.len() == 10 && ev.stop.is_none() {
            ask.send(()).unwrap();
            assert!(cancelled.recv().unwrap(), "the session was alive: cancel must reach it");
        }
    }
    canceller.join().unwrap();
    assert_eq!(stop, Some(StopReason::Cancelled));
    assert!(tokens.len() >= 10 && tokens.len() <= 12, "stopped after {} tokens", tokens.len());
    assert_eq!(tokens[..], expected[..tokens.len()]);

    // The session goes on where it stopped (max_tokens counts since the last append).
    let rest: Vec<Token> = s.generate_iter(&gen_opts(40)).filter_map(|e| e.unwrap().token).collect();
    assert_eq!([tokens, rest].concat(), expected);
    // And accepts more context.
    s.append_tokens(&[13]).unwrap();
    let (more, stop) = s.generate_tokens(&gen_opts(5)).unwrap();
    assert_eq!(more.len(), 5);
    assert_eq!(stop, StopReason::MaxTokens);
}

/// A long run (every token waits 1 ms in the callback: about 2 s to fill the context) stopped by a thread that
/// cancels after 50 ms, through specula_session_generate.
#[test]
fn cancel_stops_a_long_generation() {
    let model = load_model();
    let mut s = greedy_session(&model);
    s.append_tokens(&PROMPT).unwrap();
    let handle = s.cancel_handle();
    let started = Arc::new(AtomicBool::new(false));
    let started2 = Arc::clone(&started);
    let canceller = thread::spawn(move || {
        while !started2.load(Ordering::SeqCst) {
            thread::yield_now();
        }
        thread::sleep(Duration::from_millis(50));
        handle.cancel()
    });
    let t0 = Instant::now();
    let mut n = 0usize;
    let stop = s
        .generate(&gen_opts(-1), |ev| {
            started.store(true, Ordering::SeqCst);
            n += ev.token.is_some() as usize;
            thread::sleep(Duration::from_millis(1));
            true
        })
        .unwrap();
    assert!(canceller.join().unwrap());
    assert_eq!(stop, StopReason::Cancelled);
    assert!(n > 0 && n < s.n_ctx() - PROMPT.len(), "generated {} tokens", n);
    assert!(t0.elapsed() < Duration::from_secs(30));
    assert_eq!(s.n_tokens(), PROMPT.len() + n);

    // Still usable: a short run ends normally (for generate, max_tokens counts per call).
    let (more, stop) = s.generate_tokens(&gen_opts(3)).unwrap();
    assert_eq!((more.len(), stop), (3, StopReason::MaxTokens));
}

/// A cancel before a run is kept for it (and consumed by it).
#[test]
fn cancel_before_the_run_is_consumed_by_it() {
    let model = load_model();
    let mut s = greedy_session(&model);
    s.append_tokens(&PROMPT).unwrap();
    s.cancel();
    let (tokens, stop) = s.generate_tokens(&gen_opts(8)).unwrap();
    assert_eq!(stop, StopReason::Cancelled);
    assert!(tokens.is_empty());
    let (tokens, stop) = s.generate_tokens(&gen_opts(8)).unwrap();
    assert_eq!((tokens, stop), (plain_greedy(&model, &PROMPT, 8), StopReason::MaxTokens));

    // evaluate() reports a cancel as an error (nothing was generated).
    s.append_tokens(&[13, 13]).unwrap();
    s.cancel();
    assert_eq!(s.evaluate().unwrap_err().status(), specula::Status::Cancelled);
}

#[test]
fn handle_outlives_its_session() {
    let model = load_model();
    let s = greedy_session(&model);
    let handle = s.cancel_handle();
    let clone = handle.clone();
    assert!(handle.is_alive());
    assert!(handle.cancel());
    drop(s);
    assert!(!handle.is_alive());
    assert!(!handle.cancel());
    assert!(!clone.cancel());
}

/// Threads hammer the handles while sessions are created, used and dropped: a cancel never reaches a session
/// being destroyed (Drop waits for one in flight), and each run either finishes or reports Cancelled.
#[test]
fn cancel_races_with_drop() {
    let model = load_model();
    let stop_all = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel::<specula::CancelHandle>();
    let calls = Arc::new(AtomicUsize::new(0));
    let calls2 = Arc::clone(&calls);
    let stop2 = Arc::clone(&stop_all);
    let started = Arc::new(AtomicBool::new(false));
    let started2 = Arc::clone(&started);
    let hammer = thread::spawn(move || {
        let mut handles: Vec<specula::CancelHandle> = Vec::new();
        started2.store(true, Ordering::SeqCst);
        loop {
            // Read before the pass: the pass after the last session was sent still runs, so every handle is tried
            // at least once even when the 40 runs ended before this thread was scheduled again.
            let stopping = stop2.load(Ordering::SeqCst);
            while let Ok(h) = rx.try_recv() {
                handles.push(h);
            }
            handles.retain(|h| {
                calls2.fetch_add(1, Ordering::Relaxed);
                h.cancel()
            });
            if stopping {
                break;
            }
            thread::yield_now();
        }
    });
    // The sessions start once the hammer runs (on a loaded machine it could otherwise start after all 40 ended).
    while !started.load(Ordering::SeqCst) {
        thread::yield_now();
    }
    for i in 0..40 {
        let mut s: Session<'_> = greedy_session(&model);
        tx.send(s.cancel_handle()).unwrap();
        s.append_tokens(&PROMPT).unwrap();
        let (_, stop) = s.generate_tokens(&gen_opts(4 + i % 5)).unwrap();
        assert!(stop == StopReason::MaxTokens || stop == StopReason::Cancelled, "{:?}", stop);
        drop(s);
    }
    stop_all.store(true, Ordering::SeqCst);
    hammer.join().unwrap();
    assert!(calls.load(Ordering::Relaxed) > 0);
}
