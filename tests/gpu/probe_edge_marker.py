"""Probe (GPU): can a scope edge learn CUPTI's correlation counter instead of kernels carrying times?

Kernels are placed among their thread's scope edges by their ``queued`` launch time, which
needs CUPTI's latency timestamps, and those cost every launch on every thread CPU time
(+384 us per step of a compiled transformer, paid on autograd's thread, which never enters
a scope). Every kernel record also carries its launch call's correlation id, taken from one
counter as each tracked API call begins. If a thread, at each scope edge, made one cheap
driver call that CUPTI calls back for, the callback's correlation id would split that
thread's launches before and after the edge exactly, with no timestamps at all: the cost
moves from every launch to every edge.

What this measures, with kernel records in per-thread buffers and no latency timestamps:

* ``split``: the main thread makes a marker call, launches 5 kernels, a marker, 3 kernels, a
  marker, while a second thread launches all along; how many of the main thread's kernels
  fall between each pair of marker ids (expected 5 and 3), and whether every id is unique;
* ``marker_us``: the calling thread's CPU time per marker call (driver call kept under the
  GIL, CUPTI's callback into Python), against the same call with no callback enabled;
* whether torch or triton call the marker function themselves (callbacks we did not make).

Run: ``python tests/gpu/probe_edge_marker.py`` on a GPU machine; prints one JSON document.
Not a test: CUPTI's behaviour is what it finds, whatever it is.
"""
import ctypes
import json
import threading
import time

from probe_common import launching_in_background
from cupti_floor import Floor  # noqa: E402  (probe_common put bench/ on the path)

#: ``CUPTI_DRIVER_TRACE_CBID_cuCtxGetId`` (cupti_driver_cbid.h): a call neither torch nor triton makes per launch
CBID_CTX_GET_ID = 695
MARKERS_TIMED = 20000


def main() -> dict:
    import torch

    from proton_ctypes.backends.nvidia import layout
    from proton_ctypes.backends.nvidia.cbids import CB_DOMAIN_DRIVER_API, CB_SITE_ENTER
    from proton_ctypes.backends.nvidia.lib import CALLBACK_FUNC

    x = torch.zeros(1024, device="cuda")
    x.add_(1)
    torch.cuda.synchronize()
    cuda = ctypes.PyDLL("libcuda.so.1")          # PyDLL: the GIL stays held across the call
    ctx = ctypes.c_void_p()
    cuda.cuCtxGetCurrent(ctypes.byref(ctx))
    ctx_id = ctypes.c_uint64()

    def marker():
        cuda.cuCtxGetId(ctx, ctypes.byref(ctx_id))

    seen = []                                    # (thread, correlation id) of each marker callback

    def on_callback(userdata, domain, cbid, data):
        if cbid == CBID_CTX_GET_ID and ctypes.c_uint32.from_address(data).value == CB_SITE_ENTER:
            seen.append((threading.get_native_id(),
                         ctypes.c_uint32.from_address(data + layout.CALLBACK_CORRELATION_OFFSET).value))

    kernels = []                                 # (owner, correlation id) of every kernel record

    def keep(owner, buffer, offset):
        corr = ctypes.c_uint32.from_address(buffer + offset + floor.field_offsets["correlationId"]).value
        kernels.append((owner, corr))

    floor = Floor("per_thread", on_kernel=keep)
    floor.start()
    lib = floor._lib
    callback = CALLBACK_FUNC(on_callback)

    def cpu_per_call(n):
        t0 = time.thread_time_ns()
        for _ in range(n):
            marker()
        return (time.thread_time_ns() - t0) / n / 1e3

    bare_us = cpu_per_call(MARKERS_TIMED)
    subscriber = lib.subscribe(callback)
    lib.enable_callback(subscriber, CB_DOMAIN_DRIVER_API, CBID_CTX_GET_ID)
    seen.clear()
    with_callback_us = cpu_per_call(MARKERS_TIMED)
    timed_callbacks = len(seen)
    seen.clear()

    me = threading.get_native_id()
    with launching_in_background() as other:
        marker()
        for _ in range(5):
            x.add_(1)
        marker()
        for _ in range(3):
            x.add_(1)
        marker()
    torch.cuda.synchronize()
    ours = [c for tid, c in seen if tid == me]
    lib.unsubscribe(subscriber)
    floor.finalize()
    mine = sorted(c for owner, c in kernels if owner == me)
    split = [sum(1 for c in mine if lo < c < hi) for lo, hi in zip(ours, ours[1:])]
    everything = [c for _o, c in kernels] + [c for _t, c in seen]
    return {"marker_cpu_us_without_callback": round(bare_us, 3),
            "marker_cpu_us_with_callback": round(with_callback_us, 3),
            "callbacks_while_timed": timed_callbacks, "markers_timed": MARKERS_TIMED,
            "marker_ids": ours, "split": split, "expected_split": [5, 3],
            "other_thread_kernels": sum(1 for owner, _c in kernels if owner == other.get("tid")),
            "callbacks_from_other_threads": sum(1 for tid, _c in seen if tid != me),
            "ids_unique": len(everything) == len(set(everything))}


if __name__ == "__main__":
    print(json.dumps(main(), indent=1))
