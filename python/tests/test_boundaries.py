"""What the Python boundary refuses: folders that reach outside themselves or hold
what is not a file, numbers sopsim cannot hold, data that is not JSON; and what it
stops: a cancelled task's run, a benchmark whose progress callback fails."""

from __future__ import annotations

import asyncio
import json
import os
import time

import pytest

import sopsim

SCRIPTED = {"llm": "scripted", "embedder": "hash"}


@pytest.fixture
def run_folder(tmp_path, scenarios):
    folder = tmp_path / "run"
    sopsim.run(scenarios / "prisoners_dilemma.json", out=folder, **SCRIPTED)
    return folder


def test_a_run_folder_is_read_only_through_its_own_regular_files(tmp_path, run_folder):
    secret = tmp_path / "secret.json"
    secret.write_text('{"password": "hunter2"}\n')
    cases = {
        "events.jsonl": lambda p: p.symlink_to("/dev/zero"),
        "transcript.jsonl": lambda p: os.mkfifo(p),
        "summary.json": lambda p: p.symlink_to(secret),
        "environment.json": lambda p: p.write_text("{" * 100_000),
    }
    for name, spoil in cases.items():
        path = run_folder / name
        kept = path.read_bytes()
        path.unlink()
        spoil(path)
        started = time.monotonic()
        with pytest.raises(sopsim.FolderError) as e:
            sopsim.load_run(run_folder)
        assert time.monotonic() - started < 10, f"{name}: read for too long"
        assert name in str(e.value) and "hunter2" not in str(e.value), str(e.value)
        path.unlink()
        path.write_bytes(kept)
    assert sopsim.load_run(run_folder).summary["ended_by"] == "end"
    with pytest.raises(FileNotFoundError):
        sopsim.load_run(tmp_path / "nowhere")


def test_json_of_another_shape_is_a_folder_error(tmp_path, run_folder, scenarios):
    for name, text in [
        ("summary.json", "[1]"),
        ("environment.json", "5"),
        ("transcript.jsonl", "[1, 2]\n"),
        ("events.jsonl", '"text"\n'),
    ]:
        path = run_folder / name
        kept = path.read_bytes()
        path.write_text(text)
        with pytest.raises(sopsim.FolderError) as e:
            sopsim.load_run(run_folder)
        assert name in str(e.value), str(e.value)
        path.write_bytes(kept)
    out = tmp_path / "bench"
    sopsim.bench(scenarios / "prisoners_dilemma.json", seeds=1, out=out, **SCRIPTED)
    for text in ["[1, 2]", '{"scenarios": 5, "modes": [], "seeds": []}']:
        (out / "report.json").write_text(text)
        with pytest.raises(sopsim.FolderError) as e:
            sopsim.load_bench(out)
        assert "report.json" in str(e.value), str(e.value)


def test_a_bench_folder_cannot_name_runs_outside_itself(tmp_path, scenarios):
    out = tmp_path / "bench"
    sopsim.bench(scenarios / "prisoners_dilemma.json", seeds=1, out=out, **SCRIPTED)
    outside = tmp_path / "outside" / "cooperative" / "seed-0"
    outside.mkdir(parents=True)
    (outside / "summary.json").write_text('{"ended_by": "stolen"}')
    report = json.loads((out / "report.json").read_text())
    for name in [str(tmp_path / "outside"), "../../outside"]:
        forged = dict(report, scenarios=[dict(report["scenarios"][0], scenario=name)])
        (out / "report.json").write_text(json.dumps(forged))
        with pytest.raises(sopsim.FolderError) as e:
            sopsim.load_bench(out)
        assert "report.json" in str(e.value)
    (out / "report.json").unlink()
    (out / "report.json").symlink_to("/dev/zero")
    with pytest.raises(sopsim.FolderError):
        sopsim.load_bench(out)


@pytest.mark.parametrize("argument, value", [
    ("seed", 2**200),
    ("seed", 2**64 + 5),
    ("max_turns", 2**70),
])
def test_numbers_sopsim_cannot_hold_are_refused_not_replaced(scenarios, argument, value):
    with pytest.raises(OverflowError) as e:
        sopsim.run(scenarios / "prisoners_dilemma.json", **{argument: value}, **SCRIPTED)
    assert argument in str(e.value)


def test_the_largest_seed_runs(scenarios):
    run = sopsim.run(scenarios / "prisoners_dilemma.json", seed=2**64 - 1, **SCRIPTED)
    assert run.summary["seed"] == 2**64 - 1


def test_a_nan_in_a_dict_is_named():
    doc = {"name": "x", "llm": {"temperature": float("nan")}}
    with pytest.raises(ValueError) as e:
        sopsim.Scenario.from_dict(doc)
    assert "document.llm.temperature" in str(e.value)


def long_walk() -> sopsim.Scenario:
    return sopsim.Scenario.from_dict({
        "name": "walk",
        "environment": {"top_k": 0},
        "agents": {"Ann": {"roles": {"talk": "A"}}, "Bo": {"roles": {"talk": "B"}}},
        "sop": {"start": "talk", "max_turns": 10_000_000, "states": {"talk": {
            "roles": ["A", "B"], "transition": {"max_turns": 10_000_000}, "next": ["end"]}}},
        "script": {"default": "{name} walks on at turn {turn}."},
    })


def test_cancelling_run_async_stops_the_run_and_frees_its_folder(tmp_path):
    folder = tmp_path / "walk"

    async def main():
        task = asyncio.ensure_future(sopsim.run_async(long_walk(), out=folder, **SCRIPTED))
        while not (folder / "transcript.jsonl").exists() or not (folder / "transcript.jsonl").stat().st_size:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["ended_by"] == "interrupted"
    size = (folder / "transcript.jsonl").stat().st_size
    time.sleep(0.3)
    assert (folder / "transcript.jsonl").stat().st_size == size, "the run went on"
    # The folder's lock is free: another run may replace it at once.
    again = sopsim.run(long_walk(), out=folder, overwrite=True, max_turns=4, **SCRIPTED)
    assert again.summary["turns"] == 4


def test_a_failing_progress_callback_stops_the_bench_and_is_raised(tmp_path, scenarios):
    class Broken(Exception):
        pass

    def progress(done: int, total: int) -> None:
        if done == 1:
            raise Broken("the display broke")

    with pytest.raises(Broken):
        sopsim.bench(scenarios / "prisoners_dilemma.json", seeds=8, jobs=1, out=tmp_path,
                     progress=progress, **SCRIPTED)
    finished = sum(1 for p in (tmp_path / "runs").rglob("summary.json"))
    assert 1 <= finished < 16
