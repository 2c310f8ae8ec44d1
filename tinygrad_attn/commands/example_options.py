"""The options shared by the commands that work on one example graph (``step``, ``graph``)."""

from __future__ import annotations

import argparse

from ..viz.example_graphs import EXAMPLES, Example

__all__ = ["EXAMPLES", "build_example", "example_parser"]


def example_parser(subparsers: argparse._SubParsersAction, command: str, summary: str,
                   description: str) -> argparse.ArgumentParser:
    """The subparser of a command that works on one example graph, with ``--example`` and ``--unfused``."""
    listing = "\n".join(f"  {name:6s} {fn.__doc__}" for name, fn in EXAMPLES.items())
    parser = subparsers.add_parser(command, help=summary, description=description,
                                   epilog=f"examples:\n{listing}",
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--example", choices=list(EXAMPLES), default="head",
                        help="which example graph (default head: one attention head on 'the cat sat')")
    parser.add_argument("--unfused", action="store_true",
                        help="build attention from primitives (Kᵀ, Q Kᵀ, scale, softmax, P V), each its "
                        "own backward step, instead of one fused op")
    return parser


def build_example(args: argparse.Namespace) -> Example:
    """The example graph that ``--example`` and ``--unfused`` ask for."""
    return EXAMPLES[args.example](fused=not args.unfused)
