"""The op contract: an Op class holds forward, hand-derived backward, formula text and test cases.

Forward and backward work on raw backend arrays (NumPy or CuPy) and take the array module from
``ctx.xp``, so one code path serves both devices. The contract every op keeps (the engine raises
when ``backward`` breaks the first rule):

- ``backward`` always returns a tuple with one entry per forward input (a 1-tuple for one input);
- an entry is ``None`` where ``ctx.needs_grad[i]`` is False or the input is not differentiable
  (a mask, integer targets), and that gradient is not computed at all;
- arrays kept for backward go through ``ctx.save``, under names the op labels in ``residuals``;
  non-array parameters (``axis``, an input's shape) may be plain attributes of ``ctx``;
- ``formula`` maps each forward input, by name and in order, to its backward formula, or to None
  for an input that takes no gradient (a mask, targets): that input's entry is always None, and
  every other input's entry is a gradient whenever it is asked for.

A gradient may be returned in the broadcast shape of the output: the engine sums it back to the
input's shape.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from types import MappingProxyType, ModuleType
from typing import Any

__all__ = ["BROADCAST_CASES", "UNARY_CASES", "Case", "Context", "Op"]


class Context:
    """What forward leaves for backward: named residuals, which inputs need grad, the params."""

    def __init__(self, xp: ModuleType, needs_grad: tuple[bool, ...], params: Mapping[str, Any]):
        self.xp = xp
        self.needs_grad = needs_grad
        self._saved: dict[str, Any] = {}
        self.saved: Mapping[str, Any] = MappingProxyType(self._saved)  # the residuals, read-only
        # None in backward(); a dict while the stepper or a drawing watches this node, which the
        # backward of an op with insides (attention) fills with its intermediate matrices.
        self.trace: dict[str, Any] | None = None
        if params:
            self.__dict__.update(params)

    def save(self, **arrays: Any) -> None:
        """Keep arrays for backward under names a learner can read (``y``, ``probs``, ``lse``)."""
        self._saved.update(arrays)


class Case:
    """One gradcheck case: an input spec per positional input, plus keyword params.

    Each spec is a shape tuple (a random float64 input that is differentiated), an array
    (a fixed input that is not: a mask, integer targets, a condition) or ``None``.
    ``domain`` shapes the random inputs: "real" (normal), "positive" (|x| + 0.5), "nonzero" (x
    moved away from 0) or "probability" (in (0.1, 0.9), for binary cross-entropy).

    Example:
        >>> Case((3, 4), None, params={"axis": 1}, domain="positive").specs
        ((3, 4), None)
    """

    DOMAINS = ("real", "positive", "nonzero", "probability")

    def __init__(self, *specs: Any, params: Mapping[str, Any] | None = None, domain: str = "real"):
        if domain not in self.DOMAINS:
            raise ValueError(f"Case: domain must be one of {self.DOMAINS}, got {domain!r}")
        self.specs = specs
        self.params = dict(params or {})
        self.domain = domain

    def __repr__(self) -> str:
        return f"Case(specs={self.specs!r}, params={self.params!r}, domain={self.domain!r})"


# The gradcheck cases shared by elementwise ops: operands of one shape, broadcast, and 0-d.
BROADCAST_CASES = (Case((3, 4), (3, 4)), Case((2, 3, 4), (4,)), Case((3, 1), (1, 5)), Case((), (2, 3)))
UNARY_CASES = (Case((3, 4)), Case((2, 3, 5)), Case(()))


class Op:
    """Base of every op. Subclasses set ``name``, ``formula``, ``cases`` and the two methods, and
    ``residuals`` when forward saves arrays.

    ``formula`` is keyed by the forward's inputs, as PyTorch's derivatives.yaml keys its formulas:
    ``{"x": "dx = dy ⊙ (1 − y²)"}``, ``{"x": "dx = dy ⊙ ¬mask", "mask": None}``; a variadic input
    (``*xs``) has one entry for all its tensors. ``residuals`` labels what forward saves, as a
    learner reads it: ``{"y": "y (the output)"}``.

    An op whose backward computes matrices worth seeing (attention's S, P, dP, dS, …) lists them
    in ``insides`` as (symbol, equation) pairs, in the order its backward computes them, and its
    backward puts them into ``ctx.trace`` when that is not None.

    ``half_in_single``: a float16 input is computed in float32 and the result cast back to float16
    (``apply`` does it): the op sums or normalises, and a float16 sum loses its small terms (in
    float16, 2048 + 1 is 2048), so it accumulates in float32, as PyTorch does.

    ``textbook`` is the op itself for a registered op; for a kernel (``kernels/``), the op it
    computes faster.

    ``backward`` may overwrite the ``grad`` it is handed (``grad *= y``): an op of your own gets a
    copy from the engine. A registered op leaves ``grad`` unchanged (``@register`` sets
    ``grad_read_only``, ``tests/ops/test_op_contract.py`` checks every case), so it gets the array itself.
    """

    name: str = ""
    formula: Mapping[str, str | None] = MappingProxyType({})
    residuals: Mapping[str, str] = MappingProxyType({})
    cases: tuple[Case, ...] = ()
    insides: tuple[tuple[str, str], ...] = ()
    grad_read_only: bool = False
    half_in_single: bool = False
    textbook: type[Op] | None = None
    ulps: float = 0.0           # a kernel's largest difference from its textbook op (kernels/registry.py)

    @classmethod
    def input_names(cls) -> tuple[str, ...]:
        """The forward's inputs, in order (``*xs`` as ``xs``); keyword-only params are not inputs."""
        kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.VAR_POSITIONAL)
        params = list(inspect.signature(cls.forward).parameters.values())[1:]   # after ctx
        return tuple(p.name for p in params if p.kind in kinds)

    @classmethod
    def param_names(cls) -> tuple[str, ...]:
        """The forward's keyword-only parameters (attention's ``scale``, a sum's ``axis``)."""
        params = inspect.signature(cls.forward).parameters.values()
        return tuple(p.name for p in params if p.kind == inspect.Parameter.KEYWORD_ONLY)

    @classmethod
    def formulas_for(cls, n_inputs: int) -> tuple[str | None, ...]:
        """One formula (or None) per input of a call with `n_inputs` inputs (a variadic input's
        formula repeated for each of its tensors)."""
        formulas = tuple(cls.formula.values())   # a call may leave out trailing optional inputs (weights)
        return formulas[:n_inputs] if len(formulas) >= n_inputs else formulas[:1] * n_inputs

    @classmethod
    def formulas_at(cls, ctx: Context, n_inputs: int) -> tuple[str | None, ...]:
        """The formulas as one call's parameters (on `ctx`) make them: ``formulas_for`` unless an
        op's formula simplifies for some parameters (cross-entropy without label smoothing)."""
        return cls.formulas_for(n_inputs)

    @classmethod
    def formula_lines(cls) -> tuple[str, ...]:
        """The formulas of the inputs that take a gradient, in input order: what a table shows."""
        return tuple(f for f in cls.formula.values() if f is not None)

    @staticmethod
    def forward(ctx: Context, *inputs: Any, **params: Any) -> Any:
        raise NotImplementedError

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any, ...]:
        raise NotImplementedError
