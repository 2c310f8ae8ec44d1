"""``tinygrad-attn graph``: draw the forward and backward graph of an example as SVG or PNG.

The example's loss is backpropagated first, so each tensor's record shows its gradient (entries
when small, else the norm), and each op its step number in ``tinygrad-attn step``.
"""

from __future__ import annotations

import argparse
import sys
import time

from .. import nn
from ..viz import collect, emit, write_image
from .example_options import build_example, example_parser
from .thread_count import add_threads_option, say_threads

__all__ = ["COLLAPSIBLE", "add_parser", "run"]


COLLAPSIBLE = {cls.__name__: cls for cls in (nn.MultiHeadAttention, nn.TransformerBlock, nn.MLP,
                                             nn.Linear, nn.LayerNorm, nn.Embedding)}


def run(args: argparse.Namespace) -> int:
    try:
        example = build_example(args)
    except (ValueError, OSError) as error:      # a bad folder, text, layer or head: say so, no traceback
        print(f"tinygrad-attn graph: {error}", file=sys.stderr)
        return 2
    loss = example.loss
    loss.backward()
    start = time.perf_counter()
    try:                                # a bad --collapse, --expand or --out: say so, no traceback
        graph = collect(loss, show_grads=not args.no_grads, tokens=example.tokens, expand=args.expand,
                        collapse=[COLLAPSIBLE.get(name, name) for name in args.collapse] or None,
                        head=example.head, whole=args.whole)
        path = write_image(emit(graph).source, args.out)
    except ValueError as error:
        print(f"tinygrad-attn graph: {error}", file=sys.stderr)
        return 2
    seconds = time.perf_counter() - start
    say_threads()
    print(f"wrote {path}: {len(graph.nodes)} nodes ({len(graph.ops)} ops), "
          f"{len(graph.edges)} edges, rendered in {seconds:.2f} s")
    if example.head is not None:
        print(f"--head {example.head}: a tensor with a head axis shows head {example.head} only "
              f"(its norms, or with --whole its matrices)")
    if args.whole is None:
        print("a tensor of more than 12 numbers shows its norm: --whole draws every number "
              "(--whole N: of tensors whose matrices have at most N rows and N columns)")
    return 0


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = example_parser(subparsers, "graph", "draw an example's computation graph", __doc__)
    parser.add_argument("--out", default="graph.svg", help="output file, .svg or .png (default graph.svg)")
    parser.add_argument("--collapse", nargs="*", default=[], metavar="MODULE",
                        help=f"modules drawn as one node each: class names "
                        f"({', '.join(sorted(COLLAPSIBLE))}) or dotted paths (blocks.1)")
    parser.add_argument("--expand", metavar="PATH",
                        help="draw this module (dotted path, e.g. blocks.0.attn) in full, fold all others")
    parser.add_argument("--no-grads", action="store_true", help="leave gradient norms out")
    add_threads_option(parser, "--model", lambda args: args.model is not None)
    parser.set_defaults(run=run)
