//! Reading a controller's or judge's free-text answer as one of the offered choices.
//!
//! Small local models rarely answer with the bare name, so the parser accepts, in order:
//! an `<end>…</end>` tag (the aiwaves convention), the bare choice, its number in the
//! offered list, or the earliest choice named anywhere in the text (the longest name
//! wins at the same position, so "Negative_Second" beats "Negative").

/// The index of the choice `answer` names, if it names exactly one clearly.
pub fn parse_choice(answer: &str, choices: &[String]) -> Option<usize> {
    parse_choice_in(answer, choices, "end", &[])
}

/// [`parse_choice`] with another answer tag, and `labels` (one per choice) that an answer
/// may give instead of a name; a label is matched exactly, before anything else.
pub fn parse_choice_in(
    answer: &str,
    choices: &[String],
    tag: &str,
    labels: &[String],
) -> Option<usize> {
    let text = tag_content(answer, tag).unwrap_or(answer).trim();
    if let Some(i) = labels.iter().position(|l| l == text) {
        return (i < choices.len()).then_some(i);
    }
    let numbers: Option<Vec<f64>> = choices.iter().map(|c| c.trim().parse().ok()).collect();
    let numbers = numbers.filter(|n| !n.is_empty());
    if let Some(numbers) = &numbers {
        // Options that are numbers (a range) are named by their value, sign and all,
        // never by their place in the list: "2" is not the second of 0, 5, 10, and
        // "0.5" is 0.50.
        let number = text.trim_end_matches(|c: char| c.is_ascii_punctuation() && c != '%');
        if let Ok(value) = number.trim_start_matches('+').parse::<f64>() {
            return numbers.iter().position(|n| (n - value).abs() < 1e-9);
        }
    }
    let bare = text.trim_matches(|c: char| c.is_ascii_punctuation() || c.is_whitespace());
    if let Some(i) = choices.iter().position(|c| c.eq_ignore_ascii_case(bare)) {
        return Some(i);
    }
    if numbers.is_none() {
        if let Ok(n) = bare.parse::<usize>() {
            return (n >= 1 && n <= choices.len()).then(|| n - 1);
        }
    }
    let lower = text.to_lowercase();
    choices
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            find_word(&lower, &c.to_lowercase()).map(|pos| (pos, std::cmp::Reverse(c.len()), i))
        })
        .min()
        .map(|(_, _, i)| i)
}

fn tag_content<'a>(answer: &'a str, tag: &str) -> Option<&'a str> {
    let open = format!("<{tag}>");
    let start = answer.find(&open)? + open.len();
    let len = answer[start..].find(&format!("</{tag}>"))?;
    Some(&answer[start..start + len])
}

/// Position of `needle` in `hay` as a whole word (not inside a longer identifier).
fn find_word(hay: &str, needle: &str) -> Option<usize> {
    if needle.is_empty() {
        return None;
    }
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    let mut from = 0;
    while let Some(rel) = hay[from..].find(needle) {
        let pos = from + rel;
        let end = pos + needle.len();
        let before_ok = !hay[..pos].chars().next_back().is_some_and(is_word);
        let after_ok = !hay[end..].chars().next().is_some_and(is_word);
        if before_ok && after_ok {
            return Some(pos);
        }
        from = pos + hay[pos..].chars().next().map_or(1, char::len_utf8);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_options_are_named_by_value_never_by_place() {
        let range: Vec<String> = ["0", "5", "10"].map(String::from).to_vec();
        assert_eq!(
            parse_choice("2", &range),
            None,
            "2 is not the second option"
        );
        assert_eq!(parse_choice("10", &range), Some(2));
        assert_eq!(parse_choice("I give 5.", &range), Some(1));
        let quarters: Vec<String> = ["0.00", "0.25", "0.50"].map(String::from).to_vec();
        assert_eq!(parse_choice("0.5", &quarters), Some(2));
        let signed: Vec<String> = ["-10", "-5", "0", "5", "10"].map(String::from).to_vec();
        assert_eq!(parse_choice("-5", &signed), Some(1), "the sign is kept");
        assert_eq!(parse_choice("-5.", &signed), Some(1));
        assert_eq!(parse_choice("I give -5", &signed), Some(1));
        assert_eq!(parse_choice("+5", &signed), Some(3));
        assert_eq!(
            parse_choice("2", &roles()),
            Some(1),
            "named options, by their place"
        );
    }

    fn roles() -> Vec<String> {
        ["Negative", "Negative_Second", "Judge"]
            .map(String::from)
            .to_vec()
    }

    #[test]
    fn accepts_tags_names_numbers_and_mentions() {
        assert_eq!(parse_choice("<end>Judge</end>", &roles()), Some(2));
        assert_eq!(parse_choice("  judge. ", &roles()), Some(2));
        assert_eq!(parse_choice("2", &roles()), Some(1));
        assert_eq!(
            parse_choice("I think Negative_Second should talk", &roles()),
            Some(1)
        );
        assert_eq!(parse_choice("The Judge, then Negative", &roles()), Some(2));
    }

    #[test]
    fn labels_and_other_tags_as_aiwaves_configs_use_them() {
        let choices = ["stay".to_string(), "Debate_Order_state".to_string()];
        let labels = ["0".to_string(), "1".to_string()];
        assert_eq!(
            parse_choice_in("<end>1</end>", &choices, "end", &labels),
            Some(1)
        );
        assert_eq!(parse_choice_in("0", &choices, "end", &labels), Some(0));
        assert_eq!(
            parse_choice_in("<go>stay</go>", &choices, "go", &labels),
            Some(0)
        );
        // Without labels a digit is a 1-based position.
        assert_eq!(parse_choice("1", &choices), Some(0));
    }

    #[test]
    fn rejects_answers_naming_nothing_offered() {
        assert_eq!(parse_choice("nobody", &roles()), None);
        assert_eq!(parse_choice("7", &roles()), None);
        assert_eq!(parse_choice("Judges", &roles()), None);
        assert_eq!(parse_choice("", &roles()), None);
    }
}
