"""``tinygrad-attn check exercises/NN_name.py``: check a learner's solution to one exercise.

The file is the learner's own code, so it is imported. Its name (``NN_name.py``) says which
exercise it solves. A backward exercise is gradient-checked (``ta.gradcheck``, float64 central
differences) on fixed cases, one input at a time, so that a failure can say in words which input,
which case and which element is wrong. The online-softmax exercise is a forward algorithm, so
its output and log-sum-exp are compared with the whole-row softmax instead. Exit code 0: every
case passed; 1: something is not implemented yet or wrong; 2: not an exercise file.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from ..errors import GradcheckError
from ..gradcheck import case_inputs, gradcheck
from ..ops.base import Case
from ..tensor import Tensor, apply

__all__ = ["EXERCISES", "Exercise", "ExerciseFileError", "add_parser", "attention_by_blocks",
           "check_backward", "check_file", "check_online_softmax", "find_exercise", "load", "run"]


@dataclass(frozen=True)
class Exercise:
    """One exercise: what the learner writes, where to read about it, and how it is checked."""

    attribute: str                                   # the class or function the learner completes
    page: str                                        # the docs page with the derivation
    inputs: tuple[str, ...] = ()                     # the op's inputs, described for messages
    cases: tuple[tuple[str, Case], ...] = ()         # (description, case) for gradcheck


_CAUSAL = np.tril(np.ones((4, 4), dtype=bool))
_ONE_ROW_MASKED = np.array([[True, True, False, True, True], [False] * 5, [True] * 5])

EXERCISES: dict[str, Exercise] = {
    "softmax_backward": Exercise(
        "Softmax", "docs/softmax.md", ("x (the logits)",),
        (("one row of 4 logits", Case((4,))),
         ("3 rows of 5 logits", Case((3, 5))),
         ("a batch of 2 × 3 rows of 4 logits", Case((2, 3, 4))))),
    "layer_norm_backward": Exercise(
        "LayerNorm", "docs/layer_norm.md", ("x (the features)", "weight (the gain w)", "bias (the shift b)"),
        (("3 rows of 5 features", Case((3, 5), (5,), (5,), params={"eps": 1e-5})),
         ("a batch of 2 × 3 rows of 4 features, large eps",
          Case((2, 3, 4), (4,), (4,), params={"eps": 0.5})))),
    "attention_backward": Exercise(
        "Attention", "docs/attention.md", ("q (the queries Q)", "k (the keys K)", "v (the values V)"),
        (("3 queries, 4 keys, no mask", Case((3, 2), (4, 2), (4, 3), params={"scale": 0.7, "keep": None})),
         ("4 queries, 4 keys, causal mask",
          Case((4, 3), (4, 3), (4, 2), params={"scale": 0.5, "keep": _CAUSAL})),
         ("3 queries, 5 keys, query 1 fully masked",
          Case((3, 2), (5, 2), (5, 2), params={"scale": 0.8, "keep": _ONE_ROW_MASKED})),
         ("a batch of 2 heads, 3 queries, 4 keys",
          Case((2, 3, 2), (2, 4, 2), (2, 4, 3), params={"scale": 0.7, "keep": None})))),
    "online_softmax": Exercise("online_update", "docs/flash_attention.md"),
}


class ExerciseFileError(Exception):
    """The path is not an exercise file the checker knows (exit code 2)."""


def find_exercise(path: Path) -> tuple[str, Exercise]:
    """The exercise a file solves, from its name: ``03_attention_backward.py`` → attention_backward."""
    if path.suffix != ".py" or not path.is_file():
        raise ExerciseFileError(f"check: {path} is not a Python file")
    match = re.fullmatch(r"\d+_(\w+)", path.stem)
    if match is None or match.group(1) not in EXERCISES:
        raise ExerciseFileError(f"check: {path.name} is not one of the exercises; the file must be named "
                                f"NN_name.py with name one of: {', '.join(EXERCISES)}")
    return match.group(1), EXERCISES[match.group(1)]


def load(path: Path) -> ModuleType:
    """Import the learner's file as a fresh module (it is their own code)."""
    spec = importlib.util.spec_from_file_location(f"exercise_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_backward(exercise: Exercise, op: Any) -> str | None:
    """Gradcheck `op` on every case, one differentiable input at a time; None if all pass.

    Checking one input at a time is what lets the message name the input that is wrong.
    """
    rng = np.random.default_rng(0)
    for number, (description, case) in enumerate(exercise.cases, start=1):
        arrays = [x.data for x in case_inputs(case, rng)]
        for position, input_name in enumerate(exercise.inputs):
            inputs = [Tensor(a, requires_grad=i == position) for i, a in enumerate(arrays)]
            inputs[position].name = input_name.split()[0]
            try:
                gradcheck(lambda *xs, params=case.params: apply(op, *xs, **params), inputs)
            except GradcheckError as error:
                detail = str(error).removeprefix("gradcheck: ")
                return (f"{op.__name__}.backward is wrong in case {number} of {len(exercise.cases)} "
                        f"({description}): the gradient for input {input_name} does not match central "
                        f"differences.\n  {detail}\n  'analytic' is what your backward returned; 'numeric' "
                        f"is (L(x + ε) − L(x − ε)) / 2ε for that element, with L a fixed random weighting "
                        f"of the op's output.")
    return None


def _online_cases() -> list[tuple[str, np.ndarray, np.ndarray, int]]:
    """(description, scores (n, m), values (m, d_v), block size) for the online-softmax check."""
    rng = np.random.default_rng(0)
    scores, values = rng.standard_normal((3, 10)) * 2, rng.standard_normal((10, 2))
    first_block_masked = scores.copy()
    first_block_masked[1, :4] = -np.inf
    row_masked = scores.copy()
    row_masked[2] = -np.inf
    return [("3 queries, 10 keys in blocks of 4", scores, values, 4),
            ("the same scores times 500: exp overflows unless the running maximum is subtracted",
             scores * 500, values, 4),
            ("query 1's first block of keys is fully masked (−inf)", first_block_masked, values, 4),
            ("query 2's keys are all masked: its output must be 0, never NaN", row_masked, values, 3)]


def attention_by_blocks(update: Callable, scores: np.ndarray, values: np.ndarray,
                        block_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Flash attention's forward for one head, given the scores: fold the keys in block by block
    with `update`, then O = a / l and L = m + log l (0 and +inf on a row with no key)."""
    n, d_v = scores.shape[0], values.shape[1]
    m, total, a = np.full((n, 1), -np.inf), np.zeros((n, 1)), np.zeros((n, d_v))
    for start in range(0, scores.shape[1], block_size):
        block = slice(start, start + block_size)
        state = update(m, total, a, scores[:, block], values[block])
        m, total, a = (np.asarray(x, dtype=float) for x in state)
        for name, x, shape in (("m", m, (n, 1)), ("l", total, (n, 1)), ("a", a, (n, d_v))):
            if x.shape != shape:
                raise ValueError(f"online_update returned {name} of shape {x.shape}; it must stay {shape}")
    with np.errstate(divide="ignore", invalid="ignore"):
        alive = total != 0                      # NaN stays NaN, so a broken update shows
        return (np.where(alive, a / np.where(alive, total, 1), 0),
                np.where(alive, m + np.log(np.where(alive, total, 1)), np.inf)[:, 0])


def check_online_softmax(update: Callable) -> str | None:
    """Compare O and L from the learner's `update` with the whole-row softmax; None if both match."""
    cases = _online_cases()
    for number, (description, scores, values, block_size) in enumerate(cases, start=1):
        alive = np.isfinite(scores).any(axis=1, keepdims=True)
        top = np.where(alive, scores.max(axis=1, keepdims=True), 0)
        e = np.exp(scores - top)
        expected_out = np.where(alive, e / np.where(alive, e.sum(1, keepdims=True), 1), 0) @ values
        with np.errstate(divide="ignore"):
            expected_lse = np.where(alive, top + np.log(e.sum(1, keepdims=True)), np.inf)[:, 0]
        out, lse = attention_by_blocks(update, scores, values, block_size)
        where = (f"online_update is wrong in case {number} of {len(cases)} ({description}): "
                 f"after the last block,")
        for label, got, want, explain in (
                ("output O", out, expected_out, "= a / l, but softmax(S) V computed whole gives"),
                ("log-sum-exp L", lse, expected_lse,
                 "= m + log l (what the backward uses), but log Σ exp(S) is")):
            wrong = ~np.isclose(got, want, rtol=1e-9, atol=1e-12)
            if wrong.any():
                index = tuple(int(i) for i in np.argwhere(wrong)[0])
                hint = ("\n  NaN usually comes from exp(−inf − (−inf)) while every key seen so far is "
                        "masked: see docs/flash_attention.md, 'Masked scores are −inf'."
                        if np.isnan(got[index]) else "")
                return (f"{where} {label}{list(index)} {explain} {want[index]:.10g}; "
                        f"yours is {got[index]:.10g}.{hint}")
    return None


def _failing_function(error: BaseException, path: Path, attribute: str) -> str:
    """The learner's function that raised `error` (the last frame in their file), as
    'Softmax.backward (line 30)' or 'online_update (line 29)'."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if Path(f.filename).resolve() == path]
    if not frames:
        return "your code"
    name = frames[-1].name if frames[-1].name == attribute else f"{attribute}.{frames[-1].name}"
    return f"{name} (line {frames[-1].lineno})"


def check_file(path: Path) -> tuple[int, str]:
    """(exit code, message) for the learner's file at `path`."""
    path = path.resolve()
    name, exercise = find_exercise(path)
    try:
        module = load(path)
    except Exception as error:                     # the learner's file: any error is theirs to see
        return 1, f"{path.name} could not be imported: {type(error).__name__}: {error}"
    target = getattr(module, exercise.attribute, None)
    if target is None:
        return 1, f"{path.name} defines no {exercise.attribute}: the exercise asks you to complete it"
    try:
        is_online = name == "online_softmax"
        problem = check_online_softmax(target) if is_online else check_backward(exercise, target)
    except NotImplementedError as error:
        function = _failing_function(error, path, exercise.attribute)
        return 1, (f"{path.name}: {function} is not implemented yet ({error}).\n"
                   f"  Read {exercise.page}, write it, then run this check again.")
    except Exception as error:                     # the learner's code: report it with where it raised
        function = _failing_function(error, path, exercise.attribute)
        return 1, f"{path.name}: {function} raised {type(error).__name__}: {error}"
    if problem is not None:
        return 1, f"{path.name}: {problem}"
    count = len(_online_cases()) if is_online else len(exercise.cases)
    how = "values checked against the whole-row softmax" if is_online else "gradcheck passed"
    return 0, f"{path.name}: all {count} cases pass ({how}). Well done."


def run(args: argparse.Namespace) -> int:
    try:
        code, message = check_file(Path(args.path))
    except ExerciseFileError as error:
        print(error, file=sys.stderr)
        return 2
    print(message)
    return code


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("check", help="check your solution to an exercise in exercises/",
                                   description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path", help="the exercise file, e.g. exercises/01_softmax_backward.py")
    parser.set_defaults(run=run)
