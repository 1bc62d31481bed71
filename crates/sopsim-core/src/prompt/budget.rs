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
    /// The line shown above the section's items.
    pub header: String,
    /// The section's lines, in order.
    pub items: Vec<Item>,
    /// The lines are the conversation, sent as chat turns of their own rather than as
    /// lines of text: the speaker's own lines as its assistant turns, the others' as
    /// user turns carrying their names; the closing instructions follow in a last user
    /// turn.
    pub as_turns: bool,
}

/// One context line of a section, which may be dropped to fit the budget.
#[derive(Debug, Clone)]
pub struct Item {
    /// The line's text.
    pub text: String,
    /// Lower ranks are dropped first.
    pub drop_rank: u32,
    /// In a section sent as turns: a line of the speaker's own (its text without a
    /// label).
    pub own: bool,
}

/// A prompt before budgeting.
#[derive(Debug, Clone, Default)]
pub struct Draft {
    /// The system part's lines.
    pub system: Vec<String>,
    /// The context sections, in order.
    pub sections: Vec<Section>,
    /// The closing instructions, after the sections.
    pub tail: Vec<String>,
}

/// A prompt ready to send.
#[derive(Debug, Clone, PartialEq)]
pub struct Assembled {
    /// The messages to send, the system part first.
    pub messages: Vec<ChatMessage>,
    /// Context items left out to fit.
    pub dropped: usize,
    /// Whether fixed text had to be cut.
    pub truncated: bool,
}

impl Draft {
    /// The messages after the system part: one user message with every kept line and
    /// the closing instructions, or, with a section sent as turns, the lines before it,
    /// its turns, and the instructions in the last user turn.
    fn messages_after_system(&self, kept: &[Vec<bool>]) -> Vec<ChatMessage> {
        let Some(at) = self.sections.iter().position(|s| s.as_turns) else {
            return vec![ChatMessage::user(self.user_text(kept))];
        };
        let before = Draft {
            system: Vec::new(),
            sections: self.sections[..at].to_vec(),
            tail: Vec::new(),
        };
        let mut turns: Vec<ChatMessage> = Vec::new();
        let mut push = |m: ChatMessage| match turns.last_mut() {
            Some(last) if last.role == m.role => {
                last.content.push('\n');
                last.content.push_str(&m.content);
            }
            _ => turns.push(m),
        };
        let lead = before.user_text(&kept[..at]);
        if !lead.is_empty() {
            push(ChatMessage::user(lead));
        }
        for (item, keep) in self.sections[at].items.iter().zip(&kept[at]) {
            if *keep {
                push(if item.own {
                    ChatMessage::assistant(item.text.clone())
                } else {
                    ChatMessage::user(item.text.clone())
                });
            }
        }
        let after = Draft {
            system: Vec::new(),
            sections: self.sections[at + 1..].to_vec(),
            tail: self.tail.clone(),
        };
        let closing = after.user_text(&kept[at + 1..]);
        if !closing.is_empty() {
            push(ChatMessage::user(closing));
        }
        turns
    }

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

    /// Every context item as (drop rank, section, item), in the order they are dropped.
    fn drop_order(&self) -> Vec<(u32, usize, usize)> {
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
        order
    }

    /// The prompt within `budget` tokens: context items are dropped lowest rank first,
    /// and the fixed text is cut only if it alone is too long.
    pub fn fit(self, budget: usize, counter: &dyn TokenCounter) -> Assembled {
        let system = join(&self.system);
        let mut kept: Vec<Vec<bool>> = self
            .sections
            .iter()
            .map(|s| vec![true; s.items.len()])
            .collect();
        let mut rest = self.messages_after_system(&kept);
        if prompt_tokens(counter.at_most(&system), &rest, |t| counter.at_most(t)) <= budget {
            return Assembled::whole(system, rest, 0);
        }
        let system_tokens = counter.count(&system);
        let order = self.drop_order();
        let total = |rest: &[ChatMessage]| prompt_tokens(system_tokens, rest, |t| counter.count(t));
        // The fewest items to drop, in rank order, for the prompt to fit. Dropping an
        // item never makes the prompt longer, so the count falls as more are dropped
        // and the fewest is found by bisection: a summary over a round of thousands of
        // messages is fitted with a dozen counts, not one per message dropped.
        let keep_all_but = |k: usize, kept: &mut Vec<Vec<bool>>| {
            for keep in kept.iter_mut() {
                keep.fill(true);
            }
            for &(_, si, ii) in &order[..k] {
                kept[si][ii] = false;
            }
        };
        let mut dropped = 0;
        if total(&rest) > budget {
            let (mut lo, mut hi) = (1, order.len());
            while lo < hi {
                let mid = (lo + hi) / 2;
                keep_all_but(mid, &mut kept);
                if total(&self.messages_after_system(&kept)) <= budget {
                    hi = mid;
                } else {
                    lo = mid + 1;
                }
            }
            dropped = hi;
            keep_all_but(dropped, &mut kept);
            rest = self.messages_after_system(&kept);
        }
        if total(&rest) <= budget {
            return Assembled::whole(system, rest, dropped);
        }
        // Every line is dropped and the fixed text alone is over: one user message.
        let user = self.user_text(&kept);
        let total = |user: &str| system_tokens + counter.count(user) + 2 * MESSAGE_OVERHEAD;
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
        Assembled {
            messages: vec![ChatMessage::system(system), ChatMessage::user(user)],
            dropped,
            truncated,
        }
    }
}

impl Assembled {
    /// The system part, then `rest` untouched.
    fn whole(system: String, rest: Vec<ChatMessage>, dropped: usize) -> Self {
        let mut messages = vec![ChatMessage::system(system)];
        messages.extend(rest);
        Assembled {
            messages,
            dropped,
            truncated: false,
        }
    }
}

/// The tokens of a prompt: its system part's, and each message after it with its
/// framing, each message's as `tokens` counts them.
fn prompt_tokens(
    system_tokens: usize,
    rest: &[ChatMessage],
    tokens: impl Fn(&str) -> usize,
) -> usize {
    system_tokens
        + rest
            .iter()
            .map(|m| tokens(&m.content) + MESSAGE_OVERHEAD)
            .sum::<usize>()
        + MESSAGE_OVERHEAD
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

    /// Drops the items one at a time, in rank order, until the prompt fits: what the
    /// bisection must agree with.
    fn dropped_one_by_one(d: &Draft, budget: usize) -> usize {
        let system = Estimator.count(&join(&d.system));
        let mut kept: Vec<Vec<bool>> = d
            .sections
            .iter()
            .map(|s| vec![true; s.items.len()])
            .collect();
        let total = |kept: &[Vec<bool>]| {
            prompt_tokens(system, &d.messages_after_system(kept), |t| {
                Estimator.count(t)
            })
        };
        let mut dropped = 0;
        for (_, si, ii) in d.drop_order() {
            if total(&kept) <= budget {
                break;
            }
            kept[si][ii] = false;
            dropped += 1;
        }
        dropped
    }

    #[test]
    fn the_fewest_items_are_dropped_as_one_at_a_time_would() {
        for as_turns in [false, true] {
            let mut d = draft(300);
            d.sections[0].as_turns = as_turns;
            for (i, item) in d.sections[0].items.iter_mut().enumerate() {
                item.drop_rank = (i * 7 % 13) as u32;
                item.own = i % 3 == 0;
                item.text = item.text.repeat(1 + i % 4);
            }
            for budget in [60, 200, 700, 2_000, 5_000, 100_000] {
                let fitted = d.clone().fit(budget, &Estimator);
                assert_eq!(
                    fitted.dropped,
                    dropped_one_by_one(&d, budget),
                    "budget {budget}, turns {as_turns}"
                );
            }
        }
    }

    fn draft(n: usize) -> Draft {
        Draft {
            system: vec!["You are a careful assistant.".into()],
            sections: vec![Section {
                header: "Conversation:".into(),
                items: (0..n)
                    .map(|i| Item {
                        text: format!("message number {i} with some words"),
                        drop_rank: i as u32,
                        own: false,
                    })
                    .collect(),
                as_turns: false,
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

    /// An assembled prompt's tokens, framing included.
    fn tokens(a: &Assembled, counter: &dyn TokenCounter) -> usize {
        let system = counter.count(&a.messages[0].content);
        prompt_tokens(system, &a.messages[1..], |t| counter.count(t))
    }

    #[test]
    fn drops_oldest_first_and_never_exceeds() {
        for budget in [20, 30, 45, 60, 80] {
            let a = draft(10).fit(budget, &Estimator);
            let used = tokens(&a, &Estimator);
            assert!(used <= budget, "budget {budget}: {used} tokens");
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
        assert!(a.truncated && tokens(&a, &Estimator) <= 64);
        assert!(a.messages[1].content.ends_with("final question?"));
    }

    /// Counts a text's tokens as a word each, bounds them by its length, and tallies
    /// the counts asked of it (a tokenizer whose tables are costly to load).
    #[derive(Default)]
    struct Tallied(std::sync::atomic::AtomicUsize);

    impl TokenCounter for Tallied {
        fn count(&self, text: &str) -> usize {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            text.split_whitespace().count()
        }
        fn at_most(&self, text: &str) -> usize {
            text.len()
        }
        fn exact(&self) -> bool {
            true
        }
    }

    #[test]
    fn a_prompt_whose_bound_fits_is_not_counted() {
        let counter = Tallied::default();
        let small = draft(10);
        let bytes = small
            .clone()
            .fit(10_000, &Estimator)
            .messages
            .iter()
            .map(|m| m.content.len())
            .sum::<usize>();
        let a = small.clone().fit(bytes + 2 * MESSAGE_OVERHEAD, &counter);
        assert_eq!((a.dropped, a.truncated), (0, false));
        assert_eq!(counter.0.load(std::sync::atomic::Ordering::Relaxed), 0);
        // One byte less and the bound no longer settles it: counted, and it fits.
        let a = small.fit(bytes + 2 * MESSAGE_OVERHEAD - 1, &counter);
        assert_eq!((a.dropped, a.truncated), (0, false));
        assert!(counter.0.load(std::sync::atomic::Ordering::Relaxed) > 0);
    }
}
