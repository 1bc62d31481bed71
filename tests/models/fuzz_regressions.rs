//! Every input a fuzzer crashed sopsim with (`fuzz/regressions/<target>/`), fed in as a
//! user would (a scenario file to the binary, a tokenizer file to the loader): each must
//! be refused or accepted cleanly (exit code 0 or 2), never a panic or an abort.

use std::process::{Command, Stdio};

use crate::common::root;

#[test]
fn scenario_files_that_crashed_the_fuzzer_are_now_refused_cleanly() {
    let dir = root().join("fuzz/regressions/scenario");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let out = Command::new(env!("CARGO_BIN_EXE_sopsim"))
            .arg("validate")
            .arg(&path)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            matches!(out.status.code(), Some(0 | 2)),
            "{}: {:?}\n{stderr}",
            path.display(),
            out.status
        );
        assert!(!stderr.contains("panicked"), "{}: {stderr}", path.display());
        seen += 1;
    }
    assert!(seen > 0, "no regression inputs in {}", dir.display());
}

#[test]
fn tokenizer_files_that_crashed_the_fuzzer_are_now_refused_cleanly() {
    let dir = root().join("fuzz/regressions/tokenizer_json");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        let loaded = std::panic::catch_unwind(|| sopsim::embed::tokenizer_from_json(&bytes));
        assert!(
            matches!(loaded, Ok(Err(_))),
            "{}: not refused",
            path.display()
        );
        seen += 1;
    }
    assert!(seen > 0, "no regression inputs in {}", dir.display());
}
