"""The default float dtype (what Python floats and lists become) and the float an op computes in."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from .tensor import Tensor

__all__ = ["as_float", "get_default_dtype", "is_float", "set_default_dtype"]


_default_dtype = np.dtype(np.float32)


def set_default_dtype(dtype: Any) -> None:
    """Set the float dtype that Python floats and lists become (float32 or float64)."""
    global _default_dtype
    dtype = np.dtype(dtype)
    if dtype not in (np.float32, np.float64):
        raise ValueError(f"set_default_dtype: expected float32 or float64, got {dtype}")
    _default_dtype = dtype


def get_default_dtype() -> np.dtype:
    return _default_dtype


def is_float(dtype: Any) -> bool:
    return np.dtype(dtype).kind == "f"


def as_float(t: Tensor) -> Tensor:
    """`t`, or for an integer or bool tensor its values in the default float dtype: what an op
    that must return a float (division, exp, mean, …) computes on, as PyTorch."""
    return t if t.data.dtype.kind == "f" else type(t)(t.data, dtype=_default_dtype, device=t.device)
