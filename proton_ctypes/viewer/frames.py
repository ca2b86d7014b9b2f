"""The Python API of Proton 3.9's viewer on hatchet GraphFrames: ``read``, ``parse``, ``filter_frames``, ...

Same signatures, defaults, results and errors as ``triton.profiler.viewer`` (metric derivation is in
:mod:`.frame_metrics`).  Needs llnl-hatchet and pandas (``pip install proton_ctypes[hatchet]``); the
``proton-viewer`` command does not use this module.

* ``read(filename)`` -> ``(gf, inclusive_metrics, exclusive_metrics, device_info)``: the profile with
  Proton's frame removal (launch-metadata frames, frames without metrics or children, frames whose
  children were all removed), ``<m> (inc)`` subtree sums of the metrics listed at ROOT.  A
  ``.hatchet_msgpack`` file is read too.
* ``parse(metrics, filename, include, exclude, threshold)`` -> ``(gf, derived_metric_names)``.
* ``filter_frames``: include / exclude by frame-name regex (``re.match``), threshold on one metric, each
  through a hatchet call-path query with ``squash=True``.

Deliberate differences from Proton (README, "Differences from Proton"; the same as the command's):

* ``format_frames(gf, "file_function")`` leaves ROOT as ``ROOT`` (Proton: ``ROOT@ROOT``);
* a profile that the frame removal leaves without any frame raises
  :class:`~.loader.ProfileFormatError` (Proton: ``KeyError: 'metrics'``);
* the include/exclude patterns are used as regular expressions as given (Proton pastes them into a
  query string that is evaluated as a Python literal, so ``\\``, ``"`` and braces misbehave), and a
  threshold on a ``-inf`` value is not met (hatchet compares it as ``+inf``);
* a ROOT metric already named ``x (inc)`` resolves to itself (see :mod:`.frame_metrics`).
* ``apply_diff_profile`` works under pandas 3 too (Proton's, through hatchet's ``sub``, raises there).
"""

import json
import re
from numbers import Real

import numpy as np

from .frame_deps import InvalidQueryFilter, NegationQuery, Query, ht, pd
from .frame_metrics import derive_metrics, get_min_time_bytes, get_min_time_flops, match_available_metrics
from .loader import flatten, kept_nodes, load_document, no_data_error
from .metrics import metric_label
from .render import NEGATIVE_BYTES_WARNING, format_name

__all__ = ["apply_diff_profile", "derive_metrics", "emit_warnings", "filter_frames", "format_frames",
           "get_min_time_bytes", "get_min_time_flops", "get_raw_metrics", "match_available_metrics", "parse",
           "print_tree", "read", "remove_frames", "show_metrics"]

FRAME_FORMATS = ("file_function_line", "function_line", "file_function")  # "full" (or None) changes nothing
_MSGPACK_ARRAY = set(range(0x90, 0xA0)) | {0xDC, 0xDD}  # first byte of a MessagePack array


def _prune(root):
    """A copy of the tree ``root`` after Proton's frame removal, or None when nothing is left."""
    nodes, parent, n_children = flatten(root)
    alive = kept_nodes(nodes, parent, n_children)
    copies = {}
    for i, node in enumerate(nodes):  # pre-order: a parent is copied before its children
        if alive[i]:
            copies[i] = dict(node, children=[])
            if parent[i] >= 0:
                copies[parent[i]]["children"].append(copies[i])
    return copies.get(0)


def remove_frames(database):
    """Return the elements of ``database`` with Proton's frame removal applied to each tree.

    Elements without a ``"frame"`` (the device-info block) are kept as they are; a tree left empty is
    dropped.  The input is not modified.
    """
    kept = []
    for element in database:
        if not isinstance(element, dict) or "frame" not in element:
            kept.append(element)
            continue
        tree = _prune(element)
        if tree is not None:
            kept.append(tree)
    return kept


def _raw_metrics(database, path):
    trees = remove_frames(database)
    if not any(isinstance(e, dict) and "frame" in e for e in trees):
        raise no_data_error(path)
    device_info = trees.pop(1) if len(trees) > 1 else {}
    gf = ht.GraphFrame.from_literal(trees)
    inclusive_metrics = gf.show_metric_columns()
    exclusive_metrics = [column for column in gf.dataframe.columns if column not in inclusive_metrics]
    return gf, inclusive_metrics, exclusive_metrics, device_info


def get_raw_metrics(database):
    """Build the GraphFrame of a decoded profile ``[tree, device_info]`` (without the ``(inc)`` roll-up).

    Returns ``(gf, inclusive_metrics, exclusive_metrics, device_info)``: the inclusive metrics are those
    listed at ROOT, the exclusive ones every other dataframe column (``name`` first).
    """
    return _raw_metrics(database, "<profile>")


def _load(filename):
    with open(filename, "rb") as f:
        data = f.read()
    if data[:1] and data[0] in _MSGPACK_ARRAY:
        return load_document(filename)  # .hatchet_msgpack
    return json.loads(data)  # Proton's errors for a bad JSON file


def read(filename):
    """Read a profile file; return ``(gf, inclusive_metrics, exclusive_metrics, device_info)``.

    ``gf`` has the ``<m> (inc)`` subtree-sum columns (``gf.update_inclusive_columns()``).
    """
    gf, inclusive_metrics, exclusive_metrics, device_info = _raw_metrics(_load(filename), filename)
    assert inclusive_metrics + exclusive_metrics, "No metrics found in the input file"
    gf.update_inclusive_columns()
    return gf, inclusive_metrics, exclusive_metrics, device_info


def parse(metrics, filename, include=None, exclude=None, threshold=None):
    """Read ``filename``, derive ``metrics`` and filter (``threshold`` applies to the first of them).

    Returns ``(gf, derived_metric_names)``.
    """
    gf, inclusive_metrics, exclusive_metrics, device_info = read(filename)
    names = derive_metrics(gf, metrics, inclusive_metrics, exclusive_metrics, device_info)
    return filter_frames(gf, include, exclude, threshold, names[0]), names


def _name_matches(pattern):
    regex = re.compile(pattern)

    def predicate(row):
        name = row["name"]
        if not isinstance(name, str):
            raise InvalidQueryFilter("Type mismatch in filter")
        return regex.match(name) is not None

    return predicate


def _at_least(metric, threshold):
    def predicate(row):
        if metric not in row.index:
            return False
        value = row[metric]
        if isinstance(value, str):
            return False
        if not isinstance(value, Real):
            raise InvalidQueryFilter(f"cannot compare a {type(value).__name__} with {threshold}")
        return bool(value >= threshold)  # False for nan

    return predicate


def filter_frames(gf, include=None, exclude=None, threshold=None, metric=None):
    """Filter ``gf`` by frame name and by ``metric`` (each step a hatchet filter with ``squash=True``).

    ``include``: keep the paths through a frame whose name matches the regex (ancestors and descendants);
    ``exclude``: drop the matching frames with their subtrees; ``threshold``: keep the frames whose
    ``metric`` is ``>= threshold`` and their ancestors.  hatchet raises ``EmptyFilter`` when nothing is left.
    """
    if include:
        gf = gf.filter(Query().match("*").rel(".", _name_matches(include)).rel("*"), squash=True)
    if exclude:
        gf = gf.filter(NegationQuery(Query().match(".", _name_matches(exclude)).rel("*")), squash=True)
    if threshold:
        gf = gf.filter(Query().match("*").rel(".", _at_least(metric, threshold)), squash=True)
    return gf


def format_frames(gf, format):
    """Shorten the frame names of ``gf`` in place (and return it) for a ``-f`` format.

    ``file_function_line``: after the last ``/``; ``function_line``: after the last ``:``;
    ``file_function``: ``<file>@<function>``; anything else leaves the names unchanged.
    """
    if format in FRAME_FORMATS:
        df = gf.dataframe
        nodes = df.index.get_level_values(0)
        df["name"] = [format_name(name, format, not node.parents) for node, name in zip(nodes, df["name"])]
    return gf


def apply_diff_profile(gf, derived_metrics, diff_file, metrics, include, exclude, threshold):
    """``gf - <diff_file parsed the same way>`` per node (hatchet ``sub``) on the derived metrics."""
    other, _ = parse(metrics, diff_file, include, exclude, threshold)
    inc_metrics = [name for name in derived_metrics if name.endswith("(inc)")]
    exc_metrics = [name for name in derived_metrics if not name.endswith("(inc)")]
    for frame in (gf, other):
        frame.inc_metrics, frame.exc_metrics = inc_metrics, exc_metrics
    return _subtract(gf, other)


def _subtract(gf, other):
    """hatchet's ``gf.sub(other)`` with the rows missing on either side inserted by pandas alone.

    hatchet inserts them through a Cython routine that writes into ``dataframe[...].values``, which
    pandas 3's copy-on-write hands out read-only ("buffer source array is read-only"); the rows,
    columns, dtypes and values here are hatchet's under every pandas.
    """
    left, right = gf.copy(), other.copy()
    left._insert_missing_rows = lambda missing_from: _insert_missing_rows(left, missing_from)
    try:
        left.unify(right)  # graph union and node remapping: hatchet's own
    finally:
        del left._insert_missing_rows
    return left._operator(right, left.dataframe.sub)


def _insert_missing_rows(gf, other):
    """Append to ``gf.dataframe`` the nodes of ``other`` it lacks, as hatchet's unify does.

    ``_missing_node`` (added when either side lacks a node): 1 on rows only ``gf`` has, 2 on the rows
    appended (their metrics NaN), 0 elsewhere.  Both dataframes are indexed by position here.
    """
    df, theirs = gf.dataframe, other.dataframe
    metrics = sorted(set().union(gf.exc_metrics, gf.inc_metrics, other.exc_metrics, other.inc_metrics))
    ours_keys = {hash(node) for node in df["node"]}
    theirs_keys = {hash(node) for node in theirs["node"]}
    only_ours = np.array([hash(node) not in theirs_keys for node in df["node"]], dtype=bool)
    appended = theirs[[hash(node) not in ours_keys for node in theirs["node"]]].copy()
    if only_ours.any() or len(appended):
        df = df.assign(_missing_node=only_ours.astype(np.short))
    if len(appended):
        appended["_missing_node"] = np.full(len(appended), 2, dtype=np.int64)
    for metric in metrics:
        appended[metric] = np.full(len(appended), np.nan)
    gf.dataframe = pd.concat([df, appended], axis=0, sort=True)
    return gf


def emit_warnings(gf, metrics):
    """Print the negative-bytes warning when ``bytes (inc)`` is shown and has a negative value."""
    if "bytes (inc)" in metrics and np.nanmin(gf.dataframe["bytes (inc)"].values) < 0:
        print(NEGATIVE_BYTES_WARNING + "\n")


def print_tree(gf, metrics, depth=100, format=None, print_sorted=False):
    """Print ``gf`` as the ``proton-viewer`` command does (hatchet's tree, then the sorted list)."""
    gf = format_frames(gf, format)
    print(gf.tree(metric_column=metrics, expand_name=True, depth=depth, render_header=False))
    if print_sorted:
        first = metrics[0]
        print("Sorted kernels by metric " + first)
        ranked = gf.dataframe.sort_values(by=[first], ascending=False)
        for i in range(1, len(ranked)):
            row = ranked.iloc[i]
            name = row["name"] if len(row["name"]) <= 100 else row["name"][:100] + "..."
            print(f"{name:105} {row[first]:.4}")
    emit_warnings(gf, metrics)


def show_metrics(file_name):
    """Print the metrics of a profile file (what ``proton-viewer -l`` prints)."""
    _, inclusive_metrics, exclusive_metrics, _ = _raw_metrics(_load(file_name), file_name)
    for title, names in (("inclusive", inclusive_metrics), ("exclusive", exclusive_metrics)):
        print(f"Available {title} metrics:")
        for raw in names:
            print(f"- {metric_label(raw)}")
