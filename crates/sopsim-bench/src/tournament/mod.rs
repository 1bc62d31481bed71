//! Tournaments (`sopsim tournament GAME --players ROSTER`): a roster of players
//! (strategies, local models, servers) meets in a game scenario, group by group
//! ([`roster`]), each group's game run for every seed as a benchmark runs its jobs
//! (up to `jobs` at once, every model loaded once, a killed tournament resumed with
//! its finished games kept), and rated ([`ratings`]): mean payoff, Bradley–Terry for
//! two-player games, TrueSkill, and the payoff matrix. `report.json` holds no time,
//! so the same games give the same bytes whatever `jobs` was.
//!
//! ```text
//! OUT/tournament.json   what the tournament is: game, roster, seeds, model
//! OUT/manifest.jsonl    one game (a group and a seed) per line
//! OUT/runs/GROUP/scenario.json  the group's game: the game file with its players seated
//! OUT/runs/GROUP/MODE/seed-N/   a game's run folder
//! OUT/report.json, report.md, timing.json, plots/
//! ```

pub mod ratings;
pub mod report;
pub mod roster;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sopsim::error::CancelToken;
use sopsim::runner::OutputFolder;
use sopsim::setup::ModelOptions;
use sopsim::ScenarioSource;

use crate::error::BenchError;
use crate::exec::{Executed, Prepared};
use crate::job::Job;
use crate::read_back::RunStatus;
use crate::BenchObserver;

pub use report::TournamentReport;
pub use roster::{Roster, RosterError};

/// What `sopsim tournament` was asked to do.
#[derive(Debug, Clone)]
pub struct TournamentOptions {
    /// The game's scenario file: its `outcomes.players` are the seats.
    pub game: PathBuf,
    /// The roster file: the players and how they meet.
    pub roster: PathBuf,
    /// The tournament's output folder.
    pub out: PathBuf,
    /// Seeds per group: 0, 1, … seeds − 1.
    pub seeds: u64,
    /// How many games run at once, at most.
    pub jobs: usize,
    /// The model every model player without a backend of its own answers through.
    pub models: ModelOptions,
    /// Every player's noise, over the roster's.
    pub noise: Option<f64>,
}

/// A finished tournament: its report, and what this invocation ran.
pub struct TournamentRun {
    /// The report written.
    pub report: TournamentReport,
    /// What this invocation ran.
    pub executed: Executed,
    /// Games finished by an earlier invocation.
    pub skipped: usize,
}

/// `tournament.json`: what a tournament folder holds, which a resume must match.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Settings {
    game: String,
    game_sha256: String,
    roster_sha256: String,
    seeds: u64,
    llm: String,
    noise: Option<f64>,
}

const SETTINGS_FILE: &str = sopsim::TOURNAMENT_FILE;

/// Plays the tournament (blocking), telling `observer`; `cancel` stops it, leaving
/// the unfinished games for the next invocation.
pub fn run(
    opts: &TournamentOptions,
    observer: &dyn BenchObserver,
    cancel: CancelToken,
) -> Result<TournamentRun, BenchError> {
    let game = crate::run::load(&opts.game, &[])?;
    // However the path was spelt, the runs name the same file and a rerun from another
    // folder resumes.
    let game_file = canonical(&opts.game);
    let roster_error = |problems: Vec<(String, String)>| {
        BenchError::Roster(Box::new(RosterError {
            path: opts.roster.clone(),
            problems,
        }))
    };
    let game_error = |why: String| {
        BenchError::Roster(Box::new(RosterError {
            path: opts.game.clone(),
            problems: vec![("outcomes".into(), why)],
        }))
    };
    let rules = game
        .rules()
        .filter(|r| r.payoff.is_some())
        .ok_or_else(|| {
            game_error("a tournament's game pays its players: give `outcomes.payoff`".into())
        })?
        .clone();
    if rules.members.iter().any(Option::is_some) {
        return Err(game_error(
            "a tournament seats named agents, not a population's members".into(),
        ));
    }
    let seats = rules.players.clone();
    let roster_text = sopsim_core::files::read_text_bounded(&opts.roster, 1 << 20)
        .map_err(|e| roster_error(vec![("file".into(), e.to_string())]))?;
    let mut roster: Roster = sopsim_core::user_json::parse(&roster_text)
        .map_err(|e| e.to_string())
        .and_then(|v| serde_path_to_error::deserialize(v).map_err(|e| e.to_string()))
        .map_err(|why| roster_error(vec![("roster".into(), why)]))?;
    if opts.noise.is_some() {
        roster.noise = opts.noise;
    }
    let mut problems = roster::check(&roster, seats.len());
    if let Some(n) = roster.seats.filter(|n| *n != seats.len()) {
        problems.push((
            "seats".into(),
            format!(
                "the roster is for games of {n} players, and {} seats {} ({})",
                opts.game.display(),
                seats.len(),
                seats.join(", ")
            ),
        ));
    }
    if !problems.is_empty() {
        return Err(roster_error(problems));
    }
    let game_doc: serde_json::Value = sopsim_core::files::read_text_bounded(&opts.game, 8 << 20)
        .ok()
        .and_then(|t| sopsim_core::user_json::parse(&t).ok())
        .ok_or_else(|| game_error("cannot be read again".into()))?;
    let groups = roster::groups(&roster, seats.len(), 0);
    // Every group's game, checked as a scenario: a strategy the game cannot seat is
    // the roster's error, named by its player.
    let mut games: Vec<(String, Vec<String>, sopsim::Loaded)> = Vec::new();
    let mut documents: Vec<(String, serde_json::Value)> = Vec::new();
    for group in &groups {
        let (name, doc) = roster::game_of(&roster, &game_doc, &seats, group);
        if games.iter().any(|(n, _, _)| *n == name) {
            continue;
        }
        documents.push((name.clone(), doc.clone()));
        let loaded = sopsim::load(
            ScenarioSource::Document {
                origin: game_file.clone(),
                document: doc,
            },
            &[],
        )
        .map_err(|e| {
            roster_error(vec![(
                format!("players ({})", group.join(", ")),
                format!(
                    "cannot play {}: {}",
                    opts.game.display(),
                    sopsim::error::chain(&e)
                ),
            )])
        })?;
        games.push((name, group.clone(), loaded));
    }
    let mut scenarios: Vec<(
        sopsim::scenario::Scenario,
        sopsim::scenario::aiwaves::Imported,
    )> = games
        .iter()
        .map(|(_, _, l)| (l.scenario.clone(), l.imported.clone()))
        .collect();
    // Every seat is a player with its own strategy or backend: when the game has no
    // other agent, the run's own backend answers nothing, and none is loaded for it.
    let mut models = opts.models.clone();
    if game.scenario().agents.len() == seats.len() {
        models.llm = sopsim::setup::LlmChoice::Scripted;
    }
    let services = sopsim::setup::assemble(&models, scenarios.iter_mut().map(|(s, i)| (s, &*i)))?;
    let llm = services
        .first()
        .map(|s| s.llm.describe())
        .unwrap_or_default();
    let settings = Settings {
        game: game_file.display().to_string(),
        game_sha256: game.sha256.clone(),
        roster_sha256: sopsim_core::digest::sha256_hex(roster_text.as_bytes()),
        seeds: opts.seeds,
        llm,
        noise: roster.noise,
    };
    let _lock = crate::run::lock_folder(&opts.out)?;
    let folder = OutputFolder::new(&opts.out);
    let earlier = folder
        .read_json::<Settings>(SETTINGS_FILE, 1 << 20)
        .map(|earlier| Settings {
            game: canonical(Path::new(&earlier.game)).display().to_string(),
            ..earlier
        });
    match earlier {
        Ok(earlier) if earlier != settings => {
            return Err(BenchError::OtherSettings {
                out: opts.out.clone(),
                earlier: format!("{earlier:?}"),
                now: format!("{settings:?}"),
            })
        }
        Ok(_) => {}
        Err(e) if e.is_missing() => {}
        Err(e) => return Err(e.into()),
    }
    std::fs::create_dir_all(&opts.out).map_err(|source| BenchError::Io {
        path: opts.out.clone(),
        source,
    })?;
    folder.replace_json(SETTINGS_FILE, &settings)?;
    // Each game's scenario beside its runs, in the bytes its runs' digest is of: a
    // game's run is then interviewed or judged again as any other run is.
    for (name, doc) in &documents {
        let rel = format!("runs/{name}/{}", sopsim::GAME_SCENARIO_FILE);
        folder.create_dirs(&format!("runs/{name}"))?;
        folder.replace(&rel, doc.to_string().as_bytes())?;
    }
    let mut prepared: HashMap<String, Prepared> = HashMap::new();
    let mut jobs: Vec<Job> = Vec::new();
    for ((name, _, loaded), (scenario, services)) in games
        .iter()
        .zip(scenarios.into_iter().map(|(s, _)| s).zip(services))
    {
        let mode = scenario.environment.mode;
        for seed in 0..opts.seeds {
            jobs.push(Job::new(name, &game_file, &loaded.sha256, mode, seed));
        }
        prepared.insert(
            name.clone(),
            Prepared {
                scenario: Arc::new(scenario),
                services,
                max_turns: None,
                imported: loaded.imported.clone(),
                sha256: loaded.sha256.clone(),
                commands: sopsim::scenario::CommandConsent::Nothing,
            },
        );
    }
    crate::plan::write_manifest(&opts.out, &jobs)?;
    let todo: Vec<Job> = jobs
        .iter()
        .filter(|j| !crate::plan::is_finished(&j.dir(&opts.out)))
        .cloned()
        .collect();
    let skipped = jobs.len() - todo.len();
    observer.planned(todo.len(), skipped);
    let executed = crate::exec::execute(
        &opts.out,
        todo,
        &prepared,
        opts.jobs,
        observer,
        cancel.clone(),
    );
    if cancel.is_cancelled() {
        return Err(BenchError::Interrupted);
    }
    let no_probes = Default::default();
    let mut played = Vec::new();
    let mut failed = Vec::new();
    for (job, (_, group, _)) in jobs
        .iter()
        .map(|j| (j, games.iter().find(|(n, _, _)| *n == j.scenario)))
        .filter_map(|(j, g)| Some((j, g?)))
    {
        match crate::read_back::read_run(&folder, job, Some(&rules), &no_probes) {
            RunStatus::Finished { figures, .. } => {
                let payoffs: Option<Vec<f64>> = seats
                    .iter()
                    .map(|s| figures.get(&format!("payoff.{s}")).copied().flatten())
                    .collect();
                match payoffs {
                    Some(payoffs) => played.push(ratings::Game {
                        players: group.clone(),
                        seed: job.seed,
                        payoffs,
                        rounds: figures.get("rounds").copied().flatten(),
                    }),
                    None => failed.push((job.id.clone(), "no payoff was read".to_string())),
                }
            }
            RunStatus::Failed { error } => failed.push((job.id.clone(), error)),
            RunStatus::Unfinished => failed.push((job.id.clone(), "unfinished".to_string())),
        }
    }
    let players: Vec<String> = roster.players.keys().cloned().collect();
    let report = report::build(&roster, &players, &played, failed, &opts.game);
    report::write(&opts.out, &report, &executed)?;
    Ok(TournamentRun {
        report,
        executed,
        skipped,
    })
}

/// `path` as the file system names it, or as given when it cannot be resolved.
fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}
