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

/// The most variables (and end conditions) a world may have: each is checked in
/// time linear in their number, and every round's line of `world.jsonl` holds them.
pub(super) const MAX_VARIABLES: usize = 10_000;

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
    /// What the scenario gives its formulas and templates, and the render limit.
    sizes: expr::Sizes,
    /// What trial evaluations see (`None`: no world).
    trial_ctx: std::cell::OnceCell<Option<minijinja::Value>>,
}

/// Every problem with the scenario's world, the texts that show it and its strategy
/// players.
pub(super) fn check(s: &Scenario) -> Vec<(FieldPath, String)> {
    let mut c = WorldCheck {
        s,
        out: Vec::new(),
        sizes: expr::sizes_of(s),
        trial_ctx: std::cell::OnceCell::new(),
    };
    c.variables();
    c.cycles();
    c.texts();
    c.strategies();
    c.out
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

    /// Whether every decision made in `state` is a number.
    fn numeric(&self, state: &str) -> bool {
        self.s.sop.states.get(state).is_some_and(|st| {
            st.components
                .values()
                .filter_map(|c| c.choice.as_ref())
                .flat_map(|c| c.values.iter())
                .all(|v| v.trim().parse::<f64>().is_ok())
        })
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
        if world.variables.len() > MAX_VARIABLES {
            return self.problem(
                at.key("variables"),
                format!(
                    "{} variables: a world has at most {MAX_VARIABLES}",
                    world.variables.len()
                ),
            );
        }
        if world.end_if.len() > MAX_VARIABLES {
            return self.problem(
                at.key("end_if"),
                format!(
                    "{} conditions: a world has at most {MAX_VARIABLES}",
                    world.end_if.len()
                ),
            );
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
                let numeric = v.state.as_deref().is_some_and(|st| self.numeric(st));
                self.formula(vat.key("update"), update, scope, numeric);
            }
        }
        for (name, condition) in &world.end_if {
            self.formula(
                at.key("end_if").key(name),
                condition,
                Scope::Condition,
                false,
            );
        }
    }

    /// Variables of one state that read each other round about: each would see the
    /// others at different steps of the same round (the declared order decides which
    /// sees the new value), which is never what a formula means. A variable reading
    /// its own last value is no cycle. Linear in the variables and what they read:
    /// those that lead to no cycle are peeled off first, and every one left reads
    /// another one left, so a walk from it comes round.
    fn cycles(&mut self) {
        let Some(world) = self
            .s
            .world
            .as_ref()
            .filter(|w| w.variables.len() <= MAX_VARIABLES)
        else {
            return;
        };
        let leaf = |n: &str| Some(expr::leaf(n, true));
        let bounded = crate::scenario::Bounded {
            leaf: &leaf,
            sizes: self.sizes,
        };
        let updated = |v: &super::world::VariableSpec| v.update.is_some() && v.state.is_some();
        let reads: Vec<Vec<usize>> = world
            .variables
            .iter()
            .enumerate()
            .map(|(i, (_, v))| {
                let Some(formula) = v.update.as_deref().filter(|_| updated(v)) else {
                    return Vec::new();
                };
                let names = expr::formula_names(formula, bounded).unwrap_or_default();
                let mut read: Vec<usize> = names
                    .iter()
                    .filter_map(|n| {
                        let (head, field) = n.split_once('.')?;
                        let field = field.split('.').next()?;
                        let (j, _, o) = world.variables.get_full(field)?;
                        (matches!(head, "world" | "me")
                            && j != i
                            && updated(o)
                            && o.state == v.state)
                            .then_some(j)
                    })
                    .collect();
                read.sort_unstable();
                read.dedup();
                read
            })
            .collect();
        let n = reads.len();
        let mut readers: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (i, read) in reads.iter().enumerate() {
            for &j in read {
                readers[j].push(i);
            }
        }
        let mut unread: Vec<usize> = reads.iter().map(Vec::len).collect();
        let mut left = vec![true; n];
        let mut peel: Vec<usize> = (0..n).filter(|&i| unread[i] == 0).collect();
        while let Some(j) = peel.pop() {
            left[j] = false;
            for &i in &readers[j] {
                unread[i] -= 1;
                if unread[i] == 0 {
                    peel.push(i);
                }
            }
        }
        let mut told = vec![false; n];
        for start in 0..n {
            if !left[start] || told[start] {
                continue;
            }
            let mut path = vec![start];
            let mut on_path = std::collections::HashMap::from([(start, 0usize)]);
            let cycle = loop {
                let at = path[path.len() - 1];
                let Some(next) = reads[at].iter().copied().find(|&j| left[j]) else {
                    break None;
                };
                if told[next] {
                    break None;
                }
                if let Some(&from) = on_path.get(&next) {
                    break Some(path[from..].to_vec());
                }
                on_path.insert(next, path.len());
                path.push(next);
            };
            for &i in &path {
                told[i] = true;
            }
            let Some(mut cycle) = cycle else { continue };
            // Told at its first declared member.
            let first = (0..cycle.len()).min_by_key(|&k| cycle[k]).unwrap_or(0);
            cycle.rotate_left(first);
            cycle.push(cycle[0]);
            let name = |i: usize| world.variables.get_index(i).map_or("", |(k, _)| k.as_str());
            let Some((head, v)) = world.variables.get_index(cycle[0]) else {
                continue;
            };
            let state = v.state.as_deref().unwrap_or_default();
            let at = root().key("world").key("variables").key(head).key("update");
            let names: Vec<&str> = cycle.iter().map(|&i| name(i)).collect();
            self.problem(
                at,
                format!(
                    "{} read each other in the same round of {state:?} (a cycle): \
                     each would see the other at a different step; update one in \
                     another state, or compute both from the round's decisions",
                    names.join(" → ")
                ),
            );
        }
    }

    /// Checks a formula's syntax and names, and that a trial evaluation gives the
    /// right type.
    fn formula(&mut self, at: FieldPath, formula: &str, scope: Scope, numeric: bool) {
        let before = self.out.len();
        let leaf = |n: &str| Some(expr::leaf(n, numeric));
        let bounded = crate::scenario::Bounded {
            leaf: &leaf,
            sizes: self.sizes,
        };
        match expr::formula_names(formula, bounded) {
            Ok(names) => self.names(at.clone(), &names, scope),
            Err(e) => return self.problem(at, chain(&e)),
        }
        // A formula that names what does not exist has said enough.
        if self.out.len() > before {
            return;
        }
        if let Some(why) = self.trial(formula, scope, bounded) {
            self.problem(at, why);
        }
    }

    /// Evaluates a formula with the world's first values and a made-up round: a
    /// value of the wrong type is an error (one that cannot be evaluated here may
    /// still be fine with a real round's values).
    fn trial(
        &self,
        formula: &str,
        scope: Scope,
        bounded: crate::scenario::Bounded,
    ) -> Option<String> {
        let ctx = self.trial_ctx.get_or_init(|| self.trial_values()).clone()?;
        let env = expr::environment();
        let value = crate::scenario::compile_formula(&env, formula, bounded)
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

    /// What a trial evaluation sees, made once for every formula.
    fn trial_values(&self) -> Option<minijinja::Value> {
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
        Some(minijinja::context! {
            world => globals, me => me, round => 1, n => 2, sum => 2.0, mean => 1.0,
            min => 1.0, max => 1.0, own => 1.0, others_sum => 1.0, others_mean => 1.0,
            name => "A", counts => minijinja::Value::from_serialize(indexmap::IndexMap::<String, usize>::new()),
        })
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
                // What minijinja gives every template: `range`, and a loop's `loop`.
                ("range" | "loop", _) => None,
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
        match expr::template_names(text, self.sizes) {
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
                            self.formula(cat, formula, Scope::Told, false);
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
        let leaf = |n: &str| Some(expr::leaf(n, false));
        let bounded = crate::scenario::Bounded {
            leaf: &leaf,
            sizes: self.sizes,
        };
        match expr::formula_names(formula, bounded) {
            Ok(names) => self.names(at, &names, Scope::Strategy),
            Err(e) => self.problem(at, chain(&e)),
        }
    }
}
