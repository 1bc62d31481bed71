//! Settings that are valid but probably not what was meant: shown by `sopsim validate`
//! and as warnings when a run starts; they never fail validation.

use super::format::{Scenario, SpeakerRule};
use super::path::FieldPath;
use super::structure::Problem;

/// Settings that are valid but probably not what was meant: shown by `sopsim
/// validate` and as warnings when a run starts; they never fail validation.
pub fn advice(s: &Scenario) -> Vec<Problem> {
    let mut out = Vec::new();
    let players = s.players();
    for (name, state) in &s.sop.states {
        if state.turns != super::format::Turns::Simultaneous {
            continue;
        }
        let path = FieldPath::root().key("sop").key("states").key(name);
        let seats = players
            .get(name)
            .map_or(0, |roles| roles.values().map(Vec::len).sum::<usize>())
            as u32;
        if seats == 1 {
            out.push(Problem {
                path: path.key("turns"),
                message: "a simultaneous state with one player is sequential in effect".into(),
            });
        }
        if state.speaker != SpeakerRule::Order {
            out.push(Problem {
                path: path.key("speaker"),
                message: "ignored: in a simultaneous state every role acts in each round".into(),
            });
        }
        let t = &state.transition;
        if !t.keywords.is_empty() {
            out.push(Problem {
                path: path.key("transition").key("keywords"),
                message: "checked once per round, against all of its messages: the first \
                          message in the order of roles that contains a keyword decides (and \
                          within it, the first keyword listed)"
                    .into(),
            });
        }
        if let Some(note) = t.max_turns.and_then(|max| uneven_rounds(max, state, seats)) {
            out.push(Problem {
                path: path.key("transition").key("max_turns"),
                message: note,
            });
        }
    }
    for name in s.tools.keys() {
        let listed = s.sop.states.values().any(|st| {
            st.tools.contains(name) || st.components.values().any(|c| c.tools.contains(name))
        });
        if !listed {
            out.push(Problem {
                path: FieldPath::root().key("tools").key(name),
                message: "no state or role lists this tool, so it is never offered".into(),
            });
        }
    }
    out
}

/// A note when a simultaneous state's `max_turns` falls inside a round: a round counts
/// one turn per player, `seats` in all (after the visit's opening, which counts one),
/// and the transition is checked only after a whole round.
fn uneven_rounds(max: u32, state: &super::format::State, seats: u32) -> Option<String> {
    let roles = seats;
    let opening = u32::from(state.begin_query.is_some());
    if roles < 2 || max <= opening || (max - opening).is_multiple_of(roles) {
        return None;
    }
    let rounds = (max - opening).div_ceil(roles);
    let reached = opening + rounds * roles;
    let opening = if opening == 1 { "the opening and " } else { "" };
    Some(format!(
        "{max} is not a whole number of rounds: each round counts {roles} turns (one per \
         player), so the state leaves after {opening}{rounds} round(s), at {reached} turns \
         (max_rounds counts rounds)"
    ))
}
