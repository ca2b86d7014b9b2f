"""Writers: one table of output formats, one signature.

Every format renders one phase of one session, ``render(phase, device_type,
device_block) -> str | bytes`` (``phase`` a :class:`~proton_ctypes.tree.phase.PhaseData`,
``device_type`` the backend's kernel-metric device type, ``device_block`` the file's
device-info element), and :func:`write` puts it on disk whole or not at all
(:mod:`proton_ctypes._atomic`, the writer the viewer uses too).  Writers read the tree;
they never import the profiler's engine.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Union

from . import chrome_trace, hatchet, msgpack
from .._atomic import write_atomic


@dataclass(frozen=True)
class Format:
    """One output format: its name (the file suffix), the data kind it writes, its renderer."""

    name: str
    #: ``"tree"`` or ``"trace"`` (the session's ``data``)
    data: str
    render: Callable[..., Union[str, bytes]]
    #: whether the file carries a device-info element (only then is it worth building)
    has_devices: bool = True


#: every output format, by the name ``finalize``/``periodic_flushing`` accept
FORMATS = {f.name: f for f in (
    Format("hatchet", "tree", hatchet.render),
    Format("hatchet_msgpack", "tree", msgpack.render),
    Format("chrome_trace", "trace", chrome_trace.render, has_devices=False),
)}
#: the format written when none is given, by data kind
DEFAULT_FORMAT = {"tree": "hatchet", "trace": "chrome_trace"}


def render(fmt: str, phase, device_type: str, device_block: dict) -> Union[str, bytes]:
    """The contents of one phase in format ``fmt``."""
    return FORMATS[fmt].render(phase, device_type, device_block)


def write(fmt: str, phase, device_type: str, device_block: dict, path: str, timing=None) -> None:
    """Write one phase in format ``fmt`` to ``path`` (whole file or none); ``timing``: an object
    with ``clock()`` and ``add(step, seconds)`` told how long the ``render`` and the ``write`` took."""
    if timing is None:
        write_atomic(path, render(fmt, phase, device_type, device_block))
        return
    t0 = timing.clock()
    data = render(fmt, phase, device_type, device_block)
    t1 = timing.clock()
    write_atomic(path, data)
    timing.add("render", t1 - t0)
    timing.add("write", timing.clock() - t1)
