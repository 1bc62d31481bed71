//! Golden transcripts of the example scenarios with the scripted backend: the
//! simulator's routing, openings, transitions and human turns, reviewable as text.
//! Rerun with `UPDATE_GOLDEN=1` to accept an intended change.

use crate::common::*;

#[test]
fn debate() {
    let (outcome, _) = run_recorded(&example("debate"), None, 0, &[]);
    assert_eq!(outcome.summary.ended_by.as_str(), "end");
    assert_golden("debate.jsonl", &jsonl(&outcome));
}

#[test]
fn design_review() {
    let (outcome, _) = run_recorded(&example("design_review"), None, 3, &[]);
    assert_eq!(outcome.summary.ended_by.as_str(), "end");
    assert_golden("design_review.jsonl", &jsonl(&outcome));
}

#[test]
fn customer_service_with_a_human() {
    let lines = [
        "My internet keeps dropping",
        "All the lights are orange",
        "Green now, thanks",
        "That is all, goodbye",
    ];
    let (outcome, _) = run_recorded(&example("customer_service"), None, 0, &lines);
    assert_eq!(outcome.summary.ended_by.as_str(), "end");
    assert_golden("customer_service.jsonl", &jsonl(&outcome));
}

#[test]
fn a_seeded_run_is_reproducible() {
    let a = run_recorded(&example("design_review"), None, 11, &[]).0;
    let b = run_recorded(&example("design_review"), None, 11, &[]).0;
    assert_eq!(jsonl(&a), jsonl(&b));
    let distinct: std::collections::HashSet<String> = (0..8)
        .map(|seed| jsonl(&run_recorded(&example("design_review"), None, seed, &[]).0))
        .collect();
    assert!(
        distinct.len() > 1,
        "the random speaker rule follows the seed"
    );
}

#[test]
fn prisoners_dilemma_in_simultaneous_rounds() {
    let (outcome, _) = run_recorded(&example("prisoners_dilemma"), None, 0, &[]);
    assert_eq!(outcome.summary.ended_by.as_str(), "end");
    assert_golden("prisoners_dilemma.jsonl", &jsonl(&outcome));
}

#[test]
fn public_goods_in_simultaneous_rounds() {
    let (outcome, _) = run_recorded(&example("public_goods"), None, 0, &[]);
    assert_eq!(outcome.summary.ended_by.as_str(), "end");
    assert_golden("public_goods.jsonl", &jsonl(&outcome));
}
