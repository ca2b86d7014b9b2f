"""NVTX ranges as scopes (issue 17, item 6): with ``TRITON_ENABLE_NVTX`` on (the default),
``nvtxRangePushA`` / ``nvtxRangePop`` -- ``torch.cuda.nvtx.range_push`` / ``range_pop`` -- open
and close scopes on the calling thread, as Proton does through CUPTI's NVTX callbacks and
``NVTX_INJECTION64_PATH``.  Over the fake libcupti, which models NVTX's one-time read of the
injection variable and delivers ``CUpti_NvtxData`` as CUPTI lays it out.
"""
import os
import shutil
import subprocess
import threading

import pytest

import proton_ctypes as proton
from conftest import child_names, find, read_tree
from fakes.fake_cupti import (CBID_NVTX_RANGE_POP, CBID_NVTX_RANGE_PUSH_A, DOMAIN_NVTX, NVTX_DATA_FORMAT,
                              NVTX_PUSH_A_PARAMS_FORMAT, FakeCupti, FakeDriver)
from proton_ctypes.backends.modes import NO_MODE
from proton_ctypes.backends import select
from proton_ctypes.backends.cupti import CuptiBackend
from proton_ctypes.backends.nvidia import layout as L
from proton_ctypes.backends.nvidia import cbids
from proton_ctypes.backends.nvidia import nvtx as nvtx_env
from proton_ctypes.backends.nvidia.lib import CuptiLib
from proton_ctypes.core import nvtx as core_nvtx

INJECTION = "NVTX_INJECTION64_PATH"


@pytest.fixture
def cupti_path(tmp_path):
    path = tmp_path / "lib" / "libcupti.so.12"
    path.parent.mkdir()
    path.write_bytes(b"")
    return str(path)


@pytest.fixture
def make(monkeypatch, cupti_path):
    """``make(**fake_knobs)`` registers a CUPTI backend over a new fake whose library path is
    ``cupti_path`` (as a real load gives) and returns ``(fake, backend)``."""
    monkeypatch.delenv(INJECTION, raising=False)
    monkeypatch.delenv("TRITON_ENABLE_NVTX", raising=False)
    made = []

    def build(**knobs):
        fake = FakeCupti(**knobs)
        backend = CuptiBackend(lib=fake, driver=FakeDriver(fake))
        backend.lib = CuptiLib(fake, "test", cupti_path)
        select.register("cupti", lambda: backend)
        made.append(backend)
        return fake, backend
    yield build
    proton.finalize()
    select.unregister("cupti")
    core_nvtx._local.__dict__.pop("stack", None)


def _profile_ranges(fake, name="n"):
    """Proton's test_nvtx_range_push_pop, over the fake."""
    proton.start(name, backend="cupti")
    with proton.scope("proton_scope"):
        fake.nvtx_push("nvtx_range0")
        fake.nvtx_push("nvtx_range1")
        fake.launch("elementwise_kernel")
        fake.nvtx_pop()
        fake.nvtx_pop()
    proton.finalize()
    root, _ = read_tree(f"{name}.hatchet")
    assert child_names(root) == ["proton_scope"]
    return find(root, "proton_scope")


@pytest.mark.parametrize("value", [None, "1", "true", "ON"])
def test_ranges_are_nested_scopes_holding_the_kernel(make, monkeypatch, value):
    if value is not None:
        monkeypatch.setenv("TRITON_ENABLE_NVTX", value)
    fake, _ = make()
    scope = _profile_ranges(fake)
    assert child_names(scope) == ["nvtx_range0"]
    r0 = find(scope, "nvtx_range0")
    assert child_names(r0) == ["nvtx_range1"]
    r1 = find(r0, "nvtx_range1")
    assert child_names(r1) == ["elementwise_kernel"]
    assert find(r1, "elementwise_kernel")["metrics"]["count"] == 1


@pytest.mark.parametrize("value", ["0", "false", "off", "no"])
def test_knob_off_leaves_ranges_out(make, monkeypatch, value):
    monkeypatch.setenv("TRITON_ENABLE_NVTX", value)
    fake, backend = make()
    scope = _profile_ranges(fake)
    assert child_names(scope) == ["elementwise_kernel"]
    assert find(scope, "elementwise_kernel")["metrics"]["count"] == 1
    assert INJECTION not in os.environ
    assert not any(domain == DOMAIN_NVTX for domain, _ in fake.enabled_callbacks)


def test_triton_knob_turns_ranges_off(make, monkeypatch):
    triton = pytest.importorskip("triton")
    if not hasattr(getattr(triton, "knobs", None), "proton"):
        pytest.skip("this triton has no knobs.proton")
    fake, _ = make()
    triton.knobs.proton.enable_nvtx = False       # sets TRITON_ENABLE_NVTX, as Proton's test does
    try:
        scope = _profile_ranges(fake)
    finally:
        del triton.knobs.proton.enable_nvtx
        os.environ.pop("TRITON_ENABLE_NVTX", None)
    assert child_names(scope) == ["elementwise_kernel"]


def test_only_push_and_pop_callbacks_are_switched_on_and_off_again(make):
    fake, _ = make()
    proton.start("s", backend="cupti")
    on = {cbid for domain, cbid in fake.enabled_callbacks if domain == DOMAIN_NVTX}
    assert on == {CBID_NVTX_RANGE_PUSH_A, CBID_NVTX_RANGE_POP} == {cbids.NVTX_RANGE_PUSH_A,
                                                                   cbids.NVTX_RANGE_POP}
    proton.finalize()
    assert not fake.enabled_callbacks


def test_injection_path_is_the_loaded_cupti_while_profiling(make, cupti_path):
    fake, _ = make()
    proton.start("s", backend="cupti")
    assert os.environ[INJECTION] == os.path.abspath(cupti_path)
    proton.finalize()
    assert INJECTION not in os.environ                 # taken out again, as Proton's unsetenv


def test_an_injection_path_set_before_is_kept(make, monkeypatch):
    monkeypatch.setenv(INJECTION, "/opt/nsight/libToolsInjection64.so")
    fake, _ = make()
    proton.start("s", backend="cupti")
    assert os.environ[INJECTION] == "/opt/nsight/libToolsInjection64.so"
    proton.finalize()
    assert os.environ[INJECTION] == "/opt/nsight/libToolsInjection64.so"


def test_nvtx_used_before_profiling_never_reaches_cupti(make):
    """NVTX reads the injection variable once, at its first call (Proton has the same limit)."""
    fake, _ = make()
    fake.nvtx_push("early")
    fake.nvtx_pop()
    scope = _profile_ranges(fake)
    assert child_names(scope) == ["elementwise_kernel"]


def test_pop_closes_only_nvtx_scopes(make):
    fake, backend = make()
    proton.start("s", backend="cupti")
    proton.enter_scope("user")
    fake.nvtx_pop()                                    # nothing NVTX-opened: ignored
    fake.nvtx_push("r")
    fake.launch("k1")
    fake.nvtx_pop()
    fake.launch("k2")
    proton.exit_scope("user")
    stats = backend.stats
    proton.finalize()
    root, _ = read_tree("s.hatchet")
    assert find(root, "user", "r", "k1")["metrics"]["count"] == 1
    assert find(root, "user", "k2")["metrics"]["count"] == 1
    assert stats["nvtx_unmatched_pops"] == 1 and stats["nvtx_errors"] == 0 and stats["nvtx_scopes"]


def test_a_scope_closed_inside_a_range_keeps_the_range_open(make):
    fake, _ = make()
    proton.start("s", backend="cupti")
    fake.nvtx_push("r")
    with proton.scope("inner"):
        fake.launch("k1")
    fake.launch("k2")
    fake.nvtx_pop()
    fake.launch("k3")
    proton.finalize()
    root, _ = read_tree("s.hatchet")
    assert find(root, "r", "inner", "k1")["metrics"]["count"] == 1
    assert find(root, "r", "k2")["metrics"]["count"] == 1
    assert find(root, "k3")["metrics"]["count"] == 1


def test_ranges_are_per_thread(make):
    fake, _ = make()
    proton.start("s", backend="cupti")
    barrier = threading.Barrier(2)

    def work(tag):
        fake.nvtx_push(f"range_{tag}")
        barrier.wait()                                  # both ranges open at once
        fake.launch(f"k_{tag}")
        barrier.wait()
        fake.nvtx_pop()
    threads = [threading.Thread(target=work, args=(t,)) for t in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    proton.finalize()
    root, _ = read_tree("s.hatchet")
    assert sorted(child_names(root)) == ["range_a", "range_b"]
    assert child_names(find(root, "range_a")) == ["k_a"]
    assert child_names(find(root, "range_b")) == ["k_b"]


def test_a_null_message_is_an_empty_name(make):
    fake, backend = make()
    proton.start("s", backend="cupti")
    fake.nvtx_push(None)
    fake.launch("k")
    fake.nvtx_pop()
    errors = backend.stats["nvtx_errors"]
    proton.finalize()
    root, _ = read_tree("s.hatchet")
    assert errors == 0
    assert find(root, "", "k")["metrics"]["count"] == 1


def test_ranges_work_again_in_a_later_session(make):
    fake, _ = make()
    assert child_names(_profile_ranges(fake, "first")) == ["nvtx_range0"]
    assert child_names(_profile_ranges(fake, "second")) == ["nvtx_range0"]


def test_a_range_left_open_at_finalize_is_harmless(make):
    fake, _ = make()
    proton.start("first", backend="cupti")
    fake.nvtx_push("left_open")
    proton.finalize()
    scope = _profile_ranges(fake, "second")
    assert child_names(scope) == ["nvtx_range0"]


def test_a_refused_nvtx_domain_warns_once_and_profiles_on(make):
    fake, backend = make(refuse_domains={DOMAIN_NVTX})
    with pytest.warns(RuntimeWarning, match="NVTX ranges are not recorded as scopes"):
        proton.start("s", backend="cupti")
    assert INJECTION not in os.environ
    with proton.scope("proton_scope"):
        fake.nvtx_push("r")
        fake.launch("k")
        fake.nvtx_pop()
    proton.finalize()
    root, _ = read_tree("s.hatchet")
    assert find(root, "proton_scope", "k")["metrics"]["count"] == 1


def test_failing_scope_functions_never_raise_into_cupti(make):
    fake, backend = make()

    def boom(*args):
        raise RuntimeError("boom")
    backend.nvtx_scopes = (boom, boom)
    backend.start(lambda batch: None, NO_MODE)
    try:
        fake.nvtx_push("r")
        fake.nvtx_pop()
        assert backend.stats["nvtx_errors"] == 2
    finally:
        backend.stop()


def test_a_backend_without_scope_functions_leaves_nvtx_alone(monkeypatch):
    monkeypatch.delenv(INJECTION, raising=False)
    fake = FakeCupti()
    backend = CuptiBackend(lib=fake, driver=FakeDriver(fake))
    backend.start(lambda batch: None, NO_MODE)
    try:
        assert not any(domain == DOMAIN_NVTX for domain, _ in fake.enabled_callbacks)
        assert INJECTION not in os.environ
    finally:
        backend.stop()


def test_knob_reading_is_protons():
    env = os.environ.copy()
    try:
        os.environ.pop(nvtx_env.ENABLE_ENV, None)
        assert nvtx_env.enabled()
        for value, expected in (("1", True), ("True", True), ("on", True), ("0", False), ("yes", False),
                                ("", False)):
            os.environ[nvtx_env.ENABLE_ENV] = value
            assert nvtx_env.enabled() is expected, value
    finally:
        os.environ.clear()
        os.environ.update(env)


# ------------------------------------------------------------------ layouts against the CUPTI headers
_NVTX_STUBS = ("typedef struct nvtxEventAttributes_v2 nvtxEventAttributes_t; typedef unsigned long long nvtxRangeId_t; "
               "typedef struct nvtxDomainRegistration_st *nvtxDomainHandle_t; "
               "typedef struct nvtxSyncUserAttributes_v0 nvtxSyncUserAttributes_t; "
               "typedef struct nvtxSync_st *nvtxSyncUser_t;")


def _include_dir():
    import importlib.util
    spec = importlib.util.find_spec("triton")
    for root in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(root, "backends", "nvidia", "include")
        if os.path.exists(os.path.join(path, "generated_nvtx_meta.h")):
            return path
    return None


def test_nvtx_layout_and_ids_match_the_headers(tmp_path):
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    include = _include_dir()
    if compiler is None or include is None:
        pytest.skip("no C compiler or no CUPTI headers (triton/backends/nvidia/include) on this machine")
    source = tmp_path / "probe.c"
    source.write_text("\n".join([
        "#include <stdio.h>", "#include <stddef.h>", "#include <cupti.h>", _NVTX_STUBS,
        "#include <generated_nvtx_meta.h>", "int main(void) {",
        'printf("%zu %zu %zu %zu %zu\\n", offsetof(CUpti_NvtxData, functionParams), sizeof(CUpti_NvtxData),'
        " offsetof(nvtxRangePushA_params, message), sizeof(nvtxRangePushA_params), sizeof(nvtxRangePop_params));",
        'printf("%d %d %d\\n", (int)CUPTI_CB_DOMAIN_NVTX, (int)CUPTI_CBID_NVTX_nvtxRangePushA,'
        " (int)CUPTI_CBID_NVTX_nvtxRangePop);",
        "return 0; }"]))
    binary = tmp_path / "probe"
    build = subprocess.run([compiler, f"-I{include}", str(source), "-o", str(binary)], capture_output=True, text=True)
    if build.returncode != 0:
        pytest.skip(f"the NVTX header probe did not compile: {build.stderr[-500:]}")
    line1, line2 = subprocess.run([str(binary)], capture_output=True, text=True, check=True).stdout.split("\n")[:2]
    params_at, data_size, message_at, push_size, pop_size = map(int, line1.split())
    domain, push, pop = map(int, line2.split())
    # the backend's table
    assert (params_at, message_at) == (L.NVTXDATA_PARAMS_OFFSET, L.NVTX_PUSH_A_MESSAGE_OFFSET)
    assert (domain, push, pop) == (cbids.CB_DOMAIN_NVTX, cbids.NVTX_RANGE_PUSH_A, cbids.NVTX_RANGE_POP)
    # the fake's own formats
    assert data_size == NVTX_DATA_FORMAT.size and push_size == NVTX_PUSH_A_PARAMS_FORMAT.size == pop_size
    assert (domain, push, pop) == (DOMAIN_NVTX, CBID_NVTX_RANGE_PUSH_A, CBID_NVTX_RANGE_POP)
