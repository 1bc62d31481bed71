//! `sopsim bench` throughput: how many simulations per second one process runs as
//! `--jobs` grows, with the scripted backend and the hash embedder so the harness and
//! the simulator are all there is to measure.
//!
//! `jobs/N` runs the prisoner's dilemma over 32 seeds in both modes (64 runs, 10 turns
//! each, every run writing its four files, in /dev/shm where it exists) with N runs in
//! flight. Criterion reports the time per batch of 64 runs and, from it, runs per second.
//!
//! Peak memory per concurrent simulation comes from `benches/bench_memory.sh`, which
//! compares the peak resident memory of `sopsim bench` at `--jobs 1` and `--jobs 64`.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use sopsim::scenario::Mode;
use sopsim::simulation::Services;
use sopsim_bench::exec::{execute, Prepared};
use sopsim_bench::plan::Job;

const SEEDS: u64 = 32;

/// A fresh output folder, in memory where the OS offers it: on ext4, creating files
/// right after deleting many (as every iteration does) costs more than the runs
/// themselves, and this bench measures the harness, not the disk.
fn scratch() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(dir) = tempfile::tempdir_in(shm) {
            return dir;
        }
    }
    tempfile::tempdir().unwrap()
}

fn bench_jobs(c: &mut Criterion) {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/prisoners_dilemma.json");
    let loaded = sopsim::load(file.as_path(), &[]).unwrap();
    let scenario = Arc::new(loaded.scenario);
    let prepared = HashMap::from([(
        scenario.name.clone(),
        Prepared {
            services: Services::scripted(&scenario),
            scenario: scenario.clone(),
            max_turns: None,
            imported: loaded.imported,
            sha256: loaded.sha256,
            commands: Default::default(),
        },
    )]);
    let jobs: Vec<Job> = [Mode::Cooperative, Mode::Competitive]
        .into_iter()
        .flat_map(|m| (0..SEEDS).map(move |s| (m, s)))
        .map(|(m, s)| Job::new(&scenario.name, &file, "-", m, s))
        .collect();
    let mut group = c.benchmark_group("jobs");
    group.throughput(Throughput::Elements(jobs.len() as u64));
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(8));
    for n in [1usize, 2, 8, 64] {
        group.bench_function(n.to_string(), |b| {
            b.iter_batched(
                scratch,
                |dir| {
                    let done = execute(
                        dir.path(),
                        jobs.clone(),
                        &prepared,
                        n,
                        &sopsim_bench::Unobserved,
                        Default::default(),
                    );
                    assert_eq!(done.finished, jobs.len());
                    dir
                },
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, bench_jobs);
criterion_main!(benches);
