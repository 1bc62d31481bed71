#!/usr/bin/env python3
"""sopsim against the original aiwaves "Agents" framework, side by side.

Both run the same aiwaves configs, unchanged apart from what the anchor harness
changes (the server, no human users, the loop variants), against the same instant
fake OpenAI-compatible server on 127.0.0.1, with all-MiniLM-L6-v2 embeddings run
locally (sentence-transformers there, candle here), for the same number of turns.

Per run it prints CPU and wall time per turn, LLM calls (and the HTTP requests the
server saw from sopsim, retries included) and embeddings per turn,
prompt characters per turn (from the fake server's own count), and peak memory,
for the original and for sopsim, and the ratios.

Usage (from the project root, after `cargo build --release`):
    python3 benches/aiwaves_side_by_side.py [--turns 500] [--anchors benches/anchors/aiwaves]
        [--venv /tmp/aiwaves-venv] [--sopsim target/release/sopsim] [--only sopsim]

The original needs the anchor's venv: `benches/anchors/aiwaves/run.sh --setup-only`.
"""
import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = os.path.join(ROOT, "scenarios", "aiwaves")


def runs(turns):
    """(label, config, mode, turns): the anchor suite's runs, as run.sh names them."""
    deb = os.path.join(CONFIGS, "debate", "config.json")
    swc = os.path.join(CONFIGS, "software_company", "config.json")
    return [
        ("debate-asis-comp", deb, "sop", 1000),
        ("swco-asis-coop", swc, "sop", 1000),
        ("debate-loop-order", deb, "loop:Debate_Order_state", turns),
        ("debate-loop-rule", deb, "loop:Debate_Random_state", turns),
        # Retrieval on (TOP_K 3), so both embed with MiniLM for every message.
        ("debate-loop-rule-top3", deb, "loop:Debate_Random_state", turns),
    ]


def top_k(label):
    return 3 if label.endswith("-top3") else None


def http_json(url, data=None):
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    req = urllib.request.Request(url, data=None if data is None else json.dumps(data).encode(),
                                 headers={"Content-Type": "application/json"})
    with opener.open(req, timeout=10) as r:
        return json.loads(r.read())


def start_server(anchors, workdir):
    ready = os.path.join(workdir, "port")
    srv = subprocess.Popen([sys.executable, os.path.join(anchors, "fake_llm_server.py"), "--port", "0",
                            "--ready-file", ready], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        if os.path.exists(ready) and open(ready).read().strip():
            return srv, int(open(ready).read().strip())
        time.sleep(0.05)
    srv.kill()
    raise SystemExit("the fake server did not start")


def sopsim_config(src, mode, turns, port, k):
    """The config as the anchor harness rewrites it for the original."""
    cfg = copy.deepcopy(src)
    c = cfg.setdefault("config", {})
    if k is not None:
        c["TOP_K"] = str(k)
    c["API_BASE"] = "http://127.0.0.1:%d/v1" % port
    c["User_Names"] = "[]"
    c.pop("Embed_Model", None)
    if mode.startswith("loop:"):
        name = mode.split(":", 1)[1]
        cfg["root"] = name
        cfg["relations"][name] = {"0": name, "1": "end_state"}
        cfg["states"][name].setdefault("controller", {})["max_chat_nums"] = turns
    return cfg


def run_sopsim(binary, label, config, mode, turns, anchors):
    workdir = tempfile.mkdtemp(prefix="sopsim-aiwaves-")
    srv, port = start_server(anchors, workdir)
    try:
        with open(config) as f:
            cfg = sopsim_config(json.load(f), mode, turns, port, top_k(label))
        # Next to the original, so relative paths (knowledge bases) resolve alike.
        path = os.path.join(os.path.dirname(config), ".side-by-side-%s.json" % label)
        with open(path, "w") as f:
            json.dump(cfg, f)
        out = os.path.join(workdir, "out")
        http_json("http://127.0.0.1:%d/reset" % port, {})
        wall0 = time.perf_counter()
        proc = subprocess.Popen([binary, "run", path, "--llm", "openai", "--model", "gpt-3.5-turbo-16k-0613",
                                 "--embedder", "minilm", "--max-turns", str(turns), "--quiet", "--out", out],
                                env=dict(os.environ, OPENAI_API_KEY="sk-fake-local"),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - wall0
        os.remove(path)
        if status != 0:
            raise SystemExit("sopsim failed on %s: %s" % (label, proc.stderr.read().decode()))
        stats = http_json("http://127.0.0.1:%d/stats" % port)
        with open(os.path.join(out, "summary.json")) as f:
            summary = json.load(f)
        n = summary["turns"]
        times = []
        with open(os.path.join(out, "events.jsonl")) as f:
            for line in f:
                ev = json.loads(line)
                meta = ev.get("payload", {}).get("metadata", {})
                if ev.get("payload", {}).get("type") == "message" or "elapsed_ms" in meta and "kind" in meta:
                    times.append(meta.get("elapsed_ms", 0))
        calls = summary["llm_calls"]
        return {
            "turns": n,
            "cpu_ms": (usage.ru_utime + usage.ru_stime) * 1000 / n,
            "wall_ms": wall * 1000 / n,
            "llm_calls": calls["total"] / n,
            # What the server saw, retries included: a counted call may take several.
            "requests": stats.get("requests", 0) / n,
            "by_kind": {k: v / n for k, v in calls.items() if k != "total" and v},
            "embeddings": summary["embeddings"] / n,
            # What the paraphrase check found: it reads every reply, whatever it finds.
            "paraphrases": (summary.get("reply_quality") or {}).get("paraphrase"),
            "prompt_chars": sum(stats.get("prompt_chars_by_kind", {}).values()) / n,
            "rss_mb": usage.ru_maxrss / 1024,
            "turn_ms_first_last": first_last(times),
        }
    finally:
        srv.kill()


def first_last(times, window=50):
    """Mean wall ms per turn over the first and the last `window` turns."""
    if len(times) < 2 * window + 1:
        return None
    gaps = [b - a for a, b in zip(times, times[1:])]
    return sum(gaps[:window]) / window, sum(gaps[-window:]) / window


def run_original(venv, anchors, label, config, mode, turns):
    out = tempfile.mktemp(prefix="aiwaves-", suffix=".json")
    env = dict(os.environ, TIKTOKEN_CACHE_DIR=os.path.join(venv, "tiktoken_cache"), LITELLM_LOCAL_MODEL_COST_MAP="True")
    k = [] if top_k(label) is None else ["--top-k", str(top_k(label))]
    subprocess.run([os.path.join(venv, "bin", "python"), os.path.join(anchors, "harness.py"), "--config", config,
                    "--turns", str(turns), "--mode", mode, "--label", label, "--out", out] + k,
                   env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(out) as f:
        r = json.load(f)
    a = r["all"]
    return {
        "turns": r["turns"],
        "cpu_ms": a["cpu_ms"]["mean"],
        "wall_ms": a["ms"]["mean"],
        "llm_calls": a["llm_calls_per_turn"],
        "by_kind": a["llm_by_kind_per_turn"],
        "embeddings": a["embed_calls_per_turn"],
        "prompt_chars": a["prompt_chars_per_turn"],
        "rss_mb": r["rss_mb"]["peak"],
        "turn_ms_first_last": (r["first_window"]["cpu_ms"]["mean"], r["last_window"]["cpu_ms"]["mean"])
        if r["turns"] > 100 else None,
    }


def fmt(x, digits=1):
    return "–" if x is None else ("%.*f" % (digits, x))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=500)
    ap.add_argument("--anchors", default=os.path.join(ROOT, "benches", "anchors", "aiwaves"))
    ap.add_argument("--venv", default=os.environ.get("AIWAVES_VENV", "/tmp/aiwaves-venv"))
    ap.add_argument("--sopsim", default=os.path.join(ROOT, "target", "release", "sopsim"))
    ap.add_argument("--only", choices=["sopsim", "both"], default="both")
    ap.add_argument("--json", help="write all figures here")
    args = ap.parse_args()
    results = {}
    for label, config, mode, turns in runs(args.turns):
        print("== %s" % label, file=sys.stderr, flush=True)
        ours = run_sopsim(args.sopsim, label, config, mode, turns, args.anchors)
        theirs = None if args.only == "sopsim" else run_original(args.venv, args.anchors, label, config, mode, turns)
        results[label] = {"sopsim": ours, "aiwaves": theirs}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    print("| run | turns | CPU ms/turn aiwaves → sopsim (×) | wall ms/turn | LLM calls/turn (sopsim's HTTP requests) | embeddings/turn | "
          "sopsim's paraphrases | "
          "prompt K chars/turn | peak MB (×) | per-turn ms, first 50 → last 50 (aiwaves CPU; sopsim wall) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for label, r in results.items():
        o, t = r["sopsim"], r["aiwaves"] or {}
        ratio = lambda a, b: "–" if not a or not b else "%.0f" % (a / b)
        fl = lambda x: "–" if not x else "%s → %s" % (fmt(x[0]), fmt(x[1]))
        print("| %s | %d | %s → %s (%s×) | %s → %s | %s → %s (%s) | %s → %s | %s | %s → %s | %s → %s (%s×) | %s; %s |" % (
            label, o["turns"],
            fmt(t.get("cpu_ms")), fmt(o["cpu_ms"], 2), ratio(t.get("cpu_ms"), o["cpu_ms"]),
            fmt(t.get("wall_ms")), fmt(o["wall_ms"], 2),
            fmt(t.get("llm_calls"), 2), fmt(o["llm_calls"], 2), fmt(o["requests"], 2),
            fmt(t.get("embeddings"), 2), fmt(o["embeddings"], 2),
            "–" if o["paraphrases"] is None else o["paraphrases"],
            fmt((t.get("prompt_chars") or 0) / 1000 or None), fmt(o["prompt_chars"] / 1000),
            fmt(t.get("rss_mb"), 0), fmt(o["rss_mb"], 0), ratio(t.get("rss_mb"), o["rss_mb"]),
            fl(t.get("turn_ms_first_last")), fl(o["turn_ms_first_last"])))


if __name__ == "__main__":
    main()
