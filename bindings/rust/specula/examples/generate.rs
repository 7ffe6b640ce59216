//! `cargo run --example generate -- MODEL.gguf "prompt" [N] [DRAFT.gguf]`: greedy generation, streamed, with an
//! optional LongSpec draft; Ctrl-C is not handled, a second thread cancels after 10 s.
use std::io::Write;
use std::time::Duration;

use specula::{Draft, GenerateOptions, Model, ModelOptions, SamplerOptions, Session, SessionOptions, SpeculativeOptions, TokenizeFlags};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: {} MODEL.gguf PROMPT [N] [DRAFT.gguf]", args[0]);
        std::process::exit(2);
    }
    let n: i32 = args.get(3).map(|s| s.parse()).transpose()?.unwrap_or(128);
    let model = Model::load(&args[1], &ModelOptions::default())?;
    let mut session = Session::new(&model, &SessionOptions::default(), &SamplerOptions::greedy())?;
    if let Some(path) = args.get(4) {
        let draft = Draft::load(path, &model)?;
        session.set_speculative(&SpeculativeOptions::longspec(&draft))?;
    }
    let cancel = session.cancel_handle();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(10));
        cancel.cancel();
    });
    session.append_text(&args[2], TokenizeFlags::ADD_SPECIAL)?;
    let mut out = std::io::stdout();
    write!(out, "{}", args[2])?;
    let mut stop = None;
    for event in session.generate_iter(&GenerateOptions::with_max_tokens(n)) {
        let event = event?;
        write!(out, "{}", event.text)?;
        out.flush()?;
        stop = event.stop;
    }
    let stats = session.stats()?;
    eprintln!(
        "\n[{} tokens, {:.0} tokens/s, stop: {}, tau {:.2}]",
        stats.n_generated,
        stats.decode_tokens_per_s,
        stop.map_or("?".to_string(), |s| s.to_string()),
        stats.tau
    );
    Ok(())
}
