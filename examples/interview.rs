//! Scripting a multi-role conversation from Rust: build a scenario in code, run it on
//! the scripted backend, and read the transcript.
//!
//! `cargo run --example interview`

use sopsim::scenario::{Components, Mode, ScenarioBuilder, Script, SpeakerRule, StateBuilder};
use sopsim::simulation::Services;
use sopsim::{RunIo, RunOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let asks = Components {
        task: Some("Ask one question about the candidate's last project.".into()),
        ..Components::default()
    };
    let scenario = ScenarioBuilder::new("interview")
        .mode(Mode::Cooperative)
        .agent("Ada", |a| {
            a.style("Curious and friendly.")
                .plays("questions", "Interviewer")
                .plays("debrief", "Interviewer")
        })
        .agent("Grace", |a| {
            a.style("Precise.")
                .plays("questions", "Observer")
                .plays("debrief", "Observer")
        })
        .agent("Bob", |a| {
            a.style("Nervous but knowledgeable.")
                .plays("questions", "Candidate")
        })
        .state(
            "questions",
            StateBuilder::new(["Interviewer", "Candidate", "Observer"])
                .begin(
                    "Interviewer",
                    "Welcome, Bob. Tell us about your last project.",
                )
                .components("Interviewer", asks)
                .speaker(SpeakerRule::Order)
                .max_turns(6)
                .next(["debrief"]),
        )
        .state(
            "debrief",
            StateBuilder::new(["Observer", "Interviewer"])
                .keyword("hire", "end")
                .max_turns(4)
                .next(["end"]),
        )
        .script(Script {
            agents: [
                (
                    "Ada",
                    vec!["What was the hardest bug?", "Agreed. I would hire him."],
                ),
                (
                    "Bob",
                    vec![
                        "I built the caching layer of our search service.",
                        "A race in cache invalidation; a loom model of the two threads found it.",
                    ],
                ),
                (
                    "Grace",
                    vec![
                        "Noted: he led the caching work.",
                        "Noted: strong on concurrency.",
                        "He explained his testing clearly.",
                    ],
                ),
            ]
            .into_iter()
            .map(|(name, lines)| {
                (
                    name.to_string(),
                    lines.into_iter().map(String::from).collect(),
                )
            })
            .collect(),
            ..Script::default()
        })
        .build()?;

    let io = RunIo {
        services: Some(Services::scripted(&scenario)),
        ..RunIo::default()
    };
    let opts = RunOptions {
        seed: 1,
        ..RunOptions::new(scenario)
    };
    let outcome = sopsim::run(&opts, io)?;
    for m in &outcome.transcript {
        println!(
            "[{} #{}] {} ({}): {}",
            m.state, m.seq, m.name, m.role, m.content
        );
    }
    println!(
        "ended by {} after {} turns",
        outcome.summary.ended_by.as_str(),
        outcome.summary.turns
    );
    Ok(())
}
