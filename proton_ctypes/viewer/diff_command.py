"""Running ``-diff`` (with ``--fail-if``, ``-f json`` and ``--html``): the orchestration of a comparison."""

from .diff import build_diff, diff_lines, sorted_diff_lines
from .gate import evaluate, report
from .render import format_names


def run_diff(args, path, metrics, rules, write, err, parse):
    """Compare ``path`` (new) with ``args.diff_profile`` (base); return the exit code.

    ``parse(metrics, path, include, exclude, threshold)`` reads one profile.  Metrics named only by gate
    rules are computed but not displayed.
    """
    wanted = list(metrics) + [r.metric for r in rules if r.metric not in metrics]
    new, new_cols = parse(wanted, path, args.include, args.exclude, args.threshold)
    base, base_cols = parse(wanted, args.diff_profile, args.include, args.exclude, args.threshold)
    tree = build_diff(new, new_cols, base, base_cols)
    shown = len(metrics)
    if args.html:
        from .html import write_diff_report
        write_diff_report(args.html, tree, shown, args.depth, new_label=path, base_label=args.diff_profile,
                          names=format_names(tree, args.format))
    if args.format == "json":
        from .jsonout import diff_json
        write(diff_json(tree, shown, args.depth, args.print_sorted) + "\n")
    else:
        for line in diff_lines(tree, shown, args.depth, args.format, path, args.diff_profile):
            write(line)
        if args.print_sorted:
            for line in sorted_diff_lines(tree, args.format):
                write(line)
    if not rules:
        return 0
    crossings = evaluate(rules, tree, {m: wanted.index(m) for m in wanted})
    return report(crossings, len(rules), err)
