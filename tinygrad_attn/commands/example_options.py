"""The options shared by the commands that work on one example graph (``step``, ``graph``,
``explore``): a ready-made example, or a real model on your own text (``--model PATH --text``)."""

from __future__ import annotations

import argparse
import math

from ..pretrained import load_pretrained
from ..pretrained.text_example import text_example
from ..viz.example_graphs import EXAMPLES, Example

__all__ = ["EXAMPLES", "build_example", "describe", "example_parser"]


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
    parser.add_argument("--model", metavar="PATH",
                        help="a model folder (Hugging Face layout: config.json, model.safetensors, "
                        "tokenizer.json) or a run folder of `tinygrad-attn train`, instead of --example")
    parser.add_argument("--text", help="with --model: the text whose next-token loss is backpropagated")
    parser.add_argument("--layer", type=int, help="with --model: the block stepped op by op (default the "
                        "last; -1 counts from the end); the others are folded, one step each")
    parser.add_argument("--head", type=int, help="with --model: print only this attention head's matrices "
                        "(-1: the last head)")
    parser.add_argument("--whole", type=_size, nargs="?", const=math.inf, metavar="N",
                        help="show every row and column of each matrix (with N: of each matrix of at most "
                        "N rows and N columns), where a large one shows its corners (step, explore) or its "
                        "norm (graph)")
    return parser


def _size(text: str) -> int:
    """--whole's N: a count of rows and columns, at least 1."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"N must be a whole number of rows and columns, got {text!r}") \
            from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"N must be at least 1, got {n}")
    return n


def build_example(args: argparse.Namespace) -> Example:
    """The example graph that ``--example`` (or ``--model`` and ``--text``) and ``--unfused`` ask for.

    Raises:
        ValueError: --text without --model or the reverse, and whatever loading the model or
            reading the text refuses (``CheckpointError`` is a ValueError).
    """
    if args.model is None:
        extra = [f"--{name}" for name in ("text", "layer", "head") if getattr(args, name) is not None]
        if extra:
            raise ValueError(f"{', '.join(extra)} {'needs' if len(extra) == 1 else 'need'} --model PATH "
                             f"(--text, --layer and --head pick the text, layer and head of a model)")
        return EXAMPLES[args.example](fused=not args.unfused)
    if args.text is None:
        raise ValueError("--model needs --text \"…\": the text whose next-token loss is backpropagated")
    model, tokenizer = load_pretrained(args.model)
    return text_example(model, tokenizer, args.text, args.layer, args.head, fused=not args.unfused)


def describe(args: argparse.Namespace) -> str:
    """What the example is, in a few words: for a title or a first line."""
    if args.model is not None:
        return f"{args.model} on {args.text!r}"
    return f"{args.example} — {EXAMPLES[args.example].__doc__}"
