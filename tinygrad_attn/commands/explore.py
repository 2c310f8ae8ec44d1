"""``tinygrad-attn explore``: write the backprop explorer of an example, one self-contained HTML page.

Open the page in a browser (no network needed): the graph on the left, the current backward
step on the right; ◀ ▶ or the arrow keys step, a click on an op jumps to its step (``--forward``:
the forward pass first, each op with its output's value). Transformer
blocks, attention and MLPs start folded: a click on a box opens it, "fold ▴" closes it.
"""

from __future__ import annotations

import argparse
import sys

from ..viz.explorer import explore
from .example_options import build_example, describe, example_parser
from .thread_count import add_threads_option, say_threads

__all__ = ["add_parser", "run"]


def run(args: argparse.Namespace) -> int:
    try:
        example = build_example(args)
        page = explore(example.loss, args.out, tokens=example.tokens, vocab=example.vocab,
                       title=f"backprop explorer: {describe(args)}", forward=args.forward,
                       head=example.head, whole=args.whole)
    except (ValueError, OSError) as error:  # a bad model folder, text or --out: say so, no traceback
        print(f"tinygrad-attn explore: {error}", file=sys.stderr)
        return 2
    say_threads()
    ops = f"{page.forward_ops} forward ops, then " if page.forward_ops else ""
    print(f"wrote {page.path}: {ops}{page.steps} backward steps, {len(page.html.encode()) / 1024:.0f} KiB; "
          "open it in a browser")
    return 0


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = example_parser(subparsers, "explore", "write the backprop explorer page of an example", __doc__)
    parser.add_argument("--out", default="explorer.html", help="output HTML file (default explorer.html)")
    parser.add_argument("--forward", action="store_true",
                        help="walk the forward pass first: each op in the order it ran, with its "
                             "output's value")
    add_threads_option(parser, "--model", lambda args: args.model is not None)
    parser.set_defaults(run=run)
