"""Shared fixtures: the repository's scenarios, the command line built beside the
package, and a loopback OpenAI-compatible server."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def scenarios() -> Path:
    return ROOT / "scenarios"


@pytest.fixture
def cli():
    """Runs the `sopsim` command line (SOPSIM_BIN, default target/debug/sopsim, which
    the README's first command builds)."""
    binary = Path(os.environ.get("SOPSIM_BIN", ROOT / "target" / "debug" / "sopsim"))
    assert binary.exists(), f"{binary}: build the command line first (cargo build)"

    def run(*args: str) -> subprocess.CompletedProcess:
        done = subprocess.run([str(binary), *args], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done

    return run


class _Handler(BaseHTTPRequestHandler):
    calls = 0

    def log_message(self, *args) -> None:
        pass

    def _send(self, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._send({"data": [{"id": "fake", "object": "model"}]})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).calls += 1
        schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("schema") or {}
        options = ((schema.get("properties") or {}).get("choice") or {}).get("enum")
        content = json.dumps({"choice": options[-1]}) if options else "I keep my word this round."
        usage = {"prompt_tokens": 100, "completion_tokens": 7}
        if body.get("stream"):
            chunks = [
                {"choices": [{"index": 0, "delta": {"content": content}}]},
                {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                {"choices": [], "usage": usage},
            ]
            data = ("".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n").encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self._send({
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": usage,
        })


@pytest.fixture
def openai_server():
    """An OpenAI-compatible server on 127.0.0.1 that answers at once: a fixed reply,
    and the last option of a closed choice."""
    _Handler.calls = 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", _Handler
    server.shutdown()
