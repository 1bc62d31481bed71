#!/usr/bin/env bash
# A sharded benchmark on a real (one-node) Slurm cluster: stand the cluster up with
# cluster.sh, submit `sopsim bench template slurm` with sbatch --wait, merge the shards,
# and compare the merged report.json with an unsharded run of the same benchmark.
# Usage: tests/slurm/bench.sh [path/to/sopsim]   (run as root; installs slurm-wlm and munge)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
sopsim=$(realpath "${1:-$root/target/debug/sopsim}")
export PATH="$(dirname "$sopsim"):$PATH"
work=$(mktemp -d /tmp/sopsim-slurm.XXXXXX)
trap '"$here/cluster.sh" down >/dev/null 2>&1 || true' EXIT

"$here/cluster.sh" up
scenario="$root/scenarios/prisoners_dilemma.json"
args=("$scenario" --llm scripted --embedder hash --seeds 9 --jobs 2)

"$sopsim" bench "${args[@]}" --out "$work/whole" --quiet
"$sopsim" bench template slurm --shards 3 --max-parallel 2 --out "$work/sharded" -- "${args[@]}" >"$work/array.sh"
mkdir -p "$work/sharded"
timeout 300 sbatch --wait "$work/array.sh"
"$sopsim" bench merge "$work/merged" "$work"/sharded/shard-*
if cmp "$work/whole/report.json" "$work/merged/report.json"; then
    echo "slurm: 3 array tasks merged; report.json identical to the unsharded run ($work)"
else
    echo "slurm: the merged report differs from the unsharded one ($work)" >&2
    exit 1
fi
