"""Reading profiles: .hatchet JSON and .hatchet_msgpack, frame removal, robustness (one-line errors)."""

import json

import msgpack
import pytest

from .helpers import run_viewer
from .profiles import node, to_msgpack_layout, write_json, write_msgpack


def _doc(*children, root_metrics=None):
    return [node("ROOT", root_metrics if root_metrics is not None else {"count": 0, "time (ns)": 0},
                 list(children)), {}]


def _kernel(name, time_ns, **extra):
    return node(name, {"count": 1, "device_id": "0", "device_type": "CUDA", "time (ns)": time_ns, **extra})


def _show(tmp_path, doc, *argv, name="p.hatchet"):
    write_json(doc, tmp_path / name)
    return run_viewer(list(argv) + [name], cwd=tmp_path)


def test_msgpack_file_gives_the_same_output_as_json(ref_dir, tmp_path):
    for name in ("nested", "pyctx", "hook", "metrics", "states"):
        doc = json.loads((ref_dir / f"{name}.hatchet").read_text())
        write_msgpack(doc, tmp_path / f"{name}.hatchet_msgpack")
        for argv in (["-m", "time/ns,count", "--print-sorted"], ["-l"]):
            ours = run_viewer(argv + [f"{name}.hatchet_msgpack"], cwd=tmp_path)
            assert ours == run_viewer(argv + [f"{name}.hatchet"], cwd=ref_dir)


def test_format_is_detected_from_the_content_not_the_extension(ref_dir, tmp_path):
    doc = json.loads((ref_dir / "nested.hatchet").read_text())
    (tmp_path / "msgpack_inside.hatchet").write_bytes(msgpack.packb(to_msgpack_layout(doc)))
    (tmp_path / "json_inside.hatchet_msgpack").write_text(json.dumps(doc))
    expected = run_viewer(["-m", "time/ns", "nested.hatchet"], cwd=ref_dir).out
    assert run_viewer(["-m", "time/ns", "msgpack_inside.hatchet"], cwd=tmp_path).out == expected
    assert run_viewer(["-m", "time/ns", "json_inside.hatchet_msgpack"], cwd=tmp_path).out == expected


@pytest.mark.parametrize("meta", ["__proton_launch_metadata", "__proton_launch_metadata:add_one"])
def test_launch_metadata_frames_are_removed_with_their_subtree(tmp_path, meta):
    doc = _doc(node("scope", {}, [_kernel("add_one", 10), node(meta, {"flops": 5.0}, [_kernel("x", 7)])]))
    result = _show(tmp_path, doc, "-m", "time/ns")
    assert result.out == "10.000 ROOT\n└─ 10.000 scope\n   └─ 10.000 add_one\n\n"


def test_nodes_without_metrics_and_children_are_removed(tmp_path):
    doc = _doc(_kernel("k", 5), node("empty", {}, []), node("only_meta", {}, [node("__proton_launch_metadata",
                                                                                     {"bytes": 1})]))
    assert _show(tmp_path, doc, "-m", "time/ns").out == "5.000 ROOT\n└─ 5.000 k\n\n"


def test_a_profile_without_device_block_is_read(tmp_path):
    doc = _doc(_kernel("k", 5))[:1]
    assert _show(tmp_path, doc, "-m", "time/ns").out == "5.000 ROOT\n└─ 5.000 k\n\n"


def test_metrics_listed_at_root_are_inclusive_others_raw_with_nan(tmp_path):
    doc = _doc(node("s", {"cpu_time (ns)": 100}, [_kernel("k", 5)]))
    result = _show(tmp_path, doc, "-m", "time/ns,cpu_time/ns")
    assert result.out == "5.000 nan ROOT\n└─ 5.000 100.000 s\n   └─ 5.000 nan k\n\n"


def test_very_deep_profiles_are_read(tmp_path):
    from conftest import json_decodes_deep_nesting
    from proton_ctypes.writers import hatchet, msgpack as msgpack_writer   # written without recursion
    leaf = _kernel("k", 3)
    for i in range(2000):
        leaf = node(f"s{i}", {}, [leaf])
    (tmp_path / "deep.hatchet").write_text(hatchet.dumps(*_doc(leaf)))
    (tmp_path / "deep.hatchet_msgpack").write_bytes(msgpack_writer.dumps(*_doc(leaf)))
    for name in ("deep.hatchet", "deep.hatchet_msgpack"):  # msgpack-python itself stops at ~500 levels
        result = run_viewer(["-m", "time/ns", "-d", "2", "-i", "k", name], cwd=tmp_path)
        if name.endswith(".hatchet") and not json_decodes_deep_nesting():
            assert "nested too deeply to be read" in result.err
            continue
        assert result.out == "3.000 ROOT\n└─ 3.000 s1999\n\n"


BAD_FILES = {
    "empty": (b"", "empty file"),
    "blank": (b"  \n", "empty file"),
    "truncated_json": (b'[{"frame": {"name": "ROOT"', "truncated or invalid JSON"),
    "truncated_msgpack": (msgpack.packb(to_msgpack_layout(_doc(_kernel("k", 1))))[:-7],
                          "neither JSON nor a valid MessagePack profile"),
    "json_object": (b'{"not": "a profile"}', "not a Proton profile"),
    "json_numbers": (b"[1, 2]", "not a Proton profile"),
    "no_frame": (b'[{"metrics": {}, "children": []}, {}]', "not a Proton profile"),
    "bad_children": (b'[{"frame": {"name": "ROOT"}, "metrics": {"a": 1}, "children": 3}, {}]',
                     "not a Proton profile"),
    "binary": (bytes(range(256)) * 4, "neither JSON nor a valid MessagePack profile"),
    "no_data": (json.dumps(_doc(node("e", {}, []))).encode(), "the profile holds no data"),
}


@pytest.mark.parametrize("kind", sorted(BAD_FILES))
def test_bad_file_gives_one_line_error_and_exit_1(tmp_path, kind):
    content, message = BAD_FILES[kind]
    (tmp_path / "bad.hatchet").write_bytes(content)
    for argv in (["-m", "time"], ["-l"]):
        result = run_viewer(argv + ["bad.hatchet"], cwd=tmp_path)
        assert result.code == 1 and result.out == ""
        assert result.err.count("\n") == 1 and result.err.startswith("ProfileFormatError: bad.hatchet: ")
        assert message in result.err


def test_missing_file_gives_one_line_error(tmp_path):
    result = run_viewer(["-m", "time", "absent.hatchet"], cwd=tmp_path)
    assert (result.code, result.err) == (1, "ProfileFormatError: absent.hatchet: No such file or directory\n")


def test_fallback_msgpack_decoder_agrees_with_msgpack():
    from proton_ctypes.viewer import msgpack_deep
    from .profiles import generate
    samples = [to_msgpack_layout(generate(seed)) for seed in range(20)]
    samples += [[None, True, False, -1, -33, 2**40, -2**40, 1.5, "é" * 40, b"\x00\x01", {"k": [1, {"x": {}}]}],
                {"a" * 300: list(range(70000))}]
    for doc in samples:
        assert msgpack_deep.unpackb(msgpack.packb(doc, use_single_float=False)) == doc
    with pytest.raises(ValueError):
        msgpack_deep.unpackb(msgpack.packb([1, 2, 3])[:-1])
    with pytest.raises(ValueError):
        msgpack_deep.unpackb(msgpack.packb([1]) + b"\x01")
