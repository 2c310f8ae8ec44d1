"""``tinygrad-attn step``: walk through backprop of a small example, one node per Enter.

Keys: Enter shows the next step, ``b`` goes back one, ``q`` quits. ``--all`` prints every step
without waiting (for pipes and tests).
"""

from __future__ import annotations

import argparse
import os
import sys

from ..demos import DEMOS, example_parser
from ..stepper import Step, backprop_steps


def run(args: argparse.Namespace) -> int:
    loss, model = DEMOS[args.example]()
    print(f"example {args.example!r}: {DEMOS[args.example].__doc__}")
    print(f"loss = {loss.item():.6f}; the backward pass runs from the loss back to the parameters.\n")
    steps = backprop_steps(loss)
    if args.all:
        try:
            count = 0
            for step in steps:
                print(step, end="\n\n")
                count += 1
            print(f"{count} steps; every parameter now holds its .grad")
        except BrokenPipeError:     # `| head` stopped reading: end quietly, not with a traceback
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    return interact(steps)


def interact(steps) -> int:
    """Show steps one at a time, keeping those seen so that `b` can go back."""
    seen: list[Step] = []
    position = -1
    while True:
        try:
            key = input("[Enter] next  [b] back  [q] quit > ").strip().lower()
        except EOFError:
            return 0
        if key == "q":
            return 0
        if key == "b":
            if position <= 0:
                print("(this is the first step)")
                continue
            position -= 1
        else:
            if position + 1 == len(seen):
                step = next(steps, None)
                if step is None:
                    print(f"done: {len(seen)} steps; every parameter now holds its .grad")
                    return 0
                seen.append(step)
            position += 1
        print(seen[position], end="\n\n")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = example_parser(subparsers, "step", "step through backprop one node at a time",
                            __doc__, "head")
    parser.add_argument("--all", action="store_true", help="print every step without waiting")
    parser.set_defaults(run=run)
