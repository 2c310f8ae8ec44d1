"""``tinygrad-attn step``: walk through backprop of a small example, one node at a time.

Keys: Enter, space, n or → shows the next step, b or ← goes back one, q quits; any other key
shows the keys again. On a terminal a single key press is enough. ``--all`` prints every step
without waiting (for pipes and tests).
Every array is labelled: a value (of S, P, …) or a gradient dL/d(·) of what it belongs to.
"""

from __future__ import annotations

import argparse

from ..viz.stepper import Step, backprop_steps
from .example_options import EXAMPLES, build_example, example_parser
from .keys import BACK, HELP, KEYS_HELP, QUIT, read_key

__all__ = ["add_parser", "interact", "run"]


def run(args: argparse.Namespace) -> int:
    example = build_example(args)
    kind = "built from primitives (--unfused)" if args.unfused else "one fused op"
    attention = f" Attention is {kind}." if example.has_attention else ""
    print(f"example {args.example!r}: {EXAMPLES[args.example].__doc__}{attention}")
    print(example.intro)
    print(f"loss = {example.loss.item():.6f}; the backward pass runs from the loss back to the parameters.\n")
    steps = backprop_steps(example.loss, tokens=example.tokens, vocab=example.vocab)
    if args.all:
        count = 0
        for step in steps:
            print(step, end="\n\n")
            count += 1
        print(f"{count} steps (0 to {count - 1}); every parameter now holds its .grad")
        return 0
    return interact(steps)


def interact(steps) -> int:
    """Show steps one at a time, keeping those seen so that `b` can go back."""
    seen: list[Step] = []
    position = -1
    while True:
        key = read_key("[Enter/→] next  [b/←] back  [q] quit > ")
        if key is None:             # standard input closed: nothing more will come
            print("\n(standard input closed: stopping; use --all to print every step)")
            return 0
        if key == QUIT:
            return 0
        if key == HELP:
            print(f"({KEYS_HELP})")
            continue
        if key == BACK:
            if position <= 0:
                print("(this is the first step)")
                continue
            position -= 1
        else:
            if position + 1 == len(seen):
                step = next(steps, None)
                if step is None:
                    print(f"done: {len(seen)} steps (0 to {len(seen) - 1}); every parameter now holds "
                          "its .grad")
                    return 0
                seen.append(step)
            position += 1
        print(seen[position], end="\n\n")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = example_parser(subparsers, "step", "step through backprop one node at a time", __doc__)
    parser.add_argument("--all", action="store_true", help="print every step without waiting")
    parser.set_defaults(run=run)
