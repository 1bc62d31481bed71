//! What a run plays and loading it: a scenario file, a document made in code, or a
//! scenario built in code, loaded and checked the one way [`crate::run`] does
//! ([`load`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::scenario::aiwaves::Imported;
use crate::scenario::{FieldPath, Problem, Scenario, ScenarioError};
use crate::setup::{self, SetupError};

/// The scenario a run plays: `From` a path, a [`Scenario`] or an `Arc` of one.
#[derive(Debug, Clone)]
pub enum ScenarioSource {
    /// A scenario file: native, or an aiwaves config translated.
    File(PathBuf),
    /// A scenario document made in code (a Python dict): `origin` names it, and its
    /// folder is where the files it names are looked up.
    Document {
        /// The path that names the document; its folder is where its files are looked up.
        origin: PathBuf,
        /// The scenario document.
        document: serde_json::Value,
    },
    /// A scenario built in code ([`ScenarioBuilder`](crate::scenario::ScenarioBuilder)
    /// validates it) or loaded before.
    Built(Arc<Scenario>),
    /// A scenario loaded before ([`load`]) from the file `origin`, with what translating
    /// it left out, which every run reports, and its digest ([`Loaded::sha256`]): many
    /// runs of one file share one load.
    Loaded {
        /// The file it was loaded from.
        origin: PathBuf,
        /// The loaded scenario.
        scenario: Arc<Scenario>,
        /// What translating an aiwaves config could not carry over.
        imported: Imported,
        /// The SHA-256 of the file's bytes when it was loaded.
        sha256: String,
    },
}

impl ScenarioSource {
    /// What errors and `run.json` call the scenario: its file, or a built one's name.
    pub fn origin(&self) -> PathBuf {
        match self {
            ScenarioSource::File(path) => path.clone(),
            ScenarioSource::Document { origin, .. } => origin.clone(),
            ScenarioSource::Built(scenario) => PathBuf::from(&scenario.name),
            ScenarioSource::Loaded { origin, .. } => origin.clone(),
        }
    }

    /// The SHA-256 `run.json` keeps of the scenario, unless loading gave it (`known`,
    /// so that a run writing no files digests nothing and a file is read once): a
    /// file's bytes (a scenario loaded before: its file's when it was loaded), or the
    /// JSON of a document or a built scenario.
    pub(crate) fn sha256(&self, known: Option<String>) -> Result<String, SetupError> {
        if let Some(sha256) = known {
            return Ok(sha256);
        }
        let json = match self {
            ScenarioSource::File(path) => {
                return Ok(sopsim_core::scenario::read_text_digested(path)?.1);
            }
            ScenarioSource::Loaded { sha256, .. } => return Ok(sha256.clone()),
            ScenarioSource::Document { document, .. } => document.to_string(),
            // Derived serializers of string-keyed maps do not fail; were one to, the
            // scenario could not be told apart from another, so it is refused.
            ScenarioSource::Built(scenario) => {
                serde_json::to_string(&**scenario).map_err(|e| ScenarioError::Invalid {
                    path: PathBuf::from(&scenario.name),
                    count: 1,
                    problems: vec![Problem {
                        path: FieldPath::root(),
                        message: format!("cannot be written as JSON to digest it: {e}"),
                    }],
                })?
            }
        };
        Ok(sopsim_core::digest::sha256_hex(json.as_bytes()))
    }
}

impl From<PathBuf> for ScenarioSource {
    fn from(path: PathBuf) -> Self {
        ScenarioSource::File(path)
    }
}

impl From<&Path> for ScenarioSource {
    fn from(path: &Path) -> Self {
        ScenarioSource::File(path.to_path_buf())
    }
}

impl From<&str> for ScenarioSource {
    fn from(path: &str) -> Self {
        ScenarioSource::File(PathBuf::from(path))
    }
}

impl From<Scenario> for ScenarioSource {
    fn from(scenario: Scenario) -> Self {
        ScenarioSource::Built(Arc::new(scenario))
    }
}

impl From<Arc<Scenario>> for ScenarioSource {
    fn from(scenario: Arc<Scenario>) -> Self {
        ScenarioSource::Built(scenario)
    }
}

/// A scenario ready to run, and what translating an aiwaves config could not carry
/// over.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The validated scenario.
    pub scenario: Scenario,
    /// What translating an aiwaves config could not carry over.
    pub imported: Imported,
    /// What `run.json` keeps of it, so that a resume plays the same scenario: the
    /// SHA-256 of the file's bytes, or of the JSON of a document or a built scenario.
    pub sha256: String,
}

/// Loads and validates a scenario as [`crate::run`] does: files it names (knowledge bases,
/// tables) must lie in its folder or in `allowed`, and populations this machine has not
/// the memory to run are refused before their members are made.
pub fn load(source: impl Into<ScenarioSource>, allowed: &[PathBuf]) -> Result<Loaded, SetupError> {
    let source = source.into();
    let loaded = load_source(&source, allowed)?;
    Ok(Loaded {
        sha256: source.sha256(loaded.known_sha256)?,
        scenario: Arc::unwrap_or_clone(loaded.scenario),
        imported: loaded.imported,
    })
}

/// What [`load_source`] loaded.
pub(crate) struct SourceLoaded {
    pub scenario: Arc<Scenario>,
    pub imported: Imported,
    /// The digest, when loading gave it: a file's, from the one read of its bytes, or
    /// one carried from a load before.
    pub known_sha256: Option<String>,
}

/// [`load`], keeping a built scenario shared.
pub(crate) fn load_source(
    source: &ScenarioSource,
    allowed: &[PathBuf],
) -> Result<SourceLoaded, SetupError> {
    let (scenario, imported, known_sha256) = match source {
        ScenarioSource::File(path) => {
            let (scenario, imported, sha256) = setup::load(path, allowed)?;
            (Arc::new(scenario), imported, Some(sha256))
        }
        ScenarioSource::Document { origin, document } => {
            let (scenario, imported) = setup::load_document(origin, document.clone(), allowed)?;
            (Arc::new(scenario), imported, None)
        }
        ScenarioSource::Built(scenario) => (scenario.clone(), None, None),
        ScenarioSource::Loaded {
            scenario,
            imported,
            sha256,
            ..
        } => (
            scenario.clone(),
            Some(imported.clone()),
            Some(sha256.clone()),
        ),
    };
    setup::check_memory(&source.origin(), &scenario, 1)?;
    setup::model_files_valid(&source.origin(), &scenario)?;
    Ok(SourceLoaded {
        scenario,
        imported: imported.unwrap_or_default(),
        known_sha256,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{ScenarioBuilder, StateBuilder};

    fn built() -> Scenario {
        ScenarioBuilder::new("chat")
            .agent("Ada", |a| a.plays("talk", "A"))
            .state("talk", StateBuilder::new(["A"]).max_turns(1).next(["end"]))
            .build()
            .unwrap()
    }

    #[test]
    fn a_source_is_named_by_its_file_its_origin_or_its_name() {
        let file = ScenarioSource::from("scenarios/debate.json");
        assert!(
            matches!(&file, ScenarioSource::File(p) if p == Path::new("scenarios/debate.json"))
        );
        assert_eq!(file.origin(), PathBuf::from("scenarios/debate.json"));
        let document = ScenarioSource::Document {
            origin: PathBuf::from("made/in_code.json"),
            document: serde_json::json!({"name": "x"}),
        };
        assert_eq!(document.origin(), PathBuf::from("made/in_code.json"));
        let built = ScenarioSource::from(built());
        assert!(matches!(&built, ScenarioSource::Built(_)));
        assert_eq!(built.origin(), PathBuf::from("chat"));
    }

    /// `run.json` keeps what the run played: a file's bytes, or the JSON of a document
    /// or a built scenario, so a resume of something else is refused.
    #[test]
    fn a_source_is_digested_as_its_bytes_or_its_json() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json");
        std::fs::write(&path, b"{\"name\": \"s\"}").unwrap();
        let sha = |bytes: &[u8]| sopsim_core::digest::sha256_hex(bytes);
        assert_eq!(
            ScenarioSource::File(path.clone()).sha256(None).unwrap(),
            sha(b"{\"name\": \"s\"}")
        );
        let document = serde_json::json!({"name": "s", "agents": {}});
        let source = ScenarioSource::Document {
            origin: path,
            document: document.clone(),
        };
        assert_eq!(
            source.sha256(None).unwrap(),
            sha(document.to_string().as_bytes())
        );
        let scenario = built();
        let json = serde_json::to_string(&scenario).unwrap();
        assert_eq!(
            ScenarioSource::from(scenario).sha256(None).unwrap(),
            sha(json.as_bytes())
        );
        let missing = ScenarioSource::File(dir.path().join("gone.json"));
        assert!(matches!(
            missing.sha256(None),
            Err(SetupError::Scenario(
                crate::scenario::ScenarioError::Io { .. }
            ))
        ));
    }

    /// Many runs of one loaded file (a benchmark's) are each what a run of the file
    /// was when it was loaded: digested as the file was then, with the notes its
    /// translation left.
    #[test]
    fn a_scenario_loaded_before_is_its_file_as_loaded_with_its_notes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json");
        let text = std::fs::read(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/debate.json"),
        )
        .unwrap();
        std::fs::write(&path, &text).unwrap();
        let loaded = load(path.as_path(), &[]).unwrap();
        assert_eq!(loaded.sha256, sopsim_core::digest::sha256_hex(&text));
        std::fs::write(&path, b"{\"name\": \"edited since\"}").unwrap();
        let notes = vec!["the config's `Memory` component was skipped".to_string()];
        let source = ScenarioSource::Loaded {
            origin: path.clone(),
            scenario: Arc::new(loaded.scenario),
            imported: Imported {
                notes: notes.clone(),
                ..Imported::default()
            },
            sha256: loaded.sha256.clone(),
        };
        assert_eq!(source.origin(), path);
        assert_eq!(source.sha256(None).unwrap(), loaded.sha256);
        let again = load_source(&source, &[]).unwrap();
        assert_eq!(again.known_sha256.as_ref(), Some(&loaded.sha256));
        assert_eq!(
            (again.scenario.name.as_str(), again.imported.notes),
            ("debate", notes)
        );
    }
}
