//! The Environment actor: each message embedded exactly once, and tool returns landing
//! in the Elysia store and the agent's per-tool error list.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::common::*;
use serde_json::json;
use sopsim::actors::messages::{ApplyReturn, CallOutcome, Snapshot, ToolReturn};
use sopsim::actors::EnvironmentActor;
use sopsim::elysia::{ResultObject, Return};
use sopsim::embed::{EmbedError, EmbedService, Embedder, HashEmbedder};
use sopsim::llm::{LlmClient, ScriptedBackend};
use sopsim::scenario::Mode;
use sopsim::sim::{run_blocking, RunConfig, Services};
use sopsim::tokens::Estimator;

/// A model-like embedder (runs on the worker pool) that counts the texts it embeds.
struct Counting {
    texts: AtomicUsize,
    inner: HashEmbedder,
}

impl Embedder for Counting {
    fn name(&self) -> &str {
        "counting"
    }
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.texts.fetch_add(texts.len(), Ordering::SeqCst);
        self.inner.embed(texts)
    }
}

#[test]
fn each_message_is_embedded_exactly_once() {
    let s = example("debate");
    let counting = Arc::new(Counting {
        texts: AtomicUsize::new(0),
        inner: HashEmbedder::default(),
    });
    let services = Services {
        llm: Arc::new(ScriptedBackend::new(s.script.clone())),
        embed: EmbedService::start(counting.clone(), 1, 32),
        counter: Arc::new(Estimator),
        prices: Default::default(),
    };
    let outcome = run_blocking(Arc::new(s), &services, RunConfig::default()).unwrap();
    assert_eq!(
        counting.texts.load(Ordering::SeqCst) as u64,
        outcome.summary.turns
    );
    assert_eq!(outcome.summary.embedder, "counting");
}

#[test]
fn tool_results_go_to_the_store_and_errors_to_the_tool() {
    let s = Arc::new(example("debate"));
    let snapshot = actix::System::new().block_on(async {
        let services = services_with(Arc::new(ScriptedBackend::new(None)));
        let env = actix::Actor::start(EnvironmentActor::new(
            s.clone(),
            Mode::Cooperative,
            services.embed.clone(),
            LlmClient::new(services.llm.clone(), 0),
            services.counter.clone(),
            None,
            false,
        ));
        let mut result = ResultObject::new(
            "sources",
            vec![json!({"title": "Car-free Oslo"})
                .as_object()
                .unwrap()
                .clone()],
        );
        result.metadata = json!({"query": "car-free city centres"})
            .as_object()
            .unwrap()
            .clone();
        env.send(ApplyReturn(ToolReturn {
            tool: "search".into(),
            agent: "Ada".into(),
            turn: 1,
            ret: Return::Result(result.clone()),
            outcome: CallOutcome::Ok,
            retry: false,
            store: true,
        }))
        .await
        .unwrap();
        env.send(ApplyReturn(ToolReturn {
            tool: "search".into(),
            agent: "Ada".into(),
            turn: 2,
            ret: Return::Result(result),
            outcome: CallOutcome::Ok,
            retry: false,
            store: true,
        }))
        .await
        .unwrap();
        let err = Return::Error {
            feedback: "rate limited, try later".into(),
            error_message: "429".into(),
        };
        env.send(ApplyReturn(ToolReturn {
            tool: "search".into(),
            agent: "Ada".into(),
            turn: 3,
            ret: err,
            outcome: CallOutcome::Failed,
            retry: false,
            store: true,
        }))
        .await
        .unwrap();
        env.send(Snapshot).await.unwrap()
    });
    let entries = &snapshot.json["environment"]["search"]["sources"];
    assert_eq!(entries[0]["objects"][0]["_REF_ID"], "search_sources_0_0");
    assert_eq!(entries[0]["metadata"]["query"], "car-free city centres");
    assert_eq!(
        entries[1]["objects"][0]["object_info"], "[repeat]",
        "the same source twice is a duplicate"
    );
    assert_eq!(
        entries[0]["metadata"]["_agent"], "Ada",
        "entries remember who made them"
    );
    assert!(
        snapshot.json["tool_errors"]["Ada"]["search"][0]
            .as_str()
            .unwrap()
            .starts_with("Avoidable error: rate limited, try later"),
        "{}",
        snapshot.json["tool_errors"]
    );
}
