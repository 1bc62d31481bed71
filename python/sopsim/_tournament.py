"""Tournaments the command line played (``sopsim tournament --out``), as DataFrames."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, List, Optional

from . import _sopsim
from ._scenario import PathLike
from ._tables import DataFrame, to_pandas


def _interval(estimate: Optional[Dict[str, Any]], name: str) -> Dict[str, Any]:
    e = estimate or {}
    lo, hi = (e.get("ci95") or [None, None])[:2]
    return {name: e.get("value"), f"{name}_low": lo, f"{name}_high": hi}


class Tournament:
    """A tournament's results: ``report`` is its ``report.json``; :meth:`ratings`,
    :meth:`groups` and :meth:`matrix` are its tables."""

    def __init__(self, out: Path, report: Dict[str, Any]) -> None:
        #: The tournament's folder.
        self.out = out
        #: ``report.json``: every group's payoffs, the payoff matrix, the ratings and
        #: the ranking (its reference: ``docs/reference/measuring-files.md``).
        self.report = report

    @property
    def ranking(self) -> List[str]:
        """The players, best first."""
        return list(self.report.get("ranking") or [])

    def ratings_records(self) -> List[Dict[str, Any]]:
        """One dict per player, best first: ``rank`` (from 1), ``player``, ``games``,
        the mean payoff per game and per round and the Bradley–Terry strength, each
        with ``_low`` and ``_high`` (its 95% interval), and TrueSkill's ``mu``,
        ``sigma`` and ``conservative``."""
        ratings = self.report.get("ratings") or {}
        rows = []
        for rank, player in enumerate(self.ranking, start=1):
            r = ratings.get(player) or {}
            skill = r.get("trueskill") or {}
            rows.append({
                "rank": rank, "player": player, "games": r.get("games"),
                **_interval(r.get("mean_payoff"), "mean_payoff"),
                **_interval(r.get("mean_payoff_per_round"), "mean_payoff_per_round"),
                **_interval(r.get("bradley_terry"), "bradley_terry"),
                "mu": skill.get("mu"), "sigma": skill.get("sigma"),
                "conservative": skill.get("conservative"),
            })
        return rows

    def ratings(self) -> DataFrame:
        """One row per player, best first (see :meth:`ratings_records`)."""
        return to_pandas(self.ratings_records())

    def groups_records(self) -> List[Dict[str, Any]]:
        """One dict per group and seat: ``group`` (from 0), ``seat``, ``player``,
        ``seeds`` and the seat's mean payoff per game with its interval."""
        rows = []
        for g, group in enumerate(self.report.get("groups") or []):
            payoffs = group.get("payoffs") or []
            for seat, player in enumerate(group.get("players") or []):
                rows.append({
                    "group": g, "seat": seat, "player": player, "seeds": group.get("seeds"),
                    **_interval(payoffs[seat] if seat < len(payoffs) else None, "payoff"),
                })
        return rows

    def groups(self) -> DataFrame:
        """One row per group and seat (see :meth:`groups_records`)."""
        return to_pandas(self.groups_records())

    def matrix_records(self) -> List[Dict[str, Any]]:
        """One dict per ordered pair of a two-player game: ``player``, ``against`` and
        the player's mean ``payoff`` per round against it (``None`` where they never
        met). Empty for an n-player game."""
        players = self.report.get("players") or []
        rows = []
        for i, row in enumerate(self.report.get("matrix") or []):
            for j, payoff in enumerate(row or []):
                rows.append({"player": players[i], "against": players[j], "payoff": payoff})
        return rows

    def matrix(self) -> DataFrame:
        """The payoff matrix, one row per ordered pair (see :meth:`matrix_records`)."""
        return to_pandas(self.matrix_records())

    def __repr__(self) -> str:
        r = self.report
        return f"Tournament({r.get('game')!r}: {len(r.get('players') or [])} players, {r.get('games')} games)"


def load_tournament(folder: PathLike) -> Tournament:
    """The :class:`Tournament` the command line wrote into ``folder`` (``sopsim
    tournament --out``). Only ``report.json`` is read, as a regular file inside the
    folder within a limit: a link, a device or a pipe raises
    :class:`sopsim.FolderError`, and a folder without it raises ``FileNotFoundError``."""
    if not isinstance(folder, (str, os.PathLike)):
        raise TypeError(f"folder: expected a str or os.PathLike, got {type(folder).__name__}")
    d = Path(folder)
    return Tournament(d, json.loads(_sopsim.load_tournament(os.fspath(d))))
