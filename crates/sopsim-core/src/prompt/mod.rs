//! Prompt assembly: what each kind of call sends to the model, within the token budget.
//!
//! Pure functions from scenario data and an [`Observation`] to chat messages. The order
//! inside a prompt is from what changes least to what changes most, so that each turn's
//! prompt continues the last one and the model reads only what is new: environment
//! prompt and components (system part), then the summary, the recent messages, then
//! retrieved history and the closing instructions. Under budget pressure the oldest
//! recent messages go first, then the least relevant retrieved ones, then the summary;
//! the message being answered goes last of all.

mod budget;
mod chat;

pub use budget::{Assembled, Draft, Item, Section};
pub use chat::{ChatMessage, ChatRole, ToolDef};

use crate::memory::{Observation, SummaryRequest};
use crate::scenario::{role_text, JudgePrompts, Persona, RoleText, Scenario, SpeakerRule, State};
use crate::tokens::TokenCounter;

/// Put before the results of an agent's tool calls in its reply prompt.
pub const TOOL_FACTS_NOTE: &str =
    "Facts you looked up just now with your tools (use them in your reply; do not quote this note):";
const SUMMARY_HEADER: &str = "Summary of the conversation so far:";
const RELEVANT_HEADER: &str = "Earlier messages that may be relevant:";

/// Text sopsim itself puts in agents' prompts, whatever the scenario: a reply that
/// repeats it echoes the instructions (see [`crate::quality`]).
pub const FRAMEWORK_TEXTS: &[&str] = &[
    TOOL_FACTS_NOTE,
    SUMMARY_HEADER,
    RELEVANT_HEADER,
    crate::scenario::OPENING_NOTE,
];

const RANK_RECENT: u32 = 0;
const RANK_RELEVANT: u32 = 1_000_000;
const RANK_SUMMARY: u32 = 2_000_000;
const RANK_LATEST: u32 = 3_000_000;

/// The summary, the recent messages and the relevant earlier ones; with `turns_of`,
/// the recent ones are chat turns, that speaker's own as its assistant turns.
fn context_sections(obs: &Observation, latest_rank: u32, turns_of: Option<&str>) -> Vec<Section> {
    let mut sections = Vec::new();
    if let Some(summary) = &obs.summary {
        sections.push(Section {
            header: SUMMARY_HEADER.into(),
            items: vec![Item {
                text: summary.clone(),
                drop_rank: RANK_SUMMARY,
                own: false,
            }],
            as_turns: false,
        });
    }
    if !obs.recent.is_empty() {
        let last = obs.recent.len() - 1;
        sections.push(Section {
            header: "Conversation:".into(),
            items: obs
                .recent
                .iter()
                .enumerate()
                .map(|(i, m)| {
                    let own = turns_of == Some(m.name.as_str());
                    Item {
                        text: if own { m.content.clone() } else { m.render() },
                        drop_rank: if i == last {
                            latest_rank
                        } else {
                            RANK_RECENT + i as u32
                        },
                        own,
                    }
                })
                .collect(),
            as_turns: turns_of.is_some(),
        });
    }
    if !obs.relevant.is_empty() {
        let n = obs.relevant.len() as u32;
        sections.push(Section {
            header: RELEVANT_HEADER.into(),
            items: obs
                .relevant
                .iter()
                .enumerate()
                .map(|(i, m)| Item {
                    text: m.render(),
                    drop_rank: RANK_RELEVANT + n - i as u32,
                    own: false,
                })
                .collect(),
            as_turns: false,
        });
    }
    sections
}

/// The prompt for an agent's turn.
///
/// `found` is what the role's knowledge lookup returned this turn, if it has one; it
/// goes before the output instructions, as aiwaves puts a tool's prompt there.
pub fn agent_prompt(
    scenario: &Scenario,
    state: &State,
    who: Persona<'_>,
    obs: &Observation,
    found: Option<&str>,
    counter: &dyn TokenCounter,
) -> Assembled {
    let comps = state.components.get(who.role);
    let RoleText {
        mut system,
        mut tail,
    } = role_text(state, who, obs.recent.is_empty());
    if let Some(template) = comps.and_then(|c| c.template.as_deref()) {
        system.push(fill_template(template, obs));
    }
    if let Some(found) = found.filter(|f| !f.is_empty()) {
        let at = usize::from(obs.recent.is_empty());
        tail.insert(at, found.to_string());
    }
    // The agent's own earlier lines as its assistant turns: small models then take the
    // others' lines as what was said to them, not as text to continue or copy.
    Draft {
        system,
        sections: context_sections(obs, RANK_LATEST, Some(who.name)),
        tail,
    }
    .fit(scenario.environment.prompt_token_budget, counter)
}

/// A closed choice put to an agent.
pub struct ChoicePut<'a> {
    /// The role's `choice` component.
    pub spec: &'a crate::scenario::ChoiceSpec,
    /// The options offered this turn, in the order the agent is shown them.
    pub options: &'a [String],
    /// What the agent just said, when it speaks before it chooses.
    pub own_reply: Option<&'a str>,
}

/// The prompt for a role's closed choice: the agent's context as for its reply, then
/// what it just said (when it spoke first), the question and the options.
pub fn choice_prompt(
    scenario: &Scenario,
    state: &State,
    who: Persona<'_>,
    obs: &Observation,
    question: ChoicePut<'_>,
    counter: &dyn TokenCounter,
) -> Assembled {
    let ChoicePut {
        spec,
        options,
        own_reply,
    } = question;
    let mut tail = Vec::new();
    if let Some(reply) = own_reply {
        tail.push(format!("You ({}) just said: {}", who.name, reply.trim()));
    }
    tail.push(
        spec.prompt
            .clone()
            .unwrap_or_else(|| format!("{}, make your choice.", who.name)),
    );
    tail.push(format!(
        "Answer with exactly one of: {}.",
        quoted_list(options)
    ));
    Draft {
        system: role_text(state, who, false).system,
        sections: context_sections(obs, RANK_LATEST, None),
        tail,
    }
    .fit(scenario.environment.prompt_token_budget, counter)
}

/// A probe put to an agent: the question, and the options of a closed answer in
/// the order the agent is shown them (none for free text; a number's range is named
/// by its ends).
pub struct ProbePut<'a> {
    /// The question.
    pub question: &'a str,
    /// The options of a closed answer, in the order shown; empty for a free-text answer.
    pub options: &'a [String],
    /// For a numeric answer: the lowest and highest number allowed.
    pub number: Option<(f64, f64)>,
}

/// The prompt of a probe: the agent's context as for its reply, then the question and
/// how to answer. Nothing of it enters the run.
pub fn probe_prompt(
    scenario: &Scenario,
    state: &State,
    who: Persona<'_>,
    obs: &Observation,
    put: ProbePut<'_>,
    counter: &dyn TokenCounter,
) -> Assembled {
    let answer = match (put.number, put.options) {
        (Some((min, max)), _) => format!("Answer with one number from {min} to {max}."),
        (None, []) => format!("Answer as {}, in a sentence or two.", who.name),
        (None, options) => format!("Answer with exactly one of: {}.", quoted_list(options)),
    };
    Draft {
        system: role_text(state, who, false).system,
        sections: context_sections(obs, RANK_LATEST, Some(who.name)),
        tail: vec![put.question.trim().to_string(), answer],
    }
    .fit(scenario.environment.prompt_token_budget, counter)
}

/// A `template` component with the stored values; unknown keys read as empty, and a
/// malformed template is shown as written.
pub fn fill_template(template: &str, obs: &Observation) -> String {
    crate::template::render(template, |key| {
        Some(obs.shared.get(key).map_or("", String::as_str).into())
    })
    .unwrap_or_else(|_| template.to_string())
}

/// The `extract` step's call: the conversation, then the instruction to tag the values.
pub fn extract_prompt(
    scenario: &Scenario,
    state: &State,
    step: &crate::scenario::ExtractStep,
    obs: &Observation,
    counter: &dyn TokenCounter,
) -> Assembled {
    let tags: Vec<String> = step.words.iter().map(|w| format!("<{w}>…</{w}>")).collect();
    let system = vec![
        state.environment_prompt.trim().to_string(),
        step.system_prompt.clone(),
    ];
    let tail = vec![
        step.last_prompt.clone(),
        format!("Write each value inside its tags: {}.", tags.join(", ")),
    ];
    Draft {
        system,
        sections: context_sections(obs, RANK_LATEST, None),
        tail,
    }
    .fit(scenario.environment.prompt_token_budget, counter)
}

/// The values of `<word>…</word>` tags in an extract reply (the last of each).
pub fn read_extracted(reply: &str, words: &[String]) -> Vec<(String, String)> {
    words
        .iter()
        .filter_map(|w| {
            let open = format!("<{w}>");
            let close = format!("</{w}>");
            let start = reply.rfind(&open)? + open.len();
            let len = reply[start..].find(&close)?;
            Some((w.clone(), reply[start..start + len].trim().to_string()))
        })
        .collect()
}

fn quoted_list(choices: &[String]) -> String {
    choices
        .iter()
        .map(|c| format!("\"{c}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The `llm` speaker rule's controller prompt: who speaks next among `choices`.
pub fn route_prompt(
    scenario: &Scenario,
    state: &State,
    choices: &[String],
    obs: &Observation,
    counter: &dyn TokenCounter,
) -> Assembled {
    let (system_prompt, last_prompt, tag) = match &state.speaker {
        SpeakerRule::Llm {
            system_prompt,
            last_prompt,
            extract_words,
        } => (
            system_prompt.clone(),
            last_prompt.clone(),
            extract_words.clone(),
        ),
        _ => (None, None, None),
    };
    let system = vec![
        state.environment_prompt.trim().to_string(),
        system_prompt
            .unwrap_or_else(|| "You direct this conversation and decide who speaks next.".into()),
    ];
    let answer = match tag {
        // An explicit answer tag (aiwaves configs): one line per role, in the
        // original's words, so its prompts keep working.
        Some(tag) => choices
            .iter()
            .map(|c| format!("If it's currently supposed to be speaking for {c}, then output <{tag}>{c}</{tag}>."))
            .collect::<Vec<_>>()
            .join("\n"),
        None => format!(
            "Who should speak next? Answer with exactly one of: {}.",
            quoted_list(choices)
        ),
    };
    let tail = vec![last_prompt.unwrap_or_default(), answer];
    Draft {
        system,
        sections: context_sections(obs, RANK_LATEST, None),
        tail,
    }
    .fit(scenario.environment.prompt_token_budget, counter)
}

/// The transition judge's prompt: stay, or move to one of the next states.
pub fn judge_prompt(
    scenario: &Scenario,
    state_name: &str,
    state: &State,
    judge: &JudgePrompts,
    choices: &[String],
    obs: &Observation,
    counter: &dyn TokenCounter,
) -> Assembled {
    let system = vec![
        state.environment_prompt.trim().to_string(),
        judge.system_prompt.clone().unwrap_or_else(|| {
            format!(
                "You decide whether the stage \"{state_name}\" of this conversation is finished."
            )
        }),
    ];
    let answer = if judge.labels.len() == choices.len() {
        // Labelled answers (aiwaves configs answer with relation keys).
        let tag = judge.extract_words.as_deref().unwrap_or("end");
        let options: Vec<String> = choices
            .iter()
            .zip(&judge.labels)
            .enumerate()
            .map(|(i, (c, l))| match i {
                0 => format!("output <{tag}>{l}</{tag}> to continue \"{state_name}\""),
                _ => format!("output <{tag}>{l}</{tag}> to move to \"{c}\""),
            })
            .collect();
        format!("Here is the last query you especially need to pay attention to: the latest message above. Then {}.", options.join("; "))
    } else {
        format!(
            "Answer \"{}\" to continue \"{state_name}\", or name the stage to move to. Answer with exactly one of: {}.",
            choices[0],
            quoted_list(choices)
        )
    };
    let tail = vec![judge.last_prompt.clone().unwrap_or_default(), answer];
    Draft {
        system,
        sections: context_sections(obs, RANK_LATEST, None),
        tail,
    }
    .fit(scenario.environment.prompt_token_budget, counter)
}

/// The short-term summary prompt, with the state's summary prompts.
pub fn summary_prompt(
    scenario: &Scenario,
    state: &State,
    req: &SummaryRequest,
    counter: &dyn TokenCounter,
) -> Assembled {
    let obs = Observation {
        summary: req.previous.clone(),
        relevant: Vec::new(),
        recent: req.messages.clone(),
        ..Observation::default()
    };
    let system = vec![
        state.environment_prompt.trim().to_string(),
        state.summary.system_prompt.clone(),
    ];
    let tail = vec![state.summary.last_prompt.clone()];
    Draft {
        system,
        sections: context_sections(&obs, RANK_LATEST, None),
        tail,
    }
    .fit(scenario.environment.prompt_token_budget, counter)
}
