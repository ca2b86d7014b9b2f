"""The ``proton`` command: profile a script or a pytest run that never calls ``start``.

``proton [options] script.py [args]`` runs the script as ``__main__`` with
``sys.argv = [script, *args]`` inside one session (id 0 in a fresh process) and writes
the profile when it ends, also when it raises, calls ``sys.exit`` or is interrupted;
``proton [options] pytest [args]`` runs pytest in-process.  Inside, ``start`` returns
None and only session 0 may be activated, deactivated or finalized.
"""
from __future__ import annotations

import argparse
import os
import runpy
import sys
import traceback

from .backends import select
from .flags import flags
from .profile import finalize, start

USAGE = """
    proton [options] script.py [script_args] [script_options]
    proton [options] pytest [pytest_args] [script_options]
    python -m proton_ctypes [options] script.py [script_args] [script_options]
"""


def parse_arguments(argv=None):
    """Parse the command line; returns ``(options, target_args)``."""
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
    parser.add_argument("target_args", nargs=argparse.REMAINDER, help="Subcommand and its arguments")
    args = parser.parse_args(argv)
    return args, args.target_args


def is_pytest(script: str) -> bool:
    """Whether the target is pytest (run in-process)."""
    return os.path.basename(script) == "pytest"


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


def run_profiling(args, target_args) -> None:
    """Start the session, run the target, write the profile, exit with the target's code."""
    start(args.name, context=args.context, data=args.data, backend=args.backend, mode=args.mode, hook=args.hook)
    try:
        exitcode = do_setup_and_execute(target_args)
    except BaseException:
        finalize()
        flags.command_line = False
        raise
    finalize()
    flags.command_line = False
    sys.exit(exitcode)


def main(argv=None) -> None:
    """Entry point of the ``proton`` console script."""
    args, target_args = parse_arguments(argv)
    run_profiling(args, target_args)


if __name__ == "__main__":
    main()
