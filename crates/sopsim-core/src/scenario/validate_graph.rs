//! Validation's checks of the whole graph and of what refers to it: every state
//! reachable and able to end, the script's lines and answers, and the outcomes.

use super::format::State;
use super::outcomes::OutcomeRules;
use super::path::FieldPath;
use super::validate::{root, Checker};
use crate::template;
use crate::template::ONE_OF;
use std::collections::{HashMap, HashSet, VecDeque};

impl<'a> Checker<'a> {
    /// Every state reachable from the start, and the end reachable from every state.
    pub(super) fn graph(&mut self) {
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

    pub(super) fn outcomes(&mut self) {
        let Some(outcomes) = &self.s.outcomes else {
            return;
        };
        if let Err(problems) = OutcomeRules::compile(outcomes, self.s, &root().key("outcomes")) {
            for (path, message) in problems {
                self.problem(path, message);
            }
        }
    }

    pub(super) fn script(&mut self) {
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
