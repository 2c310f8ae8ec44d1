"""Constructors (tensor, zeros, ones, full, the *_like ones, eye, arange, linspace, randn, rand,
randint) and the seeded random generator.

All randomness in the library (``randn``, parameter init, dropout masks) draws from one NumPy
generator, or on the GPU from a CuPy generator seeded from it (``generator_for``), so
``manual_seed`` makes a run repeatable on either device.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .backend import xp_for
from .dtypes import get_default_dtype
from .guards.shapes import sizes_argument
from .tensor import Tensor

__all__ = ["arange", "eye", "full", "full_like", "generator", "generator_for", "linspace", "manual_seed",
           "ones", "ones_like", "rand", "randint", "randn", "tensor", "zeros", "zeros_like"]


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


def tensor(data: Any, dtype: Any = None, device: str = "cpu", requires_grad: bool = False) -> Tensor:
    """Same as ``Tensor(data, requires_grad, dtype, device)``."""
    return Tensor(data, requires_grad=requires_grad, dtype=dtype, device=device)


def zeros(*shape: int | Sequence[int], dtype: Any = None, device: str = "cpu",
          requires_grad: bool = False) -> Tensor:
    """A tensor of zeros (default float dtype unless `dtype` is given)."""
    data = np.zeros(sizes_argument(shape), dtype=dtype or get_default_dtype())
    return Tensor(data, requires_grad=requires_grad, device=device)


def ones(*shape: int | Sequence[int], dtype: Any = None, device: str = "cpu",
         requires_grad: bool = False) -> Tensor:
    """A tensor of ones (default float dtype unless `dtype` is given)."""
    data = np.ones(sizes_argument(shape), dtype=dtype or get_default_dtype())
    return Tensor(data, requires_grad=requires_grad, device=device)


def randn(*shape: int | Sequence[int], dtype: Any = None, device: str = "cpu",
          requires_grad: bool = False) -> Tensor:
    """Standard normal samples from the library's generator."""
    data = _generator.standard_normal(sizes_argument(shape)).astype(dtype or get_default_dtype())
    return Tensor(data, requires_grad=requires_grad, device=device)


def arange(start: float, stop: float | None = None, step: float = 1, dtype: Any = None,
           device: str = "cpu", requires_grad: bool = False) -> Tensor:
    """Evenly spaced values in [start, stop), as numpy.arange: integers stay int64."""
    if step == 0:
        raise ValueError("arange: step must be nonzero, got 0")
    data = np.arange(start, stop, step) if stop is not None else np.arange(start)
    if dtype is not None:
        data = data.astype(dtype)
    elif data.dtype.kind == "f":
        data = data.astype(get_default_dtype())
    return Tensor(data, requires_grad=requires_grad, device=device)


def full(shape: int | Sequence[int], fill_value: float, dtype: Any = None, device: str = "cpu",
         requires_grad: bool = False) -> Tensor:
    """A tensor of `fill_value`; its dtype by default is the default float for a float value, int64
    for an int and bool for a bool (as PyTorch)."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if dtype is None:
        dtype = np.asarray(fill_value).dtype
        dtype = get_default_dtype() if dtype.kind == "f" else dtype
    return Tensor(np.full(shape, fill_value, dtype=dtype), requires_grad=requires_grad, device=device)


def zeros_like(t: Tensor, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    """Zeros of `t`'s shape, dtype (unless given) and device."""
    return full(t.shape, 0, dtype=dtype or t.dtype, device=t.device, requires_grad=requires_grad)


def ones_like(t: Tensor, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    """Ones of `t`'s shape, dtype (unless given) and device."""
    return full(t.shape, 1, dtype=dtype or t.dtype, device=t.device, requires_grad=requires_grad)


def full_like(t: Tensor, fill_value: float, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    """`fill_value` in `t`'s shape, dtype (unless given) and device."""
    return full(t.shape, fill_value, dtype=dtype or t.dtype, device=t.device, requires_grad=requires_grad)


def eye(n: int, m: int | None = None, dtype: Any = None, device: str = "cpu",
        requires_grad: bool = False) -> Tensor:
    """The n × m identity matrix (m = n by default), in the default float dtype unless given."""
    data = np.eye(n, m, dtype=dtype or get_default_dtype())
    return Tensor(data, requires_grad=requires_grad, device=device)


def linspace(start: float, end: float, steps: int, dtype: Any = None, device: str = "cpu",
             requires_grad: bool = False) -> Tensor:
    """`steps` evenly spaced values from `start` to `end`, both included (default float dtype)."""
    if steps < 0:
        raise ValueError(f"linspace: steps must be ≥ 0, got {steps}")
    if dtype is not None and np.dtype(dtype) == np.bool_:
        raise TypeError("linspace: dtype bool is not supported (as PyTorch): evenly spaced values are "
                        "numbers")
    data = np.linspace(start, end, steps).astype(dtype or get_default_dtype())
    return Tensor(data, requires_grad=requires_grad, device=device)


def rand(*shape: int | Sequence[int], dtype: Any = None, device: str = "cpu",
         requires_grad: bool = False) -> Tensor:
    """Uniform samples in [0, 1) from the library's generator (seeded by ``manual_seed``)."""
    data = _generator.random(sizes_argument(shape)).astype(dtype or get_default_dtype())
    return Tensor(data, requires_grad=requires_grad, device=device)


def randint(low: int, high: Any = None, size: Any = None,
            dtype: Any = None, device: str = "cpu", requires_grad: bool = False) -> Tensor:
    """Integers drawn uniformly from [low, high) with the library's generator, shaped `size`, int64
    unless `dtype` says otherwise (only a float dtype can require grad).

    As PyTorch, ``randint(high, size)`` draws from [0, high): randint(10, (3,)); so `high` may
    hold the size.
    """
    if size is None:
        low, high, size = 0, low, high
    if size is None or high is None or high <= low:
        raise ValueError(f"randint: needs low < high and a size, got low={low}, high={high}, size={size}")
    size = (size,) if isinstance(size, int) else tuple(size)
    return Tensor(_generator.integers(low, high, size).astype(dtype or np.int64), requires_grad=requires_grad,
                  device=device)
