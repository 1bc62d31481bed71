"""Bad input: exceptions that name the argument, never a crash of the interpreter."""

from __future__ import annotations

import pytest

import sopsim


def test_bad_scenarios_list_their_problems(tmp_path):
    with pytest.raises(sopsim.ScenarioError) as e:
        sopsim.Scenario.from_dict({"name": "x", "agents": {}, "sop": {"start": "a", "states": {}}})
    fields = [field for field, _ in e.value.problems]
    assert "sop.start" in fields and "agents" in fields
    bad = tmp_path / "bad.json"
    bad.write_text('{"name": "x", "agnets": {}}')
    with pytest.raises(sopsim.ScenarioError) as e:
        sopsim.Scenario.load(bad)
    assert any("did you mean" in message for _, message in e.value.problems)


@pytest.mark.parametrize("call, error, argument", [
    (lambda s: sopsim.run(42), TypeError, "scenario"),
    (lambda s: sopsim.Scenario.from_dict(["not", "a", "dict"]), TypeError, "document"),
    (lambda s: sopsim.run(s, mode="friendly", llm="scripted"), ValueError, "mode"),
    (lambda s: sopsim.run(s, seed=-1, llm="scripted"), ValueError, "seed"),
    (lambda s: sopsim.run(s, llm="gpt"), ValueError, "llm"),
    (lambda s: sopsim.run(s, colour="red"), TypeError, "colour"),
    (lambda s: sopsim.bench(s, seeds=0, llm="scripted"), ValueError, "seeds"),
    (lambda s: sopsim.bench(s, jobs=-1, llm="scripted"), ValueError, "jobs"),
    (lambda s: sopsim.bench(s, modes=("both",), llm="scripted"), ValueError, "modes"),
    (lambda s: sopsim.load_run(3.5), TypeError, "folder"),
    (lambda s: sopsim.run(s, llm="scripted", out="x", overwrite=True, resume=True),
     ValueError, "overwrite, resume"),
    (lambda s: sopsim.run(s, llm="scripted", resume=True), ValueError, "resume: needs out"),
    (lambda s: sopsim.run(s, llm="scripted", out="x", overwrite="no"), TypeError, "overwrite"),
    (lambda s: sopsim.run(s, record="r", replay="r"), ValueError, "record, replay"),
    (lambda s: sopsim.Scenario.from_dict({}, base_dir=3), TypeError, "base_dir"),
])
def test_bad_arguments_are_named(call, error, argument, scenarios):
    with pytest.raises(error) as e:
        call(scenarios / "prisoners_dilemma.json")
    assert argument in str(e.value)


def test_a_missing_file_is_a_scenario_error(tmp_path):
    with pytest.raises(sopsim.ScenarioError) as e:
        sopsim.Scenario.load(tmp_path / "nowhere.json")
    assert "nowhere.json" in str(e.value)


def test_a_rust_panic_is_a_python_exception():
    with pytest.raises(BaseException) as e:
        sopsim._sopsim._panic_for_test()
    assert "PanicException" in type(e.value).__name__
    assert sopsim.run is not None, "the interpreter goes on"
