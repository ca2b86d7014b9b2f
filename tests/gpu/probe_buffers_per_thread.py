"""Probe (GPU): what launch positions assume about CUPTI's per-thread buffers, where not yet measured.

Launch positions (``proton_ctypes/backends/nvidia/positions.py``) read one current buffer per
thread at each scope edge.  Two things would break that assumption or make it fragile:

* ``devices``: one thread launching on two devices (needs two GPUs; skipped with one) -- does
  CUPTI keep *one* buffer per thread (records of both devices interleaved in it), or one per
  (thread, context)?  Reported: the devices found in each buffer, and how often a thread asked
  for a buffer while its previous one was still with CUPTI and had room left;
* ``flush``: ``cuptiActivityFlushAll(0)`` called from another thread while a thread launches --
  does every completion callback of the flush run before ``FlushAll`` returns, and on which
  thread?  Reported: completions seen after the flush returned, and the callback threads;
* ``graph``: a CUDA graph of three kernels replayed while the GPU is busy, then one plain
  launch -- are the replay's records in the thread's buffer when ``replay()`` returns (a zero
  slot left for them to fill later would stop the edges' scan short of later launches)?
  Reported: each slot's kind and correlation id after the replay, after the plain launch and
  after a synchronize.

Run: ``python tests/gpu/probe_buffers_per_thread.py`` on a GPU machine (``nvidia-h100-x2`` for
the two-device part); prints one JSON document.  Not a test: CUPTI's behaviour is what it finds.
"""
import json
import threading
import time

import probe_common  # noqa: F401  (the import paths)
from cupti_floor import Floor  # noqa: E402

LAUNCHES = 20_000
FLUSHES = 200


def _device_of(floor, buffer, offset):
    import ctypes
    return ctypes.c_uint32.from_address(buffer + offset + floor.field_offsets["deviceId"]).value


def devices() -> dict:
    import torch

    if torch.cuda.device_count() < 2:
        return {"skipped": "one GPU"}
    xs = [torch.zeros(1024, device=f"cuda:{d}") for d in (0, 1)]
    for x in xs:
        x.add_(1)
    torch.cuda.synchronize(0)
    torch.cuda.synchronize(1)
    per_buffer = {}
    floor = Floor("per_thread", on_kernel=lambda owner, buf, off: per_buffer.setdefault(
        (owner, floor.request_number.get(buf)), set()).add(_device_of(floor, buf, off)))
    floor.start()
    me = threading.get_native_id()
    for i in range(LAUNCHES):
        xs[i % 2].add_(1)
    torch.cuda.synchronize(0)
    torch.cuda.synchronize(1)
    floor.finalize()
    mine = {k[1]: sorted(v) for k, v in per_buffer.items() if k[0] == me}
    return {"buffers_of_the_thread": len(mine), "devices_per_buffer": sorted(set(map(tuple, mine.values()))),
            "requests": floor.requests}


def flush() -> dict:
    import torch

    x = torch.zeros(1024, device="cuda")
    x.add_(1)
    torch.cuda.synchronize()
    done_at, callback_threads, late = [], set(), []
    floor = Floor("per_thread")
    original = floor._on_complete

    def on_complete(*args):
        callback_threads.add(threading.current_thread().name)
        done_at.append(time.perf_counter_ns())
        return original(*args)
    floor._on_complete = on_complete            # before start(): the floor makes its callbacks there
    floor.start()
    stop = threading.Event()

    def launcher():
        while not stop.is_set():
            x.add_(1)
    t = threading.Thread(target=launcher)
    t.start()
    for _ in range(FLUSHES):
        time.sleep(0.002)
        seen = len(done_at)
        floor._lib.flush_all_quietly(0)
        returned = time.perf_counter_ns()
        time.sleep(0.001)
        late.append(sum(1 for t_done in done_at[seen:] if t_done > returned))
    stop.set()
    t.join()
    torch.cuda.synchronize()
    floor.finalize()
    return {"flushes": FLUSHES, "completions": len(done_at), "completions_after_flush_returned": sum(late),
            "callback_threads": sorted(callback_threads), "flushing_thread": threading.current_thread().name}


def graph() -> dict:
    import ctypes

    import torch

    x = torch.zeros(1024, device="cuda")
    g = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        x.add_(1)                                # warm-up outside the capture
        with torch.cuda.graph(g, stream=side):
            x.add_(1)
            x.mul_(1)
            x.sub_(1)
    torch.cuda.synchronize()
    from proton_ctypes.backends.nvidia import layout

    floor = Floor("per_thread")                  # a fresh floor: its first buffer is zeroed
    floor.start()
    corr_at = floor.field_offsets["correlationId"]
    stride = layout.expected_kernel_stride(floor._lib.version)

    def slots():
        address = floor.current.get(threading.get_native_id())
        if address is None:
            return []
        out = []
        for k in range(32):
            at = address + k * stride
            kind = ctypes.c_uint32.from_address(at).value
            corr = ctypes.c_uint32.from_address(at + corr_at).value
            if kind == 0 and corr == 0:
                break
            out.append([hex(kind), corr])
        return out

    x.add_(1)                                    # the thread's buffer exists
    torch.cuda._sleep(1_000_000_000)             # a busy GPU: nothing below completes for a while
    g.replay()
    after_replay = slots()
    x.add_(1)
    after_launch = slots()
    torch.cuda.synchronize()
    after_sync = slots()
    floor.finalize()
    return {"after_replay": after_replay, "after_plain_launch": after_launch, "after_sync": after_sync}


if __name__ == "__main__":
    print(json.dumps({"graph": graph(), "devices": devices(), "flush": flush()}, indent=1))
