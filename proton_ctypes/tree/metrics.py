"""Flexible (user) metrics: value normalisation, name suffixes and per-node accumulation.

Rules (Proton 3.9's; ``tests/conformance/scenarios/metric.py`` runs them under both):

* values: ``int``/``bool``/numpy ints -> int64 (ints outside int64 -> double), floats and
  every numpy floating type -> double, lists/tuples/1-D arrays -> vectors (any float
  element makes the vector double), CPU tensors -> ``.item()`` / ``.tolist()`` first.
  Anything else makes the whole dict fail with a ``TypeError`` (Proton's type; the message
  names the key, see :mod:`.messages`) before any add.
* roofline keys are normalised: ``flops``/``flops8|16|32|64`` -> double, ``bytes`` -> int.
* names: ``(exc)`` and ``(pty)`` are removed wherever they occur and the result is
  stripped; ``(inc)`` stays.  A name whose raw form *ends* with ``(pty)`` is a property
  (last value wins); everything else is summed.
* at one node the kind and type of a stored name are fixed by its first add; a later
  value of another type raises ``ValueError("[PROTON] Metric value type mismatch ...")``;
  summed vectors keep their length.  Keys are applied in sorted order and processing
  stops at the first mismatch (earlier keys stay applied).
"""
from __future__ import annotations

import math
import numbers

from . import messages

INT, DOUBLE, VINT, VDOUBLE = 0, 1, 2, 3
TYPE_NAMES = ("int64_t", "double", "std::vector<int64_t>", "std::vector<double>")

#: the int64 range: an int outside it is stored as a double, as libproton converts it
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1

ROOFLINE_FLOAT = frozenset({"flops", "flops8", "flops16", "flops32", "flops64"})
ROOFLINE_INT = "bytes"

#: metric kinds: summed, property (last value wins), exclusive (summed, never listed at ROOT)
PLAIN, PTY, EXC = 0, 1, 2
#: roofline class of a key: none, ``flops*`` (stored as double), ``bytes`` (stored as int)
ROOF_NONE, ROOF_DOUBLE, ROOF_INT = 0, 1, 2

_key_cache: dict = {}


def parse_key(raw: str):
    """Return ``(stored_name, kind)`` for a user metric key (cached); see the module doc."""
    r = _key_cache.get(raw)
    if r is None:
        stored = raw.replace("(exc)", "").replace("(pty)", "").strip()
        kind = PTY if raw.endswith("(pty)") else (EXC if raw.rstrip().endswith("(exc)") else PLAIN)
        r = (stored, kind)
        _key_cache[raw] = r
    return r


class _NotANumber(TypeError):
    """A value that is not a number (reworded by :func:`normalize`, which knows the key)."""


def _scalar(v):
    """Normalise one scalar to ``(type, value)``; raise TypeError if not numeric."""
    t = type(v)
    if t is int:
        if I64_MIN <= v <= I64_MAX:
            return INT, v
        return DOUBLE, float(v)
    if t is float:
        return DOUBLE, v
    if t is bool:
        return INT, int(v)
    if isinstance(v, numbers.Integral):
        return _scalar(int(v))
    if isinstance(v, numbers.Real) and not isinstance(v, numbers.Integral):
        return DOUBLE, float(v)
    if hasattr(v, "dtype") and getattr(v, "shape", None) == ():  # numpy 0-d array
        return _scalar(v.item())
    raise _NotANumber()


def normalize(key, value):
    """Normalise one metric to ``(stored_name, is_property, type, value)``.

    ``value`` must already be host data (the tensor split happens in
    :mod:`proton_ctypes.metric`).  Raises ``TypeError`` (Proton's type) naming the key for
    anything else.
    """
    if type(key) is not str:
        raise messages.bad_metric_name(key)
    try:
        return _normalize(key, value)
    except _NotANumber:
        raise messages.bad_metric_value(key, value) from None


def _normalize(key: str, value):
    if hasattr(value, "tolist") and not isinstance(value, (list, tuple)):
        if getattr(value, "ndim", 0) == 0:
            value = value.item() if hasattr(value, "item") else value
        else:
            value = value.tolist()
    if isinstance(value, (list, tuple)):
        vals = []
        is_float = False
        for e in value:
            t, x = _scalar(e)
            if t == DOUBLE:
                is_float = True
            vals.append(x)
        if key in ROOFLINE_FLOAT:
            is_float = True
        elif key == ROOFLINE_INT:
            vals = [int(x) for x in vals]
            is_float = False
        if is_float:
            vals = [float(x) for x in vals]
            vt = VDOUBLE
        else:
            vt = VINT
        stored, pty = parse_key(key)
        return stored, pty, vt, vals
    t, x = _scalar(value)
    if key in ROOFLINE_FLOAT:
        t, x = DOUBLE, float(x)
    elif key == ROOFLINE_INT:
        t, x = INT, int(x)
    stored, pty = parse_key(key)
    return stored, pty, t, x


def normalize_all(metrics: dict) -> list:
    """Normalise a whole metrics dict, sorted by raw key; all-or-nothing on type errors."""
    return [normalize(k, metrics[k]) for k in sorted(metrics, key=_sort_key)]


def type_mismatch(stored: str, current: int, new: int) -> ValueError:
    """Proton's error for a value whose type differs from the one stored under ``stored``."""
    return ValueError(f"[PROTON] Metric value type mismatch for valueId 0 ({stored}): "
                      f"current={TYPE_NAMES[current]}, new={TYPE_NAMES[new]}")


def size_mismatch(stored: str, current: int, new: int) -> ValueError:
    """Proton's error for a summed vector whose length changes."""
    return ValueError(f"[PROTON] Vector metric size mismatch for valueId 0 ({stored}): current={current}, new={new}")


def _sort_key(k):
    if type(k) is not str:
        raise messages.bad_metric_name(k)
    return k


def _add_items(node_metrics: dict, items: list) -> None:
    """Accumulate normalised ``items`` into one node's ``{name: [kind, type, value]}``.

    Applies items in order and raises at the first type or size mismatch (the items
    before it stay applied, as in Proton).
    """
    for stored, pty, vt, val in items:
        _accumulate(node_metrics, stored, pty, vt, val)


def _accumulate(node_metrics: dict, stored: str, pty: int, vt: int, val) -> None:
    """Create, overwrite (property) or sum one normalised value; Proton's errors on a type
    or vector-size mismatch."""
    cur = node_metrics.get(stored)
    if cur is None:
        node_metrics[stored] = [pty, vt, list(val) if vt >= VINT else val]
        return
    if cur[1] != vt:
        raise type_mismatch(stored, cur[1], vt)
    if cur[0] == PTY:
        cur[2] = list(val) if vt >= VINT else val
    elif vt >= VINT:
        old = cur[2]
        if len(old) != len(val):
            raise size_mismatch(stored, len(old), len(val))
        cur[2] = [a + b for a, b in zip(old, val)]
    else:
        cur[2] = cur[2] + val


def json_value(vt: int, value):
    """A stored value as it appears in JSON output (NaN/inf become None)."""
    if vt == DOUBLE:
        return None if not math.isfinite(value) else value
    if vt == VDOUBLE:
        return [None if not math.isfinite(x) else x for x in value]
    return value


#: raw key -> (stored name, kind, roofline class ``ROOF_*``)
_plain_info: dict = {}
#: the same for the keys of roofline 0 only (``(stored name, kind)``): a value of such a key
#: is stored as given (a float, or an int within int64)
scalar_keys: dict = {}


def _info(k):
    """The cached ``_plain_info`` entry of ``k``; None if ``k`` is not a ``str``."""
    if type(k) is not str:
        return None
    stored, pty = parse_key(k)
    roof = ROOF_DOUBLE if k in ROOFLINE_FLOAT else (ROOF_INT if k == ROOFLINE_INT else ROOF_NONE)
    info = _plain_info[k] = (stored, pty, roof)
    if roof == ROOF_NONE:
        scalar_keys[k] = (stored, pty)
    return info


def add(flexes, node: int, metrics: dict) -> None:
    """Add a dict of host metric values to ``node`` in every flex of ``flexes``: the one
    entry point for user metrics (see the module doc for the rules).

    A dict of plain ``int``/``float`` values takes :func:`add_plain`; anything else is
    normalised first, all or nothing (Proton's ``TypeError`` before any add).  Keys are
    applied in sorted order; a type mismatch raises at the first failing key and flex,
    the keys and flexes before it staying applied, as in Proton.
    """
    if add_plain(flexes, node, metrics):
        return
    items = normalize_all(metrics)
    for flex in flexes:
        nm = flex.get(node)
        if nm is None:
            nm = flex[node] = {}
        _add_items(nm, items)


def _plain_value(info, val):
    """``(type, value)`` of a plain value under a key of cached ``info``; None if not plain."""
    t = type(val)
    if t is float:
        if info[2] == ROOF_INT:
            return INT, int(val)
        return DOUBLE, val
    if t is int:
        if info[2] == ROOF_DOUBLE or not I64_MIN <= val <= I64_MAX:
            return DOUBLE, float(val)
        return INT, val
    return None


def add_plain(flexes, node: int, metrics: dict) -> bool:
    """The fast path of :func:`add`: a dict whose keys are ``str`` and whose values are all
    ``int``/``float``.  Returns False, having added nothing, for any other dict.

    Each value is normalised once for all the flexes; a sum updates the stored entry in
    place.
    """
    if len(metrics) == 1:
        for k in metrics:
            break
        keys = (k,)
    else:
        for k in metrics:
            if type(k) is not str:
                return False
        keys = sorted(metrics)
    norm = []
    for k in keys:
        info = _plain_info.get(k)
        if info is None:
            info = _info(k)
            if info is None:
                return False
        tv = _plain_value(info, metrics[k])
        if tv is None:
            return False
        norm.append((info[0], info[1], tv[0], tv[1]))
    for flex in flexes:
        nm = flex.get(node)
        for stored, kind, vt, val in norm:
            if nm is not None:
                cur = nm.get(stored)
                if cur is not None and cur[1] == vt and cur[0] != PTY:
                    cur[2] += val
                    continue
            add_value(flex, node, stored, kind, vt, val)
            nm = flex[node]
    return True


def add_value(flex: dict, node: int, stored: str, pty: int, vt: int, val) -> None:
    """Add one normalised value to ``flex[node][stored]``: create it, overwrite a property,
    sum, or raise Proton's type mismatch (the primitive under :func:`add_plain`)."""
    nm = flex.get(node)
    if nm is None:
        nm = flex[node] = {}
    _accumulate(nm, stored, pty, vt, val)
