//! What a role is told, as text: the fixed parts of an agent's prompt that come from
//! the scenario (the scene, who the agent is, its style, rules and examples; its output
//! format, final instruction and task). `prompt` puts the conversation between them;
//! validation counts their tokens against the budget.

use super::format::{AgentSpec, Components, State};

/// Who is speaking in an agent's prompt: its name, its role here, and its spec.
#[derive(Debug, Clone, Copy)]
pub struct Persona<'a> {
    /// The agent's name.
    pub name: &'a str,
    /// The role the agent plays in the state.
    pub role: &'a str,
    /// The agent as the scenario describes it.
    pub agent: &'a AgentSpec,
}

/// The fixed text of an agent's prompt in a state.
#[derive(Debug, Clone, PartialEq)]
pub struct RoleText {
    /// The system part: scene, identity, style, rules, examples.
    pub system: Vec<String>,
    /// The closing instructions, after the conversation; the last one is the task.
    pub tail: Vec<String>,
}

/// The fixed text for `who` in `state`; `opening` when nothing has been said yet.
pub fn role_text(state: &State, who: Persona<'_>, opening: bool) -> RoleText {
    let comps = state.components.get(who.role);
    RoleText {
        system: system_part(state, who, comps),
        tail: tail_part(who, comps, opening),
    }
}

/// Told to the first speaker of a conversation.
pub const OPENING_NOTE: &str = "Nothing has been said yet; you open the conversation.";

/// Who an agent is told it is.
pub fn identity(name: &str, role: &str) -> String {
    format!("You are {name}. Here you play the role of {role}.")
}

fn system_part(state: &State, who: Persona<'_>, comps: Option<&Components>) -> Vec<String> {
    let mut sys = vec![state.environment_prompt.trim().to_string()];
    sys.push(identity(who.name, who.role));
    let stake = who.agent.stake.trim();
    if !stake.is_empty() {
        sys.push(format!("In your own words: \"{stake}\""));
    }
    let style: Vec<&str> = [
        who.agent.style.as_str(),
        comps.and_then(|c| c.style.as_deref()).unwrap_or(""),
    ]
    .into_iter()
    .map(str::trim)
    .filter(|s| !s.is_empty())
    .collect();
    if !style.is_empty() {
        sys.push(format!("Your style: {}", style.join(" ")));
    }
    if let Some(c) = comps {
        if let Some(rule) = &c.rule {
            sys.push(format!("Rules: {}", rule.trim()));
        }
        if !c.demonstrations.is_empty() {
            let demos: Vec<String> = c
                .demonstrations
                .iter()
                .map(|d| format!("- {}", d.trim()))
                .collect();
            sys.push(format!("Examples of how you speak:\n{}", demos.join("\n")));
        }
    }
    sys.push(speak_as(who.name));
    sys
}

/// How an agent is told to speak: as itself, aloud, and nothing else.
pub fn speak_as(name: &str) -> String {
    format!("Write only what {name} says aloud, as {name}, without a name label or notes.")
}

fn tail_part(who: Persona<'_>, comps: Option<&Components>, opening: bool) -> Vec<String> {
    let mut tail = Vec::new();
    if opening {
        tail.push(OPENING_NOTE.to_string());
    }
    if let Some(c) = comps {
        tail.extend(c.output.iter().map(|o| o.trim().to_string()));
        tail.extend(c.last.iter().map(|l| l.trim().to_string()));
    }
    tail.push(your_turn(who, comps.and_then(|c| c.task.as_deref())));
    tail
}

/// The last line of an agent's prompt: whose turn it is, what to do, and what the
/// agent wants, in brackets after the conversation. Small models follow a task and
/// hold a side far better stated here than in the system part, and a cue in brackets
/// is rarely copied into the reply as a heading (measured:
/// `docs/guide/local-models.md`).
fn your_turn(who: Persona<'_>, task: Option<&str>) -> String {
    let task = task
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|t| format!(": {}", lower_first(t.trim_end_matches('.'))))
        .unwrap_or_default();
    let stake = who.agent.stake.trim();
    let view = if stake.is_empty() {
        String::new()
    } else {
        format!(" Your view: {stake}")
    };
    format!("({}, your turn{task}.{view})", who.name)
}

/// "Choose your move." → "choose your move." ("I…" and acronyms keep their capital).
fn lower_first(text: &str) -> String {
    let mut chars = text.chars();
    match (chars.next(), chars.next()) {
        (Some(a), Some(b)) if a.is_uppercase() && b.is_lowercase() => a
            .to_lowercase()
            .chain(text[a.len_utf8()..].chars())
            .collect(),
        _ => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_task_comes_last_addressed_to_the_agent() {
        let agent = AgentSpec::default();
        let mut state = State::default();
        state.components.insert(
            "Pro".into(),
            Components {
                task: Some("Give the opening.".into()),
                output: Some("Two sentences.".into()),
                ..Components::default()
            },
        );
        let who = Persona {
            name: "Ada",
            role: "Pro",
            agent: &agent,
        };
        let text = role_text(&state, who, false);
        assert_eq!(
            text.tail,
            ["Two sentences.", "(Ada, your turn: give the opening.)"]
        );
        let staked = AgentSpec {
            stake: "I want the park.".into(),
            ..AgentSpec::default()
        };
        let who = Persona {
            agent: &staked,
            ..who
        };
        let text = role_text(&state, who, false);
        assert_eq!(
            text.tail.last().unwrap(),
            "(Ada, your turn: give the opening. Your view: I want the park.)"
        );
        assert!(text
            .system
            .contains(&"In your own words: \"I want the park.\"".to_string()));
        assert_eq!(lower_first("I think"), "I think");
        assert_eq!(lower_first("AI first"), "AI first");
    }
}
