//! Shared by the actors' unit tests: a shipped scenario, and its Environment actor on
//! the scripted backend.

use std::sync::Arc;

use actix::Addr;

use super::environment::{EnvironmentActor, QualityEmbeddings};
use crate::llm::LlmClient;
use crate::scenario::{Mode, Scenario};

/// `scenarios/NAME` of the repository, loaded.
pub(super) fn shipped(name: &str) -> Scenario {
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios")
        .join(name);
    crate::runner::load(file.as_path(), &[]).unwrap().scenario
}

/// `scenario`'s Environment on its script and the hash embedder, cooperative, and the
/// model client it answers with; to be started inside an actix system.
pub(super) fn start(scenario: &Arc<Scenario>) -> (Addr<EnvironmentActor>, LlmClient) {
    let services = crate::simulation::Services::scripted(scenario);
    let llm = LlmClient::new(services.llm.clone(), 0);
    let env = actix::Actor::start(EnvironmentActor::new(
        scenario.clone(),
        Mode::Cooperative,
        services.embed.clone(),
        llm.clone(),
        services.counter.clone(),
        None,
        QualityEmbeddings::default(),
    ));
    (env, llm)
}
