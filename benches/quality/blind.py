#!/usr/bin/env python3
"""Blind reading of transcripts with the reply rubric (docs/guide/local-models.md).

    python3 benches/quality/blind.py export OUT GROUP=BENCH_DIR [GROUP=BENCH_DIR ...]
    python3 benches/quality/blind.py tally OUT

`export` writes every run of each bench folder as OUT/Tnn.txt, in an order shuffled
with a fixed seed, numbering the replies a reader scores; the scenario's scripted
lines are shown but not numbered. OUT/key.json says which group, scenario and seed
each file came from: keep it from the readers. Each reader gets some of the files,
each scenario's premise (its `description`) and the rubric, and writes
OUT/scores-NAME.json:

    {"T01": [{"n": 1, "ROLE": 1, "RESPONSIVE": 1, "NEW": 0, "CLEAN": 1, "SENSE": 1,
              "why": "restates reply 2"}, ...], ...}

`tally` joins the scores with the key and prints, per scenario and group, the
replies, the share worth reading (1 on all five points) and the zeros per point,
with the worst-scored reply of each.
"""

import json
import random
import sys
from collections import defaultdict
from pathlib import Path

POINTS = ["ROLE", "RESPONSIVE", "NEW", "CLEAN", "SENSE"]


def runs(bench):
    for transcript in sorted(Path(bench).glob("runs/*/*/*/transcript.jsonl")):
        scenario, mode, seed = transcript.parts[-4:-1]
        yield scenario, mode, seed, transcript


def export(out, specs):
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    items = []
    for spec in specs:
        group, bench = spec.split("=", 1)
        items.extend((group, *run) for run in runs(bench))
    random.Random(0).shuffle(items)
    key = {}
    for i, (group, scenario, mode, seed, transcript) in enumerate(items, 1):
        name = f"T{i:02d}"
        lines, n = [], 0
        for line in transcript.read_text().splitlines():
            m = json.loads(line)
            said = f"{m['name']} ({m['role']}): {m['content']}"
            if m["kind"] == "reply":
                n += 1
                lines.append(f"[{n}] {said}")
            elif m["kind"] == "opening":
                lines.append(f"[scripted, not scored] {said}")
        (out / f"{name}.txt").write_text("\n\n".join(lines) + "\n")
        key[name] = {"group": group, "scenario": scenario, "mode": mode,
                     "seed": seed, "replies": n, "transcript": str(transcript)}
    (out / "key.json").write_text(json.dumps(key, indent=1) + "\n")
    print(f"{len(items)} transcripts in {out}")


def tally(out):
    out = Path(out)
    key = json.loads((out / "key.json").read_text())
    scored = {}
    for f in sorted(out.glob("scores-*.json")):
        scored.update(json.loads(f.read_text()))
    table = defaultdict(lambda: {"replies": 0, "kept": 0, **{p: 0 for p in POINTS},
                                 "worst": None})
    missing = []
    for name, k in sorted(key.items()):
        if name not in scored:
            missing.append(name)
            continue
        texts = {}
        for line in Path(out / f"{name}.txt").read_text().split("\n\n"):
            if line.startswith("["):
                head, _, rest = line.partition("] ")
                texts[head[1:]] = rest.strip()
        for cell in ((k["scenario"], k["group"]), ("all", k["group"])):
            row = table[cell]
            for s in scored[name]:
                row["replies"] += 1
                zeros = [p for p in POINTS if not s.get(p)]
                row["kept"] += not zeros
                for p in zeros:
                    row[p] += 1
                if row["worst"] is None or len(zeros) > row["worst"][0]:
                    row["worst"] = (len(zeros), f"{name}[{s['n']}]",
                                    texts.get(str(s["n"]), "")[:160], s.get("why", ""))
    print("| scenario | group | replies | worth reading | "
          + " | ".join(f"{p} 0" for p in POINTS) + " |")
    print("|---|---|---:|---:|" + "---:|" * len(POINTS))
    for (scenario, group), row in sorted(table.items(), key=lambda r: (r[0][0] == "all", r[0])):
        share = row["kept"] / row["replies"] if row["replies"] else 0
        print(f"| {scenario} | {group} | {row['replies']} | {share:.0%} ({row['kept']}) | "
              + " | ".join(str(row[p]) for p in POINTS) + " |")
    print()
    for (scenario, group), row in sorted(table.items()):
        if scenario != "all" and row["worst"]:
            _, where, text, why = row["worst"]
            print(f"- worst, {scenario} / {group} ({where}): \"{text}\" — {why}")
    if missing:
        print(f"\nnot scored yet: {', '.join(missing)}")


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "export":
        export(sys.argv[2], sys.argv[3:])
    elif len(sys.argv) == 3 and sys.argv[1] == "tally":
        tally(sys.argv[2])
    else:
        sys.exit(__doc__)
