"""``tinygrad-attn sample CHECKPOINT "3 1 2"``: the trained model's answer for one input."""

from __future__ import annotations

import argparse
import sys

from ..errors import CheckpointError, DeviceError
from ..training import answer, load_run
from ..training.tasks import decode

__all__ = ["add_parser", "run"]


def run(args: argparse.Namespace) -> int:
    try:
        model, _, _, task = load_run(args.checkpoint, args.device)
    except (CheckpointError, DeviceError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        prompt = task.parse(args.input)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    predicted = answer(model, task, [prompt])[0]
    expected = task.solve(prompt)
    gloss = task.gloss(prompt, predicted)
    print(f"{decode(prompt)}  →  {decode(predicted)}" + (f"  (read as {gloss})" if gloss else ""))
    if predicted != expected:
        right = task.gloss(prompt, expected)
        print(f"(the right answer is {decode(expected)}" + (f", read as {right})" if right else ")"))
    return 0


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("sample", help="print a trained model's answer for an input",
                                   description=__doc__)
    parser.add_argument("checkpoint", help="a checkpoint.npz written by `tinygrad-attn train`, or its folder")
    parser.add_argument("input", help="digits like \"3 1 2\" (copy, reverse, sort) or \"42 + 199\" (add)")
    parser.add_argument("--device", help="cpu or cuda (default: the device it was trained on)")
    parser.set_defaults(run=run)
