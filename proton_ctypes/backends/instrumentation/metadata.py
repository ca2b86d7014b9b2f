"""What the decoder needs to know about a compiled kernel, read when it is loaded.

From the kernel's metadata JSON: ``num_warps`` (the units of the buffer header) and
``profile_scratch_size`` (bytes per CTA).  From its TTGIR, through Triton's own helpers
``triton._C.libtriton.proton.get_scope_id_names/get_scope_id_parents`` (the ids the
lowering pass assigns): the scope names and their nesting, from which each scope's
path below the kernel node is built as Proton's ``initFunctionMetadata`` does.

Triton is imported inside the functions that use it (``# lazy``): it is optional (no wheels
on macOS and Windows), it takes seconds to import, and this module is imported without it.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Dict, Optional, Sequence, Tuple


#: function handle -> KernelInfo of every kernel loaded while instrumentation was on.  Process
#: wide, as libproton's function metadata: a kernel loaded under one session is launched
#: under later ones without being loaded again.
KERNELS: Dict[object, "KernelInfo"] = {}


@dataclass
class KernelInfo:
    """One loaded kernel (keyed by its function handle)."""

    name: str
    num_warps: int
    scratch: int
    names: Dict[int, str] = field(default_factory=dict)
    parents: Dict[int, int] = field(default_factory=dict)
    #: scope id -> frame names from the outermost scope down to this one
    paths: Dict[int, Tuple[str, ...]] = field(default_factory=dict)
    metadata_path: Optional[str] = None
    target: Optional[dict] = None

    @property
    def instrumented(self) -> bool:
        """Whether the compilation reserved profile scratch (the kernel has records)."""
        return self.scratch > 0


def scope_paths(names: Dict[int, str], parents: Dict[int, int]) -> Dict[int, Tuple[str, ...]]:
    """Each scope's path (outermost first) following ``parents``, as libproton builds it."""
    out = {}
    for sid in sorted(names):
        path = [names[sid]]
        cur = sid
        seen = {sid}
        while cur in parents:
            cur = parents[cur]
            if cur in seen or cur not in names:
                break
            seen.add(cur)
            path.append(names[cur])
        out[sid] = tuple(reversed(path))
    return out


def make_info(name: str, num_warps: int, scratch: int, scope_names: Sequence[Tuple[int, str]],
              scope_parents: Sequence[Tuple[int, int]], metadata_path: Optional[str] = None,
              target: Optional[dict] = None) -> KernelInfo:
    """A :class:`KernelInfo` from the pieces libproton's ``init_function_metadata`` takes."""
    names = {int(i): str(n) for i, n in scope_names}
    parents = {int(i): int(p) for i, p in scope_parents}
    return KernelInfo(name, int(num_warps), int(scratch), names, parents, scope_paths(names, parents),
                      metadata_path, target)


def read_ttgir_scopes(ir_path: str, backend: str):
    """``(names, parents)`` of the proton scopes in a TTGIR file, via libtriton."""
    from triton._C.libtriton import ir as triton_ir  # lazy
    from triton._C.libtriton import proton as tp  # lazy
    context = triton_ir.context()
    triton_ir.load_dialects(context)
    if backend == "nvidia":
        from triton._C.libtriton import nvidia  # lazy
        nvidia.load_dialects(context)
    elif backend == "amd":
        from triton._C.libtriton import amd  # lazy
        amd.load_dialects(context)
    tp.load_dialects(context)
    module = triton_ir.parse_mlir_module(ir_path, context)
    module.context = context
    return list(tp.get_scope_id_names(module)), list(tp.get_scope_id_parents(module))


def from_metadata_group(name: str, metadata_group: Dict[str, str], backend: str) -> KernelInfo:
    """Build the info of a kernel from Triton's ``metadata_group`` (file name -> path).

    Raises:
        RuntimeError: no TTGIR among the files (Proton's message).
    """
    ir_path = next((p for k, p in metadata_group.items() if k.endswith("ttgir")), None)
    md_path = next((p for k, p in metadata_group.items() if k.endswith("json")), None)
    md = {}
    if md_path:
        with open(md_path) as f:
            md = json.load(f)
    scratch = int(md.get("profile_scratch_size", 0) or 0)
    num_warps = int(md.get("num_warps", 0) or 0)
    if not ir_path:
        raise RuntimeError(f"IR path not found in metadata for function {name}")
    if scratch > 0:
        names, parents = read_ttgir_scopes(ir_path, backend)
    else:
        names, parents = [], []
    return make_info(name, num_warps, scratch, names, parents, md_path, md.get("target"))
