"""Reading a Proton tree profile (``.hatchet`` JSON or ``.hatchet_msgpack``) into a :class:`Profile`.

The file is a two-element array ``[root_node, device_info]`` (``hatchet`` JSON or ``hatchet_msgpack``); each node is
``{"frame": {"name": ..., "type": ...}, "metrics": {...}, "children": [...]}``.  Before building the tree,
frames are removed as Proton's viewer does: launch-metadata frames (``__proton_launch_metadata`` and
``__proton_launch_metadata:*``) with their subtrees, nodes with neither metrics nor children, and nodes whose
children were all removed.  Metric columns are the union of all metric keys, in order of first appearance;
the metrics of ROOT are the profile's "inclusive" metrics and get ``<m> (inc)`` subtree sums.

A vector metric (``{"vec": [1, 2]}``, which Proton 3.9 stores) becomes a column of the sums of its elements
(``nan`` where an element is ``null``), so it can be shown, filtered and rolled up like any number; its
name is kept in ``Profile.vector_metrics`` so that the command can say so.
"""

import gc
from contextlib import contextmanager

from .._deepjson import loads_deep
from . import msgpack_deep
from .rollup import update_inclusive_columns
from .tree import NAME, Profile, frame_sort_key, to_column

METADATA_SCOPE = "__proton_launch_metadata"
METADATA_PREFIX = METADATA_SCOPE + ":"


class ProfileFormatError(ValueError):
    """The file is empty, truncated or not a Proton tree profile (``no_data``: only, no frame has metrics)."""

    no_data = False


def load_document(path):
    """Read ``path`` and decode it as JSON or MessagePack (detected from the content)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ProfileFormatError(f"{path}: {e.strerror or e}") from None
    if not data.strip():
        raise ProfileFormatError(f"{path}: empty file")
    head = data.lstrip()[:1]
    if head in (b"[", b"{"):
        try:
            return loads_deep(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise ProfileFormatError(f"{path}: truncated or invalid JSON ({e})") from None
        except RecursionError:
            raise ProfileFormatError(f"{path}: the tree is nested too deeply to be read") from None
    import msgpack  # lazy: only for .hatchet_msgpack files
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=False)
    except msgpack.exceptions.StackError:
        pass  # deeper than msgpack's C stack: decode it in Python below
    except Exception as e:  # msgpack raises several unrelated types for bad input
        raise ProfileFormatError(f"{path}: neither JSON nor a valid MessagePack profile ({e})") from None
    try:
        return msgpack_deep.unpackb(data)
    except (ValueError, TypeError) as e:
        raise ProfileFormatError(f"{path}: neither JSON nor a valid MessagePack profile ({e})") from None


def vector_sum(value):
    """The sum of a vector metric's elements (``nan`` if one is ``null``); other values unchanged."""
    if type(value) is not list or not all(type(x) in (int, float) or x is None for x in value):
        return value
    if any(x is None for x in value):
        return float("nan")
    return sum(value)


def no_data_error(path):
    """The error for a profile that the frame removal leaves empty (no frame has metrics)."""
    error = ProfileFormatError(f"{path}: the profile holds no data (no frame has metrics)")
    error.no_data = True
    return error


def _bad(path, why):
    return ProfileFormatError(f"{path}: not a Proton profile ({why})")


def flatten(root, path="<profile>"):
    """List the nodes of the tree in file pre-order; return ``(nodes, parent, n_children)``.

    Iterative, so very deep trees do not hit Python's recursion limit.
    """
    nodes, parent, n_children = [], [], []
    stack, up_stack = [root], [-1]
    while stack:
        node = stack.pop()
        up = up_stack.pop()
        if type(node) is not dict or type(node.get("frame")) is not dict:
            raise _bad(path, "a node has no 'frame'")
        here = len(nodes)
        nodes.append(node)
        parent.append(up)
        children = node.get("children")
        if children:
            if type(children) is not list:
                raise _bad(path, "'children' is not a list")
            stack.extend(reversed(children))
            up_stack.extend([here] * len(children))
        n_children.append(len(children) if children else 0)
        metrics = node.get("metrics")
        if metrics is not None and type(metrics) is not dict:
            raise _bad(path, "'metrics' is not an object")
    return nodes, parent, n_children


def _is_metadata(name):
    return name == METADATA_SCOPE or (isinstance(name, str) and name.startswith(METADATA_PREFIX))


def kept_nodes(nodes, parent, n_children):
    """Which nodes survive Proton's frame removal (see the module docstring), as a list of booleans."""
    n = len(nodes)
    alive, kept_children = [False] * n, [0] * n
    for i in range(n - 1, -1, -1):  # reverse pre-order: children before their parent
        node = nodes[i]
        if _is_metadata(node["frame"].get("name")) or (not node.get("metrics") and not n_children[i]):
            continue
        if kept_children[i] or not n_children[i]:
            alive[i] = True
            if parent[i] >= 0:
                kept_children[parent[i]] += 1
    for i in range(1, n):  # a node below a removed one goes with it
        if alive[i] and not alive[parent[i]]:
            alive[i] = False
    return alive


def _display_order(nodes, parent, alive):
    """Rows in display order (pre-order, children sorted by frame) with each row's depth."""
    kids = [[] for _ in nodes]
    for i in range(1, len(nodes)):
        if alive[i]:
            kids[parent[i]].append(i)
    order, depth = [], []
    stack = [(0, 0)]
    while stack:
        i, d = stack.pop()
        order.append(i)
        depth.append(d)
        children = kids[i]
        if len(children) > 1:
            children = sorted(children, key=lambda k: frame_sort_key(nodes[k]["frame"]))
        stack.extend((k, d + 1) for k in reversed(children))
    return order, depth, kids


def split_document(document, path="<profile>"):
    """Check the outer shape of a decoded document; return ``(root node, device info dict)``."""
    if not isinstance(document, list) or not document or len(document) > 2:
        raise ProfileFormatError(f"{path}: not a Proton profile (expected [tree, device_info])")
    device_info = document[1] if len(document) > 1 else {}
    if not isinstance(device_info, dict):
        raise _bad(path, "the device info is not an object")
    return document[0], device_info


def build_profile(document, path="<profile>"):
    """Build a :class:`Profile` from a decoded ``[root, device_info]`` document."""
    root, device_info = split_document(document, path)
    nodes, file_parent, n_children = flatten(root, path)
    alive = kept_nodes(nodes, file_parent, n_children)
    if not alive[0]:
        raise no_data_error(path)
    order, depth, kids = _display_order(nodes, file_parent, alive)
    row_of = {i: row for row, i in enumerate(order)}

    names, metrics = [], []
    for i in order:
        node = nodes[i]
        name = node["frame"].get("name")
        names.append(name if isinstance(name, str) else ("" if name is None else str(name)))
        metrics.append(node.get("metrics") or {})
    parent = [row_of[file_parent[i]] if file_parent[i] >= 0 else -1 for i in order]
    children = [[row_of[k] for k in kids[i]] for i in order]

    keys = {}
    for i, flag in enumerate(alive):  # columns in order of first appearance in the file
        if flag and nodes[i].get("metrics"):
            keys.update(nodes[i]["metrics"])
    if any(type(key) is not str for key in keys):
        raise _bad(path, "a metric name is not a string")
    vectors = {key for key in keys if key != NAME and any(type(m.get(key)) is list for m in metrics)}
    columns = {key: to_column([vector_sum(m.get(key)) for m in metrics] if key in vectors
                              else [m.get(key) for m in metrics]) for key in keys if key != NAME}

    profile = Profile(names, parent, children, depth, columns, device_info)
    profile.vector_metrics = vectors
    root_keys = [k for k in metrics[0] if k != NAME]
    profile.exc_metrics = [k for k in root_keys if "(inc)" not in k]
    profile.inc_metrics = [k for k in root_keys if "(inc)" in k]
    profile.root_metrics = profile.exc_metrics + profile.inc_metrics
    profile.other_metrics = [NAME] + [k for k in columns if k not in root_keys]
    profile.file_metrics = list(columns)
    return profile


@contextmanager
def no_gc():
    # Decoding builds hundreds of thousands of acyclic dicts: the cyclic GC only slows that down.
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def read_raw(path):
    """Read ``path`` into a Profile without the inclusive roll-up (what ``--list`` shows)."""
    with no_gc():
        return build_profile(load_document(path), path)


def read(path):
    """Read ``path`` into a Profile whose ROOT metrics have ``<m> (inc)`` subtree-sum columns."""
    profile = read_raw(path)
    update_inclusive_columns(profile)
    return profile
