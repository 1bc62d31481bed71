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
