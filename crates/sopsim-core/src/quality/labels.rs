//! Speaker labels ("Mia:", "Ben (Affirmative):") and third-person narration ("Ada
//! argues…") in a reply.

/// Where a speaker label may stand: the start of the text or of a line, or after the
/// end of a sentence; optional markdown emphasis or a list marker before it.
fn label_at(text: &str, at: usize, name: &str) -> bool {
    let before = text[..at].trim_end_matches(['*', '_', '#', '>', '-', ' ', '\t']);
    let at_start = before.is_empty() || before.ends_with('\n');
    let after_sentence = before.ends_with(['.', '!', '?']) && text[..at].ends_with([' ', '*']);
    if !(at_start || after_sentence) {
        return false;
    }
    let rest = text[at + name.len()..].trim_start_matches(['*', '_']);
    let rest = match rest.strip_prefix(' ').unwrap_or(rest).strip_prefix('(') {
        Some(role) => match role.find(')') {
            Some(close) if close <= 60 && !role[..close].contains('\n') => &role[close + 1..],
            _ => return false,
        },
        None => rest,
    };
    let Some(after) = rest.trim_start_matches(['*', '_']).strip_prefix(':') else {
        return false;
    };
    let after = after.trim_start_matches(['*', '_']);
    after.is_empty() || after.starts_with(char::is_whitespace)
}

/// Whether `text` carries `name`'s speaker label; `opening_only`: at its start only.
pub(super) fn has_label(text: &str, name: &str, opening_only: bool) -> bool {
    if name.is_empty() {
        return false;
    }
    let body = text.trim_start();
    if opening_only {
        let lead = body.len() - body.trim_start_matches(['*', '_', '#', '>', '"']).len();
        return body[lead..].starts_with(name) && label_at(body, lead, name);
    }
    body.match_indices(name).any(|(at, _)| {
        let boundary = body[..at]
            .chars()
            .next_back()
            .is_none_or(|c| !c.is_alphanumeric() && !matches!(c, '"' | '\'' | '“' | '‘'));
        boundary && label_at(body, at, name)
    })
}

/// Whether `text`, said by `name`, addresses or describes its speaker by that name
/// past its opening: "Well, Dan, first of all …", "Yes, Ben agreed!" (the name after
/// a comma, followed by a comma, an end of sentence or a word in lower case).
pub(super) fn names_itself(text: &str, name: &str) -> bool {
    !name.is_empty()
        && text.match_indices(name).any(|(at, _)| {
            let before = text[..at].trim_end_matches(' ');
            let after = &text[at + name.len()..];
            let vocative = after.starts_with([',', '!', '?', '.'])
                || after
                    .strip_prefix(' ')
                    .and_then(|rest| rest.chars().next())
                    .is_some_and(char::is_lowercase);
            before.ends_with(',') && text[..at].ends_with(' ') && vocative
        })
}

/// Whether `text` opens with `name` used in the third person: the name, perhaps its
/// role in brackets, a space, and a word in lower case ("Ada argues", "Ada should",
/// "Mark (Management) asks").
pub(super) fn is_narration(text: &str, name: &str) -> bool {
    let body = text.trim_start().trim_start_matches(['*', '_', '"', '“']);
    let Some(rest) = body.strip_prefix(name) else {
        return false;
    };
    let rest = rest.trim_start_matches(['*', '_']);
    // "Mark (Management) asks …"
    let rest = match rest.strip_prefix(" (").and_then(|r| r.split_once(')')) {
        Some((role, after)) if role.len() <= 60 => after,
        _ => rest,
    };
    let Some(next) = rest.strip_prefix(' ') else {
        return false;
    };
    next.chars().next().is_some_and(char::is_lowercase)
}

/// Words of the first and second person: a reply holding none of them speaks to no one
/// and for no one.
const PERSONAL: &[&str] = &[
    "i", "i'm", "i've", "i'd", "i'll", "me", "my", "mine", "we", "we're", "we've", "we'd", "we'll",
    "us", "our", "ours", "you", "you're", "you've", "you'd", "you'll", "your", "yours", "let's",
];

/// Whether `text` reports on the conversation instead of taking part in it: it opens
/// with another participant's name in the third person ("Cleo argues that …") and
/// has no word of the first or second person anywhere.
pub(super) fn is_report<'a>(text: &str, others: impl IntoIterator<Item = &'a str>) -> bool {
    let personal = text
        .split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '’'))
        .any(|w| PERSONAL.contains(&w.to_lowercase().replace('’', "'").as_str()));
    !personal && others.into_iter().any(|n| is_narration(text, n))
}
