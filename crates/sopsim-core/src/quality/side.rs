//! Which side a speaker says it takes: "I am for the ban", "we're against the
//! proposal", "I don't support the plan". A stake that opens with such a sentence
//! fixes its speaker's side, and a reply that declares the other side of the same
//! thing ("I am not for the ban" from the ban's doctor) has crossed the floor, which
//! sentence embeddings cannot see: "I am for the ban" and "I am not for the ban" are
//! near neighbours to MiniLM.

/// A declared side: for or against, and the first words of what it is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Side {
    pub for_it: bool,
    pub object: Vec<String>,
}

/// Words of what a side is about that are compared ("the ban", "the proposal").
const OBJECT_WORDS: usize = 2;

/// The side the first sentence of `stake` declares, if it declares one.
pub(super) fn of_stake(stake: &str) -> Option<Side> {
    let first = stake.split(['.', '!', '?', ';', '\n']).next()?;
    sides_in(first).into_iter().next()
}

/// Whether `reply` declares the side opposite to `side` on the same thing.
pub(super) fn contradicts(reply: &str, side: &Side) -> bool {
    reply
        .split(['.', '!', '?', ';', '\n', ','])
        .flat_map(sides_in)
        .any(|s| s.object == side.object && s.for_it != side.for_it)
}

/// Every side declared in `clause`, in the first person.
fn sides_in(clause: &str) -> Vec<Side> {
    let words: Vec<String> = clause
        .split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '’'))
        .filter(|w| !w.is_empty())
        .map(|w| w.to_lowercase().replace('’', "'"))
        .collect();
    let mut found = Vec::new();
    for start in 0..words.len() {
        if let Some(side) = side_at(&words[start..]) {
            found.push(side);
        }
    }
    found
}

/// A side declared by the words from here on: a first-person subject, a verb of
/// taking sides with its negation, then what the side is about.
fn side_at(words: &[String]) -> Option<Side> {
    let w = |i: usize| words.get(i).map_or("", String::as_str);
    let (mut i, mut be) = match w(0) {
        "i" | "we" => (1, false),
        "i'm" | "we're" => (1, true),
        _ => return None,
    };
    if !be && matches!(w(i), "am" | "are") {
        be = true;
        i += 1;
    }
    let mut negated = false;
    match (be, w(i), w(i + 1)) {
        (true, "not", _) | (false, "don't" | "cannot" | "can't" | "won't", _) => {
            negated = true;
            i += 1;
        }
        (false, "do", "not") => {
            negated = true;
            i += 2;
        }
        // "I do support …"
        (false, "do", _) => i += 1,
        _ => {}
    }
    let (for_it, length) = match (be, w(i), w(i + 1)) {
        (true, "for", _) => (true, 1),
        (true, "against", _) => (false, 1),
        (true, "in", "favour" | "favor") if w(i + 2) == "of" => (true, 3),
        (true, "opposed", "to") => (false, 2),
        (false, "support" | "back" | "favour" | "favor", _) => (true, 1),
        (false, "oppose", _) => (false, 1),
        _ => return None,
    };
    let object: Vec<String> = words[(i + length).min(words.len())..]
        .iter()
        .take(OBJECT_WORDS)
        .cloned()
        .collect();
    (object.len() == OBJECT_WORDS).then_some(Side {
        for_it: for_it != negated,
        object,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(for_it: bool, object: &str) -> Side {
        Side {
            for_it,
            object: object.split(' ').map(str::to_string).collect(),
        }
    }

    #[test]
    fn a_stake_declares_its_side_in_its_first_sentence() {
        assert_eq!(
            of_stake("I am for the ban. I am a doctor."),
            Some(side(true, "the ban"))
        );
        assert_eq!(
            of_stake("I'm against the proposal: my shop needs it."),
            Some(side(false, "the proposal"))
        );
        assert_eq!(
            of_stake("We are opposed to the plan, all of us."),
            Some(side(false, "the plan"))
        );
        assert_eq!(
            of_stake("I don't support the closure, as a mother."),
            Some(side(false, "the closure"))
        );
        assert_eq!(of_stake("I take no side. I keep the debate fair."), None);
        assert_eq!(
            of_stake("My mother cannot walk far. I am for the ban."),
            None
        );
    }

    #[test]
    fn a_reply_declaring_the_other_side_of_the_same_thing_contradicts() {
        let for_ban = side(true, "the ban");
        for reply in [
            "Thank you. I am not for the ban, because my street was quiet.",
            "I'm against the ban.",
            "Frankly, we oppose the ban, and so should you.",
            "I do not support the ban",
        ] {
            assert!(contradicts(reply, &for_ban), "{reply}");
        }
        for reply in [
            "I am for the ban because the air is cleaner.",
            "Cleo is against the ban, but she is wrong.",
            "I am against the idea that buses are slow.",
            "I do support the ban, whatever Dan says.",
            "You say I'm against the cars; I'm for the children.",
        ] {
            assert!(!contradicts(reply, &for_ban), "{reply}");
        }
    }
}
