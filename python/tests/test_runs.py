"""Runs from Python: the same files as the command line, events, people's Ctrl-C, the
GIL, a server."""

from __future__ import annotations

import _thread
import asyncio
import json
import signal
import threading
import time

import pytest

import sopsim

SCRIPTED = {"llm": "scripted", "embedder": "hash"}
TIMES = {"wall_ms", "llm_latency_ms", "started_at", "finished_at"}


def without_times(summary: dict) -> dict:
    return {k: v for k, v in summary.items() if k not in TIMES}


def without_elapsed(event: dict) -> dict:
    """An event payload without the time since the run began."""
    event = json.loads(json.dumps(event))
    (event.get("payload", {}).get("metadata") or {}).pop("elapsed_ms", None)
    return event


def test_a_run_writes_what_the_command_line_writes(tmp_path, scenarios, cli):
    path = scenarios / "public_goods.json"
    cli("run", str(path), "--seed", "5", "--llm", "scripted", "--embedder", "hash", "--quiet", "--out", str(tmp_path / "cli"))
    run = sopsim.run(path, seed=5, out=tmp_path / "py", **SCRIPTED)
    for folder in ("cli", "py"):
        assert (tmp_path / folder / "transcript.jsonl").read_text() == (tmp_path / "cli" / "transcript.jsonl").read_text()
    lines = (tmp_path / "cli" / "transcript.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == run.transcript
    cli_summary = json.loads((tmp_path / "cli" / "summary.json").read_text())
    assert without_times(run.summary) == without_times(cli_summary)
    loaded = sopsim.load_run(tmp_path / "cli")
    assert loaded.transcript == run.transcript
    assert [without_elapsed(e) for e in loaded.events] == [without_elapsed(e) for e in run.events]


def test_a_run_without_a_folder_keeps_everything_in_memory(scenarios):
    seen = []
    run = sopsim.run(scenarios / "prisoners_dilemma.json", seed=2, on_event=seen.append, **SCRIPTED)
    assert run.summary["ended_by"] == "end"
    assert seen == run.events and len(seen) > run.summary["turns"]
    records = run.to_records()
    assert len(records) == len(run.transcript)
    assert {"decision_value", "p.COOPERATE", "p.DEFECT"} <= set(records[1])
    frame = run.to_pandas()
    assert list(frame["name"]) == [m["name"] for m in run.transcript]


def test_a_scenario_from_a_dict_runs_like_its_file(scenarios):
    path = scenarios / "prisoners_dilemma.json"
    from_file = sopsim.run(path, seed=4, **SCRIPTED)
    made = sopsim.Scenario.from_dict(json.loads(path.read_text()), base_dir=scenarios)
    assert made.name == "prisoners_dilemma" and made.states == ["round"]
    assert sopsim.run(made, seed=4, **SCRIPTED).transcript == from_file.transcript


def marathon(turns: int) -> sopsim.Scenario:
    return sopsim.Scenario.from_dict({
        "name": "marathon",
        "environment": {"top_k": 0},
        "agents": {"Ann": {"roles": {"talk": "A"}}, "Bo": {"roles": {"talk": "B"}}},
        "sop": {"start": "talk", "max_turns": turns, "states": {"talk": {
            "roles": ["A", "B"], "transition": {"max_turns": turns}, "next": ["end"]}}},
        "script": {"default": "{name} adds point {n} about rivers at turn {turn}."},
    })


@pytest.fixture
def ctrl_c_raises():
    """Python's own Ctrl-C handler for the test: a shell starts background jobs with
    Ctrl-C ignored, which Python keeps, and interrupt_main() then does nothing."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_ctrl_c_stops_at_a_turn_boundary_and_keeps_the_finished_turns(tmp_path, ctrl_c_raises):
    events = 0

    def interrupt_after_some(event: dict) -> None:
        nonlocal events
        events += 1
        if events == 40:
            _thread.interrupt_main()

    with pytest.raises(KeyboardInterrupt):
        sopsim.run(marathon(100_000), out=tmp_path, on_event=interrupt_after_some, **SCRIPTED)
    lines = (tmp_path / "transcript.jsonl").read_text().splitlines()
    assert 10 < len(lines) < 100_000
    assert all(json.loads(line)["content"] for line in lines), "whole lines only"
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["ended_by"] == "interrupted" and summary["turns"] == len(lines)
    assert sopsim.load_run(tmp_path).transcript == [json.loads(line) for line in lines]


def test_other_python_threads_run_while_a_run_goes_on():
    counted = 0
    stop = threading.Event()

    def count() -> None:
        nonlocal counted
        while not stop.is_set():
            counted += 1
            time.sleep(0)

    counter = threading.Thread(target=count)
    counter.start()
    start = time.monotonic()
    before = counted
    run = sopsim.run(marathon(3000), **SCRIPTED)
    during = counted - before
    stop.set()
    counter.join()
    assert run.summary["turns"] == 3000
    assert time.monotonic() - start > 0.05
    assert during > 1000, f"the other thread counted {during} while the run went on"


def test_a_server_answers_through_the_openai_backend(openai_server, scenarios):
    url, handler = openai_server
    run = sopsim.run(scenarios / "prisoners_dilemma.json", llm="openai", base_url=url, api_key="sk-test-secret", embedder="hash")
    assert run.summary["ended_by"] == "end"
    assert handler.calls == run.summary["llm_calls"]["total"]
    decisions = [m["decision"]["value"] for m in run.transcript if m.get("decision")]
    assert decisions and set(decisions) == {"DEFECT"}, decisions
    assert "sk-test-secret" not in json.dumps(run.summary) + json.dumps(run.events)


def test_run_async_runs_while_the_event_loop_goes_on(scenarios):
    async def main():
        ticks = 0

        async def tick():
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        ticker = asyncio.ensure_future(tick())
        run = await sopsim.run_async(scenarios / "prisoners_dilemma.json", seed=1, **SCRIPTED)
        ticker.cancel()
        return run, ticks

    run, ticks = asyncio.run(main())
    assert run.summary["turns"] == 10
    assert ticks > 10, "the loop kept running"
