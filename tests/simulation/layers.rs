//! The layering ARCHITECTURE.md states, checked on the libraries' sources
//! (`crates/sopsim-core/src`, `crates/sopsim/src`, and file by file
//! `crates/sopsim-bench/src` and `crates/sopsim-llm/src`; Cargo already keeps the core from importing the runtime,
//! and the runtime from importing the benchmark): every top-level module is in one layer and imports
//! (`crate::…` paths outside tests) only go to lower layers or, within a layer, without
//! a cycle; and, file by file, no file reaches itself through the files it imports
//! (`crate::`, `super::` and `self::` paths, `use` trees included). A module's own file
//! declaring and re-exporting its children is structure, not an import.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A crate's top-level modules by layer: a module may import lower layers, and its own
/// layer where that makes no cycle.
type Layers = &'static [(&'static str, &'static [&'static str])];

/// sopsim-core: pure logic. Cargo keeps it from importing the runtime.
static CORE: Layers = &[
    (
        "leaf",
        &[
            "error_chain",
            "digest",
            "files",
            "sentence",
            "user_json",
            "template",
            "tokens",
        ],
    ),
    (
        "pure",
        &[
            "scenario",
            "sop",
            "prompt",
            "memory",
            "network",
            "action",
            "tool_results",
            "quality",
            "noise",
        ],
    ),
    ("state", &["environment", "run_state", "world", "judging"]),
];

/// sopsim: the runtime, on top of the core (whose modules it uses under their names).
static RUNTIME: Layers = &[
    ("leaf", &["output_folder"]),
    ("service", &["llm", "embed", "knowledge", "tools"]),
    (
        "running",
        &[
            "actors",
            "simulation",
            "output",
            "events",
            "setup",
            "runner",
            "source",
            "error",
            "control",
            "human",
            "journal",
            "resume_check",
            "interview",
            "judgement",
            "judge_again",
            "finished_run",
        ],
    ),
];

/// A module's layer; the core's modules are below every runtime layer.
fn layer_of(layers: Layers, module: &str) -> Option<usize> {
    if std::ptr::eq(layers, RUNTIME) && CORE.iter().any(|(_, mods)| mods.contains(&module)) {
        return Some(0);
    }
    let below = if std::ptr::eq(layers, RUNTIME) { 1 } else { 0 };
    layers
        .iter()
        .position(|(_, mods)| mods.contains(&module))
        .map(|i| i + below)
}

fn crate_src(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates")
        .join(name)
        .join("src")
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

/// Top-level module → the top-level modules it names as `crate::X` (or, in the
/// runtime, the core's as `sopsim_core::X`), with where.
fn imports(src: &Path) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut files = Vec::new();
    sources(src, &mut files);
    let path = regex::Regex::new(r"(?:\bcrate|\bsopsim_core)::(\w+)").unwrap();
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
                if to != module && layer_of(RUNTIME, &to).is_some() {
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
    let core = imports(&crate_src("sopsim-core"));
    let runtime = imports(&crate_src("sopsim"));
    assert!(
        runtime["actors"].contains_key("sop") && core["sop"].contains_key("scenario"),
        "the scan finds imports: {runtime:?}"
    );
    for (layers, graph) in [(CORE, &core), (RUNTIME, &runtime)] {
        modules_import_downwards(layers, graph);
    }
}

fn modules_import_downwards(layers: Layers, graph: &BTreeMap<String, BTreeMap<String, String>>) {
    let unplaced: Vec<&String> = graph
        .keys()
        .filter(|m| layer_of(layers, m).is_none())
        .collect();
    assert!(unplaced.is_empty(), "modules in no layer: {unplaced:?}");
    let mut upward = Vec::new();
    for (from, edges) in graph {
        for (to, at) in edges {
            if layer_of(layers, to) > layer_of(layers, from) {
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

/// The module path of a source file: `actors/agent.rs` → `["actors", "agent"]`,
/// `actors/mod.rs` → `["actors"]`, `lib.rs` → `[]`.
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().to_string())
        .collect();
    let last = parts.pop().unwrap_or_default();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" {
        parts.push(stem.to_string());
    }
    parts
}

/// The file that defines module `path` (within `src`), if one does.
fn file_of(src: &Path, path: &[String]) -> Option<PathBuf> {
    if path.is_empty() {
        return Some(src.join("lib.rs"));
    }
    let base = src.join(path.join("/"));
    let as_file = base.with_extension("rs");
    if as_file.is_file() {
        return Some(as_file);
    }
    let as_dir = base.join("mod.rs");
    as_dir.is_file().then_some(as_dir)
}

/// The file a path names from module `at`: its longest prefix that is a module with a
/// file of its own.
fn target(src: &Path, at: &[String], path: &[&str]) -> Option<PathBuf> {
    let mut module: Vec<String> = match path.first() {
        Some(&"crate") => Vec::new(),
        Some(&"self") => at.to_vec(),
        Some(&"super") => at[..at.len().saturating_sub(1)].to_vec(),
        _ => return None,
    };
    let mut rest = &path[1..];
    while rest.first() == Some(&"super") {
        module.pop();
        rest = &rest[1..];
    }
    let mut found = file_of(src, &module);
    for part in rest {
        module.push(part.to_string());
        match file_of(src, &module) {
            Some(f) => found = Some(f),
            None => break,
        }
    }
    found
}

/// Every path a `use` tree names: `use a::{b, c::{d, e}};` → `a::b`, `a::c::d`, `a::c::e`.
fn expand(tree: &str) -> Vec<String> {
    let renamed = regex::Regex::new(r"\s+as\s+\w+").unwrap();
    let tree: String = renamed
        .replace_all(tree, "")
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    let Some(open) = tree.find('{') else {
        return vec![tree];
    };
    let prefix = &tree[..open];
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|p| !p.is_empty())
        .flat_map(|p| expand(&format!("{prefix}{p}")))
        .collect()
}

/// File → the files it imports, with where.
fn file_imports(src: &Path) -> BTreeMap<PathBuf, BTreeMap<PathBuf, String>> {
    let mut files = Vec::new();
    sources(src, &mut files);
    let inline = regex::Regex::new(r"\b(?:crate|super|self)(?:::\w+)+").unwrap();
    let uses = regex::Regex::new(r"(?s)\buse\s+((?:crate|super|self)::[^;]*);").unwrap();
    let children = regex::Regex::new(r"(?m)^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;").unwrap();
    let mut graph = BTreeMap::new();
    for file in files {
        let rel = file.strip_prefix(src).unwrap().to_path_buf();
        if file.ends_with("tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let code: String = text
            .split("#[cfg(test)]\nmod tests")
            .next()
            .unwrap()
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        let at = module_of(&rel);
        // A module's file declares its children and may re-export them: structure.
        let own: BTreeSet<PathBuf> = children
            .captures_iter(&code)
            .filter_map(|c| {
                let mut child = at.clone();
                child.push(c[1].to_string());
                file_of(src, &child)
            })
            .collect();
        let mut paths: Vec<String> = uses
            .captures_iter(&code)
            .flat_map(|c| expand(&c[1]))
            .collect();
        paths.extend(inline.find_iter(&code).map(|m| m.as_str().to_string()));
        let edges: &mut BTreeMap<PathBuf, String> = graph.entry(file.clone()).or_default();
        for p in paths {
            let parts: Vec<&str> = p.split("::").collect();
            let Some(to) = target(src, &at, &parts) else {
                continue;
            };
            if to != file && !own.contains(&to) {
                edges
                    .entry(to)
                    .or_insert_with(|| format!("{} ({p})", rel.display()));
            }
        }
    }
    graph
}

#[test]
fn no_file_reaches_itself_through_its_imports() {
    let src = crate_src("sopsim");
    let graph = file_imports(&src);
    let agent = src.join("actors/agent.rs");
    assert!(
        graph[&agent].contains_key(&src.join("actors/model_turn.rs")),
        "the scan resolves imports to files: {:?}",
        graph[&agent].keys().collect::<Vec<_>>()
    );
    no_file_cycles(&src, &graph);
    for name in ["sopsim-core", "sopsim-bench", "sopsim-llm"] {
        let src = crate_src(name);
        no_file_cycles(&src, &file_imports(&src));
    }
}

fn no_file_cycles(src: &Path, graph: &BTreeMap<PathBuf, BTreeMap<PathBuf, String>>) {
    let show = |p: &PathBuf| p.strip_prefix(src).unwrap().display().to_string();
    for start in graph.keys() {
        let mut seen = BTreeSet::new();
        let mut stack: Vec<(&PathBuf, Vec<String>)> = vec![(start, vec![show(start)])];
        while let Some((at, trail)) = stack.pop() {
            for (next, why) in graph.get(at).into_iter().flatten() {
                let mut trail = trail.clone();
                trail.push(format!("{} [{why}]", show(next)));
                assert!(
                    next != start,
                    "an import cycle between files: {}",
                    trail.join(" → ")
                );
                if seen.insert(next.clone()) {
                    stack.push((next, trail));
                }
            }
        }
    }
}

#[test]
fn use_trees_expand_to_every_path() {
    assert_eq!(
        expand("super::{a, b::{C, d as e}, f::*}"),
        ["super::a", "super::b::C", "super::b::d", "super::f::*"]
    );
}
