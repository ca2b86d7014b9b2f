"""Shared fixtures: a clean profiler between tests, the mock GPU backend, file helpers."""
import json
import os
import sys
import warnings

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import proton_ctypes as proton  # noqa: E402
from proton_ctypes.backends import select  # noqa: E402
from proton_ctypes.backends.mock import MockBackend  # noqa: E402
from proton_ctypes.flags import flags  # noqa: E402

select.register("mock", MockBackend)
warnings.filterwarnings("ignore", message="proton_ctypes: no usable GPU driver")


@pytest.fixture(autouse=True)
def clean_profiler(tmp_path, monkeypatch):
    """Each test starts with no session, profiling off, in its own working directory."""
    monkeypatch.chdir(tmp_path)
    yield
    try:
        proton.finalize()
    except Exception:
        pass
    flags.profiling_on = False
    flags.command_line = False
    proton.hooks.HookManager.unregister()


@pytest.fixture
def mock():
    """The process-wide mock GPU backend (``backend="mock"``)."""
    return select.get("mock")


def read_tree(path):
    """Load a .hatchet file and return ``(root, device_info)``."""
    with open(path) as f:
        tree, dev = json.load(f)
    return tree, dev


def find(node, *names):
    """The node reached from ``node`` through child frame ``names`` (AssertionError if absent)."""
    for n in names:
        for c in node["children"]:
            if c["frame"]["name"] == n:
                node = c
                break
        else:
            raise AssertionError(f"no child {n!r} under {node['frame']['name']!r}: "
                                 f"{[c['frame']['name'] for c in node['children']]}")
    return node


def child_names(node):
    """Names of the children of ``node``."""
    return [c["frame"]["name"] for c in node["children"]]
