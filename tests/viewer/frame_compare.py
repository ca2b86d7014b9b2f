"""Compare what Proton's real viewer functions and ours return on the same inputs (needs hatchet + pandas).

``run_both(call)`` calls ``call(module)`` once with ``triton.profiler.viewer`` and once with
``proton_ctypes.viewer`` and returns both outcomes (the value, or the exception raised);
``assert_same(real, ours)`` then requires the same exception type and message, or equal values:
GraphFrames by their dataframe (columns, dtypes, values, row order, index nodes), graph structure and
metric lists; DataFrames exactly; anything else with ``==``.  One difference is accepted everywhere: a
profile that the frame removal leaves empty (a deliberate difference, README; Proton fails with ``KeyError: 'metrics'``, we raise
``ProfileFormatError``, see test_read_profile_without_data_raises_profile_format_error).
"""

import contextlib
import io
import warnings

import pytest


def real_viewer():
    return pytest.importorskip("triton.profiler.viewer", reason="Proton's real viewer (triton) is not importable")


def our_viewer():
    import proton_ctypes.viewer as viewer
    return viewer


class Raised:
    """An exception a call raised (compared by type name and message)."""

    def __init__(self, error):
        self.error = error
        self.kind = type(error).__name__
        self.message = str(error)

    def __repr__(self):
        return f"{self.kind}: {self.message}"


def call_quietly(call, module):
    """``call(module)`` with warnings silenced and stdout captured; return (outcome, printed text)."""
    out = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(out):
        warnings.simplefilter("ignore")
        try:
            value = call(module)
        except Exception as error:  # noqa: BLE001 - the error is part of the compared behaviour
            value = Raised(error)
    return value, out.getvalue()


def run_both(call):
    """Return ``(real outcome, our outcome)`` of ``call(viewer_module)``."""
    return call_quietly(call, real_viewer())[0], call_quietly(call, our_viewer())[0]


def is_empty_profile_deviation(real, ours):
    """The accepted difference for a profile the frame removal empties (Proton: ``KeyError: 'metrics'``)."""
    return (isinstance(real, Raised) and isinstance(ours, Raised) and real.kind == "KeyError"
            and real.message == "'metrics'" and getattr(ours.error, "no_data", False))


def describe_node(node):
    return node._hatchet_nid, node._depth, tuple(sorted(node.frame.attrs.items()))


def graph_shape(gf):
    """Every node of the graph in traversal order with its children."""
    return [(describe_node(n), [describe_node(c) for c in n.children]) for n in gf.graph.traverse()]


def assert_same_dataframe(real, ours, where=""):
    import pandas as pd
    assert [describe_node(n) if hasattr(n, "frame") else n for n in real.index] == \
        [describe_node(n) if hasattr(n, "frame") else n for n in ours.index], f"{where}: row index differs"
    assert list(real.columns) == list(ours.columns), f"{where}: columns {list(real.columns)} != {list(ours.columns)}"
    pd.testing.assert_frame_equal(real.reset_index(drop=True), ours.reset_index(drop=True), check_exact=True,
                                  obj=f"{where} dataframe")


def assert_same_graphframe(real, ours, where=""):
    assert_same_dataframe(real.dataframe, ours.dataframe, where)
    assert graph_shape(real) == graph_shape(ours), f"{where}: graph differs"
    assert real.inc_metrics == ours.inc_metrics, f"{where}: inc_metrics {real.inc_metrics} != {ours.inc_metrics}"
    assert real.exc_metrics == ours.exc_metrics, f"{where}: exc_metrics {real.exc_metrics} != {ours.exc_metrics}"
    assert real.default_metric == ours.default_metric, f"{where}: default_metric differs"


def assert_same(real, ours, where=""):
    """Require equal outcomes (see the module docstring)."""
    import hatchet
    import pandas as pd
    if isinstance(real, Raised) or isinstance(ours, Raised):
        if is_empty_profile_deviation(real, ours):
            return
        assert repr(real) == repr(ours), f"{where}: real {real!r}, ours {ours!r}"
    elif isinstance(real, hatchet.GraphFrame):
        assert isinstance(ours, hatchet.GraphFrame), f"{where}: ours is a {type(ours).__name__}"
        assert_same_graphframe(real, ours, where)
    elif isinstance(real, pd.DataFrame):
        assert isinstance(ours, pd.DataFrame), f"{where}: ours is a {type(ours).__name__}"
        assert_same_dataframe(real, ours, where)
    elif isinstance(real, (tuple, list)):
        assert type(real) is type(ours) and len(real) == len(ours), f"{where}: {real!r} != {ours!r}"
        for i, (a, b) in enumerate(zip(real, ours)):
            assert_same(a, b, f"{where}[{i}]")
    else:
        assert real == ours, f"{where}: {real!r} != {ours!r}"
