"""Flexible (user) metrics: value normalisation, name suffixes and per-node accumulation.

Rules (proton-spec §3, §10.3):

* values: ``int``/``bool``/numpy ints -> int64 (ints outside int64 -> double), floats and
  every numpy floating type -> double, lists/tuples/1-D arrays -> vectors (any float
  element makes the vector double), CPU tensors -> ``.item()`` / ``.tolist()`` first.
  Anything else makes the whole dict fail with Proton's ``TypeError`` before any add.
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

INT, DOUBLE, VINT, VDOUBLE = 0, 1, 2, 3
TYPE_NAMES = ("int64_t", "double", "std::vector<int64_t>", "std::vector<double>")

_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1

ROOFLINE_FLOAT = frozenset({"flops", "flops8", "flops16", "flops32", "flops64"})
ROOFLINE_INT = "bytes"

ADD_METRICS_TYPE_ERROR = (
    "add_metrics(): incompatible function arguments. The following argument types are supported:\n"
    "    1. add_metrics(scopeId: int, metrics: collections.abc.Mapping[str, int | float | "
    "collections.abc.Sequence[int] | collections.abc.Sequence[float]], tensorMetrics: "
    "collections.abc.Mapping[str, triton._C.libproton.proton.TensorMetric] = {}) -> None\n\nInvoked with types: int, dict, dict")

#: metric kinds: summed, property (last value wins), exclusive (summed, never listed at ROOT)
PLAIN, PTY, EXC = 0, 1, 2

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


def _bad():
    return TypeError(ADD_METRICS_TYPE_ERROR)


def _scalar(v):
    """Normalise one scalar to ``(type, value)``; raise TypeError if not numeric."""
    t = type(v)
    if t is int:
        if _I64_MIN <= v <= _I64_MAX:
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
    raise _bad()


def normalize(key, value):
    """Normalise one metric to ``(stored_name, is_property, type, value)``.

    ``value`` must already be host data (the tensor split happens in
    :mod:`proton_ctypes.metric`).  Raises Proton's ``TypeError`` for anything else.
    """
    if type(key) is not str:
        raise _bad()
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


def _type_mismatch(stored: str, current: int, new: int) -> ValueError:
    """Proton's error for a value whose type differs from the one stored under ``stored``."""
    return ValueError(f"[PROTON] Metric value type mismatch for valueId 0 ({stored}): "
                      f"current={TYPE_NAMES[current]}, new={TYPE_NAMES[new]}")


def _sort_key(k):
    if type(k) is not str:
        raise _bad()
    return k


def add(node_metrics: dict, items: list) -> None:
    """Accumulate normalised ``items`` into one node's ``{name: [kind, type, value]}``.

    Applies items in order and raises at the first type or size mismatch (the items
    before it stay applied, as in Proton).
    """
    for stored, pty, vt, val in items:
        cur = node_metrics.get(stored)
        if cur is None:
            node_metrics[stored] = [pty, vt, list(val) if vt >= VINT else val]
            continue
        if cur[1] != vt:
            raise _type_mismatch(stored, cur[1], vt)
        if cur[0] == PTY:
            cur[2] = list(val) if vt >= VINT else val
        elif vt >= VINT:
            old = cur[2]
            if len(old) != len(val):
                raise ValueError(f"[PROTON] Vector metric size mismatch for valueId 0 ({stored}): "
                                 f"current={len(old)}, new={len(val)}")
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


def trace_string(vt: int, value) -> str:
    """A stored value as the chrome-trace writer prints it (``%f`` doubles, ``[1,2]``)."""
    if vt == INT:
        return str(value)
    if vt == DOUBLE:
        return "%f" % value
    if vt == VINT:
        return "[" + ",".join(str(x) for x in value) + "]"
    return "[" + ",".join("%f" % x for x in value) + "]"


def add_plain(flex: dict, node: int, metrics: dict) -> None:
    """Fast path of :func:`add` for a dict whose values are all ``int``/``float``."""
    keys = sorted(metrics) if len(metrics) > 1 else metrics
    for k in keys:
        add_one(flex, node, k, metrics[k])


def add_one(flex: dict, node: int, k: str, val) -> None:
    """Fast path of :func:`add` for one ``int``/``float`` value under a ``str`` key."""
    r = _key_cache.get(k)
    if r is None:
        r = parse_key(k)
    if type(val) is int:
        if k in ROOFLINE_FLOAT:
            vt, val = DOUBLE, float(val)
        elif _I64_MIN <= val <= _I64_MAX:
            vt = INT
        else:
            vt, val = DOUBLE, float(val)
    elif k == ROOFLINE_INT:
        vt, val = INT, int(val)
    else:
        vt = DOUBLE
    add_new(flex, node, r[0], r[1], vt, val)


#: raw key -> (stored name, kind, roofline: 0 none, 1 ``flops*`` (double), 2 ``bytes`` (int))
_plain_info: dict = {}
#: the same for the keys of roofline 0 only (``(stored name, kind)``): a value of such a key
#: is stored as given (a float, or an int within int64)
scalar_keys: dict = {}


def _info(k):
    """The cached ``_plain_info`` entry of ``k``; None if ``k`` is not a ``str``."""
    if type(k) is not str:
        return None
    stored, pty = parse_key(k)
    roof = 1 if k in ROOFLINE_FLOAT else (2 if k == ROOFLINE_INT else 0)
    info = _plain_info[k] = (stored, pty, roof)
    if not roof:
        scalar_keys[k] = (stored, pty)
    return info


def add_scalar(flexes, node: int, metrics: dict) -> bool:
    """Add a one-entry dict of a plain ``int``/``float`` to ``node`` in every flex of ``flexes``.

    Returns False, having added nothing, if the entry is not plain (or the dict does not
    hold exactly one entry).  The value is normalised once for all the flexes; on a type
    mismatch the flexes before the failing one stay updated, as with :func:`add_one`.
    """
    if len(metrics) != 1:
        return False
    for k in metrics:
        break
    val = metrics[k]
    info = _plain_info.get(k)
    if info is None:
        info = _info(k)
        if info is None:
            return False
    t = type(val)
    if t is float:
        vt = 1
        if info[2] == 2:
            vt, val = 0, int(val)
    elif t is int:
        vt = 0
        if info[2] == 1 or not -9223372036854775808 <= val <= 9223372036854775807:
            vt, val = 1, float(val)
    else:
        return False
    stored = info[0]
    for flex in flexes:
        nm = flex.get(node)
        if nm is not None:
            cur = nm.get(stored)
            if cur is not None and cur[1] == vt and cur[0] != PTY:
                cur[2] += val
                continue
        add_new(flex, node, stored, info[1], vt, val)
    return True


def add_new(flex: dict, node: int, stored: str, pty: int, vt: int, val) -> None:
    """Add one normalised value to ``flex[node][stored]``: create it, overwrite a property,
    sum, or raise Proton's type mismatch (the slow path of :func:`add_scalar` and
    :func:`add_one`)."""
    nm = flex.get(node)
    if nm is None:
        nm = flex[node] = {}
    cur = nm.get(stored)
    if cur is None:
        nm[stored] = [pty, vt, val]
    elif cur[1] != vt:
        raise _type_mismatch(stored, cur[1], vt)
    elif cur[0] == PTY:
        cur[2] = val
    else:
        cur[2] += val


def plan_plain(flexes, node: int, data: dict, skip) -> tuple:
    """A reusable plan for adding launch metadata shaped like ``data`` to ``node``.

    Call it right after ``data``'s plain metrics were added to ``node`` in every flex of
    ``flexes`` (so every stored entry exists).  ``data`` must hold only ``int``/``float``
    metric values besides the keys in ``skip`` and values that are not metrics.  Returns
    ``(size, typed, entries, wide)``; the plan applies to a later dict of the same size
    whose value under each key of ``typed`` (every key but ``name``) has the type given
    there.  ``entries`` lists, in sorted key order, ``(key, curs)`` where ``curs`` holds
    the stored ``[kind, type, value]`` list of each flex, whose value a plain sum may
    update in place; ``curs`` is None for keys that need :func:`add_one` (properties, a
    float ``bytes``).  ``wide`` lists the keys whose int values must be checked against
    the int64 range first (outside it the value is a double, a type mismatch that
    :func:`add_plain` reports).  None if a metric key is not a ``str``.
    """
    entries, wide = [], []
    metric_keys = [k for k, val in data.items() if k not in skip and type(val) in (int, float)]
    for k in sorted(metric_keys):   # the keys add_plain sorted: comparable
        val = data[k]
        t = type(val)
        info = _plain_info.get(k) or _info(k)
        if info is None:
            return None
        stored, kind, roof = info
        if kind == PTY or (t is float and roof == 2):
            entries.append((k, None))
            continue
        entries.append((k, tuple(flex[node][stored] for flex in flexes)))
        if t is int and roof != 1:
            wide.append(k)
    typed = tuple((k, type(val)) for k, val in data.items() if k != "name")
    return len(data), typed, tuple(entries), tuple(wide)
