"""Benchmarks: scenario × mode × seed, run from Python or read from a folder the command
line wrote, as DataFrames."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Union

from . import _sopsim
from ._options import check_count, check_mode, model_options, optional_path
from ._scenario import PathLike, Scenario, as_scenario
from ._tables import DataFrame, to_pandas


class Bench:
    """A benchmark's results: ``report`` is ``report.json``; :meth:`runs`,
    :meth:`figures` and :meth:`differences` are its tables."""

    def __init__(self, out: Path) -> None:
        #: The benchmark's folder.
        self.out = out
        files = json.loads(_sopsim.load_bench(os.fspath(out)))
        #: ``report.json``: per scenario and mode, every figure's summary, per-seed
        #: values and the paired difference between the modes.
        self.report: Dict[str, Any] = files["report"]
        self._ended_by: Dict[str, str] = files["ended_by"]

    def runs_records(self) -> List[Dict[str, Any]]:
        """One dict per run: scenario, mode, seed, ended_by (``None`` for a run that did
        not finish) and every figure."""
        seeds = self.report.get("seeds", [])
        rows = []
        for sc in self.report.get("scenarios", []):
            for mode in self.report.get("modes", []):
                for i, seed in enumerate(seeds):
                    ended_by = self._ended_by.get(f"{sc['scenario']}/{mode}/seed-{seed}")
                    row: Dict[str, Any] = {"scenario": sc["scenario"], "mode": mode, "seed": seed, "ended_by": ended_by}
                    for name, figure in sc.get("figures", {}).items():
                        values = figure.get("values", {}).get(mode) or []
                        row[name] = values[i] if i < len(values) else None
                    rows.append(row)
        return rows

    def runs(self) -> DataFrame:
        """One row per run: scenario, mode, seed, ended_by and every figure."""
        return to_pandas(self.runs_records())

    def figures_records(self) -> List[Dict[str, Any]]:
        """One dict per scenario, mode and figure: mean, sd, ci_low, ci_high, n, min,
        max and the interval's method."""
        rows = []
        for sc in self.report.get("scenarios", []):
            for name, figure in sc.get("figures", {}).items():
                for mode, s in (figure.get("by_mode") or {}).items():
                    ci = (s or {}).get("ci95") or [None, None]
                    rows.append({
                        "scenario": sc["scenario"], "mode": mode, "figure": name,
                        "mean": (s or {}).get("mean"), "sd": (s or {}).get("sd"),
                        "ci_low": ci[0], "ci_high": ci[1], "n": (s or {}).get("n", 0),
                        "min": (s or {}).get("min"), "max": (s or {}).get("max"),
                        "method": (s or {}).get("method"),
                    })
        return rows

    def figures(self) -> DataFrame:
        """Per scenario, mode and figure: mean, sd, 95% interval, n and method."""
        return to_pandas(self.figures_records())

    def rounds_records(self) -> List[Dict[str, Any]]:
        """One dict per scenario, mode, series and round (from 0): the series by round
        over the runs (a world's variables, decisions, and each probe's figures by
        asking: panel data), with mean, sd, ci_low, ci_high and n."""
        rows = []
        for sc in self.report.get("scenarios", []):
            for name, by_mode in (sc.get("rounds") or {}).items():
                for mode, rounds in (by_mode or {}).items():
                    for r, s in enumerate(rounds or []):
                        ci = (s or {}).get("ci95") or [None, None]
                        rows.append({
                            "scenario": sc["scenario"], "mode": mode, "series": name,
                            "round": r, "mean": (s or {}).get("mean"), "sd": (s or {}).get("sd"),
                            "ci_low": ci[0], "ci_high": ci[1], "n": (s or {}).get("n", 0),
                        })
        return rows

    def rounds(self) -> DataFrame:
        """Each series by round and mode, with intervals (see :meth:`rounds_records`)."""
        return to_pandas(self.rounds_records())

    def people_records(self) -> List[Dict[str, Any]]:
        """People's data beside the models' (a scenario's ``reference``, or
        ``--reference``): one dict per scenario, series, mode and round (``round`` is
        ``None`` for the whole game), with the people's ``people_mean`` and ``people_n``,
        the models' ``mean``, ``ci_low`` and ``ci_high``, and ``covered`` (whether the
        models' interval holds the people's mean)."""
        rows = []
        for sc in self.report.get("scenarios", []):
            for name, c in (sc.get("people") or {}).items():
                points = [(r.get("round"), r) for r in c.get("by_round") or []]
                if c.get("overall"):
                    points.append((None, c["overall"]))
                for round_, point in points:
                    for mode, model in (point.get("model") or {}).items():
                        ci = (model or {}).get("ci95") or [None, None]
                        rows.append({
                            "scenario": sc["scenario"], "series": name, "figure": c.get("figure"),
                            "mode": mode, "round": round_,
                            "people_mean": point["people"]["mean"], "people_n": point["people"]["n"],
                            "mean": (model or {}).get("mean"), "ci_low": ci[0], "ci_high": ci[1],
                            "covered": (point.get("covered") or {}).get(mode),
                        })
        return rows

    def people(self) -> DataFrame:
        """People's data beside the models', one row per series, mode and round (see
        :meth:`people_records`)."""
        return to_pandas(self.people_records())

    def differences_records(self) -> List[Dict[str, Any]]:
        """One dict per scenario and figure: the paired difference between the modes
        (``report["difference"]`` says which minus which) with its interval and p."""
        rows = []
        for sc in self.report.get("scenarios", []):
            for name, figure in sc.get("figures", {}).items():
                d = figure.get("difference")
                if not d:
                    continue
                ci = d.get("ci95") or [None, None]
                rows.append({
                    "scenario": sc["scenario"], "figure": name, "mean": d.get("mean"),
                    "ci_low": ci[0], "ci_high": ci[1], "p": d.get("p"), "n": d.get("n"),
                    "method": d.get("method"),
                })
        return rows

    def differences(self) -> DataFrame:
        """The paired differences between the modes, per scenario and figure."""
        return to_pandas(self.differences_records())

    def __repr__(self) -> str:
        names = [s["scenario"] for s in self.report.get("scenarios", [])]
        return f"Bench({self.out}, scenarios={names}, seeds={len(self.report.get('seeds', []))})"


def _progress(progress: Any) -> Optional[Callable[[int, int], None]]:
    if progress is None:
        return None
    if progress == "tqdm":
        try:
            from tqdm.auto import tqdm
        except ImportError:
            raise ImportError("progress='tqdm' needs tqdm: pip install tqdm") from None
        bar = tqdm(unit="run")

        def tell(done: int, total: int) -> None:
            bar.total = total
            bar.n = done
            bar.refresh()
            if done == total:
                bar.close()
        return tell
    if not callable(progress):
        raise TypeError(f"progress: expected a callable or 'tqdm', got {type(progress).__name__}")
    return progress


def bench(
    scenarios: Union[Any, Sequence[Any]],
    *,
    seeds: int = 8,
    first_seed: int = 0,
    modes: Iterable[str] = ("cooperative", "competitive"),
    jobs: Optional[int] = None,
    out: Optional[PathLike] = None,
    progress: Any = None,
    max_turns: Optional[int] = None,
    llm: Optional[str] = None,
    model: Optional[PathLike] = None,
    base_url: Optional[str] = None,
    api_key: Optional[str] = None,
    embedder: Optional[str] = None,
) -> Bench:
    """Runs each scenario in each mode over ``seeds`` seeds (from ``first_seed``), up
    to ``jobs`` at once, into ``out`` (a new temporary folder by default), as ``sopsim
    bench`` does, and returns its :class:`Bench`. Rerunning into the same ``out`` skips
    the runs already finished. ``progress`` is a callable ``(done, total)`` or
    ``"tqdm"``; the model settings are :func:`sopsim.run`'s."""
    items = [scenarios] if isinstance(scenarios, (str, os.PathLike, Scenario)) else list(scenarios)
    if not items:
        raise ValueError("scenarios: name at least one")
    paths = []
    for i, item in enumerate(items):
        sc = as_scenario(item, f"scenarios[{i}]")
        if not sc.from_file:
            raise TypeError(
                f"scenarios[{i}]: a Scenario made from a dict has no file; a benchmark runs "
                "files (save it first: scenario.save(path))"
            )
        paths.append(os.fspath(sc.path))
    check_count(seeds, "seeds", minimum=1, maximum=1_000_000)
    check_count(first_seed, "first_seed", minimum=0)
    if jobs is not None:
        check_count(jobs, "jobs", minimum=1, maximum=100_000)
    if max_turns is not None:
        check_count(max_turns, "max_turns", minimum=1)
    if isinstance(modes, str):
        modes = (modes,)
    modes = list(modes)
    if not modes:
        raise ValueError("modes: name at least one")
    for m in modes:
        check_mode(m, "modes")
    # A mode named twice is one mode, as on the command line.
    modes = list(dict.fromkeys(modes))
    folder = optional_path(out, "out") or tempfile.mkdtemp(prefix="sopsim-bench-")
    options = {
        "scenarios": paths,
        "seeds": seeds,
        "first_seed": first_seed,
        "modes": modes,
        "jobs": jobs if jobs is not None else 4,
        "out": folder,
        "max_turns": max_turns,
        **model_options(llm, model, base_url, api_key, embedder),
    }
    done = _sopsim.bench(json.dumps(options), _progress(progress))
    return Bench(Path(done))


def load_bench(folder: PathLike) -> Bench:
    """The :class:`Bench` the command line wrote into ``folder`` (``sopsim bench --out``).
    Only regular files inside the folder are read, each within a limit: a link, a
    device, a pipe or a scenario name that would leave the folder raises
    :class:`sopsim.FolderError`, and a folder without ``report.json`` raises
    ``FileNotFoundError``."""
    if not isinstance(folder, (str, os.PathLike)):
        raise TypeError(f"folder: expected a str or os.PathLike, got {type(folder).__name__}")
    return Bench(Path(folder))
