"""The version of proton_ctypes (``proton_ctypes.__version__``, ``proton --version``,
``proton-viewer --version``); ``pyproject.toml`` reads it from here.  Imports nothing."""

__version__ = "0.1.0"
