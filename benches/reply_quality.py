#!/usr/bin/env python3
"""Reply quality on the local models: every figure of `summary.json`'s `reply_quality`
over seeds, pooled per scenario, and whether the shop assistant's tool loop finds what
the customer asks for.

    python3 benches/reply_quality.py --sopsim target/release/sopsim --seeds 8 \
        --out /tmp/quality [--model qwen15] [--set dry_multiplier=0.8 ...]

Benchmarkable scenarios run as one `sopsim bench` in their own mode (the local model
batches every run's requests); `customer_service.json`, whose customer a person plays,
runs once per seed with the customer's lines piped in. `--set KEY=VALUE` adds an `llm`
setting to every scenario (written to a copy beside the original, removed afterwards),
to compare sampling settings on the same seeds. Prints a Markdown table and writes
`quality.json` into the output folder.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCHED = [
    "scenarios/debate.json",
    "scenarios/design_review.json",
    "scenarios/rival_buyers.json",
    "scenarios/aiwaves/debate/config.json",
    "scenarios/shop_assistant.json",
]
CUSTOMER = "scenarios/customer_service.json"
CUSTOMER_LINES = [
    "My internet keeps dropping every few minutes since yesterday evening.",
    "The power light is green, but the internet light is blinking orange.",
    "OK, I unplugged it and plugged it back in. The internet light is green now.",
    "Yes, the pages load again. Thank you, goodbye!",
]
FLAWS = ["copy", "label", "narration", "echo", "empty"]
# What the customer of shop_assistant.json asks for: hiking boots and a rain jacket.
ASKED = {"P102", "P103"}


def value(text):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def with_settings(path, settings):
    """The scenario with `settings` merged into its top-level `llm`, written beside it
    (so its data files resolve as before), or the file itself when there are none. An
    aiwaves config is imported and named `aiwaves_<name>`, apart from sopsim's own."""
    doc = json.loads(Path(path).read_text())
    aiwaves = "root" in doc and "relations" in doc
    if not settings and not aiwaves:
        return path, None
    if aiwaves:
        native = subprocess.run(
            [ARGS.sopsim, "import", "aiwaves", str(path)],
            check=True, capture_output=True, text=True,
        ).stdout
        doc = json.loads(native)
        doc["name"] = f"aiwaves_{doc['name']}"
    if settings:
        doc.setdefault("llm", {}).update(settings)
    copy = Path(path).with_name(f".quality-{os.getpid()}-{Path(path).name}")
    copy.write_text(json.dumps(doc))
    return str(copy), copy


def mode_of(path):
    doc = json.loads(Path(path).read_text())
    return doc.get("environment", {}).get("type", "cooperative")


def model_flags():
    flags = ["--llm", "local"]
    if ARGS.model:
        flags += ["--model", ARGS.model]
    return flags


def run_bench(files, out):
    by_mode = {}
    for f in files:
        by_mode.setdefault(mode_of(f), []).append(f)
    folders = []
    for mode, group in by_mode.items():
        folder = out / f"bench-{mode}"
        cmd = [ARGS.sopsim, "bench", *group, "--modes", mode, "--seeds", str(ARGS.seeds),
               "--jobs", str(ARGS.jobs), "--out", str(folder), "-q", *model_flags()]
        subprocess.run(cmd, check=True)
        folders.append(folder)
    return folders


def run_customer(path, out):
    dirs = []
    for seed in range(ARGS.seeds):
        d = out / f"customer_service-seed-{seed}"
        subprocess.run(
            [ARGS.sopsim, "run", path, "--seed", str(seed), "--out", str(d), "-q",
             *model_flags()],
            input="\n".join(CUSTOMER_LINES) + "\n", text=True, check=False,
            capture_output=True,
        )
        dirs.append(d)
    return dirs


def found_asked(run_dir):
    env = json.loads((run_dir / "environment.json").read_text())
    ids = set()
    for stored in env.get("environment", {}).get("catalogue", {}).values():
        for result in stored:
            ids.update(o.get("id") for o in result.get("objects", []))
    return ASKED <= ids, bool(ASKED & ids)


def pooled(summaries):
    total = {k: 0 for k in ["replies", *FLAWS]}
    bigrams = []
    for s in summaries:
        q = s["reply_quality"]
        for k in total:
            total[k] += q[k]
        if q.get("distinct_2") is not None:
            bigrams.append(q["distinct_2"])
    total["distinct_2"] = sum(bigrams) / len(bigrams) if bigrams else None
    return total


def main():
    out = Path(ARGS.out)
    out.mkdir(parents=True, exist_ok=True)
    settings = dict(kv.split("=", 1) for kv in ARGS.set)
    settings = {k: value(v) for k, v in settings.items()}
    copies = []
    started = time.time()
    try:
        files = []
        for f in BENCHED:
            path, copy = with_settings(ROOT / f, settings)
            files.append(path)
            if copy:
                copies.append(copy)
        folders = run_bench(files, out)
        customer, copy = with_settings(ROOT / CUSTOMER, settings)
        if copy:
            copies.append(copy)
        customer_dirs = run_customer(customer, out)
    finally:
        for c in copies:
            c.unlink(missing_ok=True)
    rows = {}
    shop = []
    for folder in folders:
        for runs in (folder / "runs").iterdir():
            summaries = []
            for mode_dir in runs.iterdir():
                for seed_dir in sorted(mode_dir.iterdir()):
                    summary = seed_dir / "summary.json"
                    if summary.exists():
                        summaries.append(json.loads(summary.read_text()))
                        if runs.name == "shop_assistant":
                            shop.append(found_asked(seed_dir))
            rows[runs.name] = pooled(summaries)
    rows["customer_service"] = pooled(
        json.loads((d / "summary.json").read_text())
        for d in customer_dirs if (d / "summary.json").exists()
    )
    result = {
        "model": ARGS.model or "default",
        "settings": settings,
        "seeds": ARGS.seeds,
        "wall_s": round(time.time() - started, 1),
        "scenarios": rows,
        "shop_found_both": sum(b for b, _ in shop),
        "shop_found_any": sum(a for _, a in shop),
        "shop_runs": len(shop),
    }
    (out / "quality.json").write_text(json.dumps(result, indent=2))
    print(f"model {result['model']}, settings {settings or 'defaults'}, seeds 0–{ARGS.seeds - 1}, "
          f"{result['wall_s']} s\n")
    print("| scenario | replies | copy | label | narration | echo | empty | distinct_2 |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    everything = {k: 0 for k in ["replies", *FLAWS]}
    for name, r in sorted(rows.items()):
        n = r["replies"] or 1
        cells = [f"{100 * r[k] / n:.0f}% ({r[k]})" for k in FLAWS]
        d2 = "—" if r["distinct_2"] is None else f"{r['distinct_2']:.2f}"
        print(f"| {name} | {r['replies']} | " + " | ".join(cells) + f" | {d2} |")
        for k in everything:
            everything[k] += r[k]
    n = everything["replies"] or 1
    cells = [f"{100 * everything[k] / n:.1f}% ({everything[k]})" for k in FLAWS]
    print(f"| all | {everything['replies']} | " + " | ".join(cells) + " | |")
    print(f"\nshop_assistant: boots and rain jacket both found in {result['shop_found_both']} "
          f"of {result['shop_runs']} runs, one of them in {result['shop_found_any']}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sopsim", default=str(ROOT / "target/release/sopsim"))
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--jobs", type=int, default=8)
    parser.add_argument("--model")
    parser.add_argument("--out", required=True)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ARGS = parser.parse_args()
    sys.exit(main())
