"""Several profiles as one: ``proton-viewer -m time/ns run_*.hatchet [--agg sum|mean|min|max] [--max-rank]``.

Which files, which period series and which rank each input has: see :mod:`.inputs`.  One input that is a
single file is shown exactly as before (byte for byte); everything below applies to several inputs.

**Matching.**  Nodes are matched by call path: the frame names from ROOT down (siblings with the same name
are paired in file order).  The tree shown is the union of the input trees; it is then read, derived and
filtered like one profile (launch-metadata and empty frames removed, ``-i``/``-e``/``-t``, ``-d``,
``-f``, ``--print-sorted``, ``-f json``, ``--html``, ``--list`` all behave as for one file).

**Periods.**  The period files of one series (``name.part_0.hatchet``, ``name.part_1.hatchet``, ...) are
always summed into one profile first: per node, numbers are added; a missing value or node counts 0.

**``--agg`` across inputs** (default ``sum``):

* ``sum``: the file metrics of every node are added (numbers; for anything else, such as ``device_id``, the
  first input's value is kept), then the profile is rolled up and derived as usual, so ``avg_time`` is
  total time / total count, ``tflop/s`` total flops / total time and ``time/%`` a share of the total;
* ``mean``: the sum divided by the number of inputs (a node missing from an input counts 0 there), so ROOT
  shows the mean of the inputs' totals and the children still add up to their parent;
* ``min`` / ``max``: each input is read, derived and ``-i``/``-e``-filtered on its own, and every displayed
  column is the smallest / largest of the inputs' values at that node, over the inputs that have a value
  there (``nan`` when none has).  ``ROOT`` with ``max`` is the slowest input's total.  ``-t`` then keeps
  the nodes whose aggregated first metric reaches the threshold (and their ancestors); the shown values are
  not recomputed after ``-t``.

**``--max-rank``** (alias ``--agg-rank``): adds, per node, the rank of the input holding the largest value
of the first metric (the straggler), computed from each input's own derived, ``-i``/``-e``-filtered values;
ties go to the input given first.  Text: one more cell after the values, ``rank=<r>`` (``rank=-`` when no
input has a value), also on the ``--print-sorted`` lines; ``-f json``: ``"max_rank"`` per node;
``--html``: shown on hover (where the hover's file metrics are the summed ones, whatever ``--agg``).
Not available with ``-diff``.

**Device info.**  The ``device_info`` blocks are merged: the first input that lists a device (type and
index) provides it.  When another input lists the same device with different properties (another host,
another GPU model), the first is kept and a note names both files on stderr.

**``-diff``.**  Both sides are inputs as above (``-diff`` takes a file, a quoted glob or a period prefix,
and may be repeated); each side is aggregated with the same ``--agg`` and then compared as two profiles
(:mod:`.diff`, :mod:`.gate`).
"""

import itertools
import math

import numpy as np

from .filters import EmptyFilter, filter_frames
from .metrics import derive_metrics, metric_label
from .loader import (ProfileFormatError, build_profile, flatten, load_document, no_gc, read, read_raw,
                   split_document)
from .rollup import update_inclusive_columns

AGGREGATIONS = ("sum", "mean", "min", "max")
_NUMBER = (int, float)


def _name(frame):
    name = frame.get("name")
    return name if isinstance(name, str) else ("" if name is None else str(name))


def _is_number(v):
    return type(v) in _NUMBER


def _new_node(node):
    return {"frame": dict(node["frame"]), "metrics": dict(node.get("metrics") or {}), "children": []}


def _is_vector(v):
    return type(v) is list and all(type(x) in _NUMBER for x in v)


def _add_metrics(into, metrics):
    """Add ``metrics`` to ``into``: numbers are summed, vectors element by element (the shorter one
    padded with 0), a missing (``None``) value takes the other one, anything else keeps the first value."""
    for key, value in metrics.items():
        if key not in into or into[key] is None:
            into[key] = value
        elif type(value) in _NUMBER and type(into[key]) in _NUMBER:
            into[key] += value
        elif _is_vector(value) and _is_vector(into[key]):
            into[key] = [a + b for a, b in itertools.zip_longest(into[key], value, fillvalue=0)]


def _merge_devices(merged, origin, devices, label, note):
    """Add ``devices`` to ``merged``: a device already listed keeps its first entry (noted if they differ)."""
    for device_type, table in devices.items():
        into = merged.setdefault(device_type, {} if isinstance(table, dict) else table)
        if not isinstance(table, dict) or not isinstance(into, dict):
            continue  # not a table of devices: the first input's value stays
        for index, props in table.items():
            first = origin.setdefault((device_type, index), label)
            if index not in into:
                into[index] = props
            elif into[index] != props and first is not None:
                origin[(device_type, index)] = None  # one note per device
                note(f"device {device_type} {index} differs between {first} and {label}; using the one of {first}")


def merge_documents(documents, labels, note=lambda text: None):
    """Sum decoded ``[tree, device_info]`` documents node by node (see the module docstring).

    Returns a new document; the inputs are not modified.  ``note(text)`` receives the device-info notes.
    """
    root, lookup = None, {}
    devices, origin = {}, {}
    for document, label in zip(documents, labels):
        tree, device_info = split_document(document, label)
        nodes, parent, _ = flatten(tree, label)
        _merge_devices(devices, origin, device_info, label, note)
        if root is None:
            root = _new_node(nodes[0])
            lookup[id(root)] = {}
        else:
            _add_metrics(root["metrics"], nodes[0].get("metrics") or {})
        targets, seen = [root], {}
        for i in range(1, len(nodes)):
            up = targets[parent[i]]
            name = _name(nodes[i]["frame"])
            n = seen.get((id(up), name), 0)
            seen[(id(up), name)] = n + 1
            child = lookup[id(up)].get((name, n))
            if child is None:
                child = _new_node(nodes[i])
                up["children"].append(child)
                lookup[id(up)][(name, n)] = child
                lookup[id(child)] = {}
            else:
                _add_metrics(child["metrics"], nodes[i].get("metrics") or {})
            targets.append(child)
    return [root, devices]


def scale_document(document, divisor):
    """Divide every number of every node's metrics by ``divisor`` in place (``mean`` = sum / inputs)."""
    stack = [document[0]]
    while stack:
        node = stack.pop()
        metrics = node["metrics"]
        for key, value in metrics.items():
            if _is_number(value):
                metrics[key] = value / divisor
            elif _is_vector(value):
                metrics[key] = [x / divisor for x in value]
        stack.extend(node["children"])
    return document


def _series_documents(inputs, note):
    """One decoded document per series (period files summed)."""
    out = []
    for s in inputs.series:
        documents = [load_document(path) for path in s.paths]
        out.append(documents[0] if len(documents) == 1 else merge_documents(documents, s.paths, note))
    return out


def raw_profile(inputs, note=lambda text: None):
    """The merged profile without roll-up, as ``--list`` shows it."""
    if inputs.single:
        return read_raw(inputs.single)
    with no_gc():
        documents = _series_documents(inputs, note)
        merged = merge_documents(documents, [s.label for s in inputs.series], note)
        return build_profile(merged, inputs.label)


def _derive_each(profile, metrics):
    """Derive the metrics one by one; ``None`` for a metric this input cannot provide."""
    names = []
    for metric in metrics:
        try:
            names += derive_metrics(profile, [metric])
        except (RuntimeError, KeyError):
            names.append(None)
    return names


class PathIds:
    """Numbers call paths: the same path (frame names from the root, same-named siblings counted in display
    order, as :func:`.diff.path_keys` does) gets the same number in every profile numbered by one instance."""

    def __init__(self):
        self.ids = {}

    def of(self, profile):
        """The path number of every row of ``profile`` (an int64 array)."""
        ids, out, seen = self.ids, [0] * len(profile), {}
        for row, name in enumerate(profile.names):  # display order: parents first
            up = profile.parent[row]
            key = (out[up] if up >= 0 else -1, name)
            n = seen.get(key, 0)
            seen[key] = n + 1
            out[row] = ids.setdefault(key + (n,), len(ids))
        return np.array(out, dtype=np.int64)


def _input_values(document, label, metrics, include, exclude, path_ids):
    """One input on its own: ``(path number of every row, [float values per displayed column or None])``.

    ``None`` when the input holds no data or ``-i``/``-e`` leave nothing of it.
    """
    try:
        profile = build_profile(document, label)
    except ProfileFormatError as e:
        if e.no_data:
            return None
        raise
    update_inclusive_columns(profile)
    names = _derive_each(profile, metrics)
    try:
        profile = filter_frames(profile, include, exclude)
    except EmptyFilter:
        return None
    return path_ids.of(profile), [None if name is None else _floats(profile.column(name)) for name in names]


def _floats(values):
    if values.dtype.kind in "if":
        return values.astype(np.float64)
    out = []
    for v in values.tolist():
        try:
            out.append(float(v))
        except (TypeError, ValueError):
            out.append(math.nan)
    return np.array(out, dtype=np.float64)


def _matrices(profile, per, n_columns, path_ids):
    """Per displayed column: an (inputs x rows) array of the inputs' values at ``profile``'s rows (nan: none)."""
    ids = path_ids.of(profile)
    out = [np.full((len(per), len(profile)), np.nan) for _ in range(n_columns)]
    position = np.empty(len(path_ids.ids), dtype=np.int64)
    for i, entry in enumerate(per):
        if entry is None:
            continue
        position.fill(-1)
        position[entry[0]] = np.arange(len(entry[0]))
        there = position[ids]
        here = np.nonzero(there >= 0)[0]
        for k in range(n_columns):
            if entry[1][k] is not None:
                out[k][i, here] = entry[1][k][there[here]]
    return out


def _min_max(profile, columns, per, agg, path_ids):
    reduce = np.fmin if agg == "min" else np.fmax  # nan only where every input is nan
    for column, matrix in zip(columns, _matrices(profile, per, len(columns), path_ids)):
        profile.columns[column] = reduce.reduce(matrix, axis=0)
    profile.exc_metrics = []  # the shown values are aggregates: no roll-up may overwrite them


def max_ranks(profile, per, ranks, path_ids):
    """Per row of ``profile``: the rank of the input with the largest first-metric value (or ``None``).

    ``per`` holds what each input gives (see ``_input_values``, numbered by ``path_ids``); ties go to the
    first input.
    """
    matrix = _matrices(profile, per, 1, path_ids)[0]
    missing = np.isnan(matrix)
    best = np.where(missing, -np.inf, matrix).argmax(axis=0)
    stray = missing[best, np.arange(len(best))] & ~missing.all(axis=0)  # the max is -inf: take a real one
    best[stray] = (~missing[:, stray]).argmax(axis=0)
    none = missing.all(axis=0)
    return [None if none[row] else ranks[i] for row, i in enumerate(best.tolist())]


def note_vectors(profile, metrics, note):
    """Say (``note``) which of the asked ``metrics`` are vectors, shown as the sums of their elements."""
    asked = {m.split("/")[0].lower() for m in metrics}
    for key in sorted(profile.vector_metrics):
        if key.lower() in asked or metric_label(key) in asked:
            note(f"{key} is a vector metric: each node shows the sum of its elements")


def load(inputs, metrics, agg="sum", include=None, exclude=None, threshold=None, with_rank=False,
         note=lambda text: None):
    """Read, aggregate, derive and filter ``inputs``; return ``(profile, columns, ranks or None)``.

    ``ranks`` (with ``with_rank``) is the per-row rank of :func:`max_ranks`.  One single file without
    ``with_rank`` is read exactly as the one-profile viewer reads it.
    """
    if agg not in AGGREGATIONS:
        raise ValueError(f"unknown aggregation {agg!r} (use one of {', '.join(AGGREGATIONS)})")
    if inputs.single and not with_rank:
        profile = read(inputs.single)
        note_vectors(profile, metrics, note)
        columns = derive_metrics(profile, metrics)
        return filter_frames(profile, include, exclude, threshold, columns[0]), columns, None
    with no_gc():
        documents = _series_documents(inputs, note)
        labels = [s.label for s in inputs.series]
        merged = merge_documents(documents, labels, note)
        if agg == "mean":
            scale_document(merged, len(documents))
        profile = build_profile(merged, inputs.label)
        per, path_ids = None, PathIds()
        if agg in ("min", "max") or with_rank:
            per = [_input_values(d, label, metrics, include, exclude, path_ids)
                   for d, label in zip(documents, labels)]
    update_inclusive_columns(profile)
    note_vectors(profile, metrics, note)
    columns = derive_metrics(profile, metrics)
    profile = filter_frames(profile, include, exclude)
    if agg in ("min", "max"):
        _min_max(profile, columns, per, agg, path_ids)
    profile = filter_frames(profile, None, None, threshold, columns[0])
    return profile, columns, (max_ranks(profile, per, inputs.ranks, path_ids) if with_rank else None)
