#!/usr/bin/env python3
"""The most a draft model can speed up decoding, from measured token rates.

Arithmetic, not a timing. Give each CPU's prompt and decode rates (tokens/s, from
`cargo bench --bench models -- anchor_shape`) for the draft and the target model;
rates default to the table in docs/performance.md. Per token of the target's plain
step, a drafted token costs c = target decode / draft decode, and one more row in
the target's check costs r = target decode / target prompt. A check of k drafted
tokens costs 1 + k(c + r) and yields (1 - a^(k+1)) / (1 - a) tokens at acceptance a.

    python3 benches/draft_bound.py
    python3 benches/draft_bound.py --rates "my cpu=262.8,59.4,80.6,22.7"
"""
import argparse

MEASURED = {
    "Intel Xeon, AVX-512 + AMX (2026-11-26)": (565.6, 33.1, 142.1, 11.8),
    "Intel Xeon, AVX-512, no AMX (2026-11-27/28)": (401, 70, 117, 24.4),
    "AMD EPYC Zen 3, AVX2 (2026-11-27)": (262.8, 59.4, 80.6, 22.7),
}
ACCEPTANCES = (0.6, 0.8, 0.9, 1.0)
MAX_DRAFT = 16


def gain(a, k, c, r):
    tokens = k + 1 if a == 1 else (1 - a ** (k + 1)) / (1 - a)
    return tokens / (1 + k * (c + r))


def best(a, c, r):
    return max(gain(a, k, c, r) for k in range(1, MAX_DRAFT + 1))


def needed(target, c, r):
    for i in range(1001):
        if best(i / 1000, c, r) >= target:
            return f"{i / 1000:.3f}"
    return "none"


def parse_rates(text):
    name, _, numbers = text.rpartition("=")
    values = tuple(float(v) for v in numbers.split(","))
    if not name or len(values) != 4 or min(values) <= 0:
        raise argparse.ArgumentTypeError(
            "--rates takes NAME=draft_prompt,draft_decode,target_prompt,target_decode"
        )
    return name, values


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", type=parse_rates, action="append", default=[])
    parser.add_argument("--target", type=float, default=1.8, help="gain asked for")
    args = parser.parse_args()
    cpus = dict(args.rates) or MEASURED
    header = " | ".join(f"a = {a:g}" for a in ACCEPTANCES)
    print(f"| CPU | c | r | {header} | a that {args.target:g}x needs |")
    for name, (_, draft_decode, prompt, decode) in cpus.items():
        c, r = decode / draft_decode, decode / prompt
        gains = " | ".join(f"{best(a, c, r):.2f}x" for a in ACCEPTANCES)
        print(f"| {name} | {c:.2f} | {r:.2f} | {gains} | {needed(args.target, c, r)} |")


if __name__ == "__main__":
    main()
