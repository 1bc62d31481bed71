#!/usr/bin/env python3
"""An OpenAI-compatible server that answers at once, for measuring sopsim's own cost per
model call: every chat completion gets a short reply (streamed when asked), a closed
choice (`response_format` with a `choice` enum) gets its first option, `/v1/models` lists
one model. Keep-alive HTTP/1.1 over asyncio; loopback only.

Usage: python3 benches/anchors/fake_openai.py [PORT]   (prints "listening on URL")
"""

import asyncio
import json
import sys

REPLY = "I share this round, as my neighbours did."


def completion(body: dict) -> bytes:
    fmt = body.get("response_format") or {}
    schema = (fmt.get("json_schema") or {}).get("schema") or {}
    options = ((schema.get("properties") or {}).get("choice") or {}).get("enum")
    content = json.dumps({"choice": options[0]}) if options else REPLY
    usage = {"prompt_tokens": 300, "completion_tokens": 9}
    if body.get("stream"):
        chunks = [
            {"choices": [{"index": 0, "delta": {"content": content}}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
            {"choices": [], "usage": usage},
        ]
        text = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
        return response(text.encode(), "text/event-stream")
    message = {"role": "assistant", "content": content}
    whole = {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}], "usage": usage}
    return response(json.dumps(whole).encode(), "application/json")


def response(payload: bytes, kind: str) -> bytes:
    head = f"HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nContent-Length: {len(payload)}\r\n\r\n"
    return head.encode() + payload


MODELS = response(json.dumps({"data": [{"id": "fake", "object": "model"}]}).encode(), "application/json")


async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            length = 0
            for line in lines[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            body = await reader.readexactly(length) if length else b""
            if lines[0].startswith("GET") and "/models" in lines[0]:
                writer.write(MODELS)
            else:
                writer.write(completion(json.loads(body or b"{}")))
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionResetError, asyncio.LimitOverrunError):
        pass
    finally:
        writer.close()


async def main() -> None:
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    server = await asyncio.start_server(serve, "127.0.0.1", port, limit=1 << 24, backlog=1024)
    host, port = server.sockets[0].getsockname()[:2]
    print(f"listening on http://{host}:{port}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
