"""Probe (GPU): CUPTI's latency timestamps switched on in the middle of a tracing session.

Kernel records carry their ``queued`` launch time only while latency timestamps are on, and
those cost the launching thread CPU time per launch. Switching them on only when a thread first
needs a launch time (its first scope) would save that cost in sessions without scopes. That
design depends on what this probe measures:

* whether every kernel launched after ``cuptiActivityEnableLatencyTimestamps(1)`` returns is
  stamped, on the thread that switched them on and on other threads (one already launching
  before, one started after), with the kernel kind left on;
* the launching thread's CPU per launch with the timestamps off and on.

Run: ``python tests/gpu/probe_latency_toggle.py [LAUNCHES]`` on a GPU machine; prints one JSON
document. Not a test: CUPTI's behaviour is what it finds, whatever it is.
"""
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "bench"))
from cupti_floor import Floor  # noqa: E402


def main(launches: int) -> dict:
    import torch

    x = torch.zeros(1024, device="cuda")
    x.add_(1)
    torch.cuda.synchronize()
    floor = Floor("per_thread", keep_records=True)
    floor.start()
    me = threading.get_native_id()
    go, ids = threading.Event(), {}

    def launcher(name):
        ids[name] = threading.get_native_id()
        y = torch.zeros(1024, device="cuda")
        y.add_(1)                         # a launch (and a buffer) before the thread waits
        go.wait()
        for _ in range(launches):
            y.add_(1)

    before = threading.Thread(target=launcher, args=("already launching",))
    before.start()
    c0 = time.thread_time()
    for _ in range(launches):
        x.add_(1)
    cpu_off = time.thread_time() - c0
    torch.cuda.synchronize()
    t_on = time.time_ns()
    switched = floor._lib.enable_latency_timestamps(True)
    c0 = time.thread_time()
    for _ in range(launches):
        x.add_(1)
    cpu_on = time.thread_time() - c0
    go.set()
    after = threading.Thread(target=launcher, args=("started after",))
    after.start()
    before.join()
    after.join()
    torch.cuda.synchronize()
    floor.finalize()
    floor._lib.enable_latency_timestamps(False)
    rows = sorted(floor.kernels, key=lambda r: r[2])
    mine = [r for r in rows if r[0] == me]
    out = {"switched_on": switched, "launches_per_phase": launches,
           "cpu_us_per_launch_timestamps_off": round(cpu_off / launches * 1e6, 3),
           "cpu_us_per_launch_timestamps_on": round(cpu_on / launches * 1e6, 3),
           "this_thread_before": _stamped(mine[:launches]), "this_thread_after": _stamped(mine[launches:]),
           "t_on_ns": t_on}
    for name, tid in ids.items():      # its first two kernels (zeros, add) ran before it waited
        out[name] = _stamped([r for r in rows if r[0] == tid][2:])
    first_after = [r[1] for r in mine[launches:] if r[1]]
    out["first_queued_after_switch_minus_t_on_us"] = (round((first_after[0] - t_on) / 1e3, 1) if first_after
                                                       else None)
    return out


def _stamped(rows) -> dict:
    stamped = [i for i, r in enumerate(rows) if r[1]]
    return {"kernels": len(rows), "stamped": len(stamped), "first_stamped_index": stamped[0] if stamped else None}


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 20000), indent=1))
