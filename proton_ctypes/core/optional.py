"""Optional packages: import one for a feature, or raise an ImportError that says what to install.

``pip install proton_ctypes`` brings numpy and msgpack everywhere, and triton and cuda-python
only on Linux x86_64/aarch64 (where they have wheels): the host-only profiler and the viewer need
nothing else.  A feature that needs a missing package calls :func:`require` before it starts, so
the user reads which package (or ``proton_ctypes[extra]``) to install instead of a bare
``No module named ...`` later, in the middle of a run.  Imports nothing of proton_ctypes.
"""
from __future__ import annotations

import importlib
from typing import Optional, Sequence, Union

#: what ``pip install proton_ctypes`` brings on Linux (x86_64, aarch64) through environment markers
WITH_LINUX = ("triton", "cuda-python")


def missing_message(feature: str, package: str, extra: Optional[str] = None) -> str:
    """``"proton_ctypes: <feature> needs <package> (pip install ...)"``."""
    if extra:
        how = f"pip install proton_ctypes[{extra}]"
    elif package in WITH_LINUX:
        how = f"pip install {package}; on Linux it comes with proton_ctypes"
    else:
        how = f"pip install {package}"
    return f"proton_ctypes: {feature} needs {package} ({how})"


def require(feature: str, modules: Union[str, Sequence[str]], package: str, extra: Optional[str] = None):
    """Import and return the first of ``modules`` that imports; else raise ImportError naming ``package``.

    Args:
        feature: what the user asked for, as they wrote it (``"hook='triton'"``).
        modules: a module name, or alternatives tried in order (layouts of different versions).
        package: the distribution to install (``"triton"``).
        extra: the ``proton_ctypes[extra]`` that brings it, if one does.
    """
    names = (modules,) if isinstance(modules, str) else tuple(modules)
    first = None
    for name in names:
        try:
            return importlib.import_module(name)
        except ImportError as error:
            first = first or error
    raise ImportError(f"{missing_message(feature, package, extra)}: {first}", name=getattr(first, "name", None)) \
        from first
