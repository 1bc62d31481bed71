//! What a world formula sees, as minijinja objects looked up by name rather than
//! maps built per evaluation: the round's decisions summed up once ([`RoundScope`]),
//! the world's values ([`BaseScope`]) and, for a per-agent variable, the agent's own
//! ([`MemberScope`]). A round of a hundred thousand members builds one small object
//! per member.

use std::sync::Arc;

use indexmap::IndexMap;
use minijinja::value::{Enumerator, Object, Value};

use super::World;

/// The round's decisions summed up: numbers (`sum`, `mean`, `min`, `max`, `n`) and
/// how many made each move (`counts`).
#[derive(Debug, Clone, Default)]
pub struct Aggregates {
    /// How many agents decided.
    pub n: usize,
    /// The decisions' sum, when every one is a number.
    pub sum: Option<f64>,
    /// The least decision, when every one is a number.
    pub min: Option<f64>,
    /// The largest decision, when every one is a number.
    pub max: Option<f64>,
    /// How many agents made each move, every offered move included.
    pub counts: IndexMap<String, usize>,
}

/// One round's decisions, by agent.
#[derive(Debug, Default)]
pub struct RoundScope {
    /// The round just played (from 1).
    pub round: u32,
    /// The round's decisions summed up.
    pub aggregates: Aggregates,
    /// Per agent number, its decision this round.
    own: std::collections::HashMap<u32, Arc<str>>,
}

impl RoundScope {
    /// The round's decisions; every one of `offered` is counted, chosen or not.
    pub fn new(world: &World, offered: &[String], decided: &[(u32, Arc<str>)]) -> Self {
        let mut a = Aggregates {
            n: decided.len(),
            counts: offered.iter().map(|v| (v.clone(), 0)).collect(),
            ..Aggregates::default()
        };
        let numbers: Vec<f64> = decided
            .iter()
            .filter_map(|(_, m)| m.trim().parse::<f64>().ok())
            .collect();
        if !numbers.is_empty() && numbers.len() == decided.len() {
            a.sum = Some(numbers.iter().sum());
            a.min = numbers.iter().copied().reduce(f64::min);
            a.max = numbers.iter().copied().reduce(f64::max);
        }
        for (_, m) in decided {
            *a.counts.entry(m.to_string()).or_default() += 1;
        }
        Self {
            round: world.rounds,
            aggregates: a,
            own: decided.iter().cloned().collect(),
        }
    }

    /// The scope every formula of the round shares.
    pub fn base(&self, world: &World) -> BaseScope {
        BaseScope {
            round: self.round.max(world.rounds),
            world: Value::from_serialize(&world.globals),
            aggregates: self.aggregates.clone(),
            counts: Value::from_serialize(&self.aggregates.counts),
        }
    }

    fn own(&self, agent: u32) -> Option<&Arc<str>> {
        self.own.get(&agent)
    }
}

/// What every formula of a round sees: `round`, `world`, the aggregates.
#[derive(Debug)]
pub struct BaseScope {
    round: u32,
    world: Value,
    aggregates: Aggregates,
    counts: Value,
}

const BASE_NAMES: &[&str] = &["round", "world", "n", "sum", "mean", "min", "max", "counts"];

impl Object for BaseScope {
    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        let a = &self.aggregates;
        Some(match key.as_str()? {
            "round" => Value::from(self.round),
            "world" => self.world.clone(),
            "n" => Value::from(a.n),
            "sum" => Value::from(a.sum?),
            "mean" => Value::from(a.sum? / a.n as f64),
            "min" => Value::from(a.min?),
            "max" => Value::from(a.max?),
            "counts" => self.counts.clone(),
            _ => return None,
        })
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Str(BASE_NAMES)
    }
}

/// A per-agent formula's scope for one agent: the round's, and `own`, `others_sum`,
/// `others_mean`, `name`, `me`.
#[derive(Debug)]
pub struct MemberScope {
    base: Arc<BaseScope>,
    own: Option<Arc<str>>,
    name: Arc<str>,
    me: Value,
}

impl MemberScope {
    /// The scope of agent number `agent`, called `name`, in `round`: the round's, plus
    /// the agent's own decision and per-agent values.
    pub fn new(
        base: Arc<BaseScope>,
        round: &RoundScope,
        per_agent: &Arc<IndexMap<String, Arc<Vec<f64>>>>,
        agent: u32,
        name: &Arc<str>,
    ) -> Self {
        Self {
            own: round.own(agent).cloned(),
            name: name.clone(),
            me: Value::from_object(Me {
                values: per_agent.clone(),
                agent: agent as usize,
            }),
            base,
        }
    }

    fn own_number(&self) -> Option<f64> {
        self.own.as_deref()?.trim().parse().ok()
    }
}

const MEMBER_NAMES: &[&str] = &[
    "round",
    "world",
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
    "me",
];

impl Object for MemberScope {
    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        let a = &self.base.aggregates;
        match key.as_str()? {
            "own" => Some(match (&self.own, self.own_number()) {
                (_, Some(n)) => Value::from(n),
                (Some(m), None) => Value::from(m.to_string()),
                (None, None) => Value::from(()),
            }),
            "others_sum" => Some(Value::from(a.sum? - self.own_number()?)),
            "others_mean" => {
                let others = a.n.checked_sub(1).filter(|n| *n > 0)?;
                Some(Value::from((a.sum? - self.own_number()?) / others as f64))
            }
            "name" => Some(Value::from(self.name.as_ref())),
            "me" => Some(self.me.clone()),
            _ => self.base.get_value(key),
        }
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Str(MEMBER_NAMES)
    }
}

/// `me`: one agent's per-agent variables (shared by every member's scope).
#[derive(Debug)]
pub(super) struct Me {
    pub values: Arc<IndexMap<String, Arc<Vec<f64>>>>,
    pub agent: usize,
}

impl Object for Me {
    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        let values = self.values.get(key.as_str()?)?;
        values.get(self.agent).map(|v| Value::from(*v))
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Values(self.values.keys().map(|k| Value::from(k.clone())).collect())
    }
}
