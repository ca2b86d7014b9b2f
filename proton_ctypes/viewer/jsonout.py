"""``-f json``: the printed table as JSON, for scripts.

Single profile: a list with one object per printed node (tree order, ``-d`` respected)::

    [{"path": ["ROOT", "test0"], "name": "test0", "depth": 1, "metrics": {"time/ns (inc)": 7487.0}}, ...]

With ``-diff BASE`` every node also has ``"status"`` (``"both"``, ``"new"``: only in FILE, ``"gone"``: only
in BASE) and each metric is ``{"base": ..., "new": ..., "delta": ..., "delta_pct": ...}``.
Names are the full frame names; ``nan`` and infinities are written as ``null``.  With ``--print-sorted``
the list is sorted by the first metric (by ``|delta|`` for a diff), largest first, ``null`` last.
With ``--max-rank`` every node of a single (aggregated) profile also has ``"max_rank"`` (an integer or
``null``), see :mod:`.aggregate`.
"""

import json
import math

import numpy as np

from .render import descending_order


def _plain(value):
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, str):
        return value
    return str(value)


def _visible(tree, depth):
    return [row for row in range(len(tree)) if tree.depth[row] < depth]


def profile_json(profile, columns, depth=100, print_sorted=False, extra=None):
    """Return the JSON text for one profile (see the module docstring).

    ``extra`` maps more per-node keys to per-row values (``{"max_rank": [...]}``).
    """
    rows = _visible(profile, depth)
    if print_sorted:
        rank = {row: i for i, row in enumerate(descending_order(profile.column(columns[0])).tolist())}
        rows.sort(key=rank.__getitem__)
    paths = profile.paths()
    values = [profile.column(c).tolist() for c in columns]
    nodes = [{"path": list(paths[row]), "name": profile.names[row], "depth": profile.depth[row],
              "metrics": {c: _plain(v[row]) for c, v in zip(columns, values)}} for row in rows]
    for key, per_row in (extra or {}).items():
        for node, row in zip(nodes, rows):
            node[key] = _plain(per_row[row]) if per_row[row] is not None else None
    return json.dumps(nodes, indent=1, ensure_ascii=False)


def diff_json(tree, n_columns, depth=100, print_sorted=False):
    """Return the JSON text for a :class:`~.diff.DiffTree` (see the module docstring)."""
    rows = _visible(tree, depth)
    if print_sorted:
        d = tree.delta[0]
        rows.sort(key=lambda r: (math.isnan(d[r]), -abs(d[r]) if not math.isnan(d[r]) else 0))
    paths = tree.paths()
    nodes = []
    for row in rows:
        metrics = {tree.columns[k]: {"base": _plain(tree.base[k][row]), "new": _plain(tree.new[k][row]),
                                     "delta": _plain(tree.delta[k][row]),
                                     "delta_pct": _plain(tree.delta_pct[k][row])} for k in range(n_columns)}
        nodes.append({"path": list(paths[row]), "name": tree.names[row], "depth": tree.depth[row],
                      "status": tree.status[row], "metrics": metrics})
    return json.dumps(nodes, indent=1, ensure_ascii=False)
