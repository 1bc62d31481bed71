"""What a run's probes and judge, and a tournament, measured, read as DataFrames."""

from __future__ import annotations

import json

import sopsim

SCRIPTED = {"llm": "scripted", "embedder": "hash"}


def judged_debate(scenarios, tmp_path):
    """The README's debate judged on goal by a scripted judge that answers 7, 3, 9 in
    turn, and asked how convinced each debater is at the end."""
    doc = json.loads((scenarios / "debate.json").read_text())
    doc["judge"] = {"rubric": "sotopia", "leave_out": ["believability", "relationship", "knowledge", "secret",
                                                      "social_rules", "financial_and_material_benefits"]}
    doc["probes"] = {"sure": {"question": "How sure are you of your side?", "ask": {"agents": ["Ada", "Ben"]},
                              "when": ["end"], "answer": {"number": {"min": 0, "max": 10}}}}
    doc["script"]["judge"] = ["7", "3", "9"]
    path = tmp_path / "debate.json"
    path.write_text(json.dumps(doc))
    return path


def test_a_runs_probes_and_judgement_are_tables(scenarios, tmp_path):
    run = sopsim.run(judged_debate(scenarios, tmp_path), out=tmp_path / "run", **SCRIPTED)
    probes = run.probes_records()
    assert {(p["probe"], p["agent"], p["when"]) for p in probes} == {("sure", "Ada", "end"), ("sure", "Ben", "end")}
    assert all(0 <= p["value"] <= 10 for p in probes)
    scores = run.judgement_records()
    assert [r["dimension"] for r in scores] == ["goal"] * len(scores)
    assert {r["score"] for r in scores} <= {7.0, 3.0, 9.0}
    assert all((r["min"], r["max"], r["judge"]) == (0, 10, "scripted") for r in scores)
    loaded = sopsim.load_run(tmp_path / "run")
    assert loaded.judgement == run.judgement
    assert loaded.probes_records() == probes


def test_a_tournament_reads_back_as_its_report(scenarios, tmp_path, cli):
    out = tmp_path / "t"
    cli("tournament", str(scenarios / "tournaments" / "ipd_10.json"), "--players",
        str(scenarios / "tournaments" / "axelrod.json"), "--seeds", "1", "--quiet", "--out", str(out))
    t = sopsim.load_tournament(out)
    assert t.report == json.loads((out / "report.json").read_text())
    ratings = t.ratings_records()
    assert [r["player"] for r in ratings] == t.ranking == t.report["ranking"]
    assert [r["rank"] for r in ratings] == list(range(1, len(ratings) + 1))
    players = t.report["players"]
    assert len(t.matrix_records()) == len(players) ** 2
    assert {g["player"] for g in t.groups_records()} == set(players)


def test_a_folder_without_a_report_is_no_tournament(tmp_path):
    try:
        sopsim.load_tournament(tmp_path)
    except FileNotFoundError as e:
        assert "report.json" in str(e)
    else:
        raise AssertionError("an empty folder was read as a tournament")


def test_peoples_data_stands_beside_the_models(scenarios, tmp_path):
    bench = sopsim.bench(scenarios / "experiments" / "pd_cooper_1996.json", seeds=2, modes=["cooperative"],
                         out=tmp_path / "b", llm="scripted", embedder="hash")
    rows = bench.people_records()
    by_round = [r for r in rows if r["series"] == "cooperation_by_round"]
    assert [r["round"] for r in by_round] == list(range(1, 11))
    assert by_round[-1]["people_mean"] == 0.2 and by_round[-1]["people_n"] == 30
    overall = [r for r in rows if r["series"] == "cooperation"]
    assert len(overall) == 1 and overall[0]["round"] is None and overall[0]["people_mean"] == 0.523
