"""The ``proton-viewer`` command line (``main``), option for option compatible with Proton 3.9's viewer.

Same output as Proton 3.9 byte for byte, except where we deliberately differ (README, "Differences from Proton"):

* ``-m x`` on a ROOT metric already named ``x (inc)`` shows it (Proton: ``KeyError`` on ``x (inc) (inc)``);
* ``-f file_function`` prints ROOT as ``ROOT`` (Proton: ``ROOT@ROOT``);
* ``-diff`` compares nodes matched by call path (Proton: ``nan`` wherever the trees differ), see
  :mod:`.diff`;
* ``-i``/``-e`` take the regular expression as given (Proton evaluates it inside a Python string
  literal, so ``\\`` escapes, quotes and braces misbehave), see :mod:`.filters`;
* errors never show a traceback: ``main`` prints ``<ExceptionType>: <message>`` on one line to stderr
  and returns 1, so Proton's messages (``RuntimeError: Metric foo is not found. …``) still appear;
  unreadable files raise :class:`~.loader.ProfileFormatError` (Proton: a ``json`` or ``KeyError``
  traceback); usage errors are one line too (exit code 2).

Extras: ``.hatchet_msgpack`` input, ``--fail-if`` (see :mod:`.gate`), ``-f json`` (see :mod:`.jsonout`),
``--html`` (see :mod:`.html`), and several inputs as one profile: ``FILE`` may be repeated, a quoted glob
or a period-series prefix, ``-diff`` too (see :mod:`.inputs`), aggregated with ``--agg sum|mean|min|max``,
with ``--max-rank`` naming the straggler rank per node (see :mod:`.aggregate`).  One positional file is
shown exactly as before.  Proton rejects unknown options by the same check that rejects a second file
(``AssertionError: Must specify a file to read``); we keep that message for no file at all, and name an
unknown option (``proton-viewer: error: unrecognized arguments: --bogus``, exit code 2), as we name a ``-i``
or ``-e`` that is not a regular expression.
"""

import argparse
import os
import re
import sys

from .._version import __version__

from . import aggregate
from . import gate as gate_mod
from .inputs import Inputs
from .metrics import metric_label
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


_INPUTS_HELP = """Several profiles as one (a FILE is a file, a quoted glob such as 'run_*.hatchet', or a
period-series prefix: NAME stands for NAME.part_<k>.hatchet[_msgpack]):
- period files of one process (NAME.part_0.hatchet, NAME.part_1.hatchet, ...) are summed into one input;
- inputs are matched node by node by call path (frame names from ROOT) and combined with --agg;
- an input's rank comes from its file name: a 'rank<N>' token (proton.rank3.hatchet), else the one
  integer in which the names differ ('r{rank}_x' -> r3_x), else a trailing _<N>, -<N> or .<N>
  (run_3.hatchet), else its position (0, 1, ...) on the command line;
- device info: the first input listing a device is used (a note on stderr when another differs).
One FILE is shown exactly as a single profile.
"""

_AGG_HELP = """How several inputs are combined per node (default: sum):
  sum   add the file metrics, then derive (avg_time = total time / total count, time/%% of the total)
  mean  sum / number of inputs (a node missing from an input counts 0 there)
  min   smallest of the inputs' derived values at the node (over the inputs that have it)
  max   largest of them (ROOT: the slowest input's total)"""


class UsageError(Exception):
    """A bad command line (reported as one line, exit code 2)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def build_parser():
    """Return the argument parser (Proton's options plus ours)."""
    p = _Parser(prog="proton-viewer", formatter_class=argparse.RawTextHelpFormatter,
                description="Show a Proton profile (.hatchet or .hatchet_msgpack) as a tree.\n\n" + _INPUTS_HELP,
                usage="proton-viewer [options] FILE [FILE ...]")
    p.add_argument("--version", action="version", version=f"proton-viewer (proton_ctypes) {__version__}")
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
    p.add_argument("--diff-profile", "-diff", type=str, action="append", default=None, metavar="BASE",
                   help="Compare with a base profile: nodes matched by call path, columns base, new (FILE),\n"
                        "change and change %%; nodes in one profile only are marked [new] or [gone].\n"
                        "BASE may be a quoted glob or a period prefix; repeat -diff for several files;\n"
                        "several are aggregated with --agg like FILE (e.g. new_*.hatchet -diff 'base_*.hatchet').")
    p.add_argument("--fail-if", action="append", default=None, metavar="RULE", help=_FAIL_IF_HELP)
    p.add_argument("--html", type=str, default=None, metavar="REPORT.html",
                   help="Also write a self-contained HTML report (flame graph, sortable table).")
    p.add_argument("--agg", choices=aggregate.AGGREGATIONS, default="sum", help=_AGG_HELP)
    p.add_argument("--max-rank", "--agg-rank", dest="max_rank", action="store_true", default=False,
                   help="Find stragglers: after the values, print rank=<r>, the rank of the input whose first\n"
                        "metric is largest at that node (ties: the input given first; rank=- if none has it).\n"
                        "-f json: \"max_rank\" per node. Not with -diff.")
    return p


def check_patterns(args):
    """A ``-i``/``-e`` that is not a regular expression is a usage error naming the option."""
    for option, pattern in (("-i/--include", args.include), ("-e/--exclude", args.exclude)):
        if pattern is None:
            continue
        try:
            re.compile(pattern)
        except re.error as e:
            raise UsageError(f"argument {option}: not a regular expression: {pattern!r} ({e})") from None


def show_metrics(inputs, write, note=lambda text: None):
    """Print the ``--list`` output for ``inputs`` (an :class:`~.inputs.Inputs`, the merged metrics)."""
    profile = aggregate.raw_profile(inputs, note)
    write("Available inclusive metrics:\n")
    for raw in profile.root_metrics:
        write(f"- {metric_label(raw)}\n")
    write("Available exclusive metrics:\n")
    for raw in profile.other_metrics:
        write(f"- {metric_label(raw)}\n")


def run(args, files, write, err):
    """Execute the parsed command line on the positional ``files``; return the exit code."""
    if args.include and args.exclude:
        raise ValueError("Cannot specify both include and exclude")
    inputs = Inputs(files)

    def note(text):
        err(f"proton-viewer: note: {text}\n")

    if args.list:
        show_metrics(inputs, write, note)
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
        if args.max_rank:
            raise ValueError("--max-rank cannot be combined with -diff")
        from .diff_command import run_diff  # lazy: only for that option

        def load_side(side, wanted):
            return aggregate.load(side, wanted, args.agg, args.include, args.exclude, args.threshold,
                                  note=note)[:2]
        return run_diff(args, inputs, Inputs(args.diff_profile), metrics, rules, write, err, load_side)
    profile, columns, ranks = aggregate.load(inputs, metrics, args.agg, args.include, args.exclude,
                                             args.threshold, args.max_rank, note)
    if args.html:
        from .html import write_report  # lazy: only for that option
        write_report(args.html, profile, columns, args.depth, title=inputs.label,
                     names=format_names(profile, args.format), extra=None if ranks is None else {"max rank": ranks})
    if args.format == "json":
        from .jsonout import profile_json  # lazy: only for that option
        extra = None if ranks is None else {"max_rank": ranks}
        write(profile_json(profile, columns, args.depth, args.print_sorted, extra) + "\n")
        return 0
    cells = None if ranks is None else ["rank=-" if r is None else f"rank={r}" for r in ranks]
    print_profile(profile, columns, args.depth, args.format, args.print_sorted, write, cells)
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
        unknown = [arg for arg in rest if arg.startswith("-")]
        if unknown:
            raise UsageError(f"unrecognized arguments: {' '.join(unknown)}")
        if not rest:
            raise AssertionError("Must specify a file to read")
        check_patterns(args)
        return run(args, rest, out.write, err.write)
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
