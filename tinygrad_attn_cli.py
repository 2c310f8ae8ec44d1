"""The installed ``tinygrad-attn`` command: the command line of ``tinygrad_attn.commands.cli``,
with a Ctrl-C while the package loads (NumPy and every module take a few tenths of a second)
ending in one line, ``interrupted``, and exit code 130, as every later Ctrl-C does.

It lives beside the package, not in it, because importing any module of the package runs the
package's ``__init__`` first: only from here can the package's import be covered without changing
what ``import tinygrad_attn`` does elsewhere (a KeyboardInterrupt there propagates as usual).
While it loads, Ctrl-C ends the process from its signal handler, since a KeyboardInterrupt raised
inside an import can come out as another error (NumPy's C modules turn it into an ImportError);
``commands.cli.main`` gives Ctrl-C back to the command once loaded
(``tinygrad_attn.startup_interrupt``, which sets this module's handler for ``python -m
tinygrad_attn``).
"""

import os
import signal
import sys

__all__ = ["LOADING_MARK", "end_the_command_on_ctrl_c", "main", "say_interrupted_and_exit"]


LOADING_MARK = "ends_the_command_while_it_loads"    # set on a handler that starting_done replaces


def say_interrupted_and_exit(signum, frame) -> None:
    """SIGINT while the command loads: one line and exit code 130, from the handler itself."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)        # a second Ctrl-C while leaving changes nothing
    sys.stderr.write("interrupted\n")
    sys.stderr.flush()
    os._exit(130)           # nothing is written yet; no import in progress can turn this into an error


setattr(say_interrupted_and_exit, LOADING_MARK, True)


def end_the_command_on_ctrl_c() -> None:
    """From now until the command has loaded, Ctrl-C ends the process (`say_interrupted_and_exit`).
    A Ctrl-C that Python was told to ignore (a background job) stays ignored."""
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, say_interrupted_and_exit)


def main() -> int:
    """Load the command line and run it on ``sys.argv``; the exit code."""
    end_the_command_on_ctrl_c()
    from tinygrad_attn.commands.cli import main as command_line
    return command_line()
