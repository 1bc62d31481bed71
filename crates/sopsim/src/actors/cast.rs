//! What the Director is given (the simulation's actors and services, and the limits
//! it keeps) and what it gives back when the run ends.

use std::collections::HashMap;
use std::sync::Arc;

use actix::Addr;

use super::agent::AgentActor;
use super::environment::EnvironmentActor;
use crate::control::RunControl;
use crate::error::{CancelToken, SimError};
use crate::events::{Progress, Sinks};
use crate::llm::cost::PriceTable;
use crate::llm::LlmClient;
use crate::scenario::Scenario;
use sopsim_core::quality::{Checker, ReplyQuality};
use sopsim_core::run_state::{EndReason, ParseFailures, Spend};
use sopsim_core::tokens::TokenCounter;

/// How a run ended, as the Director saw it.
#[derive(Debug)]
pub(crate) struct Finish {
    pub ended_by: EndReason,
    pub error: Option<SimError>,
    pub turns: u64,
    pub final_state: String,
    pub visits: u32,
    pub warnings: Vec<String>,
    pub stop_reason: Option<String>,
    pub failures: ParseFailures,
    pub reply_quality: ReplyQuality,
    /// The world at the end, in a scenario with one.
    pub world: Option<sopsim_core::world::WorldSummary>,
    /// What the probes cost and which failed, in a scenario with probes.
    pub probes: Option<super::prober::ProbesSummary>,
}

/// The actors and services of the Director's simulation.
pub(crate) struct Cast {
    pub scenario: Arc<Scenario>,
    pub agents: HashMap<String, Addr<AgentActor>>,
    pub env: Addr<EnvironmentActor>,
    pub llm: LlmClient,
    pub counter: Arc<dyn TokenCounter>,
    pub sinks: Sinks,
    /// Whether replies that restate an earlier message are counted.
    pub paraphrases: bool,
    /// The participants' stakes embedded, when replies are checked against them.
    pub stakes: Option<Arc<sopsim_core::quality::Stakes>>,
    /// What replies are checked against, made once for the run's agents and Director.
    pub instructions: sopsim_core::quality::Instructions,
}

impl Cast {
    /// How far the run is after `turns` (and whether it is `paused`): tokens, cost,
    /// calls by kind, reply quality.
    pub(crate) fn progress(
        &self,
        (turns, paused): (u64, bool),
        prices: &PriceTable,
        reply_quality: ReplyQuality,
    ) -> Progress {
        let ledger = self.llm.ledger_totals();
        Progress {
            turns,
            paused,
            prompt_tokens: ledger.prompt_tokens(),
            completion_tokens: ledger.completion_tokens(),
            cost_usd: prices.cost(&ledger).usd,
            calls: ledger
                .by_kind
                .iter()
                .map(|(k, u)| (k.as_str().to_string(), u.calls))
                .collect(),
            reply_quality,
        }
    }

    /// What judges every committed message of the run.
    pub(crate) fn checker(&self) -> Checker {
        let mut checker = Checker::new(self.instructions.clone());
        if self.paraphrases {
            checker = checker.counting_paraphrases();
        }
        if let Some(stakes) = &self.stakes {
            checker = checker.with_stakes(stakes.clone());
        }
        checker
    }
}

/// When the Director ends a run early, between turns.
pub(crate) struct Limits {
    pub max_turns: u64,
    pub budget_usd: Option<f64>,
    pub max_total_tokens: Option<u64>,
    pub prices: Arc<PriceTable>,
    /// Cancelled to stop at once, abandoning the turn in flight.
    pub cancel: CancelToken,
    /// Pause, step and stop from outside the run.
    pub control: Option<RunControl>,
}

impl Limits {
    /// What a run has spent, as the budget checks read it.
    pub(crate) fn spend(&self, llm: &LlmClient) -> Spend {
        let ledger = llm.ledger_totals();
        Spend {
            tokens: ledger
                .prompt_tokens()
                .saturating_add(ledger.completion_tokens()),
            usd: self.prices.cost(&ledger).usd,
            unpriced: ledger
                .by_model
                .keys()
                .filter(|m| self.prices.price(m).is_none())
                .cloned()
                .collect(),
        }
    }
}
