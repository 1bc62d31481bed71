#!/usr/bin/env python3
"""How well the lexical screen in front of the paraphrase check keeps its verdicts.

sopsim counts a reply as a paraphrase when its MiniLM embedding is within 0.80 (the
cosine) of one of the 64 messages before it. Embedding every message costs a MiniLM
forward pass a turn, so a lexical screen picks the pairs worth embedding: a pair is
embedded only when the two share enough content words (`SCREEN_OVERLAP` in
`crates/sopsim-core/src/quality/paraphrase.rs`). This script reads finished runs,
embeds every message with `sopsim embed`, and reports, for thresholds of the screen,
how many of MiniLM's paraphrase pairs it keeps and how many pairs it sends to MiniLM.

    python3 benches/quality/paraphrase_screen.py --sopsim target/release/sopsim DIR...

Each DIR is a run folder or a bench folder (its runs are found below it).
"""

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

COSINE = 0.80
REMEMBERED = 64
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


def overlap(a, b):
    if not a or not b:
        return 0.0
    return len(a & b) / min(len(a), len(b))


def transcripts(dirs):
    for d in dirs:
        for t in sorted(Path(d).rglob("transcript.jsonl")):
            lines = [json.loads(l) for l in t.read_text().splitlines() if l.strip()]
            yield t, [l for l in lines if l.get("kind", "reply") not in ("tool_call", "tool_result")]


def embed(sopsim, texts):
    out = []
    for i in range(0, len(texts), 200):
        chunk = texts[i:i + 200]
        res = subprocess.run([sopsim, "embed", *chunk], capture_output=True, text=True, check=True)
        out.extend(e["embedding"] for e in json.loads(res.stdout))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sopsim", default="target/release/sopsim")
    p.add_argument("dirs", nargs="+")
    a = p.parse_args()
    pairs = []  # (cosine, overlap)
    replies = []  # per reply: (max cosine, max overlap among pairs)
    for path, lines in transcripts(a.dirs):
        texts = [l["content"] for l in lines]
        if not texts:
            continue
        vectors = embed(a.sopsim, texts)
        words = [content_words(t) for t in texts]
        for i, l in enumerate(lines):
            if l.get("kind", "reply") != "reply":
                continue
            best = []
            for j in range(max(0, i - REMEMBERED), i):
                cos = sum(x * y for x, y in zip(vectors[i], vectors[j]))
                pairs.append((cos, overlap(words[i], words[j])))
                best.append(pairs[-1])
            replies.append(best)
    positives = [o for c, o in pairs if c >= COSINE]
    flagged = sum(1 for r in replies if any(c >= COSINE for c, _ in r))
    print(f"{len(replies)} replies, {len(pairs)} pairs; MiniLM >= {COSINE}: "
          f"{len(positives)} pairs, {flagged} replies")
    if positives:
        print(f"content-word overlap of MiniLM's pairs: min {min(positives):.3f}, "
              f"sorted lowest 10: {[round(o, 3) for o in sorted(positives)[:10]]}")
    print("| screen overlap ≥ | MiniLM's pairs kept | pairs embedded | replies embedded |")
    print("|---:|---:|---:|---:|")
    for t in (0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5):
        kept = sum(1 for o in positives if o >= t)
        sent = sum(1 for _, o in pairs if o >= t)
        sent_replies = sum(1 for r in replies if any(o >= t for _, o in r))
        print(f"| {t} | {kept} of {len(positives)} | {sent / max(1, len(pairs)):.1%} | "
              f"{sent_replies / max(1, len(replies)):.1%} |")


if __name__ == "__main__":
    sys.exit(main())
