"""Regression gate: ``--fail-if RULE`` (needs ``-diff``).

Grammar (one rule; several rules are given by repeating the option or separating them with commas)::

    RULE  := [SCOPE ":"] METRIC OP LIMIT
    SCOPE := "node" | "total"        node (default): every node of the compared tree; total: the root only
    OP    := ">" | "<"               ">": fails when the change is above LIMIT; "<": when it is below
    LIMIT := SIGNED_NUMBER ["%"]     absolute change in METRIC's unit, or change relative to the base in %

METRIC is any ``-m`` metric (``time/ns``, ``avg_time/us``, ``tflop16/s`` ...).  The change of a node is
``new - base`` where new is the positional FILE and base the ``-diff`` profile; a node present on one side
only counts as 0 on the other, so its relative change is ``±inf`` (a new kernel crosses any ``>+N%``).
Nodes whose change is ``nan`` (the metric is missing there) never cross.

Examples: ``time/ns>+5%`` (any node more than 5 % slower), ``total:time/ns>+1000`` (total time grew by
more than 1000 ns), ``tflop32/s<-10%`` (a node lost more than 10 % of its throughput).

The tree (or JSON) is printed on stdout as usual; the verdict goes to stderr, either
``proton-viewer: --fail-if: passed (N rules)`` (exit code 0) or
``proton-viewer: --fail-if: FAILED, K node(s) crossed`` followed by one line per crossing,
``  <rule>: ROOT / a / b[ [new]|[gone]]: <base> -> <new> (<Δ>, <Δ%>)`` (exit code 1).
"""

import math
import re
from dataclasses import dataclass

_RULE = re.compile(r"^\s*(?:(node|total)\s*:)?\s*([^<>]+?)\s*([<>])\s*"
                   r"([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*(%?)\s*$")


@dataclass(frozen=True)
class Rule:
    """One parsed ``--fail-if`` rule."""

    text: str
    scope: str  # "node" or "total"
    metric: str
    op: str  # ">" or "<"
    limit: float
    relative: bool

    def crossed(self, delta, delta_pct):
        """Whether a node with this change crosses the rule."""
        value = delta_pct if self.relative else delta
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return False
        return value > self.limit if self.op == ">" else value < self.limit


def parse_rule(text):
    """Parse one rule (see the module docstring); ValueError with the grammar when malformed."""
    m = _RULE.match(text)
    if not m:
        raise ValueError(f"bad --fail-if rule {text.strip()!r}: expected [node:|total:]METRIC>LIMIT or "
                         "METRIC<LIMIT, LIMIT a signed number, optionally followed by %")
    scope, metric, op, number, pct = m.groups()
    if ":" in metric:
        raise ValueError(f"bad --fail-if rule {text.strip()!r}: unknown scope {metric.split(':')[0].strip()!r} "
                         "(use node: or total:)")
    return Rule(text.strip(), scope or "node", metric, op, float(number), pct == "%")


def parse_rules(options):
    """Parse every ``--fail-if`` value (each may hold comma-separated rules)."""
    rules = []
    for option in options:
        for part in option.split(","):
            if part.strip():
                rules.append(parse_rule(part))
    return rules


@dataclass
class Crossing:
    """A node that crossed a rule."""

    rule: Rule
    path: tuple
    status: str
    base: float
    new: float
    delta: float
    delta_pct: float


def evaluate(rules, diff, column_of):
    """Return the crossings of ``rules`` on a :class:`DiffTree`; ``column_of[metric]`` is its column index."""
    found = []
    paths = diff.paths()
    for rule in rules:
        k = column_of[rule.metric]
        rows = [0] if rule.scope == "total" else range(len(diff))
        for row in rows:
            delta, pct = diff.delta[k][row], diff.delta_pct[k][row]
            if rule.crossed(delta, pct):
                found.append(Crossing(rule, paths[row], diff.status[row], diff.base[k][row], diff.new[k][row],
                                      delta, pct))
    return found


def report(crossings, n_rules, write):
    """Write the gate verdict (one line per crossing); return the exit code (1 if anything crossed)."""
    from .diff import fmt_delta, fmt_pct, fmt_value  # lazy: only with --fail-if
    if not crossings:
        write(f"proton-viewer: --fail-if: passed ({n_rules} rule{'s' * (n_rules != 1)})\n")
        return 0
    write(f"proton-viewer: --fail-if: FAILED, {len(crossings)} node(s) crossed\n")
    for c in crossings:
        marker = f" [{c.status}]" if c.status != "both" else ""
        write(f"  {c.rule.text}: {' / '.join(c.path)}{marker}: {fmt_value(c.base)} -> {fmt_value(c.new)} "
              f"({fmt_delta(c.delta)}, {fmt_pct(c.delta_pct)})\n")
    return 1
