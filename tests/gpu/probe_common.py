"""What the GPU probes share: the import paths, and a thread that keeps launching meanwhile."""
import contextlib
import os
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
for _path in (ROOT, os.path.join(ROOT, "bench")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

#: how long the background thread launches before the probe's own launches begin
BACKGROUND_LEAD_S = 0.05


@contextlib.contextmanager
def launching_in_background():
    """Another thread launches a small torch kernel over and over until the block ends; yields
    ``{"tid": its native id}``."""
    import torch

    stop, other = threading.Event(), {}

    def launch():
        other["tid"] = threading.get_native_id()
        y = torch.zeros(1024, device="cuda")
        while not stop.is_set():
            y.add_(1)

    t = threading.Thread(target=launch)
    t.start()
    time.sleep(BACKGROUND_LEAD_S)
    try:
        yield other
    finally:
        stop.set()
        t.join()
