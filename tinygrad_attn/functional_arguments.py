"""The arguments that several ``F`` functions take, checked and put in the form their op takes:
float inputs, a reduction, class weights (``functional`` and ``functional_extras`` both use them).
"""

from __future__ import annotations

from typing import Any

from .errors import ShapeError
from .tensor import Tensor

__all__ = ["check_float", "check_reduction", "class_weight"]


def check_float(op: str, name: str, x: Tensor) -> None:
    """TypeError unless `x` holds floats."""
    # Integer logits would turn a −inf mask into garbage (or an OverflowError) deep in the op.
    if x.dtype.kind != "f":
        raise TypeError(f"{op}: {name} must be a float tensor, got dtype {x.dtype}")


def check_reduction(op: str, reduction: str) -> None:
    """ValueError unless `reduction` is "mean", "sum" or "none"."""
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{op}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def class_weight(name: str, weight: Any, x: Tensor) -> Tensor | None:
    """`weight` as a 1-D float tensor of C = x.shape[-1] class weights on x's device (None stays
    None); it is never differentiated."""
    if weight is None:
        return None
    weight = weight if isinstance(weight, Tensor) else Tensor(weight, device=x.device)
    if weight.dtype.kind != "f" or weight.shape != x.shape[-1:]:
        raise ShapeError(f"{name}: weight must be {x.shape[-1:]} floats, one per class of input {x.shape}, "
                         f"got {weight.dtype} {weight.shape}")
    return weight
