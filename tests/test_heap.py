"""The collector's numpy temporaries reuse the C heap's pages from one drain to the next: glibc's
mmap and trim thresholds are raised once, when the CUPTI collector thread starts; the knob turns it
off. Each case runs in a fresh process (the thresholds are the process's)."""
import ctypes
import os
import subprocess
import sys
import textwrap

import pytest

from proton_ctypes import _heap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GLIBC = hasattr(ctypes.CDLL(None), "gnu_get_libc_version")

#: a drain's pattern: several columns of 300 000 kernels (2.4 MB each, under the 4 MiB from which
#: numpy asks for huge pages) alive at once, all freed at its end; the page faults of the drains
#: after the first
COLUMNS, ROWS, DRAINS = 8, 300_000, 4
CYCLES = textwrap.dedent("""
    import resource, sys
    import numpy as np
    def faults():
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    def drain():
        cols = [np.ones(%d, np.int64) for _ in range(%d)]
        del cols
    def drains():
        drain()
        before = faults()
        for _ in range(%d):
            drain()
        return faults() - before
    {setup}
    print(drains())
""" % (ROWS, COLUMNS, DRAINS))


def _faults_of_cycles(setup: str, **env) -> int:
    r = subprocess.run([sys.executable, "-c", CYCLES.format(setup=setup)], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=ROOT, **env), timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    return int(r.stdout.split()[-1])


#: half the faults of drains on fresh pages each time (4 KiB pages)
FRESH_FAULTS = DRAINS * COLUMNS * ROWS * 8 // 4096 // 2


@pytest.mark.skipif(not GLIBC, reason="glibc's thresholds only")
def test_after_raising_the_thresholds_the_pages_of_freed_large_arrays_are_reused():
    assert _faults_of_cycles("") > FRESH_FAULTS                     # glibc as it starts
    raised = "from proton_ctypes._heap import raise_thresholds; assert raise_thresholds()"
    assert _faults_of_cycles(raised) < FRESH_FAULTS // 10


@pytest.mark.skipif(not GLIBC, reason="glibc's thresholds only")
def test_the_cupti_collector_thread_raises_them_and_the_knob_keeps_glibc_as_it_is():
    started = textwrap.dedent("""
        sys.path.insert(0, %r)
        from fakes.fake_cupti import started_backend
        started_backend()[0].stop()          # the collector thread has run and ended
    """) % os.path.join(ROOT, "tests")
    assert _faults_of_cycles(started) < FRESH_FAULTS // 10
    assert _faults_of_cycles(started, **{_heap.RAISE_ENV: "0"}) > FRESH_FAULTS


def test_the_thresholds_are_raised_once_per_process(monkeypatch):
    monkeypatch.setattr(_heap, "_done", False)
    assert _heap.raise_thresholds() is GLIBC
    assert _heap.raise_thresholds() is False
