"""``-diff BASE``: compare two profiles node by node (where Proton prints ``nan``, we compare).

``proton-viewer -m METRICS FILE -diff BASE`` reads both profiles with the same metrics and filters (each
profile derives its own metrics, e.g. ``time/%`` is a share of its own total), then matches nodes by
**call path**: the frame names from ROOT down to the node (siblings with the same name are paired in
order).  The compared tree is the union of both trees, children sorted by name.

Values: ``new`` is FILE's value, ``base`` is BASE's value.  A value missing on one side -- the node does not
exist there, or the metric has no value at that node -- counts as 0 when the other side has one; if both
sides have none the change is ``nan``.  ``Δ = new - base`` and ``Δ% = Δ / |base| * 100`` (``±inf`` when
base is 0 and Δ is not; ``0`` when both are 0).

Text format (one header line, then the tree in Proton's layout, then an empty line)::

    diff: new=<FILE> base=<BASE>; per metric: base new Δ Δ% (<column>, ...)
    <base> <new> <Δ> <Δ%> [<base> <new> <Δ> <Δ%> ...] ROOT
    ├─ 0.000 832.000 +832.000 +inf% add_one [new]
    └─ 7487.000 0.000 -7487.000 -100.000% test0 [gone]

Values are ``%.3f``, Δ carries its sign, Δ% ends with ``%``; ``[new]`` marks a node only in FILE,
``[gone]`` a node only in BASE.  ``--print-sorted`` then lists every node but ROOT by ``|Δ|`` of the first
metric, largest first (``nan`` last): ``<name, 105 columns> <Δ in {:+.4}> <Δ%>[ marker]``.
"""

import math

from .render import format_names, tree_lines


class DiffTree:
    """The union tree of two profiles with base/new/Δ/Δ% per metric (display order rows)."""

    def __init__(self, names, parent, children, depth, status, columns):
        self.names = names
        self.parent = parent
        self.children = children
        self.depth = depth
        self.status = status  # "both", "new" (only in FILE) or "gone" (only in BASE)
        self.columns = columns
        self.base, self.new, self.delta, self.delta_pct = [], [], [], []

    def __len__(self):
        return len(self.names)

    def paths(self):
        """Call path (tuple of names from the root) of every row."""
        out = []
        for row, name in enumerate(self.names):
            up = self.parent[row]
            out.append((name,) if up < 0 else out[up] + (name,))
        return out


def path_keys(profile):
    """Path key of every row: parent's key + (name, occurrence among same-named siblings)."""
    keys, seen = [None] * len(profile), {}
    for row, name in enumerate(profile.names):  # display order: parents first
        up = profile.parent[row]
        prefix = keys[up] if up >= 0 else ()
        n = seen.get((prefix, name), 0)
        seen[(prefix, name)] = n + 1
        keys[row] = prefix + ((name, n),)
    return keys


def _as_float(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def pct_change(delta, base):
    """``Δ / |base| * 100`` with the conventions of the module docstring."""
    if math.isnan(delta) or math.isnan(base):
        return math.nan
    if base == 0:
        return 0.0 if delta == 0 else math.copysign(math.inf, delta)
    return delta / abs(base) * 100.0


def build_diff(new_profile, new_columns, base_profile, base_columns):
    """Match ``new_profile`` and ``base_profile`` by call path and compute the changes."""
    new_keys, base_keys = path_keys(new_profile), path_keys(base_profile)
    new_row = {k: r for r, k in enumerate(new_keys)}
    base_row = {k: r for r, k in enumerate(base_keys)}
    kids = {}
    for keys, profile in ((new_keys, new_profile), (base_keys, base_profile)):
        for row, key in enumerate(keys):
            up = profile.parent[row]
            kids.setdefault(keys[up] if up >= 0 else None, set()).add(key)
    order, parent_of, depth = [], {}, {}
    stack = [(k, -1, 0) for k in sorted(kids.get(None, ()), key=lambda k: k[-1], reverse=True)]
    while stack:
        key, up, d = stack.pop()
        order.append(key)
        here = len(order) - 1
        parent_of[here], depth[here] = up, d
        for child in sorted(kids.get(key, ()), key=lambda k: k[-1], reverse=True):
            stack.append((child, here, d + 1))
    names = [key[-1][0] for key in order]
    parent = [parent_of[i] for i in range(len(order))]
    children = [[] for _ in order]
    for row, up in enumerate(parent):
        if up >= 0:
            children[up].append(row)
    status = ["both" if k in new_row and k in base_row else ("new" if k in new_row else "gone") for k in order]
    tree = DiffTree(names, parent, children, [depth[i] for i in range(len(order))], status, list(new_columns))
    for new_col, base_col in zip(new_columns, base_columns):
        nv, bv = new_profile.column(new_col).tolist(), base_profile.column(base_col).tolist()
        new_vals = [_as_float(nv[new_row[k]]) if k in new_row else math.nan for k in order]
        base_vals = [_as_float(bv[base_row[k]]) if k in base_row else math.nan for k in order]
        for i, (n, b) in enumerate(zip(new_vals, base_vals)):
            if math.isnan(n) != math.isnan(b):  # one side missing: it counts as 0
                new_vals[i], base_vals[i] = (0.0 if math.isnan(n) else n), (0.0 if math.isnan(b) else b)
        deltas = [n - b for n, b in zip(new_vals, base_vals)]
        tree.base.append(base_vals)
        tree.new.append(new_vals)
        tree.delta.append(deltas)
        tree.delta_pct.append([pct_change(d, b) for d, b in zip(deltas, base_vals)])
    return tree


def fmt_value(v):
    """A value as in the tree (``%.3f``)."""
    return "{:.3f}".format(v)


def fmt_delta(v):
    """A change with its sign (``+832.000``; ``nan`` unsigned)."""
    return "nan" if math.isnan(v) else "{:+.3f}".format(v)


def fmt_pct(v):
    """A relative change (``+10.001%``, ``+inf%``, ``nan``)."""
    return "nan" if math.isnan(v) else "{:+.3f}%".format(v)


def diff_lines(tree, n_columns, depth, fmt, new_label, base_label):
    """Yield the text output of a diff (see the module docstring)."""
    cols = ", ".join(tree.columns[:n_columns])
    yield f"diff: new={new_label} base={base_label}; per metric: base new \u0394 \u0394% ({cols})\n"

    def cell(row):
        parts = []
        for k in range(n_columns):
            parts += [fmt_value(tree.base[k][row]), fmt_value(tree.new[k][row]),
                      fmt_delta(tree.delta[k][row]), fmt_pct(tree.delta_pct[k][row])]
        return " ".join(parts)

    suffixes = ["" if s == "both" else f" [{s}]" for s in tree.status]
    names = format_names(tree, fmt)
    yield from tree_lines(tree, cell, names, depth, suffixes)
    yield "\n"


def sorted_diff_lines(tree, fmt):
    """Yield the ``--print-sorted`` section of a diff: nodes but the root by |Δ| of the first metric."""
    yield f"Sorted by |\u0394| of {tree.columns[0]}\n"
    names = format_names(tree, fmt)
    deltas = tree.delta[0]
    rows = [r for r in range(len(tree)) if tree.parent[r] >= 0]
    rows.sort(key=lambda r: (math.isnan(deltas[r]), -abs(deltas[r]) if not math.isnan(deltas[r]) else 0))
    for row in rows:
        name = names[row][:100] + "..." if len(names[row]) > 100 else names[row]
        marker = "" if tree.status[row] == "both" else f" [{tree.status[row]}]"
        delta = "nan" if math.isnan(deltas[row]) else "{:+.4}".format(deltas[row])
        yield f"{name:105} {delta} {fmt_pct(tree.delta_pct[0][row])}{marker}\n"
