//! A tournament's ratings from its games, as pure functions: each player's mean payoff
//! per game and per round, with a bootstrap interval over its games; Bradley–Terry
//! strengths from who out-scored whom in two-player games (maximum likelihood, blind
//! to the games' order), with a bootstrap interval; TrueSkill from each game's ranking
//! by payoff (skillratings, with the Python package's defaults); and Axelrod's
//! ecological variant, the players' shares over generations. A player's games with
//! itself count in none of them (as Axelrod's tournament leaves self-interactions out
//! of its scores); the payoff matrix keeps them.

use indexmap::IndexMap;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use crate::agreement::bootstrap_interval;
pub use crate::stats::Estimate;

/// One game: its players in seat order, and what each earned.
#[derive(Debug, Clone, PartialEq)]
pub struct Game {
    /// The players' names, in seat order.
    pub players: Vec<String>,
    /// The game's seed.
    pub seed: u64,
    /// What each seat earned, in seat order.
    pub payoffs: Vec<f64>,
    /// The game's rounds, when it has any.
    pub rounds: Option<f64>,
}

impl Game {
    /// Whether one player fills every seat.
    pub fn is_self_play(&self) -> bool {
        self.players.windows(2).all(|w| w[0] == w[1])
    }
}

/// A player's TrueSkill rating after every game.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Skill {
    /// The rating's mean (25 at the start).
    pub mu: f64,
    /// Its uncertainty (25/3 at the start).
    pub sigma: f64,
    /// `mu − 3σ`, the rating TrueSkill ranks by.
    pub conservative: f64,
}

/// Bootstrap resamples of every interval here.
const RESAMPLES: usize = 1000;

/// Each player's mean payoff per game over its games with others, and per round
/// (where the games have rounds), with bootstrap intervals over those games.
pub fn mean_scores(
    players: &[String],
    games: &[Game],
    seed: u64,
) -> IndexMap<String, (Option<Estimate>, Option<Estimate>)> {
    players
        .iter()
        .map(|p| {
            let mine: Vec<(f64, Option<f64>)> = games
                .iter()
                .filter(|g| !g.is_self_play())
                .flat_map(|g| {
                    g.players
                        .iter()
                        .zip(&g.payoffs)
                        .filter(|(q, _)| *q == p)
                        .map(|(_, v)| (*v, g.rounds))
                })
                .collect();
            let per_game: Vec<f64> = mine.iter().map(|(v, _)| *v).collect();
            let per_round: Vec<f64> = mine
                .iter()
                .filter_map(|(v, r)| r.filter(|r| *r > 0.0).map(|r| v / r))
                .collect();
            (
                p.clone(),
                (estimate(&per_game, seed), estimate(&per_round, seed)),
            )
        })
        .collect()
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// The mean of `values` with a bootstrap interval.
fn estimate(values: &[f64], seed: u64) -> Option<Estimate> {
    let value = mean(values)?;
    let of = |picked: &[usize]| mean(&picked.iter().map(|&i| values[i]).collect::<Vec<_>>());
    Some(Estimate {
        value,
        ci95: bootstrap_interval(values.len(), &of, RESAMPLES, seed, 0.95).map(|(a, b)| [a, b]),
    })
}

/// Who out-scored whom in the two-player games of `players` (a tie counts half to
/// each): `wins[i][j]` games i won against j.
pub fn wins(players: &[String], games: &[&Game]) -> Vec<Vec<f64>> {
    let at = |p: &str| players.iter().position(|q| q == p);
    let mut w = vec![vec![0.0; players.len()]; players.len()];
    for g in games
        .iter()
        .filter(|g| g.players.len() == 2 && !g.is_self_play())
    {
        let (Some(a), Some(b)) = (at(&g.players[0]), at(&g.players[1])) else {
            continue;
        };
        match g.payoffs[0].partial_cmp(&g.payoffs[1]) {
            Some(std::cmp::Ordering::Greater) => w[a][b] += 1.0,
            Some(std::cmp::Ordering::Less) => w[b][a] += 1.0,
            _ => {
                w[a][b] += 0.5;
                w[b][a] += 0.5;
            }
        }
    }
    w
}

/// Bradley–Terry strengths of `players` from their two-player games (geometric mean
/// 1), with bootstrap intervals over the games; `Err` says why no maximum-likelihood
/// estimate exists (a player who never lost, say).
pub fn bradley_terry(
    players: &[String],
    games: &[Game],
    seed: u64,
) -> Result<IndexMap<String, Estimate>, crate::bradley_terry::BradleyTerryError> {
    let all: Vec<&Game> = games.iter().collect();
    let strengths = crate::bradley_terry::bradley_terry(&wins(players, &all))?;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut resampled: Vec<Vec<f64>> = vec![Vec::new(); players.len()];
    for _ in 0..RESAMPLES {
        let picked: Vec<&Game> = (0..games.len())
            .map(|_| &games[rng.random_range(0..games.len())])
            .collect();
        if let Ok(s) = crate::bradley_terry::bradley_terry(&wins(players, &picked)) {
            for (i, v) in s.into_iter().enumerate() {
                resampled[i].push(v);
            }
        }
    }
    Ok(players
        .iter()
        .zip(strengths)
        .zip(resampled)
        .map(|((p, value), mut r)| {
            r.sort_by(f64::total_cmp);
            let ci95 = (r.len() * 2 >= RESAMPLES).then(|| {
                let at = |q: f64| r[((r.len() - 1) as f64 * q).round() as usize];
                [at(0.025), at(0.975)]
            });
            (p.clone(), Estimate { value, ci95 })
        })
        .collect())
}

/// TrueSkill ratings of `players` after `games` in their order, each game a
/// free-for-all ranked by payoff (equal payoffs tie), with the defaults of the Python
/// `trueskill` package (mu 25, sigma 25/3, beta 25/6, tau 25/300, draws 10%).
pub fn trueskill(players: &[String], games: &[Game]) -> IndexMap<String, Skill> {
    use skillratings::trueskill::{trueskill_multi_team, TrueSkillConfig, TrueSkillRating};
    use skillratings::MultiTeamOutcome;
    let mut ratings: IndexMap<&str, TrueSkillRating> = players
        .iter()
        .map(|p| (p.as_str(), TrueSkillRating::new()))
        .collect();
    let config = TrueSkillConfig::new();
    for g in games.iter().filter(|g| !g.is_self_play()) {
        let Some(teams) = g
            .players
            .iter()
            .map(|p| ratings.get(p.as_str()).map(|r| [*r]))
            .collect::<Option<Vec<[TrueSkillRating; 1]>>>()
        else {
            continue;
        };
        // Rank 1 for the highest payoff; equal payoffs share a rank.
        let ranks: Vec<usize> = g
            .payoffs
            .iter()
            .map(|p| 1 + g.payoffs.iter().filter(|q| *q > p).count())
            .collect();
        let entries: Vec<(&[TrueSkillRating], MultiTeamOutcome)> = teams
            .iter()
            .zip(&ranks)
            .map(|(t, r)| (&t[..], MultiTeamOutcome::new(*r)))
            .collect();
        if let Ok(updated) = trueskill_multi_team(&entries, &config, None) {
            for (p, team) in g.players.iter().zip(updated) {
                if let (Some(slot), Some(r)) = (ratings.get_mut(p.as_str()), team.first()) {
                    *slot = *r;
                }
            }
        }
    }
    ratings
        .into_iter()
        .map(|(p, r)| {
            (
                p.to_string(),
                Skill {
                    mu: r.rating,
                    sigma: r.uncertainty,
                    conservative: r.rating - 3.0 * r.uncertainty,
                },
            )
        })
        .collect()
}

/// Axelrod's ecological variant: each player's share of the population, generation by
/// generation from equal shares, each share growing with its score against the
/// population as it stands (`matrix[i][j]`: i's mean payoff per round against j, the
/// diagonal its payoff against itself).
pub fn ecology(matrix: &[Vec<f64>], generations: usize) -> Vec<Vec<f64>> {
    let n = matrix.len();
    if n == 0 {
        return Vec::new();
    }
    let mut shares = vec![1.0 / n as f64; n];
    let mut out = vec![shares.clone()];
    for _ in 0..generations {
        let fitness: Vec<f64> = (0..n)
            .map(|i| (0..n).map(|j| matrix[i][j] * shares[j]).sum())
            .collect();
        let grown: Vec<f64> = shares.iter().zip(&fitness).map(|(s, f)| s * f).collect();
        let total: f64 = grown.iter().sum();
        if total <= 0.0 {
            break;
        }
        shares = grown.iter().map(|g| g / total).collect();
        out.push(shares.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn game(a: &str, b: &str, pa: f64, pb: f64) -> Game {
        Game {
            players: vec![a.into(), b.into()],
            seed: 0,
            payoffs: vec![pa, pb],
            rounds: Some(10.0),
        }
    }

    /// The `trueskill` package (0.4.5, defaults) on seven free-for-alls among four
    /// players: A 17.148, B 16.573, C 17.369, D 14.759 by mu − 3σ.
    #[test]
    fn trueskill_matches_the_python_package() {
        let players: Vec<String> = ["A", "B", "C", "D"].map(String::from).to_vec();
        // Ranks as payoffs: rank r earns 10 − r.
        let ffa = |order: &[&str], ranks: &[f64]| Game {
            players: order.iter().map(|s| s.to_string()).collect(),
            seed: 0,
            payoffs: ranks.iter().map(|r| 10.0 - r).collect(),
            rounds: None,
        };
        let games = [
            ffa(&["A", "B", "C", "D"], &[0., 1., 2., 3.]),
            ffa(&["B", "C", "D"], &[0., 1., 2.]),
            ffa(&["C", "A", "D", "B"], &[0., 1., 1., 2.]),
            ffa(&["D", "A", "B"], &[0., 1., 2.]),
            ffa(&["B", "D", "A", "C"], &[0., 1., 2., 3.]),
            ffa(&["C", "B", "A"], &[0., 1., 2.]),
            ffa(&["A", "C", "B", "D"], &[0., 1., 2., 3.]),
        ];
        let r = trueskill(&players, &games);
        for (p, mu, sigma) in [
            ("A", 24.759546392545595, 2.537184418098351),
            ("B", 24.0364937455189, 2.4879654221981906),
            ("C", 25.360586591774137, 2.6638216703485487),
            ("D", 22.85528564896615, 2.698771843638907),
        ] {
            // The package's error function is an approximation: 1e-5 (its notes).
            assert!((r[p].mu - mu).abs() < 1e-5, "{p}: {:?}", r[p]);
            assert!((r[p].sigma - sigma).abs() < 1e-5, "{p}: {:?}", r[p]);
        }
    }

    #[test]
    fn scores_and_strengths_leave_self_play_out_and_the_order_does_not_matter() {
        let players: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        let mut games = vec![
            game("a", "b", 30.0, 10.0),
            game("a", "c", 20.0, 25.0),
            game("b", "c", 15.0, 15.0),
            game("c", "a", 12.0, 18.0),
            game("b", "a", 22.0, 21.0),
            game("a", "a", 99.0, 99.0),
        ];
        let scores = mean_scores(&players, &games, 0);
        let (a, a_round) = scores["a"];
        assert_eq!(a.unwrap().value, (30.0 + 20.0 + 18.0 + 21.0) / 4.0);
        assert_eq!(a_round.unwrap().value, (3.0 + 2.0 + 1.8 + 2.1) / 4.0);
        let bt = bradley_terry(&players, &games, 0).unwrap();
        games.reverse();
        let again = bradley_terry(&players, &games, 0).unwrap();
        for p in &players {
            assert!((bt[p].value - again[p].value).abs() < 1e-12);
        }
        let w = wins(&players, &games.iter().collect::<Vec<_>>());
        assert_eq!(w[1][2], 0.5, "a tie counts half");
        let shares = ecology(&[vec![3.0, 0.0], vec![5.0, 1.0]], 3);
        assert_eq!(shares[0], [0.5, 0.5]);
        assert!(
            shares[3][1] > shares[2][1],
            "defectors grow among cooperators"
        );
    }
}
