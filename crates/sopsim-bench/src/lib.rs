//! sopsim-bench: the benchmark of `sopsim bench`, cooperative against competitive over
//! many seeds, on the `sopsim` runtime's front door.
//!
//! The front door is [`run`] with [`BenchOptions`], told how it goes through a
//! [`BenchObserver`]; a folder's results are read back with
//! [`read_back::read_bench_files`], and the shards of a cluster's benchmark merged with
//! [`merge::merge`].
//!
//! # Layout
//!
//! A benchmark expands scenario × mode × seed into jobs ([`plan`], one [`job`] each;
//! [`shard`] picks a cluster task's share), runs the unfinished ones up to
//! `BenchOptions::jobs` at a time in one process ([`exec`], each through
//! `sopsim::run_async` into a run folder of its own, without the journal a resume
//! would read: a killed job runs again from its start), reads every run back from its
//! folder ([`read_back::read_run`], figures from [`extract`]), summarises them with
//! [`stats`] and writes `report.json`, `timing.json`, `report.md` ([`report`]) and the
//! [`plot`]s. A benchmark's runs are judged again by [`rejudge`], which writes the
//! report again.
//!
//! ```text
//! OUT/bench.json          settings every run in OUT shares
//! OUT/manifest.jsonl      one job per line
//! OUT/runs/SCENARIO/MODE/seed-N/   a run's folder: transcript.jsonl, events.jsonl, summary.json, environment.json, run.json
//! OUT/report.json         deterministic: the same runs give the same bytes
//! OUT/timing.json         wall time, latency, throughput, peak memory
//! OUT/report.md           both, for people, with the plots
//! OUT/plots/              SVG and PNG
//! ```

pub mod agreement;
pub mod bradley_terry;
mod brief;
mod error;
pub mod exec;
pub mod extract;
pub mod files_reference;
pub mod job;
pub mod judged_items;
mod markdown;
pub mod merge;
mod outputs;
pub mod people;
pub mod plan;
#[cfg(feature = "plots")]
pub mod plot;
pub mod read_back;
mod rejudge;
pub mod report;
mod run;
pub mod shard;
pub mod stats;
mod summary_figures;
pub mod tournament;
mod world_figures;

pub use error::BenchError;
pub use exec::JobResult;
pub use rejudge::{rejudge, Rejudged};
pub use run::{run, BenchObserver, BenchOptions, BenchRun, Unobserved, MAX_SEEDS};
pub use shard::{Shard, ShardError, ShardPlan};
