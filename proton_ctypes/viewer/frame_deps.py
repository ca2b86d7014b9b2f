"""hatchet and pandas for the viewer's Python API, or one ImportError that names the extra to install.

The ``proton-viewer`` command needs neither; only :mod:`.frames` and :mod:`.frame_metrics` (``read``,
``parse``, ``derive_metrics``, ... on hatchet GraphFrames) import this module.
"""

EXTRA = "proton_ctypes[hatchet]"
MISSING_MESSAGE = (f"the viewer's Python API (read, parse, derive_metrics, filter_frames, ...) works on hatchet "
                   f"GraphFrames and needs llnl-hatchet and pandas: `pip install {EXTRA}`")

try:
    import pandas as pd
    import hatchet as ht
    from hatchet.query import InvalidQueryFilter, NegationQuery, Query
except ImportError as error:
    raise ImportError(f"{MISSING_MESSAGE} ({error})", name=getattr(error, "name", None)) from error

__all__ = ["EXTRA", "InvalidQueryFilter", "MISSING_MESSAGE", "NegationQuery", "Query", "ht", "pd"]
