#!/usr/bin/env bash
# Peak memory per concurrent simulation in `sopsim bench`: the peak resident memory
# of one process running 256 scripted prisoner's-dilemma runs with --jobs 1, then
# with --jobs 64; the difference over 63 is what one more simulation in flight costs.
# Usage: benches/bench_memory.sh [path/to/sopsim]   (default: target/release/sopsim)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/release/sopsim}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
peak() {
  "$bin" bench scenarios/prisoners_dilemma.json --llm scripted --embedder hash \
    --seeds 128 --jobs "$1" --quiet --out "$out/jobs-$1" >/dev/null
  python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["this_invocation"]; print(t["peak_rss_mib"], t["runs_per_s"], t["turns_per_s"])' "$out/jobs-$1/timing.json"
}
read -r one rps1 tps1 < <(peak 1)
read -r many rps64 tps64 < <(peak 64)
python3 - "$one" "$many" "$rps1" "$rps64" "$tps1" "$tps64" <<'PY'
import sys
one, many, rps1, rps64, tps1, tps64 = map(float, sys.argv[1:])
print(f"--jobs 1:  peak {one:.1f} MiB, {rps1:.0f} runs/s, {tps1:.0f} turns/s")
print(f"--jobs 64: peak {many:.1f} MiB, {rps64:.0f} runs/s, {tps64:.0f} turns/s")
print(f"per concurrent simulation: {(many - one) * 1024 / 63:.0f} KiB")
PY
