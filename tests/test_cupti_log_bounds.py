"""With the CUPTI backend (over the fake libcupti), the scope logs stay bounded over a long run
without a user flush, and nothing is lost or misattributed: the collector's delivery watermark
(each thread's oldest buffer still out) and the graph capture points drive the engine's trim."""
import os
import sys
import threading

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from conftest import flat, read_tree  # noqa: E402
from fakes.fake_cupti import FakeCupti, FakeDriver  # noqa: E402

import proton_ctypes as proton  # noqa: E402
from proton_ctypes.backends import select  # noqa: E402
from proton_ctypes.backends.cupti import CuptiBackend  # noqa: E402
from proton_ctypes.backends.nvidia import collector  # noqa: E402
from proton_ctypes.core.registry import G  # noqa: E402

#: 64 KiB buffers: about 300 kernel records each, so a long run fills hundreds
SMALL_BUFFER = 64 << 10
#: log entries per launch below: two scopes entered and left around it
ENTRIES_PER_LAUNCH = 4


@pytest.fixture
def cupti(monkeypatch):
    """``backend="cupti"`` over a fake, parsing every buffer at once, with a short margin."""
    monkeypatch.setattr(collector, "DELIVERY_MARGIN_NS", 1_000_000)
    fake = FakeCupti()
    backend = CuptiBackend(lib=fake, driver=FakeDriver(fake), buffer_bytes=SMALL_BUFFER, parse_batch_buffers=1)
    select.register("cupti", lambda: backend)
    yield fake, backend
    proton.finalize()
    select.unregister("cupti")


def _retained() -> int:
    with G.lock:
        return sum(len(v.log) // 2 + sum(len(c) for c in v.chunks) for vs in G.views_by_tid.values() for v in vs)


def _run(fake, launches: int, samples: list) -> None:
    for i in range(launches):
        with proton.scope("outer"):
            with proton.scope("inner"):
                fake.launch("k")
        if i % 2000 == 1999:
            samples.append(_retained())


@pytest.mark.parametrize("threads", [1, 4])
def test_scope_logs_stay_bounded_and_every_kernel_keeps_its_path(cupti, threads):
    fake, backend = cupti
    launches = 20_000
    proton.start("long", backend="cupti")
    with proton.scope("capture"):
        graph = fake.instantiate(fake.capture(["g"]))
    samples = []
    workers = [threading.Thread(target=_run, args=(fake, launches, samples)) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    with proton.scope("replay"):
        fake.replay(graph)                   # a capture long trimmed past: its entry was kept
    proton.finalize()
    counts = {path: m["count"] for path, m in flat(read_tree("long.hatchet")[0]).items() if "count" in m}
    assert counts["outer/inner/k"] == threads * launches
    assert counts["replay/<captured_at>/capture/g"] == 1
    per_buffer = SMALL_BUFFER // fake.record_size
    written = threads * launches * ENTRIES_PER_LAUNCH
    late = samples[len(samples) // 2:]
    # each thread keeps about its buffer still out plus the batches not yet trimmed
    assert max(late) < 20 * threads * per_buffer * ENTRIES_PER_LAUNCH < written
