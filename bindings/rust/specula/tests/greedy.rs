//! Greedy decoding with the bundled stories260K: deterministic, the same through every generation API, and the
//! same as the installed `specula` CLI.
mod common;

use std::path::PathBuf;
use std::process::Command;

use common::*;
use specula::{GenerateOptions, StopReason, Token, TokenizeFlags};

#[test]
fn greedy_is_deterministic() {
    let model = load_model();
    let a = plain_greedy(&model, &PROMPT, 64);
    let b = plain_greedy(&model, &PROMPT, 64);
    assert_eq!(a.len(), 64);
    assert_eq!(a, b);
    // "Once upon" -> " a time, there was a little g..." (stories260K's well-known start).
    assert_eq!(&a[..5], &[261, 378, 432, 383, 286]);
}

#[test]
fn iterator_callback_and_next_agree() {
    let model = load_model();
    let expected = plain_greedy(&model, &PROMPT, 40);

    // Iterator: every event, the last one carries the stop reason.
    let mut s = greedy_session(&model);
    s.append_tokens(&PROMPT).unwrap();
    let events: Vec<_> = s.generate_iter(&gen_opts(40)).collect::<Result<_, _>>().unwrap();
    let tokens: Vec<Token> = events.iter().filter_map(|e| e.token).collect();
    assert_eq!(tokens, expected);
    assert_eq!(events.last().unwrap().stop, Some(StopReason::MaxTokens));
    assert!(events[..events.len() - 1].iter().all(|e| e.stop.is_none()));
    // The text of all events is the generated tokens' pieces (complete UTF-8 here).
    let text: String = events.iter().map(|e| e.text.as_str()).collect();
    let pieces: Vec<u8> = expected.iter().flat_map(|&t| model.token_to_piece(t, false).unwrap()).collect();
    assert_eq!(text.as_bytes(), &pieces[..]);
    // detokenize() removes SentencePiece's leading space of the first piece, as llama.cpp does.
    assert_eq!(model.detokenize(&expected, false).unwrap(), text[1..]);
    assert_eq!(s.n_tokens(), PROMPT.len() + 40);
    assert_eq!(s.tokens().unwrap()[PROMPT.len()..], expected[..]);
    let stats = s.stats().unwrap();
    assert_eq!(stats.n_generated, 40);
    assert_eq!(stats.n_prompt_tokens, PROMPT.len() as i32);
    assert_eq!(events.last().unwrap().stats.unwrap().n_generated, 40);

    // Pull style, one token at a time.
    let mut s = greedy_session(&model);
    s.append_tokens(&PROMPT).unwrap();
    let mut pulled = Vec::new();
    loop {
        let ev = s.next_token(&gen_opts(40)).unwrap();
        pulled.extend(ev.token);
        if ev.stop.is_some() {
            assert_eq!(ev.stop, Some(StopReason::MaxTokens));
            break;
        }
    }
    assert_eq!(pulled, expected);

    // The iterator stops early when dropped; the session then goes on where it stopped.
    let mut s = greedy_session(&model);
    s.append_tokens(&PROMPT).unwrap();
    let first: Vec<Token> = s.generate_iter(&gen_opts(40)).take(15).map(|e| e.unwrap().token.unwrap()).collect();
    let rest: Vec<Token> = s.generate_iter(&gen_opts(40)).filter_map(|e| e.unwrap().token).collect();
    assert_eq!([first, rest].concat(), expected);
}

#[test]
fn text_prompt_and_stop_conditions() {
    let model = load_model();
    let prompt = model.tokenize("Once upon a time", TokenizeFlags::ADD_SPECIAL).unwrap();
    assert_eq!(prompt[0], model.bos().unwrap());
    let mut s = greedy_session(&model);
    s.append_text("Once upon a time", TokenizeFlags::ADD_SPECIAL).unwrap();
    assert_eq!(s.tokens().unwrap(), prompt);
    let (tokens, stop) = s.generate_tokens(&gen_opts(24)).unwrap();
    assert_eq!(stop, StopReason::MaxTokens);
    assert_eq!(tokens, plain_greedy(&model, &prompt, 24));

    // A stop string: the text stops before it.
    let full = model.detokenize(&tokens, false).unwrap();
    let word = " little";
    assert!(full.contains(word), "{:?}", full);
    let mut s = greedy_session(&model);
    s.append_text("Once upon a time", TokenizeFlags::ADD_SPECIAL).unwrap();
    let opts = GenerateOptions { max_tokens: 24, stop_at_eog: false, stop_strings: vec![word.to_string()], top_logits: 0, top_probs: 0 };
    let mut text = String::new();
    let stop = s.generate(&opts, |ev| {
        text.push_str(&ev.text);
        true
    })
    .unwrap();
    assert_eq!(stop, StopReason::StopString);
    assert_eq!(text, full[..full.find(word).unwrap()]);

    // The callback stops the run.
    let mut s = greedy_session(&model);
    s.append_tokens(&PROMPT).unwrap();
    let mut n = 0;
    let stop = s.generate(&gen_opts(50), |_| {
        n += 1;
        n < 5
    })
    .unwrap();
    assert_eq!(stop, StopReason::Callback);
    assert_eq!(n, 5);

    // top_logits: greedy picks the largest logit.
    let mut s = greedy_session(&model);
    s.append_tokens(&PROMPT).unwrap();
    let opts = GenerateOptions { top_logits: 5, top_probs: 3, ..gen_opts(8) };
    for ev in s.generate_iter(&opts) {
        let ev = ev.unwrap();
        if let Some(t) = ev.token {
            assert_eq!(ev.top.len(), 5);
            assert_eq!(ev.top[0].0, t);
            assert!(ev.top.windows(2).all(|w| w[0].1 >= w[1].1));
            // The log-probability before sampling, and greedy's distribution after the chain: the token alone.
            assert_eq!(ev.token_logit, ev.top[0].1);
            assert!(ev.token_logit - ev.logsumexp <= 0.0);
            assert_eq!(ev.top_probs.len(), 3);
            assert_eq!(ev.top_probs[0], (t, 1.0));
            assert_eq!(ev.token_prob, 1.0);
        }
    }
}

/// Parses the CLI's jsonl: `{"id":261,"text":" a"}` lines (the last line holds the stats).
fn parse_cli_jsonl(out: &str) -> (Vec<Token>, String) {
    let mut ids = Vec::new();
    let mut text = String::new();
    for line in out.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("{\"id\":") {
            let end = rest.find(|c: char| !(c.is_ascii_digit() || c == '-')).unwrap();
            ids.push(rest[..end].parse().unwrap());
            if let Some(pos) = rest.find("\"text\":\"") {
                text.push_str(&json_unescape(&rest[pos + 8..]));
            }
        }
    }
    (ids, text)
}

/// The JSON string starting at `s` (after its opening quote), unescaped, up to its closing quote.
fn json_unescape(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    let mut pending_high: Option<u32> = None;
    while let Some(c) = chars.next() {
        match c {
            '"' => break,
            '\\' => {
                let e = chars.next().unwrap();
                let simple = match e {
                    'n' => Some('\n'),
                    't' => Some('\t'),
                    'r' => Some('\r'),
                    'b' => Some('\u{8}'),
                    'f' => Some('\u{c}'),
                    '/' => Some('/'),
                    '\\' => Some('\\'),
                    '"' => Some('"'),
                    _ => None,
                };
                if let Some(c) = simple {
                    out.push(c);
                    continue;
                }
                assert_eq!(e, 'u');
                let hex: String = chars.by_ref().take(4).collect();
                let v = u32::from_str_radix(&hex, 16).unwrap();
                if (0xD800..0xDC00).contains(&v) {
                    pending_high = Some(v);
                } else if (0xDC00..0xE000).contains(&v) {
                    let hi = pending_high.take().unwrap();
                    out.push(char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (v - 0xDC00)).unwrap());
                } else {
                    out.push(char::from_u32(v).unwrap());
                }
            }
            c => out.push(c),
        }
    }
    out
}

#[test]
fn greedy_matches_installed_cli() {
    let model = load_model();
    const N: i32 = 48;
    // Defaults as the CLI's: stop at EOS.
    let mut s = greedy_session(&model);
    s.append_tokens(&PROMPT).unwrap();
    let mut ours = Vec::new();
    let mut our_text = String::new();
    for ev in s.generate_iter(&GenerateOptions::with_max_tokens(N)) {
        let ev = ev.unwrap();
        ours.extend(ev.token);
        our_text.push_str(&ev.text);
    }

    let prefix = match std::env::var_os("SPECULA_PREFIX") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => {
            println!("SPECULA_PREFIX not set: comparing with a second session instead of the CLI");
            let mut s2 = greedy_session(&model);
            s2.append_tokens(&PROMPT).unwrap();
            let (theirs, _) = s2.generate_tokens(&GenerateOptions::with_max_tokens(N)).unwrap();
            assert_eq!(ours, theirs);
            return;
        }
    };
    let cli = prefix.join("bin/specula");
    if !cli.exists() {
        println!("{} not installed: comparing with a second session instead", cli.display());
        assert_eq!(ours, plain_greedy(&model, &PROMPT, ours.len() as i32));
        return;
    }
    let ids: Vec<String> = PROMPT.iter().map(|t| t.to_string()).collect();
    let out = Command::new(&cli)
        .arg("generate")
        .arg("-m")
        .arg(model_path())
        .args(["--prompt-ids", &ids.join(","), "--temp", "0", "-n", &N.to_string(), "--format", "jsonl", "--backend", "cpu"])
        .output()
        .expect("running the specula CLI");
    assert!(out.status.success(), "specula generate failed: {}", String::from_utf8_lossy(&out.stderr));
    let (theirs, their_text) = parse_cli_jsonl(&String::from_utf8_lossy(&out.stdout));
    assert!(!theirs.is_empty());
    assert_eq!(ours, theirs, "tokens differ from `{} generate --prompt-ids ... --temp 0`", cli.display());
    assert_eq!(our_text, their_text);
    println!("{} tokens equal to {}", ours.len(), cli.display());
}
