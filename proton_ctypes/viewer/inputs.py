"""Which files a ``proton-viewer`` command line names: globs, period series and ranks.

Each positional ``FILE`` (and each ``-diff BASE``) is, in this order of precedence:

* an existing path: that file;
* a glob (contains ``*``, ``?`` or ``[``; quote it so the shell leaves it alone): the regular files it
  matches, in natural order (``run_2`` before ``run_10``); no match is an error;
* a period-series prefix: ``name`` or ``name.hatchet`` stands for ``name.part_<k>.hatchet`` and
  ``name.part_<k>.hatchet_msgpack`` (the files ``mode="periodic_flushing"`` writes) when such files exist;
* otherwise the path as given (reading it then fails with ``<path>: No such file or directory``).

The same file named twice is read once.  Files named ``<stem>.part_<k>.<ext>`` with the same ``<stem>`` form
one **series** (the periods of one process, ``k`` ascending; a period given twice is an error); every other
file is a series of its own.  A series is one input, one *rank*.

The rank of a series is taken from its file name (directory, ``.hatchet``/``.hatchet_msgpack`` and
``.part_<k>`` removed), by the first of these rules that gives every series a number, all different:

1. a ``rank<N>`` token (also ``rank_<N>``, ``rank-<N>``, any case, not preceded by a letter): the default
   ``proton.rank3`` or ``-n 'run.rank{rank}'``;
2. with several series, the one integer in which the names differ: ``r{rank}_train`` -> ``r3_train``;
3. a trailing ``_<N>``, ``-<N>`` or ``.<N>``: ``run_{rank}`` -> ``run_3``;
4. otherwise the position of the series on the command line (0, 1, ...).
"""

import glob
import os
import re
from dataclasses import dataclass, field

_PART = re.compile(r"^(?P<stem>.+)\.part_(?P<k>\d+)\.(?:hatchet|hatchet_msgpack)$")
_EXTENSIONS = (".hatchet_msgpack", ".hatchet")
_RANK_TOKEN = re.compile(r"(?<![a-z])rank[_-]?(\d+)", re.IGNORECASE)
_TRAILING = re.compile(r"[_.-](\d+)$")


def natural_key(text):
    """Sort key that orders the digit runs of ``text`` by value (``run_2`` before ``run_10``)."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def _strip_extension(path):
    for ext in _EXTENSIONS:
        if path.endswith(ext):
            return path[: -len(ext)]
    return path


def period_files(prefix):
    """The ``<prefix>.part_<k>.hatchet[_msgpack]`` files (``prefix`` may end in ``.hatchet``), by ``k``."""
    stem = _strip_extension(prefix)
    found = []
    for path in glob.glob(glob.escape(stem) + ".part_*"):
        m = _PART.match(path)
        if m and m.group("stem") == stem and os.path.isfile(path):
            found.append((int(m.group("k")), path))
    return [path for _, path in sorted(found)]


def expand(arg):
    """The files one command-line argument names (see the module docstring)."""
    if os.path.exists(arg):
        return [arg]
    if any(c in arg for c in "*?["):
        matches = sorted((p for p in glob.glob(arg) if os.path.isfile(p)), key=natural_key)
        if not matches:
            raise FileNotFoundError(f"no file matches {arg!r}")
        return matches
    return period_files(arg) or [arg]


@dataclass
class Series:
    """The files of one input: one file, or the period files of one process (in period order)."""

    stem: str
    paths: list = field(default_factory=list)
    periods: list = field(default_factory=list)

    @property
    def label(self):
        """A name for messages: the file, or ``<stem>.part_{a..b}`` for a series of several periods."""
        if len(self.paths) == 1:
            return self.paths[0]
        return f"{self.stem}.part_{{{self.periods[0]}..{self.periods[-1]}}}"


def group_series(paths):
    """Group files into :class:`Series` (period files by stem), in order of first appearance."""
    series, by_stem = [], {}
    for path in paths:
        m = _PART.match(path)
        if not m:
            series.append(Series(_strip_extension(path), [path], [None]))
            continue
        stem, k = m.group("stem"), int(m.group("k"))
        s = by_stem.get(stem)
        if s is None:
            s = by_stem[stem] = Series(stem)
            series.append(s)
        if k in s.periods:
            raise ValueError(f"period {k} of {stem} is given twice ({s.paths[s.periods.index(k)]}, {path})")
        s.paths.append(path)
        s.periods.append(k)
    for s in by_stem.values():
        order = sorted(range(len(s.paths)), key=s.periods.__getitem__)
        s.paths, s.periods = [s.paths[i] for i in order], [s.periods[i] for i in order]
    return series


def _rank_tokens(names):
    found = [_RANK_TOKEN.findall(name) for name in names]
    return [int(f[-1]) for f in found] if all(found) else None


def _varying_integer(names):
    if len(names) < 2:
        return None
    start = len(os.path.commonprefix(names))
    end = min(len(os.path.commonprefix([n[::-1] for n in names])), min(map(len, names)) - start)
    head, tail = names[0][:start], names[0][len(names[0]) - end:] if end else ""
    start -= len(head) - len(head.rstrip("0123456789"))  # a number is never cut in two
    end -= len(tail) - len(tail.lstrip("0123456789"))
    middles = [n[start: len(n) - end] for n in names]
    return [int(m) for m in middles] if all(m.isdigit() for m in middles) else None


def _trailing_integer(names):
    found = [_TRAILING.search(name) for name in names]
    return [int(m.group(1)) for m in found] if all(found) else None


def assign_ranks(series):
    """The rank of every series (see the module docstring)."""
    names = [os.path.basename(s.stem) for s in series]
    for rule in (_rank_tokens, _varying_integer, _trailing_integer):
        ranks = rule(names)
        if ranks is not None and len(set(ranks)) == len(ranks):
            return ranks
    return list(range(len(series)))


class Inputs:
    """The inputs of one side of the command line: arguments as given, series, ranks."""

    def __init__(self, args):
        self.args = list(args)
        paths, seen = [], set()
        for arg in self.args:
            for path in expand(arg):
                real = os.path.realpath(path)
                if real not in seen:
                    seen.add(real)
                    paths.append(path)
        self.series = group_series(paths)
        self.ranks = assign_ranks(self.series)

    @property
    def single(self):
        """The path when the inputs are exactly one file (today's single-profile viewer), else ``None``."""
        if len(self.series) == 1 and len(self.series[0].paths) == 1:
            return self.series[0].paths[0]
        return None

    @property
    def label(self):
        """How the inputs are named in headers and titles: the arguments as given (shortened past 3)."""
        if len(self.args) <= 3:
            return " ".join(self.args)
        return f"{self.args[0]} ... {self.args[-1]} ({len(self.args)} arguments)"
