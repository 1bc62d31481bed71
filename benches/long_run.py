#!/usr/bin/env python3
"""Turns per second along one long scripted run, to see whether a turn's cost grows
with the run: a two-agent, one-state scenario run for TURNS turns with the scripted
backend and the hash embedder, then the rate over the 1,000 turns around each point,
from the `elapsed_ms` that `events.jsonl` gives every message, and the peak RSS.

Usage: python3 benches/long_run.py path/to/sopsim [TURNS]   (default 100000)
"""

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

SCENARIO = {
    "name": "marathon",
    "environment": {"type": "cooperative", "max_chat_history": 8, "top_k": 0},
    "agents": {"Ann": {"roles": {"talk": "A"}}, "Bo": {"roles": {"talk": "B"}}},
    "sop": {
        "start": "talk",
        "max_turns": 10_000_000,
        "states": {
            "talk": {
                "roles": ["A", "B"],
                "begin_role": "A",
                "begin_query": "Let us talk about rivers.",
                "transition": {"max_turns": 10_000_000},
                "next": ["end"],
            }
        },
    },
    "script": {
        "default": "{name} adds point {n} about the river, its floods and its bridges, at turn {turn}."
    },
}


def main() -> None:
    sopsim = sys.argv[1]
    turns = int(sys.argv[2]) if len(sys.argv) > 2 else 100_000
    with tempfile.TemporaryDirectory() as tmp:
        scenario = Path(tmp) / "marathon.json"
        scenario.write_text(json.dumps(SCENARIO))
        out = Path(tmp) / "run"
        timed = subprocess.run(
            ["/usr/bin/time", "-v", sopsim, "run", str(scenario), "--llm", "scripted",
             "--embedder", "hash", "--max-turns", str(turns), "--out", str(out), "-q"],
            capture_output=True, text=True, check=True,
        )
        rss_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", timed.stderr)[1])
        wall = re.search(r"Elapsed \(wall clock\) time .*: (\S+)", timed.stderr)[1]
        elapsed = []
        with open(out / "events.jsonl") as events:
            for line in events:
                meta = json.loads(line).get("payload", {}).get("metadata") or {}
                if "elapsed_ms" in meta and meta.get("kind") in ("reply", "opening"):
                    elapsed.append(meta["elapsed_ms"])
    print(f"{len(elapsed)} turns in {wall}, peak RSS {rss_kb / 1024:.0f} MiB")
    for at in (1_000, 10_000, 50_000, 99_000, 999_000):
        lo, hi = at - 500, at + 500
        if hi < len(elapsed):
            rate = 1000 * (hi - lo) / max(1, elapsed[hi] - elapsed[lo])
            print(f"around turn {at:>7,}: {rate:,.0f} turns/s")


if __name__ == "__main__":
    main()
