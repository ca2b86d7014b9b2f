"""Sessions: ``start``, ``activate``, ``deactivate``, ``finalize``, ``profile``.

Session ids come from one process-wide counter, so these tests compare ids with each other,
never with 0.  Expected values are those real Proton 3.9 gives
(``conformance/scenarios/profile.py``); output files themselves are in ``test_writers.py``.
"""
import errno
import json
import os
import sys
import warnings
from pathlib import Path

import pytest

import proton_ctypes as proton
from conftest import written
from proton_ctypes.flags import flags

UNKNOWN = "[PROTON] Session has not been initialized: 99"


# --- start ----------------------------------------------------------------------------------

def test_start_returns_consecutive_ids_that_are_never_reused():
    ids = []
    for i in range(3):
        ids.append(proton.start(f"i{i}", backend="host"))
        proton.finalize()
    assert all(isinstance(i, int) for i in ids)
    assert [i - ids[0] for i in ids] == [0, 1, 2]
    assert sorted(os.listdir(".")) == ["i0.hatchet", "i1.hatchet", "i2.hatchet"]


def test_start_without_a_name_writes_proton_hatchet_in_the_working_directory(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert proton.DEFAULT_PROFILE_NAME == "proton"
    proton.start(backend="host")
    with proton.scope("a"):
        pass
    proton.finalize()
    assert written("proton") == {"a": {}}


def test_start_with_the_name_of_a_live_session_returns_that_session_and_ignores_other_arguments():
    a = proton.start("r2", backend="host")
    b = proton.start("r2", backend="host", data="trace")
    with proton.scope("x"):
        pass
    proton.finalize()
    assert a == b
    assert os.listdir(".") == ["r2.hatchet"]
    assert written("r2") == {"x": {}}


def test_start_with_the_name_of_a_deactivated_session_activates_it_again():
    a = proton.start("r2", backend="host")
    proton.deactivate(a)
    with proton.scope("skipped"):
        pass
    assert proton.start("r2", backend="host") == a
    with proton.scope("y"):
        pass
    proton.finalize()
    assert written("r2") == {"y": {}}


def test_start_sets_profiling_on_even_when_it_raises():
    with pytest.raises(ValueError):
        proton.start("e", backend="host", context="nope")
    assert flags.profiling_on is True


@pytest.mark.parametrize("kwargs,message", [
    ({"context": "nope"}, "[PROTON] Unknown context source: nope"),
    ({"data": "nope"}, "[PROTON] Unknown data: nope"),
    ({"backend": "nope"}, "[PROTON] Unknown profiler: nope"),
    ({"hook": "nope"}, "Unsupported hook: 'nope'"),
], ids=["context", "data", "backend", "hook"])
def test_start_with_an_unknown_argument_raises_value_error(kwargs, message):
    kwargs.setdefault("backend", "host")
    with pytest.raises(ValueError) as e:
        proton.start("e", **kwargs)
    assert str(e.value) == message


@pytest.mark.parametrize("kwargs,message", [
    ({"backend": "bad", "context": "bad", "data": "bad"}, "[PROTON] Unknown profiler: bad"),
    ({"backend": "host", "context": "bad", "data": "bad"}, "[PROTON] Unknown context source: bad"),
], ids=["backend_first", "context_before_data"])
def test_start_reports_the_bad_backend_then_context_then_data(kwargs, message):
    with pytest.raises(ValueError) as e:
        proton.start("e", **kwargs)
    assert str(e.value) == message


class RefusingHook(proton.hooks.hook.Hook):
    """A hook whose activation fails (as an instrumentation hook does when another is active)."""

    def activate(self):
        raise RuntimeError("cannot activate")

    def deactivate(self):
        raise AssertionError("never activated: must not be deactivated")


@pytest.mark.parametrize("kwargs, error", [
    ({"hook": "nope"}, ValueError), ({"hook": RefusingHook()}, RuntimeError), ({"context": "nope"}, ValueError),
    ({"data": "nope"}, ValueError), ({"mode": "nope"}, ValueError), ({"backend": "nope"}, ValueError),
    ({"name": 5}, TypeError), ({"backend": "host", "hook": "triton", "mode": "nope"}, ValueError),
], ids=["hook", "hook_that_cannot_activate", "context", "data", "mode", "backend", "name", "mode_with_hook"])
def test_a_start_that_raises_leaves_no_session_behind(kwargs, error):
    # Proton creates the session before it rejects the hook: a later finalize writes it
    from proton_ctypes.core.registry import G
    kwargs.setdefault("backend", "host")
    with pytest.raises(error):
        proton.start(kwargs.pop("name", "left"), **kwargs)
    assert G.sessions == {} and proton.hooks.HookManager.active_hooks == []
    with proton.scope("after"):
        pass
    proton.finalize()
    assert os.listdir(".") == []


def test_a_bad_hook_for_a_live_name_keeps_that_session():
    s = proton.start("live", backend="host")
    with pytest.raises(ValueError, match="Unsupported hook"):
        proton.start("live", backend="host", hook="nope")
    with proton.scope("kept"):
        pass
    proton.finalize(s)
    assert written("live") == {"kept": {}}


def test_start_returns_none_and_records_nothing_when_disabled(monkeypatch):
    monkeypatch.setenv("TRITON_PROTON_DISABLE", "1")
    assert proton.start("dis", backend="host") is None
    with proton.scope("a") as s:
        assert s.id is None
    proton.finalize()
    assert os.listdir(".") == []


def test_start_without_a_gpu_selects_the_host_backend_with_one_warning():
    # a deliberate difference (README): Proton raises RuntimeError ("0 active drivers")
    from proton_ctypes.backends import select
    select._warned = False
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        proton.start("auto")
        proton.finalize()
        proton.start("auto2")
        proton.finalize()
    if not select._warned:
        pytest.skip("a GPU driver is usable here")
    assert len([x for x in w if "host-only backend" in str(x.message)]) == 1
    assert sorted(os.listdir(".")) == ["auto.hatchet", "auto2.hatchet"]


def test_start_exports_the_knob_defaults_to_the_environment(monkeypatch):
    for k in ("TRITON_PROFILE_BUFFER_SIZE", "TRITON_PROFILE_METRIC_BUFFER_SIZE", "TRITON_ENABLE_NVTX",
              "TRITON_PROTON_DISABLE", "TRITON_ENABLE_HW_TRACE", "TRITON_ROCTX_LIBRARY"):
        monkeypatch.delenv(k, raising=False)
    proton.start("kn", backend="host")
    expected = {
        "TRITON_PROFILE_BUFFER_SIZE": "67108864", "TRITON_PROFILE_METRIC_BUFFER_SIZE": "67108864",
        "TRITON_ENABLE_NVTX": "1", "TRITON_PROTON_DISABLE": "0", "TRITON_ENABLE_HW_TRACE": "0",
        "TRITON_ROCTX_LIBRARY": "libroctx64.so"}
    pk = getattr(getattr(sys.modules.get("triton"), "knobs", None), "proton", None)
    if pk is not None:  # triton loaded: the knobs of its own Proton are the ones exported, as it does
        keys = {d.key for d in pk.knob_descriptors.values()}
        expected = {k: v for k, v in expected.items() if k in keys}
    assert {k: os.environ.get(k) for k in expected} == expected


# --- several sessions, activate / deactivate ----------------------------------------------------

def test_each_active_session_records_every_scope_independently():
    s1 = proton.start("s1", backend="host")
    with proton.scope("both"):
        pass
    s2 = proton.start("s2", backend="host")
    with proton.scope("both2"):
        pass
    proton.deactivate(s1)
    with proton.scope("only_s2"):
        pass
    proton.activate(s1)
    proton.deactivate(s2)
    with proton.scope("only_s1"):
        pass
    proton.finalize()
    assert s2 == s1 + 1
    assert written("s1") == {"both": {}, "both2": {}, "only_s1": {}}
    assert written("s2") == {"both2": {}, "only_s2": {}}


def test_a_scope_open_across_deactivate_and_activate_stays_the_parent():
    s = proton.start("d", backend="host")
    with proton.scope("outer"):
        proton.deactivate(s)
        with proton.scope("skipped"):
            pass
        proton.activate(s)
        with proton.scope("counted"):
            pass
    proton.finalize()
    assert written("d") == {"outer": {}, "outer/counted": {}}


def test_activate_and_deactivate_without_a_session_act_on_every_session():
    proton.start("a1", backend="host")
    proton.start("a2", backend="host")
    proton.deactivate()
    with proton.scope("off"):
        pass
    proton.activate()
    with proton.scope("on"):
        pass
    proton.finalize()
    assert written("a1") == written("a2") == {"on": {}}


def test_a_scope_entered_while_deactivated_and_exited_after_activate_closes_quietly():
    # Proton raises RuntimeError("[PROTON] Context stack is empty") at the exit; the files are the same
    s = proton.start("da", backend="host")
    proton.deactivate(s)
    with proton.scope("unrecorded", {"m": 1}):
        proton.activate(s)
    with proton.scope("after"):
        pass
    proton.finalize()
    assert written("da") == {"after": {}}


@pytest.mark.parametrize("trace", [False, True])
def test_a_scope_exited_after_activate_turned_on_a_session_that_missed_its_entry_closes_where_it_was_entered(
        trace):
    # a deliberate difference (README): Proton raises RuntimeError("[PROTON] Context stack is empty")
    # at the exit and leaves "a" open in the session that saw it enter: "later" nests under it there,
    # and a trace has no event for it (its "later" is at ROOT/a/later)
    missed = proton.start("missed", backend="host")
    proton.deactivate(missed)
    saw = proton.start("saw", backend="host", data="trace" if trace else "tree")
    with proton.scope("a"):
        proton.activate(missed)
    with proton.scope("later"):
        pass
    proton.finalize()
    assert written("missed") == {"later": {}}
    if trace:
        events = json.loads(Path("saw.chrome_trace").read_text())["traceEvents"]
        assert sorted((e["name"], e["args"]["call_stack"]) for e in events) == [
            ("a", ["ROOT", "a"]), ("later", ["ROOT", "later"])]
    else:
        assert written("saw") == {"a": {}, "later": {}}
    assert saw != missed


def test_activate_and_deactivate_twice_are_harmless():
    s = proton.start("twice", backend="host")
    proton.activate(s)
    proton.activate(s)
    with proton.scope("a"):
        pass
    proton.deactivate(s)
    proton.deactivate(s)
    proton.finalize()
    assert written("twice") == {"a": {}}


@pytest.mark.parametrize("call", ["activate", "deactivate"])
def test_activate_or_deactivate_of_an_unknown_session_raises_index_error(call):
    proton.start("u", backend="host")
    with pytest.raises(IndexError) as e:
        getattr(proton, call)(99)
    assert str(e.value) == UNKNOWN


# --- finalize -------------------------------------------------------------------------------

def test_finalize_of_one_session_writes_it_and_keeps_profiling_on():
    s1 = proton.start("f1", backend="host")
    proton.start("f2", backend="host")
    proton.finalize(s1)
    assert os.listdir(".") == ["f1.hatchet"]
    assert flags.profiling_on is True
    proton.finalize()
    assert flags.profiling_on is False
    assert sorted(os.listdir(".")) == ["f1.hatchet", "f2.hatchet"]


def test_finalize_inside_an_open_scope_writes_the_scope_and_its_exit_does_not_raise():
    s = proton.start("fo", backend="host")
    with proton.scope("a"):
        proton.finalize(s)
    assert flags.profiling_on is True
    assert written("fo") == {"a": {}}


def test_finalize_of_an_unknown_or_finalized_session_does_nothing():
    s = proton.start("ff", backend="host")
    proton.finalize(s)
    assert proton.finalize(s) is None
    assert proton.finalize(99) is None
    assert os.listdir(".") == ["ff.hatchet"]


def test_finalize_without_any_session_does_nothing():
    proton.finalize()
    assert os.listdir(".") == [] and flags.profiling_on is False


def test_finalize_creates_the_missing_folders_of_the_name():
    # Proton writes nothing there and says nothing (conformance scenario finalize_into_a_missing_folder)
    s = proton.start(os.path.join("results", "run1", "prof"), backend="host")
    with proton.scope("a"):
        pass
    proton.data.advance_phase(s)
    proton.finalize()
    assert sorted(os.listdir(os.path.join("results", "run1"))) == ["prof.part_0.hatchet", "prof.part_1.hatchet"]


@pytest.mark.parametrize("one", [True, False], ids=["finalize_session", "finalize_all"])
def test_a_failed_write_keeps_the_session_alive_and_the_error_says_so(monkeypatch, one):
    from proton_ctypes import _atomic

    def full_disk(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device", src, None, dst)  # as os.replace names them
    s = proton.start("kept", backend="host")
    with proton.scope("a", {"m": 1}):
        pass
    # a context of its own: monkeypatch.undo() would also undo the fixture's chdir into tmp_path
    with monkeypatch.context() as m:
        m.setattr(_atomic.os, "replace", full_disk)
        with pytest.raises(OSError) as e:
            proton.finalize(s if one else None)
    assert (e.value.errno, str(e.value)) == (errno.ENOSPC, (
        "[Errno 28] No space left on device: 'kept.hatchet': the profile 'kept' was not written and session "
        f"{s} is still alive; fix the cause and call finalize again"))
    assert os.listdir(".") == []  # no part, no temporary file
    assert proton.data.get(s)[0]["children"][0]["metrics"] == {"m": 1}
    proton.finalize()
    assert written("kept") == {"a": {"m": 1}}


def test_a_failed_write_keeps_only_that_session_alive():
    (Path(".") / "blocked.hatchet").mkdir()  # the file cannot replace a folder
    a = proton.start("fine", backend="host")
    b = proton.start("blocked", backend="host")
    with pytest.raises(IsADirectoryError, match=f"session {b} is still alive"):
        proton.finalize()
    assert os.path.exists("fine.hatchet")
    with pytest.raises(IndexError):
        proton.data.get(a)
    assert proton.data.get(b)[0]["frame"]["name"] == "ROOT"


# --- the profile decorator ------------------------------------------------------------------

def test_profile_decorator_starts_and_deactivates_around_each_call_and_writes_at_finalize():
    @proton.profile(name="deco", backend="host")
    def run(x):
        with proton.scope("inside"):
            pass
        return x + 1
    assert [run(1), run(2)] == [2, 3]
    assert run.__name__ == "run"
    with proton.scope("between_calls"):  # the session is deactivated, not finalized
        pass
    assert os.listdir(".") == []
    proton.finalize()
    assert written("deco") == {"inside": {}}


def test_bare_profile_decorator_uses_the_default_name(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)

    @proton.profile
    def bare():
        with proton.scope("in_bare"):
            pass
        return "ok"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert bare() == "ok"
    proton.finalize()
    assert written("proton") == {"in_bare": {}}


def test_profile_decorator_leaves_the_session_active_when_the_function_raises():
    @proton.profile(name="r", backend="host")
    def boom():
        raise KeyError("x")
    with pytest.raises(KeyError):
        boom()
    with proton.scope("after_boom"):
        pass
    proton.finalize()
    assert written("r") == {"after_boom": {}}


# --- command-line mode (the proton command sets flags.command_line) ------------------------------

def test_start_returns_none_under_the_proton_command():
    flags.command_line = True
    assert proton.start("ignored", backend="host") is None
    assert not os.path.exists("ignored.hatchet")


@pytest.mark.parametrize("call,verb", [("activate", "activated"), ("deactivate", "deactivated"),
                                       ("finalize", "finalized")])
def test_only_session_zero_may_be_named_under_the_proton_command(call, verb):
    flags.command_line = True
    with pytest.raises(ValueError) as e:
        getattr(proton, call)(1)
    assert str(e.value) == f"Only one session can be {verb} when running from the command line."
