"""``tinygrad-attn check exercises/NN_name.py``: check a learner's solution to one exercise.

The file's name (``NN_name.py``) says which exercise it solves; the solution runs in a process of
its own with a time limit (``tinygrad_attn.exercises.checker``). Whatever it printed is shown
first, each line behind "| ", so the verdict is always the last thing printed.

Exit code 0: every case's arrays are right; 1: something is not implemented yet, wrong, too slow
or ended early; 2: not an exercise file, or a bad --timeout; 130: interrupted (Ctrl-C); 128 + the
signal's number on SIGTERM or SIGHUP.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from ..exercises import ExerciseFileError, check_file
from ..training.interrupts import termination_as_interrupt

__all__ = ["add_parser", "run", "timeout_seconds"]


def timeout_seconds(text: str) -> float:
    """--timeout: a positive, finite number of seconds (argparse names the flag in its error)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive, finite number of seconds, got {text}")
    return value


def run(args: argparse.Namespace) -> int:
    with termination_as_interrupt():    # SIGTERM, SIGHUP: the solution's processes are killed too
        try:
            outcome = check_file(Path(args.path), args.timeout)
        except ExerciseFileError as error:
            print(error, file=sys.stderr)
            return 2
    if outcome.printed:
        print("your file printed:")
        for line in outcome.printed.rstrip("\n").split("\n"):
            print(f"  | {line}")
    print(outcome.message)
    return outcome.code


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("check", help="check your solution to an exercise in exercises/",
                                   description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path", help="the exercise file, e.g. exercises/01_softmax_backward.py")
    parser.add_argument("--timeout", type=timeout_seconds, default=30.0,
                        help="seconds the solution may run for all cases together, from the import of your "
                             "file; above 0 (default 30)")
    parser.set_defaults(run=run)
