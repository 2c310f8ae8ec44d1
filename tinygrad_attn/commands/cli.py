"""The ``tinygrad-attn`` command line: one subcommand per module listed in ``COMMANDS``.

Each command module in ``tinygrad_attn/commands`` defines ``add_parser(subparsers)``, which adds
its subparser and sets ``run`` (a function of the parsed arguments returning an exit code) as
its default. `main` is the installed ``tinygrad-attn`` script (``[project.scripts]`` in
pyproject.toml) and what ``python -m tinygrad_attn`` runs. Output piped into a reader that stops
early (``| head``) ends quietly, and a Ctrl-C that no command handles ends with one line and exit
code 130. A command that computes runs under
the thread count its ``--threads`` option asks for, or its default (``thread_count``).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

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
        if args.command is None:
            parser.print_help()
            return 0
        return run_with_threads(args)
    except BrokenPipeError:     # `| head` stopped reading: end quietly, as other tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())   # nothing more to flush
        return 0
    except KeyboardInterrupt:   # Ctrl-C that no command caught: a line, no traceback
        print("interrupted", file=sys.stderr)
        return 130
