//! What a resume reads back, checked whole before it changes anything: every line of
//! `transcript.jsonl`, `world.jsonl` and `probes.jsonl` is a JSON object of the run's,
//! and every file's lines are within a length bound (read a line at a time, so a huge
//! line costs its bound and no more), and the world's rounds are rounds of the
//! transcript's visits, each once and in order. A line appended, edited into another visit or grown past its bound is
//! refused here, before the resumed run writes its first turn; a resume refused
//! here leaves the folder byte for byte as it was.

use std::io::{BufRead, BufReader, Read};

use crate::output_folder::{Entry, OutputFolder};

/// The longest transcript line read back: one message.
const MAX_TRANSCRIPT_LINE: u64 = 16 << 20;
/// The longest journal line read back: one model answer, tool result or typed line.
const MAX_JOURNAL_LINE: u64 = 64 << 20;

/// What is wrong with a file a resume reads back.
#[derive(Debug, thiserror::Error)]
#[error("{file}, line {line}: {why}")]
pub struct BadLine {
    pub file: &'static str,
    pub line: u64,
    pub why: String,
}

/// Calls `each` with every whole line of `name` (a torn last line is left out),
/// reading one line at a time and refusing one longer than `max_line`.
fn scan(
    folder: &OutputFolder,
    name: &'static str,
    max_line: u64,
    mut each: impl FnMut(&[u8]) -> Result<(), String>,
) -> Result<(), BadLine> {
    let bad = |line: u64, why: String| BadLine {
        file: name,
        line,
        why,
    };
    let file = folder
        .open_to_read(name)
        .map_err(|e| bad(0, sopsim_core::error_chain::chain(&e)))?;
    let mut reader = BufReader::new(file);
    let mut buf = Vec::new();
    for line in 1u64.. {
        buf.clear();
        let read = (&mut reader)
            .take(max_line + 1)
            .read_until(b'\n', &mut buf)
            .map_err(|e| bad(line, e.to_string()))?;
        if read == 0 {
            break;
        }
        if buf.len() as u64 > max_line {
            return Err(bad(
                line,
                format!("longer than the {max_line} bytes a line of it may be"),
            ));
        }
        if buf.last() != Some(&b'\n') {
            // A line torn by the kill: the resume cuts it.
            break;
        }
        each(&buf).map_err(|why| bad(line, why))?;
    }
    Ok(())
}

/// The (state, visit) of each whole line of `name`.
fn visits(
    folder: &OutputFolder,
    name: &'static str,
    max_line: u64,
) -> Result<Vec<(String, u64)>, BadLine> {
    let mut out = Vec::new();
    scan(folder, name, max_line, |line| {
        let value: serde_json::Value = serde_json::from_slice(line)
            .map_err(|e| format!("not a JSON line sopsim wrote ({e})"))?;
        match (value["state"].as_str(), value["visit"].as_u64()) {
            (Some(state), Some(visit)) => out.push((state.to_string(), visit)),
            _ => return Err("names no state and visit".into()),
        }
        Ok(())
    })?;
    Ok(out)
}

/// The world's rounds in a run's folder.
pub(crate) const WORLD_FILE: &str = "world.jsonl";

/// The probes' answers in a run's folder.
pub(crate) const PROBES_FILE: &str = "probes.jsonl";

/// Checks the transcript and, when `world_line` gives its bound, `world.jsonl`.
pub(crate) fn check(folder: &OutputFolder, world_line: Option<u64>) -> Result<(), BadLine> {
    if folder
        .entry(crate::journal::JOURNAL_FILE)
        .is_ok_and(|e| e != Entry::Nothing)
    {
        scan(
            folder,
            crate::journal::JOURNAL_FILE,
            MAX_JOURNAL_LINE,
            |_| Ok(()),
        )?;
    }
    if folder.entry(PROBES_FILE).is_ok_and(|e| e != Entry::Nothing) {
        scan(folder, PROBES_FILE, MAX_TRANSCRIPT_LINE, |line| {
            serde_json::from_slice::<serde_json::Value>(line)
                .map(|_| ())
                .map_err(|e| format!("not a JSON line sopsim wrote ({e})"))
        })?;
    }
    let said = visits(folder, "transcript.jsonl", MAX_TRANSCRIPT_LINE)?;
    let Some(world_line) = world_line else {
        return Ok(());
    };
    if folder.entry(WORLD_FILE).is_ok_and(|e| e == Entry::Nothing) {
        return Ok(());
    }
    let rounds = visits(folder, WORLD_FILE, world_line)?;
    let last_said = said.last().map_or(0, |(_, v)| *v);
    let state_of: std::collections::HashMap<u64, &str> =
        said.iter().map(|(s, v)| (*v, s.as_str())).collect();
    let mut last = 0;
    for (i, (state, visit)) in rounds.iter().enumerate() {
        let line = i as u64 + 1;
        let bad = |why: String| BadLine {
            file: WORLD_FILE,
            line,
            why,
        };
        if *visit <= last {
            return Err(bad(format!(
                "a second round of visit {visit}: each visit closes one round, in order"
            )));
        }
        if *visit > last_said {
            return Err(bad(format!(
                "a round of visit {visit}, which the transcript does not reach (its last visit is {last_said})"
            )));
        }
        if let Some(said) = state_of.get(visit).filter(|s| **s != state) {
            return Err(bad(format!(
                "visit {visit} is of state {said:?} in the transcript, not {state:?}"
            )));
        }
        last = *visit;
    }
    Ok(())
}

/// The longest `world.jsonl` line a run of `scenario` writes: its globals, and each
/// per-agent variable's value for every agent.
pub(crate) fn world_line_bound(scenario: &crate::scenario::Scenario) -> Option<u64> {
    let world = scenario.world.as_ref()?;
    let per_agent = world.variables.values().filter(|v| v.per_agent).count() as u64;
    let names: u64 = world.variables.keys().map(|k| k.len() as u64 + 4).sum();
    let agents = scenario.agents.len() as u64;
    // A value as JSON writes at most 24 bytes and its comma.
    Some(
        (1 << 20)
            + names
            + 32 * world.variables.len() as u64
            + 25 * agents.saturating_mul(per_agent),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(transcript: &str, world: &str) -> (tempfile::TempDir, OutputFolder) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("transcript.jsonl"), transcript).unwrap();
        std::fs::write(dir.path().join("world.jsonl"), world).unwrap();
        let f = OutputFolder::new(dir.path());
        (dir, f)
    }

    const SAID: &str = "{\"state\":\"fish\",\"visit\":1}\n{\"state\":\"fish\",\"visit\":2}\n";

    #[test]
    fn rounds_of_the_transcripts_visits_pass_and_others_are_refused() {
        let (_d, f) = folder(
            SAID,
            "{\"round\":1,\"state\":\"fish\",\"visit\":1}\n{\"round\":2,\"state\":\"fish\",\"visit\":2}\n{\"ro",
        );
        assert!(check(&f, Some(1000)).is_ok());
        // An appended copy of the last round.
        let (_d, f) = folder(
            SAID,
            "{\"state\":\"fish\",\"visit\":1}\n{\"state\":\"fish\",\"visit\":1}\n",
        );
        let e = check(&f, Some(1000)).unwrap_err();
        assert_eq!((e.file, e.line), ("world.jsonl", 2));
        assert!(e.why.contains("a second round of visit 1"), "{e}");
        // A round the transcript has not reached, and one of another state.
        let (_d, f) = folder(SAID, "{\"state\":\"fish\",\"visit\":3}\n");
        assert!(check(&f, Some(1000))
            .unwrap_err()
            .why
            .contains("does not reach"));
        let (_d, f) = folder(SAID, "{\"state\":\"talk\",\"visit\":2}\n");
        assert!(check(&f, Some(1000))
            .unwrap_err()
            .why
            .contains("not \"talk\""));
        // A line past its bound is refused by its length, whole or torn.
        let long = format!(
            "{{\"state\":\"fish\",\"visit\":1,\"x\":\"{}\"}}\n",
            "y".repeat(2000)
        );
        let (_d, f) = folder(SAID, &long);
        assert!(check(&f, Some(1000))
            .unwrap_err()
            .why
            .contains("longer than"));
        let (_d, f) = folder(SAID, &long[..long.len() - 1]);
        assert!(check(&f, Some(1000)).is_err());
        // A transcript line that is not one of sopsim's.
        let (_d, f) = folder("{\"state\":\"fish\",\"visit\":1}\nnot json\n", "");
        let e = check(&f, Some(1000)).unwrap_err();
        assert_eq!((e.file, e.line), ("transcript.jsonl", 2));
    }
}
