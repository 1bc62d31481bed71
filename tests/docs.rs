//! The README's scenario example is a real scenario: it validates and runs to its end.

mod common;

use common::*;

#[test]
fn the_readme_example_runs() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let start = readme.find("```json\n").expect("a JSON example") + "```json\n".len();
    let end = start + readme[start..].find("```").unwrap();
    let doc = sopsim::scenario::parse_json(std::path::Path::new("README.md"), &readme[start..end])
        .unwrap();
    let scenario = sopsim::scenario::from_document(std::path::Path::new("README.md"), doc).unwrap();
    let (outcome, _) = run_recorded(&scenario, None, 0, &[]);
    assert_eq!(outcome.summary.ended_by.as_str(), "end");
    assert_eq!(
        outcome.transcript.last().unwrap().content,
        "Today: review the parser first. DONE."
    );
}

#[test]
fn the_readme_outcomes_example_validates_in_the_prisoners_dilemma() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let start = readme
        .find("```json\n\"outcomes\"")
        .expect("the outcomes example")
        + "```json\n".len();
    let end = start + readme[start..].find("```").unwrap();
    let snippet: serde_json::Value =
        serde_json::from_str(&format!("{{{}}}", &readme[start..end])).unwrap();
    let file = root().join("scenarios/prisoners_dilemma.json");
    let mut game: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    game["outcomes"] = snippet["outcomes"].clone();
    let doc = sopsim::scenario::parse_json(&file, &game.to_string()).unwrap();
    let scenario = sopsim::scenario::from_document(&file, doc).unwrap();
    assert!(scenario.outcomes.unwrap().scores.contains_key("promises"));
}
