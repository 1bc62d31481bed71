//! The command line: flags ([`args`]), what each command prints, exit codes
//! ([`failure`]), Ctrl-C ([`signals`]), the live view ([`terminal`]), people's input
//! ([`stdin`]), progress bars ([`progress`]) and the web viewer ([`serve`], [`view`]).
//! Everything else is a library call.

mod args;
mod chat;
mod cluster;
mod failure;
mod inspect;
mod models;
mod progress;
mod run;
mod serve;
mod signals;
mod stdin;
mod terminal;
mod view;

use std::io::Write;
use std::process::ExitCode;

use clap::{CommandFactory, Parser};

use args::{Cli, Command, ImportFormat, ModelsAction};
use failure::Failure;

/// Parses the command line, runs the command, and returns the exit code.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    // Unless asked for, only sopsim's own errors reach the terminal: a library's log
    // line (rmcp's, say) would interleave with the transcript and say less than the
    // error sopsim reports for it.
    let filter = match std::env::var("SOPSIM_LOG") {
        Ok(directives) if !directives.is_empty() => tracing_subscriber::EnvFilter::new(directives),
        _ => tracing_subscriber::EnvFilter::new("off,sopsim=error,sopsim_cli=error"),
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(terminal::use_color(std::io::IsTerminal::is_terminal(
            &std::io::stderr(),
        )))
        .with_writer(std::io::stderr)
        .init();
    compute_settings();
    // Benchmarks open two files per run; the soft limit is often far below the hard one.
    let _ = rlimit::increase_nofile_limit(u64::MAX);
    match execute(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("error: {}", terminal::printable(failure.message()));
            failure.exit_code()
        }
    }
}

/// How model work runs, from the environment, before any model work
/// ([`sopsim::setup::set_compute_from`]).
fn compute_settings() {
    sopsim::setup::set_compute_from(&args::var);
}

/// Prints to stdout, control characters escaped; a closed pipe (`sopsim schema |
/// head`) is not an error.
fn say(text: &str) {
    let _ = writeln!(std::io::stdout().lock(), "{}", terminal::printable(text));
}

/// A note on stderr, control characters escaped.
fn note(text: &str) {
    eprintln!("note: {}", terminal::printable(text));
}

fn execute(command: Command) -> Result<(), Failure> {
    match command {
        Command::Run(args) => run::run(args),
        Command::Bench(args) => run::bench(args),
        Command::Import {
            format: ImportFormat::Aiwaves { config },
        } => inspect::import_aiwaves(&config),
        Command::Validate {
            scenario,
            format,
            allowed_paths,
        } => inspect::validate(&scenario, format, &allowed_paths),
        Command::Schema { format } => inspect::schema(format),
        Command::Serve {
            dir,
            addr,
            serve_token,
        } => view::serve_folder(&dir, addr, serve_token),
        Command::Models {
            action: ModelsAction::Fetch { names },
        } => models::fetch(&names),
        Command::Models {
            action: ModelsAction::List { format },
        } => models::list(format),
        Command::Embed {
            texts,
            embedder,
            embedder_model,
            base_url,
        } => models::embed(&texts, embedder, embedder_model, base_url),
        Command::Chat(args) => chat::chat(args),
        Command::Completions { shell } => {
            let mut out = std::io::stdout().lock();
            clap_complete::generate(shell, &mut Cli::command(), "sopsim", &mut out);
            Ok(())
        }
        Command::Man => {
            let mut out = std::io::stdout().lock();
            clap_mangen::Man::new(Cli::command())
                .render(&mut out)
                .map_err(|e| Failure::runtime(&e))
        }
    }
}
