"""``hooks.launch``'s context variables ``id``, ``op_name``, ``enabled`` and ``in_hook``, as
Proton 3.9 sets them around each launch (upstream ``test_hook_multiple_threads``)."""
import threading

import proton_ctypes as proton
from proton_ctypes.hooks import HookManager, LaunchHook
from proton_ctypes.hooks import launch as proton_launch
from test_launch_hook import FakeLazyDict, launch


def test_every_launch_gets_a_fresh_id_in_every_thread(mock, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    LaunchHook().configure()
    proton.start("ids", backend="mock", hook="triton")
    ids = []
    lock = threading.Lock()

    def worker(name):
        for _ in range(50):
            launch(mock, name, lambda n: {"name": n + "_test"})
            with lock:
                ids.append(proton_launch.id.get())

    threads = [threading.Thread(target=worker, args=(n,)) for n in ("foo", "bar")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    proton.finalize()
    assert len(set(ids)) == 100 and None not in ids


def test_op_name_is_the_evaluated_kernel_name(mock, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    LaunchHook().configure()
    proton.start("names", backend="mock", hook="triton")
    launch(mock, "foo", lambda n: {"name": "foo_n4096"})
    proton.finalize()
    assert proton_launch.op_name.get() == "foo_n4096"


def test_enabled_inside_a_launch_and_in_hook_while_metadata_is_evaluated(mock, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    LaunchHook().configure()
    proton.start("flags", backend="mock", hook="triton")
    seen = {}

    def meta(name):
        seen["in_hook"] = proton_launch.in_hook.get()
        seen["enabled_in_hook"] = proton_launch.enabled.get()
        return {"name": name}

    md = FakeLazyDict("k", meta)
    HookManager.enter(md)
    seen["enabled"] = proton_launch.enabled.get()
    seen["in_hook_after"] = proton_launch.in_hook.get()
    HookManager.exit(md)
    seen["enabled_after"] = proton_launch.enabled.get()
    proton.finalize()
    assert seen == {"in_hook": True, "enabled_in_hook": True, "enabled": True, "in_hook_after": False,
                    "enabled_after": False}


def test_variables_read_their_defaults_in_a_thread_that_never_launched():
    out = {}

    def fresh():
        out["id"] = proton_launch.id.get()
        out["default"] = proton_launch.op_name.get("none")
        out["enabled"] = proton_launch.enabled.get()

    t = threading.Thread(target=fresh)
    t.start()
    t.join()
    assert out == {"id": None, "default": "none", "enabled": False}
