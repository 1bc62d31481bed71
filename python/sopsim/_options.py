"""Checks of the arguments every call shares, with errors that name the argument."""

from __future__ import annotations

import os
from typing import Any, Dict, Optional

MODES = ("cooperative", "competitive")
LLMS = ("local", "openai", "scripted")
EMBEDDERS = ("minilm", "openai", "hash")


def check_mode(mode: Any, argument: str) -> None:
    if mode is not None and mode not in MODES:
        raise ValueError(f"{argument}: {mode!r} is not one of {', '.join(MODES)}")


#: The largest count or seed sopsim takes (an unsigned 64-bit number).
MAX_COUNT = 2**64 - 1


def check_count(value: Any, argument: str, *, minimum: int, maximum: int = MAX_COUNT) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{argument}: expected an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{argument}: must be at least {minimum}, got {value}")
    if value > maximum:
        raise OverflowError(f"{argument}: must be at most {maximum}, got {value}")


def check_flag(value: Any, argument: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{argument}: expected a bool, got {type(value).__name__}")
    return value


def check_folder_flags(out: Any, overwrite: bool, resume: bool) -> None:
    """``overwrite`` and ``resume`` act on ``out``, and exclude each other."""
    if overwrite and resume:
        raise ValueError("overwrite, resume: give one or the other, not both")
    for name, given in (("overwrite", overwrite), ("resume", resume)):
        if given and out is None:
            raise ValueError(f"{name}: needs out, the folder it acts on")


def optional_path(value: Any, argument: str) -> Optional[str]:
    if value is None:
        return None
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{argument}: expected a str or os.PathLike, got {type(value).__name__}")
    return os.fspath(value)


def model_options(llm: Any, model: Any, base_url: Any, api_key: Any, embedder: Any) -> Dict[str, Any]:
    """The model settings as the bindings read them."""
    if llm is not None and llm not in LLMS:
        raise ValueError(f"llm: {llm!r} is not one of {', '.join(LLMS)}")
    if embedder is not None and embedder not in EMBEDDERS:
        raise ValueError(f"embedder: {embedder!r} is not one of {', '.join(EMBEDDERS)}")
    for name, value in (("base_url", base_url), ("api_key", api_key)):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{name}: expected a str, got {type(value).__name__}")
    return {
        "llm": llm,
        "model": optional_path(model, "model"),
        "base_url": base_url,
        "api_key": api_key,
        "embedder": embedder,
    }
