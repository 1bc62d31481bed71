//! `{placeholder}` templates, the one formatter behind script lines
//! (`{name}`, `{turn}`, `{state}`…) and Elysia's `llm_message` (`{num_objects}`, metadata keys).
//!
//! Semantics follow Python's `str.format_map`, which both origins use: `{{` and `}}` are
//! literal braces, and a placeholder with no value is an error that names it.

use thiserror::Error;

/// Why a template cannot be filled.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TemplateError {
    /// A placeholder with no value; its key.
    #[error("unknown placeholder {{{0}}}")]
    UnknownPlaceholder(String),
    /// A `{` that is never closed, at this byte of the template.
    #[error("unclosed '{{' at byte {0}")]
    Unclosed(usize),
    /// A `}` that closes no placeholder and is not doubled, at this byte of the template.
    #[error("single '}}' at byte {0} (write '}}}}' for a literal brace)")]
    StrayClose(usize),
}

/// The prefix of the seeded-choice placeholder of script lines, `{one_of:A|B}`.
pub const ONE_OF: &str = "one_of:";

/// Fills `template` with `lookup(key)` for every `{key}`.
pub fn render<'a, F>(template: &str, lookup: F) -> Result<String, TemplateError>
where
    F: Fn(&str) -> Option<std::borrow::Cow<'a, str>>,
{
    let mut out = String::with_capacity(template.len() + 16);
    let mut rest = template;
    let mut offset = 0;
    while let Some(pos) = rest.find(['{', '}']) {
        out.push_str(&rest[..pos]);
        let brace = rest.as_bytes()[pos];
        let after = &rest[pos + 1..];
        if after.as_bytes().first() == Some(&brace) {
            out.push(brace as char);
            rest = &after[1..];
            offset += pos + 2;
            continue;
        }
        if brace == b'}' {
            return Err(TemplateError::StrayClose(offset + pos));
        }
        let close = after
            .find('}')
            .ok_or(TemplateError::Unclosed(offset + pos))?;
        let key = &after[..close];
        let value =
            lookup(key).ok_or_else(|| TemplateError::UnknownPlaceholder(key.to_string()))?;
        out.push_str(&value);
        rest = &after[close + 1..];
        offset += pos + close + 2;
    }
    out.push_str(rest);
    Ok(out)
}

/// The placeholders a template uses, for validating templates before a run.
pub fn placeholders(template: &str) -> Result<Vec<String>, TemplateError> {
    let keys = std::cell::RefCell::new(Vec::new());
    render(template, |k| {
        keys.borrow_mut().push(k.to_string());
        Some("".into())
    })?;
    Ok(keys.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;

    fn vars(k: &str) -> Option<Cow<'static, str>> {
        match k {
            "name" => Some("Ada".into()),
            "turn" => Some("3".into()),
            _ => None,
        }
    }

    #[test]
    fn fills_placeholders_and_escapes() {
        assert_eq!(
            render("{name} at {turn} {{x}}", vars).unwrap(),
            "Ada at 3 {x}"
        );
    }

    #[test]
    fn unknown_placeholder_is_named() {
        assert_eq!(
            render("hi {who}", vars),
            Err(TemplateError::UnknownPlaceholder("who".into()))
        );
    }

    #[test]
    fn broken_braces_are_errors() {
        assert_eq!(render("a {name", vars), Err(TemplateError::Unclosed(2)));
        assert_eq!(render("a } b", vars), Err(TemplateError::StrayClose(2)));
        assert_eq!(placeholders("{a} and {b}").unwrap(), vec!["a", "b"]);
    }
}
