"""The installed ``tinygrad-attn`` command: the command line of ``tinygrad_attn.commands.cli``,
with a Ctrl-C while the package loads (NumPy and the modules take a few tenths of a second)
ending in one line, ``interrupted``, and exit code 130, as every later Ctrl-C does.

It lives beside the package, not in it, because importing any module of the package runs the
package's ``__init__`` first: only here can its import be interrupted without changing what
``import tinygrad_attn`` does elsewhere (a KeyboardInterrupt there propagates as usual).
"""

import sys

__all__ = ["main"]


def main() -> int:
    """Load the command line and run it on ``sys.argv``; the exit code."""
    try:
        from tinygrad_attn.commands.cli import main as command_line
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return command_line()
