"""With ``context="python"`` the thread's state is the last frame of what is recorded, as in
Proton 3.9 (CPU oracle: a scope metric under ``state("st")`` lands at ``…/st``)."""
import proton_ctypes as proton


def _paths_with_metrics(node, path, out):
    path = path + [node["frame"]["name"]]
    if node["metrics"]:
        out.append((path, node["metrics"]))
    for c in node["children"]:
        _paths_with_metrics(c, path, out)
    return out


def test_python_context_files_a_scope_metric_under_the_threads_state(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = proton.start("py", context="python", backend="host")

    def step():
        with proton.state("st"):
            with proton.scope("sc", {"m": 1}):
                pass

    step()
    root = proton.data.get(s)[0]
    proton.finalize()
    [(path, metrics)] = _paths_with_metrics(root, [], [])
    assert path[-1] == "st"
    assert any(f.endswith("@step") for f in path)
    assert metrics == {"m": 1}


def test_python_context_without_a_state_ends_at_the_scope_entry_frame(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = proton.start("py", context="python", backend="host")

    def step():
        with proton.scope("sc", {"m": 2}):
            pass

    step()
    root = proton.data.get(s)[0]
    proton.finalize()
    [(path, metrics)] = _paths_with_metrics(root, [], [])
    assert "@" in path[-1] and "st" not in path
    assert metrics == {"m": 2}
