"""Context codes: how a thread's log and a correlation id name "where kernels go now".

A *context code* is one int64:

* ``node`` (>= 0): a plain context; a kernel launched under it becomes the child
  ``node/<kernel name>``;
* ``op_code(node)`` = ``-(node + 1)`` (< 0): a launch op of ``hook="triton"``; the kernel
  *is* that node, not a child of it.

Backends that attribute through external correlation ids (the CUPTI clock fallback)
carry the same information in a positive id: ``node + 1`` for a context, the op's node
with bit :data:`EXT_OP` set for an op; 0 means "no id" (ROOT).  This module is the one
place that writes or reads either form.
"""
from __future__ import annotations

import numpy as np

#: bit marking an op in an external correlation id
EXT_OP = 1 << 62
#: a time (ns since the epoch) after every real one: the end of a still open window
FAR_FUTURE = 1 << 62


def op_code(node: int) -> int:
    """The code of launch-op node ``node``."""
    return -node - 1


def node_of(code: int) -> int:
    """The trie node a code names (the op node itself for an op code)."""
    return -code - 1 if code < 0 else code


def ext_id(code: int) -> int:
    """External-correlation id of a code: ``node + 1``, ops flagged with :data:`EXT_OP`."""
    return (EXT_OP | (-code - 1)) if code < 0 else code + 1


def codes_of_ext(ids):
    """Inverse of :func:`ext_id` for an int64 array (ids <= 0 become ROOT)."""
    ids = np.asarray(ids, dtype=np.int64)
    op = (ids & EXT_OP) != 0
    node = np.where(op, ids & ~EXT_OP, ids - 1)
    node = np.where(ids <= 0, 0, node)
    return np.where(op, -node - 1, node)
