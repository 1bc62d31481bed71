//! The Director's probes: at the moments a scenario's `probes` name, each asked agent
//! is put the question on its memory and persona as they are then, and its answer goes
//! to `probes.jsonl` and nowhere else. The calls go through a model client of their
//! own (numbered and counted apart, never toward a budget), so a run with probes says
//! what it says without them. Which probes are due, whom they ask and in which order
//! the options are shown are `scenario::probes`' pure decisions.

use std::collections::HashMap;
use std::sync::Arc;

use actix::Addr;
use serde::Serialize;

use super::environment::EnvironmentActor;
use super::messages::Observe;
use crate::error::SimError;
use crate::llm::{CallKind, LlmClient, LlmRequest};
use crate::output::TranscriptWriter;
use crate::scenario::probes::{self, AnswerForm, Occasion, ProbeLine, ProbeSpec};
use crate::scenario::{Persona, Scenario};
use sopsim_core::prompt::{self, ProbePut};
use sopsim_core::tokens::TokenCounter;
use sopsim_core::world::WorldView;

/// A probe that could not be answered: counted and listed in `summary.json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProbeFailure {
    pub probe: String,
    pub agent: String,
    pub turn: u64,
    pub error: String,
}

/// A run's probes and what they need to ask.
pub(crate) struct Prober {
    scenario: Arc<Scenario>,
    env: Addr<EnvironmentActor>,
    llm: LlmClient,
    counter: Arc<dyn TokenCounter>,
    seed: u64,
    /// `probes.jsonl`, when the run has a folder.
    log: Option<TranscriptWriter>,
    /// How many times each probe has been asked.
    askings: HashMap<String, u64>,
    /// Every answer so far, as `probes.jsonl` holds them.
    answers: Vec<ProbeLine>,
    failures: Vec<ProbeFailure>,
}

/// The moment of the run a probe is asked at.
#[derive(Debug, Clone)]
pub(super) struct Moment {
    pub turn: u64,
    pub state: String,
    pub world: Option<Arc<WorldView>>,
}

/// One agent's asking, ready to go outside the actor: its call numbered here, in the
/// askings' order, so the numbers do not depend on which answer comes first.
struct Asking {
    probe: String,
    spec: ProbeSpec,
    when: String,
    asking: u64,
    agent: String,
    /// The state and role the agent speaks as: the role it plays where the run is,
    /// else its first.
    state: String,
    role: String,
    /// One call's context, or one per item of an instrument.
    contexts: Vec<crate::llm::CallContext>,
}

impl Prober {
    pub(crate) fn new(
        scenario: Arc<Scenario>,
        env: Addr<EnvironmentActor>,
        llm: LlmClient,
        counter: Arc<dyn TokenCounter>,
        seed: u64,
        log: Option<TranscriptWriter>,
    ) -> Self {
        Self {
            scenario,
            env,
            llm,
            counter,
            seed,
            log,
            askings: HashMap::new(),
            answers: Vec::new(),
            failures: Vec::new(),
        }
    }

    /// Whether any probe is due at `occasion`.
    pub(super) fn due(&self, occasion: Occasion<'_>) -> bool {
        !probes::due(&self.scenario.probes, occasion).is_empty()
    }

    /// The askings of the probes due at `occasion`, each agent's in the scenario's
    /// order; each probe's count of askings moves on.
    fn askings(&mut self, occasion: Occasion<'_>, moment: &Moment) -> Vec<Asking> {
        let mut out = Vec::new();
        for (name, when) in probes::due(&self.scenario.probes, occasion) {
            let spec = &self.scenario.probes[name];
            let asking = self.askings.entry(name.to_string()).or_default();
            let everyone = probes::asked(&self.scenario, &spec.ask);
            for agent in probes::sampled(&everyone, spec.ask.sample, self.seed, name, *asking) {
                let plays = &self.scenario.agents[&agent].roles;
                let Some((state, role)) = plays
                    .get_key_value(&moment.state)
                    .or_else(|| plays.first())
                    .map(|(s, r)| (s.clone(), r.clone()))
                else {
                    continue;
                };
                let calls = match spec.answer {
                    AnswerForm::SvoSlider {} => probes::svo::ITEMS.len(),
                    _ => 1,
                };
                let contexts = (0..calls)
                    .map(|_| {
                        self.llm.context(
                            CallKind::Probe,
                            &moment.state,
                            moment.turn,
                            Some((&agent, &role)),
                        )
                    })
                    .collect();
                out.push(Asking {
                    probe: name.to_string(),
                    spec: spec.clone(),
                    when: when.clone(),
                    asking: *asking,
                    agent,
                    state,
                    role,
                    contexts,
                });
            }
            *asking += 1;
        }
        out
    }

    /// Asks the probes due at `occasion` of `moment`: every answer as a line, in the
    /// order the askings were made (the calls themselves run at once).
    pub(super) fn ask(
        &mut self,
        occasion: Occasion<'_>,
        moment: Moment,
    ) -> impl std::future::Future<Output = Vec<Result<ProbeLine, ProbeFailure>>> + 'static {
        let askings = self.askings(occasion, &moment);
        let shared = Shared {
            scenario: self.scenario.clone(),
            env: self.env.clone(),
            llm: self.llm.clone(),
            counter: self.counter.clone(),
            seed: self.seed,
            moment: Arc::new(moment),
        };
        async move {
            let asked = askings.into_iter().map(|a| shared.clone().answer(a));
            futures::future::join_all(asked).await
        }
    }

    /// Keeps what a round of askings gave: answers appended to `probes.jsonl`,
    /// failures listed. A failed write stops the run, as the transcript's does.
    pub(super) fn record(
        &mut self,
        answers: Vec<Result<ProbeLine, ProbeFailure>>,
    ) -> Result<(), SimError> {
        for answer in answers {
            match answer {
                Ok(line) => {
                    if let Some(log) = &mut self.log {
                        log.append(&line)?;
                    }
                    self.answers.push(line);
                }
                Err(failure) => self.failures.push(failure),
            }
        }
        Ok(())
    }

    /// What the probes answered, cost and which failed, for the run's outcome.
    pub(super) fn summary(&mut self) -> ProbesSummary {
        let ledger = self.llm.ledger_totals();
        ProbesSummary {
            calls: ledger.calls(),
            prompt_tokens: ledger.prompt_tokens(),
            completion_tokens: ledger.completion_tokens(),
            ledger,
            failed: self.failures.clone(),
            answers: std::mem::take(&mut self.answers),
        }
    }
}

/// `summary.json`'s `probes`: their calls and tokens, counted apart from the run's.
#[derive(Debug, Clone, Default)]
pub(crate) struct ProbesSummary {
    pub calls: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// The probes' calls by kind and model, for their cost.
    pub ledger: crate::llm::Ledger,
    pub failed: Vec<ProbeFailure>,
    pub answers: Vec<ProbeLine>,
}

/// What every asking of one occasion shares.
#[derive(Clone)]
struct Shared {
    scenario: Arc<Scenario>,
    env: Addr<EnvironmentActor>,
    llm: LlmClient,
    counter: Arc<dyn TokenCounter>,
    seed: u64,
    moment: Arc<Moment>,
}

impl Shared {
    async fn answer(self, a: Asking) -> Result<ProbeLine, ProbeFailure> {
        let failed = |error: String| ProbeFailure {
            probe: a.probe.clone(),
            agent: a.agent.clone(),
            turn: self.moment.turn,
            error,
        };
        let obs = self
            .env
            .send(Observe(Some(a.agent.clone())))
            .await
            .map_err(|e| failed(e.to_string()))?;
        let scenario = &self.scenario;
        let agent = &scenario.agents[&a.agent];
        let (state_name, role) = (&a.state, &a.role);
        let plain = &scenario.sop.states[state_name];
        let index = scenario.agents.get_index_of(&a.agent).map(|i| i as u32);
        let shown = match &self.moment.world {
            Some(view) => sopsim_core::world::view::render_state(state_name, plain, view, index)
                .map_err(|e| failed(e.to_string()))?,
            None => None,
        };
        let state = shown.as_ref().unwrap_or(plain);
        let question = match &self.moment.world {
            Some(view) => sopsim_core::world::view::render(&a.spec.question, view, index, &[])
                .map_err(&failed)?
                .into_owned(),
            None => a.spec.question.clone(),
        };
        let options = a.spec.answer.options();
        let order = match a.spec.answer.shuffled() {
            true => probes::shown_order(self.seed, &a.probe, &a.agent, options.len()),
            false => (0..options.len()).collect(),
        };
        let shown_options: Vec<String> = order.iter().map(|&i| options[i].clone()).collect();
        let number = match &a.spec.answer {
            AnswerForm::Number { min, max, .. } => Some((*min, *max)),
            _ => None,
        };
        let who = Persona {
            name: &a.agent,
            role,
            agent,
        };
        let mut settings = scenario.settings_for(state_name, Some(role), Some(&a.agent));
        if let Some(own) = &a.spec.llm {
            settings = own.over(&settings);
        }
        if let AnswerForm::Text { max_tokens } = &a.spec.answer {
            settings.max_tokens = Some(max_tokens.or(settings.max_tokens).unwrap_or(120));
        }
        let ask = |question: &str, options: &[String], context: crate::llm::CallContext| {
            let assembled = prompt::probe_prompt(
                scenario,
                state,
                who,
                &obs,
                ProbePut {
                    question,
                    options,
                    number,
                },
                self.counter.as_ref(),
            );
            let request = match options.is_empty() {
                true => LlmRequest::chat(assembled.messages, settings.clone(), context),
                false => LlmRequest::choice(
                    assembled.messages,
                    options.to_vec(),
                    settings.clone(),
                    context,
                ),
            };
            let llm = self.llm.clone();
            async move { llm.call(request, None).await }
        };
        if let AnswerForm::SvoSlider {} = a.spec.answer {
            let mut positions = Vec::new();
            for (item, context) in a.contexts.iter().enumerate() {
                let put = format!(
                    "{question}\n\nItem {} of {}: how would you divide the money?",
                    item + 1,
                    a.contexts.len()
                );
                let offered = probes::svo::options(item);
                let completion = ask(&put, &offered, context.clone())
                    .await
                    .map_err(|e| failed(sopsim_core::error_chain::chain(&e)))?;
                let chosen = completion.chosen.ok_or_else(|| {
                    failed(format!("no allocation was read for item {}", item + 1))
                })?;
                positions.push(chosen.index);
            }
            let angle = probes::svo::angle(&positions)
                .ok_or_else(|| failed("the items were not all answered".into()))?;
            return Ok(ProbeLine {
                probe: a.probe,
                agent: a.agent,
                when: a.when,
                asking: a.asking,
                turn: self.moment.turn,
                round: self.moment.world.as_ref().map(|v| v.rounds),
                state: self.moment.state.clone(),
                answer: probes::svo::category(angle).to_string(),
                value: Some(angle),
                probabilities: None,
                shown: None,
                items: Some(positions),
            });
        }
        let context = a
            .contexts
            .first()
            .cloned()
            .ok_or_else(|| failed("no call".into()))?;
        let completion = ask(&question, &shown_options, context)
            .await
            .map_err(|e| failed(sopsim_core::error_chain::chain(&e)))?;
        let mut line = ProbeLine {
            probe: a.probe,
            agent: a.agent,
            when: a.when,
            asking: a.asking,
            turn: self.moment.turn,
            round: self.moment.world.as_ref().map(|v| v.rounds),
            state: self.moment.state.clone(),
            answer: completion.text.trim().to_string(),
            value: None,
            probabilities: None,
            shown: a.spec.answer.shuffled().then(|| order.clone()),
            items: None,
        };
        if let Some(chosen) = completion.chosen {
            // Back from the order shown to the question's.
            let picked = order.get(chosen.index).copied();
            line.answer = picked.map_or(String::new(), |i| options[i].clone());
            line.value = match (&a.spec.answer, picked) {
                (AnswerForm::Number { .. }, Some(i)) => options[i].parse().ok(),
                (_, Some(i)) => Some(i as f64),
                _ => None,
            };
            line.probabilities = chosen.probabilities.map(|p| {
                let mut by_option = vec![0.0; options.len()];
                for (shown_at, q) in p.into_iter().enumerate() {
                    if let Some(&i) = order.get(shown_at) {
                        by_option[i] = q;
                    }
                }
                options.iter().cloned().zip(by_option).collect()
            });
        }
        Ok(line)
    }
}
