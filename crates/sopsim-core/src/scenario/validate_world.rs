//! Validation of the `world` section, of the texts that show it, of choices bounded by
//! it and of strategy players: unknown names (a variable, a state, `me` where no agent
//! is), formulas that do not parse or give the wrong type, bounds, and strategies that
//! cannot move. Pure.

use std::collections::BTreeSet;

use super::expr;
use super::format::{Scenario, State};
use super::path::FieldPath;
use super::world::{BuiltIn, Initial, StrategySpec};
use crate::error_chain::chain;

/// Names a variable may not take: what formulas and templates call other things.
const RESERVED: &[&str] = &[
    "round",
    "rounds",
    "world",
    "me",
    "own",
    "sum",
    "mean",
    "min",
    "max",
    "n",
    "counts",
    "others_sum",
    "others_mean",
    "name",
    "choice",
];

/// What a formula or template may read.
#[derive(Clone, Copy, PartialEq)]
enum Scope {
    /// A global variable's update: the round's aggregates, `world`, `round`.
    Global,
    /// A per-agent variable's update: also the agent's own decision, `name`, `me`.
    Agent,
    /// `end_if`: `world` and `round`.
    Condition,
    /// A state's scene or opening line: `world`, `round`, `rounds`.
    Scene,
    /// What an agent is told: also `me`.
    Told,
    /// A strategy's formula.
    Strategy,
    /// A strategy's line: also `choice`.
    Say,
}

impl Scope {
    fn plain(self) -> &'static [&'static str] {
        match self {
            Scope::Global => &["round", "n", "sum", "mean", "min", "max", "counts"],
            Scope::Agent => &[
                "round",
                "n",
                "sum",
                "mean",
                "min",
                "max",
                "counts",
                "own",
                "others_sum",
                "others_mean",
                "name",
            ],
            Scope::Condition => &["round"],
            Scope::Scene | Scope::Told => &["round", "rounds"],
            Scope::Strategy => &[
                "round",
                "own_last",
                "opponent_last",
                "others_last",
                "others_counts",
                "cooperate",
                "defect",
                "options",
            ],
            Scope::Say => &["round", "rounds", "choice"],
        }
    }

    fn has_me(self) -> bool {
        matches!(
            self,
            Scope::Agent | Scope::Told | Scope::Strategy | Scope::Say
        )
    }
}

struct WorldCheck<'a> {
    s: &'a Scenario,
    out: Vec<(FieldPath, String)>,
}

/// Every problem with the scenario's world, the texts that show it and its strategy
/// players.
pub fn check(s: &Scenario) -> Vec<(FieldPath, String)> {
    let mut c = WorldCheck { s, out: Vec::new() };
    c.variables();
    c.cycles();
    c.texts();
    c.strategies();
    c.out
}

/// A path back to `path[0]` along what each variable reads, as the names on it,
/// `path[0]` at both ends; it avoids `earlier` variables (a cycle through one of them
/// is told at it).
fn cycle_from<'a>(
    at: &'a str,
    path: &mut Vec<&'a str>,
    reads: &dyn Fn(&str) -> Vec<&'a str>,
    earlier: &[&str],
) -> Option<Vec<&'a str>> {
    for next in reads(at) {
        if next == path[0] {
            let mut cycle = path.clone();
            cycle.push(next);
            return Some(cycle);
        }
        if path.contains(&next) || earlier.contains(&next) {
            continue;
        }
        path.push(next);
        if let Some(cycle) = cycle_from(next, path, reads, earlier) {
            return Some(cycle);
        }
        path.pop();
    }
    None
}

fn root() -> FieldPath {
    FieldPath::root()
}

fn identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl WorldCheck<'_> {
    fn problem(&mut self, path: FieldPath, message: impl Into<String>) {
        self.out.push((path, message.into()));
    }

    fn variables(&mut self) {
        let Some(world) = &self.s.world else { return };
        let at = root().key("world");
        if let Some(state) = &world.state {
            if !self.s.sop.states.contains_key(state) {
                self.problem(at.key("state"), format!("unknown state {state:?}"));
            }
        }
        if world.variables.is_empty() {
            self.problem(at.key("variables"), "a world needs at least one variable");
        }
        for (name, v) in &world.variables {
            let vat = at.key("variables").key(name);
            if !identifier(name) {
                self.problem(
                    vat.clone(),
                    "a variable's name is letters, digits and `_`, not starting with a digit",
                );
            } else if RESERVED.contains(&name.as_str()) {
                self.problem(
                    vat.clone(),
                    format!("{name:?} names something else in formulas; choose another name"),
                );
            }
            let bounds_ok = match (v.min, v.max) {
                (Some(lo), Some(hi)) if !(lo < hi && lo.is_finite() && hi.is_finite()) => {
                    self.problem(vat.key("max"), format!("{hi}: must be above min ({lo})"));
                    false
                }
                (lo, hi) => lo.is_none_or(f64::is_finite) && hi.is_none_or(f64::is_finite),
            };
            match &v.initial {
                Initial::Number(x) if !x.is_finite() => {
                    self.problem(vat.key("initial"), "must be a finite number")
                }
                Initial::Number(x)
                    if bounds_ok
                        && (v.min.is_some_and(|lo| *x < lo) || v.max.is_some_and(|hi| *x > hi)) =>
                {
                    self.problem(vat.key("initial"), format!("{x} is outside min and max"))
                }
                Initial::Draw(_) if !v.per_agent => self.problem(
                    vat.key("initial"),
                    "a draw gives each agent its own value: only a per_agent variable has one",
                ),
                Initial::Draw(crate::scenario::Distribution::OneOf(items))
                    if items.is_empty() || items.iter().any(|i| !i.is_number()) =>
                {
                    self.problem(vat.key("initial").key("one_of"), "must list numbers")
                }
                _ => {}
            }
            match (&v.state, &v.update) {
                (None, Some(_)) => self.problem(
                    vat.key("state"),
                    "an update needs the state after whose rounds it runs",
                ),
                (Some(state), _) if !self.s.sop.states.contains_key(state) => {
                    self.problem(vat.key("state"), format!("unknown state {state:?}"))
                }
                _ => {}
            }
            if let Some(update) = &v.update {
                let scope = if v.per_agent {
                    Scope::Agent
                } else {
                    Scope::Global
                };
                self.formula(vat.key("update"), update, scope);
            }
        }
        for (name, condition) in &world.end_if {
            self.formula(at.key("end_if").key(name), condition, Scope::Condition);
        }
    }

    /// Variables of one state that read each other round about: each would see the
    /// others at different steps of the same round (the declared order decides which
    /// sees the new value), which is never what a formula means. A variable reading
    /// its own last value is no cycle.
    fn cycles(&mut self) {
        let Some(world) = &self.s.world else { return };
        let reads = |name: &str| -> Vec<&str> {
            let v = &world.variables[name];
            let formula = v.update.as_deref().unwrap_or_default();
            let names = expr::formula_names(formula).unwrap_or_default();
            world
                .variables
                .iter()
                .filter(|(other, o)| {
                    other.as_str() != name
                        && o.update.is_some()
                        && o.state == v.state
                        && names.iter().any(|n| {
                            let (head, field) = n.split_once('.').unwrap_or((n, ""));
                            matches!(head, "world" | "me")
                                && field.split('.').next() == Some(other.as_str())
                        })
                })
                .map(|(other, _)| other.as_str())
                .collect()
        };
        let updated: Vec<&str> = world
            .variables
            .iter()
            .filter(|(_, v)| v.update.is_some() && v.state.is_some())
            .map(|(n, _)| n.as_str())
            .collect();
        for (i, start) in updated.iter().enumerate() {
            // Each cycle is told once, at its first declared member.
            let mut path = vec![*start];
            if let Some(cycle) = cycle_from(start, &mut path, &reads, &updated[..i]) {
                let state = world.variables[*start].state.as_deref().unwrap_or_default();
                let at = root()
                    .key("world")
                    .key("variables")
                    .key(start)
                    .key("update");
                self.problem(
                    at,
                    format!(
                        "{} read each other in the same round of {state:?} (a cycle): \
                         each would see the other at a different step; update one in \
                         another state, or compute both from the round's decisions",
                        cycle.join(" → ")
                    ),
                );
            }
        }
    }

    /// Checks a formula's syntax and names, and that a trial evaluation gives the
    /// right type.
    fn formula(&mut self, at: FieldPath, formula: &str, scope: Scope) {
        let before = self.out.len();
        match expr::formula_names(formula) {
            Ok(names) => self.names(at.clone(), &names, scope),
            Err(e) => return self.problem(at, chain(&e)),
        }
        // A formula that names what does not exist has said enough.
        if self.out.len() > before {
            return;
        }
        if let Some(why) = self.trial(formula, scope) {
            self.problem(at, why);
        }
    }

    /// Evaluates a formula with the world's first values and a made-up round: a
    /// value of the wrong type is an error (one that cannot be evaluated here may
    /// still be fine with a real round's values).
    fn trial(&self, formula: &str, scope: Scope) -> Option<String> {
        let world = self.s.world.as_ref()?;
        let globals: indexmap::IndexMap<&str, f64> = world
            .variables
            .iter()
            .filter(|(_, v)| !v.per_agent)
            .filter_map(|(k, v)| match v.initial {
                Initial::Number(x) => Some((k.as_str(), x)),
                Initial::Draw(_) => None,
            })
            .collect();
        let me: indexmap::IndexMap<&str, f64> = world
            .variables
            .iter()
            .filter(|(_, v)| v.per_agent)
            .map(|(k, v)| {
                let x = match &v.initial {
                    Initial::Number(x) => *x,
                    Initial::Draw(_) => v.min.unwrap_or(1.0),
                };
                (k.as_str(), x)
            })
            .collect();
        let ctx = minijinja::context! {
            world => globals, me => me, round => 1, n => 2, sum => 2.0, mean => 1.0,
            min => 1.0, max => 1.0, own => 1.0, others_sum => 1.0, others_mean => 1.0,
            name => "A", counts => minijinja::Value::from_serialize(indexmap::IndexMap::<String, usize>::new()),
        };
        let env = expr::environment();
        let value = crate::scenario::compile_formula(&env, formula)
            .ok()?
            .eval(ctx)
            .ok()?;
        let checked = match scope {
            Scope::Condition => expr::condition(&value).map(|_| ()),
            _ => expr::number(&value).map(|_| ()),
        };
        checked
            .err()
            .filter(|why| !why.contains("not a finite number"))
    }

    /// Checks the names a formula or template reads against what `scope` offers.
    fn names(&mut self, at: FieldPath, names: &BTreeSet<String>, scope: Scope) {
        let world = self.s.world.as_ref();
        let variable = |n: &str| world.and_then(|w| w.variables.get(n));
        let listed = |per_agent: bool| {
            let names: Vec<&str> = world
                .into_iter()
                .flat_map(|w| w.variables.iter())
                .filter(|(_, v)| v.per_agent == per_agent)
                .map(|(k, _)| k.as_str())
                .collect();
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        };
        for name in names {
            let mut parts = name.splitn(2, '.');
            let head = parts.next().unwrap_or_default();
            let field = parts.next().map(|f| f.split('.').next().unwrap_or(f));
            let problem = match (head, field) {
                ("world", Some(f)) => match variable(f) {
                    Some(v) if !v.per_agent => None,
                    Some(_) => Some(format!("world.{f}: {f} is a per-agent variable: me.{f}")),
                    None => Some(format!(
                        "world.{f}: no such global variable (globals: {})",
                        listed(false)
                    )),
                },
                ("world", None) => None,
                ("me", _) if !scope.has_me() => Some(format!(
                    "{name}: no agent is speaking here, so there is no `me`"
                )),
                ("me", Some(f)) => match variable(f) {
                    Some(v) if v.per_agent => None,
                    Some(_) => Some(format!("me.{f}: {f} is a global variable: world.{f}")),
                    None => Some(format!(
                        "me.{f}: no such per-agent variable (per-agent: {})",
                        listed(true)
                    )),
                },
                ("me", None) => None,
                ("counts" | "others_counts", _) => None,
                (h, _) if scope.plain().contains(&h) => None,
                (h, _) => Some(format!(
                    "unknown name {h:?} (here: {}, world.NAME{})",
                    scope.plain().join(", "),
                    if scope.has_me() { ", me.NAME" } else { "" }
                )),
            };
            if let Some(p) = problem {
                self.problem(at.clone(), p);
            }
        }
    }

    fn template(&mut self, at: FieldPath, text: &str, scope: Scope) {
        if !expr::is_template(text) {
            return;
        }
        match expr::template_names(text) {
            Ok(names) => self.names(at, &names, scope),
            Err(e) => self.problem(at, format!("not a template that can be filled: {e}")),
        }
    }

    /// The texts that show the world, checked only when there is one: without it,
    /// `{{` in a prompt is text like any other.
    fn texts(&mut self) {
        let s = self.s;
        for (state_name, state) in &s.sop.states {
            let at = root().key("sop").key("states").key(state_name);
            for (role, comps) in &state.components {
                if let Some(c) = &comps.choice {
                    if let Some(formula) = &c.at_most {
                        let cat = at.key("components").key(role).key("choice").key("at_most");
                        if c.range.is_none() {
                            self.problem(cat.clone(), "bounds a numeric choice: give a `range`");
                        }
                        if s.world.is_none() {
                            self.problem(cat, "reads the world, and the scenario has no `world`");
                        } else {
                            self.formula(cat, formula, Scope::Told);
                        }
                    }
                }
            }
            if s.world.is_none() {
                continue;
            }
            self.state_texts(&at, state);
        }
    }

    fn state_texts(&mut self, at: &FieldPath, state: &State) {
        self.template(
            at.key("environment_prompt"),
            &state.environment_prompt,
            Scope::Scene,
        );
        if let Some(q) = &state.begin_query {
            self.template(at.key("begin_query"), q, Scope::Scene);
        }
        for (role, c) in &state.components {
            let cat = at.key("components").key(role);
            let told = [
                ("style", c.style.as_deref()),
                ("task", c.task.as_deref()),
                ("rule", c.rule.as_deref()),
                ("output", c.output.as_deref()),
                ("last", c.last.as_deref()),
                (
                    "prompt",
                    c.choice.as_ref().and_then(|c| c.prompt.as_deref()),
                ),
            ];
            for (key, text) in told {
                if let Some(text) = text {
                    let path = match key {
                        "prompt" => cat.key("choice").key("prompt"),
                        k => cat.key(k),
                    };
                    self.template(path, text, Scope::Told);
                }
            }
        }
    }

    fn strategies(&mut self) {
        let s = self.s;
        let mut seen: Vec<*const StrategySpec> = Vec::new();
        for (name, agent) in &s.agents {
            let Some(spec) = agent.strategy.as_deref() else {
                continue;
            };
            // A population's members share one strategy: checked once, at the
            // population.
            if seen.contains(&(spec as *const _)) {
                continue;
            }
            seen.push(spec);
            let at = match &agent.member {
                Some(m) => root().key("populations").key(&m.population).key("strategy"),
                None => root().key("agents").key(name).key("strategy"),
            };
            if agent.human {
                self.problem(at.clone(), "a person plays this agent: it has no strategy");
            }
            match (spec.rule, &spec.formula) {
                (None, None) => self.problem(at.clone(), "give a `rule` or a `formula`"),
                (Some(_), Some(_)) => {
                    self.problem(at.clone(), "give a `rule` or a `formula`, not both")
                }
                (_, Some(f)) => self.formula_strategy(at.key("formula"), f),
                _ => {}
            }
            if spec.rule == Some(BuiltIn::Random) && spec.p.is_none() {
                self.problem(at.key("p"), "`random` needs the probability of cooperating");
            }
            if let Some(p) = spec.p.filter(|p| !(0.0..=1.0).contains(p)) {
                self.problem(at.key("p"), format!("{p}: must be within [0, 1]"));
            }
            if let Some(say) = &spec.say {
                self.template(at.key("say"), say, Scope::Say);
            }
            let options = super::world::options_of(s, name);
            if options.is_empty() {
                self.problem(
                    at.clone(),
                    "the agent makes no choice (its roles have no `choice` component), so a strategy has nothing to decide",
                );
                continue;
            }
            let (cooperate, defect) = super::world::moves_of(s, name, spec);
            let needs = |which: &str| match spec.rule {
                Some(BuiltIn::AlwaysDefect) => which == "defect",
                Some(BuiltIn::AlwaysCooperate | BuiltIn::TitForTat) => which == "cooperate",
                Some(_) => true,
                None => false,
            };
            for (which, m) in [("cooperate", cooperate), ("defect", defect)] {
                match m {
                    Some(m) if !options.iter().any(|o| o == &m) => self.problem(
                        at.key(which),
                        format!("{m:?} is not one of the options ({})", options.join(", ")),
                    ),
                    None if needs(which) => self.problem(
                        at.key(which),
                        format!(
                            "which option {which}s? Give `{which}`, or the outcomes' `decision.cooperative`"
                        ),
                    ),
                    _ => {}
                }
            }
        }
    }

    fn formula_strategy(&mut self, at: FieldPath, formula: &str) {
        match expr::formula_names(formula) {
            Ok(names) => self.names(at, &names, Scope::Strategy),
            Err(e) => self.problem(at, chain(&e)),
        }
    }
}
