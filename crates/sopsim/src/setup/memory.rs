//! What a run of a scenario takes from the machine, checked before it starts: the
//! memory its population members need against what is free, and a turn limit that
//! lets its largest round start.

use std::path::Path;

use super::SetupError;
use crate::scenario::Scenario;

/// Peak memory per agent of a population run of one round, its files written
/// (`benches/population_scale.py`, scripted, one round: 5.2 KiB an agent at 1,000,000
/// agents, 5.5 KiB at 100,000).
pub const BYTES_PER_AGENT: u64 = 6 << 10;
/// What each turn after the first round adds: its message, kept in memory, and its
/// place in the views of those who see it (the same script over three and ten rounds at
/// 100,000 agents: 0.57 and 0.54 KiB a turn).
const BYTES_PER_TURN: u64 = 700;
/// Rounds whose turns the estimate counts: a turn limit far above the turns a run will
/// take (a common way to leave it unbounded) does not make a run look too big.
const ROUNDS_COUNTED: u64 = 10;
/// A run's memory apart from its agents (ten rounds of 10,000 agents peak at 184 MiB,
/// of which the agents and turns above count 119).
const BASE_BYTES: u64 = 96 << 20;

/// About how much memory `runs` runs of `scenario` at once take at their peak: each
/// agent's share, the turns after the first round up to the turn limit (at most
/// ten rounds' worth), and each style as many times as its prompts hold it at once.
pub fn memory_estimate(scenario: &Scenario, runs: usize) -> u64 {
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
    let per_run =
        BASE_BYTES + agents * BYTES_PER_AGENT + later_turns.saturating_mul(BYTES_PER_TURN) + styles;
    per_run.saturating_mul(runs as u64)
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
    fits(
        path,
        scenario.agents.len(),
        runs,
        memory_estimate(scenario, runs),
    )
}

/// [`check_memory`] before a scenario's members are made, from their number alone.
pub(super) fn check_members_fit(path: &Path, members: usize) -> Result<(), SetupError> {
    if members == 0 {
        return Ok(());
    }
    let estimate = BASE_BYTES.saturating_add((members as u64).saturating_mul(BYTES_PER_AGENT));
    fits(path, members, 1, estimate)
}

fn fits(path: &Path, agents: usize, runs: usize, estimate: u64) -> Result<(), SetupError> {
    match available_memory() {
        Some(available) if estimate > available => Err(SetupError::TooBig {
            path: path.to_path_buf(),
            agents,
            runs,
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
