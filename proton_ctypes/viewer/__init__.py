"""``proton-viewer``: print a Proton tree profile (or several as one), compare, gate regressions, write HTML.

Pure Python (numpy, msgpack and the standard library); it reads profile files only and imports neither
triton nor the rest of proton_ctypes.  Output is byte-identical to Proton 3.9's viewer except where
proton_ctypes deliberately differs (spec §0.3): see :mod:`.cli` and the modules it names.  Several files,
globs and period series are aggregated node by node: see :mod:`.inputs` and :mod:`.aggregate`.
"""

from .cli import main

__all__ = ["main"]
