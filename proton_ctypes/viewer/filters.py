"""Frame filters ``-i``, ``-e`` and ``-t`` with Proton's semantics (hatchet queries with ``squash=True``).

* include ``-i RE``: keep every node on a path through a frame whose name matches ``RE`` (``re.match``,
  i.e. anchored at the start of the name): the matching frames, all their ancestors and all their
  descendants;
* exclude ``-e RE``: drop the matching frames together with their subtrees;
* threshold ``-t F``: keep the nodes whose first displayed metric is ``>= F`` and all their ancestors.

After each filter the tree is restricted to the kept nodes and the ``<m> (inc)`` roll-ups of the exclusive
metrics are recomputed over the smaller tree; derived inclusive columns (``time/ns (inc)``, ``…/% (inc)``)
are *not* recomputed, so ROOT keeps the full total there.  A filter that keeps nothing raises
:class:`EmptyFilter`, as hatchet does.

One deliberate difference: the pattern is used as a regular expression as given.  Proton pastes it into a
query string that is evaluated as a Python string literal, so backslash escapes (``\\b``, ``\\\\``) and the
characters ``"`` ``{`` ``}`` change meaning or break the query there.
"""

import re
from numbers import Real

import numpy as np

from .rollup import update_inclusive_columns


class EmptyFilter(Exception):
    """The filter would leave no node (same name and message as hatchet's exception)."""

    def __init__(self):
        super().__init__("The provided filter would have produced an empty GraphFrame.")


def _matches(profile, pattern):
    regex = re.compile(pattern)
    return [regex.match(name) is not None for name in profile.names]


def _with_ancestors(profile, flags):
    keep = list(flags)
    for row in range(len(profile) - 1, 0, -1):  # reverse pre-order: children before parents
        if keep[row] and profile.parent[row] >= 0:
            keep[profile.parent[row]] = True
    return keep


def _with_descendants(profile, flags):
    keep = list(flags)
    for row in range(len(profile)):  # pre-order: parents before children
        up = profile.parent[row]
        if up >= 0 and keep[up]:
            keep[row] = True
    return keep


def include_mask(profile, pattern):
    """Rows kept by ``-i pattern``."""
    hits = _matches(profile, pattern)
    down = _with_descendants(profile, hits)
    up = _with_ancestors(profile, hits)
    return [a or b for a, b in zip(down, up)]


def exclude_mask(profile, pattern):
    """Rows kept by ``-e pattern``."""
    dropped = _with_descendants(profile, _matches(profile, pattern))
    return [not d for d in dropped]


def _at_least(values, threshold):
    if values.dtype.kind in "if":
        return (values >= threshold).tolist()
    out = []
    for v in values.tolist():
        if isinstance(v, str):
            out.append(False)
        elif isinstance(v, Real):
            out.append(bool(v >= threshold))
        else:
            raise ValueError(f"cannot compare a {type(v).__name__} value with the threshold {threshold}")
    return out


def threshold_mask(profile, column, threshold):
    """Rows kept by ``-t threshold`` on ``column``."""
    with np.errstate(invalid="ignore"):
        return _with_ancestors(profile, _at_least(profile.column(column), threshold))


def apply_mask(profile, keep):
    """Restrict ``profile`` to ``keep`` and recompute its exclusive roll-ups (hatchet's squash)."""
    if not any(keep):
        raise EmptyFilter()
    out = profile.subset(keep)
    update_inclusive_columns(out)
    return out


def filter_frames(profile, include=None, exclude=None, threshold=None, metric=None):
    """Apply the viewer's filters in Proton's order (include, exclude, threshold); return the result."""
    if include:
        profile = apply_mask(profile, include_mask(profile, include))
    if exclude:
        profile = apply_mask(profile, exclude_mask(profile, exclude))
    if threshold:
        profile = apply_mask(profile, threshold_mask(profile, metric, threshold))
    return profile
