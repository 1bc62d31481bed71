//! Validation's checks of the whole graph and of what refers to it: every state
//! reachable and able to end, the script's lines and answers, and the outcomes.

use super::format::{Scenario, State};
use super::outcomes::OutcomeRules;
use super::path::FieldPath;
use crate::template;
use crate::template::ONE_OF;
use std::collections::{HashMap, HashSet, VecDeque};

/// Every problem of the graph, the script and the outcomes, as `(path, message)`.
pub(super) fn check(s: &Scenario) -> Vec<(FieldPath, String)> {
    let mut out = Vec::new();
    graph(s, &mut out);
    script(s, &mut out);
    if let Some(outcomes) = &s.outcomes {
        if let Err(problems) =
            OutcomeRules::compile(outcomes, s, &FieldPath::root().key("outcomes"))
        {
            out.extend(problems);
        }
    }
    out
}

/// Every state reachable from the start, and the end reachable from every state.
fn graph<'a>(s: &'a Scenario, out: &mut Vec<(FieldPath, String)>) {
    let sop = &s.sop;
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
        let path = FieldPath::root().key("sop").key("states").key(name);
        if !forward.contains(name.as_str()) {
            push(
                out,
                path,
                format!(
                    "unreachable: no path leads here from the start state {:?}",
                    sop.start
                ),
            );
        } else if !backward.contains(name.as_str()) {
            push(
                out,
                path,
                format!(
                    "no way to the end: no path leads from here to {:?}",
                    sop.end
                ),
            );
        }
    }
}

/// The script's agents and roles exist, and its lines use known placeholders.
fn script(s: &Scenario, out: &mut Vec<(FieldPath, String)>) {
    let Some(script) = &s.script else { return };
    let path = FieldPath::root().key("script");
    for name in script.agents.keys() {
        if !s.agents.contains_key(name) {
            push(
                out,
                path.key("agents").key(name),
                format!("unknown agent {name:?}"),
            );
        }
    }
    let all_roles: HashSet<&String> = s.sop.states.values().flat_map(|s| &s.roles).collect();
    for role in script.roles.keys() {
        if !all_roles.contains(role) {
            push(
                out,
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
            Err(e) => push(out, p, e.to_string()),
            Ok(keys) => {
                let known = |k: &str| {
                    allowed.contains(&k)
                        || (allowed == LINE_KEYS
                            && k.strip_prefix(ONE_OF).is_some_and(|o| !o.is_empty()))
                };
                for k in keys.iter().filter(|k| !known(k)) {
                    push(
                        out,
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

const LINE_KEYS: &[&str] = &["name", "role", "state", "turn", "n"];

fn push(out: &mut Vec<(FieldPath, String)>, path: FieldPath, message: impl Into<String>) {
    out.push((path, message.into()));
}

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
