#!/usr/bin/env python3
"""Peak RSS of `sopsim run --serve` with N browsers that ask for /events and never read.

    python3 benches/viewer_idle_clients.py BINARY N TURNS [AFTER_SECONDS]

Runs a scripted two-agent scenario of TURNS turns with `--serve --start-paused`, opens N
sockets that send `GET /events` and never read (after AFTER_SECONDS of running, if
given), and prints the peak resident memory over at most 60 s.
"""
import json, os, re, socket, subprocess, sys, tempfile, time

SCENARIO = {
    "name": "marathon",
    "environment": {"type": "cooperative", "max_chat_history": 8, "top_k": 0},
    "agents": {"Ann": {"roles": {"talk": "A"}}, "Bo": {"roles": {"talk": "B"}}},
    "sop": {"start": "talk", "max_turns": 200000, "states": {"talk": {
        "roles": ["A", "B"],
        "transition": {"max_turns": 200000, "on_max_turns": "end"}, "next": ["end"]}}},
    "script": {"default": "{name} adds point {n} about the river at turn {turn}, with "
               "some more words to make the message as long as a typical reply."},
}
scenario = os.path.join(tempfile.mkdtemp(), "marathon.json")
with open(scenario, "w") as f:
    json.dump(SCENARIO, f)
binary, n = sys.argv[1], int(sys.argv[2])
turns = sys.argv[3] if len(sys.argv) > 3 else "20000"
p = subprocess.Popen([binary, "run", scenario, "--llm", "scripted", "--embedder", "hash",
                      "--quiet", "--serve", "--start-paused", "--max-turns", turns],
                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
url = p.stdout.readline()
addr = re.search(r"http://([^/\s]+)", url).group(1)
host, port = addr.rsplit(":", 1)
late = len(sys.argv) > 4
def resume():
    c = socket.create_connection((host, int(port)))
    c.sendall(f"POST /api/resume HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}".encode())
    c.recv(1000); c.close()
if late:
    resume(); time.sleep(float(sys.argv[4]))
socks, refused = [], 0
for _ in range(n):
    s = socket.create_connection((host, int(port)))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(f"GET /events HTTP/1.1\r\nHost: {addr}\r\n\r\n".encode())
    socks.append(s)
def rss():
    for l in open(f"/proc/{p.pid}/status"):
        if l.startswith("VmRSS:"):
            return int(l.split()[1])
    return 0
time.sleep(0.5)
if not late:
    resume()
peak, start = 0, time.time()
while time.time() - start < 60:
    line = p.stdout.readline() if False else None
    r = rss(); peak = max(peak, r)
    if p.poll() is not None: break
    # the run prints "the run ended" then lingers; check state
    try:
        q = socket.create_connection((host, int(port)), timeout=2)
        q.sendall(f"GET /api/state HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n".encode())
        body = b""
        while True:
            d = q.recv(65536)
            if not d: break
            body += d
        q.close()
        if b'"ended_by":"' in body and b'"ended_by":null' not in body:
            break
    except OSError:
        pass
    time.sleep(0.2)
took = time.time() - start
for s in socks[:3]:
    s.settimeout(1)
    try:
        head = s.recv(200)
    except Exception:
        head = b""
print(f"{binary}: {n} idle clients{' connecting after ' + sys.argv[4] + ' s' if late else ''}, {turns} turns: peak RSS {peak/1024:.0f} MiB, run took {took:.1f} s; first answers: {head[:40]!r}")
p.kill()
