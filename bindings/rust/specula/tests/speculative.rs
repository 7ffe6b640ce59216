//! Speculative decoding is exact: with greedy sampling every drafter gives plain decoding's tokens.
mod common;

use common::*;
use specula::{Draft, DrawRule, Model, ModelOptions, SampledDrafts, SamplerOptions, Session, SpeculativeOptions, Status, StopReason, Token, TreeMode};

const N: i32 = 96;

/// Generates N tokens from PROMPT with `opts` attached, through the iterator (specula_session_next), and
/// returns the tokens, how many were drafted, and the session's stats.
fn speculative_run(model: &Model, opts: &SpeculativeOptions<'_>, expect_name: &str) -> (Vec<Token>, usize, specula::Stats) {
    let mut s = greedy_session(model);
    s.set_speculative(opts).unwrap();
    assert_eq!(s.drafter_name(), expect_name);
    s.append_tokens(&PROMPT).unwrap();
    let mut tokens = Vec::new();
    let mut drafted = 0;
    for ev in s.generate_iter(&gen_opts(N)) {
        let ev = ev.unwrap();
        if let Some(t) = ev.token {
            tokens.push(t);
            drafted += ev.drafted as usize;
        }
        if ev.stop.is_some() {
            assert_eq!(ev.stop, Some(StopReason::MaxTokens));
        }
    }
    let stats = s.stats().unwrap();
    (tokens, drafted, stats)
}

#[test]
fn longspec_draft_equals_plain_greedy() {
    let model = load_model();
    let expected = plain_greedy(&model, &PROMPT, N);
    let draft = Draft::load(draft_path(), &model).unwrap();
    assert!(draft.window() > 0);
    assert!(draft.n_params() > 0);
    // A fixed tree: every round drafts, so acceptance can be checked (auto may decode plainly on this tiny model).
    let fixed = SpeculativeOptions { tree_mode: TreeMode::Fixed, ..SpeculativeOptions::longspec(&draft) };
    let (tokens, drafted, stats) = speculative_run(&model, &fixed, "longspec");
    assert_eq!(tokens, expected);
    assert!(stats.n_spec_rounds > 0, "{:?}", stats);
    assert!(stats.n_accepted > 0, "the trained draft had no token accepted: {:?}", stats);
    // Tokens accepted beyond max_tokens are kept for the next call, so at most n_accepted were emitted.
    assert!(drafted > 0 && drafted as i32 <= stats.n_accepted, "{} drafted, {:?}", drafted, stats);
    assert!(stats.tau > 1.0);

    // A chain instead of the default tree, through the callback API.
    let mut s = greedy_session(&model);
    let opts = SpeculativeOptions { tree_widths: vec![1, 1, 1, 1], ..SpeculativeOptions::longspec(&draft) };
    s.set_speculative(&opts).unwrap();
    s.append_tokens(&PROMPT).unwrap();
    let (tokens, _) = s.generate_tokens(&gen_opts(N)).unwrap();
    assert_eq!(tokens, expected);

    // The draft's own distribution is available, n_vocab floats.
    let mut s = greedy_session(&model);
    s.set_speculative(&SpeculativeOptions::longspec(&draft)).unwrap();
    s.append_tokens(&PROMPT).unwrap();
    let logits = s.draft_logits().unwrap();
    assert_eq!(logits.len(), model.n_vocab());
    assert!(logits.iter().all(|x| x.is_finite()));
}

#[test]
fn ngram_and_merged_drafters_equal_plain_greedy() {
    let model = load_model();
    let expected = plain_greedy(&model, &PROMPT, N);
    let (tokens, _, _) = speculative_run(&model, &SpeculativeOptions::ngram(), "ngram");
    assert_eq!(tokens, expected);

    let draft = Draft::load(draft_path(), &model).unwrap();
    let both = SpeculativeOptions { ngram: true, ..SpeculativeOptions::longspec(&draft) };
    let (tokens, _, stats) = speculative_run(&model, &both, "longspec+ngram");
    assert_eq!(tokens, expected);
    assert!(stats.n_spec_rounds > 0);

    // No tree given: the session picks each round's tree (auto), and says which.
    let mut s = greedy_session(&model);
    s.set_speculative(&both).unwrap();
    assert_eq!(s.tree_shape(), "");
    s.append_tokens(&PROMPT).unwrap();
    let (tokens, _) = s.generate_tokens(&gen_opts(N)).unwrap();
    assert_eq!(tokens, expected);
    assert!(s.tree_shape().starts_with("auto:"), "{}", s.tree_shape());
}

#[test]
fn draft_model_equals_plain_greedy() {
    let model = load_model();
    let expected = plain_greedy(&model, &PROMPT, N);
    // The model itself, loaded again, as an independent draft model: every drafted token is accepted.
    let draft_model = Model::load(model_path(), &ModelOptions::default()).unwrap();
    let mut s = greedy_session(&model);
    let fixed = SpeculativeOptions { tree_mode: TreeMode::Fixed, ..SpeculativeOptions::with_draft_model(&draft_model) };
    s.set_speculative(&fixed).unwrap();
    assert_eq!(s.drafter_name(), "draft-model");
    // The session keeps its own reference.
    drop(draft_model);
    s.append_tokens(&PROMPT).unwrap();
    let (tokens, stop) = s.generate_tokens(&gen_opts(N)).unwrap();
    assert_eq!(stop, StopReason::MaxTokens);
    assert_eq!(tokens, expected);
    assert!(s.stats().unwrap().n_accepted > 0);
}

#[test]
fn random_draft_never_changes_the_output() {
    let model = load_model();
    let expected = plain_greedy(&model, &PROMPT, 48);
    let dir = TempDir::new("random-draft");
    let path = dir.path("random.longspec.gguf");
    Draft::write_random(&model, &path, 7, 0).unwrap();
    let draft = Draft::load(&path, &model).unwrap();
    let mut s = greedy_session(&model);
    s.set_speculative(&SpeculativeOptions::longspec(&draft)).unwrap();
    s.append_tokens(&PROMPT).unwrap();
    assert_eq!(s.generate_tokens(&gen_opts(48)).unwrap().0, expected);
}

#[test]
fn attach_detach_and_bad_options() {
    let model = load_model();
    let draft = Draft::load(draft_path(), &model).unwrap();
    let other = Model::load(model_path(), &ModelOptions::default()).unwrap();
    let mut s = greedy_session(&model);

    // Both a draft and a draft model: refused, the previous drafters stay.
    s.set_speculative(&SpeculativeOptions::ngram()).unwrap();
    let both = SpeculativeOptions { draft_model: Some(&other), ..SpeculativeOptions::longspec(&draft) };
    let err = s.set_speculative(&both).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    assert_eq!(s.drafter_name(), "ngram");

    // A draft loaded for another model handle.
    let foreign = Draft::load(draft_path(), &other).unwrap();
    let err = s.set_speculative(&SpeculativeOptions::longspec(&foreign)).unwrap_err();
    assert_eq!(err.status(), Status::Incompatible, "{}", err);

    s.clear_speculative().unwrap();
    assert_eq!(s.drafter_name(), "");
    s.append_tokens(&PROMPT).unwrap();
    assert_eq!(s.generate_tokens(&gen_opts(16)).unwrap().0, plain_greedy(&model, &PROMPT, 16));

    // A session of a clone of the model handle accepts the draft (same loaded model).
    let clone = model.clone();
    let mut s2 = Session::new(&clone, &session_options(), &specula::SamplerOptions::greedy()).unwrap();
    s2.set_speculative(&SpeculativeOptions::longspec(&draft)).unwrap();
}

/// A seed fixes the sampled text whatever speculates (docs/speculative.md): the trained draft's coupled chains, its
/// automatic tree and n-grams give plain sampling's tokens; Leviathan's rule stays selectable.
#[test]
fn a_seed_gives_plain_samplings_text_with_every_drafter() {
    let model = load_model();
    let draft = Draft::load(draft_path(), &model).unwrap();
    let sampler = SamplerOptions { temperature: 0.9, seed: 21, ..SamplerOptions::default() };
    let run = |opts: Option<&SpeculativeOptions<'_>>| -> Vec<Token> {
        let mut s = Session::new(&model, &session_options(), &sampler).unwrap();
        if let Some(o) = opts {
            s.set_speculative(o).unwrap();
        }
        s.append_tokens(&PROMPT).unwrap();
        s.generate_tokens(&gen_opts(N)).unwrap().0
    };
    let plain = run(None);
    assert_eq!(plain.len(), N as usize);
    let chain = SpeculativeOptions { tree_widths: vec![1, 1, 1, 1], ..SpeculativeOptions::longspec(&draft) };
    assert_eq!(run(Some(&chain)), plain, "a coupled chain");
    let auto = SpeculativeOptions { ngram: true, ..SpeculativeOptions::longspec(&draft) };
    assert_eq!(run(Some(&auto)), plain, "the automatic tree with n-grams");
    assert_eq!(SpeculativeOptions::default().sampled_drafts, SampledDrafts::Coupled);
    let leviathan = SpeculativeOptions { sampled_drafts: SampledDrafts::Leviathan, ..chain };
    assert_eq!(run(Some(&leviathan)).len(), N as usize);
}

/// llama.cpp's draws (`DrawRule::LlamaCpp`, since 0.16): the seed fixes the text with drafters too, and it is another
/// text than the race's for the same seed.
#[test]
fn llama_cpp_draws_give_plain_samplings_text_with_every_drafter() {
    let model = load_model();
    let draft = Draft::load(draft_path(), &model).unwrap();
    assert_eq!(SamplerOptions::default().draw, DrawRule::Race);
    let llama = SamplerOptions { temperature: 0.9, seed: 21, draw: DrawRule::LlamaCpp, ..SamplerOptions::default() };
    let run = |sampler: &SamplerOptions, opts: Option<&SpeculativeOptions<'_>>| -> Vec<Token> {
        let mut s = Session::new(&model, &session_options(), sampler).unwrap();
        if let Some(o) = opts {
            s.set_speculative(o).unwrap();
        }
        s.append_tokens(&PROMPT).unwrap();
        s.generate_tokens(&gen_opts(N)).unwrap().0
    };
    let plain = run(&llama, None);
    assert_eq!(plain.len(), N as usize);
    let chain = SpeculativeOptions { tree_widths: vec![1, 1, 1, 1], ..SpeculativeOptions::longspec(&draft) };
    assert_eq!(run(&llama, Some(&chain)), plain, "a coupled chain");
    let auto = SpeculativeOptions { ngram: true, ..SpeculativeOptions::longspec(&draft) };
    assert_eq!(run(&llama, Some(&auto)), plain, "the automatic tree with n-grams");
    let race = SamplerOptions { draw: DrawRule::Race, ..llama.clone() };
    assert_ne!(run(&race, None), plain, "the race draws other tokens for the seed");
}

/// A grammar constrains the text (docs/grammars.md), and drafters change nothing of it; one that does not parse is
/// InvalidArgument with the parser's message.
#[test]
fn a_grammar_constrains_the_text_with_and_without_drafters() {
    let model = load_model();
    let draft = Draft::load(draft_path(), &model).unwrap();
    let gbnf = r#"root ::= " the " [a-z]+ (" " [a-z]+){2,9} ".""#;
    let sampler = SamplerOptions { temperature: 0.0, grammar: Some(gbnf.to_string()), ..SamplerOptions::default() };
    let run = |sampler: &SamplerOptions, opts: Option<&SpeculativeOptions<'_>>| -> specula::Result<Vec<u8>> {
        let mut s = Session::new(&model, &session_options(), sampler)?;
        if let Some(o) = opts {
            s.set_speculative(o)?;
        }
        s.append_text("Once upon a time", specula::TokenizeFlags::ADD_SPECIAL)?;
        let (tokens, stop) = s.generate_tokens(&specula::GenerateOptions { max_tokens: 64, ..specula::GenerateOptions::default() })?;
        assert_eq!(stop, StopReason::Eos, "the grammar ends the text with its last word");
        let mut text = Vec::new();
        for t in tokens {
            text.extend(model.token_to_piece(t, true)?);
        }
        Ok(text)
    };
    let plain = String::from_utf8(run(&sampler, None).unwrap()).unwrap();
    assert!(plain.starts_with(" the ") && plain.ends_with('.'), "{plain:?}");
    let words: Vec<&str> = plain.trim_end_matches('.').split(' ').skip(1).collect();
    assert!(words.len() >= 4 && words.len() <= 11 && words.iter().all(|w| !w.is_empty() && w.bytes().all(|b| b.is_ascii_lowercase())), "{plain:?}");
    let merged = SpeculativeOptions { ngram: true, ..SpeculativeOptions::longspec(&draft) };
    assert_eq!(String::from_utf8(run(&sampler, Some(&merged)).unwrap()).unwrap(), plain);
    // A JSON schema's grammar: an object with its required key.
    let schema = r#"{"type": "object", "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 9}}, "required": ["n"]}"#;
    let json_sampler = SamplerOptions { grammar: Some(specula::json_schema_to_grammar(schema).unwrap()), ..sampler.clone() };
    let json = String::from_utf8(run(&json_sampler, None).unwrap()).unwrap();
    let value: Vec<char> = json.chars().filter(|c| !c.is_whitespace()).collect();
    assert!(value.len() == 7 && value.starts_with(&['{', '"', 'n', '"', ':']) && value[5].is_ascii_digit() && value[5] != '0' && value[6] == '}', "{json:?}");
    assert_eq!(String::from_utf8(run(&json_sampler, Some(&merged)).unwrap()).unwrap(), json);
    let alone = SpeculativeOptions { grammar: true, ..SpeculativeOptions::default() };
    assert_eq!(String::from_utf8(run(&json_sampler, Some(&alone)).unwrap()).unwrap(), json, "the grammar drafting alone");
    assert_eq!(specula::json_schema_to_grammar("{\"type\": ").unwrap_err().status(), Status::InvalidArgument);
    let bad = SamplerOptions { grammar: Some("root ::= missing".to_string()), ..SamplerOptions::default() };
    let e = run(&bad, None).unwrap_err();
    assert_eq!(e.status(), Status::InvalidArgument);
    assert!(e.message().contains("undefined rule 'missing'"), "{}", e.message());
}
