"""Argument type errors of the API: Proton's exception type (``TypeError``, as libproton's
bindings raise it) with a message that names the function, the argument, the type expected
and what was given: ``start(): argument 'name' must be a str, not int (123)``.

The checks stay off the hot paths: scope and state names are checked where a name is
first resolved to a node (a miss in the trie's child cache), the rest at each call.
"""
from __future__ import annotations

from ..tree import messages


def wrong_type(function: str, argument: str, value, kind: type) -> TypeError:
    """The ``TypeError`` for ``function``'s ``argument`` given ``value`` instead of a ``kind``."""
    return TypeError(f"{function}(): argument {argument!r} must be {messages.a_type(kind)}, "
                     f"not {messages.describe(value)}")


def check(function: str, *arguments) -> None:
    """Raise :func:`wrong_type` for the first ``(argument, value, kind)`` of ``arguments``
    whose value is not a ``kind``.  An ``int`` argument takes any int, ``bool`` included
    (as nanobind converts it)."""
    for argument, value, kind in arguments:
        if not isinstance(value, kind):
            raise wrong_type(function, argument, value, kind)


def scope_name(value) -> TypeError:
    """The ``TypeError`` for a scope name that is not a ``str``."""
    return messages.name_not_str("scope", value)


def state_name(value) -> TypeError:
    """The ``TypeError`` for a state name that is not a ``str``."""
    return messages.name_not_str("state", value)
