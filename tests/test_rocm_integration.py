"""The same host scenarios through the rocprofiler-sdk and roctracer mocks give the same
tree as through the mock GPU backend (issue 8): scopes, states, threads, sessions."""
import threading

import pytest

import proton_ctypes as proton
from conftest import read_tree
from fakes.fake_rocprofiler import FakeRocprofilerSdk
from fakes.fake_roctracer import FakeHsa, FakeRoctracer
from proton_ctypes.backends import select
from proton_ctypes.backends.rocprof import RocprofilerBackend
from proton_ctypes.backends.roctracer import RoctracerBackend


def scenario(launch, backend):
    s1 = proton.start("one", backend=backend)
    with proton.scope("iteration"):
        with proton.state("optimizer"):
            launch("add_one")
            with proton.scope("sub"):
                launch("add_one")
        launch("mul")

        def work():
            with proton.scope("worker"):
                launch("add_one")
        t = threading.Thread(target=work)
        t.start()
        t.join()
    proton.start("two", backend=backend)
    with proton.scope("both", {"m": 1}):
        launch("add_one")
    proton.deactivate(s1)
    launch("only_two")
    proton.finalize()
    return read_tree("one.hatchet"), read_tree("two.hatchet")


def shape(node):
    """Names, kernel counts and user metrics; times and device details left out."""
    m = {k: v for k, v in node["metrics"].items() if k not in ("time (ns)", "device_id", "device_type")}
    return (node["frame"]["name"], tuple(sorted(m.items())),
            tuple(sorted(shape(c) for c in node["children"])))


@pytest.fixture
def amd_backends(monkeypatch):
    monkeypatch.delenv("HIP_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    sdk = FakeRocprofilerSdk()
    tracer = FakeRoctracer()
    select.register("rocprofiler", lambda: RocprofilerBackend(lib=sdk, hip=False, synchronize=lambda: None))
    select.register("roctracer", lambda: RoctracerBackend(lib=tracer, hsa=FakeHsa(), hip=False,
                                                          synchronize=lambda: None))
    yield sdk, tracer
    proton.finalize()
    for name in ("rocprofiler", "roctracer"):
        select.unregister(name)


def test_rocprofiler_mock_gives_the_same_tree_as_the_mock_gpu(amd_backends, mock, tmp_path, monkeypatch):
    sdk, _ = amd_backends
    sdk.load_code_object(["add_one", "mul", "only_two"])
    expected = scenario(lambda n: mock.launch(n), "mock")
    got = scenario(lambda n: sdk.launch(n), "rocprofiler")
    for (e_tree, _), (g_tree, g_dev) in zip(expected, got):
        assert shape(g_tree) == shape(e_tree)
        assert list(g_dev) == ["HIP"]


def test_roctracer_mock_gives_the_same_tree_as_the_mock_gpu(amd_backends, mock):
    _, tracer = amd_backends
    expected = scenario(lambda n: mock.launch(n), "mock")
    got = scenario(lambda n: tracer.launch(n), "roctracer")
    for (e_tree, _), (g_tree, g_dev) in zip(expected, got):
        assert shape(g_tree) == shape(e_tree)
        assert list(g_dev) == ["HIP"]
