"""``tinygrad-attn step``: walk through backprop of a small example, one node at a time.

Keys: Enter, space, n or → shows the next step, b or ← goes back one, q quits; any other key
shows the keys again. On a terminal a single key press is enough. ``--all`` prints every step
without waiting (for pipes and tests). ``--forward`` walks the forward pass first: each op in
the order it ran, with its output's value; then the backward pass as without it.
Every array is labelled: a value (of S, P, …) or a gradient dL/d(·) of what it belongs to.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator

from ..viz.example_graphs import Example
from ..viz.forward import forward_steps
from ..viz.stepper import backprop_steps
from .example_options import EXAMPLES, build_example, example_parser
from .keys import BACK, HELP, KEYS_HELP, QUIT, read_key
from .thread_count import add_threads_option, say_threads

__all__ = ["add_parser", "interact", "run", "walk"]

BACKWARD = "backward pass: from the loss back to the parameters, one op at a time"


def run(args: argparse.Namespace) -> int:
    try:
        example = build_example(args)
    except (ValueError, OSError) as error:      # a bad folder, text, layer or head: say so, no traceback
        print(f"tinygrad-attn step: {error}", file=sys.stderr)
        return 2
    say_threads()
    kind = "built from primitives (--unfused)" if args.unfused else "one fused op"
    attention = f" Attention is {kind}." if example.has_attention else ""
    print(f"example {args.example!r}: {EXAMPLES[args.example].__doc__}{attention}" if args.model is None
          else f"model {args.model} on {args.text!r}.{attention}")
    print(example.intro)
    then = ("first the forward pass, op by op in the order they ran, then the backward pass from the loss "
            "back to the parameters" if args.forward else
            "the backward pass runs from the loss back to the parameters")
    print(f"loss = {example.loss.item():.6f}; {then}.\n")
    shown = walk(example, args.forward, args.whole)
    if args.all:
        for text in shown:
            print(text, end="\n\n")
        return 0
    return interact(shown)


def walk(example: Example, forward: bool, whole: float | None = None) -> Iterator[str]:
    """What the command shows, one text per key press: with `forward`, each forward op and then a
    heading before the backward pass; each backward step; a last line counting them. `whole` as
    ``backprop_steps`` takes it (``--whole``)."""
    prefix = ""
    if forward:
        ops = list(forward_steps(example.loss, example.tokens, example.vocab, example.head, whole))
        yield from (str(op) for op in ops)
        prefix = f"forward pass done: {len(ops)} ops (forward 0 to {len(ops) - 1}).\n{BACKWARD}\n\n"
    count = 0
    for step in backprop_steps(example.loss, tokens=example.tokens, vocab=example.vocab, head=example.head,
                               whole=whole):
        yield prefix + str(step)
        prefix, count = "", count + 1
    yield f"{count} steps (0 to {count - 1}); every parameter now holds its .grad"


def interact(steps: Iterator[str]) -> int:
    """Show steps one at a time, keeping those seen so that `b` can go back; the walk's last text
    (the count) ends it."""
    seen: list[str] = []
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
                    return 0
                seen.append(step)
            position += 1
        print(seen[position], end="\n\n")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = example_parser(subparsers, "step", "step through backprop one node at a time", __doc__)
    parser.add_argument("--all", action="store_true", help="print every step without waiting")
    parser.add_argument("--forward", action="store_true",
                        help="walk the forward pass first: each op in the order it ran, with its "
                             "output's value")
    add_threads_option(parser, "--model", lambda args: args.model is not None)
    parser.set_defaults(run=run)
