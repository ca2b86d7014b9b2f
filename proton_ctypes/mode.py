"""Mode objects for ``start(mode=...)``, as ``triton.profiler.mode``; ``str(mode)`` is the
mode string the backends parse.  Defined with the backends that read them
(:mod:`.backends.mode_types`)."""
from .backends.mode_types import *  # noqa: F401,F403
from .backends.mode_types import __all__  # noqa: F401
