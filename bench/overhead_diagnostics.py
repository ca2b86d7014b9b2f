"""The diagnostic implementations of ``bench/overhead.py`` (``--impls``): CUPTI configurations and
launch hooks without a profiler around them, the floors under the profilers' figures.

Each is started before and stopped after every timed loop, like the profilers' sessions, and
counts what it is handed in ``delivered[0]`` (a no-op sink).
"""
from __future__ import annotations

#: Diagnostic implementations (``--impls``), each with a no-op sink: the CUPTI backend alone,
#: parsing every completed buffer at once (eager) or only at flush (lazy); the same backend with
#: kernel records only (no launch-API records); and a bare ``cuptiSubscribe`` with nothing
#: enabled (what merely attaching a CUPTI subscriber costs the driver's launch path).  Each
#: is started before and stopped after every timed loop, like the profilers' sessions.
#: The hook diagnostics measure, on the launch_metadata case, what any Python launch hook pays
#: before doing its own work: Triton's hook chain with an empty hook, with a hook that only
#: evaluates the metadata, and that hook under the CUPTI backend (lazy) -- the floor of ``hook="triton"``.
HOOK_DIAGNOSTIC_IMPLS = ("hook_empty", "hook_metadata", "cupti_hook_metadata")
#: The CUPTI floors (``bench/cupti_floor.py``): kernel records alone, with per-thread buffers, and
#: with the latency timestamps too (proton_ctypes's configuration), no Python of ours at all.
#: Their rows are ``bare`` rows with a ``floor`` key, as in ``bench/models.py``.
FLOOR_IMPLS = ("floor:kernels", "floor:per_thread", "floor:ours")
DIAGNOSTIC_IMPLS = (("cupti_eager", "cupti_lazy", "cupti_kernel_only", "cupti_subscribe_only") + HOOK_DIAGNOSTIC_IMPLS
                    + FLOOR_IMPLS)


def start(impl, delivered):
    """Start the diagnostic CUPTI configuration ``impl`` (see DIAGNOSTIC_IMPLS); ``stop()`` ends it."""
    import ctypes
    from proton_ctypes.backends.nvidia import layout as L
    from proton_ctypes.backends.cupti import CuptiBackend
    from proton_ctypes.backends.nvidia.lib import CALLBACK_FUNC, load_cupti

    def sink(batch):
        delivered[0] += len(batch)
    if impl in HOOK_DIAGNOSTIC_IMPLS:
        return _start_hook(impl, delivered)
    if impl in FLOOR_IMPLS:
        return _start_floor(impl)
    if impl == "cupti_subscribe_only":
        lib = load_cupti()
        handle, cb = ctypes.c_void_p(), CALLBACK_FUNC(lambda *a: None)
        lib.call("cuptiSubscribe", ctypes.byref(handle), cb, None)

        class Subscribed:
            def stop(self):
                lib.call("cuptiUnsubscribe", handle)
            keep = cb
        return Subscribed()
    backend = CuptiBackend(parse_batch_buffers=1 if impl == "cupti_eager" else 10**6)
    if impl == "cupti_kernel_only":
        def kernel_only(lib):
            lib.call("cuptiActivityEnable", L.KIND_CONCURRENT_KERNEL)
            backend._enabled_kinds.append(L.KIND_CONCURRENT_KERNEL)
        backend._enable_activity = kernel_only
    backend.start(sink)
    return backend


def _start_hook(impl, delivered):
    """Install the diagnostic launch hook ``impl`` in Triton's chain (with CUPTI for cupti_*)."""
    import triton
    chain = triton.knobs.runtime.launch_enter_hook
    fn = (lambda md: None) if impl == "hook_empty" else (lambda md: md.get())
    backend = start("cupti_lazy", delivered) if impl.startswith("cupti_") else None
    chain.add(fn)

    class Hooked:
        def stop(self):
            chain.remove(fn)
            if backend is not None:
                backend.stop()
    return Hooked()


def _start_floor(impl):
    """Switch on the CUPTI floor ``impl`` (``floor:<recipe>``); ``stop()`` switches it off."""
    from cupti_floor import floor_profiler
    floor = floor_profiler(impl)
    floor.start()

    class Floored:
        def stop(self):
            floor.finalize()
    return Floored()
