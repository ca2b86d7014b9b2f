"""``PROTON_DATA_FLUSH_TIMING=1``: what each periodic flush of a session cost, one line on stderr.

Proton documents the variable for ``mode="periodic_flushing"`` and prints, per session and
flush, the time spent rendering the closed phases (JSON for ``hatchet`` and ``chrome_trace``,
MessagePack for ``hatchet_msgpack``), writing their part files and dropping them; this prints the
same line with the same fields, measured around the same steps here.  Before it, for a backend
whose Proton keeps a pool of pending graph metrics (``Backend.graph_metric_pool``), Proton's
line for reading back the graph replays' metric values of those phases (its
``pendingGraphPool`` peek; here :func:`proton_ctypes.core.graph_metrics.drain`).
"""
from __future__ import annotations

import os
import sys
import time
from typing import Optional

ENV = "PROTON_DATA_FLUSH_TIMING"
#: the values Proton reads as true (case-insensitive)
TRUE_VALUES = ("1", "true", "on")
#: the formats rendered as MessagePack (every other one is JSON text)
MSGPACK_FORMATS = ("hatchet_msgpack",)


def _us(seconds: float) -> int:
    return int(seconds * 1e6)


class FlushTiming:
    """The sums of one periodic flush of one session, in microseconds and calls."""

    def __init__(self, fmt: str):
        self.fmt = fmt
        self.render_s = self.write_s = self.clear_s = 0.0
        self.renders = self.writes = 0

    def add(self, step: str, seconds: float) -> None:
        """Count one ``render`` or ``write`` (:func:`proton_ctypes.writers.write`), or a ``clear``."""
        if step == "render":
            self.render_s += seconds
            self.renders += 1
        elif step == "write":
            self.write_s += seconds
            self.writes += 1
        else:
            self.clear_s += seconds

    def clock(self):
        """The clock the steps are timed with."""
        return time.perf_counter()

    def line(self, path: str, first: int, last: int) -> str:
        """Proton's line for the phases ``first``..``last`` of the session written to ``path``."""
        figures = dict.fromkeys(("toJsonString", "toMsgPack", "json_write", "msgpack_write"), (0.0, 0))
        render, write = ("toMsgPack", "msgpack_write") if self.fmt in MSGPACK_FORMATS else ("toJsonString",
                                                                                            "json_write")
        figures[render], figures[write] = (self.render_s, self.renders), (self.write_s, self.writes)
        steps = " ".join(f"{k}_us={_us(t)} {k}_calls={n}" for k, (t, n) in figures.items())
        return (f"[PROTON] periodicFlush timing: path={path} format={self.fmt} phases=[{first},{last}] "
                f"{steps} clear_us={_us(self.clear_s)}")

    def peek_line(self, first: int, last: int, seconds: float) -> str:
        """Proton's line for reading back the graph metrics of phases ``first``..``last``
        (one peek per phase, ``seconds`` in all)."""
        return (f"[PROTON] pendingGraphPool peek timing: phases=[{first},{last}] peek_us={_us(seconds)} "
                f"peek_calls={last - first + 1}")

    def report_peek(self, first: int, last: int, seconds: float) -> None:
        """Print :meth:`peek_line` on stderr."""
        print(self.peek_line(first, last, seconds), file=sys.stderr, flush=True)

    def report(self, path: str, first: int, last: int) -> None:
        """Print :meth:`line` on stderr."""
        print(self.line(path, first, last), file=sys.stderr, flush=True)


def timing_for(fmt: str) -> Optional[FlushTiming]:
    """A :class:`FlushTiming` for a flush in format ``fmt`` when ``PROTON_DATA_FLUSH_TIMING``
    says so, else None."""
    if os.environ.get(ENV, "").strip().lower() in TRUE_VALUES:
        return FlushTiming(fmt)
    return None
