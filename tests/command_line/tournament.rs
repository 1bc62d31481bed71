//! Tournaments through the command line: the shipped Axelrod tournament (six built-in
//! strategies, 200 rounds of the prisoner's dilemma) ranks and scores exactly as the
//! `axelrod` package's round robin does, its TrueSkill ratings are the `trueskill`
//! package's on the same games, its report is the same bytes whatever `--jobs` was, a
//! second invocation runs nothing again, and bad rosters are refused by field.

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use crate::common::root;

fn sopsim(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sopsim"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn tournament(roster: &str, out: &Path, jobs: &str) -> (i32, String, String) {
    sopsim(&[
        "tournament",
        root()
            .join("scenarios/tournaments/ipd_200.json")
            .to_str()
            .unwrap(),
        "--players",
        root().join(roster).to_str().unwrap(),
        "--jobs",
        jobs,
        "-q",
        "--out",
        out.to_str().unwrap(),
    ])
}

#[test]
fn axelrods_tournament_ranks_and_scores_as_the_axelrod_package_does() {
    let dir = tempfile::tempdir().unwrap();
    let (one, four) = (dir.path().join("one"), dir.path().join("four"));
    let (code, said, err) = tournament("scenarios/tournaments/axelrod.json", &one, "1");
    assert_eq!(code, 0, "{err}");
    assert!(
        said.contains("15 games (15 run this time, 0 already finished)"),
        "{said}"
    );
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(one.join("report.json")).unwrap()).unwrap();
    // axelrod 4.14.0, Game(r=3, s=0, t=5, p=1), 200 turns: `ranked_names` and each
    // strategy's total over its five opponents (its `scores`, self-play left out).
    let expected = [
        ("always_defect", 3004.0),
        ("grim_trigger", 2991.0),
        ("tit_for_tat", 2496.0),
        ("alternate", 2307.0),
        ("always_cooperate", 2097.0),
        ("defect_once", 1509.0),
    ];
    let ranking: Vec<&str> = report["ranking"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(ranking, expected.map(|(p, _)| p));
    for (player, total) in expected {
        let r = &report["ratings"][player];
        assert_eq!(r["games"], 5);
        let per_game = r["mean_payoff"]["value"].as_f64().unwrap();
        let per_round = r["mean_payoff_per_round"]["value"].as_f64().unwrap();
        assert!(
            (per_game * 5.0 - total).abs() < 1e-9,
            "{player}: {per_game}"
        );
        assert!(
            (per_round - total / 1000.0).abs() < 1e-12,
            "{player}: {per_round}"
        );
    }
    // The `trueskill` package (0.4.5, defaults) on the same fifteen games in the same
    // order, each ranked by payoff.
    for (player, mu, sigma) in [
        ("always_cooperate", 19.87987326500537, 4.521542677648049),
        ("always_defect", 36.567665924660254, 4.955128445513426),
        ("tit_for_tat", 21.690221598747176, 3.8738436051259457),
        ("grim_trigger", 26.54609605378542, 3.781491548385883),
        ("alternate", 26.03793268697393, 4.181293685940389),
        ("defect_once", 20.641603717053385, 3.9108239006509122),
    ] {
        let t = &report["ratings"][player]["trueskill"];
        assert!(
            (t["mu"].as_f64().unwrap() - mu).abs() < 1e-9,
            "{player}: {t}"
        );
        assert!(
            (t["sigma"].as_f64().unwrap() - sigma).abs() < 1e-9,
            "{player}: {t}"
        );
    }
    // Always defecting never loses a game: no finite Bradley–Terry strength exists.
    assert!(report["bradley_terry_note"]
        .as_str()
        .unwrap()
        .contains("lost no game"));
    assert_eq!(
        report["matrix"][1][0], 5.0,
        "always_defect against always_cooperate"
    );

    let (code, _, err) = tournament("scenarios/tournaments/axelrod.json", &four, "4");
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        std::fs::read(one.join("report.json")).unwrap(),
        std::fs::read(four.join("report.json")).unwrap(),
        "report.json depends on --jobs"
    );
    let (code, said, err) = tournament("scenarios/tournaments/axelrod.json", &one, "2");
    assert_eq!(code, 0, "{err}");
    assert!(
        said.contains("(0 run this time, 15 already finished)"),
        "{said}"
    );
    for plot in [
        "payoff_matrix.svg",
        "payoff_matrix.png",
        "ranking.svg",
        "ranking.png",
    ] {
        assert!(one.join("plots").join(plot).is_file(), "{plot}");
    }
}

#[test]
fn noise_flips_moves_and_replays_and_a_game_is_resumed_and_interviewed_from_anywhere() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    for out in [&a, &b] {
        let (code, _, err) = tournament("scenarios/tournaments/axelrod_noisy.json", out, "3");
        assert_eq!(code, 0, "{err}");
    }
    assert_eq!(
        std::fs::read(a.join("report.json")).unwrap(),
        std::fs::read(b.join("report.json")).unwrap()
    );
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(a.join("report.json")).unwrap()).unwrap();
    // Without noise always_cooperate earns exactly 3 against tit_for_tat; with it, not.
    let matrix = &report["matrix"];
    assert_ne!(matrix[0][2].as_f64().unwrap(), 3.0, "{matrix}");

    // The game's path spelt another way, from another folder, resumes the same games.
    let again = Command::new(env!("CARGO_BIN_EXE_sopsim"))
        .current_dir(root().join("scenarios"))
        .args([
            "tournament",
            "tournaments/../tournaments/ipd_200.json",
            "--players",
        ])
        .arg(root().join("scenarios/tournaments/axelrod_noisy.json"))
        .args(["-q", "--out"])
        .arg(&a)
        .output()
        .unwrap();
    assert!(again.status.success(), "{again:?}");

    // A game's run plays the roster's document, not the game file: it is interviewed
    // as any run is, from the game's scenario written beside its runs.
    let game = a.join("runs/always_cooperate-vs-tit_for_tat");
    assert!(game.join("scenario.json").is_file());
    let run = game.join("cooperative/seed-0");
    let (code, said, err) = sopsim(&[
        "interview",
        run.to_str().unwrap(),
        "--agent",
        "Column",
        "--at",
        "3",
        "--llm",
        "scripted",
        "What did the other player choose?",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(said.starts_with("Column: "), "{said}");
}

#[test]
fn bad_rosters_and_games_are_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let roster = dir.path().join("roster.json");
    let game = root().join("scenarios/tournaments/ipd_10.json");
    for (doc, says) in [
        (
            json!({"players": {"m": {"llm": {"backend": "telepathy", "model": "x"}}}}),
            "players.m.llm.backend",
        ),
        (
            json!({"seats": 3, "players": {"a": {"strategy": {"rule": "tit_for_tat"}},
                "b": {"strategy": {"rule": "always_defect"}}}}),
            "seats: the roster is for games of 3 players",
        ),
        (
            json!({"players": {"a": {"strategy": {"rule": "tit_for_tat"}}}, "format": "population"}),
            "held_out: a population format needs",
        ),
        (
            json!({"players": {"a b": {"strategy": {"rule": "tit_for_tat"}},
                "b": {"strategy": {"rule": "always_defect"}}}}),
            "players.a b: a player's name",
        ),
    ] {
        std::fs::write(&roster, doc.to_string()).unwrap();
        let (code, _, err) = sopsim(&[
            "tournament",
            game.to_str().unwrap(),
            "--players",
            roster.to_str().unwrap(),
            "-q",
            "--out",
            dir.path().join("out").to_str().unwrap(),
        ]);
        assert_eq!(code, 2, "{says}: {err}");
        assert!(err.contains(says), "expected {says:?} in {err}");
    }
    let (code, _, err) = sopsim(&[
        "tournament",
        root().join("scenarios/debate.json").to_str().unwrap(),
        "--players",
        root()
            .join("scenarios/tournaments/axelrod.json")
            .to_str()
            .unwrap(),
        "-q",
        "--out",
        dir.path().join("out2").to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("pays its players"), "{err}");
}
