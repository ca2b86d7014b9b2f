"""--fail-if: the regression gate (grammar, per-node and total checks, exit codes)."""

import pytest

from proton_ctypes.viewer.gate import parse_rule, parse_rules
from .diff_profiles import write_pair
from .helpers import run_viewer


@pytest.fixture
def pair(tmp_path):
    return write_pair(tmp_path)


def _gate(pair, *rules, metrics=("-m", "time/ns")):
    argv = list(metrics) + ["new.hatchet", "-diff", "base.hatchet"]
    for rule in rules:
        argv += ["--fail-if", rule]
    return run_viewer(argv, cwd=pair)


@pytest.mark.parametrize("text, scope, metric, op, limit, relative", [
    ("time/ns>+5%", "node", "time/ns", ">", 5.0, True),
    ("total:time/ns>+1000", "total", "time/ns", ">", 1000.0, False),
    (" node : avg_time/us < -2.5% ", "node", "avg_time/us", "<", -2.5, True),
    ("tflop16/s<-10%", "node", "tflop16/s", "<", -10.0, True),
    ("time/ns>1e3", "node", "time/ns", ">", 1000.0, False),
])
def test_rule_grammar(text, scope, metric, op, limit, relative):
    rule = parse_rule(text)
    assert (rule.scope, rule.metric, rule.op, rule.limit, rule.relative) == (scope, metric, op, limit, relative)


@pytest.mark.parametrize("text", ["time/ns", "time/ns>", "time/ns>>5", ">5%", "time/ns>5%%", "everywhere:t>1",
                                  "time/ns=5"])
def test_malformed_rule_is_a_one_line_error(pair, text):
    with pytest.raises(ValueError, match="bad --fail-if rule"):
        parse_rule(text)
    result = _gate(pair, text)
    assert result.code == 1 and result.out == "" and result.err.startswith("ValueError: bad --fail-if rule")


def test_rules_may_be_comma_separated_or_repeated():
    assert [r.text for r in parse_rules(["time/ns>+5%,total:count>1", "util<-1"])] == [
        "time/ns>+5%", "total:count>1", "util<-1"]


def test_relative_rule_names_every_node_that_crossed_and_exits_1(pair):
    result = _gate(pair, "time/ns>+5%")
    assert result.code == 1
    assert result.out.startswith("diff: new=new.hatchet base=base.hatchet")
    assert result.err.splitlines() == [
        "proton-viewer: --fail-if: FAILED, 5 node(s) crossed",
        "  time/ns>+5%: ROOT / train: 1420.000 -> 1561.000 (+141.000, +9.930%)",
        "  time/ns>+5%: ROOT / train / fwd: 520.000 -> 570.000 (+50.000, +9.615%)",
        "  time/ns>+5%: ROOT / train / fwd / gemm: 500.000 -> 550.000 (+50.000, +10.000%)",
        "  time/ns>+5%: ROOT / train / opt [new]: 0.000 -> 100.000 (+100.000, +inf%)",
        "  time/ns>+5%: ROOT / train / opt / adam [new]: 0.000 -> 100.000 (+100.000, +inf%)"]


def test_absolute_rule_compares_the_change_in_the_metric_unit(pair):
    result = _gate(pair, "time/ns>+99")
    assert result.code == 1
    assert [line.split(": ")[1] for line in result.err.splitlines()[1:]] == [
        "ROOT / train", "ROOT / train / opt [new]", "ROOT / train / opt / adam [new]"]


def test_total_rule_checks_only_the_root(pair):
    assert _gate(pair, "total:time/ns>+5%").code == 0
    result = _gate(pair, "total:time/ns<-5%")
    assert result.code == 1 and result.err.splitlines()[1:] == [
        "  total:time/ns<-5%: ROOT: 1720.000 -> 1561.000 (-159.000, -9.244%)"]


def test_new_nodes_cross_every_relative_increase_rule(pair):
    result = _gate(pair, "time/ns>+1000%")
    assert [line.split(": ")[1] for line in result.err.splitlines()[1:]] == [
        "ROOT / train / opt [new]", "ROOT / train / opt / adam [new]"]


def test_less_than_rule_catches_drops_and_gone_nodes(pair):
    result = _gate(pair, "time/ns<-50%")
    assert [line.split(": ")[1] for line in result.err.splitlines()[1:]] == [
        "ROOT / eval [gone]", "ROOT / eval / fwd [gone]", "ROOT / eval / fwd / gemm [gone]"]


def test_gate_passes_with_exit_0(pair):
    result = _gate(pair, "time/ns>+150,total:time/ns>+0")
    assert result.code == 0
    assert result.err == "proton-viewer: --fail-if: passed (2 rules)\n"


def test_gate_metric_need_not_be_displayed(pair):
    result = _gate(pair, "count>+0", metrics=("-m", "time/ns"))
    assert result.code == 1 and "(time/ns (inc))" in result.out and "count" not in result.out
    assert "count>+0: ROOT / train: 3.000 -> 4.000 (+1.000, +33.333%)" in result.err


def test_gate_metrics_are_shown_when_no_metric_is_given(pair):
    result = _gate(pair, "time/ns>+150", metrics=())
    assert result.code == 0 and result.out.startswith("diff: ") and "(time/ns (inc))" in result.out


def test_gate_needs_a_base_profile(pair):
    result = run_viewer(["-m", "time/ns", "new.hatchet", "--fail-if", "time/ns>+5%"], cwd=pair)
    assert result.code == 1
    assert result.err == "ValueError: --fail-if needs a base profile to compare with (-diff BASE)\n"
