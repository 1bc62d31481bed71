#!/usr/bin/env python3
"""How a population run grows with its size: for each population size, one scripted run
of ROUNDS simultaneous rounds on a small-world network (cooperative mode, so every
member sees its neighbours), and its wall time, peak RSS and peak RSS per agent.

Usage: python3 benches/population_scale.py path/to/sopsim [ROUNDS] [SIZES...]
       (default 10 rounds; sizes 100 1000 2000 5000 10000)
       A turn is a member's reply and its choice: two model calls.

With `--llm openai --base-url URL --concurrency N` after `--`, the same runs go to a
server instead (e.g. `benches/anchors/fake_openai.py`): the rest of the arguments after
`--` are passed to `sopsim run`.
"""

import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def scenario(agents: int, rounds: int) -> dict:
    return {
        "name": f"crowd_{agents}",
        "environment": {"type": "cooperative", "max_chat_history": 8, "top_k": 0},
        "populations": {
            "crowd": {
                "name": "P{i}",
                "count": agents,
                "roles": {"round": "Player"},
                "style": "{mood}",
                "draw": {"mood": {"one_of": ["Trusting.", "Wary.", "Greedy."]}},
                "network": {"kind": "small_world", "k": 4, "p": 0.1},
            }
        },
        "sop": {
            "start": "round",
            "max_turns": agents * rounds,
            "states": {
                "round": {
                    "roles": ["Player"],
                    "turns": "simultaneous",
                    "environment_prompt": "Every round each player says whether it shares.",
                    "components": {
                        "Player": {
                            "task": "Say what you do this round.",
                            "choice": {"values": ["SHARE", "KEEP"]},
                        }
                    },
                    "transition": {
                        "max_rounds": 1,
                        "on_max_turns": "round",
                        "max_visits": rounds,
                        "on_max_visits": "end",
                    },
                    "next": ["round", "end"],
                }
            },
        },
        "script": {
            "roles": {"Player": ["Round {n}: I {one_of:share|keep} this time."]},
            "choices": {"Player": ["{one_of:SHARE|KEEP}"]},
        },
    }


def main() -> None:
    args = sys.argv[1:]
    extra = []
    if "--" in args:
        extra = args[args.index("--") + 1 :]
        args = args[: args.index("--")]
    if not args:
        sys.exit(__doc__)
    binary = args[0]
    rounds = int(args[1]) if len(args) > 1 else 10
    sizes = [int(a) for a in args[2:]] or [100, 1000, 2000, 5000, 10000]
    llm = extra or ["--llm", "scripted"]
    print("| agents | rounds | turns | wall (s) | µs per turn | peak RSS (MiB) | per agent (KiB) |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for agents in sizes:
            path = Path(tmp) / f"crowd_{agents}.json"
            path.write_text(json.dumps(scenario(agents, rounds)))
            out = Path(tmp) / f"out_{agents}"
            start = time.monotonic()
            run = subprocess.run(
                ["/usr/bin/time", "-v", binary, "run", str(path), "--quiet", "--out", str(out), *llm],
                capture_output=True,
                text=True,
            )
            wall = time.monotonic() - start
            if run.returncode != 0:
                sys.exit(f"{agents} agents: exit {run.returncode}\n{run.stderr[-2000:]}")
            rss_kib = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", run.stderr).group(1))
            summary = json.loads((out / "summary.json").read_text())
            print(
                f"| {agents:,} | {rounds} | {summary['turns']:,} | {wall:.2f} "
                f"| {wall / summary['turns'] * 1e6:.0f} | {rss_kib / 1024:.0f} "
                f"| {rss_kib / agents:.1f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
