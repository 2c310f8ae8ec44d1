"""The exercises the checker knows, and their cases.

Each case (``CheckCase``) has two halves. ``run`` gives the learner's code the case's inputs and
returns what is wrong (for the message) and the arrays their code computed; it runs in the child
process that the checker starts (``child.py``). ``expected`` computes the true arrays from this
package alone, never from the learner's code: the parent (``checker.py``) calls it and compares,
so no line a solution writes can make a pass.

A backward exercise is gradient-checked (float64 central differences through a random cotangent)
one input at a time, so that a failure names the input, the case and the element. The scalar
engine is compared with this package's engine on expressions; ``numeric_gradient`` with exact
gradients; the online-softmax update with the whole-row softmax.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from .. import functional as F
from ..apply import apply
from ..errors import GradcheckError
from ..gradcheck import case_inputs, gradcheck, gradient_pairs
from ..ops.base import Case
from ..tensor import Tensor

__all__ = ["EXERCISES", "CheckCase", "Exercise", "Results", "attention_by_blocks", "backward_cases",
           "exercise_cases", "numeric_gradient_cases", "online_softmax_cases", "scalar_engine_cases"]

Results = dict[str, np.ndarray]


@dataclass(frozen=True)
class CheckCase:
    """One case. `run(target)` calls the learner's code (their class, function or module) and
    returns (what is wrong, or None; the arrays it computed); `expected()` gives the true arrays,
    computed without the learner's code; they must agree within `rtol`/`atol`."""

    description: str
    run: Callable[[Any], tuple[str | None, Results]]
    expected: Callable[[], Results]
    rtol: float = 1e-6
    atol: float = 1e-9


@dataclass(frozen=True)
class Exercise:
    """One exercise: what the learner writes, where to read about it, and how it is checked."""

    attribute: str                                   # the class or function the learner completes
    page: str                                        # the docs page with the derivation
    inputs: tuple[str, ...] = ()                     # the op's inputs, described for messages
    cases: tuple[tuple[str, Case], ...] = ()         # (description, case) for gradcheck
    reference: Callable[..., Tensor] | None = None   # the op done by this package, for `expected`


_CAUSAL = np.tril(np.ones((4, 4), dtype=bool))
_ONE_ROW_MASKED = np.array([[True, True, False, True, True], [False] * 5, [True] * 5])

EXERCISES: dict[str, Exercise] = {
    "scalar_engine": Exercise("backward", "docs/how_the_engine_works.md"),
    "softmax_backward": Exercise(
        "Softmax", "docs/softmax.md", ("x (the logits)",),
        (("one row of 4 logits", Case((4,))),
         ("3 rows of 5 logits", Case((3, 5))),
         ("a batch of 2 × 3 rows of 4 logits", Case((2, 3, 4)))),
        lambda x: F.softmax(x, -1)),
    "layer_norm_backward": Exercise(
        "LayerNorm", "docs/layer_norm.md", ("x (the features)", "weight (the gain w)", "bias (the shift b)"),
        (("3 rows of 5 features", Case((3, 5), (5,), (5,), params={"eps": 1e-5})),
         ("a batch of 2 × 3 rows of 4 features, large eps",
          Case((2, 3, 4), (4,), (4,), params={"eps": 0.5}))),
        lambda x, weight, bias, *, eps: F.layer_norm(x, weight, bias, eps=eps)),
    "attention_backward": Exercise(
        "Attention", "docs/attention.md", ("q (the queries Q)", "k (the keys K)", "v (the values V)"),
        (("3 queries, 4 keys, no mask", Case((3, 2), (4, 2), (4, 3), params={"scale": 0.7, "keep": None})),
         ("4 queries, 4 keys, causal mask",
          Case((4, 3), (4, 3), (4, 2), params={"scale": 0.5, "keep": _CAUSAL})),
         ("3 queries, 5 keys, query 1 fully masked",
          Case((3, 2), (5, 2), (5, 2), params={"scale": 0.8, "keep": _ONE_ROW_MASKED})),
         ("a batch of 2 heads, 3 queries, 4 keys",
          Case((2, 3, 2), (2, 4, 2), (2, 4, 3), params={"scale": 0.7, "keep": None}))),
        lambda q, k, v, *, scale, keep: F.scaled_dot_product_attention(q, k, v, mask=keep, scale=scale)),
    "online_softmax": Exercise("online_update", "docs/flash_attention.md"),
    "numeric_gradient": Exercise("numeric_gradient", "docs/gradient_checking.md"),
    "rope_backward": Exercise(
        "Rope", "docs/modern_attention.md", ("x (the rows to rotate)",),
        (("5 rows of 4 features, positions 0 … 4", Case((5, 4), np.arange(5), params={"base": 10000.0})),
         ("2 heads × 3 rows of 6 features, positions 7 … 9 (a cached suffix)",
          Case((2, 3, 6), np.arange(7, 10), params={"base": 10000.0})),
         ("4 rows of 8 features, positions 3, 0, 3, 12, base 10",
          Case((4, 8), np.array([3, 0, 3, 12]), params={"base": 10.0}))),
        lambda x, positions, *, base: F.rope(x, positions, base)),
}


# ---- backward exercises: gradcheck, one input at a time ----------------------------------------

def backward_cases(exercise: Exercise) -> list[CheckCase]:
    """One case per gradcheck case of the exercise: each gradchecks every input in turn, then
    gives the op's output and its gradients for a fixed random cotangent, which the parent
    compares with the same from ``exercise.reference``."""
    rng = np.random.default_rng(0)
    reference = exercise.reference
    assert reference is not None, exercise.attribute           # every backward exercise has one
    cases = []
    for number, (description, case) in enumerate(exercise.cases):
        arrays = [x.data for x in case_inputs(case, rng)]
        shapes = ", ".join(f"{name.split()[0]} {a.shape}" for name, a in zip(exercise.inputs, arrays))

        def run(op: Any, arrays: list = arrays, case: Case = case, number: int = number) -> tuple:
            problem = _check_inputs(exercise, op, arrays, case)
            if problem is not None:
                return problem, {}
            return None, _output_and_gradients(exercise, lambda *xs, **p: apply(op, *xs, **p), arrays, case,
                                               number)
        cases.append(CheckCase(f"{description}; inputs {shapes}", run, functools.partial(
            _output_and_gradients, exercise, reference, arrays, case, number)))
    return cases


def _output_and_gradients(exercise: Exercise, fn: Callable, arrays: list, case: Case, number: int) -> Results:
    """fn's output on the case's inputs, and the gradient of each differentiable input for the
    cotangent c (a fixed random array of the output's shape): the arrays both sides compare."""
    names = [name.split()[0] for name in exercise.inputs]
    inputs = [Tensor(a.copy(), requires_grad=i < len(names)) for i, a in enumerate(arrays)]
    out = fn(*inputs, **case.params)
    out.backward(np.random.default_rng(100 + number).standard_normal(out.shape))
    results = {"output": out.data}
    results.update({f"d{name}": t.grad for name, t in zip(names, inputs) if t.grad is not None})
    return results


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


def _random_expression(leaves: list, seed: int, n_ops: int = 8) -> Any:
    """An expression of `n_ops` random operations over `leaves` (the same for one `seed`), reusing
    earlier results (so some values have several consumers), from objects that support + − * tanh
    exp (Values or Tensors)."""
    rng = random.Random(seed)
    pool = list(leaves)
    for _ in range(n_ops):
        a, b = rng.choice(pool), rng.choice(pool)
        pool.append(_OPERATIONS[rng.choice(sorted(_OPERATIONS))](a, b))
    total = pool[-1]
    for extra in pool[len(leaves):-1:3]:            # tie in a few more results, used twice
        total = total + extra * 0.5
    return total


def scalar_engine_cases() -> list[CheckCase]:
    """Expressions built from the exercise's Value and from Tensors: the leaves' gradients must agree."""

    def leaves(seed: int) -> np.ndarray:
        return np.random.default_rng(seed).uniform(-1.5, 1.5, 3)

    def reference(build: Callable[[list], Any], seed: int) -> Results:
        tensors = [Tensor(np.float64(v), requires_grad=True) for v in leaves(seed)]
        build(tensors).backward()
        return {"grads": np.array([float(t.grad) if t.grad is not None else 0.0 for t in tensors])}

    def check(module: ModuleType, build: Callable[[list], Any], seed: int) -> tuple[str | None, Results]:
        ours = [module.Value(float(v)) for v in leaves(seed)]
        root = build(ours)
        problem = _check_order(module.toposort(root), root)
        if problem:
            return problem, {}
        module.backward(root)
        grads = np.array([float(v.grad) for v in ours])
        for name, mine, want in zip("abc", grads, reference(build, seed)["grads"]):
            if not np.isclose(mine, want, rtol=1e-9, atol=1e-12):
                return (f"after backward(root), leaf {name}.grad is {mine:.10g} but the real engine "
                        f"gives dL/d{name} = {want:.10g}"), {}
        return None, {"grads": grads}

    def deep(module: ModuleType) -> tuple[str | None, Results]:
        x = module.Value(0.5)
        y = x
        for _ in range(3000):
            y = y * 1.0
        problem = _check_order(module.toposort(y), y)
        if problem:
            return problem, {}
        module.backward(y)
        if x.grad != 1.0:
            return f"after backward, x.grad is {x.grad:.10g}; d(x · 1 · 1 …)/dx = 1", {}
        return None, {"grads": np.array([float(x.grad)])}

    def case(description: str, build: Callable[[list], Any], seed: int) -> CheckCase:
        return CheckCase(description, lambda module: check(module, build, seed),
                         lambda: reference(build, seed), rtol=1e-9, atol=1e-12)

    return [case("L = a · b + a: a is used twice, so its gradients add (b + 1)",
                 lambda v: v[0] * v[1] + v[0], 0),
            *(case(f"random expression {seed} of 8 operations over a, b, c, some results used twice",
                   functools.partial(_random_expression, seed=seed), seed)
              for seed in range(1, 6)),
            CheckCase("a chain 3,000 operations deep (a recursive toposort hits Python's recursion limit)",
                      deep, lambda: {"grads": np.array([1.0])}, rtol=0.0, atol=0.0)]


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

def numeric_gradient_cases() -> list[CheckCase]:
    """Functions whose gradient is known exactly; the case that tells a one-sided difference
    apart comes first, and one input is a non-contiguous view (a transpose)."""
    rng = np.random.default_rng(0)
    cases = []

    def compare(numeric_gradient: Callable, f: Callable, x: np.ndarray, want: np.ndarray, eps: float,
                rtol: float, hint: Callable[[np.ndarray], str]) -> tuple[str | None, Results]:
        before = x.copy()
        got = np.asarray(numeric_gradient(f, x, eps), dtype=float)
        if not np.array_equal(x, before):
            return "numeric_gradient changed x: put each element back after perturbing it", {}
        if got.shape != x.shape:
            return f"numeric_gradient returned shape {got.shape}; it must be x's shape {x.shape}", {}
        wrong = ~np.isclose(got, want, rtol=rtol, atol=1e-9)
        if wrong.any():
            index = tuple(int(i) for i in np.argwhere(wrong)[0])
            return (f"element {list(index)}: yours is {got[index]:.10g}, the true value is "
                    f"{want[index]:.10g}{hint(got)}"), {}
        return None, {"gradient": got}

    def case(description: str, f: Callable, x: np.ndarray, want: np.ndarray, eps: float, rtol: float,
             hint: Callable[[np.ndarray], str] = lambda got: "") -> None:
        # A fresh copy for each run, laid out as x (a transpose stays non-contiguous).
        cases.append(CheckCase(description,
                               lambda ng: compare(ng, f, x.copy(order="K"), want, eps, rtol, hint),
                               lambda: {"gradient": want}, rtol=rtol, atol=1e-9))

    x1 = rng.standard_normal(4)

    def one_sided(got: np.ndarray) -> str:
        forward, backward = 3 * x1 ** 2 + 3 * x1 * 1e-2 + 1e-4, 3 * x1 ** 2 - 3 * x1 * 1e-2 + 1e-4
        if np.allclose(got, forward, rtol=1e-6) or np.allclose(got, backward, rtol=1e-6):
            return ("\n  Yours is off by ±3xε at every element: that is a one-sided difference "
                    "(f(x ± ε eᵢ) − f(x)) / ε. Central differences (f(x + ε eᵢ) − f(x − ε eᵢ)) / 2ε "
                    "cancel that term (docs/gradient_checking.md).")
        return ""
    case("f(x) = Σ x³ with ε = 1e-2: central differences give 3x² + ε², one-sided ones are off by 3xε",
         lambda x: float((x ** 3).sum()), x1, 3 * x1 ** 2 + 1e-4, 1e-2, 1e-9, one_sided)
    x2 = rng.standard_normal(3)
    case("f(x) = Σ sin(xᵢ) for x of shape (3,): df/dxᵢ = cos(xᵢ)",
         lambda x: float(np.sin(x).sum()), x2, np.cos(x2), 1e-6, 1e-6)
    x3, c3 = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 3, 4))
    case("f(x) = Σ c ⊙ x² for x of shape (2, 3, 4): every element of any shape",
         lambda x: float((c3 * x * x).sum()), x3, 2 * c3 * x3, 1e-6, 1e-6)
    a4, c4 = rng.standard_normal((3, 4)), rng.standard_normal((4, 3))

    def copy_nudged(got: np.ndarray) -> str:
        if np.all(got == 0):
            return ("\n  Every element is 0: f never saw your nudges. x here is a transpose (a view "
                    "that is not C-contiguous), so x.reshape(-1) or x.ravel() is a copy and writing it "
                    "leaves x unchanged. Write x itself by multi-index: for i in np.ndindex(x.shape): "
                    "x[i] = ….")
        return ""
    case("f(x) = Σ c ⊙ x² for x = a.T of shape (4, 3): a transposed view, not C-contiguous",
         lambda x: float((c4 * x * x).sum()), a4.T, 2 * c4 * a4.T, 1e-6, 1e-6, copy_nudged)
    x5, c5 = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    t = Tensor(x5.copy(), requires_grad=True)
    (F.softmax(t, -1) * Tensor(c5)).sum().backward()
    case("softmax rows of shape (2, 3), weighted by a random c (checked against backward())",
         lambda x: float((F.softmax(Tensor(x), -1).data * c5).sum()), x5, t.grad, 1e-6, 1e-5)
    return cases


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


def online_softmax_cases() -> list[CheckCase]:
    """O and L from the learner's `update` against the whole-row softmax."""
    return [CheckCase(f"{description}; scores {scores.shape}, values {values.shape}",
                      functools.partial(_check_online, scores=scores, values=values, block_size=block_size),
                      functools.partial(_whole_row_softmax, scores, values), rtol=1e-9, atol=1e-12)
            for description, scores, values, block_size in _online_inputs()]


def _whole_row_softmax(scores: np.ndarray, values: np.ndarray) -> Results:
    """O = softmax(S) V and L = log Σ exp(S) row by row (0 and +inf on a row with no key)."""
    alive = np.isfinite(scores).any(axis=1, keepdims=True)
    top = np.where(alive, scores.max(axis=1, keepdims=True), 0)
    e = np.exp(scores - top)
    out = np.where(alive, e / np.where(alive, e.sum(1, keepdims=True), 1), 0) @ values
    with np.errstate(divide="ignore"):
        lse = np.where(alive, top + np.log(e.sum(1, keepdims=True)), np.inf)[:, 0]
    return {"O": out, "L": lse}


def _check_online(update: Callable, scores: np.ndarray, values: np.ndarray,
                  block_size: int) -> tuple[str | None, Results]:
    expected = _whole_row_softmax(scores, values)
    out, lse = attention_by_blocks(update, scores, values, block_size)
    for label, got, want, explain in (
            ("output O", out, expected["O"], "= a / l, but softmax(S) V computed whole gives"),
            ("log-sum-exp L", lse, expected["L"],
             "= m + log l (what the backward uses), but log Σ exp(S) is")):
        wrong = ~np.isclose(got, want, rtol=1e-9, atol=1e-12)
        if wrong.any():
            index = tuple(int(i) for i in np.argwhere(wrong)[0])
            hint = ("\n  NaN usually comes from exp(−inf − (−inf)) while every key seen so far is "
                    "masked: see docs/flash_attention.md, 'Masked scores are −inf'."
                    if np.isnan(got[index]) else "")
            return (f"online_update: after the last block, {label}{list(index)} {explain} "
                    f"{want[index]:.10g}; yours is {got[index]:.10g}.{hint}"), {}
    return None, {"O": out, "L": lse}


# ---- running the cases --------------------------------------------------------------------------

def exercise_cases(name: str) -> list[CheckCase]:
    """The cases of exercise `name`, in order (the same in the child and the parent)."""
    if name == "scalar_engine":
        return scalar_engine_cases()
    if name == "numeric_gradient":
        return numeric_gradient_cases()
    if name == "online_softmax":
        return online_softmax_cases()
    return backward_cases(EXERCISES[name])
