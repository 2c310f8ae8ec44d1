"""Ctrl-C while ``python -m tinygrad_attn`` is still loading (NumPy and every module take a few
tenths of a second): one line, ``interrupted``, and exit code 130, as the command line gives once
it runs (``commands.cli.main``), instead of a traceback from inside an import.

The package's ``__init__`` calls `quiet_while_run_as_the_command` first, which does nothing unless
Python is importing the package to run it as a command, so ``import tinygrad_attn`` in a script
or a notebook raises KeyboardInterrupt as usual. For the command, Ctrl-C then ends the process
from its signal handler: a KeyboardInterrupt raised inside an import can come out as another
error (NumPy's C modules turn it into an ImportError with a long message). `starting_done`, the
first thing ``commands.cli.main`` does once the commands' modules are loaded, gives Ctrl-C back to
the command. The handler and its mark are ``tinygrad_attn_cli``'s (the installed ``tinygrad-attn``
script's module, beside the package: it sets them before the package can be imported, and imports
nothing of ours).
"""

from __future__ import annotations

import signal
import sys

from tinygrad_attn_cli import LOADING_MARK, end_the_command_on_ctrl_c

__all__ = ["LOADING_MARK", "quiet_while_run_as_the_command", "run_as_the_command", "starting_done"]


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


def quiet_while_run_as_the_command(package: str) -> None:
    """For ``python -m package``: until `starting_done`, Ctrl-C prints ``interrupted`` and exits
    with 130. A Ctrl-C that Python was told to ignore (a background job) stays ignored."""
    if run_as_the_command(package):
        end_the_command_on_ctrl_c()


def starting_done() -> None:
    """Ctrl-C raises KeyboardInterrupt again, for the command to handle: a no-op unless the
    handler is one that ends the command while it loads (this module's or the script's)."""
    if getattr(signal.getsignal(signal.SIGINT), LOADING_MARK, False):
        signal.signal(signal.SIGINT, signal.default_int_handler)
