//! The front door: [`load`] a scenario and [`run`] it (or [`run_async`]) as `sopsim run`
//! does — build the services the options ask for (or take the caller's), run it with the
//! caller's event sinks and cancellation token, write the run's files. Nothing here
//! prints, exits or installs a signal handler.

pub use crate::control::{Control, RunControl};
pub use crate::output::{
    read_run_files, Existing, FolderLock, OutFolderError, RunFiles, JUDGEMENT_FILE, PROBES_FILE,
    RUN_FILE, WORLD_FILE,
};
pub use crate::output_folder::{Entry, FolderFileError, OutputFolder};
pub use crate::source::{load, Loaded, ScenarioSource};

use std::path::{Path, PathBuf};
use std::sync::Arc;

use thiserror::Error;

use crate::error::{CancelToken, SimError};
use crate::events::{EventSink, FrontendLog};
use crate::human::{HumanInput, UntilCancelled};
use crate::journal::{Journal, Journaled, JournaledInput, JOURNAL_FILE};
use crate::output::{RunDir, RunIdentity, TranscriptWriter, EVENTS_RESUMING};
use crate::scenario::{CommandConsent, Mode, Scenario};
use crate::setup::{self, ModelOptions, SetupError};
use crate::simulation::{self, EndReason, RunConfig, RunOutcome, Services};
use crate::source::{load_source, SourceLoaded};

/// What to run and where its files go.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The scenario to run.
    pub scenario: ScenarioSource,
    /// Write `transcript.jsonl`, `events.jsonl`, `environment.json` and `summary.json`
    /// here.
    pub out: Option<PathBuf>,
    /// The mode to run in (default: the scenario's own).
    pub mode: Option<Mode>,
    /// The seed of the run's random draws.
    pub seed: u64,
    /// Overrides the scenario's `sop.max_turns`.
    pub max_turns: Option<u64>,
    /// The models, embedder and their settings to run on.
    pub models: ModelOptions,
    /// Agents a person plays.
    pub humans: Vec<String>,
    /// Stop at a turn boundary once the run has cost this many US dollars.
    pub budget_usd: Option<f64>,
    /// Stop at a turn boundary once this many tokens were used.
    pub max_total_tokens: Option<u64>,
    /// Folders besides the scenario's own that its files (knowledge bases) may be in.
    pub allowed_paths: Vec<PathBuf>,
    /// The programs the scenario's tools may start (none unless the user allows them).
    pub allowed_commands: CommandConsent,
    /// What to do when `out` holds a run already: refuse (the default), replace it, or
    /// resume it ([`Existing::Resume`]: the same scenario file, seed, mode and models,
    /// continued from its last finished turn).
    pub existing: Existing,
    /// Keep the journal a killed run is resumed from (`calls.jsonl`: every answer the
    /// run gets), as `sopsim run` does. A caller that runs a killed run again from its
    /// start instead (a benchmark) turns it off and saves writing it.
    pub resumable: bool,
    /// Judge the finished run by this judge (a `--judge` file: its spec, and the folder
    /// its rubric file is read from) rather than the scenario's own `judge`.
    pub judge: Option<(crate::scenario::judge::JudgeSpec, PathBuf)>,
}

impl RunOptions {
    /// `scenario` as `sopsim run SCENARIO` runs it: seed 0, the local models, no files
    /// written, no limits beyond the scenario's own.
    pub fn new(scenario: impl Into<ScenarioSource>) -> Self {
        Self {
            scenario: scenario.into(),
            out: None,
            mode: None,
            seed: 0,
            max_turns: None,
            models: ModelOptions::default(),
            humans: Vec::new(),
            budget_usd: None,
            max_total_tokens: None,
            allowed_paths: Vec::new(),
            allowed_commands: CommandConsent::Nothing,
            existing: Existing::Refuse,
            resumable: true,
            judge: None,
        }
    }
}

/// Why `run` failed.
#[derive(Debug, Error)]
pub enum RunError {
    /// Boxed: the setup's errors are the largest, and would make every `RunError` so.
    #[error(transparent)]
    Setup(Box<SetupError>),
    /// The run could not start, or its files could not be written.
    #[error(transparent)]
    Sim(#[from] SimError),
    /// The run stopped on an error; `kept` says what of it is on disk.
    #[error("the run stopped after {turns} finished turn(s){}", .kept.as_ref().map(ToString::to_string).unwrap_or_default())]
    Failed {
        /// Turns finished before the run stopped.
        turns: u64,
        /// Boxed: it would make every `RunError` large.
        kept: Option<Box<Kept>>,
        /// The error that stopped the run.
        #[source]
        source: SimError,
    },
    /// A resumed run stopped (refused, interrupted, failed) before it had retraced the
    /// killed run's transcript, so it left the folder's run files as they were.
    #[error("the resumed run stopped before it had retraced {}'s transcript, and {} is as it was", .out.display(), .out.display())]
    ResumeStopped {
        /// The run's output folder.
        out: PathBuf,
        /// The error that stopped the resumed run.
        #[source]
        source: SimError,
    },
}

impl From<SetupError> for RunError {
    fn from(e: SetupError) -> Self {
        RunError::Setup(Box::new(e))
    }
}

/// What a failed run left in its output folder (none without `--out`).
#[derive(Debug)]
pub struct Kept {
    /// The run's output folder.
    pub out: PathBuf,
    /// When writing the transcript failed: the whole messages it holds. Otherwise
    /// every finished turn is in it.
    pub transcript_lines: Option<u64>,
    /// Whether writing the final files (`summary.json`, `environment.json`) failed.
    pub finals_unwritten: bool,
}

impl std::fmt::Display for Kept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.transcript_lines {
            None => write!(f, ", which are in {}", self.out.display())?,
            Some(lines) => write!(
                f,
                "; {} holds {lines} message(s)",
                self.out.join("transcript.jsonl").display()
            )?,
        }
        if self.finals_unwritten {
            write!(f, ", and the final files could not all be written")?;
        }
        Ok(())
    }
}

impl RunError {
    /// Whether the input (the scenario, the settings) is at fault rather than the run.
    pub fn is_bad_input(&self) -> bool {
        match self {
            RunError::Setup(e) => e.is_bad_input(),
            RunError::Sim(e) => e.is_bad_input(),
            // A run stopped by its settings (a resumed run given fewer turns, a tool
            // set up wrongly) failed by bad input, though its finished turns are kept.
            RunError::Failed { source, .. } | RunError::ResumeStopped { source, .. } => {
                source.is_bad_input()
            }
        }
    }
}

/// What the caller connects to a run: where its events go, where people's turns come
/// from, the token that stops it, the controls that pause and step it, and models of
/// its own.
#[derive(Clone, Default)]
pub struct RunIo {
    /// Where the run's events go, besides its own files.
    pub sinks: Vec<Arc<dyn EventSink>>,
    /// Where the turns of agents a person plays come from.
    pub human_input: Option<Arc<dyn HumanInput>>,
    /// Stops the run at once when cancelled.
    pub cancel: CancelToken,
    /// Pauses, steps and stops the run between turns.
    pub control: Option<RunControl>,
    /// The model backend, embedder and prices to run on instead of those
    /// `RunOptions::models` names ([`Services::scripted`], a backend of the caller's).
    pub services: Option<Services>,
}

/// Runs a scenario as `sopsim run` does, telling `io.sinks` what happens, stopping at
/// once (the model call or wait in progress abandoned, every finished turn kept) when
/// `io.cancel` is cancelled.
///
/// It blocks: it starts an actix `System` (with a tokio runtime of its own) in the
/// calling thread, so it panics when called from inside an async runtime, tokio's
/// included ("Cannot start a runtime from within a runtime"). There, await
/// [`run_async`] instead, or call this from a thread of its own (`std::thread::spawn`;
/// not `spawn_blocking`, whose threads belong to the runtime).
pub fn run(opts: &RunOptions, io: RunIo) -> Result<RunOutcome, RunError> {
    let prepared = prepare(opts, io)?;
    let outcome = actix::System::new().block_on(simulation::run(
        prepared.scenario.clone(),
        &prepared.services,
        prepared.config,
    ))?;
    finish(opts, prepared.files, outcome)
}

/// [`run`] for async code running inside an actix `System` (`#[actix::main]`,
/// `actix::System::new().block_on`, a web server's handlers): the blocking parts (loading
/// models, asking a server which model it serves, creating files) go to the runtime's
/// blocking threads, the simulation runs on the caller's system.
pub async fn run_async(opts: RunOptions, io: RunIo) -> Result<RunOutcome, RunError> {
    // A scenario built or loaded before, on the caller's services with no files, has
    // nothing to block on.
    let blocks = !matches!(
        opts.scenario,
        ScenarioSource::Built(_) | ScenarioSource::Loaded { .. }
    ) || io.services.is_none()
        || opts.out.is_some();
    let (opts, prepared) = match blocks {
        false => {
            let prepared = prepare(&opts, io);
            (opts, prepared)
        }
        true => tokio::task::spawn_blocking(move || {
            let prepared = prepare(&opts, io);
            (opts, prepared)
        })
        .await
        .map_err(|_| SimError::Internal("setting the run up panicked"))?,
    };
    let prepared = prepared?;
    let outcome = simulation::run(
        prepared.scenario.clone(),
        &prepared.services,
        prepared.config,
    )
    .await?;
    let files = prepared.files;
    tokio::task::spawn_blocking(move || finish(&opts, files, outcome))
        .await
        .map_err(|_| SimError::Internal("writing the run's files panicked"))?
}

/// A run ready to start: its scenario, services and settings, and its files.
struct Prepared {
    scenario: Arc<Scenario>,
    services: Services,
    config: RunConfig,
    files: OutputFiles,
}

/// The output folder and its event log, when the run writes files.
struct OutputFiles {
    dir: Option<RunDir>,
    events: Option<Arc<FrontendLog>>,
}

/// Loads the scenario, builds the services the options ask for and creates the run's
/// files (blocking, but for a built scenario on the caller's services with no files).
fn prepare(opts: &RunOptions, io: RunIo) -> Result<Prepared, RunError> {
    let RunIo {
        mut sinks,
        human_input,
        cancel,
        control,
        services,
    } = io;
    let SourceLoaded {
        mut scenario,
        imported,
        known_sha256,
    } = load_source(&opts.scenario, &opts.allowed_paths)?;
    setup::check_round_fits(&scenario, opts.max_turns)?;
    // The judge given for this run takes the scenario's place, before the services it
    // names are made; its rubric file is read from its own folder.
    let judge_folder = match &opts.judge {
        Some((spec, folder)) => {
            Arc::make_mut(&mut scenario).judge = Some(spec.clone());
            Some(folder.clone())
        }
        None => opts
            .scenario
            .origin()
            .parent()
            .map(std::path::Path::to_path_buf),
    };
    opts.allowed_commands
        .check(&scenario)
        .map_err(|refused| SetupError::NotAllowed {
            path: opts.scenario.origin(),
            refused,
        })?;
    let mut services = match services {
        Some(services) => services,
        // Unshared but for a built scenario, which is then copied to be set up.
        None => setup::assemble(&opts.models, [(Arc::make_mut(&mut scenario), &imported)])?
            .pop()
            .ok_or(SimError::Internal(
                "no services were assembled for the scenario",
            ))?,
    };
    let mode = opts.mode.unwrap_or(scenario.environment.mode);
    let mut human_input = human_input
        .map(|h| Arc::new(UntilCancelled::new(h, cancel.clone())) as Arc<dyn HumanInput>);
    let (dir, transcript, (world_log, probe_log), events) = match &opts.out {
        Some(out) => {
            let identity = RunIdentity {
                sopsim: env!("CARGO_PKG_VERSION").to_string(),
                scenario: match &opts.scenario {
                    ScenarioSource::File(path) | ScenarioSource::Loaded { origin: path, .. } => {
                        Some(path.display().to_string())
                    }
                    _ => None,
                },
                scenario_sha256: opts.scenario.sha256(known_sha256)?,
                seed: opts.seed,
                mode,
                llm: services.llm.describe(),
                embedder: services.embed.name().to_string(),
            };
            let folder = RunFolder::open(
                out,
                opts.existing,
                &identity,
                crate::resume_check::world_line_bound(&scenario),
                !scenario.probes.is_empty(),
                opts.resumable,
            )?;
            if let Some(journal) = &folder.journal {
                services.llm = Arc::new(Journaled::new(services.llm, journal.clone()));
                human_input = human_input.map(|h| {
                    Arc::new(JournaledInput::new(h, journal.clone())) as Arc<dyn HumanInput>
                });
            }
            let dir = folder.dir;
            let conversation = conversation_id(&scenario.name, mode, opts.seed);
            // A resumed run keeps the killed run's event log until it has caught up.
            let events_file = if folder.transcript.caught_up() {
                "events.jsonl"
            } else {
                EVENTS_RESUMING
            };
            let events = FrontendLog::create(dir.files(), events_file, conversation, opts.seed)
                .map_err(SimError::from)?;
            let events = Arc::new(events);
            sinks.push(events.clone());
            (
                Some(dir),
                Some(folder.transcript),
                (folder.world, folder.probes),
                Some(events),
            )
        }
        None => (None, None, (None, None), None),
    };
    let config = RunConfig {
        mode: opts.mode,
        seed: opts.seed,
        max_turns: opts.max_turns,
        humans: opts.humans.clone(),
        human_input,
        sinks,
        transcript,
        world_log,
        probe_log,
        judge_folder,
        cancel: Some(cancel),
        control,
        budget_usd: opts.budget_usd,
        max_total_tokens: opts.max_total_tokens,
        notes: imported.notes,
        commands: opts.allowed_commands.clone(),
    };
    Ok(Prepared {
        scenario,
        services,
        config,
        files: OutputFiles { dir, events },
    })
}

/// A run's output folder, ready for its turns: a new run's (its identity written), or
/// a killed run's (checked to be the same run, its transcript and journal reopened).
struct RunFolder {
    dir: RunDir,
    transcript: TranscriptWriter,
    /// `world.jsonl`, for a scenario with a `world`.
    world: Option<TranscriptWriter>,
    /// `probes.jsonl`, for a scenario with `probes`.
    probes: Option<TranscriptWriter>,
    /// None for a new run that is not to be resumed.
    journal: Option<Arc<Journal>>,
}

impl RunFolder {
    /// `world_line` bounds a line of `world.jsonl`, for a scenario with a world.
    fn open(
        out: &Path,
        existing: Existing,
        identity: &RunIdentity,
        world_line: Option<u64>,
        probes: bool,
        // A new run's journal: a resumed run's is always reopened.
        journal: bool,
    ) -> Result<Self, RunError> {
        let world = world_line.is_some();
        let folder = |source| SetupError::Out {
            path: out.to_path_buf(),
            source,
        };
        let dir = RunDir::create(out, existing).map_err(folder)?;
        if existing != Existing::Resume {
            dir.files()
                .replace_json(RUN_FILE, identity)
                .map_err(SimError::from)?;
            let transcript = TranscriptWriter::create(dir.files(), "transcript.jsonl")?;
            let world = match world {
                true => Some(TranscriptWriter::create(dir.files(), WORLD_FILE)?),
                false => None,
            };
            let probes = match probes {
                true => Some(TranscriptWriter::create(dir.files(), PROBES_FILE)?),
                false => None,
            };
            let journal = match journal {
                true => Some(Arc::new(
                    Journal::create(dir.files(), JOURNAL_FILE).map_err(SimError::from)?,
                )),
                false => None,
            };
            return Ok(Self {
                dir,
                transcript,
                world,
                probes,
                journal,
            });
        }
        let then = dir.identity().map_err(folder)?;
        let differences = identity.differences(&then);
        // A run its scenario stopped (a template past its limit, a world value that
        // cannot stand) resumes from the fixed file; its turns are checked as ever.
        let fixed = differences.len() == 1
            && identity.scenario_sha256 != then.scenario_sha256
            && stopped_by_scenario(dir.files());
        if !differences.is_empty() && !fixed {
            return Err(folder(OutFolderError::OtherRun(differences)).into());
        }
        // Everything read back is checked before anything is changed.
        crate::resume_check::check(dir.files(), world_line)
            .map_err(|e| folder(OutFolderError::Unreadable(e)))?;
        // The journal first: a resume it refuses must not have touched the final files,
        // which a transcript with nothing to retrace lets go of at once.
        let journal = Journal::reopen(dir.files(), JOURNAL_FILE)
            .map_err(|e| folder(OutFolderError::Journal(e)))?;
        let caught_up = dir.on_caught_up();
        let caught_up: crate::output::CaughtUp = match fixed {
            false => caught_up,
            true => {
                let (files, identity) = (dir.files().clone(), identity.clone());
                Box::new(move || {
                    files.replace_json(RUN_FILE, &identity)?;
                    caught_up()
                })
            }
        };
        let transcript = TranscriptWriter::resume(dir.files(), "transcript.jsonl", caught_up)?;
        // The world's rounds are played again with the run's and checked against the
        // killed run's lines, as the transcript's are.
        let world = match world {
            false => None,
            true if dir.files().entry(WORLD_FILE).map_err(SimError::from)? == Entry::Nothing => {
                Some(TranscriptWriter::create(dir.files(), WORLD_FILE)?)
            }
            true => Some(TranscriptWriter::resume(
                dir.files(),
                WORLD_FILE,
                Box::new(|| Ok(())),
            )?),
        };
        // The probes' answers are asked again from the journal and checked against
        // the killed run's, as the world's rounds are.
        let probes = match probes {
            false => None,
            true if dir.files().entry(PROBES_FILE).map_err(SimError::from)? == Entry::Nothing => {
                Some(TranscriptWriter::create(dir.files(), PROBES_FILE)?)
            }
            true => Some(TranscriptWriter::resume(
                dir.files(),
                PROBES_FILE,
                Box::new(|| Ok(())),
            )?),
        };
        Ok(Self {
            dir,
            transcript,
            world,
            probes,
            journal: Some(Arc::new(journal)),
        })
    }
}

/// Whether the run in `files` ended by an error in its scenario (`summary.json`'s
/// `error_field`).
fn stopped_by_scenario(files: &crate::output_folder::OutputFolder) -> bool {
    files
        .read_json::<serde_json::Value>("summary.json", 1 << 20)
        .is_ok_and(|s| s["error_field"].is_string())
}

/// The conversation id of a run's event payloads (`events.jsonl`).
pub fn conversation_id(scenario: &str, mode: Mode, seed: u64) -> String {
    format!("{scenario}-{}-{seed}", mode.as_str())
}

/// Writes the final files and says how the run ended (blocking).
fn finish(
    opts: &RunOptions,
    files: OutputFiles,
    outcome: RunOutcome,
) -> Result<RunOutcome, RunError> {
    // A resumed run that ended in any way before it had retraced the killed run's
    // transcript leaves the killed run's files as they were.
    if let (Some(dir), Some(out)) = (&files.dir, &opts.out) {
        if opts.existing == Existing::Resume && dir.is_retracing() {
            dir.drop_resume().map_err(SimError::from)?;
            let source = outcome.error.unwrap_or(SimError::ResumeUnfinished {
                path: dir.files().path("transcript.jsonl").display().to_string(),
                ended_by: outcome.summary.ended_by.as_str(),
            });
            return Err(RunError::ResumeStopped {
                out: out.clone(),
                source,
            });
        }
    }
    // The final files are written even after a failure (they say how the run ended),
    // but the first failure is the one reported.
    let written = match &files.dir {
        Some(dir) => dir.write_final(
            &outcome.environment,
            &outcome.summary,
            outcome.network.as_ref(),
            outcome.judgement.as_ref(),
        ),
        None => Ok(()),
    };
    if outcome.summary.ended_by == EndReason::Error {
        let source = outcome.error.unwrap_or(SimError::Internal(
            "the run ended by an error it did not keep",
        ));
        let transcript_failed = matches!(
            &source,
            SimError::Io { what, .. } if what.ends_with("transcript.jsonl")
        );
        let kept = match (&files.dir, &opts.out) {
            (Some(dir), Some(out)) => Some(Box::new(Kept {
                out: out.clone(),
                transcript_lines: transcript_failed.then(|| dir.transcript_lines()).flatten(),
                finals_unwritten: written.is_err(),
            })),
            _ => None,
        };
        return Err(RunError::Failed {
            turns: outcome.summary.turns,
            kept,
            source,
        });
    }
    if let Some(failure) = files.events.as_ref().and_then(|e| e.take_failure()) {
        return Err(SimError::Io {
            what: failure.what,
            source: failure.source,
        }
        .into());
    }
    written?;
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_run_says_where_its_finished_turns_are() {
        let kept = |transcript_lines, finals_unwritten| Kept {
            out: PathBuf::from("/runs/a"),
            transcript_lines,
            finals_unwritten,
        };
        assert_eq!(kept(None, false).to_string(), ", which are in /runs/a");
        assert_eq!(
            kept(Some(3), true).to_string(),
            "; /runs/a/transcript.jsonl holds 3 message(s), and the final files could not \
             all be written"
        );
    }

    /// Bad input exits with 2, a failed run with 1: a run its settings stopped (a
    /// resume given fewer turns) is bad input even though it ran.
    #[test]
    fn a_run_its_settings_stopped_is_bad_input_and_one_that_broke_is_not() {
        let failed = |source| RunError::Failed {
            turns: 4,
            kept: None,
            source,
        };
        let below_limit = SimError::ResumeBelowLimit {
            path: "t.jsonl".into(),
            left: 2,
            max_turns: 4,
        };
        assert!(failed(below_limit).is_bad_input());
        assert!(RunError::ResumeStopped {
            out: PathBuf::from("/runs/a"),
            source: SimError::ResumeEnded {
                path: "t.jsonl".into(),
                left: 1
            },
        }
        .is_bad_input());
        assert!(!failed(SimError::Internal("a broken rule")).is_bad_input());
        assert!(!failed(SimError::NoAgent {
            state: "s".into(),
            role: "r".into()
        })
        .is_bad_input());
    }

    #[test]
    fn a_conversation_is_named_by_scenario_mode_and_seed() {
        assert_eq!(
            conversation_id("debate", Mode::Competitive, 7),
            "debate-competitive-7"
        );
    }
}
