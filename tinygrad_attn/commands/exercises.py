"""The exercises the ``check`` command knows, and their cases, checked one by one.

This module runs in the child process that ``check`` starts (``python -m
tinygrad_attn.commands.exercises FILE REPORT``): it writes ``{"ready": true}`` to REPORT once
started (the solution's time limit begins there), imports the learner's file and writes one JSON
line per case, ``{"start": n}`` before case n and then ``{"pass": n}`` or ``{"fail": n,
"message": …}``. The parent (``check.py``) reads that report, so a solution that exits, hangs or
crashes the interpreter can never look like a pass.

A backward exercise is gradient-checked (float64 central differences through a random cotangent)
one input at a time, so that a failure names the input, the case and the element. The scalar
engine is compared with this package's engine on expressions; ``numeric_gradient`` with exact
gradients; the online-softmax update with the whole-row softmax.
"""

from __future__ import annotations

import importlib.util
import json
import random
import sys
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from .. import functional as F
from ..apply import apply
from ..errors import GradcheckError
from ..gradcheck import case_inputs, gradcheck, gradient_pairs
from ..ops.base import Case
from ..tensor import Tensor

__all__ = ["EXERCISES", "Exercise", "attention_by_blocks", "backward_cases", "case_count", "exercise_cases",
           "failing_function", "load", "numeric_gradient_cases", "online_softmax_cases", "run_child",
           "scalar_engine_cases"]

# One case: (description, the check: returns None when it passes, else what is wrong).
CheckCase = tuple[str, Callable[[], "str | None"]]


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
    "scalar_engine": Exercise("backward", "docs/how_the_engine_works.md"),
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
    "numeric_gradient": Exercise("numeric_gradient", "docs/gradient_checking.md"),
    "rope_backward": Exercise(
        "Rope", "docs/modern_attention.md", ("x (the rows to rotate)",),
        (("5 rows of 4 features, positions 0 … 4", Case((5, 4), np.arange(5), params={"base": 10000.0})),
         ("2 heads × 3 rows of 6 features, positions 7 … 9 (a cached suffix)",
          Case((2, 3, 6), np.arange(7, 10), params={"base": 10000.0})),
         ("4 rows of 8 features, positions 3, 0, 3, 12, base 10",
          Case((4, 8), np.array([3, 0, 3, 12]), params={"base": 10.0})))),
}


def load(path: Path) -> ModuleType:
    """Import the learner's file as a fresh module (it is their own code)."""
    spec = importlib.util.spec_from_file_location(f"exercise_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---- backward exercises: gradcheck, one input at a time ----------------------------------------

def backward_cases(exercise: Exercise, op: Any) -> Iterator[CheckCase]:
    """One case per gradcheck case of the exercise; each checks every input in turn."""
    rng = np.random.default_rng(0)
    for description, case in exercise.cases:
        arrays = [x.data for x in case_inputs(case, rng)]
        shapes = ", ".join(f"{name.split()[0]} {a.shape}" for name, a in zip(exercise.inputs, arrays))
        yield f"{description}; inputs {shapes}", \
            lambda arrays=arrays, case=case: _check_inputs(exercise, op, arrays, case)


def _check_inputs(exercise: Exercise, op: Any, arrays: list, case: Case) -> str | None:
    for position, input_name in enumerate(exercise.inputs):
        inputs = [Tensor(a.copy(), requires_grad=i == position) for i, a in enumerate(arrays)]
        inputs[position].name = input_name.split()[0]

        def fn(*xs: Any, params: dict = case.params) -> Tensor:
            return apply(op, *xs, **params)
        try:
            gradcheck(fn, inputs)
        except GradcheckError as error:
            detail = str(error).removeprefix("gradcheck: ")
            _, analytic, numeric = gradient_pairs(fn, inputs)[0]
            sign = ("\n  The sign is flipped: your gradient is −1 × the numeric one at every element."
                    if np.abs(numeric).max() > 1e-6 and np.allclose(analytic, -numeric, rtol=1e-3, atol=1e-5)
                    else "")
            return (f"{op.__name__}.backward: the gradient for input {input_name} does not match "
                    f"central differences.\n  {detail}{sign}\n  'analytic' is what your backward "
                    f"returned; 'numeric' is (L(x + ε) − L(x − ε)) / 2ε for that element, with L a "
                    f"fixed random weighting of the op's output.")
    return None


# ---- exercise 0: the scalar engine --------------------------------------------------------------

_OPERATIONS = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
               "tanh": lambda a, _: a.tanh(), "exp": lambda a, _: (a * 0.3).exp()}


def _random_expression(leaves: list, rng: random.Random, n_ops: int) -> Any:
    """An expression of `n_ops` random operations over `leaves`, reusing earlier results (so some
    values have several consumers), from objects that support + − * tanh exp (Values or Tensors)."""
    pool = list(leaves)
    for _ in range(n_ops):
        a, b = rng.choice(pool), rng.choice(pool)
        pool.append(_OPERATIONS[rng.choice(sorted(_OPERATIONS))](a, b))
    total = pool[-1]
    for extra in pool[len(leaves):-1:3]:            # tie in a few more results, used twice
        total = total + extra * 0.5
    return total


def scalar_engine_cases(module: ModuleType) -> Iterator[CheckCase]:
    """Expressions built from the exercise's Value and from Tensors: the gradients must agree."""

    def check(build: Callable[[list], Any], seed: int) -> str | None:
        values = np.random.default_rng(seed).uniform(-1.5, 1.5, 3)
        ours = [module.Value(float(v)) for v in values]
        theirs = [Tensor(np.float64(v), requires_grad=True) for v in values]
        root, reference = build(ours), build(theirs)
        problem = _check_order(module.toposort(root), root)
        if problem:
            return problem
        module.backward(root)
        reference.backward()
        for name, mine, real in zip("abc", ours, theirs):
            want = float(real.grad) if real.grad is not None else 0.0
            if not np.isclose(mine.grad, want, rtol=1e-9, atol=1e-12):
                return (f"after backward(root), leaf {name}.grad is {mine.grad:.10g} but the real engine "
                        f"gives dL/d{name} = {want:.10g}")
        return None

    def deep() -> str | None:
        x = module.Value(0.5)
        y = x
        for _ in range(3000):
            y = y * 1.0
        problem = _check_order(module.toposort(y), y)
        if problem:
            return problem
        module.backward(y)
        return None if x.grad == 1.0 else f"after backward, x.grad is {x.grad:.10g}; d(x · 1 · 1 …)/dx = 1"

    yield "L = a · b + a: a is used twice, so its gradients add (b + 1)", \
        lambda: check(lambda v: v[0] * v[1] + v[0], 0)
    for seed in range(1, 6):
        yield f"random expression {seed} of 8 operations over a, b, c, some results used twice", \
            lambda seed=seed: check(lambda v: _random_expression(v, random.Random(seed), 8), seed)
    yield "a chain 3,000 operations deep (a recursive toposort hits Python's recursion limit)", deep


def _check_order(order: Any, root: Any) -> str | None:
    """None when `order` holds every value `root` depends on once, each after its parents."""
    if not isinstance(order, list):
        return f"toposort returned {type(order).__name__}, not a list of Values"
    position = {id(v): i for i, v in enumerate(order)}
    if len(position) != len(order):
        return "toposort returned a value twice: visit each value once"
    stack, reachable = [root], set()
    while stack:
        v = stack.pop()
        if id(v) not in reachable:
            reachable.add(id(v))
            stack.extend(v.parents)
    if set(position) != reachable:
        return (f"toposort returned {len(order)} values, but root depends on {len(reachable)} "
                "(itself included)")
    for v in order:
        for parent in v.parents:
            if position[id(parent)] > position[id(v)]:
                return (f"toposort put a value ({v.data:.4g}) before its parent ({parent.data:.4g}): "
                        "a parent must come first")
    return None


# ---- numeric_gradient ---------------------------------------------------------------------------

def numeric_gradient_cases(numeric_gradient: Callable) -> Iterator[CheckCase]:
    """Functions whose gradient is known exactly; the case that tells a one-sided difference
    apart comes first, and one input is a non-contiguous view (a transpose)."""
    rng = np.random.default_rng(0)

    def compare(f: Callable, x: np.ndarray, want: np.ndarray, eps: float, rtol: float,
                hint: Callable[[np.ndarray], str] = lambda got: "") -> str | None:
        before = x.copy()
        got = np.asarray(numeric_gradient(f, x, eps), dtype=float)
        if not np.array_equal(x, before):
            return "numeric_gradient changed x: put each element back after perturbing it"
        if got.shape != x.shape:
            return f"numeric_gradient returned shape {got.shape}; it must be x's shape {x.shape}"
        wrong = ~np.isclose(got, want, rtol=rtol, atol=1e-9)
        if wrong.any():
            index = tuple(int(i) for i in np.argwhere(wrong)[0])
            return (f"element {list(index)}: yours is {got[index]:.10g}, the true value is "
                    f"{want[index]:.10g}{hint(got)}")
        return None

    x1 = rng.standard_normal(4)

    def one_sided(got: np.ndarray) -> str:
        forward, backward = 3 * x1 ** 2 + 3 * x1 * 1e-2 + 1e-4, 3 * x1 ** 2 - 3 * x1 * 1e-2 + 1e-4
        if np.allclose(got, forward, rtol=1e-6) or np.allclose(got, backward, rtol=1e-6):
            return ("\n  Yours is off by ±3xε at every element: that is a one-sided difference "
                    "(f(x ± ε eᵢ) − f(x)) / ε. Central differences (f(x + ε eᵢ) − f(x − ε eᵢ)) / 2ε "
                    "cancel that term (docs/gradient_checking.md).")
        return ""
    yield "f(x) = Σ x³ with ε = 1e-2: central differences give 3x² + ε², one-sided ones are off by 3xε", \
        lambda: compare(lambda x: float((x ** 3).sum()), x1.copy(), 3 * x1 ** 2 + 1e-4, 1e-2, 1e-9, one_sided)
    x2 = rng.standard_normal(3)
    yield "f(x) = Σ sin(xᵢ) for x of shape (3,): df/dxᵢ = cos(xᵢ)", \
        lambda: compare(lambda x: float(np.sin(x).sum()), x2.copy(), np.cos(x2), 1e-6, 1e-6)
    x3, c3 = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 3, 4))
    yield "f(x) = Σ c ⊙ x² for x of shape (2, 3, 4): every element of any shape", \
        lambda: compare(lambda x: float((c3 * x * x).sum()), x3.copy(), 2 * c3 * x3, 1e-6, 1e-6)
    a4, c4 = rng.standard_normal((3, 4)), rng.standard_normal((4, 3))

    def copy_nudged(got: np.ndarray) -> str:
        if np.all(got == 0):
            return ("\n  Every element is 0: f never saw your nudges. x here is a transpose (a view "
                    "that is not C-contiguous), so x.reshape(-1) or x.ravel() is a copy and writing it "
                    "leaves x unchanged. Write x itself by multi-index: for i in np.ndindex(x.shape): "
                    "x[i] = ….")
        return ""
    yield "f(x) = Σ c ⊙ x² for x = a.T of shape (4, 3): a transposed view, not C-contiguous", \
        lambda: compare(lambda x: float((c4 * x * x).sum()), a4.copy().T, 2 * c4 * a4.T, 1e-6, 1e-6,
                        copy_nudged)
    x5, c5 = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))

    def softmax_case() -> str | None:
        t = Tensor(x5.copy(), requires_grad=True)
        (F.softmax(t, -1) * Tensor(c5)).sum().backward()
        return compare(lambda x: float((F.softmax(Tensor(x), -1).data * c5).sum()), x5.copy(),
                       t.grad, 1e-6, 1e-5)
    yield "softmax rows of shape (2, 3), weighted by a random c (checked against backward())", softmax_case


# ---- online softmax -----------------------------------------------------------------------------

def _online_inputs() -> list[tuple[str, np.ndarray, np.ndarray, int]]:
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


def online_softmax_cases(update: Callable) -> Iterator[CheckCase]:
    """O and L from the learner's `update` against the whole-row softmax."""
    for description, scores, values, block_size in _online_inputs():
        yield f"{description}; scores {scores.shape}, values {values.shape}", \
            lambda s=scores, v=values, b=block_size: _check_online(update, s, v, b)


def _check_online(update: Callable, scores: np.ndarray, values: np.ndarray, block_size: int) -> str | None:
    alive = np.isfinite(scores).any(axis=1, keepdims=True)
    top = np.where(alive, scores.max(axis=1, keepdims=True), 0)
    e = np.exp(scores - top)
    expected_out = np.where(alive, e / np.where(alive, e.sum(1, keepdims=True), 1), 0) @ values
    with np.errstate(divide="ignore"):
        expected_lse = np.where(alive, top + np.log(e.sum(1, keepdims=True)), np.inf)[:, 0]
    out, lse = attention_by_blocks(update, scores, values, block_size)
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
            return (f"online_update: after the last block, {label}{list(index)} {explain} "
                    f"{want[index]:.10g}; yours is {got[index]:.10g}.{hint}")
    return None


# ---- running the cases --------------------------------------------------------------------------

def exercise_cases(name: str, module: ModuleType) -> Iterator[CheckCase]:
    """The cases of exercise `name` for the learner's `module`."""
    exercise = EXERCISES[name]
    if name == "scalar_engine":
        return scalar_engine_cases(module)
    target = getattr(module, exercise.attribute)
    if name == "numeric_gradient":
        return numeric_gradient_cases(target)
    if name == "online_softmax":
        return online_softmax_cases(target)
    return backward_cases(exercise, target)


def case_count(name: str) -> int:
    """How many cases exercise `name` has (the parent's count of passes to wait for)."""
    return {"scalar_engine": 7, "numeric_gradient": 5, "online_softmax": len(_online_inputs())}.get(
        name, len(EXERCISES[name].cases))


def failing_function(error: BaseException, path: Path) -> str:
    """The learner's function that raised `error` (the last frame in their file), as
    'Softmax.backward (line 30)' or 'online_update (line 29)'."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if Path(f.filename).resolve() == path]
    if not frames:
        return "your code"
    qualified = _qualified_names(path).get(frames[-1].lineno, frames[-1].name)
    return f"{qualified} (line {frames[-1].lineno})"


def _qualified_names(path: Path) -> dict[int, str]:
    """Line number → 'Class.method' or 'function' for each line of a function in the file."""
    import ast

    names: dict[int, str] = {}

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                walk(child, f"{prefix}{child.name}.")
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for line in range(child.lineno, (child.end_lineno or child.lineno) + 1):
                    names[line] = f"{prefix}{child.name}"
    walk(ast.parse(path.read_text()), "")
    return names


def run_child(path: Path, report_path: Path, name: str) -> None:
    """Import the learner's file and check every case, reporting each to `report_path`."""
    with open(report_path, "w", buffering=1, encoding="utf-8") as report:
        def send(**entry: Any) -> None:
            report.write(json.dumps(entry) + "\n")
            report.flush()
        send(ready=True)                            # started: the solution's time limit begins
        try:
            module = load(path)
        except Exception as error:                  # the learner's file: any error is theirs to see
            send(error=f"{path.name} could not be imported: {type(error).__name__}: {error}")
            return
        attribute = EXERCISES[name].attribute
        if not hasattr(module, attribute):
            send(error=f"{path.name} defines no {attribute}: the exercise asks you to complete it")
            return
        with np.errstate(all="ignore"):
            for number, (description, check) in enumerate(exercise_cases(name, module), start=1):
                send(start=number, description=description)
                try:
                    problem = check()
                except NotImplementedError as error:
                    send(missing=number, function=failing_function(error, path), message=str(error))
                    return
                except Exception as error:          # the learner's code: report it with where it raised
                    send(fail=number, message=f"{failing_function(error, path)} raised "
                                              f"{type(error).__name__}: {error}")
                    return
                if problem is not None:
                    send(fail=number, message=problem)
                    return
                send(passed=number)


if __name__ == "__main__":
    run_child(Path(sys.argv[1]).resolve(), Path(sys.argv[2]), sys.argv[3])
