"""The default float dtype (what Python floats and lists become) and the float an op computes in."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from .tensor import Tensor

__all__ = ["as_float", "get_default_dtype", "is_float", "promoted_dtype", "set_default_dtype"]


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


_CATEGORY = {"b": 0, "u": 1, "i": 1, "f": 2}      # bool < integer < float


def promoted_dtype(*arrays: Any) -> np.dtype:
    """The dtype an op on `arrays` computes in, PyTorch's rule (the one place it is written):
    the highest category among them (bool < integer < float) wins; within it, tensors with
    dimensions decide over 0-d ones (a float32 tensor plus a 0-d float64 stays float32), and among
    those the wider dtype wins (float16 and float32: float32; int8 and uint8: int16).

    Example:
        >>> promoted_dtype(np.zeros(3, np.int64), np.zeros(3, np.float32))
        dtype('float32')
    """
    top = max(_CATEGORY[a.dtype.kind] for a in arrays)
    deciding = [a for a in arrays if _CATEGORY[a.dtype.kind] == top]
    deciding = [a for a in deciding if a.ndim] or deciding
    return np.result_type(*(a.dtype for a in deciding))


def as_float(t: Tensor) -> Tensor:
    """`t`, or for an integer or bool tensor its values in the default float dtype: what an op
    that must return a float (division, exp, mean, …) computes on, as PyTorch."""
    return t if t.data.dtype.kind == "f" else type(t)(t.data, dtype=_default_dtype, device=t.device)
