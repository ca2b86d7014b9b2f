"""The wording of the API's argument errors: one line naming the argument (or the metric's
key), the type expected and what was given, e.g. ``metric 'flops': the value must be a number
or a list of numbers (stored as float), not str ('lots')``.

The exception types stay Proton's: ``TypeError`` where libproton's bindings reject a type,
``ValueError``/``OverflowError`` where Proton's ``float()``/``int()`` conversion of a roofline
metric fails, and :class:`MetricsNotADict` (an ``AttributeError``, as Proton raises, that is
also a ``TypeError``) for metrics that are not a dict.
"""
from __future__ import annotations

#: longest ``repr`` of a given value quoted in a message
MAX_REPR = 60
#: what a metric value may be
METRIC_VALUE = "an int, a float, a bool, a list or tuple of them, or a tensor"
#: what a roofline metric (``flops*``, ``bytes``) may be, by the type it is stored as
ROOFLINE_VALUE = "a number or a list of numbers (stored as {stored})"


def describe(value) -> str:
    """``"<type> (<repr>)"`` of a given value, the repr cut to :data:`MAX_REPR` characters."""
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a broken __repr__ must not hide the real error
        text = "?"
    if len(text) > MAX_REPR:
        text = text[: MAX_REPR - 3] + "..."
    return f"{type(value).__name__} ({text})"


def a_type(kind: type) -> str:
    """``"a str"``, ``"an int"``: a type name with its article."""
    name = kind.__name__
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


class MetricsNotADict(AttributeError, TypeError):
    """Metrics given as something other than a dict.  Proton raises ``AttributeError`` there
    (``'list' object has no attribute 'items'``); this is one, and a ``TypeError`` too."""


def metrics_not_a_dict(metrics) -> MetricsNotADict:
    """The error for metrics that are not a dict."""
    return MetricsNotADict(f"metrics must be a dict {{name: value}}, not {describe(metrics)}")


def bad_metric_name(key) -> TypeError:
    """The error for a metric key that is not a ``str``."""
    return TypeError(f"metric names must be str, not {describe(key)}")


def bad_metric_value(key: str, value) -> TypeError:
    """The error for a metric value of a type that cannot be stored; names the bad element
    of a list."""
    detail = ""
    if isinstance(value, (list, tuple)):
        for i, element in enumerate(value):
            if type(element) not in (int, float, bool):
                detail = f"; element {i} is {describe(element)}"
                break
    return TypeError(f"metric {key!r}: the value must be {METRIC_VALUE}, not {describe(value)}{detail}")


def bad_roofline_value(key: str, value, stored: type, error: Exception) -> Exception:
    """``error`` (its type kept) of converting roofline metric ``key`` to ``stored``, reworded."""
    expected = ROOFLINE_VALUE.format(stored=stored.__name__)
    return type(error)(f"metric {key!r}: the value must be {expected}, not {describe(value)}")


def name_not_str(what: str, value) -> TypeError:
    """The error for a scope or state name that is not a ``str``."""
    return TypeError(f"a {what} name must be a str, not {describe(value)}")
