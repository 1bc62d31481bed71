//! What a run of a scenario takes from the machine, checked before it starts: the
//! memory its population members need against what is free, and a turn limit that
//! lets its largest round start.

use std::path::Path;

use super::SetupError;
use crate::scenario::Scenario;

/// Peak memory per agent of a population run of one round, its files written
/// (`benches/population_scale.py`, scripted, one round: 5.2 KiB an agent at 1,000,000
/// agents, 5.5 KiB at 100,000).
pub(crate) const BYTES_PER_AGENT: u64 = 6 << 10;
/// What each turn after the first round adds: its message, kept in memory, and its
/// place in the views of those who see it (a scripted public-goods round of 100,000
/// agents on a ring, release build, 2026-12-05: 591 MB after one round, 860 MB after
/// three and 1,590 MB after ten, 1.38 and 1.14 KB a turn).
const BYTES_PER_TURN: u64 = 1_400;
/// Rounds whose turns the estimate counts: a turn limit far above the turns a run will
/// take (a common way to leave it unbounded) does not make a run look too big.
const ROUNDS_COUNTED: u64 = 10;
/// A run's memory apart from its agents (ten rounds of 10,000 agents peak at 184 MiB,
/// of which the agents and turns above count 119).
const BASE_BYTES: u64 = 96 << 20;

/// What each link of a population's network takes at a run's peak, as measured: the
/// pairs drawn, each member's list of neighbours (twice per link) and its copy in the
/// members' views, and `network.json`'s pairs (a scripted round of 5,000 members in one
/// group, 12.5 million links: 40 bytes a link; a random network at p = 0.5: 42).
const BYTES_PER_LINK: u64 = 48;
/// What each link adds per round after the first in cooperative mode, where a
/// member's message goes into each neighbour's view (three rounds of the same group:
/// 10.5 bytes a link a round).
const BYTES_PER_LINK_ROUND: u64 = 12;

/// A run's memory at its peak, by what takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct MemoryEstimate {
    /// Bytes for every run at once.
    total: u64,
    /// The population whose network takes the most, with its kind, its links and the
    /// bytes they take in every run at once.
    densest: Option<NetworkShare>,
}

/// One population's network in a [`MemoryEstimate`].
#[derive(Debug, Clone, PartialEq, Eq)]
struct NetworkShare {
    population: String,
    kind: &'static str,
    links: u64,
    bytes: u64,
}

/// About how much memory `runs` runs of `scenario` at once take at their peak: each
/// agent's share, the turns after the first round up to the turn limit (at most
/// ten rounds' worth), each style as many times as its prompts hold it at once, and
/// each population's network by its links; with the network that takes the most.
fn estimate(scenario: &Scenario, runs: usize) -> MemoryEstimate {
    let agents = scenario.agents.len() as u64;
    let styles: u64 = scenario
        .agents
        .values()
        .map(|a| a.style.len() as u64 * STYLE_COPIES)
        .sum();
    let later_turns = scenario
        .sop
        .max_turns
        .min(agents.saturating_mul(ROUNDS_COUNTED))
        .saturating_sub(agents);
    let later_rounds = later_turns / agents.max(1);
    let per_link = BYTES_PER_LINK + BYTES_PER_LINK_ROUND * later_rounds;
    let runs = runs as u64;
    let networks: Vec<NetworkShare> = scenario
        .populations
        .iter()
        .map(|(name, p)| {
            let links = p.network.expected_links(p.count, p.edges.len());
            NetworkShare {
                population: name.clone(),
                kind: p.network.kind(),
                links,
                bytes: links.saturating_mul(per_link).saturating_mul(runs),
            }
        })
        .collect();
    let links: u64 = networks
        .iter()
        .map(|n| n.bytes)
        .fold(0, u64::saturating_add);
    // A per-agent variable is a number an agent, held at most three times at once
    // (the world's, the view the turns read, the values before a step), and written
    // into each round's line of `world.jsonl` (up to 25 bytes a number).
    let variables = scenario
        .world
        .as_ref()
        .map_or(0, |w| w.variables.values().filter(|v| v.per_agent).count())
        as u64;
    let per_run = BASE_BYTES
        .saturating_add(agents.saturating_mul(BYTES_PER_AGENT))
        .saturating_add(agents.saturating_mul(variables * (24 + 25)))
        .saturating_add(later_turns.saturating_mul(BYTES_PER_TURN))
        .saturating_add(styles);
    MemoryEstimate {
        total: per_run.saturating_mul(runs).saturating_add(links),
        densest: networks
            .into_iter()
            .filter(|n| n.links > 0)
            .max_by_key(|n| n.bytes),
    }
}

/// How many copies of an agent's style a run holds at its peak: the agent's own, its
/// system prompt, and the request in flight.
const STYLE_COPIES: u64 = 3;

/// Refuses a turn limit below the turns of one round of the scenario's largest
/// simultaneous state: the run would end before its first round, having said nothing.
pub fn check_round_fits(scenario: &Scenario, max_turns: Option<u64>) -> Result<(), SetupError> {
    let max_turns = max_turns.unwrap_or(scenario.sop.max_turns);
    match scenario.largest_round() {
        Some((state, turns)) if turns > max_turns => Err(SetupError::RoundTooLong {
            state: state.to_string(),
            turns,
            max_turns,
        }),
        _ => Ok(()),
    }
}

/// Refuses a scenario with populations whose runs would not fit the memory this machine
/// has free (`MemAvailable`), before anything starts. Scenarios of named agents are
/// small, and a machine that does not say what is free is not checked.
pub fn check_memory(path: &Path, scenario: &Scenario, runs: usize) -> Result<(), SetupError> {
    if scenario.populations.is_empty() {
        return Ok(());
    }
    let estimate = estimate(scenario, runs);
    fits(
        path,
        scenario.agents.len(),
        runs,
        estimate.total,
        estimate.densest,
    )
}

/// [`check_memory`] before a scenario's members are made, from their number alone.
pub(super) fn check_members_fit(path: &Path, members: usize) -> Result<(), SetupError> {
    if members == 0 {
        return Ok(());
    }
    let estimate = BASE_BYTES.saturating_add((members as u64).saturating_mul(BYTES_PER_AGENT));
    fits(path, members, 1, estimate, None)
}

fn fits(
    path: &Path,
    agents: usize,
    runs: usize,
    estimate: u64,
    densest: Option<NetworkShare>,
) -> Result<(), SetupError> {
    match available_memory() {
        Some(available) if estimate > available => Err(SetupError::TooBig {
            path: path.to_path_buf(),
            agents,
            runs,
            estimate_mib: estimate >> 20,
            available_mib: available >> 20,
            network: densest
                .filter(|n| n.bytes >= estimate / 2)
                .map(|n| {
                    format!(
                        "; of it, the {} network of population {} makes about {} links, \
                         {} MiB",
                        n.kind,
                        n.population,
                        n.links,
                        n.bytes >> 20
                    )
                })
                .unwrap_or_default(),
        }),
        _ => Ok(()),
    }
}

/// What a benchmark holds for each run it plans, whether it runs now or not: the job,
/// its line of the manifest, its status and figures in the report being built (the
/// prisoner's dilemma over 100,000 seeds, 200,000 planned runs: 1.6 KiB a run at the
/// report's peak).
const BYTES_PER_PLANNED_RUN: u64 = 2 << 10;

/// Refuses a benchmark whose plan of `planned` runs would not fit the memory this
/// machine has free, before anything is planned.
pub fn check_plan_fits(planned: u64) -> Result<(), SetupError> {
    let estimate = BASE_BYTES.saturating_add(planned.saturating_mul(BYTES_PER_PLANNED_RUN));
    match available_memory() {
        Some(available) if estimate > available => Err(SetupError::PlanTooBig {
            runs: planned,
            estimate_mib: estimate >> 20,
            available_mib: available >> 20,
        }),
        _ => Ok(()),
    }
}

/// The memory this machine has free, from `/proc/meminfo` (Linux).
fn available_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib << 10)
}
