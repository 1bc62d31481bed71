//! The flaw a reply already has for certain while it is still being drawn, so that a
//! draw bound to be rejected stops early instead of running to its end.
//!
//! Only what no later word can take away is judged: the reply's first line (a
//! recorded reply is never cut before its second line, `crate::action`), and of it
//! only whole words. Only flaws that stay once present are looked for: a copy or an
//! echo (a run of words), a speaker label, a refusal, an action in brackets or an
//! assistant's opening, and letters of a foreign script. Narration, an empty reply, an
//! impersonation ("As Rosa" may go on "said") and the other stage directions can still
//! change with the words to come, and are left to the check of the whole reply.
//! `Checker::settled_flaw` judges the part this module finds settled.

/// The part of a reply drawn so far that no later word changes: its first line once
/// the line has ended, else its whole words (up to the last space).
pub(super) fn settled_part(partial: &str) -> Option<&str> {
    let body = partial.trim_start();
    let end = match body.find('\n') {
        Some(end) => end,
        None => body.rfind(char::is_whitespace)?,
    };
    Some(body[..end].trim_end()).filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::super::tests::{checker, msg, SAID};
    use super::super::RedrawCause;
    use crate::memory::MessageKind;

    /// Every prefix of `text` ending at a word, as a draw would show it.
    fn prefixes(text: &str) -> impl Iterator<Item = &str> {
        text.char_indices()
            .filter(|(_, c)| c.is_whitespace())
            .map(|(i, c)| &text[..i + c.len_utf8()])
            .chain(std::iter::once(text))
    }

    #[test]
    fn a_flaw_that_stays_stops_the_draw_at_the_word_that_settles_it() {
        let c = checker();
        for (text, cause, settled_at) in [
            (
                "Ben: Cars must go from the centre.",
                RedrawCause::Label,
                "Ben: ",
            ),
            (
                "I'm sorry, but I can't assist with that request.",
                RedrawCause::Refusal,
                "I'm sorry, but I can't ",
            ),
            (
                "(clears her throat) Cars must go.",
                RedrawCause::Stage,
                "(clears her throat) ",
            ),
        ] {
            let first = prefixes(text).find(|p| c.settled_flaw("Ada", p).is_some());
            assert_eq!(first, Some(settled_at), "{text}");
            assert_eq!(c.settled_flaw("Ada", text), Some(cause), "{text}");
        }
    }

    #[test]
    fn a_copy_stops_the_draw_at_its_tenth_shared_word() {
        let mut c = checker();
        c.see(&msg("Ben", MessageKind::Reply, SAID));
        let text = "Yes: car-free centres cut pollution and make the streets safe for every child.";
        let first = prefixes(text).find(|p| c.settled_flaw("Ada", p).is_some());
        assert_eq!(
            first,
            Some("Yes: car-free centres cut pollution and make the streets safe ")
        );
        assert_eq!(c.settled_flaw("Ada", text), Some(RedrawCause::Copy));
    }

    #[test]
    fn what_later_words_may_change_does_not_stop_a_draw() {
        let c = checker();
        for text in [
            // "As Ben" may go on "said"; "Ada" may go on "'s point".
            "As Ben said, the ban helps nobody.",
            "Ada's point stands: clean air first.",
            // A second line may yet be cut away as another speaker's.
            "Cars must go.\nBen: No.",
            "Short.",
        ] {
            for p in prefixes(text) {
                assert_eq!(c.settled_flaw("Ada", p), None, "{p:?} of {text:?}");
            }
        }
    }

    #[test]
    fn whatever_settles_a_flaw_the_whole_reply_is_drawn_again_for() {
        let c = checker();
        for text in [
            "Ben: Cars must go from the centre.",
            "I'm sorry, but I can't assist with that request.",
            "(clears her throat) Cars must go.",
            "Certainly! Cars must go from the centre of town.",
            "Cars must go.\nBen (Con): They must stay.",
            "As Ben, I say the ban helps nobody at all.",
        ] {
            for p in prefixes(text) {
                if c.settled_flaw("Ada", p).is_some() {
                    assert!(c.redraw("Ada", text).is_some(), "{p:?} of {text:?}");
                }
            }
        }
    }
}
