//! An agent's turn made by its model, once the Agent has prepared it: observe the
//! Environment, run the role's extract step, consult its knowledge, take its tool
//! steps, reply (drawing a flawed reply again), make its closed choice, and return the
//! drafted turn. It runs outside the actor's handler (model calls never run in one),
//! so it owns everything it needs.

use std::sync::Arc;

use actix::Addr;

use super::environment::EnvironmentActor;
use super::messages::*;
use super::tool_turn::{Decider, ToolTurn};
use crate::error::SimError;
use crate::events::{SimEvent, Sinks};
use crate::llm::{
    CallContext, CallKind, Chosen, Completion, LlmClient, LlmRequest, Redraw, Screen, TokenSink,
};
use crate::scenario::{ChoiceSpec, LlmSettings, Persona, Scenario, State};
use sopsim_core::memory::{Decision, MessageKind, Observation};
use sopsim_core::prompt::{self, ChatMessage};
use sopsim_core::quality::{Checker, Instructions, RedrawCause, DEFAULT_REDRAWS};
use sopsim_core::tokens::TokenCounter;

/// Everything a model turn needs, taken from the Agent when the turn begins.
pub(super) struct ModelTurn {
    pub env: Addr<EnvironmentActor>,
    pub scenario: Arc<Scenario>,
    pub counter: Arc<dyn TokenCounter>,
    pub llm: LlmClient,
    pub msg: TakeTurn,
    /// What every message of the turn shares, filled in with what the model said and
    /// chose.
    pub base: DraftMessage,
    pub settings: LlmSettings,
    /// The stop sequences that start another participant's line.
    pub speaker_stops: Vec<String>,
    pub stream: Option<TokenSink>,
    /// Told when a streamed reply is drawn again.
    pub sinks: Sinks,
    /// What a reply must not copy or echo.
    pub instructions: Instructions,
    /// The role replies (its choice does not come instead of a reply).
    pub replies: bool,
    /// The role's closed choice and its options.
    pub choice: Option<ChoiceSpec>,
    pub options: Vec<String>,
    /// Set when the role has tools and replies.
    pub decider: Option<Decider>,
    /// The state with the world's values shown in its texts, when it shows any.
    pub shown: Option<State>,
    /// The run's seed (a noisy agent's trembles are drawn from it).
    pub seed: u64,
}

impl ModelTurn {
    pub(super) async fn run(mut self) -> Result<TurnDone, SimError> {
        let viewer = Some(self.base.name.clone());
        let mut obs: Observation = self.env.send(Observe(viewer)).await?;
        if super::participants::others_seen(&self.scenario) {
            self.base.others =
                super::participants::seen_labels(&obs, &self.base.name, &self.base.role);
            self.speaker_stops = super::participants::speaker_stops(&self.base.others);
            let stops = self.settings.stop.get_or_insert_with(Vec::new);
            stops.extend(self.speaker_stops.iter().cloned());
        }
        self.extract_step(&mut obs).await?;
        let mut found = self.consult().await?;
        let mut tool_turn = ToolTurn::default();
        if let Some(decider) = self.decider.take() {
            tool_turn = self.use_tools(decider, &obs, found.as_deref()).await?;
            if let Some(results) = tool_turn.for_reply.take() {
                found = Some(with_tool_results(found, results));
            }
        }
        let reply = self.reply(&obs, found.as_deref()).await?;
        let own_reply = reply.as_ref().map(|(text, _)| text.as_str());
        let mut decision = self.choose(&obs, own_reply).await?;
        if let (Some(d), Some(p)) = (decision.as_mut(), self.noise()) {
            // The move trembles; the probabilities stay the model's own.
            d.value = sopsim_core::noise::tremble(
                self.seed,
                &self.base.name,
                self.msg.turn,
                p,
                &self.options,
                &d.value,
            );
        }
        let stopped = reply.as_ref().is_some_and(|(_, stopped)| *stopped);
        let (response, kind) = said(reply.map(|(text, _)| text), decision.as_ref());
        let name = self.base.name.clone();
        let said = DraftMessage {
            response,
            kind,
            decision,
            stopped_at_speaker: stopped,
            ..self.base
        };
        let mut messages = tool_turn.messages;
        messages.push(said);
        Ok(TurnDone::Drafted(DraftTurn {
            name,
            messages,
            events: tool_turn.events,
        }))
    }

    /// The context of this turn's next call of `kind`, numbered by the client.
    fn context(&self, kind: CallKind) -> CallContext {
        self.llm.context(
            kind,
            &self.msg.state,
            self.msg.turn,
            Some((&self.base.name, &self.msg.role)),
        )
    }

    fn state(&self) -> &State {
        self.shown
            .as_ref()
            .unwrap_or(&self.scenario.sop.states[&self.msg.state])
    }

    /// The agent's noise, when its moves tremble.
    fn noise(&self) -> Option<f64> {
        self.scenario.agents[&self.base.name]
            .noise
            .filter(|p| *p > 0.0)
    }

    fn who(&self) -> Persona<'_> {
        Persona {
            name: &self.base.name,
            role: &self.msg.role,
            agent: &self.scenario.agents[&self.base.name],
        }
    }

    /// A model call of this turn; a failed one ends the run, naming the turn.
    async fn call(
        &self,
        request: LlmRequest,
        stream: Option<TokenSink>,
    ) -> Result<Completion, SimError> {
        Ok(self.llm.call(request, stream).await?)
    }

    /// The role's prompt for its reply, which its tool decisions build on too.
    fn reply_prompt(&self, obs: &Observation, found: Option<&str>) -> Vec<ChatMessage> {
        prompt::agent_prompt(
            &self.scenario,
            self.state(),
            self.who(),
            obs,
            found,
            self.counter.as_ref(),
        )
        .messages
    }

    /// The role's extract step, which runs before the reply as aiwaves' components do
    /// in `compile`: the values it reads are seen by this turn and stored for later.
    async fn extract_step(&self, obs: &mut Observation) -> Result<(), SimError> {
        let state = self.state();
        let comps = state.components.get(&self.msg.role);
        let Some(step) = comps.and_then(|c| c.extract.as_ref()) else {
            return Ok(());
        };
        let assembled =
            prompt::extract_prompt(&self.scenario, state, step, obs, self.counter.as_ref());
        let request = LlmRequest::chat(
            assembled.messages,
            self.settings.clone(),
            self.context(CallKind::Extract),
        );
        let reply = self.call(request, None).await?;
        let values = prompt::read_extracted(&reply.text, &step.words);
        obs.shared.extend(values.iter().cloned());
        self.env
            .send(SetShared {
                agent: self.base.name.clone(),
                values,
            })
            .await?;
        Ok(())
    }

    /// The role's knowledge for the latest message, if it has a knowledge base.
    async fn consult(&self) -> Result<Option<String>, SimError> {
        let comps = self.state().components.get(&self.msg.role);
        match comps.and_then(|c| c.knowledge.clone()) {
            Some(lookup) => Ok(Some(self.env.send(Consult { lookup }).await??)),
            None => Ok(None),
        }
    }

    /// The tool steps before the reply; the decisions build on the reply's own prompt.
    async fn use_tools(
        &self,
        mut decider: Decider,
        obs: &Observation,
        found: Option<&str>,
    ) -> Result<ToolTurn, SimError> {
        decider.last_message = obs.recent.last().map(|m| m.content.clone());
        let base = self.reply_prompt(obs, found);
        let format = decider
            .settings
            .decision
            .unwrap_or_else(|| self.llm.default_decision(&decider.settings));
        decider.run(&base, format).await
    }

    /// The reply, if the role replies, and whether it stopped where another
    /// participant's line would begin. The first candidate is drawn alone and kept
    /// when it has no flaw; otherwise the others are drawn at once (the local engine
    /// decodes them in one batch) and the first without a flaw, in seed order, is
    /// kept. Each candidate's draw does not depend on what else is in the batch, so
    /// this keeps what drawing them all at once would, at a fraction of the tokens.
    /// When none passes, a new set is drawn away from what they got wrong, up to
    /// `redraws` times; then the draw with the mildest flaw stands. Every draw but the
    /// last set is screened as it is decoded, and stops at a flaw it has for certain:
    /// another draw is coming to replace it.
    async fn reply(
        &self,
        obs: &Observation,
        found: Option<&str>,
    ) -> Result<Option<(String, bool)>, SimError> {
        if !self.replies {
            return Ok(None);
        }
        let request = LlmRequest::chat(
            self.reply_prompt(obs, found),
            self.settings.clone(),
            self.context(CallKind::Act),
        );
        // What the agent was shown is what it could copy.
        let mut checker = Checker::new(self.instructions.clone());
        for m in obs.relevant.iter().chain(&obs.recent) {
            checker.see(m);
        }
        let checker = Arc::new(checker);
        let draws = self.llm.draws(&self.settings);
        let (candidates, redraws) = match draws {
            true => (
                self.settings
                    .candidates
                    .unwrap_or_else(|| self.llm.default_candidates(&self.settings))
                    .max(1),
                self.settings.redraws.unwrap_or(DEFAULT_REDRAWS),
            ),
            false => (1, 0),
        };
        let mut avoid = Vec::new();
        let mut last = None;
        // Why the streamed candidate was not kept, if it was not.
        let mut replaced = None;
        // The draw with the mildest flaw so far, kept when every draw has one.
        let mut mildest: Option<((bool, u8), Completion)> = None;
        let mut drawn_in_all = 0u64;
        // Tokens decoded over every draw of this reply.
        let mut decoded = 0u64;
        for round in 0..=redraws {
            let mut first_flaw = None;
            let batches = match round {
                0 => [0..1, 1..candidates],
                _ => [0..candidates, 0..0],
            };
            let batches: Vec<_> = batches.into_iter().filter(|b| !b.is_empty()).collect();
            let last_batch = batches.len() - 1;
            for (b, batch) in batches.into_iter().enumerate() {
                let replaceable = round < redraws || b < last_batch;
                let requests = batch.map(|j| {
                    let mut r = request.clone().as_candidate(j);
                    if let Some(redraw) = &last {
                        r = r.redrawn(Redraw::clone(redraw));
                    }
                    if replaceable {
                        r = r.screened(Screen::new(checker.clone(), &self.base.name));
                    }
                    // The first candidate of the first set streams, as a lone reply
                    // would.
                    let stream = (round == 0 && j == 0)
                        .then(|| self.stream.clone())
                        .flatten();
                    self.call(r, stream)
                });
                let drawn = futures::future::try_join_all(requests).await?;
                drawn_in_all += drawn.len() as u64;
                decoded += drawn.iter().map(|c| c.usage.completion_tokens).sum::<u64>();
                for completion in drawn {
                    // Judged as it would be recorded.
                    let (text, _) =
                        sopsim_core::action::recorded_reply(&completion.text, &self.base.others);
                    let verdict = match completion.abandoned {
                        Some(cause) => Some((cause, checker.avoid(&self.base.name, text, cause))),
                        None => checker.redraw(&self.base.name, text),
                    };
                    let Some((cause, span)) = verdict else {
                        self.count_redrawn(replaced, drawn_in_all);
                        self.llm
                            .count_reply_tokens(decoded, completion.usage.completion_tokens);
                        return Ok(Some(self.kept(completion, replaced)));
                    };
                    if first_flaw.is_none() {
                        avoid.push(span);
                        first_flaw = Some(cause);
                    }
                    replaced.get_or_insert(cause);
                    // A draw stopped short stands only if no whole one does.
                    let mildness = (completion.abandoned.is_some(), cause.severity());
                    if mildest.as_ref().is_none_or(|(m, _)| mildness < *m) {
                        mildest = Some((mildness, completion));
                    }
                }
            }
            let Some(cause) = first_flaw else {
                break;
            };
            last = Some(Redraw {
                attempt: round + 1,
                cause,
                avoid: avoid.clone(),
            });
        }
        self.count_redrawn(replaced, drawn_in_all);
        if let Some((_, completion)) = &mildest {
            self.llm
                .count_reply_tokens(decoded, completion.usage.completion_tokens);
        }
        Ok(mildest.map(|(_, completion)| self.kept(completion, replaced)))
    }

    /// A reply whose first draw had a flaw counts once, by that flaw, with the draws
    /// made after it.
    fn count_redrawn(&self, first_flaw: Option<RedrawCause>, drawn: u64) {
        // A flawed reply that was not drawn again (no redraws, one candidate, or a
        // backend that does not draw) is counted by the quality figures, not here.
        if let (Some(cause), true) = (first_flaw, drawn > 1) {
            self.llm.count_redrawn(cause, drawn - 1);
        }
    }

    /// A reply as kept: its text, and whether it stopped where another participant's
    /// line would begin. A streamed reply replaced by another candidate is told.
    fn kept(&self, completion: Completion, replaced: Option<RedrawCause>) -> (String, bool) {
        if let (Some(cause), Some(_)) = (replaced, &self.stream) {
            self.sinks.emit(SimEvent::Redrawn {
                name: self.base.name.clone(),
                cause,
            });
        }
        let stopped = completion
            .stopped_at
            .as_ref()
            .is_some_and(|s| self.speaker_stops.contains(s));
        (completion.text, stopped)
    }

    /// The role's closed choice, if it has one, after what it just said.
    async fn choose(
        &self,
        obs: &Observation,
        own_reply: Option<&str>,
    ) -> Result<Option<Decision>, SimError> {
        let Some(spec) = &self.choice else {
            return Ok(None);
        };
        let assembled = prompt::choice_prompt(
            &self.scenario,
            self.state(),
            self.who(),
            obs,
            prompt::ChoicePut {
                spec,
                options: &self.options,
                own_reply,
            },
            self.counter.as_ref(),
        );
        let request = LlmRequest::choice(
            assembled.messages,
            self.options.clone(),
            self.settings.clone(),
            self.context(CallKind::Choice),
        );
        let completion = self.call(request, None).await?;
        Ok(completion
            .chosen
            .and_then(|c| decision_of(c, &self.options)))
    }
}

/// The knowledge found for the reply with the tools' results after it.
fn with_tool_results(found: Option<String>, results: String) -> String {
    match found {
        Some(f) if !f.is_empty() => format!("{f}\n\n{results}"),
        _ => results,
    }
}

/// A backend's choice as the message's decision: the option and, where the backend
/// could tell, every option's probability.
fn decision_of(chosen: Chosen, options: &[String]) -> Option<Decision> {
    let value = options.get(chosen.index)?.clone();
    let probabilities = chosen
        .probabilities
        .map(|p| options.iter().cloned().zip(p).collect());
    Some(Decision {
        value,
        probabilities,
    })
}

/// What the turn says: its reply, or, when the choice came instead of a reply, the
/// chosen option (empty if none was read).
fn said(reply: Option<String>, decision: Option<&Decision>) -> (String, MessageKind) {
    match reply {
        Some(text) => (text, MessageKind::Reply),
        None => (
            decision.map(|d| d.value.clone()).unwrap_or_default(),
            MessageKind::Choice,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ChoiceMethod;

    fn options() -> Vec<String> {
        vec!["cooperate".into(), "defect".into()]
    }

    #[test]
    fn tool_results_follow_the_knowledge_found() {
        assert_eq!(with_tool_results(None, "r".into()), "r");
        assert_eq!(with_tool_results(Some(String::new()), "r".into()), "r");
        assert_eq!(with_tool_results(Some("k".into()), "r".into()), "k\n\nr");
    }

    #[test]
    fn a_choice_names_its_option_with_the_probabilities() {
        let chosen = Chosen {
            index: 1,
            probabilities: Some(vec![0.25, 0.75]),
            method: ChoiceMethod::Text,
        };
        let d = decision_of(chosen, &options()).unwrap();
        assert_eq!(d.value, "defect");
        let p = d.probabilities.unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(p.get("cooperate"), Some(&0.25));
    }

    #[test]
    fn a_choice_outside_the_options_is_no_decision() {
        let chosen = Chosen {
            index: 2,
            probabilities: None,
            method: ChoiceMethod::Text,
        };
        assert!(decision_of(chosen, &options()).is_none());
    }

    #[test]
    fn a_choice_instead_of_a_reply_says_the_option() {
        let d = Decision {
            value: "defect".into(),
            probabilities: None,
        };
        assert_eq!(
            said(Some("hi".into()), Some(&d)),
            ("hi".into(), MessageKind::Reply)
        );
        assert_eq!(said(None, Some(&d)), ("defect".into(), MessageKind::Choice));
        assert_eq!(said(None, None), (String::new(), MessageKind::Choice));
    }
}
