//! Finished runs judged again (`sopsim judge`): each run's folder read back with its
//! scenario, judged by another judge or rubric (or the scenario's own) on the model
//! the options name, into a judgement file of its own; nothing else of the folder
//! changes, and nothing runs again.

use std::path::{Path, PathBuf};

use crate::finished_run::FinishedRunError;
use crate::judgement::judge;
use crate::llm::LlmClient;
use crate::output_folder::FolderFileError;
use crate::scenario::judge::{JudgeSpec, RubricError};
use crate::setup::{EmbedderChoice, ModelOptions, SetupError};
use sopsim_core::judging::Judgement;

/// What to judge again, and how.
#[derive(Debug, Clone)]
pub struct JudgeOptions {
    /// The judge (a `--judge` file's spec and the folder its rubric is read from);
    /// `None`: the scenario's own.
    pub judge: Option<(JudgeSpec, PathBuf)>,
    /// The scenario file the runs were made from (default: the one each `run.json`
    /// names).
    pub scenario: Option<PathBuf>,
    /// The model that judges, unless the judge names its own.
    pub models: ModelOptions,
    /// The file each judgement goes to in its run's folder (default `judgement.json`;
    /// another name keeps a second judge's beside the first).
    pub into: String,
}

/// Why a run could not be judged again.
#[derive(Debug, thiserror::Error)]
pub enum JudgeError {
    /// The run's folder or its scenario could not be read.
    #[error(transparent)]
    Run(Box<FinishedRunError>),
    /// Neither the scenario nor the options give a judge for the run in this folder.
    #[error("{0}: neither the scenario nor the options give a judge")]
    NoJudge(String),
    /// The judgement file name given is not a plain name ending in `.json`.
    #[error("{0}: a judgement's file name is a plain name ending in .json")]
    BadName(String),
    /// The judge's rubric could not be read.
    #[error(transparent)]
    Rubric(#[from] RubricError),
    /// The judging model could not be set up.
    #[error(transparent)]
    Setup(Box<SetupError>),
    /// A file of the run's folder could not be read or written.
    #[error(transparent)]
    File(#[from] FolderFileError),
    /// The runtime that runs the model calls could not be started.
    #[error("the model could not be run")]
    Runtime(#[source] std::io::Error),
}

impl From<FinishedRunError> for JudgeError {
    /// Boxed: a setup's error with its setting and cause would make every result
    /// carrying a `JudgeError` large.
    fn from(e: FinishedRunError) -> Self {
        JudgeError::Run(Box::new(e))
    }
}

impl From<SetupError> for JudgeError {
    fn from(e: SetupError) -> Self {
        JudgeError::Setup(Box::new(e))
    }
}

impl JudgeError {
    /// Whether the user's input is at fault (exit 2), rather than the model.
    pub fn is_bad_input(&self) -> bool {
        match self {
            JudgeError::Setup(e) => e.is_bad_input(),
            JudgeError::Run(e) => match e.as_ref() {
                FinishedRunError::Setup(e) => e.is_bad_input(),
                _ => true,
            },
            JudgeError::Runtime(_) => false,
            _ => true,
        }
    }
}

/// Judges the finished runs in `folders` again, each into its `opts.into`, and
/// returns each one's judgement (or why not). Every run of one scenario shares one
/// set of services: each model is loaded once. Nothing else of a folder is changed.
pub fn judge_again(opts: &JudgeOptions, folders: &[PathBuf]) -> Vec<Result<Judgement, JudgeError>> {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            let e = std::sync::Arc::new(e);
            return folders
                .iter()
                .map(|_| Err(JudgeError::Runtime(std::io::Error::other(e.to_string()))))
                .collect();
        }
    };
    let mut services: std::collections::HashMap<String, crate::simulation::Services> =
        Default::default();
    folders
        .iter()
        .map(|dir| {
            if !is_plain_json_name(&opts.into) {
                return Err(JudgeError::BadName(opts.into.clone()));
            }
            let run = crate::finished_run::read(dir, opts.scenario.as_deref())?;
            let mut scenario = run.scenario;
            let (spec, folder) = match &opts.judge {
                Some((spec, folder)) => (spec.clone(), folder.clone()),
                None => {
                    let spec = scenario
                        .judge
                        .clone()
                        .ok_or_else(|| JudgeError::NoJudge(dir.display().to_string()))?;
                    (
                        spec,
                        run.path.parent().map(Path::to_path_buf).unwrap_or_default(),
                    )
                }
            };
            scenario.judge = Some(spec.clone());
            let key = format!("{}\0{}", run.identity.scenario_sha256, run.path.display());
            let ready = match services.get(&key) {
                Some(s) => s.clone(),
                None => {
                    let mut models = opts.models.clone();
                    models.embedder = EmbedderChoice::Hash;
                    let made = crate::setup::assemble(&models, [(&mut scenario, &run.imported)])?
                        .pop()
                        .ok_or(SetupError::NoScenarios)?;
                    services.insert(key, made.clone());
                    made
                }
            };
            let summary: Option<serde_json::Value> =
                run.folder.read_json("summary.json", 64 << 20).ok();
            let run_models = summary
                .as_ref()
                .and_then(|s| s["tokens_by_model"].as_object())
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default();
            let llm = LlmClient::new(ready.llm.clone(), run.identity.seed);
            let judged = runtime.block_on(judge(
                &scenario,
                &spec,
                &folder,
                &run.transcript,
                llm,
                run_models,
            ))?;
            run.folder.replace_json(&opts.into, &judged)?;
            Ok(judged)
        })
        .collect()
}

/// Whether `name` is a file name of the run's folder a judgement may take: no path,
/// ending in `.json`.
fn is_plain_json_name(name: &str) -> bool {
    name.ends_with(".json")
        && !name.contains('/')
        && !name.contains('\\')
        && !name.starts_with('.')
        && !crate::output::RUN_FILES
            .iter()
            .any(|f| *f == name && *f != crate::output::JUDGEMENT_FILE)
}
