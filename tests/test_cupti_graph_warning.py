"""The missing-graph warning (issue 17, item 10): an executable CUDA graph made before profiling
started gets Proton's line on stderr, once per exec id, when it is replayed while profiling;
its kernels are still recorded under the replay's scope.  Over the fake libcupti (replayed
kernel records carry the exec id in ``graphId``, instantiate fires ``GRAPHEXEC_CREATED``).
"""
import os
import shutil
import struct
import subprocess

import pytest

import proton_ctypes as proton
from conftest import child_names, find, read_tree
from fakes.fake_cupti import (CBID_GRAPHEXEC_CREATED, DOMAIN_DRIVER, DOMAIN_RESOURCE, DOMAIN_RUNTIME, GRAPH_DATA_FORMAT,
                              FakeCupti, FakeDriver)
from proton_ctypes.backends import select
from proton_ctypes.backends.cupti import CuptiBackend
from proton_ctypes.backends.nvidia.cbids import GRAPH_LAUNCH_CBIDS
from proton_ctypes.backends.nvidia import layout as L
from proton_ctypes.backends.nvidia import cbids

MESSAGE = ("[PROTON] Cannot find graph for graphExecId: {}, and it may cause memory leak. "
           "To avoid this problem, please start profiling before the graph is created.\n")
TAG = "Cannot find graph for graphExecId:"


@pytest.fixture
def make():
    """``make(cls=FakeCupti, **knobs)`` registers a CUPTI backend over a new fake; returns the fake."""
    def build(cls=FakeCupti, **knobs):
        fake = cls(**knobs)
        backend = CuptiBackend(lib=fake, driver=FakeDriver(fake))
        select.register("cupti", lambda: backend)
        return fake
    yield build
    proton.finalize()
    select.unregister("cupti")


def _replays(fake, graph_exec, name="g"):
    """Proton's test_cudagraph_not_captured_by_profiler, over the fake: two scoped replays."""
    proton.start(name, backend="cupti")
    with proton.scope("replay0"):
        fake.replay(graph_exec)
    with proton.scope("replay1"):
        fake.replay(graph_exec)
    proton.finalize()
    root, _ = read_tree(f"{name}.hatchet")
    return root


def test_a_graph_made_before_profiling_is_reported_once_and_still_recorded(make, capfd):
    fake = make()
    graph_exec = fake.instantiate(fake.capture(["ones", "ones_like", "add", "foo"]))   # before start
    root = _replays(fake, graph_exec)
    err = capfd.readouterr().err
    assert err.count(TAG) == 1
    assert MESSAGE.format(graph_exec.graph_id) in err
    for replay in ("replay0", "replay1"):
        assert sorted(child_names(find(root, replay))) == ["add", "foo", "ones", "ones_like"]
        assert find(root, replay, "foo")["metrics"]["count"] == 1


def test_graphs_made_while_profiling_are_not_reported(make, capfd):
    fake = make()
    proton.start("g", backend="cupti")
    with proton.scope("capture"):
        graph_exec = fake.instantiate(fake.capture(["k"]))
    with proton.scope("replay"):
        fake.replay(graph_exec)
    proton.finalize()
    assert TAG not in capfd.readouterr().err
    root, _ = read_tree("g.hatchet")
    assert find(root, "replay", "<captured_at>", "capture", "k")["metrics"]["count"] == 1


def test_a_graph_captured_before_but_instantiated_while_profiling_is_not_reported(make, capfd):
    fake = make()
    graph = fake.capture(["k"])
    proton.start("g", backend="cupti")
    fake.replay(fake.instantiate(graph))
    proton.finalize()
    assert TAG not in capfd.readouterr().err


def test_each_missing_exec_is_reported_once_per_process(make, capfd):
    fake = make()
    a = fake.instantiate(fake.capture(["ka"]))
    b = fake.instantiate(fake.capture(["kb"]))
    proton.start("first", backend="cupti")
    for _ in range(3):
        fake.replay(a)
        fake.replay(b)
    proton.finalize()
    err = capfd.readouterr().err
    assert err.count(TAG) == 2
    assert MESSAGE.format(a.graph_id) in err and MESSAGE.format(b.graph_id) in err
    proton.start("second", backend="cupti")             # the backend remembers, as Proton's graph states
    fake.replay(a)
    proton.finalize()
    assert TAG not in capfd.readouterr().err


def test_an_exec_made_in_an_earlier_session_is_known_later(make, capfd):
    fake = make()
    proton.start("first", backend="cupti")
    graph_exec = fake.instantiate(fake.capture(["k"]))
    proton.finalize()
    proton.start("second", backend="cupti")
    fake.replay(graph_exec)
    proton.finalize()
    assert TAG not in capfd.readouterr().err


def test_an_exec_made_between_sessions_is_reported(make, capfd):
    fake = make()
    proton.start("first", backend="cupti")
    proton.finalize()
    graph_exec = fake.instantiate(fake.capture(["k"]))
    proton.start("second", backend="cupti")
    fake.replay(graph_exec)
    proton.finalize()
    assert capfd.readouterr().err.count(MESSAGE.format(graph_exec.graph_id)) == 1


def test_the_cloned_nodes_graph_id_is_enough_to_know_an_exec(make, capfd):
    """No GRAPHEXEC_CREATED callback: the exec is known from its cloned nodes (Proton's key)."""
    fake = make(graph_exec_created=False)
    proton.start("g", backend="cupti")
    graph_exec = fake.instantiate(fake.capture(["k"]))
    fake.replay(graph_exec)
    proton.finalize()
    assert TAG not in capfd.readouterr().err


def test_graphexec_created_records_the_exec_id(make):
    fake = make()
    proton.start("g", backend="cupti")
    backend = select.get("cupti")
    fake._graph_handle_ids[0x7777] = 777
    fake._resource(CBID_GRAPHEXEC_CREATED, 0, 0, 0, 0x7777)       # CUpti_GraphData.graphExec
    fake._resource(CBID_GRAPHEXEC_CREATED, 0, 0, 0, 0x7778)       # unknown to CUPTI: ignored
    proton.finalize()
    assert backend._graph_execs == {777}


class _CuptiWithoutGraphIds(FakeCupti):
    """A CUPTI older than cuptiGetGraphExecId / cuptiGetGraphId."""
    cuptiGetGraphExecId = None
    cuptiGetGraphId = None


def test_a_cupti_without_graph_ids_reports_nothing_and_records_the_kernels(make, capfd):
    fake = make(cls=_CuptiWithoutGraphIds)
    graph_exec = fake.instantiate(fake.capture(["k"]))
    root = _replays(fake, graph_exec)
    assert TAG not in capfd.readouterr().err
    assert find(root, "replay0", "k")["metrics"]["count"] == 1
    assert (DOMAIN_RESOURCE, CBID_GRAPHEXEC_CREATED) not in fake.enabled_callbacks


def test_a_refused_exec_callback_turns_the_check_off(make, capfd):
    fake = make(fail={"cuptiEnableCallback": 0})
    real_enable = fake.cuptiEnableCallback

    def enable(on, handle, domain, cbid):
        if on and (int(domain), int(cbid)) == (DOMAIN_RESOURCE, CBID_GRAPHEXEC_CREATED):
            return 1
        return real_enable(on, handle, domain, cbid)
    fake.cuptiEnableCallback = enable
    graph_exec = fake.instantiate(fake.capture(["k"]))
    root = _replays(fake, graph_exec)
    assert TAG not in capfd.readouterr().err
    assert find(root, "replay1", "k")["metrics"]["count"] == 1


def test_no_kernel_launch_callback_is_switched_on_for_the_check(make):
    """The check needs no per-launch callback: driver/runtime callbacks, if any, are on the graph
    launches (the launch of replayed kernels, one per replay) and stream-capture edges alone."""
    from proton_ctypes.backends.nvidia.callbacks import CAPTURE_CBIDS
    fake = make()
    proton.start("g", backend="cupti")
    assert (DOMAIN_RESOURCE, CBID_GRAPHEXEC_CREATED) in fake.enabled_callbacks
    api_callbacks = {cbid for domain, cbid in fake.enabled_callbacks if domain in (DOMAIN_DRIVER, DOMAIN_RUNTIME)}
    assert api_callbacks <= GRAPH_LAUNCH_CBIDS | CAPTURE_CBIDS
    proton.finalize()
    assert not fake.enabled_callbacks


def test_graph_ids_are_read_only_for_graph_kernels():
    """The parser reads ``graphId`` for kernels with a graph node only (0 for the rest)."""
    import numpy as np
    from fakes.fake_cupti import KERNEL_FORMAT
    from proton_ctypes.backends.nvidia.parse import BufferParser

    def kernel(node, graph_id, start=1_700_000_000_000_000_000):
        k = KERNEL_FORMAT.pack(10, 0, 0, 16, 0, 0, start, start + 5, start + 5, 0, 1, 7, 1, 1, 1, 128, 1, 1,
                               0, 0, 0, 0, 3, 22, 0, 0, 0, 0, 0, 0, 0, 0, 0, node, 0, graph_id)
        return k + bytes(216 - len(k))
    buf = np.frombuffer(kernel(0, 99) + kernel(5, 42) + kernel(0, 7), np.uint8).copy()
    parser = BufferParser(216, ts_lo=1_600_000_000_000_000_000, ts_hi=1_800_000_000_000_000_000)
    cols = parser.parse(buf, buf.size)[10]
    assert cols["graphId"].tolist() == [0, 42, 0]


# ------------------------------------------------------------------ layouts against the CUPTI headers
def _include_dir():
    import importlib.util
    spec = importlib.util.find_spec("triton")
    for root in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(root, "backends", "nvidia", "include")
        if os.path.exists(os.path.join(path, "cupti.h")):
            return path
    return None


def test_graph_exec_layout_and_ids_match_the_headers(tmp_path):
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    include = _include_dir()
    if compiler is None or include is None:
        pytest.skip("no C compiler or no CUPTI headers (triton/backends/nvidia/include) on this machine")
    source = tmp_path / "probe.c"
    source.write_text("\n".join([
        "#include <stdio.h>", "#include <stddef.h>", "#include <cupti.h>", "int main(void) {",
        'printf("%zu %zu %d\\n", offsetof(CUpti_GraphData, graphExec), sizeof(CUpti_GraphData),'
        " (int)CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED);",
        "return 0; }"]))
    binary = tmp_path / "probe"
    build = subprocess.run([compiler, f"-I{include}", str(source), "-o", str(binary)], capture_output=True, text=True)
    if build.returncode != 0:
        pytest.skip(f"the header probe did not compile: {build.stderr[-500:]}")
    exec_at, size, cbid = map(int, subprocess.run([str(binary)], capture_output=True, text=True,
                                                  check=True).stdout.split())
    assert exec_at == L.GRAPHDATA_GRAPH_EXEC_OFFSET and cbid == cbids.RESOURCE_GRAPHEXEC_CREATED
    assert size == GRAPH_DATA_FORMAT.size and struct.calcsize(GRAPH_DATA_FORMAT.format[:-1]) == exec_at
    assert cbid == CBID_GRAPHEXEC_CREATED
