//! Figures read from runs written by hand.

use super::*;

fn prisoners_table() -> IndexMap<String, Vec<f64>> {
    [
        ("COOPERATE,COOPERATE", [3.0, 3.0]),
        ("COOPERATE,DEFECT", [0.0, 5.0]),
        ("DEFECT,COOPERATE", [5.0, 0.0]),
        ("DEFECT,DEFECT", [1.0, 1.0]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_vec()))
    .collect()
}

fn moves(choices: &[&str]) -> Vec<Option<Move>> {
    choices
        .iter()
        .map(|c| (!c.is_empty()).then(|| Move::Choice(c.to_string())))
        .collect()
}

#[test]
fn pairwise_payoffs_sum_each_members_games_with_its_neighbours() {
    // A ring of four: 0–1–2–3–0; member 2 defects against two cooperators.
    let members: Vec<_> = (0..4).map(|i| Some((0, i))).collect();
    let ring = vec![Some(vec![vec![1, 3], vec![0, 2], vec![1, 3], vec![0, 2]])];
    let joint = moves(&["COOPERATE", "COOPERATE", "DEFECT", "COOPERATE"]);
    let ring = Pairs::new(&members, ring);
    let complete = Pairs::new(&members, vec![None]);
    let paid = ring.payoffs(&prisoners_table(), &joint).unwrap();
    assert_eq!(paid, [6.0, 3.0, 10.0, 3.0]);
    // Complete: everyone plays the three others.
    let paid = complete.payoffs(&prisoners_table(), &joint).unwrap();
    assert_eq!(paid, [6.0, 6.0, 15.0, 6.0]);
    // An unreadable decision: its pairs earn nothing, on either side.
    let joint = moves(&["COOPERATE", "", "DEFECT", "COOPERATE"]);
    let paid = ring.payoffs(&prisoners_table(), &joint).unwrap();
    assert_eq!(paid, [3.0, 0.0, 5.0, 3.0]);
}
