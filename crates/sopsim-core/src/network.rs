//! Who is linked to whom in a population: each member's neighbours, built once per run
//! from the population's `network` and the run's seed. Pure. Every random kind
//! (Erdős–Rényi, Barabási–Albert, Watts–Strogatz) draws from one seeded ChaCha
//! stream, so a network is the same on every platform and in every version that keeps
//! these algorithms.

use std::collections::BTreeSet;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use serde::Serialize;

use crate::scenario::{Mode, Neighbourhood, Network, PopulationSpec, Scenario};

/// Each member's neighbours (member numbers from 0), sorted; `None` for a complete
/// network, where everyone sees everyone and no list is kept.
pub type Neighbours = Option<Vec<Vec<u32>>>;

/// A network that cannot be built: its parameters fail validation's check for this
/// many members.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the {kind} network cannot link {count} members with these parameters")]
pub struct NetworkError {
    /// The network's kind, as the scenario names it (`ring`, `small_world`…).
    pub kind: &'static str,
    /// How many members the population has.
    pub count: usize,
}

/// The neighbours of every member of `population`, drawn with `seed`.
pub fn neighbours(population: &PopulationSpec, seed: u64) -> Result<Neighbours, NetworkError> {
    let n = population.count;
    if population.network.check(n).is_some() {
        return Err(NetworkError {
            kind: population.network.kind(),
            count: n,
        });
    }
    let edges: Vec<(u32, u32)> = match population.network {
        Network::Complete => return Ok(None),
        Network::Groups { size } => groups(n, size),
        Network::Ring { k } => ring(n, k),
        Network::Lattice {
            width,
            neighbourhood,
        } => torus(n, width, neighbourhood),
        Network::SmallWorld { k, p } => rewired(ring(n, k), n, p, seed),
        Network::Random { p } => random(n, p, seed),
        Network::ScaleFree { m } => scale_free(n, m, seed),
        Network::File { .. } => population.edges.clone(),
    };
    Ok(Some(lists(n, &edges)))
}

/// Every population's neighbours for a run with `seed`, in order; each population
/// draws from a stream of the seed of its own.
pub fn draw_all<'a>(
    populations: impl IntoIterator<Item = &'a PopulationSpec>,
    seed: u64,
) -> Result<Vec<Neighbours>, NetworkError> {
    populations
        .into_iter()
        .enumerate()
        .map(|(i, p)| neighbours(p, seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)))
        .collect()
}

/// `network.json`: the networks of one run, per population its kind, members in order
/// and links (pairs of member numbers, each once; `None` for a complete network).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NetworkRecord {
    /// The run's mode: `cooperative` or `competitive`.
    pub mode: &'static str,
    /// The run's seed, which the random networks were drawn from.
    pub seed: u64,
    /// Each population's network, in the scenario's order.
    pub populations: Vec<PopulationNetwork>,
}

/// One population's network in [`NetworkRecord`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PopulationNetwork {
    /// The population's name in the scenario.
    pub name: String,
    /// The network's kind, as the scenario names it (`complete`, `ring`, `small_world`…).
    pub kind: &'static str,
    /// The population's members' agent names, in order of member number.
    pub members: Vec<String>,
    /// Each link once, as two member numbers, lower first; `None` for a complete network.
    pub links: Option<Vec<[u32; 2]>>,
}

/// The networks of a run in `mode` with `seed` (`drawn` from it by [`draw_all`]), as
/// `network.json` keeps them. `None` for a scenario without populations.
pub fn document(
    scenario: &Scenario,
    mode: Mode,
    seed: u64,
    drawn: &[Neighbours],
) -> Option<NetworkRecord> {
    if scenario.populations.is_empty() {
        return None;
    }
    let mut members: Vec<Vec<String>> = vec![Vec::new(); scenario.populations.len()];
    for (name, agent) in &scenario.agents {
        if let Some(m) = &agent.member {
            if let Some(i) = scenario.populations.get_index_of(&m.population) {
                members[i].push(name.clone());
            }
        }
    }
    let populations = scenario
        .populations
        .iter()
        .zip(drawn)
        .zip(members)
        .map(|(((key, p), lists), members)| {
            let links = lists.as_ref().map(|lists| {
                lists
                    .iter()
                    .enumerate()
                    .flat_map(|(a, l)| {
                        l.iter()
                            .filter(move |b| **b as usize > a)
                            .map(move |b| [a as u32, *b])
                    })
                    .collect::<Vec<_>>()
            });
            PopulationNetwork {
                name: key.clone(),
                kind: p.network.kind(),
                members,
                links,
            }
        })
        .collect();
    Some(NetworkRecord {
        mode: mode.as_str(),
        seed,
        populations,
    })
}

/// Sorted neighbour lists from undirected edges, without self-links or repeats.
fn lists(n: usize, edges: &[(u32, u32)]) -> Vec<Vec<u32>> {
    let mut out = vec![Vec::new(); n];
    for &(a, b) in edges {
        if a != b && (a as usize) < n && (b as usize) < n {
            out[a as usize].push(b);
            out[b as usize].push(a);
        }
    }
    for list in &mut out {
        list.sort_unstable();
        list.dedup();
    }
    out
}

fn groups(n: usize, size: usize) -> Vec<(u32, u32)> {
    let mut edges = Vec::new();
    for start in (0..n).step_by(size.max(1)) {
        let end = (start + size).min(n);
        for a in start..end {
            for b in a + 1..end {
                edges.push((a as u32, b as u32));
            }
        }
    }
    edges
}

/// Each member linked to the `k / 2` next along the ring (and so to the `k / 2` before).
fn ring(n: usize, k: usize) -> Vec<(u32, u32)> {
    let mut edges = Vec::with_capacity(n * k / 2);
    for j in 1..=k / 2 {
        for a in 0..n {
            edges.push((a as u32, ((a + j) % n) as u32));
        }
    }
    edges
}

fn torus(n: usize, width: usize, hood: Neighbourhood) -> Vec<(u32, u32)> {
    let height = n / width.max(1);
    // Each link once: right and down, plus both downward diagonals for Moore.
    let offsets: &[(isize, isize)] = match hood {
        Neighbourhood::VonNeumann => &[(1, 0), (0, 1)],
        Neighbourhood::Moore => &[(1, 0), (0, 1), (1, 1), (-1, 1)],
    };
    let mut edges = Vec::with_capacity(n * offsets.len());
    for y in 0..height {
        for x in 0..width {
            for &(dx, dy) in offsets {
                let nx = (x as isize + dx).rem_euclid(width as isize) as usize;
                let ny = (y as isize + dy).rem_euclid(height as isize) as usize;
                edges.push(((y * width + x) as u32, (ny * width + nx) as u32));
            }
        }
    }
    edges
}

/// Watts–Strogatz: each ring link `(a, b)` is moved, with probability `p`, to `(a, c)`
/// for a member `c` drawn uniformly among those `a` is not yet linked to.
fn rewired(ring: Vec<(u32, u32)>, n: usize, p: f64, seed: u64) -> Vec<(u32, u32)> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut links: Vec<BTreeSet<u32>> = vec![BTreeSet::new(); n];
    for &(a, b) in &ring {
        links[a as usize].insert(b);
        links[b as usize].insert(a);
    }
    for (a, b) in ring {
        if !rng.random_bool(p) || links[a as usize].len() + 1 >= n {
            continue;
        }
        let c = loop {
            let c = rng.random_range(0..n as u32);
            if c != a && !links[a as usize].contains(&c) {
                break c;
            }
        };
        links[a as usize].remove(&b);
        links[b as usize].remove(&a);
        links[a as usize].insert(c);
        links[c as usize].insert(a);
    }
    links
        .iter()
        .enumerate()
        .flat_map(|(a, set)| set.iter().map(move |&b| (a as u32, b)))
        .filter(|(a, b)| a < b)
        .collect()
}

/// Erdős–Rényi G(n, p): each pair linked with probability `p`. The gaps between
/// linked pairs, in the order (1, 0), (2, 0), (2, 1), (3, 0)…, are drawn from their
/// geometric distribution (Batagelj and Brandes, 2005), so the cost follows the links
/// drawn rather than the n² pairs.
fn random(n: usize, p: f64, seed: u64) -> Vec<(u32, u32)> {
    if n < 2 || p <= 0.0 {
        return Vec::new();
    }
    if p >= 1.0 {
        return (0..n)
            .flat_map(|b| (0..b).map(move |a| (a as u32, b as u32)))
            .collect();
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let log_miss = (1.0 - p).ln();
    let mut edges = Vec::new();
    let (mut v, mut w) = (1usize, -1i64);
    while v < n {
        let r: f64 = rng.random();
        // 1 - r lies in (0, 1]: its logarithm is finite, and so is the gap.
        let gap = ((1.0 - r).ln() / log_miss)
            .floor()
            .min(i64::MAX as f64 / 2.0) as i64;
        w = w.saturating_add(1).saturating_add(gap);
        while v < n && w >= v as i64 {
            w -= v as i64;
            v += 1;
        }
        if v < n {
            edges.push((w as u32, v as u32));
        }
    }
    edges
}

/// Barabási–Albert: a star of `m + 1` members to start, then each new member links to
/// `m` distinct earlier ones, each drawn with probability in proportion to its degree.
fn scale_free(n: usize, m: usize, seed: u64) -> Vec<(u32, u32)> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut edges: Vec<(u32, u32)> = (1..=m.min(n.saturating_sub(1)))
        .map(|b| (0, b as u32))
        .collect();
    // Every member once per link it has: a uniform draw from this list is a draw by
    // degree.
    let mut ends: Vec<u32> = edges.iter().flat_map(|&(a, b)| [a, b]).collect();
    let mut targets = BTreeSet::new();
    for v in m + 1..n {
        targets.clear();
        while targets.len() < m {
            targets.insert(ends[rng.random_range(0..ends.len())]);
        }
        for &t in &targets {
            edges.push((t, v as u32));
            ends.extend([t, v as u32]);
        }
    }
    edges
}

#[cfg(test)]
mod tests {
    use super::*;

    fn population(network: Network, count: usize) -> PopulationSpec {
        let mut p: PopulationSpec = serde_json::from_value(serde_json::json!({
            "name": "P{i}", "count": count, "roles": {"s": "R"}
        }))
        .unwrap();
        p.network = network;
        p
    }

    fn build(network: Network, count: usize, seed: u64) -> Vec<Vec<u32>> {
        neighbours(&population(network, count), seed)
            .unwrap()
            .unwrap()
    }

    #[test]
    fn a_ring_of_six_links_each_member_to_the_two_beside_it() {
        let ring = build(Network::Ring { k: 2 }, 6, 0);
        assert_eq!(ring[0], [1, 5]);
        assert_eq!(ring[3], [2, 4]);
        let wide = build(Network::Ring { k: 4 }, 6, 0);
        assert_eq!(wide[0], [1, 2, 4, 5]);
    }

    #[test]
    fn a_moore_torus_gives_everyone_eight_neighbours_across_the_edges() {
        let t = build(
            Network::Lattice {
                width: 4,
                neighbourhood: Neighbourhood::Moore,
            },
            16,
            0,
        );
        assert!(t.iter().all(|l| l.len() == 8));
        // The corner 0 (x 0, y 0) wraps to x 3 and y 3.
        assert_eq!(t[0], [1, 3, 4, 5, 7, 12, 13, 15]);
        let vn = build(
            Network::Lattice {
                width: 4,
                neighbourhood: Neighbourhood::VonNeumann,
            },
            16,
            0,
        );
        assert_eq!(vn[0], [1, 3, 4, 12]);
    }

    #[test]
    fn groups_see_only_their_own_members() {
        let g = build(Network::Groups { size: 3 }, 7, 0);
        assert_eq!(g[0], [1, 2]);
        assert_eq!(g[4], [3, 5]);
        assert_eq!(g[6], Vec::<u32>::new());
    }

    #[test]
    fn random_networks_follow_the_seed_and_keep_their_degree() {
        let sw = |seed| build(Network::SmallWorld { k: 4, p: 0.2 }, 100, seed);
        assert_eq!(sw(7), sw(7));
        assert_ne!(sw(7), sw(8));
        let links: usize = sw(7).iter().map(Vec::len).sum();
        assert_eq!(
            links,
            100 * 4,
            "rewiring moves links, it does not add or drop them"
        );
        let er = build(Network::Random { p: 0.1 }, 200, 3);
        let mean = er.iter().map(Vec::len).sum::<usize>() as f64 / 200.0;
        assert!((mean - 19.9).abs() < 3.0, "mean degree {mean}");
        let ba = build(Network::ScaleFree { m: 2 }, 300, 3);
        assert!(ba.iter().all(|l| !l.is_empty()));
        let max = ba.iter().map(Vec::len).max().unwrap();
        assert!(max > 15, "a hub forms: max degree {max}");
        assert_eq!(
            neighbours(&population(Network::Complete, 5), 0).unwrap(),
            None
        );
    }

    #[test]
    fn erdos_renyi_links_each_pair_with_its_probability() {
        let links = |p, seed| -> usize {
            build(Network::Random { p }, 2_000, seed)
                .iter()
                .map(Vec::len)
                .sum::<usize>()
                / 2
        };
        // 1,999,000 pairs at 1%: 19,990 links expected, with a standard deviation of 141.
        let drawn = links(0.01, 5);
        assert!(drawn.abs_diff(19_990) < 700, "{drawn} links");
        assert_ne!(links(0.01, 5), links(0.01, 6));
        assert_eq!(links(0.0, 5), 0);
        assert_eq!(links(1.0, 5), 2_000 * 1_999 / 2);
    }

    #[test]
    fn barabasi_albert_adds_m_distinct_links_per_member() {
        let (n, m) = (500, 3);
        let ba = build(Network::ScaleFree { m }, n, 9);
        let links: usize = ba.iter().map(Vec::len).sum::<usize>() / 2;
        assert_eq!(
            links,
            m + (n - m - 1) * m,
            "a star of m links, then m per member"
        );
        assert!(ba[m + 1..].iter().all(|l| l.len() >= m));
        let star = build(Network::ScaleFree { m: 4 }, 5, 0);
        assert_eq!(star[0], [1, 2, 3, 4]);
    }
}
