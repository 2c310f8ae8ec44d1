"""Checking the axis arguments of every op in one place: ints (NumPy integers accepted, as NumPy
and PyTorch accept them), in range for the tensor's dims, never wrapped modulo ndim."""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from typing import Any

from ..errors import ShapeError

__all__ = ["NUMPY_SPELLINGS", "check_zero_d_dim", "normalize_axes", "normalize_axis", "numpy_spellings"]


def normalize_axes(op: str, axis: Any, ndim: int, sort: bool = True) -> tuple[int, ...] | None:
    """`axis` (None, an int or a sequence of ints) as a tuple of non-negative ints < ndim.

    Raises:
        TypeError: an axis is not an integer (a float, a bool, a string).
        ShapeError: an axis is out of range (a 0-d tensor has no axis) or repeated.
    """
    if axis is None:
        return None
    many = isinstance(axis, (tuple, list))
    axes = tuple(_as_int(op, a) for a in (axis if many else (axis,)))
    label = f"axes {tuple(axis)} are" if many else f"axis {axis} is"
    # A 0-d tensor (ndim 0) has no axis: the range −0 ≤ a < 0 is empty, so every axis is refused
    # here; the ops that PyTorch lets take dim 0 or −1 of a 0-d tensor check it with check_zero_d_dim.
    if any(not -ndim <= a < ndim for a in axes):
        raise ShapeError(f"{op}: {label} out of range for a tensor with {ndim} dims")
    axes = tuple(a % ndim for a in axes)
    if len(set(axes)) != len(axes):
        raise ShapeError(f"{op}: axes {tuple(axis)} repeat an axis")
    return tuple(sorted(axes)) if sort else axes


def normalize_axis(op: str, axis: Any, ndim: int) -> int:
    """One axis as a non-negative int < ndim (see ``normalize_axes``)."""
    axes = None if isinstance(axis, (tuple, list)) else normalize_axes(op, axis, ndim)
    if axes is None:                    # a sequence, or None (which normalize_axes reads as "every axis")
        raise TypeError(f"{op}: axis must be one int, got {axis!r}")
    return axes[0]


def check_zero_d_dim(op: str, dim: Any) -> None:
    """The dim of an op that PyTorch lets take a 0-d tensor as if it had one axis (the reductions,
    sort, cumsum, gather, softmax, squeeze, flip, …): 0 or −1, or a tuple of one of them; anything
    else a ShapeError."""
    dims = tuple(_as_int(op, d) for d in (dim if isinstance(dim, (tuple, list)) else (dim,)))
    if any(d not in (0, -1) for d in dims):
        raise ShapeError(f"{op}: dim {dim} is out of range for a 0-d tensor (0 or -1 only)")
    if len(dims) > 1:
        raise ShapeError(f"{op}: dims {tuple(dim)} repeat the one axis of a 0-d tensor")


def _as_int(op: str, a: Any) -> int:
    if isinstance(a, bool):
        raise TypeError(f"{op}: axis must be an int, got {a!r}")
    try:
        return operator.index(a)
    except TypeError:
        raise TypeError(f"{op}: axis must be an int or a tuple of ints, got {a!r}") from None


# NumPy's argument names and the PyTorch names they stand for: a learner pastes either.
NUMPY_SPELLINGS = {"axis": "dim", "keepdims": "keepdim"}


def numpy_spellings(fn: Callable | None = None, **spellings: str) -> Callable:
    """Decorator: `fn`, whose parameters carry PyTorch's names (``dim``, ``keepdim``), also takes
    NumPy's (``axis=``, ``keepdims=``) as keywords; ``spellings`` adds others (``axis="dims"``).
    A call with no keyword costs one test; giving both spellings of one argument is a TypeError.
    ``inspect.signature`` shows PyTorch's names (the wrapper carries ``__wrapped__``).
    """
    if fn is None:
        return lambda fn: numpy_spellings(fn, **spellings)
    names = {**NUMPY_SPELLINGS, **spellings}

    @functools.wraps(fn)
    def either_spelling(*args: Any, **kwargs: Any) -> Any:
        if kwargs:
            for numpy_name in names.keys() & kwargs.keys():
                torch_name = names[numpy_name]
                if torch_name in kwargs:
                    raise TypeError(f"{fn.__name__}: got both {torch_name}= and {numpy_name}= (the same "
                                    "argument in PyTorch's and NumPy's spelling); give one")
                kwargs[torch_name] = kwargs.pop(numpy_name)
        return fn(*args, **kwargs)

    return either_spelling
