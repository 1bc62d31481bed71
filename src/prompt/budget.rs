//! Fitting a prompt into a token budget.
//!
//! A prompt is fixed text (system part, closing instructions) plus droppable context
//! items grouped in sections. Items go in ascending `drop_rank` until the prompt fits;
//! if the fixed text alone is too long it is cut (the system part keeps its start, the
//! user part its end, where the question is). The result never exceeds the budget.

use super::ChatMessage;
use crate::tokens::{join_lines as join, TokenCounter, MESSAGE_OVERHEAD};

/// One group of context lines under a header; the header is shown only if a line is left.
#[derive(Debug, Clone)]
pub struct Section {
    pub header: String,
    pub items: Vec<Item>,
}

#[derive(Debug, Clone)]
pub struct Item {
    pub text: String,
    /// Lower ranks are dropped first.
    pub drop_rank: u32,
}

/// A prompt before budgeting.
#[derive(Debug, Clone, Default)]
pub struct Draft {
    pub system: Vec<String>,
    pub sections: Vec<Section>,
    pub tail: Vec<String>,
}

/// A prompt ready to send.
#[derive(Debug, Clone, PartialEq)]
pub struct Assembled {
    pub messages: Vec<ChatMessage>,
    /// Tokens by the counter used, framing included.
    pub tokens: usize,
    /// Context items left out to fit.
    pub dropped: usize,
    /// Whether fixed text had to be cut.
    pub truncated: bool,
}

impl Draft {
    fn user_text(&self, kept: &[Vec<bool>]) -> String {
        let mut parts = Vec::new();
        for (section, keep) in self.sections.iter().zip(kept) {
            let lines: Vec<&str> = section
                .items
                .iter()
                .zip(keep)
                .filter(|(_, k)| **k)
                .map(|(i, _)| i.text.as_str())
                .collect();
            if !lines.is_empty() {
                parts.push(format!("{}\n{}\n", section.header, lines.join("\n")));
            }
        }
        parts.extend(self.tail.iter().filter(|t| !t.is_empty()).cloned());
        parts.join("\n")
    }

    pub fn fit(self, budget: usize, counter: &dyn TokenCounter) -> Assembled {
        let system = join(&self.system);
        let system_tokens = counter.count(&system);
        let mut kept: Vec<Vec<bool>> = self
            .sections
            .iter()
            .map(|s| vec![true; s.items.len()])
            .collect();
        let mut order: Vec<(u32, usize, usize)> = self
            .sections
            .iter()
            .enumerate()
            .flat_map(|(si, s)| {
                s.items
                    .iter()
                    .enumerate()
                    .map(move |(ii, it)| (it.drop_rank, si, ii))
            })
            .collect();
        order.sort();
        let total = |user: &str| system_tokens + counter.count(user) + 2 * MESSAGE_OVERHEAD;
        let mut user = self.user_text(&kept);
        let mut dropped = 0;
        let mut next = order.into_iter();
        while total(&user) > budget {
            let Some((_, si, ii)) = next.next() else {
                break;
            };
            kept[si][ii] = false;
            dropped += 1;
            user = self.user_text(&kept);
        }
        let mut truncated = false;
        let (mut system, mut user) = (system, user);
        if total(&user) > budget {
            truncated = true;
            let room = budget.saturating_sub(2 * MESSAGE_OVERHEAD);
            let user_tokens = counter.count(&user);
            let user_room = user_tokens
                .min(room / 2)
                .max(room.saturating_sub(counter.count(&system)));
            user = keep_end(&user, user_room, counter);
            system = keep_start(&system, room.saturating_sub(counter.count(&user)), counter);
        }
        let tokens = counter.count(&system) + counter.count(&user) + 2 * MESSAGE_OVERHEAD;
        Assembled {
            messages: vec![ChatMessage::system(system), ChatMessage::user(user)],
            tokens,
            dropped,
            truncated,
        }
    }
}

/// Every char boundary of `text`, its end included.
fn char_bounds(text: &str) -> Vec<usize> {
    text.char_indices()
        .map(|(i, _)| i)
        .chain([text.len()])
        .collect()
}

/// The longest prefix of `text` within `max` tokens, cut at a char boundary.
fn keep_start(text: &str, max: usize, counter: &dyn TokenCounter) -> String {
    let bounds = char_bounds(text);
    let (mut lo, mut hi) = (0, bounds.len() - 1);
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if counter.count(&text[..bounds[mid]]) <= max {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    text[..bounds[lo]].to_string()
}

/// The longest suffix of `text` within `max` tokens.
fn keep_end(text: &str, max: usize, counter: &dyn TokenCounter) -> String {
    let bounds = char_bounds(text);
    let (mut lo, mut hi) = (0, bounds.len() - 1);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if counter.count(&text[bounds[mid]..]) <= max {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    text[bounds[lo]..].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::Estimator;

    fn draft(n: usize) -> Draft {
        Draft {
            system: vec!["You are a careful assistant.".into()],
            sections: vec![Section {
                header: "Conversation:".into(),
                items: (0..n)
                    .map(|i| Item {
                        text: format!("message number {i} with some words"),
                        drop_rank: i as u32,
                    })
                    .collect(),
            }],
            tail: vec!["Reply now.".into()],
        }
    }

    #[test]
    fn fits_untouched_when_small_enough() {
        let a = draft(3).fit(1000, &Estimator);
        assert_eq!((a.dropped, a.truncated), (0, false));
        assert!(a.messages[1].content.contains("message number 0"));
    }

    #[test]
    fn drops_oldest_first_and_never_exceeds() {
        for budget in [20, 30, 45, 60, 80] {
            let a = draft(10).fit(budget, &Estimator);
            assert!(a.tokens <= budget, "budget {budget}: {} tokens", a.tokens);
            let counted: usize = a
                .messages
                .iter()
                .map(|m| Estimator.count(&m.content))
                .sum::<usize>()
                + 2 * MESSAGE_OVERHEAD;
            assert_eq!(counted, a.tokens);
            if a.dropped > 0 && a.dropped < 10 {
                let user = &a.messages[1].content;
                assert!(!user.contains("message number 0 "), "oldest dropped first");
                assert!(user.contains("message number 9"), "newest kept");
            }
        }
    }

    #[test]
    fn cuts_fixed_text_when_nothing_is_left_to_drop() {
        let mut d = draft(2);
        d.system = vec!["word ".repeat(500)];
        d.tail = vec![format!("{} final question?", "tail ".repeat(100))];
        let a = d.fit(64, &Estimator);
        assert!(a.truncated && a.tokens <= 64);
        assert!(a.messages[1].content.ends_with("final question?"));
    }
}
