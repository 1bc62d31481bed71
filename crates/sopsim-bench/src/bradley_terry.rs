//! Bradley–Terry strengths of players from their pairwise results: [`bradley_terry`], the
//! maximum-likelihood fit by Hunter's (2004) MM algorithm, and [`BradleyTerryError`],
//! why a set of results has none. Pure functions over plain numbers.

use thiserror::Error;

/// Iteration stops once no strength changes by this fraction of itself or more.
const TOLERANCE: f64 = 1e-13;
/// The most iterations made, whether or not the strengths have settled.
const MAX_ITERATIONS: usize = 100_000;

/// Why a matrix of wins has no Bradley–Terry strengths.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum BradleyTerryError {
    /// The matrix has no rows: there are no players.
    #[error("no players")]
    Empty,
    /// A row does not have one entry for each player.
    #[error("row {row} has {len} entries, not one for each of the {players} players")]
    NotSquare {
        /// The row's index, from 0.
        row: usize,
        /// How many entries the row has.
        len: usize,
        /// How many players (rows) there are.
        players: usize,
    },
    /// A count of wins is negative, infinite or not a number.
    #[error("player {winner} has {value} wins against player {loser}; a count of wins is finite and at least 0")]
    BadCount {
        /// The winning player's index (the row).
        winner: usize,
        /// The losing player's index (the column).
        loser: usize,
        /// The count given.
        value: f64,
    },
    /// A player has wins against itself: the diagonal is not zero.
    #[error("player {player} has {value} wins against itself; a player plays only others")]
    AgainstItself {
        /// The player's index.
        player: usize,
        /// The wins against itself given.
        value: f64,
    },
    /// A player won no game, so its strength has no finite estimate.
    #[error("player {player} won no game, so its strength has no finite estimate (it tends to 0)")]
    NoWins {
        /// The player's index.
        player: usize,
    },
    /// A player lost no game, so its strength has no finite estimate.
    #[error("player {player} lost no game, so its strength has no finite estimate (it grows without bound)")]
    NoLosses {
        /// The player's index.
        player: usize,
    },
    /// Some players are not linked to player 0 by any chain of games played.
    #[error("players {players:?} never played player 0, directly or through others, so nothing ties their strengths to its")]
    NotConnected {
        /// The players not linked to player 0, by index.
        players: Vec<usize>,
    },
    /// Some players never lost to any of the others, so nothing bounds their strengths.
    #[error("players {players:?} never lost to any of the other players, so nothing bounds how much stronger they are")]
    Unbeaten {
        /// The players of that group, by index.
        players: Vec<usize>,
    },
}

/// The Bradley–Terry strengths `p` of players, where `wins[i][j]` is how many games
/// player `i` won against player `j` (a draw counts half to each, so counts may be
/// fractional): the maximum-likelihood `p` of the model `P(i beats j) = p_i / (p_i + p_j)`,
/// scaled so that their geometric mean is 1 (their logarithms sum to zero).
///
/// It sees only the totals, not the order in which games were played, so the order makes
/// no difference: strengths are taken to be the same for every game.
///
/// Hunter's (2004) MM update `p_i ← W_i / Σ_{j≠i} n_ij / (p_i + p_j)`, with `W_i` the wins
/// of `i` and `n_ij` the games between `i` and `j`, all players at once from 1, until no
/// strength changes by 1e-13 of itself (or after 100,000 iterations). The estimate exists
/// only when every group of players has lost a game to someone outside it; otherwise,
/// or for a matrix that is not square with finite counts of at least 0 and a zero
/// diagonal, an error says why.
pub fn bradley_terry(wins: &[Vec<f64>]) -> Result<Vec<f64>, BradleyTerryError> {
    let players = wins.len();
    check(wins)?;
    let games = |i: usize, j: usize| wins[i][j] + wins[j][i];
    let total_wins: Vec<f64> = wins.iter().map(|row| row.iter().sum()).collect();
    let mut strengths = vec![1.0_f64; players];
    for _ in 0..MAX_ITERATIONS {
        let mut next: Vec<f64> = (0..players)
            .map(|i| {
                let weighted_games: f64 = (0..players)
                    .filter(|&j| j != i)
                    .map(|j| games(i, j) / (strengths[i] + strengths[j]))
                    .sum();
                total_wins[i] / weighted_games
            })
            .collect();
        // Strengths are defined up to a common factor; fixing their geometric mean keeps
        // the iterates comparable, so the change below measures convergence.
        let scale = (next.iter().map(|p| p.ln()).sum::<f64>() / players as f64).exp();
        for p in &mut next {
            *p /= scale;
        }
        let change = next
            .iter()
            .zip(&strengths)
            .map(|(new, old)| ((new - old) / old).abs())
            .fold(0.0, f64::max);
        strengths = next;
        if change < TOLERANCE {
            break;
        }
    }
    Ok(strengths)
}

/// Why `wins` is not a matrix of results with a maximum-likelihood estimate, if it is not.
fn check(wins: &[Vec<f64>]) -> Result<(), BradleyTerryError> {
    let players = wins.len();
    if players == 0 {
        return Err(BradleyTerryError::Empty);
    }
    for (row, results) in wins.iter().enumerate() {
        if results.len() != players {
            return Err(BradleyTerryError::NotSquare {
                row,
                len: results.len(),
                players,
            });
        }
        for (column, &value) in results.iter().enumerate() {
            if !value.is_finite() || value < 0.0 {
                return Err(BradleyTerryError::BadCount {
                    winner: row,
                    loser: column,
                    value,
                });
            }
            if row == column && value != 0.0 {
                return Err(BradleyTerryError::AgainstItself { player: row, value });
            }
        }
    }
    for (player, results) in wins.iter().enumerate() {
        if results.iter().sum::<f64>() == 0.0 {
            return Err(BradleyTerryError::NoWins { player });
        }
        if wins.iter().map(|row| row[player]).sum::<f64>() == 0.0 {
            return Err(BradleyTerryError::NoLosses { player });
        }
    }
    let played = reach_from_first(players, |i, j| wins[i][j] + wins[j][i] > 0.0);
    if played.contains(&false) {
        return Err(BradleyTerryError::NotConnected {
            players: players_where(&played, false),
        });
    }
    // Hunter's condition: in every split of the players in two, someone on each side beat
    // someone on the other. It holds when player 0 beat everyone else and everyone else
    // beat player 0, each through a chain of wins.
    let beaten_by_first = reach_from_first(players, |i, j| wins[i][j] > 0.0);
    if beaten_by_first.contains(&false) {
        // Those outside the chain of player 0's wins never lost to anyone in it.
        return Err(BradleyTerryError::Unbeaten {
            players: players_where(&beaten_by_first, false),
        });
    }
    let beat_first = reach_from_first(players, |i, j| wins[j][i] > 0.0);
    if beat_first.contains(&false) {
        // Those in the chain of wins against player 0 never lost to anyone outside it.
        return Err(BradleyTerryError::Unbeaten {
            players: players_where(&beat_first, true),
        });
    }
    Ok(())
}

/// Which of `players` (at least one) are reached from player 0 by following `link`.
fn reach_from_first(players: usize, link: impl Fn(usize, usize) -> bool) -> Vec<bool> {
    let mut reached = vec![false; players];
    reached[0] = true;
    let mut to_visit = vec![0];
    while let Some(from) = to_visit.pop() {
        for (to, seen) in reached.iter_mut().enumerate() {
            if !*seen && link(from, to) {
                *seen = true;
                to_visit.push(to);
            }
        }
    }
    reached
}

/// The players whose entry in `reached` is `value`.
fn players_where(reached: &[bool], value: bool) -> Vec<usize> {
    (0..reached.len())
        .filter(|&i| reached[i] == value)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matrix(rows: &[&[f64]]) -> Vec<Vec<f64>> {
        rows.iter().map(|row| row.to_vec()).collect()
    }

    /// The reference's results (research/measuring/bradley_terry): 6 games per pair,
    /// draws counted half to each.
    fn results() -> Vec<Vec<f64>> {
        matrix(&[
            &[0.0, 3.5, 4.0, 5.0],
            &[2.5, 0.0, 3.0, 4.5],
            &[2.0, 3.0, 0.0, 2.5],
            &[1.0, 1.5, 3.5, 0.0],
        ])
    }

    #[test]
    fn strengths_match_the_reference() {
        // MM iterated to a fixed point in float64, and Newton's method in 60-digit
        // arithmetic (1.87378809094136172…, 1.18955272694901215…, 0.76716515165792390…,
        // 0.58479945849819687…).
        let expected = [
            1.8737880909413613,
            1.1895527269490123,
            0.7671651516579239,
            0.5847994584981969,
        ];
        let strengths = bradley_terry(&results()).unwrap();
        assert_eq!(strengths.len(), 4);
        for (p, e) in strengths.iter().zip(expected) {
            assert!((p - e).abs() < 1e-10, "{strengths:?}");
        }
        let log_sum: f64 = strengths.iter().map(|p| p.ln()).sum();
        assert!(log_sum.abs() < 1e-12, "{log_sum}");
    }

    #[test]
    fn only_the_proportions_and_the_players_matter() {
        let wins = results();
        let strengths = bradley_terry(&wins).unwrap();
        // Every count doubled: the same strengths.
        let doubled: Vec<Vec<f64>> = wins
            .iter()
            .map(|row| row.iter().map(|w| w * 2.0).collect())
            .collect();
        for (a, b) in strengths.iter().zip(bradley_terry(&doubled).unwrap()) {
            assert!((a - b).abs() < 1e-11, "{a} {b}");
        }
        // The players in reverse order: their strengths in reverse order.
        let reversed: Vec<Vec<f64>> = wins
            .iter()
            .rev()
            .map(|row| row.iter().rev().copied().collect())
            .collect();
        for (a, b) in strengths
            .iter()
            .rev()
            .zip(bradley_terry(&reversed).unwrap())
        {
            assert!((a - b).abs() < 1e-11, "{a} {b}");
        }
    }

    #[test]
    fn malformed_matrices_are_refused() {
        assert_eq!(bradley_terry(&[]), Err(BradleyTerryError::Empty));
        assert_eq!(
            bradley_terry(&matrix(&[&[0.0, 1.0], &[1.0]])),
            Err(BradleyTerryError::NotSquare {
                row: 1,
                len: 1,
                players: 2
            })
        );
        assert_eq!(
            bradley_terry(&matrix(&[&[0.0, -1.0], &[1.0, 0.0]])),
            Err(BradleyTerryError::BadCount {
                winner: 0,
                loser: 1,
                value: -1.0
            })
        );
        assert!(matches!(
            bradley_terry(&matrix(&[&[0.0, 1.0], &[f64::NAN, 0.0]])),
            Err(BradleyTerryError::BadCount {
                winner: 1,
                loser: 0,
                ..
            })
        ));
        assert_eq!(
            bradley_terry(&matrix(&[&[1.0, 1.0], &[1.0, 0.0]])),
            Err(BradleyTerryError::AgainstItself {
                player: 0,
                value: 1.0
            })
        );
    }

    #[test]
    fn results_without_a_finite_estimate_are_refused() {
        assert_eq!(
            bradley_terry(&matrix(&[&[0.0, 0.0], &[2.0, 0.0]])),
            Err(BradleyTerryError::NoWins { player: 0 })
        );
        assert_eq!(
            bradley_terry(&matrix(&[
                &[0.0, 1.0, 1.0],
                &[0.0, 0.0, 1.0],
                &[0.0, 1.0, 0.0]
            ])),
            Err(BradleyTerryError::NoLosses { player: 0 })
        );
        // Two pairs that never met.
        let apart = [
            &[0.0, 1.0, 0.0, 0.0][..],
            &[1.0, 0.0, 0.0, 0.0],
            &[0.0, 0.0, 0.0, 1.0],
            &[0.0, 0.0, 1.0, 0.0],
        ];
        assert_eq!(
            bradley_terry(&matrix(&apart)),
            Err(BradleyTerryError::NotConnected {
                players: vec![2, 3]
            })
        );
        // The same two pairs, where one game across them was won by the pair of player 0,
        // or by the other pair: every player won and lost, but the winning pair never lost
        // across.
        let mut first_pair_won = matrix(&apart);
        first_pair_won[0][2] = 1.0;
        assert_eq!(
            bradley_terry(&first_pair_won),
            Err(BradleyTerryError::Unbeaten {
                players: vec![0, 1]
            })
        );
        let mut second_pair_won = matrix(&apart);
        second_pair_won[2][0] = 1.0;
        assert_eq!(
            bradley_terry(&second_pair_won),
            Err(BradleyTerryError::Unbeaten {
                players: vec![2, 3]
            })
        );
    }
}
