//! The `sopsim` command line: parse, call the library, print, exit 0 / 1 / 2.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

use sopsim::runner::{self, CommandError, EmbedderChoice, LlmChoice, RunOptions};
use sopsim::scenario::{self, Mode};

#[derive(Parser)]
#[command(name = "sopsim", version, about = "Actor-based multi-agent simulator")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a scenario and watch the agents talk.
    Run {
        /// The scenario file (JSON).
        scenario: PathBuf,
        /// Write transcript.jsonl, events.jsonl, environment.json and summary.json here.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Override the scenario's environment type.
        #[arg(long, value_enum)]
        mode: Option<ModeArg>,
        /// Seed for random speaker choice and sampling.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Stop after this many turns in all.
        #[arg(long)]
        max_turns: Option<u64>,
        /// Which model answers.
        #[arg(long, value_enum, default_value_t = LlmArg::Scripted)]
        llm: LlmArg,
        /// Which embedder indexes messages for relevant-history retrieval.
        #[arg(long, value_enum, default_value_t = EmbedderArg::Hash)]
        embedder: EmbedderArg,
        /// Type this agent's turns on standard input (repeatable).
        #[arg(long = "human", value_name = "NAME")]
        humans: Vec<String>,
        /// Do not print the transcript as it happens.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Check a scenario file; exit 0 if it is valid, 2 with every problem if not.
    Validate { scenario: PathBuf },
    /// Print the JSON Schema of the scenario format (for editors).
    Schema,
}

#[derive(Clone, Copy, ValueEnum)]
enum ModeArg {
    Cooperative,
    Competitive,
}

#[derive(Clone, Copy, ValueEnum)]
enum LlmArg {
    /// Replies from the scenario's `script` section.
    Scripted,
}

#[derive(Clone, Copy, ValueEnum)]
enum EmbedderArg {
    /// Feature hashing: fast, no model.
    Hash,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("SOPSIM_LOG"))
        .with_writer(std::io::stderr)
        .init();
    match execute(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// Prints to stdout; a closed pipe (`sopsim schema | head`) is not an error.
fn say(text: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout().lock(), "{text}");
}

fn execute(command: Command) -> Result<(), CommandError> {
    match command {
        Command::Run {
            scenario,
            out,
            mode,
            seed,
            max_turns,
            llm,
            embedder,
            humans,
            quiet,
        } => {
            let opts = RunOptions {
                scenario,
                out,
                mode: mode.map(|m| match m {
                    ModeArg::Cooperative => Mode::Cooperative,
                    ModeArg::Competitive => Mode::Competitive,
                }),
                seed,
                max_turns,
                llm: match llm {
                    LlmArg::Scripted => LlmChoice::Scripted,
                },
                embedder: match embedder {
                    EmbedderArg::Hash => EmbedderChoice::Hash,
                },
                humans,
                quiet,
            };
            let outcome = runner::run(&opts)?;
            if quiet {
                let s = &outcome.summary;
                println!(
                    "{}: {} turns, ended by {}, final state {}",
                    s.scenario,
                    s.turns,
                    s.ended_by.as_str(),
                    s.final_state
                );
            }
            Ok(())
        }
        Command::Validate { scenario } => {
            let s = runner::load(&scenario)?;
            println!(
                "{}: valid ({} states, {} agents)",
                scenario.display(),
                s.sop.states.len(),
                s.agents.len()
            );
            Ok(())
        }
        Command::Schema => {
            let text = serde_json::to_string_pretty(scenario::schema())
                .map_err(|e| CommandError::Runtime(e.to_string()))?;
            say(&text);
            Ok(())
        }
    }
}
