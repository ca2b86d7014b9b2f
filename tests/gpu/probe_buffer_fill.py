"""Probe (GPU): when does CUPTI write a kernel record into the launching thread's buffer?

With per-thread activity buffers, a kernel's record lies in a buffer of the thread that
launched it. If CUPTI puts the record there *during the launch call* (its GPU times filled in
later), a thread could tell how many kernels it has launched so far by reading its own buffer,
and a scope edge could note that position instead of a time: kernels would need no latency
timestamps (which cost the launching thread CPU time at every launch) to be placed among their
thread's scope edges. If CUPTI writes the record only once the kernel has run, this cannot work.

The probe keeps the GPU busy (``torch.cuda._sleep``) so that the launches that follow cannot
run, then after each launch reads the launching thread's (zeroed) buffer: how many record slots
are non-zero, and the kind, correlation id and start time in each. Then it synchronises and
reads again. Main thread and a second thread.

Run: ``python tests/gpu/probe_buffer_fill.py`` on a GPU machine; prints one JSON document.
Not a test: CUPTI's behaviour is what it finds, whatever it is.
"""
import ctypes
import json
import threading

import probe_common  # noqa: F401  (the import paths)
from cupti_floor import Floor  # noqa: E402

LAUNCHES = 12
#: GPU cycles the busy kernel spins (about half a second on an H200)
BUSY_CYCLES = 1_000_000_000


def main() -> dict:
    import torch

    from proton_ctypes.backends.nvidia import layout

    fields = {name: offset for name, _t, offset in layout.KERNEL_FIELDS}
    x = torch.zeros(1024, device="cuda")
    x.add_(1)
    torch.cuda.synchronize()
    floor = Floor("per_thread")
    floor.start()
    stride = layout.expected_kernel_stride(floor._lib.version)

    def my_buffers():
        """The buffer the calling thread writes into (none before its first launch)."""
        address = floor.current.get(threading.get_native_id())
        return [] if address is None else [address]

    def slots(address, limit=4 * LAUNCHES):
        out = []
        for k in range(limit):
            at = address + k * stride
            kind = ctypes.c_uint32.from_address(at).value
            corr = ctypes.c_uint32.from_address(at + fields["correlationId"]).value
            if kind == 0 and corr == 0:
                break
            out.append({"kind": kind, "corr": corr, "start": ctypes.c_uint64.from_address(at + fields["start"]).value})
        return out

    def run(tag):
        x = torch.zeros(1024, device="cuda")
        torch.cuda.synchronize()
        torch.cuda._sleep(BUSY_CYCLES)
        trail = []
        for i in range(LAUNCHES):
            x.add_(1)
            bufs = my_buffers()
            trail.append({"launch": i + 1, "buffers": len(bufs),
                          "slots": [len(slots(a)) for a in bufs]})
        before = [slots(a) for a in my_buffers()]
        torch.cuda.synchronize()
        after = [slots(a) for a in my_buffers()]
        return {"thread": tag, "after_each_launch": trail, "slots_before_sync": before, "slots_after_sync": after}

    report = {"stride": stride, "cupti_version": floor._lib.version, "runs": [run("main")]}
    box = []
    t = threading.Thread(target=lambda: box.append(run("second")))
    t.start()
    t.join()
    report["runs"] += box
    floor.finalize()
    return report


if __name__ == "__main__":
    print(json.dumps(main(), indent=1))
