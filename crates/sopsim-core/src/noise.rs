//! Trembles: an agent's move flipped to another option with a probability, as
//! tournaments add noise to strategies and models alike (Axelrod's noisy tournaments).
//! The draw comes from the run's seed, the agent and the turn, so a noisy run replays
//! exactly and another agent's tremble does not move this one's.

use rand::{Rng, SeedableRng};

/// The move `chosen` becomes: itself, or with probability `p` another of `options`
/// (the other one of two; one of the others, uniformly, of more).
pub fn tremble(
    seed: u64,
    agent: &str,
    turn: u64,
    p: f64,
    options: &[String],
    chosen: &str,
) -> String {
    let others: Vec<&String> = options.iter().filter(|o| o.as_str() != chosen).collect();
    if p <= 0.0 || others.is_empty() {
        return chosen.to_string();
    }
    let mut hasher = xxhash_rust::xxh3::Xxh3::with_seed(seed);
    hasher.update(b"tremble\0");
    hasher.update(agent.as_bytes());
    hasher.update(&turn.to_le_bytes());
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(hasher.digest());
    if rng.random::<f64>() >= p {
        return chosen.to_string();
    }
    others[rng.random_range(0..others.len())].clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_move_flips_as_often_as_its_noise_says_and_replays() {
        let options = ["C".to_string(), "D".to_string()];
        let flips = (0..10_000)
            .filter(|t| tremble(1, "Ann", *t, 0.1, &options, "C") == "D")
            .count();
        assert!((900..1100).contains(&flips), "{flips}");
        assert_eq!(
            tremble(1, "Ann", 7, 0.5, &options, "C"),
            tremble(1, "Ann", 7, 0.5, &options, "C")
        );
        assert!((0..100).all(|t| tremble(1, "Ann", t, 0.0, &options, "C") == "C"));
        assert!((0..100).all(|t| tremble(1, "Ann", t, 1.0, &options, "C") == "D"));
    }
}
