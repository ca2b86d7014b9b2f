"""``PROTON_DATA_FLUSH_TIMING=1``: what each periodic flush of a session cost, one line on stderr.

Proton documents the variable for ``mode="periodic_flushing"`` and prints, per session and
flush, the time spent rendering the closed phases (JSON for ``hatchet`` and ``chrome_trace``,
MessagePack for ``hatchet_msgpack``), writing their part files and dropping them; this prints the
same line with the same fields, measured around the same steps here.
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
        packed = self.fmt in MSGPACK_FORMATS
        json_r, json_w = (0, 0) if packed else (self.render_s, self.write_s)
        pack_r, pack_w = (self.render_s, self.write_s) if packed else (0, 0)
        n_json = (0, 0) if packed else (self.renders, self.writes)
        n_pack = (self.renders, self.writes) if packed else (0, 0)
        return (f"[PROTON] periodicFlush timing: path={path} format={self.fmt} phases=[{first},{last}] "
                f"toJsonString_us={_us(json_r)} toJsonString_calls={n_json[0]} "
                f"toMsgPack_us={_us(pack_r)} toMsgPack_calls={n_pack[0]} "
                f"json_write_us={_us(json_w)} json_write_calls={n_json[1]} "
                f"msgpack_write_us={_us(pack_w)} msgpack_write_calls={n_pack[1]} clear_us={_us(self.clear_s)}")

    def report(self, path: str, first: int, last: int) -> None:
        """Print :meth:`line` on stderr."""
        print(self.line(path, first, last), file=sys.stderr, flush=True)


def timing_for(fmt: str) -> Optional[FlushTiming]:
    """A :class:`FlushTiming` for a flush in format ``fmt`` when ``PROTON_DATA_FLUSH_TIMING``
    says so, else None."""
    if os.environ.get(ENV, "").strip().lower() in TRUE_VALUES:
        return FlushTiming(fmt)
    return None
