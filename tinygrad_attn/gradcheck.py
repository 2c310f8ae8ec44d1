"""``gradcheck``: the backward pass against float64 central differences, through a random cotangent.

The objective is L = Σ ⟨outᵢ, cᵢ⟩ with a fixed random cotangent cᵢ per output, never Σ out: for
softmax the all-ones cotangent makes the true gradient exactly zero, so a wrong backward that
also returned zero would pass. A single-element output gets the cotangent 1, so for a scalar
function the values compared (and reported) are its gradient itself.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .backend import array_module, to_numpy, xp_for
from .engine import no_grad
from .errors import GradcheckError
from .ops.base import Case
from .tensor import Tensor

__all__ = ["case_inputs", "gradcheck", "gradient_pairs"]


def gradcheck(fn: Callable[..., Any], inputs: Sequence[Any], eps: float = 1e-6,
              atol: float = 1e-5, rtol: float = 1e-3) -> bool:
    """Check the gradients of ``fn(*inputs)`` for every input that requires grad.

    Float inputs are copied to float64 first. Returns True, or raises GradcheckError naming the
    input, the worst element's index and its analytic and numeric values. `eps` must be a finite
    number > 0, `atol` and `rtol` finite numbers >= 0 (ValueError otherwise: a NaN tolerance or
    step would pass any gradient).

    Example:
        >>> x = Tensor([[1.0, -2.0], [0.5, 3.0]], requires_grad=True)
        >>> gradcheck(lambda t: (t * t).tanh(), [x])
        True
    """
    _check_settings(eps, atol, rtol)
    pairs, is_scalar = _gradient_pairs(fn, inputs, eps)
    for position, analytic, numeric in pairs:
        excess = np.abs(analytic - numeric) - (atol + rtol * np.abs(numeric))
        if (excess > 0).any() or not np.isfinite(analytic).all():
            worst = np.unravel_index(np.nanargmax(np.where(np.isfinite(analytic), excess, np.inf)),
                                     analytic.shape)
            name = getattr(inputs[position], "name", None)
            label = f"input {position}" + (f" ({name})" if name else "")
            of = "the gradient of the output" if is_scalar else \
                "gradients of ⟨c, f(x)⟩ for a random cotangent c (not of f itself)"
            raise GradcheckError(
                f"gradcheck: {label} of shape {analytic.shape}: worst element {tuple(map(int, worst))}"
                f" has analytic {_number(analytic[worst])}, numeric {_number(numeric[worst])} "
                f"({of}; tolerance atol={atol} + rtol={rtol}·|numeric|)")
    return True


def _check_settings(eps: float, atol: float, rtol: float) -> None:
    """ValueError unless eps is a finite number > 0 and atol, rtol finite numbers >= 0."""
    for name, value, lowest in (("eps", eps, "> 0"), ("atol", atol, ">= 0"), ("rtol", rtol, ">= 0")):
        try:
            ok = math.isfinite(value) and (value > 0 if name == "eps" else value >= 0)
        except TypeError:
            ok = False
        if not ok:
            raise ValueError(f"gradcheck: {name} must be a finite number {lowest}, got {value!r}")


def gradient_pairs(fn: Callable[..., Any], inputs: Sequence[Any],
                   eps: float = 1e-6) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """(input position, analytic gradient, numeric gradient) for each input requiring grad."""
    _check_settings(eps, 0.0, 0.0)
    return _gradient_pairs(fn, inputs, eps)[0]


def _gradient_pairs(fn: Callable[..., Any], inputs: Sequence[Any],
                    eps: float) -> tuple[list[tuple[int, np.ndarray, np.ndarray]], bool]:
    """The pairs, and whether fn has one single-element output (so they are its gradient)."""
    inputs = [_as_float64(x) for x in inputs]
    wrt = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    if not wrt:
        raise ValueError("gradcheck: no input requires grad")
    outputs = _outputs(fn(*inputs))
    rng = np.random.default_rng(0)
    # An infinite output (a masked log-probability) is a constant: it gets cotangent 0.
    cotangents = [xp_for(o.device).asarray(np.ones(o.shape) if o.data.size == 1
                                           else rng.standard_normal(o.shape)) * _finite_mask(o.data)
                  for o in outputs]

    for out, cot in zip(outputs, cotangents):
        if out.requires_grad:
            out.backward(cot)

    def objective() -> float:
        with no_grad():
            return sum(float((_finite(o.data) * c).sum())
                       for o, c in zip(_outputs(fn(*inputs)), cotangents))

    pairs = []
    for i in wrt:
        x = inputs[i]
        analytic = to_numpy(x.grad) if x.grad is not None else np.zeros(x.shape)
        numeric = np.zeros(x.shape)
        for index in np.ndindex(x.shape):       # by multi-index: right for any memory layout
            original = x.data[index].item()
            x.data[index] = original + eps
            plus = objective()
            x.data[index] = original - eps
            minus = objective()
            x.data[index] = original
            numeric[index] = (plus - minus) / (2 * eps)
        pairs.append((i, analytic, numeric))
    return pairs, len(outputs) == 1 and outputs[0].data.size == 1


def _number(value: float) -> str:
    """8 significant digits, keeping a float look: 6.0, not 6."""
    text = f"{float(value):.8g}"
    return text if any(c in text for c in ".ein") else text + ".0"


def case_inputs(case: Case, rng: np.random.Generator, device: str = "cpu") -> list[Any]:
    """Inputs for one op `Case`: float64 tensors requiring grad for shape specs, drawn from `rng`
    and shaped by the case's domain; constant tensors for array specs; None for None."""
    inputs: list[Any] = []
    for spec in case.specs:
        if spec is None:
            inputs.append(None)
        elif isinstance(spec, tuple):
            x = rng.standard_normal(spec)
            if case.domain == "positive":
                x = np.abs(x) + 0.5
            elif case.domain == "nonzero":
                x = np.sign(x) * (np.abs(x) + 0.5)
            elif case.domain == "probability":
                x = 0.1 + 0.8 / (1 + np.exp(-x))
            inputs.append(Tensor(x, requires_grad=True, device=device))
        else:
            inputs.append(Tensor(np.asarray(spec), device=device))
    return inputs


def _finite_mask(array: Any) -> Any:
    return array_module(array).isfinite(array)


def _finite(array: Any) -> Any:
    """The array with ±inf replaced by 0 (their cotangent is 0, and inf · 0 would be NaN)."""
    return array_module(array).where(_finite_mask(array), array, 0)


def _as_float64(x: Any) -> Any:
    """A float tensor as a fresh C-ordered float64 copy gradcheck may nudge: never the caller's
    array, never a read-only or broadcast view."""
    if isinstance(x, Tensor) and x.dtype.kind == "f":
        data = xp_for(x.device).asarray(x.data, dtype=np.float64, order="C")
        return Tensor(data, requires_grad=x.requires_grad, device=x.device)
    return x


def _outputs(out: Any) -> list[Tensor]:
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    if not all(isinstance(o, Tensor) for o in outs):
        raise TypeError("gradcheck: fn must return a Tensor or a tuple of Tensors")
    return outs
