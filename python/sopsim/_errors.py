"""The exceptions sopsim raises."""

from __future__ import annotations

from typing import List, Tuple


class ScenarioError(ValueError):
    """A scenario that cannot be used. ``problems`` lists each as ``(field, message)``,
    the same problems ``sopsim validate`` prints."""

    def __init__(self, message: str, problems: List[Tuple[str, str]] | None = None) -> None:
        super().__init__(message)
        self.problems: List[Tuple[str, str]] = [tuple(p) for p in (problems or [])]  # type: ignore[misc]


class RunError(RuntimeError):
    """A run or benchmark that failed while running; the message carries the chain of
    causes. Finished turns are kept in the run's folder when it has one."""


class FolderError(ValueError):
    """A run's or benchmark's folder whose files cannot be read back: a link, a device
    or a pipe where a file should be, a file over its limit, or JSON that is not what
    sopsim wrote. The message names the file, never what it holds."""
