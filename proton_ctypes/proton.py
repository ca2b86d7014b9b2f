"""The ``proton`` command: profile a script or a pytest run that never calls ``start``.

``proton [options] script.py [args]`` runs the script as ``__main__`` with
``sys.argv = [script, *args]`` inside one session (id 0 in a fresh process) and writes
the profile when it ends, also when it raises, calls ``sys.exit`` or is interrupted;
``proton [options] pytest [args]`` runs pytest in-process.  Inside, ``start`` returns
None and only session 0 may be activated, deactivated or finalized.

Every mistake on the command line is one line on stderr (``proton: error: ...``) and exit
code 2, found before the script runs and before any file is created: no script, a script
that cannot be opened, a mode or backend that cannot start (``-b cupti`` without an NVIDIA
GPU).  Without a GPU the host-only backend is chosen with one line saying so.  A profile
that cannot be written is one line and exit code 1.  The script's own exceptions keep
their traceback, as in Proton.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import runpy
import sys
import traceback

from ._version import __version__
from .backends import select
from .core import manager
from .flags import flags
from .profile import finalize, start

USAGE = """
    proton [options] script.py [script_args] [script_options]
    proton [options] pytest [pytest_args] [script_options]
    python -m proton_ctypes [options] script.py [script_args] [script_options]
"""
#: exit code of a command line that cannot run (argparse's, and Python's for a missing script)
EXIT_USAGE = 2
#: exit code when the profile could not be written
EXIT_NOT_WRITTEN = 1
#: Triton targets a GPU backend needs, and what to call them in a message
NEEDED_TARGETS = {"cupti": ("cuda",), "rocprofiler": ("hip",), "roctracer": ("hip",),
                  "instrumentation": ("cuda", "hip")}
GPU_KIND = {"cuda": "an NVIDIA GPU", "hip": "an AMD GPU"}


class CommandLineError(Exception):
    """A command line that cannot run: one line on stderr, exit code 2."""


def build_parser() -> argparse.ArgumentParser:
    """The command line parser (Proton's options, plus ``--version``)."""
    parser = argparse.ArgumentParser(
        prog="proton", description="The proton command utility for profiling scripts and pytest tests.",
        usage=USAGE, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("-n", "--name", type=str, help="Name of the profiling session")
    parser.add_argument("-b", "--backend", type=str, help="Profiling backend", default=None,
                        choices=list(select.NAMES))
    parser.add_argument("-c", "--context", type=str, help="Profiling context", default="shadow",
                        choices=["shadow", "python"])
    parser.add_argument("-m", "--mode", type=str, help="Profiling mode", default=None)
    parser.add_argument("-d", "--data", type=str, help="Profiling data", default="tree", choices=["tree", "trace"])
    parser.add_argument("-k", "--hook", type=str, help="Profiling hook", default=None, choices=[None, "triton"])
    parser.add_argument("--version", action="version", version=f"proton (proton_ctypes) {__version__}")
    parser.add_argument("target_args", nargs=argparse.REMAINDER, help="Subcommand and its arguments")
    return parser


def parse_arguments(argv=None):
    """Parse the command line; returns ``(options, target_args)``.  No script is a usage error."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.target_args:
        parser.error("the script to profile is missing (proton [options] script.py [args], "
                     "or proton [options] pytest [args])")
    return args, args.target_args


def is_pytest(script: str) -> bool:
    """Whether the target is pytest (run in-process)."""
    return os.path.basename(script) == "pytest"


def check_target(script: str) -> None:
    """Raise :class:`CommandLineError` when ``script`` cannot be run (before anything starts)."""
    if is_pytest(script):
        if importlib.util.find_spec("pytest") is None:
            raise CommandLineError("pytest is not installed (pip install pytest)")
        return
    if os.path.isdir(script):
        if not os.path.isfile(os.path.join(script, "__main__.py")):
            raise CommandLineError(f"cannot open {script}: a folder without __main__.py")
        return
    try:
        with open(script, "rb"):
            pass
    except OSError as e:
        raise CommandLineError(f"cannot open {script}: {e.strerror or e}") from None


def check_backend(backend: str) -> None:
    """Raise :class:`CommandLineError` when a GPU backend was asked for and Triton's target is
    not that GPU.  (Without triton nothing can be told: the backend's own start decides.)"""
    wanted = NEEDED_TARGETS.get(backend)
    if wanted is None:
        return
    target = select.target_backend()
    if target in wanted or isinstance(target, ImportError):
        return
    why = select.host_reason(target) if not isinstance(target, str) else f"Triton's target is {target}"
    need = " or ".join(GPU_KIND[w] for w in wanted)
    raise CommandLineError(f"-b {backend} needs {need}, and none is usable here ({why}); "
                           "leave -b out, or use -b host to profile without a GPU")


def choose_backend(args):
    """``(backend, why)``: ``-b``, or the automatic choice and, when that is the host-only
    backend, why (see :func:`.backends.select.choose`)."""
    if args.backend:
        return args.backend, None
    return select.choose()


def check_mode(mode, backend: str) -> None:
    """Raise :class:`CommandLineError` for a ``-m`` the backend does not accept, naming those it does."""
    if not mode or backend == "instrumentation":  # the instrumentation hook checks its own modes
        return
    try:
        select.parse_mode(backend, mode)
    except ValueError as e:
        accepted = ", ".join(kind.value for kind in select.entry(backend).modes) or "none"
        raise CommandLineError(f"-m {mode}: {e} (modes of the {backend} backend: {accepted}; "
                               "or leave -m out)") from None


def start_session(args, backend: str) -> None:
    """``start`` with the command line's options; a refusal becomes :class:`CommandLineError`."""
    try:
        start(args.name, context=args.context, data=args.data, backend=backend, mode=args.mode, hook=args.hook)
    except (ValueError, RuntimeError, ImportError, OSError) as e:
        raise CommandLineError(f"cannot start profiling with the {backend} backend: {e}") from None


def execute_as_main(script: str, args: list) -> int:
    """Run ``script`` as ``__main__`` with ``args``; return its exit code."""
    original_argv = sys.argv
    sys.argv = [script] + list(args)
    sys.path.append(os.path.dirname(os.path.abspath(script)))
    try:
        runpy.run_path(script, run_name="__main__")
    except Exception as e:
        print("An error occurred while executing the script:")
        traceback.print_exception(type(e), e, e.__traceback__)
        return 1
    except SystemExit as e:
        return e.code
    except KeyboardInterrupt:
        return 1
    finally:
        sys.argv = original_argv
    return 0


def do_setup_and_execute(target_args: list) -> int:
    """Switch to command-line mode and run the target."""
    flags.command_line = True
    script = target_args[0]
    script_args = target_args[1:]
    if is_pytest(script):
        import pytest  # lazy: only for `proton pytest ...`
        return pytest.main(script_args)
    return execute_as_main(script, script_args)


def write_profile() -> bool:
    """Finalize every session; on a file-system error say so in one line (the sessions are
    then dropped: the exit handler would only fail again).  Returns whether it was written."""
    try:
        finalize()
        return True
    except OSError as e:
        sys.stderr.write(f"proton: error: {e}\n")
        manager.discard_all()
        return False
    finally:
        flags.command_line = False


def run_profiling(args, target_args) -> None:
    """Start the session, run the target, write the profile, exit with the target's code."""
    check_target(target_args[0])
    backend, why = choose_backend(args)
    check_backend(backend)
    check_mode(args.mode, backend)
    if why is not None:  # one line: what was chosen and why
        sys.stderr.write(f"proton: {why}: host-only backend; -b host silences this\n")
    start_session(args, backend)
    try:
        exitcode = do_setup_and_execute(target_args)
    except BaseException:
        write_profile()
        raise
    if not write_profile() and exitcode in (0, None):
        exitcode = EXIT_NOT_WRITTEN
    sys.exit(exitcode)


def main(argv=None) -> None:
    """Entry point of the ``proton`` console script."""
    args, target_args = parse_arguments(argv)
    try:
        run_profiling(args, target_args)
    except CommandLineError as e:
        sys.stderr.write(f"proton: error: {e}\n")
        sys.exit(EXIT_USAGE)


if __name__ == "__main__":
    main()
