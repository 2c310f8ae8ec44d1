"""The ``tinygrad-attn`` command line: one subcommand per module listed in ``COMMANDS``.

Each command module in ``tinygrad_attn/commands`` defines ``add_parser(subparsers)``, which adds
its subparser and sets ``run`` (a function of the parsed arguments returning an exit code) as
its default. Output piped into a reader that stops early (``| head``) ends quietly, and so does
Ctrl-C that no command handles (while the commands' modules load). Started as a command
(``tinygrad-attn``, ``python -m tinygrad_attn``), a Ctrl-C before the command runs, while the
package loads too, ends the process from its signal handler with the same line
(``startup_interrupt``, ``tinygrad_attn_cli``). A command that computes runs under the thread
count its ``--threads`` option asks for, or its default (``thread_count``).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from ..startup_interrupt import starting_done
from .thread_count import run_with_threads

__all__ = ["COMMANDS", "build_parser", "main"]


COMMANDS = ("train", "sample", "step", "graph", "explore", "export", "ops", "dtypes", "check")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tinygrad-attn",
        description="Train, sample, step through and draw tiny transformers built on tinygrad_attn.")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"{__package__}.{name}").add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        parser = build_parser()         # imports every command's module
        args = parser.parse_args(argv)
        starting_done()                 # the command loaded: from here a Ctrl-C is a KeyboardInterrupt
        if args.command is None:
            parser.print_help()
            return 0
        return run_with_threads(args)
    except BrokenPipeError:     # `| head` stopped reading: end quietly, as other tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())   # nothing more to flush
        return 0
    except KeyboardInterrupt:   # Ctrl-C that no command caught (while importing): a line, no traceback
        print("interrupted", file=sys.stderr)
        return 130
