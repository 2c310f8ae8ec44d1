"""The ``tinygrad-attn`` command line: one subcommand per module in ``tinygrad_attn/commands``.

Each command module defines ``add_parser(subparsers)``, which adds its subparser and sets
``run`` (a function of the parsed arguments returning an exit code) as its default.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
from collections.abc import Sequence

from . import commands


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tinygrad-attn",
        description="Train, sample, step through and draw tiny transformers built on tinygrad_attn.")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        importlib.import_module(f"{commands.__name__}.{info.name}").add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    return args.run(args)
