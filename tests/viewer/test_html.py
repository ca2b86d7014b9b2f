"""--html: a self-contained report (flame graph, sortable table, hover details, coloured diff).

The browser tests open the report in headless Chromium (``chromium --headless --dump-dom``) and read the
rendered DOM: the page's script sets ``data-ok="1"`` on <body> when it has drawn everything and
``data-error`` on any script error.  They are skipped when no ``chromium`` is on PATH.
"""

import json
import os
import re
import shutil
import subprocess

import pytest

import proton_ctypes._atomic as atomic_mod
from .diff_profiles import write_pair
from .helpers import run_viewer
from .profiles import node, write_json

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (apt-get install chromium)")


def _dom(path, extra_script=""):
    if extra_script:
        text = path.read_text(encoding="utf-8").replace("</body>", f"<script>{extra_script}</script>\n</body>")
        path = path.with_name("probe-" + path.name)
        path.write_text(text, encoding="utf-8")
    proc = subprocess.run([CHROMIUM, "--headless", "--disable-gpu", "--no-sandbox", "--disable-dev-shm-usage",
                           "--dump-dom", path.resolve().as_uri()], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def _body(dom):
    return re.search(r"<body([^>]*)>", dom).group(1)


def _inlined_data(text):
    return json.loads(re.search(r'<script id="profile-data" type="application/json">(.*?)</script>', text,
                                re.S).group(1))


def test_report_inlines_the_data_and_loads_nothing_from_outside(ref_dir, tmp_path):
    report = tmp_path / "r.html"
    result = run_viewer(["-m", "time/ns,avg_time/us", "nested.hatchet", "--html", report], cwd=ref_dir)
    assert result.code == 0 and result.out.startswith("8319.000 0.832 ROOT")  # the tree is still printed
    text = report.read_text(encoding="utf-8")
    assert not re.search(r"""(src|href)\s*=|https?://|@import|url\(""", text)
    data = _inlined_data(text)
    assert data["columns"] == ["time/ns (inc)", "avg_time/us (inc)"]
    assert [(n["name"], n["parent"]) for n in data["nodes"]] == [
        ("ROOT", -1), ("add_one", 0), ("test0", 0), ("test1", 2), ("add_one", 3), ("test2", 2), ("add_one", 5)]
    assert data["nodes"][2]["values"][0] == pytest.approx(7487.0)


def test_report_uses_the_frame_format(ref_dir, tmp_path):
    report = tmp_path / "r.html"
    run_viewer(["-m", "time/ns", "pyctx.hatchet", "-f", "function_line", "-d", "3", "--html", report], cwd=ref_dir)
    assert [n["name"] for n in _inlined_data(report.read_text())["nodes"]] == ["ROOT", "111@<module>",
                                                                               "31@scenario"]


def test_report_keeps_to_the_printed_depth_and_filters(ref_dir, tmp_path):
    report = tmp_path / "r.html"
    run_viewer(["-m", "time/ns", "nested.hatchet", "-d", "2", "-e", "add_one", "--html", report], cwd=ref_dir)
    assert [n["name"] for n in _inlined_data(report.read_text())["nodes"]] == ["ROOT", "test0"]


def test_report_is_written_atomically(ref_dir, tmp_path, monkeypatch):
    report = tmp_path / "r.html"
    report.write_text("old report")

    def failing_replace(src, dst):
        raise OSError(28, "No space left on device")

    # a context of its own: monkeypatch.undo() would also undo the autouse fixture's chdir
    with monkeypatch.context() as m:
        m.setattr(atomic_mod.os, "replace", failing_replace)
        result = run_viewer(["-m", "time/ns", "nested.hatchet", "--html", report], cwd=ref_dir)
    assert result.code == 1 and result.err == "OSError: [Errno 28] No space left on device\n"
    assert report.read_text() == "old report"
    assert os.listdir(tmp_path) == ["r.html"]  # no temporary file left behind
    run_viewer(["-m", "time/ns", "nested.hatchet", "--html", report], cwd=ref_dir)
    assert report.read_text().startswith("<!DOCTYPE html>") and os.listdir(tmp_path) == ["r.html"]
    umask = os.umask(0)
    os.umask(umask)
    assert report.stat().st_mode & 0o777 == 0o666 & ~umask


def test_report_into_a_missing_directory_creates_it(ref_dir, tmp_path):
    report = tmp_path / "no" / "such" / "r.html"
    result = run_viewer(["-m", "time/ns", "nested.hatchet", "--html", report], cwd=ref_dir)
    assert result.code == 0 and _inlined_data(report.read_text())["nodes"][0]["name"] == "ROOT"


def test_report_under_a_file_is_a_one_line_error_and_writes_nothing(ref_dir, tmp_path):
    (tmp_path / "plain").write_text("a file, not a folder")
    result = run_viewer(["-m", "time/ns", "nested.hatchet", "--html", tmp_path / "plain" / "r.html"], cwd=ref_dir)
    assert result.code == 1 and result.err == f"NotADirectoryError: [Errno 20] Not a directory: '{tmp_path / 'plain'}'\n"
    assert os.listdir(tmp_path) == ["plain"]


@needs_chromium
def test_profile_report_renders_flame_graph_and_table(ref_dir, tmp_path):
    report = tmp_path / "r.html"
    run_viewer(["-m", "time/ns,avg_time/us", "nested.hatchet", "--html", report], cwd=ref_dir)
    dom = _dom(report)
    assert 'data-ok="1"' in _body(dom) and "data-error" not in _body(dom)
    frames = re.findall(r'<div class="frame"[^>]*>([^<]*)</div>', dom)
    assert sorted(frames) == sorted(["ROOT", "add_one", "test0", "test1", "add_one", "test2", "add_one"])
    assert re.search(r'data-node="2" style="left: 10.0012%; width: 89.9988%', dom)  # test0: 7487/8319
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", dom)
    for value in ("8319.000", "7487.000", "2560.000", "0.832", "0.853", "test2"):
        assert value in cells


@needs_chromium
def test_table_sorts_on_header_click_and_hover_shows_all_metrics(ref_dir, tmp_path):
    report = tmp_path / "r.html"
    run_viewer(["-m", "time/ns,avg_time/us", "nested.hatchet", "--html", report], cwd=ref_dir)
    probe = """
      var th = document.querySelectorAll("#table th")[1];
      th.click();
      document.body.dataset.sorted = Array.from(document.querySelectorAll("#table tbody tr td:first-child"))
        .map(function (td) { return td.textContent; }).join(",");
      th = document.querySelectorAll("#table th")[1]; th.click();
      document.body.dataset.ascending = document.querySelector("#table tbody tr td:nth-child(2)").textContent;
      var frame = document.querySelector('.frame[data-node="3"]');
      frame.dispatchEvent(new MouseEvent("mousemove", {clientX: 10, clientY: 10, bubbles: true}));
      document.body.dataset.tip = document.getElementById("tooltip").textContent;
      document.querySelector('.frame[data-node="4"]').dispatchEvent(
        new MouseEvent("mousemove", {clientX: 10, clientY: 10, bubbles: true}));
      document.body.dataset.kernelTip = document.getElementById("tooltip").textContent;
      frame.click();
      document.body.dataset.zoomed = document.querySelector('.frame[data-node="3"]').style.width;
    """
    body = _body(_dom(report, probe))
    assert 'data-ok="1"' in body and "data-error" not in body
    assert 'data-sorted="ROOT,test0,test2,add_one,test1,add_one,add_one"' in body
    assert 'data-ascending="832.000"' in body
    tip = re.search(r'data-tip="([^"]*)"', body).group(1)
    assert "test1" in tip and "ROOT / test0 / test1" in tip and "2560.000" in tip and "0.853" in tip
    kernel_tip = re.search(r'data-kernel-tip="([^"]*)"', body).group(1)  # the file's own metrics too
    assert "in the file:" in kernel_tip and "device_typeCUDA" in kernel_tip and "time (ns)2560" in kernel_tip
    assert 'data-zoomed="100%"' in body


@needs_chromium
def test_diff_report_colours_changes_and_marks_new_and_gone_frames(tmp_path):
    write_pair(tmp_path)
    report = tmp_path / "d.html"
    result = run_viewer(["-m", "time/ns", "new.hatchet", "-diff", "base.hatchet", "--html", report],
                        cwd=tmp_path)
    assert result.code == 0
    dom = _dom(report)
    assert 'data-ok="1"' in _body(dom) and "data-error" not in _body(dom)
    assert re.search(r'<div class="frame new"[^>]*>opt</div>', dom)
    assert re.search(r'<div class="frame gone"[^>]*>eval</div>', dom)
    assert re.search(r'background: rgb\(\d+, \d+, \d+\);">gemm</div>', dom)
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", dom)
    for value in ("+50.000", "+10.000%", "-300.000", "-100.000%", "+inf%", "new", "gone", "both"):
        assert value in cells
    assert 'class="status-new"' in dom and 'class="pos"' in dom and 'class="neg"' in dom


@needs_chromium
def test_hostile_frame_names_are_shown_as_text(tmp_path):
    name = '</script><script>document.body.dataset.pwned="1"</script><b>"&'
    write_json([node("ROOT", {"time (ns)": 0}, [node(name, {"time (ns)": 5})]), {}], tmp_path / "p.hatchet")
    report = tmp_path / "r.html"
    assert run_viewer(["-m", "time/ns", "p.hatchet", "--html", report], cwd=tmp_path).code == 0
    dom = _dom(report)
    body = _body(dom)
    assert 'data-ok="1"' in body and "pwned" not in body and "data-error" not in body
    assert "&lt;/script&gt;&lt;script&gt;" in dom
