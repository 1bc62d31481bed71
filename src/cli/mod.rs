//! The command line: flags ([`args`]), what each command prints, exit codes
//! ([`failure`]), Ctrl-C ([`signals`]), the live view ([`terminal`]), people's input
//! ([`stdin`]), progress bars ([`progress`]) and the web viewer ([`serve`], [`view`]).
//! Everything else is a library call.

mod args;
mod chat;
mod cluster;
mod failure;
mod inspect;
mod interview;
mod judge;
mod judge_items;
mod models;
mod progress;
mod run;
mod serve;
mod signals;
mod stdin;
mod terminal;
mod tournament;
mod view;

use std::io::Write;
use std::process::ExitCode;

use clap::{CommandFactory, Parser};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

use args::{Cli, Command, ImportFormat, ModelsAction};
use failure::Failure;

/// Parses the command line, runs the command, and returns the exit code.
pub(crate) fn main() -> ExitCode {
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
    let filter = match log_filter(std::env::var("SOPSIM_LOG").ok().as_deref()) {
        Ok(filter) => filter,
        Err(message) => {
            eprintln!("error: {}", terminal::printable(&message));
            return ExitCode::from(2);
        }
    };
    let log = tracing_subscriber::fmt::layer()
        .with_ansi(terminal::use_color(std::io::IsTerminal::is_terminal(
            &std::io::stderr(),
        )))
        .with_writer(std::io::stderr);
    tracing_subscriber::registry()
        .with(log.with_filter(filter))
        .init();
    compute_settings();
    signals::set_grace(std::time::Duration::from_secs(cli.stop_grace));
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

/// The log filter: `SOPSIM_LOG`'s directives (`target=level` or a bare level, separated
/// by commas), or by default sopsim's own errors only.
fn log_filter(directives: Option<&str>) -> Result<tracing_subscriber::filter::Targets, String> {
    match directives {
        Some(d) if !d.trim().is_empty() => d.parse().map_err(|e| {
            format!("SOPSIM_LOG={d:?}: {e}; give target=level pairs, such as sopsim=debug")
        }),
        _ => Ok(tracing_subscriber::filter::Targets::new()
            .with_target("sopsim", tracing::Level::ERROR)
            .with_target("sopsim_cli", tracing::Level::ERROR)),
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
        Command::Interview(args) => interview::interview(args),
        Command::Judge(args) => judge::judge(args),
        Command::Tournament(args) => tournament::tournament(args),
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

#[cfg(test)]
mod tests {
    use super::log_filter;

    #[test]
    fn log_directives_are_read_and_bad_ones_named() {
        let filter = log_filter(Some("sopsim=debug,rmcp=warn")).unwrap();
        assert!(filter.would_enable("sopsim::llm", &tracing::Level::DEBUG));
        assert!(!filter.would_enable("reqwest", &tracing::Level::ERROR));
        let quiet = log_filter(None).unwrap();
        assert!(quiet.would_enable("sopsim::simulation", &tracing::Level::ERROR));
        assert!(!quiet.would_enable("sopsim::simulation", &tracing::Level::WARN));
        assert!(!quiet.would_enable("rmcp", &tracing::Level::ERROR));
        let error = log_filter(Some("sopsim=loud")).unwrap_err();
        assert!(error.starts_with("SOPSIM_LOG="), "{error}");
    }
}
