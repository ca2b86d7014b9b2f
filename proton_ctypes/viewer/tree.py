"""The in-memory call tree the viewer works on (the role a hatchet GraphFrame plays in Proton).

A :class:`Profile` holds one row per call-tree node, in *display order*: a pre-order walk in which the
children of every node are sorted by frame (hatchet numbers its nodes that way, and both the printed tree
and the dataframe row order follow those numbers).  Metric columns are numpy arrays indexed by row:

* ``int64`` when every node has an integer value (pandas would infer ``int64``),
* ``float64`` with ``nan`` where a node has no value (or the values mix ints and floats),
* ``object`` for anything else (strings such as ``device_id``, vectors).

``children`` keeps each node's children in *file* order: hatchet sums inclusive values in that order, and
float addition is not associative, so the order is part of the result.
"""

import numpy as np

NAME = "name"


class Profile:
    """One profile's call tree and metric columns (see the module docstring)."""

    def __init__(self, names, parent, children, depth, columns, device_info=None):
        self.names = names  # list[str], the frame names as shown (after -f formatting)
        self.parent = parent  # list[int], -1 for a root
        self.children = children  # list[list[int]], file order
        self.depth = depth  # list[int], 0 for a root
        self.columns = columns  # dict[str, np.ndarray]
        self.device_info = device_info if device_info is not None else {}
        self.root_metrics = []  # metric keys of ROOT: hatchet's "inclusive" list (exclusive keys first)
        self.other_metrics = []  # every other column, "name" first: the viewer's "exclusive" list
        self.exc_metrics = []  # hatchet's exc_metrics: rolled up into "<m> (inc)" after every filter
        self.inc_metrics = []  # hatchet's inc_metrics
        self.file_metrics = []  # the metric keys found in the file (no derived or roll-up columns)
        self.vector_metrics = set()  # file metrics holding vectors (their columns hold element sums)

    def __len__(self):
        return len(self.names)

    def column(self, name):
        """Return the values of column ``name`` (the frame names for ``"name"``); KeyError if absent."""
        if name == NAME:
            return np.array(self.names, dtype=object)
        return self.columns[name]

    def paths(self):
        """Return, for every row, the tuple of frame names from the root down to that node."""
        out = [None] * len(self.names)
        for row, name in enumerate(self.names):
            up = self.parent[row]
            out[row] = (name,) if up < 0 else out[up] + (name,)
        return out

    def subset(self, keep):
        """Return a new Profile with only the rows where the boolean sequence ``keep`` is true.

        Every kept node's parent must be kept too (all viewer filters guarantee it), so the tree keeps its
        shape and the display order stays valid.
        """
        rows = [row for row, flag in enumerate(keep) if flag]
        new_index = {old: new for new, old in enumerate(rows)}
        parent = [new_index.get(self.parent[row], -1) for row in rows]
        children = [[new_index[c] for c in self.children[row] if c in new_index] for row in rows]
        take = np.array(rows, dtype=np.intp)
        columns = {key: reinfer(values[take]) for key, values in self.columns.items()}
        sub = Profile([self.names[row] for row in rows], parent, children, [self.depth[row] for row in rows],
                      columns, self.device_info)
        sub.root_metrics = list(self.root_metrics)
        sub.other_metrics = list(self.other_metrics)
        sub.exc_metrics = list(self.exc_metrics)
        sub.inc_metrics = list(self.inc_metrics)
        sub.file_metrics = list(self.file_metrics)
        sub.vector_metrics = set(self.vector_metrics)
        return sub


def frame_sort_key(frame):
    """Hatchet's order for sibling frames: the sorted (attribute, value) pairs of the frame."""
    attrs = dict(frame)
    attrs.setdefault("type", "None")
    return tuple(sorted((str(k), v if isinstance(v, str) else str(v)) for k, v in attrs.items()))


def to_column(values):
    """Turn per-row Python values (``None`` = absent) into a column with pandas' dtype inference."""
    types = set(map(type, values))
    if types == {int}:
        try:
            return np.array(values, dtype=np.int64)
        except OverflowError:
            pass
    elif types <= {int, float, type(None)}:
        return np.array(values, dtype=np.float64)  # None becomes nan
    out = np.empty(len(values), dtype=object)
    out[:] = [np.nan if v is None else v for v in values]
    return out


def reinfer(values):
    """Re-infer the dtype of an object column after rows were dropped, as pandas' group-by does.

    An object column left with only numbers or missing values becomes numeric (all ``nan`` -> float64).
    """
    if values.dtype != object:
        return values
    types = set(map(type, values.tolist()))
    if types == {int}:
        try:
            return values.astype(np.int64)
        except OverflowError:
            return values
    if types and types <= {int, float}:
        return values.astype(np.float64)
    return values


def is_numeric(values):
    """Whether a column holds numbers (int64 or float64)."""
    return values.dtype.kind in "if"
