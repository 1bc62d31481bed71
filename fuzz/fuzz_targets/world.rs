//! World formulas and the templates that show them: the input's first line is a
//! per-agent `update`, its second an `end_if`, the rest a template used as a state's
//! scene, a role's task and a strategy's `say`. A scenario that validates is played
//! for three rounds of its world, its texts rendered each round; nothing may panic,
//! and nothing may allocate past libFuzzer's limit (CI gives this target 256 MB).
#![no_main]

use std::path::Path;
use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use serde_json::json;
use sopsim::fuzzing::{
    from_document, render_say, render_state, Decision, Message, MessageKind, World,
};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let mut parts = text.splitn(3, '\n');
    let (update, end_if, template) = (
        parts.next().unwrap_or(""),
        parts.next().unwrap_or(""),
        parts.next().unwrap_or(""),
    );
    let doc = json!({
        "name": "lake",
        "agents": {
            "Ann": {"roles": {"fish": "Fisher A"}},
            "Bo": {"roles": {"fish": "Fisher B"},
                   "strategy": {"rule": "always_cooperate", "cooperate": "5", "say": template}}
        },
        "world": {
            "variables": {
                "fish": {"initial": 100, "min": 0, "max": 100, "state": "fish",
                         "update": "[100, 2 * ([0, world.fish - sum] | max)] | min"},
                "catch": {"per_agent": true, "initial": 0, "state": "fish", "update": update}
            },
            "end_if": {"fuzzed": end_if}
        },
        "sop": {"start": "fish", "max_turns": 100, "states": {"fish": {
            "roles": ["Fisher A", "Fisher B"], "turns": "simultaneous",
            "environment_prompt": template,
            "components": {
                "Fisher A": {"task": template,
                             "choice": {"range": [0, 20, 1], "after": "instead", "at_most": "world.fish"}},
                "Fisher B": {"choice": {"range": [0, 20, 1], "after": "instead"}}
            },
            "transition": {"max_rounds": 1}, "next": ["end"]
        }}}
    });
    let Ok(scenario) = from_document(Path::new("fuzz.json"), doc) else { return };
    let Some(mut world) = World::new(&scenario, 0, &[]) else { return };
    let state = &scenario.sop.states["fish"];
    for (round, catch) in ["10", "20", "5"].into_iter().enumerate() {
        let view = world.view();
        let _ = render_state("fish", state, &view, Some(0));
        let _ = render_state("fish", state, &view, None);
        let _ = render_say(template, &view, 1, catch);
        let said: Vec<Arc<Message>> = ["Ann", "Bo"]
            .into_iter()
            .map(|name| {
                Arc::new(Message {
                    seq: round as u64,
                    state: "fish".into(),
                    visit: round as u32 + 1,
                    role: "Fisher".into(),
                    name: name.into(),
                    content: catch.into(),
                    kind: MessageKind::Choice,
                    decision: Some(Decision {
                        value: catch.into(),
                        probabilities: None,
                    }),
                })
            })
            .collect();
        if world.close_round("fish", round as u32 + 1, &said, &|| false).is_err() {
            return;
        }
    }
});
