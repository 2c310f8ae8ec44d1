"""The arguments of the shape ops that take more than an axis (expand, unflatten, repeat,
repeat_interleave, pad, roll, gather and scatter_add): each checked against the tensor's shape and
put in the form its op takes, or refused with an error that names the op, the argument and the
shape. Nothing here touches a tensor's values, except `check_index_along`, which reads the index."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import IndexOutOfRange, ShapeError
from .axes import normalize_axes
from .shapes import Shape, first_out_of_range, sizes_argument, sizes_fit

__all__ = ["PAD_MODES", "check_index_along", "check_unflatten", "copy_indices", "expanded_shape",
           "interleave_counts", "pad_widths", "repeat_counts", "roll_shifts", "source_indices"]


def check_unflatten(shape: Shape, axis: int, sizes: Sequence[int]) -> None:
    """Check that `sizes` (one may be −1) multiply to the length of axis `axis`.

    Raises:
        ShapeError: "unflatten: sizes (4, -1) do not make axis 0 of shape (6,)".
    """
    if not sizes_fit(shape[axis], sizes):
        raise ShapeError(f"unflatten: sizes {tuple(sizes)} do not make axis {axis} of shape {shape}")


def expanded_shape(shape: Shape, sizes: tuple) -> Shape:
    """The shape ``expand(*sizes)`` makes (`sizes` as given: ``(2, 3)`` or ``((2, 3),)``): size-1
    axes stretched, −1 keeps an axis, new leading axes (which may not be −1).

    Raises:
        ShapeError: "expand: shape (2, 3) cannot be expanded to (4, 3)".
    """
    sizes = sizes_argument(sizes)
    lead = len(sizes) - len(shape)
    target = tuple(n if n != -1 and a >= 0 else shape[a] if a >= 0 else n
                   for a, n in zip(range(-lead, len(shape)), sizes))
    if lead < 0 or any(n < 0 for n in target) or any(m not in (1, n) for m, n in zip(shape, target[lead:])):
        raise ShapeError(f"expand: shape {shape} cannot be expanded to {sizes}")
    return target


def repeat_counts(shape: Shape, repeats: tuple) -> tuple[int, ...]:
    """``repeat``'s counts (as given: ``(2, 3)`` or ``((2, 3),)``), checked: one int ≥ 0 per axis
    (more add leading axes).

    Raises:
        ValueError: "repeat: need one count ≥ 0 per axis of shape (2, 3), got (2,)".
    """
    repeats = sizes_argument(repeats)
    if len(repeats) < len(shape) or any(not isinstance(r, int) or r < 0 for r in repeats):
        raise ValueError(f"repeat: need one count ≥ 0 per axis of shape {shape}, got {repeats}")
    return repeats


def interleave_counts(shape: Shape, axis: int, repeats: int | Sequence[int]) -> int | tuple[int, ...]:
    """``repeat_interleave``'s counts: one int for every element, or one count ≥ 0 per element of
    axis `axis`.

    Raises:
        ValueError: "repeat_interleave: repeats [1, 2] do not fit axis 0 of shape (3,)".
    """
    counts: list[Any] = list(repeats) if isinstance(repeats, (list, tuple)) else [repeats]   # checked next
    if any(isinstance(r, bool) or not isinstance(r, (int, np.integer)) for r in counts):
        raise TypeError(f"repeat_interleave: repeats must be ints (or a 0-d or 1-D integer tensor), "
                        f"got {repeats!r}")
    if any(r < 0 for r in counts) or (len(counts) != 1 and len(counts) != shape[axis]):
        raise ValueError(f"repeat_interleave: repeats {repeats} do not fit axis {axis} of shape {shape}")
    return tuple(int(r) for r in counts) if isinstance(repeats, (list, tuple)) else int(counts[0])


def pad_widths(shape: Shape, pad: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """PyTorch's `pad` = (before, after) for the last axis, then the one before it, … as NumPy's
    widths, one (before, after) pair per axis, first axis first.

    Raises:
        ValueError: "pad: expected pairs of ints, at most two per axis of shape (3,), got (1,)", or
            a negative width that crops more than the axis holds.
    """
    pad = tuple(pad)
    if len(pad) % 2 or len(pad) > 2 * len(shape) or any(
            isinstance(p, bool) or not isinstance(p, (int, np.integer)) for p in pad):
        raise ValueError(f"pad: expected pairs of ints, at most two per axis of shape {shape}, got {pad}")
    pairs = [(int(pad[i]), int(pad[i + 1])) for i in range(0, len(pad), 2)][::-1]
    widths = ((0, 0),) * (len(shape) - len(pairs)) + tuple(pairs)
    if any(n + a + b < 0 for (a, b), n in zip(widths, shape)):
        raise ValueError(f"pad: negative widths {pad} crop more than shape {shape} holds")
    return widths


def source_indices(n: int, before: int, after: int, mode: str) -> np.ndarray:
    """For each position of an axis of length n padded by (before, after) in `mode`, the index of
    x it copies: reflect mirrors about the end elements (…, 2, 1, [0, 1, …, n−1], n−2, …),
    replicate repeats them, circular wraps around. A negative width crops."""
    j = np.arange(-before, n + after)
    if mode == "reflect":
        j = np.abs(j)
        return np.where(j > n - 1, 2 * (n - 1) - j, j)
    return np.clip(j, 0, n - 1) if mode == "replicate" else j % n


PAD_MODES = ("constant", "reflect", "replicate", "circular")


def copy_indices(shape: Shape, widths: tuple[tuple[int, int], ...], mode: str) -> tuple[Any, ...]:
    """``pad``'s source index per padded axis for a copying mode (None for an axis left alone).

    Raises:
        ValueError: an unknown mode; reflect with a width ≥ the axis' length (PyTorch's limit),
            circular with a width > it, or an empty axis to copy from.
    """
    if mode not in PAD_MODES:
        raise ValueError(f"pad: mode must be one of {PAD_MODES}, got {mode!r}")
    limit = {"reflect": lambda n: n - 1, "circular": lambda n: n, "replicate": lambda n: None}[mode]
    for (before, after), n in zip(widths, shape):
        if (before or after) and (n == 0 or (limit(n) is not None and max(before, after) > limit(n))):
            raise ValueError(f"pad: {mode} padding ({before}, {after}) does not fit an axis of length {n} "
                             f"(shape {shape})")
    return tuple(None if (before, after) == (0, 0) else source_indices(n, before, after, mode)
                 for (before, after), n in zip(widths, shape))


def roll_shifts(shifts: int | Sequence[int], axis: Any, ndim: int) -> tuple[Any, Any]:
    """``roll``'s (shifts, axes): one shift per axis, or, when axis is None, one shift (an int or a
    sequence of one, as PyTorch takes it) over the flattened tensor.

    Raises:
        TypeError: a shift is not an int.
        ValueError: "roll: 2 shifts for 1 axes"; "roll: without dims, shifts must be one int, …".
    """
    counts = [_shift(s) for s in (shifts if isinstance(shifts, (list, tuple)) else (shifts,))]
    if axis is None:
        if len(counts) != 1:
            raise ValueError(f"roll: without dims, shifts must be one int (the flattened tensor's "
                             f"shift), got {shifts!r}")
        return counts[0], None
    axis = normalize_axes("roll", axis, ndim, sort=False)
    if len(counts) != len(axis):
        raise ValueError(f"roll: {len(counts)} shifts for {len(axis)} axes")
    return tuple(counts), axis


def _shift(shift: Any) -> int:
    if isinstance(shift, bool) or not isinstance(shift, (int, np.integer)):
        raise TypeError(f"roll: shifts must be ints, got {shift!r}")
    return int(shift)


def check_index_along(name: str, shape: Shape, axis: int, index: Any) -> None:
    """Check an index array for ``gather``/``scatter_add`` along `axis` of `shape`: integers, as
    many dims, no longer than `shape` off `axis`, values in [0, shape[axis]).

    Raises:
        TypeError, ShapeError, IndexOutOfRange: "gather: index 5 is out of range for axis 1 of
            shape (2, 3)".
    """
    if index.dtype.kind not in "iu":
        raise TypeError(f"{name}: index must be integers, got dtype {index.dtype}")
    too_long = any(i > n for d, (i, n) in enumerate(zip(index.shape, shape)) if d != axis)
    if index.ndim != len(shape) or too_long:
        raise ShapeError(f"{name}: index of shape {index.shape} does not fit shape {shape} off axis {axis}")
    bad = first_out_of_range(index, shape[axis])
    if bad is not None:
        raise IndexOutOfRange(f"{name}: index {bad} is out of range for axis {axis} of shape {shape}")
