//! What the worker does with a step's logits: a reply's next token (or a check of its
//! drafts), a choice's next question, and each finished reply or choice sent back.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use sopsim_infer::sampling::draw;
use tokio::sync::oneshot;

use super::sequence::{Phase, Seq, Text, Who};
use super::speculate::SpecStats;
use super::text_stream::stop_position;
use crate::{ChoiceMethod, Chosen, Completion, LlmError, Usage};

/// What turning a step's logits into tokens needs of the worker: the tokenizer and its
/// special tokens, whether end of text is ignored, and the model as answers and errors
/// name it.
pub(super) struct Decoder<'w> {
    pub text: &'w Text,
    pub ignore_eos: bool,
    pub who: &'w Who,
}

impl Decoder<'_> {
    /// Moves a sequence on after a step. `Ok(false)`: it has answered and is done.
    pub(super) fn advance(&self, seq: &mut Seq, logits: Vec<Vec<f32>>) -> Result<bool, LlmError> {
        if seq.cache.len() < seq.prompt.len() {
            return Ok(true);
        }
        // After the last prompt row, its logits open the reply or answer the root
        // question.
        let mut logits = logits.into_iter();
        match &mut seq.phase {
            Phase::Reply(reply) if reply.spec.as_ref().is_some_and(|s| !s.drafted.is_empty()) => {
                self.verify_drafts(seq, logits.collect())
            }
            Phase::Reply(reply) => {
                let Some(mut l) = logits.next() else {
                    return Ok(true);
                };
                if let Some(m) = reply.matcher.as_deref_mut() {
                    super::constrain::mask(m, &mut l).map_err(|e| {
                        self.who
                            .error(format!("decoding under the decision's schema: {e}"))
                    })?;
                }
                if reply.generated.len() < reply.min_tokens {
                    for &stop in &self.text.special.stop_ids {
                        if let Some(logit) = l.get_mut(stop as usize) {
                            *logit = f32::NEG_INFINITY;
                        }
                    }
                }
                let next = reply.sampler.sample(&mut l, &reply.context);
                let done = self.text.special.stop_ids.contains(&next) && !self.ignore_eos;
                if let Some(m) = reply.matcher.as_deref_mut() {
                    let complete = super::constrain::consume(m, next).map_err(|e| {
                        self.who
                            .error(format!("decoding under the decision's schema: {e}"))
                    })?;
                    // The schema is complete: nothing more may follow.
                    if complete && !done {
                        reply.generated.push(next);
                        reply
                            .text
                            .push(&self.text.tokenizer, &reply.generated)
                            .map_err(|e| self.who.failed("decoding the reply", e))?;
                        return self.finish_reply(seq);
                    }
                }
                if done {
                    return self.finish_reply(seq);
                }
                self.take_token(seq, next)
            }
            Phase::Choice(choice) => {
                if let Some(answer) = logits.next() {
                    choice.answers.push(answer);
                }
                if choice.answers.len() < choice.questions.len() {
                    return Ok(true);
                }
                self.finish_choice(seq)
            }
        }
    }

    /// Takes the reply's next token (not an end of text): its text is streamed unless a
    /// stop sequence, a sentence end near the budget or the hard cap ends the reply.
    /// `Ok(false)`: the reply is finished.
    fn take_token(&self, seq: &mut Seq, next: u32) -> Result<bool, LlmError> {
        let Phase::Reply(reply) = &mut seq.phase else {
            return Ok(false);
        };
        reply.generated.push(next);
        reply.context.push(next);
        let piece = reply
            .text
            .push(&self.text.tokenizer, &reply.generated)
            .map_err(|e| self.who.failed("decoding the reply", e))?;
        if let Some((cut, stop)) = stop_position(reply.text.full(), &reply.stops) {
            reply.text.truncate(cut);
            reply.stopped_at = Some(stop);
            return self.finish_reply(seq);
        }
        if let Some(cause) = reply
            .screen
            .as_mut()
            .and_then(|s| s.next(reply.text.full()))
        {
            reply.abandoned = Some(cause);
            return self.finish_reply(seq);
        }
        if let Some(soft) = reply.soft {
            let text = reply.text.full();
            if reply.generated.len() + 1 == soft {
                // A sentence may end right at the soft budget.
                reply.look_from = text.len().saturating_sub(4);
            }
            if reply.generated.len() >= soft {
                if let Some(end) = sopsim_core::sentence::first_end(text, reply.look_from) {
                    reply.text.truncate(end);
                    return self.finish_reply(seq);
                }
            }
        }
        if let (Some(sink), false) = (&seq.job.stream, piece.is_empty()) {
            sink(&piece);
        }
        if reply.generated.len() < reply.max_tokens {
            return Ok(true);
        }
        self.finish_reply(seq)
    }

    /// The model's check of a reply's drafts: `logits` after the last kept token and
    /// after each draft. Drafts are kept by the rejection rule until one is not, which
    /// the model's own draw replaces; when all are kept, the model draws one more.
    fn verify_drafts(&self, seq: &mut Seq, logits: Vec<Vec<f32>>) -> Result<bool, LlmError> {
        let Phase::Reply(reply) = &mut seq.phase else {
            return Ok(false);
        };
        let Some(mut spec) = reply.spec.take() else {
            return Ok(true);
        };
        let k = spec.drafted.len();
        // The cache as it was before this pass: the pass added the last kept token and
        // the drafts.
        let base = seq.cache.len() - (k + 1);
        let mut accepted = 0;
        for (i, mut l) in logits.into_iter().enumerate().take(k + 1) {
            let Phase::Reply(reply) = &mut seq.phase else {
                break;
            };
            if reply.generated.len() < reply.min_tokens {
                for &stop in &self.text.special.stop_ids {
                    if let Some(logit) = l.get_mut(stop as usize) {
                        *logit = f32::NEG_INFINITY;
                    }
                }
            }
            let p = reply.sampler.distribution(&mut l, &reply.context);
            let (token, kept) = match spec.drafted.get(i) {
                Some(&d) => match reply.sampler.verify(&p, &spec.q[i], d) {
                    Ok(()) => (d, true),
                    Err(t) => (t, false),
                },
                None => (reply.sampler.draw_from(&p), false),
            };
            accepted += usize::from(kept);
            // What this check did so far, told if the reply ends now.
            reply.spec_stats = SpecStats {
                checks: spec.stats.checks + 1,
                drafted: spec.stats.drafted + k as u64,
                accepted: spec.stats.accepted + accepted as u64,
            };
            let done = self.text.special.stop_ids.contains(&token) && !self.ignore_eos;
            let going = !done && self.take_token(seq, token)?;
            if !going {
                spec.settle(accepted);
                if let Phase::Reply(reply) = &mut seq.phase {
                    reply.spec = Some(spec);
                }
                return if done {
                    self.finish_reply(seq)
                } else {
                    Ok(false)
                };
            }
            if !kept {
                break;
            }
        }
        seq.cache.truncate(base + 1 + accepted);
        spec.settle(accepted);
        if let Phase::Reply(reply) = &mut seq.phase {
            reply.spec = Some(spec);
        }
        Ok(true)
    }

    pub(super) fn finish_reply(&self, seq: &mut Seq) -> Result<bool, LlmError> {
        let Phase::Reply(reply) = &mut seq.phase else {
            return Ok(false);
        };
        if let Some(sink) = &seq.job.stream {
            let rest = reply.text.unsent();
            if !rest.is_empty() {
                sink(&rest);
            }
        }
        let completion = Completion {
            tool_calls: Vec::new(),
            model: self.who.0.clone(),
            text: reply.text.full().trim().to_string(),
            usage: Usage {
                prompt_tokens: seq.prompt.len() as u64,
                completion_tokens: reply.generated.len() as u64,
                cached_prompt_tokens: seq.cached as u64,
                estimated: false,
                implausible: false,
                draft_checks: reply.spec_stats.checks,
                drafted_tokens: reply.spec_stats.drafted,
                accepted_drafts: reply.spec_stats.accepted,
                thinking_tokens: reply.text.thinking_tokens(reply.generated.len()) as u64,
            },
            stopped_at: reply.stopped_at.take(),
            chosen: None,
            settings_unsent: false,
            abandoned: reply.abandoned.take(),
        };
        // The generated tokens stay in the cache: their keys and values are what a
        // later prompt holding them would compute.
        let (tx, _) = oneshot::channel();
        let reply_to = std::mem::replace(&mut seq.job.reply, tx);
        let _ = reply_to.send(Ok(completion));
        Ok(false)
    }

    fn finish_choice(&self, seq: &mut Seq) -> Result<bool, LlmError> {
        let Phase::Choice(choice) = &mut seq.phase else {
            return Ok(false);
        };
        let req = &seq.job.request;
        let options = req.options.clone().unwrap_or_default();
        let probabilities = choice.trie.probabilities(&choice.answers);
        let index = pick(
            &probabilities,
            req.settings.temperature.unwrap_or(0.0),
            choice.seed,
        );
        seq.cache.truncate(seq.prompt.len());
        let completion = Completion {
            tool_calls: Vec::new(),
            model: self.who.0.clone(),
            text: options.get(index).cloned().unwrap_or_default(),
            usage: Usage {
                prompt_tokens: seq.prompt.len() as u64,
                completion_tokens: choice.option_tokens,
                cached_prompt_tokens: seq.cached as u64,
                estimated: false,
                ..Usage::default()
            },
            stopped_at: None,
            chosen: Some(Chosen {
                index,
                probabilities: Some(probabilities),
                method: ChoiceMethod::Logits,
            }),
            settings_unsent: false,
            abandoned: None,
        };
        let (tx, _) = oneshot::channel();
        let reply_to = std::mem::replace(&mut seq.job.reply, tx);
        let _ = reply_to.send(Ok(completion));
        Ok(false)
    }
}

/// The option drawn from `probabilities` at `temperature` (0: the most probable).
fn pick(probabilities: &[f64], temperature: f32, seed: u64) -> usize {
    // NaN counts as zero: the most probable.
    if temperature.is_nan() || temperature <= 0.0 {
        let mut best = 0;
        for (i, p) in probabilities.iter().enumerate() {
            if *p > probabilities[best] {
                best = i;
            }
        }
        return best;
    }
    let t = f64::from(temperature);
    let weights: Vec<f64> = probabilities.iter().map(|p| p.powf(1.0 / t)).collect();
    draw(&weights, &mut ChaCha8Rng::seed_from_u64(seed))
}
