#!/usr/bin/env python3
"""sopsim from Python against the command line, in one sitting.

1. A 500-turn scripted run (two agents, one state), alternately as `sopsim run` and as
   `sopsim.run(...)` in a Python process, SAMPLES times each: medians of the whole
   process's wall time, and of the `sopsim.run` call alone.
2. `Bench.runs()` on a 2,000-run scripted benchmark (the prisoner's dilemma, 1,000 seeds
   in each mode, made with `sopsim bench`): its time and the process's peak memory.

Usage: python3 benches/python_side_by_side.py path/to/sopsim [SAMPLES]   (default 7)
Run it with the Python that has the package installed (`maturin develop` or pip).
"""

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TURNS = 500
SCENARIO = {
    "name": "marathon",
    "environment": {"top_k": 0},
    "agents": {"Ann": {"roles": {"talk": "A"}}, "Bo": {"roles": {"talk": "B"}}},
    "sop": {"start": "talk", "max_turns": TURNS, "states": {"talk": {
        "roles": ["A", "B"], "transition": {"max_turns": TURNS}, "next": ["end"]}}},
    "script": {"default": "{name} adds point {n} about the river, its floods and its bridges, at turn {turn}."},
}
IN_PYTHON = """
import sys, time, sopsim
start = time.perf_counter()
run = sopsim.run(sys.argv[1], llm="scripted", embedder="hash")
assert run.summary["turns"] == {turns}
print(time.perf_counter() - start)
"""


def timed(args):
    start = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(done.stderr)
    return wall, done.stdout


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    binary = sys.argv[1]
    samples = int(sys.argv[2]) if len(sys.argv) > 2 else 7
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "marathon.json"
        path.write_text(json.dumps(SCENARIO))
        cli, py, call = [], [], []
        for _ in range(samples):
            cli.append(timed([binary, "run", str(path), "--llm", "scripted", "--embedder", "hash", "--quiet"])[0])
            wall, out = timed([sys.executable, "-c", IN_PYTHON.replace("{turns}", str(TURNS)), str(path)])
            py.append(wall)
            call.append(float(out.strip()))
        m_cli, m_py, m_call = (statistics.median(x) for x in (cli, py, call))
        print(f"{TURNS}-turn scripted run, medians of {samples}:")
        print(f"  sopsim run (process):     {m_cli * 1000:.1f} ms")
        print(f"  python -c sopsim.run:     {m_py * 1000:.1f} ms ({(m_py / m_cli - 1) * 100:+.1f}%)")
        print(f"  the sopsim.run call:      {m_call * 1000:.1f} ms ({(m_call / m_cli - 1) * 100:+.1f}% of the process)")

        out = Path(tmp) / "bench"
        subprocess.run(
            [binary, "bench", str(ROOT / "scenarios" / "prisoners_dilemma.json"), "--seeds", "1000",
             "--llm", "scripted", "--embedder", "hash", "--jobs", "8", "--quiet", "--out", str(out)],
            check=True, capture_output=True,
        )
        measure = """
import resource, sys, time, sopsim
bench = sopsim.load_bench(sys.argv[1])
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
runs = bench.runs()
took = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(len(runs), len(runs.columns), took, before / 1024, peak / 1024)
"""
        rows, columns, took, before, peak = timed([sys.executable, "-c", measure, str(out)])[1].split()
        print(f"Bench.runs() on {rows} runs x {columns} columns: {float(took) * 1000:.0f} ms; "
              f"peak RSS {float(peak):.0f} MiB ({float(before):.0f} MiB before the call)")


if __name__ == "__main__":
    main()
