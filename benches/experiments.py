#!/usr/bin/env python3
"""The published cooperation experiments (`scenarios/experiments/`) on a model: one
`sopsim bench` per file, then the figures the papers report, as a Markdown table.

    python3 benches/experiments.py run --sopsim target/release/sopsim --model qwen15 \
        --seeds 8 --out /tmp/experiments            # runs what is not finished yet
    python3 benches/experiments.py run --model qwen05 --only govsim_pasture  # one file
    python3 benches/experiments.py table /tmp/experiments

`run` writes each benchmark to OUT/MODEL/SCENARIO (a rerun resumes it). `table` reads
every OUT/MODEL/SCENARIO/report.json and prints, per experiment and model, the mean and
95% interval sopsim's report gives for each published measure.
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Experiment file -> the measures compared with the papers: (label, figure).
MEASURES = {
    "govsim_fishery": [
        ("survival time (months)", "rounds_survived"),
        ("survival rate", "ended_early"),
        ("total gain (units)", "welfare"),
        ("efficiency", "measure.efficiency"),
        ("equality", "equality"),
        ("over-usage", "measure.over_usage"),
    ],
    "govsim_fishery_universalization": None,  # as govsim_fishery
    "govsim_pasture": None,
    "govsim_pasture_universalization": None,
    "govsim_pollution": None,
    "govsim_pollution_universalization": None,
    "akata_pd_vs_always_defect": [("cooperation rate", "cooperation_rate.by.run")],
    "akata_pd_vs_defect_once": [("cooperation rate (forgiveness)", "cooperation_rate.by.run")],
    "akata_pd_self_play": [("cooperation rate", "cooperation_rate")],
    "akata_bos": [("coordination", "measure.coordination")],
    "pd_cooper_1996": [("cooperation rate", "cooperation_rate")],
    "akata_bos_predict": [("coordination", "measure.coordination")],
    "public_goods_punishment": [
        ("contribution (share of 20)", "measure.contribution_share"),
        ("punishments a round", "measure.punishments_per_round"),
    ],
}


def run(args):
    for name in args.only or MEASURES:
        out = Path(args.out) / args.model / name
        cmd = [
            args.sopsim, "bench", str(ROOT / "scenarios/experiments" / f"{name}.json"),
            "--model", args.model, "--seeds", str(args.seeds), "--modes", "cooperative",
            "--jobs", str(args.jobs), "-q", "--out", str(out),
        ]
        print(" ".join(cmd), file=sys.stderr)
        subprocess.run(cmd, check=False)


def cell(summary, invert=False):
    if not summary:
        return "–"
    mean, ci = summary["mean"], summary.get("ci95")
    if invert:
        mean = 1 - mean
        ci = ci and [1 - ci[1], 1 - ci[0]]
    text = f"{mean:.2f}"
    if ci:
        text += f" [{ci[0]:.2f}, {ci[1]:.2f}]"
    return text


def table(args):
    root = Path(args.out)
    models = sorted(p.name for p in root.iterdir() if p.is_dir())
    print("| experiment | measure | " + " | ".join(models) + " |")
    print("|---|---|" + "---|" * len(models))
    for name, measures in MEASURES.items():
        measures = measures or MEASURES["govsim_fishery"]
        for label, figure in measures:
            cells = []
            for m in models:
                report = root / m / name / "report.json"
                if not report.exists():
                    cells.append("–")
                    continue
                r = json.loads(report.read_text())
                figures = r["scenarios"][0]["figures"]
                by_mode = figures.get(figure, {}).get("by_mode", {})
                runs = r["scenarios"][0]["runs"]["cooperative"]["finished"]
                summary = by_mode.get("cooperative")
                # Survival is the share of runs that did not end early.
                text = cell(summary, invert=figure == "ended_early")
                cells.append(f"{text} (n={runs})" if summary else text)
            print(f"| {name} | {label} | " + " | ".join(cells) + " |")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("--sopsim", default=str(ROOT / "target/release/sopsim"))
    r.add_argument("--model", default="qwen05")
    r.add_argument("--seeds", type=int, default=8)
    r.add_argument("--jobs", type=int, default=2)
    r.add_argument("--out", default="/tmp/experiments")
    r.add_argument("--only", action="append", choices=list(MEASURES), help="run only this file (repeatable)")
    t = sub.add_parser("table")
    t.add_argument("out")
    args = p.parse_args()
    run(args) if args.command == "run" else table(args)


if __name__ == "__main__":
    main()
