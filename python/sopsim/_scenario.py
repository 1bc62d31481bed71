"""Scenarios: loaded from a file or made from a dict, validated by sopsim's own rules."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Union

from . import _sopsim

PathLike = Union[str, "os.PathLike[str]"]


class Scenario:
    """A validated scenario: agents, roles, populations and the SOP that routes their
    turns. Make one with :meth:`Scenario.load` or :meth:`Scenario.from_dict`."""

    def __init__(self, path: Path, document: Optional[Dict[str, Any]], info: Dict[str, Any]) -> None:
        self._path = path
        self._document = document
        self._info = info

    @classmethod
    def load(cls, path: PathLike) -> "Scenario":
        """Loads and validates a scenario file (native, or an aiwaves config). Raises
        :class:`sopsim.ScenarioError` listing every problem."""
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path: expected a str or os.PathLike, got {type(path).__name__}")
        p = Path(path)
        return cls(p, None, json.loads(_sopsim.load_scenario(str(p))))

    @classmethod
    def from_dict(cls, document: Mapping[str, Any], *, base_dir: Optional[PathLike] = None) -> "Scenario":
        """Validates a scenario given as a dict (the file format's JSON as Python data).
        Files it names (persona tables, knowledge bases) are looked up in ``base_dir``
        (default: the current folder)."""
        if not isinstance(document, Mapping):
            raise TypeError(f"document: expected a dict, got {type(document).__name__}")
        bad = _not_json_number(document, "document")
        if bad is not None:
            raise ValueError(f"{bad[0]}: {bad[1]!r} is not a number JSON can hold")
        try:
            text = json.dumps(document, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise TypeError(f"document: not JSON data: {e}") from None
        name = str(document.get("name") or "scenario")
        safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in name)
        if base_dir is not None and not isinstance(base_dir, (str, os.PathLike)):
            raise TypeError(f"base_dir: expected a str or os.PathLike, got {type(base_dir).__name__}")
        path = Path(base_dir if base_dir is not None else os.getcwd()) / f"{safe}.json"
        info = json.loads(_sopsim.load_scenario(str(path), text))
        return cls(path, json.loads(text), info)

    @property
    def name(self) -> str:
        """The scenario's name."""
        return str(self._info["name"])

    @property
    def mode(self) -> str:
        """The environment type the file sets: ``cooperative`` or ``competitive``."""
        return str(self._info["mode"])

    @property
    def path(self) -> Path:
        """The file, or for a dict the path that names it (its folder holds its files)."""
        return self._path

    @property
    def states(self) -> List[str]:
        """The SOP's states, in order."""
        return list(self._info["states"])

    @property
    def agents(self) -> int:
        """How many agents the scenario names (population members aside)."""
        return int(self._info["agents"])

    @property
    def members(self) -> int:
        """How many agents its populations make."""
        return int(self._info["members"])

    @property
    def from_file(self) -> bool:
        """Whether the scenario was loaded from its file (rather than made from a dict)."""
        return self._document is None

    def to_dict(self) -> Dict[str, Any]:
        """The scenario as the file format's JSON, as Python data."""
        if self._document is not None:
            return json.loads(json.dumps(self._document))
        return json.loads(self._path.read_text(encoding="utf-8"))

    def save(self, path: PathLike) -> "Scenario":
        """Writes the scenario to ``path`` and returns it loaded from there."""
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")
        return Scenario.load(path)

    def _run_source(self) -> Dict[str, Any]:
        return {"scenario": str(self._path), "document": self._document, "name": self.name, "file_mode": self.mode}

    def __repr__(self) -> str:
        members = f", {self.members} population members" if self.members else ""
        return f"Scenario({self.name!r}, {self.agents} agents{members}, states={self.states})"


def _not_json_number(value: Any, at: str) -> Optional[tuple]:
    """The first NaN or infinity in ``value`` and where it is, as ``(path, value)``."""
    stack = [(value, at)]
    while stack:
        v, path = stack.pop()
        if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
            return path, v
        if isinstance(v, Mapping):
            stack.extend((item, f"{path}.{key}") for key, item in reversed(list(v.items())))
        elif isinstance(v, (list, tuple)):
            stack.extend((item, f"{path}[{i}]") for i, item in reversed(list(enumerate(v))))
    return None


def as_scenario(value: Any, argument: str = "scenario") -> Scenario:
    """A Scenario from a Scenario, a str or an os.PathLike; TypeError naming the argument
    otherwise."""
    if isinstance(value, Scenario):
        return value
    if isinstance(value, (str, os.PathLike)):
        return Scenario.load(value)
    raise TypeError(f"{argument}: expected a path or a sopsim.Scenario, got {type(value).__name__}")
