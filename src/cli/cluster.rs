//! `sopsim bench merge` and `sopsim bench template`: a benchmark split into shards on
//! a cluster's own engine (a Slurm job array, a Kubernetes Indexed Job) and merged.

use std::path::Path;

use clap::Parser;

use sopsim_bench::merge::{merge as merge_shards, MergeOptions};

use super::args::{Cli, Command, Engine};
use super::failure::Failure;
use super::say;

pub(super) fn merge(
    out: &Path,
    shards: &[std::path::PathBuf],
    allow_missing: bool,
    allowed_paths: Vec<std::path::PathBuf>,
) -> Result<(), Failure> {
    let started = std::time::Instant::now();
    let merged = merge_shards(&MergeOptions {
        out: out.to_path_buf(),
        shards: shards.to_vec(),
        allow_missing,
        allowed_paths,
    })?;
    say(&format!(
        "merged {} runs from {} shard folder(s) into {} in {:.2} s{}",
        merged.gathered,
        shards.len(),
        out.display(),
        started.elapsed().as_secs_f64(),
        if merged.missing.is_empty() {
            String::new()
        } else {
            format!("; {} planned runs are missing", merged.missing.len())
        }
    ));
    say(&format!("report: {}", out.join("report.md").display()));
    Ok(())
}

/// What a template is made from.
pub(super) struct Template<'a> {
    pub engine: Engine,
    pub shards: u64,
    pub max_parallel: Option<u64>,
    pub out: &'a Path,
    pub image: &'a str,
    pub volume_claim: &'a str,
    pub bench: &'a [String],
}

/// The job description, after checking the bench arguments as `sopsim bench` would.
pub(super) fn template(t: &Template) -> Result<String, Failure> {
    let args: Vec<String> = ["sopsim", "bench"]
        .iter()
        .map(|s| s.to_string())
        .chain(t.bench.iter().cloned())
        .collect();
    let parsed = Cli::try_parse_from(&args)
        .map_err(|e| Failure::BadInput(format!("the bench arguments after --: {}", e.kind())))?;
    let Command::Bench(bench) = parsed.command else {
        return Err(Failure::BadInput(
            "the arguments after -- must be bench arguments".into(),
        ));
    };
    if bench.action.is_some() {
        return Err(Failure::BadInput(
            "the arguments after -- must be a benchmark to run, not merge or template".into(),
        ));
    }
    for flag in ["--out", "--shard", "--shards"] {
        if t.bench
            .iter()
            .any(|a| a == flag || a.starts_with(&format!("{flag}=")))
        {
            return Err(Failure::BadInput(format!(
                "{flag}: the template sets it for each shard; give --out before --"
            )));
        }
    }
    let parallel = t.max_parallel.unwrap_or(t.shards).min(t.shards);
    Ok(match t.engine {
        Engine::Slurm => slurm(t, parallel, bench.run.jobs),
        Engine::K8s => k8s(t, parallel, &on_volume(t.out)),
    })
}

/// Where `out` is inside a Kubernetes pod, whose volume is mounted at `/data`: a path
/// already under it as it is, any other under it (`/shared/b` is `/data/shared/b`).
fn on_volume(out: &std::path::Path) -> String {
    let volume = std::path::Path::new(VOLUME);
    if out.starts_with(volume) {
        return out.display().to_string();
    }
    let inside = out.strip_prefix("/").unwrap_or(out);
    volume.join(inside).display().to_string()
}

/// Where the Kubernetes template mounts the volume claim.
const VOLUME: &str = "/data";

fn quote(s: &str) -> String {
    shlex::try_quote(s).map_or_else(|_| format!("'{s}'"), |q| q.into_owned())
}

fn slurm(t: &Template, parallel: u64, jobs: u32) -> String {
    // Each task gets a core per run it runs at once.
    let out = t.out.display().to_string();
    let args: Vec<String> = t.bench.iter().map(|a| quote(a)).collect();
    let last = t.shards - 1;
    format!(
        r#"#!/bin/bash
# sopsim benchmark as a Slurm job array: {shards} shards, at most {parallel} at once.
# Shard I runs the planned runs at positions k with k mod {shards} = I into {out}/shard-I,
# resuming if it is run again. OPENAI_BASE_URL and OPENAI_API_KEY, when set where you
# submit, reach every task (sbatch exports the environment).
#
# Submit:  jobid=$(sbatch --parsable this-script.sh)
# Merge:   sbatch --dependency=afterok:$jobid --wrap "sopsim bench merge {out_q} {out_q}/shard-*"
#SBATCH --job-name=sopsim-bench
#SBATCH --array=0-{last}%{parallel}
#SBATCH --cpus-per-task={cpus}
#SBATCH --output={out}/slurm-%A_%a.log
set -euo pipefail
mkdir -p {out_q}
exec sopsim bench {args} --out {out_q}/shard-$SLURM_ARRAY_TASK_ID --shard env --shards {shards} --quiet
"#,
        shards = t.shards,
        out_q = quote(&out),
        args = args.join(" "),
        cpus = jobs.clamp(1, 64),
    )
}

fn k8s(t: &Template, parallel: u64, out: &str) -> String {
    let list = |items: &[String]| {
        items
            .iter()
            .map(|a| serde_json::to_string(a).unwrap_or_default())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut run: Vec<String> = vec!["bench".into()];
    run.extend(t.bench.iter().cloned());
    run.extend([
        "--out".into(),
        format!("{out}/shard-$(JOB_COMPLETION_INDEX)"),
        "--shard".into(),
        "env".into(),
        "--shards".into(),
        t.shards.to_string(),
        "--quiet".into(),
    ]);
    let merge: Vec<String> = vec![
        "sh".into(),
        "-c".into(),
        format!("exec sopsim bench merge {out} {out}/shard-*"),
    ];
    format!(
        r#"# sopsim benchmark as a Kubernetes Indexed Job: {shards} shards, at most {parallel} at once.
# Index I runs the planned runs at positions k with k mod {shards} = I into {out}/shard-I
# on the volume claim {claim}, which also holds the model cache. OPENAI_BASE_URL comes
# from the ConfigMap sopsim-openai and OPENAI_API_KEY from the Secret sopsim-openai
# (both optional).
#
# Run:    kubectl apply -f this.yaml   (the first document)
# Merge:  kubectl wait --for=condition=complete --timeout=-1s job/sopsim-bench
#         then apply the second document, job/sopsim-bench-merge.
apiVersion: batch/v1
kind: Job
metadata:
  name: sopsim-bench
spec:
  completionMode: Indexed
  completions: {shards}
  parallelism: {parallel}
  backoffLimitPerIndex: 2
  maxFailedIndexes: {shards}
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: sopsim
          image: {image}
          command: ["sopsim"]
          args: [{args}]
          env:
            - name: SOPSIM_MODELS
              value: /data/models
            - name: OPENAI_BASE_URL
              valueFrom:
                configMapKeyRef: {{name: sopsim-openai, key: base-url, optional: true}}
            - name: OPENAI_API_KEY
              valueFrom:
                secretKeyRef: {{name: sopsim-openai, key: api-key, optional: true}}
          volumeMounts:
            - name: data
              mountPath: /data
      volumes:
        - name: data
          persistentVolumeClaim:
            claimName: {claim}
---
apiVersion: batch/v1
kind: Job
metadata:
  name: sopsim-bench-merge
spec:
  backoffLimit: 2
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: merge
          image: {image}
          command: [{merge}]
          volumeMounts:
            - name: data
              mountPath: /data
      volumes:
        - name: data
          persistentVolumeClaim:
            claimName: {claim}
"#,
        shards = t.shards,
        claim = t.volume_claim,
        image = serde_json::to_string(t.image).unwrap_or_default(),
        args = list(&run),
        merge = list(&merge),
    )
}
