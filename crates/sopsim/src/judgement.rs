//! Judging a finished run with a model: every item of the rubric (`judging::items`)
//! asked as a closed choice among the scale's points, each sample a call of its own,
//! through a model client whose calls are numbered and counted apart from the run's.
//! Items are asked at once (a local model batches them, and reads the transcript that
//! starts every prompt once); a failed item is listed and the others kept.

use std::path::Path;
use std::sync::Arc;

use crate::llm::{CallKind, LlmClient, LlmRequest};
use crate::scenario::judge::{rubric_of, JudgeSpec, RubricError};
use crate::scenario::Scenario;
use sopsim_core::judging::{self, Answer, ItemFailure, Judgement};
use sopsim_core::memory::Message;

/// Judges the run of `scenario` whose messages are `log`, by `spec` (its rubric file
/// read relative to `folder`), through `llm` (a client apart from the run's); `run_models`
/// are the models the run's agents spoke through.
pub(crate) async fn judge(
    scenario: &Scenario,
    spec: &JudgeSpec,
    folder: &Path,
    log: &[Arc<Message>],
    llm: LlmClient,
    run_models: Vec<String>,
) -> Result<Judgement, RubricError> {
    let rubric = rubric_of(spec, folder)?;
    let items = judging::items(&rubric, scenario);
    let transcript = judging::transcript_text(log);
    let samples = spec.samples.unwrap_or(1).max(1);
    let mut settings = scenario.llm.clone();
    if let Some(own) = &spec.llm {
        settings = own.over(&settings);
    }
    // Every call numbered now, in the items' order: the numbers (and a scripted
    // judge's answers) do not depend on which answer comes first.
    let asked: Vec<_> = items
        .iter()
        .map(|item| {
            let contexts: Vec<_> = (0..samples)
                .map(|_| llm.context(CallKind::Judge, "judge", 1, None))
                .collect();
            let messages = judging::prompt(&rubric, scenario, &transcript, item);
            (item, contexts, messages)
        })
        .collect();
    let answered =
        futures::future::join_all(asked.into_iter().map(|(item, contexts, messages)| {
            let (llm, settings) = (llm.clone(), settings.clone());
            async move {
                let mut answers = Vec::new();
                let mut model = None;
                for context in contexts {
                    let request = LlmRequest::choice(
                        messages.clone(),
                        item.options.clone(),
                        settings.clone(),
                        context,
                    );
                    match llm.call(request, None).await {
                        Ok(c) => {
                            model.get_or_insert(c.model);
                            answers.push(Answer {
                                chosen: c.chosen.as_ref().map(|c| c.index),
                                probabilities: c.chosen.and_then(|c| c.probabilities),
                                raw: c.text,
                            })
                        }
                        Err(e) => return (item, model, Err(sopsim_core::error_chain::chain(&e))),
                    }
                }
                (item, model, Ok(answers))
            }
        }))
        .await;
    // The judge's model as its answers name it, as the run's models are named.
    let judge = answered
        .iter()
        .find_map(|(_, model, _)| model.clone())
        .unwrap_or_else(|| llm.describe());
    let mut judgement = Judgement {
        rubric: rubric.name.clone(),
        source: rubric.source.clone(),
        shares_a_model: run_models.contains(&judge),
        judge,
        run_models,
        samples,
        scales: rubric
            .dimensions
            .iter()
            .map(|(k, d)| (k.clone(), [d.min, d.max]))
            .collect(),
        scores: Default::default(),
        failed: Vec::new(),
        calls: 0,
        prompt_tokens: 0,
        completion_tokens: 0,
    };
    for (item, _, answers) in answered {
        let failed = |error: String| ItemFailure {
            subject: item.subject.clone(),
            dimension: item.dimension.clone(),
            error,
        };
        match answers.map(|a| judging::score(item, &a)) {
            Ok(Some(score)) => {
                judgement
                    .scores
                    .entry(item.subject.clone())
                    .or_default()
                    .insert(item.dimension.clone(), score);
            }
            Ok(None) => judgement
                .failed
                .push(failed("no point of the scale was read".into())),
            Err(e) => judgement.failed.push(failed(e)),
        }
    }
    let ledger = llm.ledger_totals();
    judgement.calls = ledger.calls();
    judgement.prompt_tokens = ledger.prompt_tokens();
    judgement.completion_tokens = ledger.completion_tokens();
    Ok(judgement)
}
