#!/usr/bin/env python3
"""Regenerates this CPU's table in docs/performance.md from criterion's medians.

usage: python3 benches/dashboard.py [--run] [--models] [--dry-run]

--run      runs the simulator's benchmarks first (`cargo bench --bench turns --bench
           jobs --bench tools --bench http`); without it, the medians already under
           target/criterion are read.
--models   runs the local models' benchmarks too (`--bench models`, filtered to the
           shapes llama-bench is compared on, MiniLM and batched decode; fetches the
           models on first use; about 20 minutes on two cores).
--dry-run  prints the table instead of writing it.

The table for a CPU sits between `<!-- cpu: NAME, FAMILY -->` and `<!-- end cpu -->` in
docs/performance.md, NAME being lscpu's model name and FAMILY the vector extensions the
kernels choose among (two Xeons of one name may differ in AMX); a CPU seen for the
first time gets a new section at the end of the dashboard. Each row is one benchmark: its median, and
its throughput where the benchmark states one.
"""
import argparse
import datetime
import json
import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
CRITERION = ROOT / "target" / "criterion"
PAGE = ROOT / "docs" / "performance.md"
END_OF_DASHBOARD = "<!-- end dashboard -->"
MODEL_FILTER = "anchor_shape|minilm|qwen05_batched_decode|qwen05_decision"


def cpu():
    """lscpu's model name, and the vector extensions the kernels choose among."""
    out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    fields = dict(
        (k.strip(), v.strip()) for k, _, v in (l.partition(":") for l in out.splitlines())
    )
    flags = set(fields.get("Flags", "").split())
    if "amx_tile" in flags:
        family = "AMX"
    elif "avx512f" in flags:
        family = "AVX-512" + (" VNNI" if "avx512_vnni" in flags else "")
    else:
        family = "AVX2" + (" VNNI" if "avx_vnni" in flags else "")
    return fields.get("Model name", "unknown CPU"), family, os.cpu_count()


def run_benches(models):
    base = ["cargo", "bench", "--bench", "turns", "--bench", "jobs", "--bench", "tools",
            "--bench", "http"]
    subprocess.run(base, cwd=ROOT, check=True)
    if models:
        subprocess.run(["cargo", "bench", "--bench", "models", "--", MODEL_FILTER],
                       cwd=ROOT, check=True)


def human_time(ns):
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.3g} ns"


def throughput(bench, ns):
    t = bench.get("throughput") or {}
    for kind, n in t.items():
        per_s = n / (ns / 1e9)
        unit = {"Elements": "elements/s", "Bytes": "B/s", "BytesDecimal": "B/s"}.get(kind, kind)
        return f"{per_s:,.0f} {unit}"
    return ""


def rows():
    """(benchmark id, median ns, throughput) for every benchmark criterion measured."""
    found = []
    for est in sorted(CRITERION.glob("**/new/estimates.json")):
        bench_file = est.parent / "benchmark.json"
        if not bench_file.is_file():
            continue
        bench = json.loads(bench_file.read_text())
        median = json.loads(est.read_text())["median"]["point_estimate"]
        found.append((bench["full_id"], median, throughput(bench, median)))
    return found


def table(name, family, threads):
    today = datetime.date.today().isoformat()
    lines = [
        f"<!-- cpu: {name}, {family} -->",
        f"### {name} ({family}, {threads} threads)",
        "",
        f"Regenerated {today} by `python3 benches/dashboard.py --run --models`; "
        "criterion medians, release build.",
        "",
        "| benchmark | median | throughput |",
        "|---|---|---|",
    ]
    for bench_id, ns, tp in rows():
        lines.append(f"| `{bench_id}` | {human_time(ns)} | {tp} |")
    lines.append("<!-- end cpu -->")
    return "\n".join(lines)


def write(section, key):
    page = PAGE.read_text()
    pattern = re.compile(
        r"<!-- cpu: " + re.escape(key) + r" -->.*?<!-- end cpu -->", re.DOTALL
    )
    if pattern.search(page):
        page = pattern.sub(lambda _: section, page)
    elif END_OF_DASHBOARD in page:
        page = page.replace(END_OF_DASHBOARD, section + "\n\n" + END_OF_DASHBOARD)
    else:
        sys.exit(f"{PAGE} has no `{END_OF_DASHBOARD}` marker to put the table before")
    PAGE.write_text(page)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", action="store_true")
    p.add_argument("--models", action="store_true")
    p.add_argument("--dry-run", action="store_true")
    a = p.parse_args()
    if a.run:
        run_benches(a.models)
    if not CRITERION.is_dir():
        sys.exit("no criterion results under target/criterion: run with --run")
    name, family, threads = cpu()
    section = table(name, family, threads)
    if a.dry_run:
        print(section)
    else:
        write(section, f"{name}, {family}")
        print(f"{PAGE.relative_to(ROOT)}: the table for {name} ({family}) is rewritten")


if __name__ == "__main__":
    main()
