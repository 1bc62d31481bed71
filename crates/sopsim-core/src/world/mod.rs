//! A run's world as data: the scenario's variables after each round, every agent's
//! last move in each state (what strategy players play on), and the conditions that
//! end the run. Pure, like the Environment: the Director owns one per run, feeds it
//! each closed round's messages, and hands its [`WorldView`] to the turns.
//!
//! A round is one visit of a state in which agents decide: its decisions are the
//! `decision` values of the visit's messages, the last of each agent. After the round,
//! each variable whose `update` names the state takes its new value, in the declared
//! order, each formula seeing the values from before its own step; a value that is
//! not a finite number or leaves its bounds is a [`WorldError`] naming the variable,
//! the round and the value. A per-agent variable is one `f64` per agent, in the
//! scenario's agent order, so a population of a million costs eight megabytes a
//! variable, and a round's update is one evaluation of one compiled formula per
//! player.

mod scope;
pub mod strategy;
pub mod view;

use std::collections::HashMap;
use std::sync::Arc;

use indexmap::IndexMap;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use crate::memory::Message;
use crate::network::Neighbours;
use crate::scenario::{Distribution, Initial, Scenario, VariableSpec, WorldSpec};

pub use scope::{Aggregates, MemberScope, RoundScope};
pub use strategy::StrategyMove;
pub use view::render;

use crate::scenario::expr::{self, Sizes};

/// The agents of a run by number (their order in the scenario), and who each sees.
#[derive(Debug)]
pub struct Roster {
    /// The agents' names, in the scenario's order.
    pub names: Vec<Arc<str>>,
    /// Each agent's number, by name.
    pub index: HashMap<String, u32>,
    /// Per agent: the agents whose moves it answers (a population member's network
    /// neighbours); `None`: every other agent.
    pub neighbours: Vec<Option<Arc<[u32]>>>,
}

impl Roster {
    /// The roster of `scenario`'s agents, with its populations' networks as `drawn`.
    pub fn new(scenario: &Scenario, drawn: &[Neighbours]) -> Self {
        let names: Vec<Arc<str>> = scenario
            .agents
            .keys()
            .map(|n| Arc::from(n.as_str()))
            .collect();
        let index = names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.to_string(), i as u32))
            .collect();
        // Members are numbered within their population; the roster by agent order.
        let mut first: HashMap<&str, u32> = HashMap::new();
        for (i, agent) in scenario.agents.values().enumerate() {
            if let Some(m) = &agent.member {
                first.entry(m.population.as_str()).or_insert(i as u32);
            }
        }
        let neighbours = scenario
            .agents
            .values()
            .map(|agent| {
                let m = agent.member.as_ref()?;
                let p = scenario.populations.get_index_of(&m.population)?;
                let lists = drawn.get(p)?.as_ref()?;
                let base = first[m.population.as_str()];
                Some(
                    lists[m.index as usize]
                        .iter()
                        .map(|n| base + n)
                        .collect::<Arc<[u32]>>(),
                )
            })
            .collect();
        Self {
            names,
            index,
            neighbours,
        }
    }
}

/// Every agent's last move in one state, and how the last round's moves split.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Moves {
    /// Rounds of this state closed so far.
    pub rounds: u32,
    /// Per agent, its move in the last round it moved in.
    pub last: Arc<Vec<Option<Arc<str>>>>,
    /// How many agents made each move in the last round.
    pub counts: Arc<IndexMap<Arc<str>, u32>>,
    /// Per agent: whether a grim trigger has been pulled (another defected against it).
    #[serde(skip)]
    pub triggered: Arc<Vec<bool>>,
}

/// What the turns of a round see of the world: the variables, the rounds and the last
/// moves. Shared, never copied per turn.
#[derive(Debug, Clone, Default)]
pub struct WorldView {
    /// Rounds of the world's round state closed so far.
    pub rounds: u32,
    /// The global variables' values, by name.
    pub globals: Arc<IndexMap<String, f64>>,
    /// Each per-agent variable's values, one per agent in the scenario's order, by name.
    pub per_agent: Arc<IndexMap<String, Arc<Vec<f64>>>>,
    /// Last moves by state.
    pub moves: Arc<HashMap<String, Moves>>,
    /// The run's agents and who each sees, when the view comes from a world.
    pub roster: Option<Arc<Roster>>,
    /// The sizes of what its formulas and templates read, and the render limit.
    pub sizes: Sizes,
}

/// A variable whose value cannot stand (not a number, out of its bounds, a formula
/// that fails), or a condition that cannot be read: `field` names it
/// (`world.variables.fish.update`, `world.end_if.collapse`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{field}: round {round}{}: {why}", .agent.as_ref().map(|a| format!(", agent {a}")).unwrap_or_default())]
pub struct WorldError {
    /// The scenario field at fault (`world.variables.fish.update`).
    pub field: String,
    /// The world's round count when it happened.
    pub round: u32,
    /// The agent whose value it was, for a per-agent variable.
    pub agent: Option<String>,
    /// What is wrong, with the value when there is one.
    pub why: String,
}

/// Why a round could not be closed. The world is left as it was before the round.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RoundError {
    /// A variable or condition could not stand.
    #[error(transparent)]
    World(#[from] WorldError),
    /// The run was stopped while the round's update ran.
    #[error("stopped while the world's round was updated")]
    Stopped,
}

/// Members whose formulas are evaluated between two looks at the stop signal.
const MEMBERS_BETWEEN_STOPS: usize = 1024;

/// What closing a round gives: the line of `world.jsonl`, and the condition that ends
/// the run, if one holds.
#[derive(Debug, Clone, Serialize)]
pub struct Closed {
    /// The line for `world.jsonl`.
    pub line: WorldLine,
    /// The `end_if` condition that ends the run, if one holds.
    #[serde(skip)]
    pub ended_if: Option<String>,
}

/// One line of `world.jsonl`: the variables after a round.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct WorldLine {
    /// The world's rounds closed so far (this one included, when it is one).
    pub round: u32,
    /// The state whose round closed.
    pub state: String,
    /// The state's visit number within the run.
    pub visit: u32,
    /// The global variables' values, by name.
    pub world: IndexMap<String, f64>,
    /// Each per-agent variable's value for every agent, in the scenario's agent order.
    #[serde(skip_serializing_if = "IndexMap::is_empty")]
    pub agents: IndexMap<String, Arc<Vec<f64>>>,
    /// The `end_if` condition that holds after this round and ends the run, if one does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_if: Option<String>,
}

/// `summary.json`'s `world`: how many rounds, the variables at the end, and each
/// per-agent variable's spread.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct WorldSummary {
    /// The world's rounds closed.
    pub rounds: u32,
    /// The global variables' values at the end, by name.
    pub world: IndexMap<String, f64>,
    /// Each per-agent variable's spread over the agents at the end, by name.
    #[serde(skip_serializing_if = "IndexMap::is_empty")]
    pub agents: IndexMap<String, Spread>,
    /// The `end_if` condition that ended the run, if one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_if: Option<String>,
}

/// The mean, least and largest of a per-agent variable.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct Spread {
    /// The mean value.
    pub mean: f64,
    /// The least value.
    pub min: f64,
    /// The largest value.
    pub max: f64,
}

impl Spread {
    /// The spread of `values`; `None` when there are none.
    pub fn of(values: &[f64]) -> Option<Spread> {
        if values.is_empty() {
            return None;
        }
        Some(Spread {
            mean: values.iter().sum::<f64>() / values.len() as f64,
            min: values.iter().copied().fold(f64::INFINITY, f64::min),
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        })
    }
}

/// A run's world.
#[derive(Debug)]
pub struct World {
    spec: WorldSpec,
    roster: Arc<Roster>,
    /// Per state: the agents who play a role there, in agent order.
    players: HashMap<String, Vec<u32>>,
    /// Per agent: its strategy's cooperating move, where it plays a grim trigger.
    grim: Vec<Option<Arc<str>>>,
    /// Per state: the values its choices offer, each counted in `counts` (as 0 when
    /// no one chose it).
    values: HashMap<String, Vec<String>>,
    globals: IndexMap<String, f64>,
    per_agent: Arc<IndexMap<String, Arc<Vec<f64>>>>,
    rounds: u32,
    moves: HashMap<String, Moves>,
    ended_if: Option<String>,
    /// Per state: whether every decision made there is a number.
    numeric: HashMap<String, bool>,
    sizes: Sizes,
}

impl World {
    /// The world of a run of `scenario` with `seed`, whose populations' networks are
    /// `drawn`; `None` when it keeps nothing (no variables and no strategy players).
    pub fn new(scenario: &Scenario, seed: u64, drawn: &[Neighbours]) -> Option<World> {
        let strategies = scenario.agents.values().any(|a| a.strategy.is_some());
        if scenario.world.is_none() && !strategies {
            return None;
        }
        let spec = scenario.world.clone().unwrap_or_default();
        let roster = Arc::new(Roster::new(scenario, drawn));
        let n = roster.names.len();
        let mut globals = IndexMap::new();
        let mut per_agent = IndexMap::new();
        for (name, v) in &spec.variables {
            if v.per_agent {
                per_agent.insert(name.clone(), Arc::new(initial_values(name, v, n, seed)));
            } else if let Initial::Number(x) = v.initial {
                globals.insert(name.clone(), x);
            }
        }
        let mut players: HashMap<String, Vec<u32>> = HashMap::new();
        for (i, agent) in scenario.agents.values().enumerate() {
            for state in agent.roles.keys() {
                players.entry(state.clone()).or_default().push(i as u32);
            }
        }
        let mut values: HashMap<String, Vec<String>> = HashMap::new();
        for (state, st) in &scenario.sop.states {
            for c in st.components.values().filter_map(|c| c.choice.as_ref()) {
                let listed = values.entry(state.clone()).or_default();
                for v in &c.values {
                    if !listed.contains(v) {
                        listed.push(v.clone());
                    }
                }
            }
        }
        let numeric = values
            .iter()
            .map(|(state, v)| {
                (
                    state.clone(),
                    v.iter().all(|v| v.trim().parse::<f64>().is_ok()),
                )
            })
            .collect();
        let grim = scenario
            .agents
            .iter()
            .map(|(name, a)| {
                let s = a.strategy.as_deref()?;
                (s.rule == Some(crate::scenario::BuiltIn::GrimTrigger))
                    .then(|| crate::scenario::strategy_moves(scenario, name, s).0)
                    .flatten()
                    .map(Arc::from)
            })
            .collect();
        Some(World {
            spec,
            roster,
            players,
            grim,
            values,
            globals,
            per_agent: Arc::new(per_agent),
            rounds: 0,
            moves: HashMap::new(),
            ended_if: None,
            numeric,
            sizes: expr::sizes_of(scenario),
        })
    }

    /// What the next turns see.
    pub fn view(&self) -> WorldView {
        WorldView {
            rounds: self.rounds,
            globals: Arc::new(self.globals.clone()),
            per_agent: self.per_agent.clone(),
            moves: Arc::new(self.moves.clone()),
            roster: Some(self.roster.clone()),
            sizes: self.sizes,
        }
    }

    /// Whether a round of `state` changes anything: a variable is updated there, or
    /// agents decide there.
    pub fn keeps(&self, state: &str) -> bool {
        self.spec.round_state() == Some(state)
            || self
                .spec
                .variables
                .values()
                .any(|v| v.state.as_deref() == Some(state))
    }

    /// Closes a round of `state` (its visit `visit`), whose messages were `said`: the
    /// moves made, then every variable `state` updates, then the conditions that end
    /// the run. `None` when the visit made no move and updates nothing. `stopped` is
    /// asked between members; once it says yes, or a value cannot stand, the world is
    /// left as it was before the round.
    pub fn close_round(
        &mut self,
        state: &str,
        visit: u32,
        said: &[Arc<Message>],
        stopped: &dyn Fn() -> bool,
    ) -> Result<Option<Closed>, RoundError> {
        let before = (
            self.globals.clone(),
            self.per_agent.clone(),
            self.rounds,
            self.moves.clone(),
        );
        let closed = self.close(state, visit, said, stopped);
        if closed.is_err() {
            (self.globals, self.per_agent, self.rounds, self.moves) = before;
        }
        closed
    }

    fn close(
        &mut self,
        state: &str,
        visit: u32,
        said: &[Arc<Message>],
        stopped: &dyn Fn() -> bool,
    ) -> Result<Option<Closed>, RoundError> {
        let decided = self.decisions(said);
        let counts_round = self.spec.round_state() == Some(state);
        if decided.is_empty() && !self.keeps(state) {
            return Ok(None);
        }
        if !decided.is_empty() {
            self.record_moves(state, &decided);
        }
        if counts_round {
            self.rounds += 1;
        }
        let offered = self.values.get(state).map_or(&[][..], Vec::as_slice);
        let round = RoundScope::new(self, offered, &decided);
        let updated: Vec<(String, VariableSpec)> = self
            .spec
            .variables
            .iter()
            .filter(|(_, v)| v.state.as_deref() == Some(state) && v.update.is_some())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (name, v) in &updated {
            self.update(name, v, &round, state, stopped)?;
        }
        let ended_if = match counts_round {
            true => self.ended_if()?,
            false => None,
        };
        self.ended_if = ended_if.clone();
        Ok(Some(Closed {
            line: WorldLine {
                round: self.rounds,
                state: state.to_string(),
                visit,
                world: self.globals.clone(),
                agents: (*self.per_agent).clone(),
                ended_if: ended_if.clone(),
            },
            ended_if,
        }))
    }

    /// `summary.json`'s `world`.
    pub fn summary(&self) -> WorldSummary {
        WorldSummary {
            rounds: self.rounds,
            world: self.globals.clone(),
            agents: self
                .per_agent
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), Spread::of(v)?)))
                .collect(),
            ended_if: self.ended_if.clone(),
        }
    }

    /// Each agent's last decision among `said`, in agent order.
    fn decisions(&self, said: &[Arc<Message>]) -> Vec<(u32, Arc<str>)> {
        let mut last: IndexMap<u32, Arc<str>> = IndexMap::new();
        for m in said {
            if let (Some(d), Some(&i)) = (&m.decision, self.roster.index.get(&m.name)) {
                last.insert(i, Arc::from(d.value.as_str()));
            }
        }
        let mut decided: Vec<(u32, Arc<str>)> = last.into_iter().collect();
        decided.sort_by_key(|(i, _)| *i);
        decided
    }

    fn record_moves(&mut self, state: &str, decided: &[(u32, Arc<str>)]) {
        let n = self.roster.names.len();
        let moves = self.moves.entry(state.to_string()).or_default();
        let last = Arc::make_mut(&mut moves.last);
        if last.len() < n {
            last.resize(n, None);
        }
        let mut counts: IndexMap<Arc<str>, u32> = IndexMap::new();
        for (i, m) in decided {
            last[*i as usize] = Some(m.clone());
            *counts.entry(m.clone()).or_default() += 1;
        }
        moves.rounds += 1;
        moves.counts = Arc::new(counts);
        // A grim trigger, once pulled, stays pulled.
        let mut triggered = moves.triggered.as_ref().clone();
        triggered.resize(n, false);
        for (i, cooperate) in self.grim.iter().enumerate() {
            let Some(cooperate) = cooperate else { continue };
            if triggered[i] || moves.last[i].is_none() {
                continue;
            }
            let others = strategy::others(&self.roster, &moves.last, &moves.counts, i as u32);
            triggered[i] = others.iter().any(|(m, n)| *n > 0 && m != cooperate);
        }
        moves.triggered = Arc::new(triggered);
    }

    fn update(
        &mut self,
        name: &str,
        v: &VariableSpec,
        round: &RoundScope,
        state: &str,
        stopped: &dyn Fn() -> bool,
    ) -> Result<(), RoundError> {
        let Some(formula) = &v.update else {
            return Ok(());
        };
        let error = |agent: Option<&str>, why: String| WorldError {
            field: format!("world.variables.{name}.update"),
            round: self.rounds,
            agent: agent.map(String::from),
            why,
        };
        let env = expr::environment();
        let numeric = self.numeric.get(state).copied().unwrap_or(false);
        let leaf = |n: &str| Some(expr::leaf(n, numeric));
        let bounded = crate::scenario::Bounded {
            leaf: &leaf,
            sizes: self.sizes,
        };
        let compiled = crate::scenario::compile_formula(&env, formula, bounded)
            .map_err(|e| error(None, crate::error_chain::chain(&e)))?;
        let base = Arc::new(round.base(self));
        if !v.per_agent {
            let value = compiled
                .eval(minijinja::Value::from_dyn_object(base))
                .map_err(|e| error(None, expr::evaluation_error(&e)))?;
            let x = expr::number(&value).map_err(|why| error(None, why))?;
            check_bounds(x, v).map_err(|why| error(None, why))?;
            self.globals.insert(name.to_string(), x);
            return Ok(());
        }
        let players = self.players.get(state).map_or(&[][..], Vec::as_slice);
        let before = self.per_agent.clone();
        let mut values = before[name].as_ref().clone();
        for (k, &i) in players.iter().enumerate() {
            if k % MEMBERS_BETWEEN_STOPS == 0 && stopped() {
                return Err(RoundError::Stopped);
            }
            let agent = &self.roster.names[i as usize];
            let member = MemberScope::new(base.clone(), round, &before, i, agent);
            let value = compiled
                .eval(minijinja::Value::from_object(member))
                .map_err(|e| error(Some(agent), expr::evaluation_error(&e)))?;
            let x = expr::number(&value).map_err(|why| error(Some(agent), why))?;
            check_bounds(x, v).map_err(|why| error(Some(agent), why))?;
            values[i as usize] = x;
        }
        Arc::make_mut(&mut self.per_agent).insert(name.to_string(), Arc::new(values));
        Ok(())
    }

    /// The first condition that holds after this round, by name.
    fn ended_if(&self) -> Result<Option<String>, WorldError> {
        let env = expr::environment();
        let ctx = minijinja::Value::from_dyn_object(Arc::new(RoundScope::default().base(self)));
        let leaf = |n: &str| Some(expr::leaf(n, false));
        let bounded = crate::scenario::Bounded {
            leaf: &leaf,
            sizes: self.sizes,
        };
        for (name, condition) in &self.spec.end_if {
            let error = |why: String| WorldError {
                field: format!("world.end_if.{name}"),
                round: self.rounds,
                agent: None,
                why,
            };
            let compiled = crate::scenario::compile_formula(&env, condition, bounded)
                .map_err(|e| error(crate::error_chain::chain(&e)))?;
            let value = compiled
                .eval(ctx.clone())
                .map_err(|e| error(expr::evaluation_error(&e)))?;
            if expr::condition(&value).map_err(error)? {
                return Ok(Some(name.clone()));
            }
        }
        Ok(None)
    }
}

/// A value against its variable's bounds.
fn check_bounds(x: f64, v: &VariableSpec) -> Result<(), String> {
    if let Some(min) = v.min.filter(|m| x < *m) {
        return Err(format!("gives {x}, below its min {min}"));
    }
    if let Some(max) = v.max.filter(|m| x > *m) {
        return Err(format!("gives {x}, above its max {max}"));
    }
    Ok(())
}

/// A per-agent variable's first values: the number, or each agent's seeded draw.
fn initial_values(name: &str, v: &VariableSpec, n: usize, seed: u64) -> Vec<f64> {
    match &v.initial {
        Initial::Number(x) => vec![*x; n],
        Initial::Draw(d) => {
            let stream = xxhash_rust::xxh3::xxh3_64(name.as_bytes());
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ stream);
            (0..n)
                .map(|_| match d {
                    Distribution::Uniform([lo, hi]) => rng.random_range(*lo..*hi),
                    Distribution::Integers([lo, hi]) => rng.random_range(*lo..=*hi) as f64,
                    Distribution::OneOf(items) => {
                        let at = rng.random_range(0..items.len().max(1));
                        items.get(at).and_then(|v| v.as_f64()).unwrap_or(0.0)
                    }
                })
                .collect()
        }
    }
}

#[cfg(test)]
mod tests;
