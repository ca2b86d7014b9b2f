"""Metric plans: adding dicts of one shape to one node again and again, at the cost of a
lookup and an in-place add per key.

A scope entered in a loop with the same metric keys (``with scope("step", {...})``) and the
launch hook's metadata of one kernel add dicts of one shape to one node each time.  The stored
``[kind, type, value]`` entries of every flex are found once (by :func:`.metrics.add_plain`,
which also makes the rules hold) and kept in a plan; a repeat whose values have the planned
types adds in place.  Anything else goes through :mod:`.metrics` as before, so errors and their
order stay Proton's.
"""
from __future__ import annotations

from typing import Optional

from .metrics import I64_MAX, I64_MIN, PTY, ROOF_DOUBLE, ROOF_INT, _info, _plain_info, add, add_plain


#: bound of a view's plan cache (distinct nodes with scope plans); cleared when reached
MAX_PLANS = 1024
#: shapes (key sets) a node keeps plans for, the latest first: a scope whose metrics alternate
#: between a few shapes stays on the planned path
MAX_SHAPES_PER_NODE = 4
#: a range every small int is in: one compare of two machine-size ints before the int64 test
SMALL_MIN, SMALL_MAX = -(1 << 30) + 1, (1 << 30) - 1


def add_planned(flexes, node: int, metrics: dict, plans: dict) -> bool:
    """:func:`add_plain` for a caller that adds dicts of one shape to one node again and
    again (``with scope("step", {...})`` in a loop): the stored entries of every flex are
    found once and kept in ``plans`` (the caller's cache, e.g. a view's ``scope_plans``: node ->
    its plans, one per key set), so a repeat costs one lookup plus, per key, a type check and
    one in-place add per flex.

    A dict that no plan of the node fits (its keys, their types) takes :func:`add_plain` (so
    errors and their order are Proton's) and becomes the node's newest plan.  Returns False,
    having added nothing, for a dict that is not plain.
    """
    shapes = plans.get(node)
    if shapes is not None:
        n = len(metrics)
        for size, types, wide, plain, other in shapes:
            if size != n:
                continue
            try:   # every value checked before any is added: a mismatch adds nothing here
                for k, t in types:
                    if type(metrics[k]) is not t:
                        break
                else:
                    for k in wide:
                        val = metrics[k]
                        if not (SMALL_MIN <= val <= SMALL_MAX or I64_MIN <= val <= I64_MAX):
                            break
                    else:
                        for k, cur in plain:
                            cur[2] += metrics[k]
                        for k, conv, pty, curs in other:
                            val = metrics[k] if conv is None else conv(metrics[k])
                            for cur in curs:
                                if pty:
                                    cur[2] = val
                                else:
                                    cur[2] += val
                        return True
            except KeyError:       # another key set of the same size
                pass
    # no plan fits (another key set, or another type under a key): add_plain decides
    if not add_plain(flexes, node, metrics):
        return False
    if len(plans) >= MAX_PLANS:
        plans.clear()
    plans[node] = (_shape(flexes, node, metrics),) + plans.get(node, ())[:MAX_SHAPES_PER_NODE - 1]
    return True


def _shape(flexes, node: int, metrics: dict) -> tuple:
    """The plan of :func:`add_planned` for a plain dict just added to ``node`` in ``flexes``:
    ``(size, ((key, type), ...), keys whose ints are range-checked, ((key, stored entry), ...)
    summed as given, ((key, conversion, is a property, stored entries), ...) for the rest)``."""
    types, wide, plain, other = [], [], [], []
    for k, val in metrics.items():
        t = type(val)
        stored, _kind, roof = _plain_info[k]
        conv = None
        if t is int and roof == ROOF_DOUBLE:
            conv = float
        elif t is float and roof == ROOF_INT:
            conv = int
        types.append((k, t))
        if t is int and conv is None:
            wide.append(k)
        # an entry's kind is fixed by its first add (a property stays one under a plain key)
        for flex in flexes:
            cur = flex[node][stored]
            if conv is None and cur[0] != PTY:
                plain.append((k, cur))
            else:
                other.append((k, conv, cur[0] == PTY, (cur,)))
    return len(metrics), tuple(types), tuple(wide), tuple(plain), tuple(other)


class Plan:
    """How to add launch metadata shaped like one dict to one node, reused across launches.

    Made by :func:`plan` right after that dict's plain metrics were added to the node in
    every flex (so every stored entry exists).  It applies to a later dict that
    :meth:`fits`: the same size, the same type under each key of :attr:`types`, and the
    ints of :attr:`wide` within int64 (outside it the value is a double, a type mismatch
    that :func:`add` reports).  :meth:`apply` then adds each metric, in sorted key order,
    to the stored ``[kind, type, value]`` lists of :attr:`steps` in place, or through
    :func:`add` for keys that need it (properties, a float ``bytes``).
    """

    __slots__ = ("size", "types", "steps", "wide")

    def __init__(self, size: int, types: tuple, steps: tuple, wide: tuple):
        self.size = size
        #: ``(key, type)`` for every key but ``name``
        self.types = types
        #: ``(key, stored entries of each flex or None)`` in sorted key order
        self.steps = steps
        #: keys whose int values must be range-checked
        self.wide = wide

    def fits(self, data: dict) -> bool:
        """Whether this plan applies to ``data``."""
        if len(data) != self.size:
            return False
        try:
            for k, t in self.types:
                if type(data[k]) is not t:
                    return False
            for k in self.wide:
                if not I64_MIN <= data[k] <= I64_MAX:
                    return False
        except KeyError:
            return False
        return True

    def apply(self, flexes, node: int, data: dict) -> None:
        """Add ``data``'s metrics (a dict that :meth:`fits`) to ``node`` in ``flexes``."""
        for k, curs in self.steps:
            val = data[k]
            if curs is None:
                add(flexes, node, {k: val})
            else:
                for cur in curs:
                    cur[2] += val


def plan(flexes, node: int, data: dict, skip) -> Optional[Plan]:
    """A :class:`Plan` for dicts shaped like ``data``, whose ``int``/``float`` values under
    keys not in ``skip`` are its metrics (``data`` holds no other metric values).  None if
    a metric key is not a ``str``."""
    steps, wide = [], []
    metric_keys = [k for k, val in data.items() if k not in skip and type(val) in (int, float)]
    for k in sorted(metric_keys):   # the keys add_plain sorted: comparable
        val = data[k]
        t = type(val)
        info = _plain_info.get(k) or _info(k)
        if info is None:
            return None
        stored, _kind, roof = info
        curs = tuple(flex[node][stored] for flex in flexes)
        # an entry's kind is fixed by its first add: a property (under this key or another) is set
        if any(cur[0] == PTY for cur in curs) or (t is float and roof == ROOF_INT):
            steps.append((k, None))
            continue
        steps.append((k, curs))
        if t is int and roof != ROOF_DOUBLE:
            wide.append(k)
    types = tuple((k, type(val)) for k, val in data.items() if k != "name")
    return Plan(len(data), types, tuple(steps), tuple(wide))
