//! One simulation: wire the actors for a scenario, run it to the end, and collect the
//! transcript, the Environment and the summary. Callers run one through
//! [`crate::run`]; what is public here is what a run gives back and the [`Services`] it
//! may be given.
//!
//! Any number of simulations can run at once in one actix `System`; they share the
//! [`Services`] (the model backend and the embedding service) and nothing else.

pub use sopsim_core::judging::{figures as judged_figures, Judgement};
pub use sopsim_core::memory::{Decision, Message, MessageKind};
pub use sopsim_core::network::{
    document as network_document, draw_all as draw_networks, NetworkRecord, PopulationNetwork,
};

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use actix::Actor;
use indexmap::IndexMap;
use serde::Serialize;
use tokio::sync::oneshot;

use crate::actors::messages::Snapshot;
use crate::actors::{
    AgentActor, AgentShared, Cast, Director, EnvironmentActor, Finish, Limits, ParseFailures,
    QualityEmbeddings,
};
use crate::control::RunControl;
use crate::embed::{EmbedService, HashEmbedder};
use crate::error::{CancelToken, SimError};
use crate::events::{EventSink, Sinks};
use crate::human::HumanInput;
use crate::llm::cost::PriceTable;
use crate::llm::{CallKind, KindUsage, LlmBackend, LlmClient, ScriptedBackend};
use crate::output::TranscriptWriter;
use crate::scenario::{CommandConsent, Mode, Scenario};
use sopsim_core::environment::EnvironmentSnapshot;
pub use sopsim_core::run_state::EndReason;
use sopsim_core::tokens::{Estimator, TokenCounter};

/// Process-wide services every simulation shares.
#[derive(Clone)]
pub struct Services {
    /// The model backend that answers every call.
    pub llm: Arc<dyn LlmBackend>,
    /// The embedding service.
    pub embed: EmbedService,
    /// Counts the tokens of prompts.
    pub counter: Arc<dyn TokenCounter>,
    /// The prices that turn tokens into US dollars.
    pub prices: Arc<PriceTable>,
}

impl Services {
    /// The scripted backend with the scenario's script and the hash embedder: instant,
    /// deterministic, no model needed.
    pub fn scripted(scenario: &Scenario) -> Self {
        Self {
            llm: Arc::new(ScriptedBackend::new(scenario.script.clone())),
            embed: EmbedService::inline(Arc::new(HashEmbedder::default())),
            counter: Arc::new(Estimator),
            prices: Arc::new(PriceTable::built_in()),
        }
    }
}

/// Settings of one run.
#[derive(Default)]
pub(crate) struct RunConfig {
    /// Overrides the scenario's `environment.type`.
    pub mode: Option<Mode>,
    pub seed: u64,
    /// Overrides `sop.max_turns`.
    pub max_turns: Option<u64>,
    /// Agents played by a person, besides those marked `human` in the scenario.
    pub humans: Vec<String>,
    /// Where human turns come from; needed when a person plays an agent.
    pub human_input: Option<Arc<dyn HumanInput>>,
    pub sinks: Vec<Arc<dyn EventSink>>,
    /// Appends each finished turn to `transcript.jsonl`.
    pub transcript: Option<TranscriptWriter>,
    /// Appends the world after each round to `world.jsonl`.
    pub world_log: Option<TranscriptWriter>,
    /// Appends the probes' answers to `probes.jsonl`.
    pub probe_log: Option<TranscriptWriter>,
    /// Where the judge's rubric file is read from (the scenario's folder, or a
    /// `--judge` file's).
    pub judge_folder: Option<std::path::PathBuf>,
    /// Cancelled to stop the run at once, keeping every finished turn.
    pub cancel: Option<CancelToken>,
    /// Pause, step and stop the run from outside.
    pub control: Option<RunControl>,
    /// Stop at a turn boundary once the run has cost this much.
    pub budget_usd: Option<f64>,
    /// Stop at a turn boundary once this many tokens (prompt + completion) were used.
    pub max_total_tokens: Option<u64>,
    /// Reported as warnings when the run starts (e.g. what an imported config could not
    /// carry over), and kept in the summary.
    pub notes: Vec<String>,
    /// The programs the scenario's tools may start (none unless the user allows them).
    pub commands: CommandConsent,
}

/// What speculative decoding did over a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Speculation {
    /// The model's checks of drafts.
    pub checks: u64,
    /// Tokens drafted for the model to check.
    pub drafted: u64,
    /// Drafted tokens the model kept.
    pub accepted: u64,
    /// Drafts kept over drafts drawn.
    pub acceptance: f64,
    /// Tokens each check by the model gave: the drafts it kept and its own.
    pub tokens_per_check: f64,
}

impl Speculation {
    fn of(ledger: &crate::llm::Ledger) -> Option<Self> {
        let sum =
            |f: fn(&crate::llm::KindUsage) -> u64| ledger.by_kind.values().map(f).sum::<u64>();
        let checks = sum(|k| k.draft_checks);
        let drafted = sum(|k| k.drafted_tokens);
        let accepted = sum(|k| k.accepted_drafts);
        (checks > 0).then(|| Speculation {
            checks,
            drafted,
            accepted,
            acceptance: accepted as f64 / drafted.max(1) as f64,
            tokens_per_check: (accepted + checks) as f64 / checks as f64,
        })
    }
}

/// The figures of `summary.json`.
#[derive(Debug, Clone, Serialize)]
pub struct RunSummary {
    /// The scenario's name.
    pub scenario: String,
    /// The mode the run played in.
    pub mode: Mode,
    /// The run's seed.
    pub seed: u64,
    /// The model backend, as it describes itself.
    pub llm: String,
    /// The embedder's name.
    pub embedder: String,
    /// Turns played.
    pub turns: u64,
    /// State visits in the run.
    pub visits: u32,
    /// The state the run ended in.
    pub final_state: String,
    /// How the run ended.
    pub ended_by: EndReason,
    /// The world's condition that ended the run (`ended_by: end_if`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_if: Option<String>,
    /// The error that ended the run, with its causes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The scenario's field at fault when the error was in the scenario (a world value
    /// that cannot stand, a template past its render limit): `--resume` then takes
    /// the fixed file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_field: Option<String>,
    /// Why a budget stopped the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    /// `total`, then calls by kind.
    pub llm_calls: IndexMap<String, u64>,
    /// Embedding calls (one per message; knowledge-base lookups reuse them).
    pub embeddings: u64,
    /// Prompt tokens of the run's own model calls (the probes' are apart).
    pub prompt_tokens: u64,
    /// Completion tokens of the run's own model calls.
    pub completion_tokens: u64,
    /// Prompt tokens the backend reused from its prefix cache instead of processing.
    pub cached_prompt_tokens: u64,
    /// The share of prompt tokens found in the cache (`null` without prompts).
    pub prompt_cache_share: Option<f64>,
    /// Speculative decoding, when a draft model drafted: checks, drafts drawn and
    /// kept, the share kept and the tokens each check gave.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speculation: Option<Speculation>,
    /// True when token figures came from sopsim's estimator, not the model.
    pub tokens_estimated: bool,
    /// US dollars; `null` when a model's price is unknown.
    pub cost_usd: Option<f64>,
    /// The cost of each model used, `null` where its price is unknown.
    pub cost_by_model: BTreeMap<String, Option<f64>>,
    /// Calls and tokens by kind of call.
    pub tokens_by_kind: BTreeMap<String, KindUsage>,
    /// Calls and tokens by the agent that made the calls.
    pub by_agent: BTreeMap<String, KindUsage>,
    /// Calls and tokens by the role the calling agent played.
    pub tokens_by_role: BTreeMap<String, KindUsage>,
    /// Calls and tokens by the state the run was in.
    pub tokens_by_state: BTreeMap<String, KindUsage>,
    /// Calls and tokens by the model that answered.
    pub tokens_by_model: BTreeMap<String, KindUsage>,
    /// Prompt tokens sent during each turn (element 0 is turn 1), every call kind.
    pub prompt_tokens_by_turn: Vec<u64>,
    /// The run's model calls' median and 95th-percentile latency, in milliseconds.
    pub llm_latency_ms: Latency,
    /// Answers of the speaker controller and the judge that could not be used.
    pub parse_failures: ParseFailures,
    /// Agent replies cut where they went on as another participant (`Bob: …`).
    pub cut_replies: u64,
    /// Tool calls by tool and outcome, failed calls, and retries.
    #[serde(skip_serializing_if = "crate::simulation::no_tool_calls")]
    pub tools: crate::actors::messages::ToolSummary,
    /// Copies, labels, narration, echoes and empty replies among the replies
    /// ([`ReplyQuality`](crate::events::ReplyQuality)).
    pub reply_quality: sopsim_core::quality::ReplyQuality,
    /// Replies drawn again because a draw was flawed (see [`ReplyQuality`](crate::events::ReplyQuality)).
    pub redrawn_replies: crate::llm::Redrawn,
    /// Tokens decoded for the replies, over every draw, against the kept replies' own.
    pub reply_tokens: crate::llm::ReplyTokens,
    /// The world at the end: rounds played, its variables, each per-agent variable's
    /// spread.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub world: Option<sopsim_core::world::WorldSummary>,
    /// The probes' calls, tokens and cost, counted apart from the run's own and from
    /// its budgets, and the answers that could not be had.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probes: Option<ProbesRecord>,
    /// Warnings the run collected, and one for each tool some of whose calls failed.
    pub warnings: Vec<String>,
    /// The run's wall-clock time, in milliseconds.
    pub wall_ms: u64,
}

/// `summary.json`'s `probes`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ProbesRecord {
    /// The probes' model calls.
    pub calls: u64,
    /// Prompt tokens of the probes' calls.
    pub prompt_tokens: u64,
    /// Completion tokens of the probes' calls.
    pub completion_tokens: u64,
    /// US dollars; `null` when a model's price is unknown.
    pub cost_usd: Option<f64>,
    /// The probes that could not be answered.
    pub failed: Vec<crate::actors::ProbeFailure>,
}

fn no_tool_calls(t: &crate::actors::messages::ToolSummary) -> bool {
    t.calls.is_empty()
}

/// A warning for each tool some of whose calls failed.
fn tool_warnings(t: &crate::actors::messages::ToolSummary) -> Vec<String> {
    t.calls
        .iter()
        .filter_map(|(tool, outcomes)| {
            let failed: Vec<String> = outcomes
                .iter()
                .filter(|(o, _)| o.as_str() != "ok")
                .map(|(o, n)| format!("{o} {n}"))
                .collect();
            (!failed.is_empty())
                .then(|| format!("tool {tool}: calls that failed: {}", failed.join(", ")))
        })
        .collect()
}

/// Median and 95th-percentile latency of the model calls, in milliseconds.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Latency {
    /// The median.
    pub p50: f64,
    /// The 95th percentile.
    pub p95: f64,
}

fn percentile(sorted_us: &[u64], p: f64) -> f64 {
    if sorted_us.is_empty() {
        return 0.0;
    }
    let i = ((sorted_us.len() - 1) as f64 * p).round() as usize;
    sorted_us[i] as f64 / 1000.0
}

/// Everything a finished run produced.
#[derive(Debug)]
pub struct RunOutcome {
    /// The figures of `summary.json`.
    pub summary: RunSummary,
    /// The run's messages, in order.
    pub transcript: Vec<Arc<Message>>,
    /// The Environment at the end (`environment.json`).
    pub environment: sopsim_core::environment::EnvironmentRecord,
    /// The populations' networks drawn for the run (`network.json`); `None` without
    /// populations.
    pub network: Option<NetworkRecord>,
    /// The runtime failure, when `summary.ended_by` is `error`.
    pub error: Option<SimError>,
    /// The probes' answers, as `probes.jsonl` holds them (empty without probes).
    pub probes: Vec<crate::scenario::probes::ProbeLine>,
    /// The judge's scores (`judgement.json`), for a scenario with a judge whose run
    /// ran its course.
    pub judgement: Option<sopsim_core::judging::Judgement>,
}

/// Runs one simulation to its end. Must be called inside an actix `System`.
pub(crate) async fn run(
    scenario: Arc<Scenario>,
    services: &Services,
    config: RunConfig,
) -> Result<RunOutcome, SimError> {
    let started = Instant::now();
    check_people(&scenario, &config)?;
    let mode = config.mode.unwrap_or(scenario.environment.mode);
    let cancel = config.cancel.clone().unwrap_or_default();
    let llm = LlmClient::new(services.llm.clone(), config.seed).stopped_by(cancel.clone());
    let mut config = config;
    let sinks = Sinks::new(std::mem::take(&mut config.sinks));
    config.notes.extend(services.llm.notes());
    config.notes.extend(
        crate::scenario::advice(&scenario)
            .iter()
            .map(ToString::to_string),
    );
    for text in &config.notes {
        sinks.emit(crate::events::SimEvent::Warning { text: text.clone() });
    }
    // Each population's network, drawn once: who sees whom, and network.json.
    let drawn = sopsim_core::network::draw_all(scenario.populations.values(), config.seed)
        .map_err(SimError::Network)?;
    let audience = sopsim_core::memory::Audience::of(&scenario, mode, &drawn);
    let cast = cast(&scenario, services, &config, mode, &llm, sinks, audience).await?;
    let env = cast.env.clone();
    let (done_tx, done_rx) = oneshot::channel();
    let limits = Limits {
        max_turns: config.max_turns.unwrap_or(scenario.sop.max_turns),
        budget_usd: config.budget_usd,
        max_total_tokens: config.max_total_tokens,
        prices: services.prices.clone(),
        cancel,
        control: config.control,
    };
    let prober = (!scenario.probes.is_empty()).then(|| {
        crate::actors::Prober::new(
            scenario.clone(),
            cast.env.clone(),
            llm.apart(),
            cast.counter.clone(),
            config.seed,
            config.probe_log.take(),
        )
    });
    let director = Director::new(
        cast,
        limits,
        config.transcript,
        config.seed,
        config.notes,
        done_tx,
    );
    let director = match sopsim_core::world::World::new(&scenario, config.seed, &drawn) {
        Some(world) => director.with_world(world, config.world_log),
        None => director,
    };
    match prober {
        Some(prober) => director.with_probes(prober),
        None => director,
    }
    .start();
    let mut finish = done_rx
        .await
        .map_err(|_| SimError::Internal("the director stopped without finishing"))?;
    // What the backend found during the run (a server left out) is told with the rest.
    for note in services.llm.notes() {
        if !finish.warnings.contains(&note) {
            finish.warnings.push(note);
        }
    }
    let snapshot = env.send(Snapshot).await?;
    let error = finish.error.take();
    let probes = finish
        .probes
        .as_mut()
        .map(|p| std::mem::take(&mut p.answers))
        .unwrap_or_default();
    let summary = summarise(
        &scenario,
        services,
        &llm,
        (mode, config.seed),
        finish,
        error.as_ref(),
        &snapshot,
        started,
    );
    let network = sopsim_core::network::document(&scenario, mode, config.seed, &drawn);
    let judgement = match (&scenario.judge, summary.ended_by) {
        (
            Some(spec),
            EndReason::End | EndReason::EndIf | EndReason::MaxTurns | EndReason::Budget,
        ) => {
            let folder = config.judge_folder.clone().unwrap_or_default();
            let run_models = summary.tokens_by_model.keys().cloned().collect();
            let judged = crate::judgement::judge(
                &scenario,
                spec,
                &folder,
                &snapshot.transcript,
                llm.apart(),
                run_models,
            )
            .await;
            Some(judged.map_err(|e| SimError::Judge(Box::new(e)))?)
        }
        _ => None,
    };
    Ok(RunOutcome {
        summary,
        transcript: snapshot.transcript,
        environment: snapshot.record,
        network,
        error,
        probes,
        judgement,
    })
}

/// Refuses a run whose people are not agents of the scenario, or have no input.
fn check_people(scenario: &Scenario, config: &RunConfig) -> Result<(), SimError> {
    for h in &config.humans {
        if !scenario.agents.contains_key(h) {
            let known: Vec<&str> = scenario.agents.keys().map(String::as_str).collect();
            return Err(SimError::UnknownHuman {
                name: h.clone(),
                known: known.join(", "),
            });
        }
    }
    match scenario
        .agents
        .iter()
        .find(|(n, a)| a.human || config.humans.contains(n))
    {
        Some((name, _)) if config.human_input.is_none() => Err(SimError::NoHumanInput {
            agent: name.clone(),
        }),
        _ => Ok(()),
    }
}

/// Starts the Environment, the scenario's tools and one actor per agent: everything
/// the Director directs.
async fn cast(
    scenario: &Arc<Scenario>,
    services: &Services,
    config: &RunConfig,
    mode: Mode,
    llm: &LlmClient,
    sinks: Sinks,
    audience: Option<sopsim_core::memory::Audience>,
) -> Result<Cast, SimError> {
    // A population's members each speak once a round: no loop or stake check reads
    // their replies.
    let checks_replies = scenario.populations.is_empty();
    // Replies are checked against the participants' stakes with MiniLM's embeddings,
    // whose margin is known.
    let stakes = match checks_replies && services.embed.name() == crate::embed::MINILM_NAME {
        true => {
            let staked: Vec<(&String, &str)> = scenario
                .agents
                .iter()
                .map(|(n, a)| (n, a.stake.trim()))
                .filter(|(_, s)| !s.is_empty())
                .collect();
            let vectors = futures::future::try_join_all(
                staked
                    .iter()
                    .map(|(_, s)| services.embed.embed(s.to_string())),
            )
            .await?;
            let names = staked.into_iter().map(|(n, _)| n.clone());
            Some(Arc::new(sopsim_core::quality::Stakes::new(
                names.zip(vectors),
            )))
        }
        false => None,
    };
    let env = EnvironmentActor::new(
        scenario.clone(),
        mode,
        services.embed.clone(),
        llm.clone(),
        services.counter.clone(),
        audience,
        QualityEmbeddings {
            stakes: stakes.as_ref().is_some_and(|s| !s.is_empty()),
        },
    )
    .start();
    let tools = Arc::new(crate::tools::ToolBox::start(scenario, &config.commands).await?);
    let instructions = sopsim_core::quality::Instructions::of(scenario);
    let shared = Arc::new(AgentShared {
        scenario: scenario.clone(),
        env: env.clone(),
        llm: llm.clone(),
        counter: services.counter.clone(),
        sinks: sinks.clone(),
        tools,
        seed: config.seed,
        instructions: instructions.clone(),
    });
    let agents: HashMap<String, _> = scenario
        .agents
        .iter()
        .map(|(name, spec)| {
            let played = spec.human || config.humans.contains(name);
            let actor = AgentActor {
                name: name.clone(),
                human: config.human_input.clone().filter(|_| played),
                shared: shared.clone(),
            };
            (name.clone(), actor.start())
        })
        .collect();
    Ok(Cast {
        scenario: scenario.clone(),
        agents,
        env,
        llm: llm.clone(),
        counter: services.counter.clone(),
        sinks,
        paraphrases: checks_replies,
        stakes,
        instructions,
    })
}

/// The figures of `summary.json`, from how the run finished, the Environment's last
/// state and the model client's ledger.
#[allow(clippy::too_many_arguments)]
fn summarise(
    scenario: &Scenario,
    services: &Services,
    llm: &LlmClient,
    (mode, seed): (Mode, u64),
    finish: Finish,
    error: Option<&SimError>,
    snapshot: &EnvironmentSnapshot,
    started: Instant,
) -> RunSummary {
    let tool_summary = snapshot.tools.clone();
    let ledger = llm.ledger();
    let cost = services.prices.cost(&ledger);
    let mut latencies = ledger.latencies_us.clone();
    latencies.sort_unstable();
    let mut llm_calls = IndexMap::from([("total".to_string(), ledger.calls())]);
    llm_calls.extend(CallKind::ALL.iter().map(|k| {
        (
            k.as_str().to_string(),
            ledger.by_kind.get(k).map_or(0, |u| u.calls),
        )
    }));
    RunSummary {
        scenario: scenario.name.clone(),
        mode,
        seed,
        llm: llm.describe(),
        embedder: services.embed.name().to_string(),
        turns: finish.turns,
        visits: finish.visits,
        final_state: finish.final_state,
        ended_by: finish.ended_by,
        ended_if: finish.world.as_ref().and_then(|w| w.ended_if.clone()),
        error: error.map(|e| sopsim_core::error_chain::chain(e)),
        error_field: match error {
            Some(SimError::World(e)) => Some(e.field.clone()),
            _ => None,
        },
        stop_reason: finish.stop_reason,
        llm_calls,
        cost_usd: cost.usd,
        cost_by_model: cost.by_model,
        embeddings: snapshot.embeddings,
        prompt_tokens: ledger.prompt_tokens(),
        completion_tokens: ledger.completion_tokens(),
        cached_prompt_tokens: ledger.cached_prompt_tokens(),
        prompt_cache_share: crate::llm::cache_share(
            ledger.cached_prompt_tokens(),
            ledger.prompt_tokens(),
        ),
        speculation: Speculation::of(&ledger),
        tokens_estimated: ledger.tokens_estimated,
        tokens_by_kind: ledger
            .by_kind
            .iter()
            .map(|(k, v)| (k.as_str().to_string(), v.clone()))
            .collect(),
        by_agent: ledger.by_agent.clone(),
        tokens_by_role: ledger.by_role.clone(),
        tokens_by_state: ledger.by_state.clone(),
        tokens_by_model: ledger.by_model.clone(),
        prompt_tokens_by_turn: ledger.prompt_tokens_by_turn.clone(),
        parse_failures: finish.failures,
        cut_replies: snapshot.cut_replies,
        tools: tool_summary.clone(),
        reply_quality: finish.reply_quality,
        redrawn_replies: ledger.redrawn.clone(),
        reply_tokens: ledger.reply_tokens.clone(),
        world: finish.world,
        probes: finish.probes.map(|p| ProbesRecord {
            calls: p.calls,
            prompt_tokens: p.prompt_tokens,
            completion_tokens: p.completion_tokens,
            cost_usd: services.prices.cost(&p.ledger).usd,
            failed: p.failed,
        }),
        llm_latency_ms: Latency {
            p50: percentile(&latencies, 0.5),
            p95: percentile(&latencies, 0.95),
        },
        warnings: finish
            .warnings
            .into_iter()
            .chain(tool_warnings(&tool_summary))
            .collect(),
        wall_ms: started.elapsed().as_millis() as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_percentiles_are_read_from_the_sorted_calls_in_milliseconds() {
        assert_eq!(percentile(&[], 0.5), 0.0);
        let us = [1_000, 2_000, 3_000, 4_000, 100_000];
        assert_eq!(percentile(&us, 0.5), 3.0);
        assert_eq!(percentile(&us, 0.95), 100.0);
        assert_eq!(percentile(&[7_500], 0.95), 7.5);
    }

    #[test]
    fn a_tool_with_failed_calls_is_warned_about_naming_each_outcome() {
        let mut t = crate::actors::messages::ToolSummary::default();
        t.calls
            .insert("calc".into(), [("ok".to_string(), 4)].into_iter().collect());
        t.calls.insert(
            "lookup".into(),
            [
                ("ok".to_string(), 1),
                ("failed".to_string(), 2),
                ("repeated".to_string(), 1),
            ]
            .into_iter()
            .collect(),
        );
        assert_eq!(
            tool_warnings(&t),
            ["tool lookup: calls that failed: failed 2, repeated 1"]
        );
        assert!(!no_tool_calls(&t));
        assert!(no_tool_calls(&Default::default()));
    }
}
