"""Ctrl-C while ``python -m tinygrad_attn`` is still importing the package (NumPy and the modules
take a few tenths of a second): one line, ``interrupted``, and exit code 130, as the command line
gives once it runs (``commands.cli.main``), instead of a traceback from inside an import.

Only the command is quieted: the package's ``__init__`` calls `quiet_while_run_as_the_command`
first, which does nothing unless Python is importing the package to run it as a command;
``import tinygrad_attn`` in a script or a notebook raises KeyboardInterrupt as usual. The installed
``tinygrad-attn`` script starts in ``tinygrad_attn_cli`` (a module beside the package), which
catches KeyboardInterrupt around its import instead.
"""

from __future__ import annotations

import signal
import sys

__all__ = ["quiet_while_run_as_the_command", "run_as_the_command", "starting_done"]


def run_as_the_command(package: str) -> bool:
    """Whether Python is importing `package` to run it as ``python -m package``.

    Until it has found the module to run, Python keeps ``sys.argv[0]`` at ``"-m"`` (runpy), and
    ``sys.argv[1:]`` are the last words of the command as typed (``sys.orig_argv``), so the word
    before them names the module: ``package`` (``-m package``) or ``-mpackage``.
    """
    argv, typed = sys.argv, getattr(sys, "orig_argv", [])
    if argv[:1] != ["-m"] or len(typed) < len(argv):
        return False
    return typed[len(typed) - len(argv)].removeprefix("-m") == package


def _say_interrupted_and_exit(signum, frame) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)        # a second Ctrl-C while leaving changes nothing
    print("interrupted", file=sys.stderr)
    raise SystemExit(130)                               # ends the import and Python, without a traceback


def quiet_while_run_as_the_command(package: str) -> None:
    """For ``python -m package``: until `starting_done`, Ctrl-C prints ``interrupted`` and exits
    with 130. A Ctrl-C that Python was told to ignore (a background job) stays ignored."""
    if run_as_the_command(package) and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _say_interrupted_and_exit)


def starting_done() -> None:
    """Ctrl-C raises KeyboardInterrupt again, for the command to handle (a no-op unless
    `quiet_while_run_as_the_command` changed it)."""
    if signal.getsignal(signal.SIGINT) is _say_interrupted_and_exit:
        signal.signal(signal.SIGINT, signal.default_int_handler)
