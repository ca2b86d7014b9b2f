"""Probe (GPU): a scope edge that reads its thread's launch position from its own activity buffer.

``probe_buffer_fill.py`` found that CUPTI writes a kernel's record (kind with the top bit set,
correlation id) into the launching thread's buffer during the launch call. Then a thread can
learn, at a scope edge and with no CUDA call, how many kernels it has launched: the number of
non-zero record slots in its current buffer (the buffer it last asked for; CUPTI asks on the
launching thread). Kernels would be placed among their thread's edges by ``(buffer, slot)``
instead of by a ``queued`` time, and the latency timestamps (CPU per launch, CUPTI memory per
kernel) could stay off.

What this measures, with kernel records in per-thread buffers and no latency timestamps:

* ``split``: the main thread reads its position, launches 5 kernels, reads, launches 3, reads,
  while a second thread launches all along and the GPU is kept busy; the main thread's kernels
  whose slot falls between each pair of positions, after the flush (expected 5 and 3);
* ``read_us``: the calling thread's CPU time per position read (a slot test through a
  ``memoryview`` of the buffer, from the slot found last time).

Run: ``python tests/gpu/probe_buffer_position.py`` on a GPU machine; prints one JSON document.
Not a test: CUPTI's behaviour is what it finds, whatever it is.
"""
import ctypes
import json
import threading
import time

from probe_common import launching_in_background
from cupti_floor import BUFFER_BYTES, Floor  # noqa: E402  (probe_common put bench/ on the path)

READS_TIMED = 100_000
#: GPU cycles the busy kernel spins, so that the probe's launches wait in the queue
BUSY_CYCLES = 200_000_000


def main() -> dict:
    import torch

    from proton_ctypes.backends.nvidia import layout

    x = torch.zeros(1024, device="cuda")
    x.add_(1)
    torch.cuda.synchronize()
    kernels = []                                 # (owner, buffer address, record offset) of each kernel record
    floor = Floor("per_thread", on_kernel=lambda *record: kernels.append(record))
    floor.start()
    stride = layout.expected_kernel_stride(floor._lib.version)
    words = stride // 4
    views, last = {}, {}                         # buffer address -> uint32 view; thread -> (address, slot)

    def position():
        """``(request number, first empty slot)`` of the calling thread's current buffer."""
        me = threading.get_native_id()
        address = floor.current.get(me)
        if address is None:
            return (0, 0)
        view = views.get(address)
        if view is None:
            raw = (ctypes.c_ubyte * BUFFER_BYTES).from_address(address)
            view = views[address] = memoryview(raw).cast("B").cast("I")
        at, slot = last.get(me, (0, 0))
        if at != address:
            slot = 0
        limit = BUFFER_BYTES // stride
        while slot < limit and view[slot * words]:
            slot += 1
        last[me] = (address, slot)
        return (floor.request_number[address], slot)

    x.add_(1)                                    # this thread's buffer exists
    torch.cuda.synchronize()
    t0 = time.thread_time_ns()
    for _ in range(READS_TIMED):
        position()
    read_us = (time.thread_time_ns() - t0) / READS_TIMED / 1e3

    me = threading.get_native_id()
    with launching_in_background() as other:
        torch.cuda._sleep(BUSY_CYCLES)
        marks = [position()]
        for _ in range(5):
            x.add_(1)
        marks.append(position())
        for _ in range(3):
            x.add_(1)
        marks.append(position())
    torch.cuda.synchronize()
    numbers = dict(floor.request_number)         # before finalize hands the buffers back for reuse
    floor.finalize()
    mine = sorted((numbers.get(a, -1), off // stride) for owner, a, off in kernels if owner == me)
    split = [sum(1 for p in mine if lo <= p < hi) for lo, hi in zip(marks, marks[1:])]
    return {"read_cpu_us": round(read_us, 3), "reads_timed": READS_TIMED, "marks": marks, "split": split,
            "expected_split": [5, 3], "buffers_requested": floor.requests,
            "other_thread_kernels": sum(1 for owner, _a, _o in kernels if owner == other.get("tid"))}


if __name__ == "__main__":
    print(json.dumps(main(), indent=1))
