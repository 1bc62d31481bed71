//! Reading scenario files: size, encoding and syntax checks with messages that name the
//! file, then structural and semantic validation.

use std::path::{Path, PathBuf};

use serde_json::Value;
use thiserror::Error;

use super::aiwaves::{self, is_aiwaves, Imported};
use super::data_file::{read_objects, DataFileError};
use super::format::Scenario;
use super::knowledge_file::{read_entries, KnowledgeFileError};
use super::population::{expand, footprint, Network, PersonaSource};

/// The most memory making a scenario's population members may take, estimated before
/// any is made: past it, `validate` and `run` refuse the file instead of filling the
/// machine.
const MAX_EXPANSION_BYTES: u64 = 2 << 30;
use super::table_file::{read_edges, read_rows, TableFileError};
use super::tool_settings::ToolKind;
use super::validate::{self, Problem};
use crate::error_chain::chain;
use crate::tokens::Estimator;

/// Scenario files larger than this are refused before they are read.
pub const MAX_SCENARIO_BYTES: u64 = 8 * 1024 * 1024;

/// Why a scenario could not be loaded. Every variant is bad input (exit code 2).
#[derive(Debug, Error)]
pub enum ScenarioError {
    /// The file cannot be read.
    #[error("{path}: cannot read: {source}")]
    Io {
        /// The scenario file's path.
        path: PathBuf,
        /// Why reading failed.
        source: std::io::Error,
    },
    /// The path names a directory.
    #[error("{path}: is a directory, not a scenario file")]
    IsDirectory {
        /// The scenario file's path.
        path: PathBuf,
    },
    /// The file is empty or holds only whitespace.
    #[error("{path}: the file is empty")]
    Empty {
        /// The scenario file's path.
        path: PathBuf,
    },
    /// The file is larger than scenario files may be.
    #[error("{path}: the file is over the {limit}-byte limit for scenario files")]
    TooLarge {
        /// The scenario file's path.
        path: PathBuf,
        /// The largest size allowed, in bytes.
        limit: u64,
    },
    /// The file is not valid UTF-8 text.
    #[error("{path}: not valid UTF-8 (first bad byte at offset {offset})")]
    NotUtf8 {
        /// The scenario file's path.
        path: PathBuf,
        /// The byte offset of the first invalid byte.
        offset: usize,
    },
    /// The file is not valid JSON.
    #[error("{path}: not valid JSON at line {line}, column {column}: {message}")]
    Syntax {
        /// The scenario file's path.
        path: PathBuf,
        /// The line of the error.
        line: usize,
        /// The column of the error.
        column: usize,
        /// What is wrong there, without its position.
        message: String,
    },
    /// A file to translate as an aiwaves config is not one.
    #[error("{path}: not an aiwaves config (it has no root, relations and states)")]
    NotAiwaves {
        /// The scenario file's path.
        path: PathBuf,
    },
    /// The scenario fails validation.
    #[error("{path}: {count} problem(s):\n{}", render(.problems))]
    Invalid {
        /// The scenario file's path (or a built scenario's name).
        path: PathBuf,
        /// How many problems were found.
        count: usize,
        /// The problems, each with the field it is in.
        problems: Vec<Problem>,
    },
}

fn render(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(|p| format!("  {p}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Why a file a scenario names cannot be used (a validation problem's message).
#[derive(Debug, Error)]
enum NamedFileError {
    #[error("no such file: {}", .0.display())]
    Missing(PathBuf),
    #[error("{} is outside the scenario's folder {} (allow its folder explicitly to use it)", .real.display(), .dir.display())]
    Outside { real: PathBuf, dir: PathBuf },
    #[error("{}", .path.display())]
    Knowledge {
        path: PathBuf,
        #[source]
        source: KnowledgeFileError,
    },
    #[error("{}", .path.display())]
    Data {
        path: PathBuf,
        #[source]
        source: DataFileError,
    },
    #[error("line {line}: {name:?} is not a member of this population")]
    UnknownMember { line: usize, name: String },
    #[error("{}", .path.display())]
    Table {
        path: PathBuf,
        #[source]
        source: TableFileError,
    },
}

/// The folder a scenario's files must lie in, and the folders the user allowed too.
struct Folder {
    dir: PathBuf,
    roots: Vec<PathBuf>,
}

impl Folder {
    fn of(path: &Path, allowed: &[PathBuf]) -> Self {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let mut roots: Vec<PathBuf> = std::iter::once(dir)
            .chain(allowed.iter().map(PathBuf::as_path))
            .filter_map(|d| d.canonicalize().ok())
            .collect();
        roots.dedup();
        Self {
            dir: dir.to_path_buf(),
            roots,
        }
    }

    /// The real path of a file the scenario names, if it exists within the roots (a
    /// shared config must not read `../../../etc/passwd` into a prompt).
    fn confined(&self, named: &str) -> Result<PathBuf, NamedFileError> {
        let resolved = self.dir.join(named);
        match resolved.canonicalize() {
            Err(_) => Err(NamedFileError::Missing(resolved)),
            Ok(real) if !self.roots.iter().any(|r| real.starts_with(r)) => {
                Err(NamedFileError::Outside {
                    real,
                    dir: self.dir.clone(),
                })
            }
            Ok(real) => Ok(real),
        }
    }

    fn table<T>(
        &self,
        named: &str,
        read: impl FnOnce(&Path) -> Result<T, TableFileError>,
    ) -> Result<T, NamedFileError> {
        let real = self.confined(named)?;
        read(&real).map_err(|source| NamedFileError::Table { path: real, source })
    }
}

/// Checks that `path` holds what a tool (or component) of `kind` reads.
fn check_file(kind: ToolKind, path: &Path) -> Result<(), NamedFileError> {
    match kind {
        ToolKind::JsonLookup => {
            read_objects(path)
                .map(|_| ())
                .map_err(|source| NamedFileError::Data {
                    path: path.to_path_buf(),
                    source,
                })
        }
        ToolKind::Knowledge => {
            read_entries(path)
                .map(|_| ())
                .map_err(|source| NamedFileError::Knowledge {
                    path: path.to_path_buf(),
                    source,
                })
        }
        _ => Ok(()),
    }
}

/// Reads a file's text, refusing directories, huge, empty and non-UTF-8 files.
pub fn read_text(path: &Path) -> Result<String, ScenarioError> {
    text(path, read_bytes(path)?)
}

/// [`read_text`], with the SHA-256 of the bytes read (what a run's `run.json` keeps of
/// its scenario file): one read, so the digest is of the text parsed.
pub fn read_text_digested(path: &Path) -> Result<(String, String), ScenarioError> {
    let bytes = read_bytes(path)?;
    let sha256 = crate::digest::sha256_hex(&bytes);
    Ok((text(path, bytes)?, sha256))
}

fn read_bytes(path: &Path) -> Result<Vec<u8>, ScenarioError> {
    let io = |source| ScenarioError::Io {
        path: path.to_path_buf(),
        source,
    };
    crate::files::read_bounded(path, MAX_SCENARIO_BYTES).map_err(|e| {
        match e
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<crate::files::FileError>())
        {
            Some(crate::files::FileError::Folder) => ScenarioError::IsDirectory {
                path: path.to_path_buf(),
            },
            Some(crate::files::FileError::TooLarge { limit }) => ScenarioError::TooLarge {
                path: path.to_path_buf(),
                limit: *limit,
            },
            _ => io(e),
        }
    })
}

/// A scenario file's bytes as text.
fn text(path: &Path, bytes: Vec<u8>) -> Result<String, ScenarioError> {
    // A byte-order mark is not part of the JSON (editors on Windows write one).
    let bytes = match bytes.strip_prefix("\u{feff}".as_bytes()) {
        Some(rest) => rest.to_vec(),
        None => bytes,
    };
    let text = String::from_utf8(bytes).map_err(|e| ScenarioError::NotUtf8 {
        path: path.to_path_buf(),
        offset: e.utf8_error().valid_up_to(),
    })?;
    if text.trim().is_empty() {
        return Err(ScenarioError::Empty {
            path: path.to_path_buf(),
        });
    }
    Ok(text)
}

/// Parses JSON text into a document, with the syntax error's position.
pub fn parse_json(path: &Path, text: &str) -> Result<Value, ScenarioError> {
    crate::user_json::parse(text).map_err(|e| ScenarioError::Syntax {
        path: path.to_path_buf(),
        line: e.line(),
        column: e.column(),
        message: strip_position(&e.to_string()),
    })
}

fn strip_position(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg.to_string(),
    }
}

/// Turns a native-format document into a validated scenario, reporting every problem.
/// Files its populations read must lie in the folder of `path`.
pub fn from_document(path: &Path, doc: Value) -> Result<Scenario, ScenarioError> {
    from_document_in(path, doc, &Folder::of(path, &[]))
}

fn from_document_in(path: &Path, doc: Value, folder: &Folder) -> Result<Scenario, ScenarioError> {
    let invalid = |problems: Vec<Problem>| ScenarioError::Invalid {
        path: path.to_path_buf(),
        count: problems.len(),
        problems,
    };
    let problems = validate::check_structure(&doc);
    if !problems.is_empty() {
        return Err(invalid(problems));
    }
    let mut scenario: Scenario = serde_path_to_error::deserialize(&doc).map_err(|e| {
        invalid(vec![Problem {
            path: super::path::FieldPath::raw(e.path().to_string()),
            message: e.into_inner().to_string(),
        }])
    })?;
    let problems = add_populations(&mut scenario, folder);
    if !problems.is_empty() {
        return Err(invalid(problems));
    }
    let mut problems = validate::check(&scenario, &Estimator);
    if let Some(judge) = &scenario.judge {
        problems.extend(check_judge(judge, folder));
    }
    if !problems.is_empty() {
        return Err(invalid(problems));
    }
    Ok(scenario)
}

/// The judge's rubric, read from the scenario's folder when it names a file, and its
/// dimensions and prompts checked.
fn check_judge(judge: &super::judge::JudgeSpec, folder: &Folder) -> Vec<Problem> {
    let at = super::path::FieldPath::root().key("judge");
    if let Some(name) = judge
        .rubric
        .as_deref()
        .filter(|n| super::judge::built_in(n).is_none())
    {
        if let Err(e) = folder.confined(name) {
            return vec![Problem {
                path: at.key("rubric"),
                message: e.to_string(),
            }];
        }
    }
    super::judge::check(judge, &folder.dir, at)
        .into_iter()
        .map(|(path, message)| Problem { path, message })
        .collect()
}

/// Makes every population's members (reading its persona table and edge list) and
/// adds them to the agents, after the agents the file names.
fn add_populations(scenario: &mut Scenario, folder: &Folder) -> Vec<Problem> {
    let mut problems = Vec::new();
    let populations = std::mem::take(&mut scenario.populations);
    // First what every population would take, before any member is made.
    let mut ready = Vec::with_capacity(populations.len());
    let mut total_bytes = 0u64;
    let mut total_members = 0usize;
    for (key, pop) in populations {
        let path = super::path::FieldPath::root().key("populations").key(&key);
        if scenario.agents.contains_key(&key) {
            problems.push(Problem {
                path,
                message: format!(
                    "{key:?} names an agent too; a population needs a name of its own"
                ),
            });
            continue;
        }
        let rows = match &pop.personas {
            None => Ok(Vec::new()),
            Some(PersonaSource::Rows(rows)) => Ok(rows.clone()),
            Some(PersonaSource::File(named)) => folder.table(named, read_rows),
        };
        let measured = rows
            .map_err(|e| Problem {
                path: path.key("personas"),
                message: chain(&e),
            })
            .and_then(|rows| match footprint(&pop, &rows) {
                Ok(f) => Ok((rows, f)),
                Err(e) => Err(Problem {
                    path: e.field.split('.').fold(path.clone(), |p, k| p.key(k)),
                    message: e.message,
                }),
            });
        match measured {
            Ok((rows, f)) => {
                total_bytes += f.bytes(pop.count);
                total_members += pop.count;
                ready.push((key, pop, rows, path));
            }
            Err(p) => problems.push(p),
        }
    }
    if total_bytes > MAX_EXPANSION_BYTES {
        problems.push(Problem {
            path: super::path::FieldPath::root().key("populations"),
            message: format!(
                "{total_members} members would take about {} MiB to make, more than the {} \
                 MiB sopsim makes at once; use fewer members or shorter styles and personas",
                total_bytes >> 20,
                MAX_EXPANSION_BYTES >> 20
            ),
        });
        return problems;
    }
    let mut kept = indexmap::IndexMap::with_capacity(ready.len());
    for (key, mut pop, rows, path) in ready {
        let members = match expand(&key, &pop, &rows) {
            Ok(m) => m,
            Err(e) => {
                problems.push(Problem {
                    path: e.field.split('.').fold(path.clone(), |p, k| p.key(k)),
                    message: e.message,
                });
                continue;
            }
        };
        if let Some((name, _)) = members
            .iter()
            .find(|(name, _)| scenario.agents.contains_key(name))
        {
            problems.push(Problem {
                path: path.key("name"),
                message: format!("member {name:?} has the name of another agent"),
            });
            continue;
        }
        if let Network::File { path: named } = &pop.network {
            let index: std::collections::HashMap<&str, u32> = members
                .iter()
                .enumerate()
                .map(|(i, (name, _))| (name.as_str(), i as u32))
                .collect();
            let edges = folder.table(named, read_edges).and_then(|pairs| {
                pairs
                    .iter()
                    .enumerate()
                    .map(
                        |(line, (a, b))| match (index.get(a.as_str()), index.get(b.as_str())) {
                            (Some(&a), Some(&b)) => Ok((a, b)),
                            _ => {
                                let unknown = if index.contains_key(a.as_str()) { b } else { a };
                                Err(NamedFileError::UnknownMember {
                                    line: line + 1,
                                    name: unknown.clone(),
                                })
                            }
                        },
                    )
                    .collect::<Result<Vec<_>, _>>()
            });
            match edges {
                Ok(edges) => pop.edges = edges,
                Err(e) => {
                    problems.push(Problem {
                        path: path.key("network").key("path"),
                        message: chain(&e),
                    });
                    continue;
                }
            }
        }
        scenario.agents.extend(members);
        kept.insert(key, pop);
    }
    scenario.populations = kept;
    problems
}

/// Resolves every knowledge-base path against the scenario's folder, and checks each
/// file: it must exist, lie inside the scenario's folder or one of `allowed` (a
/// shared config must not read `../../../etc/passwd` into a prompt), and hold entries.
fn resolve_files(
    path: &Path,
    mut scenario: Scenario,
    folder: &Folder,
) -> Result<Scenario, ScenarioError> {
    let mut problems = Vec::new();
    let confined = |named: &str| folder.confined(named);
    for (state_name, state) in scenario.sop.states.iter_mut() {
        for (role, comps) in state.components.iter_mut() {
            let Some(k) = comps.knowledge.as_mut() else {
                continue;
            };
            let field = super::path::FieldPath::root()
                .key("sop")
                .key("states")
                .key(state_name)
                .key("components")
                .key(role)
                .key("knowledge")
                .key("path");
            let checked = confined(&k.path).and_then(|real| {
                check_file(ToolKind::Knowledge, &real)?;
                Ok(real)
            });
            match checked {
                Ok(real) => k.path = real.display().to_string(),
                Err(e) => problems.push(Problem {
                    path: field,
                    message: chain(&e),
                }),
            }
        }
    }
    for (name, tool) in scenario.tools.iter_mut() {
        let Some(key) = tool.kind.file_setting() else {
            continue;
        };
        let field = super::path::FieldPath::root()
            .key("tools")
            .key(name)
            .key("config")
            .key(key);
        let Some(named) = tool.config.get(key).and_then(Value::as_str) else {
            problems.push(Problem {
                path: field,
                message: format!("a {} tool needs the file it reads here", tool.kind.as_str()),
            });
            continue;
        };
        let checked = confined(named).and_then(|real| {
            check_file(tool.kind, &real)?;
            Ok(real)
        });
        match checked {
            Ok(real) => {
                tool.config
                    .insert(key.into(), Value::String(real.display().to_string()));
            }
            Err(e) => problems.push(Problem {
                path: field,
                message: chain(&e),
            }),
        }
    }
    if problems.is_empty() {
        Ok(scenario)
    } else {
        Err(ScenarioError::Invalid {
            path: path.to_path_buf(),
            count: problems.len(),
            problems,
        })
    }
}

/// Translates the aiwaves config at `path` into a native scenario document (`sopsim
/// import`), checked to be a valid scenario, with what the translation could not carry
/// over.
pub fn translate_aiwaves(path: &Path) -> Result<(Value, Imported), ScenarioError> {
    let text = read_text(path)?;
    let doc = parse_json(path, &text)?;
    if !is_aiwaves(&doc) {
        return Err(ScenarioError::NotAiwaves {
            path: path.to_path_buf(),
        });
    }
    let (native, imported) = import_aiwaves(path, &doc)?;
    from_document(path, native.clone())?;
    Ok((native, imported))
}

/// Loads a scenario document already parsed: native, or an aiwaves 1.x config told
/// apart by its keys and translated (with what the translation could not carry over).
/// `path` names it in errors, and its folder (or one of `allowed`) is where the files
/// it names are looked up.
pub fn load_document_with(
    path: &Path,
    doc: Value,
    allowed: &[PathBuf],
) -> Result<(Scenario, Option<Imported>), ScenarioError> {
    let folder = Folder::of(path, allowed);
    if !is_aiwaves(&doc) {
        let scenario = from_document_in(path, doc, &folder)?;
        return resolve_files(path, scenario, &folder).map(|s| (s, None));
    }
    let (native, imported) = import_aiwaves(path, &doc)?;
    let scenario = from_document_in(path, native, &folder)?;
    resolve_files(path, scenario, &folder).map(|s| (s, Some(imported)))
}

/// Translates an aiwaves config at `path` into a native scenario document.
pub fn import_aiwaves(path: &Path, doc: &Value) -> Result<(Value, Imported), ScenarioError> {
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("imported");
    // aiwaves examples are all called config.json; their folder says what they are.
    let name = match (
        stem,
        path.parent()
            .and_then(|p| p.file_name())
            .and_then(|n| n.to_str()),
    ) {
        ("config", Some(dir)) => dir,
        _ => stem,
    };
    let dir = path.parent().unwrap_or(Path::new(""));
    let exists = |p: &str| dir.join(p).is_file();
    aiwaves::import(doc, name, &exists).map_err(|e| ScenarioError::Invalid {
        path: path.to_path_buf(),
        count: 1,
        problems: vec![Problem {
            path: super::path::FieldPath::raw(e.field),
            message: e.message,
        }],
    })
}

/// Validates a scenario built in code (the library API), with `origin` naming it in errors.
pub fn validate_built(origin: &str, scenario: &Scenario) -> Result<(), ScenarioError> {
    let path = PathBuf::from(origin);
    let doc = serde_json::to_value(scenario).map_err(|e| ScenarioError::Invalid {
        path: path.clone(),
        count: 1,
        problems: vec![Problem {
            path: super::path::FieldPath::root(),
            message: e.to_string(),
        }],
    })?;
    from_document(&path, doc).map(|_| ())
}
