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
* :mod:`.decode`    -- the buffer decoder (header, per-warp circular segments, 64/32-bit
  clocks, async events) in numpy, with Proton's parser semantics;
* :mod:`.attribute` -- decoded events into scope nodes (``cycles``, ``normalized_cycles``)
  and trace events of the launching sessions;
* :mod:`.trace`     -- the chrome trace Proton writes when a phase holds cycle events;
* :mod:`.backend`   -- the backend object the session manager talks to.
"""
