//! The `choice` component and `turns` in scenario files: bad fields exit 2 naming the
//! field; advice for valid but odd settings.

use crate::common::root;

fn with_round(
    edit: impl FnOnce(&mut serde_json::Value),
) -> (tempfile::TempDir, std::path::PathBuf) {
    let mut s: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("scenarios/prisoners_dilemma.json")).unwrap(),
    )
    .unwrap();
    edit(&mut s["sop"]["states"]["round"]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("game.json");
    std::fs::write(&path, serde_json::to_string_pretty(&s).unwrap()).unwrap();
    (dir, path)
}

fn validate(path: &std::path::Path) -> (Option<i32>, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sopsim"))
        .args(["validate", path.to_str().unwrap()])
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_choices_name_the_field() {
    let cases: &[(serde_json::Value, &str)] = &[
        (
            serde_json::json!({ "values": ["COOPERATE"] }),
            "choice.values: a choice needs at least two values",
        ),
        (
            serde_json::json!({ "values": ["A", "B", "A"] }),
            "choice.values[2]: \"A\" is listed twice",
        ),
        (
            serde_json::json!({ "values": ["A", " "] }),
            "choice.values[1]: an option cannot be empty",
        ),
        (
            serde_json::json!({ "range": [10, 0, 1] }),
            "choice.range: [10, 0, 1] is empty or inverted",
        ),
        (
            serde_json::json!({ "range": [0, 10, 3] }),
            "choice.range: the step 3 does not divide the range 0..10",
        ),
        (
            serde_json::json!({ "range": [0, 10, 0] }),
            "choice.range: the step 0 must be positive",
        ),
        (
            serde_json::json!({ "range": [0, 1000000, 1] }),
            "choice.range: 1000001 options; at most 1000",
        ),
        (
            serde_json::json!({ "values": ["A", "B"], "range": [0, 1, 1] }),
            "choice: give values or range, not both",
        ),
        (serde_json::json!({}), "choice: give the options"),
        (
            serde_json::json!({ "values": ["A", "B"], "after": "before" }),
            "choice.after",
        ),
    ];
    for (choice, expected) in cases {
        let (_dir, path) =
            with_round(|round| round["components"]["Player A"]["choice"] = choice.clone());
        let (code, err) = validate(&path);
        assert_eq!(code, Some(2), "{choice}: {err}");
        assert!(
            err.contains(&format!(
                "sop.states.round.components[\"Player A\"].{expected}"
            )),
            "{choice}: missing {expected:?} in:\n{err}"
        );
    }
}

#[test]
fn turns_must_be_sequential_or_simultaneous() {
    let (_dir, path) = with_round(|round| round["turns"] = "parallel".into());
    let (code, err) = validate(&path);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("sop.states.round.turns"), "{err}");
}

#[test]
fn a_speaker_rule_in_a_simultaneous_state_is_ignored_with_a_note() {
    let (_dir, path) = with_round(|round| {
        round["speaker"] = serde_json::json!({ "rule": "random" });
    });
    let (code, err) = validate(&path);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("note: sop.states.round.speaker: ignored: in a simultaneous state every role acts in each round"), "{err}");
}

#[test]
fn a_simultaneous_state_with_one_role_is_allowed_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("solo.json");
    let doc = serde_json::json!({
        "name": "solo",
        "agents": { "Alice": { "roles": { "round": "Player A" } } },
        "sop": { "start": "round", "states": { "round": {
            "roles": ["Player A"],
            "turns": "simultaneous",
            "transition": { "max_turns": 3 },
            "next": ["end"]
        } } }
    });
    std::fs::write(&path, doc.to_string()).unwrap();
    let (code, err) = validate(&path);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains(
            "note: sop.states.round.turns: a simultaneous state with one player is sequential in effect"
        ),
        "{err}"
    );
    assert!(
        !err.contains("transition.max_turns"),
        "with one role every count is a whole number of rounds: {err}"
    );
}

#[test]
fn keywords_in_a_simultaneous_state_say_which_message_of_the_round_wins() {
    let (_dir, path) = with_round(|round| {
        round["transition"]["keywords"] = serde_json::json!([{ "keyword": "DEFECT", "to": "end" }]);
    });
    let (code, err) = validate(&path);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("note: sop.states.round.transition.keywords: checked once per round, against all of its messages: the first message in the order of roles that contains a keyword decides"),
        "{err}"
    );
}

#[test]
fn a_max_turns_inside_a_round_gets_a_note_with_the_turns_it_means() {
    let (_dir, path) = with_round(|round| round["transition"]["max_turns"] = 3.into());
    let (code, err) = validate(&path);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("note: sop.states.round.transition.max_turns: 3 is not a whole number of rounds: each round counts 2 turns (one per player), so the state leaves after 2 round(s), at 4 turns (max_rounds counts rounds)"),
        "{err}"
    );
    // With an opening (one turn), 3 turns is the opening and one round: no note.
    let (_dir, path) = with_round(|round| {
        round["transition"]["max_turns"] = 3.into();
        round["begin_query"] = "Round begins.".into();
    });
    let (code, err) = validate(&path);
    assert_eq!(code, Some(0), "{err}");
    assert!(!err.contains("transition.max_turns"), "{err}");
    // The examples' rounds are whole.
    let (code, err) = validate(&root().join("scenarios/prisoners_dilemma.json"));
    assert_eq!(code, Some(0), "{err}");
    assert!(!err.contains("transition.max_turns"), "{err}");
}

/// The prisoner's dilemma with `script` in place of its own, run scripted into a folder
/// of its own: the exit code, stderr and the transcript's decisions.
fn scripted_game(script: serde_json::Value) -> (Option<i32>, String, Vec<serde_json::Value>) {
    let mut s: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("scenarios/prisoners_dilemma.json")).unwrap(),
    )
    .unwrap();
    s["script"] = script;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("game.json");
    std::fs::write(&path, serde_json::to_string_pretty(&s).unwrap()).unwrap();
    let out = dir.path().join("run");
    let done = std::process::Command::new(env!("CARGO_BIN_EXE_sopsim"))
        .args(["run", path.to_str().unwrap(), "-q", "--llm", "scripted"])
        .args(["--embedder", "hash", "--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    let decisions = std::fs::read_to_string(out.join("transcript.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|m| m["kind"] == "reply")
        .map(|m| m["decision"].clone())
        .collect();
    (
        done.status.code(),
        String::from_utf8_lossy(&done.stderr).into_owned(),
        decisions,
    )
}

#[test]
fn a_scripted_reply_that_names_no_option_leaves_the_choice_to_a_seeded_draw() {
    let (code, err, decisions) = scripted_game(serde_json::json!({
        "agents": { "Alice": ["All good."], "Bob": ["Let us see."] }
    }));
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(decisions.len(), 10);
    for d in &decisions {
        assert!(
            d["value"] == "COOPERATE" || d["value"] == "DEFECT",
            "every reply carries its move: {decisions:?}"
        );
        assert_eq!(d["probabilities"]["COOPERATE"], 0.5, "{d}");
    }
}

#[test]
fn a_scripted_choices_answer_that_names_no_option_stops_the_run_naming_it() {
    let (code, err, _) = scripted_game(serde_json::json!({
        "choices": { "Bob": ["COOPERATE", "maybe"] }
    }));
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("script.choices.Bob") && err.contains("\"maybe\""),
        "{err}"
    );
}

#[test]
fn a_state_may_name_itself_after_its_turns_as_its_keywords_may() {
    let (_dir, path) = with_round(|round| {
        round["next"] = serde_json::json!(["end"]);
        round["transition"]["keywords"] =
            serde_json::json!([{ "keyword": "again", "to": "round" }]);
    });
    let (code, err) = validate(&path);
    assert_eq!(code, Some(0), "{err}");
}

#[test]
fn a_scripted_draw_keeps_the_move_it_drew_when_another_alternative_names_none() {
    let (code, err, decisions) = scripted_game(serde_json::json!({
        "agents": {
            "Alice": ["Round {n}: I {one_of:COOPERATE|COOPERATE|COOPERATE|pass}."],
            "Bob": ["I DEFECT."]
        }
    }));
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(decisions.len(), 10);
    // Alice's line names COOPERATE when it draws it (then the move is hers, with the
    // probability of her alternatives that name a move), and nothing when it draws
    // "pass" (then the move is a seeded draw).
    let drawn: Vec<_> = decisions
        .iter()
        .filter(|d| d["probabilities"]["COOPERATE"] == 1.0)
        .collect();
    assert!(!drawn.is_empty(), "{decisions:?}");
    assert!(drawn.iter().all(|d| d["value"] == "COOPERATE"), "{drawn:?}");
}

#[test]
fn judge_labels_must_be_one_per_choice() {
    let (_dir, path) = with_round(|round| {
        round["transition"] = serde_json::json!({
            "judge": { "labels": ["0", "1"] },
            "max_visits": 5
        });
    });
    let (code, err) = validate(&path);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(
            "sop.states.round.transition.judge.labels: 2 label(s) for 3 choices: staying, then each of next (round, end)"
        ),
        "{err}"
    );
}
