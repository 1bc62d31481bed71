//! The model files a scenario names (`agents.NAME.llm.model`, a population's, a
//! state's or a role's), checked where they are named: a regular file (a FIFO or a
//! device is never opened), a GGUF file of an architecture the engine runs. A path
//! that is not there yet is a note for `validate` (it may be fetched later, or live
//! on a cluster) and an error for a run; every message names the field.

use std::path::{Path, PathBuf};

use crate::scenario::{BackendKind, FieldPath, LlmSettings, Scenario};

/// A model file a scenario names, and the field that names it.
#[derive(Debug, Clone, PartialEq)]
pub struct NamedModelFile {
    /// The scenario field that names the file.
    pub field: FieldPath,
    /// The file's path, as the scenario names it.
    pub path: PathBuf,
    /// Whether its layer names the local backend (otherwise the run's backend reads
    /// the model, and loads it only when it is the local one).
    pub local: bool,
}

/// What is wrong with a named model file.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ModelFileProblem {
    /// Nothing is there (yet).
    Missing,
    /// Something is there that is not a model sopsim runs.
    Refused(String),
}

/// Every model file `scenario` names, in the order of its fields. A layer's model is
/// a file when its backend is the local one, or when no backend is named and the
/// model reads as a path (`…/…` or `….gguf`); a known model's name (`qwen15`) is not.
pub(crate) fn named_model_files(scenario: &Scenario) -> Vec<NamedModelFile> {
    let root = FieldPath::root;
    let mut layers: Vec<(FieldPath, &LlmSettings)> = vec![(root().key("llm"), &scenario.llm)];
    for (name, agent) in &scenario.agents {
        if let (None, Some(llm)) = (&agent.member, agent.llm.as_deref()) {
            layers.push((root().key("agents").key(name).key("llm"), llm));
        }
    }
    for (name, p) in &scenario.populations {
        if let Some(llm) = &p.llm {
            layers.push((root().key("populations").key(name).key("llm"), llm));
        }
    }
    for (name, st) in &scenario.sop.states {
        let at = root().key("sop").key("states").key(name);
        if let Some(llm) = &st.llm {
            layers.push((at.key("llm"), llm));
        }
        for (role, c) in &st.components {
            if let Some(llm) = &c.llm {
                layers.push((at.key("components").key(role).key("llm"), llm));
            }
        }
    }
    layers
        .into_iter()
        .filter_map(|(at, llm)| {
            let model = llm.model.as_deref()?;
            let local = llm.backend == Some(BackendKind::Local);
            let file = match llm.backend {
                Some(BackendKind::Local) => true,
                Some(_) => false,
                None => model.contains('/') || model.ends_with(".gguf"),
            };
            (file && crate::models::find(model).is_err()).then(|| NamedModelFile {
                field: at.key("model"),
                path: PathBuf::from(model),
                local,
            })
        })
        .collect()
}

/// What is wrong with the model file at `path`, if anything: it is looked at before
/// it is opened, opened without waiting, and read as GGUF.
pub(crate) fn check_model_file(path: &Path) -> Result<(), ModelFileProblem> {
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ModelFileProblem::Missing)
        }
        Err(e) => return Err(ModelFileProblem::Refused(e.to_string())),
    };
    if meta.is_dir() {
        return Err(ModelFileProblem::Refused(
            "is a folder, not a model file".into(),
        ));
    }
    if !meta.is_file() {
        return Err(ModelFileProblem::Refused(
            "is not a regular file (a FIFO, a device or a socket): a model is never opened from one"
                .into(),
        ));
    }
    readable_model(path).map_err(ModelFileProblem::Refused)
}

#[cfg(feature = "local")]
fn readable_model(path: &Path) -> Result<(), String> {
    let file = sopsim_infer::gguf::GgufFile::open(path)
        .map_err(|e| sopsim_core::error_chain::chain(&e))?;
    sopsim_infer::gguf::ModelShape::read(&file)
        .map(|_| ())
        .map_err(|e| sopsim_core::error_chain::chain(&e))
}

#[cfg(not(feature = "local"))]
fn readable_model(path: &Path) -> Result<(), String> {
    use std::io::Read;
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .map_err(|e| e.to_string())?;
    match &magic {
        b"GGUF" => Ok(()),
        _ => Err("is not a GGUF file (it does not start with GGUF)".into()),
    }
}

/// The named model files that are not there yet, as `validate` notes them.
pub fn missing_model_files(scenario: &Scenario) -> Vec<NamedModelFile> {
    named_model_files(scenario)
        .into_iter()
        .filter(|named| check_model_file(&named.path) == Err(ModelFileProblem::Missing))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(agent_llm: serde_json::Value) -> Scenario {
        let doc = serde_json::json!({
            "name": "t",
            "agents": {"You": {"roles": {"talk": "R"}, "llm": agent_llm}},
            "sop": {"start": "talk", "states": {"talk": {"roles": ["R"], "transition": {"max_turns": 1}, "next": ["end"]}}}
        });
        sopsim_core::scenario::from_document(std::path::Path::new("t.json"), doc).unwrap()
    }

    #[test]
    fn a_model_path_is_checked_where_it_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe.gguf");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let junk = dir.path().join("junk.gguf");
        std::fs::write(&junk, b"not a model").unwrap();
        let s = scenario(serde_json::json!({"model": fifo.to_str().unwrap()}));
        let named = named_model_files(&s);
        assert_eq!(named.len(), 1);
        assert_eq!(named[0].field.to_string(), "agents.You.llm.model");
        // Looked at, never opened: a FIFO would wait for a writer.
        assert!(matches!(
            check_model_file(&fifo),
            Err(ModelFileProblem::Refused(why)) if why.contains("FIFO")
        ));
        assert!(matches!(
            check_model_file(&junk),
            Err(ModelFileProblem::Refused(_))
        ));
        assert!(matches!(
            check_model_file(dir.path()),
            Err(ModelFileProblem::Refused(_))
        ));
        assert_eq!(
            check_model_file(&dir.path().join("later.gguf")),
            Err(ModelFileProblem::Missing)
        );
        // A known model's name, and a server's model, are not files.
        for llm in [
            serde_json::json!({"model": "qwen05"}),
            serde_json::json!({"backend": "openai", "model": "org/model"}),
        ] {
            assert!(named_model_files(&scenario(llm)).is_empty());
        }
    }
}
