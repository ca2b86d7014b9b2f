"""``--html REPORT``: one self-contained HTML page (no server, no network).

The page inlines the data as JSON in ``<script id="profile-data" type="application/json">`` and shows an
icicle (flame) graph sized by the first metric, a sortable table of the displayed metrics (click a header)
and, on hover, every metric of a frame.  With ``-diff`` frames are coloured by the relative change of the
first metric (red slower/larger, green smaller, dashed red border ``[new]``, grey struck-through ``[gone]``)
and the table has base/new/Δ/Δ% columns.  Frames deeper than ``-d`` are left out.  The file is written
whole or not at all, with a normal file's mode, by the package's one writer (:mod:`proton_ctypes._atomic`).
"""

import html
import json
import math

from .._atomic import write_atomic
from .html_assets import CSS, SCRIPT


def _num(v):
    try:
        v = float(v)
    except (TypeError, ValueError):
        return None
    if math.isnan(v):
        return None
    return v if math.isfinite(v) else ("inf" if v > 0 else "-inf")  # JSON has no infinities


def _visible_ids(tree, depth):
    rows = [row for row in range(len(tree)) if tree.depth[row] < depth]
    return rows, {row: i for i, row in enumerate(rows)}


def _script_json(payload):
    text = json.dumps(payload, ensure_ascii=False, allow_nan=False)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def page(payload, title):
    """Return the HTML text of a report for ``payload`` (the inlined JSON object)."""
    legend = ""
    if payload["mode"] == "diff":
        legend = ('<div class="legend"><span style="background:hsl(0,80%,70%)">larger</span>'
                  '<span style="background:hsl(130,55%,70%)">smaller</span>'
                  '<span style="border:1px dashed #a00">new</span>'
                  '<span style="background:hsl(0,0%,80%);text-decoration:line-through">gone</span></div>')
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>proton-viewer: {html.escape(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
            f"<h1>{html.escape(title)}</h1>\n<div id=\"summary\"></div>\n{legend}\n"
            "<h2>Flame graph</h2>\n<div id=\"flame\"></div>\n<div id=\"tooltip\" hidden></div>\n"
            "<h2>Frames</h2>\n<div id=\"note\"></div>\n<table id=\"table\" class=\"data\"></table>\n"
            f"<script id=\"profile-data\" type=\"application/json\">{_script_json(payload)}</script>\n"
            f"<script>{SCRIPT}</script>\n</body>\n</html>\n")


def _raw_value(v):
    if isinstance(v, float) and math.isnan(v):
        return None
    if isinstance(v, (int, float, str)):
        return _num(v) if isinstance(v, float) else v
    return str(v)


def write_report(path, profile, columns, depth, title, names=None, extra=None):
    """Write the report of one profile (the rows the tree shows, the displayed columns).

    ``names`` are the frame names to show (``-f`` applied), the full names by default.  Each node also
    carries the metrics the file gives it (``raw``), shown on hover, and the per-row values of ``extra``
    (``{"max rank": [...]}``), shown there too.
    """
    names = names if names is not None else profile.names
    rows, ids = _visible_ids(profile, depth)
    values = [profile.column(c).tolist() for c in columns]
    raw = [(k, profile.columns[k].tolist()) for k in profile.file_metrics]
    nodes = []
    for row in rows:
        file_values = {k: _raw_value(v[row]) for k, v in raw}
        file_values.update((k, _raw_value(v[row])) for k, v in (extra or {}).items())
        nodes.append({"id": ids[row], "parent": ids.get(profile.parent[row], -1), "name": names[row],
                      "depth": profile.depth[row], "values": [_num(v[row]) for v in values],
                      "raw": {k: v for k, v in file_values.items() if v is not None}})
    write_atomic(path, page({"mode": "profile", "columns": list(columns), "nodes": nodes}, title))


def write_diff_report(path, tree, n_columns, depth, new_label, base_label, names=None):
    """Write the report of a :class:`~.diff.DiffTree` (first ``n_columns`` metrics, ``names`` as shown)."""
    names = names if names is not None else tree.names
    rows, ids = _visible_ids(tree, depth)
    nodes = []
    for row in rows:
        nodes.append({"id": ids[row], "parent": ids.get(tree.parent[row], -1), "name": names[row],
                      "depth": tree.depth[row], "status": tree.status[row],
                      "base": [_num(tree.base[k][row]) for k in range(n_columns)],
                      "new": [_num(tree.new[k][row]) for k in range(n_columns)],
                      "delta": [_num(tree.delta[k][row]) for k in range(n_columns)],
                      "pct": [_num(tree.delta_pct[k][row]) for k in range(n_columns)]})
    payload = {"mode": "diff", "columns": list(tree.columns[:n_columns]), "nodes": nodes,
               "labels": {"new": new_label, "base": base_label}}
    write_atomic(path, page(payload, f"{new_label} vs {base_label}"))
