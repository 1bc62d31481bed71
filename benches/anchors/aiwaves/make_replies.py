#!/usr/bin/env python3
"""Writes replies.jsonl, the fake server's agent replies, from finished sopsim runs.

The replies are real English, as a model wrote them in sopsim's own scenarios, in the
order of their runs. A reply is kept when it
- ends where a sentence ends, has at least 8 words, and only Latin letters;
- carries no speaker label (a line opening with a capitalised name and a colon), so
  that no framework reads it as someone else's turn;
- copies no run of 10 words of a reply kept before it (sopsim would draw a copy again);
- is not within a MiniLM cosine of 0.80 of the 64 replies kept before it: distinct as
  an embedding tells them apart. They still share words as a small model's replies
  do, and sopsim's paraphrase check (by shared words) finds restatements among them.

    python3 benches/anchors/aiwaves/make_replies.py --sopsim target/release/sopsim RUN_DIR...

Each RUN_DIR is a `sopsim bench` output folder; its runs are read in the order of its
manifest.
"""
import argparse
import json
import os
import re
import subprocess
import sys

END = re.compile(r"[.!?][\"')\]]*$")
LABEL = re.compile(r"(^|\n)\s*[A-Z][\w ]{0,30}(\([^)]*\))?:")
WORD = re.compile(r"[^\W_]+")
COPY_WORDS = 10
REMEMBERED = 64
COSINE = 0.80


def latin(text):
    return all(not c.isalpha() or ord(c) < 0x250 for c in text)


def runs(folder):
    with open(os.path.join(folder, "manifest.jsonl")) as f:
        for line in f:
            run = json.loads(line)
            path = os.path.join(folder, "runs", run["id"], "transcript.jsonl")
            if os.path.exists(path):
                yield run, path


def embed(sopsim, texts):
    out = []
    for i in range(0, len(texts), 200):
        res = subprocess.run([sopsim, "embed", *texts[i:i + 200]], capture_output=True, text=True, check=True)
        out.extend(e["embedding"] for e in json.loads(res.stdout))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sopsim", default="target/release/sopsim")
    p.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "replies.jsonl"))
    p.add_argument("folders", nargs="+")
    a = p.parse_args()
    candidates = []
    for folder in a.folders:
        for run, path in runs(folder):
            with open(path) as f:
                for line in f:
                    m = json.loads(line)
                    text = m["content"].strip()
                    if m.get("kind") != "reply" or not END.search(text) or len(text.split()) < 8:
                        continue
                    if not latin(text) or LABEL.search(text):
                        continue
                    candidates.append((run, text))
    vectors = embed(a.sopsim, [t for _, t in candidates])
    kept, grams = [], set()
    for (run, text), v in zip(candidates, vectors):
        words = [w.lower() for w in WORD.findall(text)]
        own = {tuple(words[i:i + COPY_WORDS]) for i in range(len(words) - COPY_WORDS + 1)}
        if own & grams:
            continue
        if any(sum(x * y for x, y in zip(v, w)) >= COSINE for _, _, w in kept[-REMEMBERED:]):
            continue
        grams |= own
        kept.append((run, text, v))
    with open(a.out, "w") as f:
        for run, text, _ in kept:
            f.write(json.dumps({"scenario": run["scenario"], "seed": run["seed"], "text": text}) + "\n")
    print(f"{len(candidates)} complete replies, {len(kept)} kept: {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
