"""bench/models.py's command line (the figures come from the H200): each ``proton_ctypes:<variant>``
sets a switch the backend really reads, and an unknown one is a clear error before any model runs."""
import pathlib
import subprocess
import sys

BENCH = pathlib.Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))
import models  # noqa: E402

from fakes.fake_cupti import FakeCupti  # noqa: E402
from proton_ctypes.backends.nvidia import activity  # noqa: E402
from proton_ctypes.backends.nvidia.lib import load_cupti  # noqa: E402


def test_each_variant_sets_a_switch_the_cupti_backend_reads():
    for variant, (name, value) in models.VARIANTS.items():
        env = {getattr(activity, name): value}
        if variant == "lazy":
            assert activity.lazy_timestamps(env)
        elif variant == "api":
            source, _ = activity.choose_launch_source(load_cupti(FakeCupti()), False, environ=env)
            assert source == activity.LAUNCH_FROM_API
        else:
            raise AssertionError(f"variant {variant} has no check here")


def test_an_unknown_variant_is_refused_with_the_known_ones_named():
    p = subprocess.run([sys.executable, str(BENCH / "models.py"), "--impls", "proton,proton_ctypes:nope"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert "proton_ctypes:nope: no such variant (proton_ctypes:lazy|api)" in p.stderr
