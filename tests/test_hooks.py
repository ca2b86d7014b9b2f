"""Hooks: the ``Hook`` interface and ``HookManager``, which keeps the
hooks of each session and dispatches Triton's runtime callbacks to the active ones.

The launch hook (``hook="triton"``) is in ``test_launch_hook.py`` and
``test_launch_hook_plans.py``.  Expected behaviour is that of Proton 3.9's
``hooks/hook.py`` (``conformance/scenarios/hooks.py`` runs it under the real one).
"""
import pytest

import proton_ctypes as proton
from proton_ctypes.hooks import HookManager
from proton_ctypes.hooks.hook import Hook


class Recorder(Hook):
    """A hook that logs every call into ``log``."""

    def __init__(self, tag, log, priority=0):
        self.tag, self.log, self.priority = tag, log, priority

    def init_handle(self, *args):
        self.log.append(("init_handle", self.tag))

    def destroy_handle(self, *args):
        self.log.append(("destroy_handle", self.tag))

    def enter(self, md):
        self.log.append(("enter", self.tag))

    def exit(self, md):
        self.log.append(("exit", self.tag))

    def activate(self):
        self.log.append(("activate", self.tag))

    def deactivate(self):
        self.log.append(("deactivate", self.tag))


# --- Hook -----------------------------------------------------------------------------------

def test_hook_base_has_priority_zero_and_abstract_callbacks():
    h = Hook()
    assert Hook.priority == 0
    for call in (lambda: h.init_handle(None, None, "k", {}, "h"), lambda: h.enter(None), lambda: h.exit(None),
                 h.activate, h.deactivate):
        with pytest.raises(NotImplementedError):
            call()


def test_hook_base_destroy_handle_does_nothing():
    assert Hook().destroy_handle(None, None, "k", {}, "h") is None


# --- HookManager ----------------------------------------------------------------------------

def test_start_with_a_hook_instance_registers_and_activates_it_for_the_session():
    log = []
    h = Recorder("h", log)
    s = proton.start("hk", backend="host", hook=h)
    assert HookManager.active_hooks == [h]
    assert dict(HookManager.session_hooks[s]) == {h: True}
    assert log == [("activate", "h")]


def test_a_hook_held_by_two_sessions_is_activated_once():
    log = []
    h = Recorder("h", log)
    proton.start("a", backend="host", hook=h)
    proton.start("b", backend="host", hook=h)
    assert HookManager.active_hooks == [h]
    assert log == [("activate", "h")]


def test_active_hooks_are_sorted_by_priority_highest_first_and_stable():
    log = []
    low, high, low2 = Recorder("low", log, 1), Recorder("high", log, 5), Recorder("low2", log, 1)
    s = proton.start("p", backend="host", hook=low)
    for h in (high, low2):
        HookManager.register(h, s)
    assert [h.tag for h in HookManager.active_hooks] == ["high", "low", "low2"]


def test_hooks_are_entered_by_priority_and_exited_in_reverse():
    log = []
    s = proton.start("p", backend="host", hook=Recorder("low", log, 1))
    HookManager.register(Recorder("high", log, 5), s)
    del log[:]
    HookManager.init_handle(None, None, "k", {}, "h")
    HookManager.enter(None)
    HookManager.exit(None)
    HookManager.destroy_handle(None, None, "k", {}, "h")
    assert log == [("init_handle", "high"), ("init_handle", "low"), ("enter", "high"), ("enter", "low"),
                   ("exit", "low"), ("exit", "high"), ("destroy_handle", "low"), ("destroy_handle", "high")]


def test_a_hook_stays_active_while_any_session_holds_it():
    log = []
    h = Recorder("h", log)
    s = proton.start("a", backend="host", hook=h)
    t = proton.start("b", backend="host", hook=h)
    proton.deactivate(s)
    still = list(HookManager.active_hooks)
    proton.deactivate(t)
    assert still == [h]
    assert HookManager.active_hooks == []
    assert log == [("activate", "h"), ("deactivate", "h")]


def test_activating_a_session_activates_its_hooks_again():
    log = []
    h = Recorder("h", log)
    s = proton.start("a", backend="host", hook=h)
    proton.deactivate(s)
    proton.activate(s)
    assert HookManager.active_hooks == [h]
    assert log == [("activate", "h"), ("deactivate", "h"), ("activate", "h")]


def test_finalizing_a_session_deactivates_the_hooks_no_other_session_holds():
    log = []
    shared, own = Recorder("shared", log), Recorder("own", log)
    s = proton.start("a", backend="host", hook=shared)
    HookManager.register(own, s)
    proton.start("b", backend="host", hook=shared)
    proton.finalize(s)
    assert HookManager.active_hooks == [shared]
    assert s not in HookManager.session_hooks
    assert ("deactivate", "own") in log and ("deactivate", "shared") not in log


def test_finalize_of_every_session_deactivates_and_forgets_every_hook():
    log = []
    proton.start("a", backend="host", hook=Recorder("h", log))
    proton.finalize()
    assert HookManager.active_hooks == [] and len(HookManager.session_hooks) == 0
    assert log == [("activate", "h"), ("deactivate", "h")]


def test_unregister_of_an_unknown_session_changes_nothing():
    log = []
    h = Recorder("h", log)
    proton.start("a", backend="host", hook=h)
    HookManager.unregister(12345)
    assert HookManager.active_hooks == [h] and log == [("activate", "h")]
