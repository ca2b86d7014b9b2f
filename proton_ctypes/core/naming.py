"""Per-process output names: ``{rank}``, ``{local_rank}``, ``{world_size}``, ``{pid}``, ``{host}``.

Placeholders in a session name are expanded when the file is written.  The rank comes
from ``torch.distributed`` when it is initialised, else from the launcher variables
``RANK``, ``LOCAL_RANK`` and ``WORLD_SIZE`` (torchrun, deepspeed, accelerate ...), else 0.
The default name ``proton`` becomes ``proton.rank<r>`` in a job of several processes,
so two ranks never write the same file.
"""
from __future__ import annotations

import os
import socket
import string
import sys


def _env_int(*names, default=0) -> int:
    for n in names:
        v = os.environ.get(n)
        if v is not None and v.strip().lstrip("-").isdigit():
            return int(v)
    return default


def job_info() -> dict:
    """The placeholder values of this process."""
    rank = _env_int("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID")
    world = _env_int("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS", default=1)
    local = _env_int("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID")
    dist = sys.modules.get("torch.distributed")
    if dist is not None:
        try:
            if dist.is_available() and dist.is_initialized():
                rank, world = dist.get_rank(), dist.get_world_size()
        except Exception:
            pass
    return {"rank": rank, "local_rank": local, "world_size": world, "pid": os.getpid(),
            "host": socket.gethostname()}


def in_multiprocess_job() -> bool:
    """Whether launcher variables say this process is one of several ranks."""
    return job_info()["world_size"] > 1


def expand(name: str) -> str:
    """Replace the known placeholders of ``name``; other braces are left as they are."""
    if "{" not in name:
        return name
    info = job_info()
    out = []
    for literal, field, spec, conv in string.Formatter().parse(name):
        out.append(literal)
        if field is None:
            continue
        if field in info:
            out.append(format(info[field], spec or ""))
        else:
            out.append("{" + field + (("!" + conv) if conv else "") + ((":" + spec) if spec else "") + "}")
    return "".join(out)


def default_name(base: str) -> str:
    """The default session name: ``base``, or ``base.rank{rank}`` in a multi-rank job."""
    return f"{base}.rank{{rank}}" if in_multiprocess_job() else base
