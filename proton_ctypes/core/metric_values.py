"""Metric values given to scopes and launch hooks: the split of tensors from host values.

``transform_tensor_metrics`` turns CPU tensors into Python scalars or lists (as Proton
does) and wraps device tensors as :class:`TensorMetric`, whose values are captured on
the device without a host synchronisation (see :mod:`.tensor_metrics`).  Roofline keys
get fixed dtypes: ``flops*`` are doubles and ``bytes`` is an int.
"""
from __future__ import annotations

from typing import Any

from ..tree import messages
from ..tree.metrics import DOUBLE, INT, VDOUBLE, VINT

FLOPS_WIDTHS = (8, 16, 32, 64)

#: metric type indices, as libproton numbers them (the tree's value types)
METRIC_TYPE_INT64, METRIC_TYPE_DOUBLE, METRIC_TYPE_VECTOR_INT64, METRIC_TYPE_VECTOR_DOUBLE = INT, DOUBLE, VINT, VDOUBLE

_FLOAT_KEYS = frozenset(["flops"] + [f"flops{w}" for w in FLOPS_WIDTHS])
_SCALAR_TYPES = (int, float, bool)


class TensorMetric:
    """A device tensor given as a metric: pointer, type index and element count.

    Keeps a reference to the (cast) tensor so its memory stays alive until captured.
    """

    __slots__ = ("value", "ptr", "metric_type_index", "numel")

    def __init__(self, value, metric_type_index: int):
        self.value = value
        self.ptr = value.data_ptr()
        self.metric_type_index = metric_type_index
        self.numel = value.numel()


#: roofline key -> the Python type its host values are converted to (3.9 ``ROOFLINE_DTYPES``)
_ROOFLINE_TYPES = {**{k: float for k in _FLOAT_KEYS}, "bytes": int}


def _roofline_value(value: Any, conv: type) -> Any:
    """A roofline key's host value in its fixed type: a scalar, or a list for a list, a
    tuple or a CPU tensor of several elements.  Anything ``conv`` cannot take raises what
    ``float()``/``int()`` raise (Proton's errors, before any metric is added)."""
    if hasattr(value, "data_ptr"):
        value = value.tolist() if value.numel() > 1 else value.item()
    if isinstance(value, (list, tuple)):
        return [conv(v) for v in value]
    return conv(value)


def _roofline(key: str, value: Any, conv: type) -> Any:
    """:func:`_roofline_value`, its error (type kept, as Proton's ``float()``/``int()``
    raise it) reworded to name the key and what is expected."""
    try:
        return _roofline_value(value, conv)
    except (TypeError, ValueError, OverflowError) as e:
        raise messages.bad_roofline_value(key, value, conv, e) from None


def _host_value(key: str, value: Any) -> Any:
    """A CPU tensor's value: converted for roofline keys, else a Python scalar or list.

    Proton 3.9 passes a CPU tensor under any other key to libproton unchanged, where an
    int tensor is taken, a float tensor truncated to int and a tensor of several elements
    rejected (``TypeError``); its ``.item()``/``.tolist()`` is kept here instead.
    """
    conv = _ROOFLINE_TYPES.get(key)
    if conv is not None:
        return _roofline(key, value, conv)
    return value.tolist() if value.numel() > 1 else value.item()


def _device_value(key: str, value) -> TensorMetric:
    """A device tensor as a :class:`TensorMetric`: doubles for ``flops*`` and floating
    tensors, int64 for ``bytes`` and integer tensors (Proton's implicit casts).

    The tensor keeps its dtype: the metric kernel converts while it copies, so no cast
    kernel is launched (the values are those of Proton's ``.double()``/``.long()``).
    """
    if key in _FLOAT_KEYS:
        floating = True
    elif key == "bytes":
        floating = False
    else:
        floating = value.is_floating_point()
    vector = value.numel() > 1
    if floating:
        idx = METRIC_TYPE_VECTOR_DOUBLE if vector else METRIC_TYPE_DOUBLE
    else:
        idx = METRIC_TYPE_VECTOR_INT64 if vector else METRIC_TYPE_INT64
    return TensorMetric(value, idx)


def transform_tensor_metrics(metrics: dict[str, Any]) -> tuple[dict[str, Any], dict[str, TensorMetric]]:
    """Split ``metrics`` into host values and device-tensor metrics.

    Returns ``(scalar_metrics, tensor_metrics)``: CPU tensors become scalars or lists,
    roofline keys (``flops*``, ``bytes``) get their fixed type whatever the value (an
    int, a bool, a numpy scalar, a list or tuple, a CPU tensor), device tensors become :class:`TensorMetric`.

    Raises :class:`~proton_ctypes.tree.messages.MetricsNotADict` (an ``AttributeError``, as
    Proton's, and a ``TypeError``) when ``metrics`` is not a dict, and for a roofline value that
    cannot be converted the ``ValueError``/``TypeError`` Proton raises, naming the key.
    """
    tensor_metrics = {}
    scalar_metrics = {}
    try:
        items = metrics.items()
    except AttributeError:
        raise messages.metrics_not_a_dict(metrics) from None
    for key, value in items:
        if type(value) in _SCALAR_TYPES:
            conv = _ROOFLINE_TYPES.get(key)
            scalar_metrics[key] = value if conv is None else _roofline(key, value, conv)
        elif hasattr(value, "data_ptr"):
            on_cpu = getattr(value, "is_cpu", None)  # torch's flag: cheaper than device.type
            if on_cpu is None:
                on_cpu = value.device.type == "cpu"
            if on_cpu:
                scalar_metrics[key] = _host_value(key, value)
            else:
                tensor_metrics[key] = _device_value(key, value)
        else:
            conv = _ROOFLINE_TYPES.get(key)
            scalar_metrics[key] = value if conv is None else _roofline(key, value, conv)
    return scalar_metrics, tensor_metrics
