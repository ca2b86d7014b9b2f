"""The ``proton-viewer`` command line (``main``), option for option compatible with Proton 3.9's viewer.

Same output as Proton 3.9 byte for byte, except where we deliberately differ (spec §0.3):

* ``-m x`` on a ROOT metric already named ``x (inc)`` shows it (Proton: ``KeyError`` on ``x (inc) (inc)``);
* ``-f file_function`` prints ROOT as ``ROOT`` (Proton: ``ROOT@ROOT``);
* ``-diff`` compares nodes matched by call path (Proton: ``nan`` wherever the trees differ), see
  :mod:`.diff`;
* ``-i``/``-e`` take the regular expression as given (Proton evaluates it inside a Python string
  literal, so ``\\`` escapes, quotes and braces misbehave), see :mod:`.filters`;
* errors never show a traceback: ``main`` prints ``<ExceptionType>: <message>`` on one line to stderr
  and returns 1, so Proton's messages (``RuntimeError: Metric foo is not found. …``) still appear;
  unreadable files raise :class:`~.read.ProfileFormatError` (Proton: a ``json`` or ``KeyError``
  traceback); usage errors are one line too (exit code 2).

Extras: ``.hatchet_msgpack`` input, ``--fail-if`` (see :mod:`.gate`), ``-f json`` (see :mod:`.jsonout`),
``--html`` (see :mod:`.html`).
"""

import argparse
import os
import sys

from . import gate as gate_mod
from .filters import filter_frames
from .metrics import derive_metrics, metric_label
from .read import read, read_raw
from .render import FRAME_FORMATS, format_names, print_profile

_LIST_HELP = """List the metrics of the profile and exit. Names are case insensitive, units are ignored.
Derived metrics (when their sources exist):
- time/s, time/ms, time/us, time/ns: time in that unit
- avg_time/<unit>: time / count
- cpu_time/<unit>, avg_cpu_time/<unit>: the same on cpu_time
- flop[8|16|32|64]/s, gflop[...]/s, tflop[...]/s: flops / time
- byte/s, gbyte/s, tbyte/s: bytes / time
- util: max(sum_w flops_w / peak_flops_w, bytes / peak_bandwidth) / time, per kernel
- <metric>/%%: share of ROOT's value (inclusive metrics) or of the column total
"""

_FAIL_IF_HELP = """Regression gate (needs -diff). Exit with code 1 and name the nodes when a rule is crossed.
Repeat the option or separate rules with commas. Grammar:
  RULE  := [node: | total:] METRIC OP LIMIT
  OP    := '>' (fails when the change is larger) | '<' (fails when it is smaller)
  LIMIT := signed number (absolute change, METRIC's unit) or signed number followed by '%%'
           (change relative to the base value)
'node:' (default) checks every node of the tree, 'total:' only the root.
Change = value in FILE minus value in the -diff (base) profile; a node missing on one side counts 0.
Examples: --fail-if 'time/ns>+5%%'  --fail-if 'total:time/ns>+1000,tflop32/s<-10%%'
"""


class UsageError(Exception):
    """A bad command line (reported as one line, exit code 2)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def build_parser():
    """Return the argument parser (Proton's options plus ours)."""
    p = _Parser(prog="proton-viewer", formatter_class=argparse.RawTextHelpFormatter,
                                description="Show a Proton profile (.hatchet or .hatchet_msgpack) as a tree.",
                                usage="proton-viewer [options] FILE")
    p.add_argument("-l", "--list", action="store_true", help=_LIST_HELP)
    p.add_argument("-m", "--metrics", type=str, default=None,
                   help="Comma-separated metrics to show: a metric of --list (summed over the subtree\n"
                        "when ROOT has it) or a derived metric.")
    p.add_argument("-i", "--include", type=str, default=None,
                   help="Keep only paths through frames whose name matches this regular expression\n"
                        "(matched from the start of the name), e.g. -i '.*attention.*'.")
    p.add_argument("-e", "--exclude", type=str, default=None,
                   help="Drop frames whose name matches this regular expression, with their subtrees.")
    p.add_argument("-t", "--threshold", type=float, default=None,
                   help="Drop frames whose first metric is below this value (ancestors of kept frames stay).")
    p.add_argument("-d", "--depth", type=int, default=100, help="Depth of the tree to print (1 = ROOT only).")
    p.add_argument("-f", "--format", type=str, choices=list(FRAME_FORMATS) + ["json"], default="full",
                   help="Frame names: full (default), file_function_line, function_line, file_function.\n"
                        "json: print the table as JSON instead (a list of nodes with path, name, metrics).")
    p.add_argument("--print-sorted", action="store_true", default=False,
                   help="After the tree, list the frames sorted by the first metric (with -diff: by |change|).")
    p.add_argument("--diff-profile", "-diff", type=str, default=None, metavar="BASE",
                   help="Compare with a base profile: nodes matched by call path, columns base, new (FILE),\n"
                        "change and change %%; nodes in one profile only are marked [new] or [gone].")
    p.add_argument("--fail-if", action="append", default=None, metavar="RULE", help=_FAIL_IF_HELP)
    p.add_argument("--html", type=str, default=None, metavar="REPORT.html",
                   help="Also write a self-contained HTML report (flame graph, sortable table).")
    return p


def show_metrics(path, write):
    """Print the ``--list`` output for ``path``."""
    profile = read_raw(path)
    write("Available inclusive metrics:\n")
    for raw in profile.root_metrics:
        write(f"- {metric_label(raw)}\n")
    write("Available exclusive metrics:\n")
    for raw in profile.other_metrics:
        write(f"- {metric_label(raw)}\n")


def parse(metrics, path, include=None, exclude=None, threshold=None):
    """Read, derive and filter one profile; return ``(profile, column names)``."""
    profile = read(path)
    columns = derive_metrics(profile, metrics)
    profile = filter_frames(profile, include, exclude, threshold, columns[0])
    return profile, columns


def run(args, path, write, err):
    """Execute the parsed command line; return the exit code."""
    if args.include and args.exclude:
        raise ValueError("Cannot specify both include and exclude")
    if args.list:
        show_metrics(path, write)
        return 0
    rules = gate_mod.parse_rules(args.fail_if or [])
    if rules and not args.diff_profile:
        raise ValueError("--fail-if needs a base profile to compare with (-diff BASE)")
    metrics = args.metrics.split(",") if args.metrics else None
    if not metrics:
        metrics = [rule.metric for rule in rules] or None
    if not metrics:
        if args.html or args.format == "json":
            raise ValueError("nothing to show: give the metrics with -m")
        return 0
    if args.diff_profile:
        from .diff_command import run_diff
        return run_diff(args, path, metrics, rules, write, err, parse)
    profile, columns = parse(metrics, path, args.include, args.exclude, args.threshold)
    if args.html:
        from .html import write_report
        write_report(args.html, profile, columns, args.depth, title=path, names=format_names(profile, args.format))
    if args.format == "json":
        from .jsonout import profile_json
        write(profile_json(profile, columns, args.depth, args.print_sorted) + "\n")
        return 0
    print_profile(profile, columns, args.depth, args.format, args.print_sorted, write)
    return 0


def _one_line(exc):
    text = str(exc)
    if isinstance(exc, KeyError) and exc.args:
        text = repr(exc.args[0]) if len(exc.args) == 1 else str(exc.args)
    text = " ".join(text.split("\n")).rstrip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def main(argv=None):
    """Entry point of ``proton-viewer``; returns the exit code (0 ok, 1 error or gate failed, 2 usage)."""
    out, err = sys.stdout, sys.stderr
    try:
        args, rest = build_parser().parse_known_args(argv)
        if len(rest) != 1:
            raise AssertionError("Must specify a file to read")
        return run(args, rest[0], out.write, err.write)
    except UsageError as e:
        err.write(f"proton-viewer: error: {e} (see --help)\n")
        return 2
    except SystemExit as e:  # argparse's --help
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # e.g. `proton-viewer ... | head`: stop quietly
        if out is sys.__stdout__:
            try:
                os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())  # no second error at exit
            except OSError:
                pass
        return 1
    except Exception as e:  # noqa: BLE001 - the viewer never shows a traceback
        try:
            out.flush()
        except Exception:  # noqa: BLE001
            pass
        err.write(_one_line(e) + "\n")
        return 1
