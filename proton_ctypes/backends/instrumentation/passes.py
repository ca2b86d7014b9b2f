"""Registration of Triton's proton passes with Triton's compiler, for triton 3.6 to 3.9.

The passes are Triton's (``triton._C.libtriton.proton``); we only tell the compiler to
run them, exactly as Proton's ``InstrumentationHook.activate`` does:

* triton >= 3.7 (``triton._instrumentation`` exists): ``register_instrumentation`` at the
  points ``load-dialects``, ``ttgpuir-to-llvmir`` and ``llvmir-to-llvm`` for the backend;
* triton 3.6: an object with ``patch(ir, pm, context)`` / ``load_dialects(ctx)`` stored as
  ``triton.backends.backends[<backend>].compiler.instrumentation``; its
  ``llvmir_to_llvm`` step also runs ``add_allocate_proton_global_scratch_buffer``.

Nothing here imports ``triton._C.libproton``.

Triton is imported inside the functions that use it (``# lazy``): it is optional (no wheels
on macOS and Windows), it takes seconds to import, and this module is imported without it.
"""
from __future__ import annotations

from typing import Callable, Optional

from .. import mode_types as modes
from .modes import triton_enum, uses

POINTS = ("load-dialects", "ttgpuir-to-llvmir", "llvmir-to-llvm")


def backend_name() -> str:
    """``nvidia``/``amd`` for the active Triton target (Proton's error otherwise)."""
    import triton  # lazy
    backend = triton.runtime.driver.active.get_current_target().backend
    if backend == "cuda":
        return "nvidia"
    if backend == "hip":
        return "amd"
    raise RuntimeError(f"Unsupported backend: {backend}")


def _registration_api():
    """``(register, unregister)`` of triton >= 3.7, or None on older triton."""
    try:
        from triton._instrumentation import register_instrumentation, unregister_instrumentation  # lazy
    except ImportError:
        return None
    return register_instrumentation, unregister_instrumentation


def device_properties(device: int) -> dict:
    """``driver.active.utils.get_device_properties(device)`` (max_shared_mem, arch, ...)."""
    import triton  # lazy
    return triton.runtime.driver.active.utils.get_device_properties(device)


def make_pass_callbacks(mode_obj, backend: str, device: int, profile_buffer_size: int,
                        profile_buffer_alignment: int, legacy: bool):
    """The two pass-pipeline callbacks Proton registers: ``(to_llvmir, to_llvm)``."""
    from triton._C.libtriton import passes as triton_passes  # lazy
    from triton._C.libtriton import proton as tp  # lazy

    props = device_properties(device)
    max_shared_mem = props["max_shared_mem"]
    is_long_clk = not uses(mode_obj, modes.Optimize.CLOCK32)
    args = (triton_enum(tp.METRIC_TYPE, mode_obj.metric_type),
            triton_enum(tp.SAMPLING_STRATEGY, mode_obj.sampling_strategy),
            mode_obj.sampling_options,
            triton_enum(tp.GRANULARITY, mode_obj.granularity),
            triton_enum(tp.BUFFER_STRATEGY, mode_obj.buffer_strategy),
            triton_enum(tp.BUFFER_TYPE, mode_obj.buffer_type),
            mode_obj.buffer_size, max_shared_mem, profile_buffer_size, profile_buffer_alignment, is_long_clk)
    sched_stores = uses(mode_obj, modes.Optimize.SCHED_STORES)
    sched_barriers = uses(mode_obj, modes.Optimize.SCHED_BARRIERS) and backend == "amd"

    def to_llvmir(pm):
        tp.add_convert_proton_to_protongpu(pm, *args)
        triton_passes.common.add_cse(pm)
        if sched_stores:
            tp.add_schedule_buffer_store(pm)
        tp.add_allocate_proton_shared_memory(pm)
        if sched_barriers:
            tp.add_sched_barriers(pm)

    def to_llvm(pm):
        if legacy and hasattr(tp, "add_allocate_proton_global_scratch_buffer"):
            tp.add_allocate_proton_global_scratch_buffer(pm)
        if backend == "nvidia":
            tp.add_convert_proton_nvidia_gpu_to_llvm(pm)
        elif backend == "amd":
            arch = props["arch"].split(":")[0]
            tp.add_convert_proton_amd_gpu_to_llvm(pm, arch)

    return to_llvmir, to_llvm


class LegacyInstrumentation:
    """The object triton 3.6's compilers call (``compiler.instrumentation``)."""

    def __init__(self, ir_map):
        self.manager = ir_map

    def register(self, ir: str, func: Callable) -> None:
        """Add a callback for ``ir``; a second one for the same IR is an error (as in 3.6)."""
        if ir in self.manager:
            raise RuntimeError(f"IR already registered: {ir}")
        self.manager[ir] = func

    def patch(self, ir: str, pm, context) -> None:
        """Run the callback registered for ``ir`` on pass manager ``pm``."""
        self.load_dialects(context)
        if ir in self.manager:
            self.manager[ir](pm)

    def load_dialects(self, ctx) -> None:
        """Load the proton dialects into an MLIR context."""
        from triton._C.libtriton import proton as tp  # lazy
        tp.load_dialects(ctx)


class Registration:
    """The passes registered for one backend; ``remove`` undoes it."""

    def __init__(self, backend: str, legacy: bool, previous=None):
        self.backend = backend
        self.legacy = legacy
        self.previous = previous

    def remove(self) -> None:
        """Unregister every point (3.9) or restore the compiler's attribute (3.6)."""
        if self.legacy:
            from triton.backends import backends  # lazy
            comp = backends[self.backend].compiler
            comp.instrumentation = self.previous
            return
        api = _registration_api()
        if api is not None:
            for point in POINTS:
                api[1](point=point, backend=self.backend)


def register(mode_obj, backend: str, device: int, profile_buffer_size: int,
             profile_buffer_alignment: int) -> Registration:
    """Make Triton run the proton passes for ``mode_obj`` on every new compilation.

    Raises:
        RuntimeError: triton's ``Instrumentation already registered: ...`` when another
            instrumentation (e.g. real Proton) holds the points.
    """
    from triton._C.libtriton import proton as tp  # lazy
    api = _registration_api()
    legacy = api is None
    to_llvmir, to_llvm = make_pass_callbacks(mode_obj, backend, device, profile_buffer_size,
                                             profile_buffer_alignment, legacy)
    if legacy:
        from triton.backends import backends  # lazy
        comp = backends[backend].compiler
        previous = getattr(comp, "instrumentation", None)
        comp.instrumentation = LegacyInstrumentation({"ttgpuir_to_llvmir": to_llvmir, "llvmir_to_llvm": to_llvm})
        return Registration(backend, True, previous)
    reg, unreg = api
    done = []
    try:
        for point, cb in (("load-dialects", tp.load_dialects), ("ttgpuir-to-llvmir", to_llvmir),
                          ("llvmir-to-llvm", to_llvm)):
            reg(point=point, backend=backend, callback=cb)
            done.append(point)
    except Exception:
        for point in done:
            unreg(point=point, backend=backend)
        raise
    return Registration(backend, False)


def registered_callbacks(backend: str) -> Optional[dict]:
    """What the compiler would call now for ``backend`` (for tests and diagnostics)."""
    api = _registration_api()
    if api is None:
        from triton.backends import backends  # lazy
        inst = getattr(backends[backend].compiler, "instrumentation", None)
        return dict(inst.manager) if inst else None
    import triton._instrumentation as ti  # lazy
    return {p: cb for (p, b), cb in ti._callbacks.items() if b == backend}
