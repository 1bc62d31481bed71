"""One run: started from Python or read from a folder the command line wrote."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from . import _sopsim
from ._options import (
    check_count,
    check_flag,
    check_folder_flags,
    check_mode,
    model_options,
    optional_path,
)
from ._scenario import PathLike, as_scenario
from ._tables import DataFrame, to_pandas


class Run:
    """A finished run: its transcript, summary, events and Environment, as the files
    ``sopsim run --out DIR`` writes hold them."""

    def __init__(
        self,
        transcript: List[Dict[str, Any]],
        summary: Dict[str, Any],
        events: List[Dict[str, Any]],
        environment: Dict[str, Any],
        network: Optional[Dict[str, Any]] = None,
        out: Optional[Path] = None,
        probes: Optional[List[Dict[str, Any]]] = None,
        judgement: Optional[Dict[str, Any]] = None,
    ) -> None:
        #: Every message, in order, as ``transcript.jsonl`` holds them.
        self.transcript = transcript
        #: How the run went, as ``summary.json``.
        self.summary = summary
        #: The event payloads, as ``events.jsonl`` (times aside).
        self.events = events
        #: The Environment at the end, as ``environment.json``.
        self.environment = environment
        #: The populations' networks, as ``network.json`` (``None`` without populations).
        self.network = network
        #: The run's folder, when it has one.
        self.out = out
        #: The probes' answers, as ``probes.jsonl`` holds them (empty without probes).
        self.probes = probes or []
        #: The judge's scores, as ``judgement.json`` (``None`` for a run not judged).
        self.judgement = judgement

    def to_records(self) -> List[Dict[str, Any]]:
        """One dict per message: the transcript's fields, ``decision_value`` and a
        ``p.VALUE`` per option of its decision (``None`` where a message has none)."""
        options: List[str] = []
        for m in self.transcript:
            for option in ((m.get("decision") or {}).get("probabilities") or {}):
                if option not in options:
                    options.append(option)
        records = []
        for m in self.transcript:
            row = {k: v for k, v in m.items() if k != "decision"}
            decision = m.get("decision") or {}
            row["decision_value"] = decision.get("value")
            probabilities = decision.get("probabilities") or {}
            for option in options:
                row[f"p.{option}"] = probabilities.get(option)
            records.append(row)
        return records

    def to_pandas(self) -> DataFrame:
        """The transcript as a DataFrame, one row per message (see :meth:`to_records`).
        Needs pandas."""
        return to_pandas(self.to_records())

    def probes_records(self) -> List[Dict[str, Any]]:
        """One dict per answer to a probe: ``probe``, ``agent``, ``when``, ``asking``
        (the panel's wave, from 0), ``turn``, ``round``, ``state``, ``answer``,
        ``value``, and a ``p.OPTION`` per option of a closed answer (``None`` where an
        answer has none)."""
        options: List[str] = []
        for a in self.probes:
            for option in a.get("probabilities") or {}:
                if option not in options:
                    options.append(option)
        records = []
        for a in self.probes:
            row = {k: a.get(k) for k in ("probe", "agent", "when", "asking", "turn", "round", "state", "answer", "value")}
            probabilities = a.get("probabilities") or {}
            for option in options:
                row[f"p.{option}"] = probabilities.get(option)
            records.append(row)
        return records

    def probes_pandas(self) -> DataFrame:
        """The probes' answers as a DataFrame, one row per answer (see
        :meth:`probes_records`): panel data by agent and ``asking``. Needs pandas."""
        return to_pandas(self.probes_records())

    def judgement_records(self) -> List[Dict[str, Any]]:
        """One dict per judged item: ``subject`` (an agent, or ``episode``),
        ``dimension``, ``score`` (the samples' mean), ``sd``, ``expected``, ``samples``
        (how many chose a point of the scale), ``min`` and ``max`` of the scale, and
        the ``judge``. Empty for a run not judged."""
        j = self.judgement or {}
        scales = j.get("scales") or {}
        rows = []
        for subject, dims in (j.get("scores") or {}).items():
            for dimension, s in (dims or {}).items():
                lo, hi = (scales.get(dimension) or [None, None])[:2]
                rows.append({
                    "subject": subject, "dimension": dimension, "score": s.get("score"),
                    "sd": s.get("sd"), "expected": s.get("expected"),
                    "samples": len(s.get("samples") or []), "min": lo, "max": hi,
                    "judge": j.get("judge"),
                })
        return rows

    def judgement_pandas(self) -> DataFrame:
        """The judged scores as a DataFrame, one row per subject and dimension (see
        :meth:`judgement_records`). Needs pandas."""
        return to_pandas(self.judgement_records())

    def __repr__(self) -> str:
        s = self.summary
        return f"Run({s.get('scenario')!r}, {s.get('mode')}, seed {s.get('seed')}: {s.get('turns')} turns, ended by {s.get('ended_by')})"


def run(
    scenario: Any,
    *,
    mode: Optional[str] = None,
    seed: int = 0,
    llm: Optional[str] = None,
    model: Optional[PathLike] = None,
    base_url: Optional[str] = None,
    api_key: Optional[str] = None,
    embedder: Optional[str] = None,
    max_turns: Optional[int] = None,
    out: Optional[PathLike] = None,
    overwrite: bool = False,
    resume: bool = False,
    record: Optional[PathLike] = None,
    replay: Optional[PathLike] = None,
    on_event: Optional[Callable[[Dict[str, Any]], Any]] = None,
    _stop: Optional["_sopsim.Stop"] = None,
) -> Run:
    """Runs a scenario (a path or a :class:`Scenario`) as ``sopsim run`` does and
    returns the finished :class:`Run`.

    ``llm`` is ``"local"`` (the default model, fetched on first use), ``"openai"`` (a
    server: ``base_url``, ``api_key``, ``model``) or ``"scripted"`` (the scenario's
    script); ``embedder`` is ``"minilm"``, ``"openai"`` or ``"hash"``. With ``out`` the
    run's files are written there (``resume=True`` continues a killed run in it).
    ``on_event`` is called with each event's payload. The GIL is released while the run
    goes on; Ctrl-C (KeyboardInterrupt) stops it at once, keeps the finished turns (in
    ``out``) and is raised.
    """
    source = as_scenario(scenario)._run_source()
    check_mode(mode, "mode")
    check_count(seed, "seed", minimum=0)
    if max_turns is not None:
        check_count(max_turns, "max_turns", minimum=1)
    check_folder_flags(out, check_flag(overwrite, "overwrite"), check_flag(resume, "resume"))
    if record is not None and replay is not None:
        raise ValueError("record, replay: give one or the other, not both")
    if on_event is not None and not callable(on_event):
        raise TypeError(f"on_event: expected a callable, got {type(on_event).__name__}")
    options = {
        **source,
        "mode": mode,
        "seed": seed,
        "max_turns": max_turns,
        "out": optional_path(out, "out"),
        "overwrite": overwrite,
        "resume": resume,
        **model_options(llm, model, base_url, api_key, embedder),
        "record": optional_path(record, "record"),
        "replay": optional_path(replay, "replay"),
    }
    callback = None
    if on_event is not None:
        def callback(text: str) -> None:
            on_event(json.loads(text))
    result = json.loads(_sopsim.run(json.dumps(options), callback, _stop))
    return Run(
        result["transcript"],
        result["summary"],
        result["events"],
        result["environment"],
        result.get("network"),
        Path(out) if out is not None else None,
        result.get("probes"),
        result.get("judgement"),
    )


async def run_async(scenario: Any, **options: Any) -> Run:
    """:func:`run` for code inside an event loop (a Jupyter notebook): the run goes on a
    worker thread and the loop keeps running. Cancelling the task stops the run at once
    (its finished turns are kept in ``out``) and waits for it to
    let go of its folder before the cancellation is raised."""
    stop = _sopsim.Stop()
    work = asyncio.ensure_future(asyncio.to_thread(_stoppable, scenario, stop, options))
    try:
        return await asyncio.shield(work)
    except asyncio.CancelledError:
        stop.stop()
        await asyncio.gather(work, return_exceptions=True)
        raise


def _stoppable(scenario: Any, stop: "_sopsim.Stop", options: Dict[str, Any]) -> Optional[Run]:
    """:func:`run` on a worker thread; a run stopped by ``stop`` returns ``None``
    rather than raise KeyboardInterrupt, which an event loop would take for Ctrl-C."""
    try:
        return run(scenario, _stop=stop, **options)
    except KeyboardInterrupt:
        return None


def load_run(folder: PathLike) -> Run:
    """The :class:`Run` the command line wrote into ``folder`` (``sopsim run --out``).
    Only regular files inside the folder are read, each within a limit: a link, a
    device or a pipe raises :class:`sopsim.FolderError`, and a folder without
    ``transcript.jsonl`` raises ``FileNotFoundError``."""
    if not isinstance(folder, (str, os.PathLike)):
        raise TypeError(f"folder: expected a str or os.PathLike, got {type(folder).__name__}")
    d = Path(folder)
    files = json.loads(_sopsim.load_run(os.fspath(d)))
    return Run(
        files["transcript"],
        files["summary"] or {},
        files["events"],
        files["environment"] or {},
        files["network"],
        d,
        files.get("probes"),
        files.get("judgement"),
    )
