"""Reading a Proton tree profile (``.hatchet`` JSON or ``.hatchet_msgpack``) into a :class:`Profile`.

The file is a two-element array ``[root_node, device_info]`` (spec §7.1/§7.2); each node is
``{"frame": {"name": ..., "type": ...}, "metrics": {...}, "children": [...]}``.  Before building the tree,
frames are removed as Proton's viewer does: launch-metadata frames (``__proton_launch_metadata`` and
``__proton_launch_metadata:*``) with their subtrees, nodes with neither metrics nor children, and nodes whose
children were all removed.  Metric columns are the union of all metric keys, in order of first appearance;
the metrics of ROOT are the profile's "inclusive" metrics and get ``<m> (inc)`` subtree sums.
"""

import json

from .rollup import update_inclusive_columns
from .tree import NAME, Profile, frame_sort_key, to_column

METADATA_SCOPE = "__proton_launch_metadata"
METADATA_PREFIX = METADATA_SCOPE + ":"


class ProfileFormatError(ValueError):
    """The file is empty, truncated or not a Proton tree profile."""


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
            return json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise ProfileFormatError(f"{path}: truncated or invalid JSON ({e})") from None
    try:
        import msgpack
        return msgpack.unpackb(data, raw=False, strict_map_key=False)
    except Exception as e:  # msgpack raises several unrelated types for bad input
        raise ProfileFormatError(f"{path}: neither JSON nor a valid MessagePack profile ({e})") from None


def _check_node(node, path):
    if not isinstance(node, dict) or not isinstance(node.get("frame"), dict):
        raise ProfileFormatError(f"{path}: not a Proton profile (a node has no 'frame')")
    if not isinstance(node.get("metrics", {}), dict) or not isinstance(node.get("children", []), list):
        raise ProfileFormatError(f"{path}: not a Proton profile (bad 'metrics' or 'children')")


def _is_metadata(name):
    return name == METADATA_SCOPE or (isinstance(name, str) and name.startswith(METADATA_PREFIX))


def remove_frames(root, path="<profile>"):
    """Return the tree without metadata frames and empty nodes (see the module docstring), or None.

    The input is not modified; kept nodes are returned as ``(node_dict, [kept children])`` pairs.
    Iterative, so very deep trees do not hit Python's recursion limit.
    """
    result = {}
    stack = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if not expanded:
            _check_node(node, path)
            name = node["frame"].get("name")
            children = node.get("children", [])
            if _is_metadata(name) or (not node.get("metrics") and not children):
                result[id(node)] = None
                continue
            stack.append((node, True))
            stack.extend((child, False) for child in children)
            continue
        children = node.get("children", [])
        kept = [result[id(c)] for c in children if result[id(c)] is not None]
        result[id(node)] = (node, kept) if kept or not children else None
    return result[id(root)]


def build_profile(document, path="<profile>"):
    """Build a :class:`Profile` from a decoded ``[root, device_info]`` document."""
    if not isinstance(document, list) or not document or len(document) > 2:
        raise ProfileFormatError(f"{path}: not a Proton profile (expected [tree, device_info])")
    device_info = document[1] if len(document) > 1 else {}
    if not isinstance(device_info, dict):
        raise ProfileFormatError(f"{path}: not a Proton profile (device info is not an object)")
    pruned = remove_frames(document[0], path)
    if pruned is None:
        raise ProfileFormatError(f"{path}: the profile holds no data (no frame has metrics)")

    # File-order pre-order walk: node records and first-appearance column order.
    records, file_parent = [], []
    stack = [(pruned, -1)]
    while stack:
        (node, kept), up = stack.pop()
        records.append((node, kept))
        file_parent.append(up)
        here = len(records) - 1
        stack.extend((child, here) for child in reversed(kept))
    index_of = {id(rec[0]): i for i, rec in enumerate(records)}

    # Display order: pre-order with children sorted by frame (stable for equal frames).
    order, depth_of = [], {}
    stack = [(0, 0)]
    while stack:
        i, d = stack.pop()
        order.append(i)
        depth_of[i] = d
        kids = [index_of[id(c[0])] for c in records[i][1]]
        kids.sort(key=lambda k: frame_sort_key(records[k][0]["frame"]))
        stack.extend((k, d + 1) for k in reversed(kids))
    row_of = {i: row for row, i in enumerate(order)}

    names, parent, children, depth = [], [], [], []
    metrics = []
    for i in order:
        node, kept = records[i]
        name = node["frame"].get("name")
        names.append(name if isinstance(name, str) else ("" if name is None else str(name)))
        parent.append(row_of[file_parent[i]] if file_parent[i] >= 0 else -1)
        children.append([row_of[index_of[id(c[0])]] for c in kept])
        depth.append(depth_of[i])
        metrics.append(node.get("metrics") or {})

    keys = {}
    for i in range(len(records)):
        for key in records[i][0].get("metrics") or {}:
            keys.setdefault(key, None)
    columns = {}
    for key in keys:
        if key == NAME:
            continue
        columns[key] = to_column([m.get(key) for m in metrics])

    profile = Profile(names, parent, children, depth, columns, device_info)
    root_keys = [k for k in (records[0][0].get("metrics") or {}) if k != NAME]
    profile.exc_metrics = [k for k in root_keys if "(inc)" not in k]
    profile.inc_metrics = [k for k in root_keys if "(inc)" in k]
    profile.root_metrics = profile.exc_metrics + profile.inc_metrics
    profile.other_metrics = [NAME] + [k for k in columns if k not in root_keys]
    return profile


def read_raw(path):
    """Read ``path`` into a Profile without the inclusive roll-up (what ``--list`` shows)."""
    return build_profile(load_document(path), path)


def read(path):
    """Read ``path`` into a Profile whose ROOT metrics have ``<m> (inc)`` subtree-sum columns."""
    profile = read_raw(path)
    update_inclusive_columns(profile)
    return profile
