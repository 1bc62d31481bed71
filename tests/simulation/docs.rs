//! The documentation is true: the README's scenario runs, the guide's examples validate,
//! the format reference and the tools guide's settings table are the ones the format
//! generates (`SOPSIM_UPDATE_DOCS=1 cargo test --test simulation docs` rewrites them),
//! every relative link leads to a file of the repository, and the README stays short.

use crate::common::*;

#[test]
fn the_readme_example_runs() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let start = readme.find("```json\n").expect("a JSON example") + "```json\n".len();
    let end = start + readme[start..].find("```").unwrap();
    let doc = serde_json::from_str(&readme[start..end]).unwrap();
    let scenario = load_document(std::path::Path::new("README.md"), doc).unwrap();
    let (outcome, _) = run_recorded(&scenario, None, 0, &[]);
    assert_eq!(outcome.summary.ended_by.as_str(), "end");
    assert_eq!(
        outcome.transcript.last().unwrap().content,
        "Today: review the parser first. DONE."
    );
}

#[test]
fn the_guides_outcomes_example_validates_in_the_prisoners_dilemma() {
    let readme = std::fs::read_to_string(root().join("docs/guide/bench.md")).unwrap();
    let start = readme
        .find("```json\n\"outcomes\"")
        .expect("the outcomes example")
        + "```json\n".len();
    let end = start + readme[start..].find("```").unwrap();
    let snippet: serde_json::Value =
        serde_json::from_str(&format!("{{{}}}", &readme[start..end])).unwrap();
    let file = root().join("scenarios/prisoners_dilemma.json");
    let mut game: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    game["outcomes"] = snippet["outcomes"].clone();
    let scenario = load_document(&file, game).unwrap();
    assert!(scenario.outcomes.unwrap().scores.contains_key("promises"));
}

#[test]
fn the_format_reference_is_generated_from_the_format() {
    let path = root().join("docs/reference/scenario-format.md");
    let generated = sopsim::scenario::reference::markdown();
    if std::env::var_os("SOPSIM_UPDATE_DOCS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &generated).unwrap();
    }
    let written = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        written == generated,
        "{} is not what the format generates: run `SOPSIM_UPDATE_DOCS=1 cargo test --test simulation docs`",
        path.display()
    );
}

#[test]
fn the_measuring_files_reference_is_generated_from_their_types() {
    let path = root().join("docs/reference/measuring-files.md");
    let generated = sopsim_bench::files_reference::markdown();
    if std::env::var_os("SOPSIM_UPDATE_DOCS").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let written = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        written == generated,
        "{} is not what the types generate: run `SOPSIM_UPDATE_DOCS=1 cargo test --test simulation docs`",
        path.display()
    );
}

#[test]
fn the_tools_guide_lists_the_settings_each_kind_reads() {
    let path = root().join("docs/guide/tools.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let (start, end) = (
        "<!-- tool settings: generated",
        "<!-- end of tool settings -->",
    );
    let from = text.find(start).expect("the settings table's start marker");
    let from = from + text[from..].find('\n').unwrap() + 1;
    let to = from
        + text[from..]
            .find(end)
            .expect("the settings table's end marker");
    let generated = sopsim::scenario::reference::tool_settings_table();
    if std::env::var_os("SOPSIM_UPDATE_DOCS").is_some() {
        std::fs::write(
            &path,
            format!("{}{generated}{}", &text[..from], &text[to..]),
        )
        .unwrap();
        return;
    }
    assert!(
        text[from..to] == generated,
        "{}'s settings table is not what the tools' settings generate: run \
         `SOPSIM_UPDATE_DOCS=1 cargo test --test simulation docs`",
        path.display()
    );
}

/// The Markdown files people read: the README, the guide, the reference and the
/// performance page, ARCHITECTURE.md and CHANGELOG.md.
fn documents() -> Vec<std::path::PathBuf> {
    let mut docs = vec![
        root().join("README.md"),
        root().join("ARCHITECTURE.md"),
        root().join("CHANGELOG.md"),
    ];
    for dir in ["docs", "docs/guide", "docs/reference"] {
        for entry in std::fs::read_dir(root().join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "md") {
                docs.push(path);
            }
        }
    }
    docs
}

#[test]
fn every_link_stays_in_the_repository_and_leads_to_a_file() {
    let link = regex::Regex::new(r"\]\(([^)\s#]+)(#[^)]*)?\)").unwrap();
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).unwrap();
        assert!(
            !text.contains(concat!("..", "/shared")),
            "{} points outside the repository",
            doc.display()
        );
        for c in link.captures_iter(&text) {
            let target = &c[1];
            if target.starts_with("http://") || target.starts_with("https://") {
                continue;
            }
            let resolved = doc.parent().unwrap().join(target);
            assert!(
                resolved.exists(),
                "{}: the link {target} leads nowhere",
                doc.display()
            );
        }
    }
}

#[test]
fn the_readme_is_short_and_the_guide_is_where_the_detail_is() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines <= 200,
        "the README has {lines} lines; the guide is docs/guide/"
    );
}

/// The performance page's prose names benchmarks whose figures are in the generated
/// tables of its dashboard: a benchmark renamed or gone shows here, not as a row the
/// text quotes and no table has.
#[test]
fn every_benchmark_the_performance_page_names_has_a_row_in_its_tables() {
    let page = std::fs::read_to_string(root().join("docs/performance.md")).unwrap();
    let group = regex::Regex::new(r#"benchmark_group\("([a-z_0-9]+)"\)"#).unwrap();
    let mut groups = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(root().join("benches")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "rs") {
            let code = std::fs::read_to_string(&path).unwrap();
            groups.extend(group.captures_iter(&code).map(|c| c[1].to_string()));
        }
    }
    let (prose, tables) = page
        .split_once("<!-- cpu: ")
        .expect("the page has a generated table");
    let named = regex::Regex::new(r"`([a-z_0-9]+)/([a-z_0-9]+)`").unwrap();
    let mut checked = 0;
    for c in named.captures_iter(prose) {
        if !groups.contains(&c[1]) {
            continue;
        }
        checked += 1;
        let id = &c[0];
        assert!(
            tables.contains(&format!("| {id} |")),
            "docs/performance.md names {id}, which no generated table has: \
             run `python3 benches/dashboard.py --run`"
        );
    }
    assert!(checked > 0, "the page names no benchmark");
}

/// Every file of the repository, as paths relative to its root with `/` between parts
/// (what git would track: builds, fetched models and git's own folder left out).
fn repository_files() -> Vec<String> {
    fn walk(dir: &std::path::Path, base: &std::path::Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            let top = dir == base;
            if name == ".git" || name == "target" || (top && name == "models") {
                continue;
            }
            if path.is_dir() {
                walk(&path, base, out);
            } else if let Ok(rel) = path.strip_prefix(base) {
                out.push(rel.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    let mut out = Vec::new();
    walk(&root(), &root(), &mut out);
    out
}

#[test]
fn every_path_architecture_md_names_exists() {
    // Files a run or a benchmark writes, named as such: not files of the repository.
    const WRITTEN: &[&str] = &[
        "bench.json",
        "environment.json",
        "judgement.json",
        "network.json",
        "report.json",
        "report.md",
        "run.json",
        "timing.json",
    ];
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let files = repository_files();
    let quoted = regex::Regex::new(r"`([A-Za-z0-9_./-]+)`").unwrap();
    let file_like = regex::Regex::new(r"\.(rs|md|py|js|json|sh|toml|css|html)$").unwrap();
    let mut missing = Vec::new();
    for c in quoted.captures_iter(&text) {
        let named = &c[1];
        if !(named.contains('/') || file_like.is_match(named)) || WRITTEN.contains(&named) {
            continue;
        }
        let path = named.trim_end_matches('/');
        let found = files.iter().any(|f| {
            f == path
                || f.ends_with(&format!("/{path}"))
                || f.starts_with(&format!("{path}/"))
                || f.contains(&format!("/{path}/"))
        });
        if !found {
            missing.push(named.to_string());
        }
    }
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names paths that are not there: {missing:?}"
    );
}
