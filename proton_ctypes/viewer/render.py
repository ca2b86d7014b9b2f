"""Text output of the viewer: the call tree, the ``--print-sorted`` list, frame-name formats, warnings.

The tree has hatchet's console layout (no header): one line per node, ``"<v1> <v2> … <name>"`` with every
value printed ``%.3f`` (``nan`` when missing), children in display order (sorted by frame name), branch
glyphs ``├─ `` / ``└─ `` and continuations ``│  `` / three spaces; nodes at depth ``>= depth`` are not
printed.  The sorted list prints every row but the first of the rows sorted by the first metric (largest
first, ``nan`` last, ties in pandas' quicksort order), as a 105-column name and the value in ``{:.4}``.
"""

import numpy as np

FRAME_FORMATS = ("full", "file_function_line", "function_line", "file_function")
NEGATIVE_BYTES_WARNING = "Warning: Negative byte values detected, this is usually the result of a datatype overflow"


def format_name(name, fmt, is_root=False):
    """Apply a ``-f`` frame format to one frame name.

    ``file_function_line``: after the last ``/``; ``function_line``: after the last ``:``;
    ``file_function``: ``<file>@<function>``.  ROOT stays ``ROOT`` (Proton prints ``ROOT@ROOT``).
    """
    if fmt == "file_function_line":
        return name.split("/")[-1]
    if fmt == "function_line":
        return name.split(":")[-1]
    if fmt == "file_function":
        if is_root and name == "ROOT":
            return name
        return f"{name.split('/')[-1].split(':')[0]}@{name.split('@')[-1].split(':')[0]}"
    return name


def format_names(profile, fmt):
    """Return the display names of every row for frame format ``fmt``."""
    if fmt in (None, "full"):
        return list(profile.names)
    return [format_name(name, fmt, profile.parent[row] < 0) for row, name in enumerate(profile.names)]


def sorted_children(profile):
    """Children of every row in display order (hatchet renders children by node number)."""
    return [sorted(kids) if len(kids) > 1 else kids for kids in profile.children]


def tree_lines(profile, cell, names, depth, suffixes=None):
    """Yield the tree lines; ``cell(row)`` gives the text before the name, ``suffixes[row]`` after it.

    ``cell`` is only called for the rows that are printed (hatchet formats nothing below ``depth``).
    """
    kids = sorted_children(profile)
    roots = [row for row in range(len(profile)) if profile.parent[row] < 0]
    stack = [(row, "", "") for row in reversed(roots)]
    while stack:
        row, indent, child_indent = stack.pop()
        if profile.depth[row] >= depth:
            continue
        tail = suffixes[row] if suffixes else ""
        yield f"{indent}{cell(row)} {names[row]}{tail}\n"
        children = kids[row] if profile.depth[row] + 1 < depth else ()
        for i in range(len(children) - 1, -1, -1):
            if i == len(children) - 1:
                stack.append((children[i], child_indent + "└─ ", child_indent + "   "))
            else:
                stack.append((children[i], child_indent + "├─ ", child_indent + "│  "))


def metric_cells(profile, columns):
    """Return ``cell(row)``: the values of ``columns`` at ``row`` as hatchet prints them (``%.3f``)."""
    primary = profile.column(columns[0])
    np.isfinite(primary)  # hatchet computes the colour range first: non-numeric columns fail here
    lists = [profile.column(c).tolist() for c in columns]
    if len(lists) == 1:
        values = lists[0]
        return lambda row: "{:.3f}".format(values[row])
    return lambda row: " ".join("{:.3f}".format(values[row]) for values in lists)


def render_tree(profile, columns, depth=100, names=None, extra=None):
    """Return the printed tree (without the final newline ``print`` adds).

    ``extra[row]``, when given, is one more cell printed after the values (``--max-rank``).
    """
    cell = metric_cells(profile, columns)
    if extra is not None:
        values_cell = cell
        cell = lambda row: f"{values_cell(row)} {extra[row]}"  # noqa: E731
    names = names if names is not None else profile.names
    return "".join(tree_lines(profile, cell, names, depth))


def descending_order(values):
    """Row order of pandas' ``sort_values(ascending=False)``: quicksort, ``nan`` last."""
    values = np.asarray(values)
    if values.dtype.kind == "f":
        mask = np.isnan(values)
    elif values.dtype.kind == "O":
        mask = np.array([v is None or (isinstance(v, float) and v != v) for v in values.tolist()], dtype=bool)
    else:
        mask = np.zeros(len(values), dtype=bool)
    index = np.arange(len(values))
    non_nans = values[~mask][::-1]
    non_nan_index = index[~mask][::-1]
    order = non_nan_index[non_nans.argsort(kind="quicksort")][::-1]
    return np.concatenate([order, np.nonzero(mask)[0]])


def sorted_lines(profile, column, names, extra=None):
    """Yield the ``--print-sorted`` section (header and one line per row but the first).

    ``extra[row]``, when given, ends each line after a space (``--max-rank``).
    """
    yield f"Sorted kernels by metric {column}\n"
    values = profile.column(column)
    order = descending_order(values).tolist()
    values = values.tolist()
    for row in order[1:]:
        name = names[row]
        shown = name[:100] + "..." if len(name) > 100 else name
        tail = f" {extra[row]}" if extra is not None else ""
        yield "{:105} {:.4}{}\n".format(shown, values[row], tail)


def negative_bytes(profile, columns):
    """Whether Proton's negative-bytes warning applies (``bytes (inc)`` shown with a value < 0)."""
    if "bytes (inc)" not in columns:
        return False
    values = profile.column("bytes (inc)").astype(np.float64)
    with np.errstate(invalid="ignore"):
        return bool(np.any(values < 0))


def print_profile(profile, columns, depth, fmt, print_sorted, write, extra=None):
    """Write the viewer's text output for one profile through ``write`` (tree, sorted list, warning).

    ``extra``: one more text cell per row after the values (``--max-rank``), ``None`` for none.
    """
    names = format_names(profile, fmt)
    write(render_tree(profile, columns, depth, names, extra) + "\n")
    if print_sorted:
        for line in sorted_lines(profile, columns[0], names, extra):
            write(line)
    if negative_bytes(profile, columns):
        write(NEGATIVE_BYTES_WARNING + "\n\n")
