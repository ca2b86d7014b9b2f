"""The backend contract (``backends/base.Backend``) and the one table of backends
(``backends/select.BACKENDS``): every backend keeps it, the engine uses nothing else."""
import ast
import pathlib

import pytest

import proton_ctypes as proton
from proton_ctypes.backends import select
from proton_ctypes.backends.base import ATTRIBUTION_TIMESTAMP, Backend
from proton_ctypes.backends.mock import MockBackend
from proton_ctypes.backends.modes import ModeKind

PKG = pathlib.Path(__file__).resolve().parents[1] / "proton_ctypes"
ENGINE = sorted((PKG / "core").glob("*.py")) + sorted((PKG / "hooks").glob("*.py"))


@pytest.mark.parametrize("name", sorted(select.BACKENDS))
def test_every_backend_of_the_table_is_a_backend_named_as_in_the_table(name):
    cls = select.BACKENDS[name].load()
    assert issubclass(cls, Backend) and cls.name == name


def test_the_table_lists_protons_backends_with_their_modes():
    table = {e.name: (e.profiler, e.modes) for e in select.BACKENDS.values()}
    assert table["cupti"] == ("CuptiProfiler", (ModeKind.PC_SAMPLING, ModeKind.PERIODIC_FLUSHING))
    assert table["roctracer"] == ("RoctracerProfiler", (ModeKind.PERIODIC_FLUSHING,))
    assert set(table) == {"cupti", "rocprofiler", "roctracer", "instrumentation", "host"}
    assert select.NAMES == tuple(select.BACKENDS)


def test_a_backend_with_nothing_to_offer_keeps_the_contracts_defaults():
    class Bare(Backend):
        def start(self, sink, mode, python_context=None):
            pass

    b = Bare()
    b.flush()
    b.stop()
    assert (b.device_info([0]), b.lost(), b.dropped, b.delivered(), b.captures()) == ({}, [], 0, (0, {}), {})
    assert b.attribution == ATTRIBUTION_TIMESTAMP and b.pc_attribution is None and b.nvtx_scopes is None
    with pytest.raises(NotImplementedError):
        b.push_external(1)
    with pytest.raises(NotImplementedError):
        Backend().start(None)


def _backend_text(node) -> bool:
    return "backend" in ast.unparse(node)


@pytest.mark.parametrize("path", ENGINE, ids=lambda p: p.name)
def test_the_engine_never_probes_a_backend_for_members(path):
    probes = [f"{path.name}:{n.lineno}" for n in ast.walk(ast.parse(path.read_text()))
              if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("getattr", "hasattr")
              and n.args and _backend_text(n.args[0])]
    assert probes == []


@pytest.mark.parametrize("path", ENGINE, ids=lambda p: p.name)
def test_the_engine_never_writes_a_backends_fields(path):
    writes = [f"{path.name}:{n.lineno}" for n in ast.walk(ast.parse(path.read_text()))
              if isinstance(n, (ast.Assign, ast.AugAssign))
              for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
              if isinstance(t, ast.Attribute) and _backend_text(t.value)]
    assert writes == []


class _Lossy(MockBackend):
    name = "lossy"

    def __init__(self):
        super().__init__()
        self.losses = []

    def lost(self):
        return list(self.losses)


@pytest.fixture
def lossy():
    select.register("lossy", _Lossy)
    yield select.get("lossy")
    select.unregister("lossy")


def test_lost_records_are_reported_with_their_reasons_from_the_contract(lossy, capsys):
    proton.start("a", backend="lossy")
    lossy.losses = [(3, "records lost to a full buffer"), (2, "records unparsed")]
    proton.finalize()
    err = capsys.readouterr().err
    assert "the profile 'a' misses data: 3 records lost to a full buffer; 2 records unparsed" in err
    assert lossy.dropped == 5
    proton.start("b", backend="lossy")
    lossy.losses = [(4, "records lost to a full buffer"), (2, "records unparsed")]
    proton.finalize()
    assert "the profile 'b' misses data: 1 records lost to a full buffer\n" in capsys.readouterr().err
