//! Scenario validation: every problem at once, each as `path.to.field: message`.
//!
//! Two passes over the file: the JSON Schema derived from the format's types catches
//! structure (missing fields, wrong types, misspelt keys), then [`check`] walks the typed
//! scenario for meaning (unknown states and roles, unreachable states, no way to the
//! end, prompts that cannot fit the token budget). Pure: no I/O.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::sync::OnceLock;

use serde_json::Value;

use super::format::{Scenario, SpeakerRule, State};
use super::outcomes::OutcomeRules;
use super::path::FieldPath;
use super::persona::{role_text, Persona};
use crate::template;
use crate::template::ONE_OF;
use crate::tokens::fixed_prompt_tokens;
use crate::tokens::TokenCounter;

/// One problem found in a scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub path: FieldPath,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// The JSON Schema of the native format, as `sopsim schema` prints it.
pub fn schema() -> &'static Value {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let mut schema = serde_json::to_value(schemars::schema_for!(Scenario))
            .expect("a derived schema serialises");
        unwrap_optional(&mut schema);
        if let Some(obj) = schema.as_object_mut() {
            obj.insert(
                "$id".into(),
                "https://sopsim.dev/schema/scenario.json".into(),
            );
        }
        schema
    })
}

/// An optional field's schema is `anyOf: [its type, null]`; against that, a mistake
/// inside the field is reported as "not valid under any of the schemas" at the field.
/// Optional fields are simply left out, so the schema keeps the type alone and a
/// mistake is reported where it is.
fn unwrap_optional(v: &mut Value) {
    match v {
        Value::Object(map) => {
            let inner = match map.get("anyOf") {
                Some(Value::Array(branches)) if branches.len() == 2 => {
                    let is_null = |b: &Value| b.get("type") == Some(&Value::from("null"));
                    match (is_null(&branches[0]), is_null(&branches[1])) {
                        (false, true) => Some(branches[0].clone()),
                        (true, false) => Some(branches[1].clone()),
                        _ => None,
                    }
                }
                _ => None,
            };
            if let Some(Value::Object(inner)) = inner {
                map.remove("anyOf");
                for (k, x) in inner {
                    map.entry(k).or_insert(x);
                }
            }
            map.values_mut().for_each(unwrap_optional);
        }
        Value::Array(items) => items.iter_mut().for_each(unwrap_optional),
        _ => {}
    }
}

/// Structural problems of a parsed JSON document against the schema.
pub fn check_structure(doc: &Value) -> Vec<Problem> {
    static VALIDATOR: OnceLock<
        Result<jsonschema::Validator, jsonschema::ValidationError<'static>>,
    > = OnceLock::new();
    let validator = match VALIDATOR.get_or_init(|| jsonschema::options().build(schema())) {
        Ok(v) => v,
        Err(e) => {
            return vec![Problem {
                path: FieldPath::root(),
                message: format!("internal schema error: {e}"),
            }]
        }
    };
    let mut problems: Vec<Problem> = Vec::new();
    for err in validator.iter_errors(doc) {
        let pointer = err.instance_path().to_string();
        let path = FieldPath::from_pointer(&pointer, doc);
        if let jsonschema::error::ValidationErrorKind::AdditionalProperties { unexpected } =
            err.kind()
        {
            for key in unexpected {
                // A name the format has at another level is no typo to correct.
                let hint = if field_names().contains(key) {
                    "; the format has it elsewhere, not in this object".to_string()
                } else {
                    closest(key, field_names())
                        .map(|k| format!("; did you mean {k:?}?"))
                        .unwrap_or_default()
                };
                problems.push(Problem {
                    path: path.key(key),
                    message: format!("unknown field{hint}"),
                });
            }
            continue;
        }
        problems.push(Problem {
            path,
            message: schema_message(&err.to_string()),
        });
    }
    problems.dedup();
    problems
}

/// Every field name the format has anywhere, for "did you mean" hints.
fn field_names() -> &'static [String] {
    static NAMES: OnceLock<Vec<String>> = OnceLock::new();
    NAMES.get_or_init(|| {
        fn walk(v: &Value, out: &mut Vec<String>) {
            match v {
                Value::Object(map) => {
                    if let Some(Value::Object(props)) = map.get("properties") {
                        out.extend(props.keys().cloned());
                    }
                    map.values().for_each(|x| walk(x, out));
                }
                Value::Array(items) => items.iter().for_each(|x| walk(x, out)),
                _ => {}
            }
        }
        let mut names = Vec::new();
        walk(schema(), &mut names);
        names.sort();
        names.dedup();
        names
    })
}

/// The known name within two edits of `key`, if any.
fn closest<'k>(key: &str, known: &'k [String]) -> Option<&'k str> {
    known
        .iter()
        .map(|k| (strsim::levenshtein(key, k), k))
        .filter(|(d, _)| *d <= 2)
        .min()
        .map(|(_, k)| k.as_str())
}

/// jsonschema's messages quote whole sub-documents; keep them readable.
fn schema_message(raw: &str) -> String {
    const MAX: usize = 200;
    if raw.chars().count() <= MAX {
        return raw.to_string();
    }
    let cut: String = raw.chars().take(MAX).collect();
    format!("{cut}…")
}

/// Settings that are valid but probably not what was meant: shown by `sopsim
/// validate` and as warnings when a run starts; they never fail validation.
pub fn advice(s: &Scenario) -> Vec<Problem> {
    let mut out = Vec::new();
    let players = s.players();
    for (name, state) in &s.sop.states {
        if state.turns != super::format::Turns::Simultaneous {
            continue;
        }
        let path = root().key("sop").key("states").key(name);
        let seats = players
            .get(name)
            .map_or(0, |roles| roles.values().map(Vec::len).sum::<usize>())
            as u32;
        if seats == 1 {
            out.push(Problem {
                path: path.key("turns"),
                message: "a simultaneous state with one player is sequential in effect".into(),
            });
        }
        if state.speaker != SpeakerRule::Order {
            out.push(Problem {
                path: path.key("speaker"),
                message: "ignored: in a simultaneous state every role acts in each round".into(),
            });
        }
        let t = &state.transition;
        if !t.keywords.is_empty() {
            out.push(Problem {
                path: path.key("transition").key("keywords"),
                message: "checked once per round, against all of its messages: the first \
                          message in the order of roles that contains a keyword decides (and \
                          within it, the first keyword listed)"
                    .into(),
            });
        }
        if let Some(note) = t.max_turns.and_then(|max| uneven_rounds(max, state, seats)) {
            out.push(Problem {
                path: path.key("transition").key("max_turns"),
                message: note,
            });
        }
    }
    for name in s.tools.keys() {
        let listed = s.sop.states.values().any(|st| {
            st.tools.contains(name) || st.components.values().any(|c| c.tools.contains(name))
        });
        if !listed {
            out.push(Problem {
                path: root().key("tools").key(name),
                message: "no state or role lists this tool, so it is never offered".into(),
            });
        }
    }
    out
}

/// A note when a simultaneous state's `max_turns` falls inside a round: a round counts
/// one turn per player, `seats` in all (after the visit's opening, which counts one),
/// and the transition is checked only after a whole round.
fn uneven_rounds(max: u32, state: &super::format::State, seats: u32) -> Option<String> {
    let roles = seats;
    let opening = u32::from(state.begin_query.is_some());
    if roles < 2 || max <= opening || (max - opening).is_multiple_of(roles) {
        return None;
    }
    let rounds = (max - opening).div_ceil(roles);
    let reached = opening + rounds * roles;
    let opening = if opening == 1 { "the opening and " } else { "" };
    Some(format!(
        "{max} is not a whole number of rounds: each round counts {roles} turns (one per \
         player), so the state leaves after {opening}{rounds} round(s), at {reached} turns \
         (max_rounds counts rounds)"
    ))
}

/// Problems of meaning in a structurally valid scenario.
pub fn check(s: &Scenario, counter: &dyn TokenCounter) -> Vec<Problem> {
    let mut v = Checker { s, out: Vec::new() };
    v.top_level();
    v.agents();
    v.populations();
    v.states(counter);
    v.graph();
    v.script();
    v.outcomes();
    for (path, message) in super::validate_tools::check(s) {
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
            if !in_next(target) {
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

    /// Every state reachable from the start, and the end reachable from every state.
    fn graph(&mut self) {
        let sop = &self.s.sop;
        if !sop.states.contains_key(&sop.start) {
            return;
        }
        // A state's edges: its next, and where a used-up `max_visits` redirects.
        let edges = |state: &'a State| {
            let redirect = state
                .transition
                .max_visits
                .map(|_| state.transition.on_max_visits.as_ref().unwrap_or(&sop.end));
            state.next.iter().chain(redirect).map(String::as_str)
        };
        let forward = reachable(&sop.start, |n| {
            sop.states
                .get(n)
                .map(|s| edges(s).collect())
                .unwrap_or_default()
        });
        let mut reverse: HashMap<&str, Vec<&str>> = HashMap::new();
        for (name, state) in &sop.states {
            for next in edges(state) {
                reverse.entry(next).or_default().push(name.as_str());
            }
        }
        let backward = reachable(&sop.end, |n| reverse.get(n).cloned().unwrap_or_default());
        for name in sop.states.keys() {
            let path = root().key("sop").key("states").key(name);
            if !forward.contains(name.as_str()) {
                self.problem(
                    path,
                    format!(
                        "unreachable: no path leads here from the start state {:?}",
                        sop.start
                    ),
                );
            } else if !backward.contains(name.as_str()) {
                self.problem(
                    path,
                    format!(
                        "no way to the end: no path leads from here to {:?}",
                        sop.end
                    ),
                );
            }
        }
    }

    fn outcomes(&mut self) {
        let Some(outcomes) = &self.s.outcomes else {
            return;
        };
        if let Err(problems) = OutcomeRules::compile(outcomes, self.s, &root().key("outcomes")) {
            for (path, message) in problems {
                self.problem(path, message);
            }
        }
    }

    fn script(&mut self) {
        let Some(script) = &self.s.script else { return };
        let path = root().key("script");
        for name in script.agents.keys() {
            if !self.s.agents.contains_key(name) {
                self.problem(
                    path.key("agents").key(name),
                    format!("unknown agent {name:?}"),
                );
            }
        }
        let all_roles: HashSet<&String> =
            self.s.sop.states.values().flat_map(|s| &s.roles).collect();
        for role in script.roles.keys() {
            if !all_roles.contains(role) {
                self.problem(
                    path.key("roles").key(role),
                    format!("no state has a role {role:?}"),
                );
            }
        }
        let lines = script
            .agents
            .iter()
            .map(|(k, v)| (path.key("agents").key(k), v))
            .chain(
                script
                    .roles
                    .iter()
                    .map(|(k, v)| (path.key("roles").key(k), v)),
            );
        let mut checks: Vec<(FieldPath, &str, &[&str])> = Vec::new();
        for (p, list) in lines {
            for (i, line) in list.iter().enumerate() {
                checks.push((p.index(i), line.as_str(), LINE_KEYS));
            }
        }
        // Every answer the scripted backend gives is rendered as a line.
        let answers = [("route", &script.route), ("transit", &script.transit)]
            .into_iter()
            .map(|(k, v)| (path.key(k), v))
            .chain(
                script
                    .choices
                    .iter()
                    .map(|(k, v)| (path.key("choices").key(k), v)),
            );
        for (p, list) in answers {
            for (i, line) in list.iter().enumerate() {
                checks.push((p.index(i), line.as_str(), LINE_KEYS));
            }
        }
        if let Some(d) = &script.default {
            checks.push((path.key("default"), d, LINE_KEYS));
        }
        if let Some(sum) = &script.summary {
            checks.push((path.key("summary"), sum, &["state", "turn"]));
        }
        for (p, text, allowed) in checks {
            match template::placeholders(text) {
                Err(e) => self.problem(p, e.to_string()),
                Ok(keys) => {
                    let known = |k: &str| {
                        allowed.contains(&k)
                            || (allowed == LINE_KEYS
                                && k.strip_prefix(ONE_OF).is_some_and(|o| !o.is_empty()))
                    };
                    for k in keys.iter().filter(|k| !known(k)) {
                        self.problem(
                            p.clone(),
                            format!(
                                "unknown placeholder {{{k}}} (known: {}{})",
                                allowed.join(", "),
                                if allowed == LINE_KEYS {
                                    ", one_of:A|B|…"
                                } else {
                                    ""
                                }
                            ),
                        );
                    }
                }
            }
        }
    }
}

const LINE_KEYS: &[&str] = &["name", "role", "state", "turn", "n"];

fn reachable<'a>(from: &'a str, edges: impl Fn(&str) -> Vec<&'a str>) -> HashSet<&'a str> {
    let mut seen = HashSet::from([from]);
    let mut queue = VecDeque::from([from]);
    while let Some(n) = queue.pop_front() {
        for m in edges(n) {
            if seen.insert(m) {
                queue.push_back(m);
            }
        }
    }
    seen
}

/// At most eight names, and how many more.
fn list_some(names: &[&str]) -> String {
    const SHOWN: usize = 8;
    let mut out = names[..names.len().min(SHOWN)].join(", ");
    if names.len() > SHOWN {
        out.push_str(&format!(" and {} more", names.len() - SHOWN));
    }
    out
}

fn list(items: &[String]) -> String {
    if items.is_empty() {
        "none".to_string()
    } else {
        items.join(", ")
    }
}
