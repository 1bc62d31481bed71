//! The layering ARCHITECTURE.md states, checked on the source: every top-level module
//! of the library (`crates/sopsim`) is in one layer, imports (`crate::…` paths outside tests) only go to
//! lower layers or, within a layer, without a cycle; the command line (`main.rs`,
//! `cli/`) is outside the library and not checked.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each top-level module's layer: a module may import lower layers, and its own layer
/// where that makes no cycle.
const LAYERS: &[(&str, &[&str])] = &[
    (
        "leaf",
        &["chain", "files", "user_json", "template", "tokens"],
    ),
    (
        "pure",
        &[
            "scenario", "sop", "prompt", "memory", "action", "elysia", "quality",
        ],
    ),
    ("service", &["llm", "embed", "knowledge", "models", "tools"]),
    (
        "running",
        &[
            "actors", "sim", "output", "events", "setup", "runner", "bench", "error", "control",
            "human",
        ],
    ),
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|(_, mods)| mods.contains(&module))
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Top-level module → the top-level modules it names as `crate::X`, with where.
fn imports(src: &Path) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut files = Vec::new();
    sources(src, &mut files);
    let path = regex::Regex::new(r"crate::(\w+)").unwrap();
    let mut graph: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for file in files {
        let rel = file.strip_prefix(src).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let module = first.trim_end_matches(".rs").to_string();
        // Unit tests in files of their own may reach anywhere, as inline ones may.
        if ["lib", "main", "cli"].contains(&module.as_str()) || file.ends_with("tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let code = text.split("#[cfg(test)]\nmod tests").next().unwrap();
        let edges = graph.entry(module.clone()).or_default();
        for (n, line) in code.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            for m in path.captures_iter(line) {
                let to = m[1].to_string();
                if to != module && layer_of(&to).is_some() {
                    edges
                        .entry(to)
                        .or_insert_with(|| format!("{}:{}", rel.display(), n + 1));
                }
            }
        }
    }
    graph
}

#[test]
fn every_module_is_in_a_layer_and_imports_only_downwards_without_cycles() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/sopsim/src");
    let graph = imports(&src);
    assert!(
        graph["actors"].contains_key("sop") && graph["sop"].contains_key("scenario"),
        "the scan finds imports: {graph:?}"
    );
    let unplaced: Vec<&String> = graph.keys().filter(|m| layer_of(m).is_none()).collect();
    assert!(unplaced.is_empty(), "modules in no layer: {unplaced:?}");
    let mut upward = Vec::new();
    for (from, edges) in &graph {
        for (to, at) in edges {
            if layer_of(to) > layer_of(from) {
                upward.push(format!("{from} → {to} ({at})"));
            }
        }
    }
    assert!(upward.is_empty(), "upward imports: {upward:#?}");
    // A cycle: a module that reaches itself.
    for start in graph.keys() {
        let mut seen = BTreeSet::new();
        let mut stack: Vec<(&str, Vec<&str>)> = vec![(start, vec![start])];
        while let Some((at, trail)) = stack.pop() {
            for next in graph.get(at).into_iter().flat_map(|e| e.keys()) {
                let mut trail = trail.clone();
                trail.push(next);
                assert!(next != start, "an import cycle: {}", trail.join(" → "));
                if seen.insert(next.as_str()) {
                    stack.push((next, trail));
                }
            }
        }
    }
}
