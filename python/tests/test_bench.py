"""Benchmarks from Python, and folders the command line wrote, as tables."""

from __future__ import annotations

import json

import sopsim


def test_runs_hold_the_reports_per_seed_values(tmp_path, scenarios):
    seen = []
    bench = sopsim.bench(
        [scenarios / "prisoners_dilemma.json", scenarios / "public_goods.json"],
        seeds=3, jobs=2, out=tmp_path, progress=lambda done, total: seen.append((done, total)),
        llm="scripted", embedder="hash",
    )
    assert seen[0] == (0, 12) and seen[-1] == (12, 12)
    again = []
    sopsim.bench(
        [scenarios / "prisoners_dilemma.json", scenarios / "public_goods.json"],
        seeds=3, jobs=2, out=tmp_path, progress=lambda done, total: again.append((done, total)),
        llm="scripted", embedder="hash",
    )
    assert again == [(12, 12)], "a rerun has nothing left to do"
    report = json.loads((tmp_path / "report.json").read_text())
    assert bench.report == report
    runs = bench.runs()
    assert len(runs) == 12 and set(runs["ended_by"]) == {"end"}
    for sc in report["scenarios"]:
        for mode in report["modes"]:
            rows = runs[(runs["scenario"] == sc["scenario"]) & (runs["mode"] == mode)].sort_values("seed")
            assert list(rows["seed"]) == report["seeds"]
            for figure in ("turns", "welfare", "cooperation_rate"):
                assert list(rows[figure]) == sc["figures"][figure]["values"][mode], figure
    figures = bench.figures()
    row = figures[(figures["scenario"] == "public_goods") & (figures["mode"] == "cooperative") & (figures["figure"] == "cooperation_rate")]
    assert row.iloc[0]["method"] == "bootstrap" and 0 <= row.iloc[0]["ci_low"] <= row.iloc[0]["ci_high"] <= 1
    differences = bench.differences()
    assert set(differences["figure"]) >= {"welfare", "cooperation_rate"}


def test_a_command_line_bench_loads(tmp_path, scenarios, cli):
    cli("bench", str(scenarios / "prisoners_dilemma.json"), "--seeds", "2", "--llm", "scripted", "--embedder", "hash", "--quiet", "--out", str(tmp_path))
    bench = sopsim.load_bench(tmp_path)
    assert len(bench.runs_records()) == 4
    assert bench.report["scenarios"][0]["scenario"] == "prisoners_dilemma"


def test_a_mode_named_twice_is_benched_once(tmp_path, scenarios):
    bench = sopsim.bench(
        scenarios / "prisoners_dilemma.json", seeds=2, modes=["cooperative", "cooperative"],
        out=tmp_path, llm="scripted", embedder="hash",
    )
    assert bench.report["modes"] == ["cooperative"]
    welfare = bench.report["scenarios"][0]["figures"]["welfare"]
    assert welfare["by_mode"]["cooperative"]["n"] == 2
