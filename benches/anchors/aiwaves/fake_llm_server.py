#!/usr/bin/env python3
"""Deterministic, instant OpenAI-compatible chat server for the aiwaves anchor.

Stdlib only. Listens on 127.0.0.1 only. Endpoints:
  POST /v1/chat/completions (and /chat/completions)  - stream and non-stream
  POST /v1/embeddings (and /embeddings)               - deterministic hash vectors
  GET  /stats                                         - JSON counters
  POST /reset                                         - zero the counters
  GET  /health

Every chat request is classified by looking at the prompt text that the
aiwaves `ai-agents` package builds (see its source for where each
template lives), so the harness can report LLM calls per turn by kind:
  act         - an agent speaking (Agent.act; the only stream=True call)
  transit     - SOP.transit judge ("which next state?")
  route       - SOP.route with controller_type "rule" ("who speaks next?")
  env_summary - Environment.summary every MAX_CHAT_HISTORY messages
  agent_summary - Agent.update_memory summary
  tool        - any other non-stream call (ExtractComponent, CodeComponent, ...)

Replies are canned and deterministic: same request sequence -> same replies. An
agent's reply is the next line of replies.jsonl (real English replies, none a copy of
another), from its first line after each /reset.
"""
import argparse
import hashlib
import json
import os
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


LOCK = threading.Lock()
STATS = {}


def reset_stats():
    with LOCK:
        STATS.clear()
        STATS.update({
            "requests": 0,
            "by_kind": {},
            "prompt_chars_by_kind": {},
            "completion_chars": 0,
            "stream_requests": 0,
            "embedding_requests": 0,
            "route_counter": 0,
            "reply_counter": 0,
        })


reset_stats()


def classify(messages, stream):
    text = "\n".join(str(m.get("content") or "") for m in messages)
    if stream:
        # only Agent.act streams (stream=True); every other call is stream=False
        return "act", text
    if "Now please choose the person to speak" in text or "then output <end>" in text:
        return "route", text
    if "Here is the last query you especially need to pay attention" in text:
        return "transit", text
    if "Here is the summary of the previous dialogue history" in text:
        return "env_summary", text
    if "Here is the past summary" in text:
        return "agent_summary", text
    # tool components (ExtractComponent, CodeComponent, ...) call the agent's LLM
    return "tool", text


def canned_reply(kind, text, n):
    if kind == "transit":
        # stay in the current state; the harness forces transitions with
        # max_chat_nums, exactly as the example configs do.
        return "<end>0</end>"
    if kind == "route":
        roles = re.findall(r"then output <end>(.*?)</end>", text)
        with LOCK:
            k = STATS["route_counter"]
            STATS["route_counter"] += 1
        if not roles:
            return "<end>none</end>"
        # deterministic round robin over the roles in prompt order
        return "<end>%s</end>" % roles[k % len(roles)]
    if kind in ("env_summary", "agent_summary"):
        return "history summary: {the speakers exchanged %d arguments; positions unchanged}" % n
    # act / tool: the next of REPLIES, real English replies of sopsim's own runs (see
    # replies.jsonl's README section), in order from the first of each run.
    with LOCK:
        k = STATS["reply_counter"]
        STATS["reply_counter"] += 1
    return REPLIES[k % len(REPLIES)]


REPLIES_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "replies.jsonl")
REPLIES = [json.loads(line)["text"] for line in open(REPLIES_FILE, encoding="utf-8") if line.strip()]


def fake_embedding(s, dim=384):
    out = []
    seed = hashlib.sha256(s.encode()).digest()
    while len(out) < dim:
        seed = hashlib.sha256(seed).digest()
        out.extend((b - 128) / 128.0 for b in seed)
    return out[:dim]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY: otherwise headers and body go out as two small segments and Nagle + the
    # client's delayed ACK add ~40 ms to every call, which would be charged to the framework.
    disable_nagle_algorithm = True

    def log_message(self, fmt, *args):  # silence
        pass

    def _json(self, code, obj):
        body = json.dumps(obj).encode()
        head = ("HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                % (code, "OK" if code == 200 else "Error", len(body))).encode()
        self.wfile.write(head + body)  # one write

    def do_GET(self):
        if self.path.rstrip("/") == "/stats":
            with LOCK:
                snap = json.loads(json.dumps(STATS))
            return self._json(200, snap)
        if self.path.rstrip("/") == "/health":
            return self._json(200, {"ok": True})
        return self._json(404, {"error": "not found"})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b"{}"
        try:
            req = json.loads(raw or b"{}")
        except Exception:
            req = {}
        path = self.path.split("?")[0].rstrip("/")
        if path == "/reset":
            reset_stats()
            return self._json(200, {"ok": True})
        if path.endswith("/embeddings"):
            inp = req.get("input", "")
            items = inp if isinstance(inp, list) else [inp]
            with LOCK:
                STATS["embedding_requests"] += 1
            data = [{"object": "embedding", "index": i, "embedding": fake_embedding(str(x))}
                    for i, x in enumerate(items)]
            return self._json(200, {"object": "list", "data": data, "model": req.get("model", "fake"),
                                    "usage": {"prompt_tokens": 1, "total_tokens": 1}})
        if not path.endswith("/chat/completions"):
            return self._json(404, {"error": "not found"})

        messages = req.get("messages") or []
        kind, text = classify(messages, bool(req.get("stream")))
        with LOCK:
            STATS["requests"] += 1
            n = STATS["requests"]
            STATS["by_kind"][kind] = STATS["by_kind"].get(kind, 0) + 1
            STATS["prompt_chars_by_kind"][kind] = STATS["prompt_chars_by_kind"].get(kind, 0) + len(text)
        content = canned_reply(kind, text, n)
        with LOCK:
            STATS["completion_chars"] += len(content)
        model = req.get("model", "fake-model")
        created = int(time.time())
        cid = "chatcmpl-fake-%d" % n
        if req.get("stream"):
            with LOCK:
                STATS["stream_requests"] += 1
            # one SSE event per word, roughly like a token stream; written in one go (the fake is
            # instant, so there is nothing to gain from dribbling it out)
            words = re.findall(r"\S+\s*", content)
            chunks = [{"role": "assistant", "content": ""}] + [{"content": w} for w in words]
            parts = []
            for d in chunks:
                ev = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                      "choices": [{"index": 0, "delta": d, "finish_reason": None}]}
                parts.append(b"data: " + json.dumps(ev).encode() + b"\n\n")
            ev = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                  "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
            parts.append(b"data: " + json.dumps(ev).encode() + b"\n\n")
            parts.append(b"data: [DONE]\n\n")
            body = b"".join(parts)
            # Kept alive, as servers keep a streamed reply's connection (its length is
            # known here, the fake being instant).
            head = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                    b"Content-Length: %d\r\n\r\n" % len(body))
            self.wfile.write(head + body)
            self.wfile.flush()
            return
        return self._json(200, {
            "id": cid, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": max(1, len(text) // 4), "completion_tokens": max(1, len(content) // 4),
                      "total_tokens": max(2, (len(text) + len(content)) // 4)},
        })


def serve(port, ready_file=None):
    httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    httpd.daemon_threads = True
    if ready_file:
        with open(ready_file, "w") as f:
            f.write(str(httpd.server_address[1]))
    return httpd


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0, help="0 = pick a free port")
    ap.add_argument("--ready-file", default=None, help="write the bound port here once listening")
    a = ap.parse_args()
    httpd = serve(a.port, a.ready_file)
    print("fake LLM on 127.0.0.1:%d" % httpd.server_address[1], file=sys.stderr, flush=True)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
