//! An error and all its causes on one line, the way every message shows them. A leaf:
//! every layer may use it, so it imports nothing from the crate.

/// An error and all its causes, `outer: inner: innermost`.
pub fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        let part = e.to_string();
        // Some errors quote their source's text (at the end, or in brackets inside
        // the sentence); do not say it twice.
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = e.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("writing {what}")]
    struct Writing {
        what: &'static str,
        #[source]
        source: std::io::Error,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("{path}: not readable ({source}); use another folder")]
    struct Quoting {
        path: &'static str,
        #[source]
        source: std::io::Error,
    }

    #[test]
    fn a_chain_names_every_cause_once() {
        let e = Writing {
            what: "transcript.jsonl",
            source: std::io::Error::other("disk full"),
        };
        assert_eq!(chain(&e), "writing transcript.jsonl: disk full");
        let quoted = Quoting {
            path: "out",
            source: std::io::Error::other("bad JSON"),
        };
        assert_eq!(
            chain(&quoted),
            "out: not readable (bad JSON); use another folder"
        );
    }
}
