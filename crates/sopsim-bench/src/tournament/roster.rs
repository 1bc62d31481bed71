//! A tournament's roster: the named players (a built-in or formula strategy, or a
//! model: local, a server's, scripted), how they meet (every group of them, each
//! against a held-out population, or a seeded sample of groups), and the game each
//! group plays: the game's scenario with its seats taken by the group's players. Pure:
//! the documents are made here, the runs elsewhere.

use indexmap::IndexMap;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use sopsim::scenario::{LlmSettings, StrategySpec};

/// Why a roster is not one a tournament can play: every problem, by its field.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {}", .problems.iter().map(|(at, why)| format!("{at}: {why}")).collect::<Vec<_>>().join("; "))]
pub struct RosterError {
    /// The roster file, or the game's file for a problem of the game.
    pub path: std::path::PathBuf,
    /// Each problem: the field it is at, and what is wrong.
    pub problems: Vec<(String, String)>,
}

/// A tournament's roster file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Roster {
    /// How many players a game seats, when the roster is for games of one size: a
    /// game of another is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seats: Option<usize>,
    /// The players by name (a name is a plain word: letters, digits, `_`, `.`).
    pub players: IndexMap<String, Player>,
    /// How the players meet.
    #[serde(default)]
    pub format: Format,
    /// `population`: the players every rated player meets, who are not rated.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held_out: Vec<String>,
    /// `sample`: how many groups are drawn from the seed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub games: Option<u32>,
    /// `round_robin`: each player also meets itself.
    #[serde(default)]
    pub self_play: bool,
    /// Every player's noise unless its own says otherwise: the probability that a
    /// move is flipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise: Option<f64>,
}

/// One player: a strategy or a model, and its own noise.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Player {
    /// A strategy that plays the game's moves by rule (as a scenario's agent's
    /// `strategy`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<StrategySpec>,
    /// A model that plays: its `backend` (`local`, `openai` or `scripted`), `model` and
    /// sampling, over the game's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm: Option<LlmSettings>,
    /// The probability that each of its moves is flipped, over the roster's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise: Option<f64>,
}

/// How a tournament's players meet.
#[derive(
    Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// Every group of distinct players, once (with `self_play`, each with itself too).
    #[default]
    RoundRobin,
    /// Each rated player against every group of the held-out players.
    Population,
    /// `games` groups drawn from the seed.
    Sample,
}

/// A group of players meeting in one game, in the order they take the seats.
pub type Group = Vec<String>;

/// Every problem with `roster` for a game of `seats` seats.
pub fn check(roster: &Roster, seats: usize) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut problem = |at: String, why: String| out.push((at, why));
    if roster.players.is_empty() {
        problem("players".into(), "names no player".into());
    }
    for (name, p) in &roster.players {
        let at = format!("players.{name}");
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.'))
            || name.starts_with('.')
        {
            problem(
                at.clone(),
                "a player's name is letters, digits, `_` and `.`".into(),
            );
        }
        match (&p.strategy, &p.llm) {
            (Some(_), Some(_)) | (None, None) => {
                problem(at.clone(), "give a `strategy` or an `llm`, not both".into())
            }
            (None, Some(llm)) if llm.backend.is_none() => problem(
                format!("{at}.llm.backend"),
                "name the backend that plays: local, openai or scripted".into(),
            ),
            _ => {}
        }
        if let Some(n) = p.noise.filter(|n| !(0.0..=1.0).contains(n)) {
            problem(format!("{at}.noise"), format!("{n}: must be within [0, 1]"));
        }
    }
    if let Some(n) = roster.noise.filter(|n| !(0.0..=1.0).contains(n)) {
        problem("noise".into(), format!("{n}: must be within [0, 1]"));
    }
    for (i, name) in roster.held_out.iter().enumerate() {
        if !roster.players.contains_key(name) {
            problem(
                format!("held_out[{i}]"),
                format!("{name:?} is no player of the roster"),
            );
        }
    }
    let rated = rated(roster).len();
    match roster.format {
        Format::Population if roster.held_out.is_empty() => problem(
            "held_out".into(),
            "a population format needs the held-out players the others meet".into(),
        ),
        Format::Population if roster.held_out.len() < seats.saturating_sub(1) => problem(
            "held_out".into(),
            format!(
                "{} held-out player(s) cannot fill a game's {} other seats",
                roster.held_out.len(),
                seats - 1
            ),
        ),
        Format::Sample if roster.games.is_none_or(|g| g == 0) => problem(
            "games".into(),
            "a sample format needs how many games to draw".into(),
        ),
        Format::RoundRobin | Format::Sample if rated < seats && !roster.self_play => problem(
            "players".into(),
            format!("{rated} player(s) cannot fill a game of {seats} seats"),
        ),
        _ => {}
    }
    out
}

/// The players a tournament rates: all but the held-out ones.
pub fn rated(roster: &Roster) -> Vec<&String> {
    roster
        .players
        .keys()
        .filter(|n| !roster.held_out.contains(n))
        .collect()
}

/// The groups that meet, in a fixed order, for a game of `seats` seats.
pub fn groups(roster: &Roster, seats: usize, seed: u64) -> Vec<Group> {
    let rated: Vec<String> = rated(roster).into_iter().cloned().collect();
    match roster.format {
        Format::RoundRobin => {
            let mut out: Vec<Group> = combinations(rated.len(), seats)
                .into_iter()
                .map(|c| c.iter().map(|&i| rated[i].clone()).collect())
                .collect();
            if roster.self_play {
                out.extend(rated.iter().map(|p| vec![p.clone(); seats]));
            }
            out
        }
        Format::Population => {
            let held = &roster.held_out;
            let others = combinations(held.len(), seats.saturating_sub(1));
            rated
                .iter()
                .flat_map(|p| {
                    others.iter().map(move |c| {
                        std::iter::once(p.clone())
                            .chain(c.iter().map(|&i| held[i].clone()))
                            .collect()
                    })
                })
                .collect()
        }
        Format::Sample => {
            // Apart from the games' own seeds: `tourney` in ASCII.
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x0074_6f75_726e_6579);
            (0..roster.games.unwrap_or(0))
                .map(|_| {
                    rand::seq::index::sample(&mut rng, rated.len(), seats.min(rated.len()))
                        .into_iter()
                        .map(|i| rated[i].clone())
                        .collect()
                })
                .collect()
        }
    }
}

/// Every way of choosing `k` of `n` in ascending order, in lexicographic order.
fn combinations(n: usize, k: usize) -> Vec<Vec<usize>> {
    if k == 0 {
        return vec![Vec::new()];
    }
    if k > n {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut c: Vec<usize> = (0..k).collect();
    loop {
        out.push(c.clone());
        let Some(i) = (0..k).rev().find(|&i| c[i] < n - k + i) else {
            return out;
        };
        c[i] += 1;
        for j in i + 1..k {
            c[j] = c[j - 1] + 1;
        }
    }
}

/// A group's game: its name (the players, `a-vs-b`), and the game's document with its
/// seats (`seats`, the game's players in order) taken by the group's players.
pub fn game_of(
    roster: &Roster,
    game: &Value,
    seats: &[String],
    group: &[String],
) -> (String, Value) {
    let name = group.join("-vs-");
    let mut doc = game.clone();
    doc["name"] = Value::String(name.clone());
    for (seat, player) in seats.iter().zip(group) {
        let p = &roster.players[player];
        let agent = &mut doc["agents"][seat];
        if let Value::Object(fields) = agent {
            fields.remove("strategy");
            if let Some(s) = &p.strategy {
                fields.insert(
                    "strategy".into(),
                    serde_json::to_value(s).unwrap_or_default(),
                );
                fields.remove("llm");
            }
            if let Some(llm) = &p.llm {
                let mut merged = serde_json::to_value(llm).unwrap_or_default();
                if let (Some(own), Some(Value::Object(was))) =
                    (merged.as_object_mut(), fields.get("llm"))
                {
                    for (k, v) in was {
                        own.entry(k.clone()).or_insert_with(|| v.clone());
                    }
                }
                fields.insert("llm".into(), merged);
            }
            match p.noise.or(roster.noise) {
                Some(n) if n > 0.0 => {
                    fields.insert("noise".into(), Value::from(n));
                }
                _ => {
                    fields.remove("noise");
                }
            }
        }
    }
    (name, doc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn roster(v: Value) -> Roster {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn groups_meet_as_the_format_says() {
        let r = roster(json!({"players": {
            "tft": {"strategy": {"rule": "tit_for_tat"}},
            "alld": {"strategy": {"rule": "always_defect"}},
            "allc": {"strategy": {"rule": "always_cooperate"}},
            "model": {"llm": {"backend": "local", "model": "qwen05"}}
        }}));
        assert!(check(&r, 2).is_empty(), "{:?}", check(&r, 2));
        let g = groups(&r, 2, 0);
        assert_eq!(g.len(), 6);
        assert_eq!(g[0], ["tft", "alld"]);
        assert_eq!(g[5], ["allc", "model"]);
        assert_eq!(groups(&r, 3, 0).len(), 4);
        let held = Roster {
            format: Format::Population,
            held_out: vec!["alld".into(), "allc".into()],
            ..r.clone()
        };
        assert_eq!(
            groups(&held, 2, 0),
            [
                ["tft", "alld"],
                ["tft", "allc"],
                ["model", "alld"],
                ["model", "allc"]
            ]
        );
        let sample = Roster {
            format: Format::Sample,
            games: Some(5),
            ..r.clone()
        };
        let drawn = groups(&sample, 2, 9);
        assert_eq!(drawn.len(), 5);
        assert_eq!(drawn, groups(&sample, 2, 9));
        assert!(drawn.iter().all(|g| g[0] != g[1]));
        let with_self = Roster {
            self_play: true,
            ..r
        };
        assert_eq!(groups(&with_self, 2, 0).len(), 10);
    }

    #[test]
    fn a_groups_game_seats_its_players() {
        let r = roster(json!({"players": {
            "tft": {"strategy": {"rule": "tit_for_tat"}, "noise": 0.1},
            "model": {"llm": {"backend": "local", "model": "qwen05"}}
        }}));
        let game = json!({"name": "pd", "agents": {
            "A": {"roles": {"play": "P1"}, "llm": {"temperature": 0.5}},
            "B": {"roles": {"play": "P2"}, "strategy": {"rule": "always_defect"},
                  "llm": {"temperature": 0.5}}}});
        let (name, doc) = game_of(
            &r,
            &game,
            &["A".into(), "B".into()],
            &["tft".into(), "model".into()],
        );
        assert_eq!(name, "tft-vs-model");
        assert_eq!(doc["agents"]["A"]["strategy"]["rule"], "tit_for_tat");
        assert_eq!(doc["agents"]["A"]["noise"], 0.1);
        assert!(doc["agents"]["A"].get("llm").is_none());
        assert_eq!(
            doc["agents"]["B"]["llm"],
            json!({"backend": "local", "model": "qwen05", "temperature": 0.5})
        );
        assert!(doc["agents"]["B"].get("strategy").is_none());
    }

    #[test]
    fn a_bad_roster_is_refused_naming_the_field() {
        let r = roster(json!({"players": {
            "a b": {"strategy": {"rule": "tit_for_tat"}},
            "m": {"llm": {"model": "x"}},
            "both": {"strategy": {"rule": "tit_for_tat"}, "llm": {"backend": "local"}}
        }, "format": "population", "held_out": ["zed"], "noise": 2.0}));
        let said: Vec<String> = check(&r, 2)
            .iter()
            .map(|(a, w)| format!("{a}: {w}"))
            .collect();
        for expected in [
            "players.a b: a player's name",
            "players.m.llm.backend: name the backend",
            "players.both: give a `strategy` or an `llm`",
            "noise: 2: must be within [0, 1]",
            "held_out[0]: \"zed\" is no player",
        ] {
            assert!(
                said.iter().any(|s| s.starts_with(expected)),
                "{expected}: {said:?}"
            );
        }
    }
}
