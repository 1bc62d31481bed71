//! Scenario validation: every problem at once, each as `path.to.field: message`.
//!
//! Two passes over the file: the JSON Schema derived from the format's types catches
//! structure (missing fields, wrong types, misspelt keys), then [`check`] walks the typed
//! scenario for meaning (unknown states and roles, unreachable states, no way to the
//! end, prompts that cannot fit the token budget). Pure: no I/O.

use std::collections::{HashMap, HashSet};

pub use super::structure::{check_structure, schema, Problem};

use super::format::{Scenario, SpeakerRule, State};
use super::path::FieldPath;
use super::persona::{role_text, Persona};
use crate::tokens::fixed_prompt_tokens;
use crate::tokens::TokenCounter;

/// Problems of meaning in a structurally valid scenario.
pub fn check(s: &Scenario, counter: &dyn TokenCounter) -> Vec<Problem> {
    let mut v = Checker { s, out: Vec::new() };
    v.top_level();
    v.agents();
    v.populations();
    v.states(counter);
    let elsewhere = [
        super::validate_graph::check(s),
        super::validate_tools::check(s),
        super::validate_world::check(s),
        super::probes::check(s),
        super::people::check_scenario(s),
    ];
    for (path, message) in elsewhere.into_iter().flatten() {
        v.problem(path, message);
    }
    v.out
}

struct Checker<'a> {
    s: &'a Scenario,
    out: Vec<Problem>,
}

fn root() -> FieldPath {
    FieldPath::root()
}

impl<'a> Checker<'a> {
    fn problem(&mut self, path: FieldPath, message: impl Into<String>) {
        self.out.push(Problem {
            path,
            message: message.into(),
        });
    }

    fn is_target(&self, name: &str) -> bool {
        name == self.s.sop.end || self.s.sop.states.contains_key(name)
    }

    fn top_level(&mut self) {
        let s = self.s;
        if s.name.trim().is_empty() {
            self.problem(root().key("name"), "must not be empty");
        } else if s.name == "." || s.name == ".." || s.name.contains(['/', '\\']) {
            // A benchmark keeps each scenario's runs in a folder of this name.
            self.problem(
                root().key("name"),
                format!("{:?} names a folder: no `/`, `\\`, `.` or `..`", s.name),
            );
        }
        if s.agents.is_empty() {
            self.problem(
                root().key("agents"),
                "a scenario needs at least one agent (or a population)",
            );
        }
        if s.sop.states.is_empty() {
            self.problem(
                root().key("sop").key("states"),
                "a scenario needs at least one state",
            );
        }
        if !s.sop.states.contains_key(&s.sop.start) {
            self.problem(
                root().key("sop").key("start"),
                format!("unknown state {:?}", s.sop.start),
            );
        }
        if s.sop.states.contains_key(&s.sop.end) {
            self.problem(
                root().key("sop").key("end"),
                format!(
                    "{:?} is also defined as a state; the end is where the run stops, not a state",
                    s.sop.end
                ),
            );
        }
    }

    fn agents(&mut self) {
        let s = self.s;
        let roles_of: HashMap<&str, HashSet<&str>> = s
            .sop
            .states
            .iter()
            .map(|(n, st)| (n.as_str(), st.roles.iter().map(String::as_str).collect()))
            .collect();
        for (name, agent) in s.agents.iter().filter(|(_, a)| a.member.is_none()) {
            let path = root().key("agents").key(name);
            if name.trim().is_empty() {
                self.problem(path.clone(), "agent names must not be empty");
            }
            self.printable_name(&path, name);
            if agent.roles.is_empty() {
                self.problem(path.key("roles"), "the agent plays no role in any state");
            }
            for (state_name, role) in &agent.roles {
                let rpath = path.key("roles").key(state_name);
                match s.sop.states.get(state_name) {
                    None => self.problem(rpath, format!("unknown state {state_name:?}")),
                    Some(state) if !roles_of[state_name.as_str()].contains(role.as_str()) => self
                        .problem(
                            rpath,
                            format!(
                                "role {role:?} is not among the roles of state {state_name:?} ({})",
                                list(&state.roles)
                            ),
                        ),
                    Some(_) => {}
                }
            }
        }
    }

    /// Each population's roles and network. Its members were checked as they were made
    /// (`load.rs`); what they play is checked here once, not once per member.
    fn populations(&mut self) {
        let s = self.s;
        for (key, pop) in &s.populations {
            let path = root().key("populations").key(key);
            self.printable_name(&path.key("name"), &pop.name);
            if pop.roles.is_empty() {
                self.problem(
                    path.key("roles"),
                    "the population plays no role in any state",
                );
            }
            for (state_name, role) in &pop.roles {
                let rpath = path.key("roles").key(state_name);
                match s.sop.states.get(state_name) {
                    None => self.problem(rpath, format!("unknown state {state_name:?}")),
                    Some(state) if !state.roles.contains(role) => self.problem(
                        rpath,
                        format!(
                            "role {role:?} is not among the roles of state {state_name:?} ({})",
                            list(&state.roles)
                        ),
                    ),
                    Some(state) if state.turns != super::format::Turns::Simultaneous => self
                        .problem(
                            rpath,
                            format!(
                                "a population's role is played by all its members at once: \
                                 state {state_name:?} must have \"turns\": \"simultaneous\""
                            ),
                        ),
                    Some(_) => {}
                }
            }
            if let Some((field, message)) = pop.network.check(pop.count) {
                self.problem(path.key("network").key(field), message);
            }
        }
        if let Some((state, turns)) = s.largest_round().filter(|(_, n)| *n > s.sop.max_turns) {
            self.problem(
                root().key("sop").key("max_turns"),
                format!(
                    "{}: state {state:?} has rounds of {turns} turns, so none of them could \
                     start; raise it to at least {turns}",
                    s.sop.max_turns
                ),
            );
        }
    }

    /// Names are printed at the start of transcript lines: a control character in one
    /// (a newline, an escape sequence) would forge lines or drive the terminal.
    fn printable_name(&mut self, path: &FieldPath, name: &str) {
        if name.chars().any(char::is_control) {
            self.problem(
                path.clone(),
                format!("{name:?}: names must not contain control characters (newlines, escapes)"),
            );
        }
    }

    fn states(&mut self, counter: &dyn TokenCounter) {
        let s = self.s;
        for (name, state) in &s.sop.states {
            let path = root().key("sop").key("states").key(name);
            self.printable_name(&path, name);
            self.roles(name, state, &path);
            self.transition(name, state, &path);
            for (i, next) in state.next.iter().enumerate() {
                if !self.is_target(next) {
                    self.problem(path.key("next").index(i), format!("unknown state {next:?}"));
                }
            }
            for (role, comps) in &state.components {
                if !state.roles.contains(role) {
                    self.problem(
                        path.key("components").key(role),
                        format!(
                            "role {role:?} is not among this state's roles ({})",
                            list(&state.roles)
                        ),
                    );
                }
                if let Some(choice) = &comps.choice {
                    self.choice(choice, &path.key("components").key(role).key("choice"));
                }
            }
            self.budget(name, state, &path, counter);
        }
    }

    fn choice(&mut self, choice: &super::ChoiceSpec, path: &FieldPath) {
        match (choice.values.is_empty(), choice.range) {
            (false, Some(_)) => self.problem(path.clone(), "give values or range, not both"),
            (true, None) => self.problem(
                path.clone(),
                "give the options: values, or range [min, max, step]",
            ),
            (false, None) => {
                if choice.values.len() < 2 {
                    self.problem(path.key("values"), "a choice needs at least two values");
                }
                let mut seen = HashSet::new();
                for (i, v) in choice.values.iter().enumerate() {
                    if v.trim().is_empty() {
                        self.problem(path.key("values").index(i), "an option cannot be empty");
                    } else if !seen.insert(v.as_str()) {
                        self.problem(
                            path.key("values").index(i),
                            format!("{v:?} is listed twice"),
                        );
                    }
                }
            }
            (true, Some([min, max, step])) => {
                if let Err(e) = super::format::range_count(min, max, step) {
                    self.problem(path.key("range"), e.to_string());
                }
            }
        }
    }

    fn roles(&mut self, name: &str, state: &State, path: &FieldPath) {
        if state.roles.is_empty() {
            self.problem(path.key("roles"), "a state needs at least one role");
        }
        // Who plays each role here, in one pass over the agents.
        let mut played_by: HashMap<&str, Vec<&str>> = HashMap::new();
        for (agent, spec) in &self.s.agents {
            if let Some(role) = spec.roles.get(name) {
                played_by.entry(role).or_default().push(agent);
            }
        }
        let mut seen = HashSet::new();
        for (i, role) in state.roles.iter().enumerate() {
            self.printable_name(&path.key("roles").index(i), role);
            if !seen.insert(role) {
                self.problem(
                    path.key("roles").index(i),
                    format!("role {role:?} is listed twice"),
                );
                continue;
            }
            let players = played_by.remove(role.as_str()).unwrap_or_default();
            let population = |agent: &str| {
                self.s
                    .agents
                    .get(agent)
                    .and_then(|a| a.member.as_ref())
                    .map(|m| m.population.as_str())
            };
            let one_population = players
                .first()
                .and_then(|first| population(first))
                .is_some_and(|p| players.iter().all(|a| population(a) == Some(p)));
            match players.as_slice() {
                [] => self.problem(
                    path.key("roles").index(i),
                    format!("no agent plays role {role:?} in this state"),
                ),
                [_] => {}
                _ if one_population => {}
                many => self.problem(
                    path.key("roles").index(i),
                    format!(
                        "role {role:?} is played by several agents ({}); one agent (or one \
                         population) per role",
                        list_some(many)
                    ),
                ),
            }
        }
        if let Some(begin) = &state.begin_role {
            if !state.roles.contains(begin) {
                self.problem(
                    path.key("begin_role"),
                    format!(
                        "{begin:?} is not among this state's roles ({})",
                        list(&state.roles)
                    ),
                );
            }
        }
        if matches!(state.speaker, SpeakerRule::Llm { .. } | SpeakerRule::Random)
            && state.roles.len() < 2
        {
            self.problem(
                path.key("speaker"),
                "a random or llm speaker rule needs at least two roles to choose from",
            );
        }
    }

    fn transition(&mut self, name: &str, state: &State, path: &FieldPath) {
        let t = &state.transition;
        let tpath = path.key("transition");
        let in_next = |target: &str| state.next.iter().any(|n| n == target);
        if let Some(target) = &t.on_max_turns {
            if t.max_turns.is_none() && t.max_rounds.is_none() {
                self.problem(
                    tpath.key("on_max_turns"),
                    "set max_turns or max_rounds too, or drop on_max_turns",
                );
            }
            if !in_next(target) && target != name {
                self.problem(
                    tpath.key("on_max_turns"),
                    format!(
                        "{target:?} is not in this state's next ({})",
                        list(&state.next)
                    ),
                );
            }
        }
        for (i, kw) in t.keywords.iter().enumerate() {
            if kw.keyword.trim().is_empty() {
                self.problem(
                    tpath.key("keywords").index(i).key("keyword"),
                    "must not be empty",
                );
            }
            if !in_next(&kw.to) && kw.to != name {
                self.problem(
                    tpath.key("keywords").index(i).key("to"),
                    format!(
                        "{:?} is not in this state's next ({})",
                        kw.to,
                        list(&state.next)
                    ),
                );
            }
        }
        if let Some(judge) = &t.judge {
            let choices = 1 + state.next.len();
            if !judge.labels.is_empty() && judge.labels.len() != choices {
                self.problem(
                    tpath.key("judge").key("labels"),
                    format!(
                        "{} label(s) for {choices} choices: staying, then each of next ({})",
                        judge.labels.len(),
                        list(&state.next)
                    ),
                );
            }
        }
        if let Some(target) = &t.on_max_visits {
            if t.max_visits.is_none() {
                self.problem(
                    tpath.key("on_max_visits"),
                    "set max_visits too, or drop on_max_visits",
                );
            }
            if !in_next(target) && *target != self.s.sop.end {
                self.problem(
                    tpath.key("on_max_visits"),
                    format!(
                        "{target:?} is not in this state's next ({}) nor the end",
                        list(&state.next)
                    ),
                );
            }
        }
        if t.max_rounds.is_some() && state.turns != super::format::Turns::Simultaneous {
            self.problem(
                tpath.key("max_rounds"),
                "only a simultaneous state has rounds; use max_turns",
            );
        }
        let can_leave = t.max_turns.is_some()
            || t.max_rounds.is_some()
            || t.judge.is_some()
            || !t.keywords.is_empty();
        if state.next.is_empty() {
            self.problem(
                path.key("next"),
                format!(
                    "the state leads nowhere; list the states it moves to, or {:?}",
                    self.s.sop.end
                ),
            );
        } else if !can_leave {
            self.problem(
                tpath.clone(),
                "no transition rule can leave this state: set max_turns, max_rounds, keywords \
                 or a judge",
            );
        }
        if (t.max_turns.is_some() || t.max_rounds.is_some())
            && t.on_max_turns.is_none()
            && state.next.is_empty()
        {
            self.problem(
                tpath.key("max_turns"),
                "max_turns needs a state in next to move to",
            );
        }
    }

    fn budget(&mut self, name: &str, state: &State, path: &FieldPath, counter: &dyn TokenCounter) {
        let budget = self.s.environment.prompt_token_budget;
        let players = self.s.players();
        for role in &state.roles {
            let Some(agent_name) = players
                .get(name)
                .and_then(|p| p.get(role))
                .and_then(|agents| agents.first())
            else {
                continue;
            };
            let agent = &self.s.agents[agent_name];
            let text = role_text(
                state,
                Persona {
                    name: agent_name,
                    role,
                    agent,
                },
                true,
            );
            if fixed_prompt_tokens(&text.system, &text.tail, |t| counter.at_most(t)) <= budget {
                continue;
            }
            let fixed = fixed_prompt_tokens(&text.system, &text.tail, |t| counter.count(t));
            if fixed > budget {
                self.problem(
                    path.key("components").key(role),
                    format!(
                        "the fixed prompt for {agent_name:?} ({role}) is about {fixed} tokens, over environment.prompt_token_budget ({budget}); shorten it or raise the budget"
                    ),
                );
            }
        }
    }
}

/// At most eight names, and how many more.
pub(super) fn list_some(names: &[&str]) -> String {
    const SHOWN: usize = 8;
    let mut out = names[..names.len().min(SHOWN)].join(", ");
    if names.len() > SHOWN {
        out.push_str(&format!(" and {} more", names.len() - SHOWN));
    }
    out
}

pub(super) fn list(items: &[String]) -> String {
    if items.is_empty() {
        "none".to_string()
    } else {
        items.join(", ")
    }
}
