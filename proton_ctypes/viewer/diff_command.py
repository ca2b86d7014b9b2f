"""Running ``-diff`` (with ``--fail-if``, ``-f json`` and ``--html``): the orchestration of a comparison."""

from .diff import build_diff, diff_lines, sorted_diff_lines
from .gate import evaluate, report
from .render import format_names


def run_diff(args, new, base, metrics, rules, write, err, load):
    """Compare ``new`` (FILE) with ``base`` (``-diff``), two :class:`~.inputs.Inputs`; return the exit code.

    ``load(inputs, metrics)`` reads (and aggregates) one side into ``(profile, columns)``.  Metrics named only
    by gate rules are computed but not displayed.
    """
    wanted = list(metrics) + [r.metric for r in rules if r.metric not in metrics]
    new_profile, new_cols = load(new, wanted)
    base_profile, base_cols = load(base, wanted)
    tree = build_diff(new_profile, new_cols, base_profile, base_cols)
    shown = len(metrics)
    if args.html:
        from .html import write_diff_report  # lazy: only for that option
        write_diff_report(args.html, tree, shown, args.depth, new_label=new.label, base_label=base.label,
                          names=format_names(tree, args.format))
    if args.format == "json":
        from .jsonout import diff_json  # lazy: only for that option
        write(diff_json(tree, shown, args.depth, args.print_sorted) + "\n")
    else:
        for line in diff_lines(tree, shown, args.depth, args.format, new.label, base.label):
            write(line)
        if args.print_sorted:
            for line in sorted_diff_lines(tree, args.format):
                write(line)
    if not rules:
        return 0
    crossings = evaluate(rules, tree, {m: wanted.index(m) for m in wanted})
    return report(crossings, len(rules), err)
