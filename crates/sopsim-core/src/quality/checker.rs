//! [`Checker`]: a run's reply quality as it goes — what its agents were shown, each
//! committed reply's flaws and the run's figures, what a flawed reply is drawn again
//! for, and the flaw a reply being drawn already has for certain (`settled.rs`).

use std::sync::Arc;

use rustc_hash::FxHashSet;

use super::labels::{has_label, is_narration, is_report, names_itself};
use super::paraphrase::RestatementCheck;
use super::words::{gram_hashes, shared_span, words};
use super::*;
use crate::memory::Message;

/// A run's reply quality as it goes: what was said so far, and the replies' figures.
#[derive(Debug, Clone, Default)]
pub struct Checker {
    instructions: Instructions,
    seen: FxHashSet<u64>,
    /// The latest messages' words, when replies are judged for paraphrases.
    restatements: Option<RestatementCheck>,
    /// The participants' stakes embedded, when replies are checked against them.
    stakes: Option<Arc<Stakes>>,
    bigrams: FxHashSet<u64>,
    bigram_total: u64,
    counts: Counts,
}

#[derive(Debug, Clone, Copy, Default)]
struct Counts {
    replies: u64,
    copy: u64,
    label: u64,
    narration: u64,
    echo: u64,
    empty: u64,
    cut: u64,
    stage: u64,
    impersonation: u64,
    foreign: u64,
    paraphrase: u64,
    off_stake: u64,
    refusal: u64,
}

impl Checker {
    /// A checker for a run with `instructions`, which has seen nothing yet.
    pub fn new(instructions: Instructions) -> Self {
        Self {
            instructions,
            ..Self::default()
        }
    }

    /// Also counts replies that restate one of the messages before them.
    pub fn counting_paraphrases(mut self) -> Self {
        self.restatements = Some(RestatementCheck::default());
        self
    }

    /// Also checks replies against the participants' stakes (see [`Stakes`]).
    pub fn with_stakes(mut self, stakes: Arc<Stakes>) -> Self {
        self.stakes = Some(stakes);
        self
    }

    /// What is wrong with `text` as `speaker`'s next reply, against what was said so
    /// far; `vector` is its embedding, when replies are checked against stakes. A
    /// paraphrase is found only as a reply is recorded.
    pub fn flaws(&self, speaker: &str, text: &str, vector: Option<&[f32]>) -> Flaws {
        self.flaws_in(speaker, text, &words(text), vector)
    }

    /// [`flaws`](Self::flaws), with the text's words hashed.
    fn flaws_in(&self, speaker: &str, text: &str, w: &[u64], vector: Option<&[f32]>) -> Flaws {
        let copy = gram_hashes(w, COPY_WORDS).any(|h| self.seen.contains(&h));
        let echo = gram_hashes(w, ECHO_WORDS).any(|h| self.instructions.grams.contains(&h));
        let names = self.instructions.names_in(text);
        let lead_grams = &self.instructions.lead_grams;
        Flaws {
            copy,
            echo,
            label: self.carries_label(text, speaker, &names),
            narration: is_narration(text, speaker)
                || names_itself(text, speaker)
                || is_report(text, names.iter().copied().filter(|n| *n != speaker)),
            empty: w.len() < EMPTY_WORDS
                || (!self.instructions.roster.is_empty()
                    && w.iter().all(|h| self.instructions.roster.contains(h))),
            cut: !crate::sentence::ends_sentence(text),
            stage: voice::has_direction(text, |head| {
                gram_hashes(&words(head), 3).any(|h| lead_grams.contains(&h))
            }),
            impersonation: voice::speaks_as_other(text, speaker, names.iter().copied()),
            foreign: voice::has_foreign(text, &self.instructions.scripts),
            refusal: voice::refusal(text).is_some(),
            off_stake: self
                .instructions
                .sides
                .get(speaker)
                .is_some_and(|side| side::contradicts(text, side))
                || match (&self.stakes, vector) {
                    (Some(s), Some(v)) => s.strays(speaker, v),
                    _ => false,
                },
        }
    }

    /// Whether `text`, said by `speaker`, opens with its own label or carries another
    /// participant's (of `names`, those it may hold) or a role's.
    fn carries_label(&self, text: &str, speaker: &str, names: &[&str]) -> bool {
        has_label(text, speaker, true)
            || names
                .iter()
                .any(|n| *n != speaker && has_label(text, n, false))
            || self
                .instructions
                .roles
                .iter()
                .any(|r| has_label(text, r, false))
    }

    /// The first flaw `text` would be drawn again for as `speaker`'s reply, with what
    /// to steer away from: the copied or echoed words, or the label it carries. No
    /// flaw a reply is drawn again for needs its embedding, so none is asked for.
    pub fn redraw(&self, speaker: &str, text: &str) -> Option<(RedrawCause, String)> {
        let cause = self.flaws(speaker, text, None).redraw_cause()?;
        Some((cause, self.avoid(speaker, text, cause)))
    }

    /// What a draw of `speaker`'s reply drawn again for `cause` steers away from, as
    /// `text` shows it: the copied or echoed words, the label it carries, the name it
    /// narrated with, its leading line or its refusal (empty when there is nothing to
    /// name).
    pub fn avoid(&self, speaker: &str, text: &str, cause: RedrawCause) -> String {
        let avoid = match cause {
            RedrawCause::Copy => shared_span(text, &self.seen, COPY_WORDS),
            RedrawCause::Echo => shared_span(text, &self.instructions.grams, ECHO_WORDS),
            RedrawCause::Label => self
                .instructions
                .names_in(text)
                .into_iter()
                .find(|n| has_label(text, n, *n == speaker))
                .or_else(|| {
                    let mut roles = self.instructions.roles.iter().map(String::as_str);
                    roles.find(|r| has_label(text, r, false))
                })
                .map(|n| format!("{n}:")),
            // The name it opened with, as written.
            RedrawCause::Narration => Some(speaker.to_string()),
            // The leading line, as written.
            RedrawCause::Stage => text.trim_start().lines().next().map(str::to_string),
            RedrawCause::Refusal => voice::refusal(text).map(str::to_string),
            RedrawCause::Empty | RedrawCause::Impersonation | RedrawCause::Foreign => None,
        };
        avoid.unwrap_or_default()
    }

    /// Takes in an earlier message the next reply must not copy, without judging it
    /// (what an agent was shown).
    pub fn see(&mut self, m: &Message) {
        if !m.kind.is_tool() {
            let grams = self.instructions.copy_grams.of(&m.content, None);
            self.seen.extend(grams.iter().copied());
        }
    }

    /// Takes in the next message of the run: a reply is judged, then every message but
    /// a tool line becomes something later replies may copy or restate. `vector` is the
    /// reply's embedding when replies are checked against stakes.
    pub fn record(&mut self, m: &Message, vector: Option<&[f32]>) {
        if m.kind.is_tool() {
            return;
        }
        let is_reply = m.kind == MessageKind::Reply;
        let w = (is_reply || self.restatements.is_some()).then(|| words(&m.content));
        let restates = match (&mut self.restatements, &w) {
            (Some(r), Some(w)) => r.add(w, is_reply),
            _ => false,
        };
        if let Some(w) = w.as_ref().filter(|_| is_reply) {
            let f = self.flaws_in(&m.name, &m.content, w, vector);
            let c = &mut self.counts;
            c.replies += 1;
            c.copy += u64::from(f.copy);
            c.label += u64::from(f.label);
            c.narration += u64::from(f.narration);
            c.echo += u64::from(f.echo);
            c.empty += u64::from(f.empty);
            c.cut += u64::from(f.cut);
            c.stage += u64::from(f.stage);
            c.impersonation += u64::from(f.impersonation);
            c.foreign += u64::from(f.foreign);
            c.paraphrase += u64::from(restates);
            c.off_stake += u64::from(f.off_stake);
            c.refusal += u64::from(f.refusal);
            for pair in gram_hashes(w, 2) {
                self.bigram_total += 1;
                self.bigrams.insert(pair);
            }
        }
        let grams = self.instructions.copy_grams.of(&m.content, w.as_deref());
        self.seen.extend(grams.iter().copied());
    }

    /// The run's reply quality so far, as `summary.json` holds it.
    pub fn summary(&self) -> ReplyQuality {
        let c = self.counts;
        let rate = |n: u64| (c.replies > 0).then(|| n as f64 / c.replies as f64);
        let paraphrase = self.restatements.is_some().then_some(c.paraphrase);
        let measured = self.stakes.as_ref().is_some_and(|s| !s.is_empty())
            || !self.instructions.sides.is_empty();
        let off_stake = measured.then_some(c.off_stake);
        ReplyQuality {
            replies: c.replies,
            copy: c.copy,
            label: c.label,
            narration: c.narration,
            echo: c.echo,
            empty: c.empty,
            cut: c.cut,
            stage: c.stage,
            impersonation: c.impersonation,
            foreign: c.foreign,
            paraphrase,
            off_stake,
            refusal: c.refusal,
            rates: QualityRates {
                copy: rate(c.copy),
                label: rate(c.label),
                narration: rate(c.narration),
                echo: rate(c.echo),
                empty: rate(c.empty),
                cut: rate(c.cut),
                stage: rate(c.stage),
                impersonation: rate(c.impersonation),
                foreign: rate(c.foreign),
                paraphrase: paraphrase.and_then(rate),
                off_stake: off_stake.and_then(rate),
                refusal: rate(c.refusal),
            },
            distinct_2: (self.bigram_total > 0)
                .then(|| self.bigrams.len() as f64 / self.bigram_total as f64),
        }
    }

    /// The flaw `partial`, the start of `speaker`'s reply as drawn so far, has whatever
    /// follows it: the whole reply would be drawn again for it. `None` when nothing is
    /// settled yet.
    pub fn settled_flaw(&self, speaker: &str, partial: &str) -> Option<RedrawCause> {
        let text = super::settled::settled_part(partial)?;
        let w = words(text);
        let names = self.instructions.names_in(text);
        let settled = Flaws {
            copy: gram_hashes(&w, COPY_WORDS).any(|h| self.seen.contains(&h)),
            echo: gram_hashes(&w, ECHO_WORDS).any(|h| self.instructions.grams.contains(&h)),
            label: self.carries_label(text, speaker, &names),
            refusal: voice::refusal(text).is_some(),
            stage: voice::opens_as_direction(text),
            foreign: voice::has_foreign(text, &self.instructions.scripts),
            ..Flaws::default()
        };
        settled.redraw_cause()
    }
}
