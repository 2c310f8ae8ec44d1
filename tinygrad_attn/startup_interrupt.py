"""Ctrl-C while ``python -m tinygrad_attn`` is still loading (NumPy and every module take a few
tenths of a second): one line, ``interrupted``, and exit code 130, as the command line gives once
it runs (``commands.cli.main``), instead of a traceback from inside an import.

The package's ``__init__`` calls `quiet_while_run_as_the_command` first, which does nothing unless
Python is importing the package to run it as a command, so ``import tinygrad_attn`` in a script
or a notebook raises KeyboardInterrupt as usual. For the command, Ctrl-C then ends the process
from its signal handler: a KeyboardInterrupt raised inside an import can come out as another
error (NumPy's C modules turn it into an ImportError with a long message). `starting_done`, the
first thing ``commands.cli.main`` does once the commands' modules are loaded, gives Ctrl-C back to
the command. The installed ``tinygrad-attn`` script starts in ``tinygrad_attn_cli`` (a module
beside the package, which cannot import this one before the package), with a handler of its own
marked the same way.
"""

from __future__ import annotations

import os
import signal
import sys

__all__ = ["LOADING_MARK", "quiet_while_run_as_the_command", "run_as_the_command", "starting_done"]

LOADING_MARK = "ends_the_command_while_it_loads"    # set on a handler that `starting_done` replaces


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
    sys.stderr.write("interrupted\n")
    sys.stderr.flush()
    os._exit(130)           # nothing is written yet; no import in progress can turn this into an error


setattr(_say_interrupted_and_exit, LOADING_MARK, True)


def quiet_while_run_as_the_command(package: str) -> None:
    """For ``python -m package``: until `starting_done`, Ctrl-C prints ``interrupted`` and exits
    with 130. A Ctrl-C that Python was told to ignore (a background job) stays ignored."""
    if run_as_the_command(package) and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _say_interrupted_and_exit)


def starting_done() -> None:
    """Ctrl-C raises KeyboardInterrupt again, for the command to handle: a no-op unless the
    handler is one that ends the command while it loads (this module's or the script's)."""
    if getattr(signal.getsignal(signal.SIGINT), LOADING_MARK, False):
        signal.signal(signal.SIGINT, signal.default_int_handler)
