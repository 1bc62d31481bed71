"""Records into pandas DataFrames; pandas is imported only when asked for."""

from __future__ import annotations

from typing import Any, Dict, List, TYPE_CHECKING

if TYPE_CHECKING:
    import pandas

    DataFrame = pandas.DataFrame
else:
    DataFrame = Any


def to_pandas(records: List[Dict[str, Any]]) -> "DataFrame":
    try:
        import pandas
    except ImportError:
        raise ImportError(
            "this needs pandas: pip install pandas (or pip install 'sopsim[pandas]'); "
            "to_records() gives the same rows without it"
        ) from None
    return pandas.DataFrame.from_records(records)
