//! A tournament's report: every group's mean payoffs with intervals over its seeds,
//! the payoff matrix (each player's mean payoff per round against each other), the
//! ratings and the ranking; `report.json` (the same games give the same bytes),
//! `report.md` for people, `timing.json`, and the plots (the matrix as a heat map, the
//! ranking with intervals).

use std::path::Path;

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sopsim::runner::{FolderFileError, OutputFolder};

use super::ratings::{self, Estimate, Game, Skill};
use super::roster::Roster;
use crate::error::BenchError;
use crate::exec::Executed;

/// A tournament's `report.json`: every group's payoffs, the payoff matrix, each
/// player's ratings and the ranking.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct TournamentReport {
    /// The game scenario's name.
    pub game: String,
    /// The roster's players, in its order.
    pub players: Vec<String>,
    /// Games played: groups × seeds.
    pub games: usize,
    /// Each group's mean payoffs over its seeds, by player, with intervals.
    pub groups: Vec<GroupReport>,
    /// Row player's mean payoff per round (per game, for games without rounds)
    /// against the column player, two-player games only; `null` where they never met.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matrix: Option<Vec<Vec<Option<f64>>>>,
    /// Each player's ratings, by name.
    pub ratings: IndexMap<String, PlayerRatings>,
    /// The players, best first: by mean payoff per round (per game without rounds),
    /// ties in the roster's order.
    pub ranking: Vec<String>,
    /// Axelrod's ecological variant (two-player round robins with self-play): each
    /// player's share of the population by generation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ecology: Option<Vec<IndexMap<String, f64>>>,
    /// Why Bradley–Terry strengths could not be estimated, when they could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bradley_terry_note: Option<String>,
    /// The games that gave no payoffs, left out of every figure.
    pub failed: Vec<FailedGame>,
}

/// One group's games.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct GroupReport {
    /// The group's players, in seat order.
    pub players: Vec<String>,
    /// Seeds the group played.
    pub seeds: usize,
    /// Mean payoff per game of each seat, in seat order.
    pub payoffs: Vec<Option<Estimate>>,
}

/// A player's ratings.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct PlayerRatings {
    /// Games the player played with others.
    pub games: usize,
    /// Mean payoff per game, with a bootstrap interval over those games.
    pub mean_payoff: Option<Estimate>,
    /// Mean payoff per round, for games with rounds.
    pub mean_payoff_per_round: Option<Estimate>,
    /// Bradley–Terry strength (the players' geometric mean is 1) from the two-player
    /// games' wins, a tie half a win each way, with a bootstrap interval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bradley_terry: Option<Estimate>,
    /// TrueSkill after every game, each ranked by payoff.
    pub trueskill: Skill,
}

/// A game that gave no payoffs.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct FailedGame {
    /// The game's run folder, under `runs/`.
    pub id: String,
    /// Why it gave none.
    pub error: String,
}

/// The report's file in a tournament's folder.
const REPORT_FILE: &str = "report.json";

/// The most bytes of a `report.json` read back.
const MAX_REPORT_BYTES: u64 = 256 << 20;

/// Reads the report a tournament wrote into `dir` (`sopsim tournament --out`): only a
/// regular file inside it, within a limit, of the report's shape.
pub fn read(dir: &Path) -> Result<TournamentReport, FolderFileError> {
    OutputFolder::new(dir).read_json(REPORT_FILE, MAX_REPORT_BYTES)
}

/// The seed of every bootstrap here: a report is the same whatever ran it.
const BOOTSTRAP_SEED: u64 = 0;

/// Generations of the ecological variant.
const GENERATIONS: usize = 50;

/// The report of `played`, among `players` in the roster's order.
pub fn build(
    roster: &Roster,
    players: &[String],
    played: &[Game],
    failed: Vec<(String, String)>,
    game: &Path,
) -> TournamentReport {
    let mut groups: IndexMap<Vec<String>, Vec<&Game>> = IndexMap::new();
    for g in played {
        groups.entry(g.players.clone()).or_default().push(g);
    }
    let group_reports = groups
        .iter()
        .map(|(players, games)| GroupReport {
            players: players.clone(),
            seeds: games.len(),
            payoffs: (0..players.len())
                .map(|seat| {
                    let v: Vec<f64> = games.iter().map(|g| g.payoffs[seat]).collect();
                    let of = |picked: &[usize]| {
                        Some(picked.iter().map(|&i| v[i]).sum::<f64>() / picked.len().max(1) as f64)
                    };
                    let value = v.iter().sum::<f64>() / v.len().max(1) as f64;
                    (!v.is_empty()).then(|| Estimate {
                        value,
                        ci95: crate::agreement::bootstrap_interval(
                            v.len(),
                            &of,
                            1000,
                            BOOTSTRAP_SEED,
                            0.95,
                        )
                        .map(|(a, b)| [a, b]),
                    })
                })
                .collect(),
        })
        .collect();
    let two_player = played.iter().all(|g| g.players.len() == 2) && !played.is_empty();
    let matrix = two_player.then(|| payoff_matrix(players, played));
    let scores = ratings::mean_scores(players, played, BOOTSTRAP_SEED);
    let (bradley_terry, bradley_terry_note) = match two_player {
        true => match ratings::bradley_terry(players, played, BOOTSTRAP_SEED) {
            Ok(bt) => (Some(bt), None),
            Err(e) => (None, Some(e.to_string())),
        },
        false => (None, None),
    };
    let skills = ratings::trueskill(players, played);
    let ratings: IndexMap<String, PlayerRatings> = players
        .iter()
        .map(|p| {
            let (per_game, per_round) = scores[p];
            let games = played
                .iter()
                .filter(|g| !g.is_self_play() && g.players.contains(p))
                .count();
            (
                p.clone(),
                PlayerRatings {
                    games,
                    mean_payoff: per_game,
                    mean_payoff_per_round: per_round,
                    bradley_terry: bradley_terry.as_ref().and_then(|bt| bt.get(p).copied()),
                    trueskill: skills[p],
                },
            )
        })
        .collect();
    let score = |p: &String| {
        let r = &ratings[p];
        r.mean_payoff_per_round
            .or(r.mean_payoff)
            .map_or(f64::NEG_INFINITY, |e| e.value)
    };
    let mut ranking: Vec<String> = players
        .iter()
        .filter(|p| ratings[*p].games > 0)
        .cloned()
        .collect();
    // Stable: ties keep the roster's order.
    ranking.sort_by(|a, b| score(b).total_cmp(&score(a)));
    let ecology = match (&matrix, roster.self_play && roster.held_out.is_empty()) {
        (Some(m), true) if m.iter().flatten().all(Option::is_some) => {
            let full: Vec<Vec<f64>> = m
                .iter()
                .map(|row| row.iter().map(|v| v.unwrap_or(0.0)).collect())
                .collect();
            Some(
                ratings::ecology(&full, GENERATIONS)
                    .into_iter()
                    .map(|shares| players.iter().cloned().zip(shares).collect())
                    .collect(),
            )
        }
        _ => None,
    };
    TournamentReport {
        game: game.display().to_string(),
        players: players.to_vec(),
        games: played.len(),
        groups: group_reports,
        matrix,
        ratings,
        ranking,
        ecology,
        bradley_terry_note,
        failed: failed
            .into_iter()
            .map(|(id, error)| FailedGame { id, error })
            .collect(),
    }
}

/// Each player's mean payoff per round (per game, without rounds) against each other,
/// from both seats of every two-player game.
fn payoff_matrix(players: &[String], played: &[Game]) -> Vec<Vec<Option<f64>>> {
    let at = |p: &str| players.iter().position(|q| q == p);
    let mut sums = vec![vec![(0.0, 0usize); players.len()]; players.len()];
    for g in played {
        let per = |v: f64| g.rounds.filter(|r| *r > 0.0).map_or(v, |r| v / r);
        let (Some(a), Some(b)) = (at(&g.players[0]), at(&g.players[1])) else {
            continue;
        };
        for (i, j, v) in [(a, b, g.payoffs[0]), (b, a, g.payoffs[1])] {
            sums[i][j].0 += per(v);
            sums[i][j].1 += 1;
            if a == b {
                break;
            }
        }
    }
    sums.into_iter()
        .map(|row| {
            row.into_iter()
                .map(|(s, n)| (n > 0).then(|| s / n as f64))
                .collect()
        })
        .collect()
}

/// Writes `report.json`, `report.md`, `timing.json` and the plots into `out`.
pub fn write(out: &Path, report: &TournamentReport, executed: &Executed) -> Result<(), BenchError> {
    let folder = sopsim::runner::OutputFolder::new(out);
    folder.replace_json(REPORT_FILE, report)?;
    folder.replace_json(
        "timing.json",
        &serde_json::json!({
            "wall_s": executed.wall.as_secs_f64(),
            "games_run": executed.finished + executed.failed,
            "concurrency": executed.concurrency,
        }),
    )?;
    folder.replace("report.md", markdown(report).as_bytes())?;
    #[cfg(feature = "plots")]
    {
        let plots = out.join("plots");
        std::fs::create_dir_all(&plots).map_err(|source| BenchError::Io {
            path: plots.clone(),
            source,
        })?;
        if let Some(m) = &report.matrix {
            crate::plot::payoff_matrix(&plots.join("payoff_matrix"), &report.players, m)?;
        }
        let ranked: Vec<(String, Option<Estimate>)> = report
            .ranking
            .iter()
            .map(|p| {
                let r = &report.ratings[p];
                (p.clone(), r.mean_payoff_per_round.or(r.mean_payoff))
            })
            .collect();
        crate::plot::ranking(&plots.join("ranking"), &ranked)?;
    }
    Ok(())
}

fn shown(e: &Option<Estimate>) -> String {
    match e {
        Some(Estimate {
            value,
            ci95: Some([lo, hi]),
        }) => format!("{value:.3} [{lo:.3}, {hi:.3}]"),
        Some(Estimate { value, ci95: None }) => format!("{value:.3}"),
        None => "-".into(),
    }
}

/// `report.md`.
fn markdown(r: &TournamentReport) -> String {
    let mut s = format!(
        "# Tournament: {}\n\n{} players, {} games.\n\n## Ranking\n\n\
         | # | player | games | mean payoff per round | mean payoff per game | Bradley–Terry | TrueSkill μ − 3σ |\n\
         |---|---|---|---|---|---|---|\n",
        r.game,
        r.players.len(),
        r.games
    );
    for (i, p) in r.ranking.iter().enumerate() {
        let x = &r.ratings[p];
        s.push_str(&format!(
            "| {} | {p} | {} | {} | {} | {} | {:.3} |\n",
            i + 1,
            x.games,
            shown(&x.mean_payoff_per_round),
            shown(&x.mean_payoff),
            shown(&x.bradley_terry),
            x.trueskill.conservative
        ));
    }
    if let Some(note) = &r.bradley_terry_note {
        s.push_str(&format!("\nBradley–Terry strengths: none ({note}).\n"));
    }
    if let Some(m) = &r.matrix {
        s.push_str("\n## Payoff per round, row against column\n\n| |");
        for p in &r.players {
            s.push_str(&format!(" {p} |"));
        }
        s.push_str("\n|---|");
        s.push_str(&"---|".repeat(r.players.len()));
        s.push('\n');
        for (p, row) in r.players.iter().zip(m) {
            s.push_str(&format!("| {p} |"));
            for v in row {
                s.push_str(&match v {
                    Some(v) => format!(" {v:.3} |"),
                    None => " - |".into(),
                });
            }
            s.push('\n');
        }
    }
    if !r.failed.is_empty() {
        s.push_str(&format!(
            "\n{} game(s) gave no payoffs:\n\n",
            r.failed.len()
        ));
        for f in &r.failed {
            s.push_str(&format!("- {}: {}\n", f.id, f.error));
        }
    }
    s
}
