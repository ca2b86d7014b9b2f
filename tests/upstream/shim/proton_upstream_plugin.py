"""pytest plugin of tests/upstream/run.py (``-p proton_upstream_plugin``).

* ``triton.testing.cuda_graph_without_gc`` where triton lacks it (3.6), before test modules import it;
* isolation (PROTON_UPSTREAM_ISOLATE=1): after each test, a profiler left on (a test that
  failed before its ``finalize``) is finalized, so the failure does not cascade into later
  tests; the test gets the junit property ``proton_left_on``;
* a per-test time limit (PROTON_UPSTREAM_TEST_TIMEOUT seconds, SIGALRM; 0 = none), so one
  hung test does not stop the run;
* the report header names the profiler that ``triton.profiler`` resolves to.
"""
import os
import signal
import sys

import pytest


def _alias():
    import sitecustomize  # the shim's: it loaded tests/upstream/alias.py
    return sitecustomize._load_alias()


def pytest_configure(config):
    try:
        if _alias().ensure_cuda_graph_without_gc():
            config._proton_upstream_note = "triton.testing.cuda_graph_without_gc: harness stand-in"
    except ImportError:
        pass


def pytest_report_header(config):
    impl = os.environ.get("PROTON_UPSTREAM_IMPL", "?")
    oracle = " (oracle recipe: stub libcupti/libcuda, fake sm_90 driver)" \
        if os.environ.get("PROTON_UPSTREAM_ORACLE") == "1" else ""
    try:
        import triton.profiler as prof
        where = f"{prof.__name__} from {os.path.dirname(prof.__file__)}"
    except Exception as e:  # reported, the tests will show it too
        where = f"import failed: {type(e).__name__}: {e}"
    lines = [f"proton upstream harness: impl={impl}{oracle}; triton.profiler -> {where}"]
    note = getattr(config, "_proton_upstream_note", None)
    if note:
        lines.append(note)
    return lines


@pytest.fixture(autouse=True)
def _proton_upstream_isolate(request):
    yield
    if os.environ.get("PROTON_UPSTREAM_ISOLATE", "1") != "1":
        return
    prof = sys.modules.get("triton.profiler")
    if prof is None:
        return
    try:
        left_on = bool(prof.flags.flags.profiling_on)
    except Exception:
        left_on = True
    if left_on:
        request.node.user_properties.append(("proton_left_on", "1"))
        try:
            prof.finalize()
        except Exception as e:
            request.node.user_properties.append(("proton_cleanup_error", f"{type(e).__name__}: {e}"))


class _TestTimeout(Exception):
    pass


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    limit = int(os.environ.get("PROTON_UPSTREAM_TEST_TIMEOUT", "0") or 0)
    if limit <= 0 or not hasattr(signal, "SIGALRM"):
        yield
        return

    def expired(signum, frame):
        raise _TestTimeout(f"test exceeded {limit} s (harness time limit)")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(limit)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
