"""The folders are the architecture (ARCHITECTURE.md): layers import only downward, modules
form no import cycle, and no private name crosses a package border.  Read from the source
with ``ast``; nothing of the package is imported."""
import ast
import os

import pytest

PKG = "proton_ctypes"
ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), PKG)

#: layer of each top-level part of the package, top first; a module may import only from its
#: own part or from a part of a lower layer
LAYERS = [
    {"__init__", "__main__", "profile", "scope", "state", "data", "context", "metric", "mode", "specs",
     "flags", "language", "proton"},
    {"hooks"},
    {"core"},
    {"backends", "writers"},
    {"tree", "_rocm", "peaks", "_atomic", "_deepjson", "_version", "_tasks", "_heap", "_libc"},
]
#: the viewer stands apart: it never imports the profiler
VIEWER = "viewer"
#: modules that the profiler and the viewer share; they import nothing of the package
#: (``peaks``: the peak-FLOPs table; ``_atomic``: the one writer of every file; ``_deepjson``:
#: the one decoder of deep trees; ``_version``)
SHARED = {"peaks", "_atomic", "_deepjson", "_version"}


def _modules():
    out = {}
    for folder, _dirs, files in os.walk(ROOT):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(folder, f)
                rel = os.path.relpath(path, os.path.dirname(ROOT))[:-3].replace(os.sep, ".")
                if rel.endswith(".__init__"):
                    rel = rel[: -len(".__init__")]
                out[rel] = path
    return out


MODULES = _modules()


def _imports(name, path):
    """``(imported module, imported names, line)`` of every import of the package in a module."""
    tree = ast.parse(open(path).read())
    is_pkg = path.endswith("__init__.py")
    base = name.split(".") if is_pkg else name.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                parts = base[: len(base) - (node.level - 1)]
                mod = ".".join(parts + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod == PKG or mod.startswith(PKG + "."):
                for a in node.names:
                    full = f"{mod}.{a.name}"
                    yield (full if full in MODULES else mod), a.name, node.lineno
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith(PKG + "."):
                    yield a.name, None, node.lineno


def _part(module):
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _layer(part):
    for i, layer in enumerate(LAYERS):
        if part in layer:
            return i
    return None


def test_every_part_of_the_package_has_a_layer():
    parts = {_part(m) for m in MODULES} - {VIEWER}
    assert {p for p in parts if _layer(p) is None} == set()


def test_layers_import_only_downward():
    upward = []
    for name, path in MODULES.items():
        src = _part(name)
        if src == VIEWER:
            continue
        for mod, _names, line in _imports(name, path):
            dst = _part(mod)
            if dst == src or mod == PKG:
                continue
            if dst == VIEWER or _layer(dst) < _layer(src):
                upward.append(f"{name}:{line} imports {mod}")
    assert upward == []


def test_the_viewer_never_imports_the_profiler():
    found = [f"{name}:{line} imports {mod}" for name, path in MODULES.items() if _part(name) == VIEWER
             for mod, _n, line in _imports(name, path) if _part(mod) != VIEWER and _part(mod) not in SHARED]
    assert found == []


def test_shared_tables_import_nothing_of_the_package():
    found = [f"{name}:{line} imports {mod}" for name, path in MODULES.items() if _part(name) in SHARED
             for mod, _n, line in _imports(name, path)]
    assert found == []


def test_backends_never_import_the_engine():
    found = [f"{name}:{line} imports {mod}" for name, path in MODULES.items() if _part(name) == "backends"
             for mod, _n, line in _imports(name, path) if _part(mod) in ("core", "hooks")]
    assert found == []


def test_no_import_cycle_between_modules():
    graph = {name: {m for m, _n, _l in _imports(name, path) if m in MODULES and m != name}
             for name, path in MODULES.items()}
    state, cycles = {}, []

    def visit(n, stack):
        state[n] = 1
        stack.append(n)
        for m in graph[n]:
            if state.get(m) == 1:
                cycles.append(stack[stack.index(m):] + [m])
            elif m not in state:
                visit(m, stack)
        stack.pop()
        state[n] = 2

    for n in graph:
        if n not in state:
            visit(n, [])
    # a package's __init__ importing its own submodules is how packages are made, not a cycle
    real = [c for c in cycles if not any(a.startswith(b + ".") or b.startswith(a + ".") for a, b in zip(c, c[1:]))]
    assert real == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_private_name_crosses_a_package_border(name):
    pkg = name.rsplit(".", 1)[0] if not MODULES[name].endswith("__init__.py") else name
    crossing = []
    for mod, imported, line in _imports(name, MODULES[name]):
        if imported is None or not imported.startswith("_") or imported.startswith("__"):
            continue
        target_pkg = mod if (mod in MODULES and MODULES[mod].endswith("__init__.py")) else mod.rsplit(".", 1)[0]
        if target_pkg != pkg:
            crossing.append(f"{name}:{line} takes {imported} from {mod}")
    assert crossing == []
