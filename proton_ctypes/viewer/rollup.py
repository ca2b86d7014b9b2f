"""Inclusive roll-up: ``<m> (inc)`` = the sum of ``m`` over a node's subtree (hatchet's semantics).

For every exclusive metric ``m`` of the profile (ROOT's metric keys without ``(inc)``, plus exclusive
metrics derived later) the column ``<m> (inc)`` is filled bottom-up: a leaf keeps its own value, an inner
node gets ``sum([own value] + [inclusive value of each child, in file order])`` where ``nan`` counts as 0
unless every term is ``nan`` (then the result is ``nan``).  Float sums reproduce numpy's summation exactly
(sequential for fewer than 8 terms, numpy's own pairwise sum otherwise), so the printed digits and the
sort order of ties match Proton's.
"""

import numpy as np

from .tree import is_numeric


def inclusive_name(metric):
    """Name of the inclusive column hatchet derives from exclusive metric ``metric``."""
    if metric.endswith("(exc)"):
        return metric[: -len("(exc)")].strip()
    return f"{metric} (inc)"


def _post_order(profile):
    order = []
    for row in range(len(profile) - 1, -1, -1):  # display order is pre-order: reverse = children first
        if profile.children[row]:
            order.append(row)
    return order


def _sum_float(values, children, inner_rows):
    out = values.copy()
    data = out.tolist()
    for row in inner_rows:
        kids = children[row]
        if len(kids) < 7:  # fewer than 8 terms: numpy adds sequentially from 0.0
            total, seen = 0.0, False
            own = data[row]
            if own == own:
                total += own
                seen = True
            for k in kids:
                v = data[k]
                if v == v:
                    total += v
                    seen = True
            data[row] = total if seen else np.nan
        else:
            terms = np.array([data[row]] + [data[k] for k in kids], dtype=np.float64)
            mask = np.isnan(terms)
            data[row] = np.nan if mask.all() else float(np.where(mask, 0.0, terms).sum())
    return np.array(data, dtype=np.float64)


def _sum_int(values, children, inner_rows):
    data = values.tolist()
    for row in inner_rows:
        data[row] = data[row] + sum(data[k] for k in children[row])
    return np.array(data, dtype=np.int64)


def _is_missing(value):
    return value is None or (isinstance(value, float) and value != value)


def _sum_object(values, children, inner_rows):
    """pandas' sum of an object column: missing values become 0, then a left-to-right Python ``+``."""
    data = list(values)
    for row in inner_rows:
        terms = [data[row]] + [data[k] for k in children[row]]
        missing = [_is_missing(v) for v in terms]
        if all(missing):
            data[row] = np.nan
            continue
        filled = [0 if m else v for v, m in zip(terms, missing)]
        total = filled[0]
        for v in filled[1:]:
            total = total + v
        data[row] = total
    out = np.empty(len(data), dtype=object)
    out[:] = data
    return out


def subtree_sum(profile, metric):
    """Return the inclusive (subtree-sum) column of ``metric`` (see the module docstring)."""
    values = profile.columns[metric]
    inner_rows = _post_order(profile)
    if values.dtype.kind == "f":
        return _sum_float(values, profile.children, inner_rows)
    if values.dtype.kind == "i":
        return _sum_int(values, profile.children, inner_rows)
    if is_numeric(values):
        return _sum_float(values.astype(np.float64), profile.children, inner_rows)
    return _sum_object(values, profile.children, inner_rows)


def update_inclusive_columns(profile):
    """(Re)compute ``<m> (inc)`` for every exclusive metric of ``profile``, in place."""
    new_inc = []
    for metric in profile.exc_metrics:
        if metric not in profile.columns:
            continue
        target = inclusive_name(metric)
        profile.columns[target] = subtree_sum(profile, metric)
        new_inc.append(target)
    for name in new_inc:
        if name not in profile.inc_metrics:
            profile.inc_metrics.append(name)
