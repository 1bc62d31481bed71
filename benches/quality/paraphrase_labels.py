#!/usr/bin/env python3
"""How well the paraphrase check agrees with readers, against their labels.

sopsim counts a reply as a paraphrase when of all the content words of it and one of
the 64 messages before it, 30% are in both (`PARAPHRASE_JACCARD` in
`crates/sopsim-core/src/quality/paraphrase.rs`). `paraphrase_pairs.jsonl` holds 92
pairs of an earlier message and a reply from qwen05 runs of the debate, parking and
strike scenarios, each labelled blind by two readers: "R" when the reply says again
what the earlier message said and adds nothing of substance, "N" otherwise. The pairs
were drawn by strata (MiniLM cosine at or above 0.80 with few or many shared words,
0.70 to 0.80, below 0.70 with many shared words), so the figures are the sample's,
not a run's. This script prints the readers' agreement and, for thresholds of the
shared words and of MiniLM's cosine (stored with each pair), the precision and recall
of the verdict against the pairs both readers call a restatement, with 95% Wilson
intervals.

    python3 benches/quality/paraphrase_labels.py [PAIRS.jsonl]
"""

import json
import math
import re
import sys
from pathlib import Path

WORD = re.compile(r"[^\W_]+")
# Kept in step with STOP_WORDS in crates/sopsim-core/src/quality/paraphrase.rs.
STOP_WORDS = set("""
a about after all also am an and any are as at be because been before being but by can
could did do does for from had has have he her here him his how i if in into is it its
just me more most my no not now of on one only or our out over she so some than that the
their them then there these they this those to too up us very was we were what when
where which who will with would you your yes let s t
""".split())


def content_words(text):
    return {w for w in (m.lower() for m in WORD.findall(text)) if w not in STOP_WORDS}


def jaccard(a, b):
    either = len(a | b)
    return len(a & b) / either if either else 0.0


def wilson(k, n, z=1.96):
    if n == 0:
        return (float("nan"), float("nan"))
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (centre - half, centre + half)


def main():
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("paraphrase_pairs.jsonl")
    pairs = [json.loads(l) for l in path.read_text().splitlines() if l.strip()]
    agree = sum(1 for p in pairs if len(set(p["readers"])) == 1)
    restates = [all(r == "R" for r in p["readers"]) for p in pairs]
    for p in pairs:
        a, b = content_words(p["earlier"]), content_words(p["reply"])
        p["jaccard"] = jaccard(a, b)
        p["shorter"] = len(a & b) / min(len(a), len(b)) if a and b else 0.0
    total = sum(restates)
    print(f"{len(pairs)} pairs; the readers agree on {agree}; both call {total} a restatement")
    print("| verdict | flagged | precision [95%] | recall [95%] |")
    print("|---|---:|---|---|")
    rules = [(f"shared words ≥ {t}", lambda p, t=t: p["jaccard"] >= t) for t in (0.25, 0.3, 0.35, 0.4)]
    rules += [(f"MiniLM cosine ≥ {c}", lambda p, c=c: p["minilm_cosine"] >= c) for c in (0.75, 0.8, 0.85)]
    rules.append(("shared words ≥ 0.3 and MiniLM ≥ 0.8",
                  lambda p: p["jaccard"] >= 0.3 and p["minilm_cosine"] >= 0.8))
    # The verdict before 2026-12-08: 30% of the shorter message's words, then MiniLM.
    rules.append(("the shorter's words ≥ 0.3 and MiniLM ≥ 0.8 (before)",
                  lambda p: p["shorter"] >= 0.3 and p["minilm_cosine"] >= 0.8))
    for name, rule in rules:
        flagged = [r for p, r in zip(pairs, restates) if rule(p)]
        tp = sum(flagged)
        lo, hi = wilson(tp, len(flagged))
        rlo, rhi = wilson(tp, total)
        print(f"| {name} | {len(flagged)} | {tp / max(1, len(flagged)):.2f} [{lo:.2f}, {hi:.2f}] | "
              f"{tp / max(1, total):.2f} [{rlo:.2f}, {rhi:.2f}] |")


if __name__ == "__main__":
    sys.exit(main())
