//! One chat call, to an OpenAI-compatible server or to a local GGUF model:
//!
//! ```text
//! cargo run -p sopsim-llm --example chat -- http://127.0.0.1:8080/v1
//! cargo run -p sopsim-llm --example chat -- models/qwen05/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
//! ```
//!
//! A server's key is read from `OPENAI_API_KEY`, here at the edge of the program.

use sopsim_core::scenario::LlmSettings;
use sopsim_llm::local::{LocalBackend, LocalOptions};
use sopsim_llm::openai::{OpenAiBackend, OpenAiOptions};
use sopsim_llm::{ApiKey, CallContext, CallKind, ChatMessage, LlmBackend, LlmRequest};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let Some(target) = std::env::args().nth(1) else {
        eprintln!("usage: chat SERVER_URL | MODEL.gguf");
        std::process::exit(2);
    };
    let backend: Box<dyn LlmBackend> = if target.ends_with(".gguf") {
        Box::new(LocalBackend::start(
            target.as_ref(),
            LocalOptions::default(),
        )?)
    } else {
        let api_key = std::env::var("OPENAI_API_KEY").ok().and_then(ApiKey::new);
        Box::new(OpenAiBackend::new(OpenAiOptions {
            base_url: target,
            api_key,
            ..OpenAiOptions::default()
        })?)
    };
    let request = LlmRequest::chat(
        vec![
            ChatMessage::system("You are Ada, a careful engineer on a town council."),
            ChatMessage::user(
                "Ben says the new bridge costs too much. Answer him in two sentences.",
            ),
        ],
        LlmSettings {
            temperature: Some(0.7),
            max_tokens: Some(80),
            ..LlmSettings::default()
        },
        CallContext::new(CallKind::Act, "debate", 1, 7),
    );
    // The HTTP client runs on tokio; the local engine answers on its own thread.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let reply = runtime.block_on(backend.complete(request, None))?;
    println!("{}", reply.text);
    eprintln!(
        "{}: {} prompt tokens ({} from the cache), {} generated",
        reply.model,
        reply.usage.prompt_tokens,
        reply.usage.cached_prompt_tokens,
        reply.usage.completion_tokens
    );
    Ok(())
}
