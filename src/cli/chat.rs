//! `sopsim chat`: a conversation with a local model on the terminal, streamed.

use std::io::Write;
use std::sync::Arc;

use sopsim::llm::{CallContext, CallKind, ChatMessage, ChatRole, LlmRequest, TokenSink};
use sopsim::scenario::LlmSettings;
use sopsim::setup::{self, EmbedderChoice, ModelOptions};

use super::args::ChatArgs;
use super::failure::Failure;
use super::progress::FetchProgress;
use super::say;
use super::stdin::{read_line, MAX_LINE_BYTES};
use super::terminal::printable;

pub(super) fn chat(args: ChatArgs) -> Result<(), Failure> {
    let opts = ModelOptions {
        model: args.model,
        embedder: EmbedderChoice::Hash,
        fetch_observer: Arc::new(FetchProgress::default()),
        ..ModelOptions::default()
    };
    let (backend, _) = setup::local_llm(&opts)?;
    eprintln!(
        "{} ready; type a message (Ctrl-D to quit)",
        backend.describe()
    );
    let mut messages = vec![ChatMessage::system(args.system)];
    let interactive = std::io::IsTerminal::is_terminal(&std::io::stdin());
    let mut stdin = std::io::stdin().lock();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|e| Failure::runtime(&e))?;
    let settings = LlmSettings {
        temperature: Some(args.temperature),
        max_tokens: Some(args.max_tokens),
        ..Default::default()
    };
    for turn in 1u64.. {
        if interactive {
            eprint!("> ");
            let _ = std::io::stderr().flush();
        }
        let Some(line) = read_line(&mut stdin, MAX_LINE_BYTES) else {
            break;
        };
        if line.trim().is_empty() {
            continue;
        }
        messages.push(ChatMessage::user(line));
        let context = CallContext::new(CallKind::Act, "chat", turn, 0).numbered(turn - 1);
        let stream: TokenSink = Arc::new(|t: &str| {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(printable(t).as_bytes());
            let _ = out.flush();
        });
        let reply = runtime
            .block_on(backend.complete(
                LlmRequest::chat(messages.clone(), settings.clone(), context),
                Some(stream),
            ))
            .map_err(|e| Failure::runtime(&e))?;
        say("");
        eprintln!(
            "[{} prompt tokens, {} reused from cache, {} generated]",
            reply.usage.prompt_tokens,
            reply.usage.cached_prompt_tokens,
            reply.usage.completion_tokens
        );
        messages.push(ChatMessage {
            role: ChatRole::Assistant,
            content: reply.text,
        });
    }
    Ok(())
}
