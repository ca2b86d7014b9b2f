"""The instrumentation backend (``backend="instrumentation"``), in pure Python.

Triton itself owns the compiler passes that insert the probes (``triton._C.libtriton.
proton``: convert-proton-to-protongpu, allocate-proton-shared-memory, the NVIDIA/AMD
lowering); Proton's C++ part only hands the kernel a profile buffer and decodes it.
This package does those two jobs without libproton:

* :mod:`.modes`     -- the instrumentation mode (strings, objects) with Proton's errors;
* :mod:`.passes`    -- registration of Triton's passes (3.6's ``compiler.instrumentation``
  object or 3.9's ``triton._instrumentation.register_instrumentation``);
* :mod:`.allocator` -- the 128-byte aligned profile-buffer allocator (torch);
* :mod:`.metadata`  -- per kernel: scope names/parents from its TTGIR, warps, scratch size;
* :mod:`.decode`    -- the buffer decoder (headers, per-warp circular segments, 64/32-bit
  clocks, async events) in numpy, with Proton's parser semantics;
* :mod:`.match`     -- the pairing of start and end entries into events (libproton's state machine);
* :mod:`.layout`    -- the profile buffer's layout (named offsets), its writer for tests, and
  the host-buffer copy of 3.9;
* :mod:`.devices`   -- the backend object the session manager holds: the target device
  type and the device block (it has nothing to collect: the hook decodes each launch).

The decoded events reach the sessions through :mod:`proton_ctypes.core.instrumentation`
(scope nodes with ``cycles`` and ``normalized_cycles``, cycle trace records), and a phase
holding cycle records is written by :mod:`proton_ctypes.writers.cycle_trace`.
"""
