//! The `populations` section: agents generated from a template (a name pattern, a
//! count, the roles every member plays, persona fields from a table or seeded draws)
//! and the network that says whose messages each member sees.
//!
//! Pure: [`expand`] turns a population and its persona rows (read by `load.rs`) into
//! agents; the network is built per run from the run's seed (`crate::network`).

use indexmap::IndexMap;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::format::{AgentSpec, LlmSettings};
use crate::template;

/// The most members one population may have.
pub const MAX_MEMBERS: usize = 100_000_000;

/// A population: `count` agents made from one template.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PopulationSpec {
    /// Each member's name: a pattern with `{i}`, the member's number from 1 (`"P{i}"`
    /// names them P1, P2, …).
    pub name: String,
    /// How many members (at most 100,000,000; a run is refused when they would not fit
    /// the machine's free memory).
    #[schemars(range(min = 1, max = 100_000_000))]
    pub count: usize,
    /// State name → the role every member plays there. A population's role is played by
    /// all of its members, so its states must be simultaneous.
    pub roles: IndexMap<String, String>,
    /// How each member speaks: a template over its persona fields, `{name}` and `{i}`
    /// (e.g. `"{temper} and {age} years old."`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub style: String,
    /// Persona rows, member `i` taking row `i`: a list of objects, or a `.csv` (with a
    /// header row) or `.jsonl` file in the scenario's folder. There must be at least
    /// `count` rows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub personas: Option<PersonaSource>,
    /// Persona fields drawn for each member: field name → distribution.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub draw: IndexMap<String, Distribution>,
    /// The seed of `draw` (default 0): the same members in every run of the scenario.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Whose messages each member sees (default `complete`: everyone's).
    #[serde(default, skip_serializing_if = "Network::is_complete")]
    pub network: Network,
    /// LLM settings for every member.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm: Option<LlmSettings>,
    /// Every member plays by this rule instead of a model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<super::StrategySpec>,
    /// The edge list's pairs as member numbers from 0 (a `file` network), read when the
    /// scenario is loaded.
    #[serde(skip)]
    #[schemars(skip)]
    pub edges: Vec<(u32, u32)>,
}

/// Where persona rows come from.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(untagged)]
pub enum PersonaSource {
    /// The rows themselves: objects of strings, numbers and booleans.
    Rows(Vec<IndexMap<String, Value>>),
    /// A `.csv` or `.jsonl` file, relative to the scenario file.
    File(String),
}

/// A seeded distribution of one persona field.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Distribution {
    /// One of these, each as likely.
    OneOf(Vec<Value>),
    /// A real number in `[low, high)`, written with two decimals.
    Uniform([f64; 2]),
    /// A whole number in `[low, high]`.
    Integers([i64; 2]),
}

/// Who sees whom within a population. Seeded from the run's seed.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Network {
    /// Everyone sees everyone.
    #[default]
    Complete,
    /// Members in consecutive groups of `size` (the last may be smaller), each seeing
    /// its own group.
    Groups {
        /// Members in each group (at least 2, at most `count`).
        size: usize,
    },
    /// A ring: each member sees the `k` nearest (`k / 2` on each side; `k` even).
    Ring {
        /// How many nearest members each sees: even, at least 2 (default 2).
        #[serde(default = "default_ring_k")]
        k: usize,
    },
    /// A square grid `width` members wide that wraps at its edges (a torus); `count`
    /// must be a multiple of `width`. `moore`: the 8 around; `von_neumann`: the 4
    /// beside.
    Lattice {
        /// Members in each row of the grid (at least 3, and at least 3 rows).
        width: usize,
        /// Which neighbours each member sees (default `moore`).
        #[serde(default)]
        neighbourhood: Neighbourhood,
    },
    /// Watts–Strogatz: a ring of `k` nearest, each link rewired with probability `p`.
    SmallWorld {
        /// How many nearest members each sees before rewiring: even, at least 2.
        k: usize,
        /// The probability that each link is rewired, within [0, 1].
        p: f64,
    },
    /// Erdős–Rényi: each pair linked with probability `p`.
    Random {
        /// The probability that each pair is linked, within [0, 1].
        p: f64,
    },
    /// Barabási–Albert: each new member links to `m` members, preferring the linked.
    ScaleFree {
        /// How many members each new member links to (at least 1, below `count`).
        m: usize,
    },
    /// Links listed in a `.csv` file of member-name pairs (no header), relative to the
    /// scenario file.
    File {
        /// The `.csv` file of member-name pairs.
        path: String,
    },
}

fn default_ring_k() -> usize {
    2
}

impl Network {
    fn is_complete(&self) -> bool {
        *self == Network::Complete
    }

    /// The network's `kind`, as a scenario file writes it.
    pub fn kind(&self) -> &'static str {
        match self {
            Network::Complete => "complete",
            Network::Groups { .. } => "groups",
            Network::Ring { .. } => "ring",
            Network::Lattice { .. } => "lattice",
            Network::SmallWorld { .. } => "small_world",
            Network::Random { .. } => "random",
            Network::ScaleFree { .. } => "scale_free",
            Network::File { .. } => "file",
        }
    }

    /// About how many links this network makes among `n` members (`edges`: the pairs
    /// a `file` network lists), known before it is drawn: a network's memory grows
    /// with its links, and a dense one over many members grows with their square.
    pub fn expected_links(&self, n: usize, edges: usize) -> u64 {
        let n = n as u64;
        match *self {
            Network::Complete => 0,
            Network::Groups { size } => {
                let size = (size as u64).clamp(1, n.max(1));
                let (whole, rest) = (n / size, n % size);
                whole * (size * (size - 1) / 2) + rest * rest.saturating_sub(1) / 2
            }
            Network::Ring { k } | Network::SmallWorld { k, .. } => n * k as u64 / 2,
            Network::Lattice { neighbourhood, .. } => match neighbourhood {
                Neighbourhood::Moore => 4 * n,
                Neighbourhood::VonNeumann => 2 * n,
            },
            Network::Random { p } => {
                let pairs = n as f64 * n.saturating_sub(1) as f64 / 2.0;
                (p.clamp(0.0, 1.0) * pairs).ceil() as u64
            }
            Network::ScaleFree { m } => (m as u64).saturating_mul(n),
            Network::File { .. } => edges as u64,
        }
    }

    /// Why these parameters cannot link `n` members: (field, message).
    pub fn check(&self, n: usize) -> Option<(&'static str, String)> {
        let ring = |k: usize| -> Option<(&'static str, String)> {
            if k == 0 || k % 2 == 1 {
                Some(("k", format!("{k}: must be even and at least 2")))
            } else if k >= n {
                Some(("k", format!("{k}: must be below count ({n})")))
            } else {
                None
            }
        };
        let probability = |p: f64| {
            (!(0.0..=1.0).contains(&p)).then(|| ("p", format!("{p}: must be within [0, 1]")))
        };
        match *self {
            Network::Complete | Network::File { .. } => None,
            Network::Groups { size } if size < 2 || size > n => Some((
                "size",
                format!("{size}: must be at least 2 and at most count ({n})"),
            )),
            Network::Groups { .. } => None,
            Network::Ring { k } => ring(k),
            Network::SmallWorld { k, p } => ring(k).or_else(|| probability(p)),
            Network::Random { p } => probability(p),
            Network::ScaleFree { m } if m == 0 || m >= n => Some((
                "m",
                format!("{m}: must be at least 1 and below count ({n})"),
            )),
            Network::ScaleFree { .. } => None,
            Network::Lattice { width, .. }
                if width < 3 || !n.is_multiple_of(width) || n / width < 3 =>
            {
                Some((
                    "width",
                    format!(
                        "{width}: count ({n}) must be a multiple of width, with width and \
                         height at least 3"
                    ),
                ))
            }
            Network::Lattice { .. } => None,
        }
    }
}

/// A lattice member's neighbours.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Neighbourhood {
    /// The eight around (as in Nowak and May's spatial games).
    #[default]
    Moore,
    /// The four beside.
    VonNeumann,
}

/// Who a generated agent is: its population, number and persona.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Member {
    /// The name of the population the member belongs to.
    pub population: String,
    /// From 0, in the population's order.
    pub index: u32,
    /// Persona fields, as the member's style template saw them.
    pub persona: IndexMap<String, String>,
}

/// Why a population cannot be expanded: the field (under the population) and why.
#[derive(Debug, Clone, PartialEq)]
pub struct ExpandError {
    /// The field, under the population, that is wrong.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

fn error(field: impl Into<String>, message: impl Into<String>) -> ExpandError {
    ExpandError {
        field: field.into(),
        message: message.into(),
    }
}

/// The name of member `i` (from 0): the pattern with `{i}` as `i + 1`.
pub fn member_name(pattern: &str, i: usize) -> String {
    pattern.replace("{i}", &(i + 1).to_string())
}

/// A persona value as text: strings as they are, other scalars as JSON writes them.
fn as_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(_) | Value::Bool(_) => Some(v.to_string()),
        _ => None,
    }
}

/// The most bytes one member's style may take once rendered: a style is part of every
/// prompt its member sends.
pub const MAX_STYLE_BYTES: usize = 4096;

/// How many members a scenario document's populations make, read from the document
/// before it is checked (counts that are not whole numbers count as none).
pub fn member_count(doc: &Value) -> usize {
    doc.get("populations")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|pops| pops.values())
        .filter_map(|p| p.get("count").and_then(Value::as_u64))
        .fold(0usize, |n, c| {
            n.saturating_add(usize::try_from(c).unwrap_or(usize::MAX))
        })
}

/// What making a population's members will take, known before any is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footprint {
    /// The most bytes one member's rendered style can take.
    pub style_bytes: usize,
    /// About how many bytes one member takes once made: its name, style, persona and
    /// the agent's own fields.
    pub member_bytes: usize,
}

impl Footprint {
    /// About how many bytes all `count` members take.
    pub fn bytes(&self, count: usize) -> u64 {
        self.member_bytes as u64 * count as u64
    }
}

/// What one made member costs besides its texts: the agent, its roles and its persona's
/// map (measured sizes of the structures, rounded up).
const MEMBER_OVERHEAD_BYTES: usize = 512;

/// Checks a population's settings and measures what its members will take, from the
/// longest value each of its fields can have, without making any member.
pub fn footprint(
    spec: &PopulationSpec,
    rows: &[IndexMap<String, Value>],
) -> Result<Footprint, ExpandError> {
    check(spec, rows)?;
    let rows = if spec.personas.is_some() {
        &rows[..spec.count]
    } else {
        &[]
    };
    // The longest text of each persona field, over every member.
    let mut longest: IndexMap<&str, usize> = IndexMap::new();
    for (i, row) in rows.iter().enumerate() {
        for (field, v) in row {
            let len = as_text(v).map(|t| t.len()).ok_or_else(|| {
                error(
                    format!("personas[{i}].{field}"),
                    "must be a string, number or boolean",
                )
            })?;
            let at = longest.entry(field.as_str()).or_default();
            *at = (*at).max(len);
        }
    }
    for (field, d) in &spec.draw {
        let len = match d {
            Distribution::OneOf(items) => items
                .iter()
                .filter_map(as_text)
                .map(|t| t.len())
                .max()
                .unwrap_or(0),
            Distribution::Uniform([lo, hi]) => {
                format!("{lo:.2}").len().max(format!("{hi:.2}").len())
            }
            Distribution::Integers([lo, hi]) => lo.to_string().len().max(hi.to_string().len()),
        };
        longest.insert(field.as_str(), len);
    }
    let name_bytes = member_name(&spec.name, spec.count - 1).len();
    let number_bytes = spec.count.to_string().len();
    let mut style_bytes = template::render(&spec.style, |_| Some("".into()))
        .map_err(|e| error("style", e.to_string()))?
        .len();
    for key in template::placeholders(&spec.style).map_err(|e| error("style", e.to_string()))? {
        style_bytes += match key.as_str() {
            "name" => name_bytes,
            "i" => number_bytes,
            k => {
                let longest_of = *longest.get(k).ok_or_else(|| {
                    let known: Vec<&str> = longest.keys().copied().collect();
                    error(
                        "style",
                        format!(
                            "unknown placeholder {{{k}}} (its fields: name, i{}{})",
                            if known.is_empty() { "" } else { ", " },
                            known.join(", ")
                        ),
                    )
                })?;
                // Every member must have the field, not just some: a drawn field
                // covers all of them, a row field only the rows that carry it.
                if !spec.draw.contains_key(k) {
                    if let Some(i) = rows.iter().position(|row| !row.contains_key(k)) {
                        return Err(error(
                            format!("personas[{i}]"),
                            format!("has no {k}, which the style uses as {{{k}}}"),
                        ));
                    }
                }
                longest_of
            }
        };
    }
    if style_bytes > MAX_STYLE_BYTES {
        return Err(error(
            "style",
            format!(
                "renders to up to {style_bytes} bytes for a member, more than the \
                 {MAX_STYLE_BYTES} a style may take (it goes into every prompt)"
            ),
        ));
    }
    let persona_bytes: usize = longest.iter().map(|(k, v)| k.len() + v).sum();
    Ok(Footprint {
        style_bytes,
        member_bytes: MEMBER_OVERHEAD_BYTES + name_bytes + style_bytes + persona_bytes,
    })
}

/// The settings of a population that do not depend on its members.
fn check(spec: &PopulationSpec, rows: &[IndexMap<String, Value>]) -> Result<(), ExpandError> {
    if !spec.name.contains("{i}") {
        return Err(error(
            "name",
            format!(
                "{:?} has no {{i}}: every member needs a name of its own",
                spec.name
            ),
        ));
    }
    if spec.count == 0 || spec.count > MAX_MEMBERS {
        return Err(error(
            "count",
            format!("{}: must be 1 to {MAX_MEMBERS}", spec.count),
        ));
    }
    if spec.personas.is_some() && rows.len() < spec.count {
        return Err(error(
            "personas",
            format!(
                "{} row(s) for {} members: each member takes a row of its own",
                rows.len(),
                spec.count
            ),
        ));
    }
    for (field, d) in &spec.draw {
        let bad = match d {
            Distribution::OneOf(items) if items.is_empty() => Some("needs at least one value"),
            Distribution::OneOf(items) if items.iter().any(|v| as_text(v).is_none()) => {
                Some("values must be strings, numbers or booleans")
            }
            // The width of the range must be finite too: [-1e308, 1e308] is not.
            Distribution::Uniform([lo, hi]) if !(lo < hi && (hi - lo).is_finite()) => {
                Some("[low, high] must be finite with low below high")
            }
            Distribution::Integers([lo, hi]) if lo > hi => Some("[low, high] needs low ≤ high"),
            _ => None,
        };
        if let Some(why) = bad {
            return Err(error(format!("draw.{field}"), why));
        }
    }
    Ok(())
}

/// The agents of a population, named by its pattern, in order. `rows` are the persona
/// rows (from the file, or the inline list). Call [`footprint`] first: it checks what
/// making them would take.
pub fn expand(
    key: &str,
    spec: &PopulationSpec,
    rows: &[IndexMap<String, Value>],
) -> Result<Vec<(String, AgentSpec)>, ExpandError> {
    check(spec, rows)?;
    let strategy = spec.strategy.clone().map(std::sync::Arc::new);
    let mut rng = ChaCha8Rng::seed_from_u64(spec.seed.unwrap_or(0));
    let mut members = Vec::with_capacity(spec.count);
    for i in 0..spec.count {
        let name = member_name(&spec.name, i);
        let mut persona: IndexMap<String, String> = IndexMap::new();
        if let Some(row) = rows.get(i).filter(|_| spec.personas.is_some()) {
            for (field, v) in row {
                let text = as_text(v).ok_or_else(|| {
                    error(
                        format!("personas[{i}].{field}"),
                        "must be a string, number or boolean",
                    )
                })?;
                persona.insert(field.clone(), text);
            }
        }
        for (field, d) in &spec.draw {
            let value = match d {
                Distribution::OneOf(items) => {
                    as_text(&items[rng.random_range(0..items.len())]).unwrap_or_default()
                }
                Distribution::Uniform([lo, hi]) => format!("{:.2}", rng.random_range(*lo..*hi)),
                Distribution::Integers([lo, hi]) => rng.random_range(*lo..=*hi).to_string(),
            };
            persona.insert(field.clone(), value);
        }
        let number = (i + 1).to_string();
        let style = template::render(&spec.style, |k| match k {
            "name" => Some(name.as_str().into()),
            "i" => Some(number.as_str().into()),
            k => persona.get(k).map(|v| v.as_str().into()),
        })
        .map_err(|e| {
            let known: Vec<&str> = persona.keys().map(String::as_str).collect();
            error(
                "style",
                format!(
                    "{e} for {name} (its fields: name, i{}{})",
                    if known.is_empty() { "" } else { ", " },
                    known.join(", ")
                ),
            )
        })?;
        let agent = AgentSpec {
            style,
            stake: String::new(),
            roles: spec.roles.clone(),
            llm: spec.llm.clone().map(Box::new),
            human: false,
            strategy: strategy.clone(),
            noise: None,
            member: Some(Member {
                population: key.to_string(),
                index: i as u32,
                persona,
            }),
        };
        members.push((name, agent));
    }
    Ok(members)
}

#[cfg(test)]
mod tests;
