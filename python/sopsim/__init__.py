"""sopsim from Python: run multi-agent scenarios, benchmark cooperative against
competitive information sharing over many seeds, and get results as DataFrames.

>>> import sopsim
>>> run = sopsim.run("scenarios/prisoners_dilemma.json", llm="scripted", seed=3)
>>> bench = sopsim.bench("scenarios/prisoners_dilemma.json", seeds=8, llm="scripted")
>>> bench.differences()  # doctest: +SKIP
"""

from . import models
from ._bench import Bench, bench, load_bench
from ._errors import FolderError, RunError, ScenarioError
from ._run import Run, load_run, run, run_async
from ._scenario import Scenario
from ._tournament import Tournament, load_tournament
from ._sopsim import __version__

__all__ = [
    "Bench",
    "FolderError",
    "Run",
    "RunError",
    "Scenario",
    "ScenarioError",
    "Tournament",
    "__version__",
    "bench",
    "load_bench",
    "load_run",
    "load_tournament",
    "models",
    "run",
    "run_async",
]
