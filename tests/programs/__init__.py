"""Random profiler programs (``test_random_programs.py``): a small language of profiler calls
(:mod:`.dsl`), run in-process or replayed under real Proton and proton_ctypes in forked
workers (:mod:`.worker`)."""
