"""Constructors (tensor, zeros, ones, randn, arange) and the seeded random generator.

All randomness in the library (``randn``, parameter init, dropout masks) draws from one NumPy
generator, or on the GPU from a CuPy generator seeded from it (``generator_for``), so
``manual_seed`` makes a run repeatable on either device.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .backend import xp_for
from .tensor import Tensor, get_default_dtype

__all__ = ["arange", "generator", "generator_for", "manual_seed", "ones", "randn", "tensor", "zeros"]


_generator = np.random.default_rng()


def manual_seed(seed: int) -> None:
    """Reseed the generator behind randn, parameter init and dropout."""
    global _generator
    _generator = np.random.default_rng(seed)


def generator() -> np.random.Generator:
    """The library's random generator (reseeded by ``manual_seed``)."""
    return _generator


def generator_for(device: str) -> Any:
    """The random generator that draws on `device`: the library's own on "cpu"; on "cuda" a CuPy
    generator seeded, at each call, with one number drawn from the library's own. So the host
    generator's state (``manual_seed``, and what a checkpoint keeps) decides every GPU draw
    (dropout masks): a run resumed on the GPU draws the masks the uninterrupted run drew, and
    the random arrays themselves never cross from the host."""
    if device == "cpu":
        return _generator
    return xp_for(device).random.default_rng(int(_generator.integers(2**63)))


def _shape(shape: tuple[Any, ...]) -> tuple[int, ...]:
    return tuple(shape[0]) if len(shape) == 1 and not isinstance(shape[0], int) else shape


def tensor(data: Any, dtype: Any = None, device: str = "cpu", requires_grad: bool = False) -> Tensor:
    """Same as ``Tensor(data, requires_grad, dtype, device)``."""
    return Tensor(data, requires_grad=requires_grad, dtype=dtype, device=device)


def zeros(*shape: int | Sequence[int], dtype: Any = None, device: str = "cpu",
          requires_grad: bool = False) -> Tensor:
    """A tensor of zeros (default float dtype unless `dtype` is given)."""
    data = np.zeros(_shape(shape), dtype=dtype or get_default_dtype())
    return Tensor(data, requires_grad=requires_grad, device=device)


def ones(*shape: int | Sequence[int], dtype: Any = None, device: str = "cpu",
         requires_grad: bool = False) -> Tensor:
    """A tensor of ones (default float dtype unless `dtype` is given)."""
    data = np.ones(_shape(shape), dtype=dtype or get_default_dtype())
    return Tensor(data, requires_grad=requires_grad, device=device)


def randn(*shape: int | Sequence[int], dtype: Any = None, device: str = "cpu",
          requires_grad: bool = False) -> Tensor:
    """Standard normal samples from the library's generator."""
    data = _generator.standard_normal(_shape(shape)).astype(dtype or get_default_dtype())
    return Tensor(data, requires_grad=requires_grad, device=device)


def arange(start: float, stop: float | None = None, step: float = 1, dtype: Any = None,
           device: str = "cpu", requires_grad: bool = False) -> Tensor:
    """Evenly spaced values in [start, stop), as numpy.arange: integers stay int64."""
    data = np.arange(start, stop, step) if stop is not None else np.arange(start)
    if dtype is not None:
        data = data.astype(dtype)
    elif data.dtype.kind == "f":
        data = data.astype(get_default_dtype())
    return Tensor(data, requires_grad=requires_grad, device=device)
