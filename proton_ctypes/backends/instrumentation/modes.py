"""Instrumentation modes: Proton's string grammar, its errors, and what each option does.

``interpret_mode`` follows ``triton.profiler.hooks.instrumentation._interpret_mode`` of
3.9: ``None``/``""`` is ``"default"``; a string is ``name[:key=value]*`` with ``name`` in
``default``/``mma``; a mode object is taken as is.  Every field of 3.9's
``InstrumentationMode`` is either honoured or refused here, never dropped silently:

=====================  =======================================================================
option                 what happens
=====================  =======================================================================
metric_type            ``cycle`` (the only value Proton knows)
sampling_strategy      ``none``: every warp; ``selective``: the warps in ``sampling_options``
sampling_options       comma list of warp ids (checked against the kernel's warps at decode,
                       Proton's ``IndexError``)
granularity            ``warp`` only; the others compile but Proton cannot decode them:
                       refused at ``start`` with Proton's decode-time message
buffer_strategy        ``circular``; ``flush`` is rejected by Triton's pass at compile time
                       (``buffer-strategy '1' is not supported``), as with Proton
buffer_type            ``shared`` / ``global``: handed to the pass
buffer_size            bytes per CTA (0: the pass chooses), handed to the pass
optimizations          ``time_shift`` (trace timestamps minus the probe cost), ``sched_stores``
                       (extra pass), ``clock32`` (32-bit clock reads), ``sched_barriers``
                       (AMD pass; on NVIDIA it has no effect and a ``UserWarning`` says so)
=====================  =======================================================================

Option keys Proton does not know (``default:foo=1``) are ignored by Proton; we do the
same but warn once, since a typo would otherwise go unnoticed.
"""
from __future__ import annotations

import warnings
from typing import Dict, Union

from .. import mode_types as modes

KNOWN_KEYS = ("metric_type", "buffer_type", "buffer_strategy", "buffer_size", "granularity",
              "sampling_strategy", "sampling_options", "optimizations")

GRANULARITY_ERROR = "[PROTON] Only warp granularity is supported for now"


def interpret_mode(mode_obj: Union[None, str, modes.InstrumentationMode]) -> modes.InstrumentationMode:
    """Turn ``mode`` (None, string or mode object) into a mode object, with Proton's errors.

    Raises:
        ValueError: ``Malformed instrumentation option: '<opt>'`` (no ``=``),
            ``Unknown <field>: <v>``, ``Unknown optimization: <v>``, ``Unknown mode: <mode>``,
            or ``int()``'s own message for a non-integer ``buffer_size``.
    """
    if isinstance(mode_obj, modes.InstrumentationMode):
        return mode_obj
    if not mode_obj:
        mode_obj = "default"
    if not isinstance(mode_obj, str):
        mode_obj = str(mode_obj)
    parts = mode_obj.split(":")
    name = parts[0]
    opts: Dict[str, str] = {}
    for opt in parts[1:]:
        if "=" not in opt:
            raise ValueError(f"Malformed instrumentation option: '{opt}'")
        key, val = opt.split("=", 1)
        opts[key] = val
    unknown = [k for k in opts if k not in KNOWN_KEYS]
    options = {
        "metric_type": opts.get("metric_type", "cycle"),
        "buffer_type": opts.get("buffer_type", "shared"),
        "buffer_strategy": opts.get("buffer_strategy", "circular"),
        "buffer_size": int(opts.get("buffer_size", "0")),
        "granularity": opts.get("granularity", "warp"),
        "sampling_strategy": opts.get("sampling_strategy", "none"),
        "sampling_options": opts.get("sampling_options", ""),
        "optimizations": opts.get("optimizations", ""),
    }
    # Proton validates the enum fields in this order before building the object; an empty
    # value reaches the mode class, which reports it as unknown.
    lookups = (("metric_type", modes.metric_types), ("buffer_type", modes.buffer_types),
               ("buffer_strategy", modes.buffer_strategies), ("granularity", modes.granularities),
               ("sampling_strategy", modes.sampling_strategies))
    for field, lookup in lookups:
        value = options[field]
        if value and value not in lookup:
            raise ValueError(f"Unknown {field}: {value}")
    _check_optimizations(options["optimizations"])
    if name == "default":
        cls = modes.Default
    elif name == "mma":
        cls = modes.MMA
    else:
        raise ValueError(f"Unknown mode: {mode_obj}")
    result = cls(**options)
    if unknown:
        warnings.warn(f"proton_ctypes: instrumentation option(s) {', '.join(unknown)} are not known to Proton "
                      f"and have no effect (known: {', '.join(KNOWN_KEYS)})", UserWarning, stacklevel=3)
    return result


def _check_optimizations(value: str) -> None:
    names = [v.strip() for v in value.split(",")] if value else []
    for v in names:
        if v not in modes.optimizations:
            raise ValueError(f"Unknown optimization: {v}")


def enum_name(value) -> str:
    """The member name of a mode enum (ours or Triton's): ``GRANULARITY.WARP`` -> ``WARP``."""
    name = getattr(value, "name", None)
    if isinstance(name, str):
        return name
    return str(value).rsplit(".", 1)[-1]


def triton_enum(enum_type, value):
    """The ``triton._C.libtriton.proton`` enum member of the same name as ``value``."""
    return getattr(enum_type, enum_name(value))


def uses(mode_obj, opt) -> bool:
    """Whether optimization ``opt`` (a :class:`~proton_ctypes.mode.Optimize`) is on."""
    return any(getattr(o, "value", o) == opt.value for o in mode_obj.optimizations)


def check_supported(mode_obj, backend_name: str) -> None:
    """Refuse what Proton accepts but cannot decode; warn about what has no effect here.

    Raises:
        ValueError: a granularity other than ``warp`` (Proton's decode-time message).
    """
    if enum_name(mode_obj.granularity) != "WARP":
        raise ValueError(f"{GRANULARITY_ERROR} (granularity={enum_name(mode_obj.granularity)}: the "
                         "profile buffer of coarser granularities cannot be decoded by Proton either)")
    if uses(mode_obj, modes.Optimize.SCHED_BARRIERS) and backend_name != "amd":
        warnings.warn("proton_ctypes: optimization 'sched_barriers' only applies to AMD GPUs; on "
                      f"{backend_name} it has no effect (as in Proton)", UserWarning, stacklevel=3)


def sampling_uids(sampling_options: str, total_units: int):
    """The warp ids a kernel records (libproton's ``getUnitIdVector``): listed ids or all."""
    ids = []
    for tok in (sampling_options or "").split(","):
        if tok.strip():
            ids.append(int(tok))
    if not ids:
        ids = list(range(total_units))
    for uid in ids:
        if uid >= total_units:
            raise IndexError(f"[PROTON] Invalid sampling warp id: {uid}. We have {total_units} warps in total. "
                             "Please check the proton sampling options.")
    return ids
