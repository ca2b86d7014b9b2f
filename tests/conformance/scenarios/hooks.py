"""Hooks: the LaunchHook singleton and its activation, launch metadata through Triton's LazyDict.

Each scenario is ``def name(proton, out, rec)`` (see ``__init__``).
"""


def launch_hook_singleton(proton, out, rec):
    H = proton.hooks.LaunchHook
    a, b = H(), H()
    rec("same", a is b)
    rec("priority", a.priority)
    a.configure(include="add.*", exclude=".*_n4096")
    rec("match", [a._matches_kernel_name(n) for n in ("add_one", "mul", "add_one_n40960", None)])
    s = proton.start(out("lh"), hook="triton")
    t = proton.start(out("lh2"), hook="triton")
    HM = proton.hooks.HookManager
    rec("active", len(HM.active_hooks))
    proton.deactivate(s)
    rec("after_s", len(HM.active_hooks))
    proton.deactivate(t)
    rec("after_t", len(HM.active_hooks))
    proton.activate(s)
    rec("back", len(HM.active_hooks))
    proton.finalize()
    rec("end", len(HM.active_hooks))


def _hook_launch(proton, name, meta):
    """One Triton launch as the runtime makes it: the launch hooks around a LazyDict."""
    from triton.compiler.compiler import LazyDict
    md = LazyDict({"name": name, "function": 0, "stream": 0})
    md.add(lambda: dict(meta), ())
    proton.hooks.HookManager.enter(md)
    proton.hooks.HookManager.exit(md)


def launch_hook_metrics_over_launches(proton, out, rec):
    import numpy as np
    proton.hooks.LaunchHook().configure()
    proton.start(out("hm"), hook="triton")
    with proton.scope("s"):
        for i in range(3):
            _hook_launch(proton, "k", {"name": "k_op", "flops32": 100, "bytes": 10.9, "c": i, "last (pty)": i,
                                       "label": "x", "none": None})
        _hook_launch(proton, "k", {"name": "k_op", "flops32": 100, "bytes": 10, "c": 1, "label": 4, "none": 2.0})
        _hook_launch(proton, "k", {"name": "k_op", "c": np.int64(5), "f": np.float64(0.5)})
        _hook_launch(proton, "k", {"name": "k_op", "c": True})
    proton.finalize()


def _hook_launches_then_a_bad_one(proton, out, rec, name, good, bad):
    """Two launches with metadata ``good``, then one with ``bad``; record its ValueError.

    Proton records no launch after a failing one, so the scenario ends there (proton_ctypes
    keeps recording: tests/test_launch_hook_plans.py)."""
    proton.hooks.LaunchHook().configure()
    proton.start(out(name), hook="triton")
    with proton.scope("s"):
        for _ in range(2):
            _hook_launch(proton, "k", good)
        try:
            _hook_launch(proton, "k", bad)
        except ValueError as e:
            rec("error", str(e))
    proton.finalize()


def launch_hook_type_mismatch(proton, out, rec):
    _hook_launches_then_a_bad_one(proton, out, rec, "hmm", {"name": "k_op", "a": 1, "c": 2, "z": 3},
                                  {"name": "k_op", "a": 1, "c": 2.5, "z": 3})


def launch_hook_int_beyond_int64(proton, out, rec):
    _hook_launches_then_a_bad_one(proton, out, rec, "hmw", {"name": "k_op", "a": 1, "c": 2},
                                  {"name": "k_op", "a": 1, "c": 2 ** 70})


def launch_hook_metric_kind_fixed_by_first_launch(proton, out, rec):
    proton.hooks.LaunchHook().configure()
    proton.start(out("hk"), hook="triton")
    with proton.scope("s"):
        _hook_launch(proton, "k", {"name": "k_op", "lr (pty)": 0.5, "c": 1})
        _hook_launch(proton, "m", {"name": "m_op", "lr": 0.5, "c": 1})
        for value in (0.25, 0.125, 0.0625):   # repeats of one shape: the launch's plan
            _hook_launch(proton, "k", {"name": "k_op", "lr": value, "c": 1})
            _hook_launch(proton, "m", {"name": "m_op", "lr (pty)": value, "c": 1})
    proton.finalize()
