"""TensorMethods: the methods of Tensor that only forward to ops, with PyTorch's names.

``Tensor`` (tensor.py) owns what a tensor is: its array, device, dtype, gradient and ``backward``.
Every other method lives here and does two things: check its arguments (naming the op and the
shapes at fault, before any op runs) and call ``apply`` with one op class, or a short
composition of them. Results that are not differentiable (comparisons, argmax, any, …) are tensors
with no graph. ``Tensor`` inherits these methods; a new op's method goes here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, TypeGuard

import numpy as np

from .apply import apply
from .backend import device_of, xp_for
from .dtypes import as_float, promoted_dtype
from .errors import DeviceError, ShapeError
from .float_errors import quiet_float_errors
from .guards.axes import check_zero_d_dim, normalize_axes, normalize_axis, numpy_spellings
from .guards.indexing import check_index
from .guards.shape_arguments import (
    check_index_along,
    check_unflatten,
    copy_indices,
    expanded_shape,
    interleave_counts,
    pad_widths,
    repeat_counts,
    roll_shifts,
)
from .guards.shapes import (
    broadcast_shape,
    check_matmul,
    check_reshape,
    first_out_of_range,
    sizes_argument,
    split_sizes,
)
from .ops.activations import GELU_FORMS, Gelu, Relu, Sigmoid, Silu
from .ops.arithmetic import Add, Cast, Div, Lerp, Maximum, Minimum, Mul, Neg, Pow, Sub
from .ops.elementwise_math import Cos, Erf, Exp, Exp2, Log, Log2, LogAddExp, Rsqrt, Sin, Sqrt, Tanh
from .ops.matmul import MatMul
from .ops.movement import Diagonal, Flip, Pad, PadCopy, Repeat, RepeatInterleave, Roll, Tril, Triu
from .ops.piecewise import Abs, Ceil, Clip, Floor, Round, RoundedDiv, Sign, Trunc
from .ops.reduce import CumSum, LogSumExp, Max, Mean, Min, Prod, Std, Sum, Var
from .ops.selection import Gather, GetItem, MaskedFill, ScatterAdd
from .ops.shape import Expand, Reshape, Split, Transpose

if TYPE_CHECKING:
    from .tensor import Tensor

__all__ = ["TensorMethods", "ValuesIndices", "as_mask", "promoted", "sort_order"]


class ValuesIndices(NamedTuple):
    """What ``max(dim)``, ``min(dim)``, ``sort`` and ``topk`` return, as PyTorch: values (they
    carry the gradient) and the int64 indices they were read at."""

    values: Tensor
    indices: Tensor


def sort_order(xp: Any, a: Any, axis: int, descending: bool) -> Any:
    """The indices that sort `a` along `axis`, ties in their original order, NaN as the largest.

    Descending is never ascending of −a (−a overflows uint8 and int64's minimum, and fails on bool):
    sort the reversed array ascending, read the result backwards, and map the positions back,
    i ↦ n − 1 − i, which keeps tied elements in their original order and puts NaN first.
    """
    if not descending:
        return xp.argsort(a, axis=axis, kind="stable")
    n = a.shape[axis]
    order = xp.argsort(xp.flip(a, axis=axis), axis=axis, kind="stable")
    return (n - 1) - xp.flip(order, axis=axis)


class TensorMethods:
    """The op surface of :class:`~tinygrad_attn.tensor.Tensor`: ``self`` is always a Tensor."""

    __slots__ = ()

    @property
    def T(self: Tensor) -> Tensor:
        """The last two axes swapped (a 1-D or 0-D tensor is returned as it is)."""
        return self if self.ndim < 2 else self.swapaxes(-1, -2)

    def __add__(self: Tensor, other: Any) -> Tensor: return _binary(Add, self, self._lift(other))
    def __radd__(self: Tensor, other: Any) -> Tensor: return _binary(Add, self._lift(other), self)
    def __sub__(self: Tensor, other: Any) -> Tensor: return _binary(Sub, self, self._lift(other))
    def __rsub__(self: Tensor, other: Any) -> Tensor: return _binary(Sub, self._lift(other), self)
    def __mul__(self: Tensor, other: Any) -> Tensor: return _binary(Mul, self, self._lift(other))
    def __rmul__(self: Tensor, other: Any) -> Tensor: return _binary(Mul, self._lift(other), self)
    def __truediv__(self: Tensor, other: Any) -> Tensor: return _binary(Div, self, self._lift(other))
    def __rtruediv__(self: Tensor, other: Any) -> Tensor: return _binary(Div, self._lift(other), self)
    def __pow__(self: Tensor, other: Any) -> Tensor: return _binary(Pow, self, self._lift(other))
    def __rpow__(self: Tensor, other: Any) -> Tensor: return _binary(Pow, self._lift(other), self)
    def __neg__(self: Tensor) -> Tensor: return apply(Neg, self)

    def __matmul__(self: Tensor, other: Any) -> Tensor:
        return _matmul(self, self._lift(other))

    def __rmatmul__(self: Tensor, other: Any) -> Tensor:
        return _matmul(self._lift(other), self)

    def exp(self: Tensor) -> Tensor: return apply(Exp, as_float(self))
    def log(self: Tensor) -> Tensor: return apply(Log, as_float(self))
    def sqrt(self: Tensor) -> Tensor: return apply(Sqrt, as_float(self))
    def tanh(self: Tensor) -> Tensor: return apply(Tanh, as_float(self))
    def sigmoid(self: Tensor) -> Tensor: return apply(Sigmoid, as_float(self))
    def relu(self: Tensor) -> Tensor: return apply(Relu, self)

    def gelu(self: Tensor, approximate: str = "none") -> Tensor:
        """GELU, x·Φ(x): exact (erf) by default as PyTorch's, or its tanh form with approximate="tanh"."""
        if approximate not in GELU_FORMS:
            raise ValueError(f"gelu: approximate must be one of {GELU_FORMS}, got {approximate!r}")
        return apply(Gelu, as_float(self), approximate=approximate)

    def silu(self: Tensor) -> Tensor: return apply(Silu, as_float(self))

    # ----- reductions -----
    @numpy_spellings
    def sum(self: Tensor, dim: int | Sequence[int] | None = None, keepdim: bool = False, *,
            dtype: Any = None) -> Tensor:
        """Σ over `dim`; `dtype` sets the dtype it accumulates in and returns (float16 is
        always accumulated in float32)."""
        return self._reduce(Sum, dim, keepdim, **({} if dtype is None else {"dtype": np.dtype(dtype)}))

    @numpy_spellings
    def mean(self: Tensor, dim: int | Sequence[int] | None = None, keepdim: bool = False, *,
             dtype: Any = None) -> Tensor:
        """Σ/n over `dim`, of the tensor converted to `dtype` first when one is given (PyTorch's)."""
        return as_float(self._in_dtype(dtype))._reduce(Mean, dim, keepdim)

    @numpy_spellings
    def amax(self: Tensor, dim: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
        """The maximum over `dim` (every axis when None); at ties the gradient is shared equally."""
        return self._reduce(Max, dim, keepdim, name="amax")

    @numpy_spellings
    def amin(self: Tensor, dim: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
        """The minimum over `dim` (every axis when None); at ties the gradient is shared equally."""
        return self._reduce(Min, dim, keepdim, name="amin")

    @numpy_spellings
    def max(self: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor | ValuesIndices:
        """Without `dim`, the maximum (a value; ties share the gradient); with `dim`, as PyTorch,
        ``(values, indices)`` along it, the gradient going to the first maximum's index."""
        return self._whole_or_along("max", dim, keepdim)

    @numpy_spellings
    def min(self: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor | ValuesIndices:
        """Without `dim`, the minimum (a value; ties share the gradient); with `dim`, as PyTorch,
        ``(values, indices)`` along it, the gradient going to the first minimum's index."""
        return self._whole_or_along("min", dim, keepdim)

    def _whole_or_along(self: Tensor, name: str, dim: int | None, keepdim: bool) -> Tensor | ValuesIndices:
        if dim is not None:
            return self._extremum_along(name, dim, keepdim)
        if keepdim:         # PyTorch's max() takes no keepdim: there is no axis to keep
            raise TypeError(f"{name}: keepdim=True needs a dim (without one, {name}() is the {name}imum of "
                            f"every element, a 0-d tensor; a{name}(keepdim=True) keeps every axis)")
        return self._reduce(Max if name == "max" else Min, None, False)

    def _extremum_along(self: Tensor, name: str, dim: int, keepdim: bool) -> ValuesIndices:
        if self.ndim == 0:                  # dim 0 or −1, as PyTorch: the value and index 0
            check_zero_d_dim(name, dim)
            return self.reshape(1)._extremum_along(name, 0, False)
        dim = normalize_axis(name, dim, self.ndim)
        if self.shape[dim] == 0:
            raise ShapeError(f"{name}: cannot take the {name}imum over an empty axis (axis {dim} of "
                             f"shape {self.shape})")
        indices = self._arg(f"arg{name}", dim, True)
        values = self.gather(dim, indices)
        return ValuesIndices(values, indices) if keepdim else \
            ValuesIndices(values.squeeze(dim), indices.squeeze(dim))

    @numpy_spellings
    def var(self: Tensor, dim: int | Sequence[int] | None = None, *, correction: int = 1,
            keepdim: bool = False) -> Tensor:
        """Σ (x − mean)² / max(0, n − correction): the unbiased estimate by default (correction 1,
        as PyTorch); correction 0 is the population variance; correction ≥ n gives nan (or inf)."""
        return as_float(self)._reduce(Var, dim, keepdim, correction=correction)

    def _in_dtype(self: Tensor, dtype: Any) -> Tensor:
        """This tensor in `dtype` (itself for None or its own dtype), through the cast op when it
        carries a gradient, so the gradient flows back."""
        if dtype is None or np.dtype(dtype) == self.dtype:
            return self
        if self.requires_grad:
            return apply(Cast, self, dtype=np.dtype(dtype))
        return self._wrap(self.data, dtype)

    def _reduce(self: Tensor, op, dim, keepdim, *, name: str | None = None, **params) -> Tensor:
        name = name or op.name
        if self.ndim == 0 and dim is not None:  # dim 0 or −1, as PyTorch: the one element
            check_zero_d_dim(name, dim)
            dim = None
        # An empty tuple of dims reduces every axis, as PyTorch's sum(()), mean(()), amax(()), var(()).
        axes = normalize_axes(name, dim, self.ndim) or None
        reduced = range(self.ndim) if axes is None else axes
        if op in (Max, Min) and any(self.shape[a] == 0 for a in reduced):
            raise ShapeError(f"{name}: cannot take the {op.name}imum over an empty axis (axis {dim} of "
                             f"shape {self.shape})")
        return apply(op, self, axis=axes, keepdims=keepdim, **params)

    # ----- shape -----
    def reshape(self: Tensor, *shape: int | Sequence[int]) -> Tensor:
        sizes = sizes_argument(shape)
        check_reshape(self.shape, self.data.size, sizes)
        return apply(Reshape, self, shape=sizes)

    def transpose(self: Tensor, *dims: int) -> Tensor:
        """PyTorch's transpose: ``transpose(d0, d1)`` swaps two axes (on a 2-D tensor too). With
        no argument, or a full permutation of ndim > 2 axes, it permutes as ``permute``."""
        if len(dims) == 2:
            return self._swapped("transpose", *dims)
        if not dims:
            return self.permute(tuple(reversed(range(self.ndim))))
        if len(dims) == 1 and not isinstance(dims[0], (tuple, list)) or len(dims) < self.ndim:
            raise ShapeError(f"transpose: takes two dims to swap (or a permutation of all "
                             f"{self.ndim}), got {dims} for shape {self.shape}")
        return self.permute(*dims)

    def permute(self: Tensor, *dims: int | Sequence[int]) -> Tensor:
        """The axes reordered: output axis i is input axis dims[i] (a permutation of all of them)."""
        dims = tuple(dims[0]) if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims
        axes = normalize_axes("permute", dims, self.ndim, sort=False)
        if len(axes or ()) != self.ndim:
            raise ShapeError(f"permute: dims {axes} are not a permutation for shape {self.shape}")
        return apply(Transpose, self, axes=axes)

    def swapaxes(self: Tensor, axis0: int, axis1: int) -> Tensor:
        """Axes axis0 and axis1 swapped (``transpose(d0, d1)``, ``swapdims``)."""
        return self._swapped("swapaxes", axis0, axis1)

    def _swapped(self: Tensor, name: str, axis0: int, axis1: int) -> Tensor:
        if self.ndim == 0:                  # dims 0 or −1, as PyTorch: the tensor itself
            check_zero_d_dim(name, axis0)
            check_zero_d_dim(name, axis1)
            return apply(Transpose, self, axes=())
        axes = list(range(self.ndim))
        a, b = (normalize_axis(name, x, self.ndim) for x in (axis0, axis1))
        axes[a], axes[b] = axes[b], axes[a]
        return apply(Transpose, self, axes=tuple(axes))

    swapdims = swapaxes

    def __getitem__(self: Tensor, index: Any) -> Tensor:
        """Basic slicing, integer-array and boolean-array indexing, as NumPy, on either device.

        Index arrays may be NumPy or CuPy arrays, lists or Tensors; a GPU index for a CPU tensor
        raises DeviceError. A boolean array selects its True positions (x[mask] is 1-D over them);
        the result's shape depends on the mask's values, so on the GPU it costs one read of the
        count back to the host, as CuPy's own boolean indexing does. The gradient scatter-adds
        back to the selected positions (repeated integer indices accumulate) on both devices.
        """
        xp = xp_for(self.device)
        index = index if isinstance(index, tuple) else (index,)
        for i in index:
            index_device = i.device if _is_tensor(i) else device_of(i)
            if self.device == "cpu" and index_device == "cuda":
                raise DeviceError(f"getitem: the index is on cuda but the tensor is on {self.device}; "
                                  "move the index with .to() or backend.to_device")
        # Index arrays are copied: backward scatters through them, so a later edit of the caller's
        # array must not move the gradient. An empty list selects nothing, as in NumPy.
        index = tuple(xp.array(i.data if _is_tensor(i) else i,
                               dtype=np.intp if isinstance(i, list) and not i else None)
                      if isinstance(i, (TensorMethods, list, np.ndarray)) or device_of(i) == "cuda"
                      else i for i in index)
        check_index(xp, index, self.shape)
        return apply(GetItem, self, index=index)

    @numpy_spellings
    def split(self: Tensor, split_size: int | Sequence[int], dim: int = 0) -> list[Tensor]:
        """Pieces along `dim`, as PyTorch's: an int is each piece's size (the last one may be
        smaller), a list the sizes; ``chunk(n)`` makes n pieces."""
        dim = normalize_axis("split", dim, self.ndim)
        sizes = split_sizes(self.shape, dim, split_size)
        starts = np.cumsum([0] + sizes).tolist()
        return [apply(Split, self, axis=dim, start=a, stop=b)
                for a, b in zip(starts[:-1], starts[1:])]

    def masked_fill(self: Tensor, mask: Any, value: float) -> Tensor:
        """`value` where `mask` is True, this tensor elsewhere (mask broadcasts, never differentiated)."""
        mask = as_mask(mask, self)
        broadcast_shape("masked_fill", tuple(mask.shape), self.shape, names=("mask", "x"), what="shapes of")
        return apply(MaskedFill, self, mask, value=value)

    # ===== the op surface a learner reaches for (PyTorch's names) ===================================
    # One line per method where an op (or a short composition of ops) does it all; argument checks
    # before any op runs. Results that are not differentiable (comparisons, argmax, any, …) are
    # tensors with no graph.

    # ----- method forms of the operators -----
    def add(self: Tensor, other: Any, *, alpha: Any = 1) -> Tensor: return self + self._times(other, alpha)
    def sub(self: Tensor, other: Any, *, alpha: Any = 1) -> Tensor: return self - self._times(other, alpha)
    def mul(self: Tensor, other: Any) -> Tensor: return self * other
    def neg(self: Tensor) -> Tensor: return -self
    def pow(self: Tensor, exponent: Any) -> Tensor: return self ** exponent

    def _times(self: Tensor, other: Any, alpha: Any) -> Any:
        """`other` scaled by add's and sub's `alpha` (as it is for alpha 1)."""
        return other if alpha == 1 else self._lift(other) * alpha

    def div(self: Tensor, other: Any, *, rounding_mode: str | None = None) -> Tensor:
        """self / other; rounding_mode "trunc" rounds the quotient toward zero, "floor" down (as
        Python's //), in the operands' promoted dtype (integers stay integers), as PyTorch: then
        no gradient passes (the result is piecewise constant) and an integer 0 divisor raises."""
        if rounding_mode is None:
            return self / other
        if rounding_mode not in ("trunc", "floor"):
            raise ValueError(f"div: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")
        a, b = promoted(self, self._lift(other))
        broadcast_shape("div", a.shape, b.shape)
        if a.dtype == np.bool_:
            raise TypeError(f"div: rounding_mode={rounding_mode!r} takes numbers, not bool (as PyTorch)")
        if a.dtype.kind in "iu" and bool((b.data == 0).any()):
            raise ZeroDivisionError(f"div: integer division by zero (rounding_mode={rounding_mode!r})")
        return apply(RoundedDiv, a, b, rounding_mode=rounding_mode)

    # ----- elementwise -----
    def abs(self: Tensor) -> Tensor: return apply(Abs, self)
    def sign(self: Tensor) -> Tensor: return apply(Sign, self)
    def floor(self: Tensor) -> Tensor: return apply(Floor, self)
    def ceil(self: Tensor) -> Tensor: return apply(Ceil, self)
    def round(self: Tensor, decimals: int = 0) -> Tensor: return apply(Round, self, decimals=decimals)
    def trunc(self: Tensor) -> Tensor: return apply(Trunc, self)
    def rsqrt(self: Tensor) -> Tensor: return apply(Rsqrt, as_float(self))
    def log2(self: Tensor) -> Tensor: return apply(Log2, as_float(self))
    def exp2(self: Tensor) -> Tensor: return apply(Exp2, as_float(self))
    def sin(self: Tensor) -> Tensor: return apply(Sin, as_float(self))
    def cos(self: Tensor) -> Tensor: return apply(Cos, as_float(self))
    def erf(self: Tensor) -> Tensor: return apply(Erf, as_float(self))
    def maximum(self: Tensor, other: Any) -> Tensor: return _binary(Maximum, self, self._lift(other))
    def minimum(self: Tensor, other: Any) -> Tensor: return _binary(Minimum, self, self._lift(other))
    def logaddexp(self: Tensor, other: Any) -> Tensor:
        return _binary(LogAddExp, as_float(self), self._lift(other))

    def clip(self: Tensor, min: Any = None, max: Any = None) -> Tensor:     # noqa: A002 (PyTorch's names)
        """Values below `min` become `min`, above `max` become `max` (either may be None; Tensor
        bounds go through ``maximum``/``minimum``). The gradient passes where x is within them."""
        if _is_tensor(min) or _is_tensor(max):
            low = self if min is None else self.maximum(min)
            return low if max is None else low.minimum(max)
        if min is None and max is None:
            raise ValueError("clip: at least one of min and max must be given")
        if self.dtype.kind in "iub" and any(isinstance(b, (float, np.floating)) for b in (min, max)):
            return as_float(self).clip(min, max)    # int with a float bound: the default float, as PyTorch
        return apply(Clip, self, min=min, max=max)

    clamp = clip

    def lerp(self: Tensor, end: Any, weight: Any) -> Tensor:
        """self + weight ⊙ (end − self); `weight` a number or a tensor, all three broadcast."""
        start = as_float(self)
        end, weight = start._lift(end), start._lift(weight)
        broadcast_shape("lerp", start.shape, end.shape, weight.shape)
        return apply(Lerp, start, as_float(end), as_float(weight))

    # ----- comparisons and tests: bool tensors, no gradient -----
    __hash__ = object.__hash__      # a tensor stays usable as a dict key or set member by identity

    def __eq__(self: Tensor, other): return other is not None and _constant("eq", lambda xp, a, b: a == b, self, other)  # noqa: E501
    def __ne__(self: Tensor, other): return other is None or _constant("ne", lambda xp, a, b: a != b, self, other)  # noqa: E501
    def __lt__(self: Tensor, other) -> Tensor: return _constant("lt", lambda xp, a, b: a < b, self, other)
    def __le__(self: Tensor, other) -> Tensor: return _constant("le", lambda xp, a, b: a <= b, self, other)
    def __gt__(self: Tensor, other) -> Tensor: return _constant("gt", lambda xp, a, b: a > b, self, other)
    def __ge__(self: Tensor, other) -> Tensor: return _constant("ge", lambda xp, a, b: a >= b, self, other)
    def isnan(self: Tensor) -> Tensor: return _constant("isnan", lambda xp, a: xp.isnan(a), self)
    def isinf(self: Tensor) -> Tensor: return _constant("isinf", lambda xp, a: xp.isinf(a), self)
    def isfinite(self: Tensor) -> Tensor: return _constant("isfinite", lambda xp, a: xp.isfinite(a), self)
    def logical_not(self: Tensor) -> Tensor: return _constant("logical_not", lambda xp, a: xp.logical_not(a), self)  # noqa: E501
    def logical_and(self: Tensor, other) -> Tensor: return _constant("logical_and", lambda xp, a, b: xp.logical_and(a, b), self, other)  # noqa: E501
    def logical_or(self: Tensor, other) -> Tensor: return _constant("logical_or", lambda xp, a, b: xp.logical_or(a, b), self, other)  # noqa: E501

    def __abs__(self: Tensor) -> Tensor: return self.abs()
    def __invert__(self: Tensor) -> Tensor: return self._bools("~").logical_not()
    def __and__(self: Tensor, other) -> Tensor: return self._bools("&").logical_and(self._lift(other)._bools("&"))  # noqa: E501
    def __or__(self: Tensor, other) -> Tensor: return self._bools("|").logical_or(self._lift(other)._bools("|"))  # noqa: E501
    __rand__, __ror__ = __and__, __or__

    def _bools(self: Tensor, operator: str) -> Tensor:
        """`self` if it is a bool tensor: ~ & | are logical on masks (bitwise ops are out of scope)."""
        if self.dtype != np.bool_:
            raise TypeError(f"{operator}: works on bool tensors (masks), got dtype {self.dtype}; bitwise "
                            "ops on integers are not supported")
        return self

    def __bool__(self: Tensor) -> bool:
        """The truth of a single element (``if (x > 0).all():``); more elements are ambiguous."""
        if self.data.size != 1:
            raise RuntimeError(f"bool: the truth value of a tensor of shape {self.shape} is ambiguous; "
                               "use .any() or .all()")
        return bool(self.data)

    # ----- reductions -----
    @numpy_spellings
    def prod(self: Tensor, dim: int | Sequence[int] | None = None, keepdim: bool = False,
             dtype: Any = None) -> Tensor:
        """Π over `dim`, of the tensor converted to `dtype` first when one is given (PyTorch's)."""
        return self._in_dtype(dtype)._reduce(Prod, dim, keepdim)

    @numpy_spellings
    def logsumexp(self: Tensor, dim: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
        """log Σ exp(x) over `dim`, with the maximum subtracted first (never overflows)."""
        return as_float(self)._reduce(LogSumExp, dim, keepdim)

    @numpy_spellings
    def std(self: Tensor, dim: int | Sequence[int] | None = None, *, correction: int = 1,
            keepdim: bool = False) -> Tensor:
        """√var, with the same `correction` (1 by default, as ``var``)."""
        return as_float(self)._reduce(Std, dim, keepdim, correction=correction)

    @numpy_spellings
    def cumsum(self: Tensor, dim: int, dtype: Any = None) -> Tensor:
        """The running sum along `dim`, of the tensor converted to `dtype` first when one is given."""
        if dtype is not None:
            return self._in_dtype(dtype).cumsum(dim)
        if self.ndim == 0:                  # a 0-d tensor is its own running sum (dim 0 or −1, as PyTorch)
            check_zero_d_dim("cumsum", dim)
            return self.reshape(1).cumsum(0).reshape(())
        return apply(CumSum, self, axis=normalize_axis("cumsum", dim, self.ndim))

    @numpy_spellings
    def argmax(self: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
        """The index of the maximum along `dim` (of the flattened tensor when dim is None)."""
        return self._arg("argmax", dim, keepdim)

    @numpy_spellings
    def argmin(self: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
        """The index of the minimum along `dim` (of the flattened tensor when dim is None)."""
        return self._arg("argmin", dim, keepdim)

    def _arg(self: Tensor, name: str, dim: int | None, keepdim: bool) -> Tensor:
        if self.ndim == 0 and dim is not None:  # dim 0 or −1, as PyTorch: index 0
            check_zero_d_dim(name, dim)
            dim = None
        axis = None if dim is None else normalize_axis(name, dim, self.ndim)
        if (self.shape[axis] if axis is not None else self.data.size) == 0:
            raise ShapeError(f"{name}: cannot take it over an empty axis (axis {axis} of shape {self.shape})")
        return _constant(name, lambda xp, a: getattr(xp, name)(a, axis=axis, keepdims=keepdim), self)

    @numpy_spellings
    def any(self: Tensor, dim: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
        axes = self._zero_d_or_axes("any", dim)
        return _constant("any", lambda xp, a: xp.any(a, axis=axes, keepdims=keepdim), self)

    @numpy_spellings
    def all(self: Tensor, dim: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
        axes = self._zero_d_or_axes("all", dim)
        return _constant("all", lambda xp, a: xp.all(a, axis=axes, keepdims=keepdim), self)

    def _zero_d_or_axes(self: Tensor, name: str, dim: Any) -> tuple[int, ...] | None:
        """`dim` as normalised axes; on a 0-d tensor, dim 0 or −1 (as PyTorch) as no axis at all."""
        if self.ndim == 0 and dim is not None:
            check_zero_d_dim(name, dim)
            return ()
        return normalize_axes(name, dim, self.ndim)

    @numpy_spellings
    def sort(self: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> ValuesIndices:
        """(values, indices) sorted along `dim`, ties in their original order (always stable);
        NaN counts as the largest (last ascending, first descending), as PyTorch. values =
        gather(indices), so they are differentiable, each gradient going back to its element."""
        if self.ndim == 0:                  # dim 0 or −1, as PyTorch: the value and index 0
            check_zero_d_dim("sort", dim)
            values, indices = self.reshape(1).sort(0, descending)
            return ValuesIndices(values.reshape(()), indices.reshape(()))
        dim = normalize_axis("sort", dim, self.ndim)
        order = _constant("sort", lambda xp, a: sort_order(xp, a, dim, descending), self)
        return ValuesIndices(self.gather(dim, order), order)

    @numpy_spellings
    def topk(self: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> ValuesIndices:  # noqa: A002
        """(values, indices) of the k largest (or smallest) elements along `dim`, largest first (or
        smallest first); NaN counts as the largest. `sorted` is accepted as PyTorch's and the
        result is always in order. `dim` None is the last axis, as PyTorch's."""
        dim = -1 if dim is None else dim
        if self.ndim == 0:                  # k 0 or 1 and dim 0 or −1, as PyTorch: the value and index 0
            check_zero_d_dim("topk", dim)
            if isinstance(k, bool) or k not in (0, 1):
                raise ShapeError(f"topk: k = {k!r} is out of range for a 0-d tensor (0 or 1)")
            values, indices = self.reshape(1).topk(1)
            return ValuesIndices(values.reshape(()), indices.reshape(()))
        dim = normalize_axis("topk", dim, self.ndim)
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 0 <= k <= self.shape[dim]:
            raise ShapeError(f"topk: k = {k!r} is out of range for axis {dim} of shape {self.shape}")
        _, order = self.sort(dim, descending=largest)
        indices = type(self)._from_op(order.data[(slice(None),) * dim + (slice(0, int(k)),)], None, None)
        return ValuesIndices(self.gather(dim, indices), indices)

    # ----- shape -----
    def view(self: Tensor, *shape: int | Sequence[int]) -> Tensor: return self.reshape(*shape)

    @numpy_spellings
    def squeeze(self: Tensor, dim: int | Sequence[int] | None = None) -> Tensor:
        """The size-1 axes removed (only those in `dim` when given; others there stay)."""
        axes = self._zero_d_or_axes("squeeze", dim)             # None: every axis
        drop = {a for a in (range(self.ndim) if axes is None else axes) if self.shape[a] == 1}
        return self.reshape(tuple(n for a, n in enumerate(self.shape) if a not in drop))

    @numpy_spellings
    def unsqueeze(self: Tensor, dim: int) -> Tensor:
        """A size-1 axis inserted at `dim` (−1 appends one)."""
        axis = normalize_axis("unsqueeze", dim, self.ndim + 1)
        return self.reshape(self.shape[:axis] + (1,) + self.shape[axis:])

    def flatten(self: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
        """Axes start_dim … end_dim merged into one."""
        if self.ndim == 0:                  # dims 0 or −1, as PyTorch: one element in one axis
            check_zero_d_dim("flatten", start_dim)
            check_zero_d_dim("flatten", end_dim)
            return self.reshape(1)
        start, end = (normalize_axis("flatten", a, self.ndim) for a in (start_dim, end_dim))
        if start > end:
            raise ShapeError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
        return self.reshape(self.shape[:start] + (-1,) + self.shape[end + 1:])

    @numpy_spellings
    def unflatten(self: Tensor, dim: int, sizes: Sequence[int]) -> Tensor:
        """Axis `dim` split into axes of `sizes` (one may be −1)."""
        axis = normalize_axis("unflatten", dim, self.ndim)
        check_unflatten(self.shape, axis, sizes)
        return self.reshape(self.shape[:axis] + tuple(sizes) + self.shape[axis + 1:])

    def expand(self: Tensor, *sizes: int | Sequence[int]) -> Tensor:
        """Size-1 axes stretched to `sizes` (−1 keeps an axis) and new leading axes added, without
        copying: the gradient sums over the copies."""
        return apply(Expand, self, shape=expanded_shape(self.shape, sizes))

    @numpy_spellings(axis="dims")
    def flip(self: Tensor, dims: int | Sequence[int]) -> Tensor:
        return apply(Flip, self, axis=self._zero_d_or_axes("flip", dims))

    @numpy_spellings(axis="dims")
    def roll(self: Tensor, shifts: int | Sequence[int], dims: int | Sequence[int] | None = None) -> Tensor:
        """Elements shifted cyclically along `dims` (over the flattened tensor when dims is None)."""
        shifts, axis = roll_shifts(shifts, dims, self.ndim)
        return apply(Roll, self, shifts=shifts, axis=axis)

    def repeat(self: Tensor, *repeats: int | Sequence[int]) -> Tensor:
        """The tensor tiled `repeats[i]` times along axis i (PyTorch's repeat, NumPy's tile)."""
        return apply(Repeat, self, repeats=repeat_counts(self.shape, repeats))

    @numpy_spellings
    def repeat_interleave(self: Tensor, repeats: int | Sequence[int], dim: int | None = None, *,
                          output_size: int | None = None) -> Tensor:
        """Each element repeated `repeats` times (or repeats[i] times) along `dim` (flattened first
        when dim is None); `output_size`, PyTorch's hint, if given must be the result's length
        along `dim`."""
        x = self.reshape(-1) if dim is None else self
        axis = 0 if dim is None else normalize_axis("repeat_interleave", dim, self.ndim)
        if _is_tensor(repeats):
            if repeats.ndim > 1 or repeats.dtype.kind not in "iu":
                raise TypeError(f"repeat_interleave: a repeats tensor must be 0-d or 1-D of integers, got "
                                f"shape {repeats.shape} dtype {repeats.dtype}")
            repeats = repeats.data.tolist()
        counts = interleave_counts(x.shape, axis, repeats)
        length = sum(counts) if isinstance(counts, tuple) else counts * x.shape[axis]
        if output_size is not None and output_size != length:
            raise ValueError(f"repeat_interleave: output_size {output_size} is not the result's length "
                             f"{length} along axis {axis}")
        return apply(RepeatInterleave, x, repeats=counts, axis=axis)

    def tril(self: Tensor, diagonal: int = 0) -> Tensor:
        """Zeros above the `diagonal`-th diagonal of the last two axes."""
        return apply(Tril, self._matrices("tril"), k=diagonal)

    def triu(self: Tensor, diagonal: int = 0) -> Tensor:
        """Zeros below the `diagonal`-th diagonal of the last two axes."""
        return apply(Triu, self._matrices("triu"), k=diagonal)

    def _matrices(self: Tensor, name: str) -> Tensor:
        if self.ndim < 2:
            raise ShapeError(f"{name}: needs at least 2 dims, got shape {self.shape}")
        return self

    @numpy_spellings(axis1="dim1", axis2="dim2")
    def diagonal(self: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
        """The diagonal of the (dim1, dim2) planes, shifted by `offset`, as the last axis."""
        a1, a2 = (normalize_axis("diagonal", a, self.ndim) for a in (dim1, dim2))
        if a1 == a2:
            raise ShapeError(f"diagonal: dim1 and dim2 are the same axis {a1}")
        return apply(Diagonal, self, offset=offset, axis1=a1, axis2=a2)

    @numpy_spellings
    def chunk(self: Tensor, chunks: int, dim: int = 0) -> list[Tensor]:
        """Pieces of ⌈n/chunks⌉ along `dim`, the last one smaller (possibly fewer pieces), as PyTorch."""
        if chunks < 1:
            raise ValueError(f"chunk: chunks must be at least 1, got {chunks}")
        length = self.shape[normalize_axis("chunk", dim, self.ndim)]
        return self.split(max(-(-length // chunks), 1), dim)

    def pad(self: Tensor, pad: Sequence[int], mode: str = "constant", value: float = 0.0) -> Tensor:
        """`value` added around the tensor (mode "constant"), or copies of its own elements
        ("reflect", "replicate", "circular"): pad = (before, after) for the last axis, then for the
        one before it, … (PyTorch's order); a negative width crops. As PyTorch, reflect and
        replicate pad first and then crop (reflect (3, −3) of [0, 1, 2, 3, 4] is [3, 2, 1, 0, 1]);
        circular crops first, then wraps the rest."""
        widths = pad_widths(self.shape, pad)
        if mode == "constant" and self.dtype.kind in "iub" and not np.isfinite(value):
            raise ValueError(f"pad: value {value} does not fit a tensor of dtype {self.dtype}")
        if mode in ("reflect", "replicate"):        # source indices of the padded, then cropped, axis
            return apply(PadCopy, self, indices=copy_indices(self.shape, widths, mode))
        cropped = tuple(slice(max(-a, 0), n - max(-b, 0)) for (a, b), n in zip(widths, self.shape))
        x = self[cropped] if any(a < 0 or b < 0 for a, b in widths) else self   # a negative width crops
        widths = tuple((max(a, 0), max(b, 0)) for a, b in widths)
        if mode != "constant":
            return apply(PadCopy, x, indices=copy_indices(x.shape, widths, mode))
        return apply(Pad, x, widths=widths, value=value)

    @numpy_spellings
    def gather(self: Tensor, dim: int, index: Any) -> Tensor:
        """x read at `index` along `axis`: y[i, j] = x[index[i, j], j] for axis 0 (index has x's
        number of dims, and on the other axes covers a leading part of x)."""
        if self.ndim == 0:                  # dim 0 or −1 and a 0-d index, as PyTorch
            check_zero_d_dim("gather", dim)
            index = index if _is_tensor(index) else self._wrap(index)
            return self.reshape(1).gather(0, index.reshape(-1)).reshape(index.shape)
        axis, index = self._index_for("gather", dim, index)
        return apply(Gather, self, index, axis=axis)

    @numpy_spellings
    def scatter_add(self: Tensor, dim: int, index: Any, src: Tensor) -> Tensor:
        """A copy of x with src added at `index` along `axis`: y[index[i, j], j] += src[i, j] for
        axis 0. Indices may repeat (their additions accumulate)."""
        src = self._lift(src)
        if src.dtype != self.dtype or src.ndim != self.ndim:
            raise TypeError(f"scatter_add: src must have x's dtype {self.dtype} and {self.ndim} dims, "
                            f"got {src.dtype} and {src.ndim}")
        if self.ndim == 0:                  # dim 0 or −1 and 0-d index and src, as PyTorch
            check_zero_d_dim("scatter_add", dim)
            index = index if _is_tensor(index) else self._wrap(index)
            return self.reshape(1).scatter_add(0, index.reshape(-1), src.reshape(-1)).reshape(())
        axis, index = self._index_for("scatter_add", dim, index)
        if any(i > n for i, n in zip(index.shape, src.shape)):
            raise ShapeError(f"scatter_add: index of shape {index.shape} is larger than src {src.shape}")
        return apply(ScatterAdd, self, index, src, axis=axis)

    def _index_for(self: Tensor, name: str, axis: int, index: Any) -> tuple[int, Tensor]:
        """The axis normalised, and the index as an integer tensor with x's number of dims, no
        longer than x off `axis`, its values in [0, x.shape[axis])."""
        axis = normalize_axis(name, axis, self.ndim)
        index = index if _is_tensor(index) else self._wrap(index)
        check_index_along(name, self.shape, axis, index.data)
        return axis, index

    def one_hot(self: Tensor, num_classes: int = -1) -> Tensor:
        """Integer class ids → int64 rows with a 1 at the id (no gradient); num_classes −1 means max + 1."""
        if self.dtype.kind not in "iu":
            raise TypeError(f"one_hot: needs integer class ids, got dtype {self.dtype}")
        classes = int(self.data.max()) + 1 if num_classes == -1 and self.data.size else max(num_classes, 0)
        bad = first_out_of_range(self.data, classes, host_values=self.host_values)
        if bad is not None:
            raise ValueError(f"one_hot: class {bad} is out of range for {classes} classes")
        return _constant("one_hot", lambda xp, a: (a[..., None] == xp.arange(classes)).astype(xp.int64), self)


def _is_tensor(x: object) -> TypeGuard[Tensor]:
    """Whether `x` is a tensor: every TensorMethods is a Tensor (the one class that inherits it)."""
    return isinstance(x, TensorMethods)


def _constant(name: str, fn: Any, *operands: Any) -> Tensor:
    """A result without a gradient (a comparison, argmax, isnan, …): ``fn(xp, *arrays)`` on the
    operands' arrays, the operands after the first lifted to its device and broadcast-checked."""
    first = operands[0]
    others = [first._lift(o) for o in operands[1:]]
    for o in others:
        if o.device != first.device:
            raise DeviceError(f"{name}: inputs are on different devices ({first.device}, {o.device})")
        broadcast_shape(name, first.shape, o.shape)
    with quiet_float_errors():
        result = fn(xp_for(first.device), first.data, *[o.data for o in others])
    return type(first)._from_op(result, None, None)


def as_mask(mask: Any, like: Tensor) -> Tensor:
    """`mask` as a bool tensor on `like`'s device (TypeError for any other dtype)."""
    mask = mask if _is_tensor(mask) else like._wrap(mask)
    if mask.dtype != np.bool_:
        raise TypeError(f"mask must be boolean, got dtype {mask.dtype}")
    return mask


def _matmul(a: Tensor, b: Tensor) -> Tensor:
    check_matmul(a.shape, b.shape)
    if a.data.dtype != b.data.dtype:
        if (a.data.dtype.kind == "f") != (b.data.dtype.kind == "f"):
            raise TypeError(f"matmul: operands of dtypes {a.dtype} and {b.dtype}: an integer and a float "
                            "matrix do not multiply (as PyTorch); convert one first")
        a, b = promoted(a, b)
    return apply(MatMul, a, b)


def _binary(op, a: Tensor, b: Tensor) -> Tensor:
    # The common case, one float dtype and one shape, skips _promoted and broadcast_shape (what it
    # saves: check_costs --tricks).
    if a.data.dtype is not b.data.dtype or a.data.dtype.kind != "f":
        a, b = _promoted(op, a, b)
    if a.data.shape != b.data.shape:
        broadcast_shape(op.name, a.shape, b.shape)
    return apply(op, a, b)


def _promoted(op, a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    """The operands of a binary op in the dtypes PyTorch computes it in."""
    if op is Div and a.data.dtype.kind != "f" and b.data.dtype.kind != "f":    # ints: the default float
        return as_float(a), as_float(b)
    a, b = promoted(a, b)
    return a, b


def promoted(*tensors: Tensor) -> tuple[Tensor, ...]:
    """The tensors in the one dtype PyTorch computes an op on them in (``dtypes.promoted_dtype``);
    a tensor that carries a gradient is converted by the ``cast`` op, so its gradient flows back."""
    dtype = promoted_dtype(*(t.data for t in tensors))
    return tuple(t._in_dtype(dtype) for t in tensors)
