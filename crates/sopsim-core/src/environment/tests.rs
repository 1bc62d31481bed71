//! The Environment without actors: turns, rounds, `_REF_ID`s, visibility, numbering.

use serde_json::{json, Map};

use super::*;
use crate::memory::MessageKind;
use crate::tokens::Estimator;
use crate::tool_results::CallOutcome;
use crate::tool_results::{ResultObject, REF_ID};

fn scenario(mode: &str) -> Scenario {
    crate::scenario::from_document(
        std::path::Path::new("t.json"),
        json!({
            "name": "t",
            "environment": {"type": mode},
            "agents": {"Ada": {"roles": {"s": "A"}}, "Ben": {"roles": {"s": "B"}}},
            "sop": {"start": "s", "states": {"s": {"roles": ["A", "B"],
                "transition": {"max_turns": 4}, "next": ["end"]}}}
        }),
    )
    .unwrap()
}

fn env(mode: &str) -> Environment {
    let m = if mode == "competitive" {
        Mode::Competitive
    } else {
        Mode::Cooperative
    };
    let mut e = Environment::new(&scenario(mode), m);
    e.enter("s".into(), 1);
    e
}

fn found(agent: &str, things: &[&str]) -> ToolReturn {
    let objects = things
        .iter()
        .map(|t| {
            let mut o = Map::new();
            o.insert("name".into(), json!(t));
            o
        })
        .collect();
    ToolReturn {
        tool: "finder".into(),
        agent: agent.into(),
        turn: 1,
        ret: Return::Result(ResultObject::new("things", objects)),
        outcome: CallOutcome::Ok,
        retry: false,
        store: true,
    }
}

fn message(name: &str, kind: MessageKind, text: &str, stored: Option<usize>) -> DraftMessage {
    DraftMessage {
        name: name.into(),
        role: if name == "Ada" { "A" } else { "B" }.into(),
        response: text.into(),
        kind,
        turn: 1,
        decision: None,
        others: vec![],
        stopped_at_speaker: false,
        stored,
    }
}

/// A turn that found `things` and then said `said`.
fn turn(name: &str, said: &str, held: Option<Return>) -> DraftTurn {
    DraftTurn {
        name: name.into(),
        messages: vec![
            message(name, MessageKind::ToolResult, "finder: found", Some(0)),
            message(name, MessageKind::Reply, said, None),
        ],
        events: held
            .into_iter()
            .map(|ret| HeldEvent {
                ret,
                stored: Some(0),
            })
            .collect(),
    }
}

fn ids(ret: &Return) -> Vec<String> {
    match ret {
        Return::Result(r) => r
            .objects
            .iter()
            .map(|o| o[REF_ID].as_str().unwrap().to_string())
            .collect(),
        _ => Vec::new(),
    }
}

#[test]
fn a_sequential_turn_stores_at_once_and_lists_its_ids() {
    let mut e = env("cooperative");
    e.begin_round(&["Ada".into()]);
    let refs = e.apply_return(found("Ada", &["kettle", "pot"]));
    assert_eq!(refs, ["finder_things_0_0", "finder_things_0_1"]);
    // No one to hide from: the Environment has it before the commit.
    assert_eq!(e.snapshot().tools.calls["finder"]["ok"], 1);
    assert_eq!(e.view_tools("Ben", 1000, &Estimator).ran, ["finder"]);
    let settled = e.commit(vec![turn("Ada", "Found two.", None)]);
    let lines: Vec<&str> = settled[0]
        .messages
        .iter()
        .map(|m| m.content.as_str())
        .collect();
    assert_eq!(
        lines,
        [
            "finder: found [finder_things_0_0, finder_things_0_1]",
            "Found two."
        ]
    );
    assert_eq!(
        settled[0]
            .messages
            .iter()
            .map(|m| m.seq)
            .collect::<Vec<_>>(),
        [0, 1]
    );
}

#[test]
fn a_round_keeps_each_turn_apart_and_commits_in_the_order_of_the_roles() {
    let mut e = env("cooperative");
    e.begin_round(&["Ada".into(), "Ben".into()]);
    // Ben's turn finishes first, and stores first in its own view.
    let ben = e.apply_return(found("Ben", &["lamp"]));
    let ada = e.apply_return(found("Ada", &["kettle"]));
    assert_eq!(
        (ben.as_slice(), ada.as_slice()),
        (
            ["finder_things_0_0".to_string()].as_slice(),
            ["finder_things_0_0".to_string()].as_slice()
        )
    );
    // Neither sees the other's result, nor does the Environment hold either yet.
    assert_eq!(e.store_seen_by("Ada").entries().count(), 1);
    assert!(
        e.store_seen_by("Ada")
            .get_by_ref("finder_things_0_0")
            .unwrap()["name"]
            == "kettle"
    );
    assert!(
        e.store_seen_by("Ben")
            .get_by_ref("finder_things_0_0")
            .unwrap()["name"]
            == "lamp"
    );
    assert!(e.snapshot().tools.calls.is_empty());
    e.set_shared("Ben", vec![("plan".into(), "buy a lamp".into())]);
    assert!(
        e.observe(None).shared.is_empty(),
        "extracted values wait for the commit"
    );
    let shown = |ret: Return| tag_refs(ret, &["finder_things_0_0".into()]);
    let Return::Result(r) = found("Ben", &["lamp"]).ret else {
        panic!()
    };
    let ben_event = shown(Return::Result(r));
    // The roles' order: Ada first, whatever finished first.
    let settled = e.commit(vec![
        turn("Ada", "A kettle.", None),
        turn("Ben", "A lamp.", Some(ben_event)),
    ]);
    assert_eq!(
        settled[0].messages[0].content,
        "finder: found [finder_things_0_0]"
    );
    assert_eq!(
        settled[1].messages[0].content,
        "finder: found [finder_things_1_0]"
    );
    assert_eq!(
        ids(&settled[1].events[0]),
        ["finder_things_1_0"],
        "the event shows the committed id"
    );
    assert_eq!(
        settled
            .iter()
            .flat_map(|t| t.messages.iter().map(|m| m.seq))
            .collect::<Vec<_>>(),
        [0, 1, 2, 3]
    );
    assert_eq!(e.observe(None).shared["plan"], "buy a lamp");
    assert_eq!(e.snapshot().tools.calls["finder"]["ok"], 2);
}

#[test]
fn a_failed_call_stands_for_its_agent_until_the_tool_succeeds() {
    let mut e = env("cooperative");
    e.begin_round(&["Ada".into()]);
    let mut failed = found("Ada", &[]);
    failed.ret = Return::Error {
        feedback: "give a name".into(),
        error_message: String::new(),
    };
    failed.outcome = CallOutcome::Failed;
    e.apply_return(failed);
    let errors = e.view_tools("Ada", 1000, &Estimator).errors;
    assert_eq!(errors["finder"].len(), 1);
    assert!(
        e.view_tools("Ben", 1000, &Estimator).errors.is_empty(),
        "Ada's own"
    );
    e.apply_return(found("Ada", &["kettle"]));
    assert!(e.view_tools("Ada", 1000, &Estimator).errors.is_empty());
}

#[test]
fn in_competitive_mode_an_earlier_visits_results_are_out_of_sight() {
    let mut e = env("competitive");
    e.begin_round(&["Ada".into()]);
    e.apply_return(found("Ada", &["kettle"]));
    e.commit(vec![turn("Ada", "Found it.", None)]);
    let entry = |e: &Environment| {
        e.store_seen_by("Ben")
            .entries()
            .map(|(_, _, en)| e.visible(en))
            .collect::<Vec<_>>()
    };
    assert_eq!(entry(&e), [true]);
    e.enter("s".into(), 2);
    assert_eq!(entry(&e), [false]);
    assert!(e.view_tools("Ben", 1000, &Estimator).stored.is_empty());
}

#[test]
fn replies_are_recorded_in_memory_and_cut_where_another_speaks() {
    let mut e = env("cooperative");
    e.begin_round(&["Ada".into()]);
    let mut reply = message("Ada", MessageKind::Reply, "Yes.\nBen (B): No.", None);
    reply.others = vec!["Ben".into(), "B".into()];
    let settled = e.commit(vec![DraftTurn {
        name: "Ada".into(),
        messages: vec![reply],
        events: vec![],
    }]);
    assert_eq!(settled[0].messages[0].content, "Yes.");
    let (kept, _) = e.record(
        settled[0]
            .messages
            .iter()
            .map(|m| (m.clone(), &[][..]))
            .collect(),
    );
    assert_eq!(kept.len(), 1);
    assert_eq!(e.observe(None).recent.len(), 1);
    assert_eq!(e.snapshot().cut_replies, 1);
}
