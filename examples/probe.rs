use std::time::Instant;
use sopsim::llm::local::{LocalBackend, LocalOptions};
use sopsim::llm::*;
fn main() {
    let path = std::env::args().nth(1).unwrap();
    let b = LocalBackend::start(std::path::Path::new(&path), LocalOptions { ignore_eos: true, cache_bytes: 0, ..Default::default() }).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let story = "In Millbrook, a village of a hundred people beside a slow river, the baker opens her shop at six every morning. The miller brings flour across the old stone bridge, the children run to the school by the church, and the fishermen argue about the weather. ".repeat(5);
    for round in 0..std::env::var("ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(3u64) {
        let ctx = CallContext { kind: CallKind::Act, state: "s".into(), turn: 1, agent: None, role: None, index: round, choices: vec![], run_seed: round };
        let mk = |n| LlmRequest::chat(vec![ChatMessage::system("You are a helpful assistant."), ChatMessage::user(format!("Summarise this story in three sentences.\n\n{story}"))], sopsim::scenario::LlmSettings { temperature: Some(0.0), max_tokens: Some(n), ..Default::default() }, ctx.clone());
        let t = Instant::now();
        let c = rt.block_on(b.complete(mk(1), None)).unwrap();
        let p = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let c2 = if std::env::var("NODECODE").is_ok() { c.clone() } else { rt.block_on(b.complete(mk(129), None)).unwrap() };
        let g = t.elapsed().as_secs_f64() - p;
        println!("prompt {} tok: {:.1} tok/s; decode 128: {:.1} tok/s", c.usage.prompt_tokens, c.usage.prompt_tokens as f64 / p, 128.0 / g);
        let _ = c2;
    }
}
