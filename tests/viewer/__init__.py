"""Tests of proton-viewer (proton_ctypes.viewer)."""
