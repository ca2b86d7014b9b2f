"""Shared fixtures: a clean profiler between tests, the mock GPU backend, file helpers.

The direct tests of an area (``test_scope.py`` ...) start sessions with ``backend="host"``
(scopes, states, metrics and writers, no kernels) or ``backend="mock"`` (kernels launched
from Python, see :func:`mock`); their expected values are those real Proton 3.9 gives
(``conformance/`` runs the same behaviours under it).
"""
import json
import os
import sys
import warnings

import pytest

#: Triton's driver, made at a profile's start with ``backend=None``, asks each of its backends
#: whether it is active, and the AMD one imports torch to answer (1-2 s in every process the
#: tests start; half of the suite's time on CI).  With no AMD GPU here (no ``/dev/kfd``) the answer
#: is known: ask the NVIDIA one alone (Triton 3.9 reads this; 3.6 ignores it).  Either way no
#: driver on a CPU machine is "no GPU driver" to the backend choice.  An explicit setting wins.
if not os.path.exists("/dev/kfd"):
    os.environ.setdefault("TRITON_DEFAULT_BACKEND", "nvidia")

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import proton_ctypes as proton  # noqa: E402
from proton_ctypes.backends import select  # noqa: E402
from proton_ctypes.backends.mock import MockBackend  # noqa: E402
from proton_ctypes.core import manager, threads  # noqa: E402
from proton_ctypes.flags import flags  # noqa: E402

select.register("mock", MockBackend)
warnings.filterwarnings("ignore", message="proton_ctypes: .*: host-only backend")


def reset_profiler():
    """Finalize what is left and forget every session, state and open scope of this thread."""
    try:
        proton.finalize()
    except Exception:
        pass
    manager.discard_all()  # a session whose write failed stays alive: it must not reach the next test
    threads.thread_ctx().state = None  # the state slot is per thread and outlives a failed finalize
    # so does the enter_scope stack: a test that raised between enter_scope and exit_scope
    # must not hand its entries to the next test
    threads.thread_ctx().entered.clear()
    flags.profiling_on = False
    flags.command_line = False
    proton.hooks.HookManager.unregister()
    # a test that failed with a CUPTI backend still started must not fail every later one
    cupti = sys.modules.get("proton_ctypes.backends.cupti")
    for backend in list(getattr(cupti, "_ACTIVE", ())):
        try:
            backend.stop()
        except Exception:
            cupti._ACTIVE.remove(backend)


@pytest.fixture(autouse=True)
def clean_profiler(tmp_path, monkeypatch):
    """Each test starts with no session, profiling off, in its own working directory."""
    monkeypatch.chdir(tmp_path)
    yield
    reset_profiler()


try:  # the random-program tests (test_random_programs.py) need hypothesis, from the [test] extra
    from hypothesis import HealthCheck, settings
except ImportError:  # pragma: no cover - those tests skip
    pass
else:
    #: CI: the random-program tests take about a minute in all
    settings.register_profile("ci", max_examples=300, stateful_step_count=50, deadline=None, database=None,
                              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    #: CI's second run of the suite, under the oldest triton supported (.ci/run): it is there for
    #: what differs between triton versions, which the random programs' number does not touch
    settings.register_profile("compat", max_examples=60, stateful_step_count=30, deadline=None, database=None,
                              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    #: on demand (PROTON_CTYPES_HYPOTHESIS=long): many more and longer programs
    settings.register_profile("long", max_examples=1000, stateful_step_count=80, deadline=None, database=None,
                              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    settings.load_profile(os.environ.get("PROTON_CTYPES_HYPOTHESIS", "ci"))


@pytest.fixture
def mock():
    """The process-wide mock GPU backend (``backend="mock"``)."""
    return select.get("mock")


@pytest.fixture
def cupti():
    """``backend="cupti"`` over a fake libcupti (``tests/fakes``), registered for the test; yields
    ``(fake, backend)``, and finalizes every session and unregisters the backend at the end."""
    from fakes.fake_cupti import FakeCupti, FakeDriver
    from proton_ctypes.backends.cupti import CuptiBackend

    fake = FakeCupti()
    backend = CuptiBackend(lib=fake, driver=FakeDriver(fake))
    select.register("cupti", lambda: backend)
    yield fake, backend
    proton.finalize()
    select.unregister("cupti")


#: ~75 kernel records per buffer: buffers fill mid-test (the ``positioned`` fixture)
SMALL_BUFFER = 16 << 10


@pytest.fixture
def positioned(monkeypatch):
    """``backend="cupti"`` placing kernels by launch position, over a fake that writes each
    record at launch and completes it later; yields ``(fake, backend)``."""
    from fakes.fake_cupti import FakeCupti, FakeDriver
    from proton_ctypes.backends.cupti import CuptiBackend
    from proton_ctypes.backends.nvidia import activity

    monkeypatch.setenv(activity.LAUNCH_SOURCE_ENV, activity.LAUNCH_FROM_POSITION)
    fake = FakeCupti(defer_kernels=True)
    backend = CuptiBackend(lib=fake, driver=FakeDriver(fake), buffer_bytes=SMALL_BUFFER)
    select.register("cupti", lambda: backend)
    yield fake, backend
    proton.finalize()
    select.unregister("cupti")


@pytest.fixture
def installed_proton_overlay(tmp_path):
    """An overlay folder (``bench/proton_overlay.py``) made of the installed triton's own Proton:
    its ``libproton.so`` and ``profiler`` package; skips where triton or a separate
    ``libproton.so`` is missing."""
    import pathlib
    import shutil

    triton = pytest.importorskip("triton")
    installed = pathlib.Path(triton.__file__).parent
    if not (installed / "_C" / "libproton.so").exists():
        pytest.skip("this triton has no separate libproton.so")
    overlay = tmp_path / "overlay"
    (overlay / "triton" / "_C").mkdir(parents=True)
    shutil.copy(installed / "_C" / "libproton.so", overlay / "triton" / "_C")
    shutil.copytree(installed / "profiler", overlay / "triton" / "profiler")
    return overlay


def parsed(backend, mode):
    """``(mode name, options)`` of ``mode`` as the session layer parses it for ``backend``:
    ``("", {})``, ``("periodic_flushing", {"format": F})`` or ``("pcsampling", {"interval": N})``."""
    m = select.parse_mode(backend, mode)
    options = {"format": m.format} if m.periodic_flushing else {"interval": m.interval} if m.pc_sampling else {}
    return m.kind.value, options


def read_tree(path):
    """Load a ``.hatchet`` or ``.hatchet_msgpack`` file and return ``(root, device_info)``."""
    if str(path).endswith(".hatchet_msgpack"):
        import msgpack
        with open(path, "rb") as f:
            tree, dev = msgpack.unpack(f, raw=False, strict_map_key=False)
        return tree, dev
    with open(path) as f:
        tree, dev = json.load(f)
    return tree, dev


def find(node, *names):
    """The node reached from ``node`` through child frame ``names`` (AssertionError if absent)."""
    for n in names:
        for c in node["children"]:
            if c["frame"]["name"] == n:
                node = c
                break
        else:
            raise AssertionError(f"no child {n!r} under {node['frame']['name']!r}: "
                                 f"{[c['frame']['name'] for c in node['children']]}")
    return node


def child_names(node):
    """Names of the children of ``node``."""
    return [c["frame"]["name"] for c in node["children"]]


def flat(node, prefix=""):
    """Every node below ``node`` as ``{"a/b": metrics}``, in file order (depth first)."""
    out = {}
    for c in node["children"]:
        path = prefix + c["frame"]["name"]
        out[path] = c["metrics"]
        out.update(flat(c, path + "/"))
    return out


def written(name):
    """``flat`` of the tree of ``<name>.hatchet`` (the device block must be ``{}``)."""
    root, dev = read_tree(f"{name}.hatchet")
    assert dev == {}
    return flat(root)


def json_decodes_deep_nesting() -> bool:
    """Whether this Python's JSON decoder reads ~8000 nested levels once the recursion limit
    allows it (3.12's C decoder stops near 1500 levels, whatever the Python limit; real Proton's
    ``data.get`` and viewer decode with it too)."""
    from proton_ctypes._deepjson import loads_deep   # the decode data.get and the viewer use
    try:
        loads_deep("[" * 8000 + "]" * 8000)
        return True
    except RecursionError:
        return False


def on_a_thread(body):
    """Run ``body()`` on a new thread; return that thread's native id and ``(before, after)``,
    the ``time.time_ns()`` span around the call (what its launches' thread and times must be)."""
    import threading
    import time
    out = {}

    def run():
        out["tid"], before = threading.get_native_id(), time.time_ns()
        body()
        out["span"] = (before, time.time_ns())
    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    return out["tid"], out["span"]
