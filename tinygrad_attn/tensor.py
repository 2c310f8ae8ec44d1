"""Tensor: an array on a device, whether it requires grad, and the node of the op that made it.

Every differentiable method calls ``apply``, the op's entry point defined here, with one op
class; no method computes a gradient itself. Dtypes follow PyTorch: a scalar on the other side
of an operator (a Python number, a NumPy scalar or a 0-d array) never changes a float tensor's
dtype (a float32 tensor times ``np.float64(2)`` stays float32); an integer tensor meeting a
float takes the float's dtype (the default float dtype for a Python float); arrays with dims
promote as NumPy does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from . import engine
from .backend import array_module, device_of, ones, to_device, to_numpy, xp_for
from .errors import DeviceError, ShapeError
from .guards import anomaly
from .guards.axes import normalize_axes, normalize_axis
from .guards.indexing import check_index
from .guards.shape_arguments import (
    check_index_along,
    check_unflatten,
    expanded_shape,
    interleave_counts,
    pad_widths,
    repeat_counts,
    roll_shifts,
)
from .guards.shapes import (
    broadcast_shape,
    check_concat,
    check_matmul,
    check_reshape,
    check_stack,
    first_out_of_range,
    sizes_argument,
    split_sizes,
)
from .ops import binary as B
from .ops import elementwise as E
from .ops import gather as G
from .ops import matmul as M
from .ops import movement as V
from .ops import reduce as R
from .ops import shape as S
from .ops import unary as U
from .ops.base import Context, Op, quiet_float_errors, restore_float_errors, silence_float_errors
from .scopes import current_scope

__all__ = ["Tensor", "apply", "as_float", "concat", "get_default_dtype", "seed_gradient",
           "set_default_dtype", "stack", "where"]


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


def _is_float(dtype: Any) -> bool:
    return np.dtype(dtype).kind == "f"


class Tensor:
    """An n-dimensional array with reverse-mode autodiff.

    Args:
        data: a Python scalar or nested list, a NumPy or CuPy array, or a Tensor (its data
            is copied, its graph is not).
        requires_grad: whether backward should compute ``.grad`` for it (float dtypes only).
        dtype: the dtype to convert to; by default Python floats become the default float
            dtype, arrays keep theirs and integers stay integers.
        device: "cpu" (NumPy) or "cuda" (CuPy).

    Changing values: write ``x.data`` under ``no_grad()`` before building the graph (or build
    a new graph afterwards), as an optimizer step does. An array that backward needs (``x`` in
    ``x * x``) must not be edited in place between the forward pass and backward: backward then
    raises a RuntimeError naming the op and the tensor, instead of using the new values.

    Example:
        >>> x = Tensor([1.0, 2.0], requires_grad=True)
        >>> (x * x).sum().backward()
        >>> x.grad
        array([2., 4.], dtype=float32)
    """

    __slots__ = ("data", "_grad", "requires_grad", "op", "name", "node", "__weakref__")
    __array_ufunc__ = None  # numpy defers to our reflected operators: ndarray * Tensor -> Tensor

    def __init__(self, data: Any, requires_grad: bool = False, dtype: Any = None,
                 device: str = "cpu"):
        xp = xp_for(device)
        if isinstance(data, Tensor):
            data = data.data
        if device_of(data) != device:
            data = to_device(data, device) if hasattr(data, "dtype") else data
        is_python = not hasattr(data, "dtype")
        array = _checked_array(xp, data, dtype)
        if dtype is None and is_python and array.dtype.kind == "f":
            array = array.astype(_default_dtype)
        if requires_grad and not _is_float(array.dtype):
            raise TypeError(f"Tensor: only float tensors can require grad, got dtype {array.dtype}")
        self.data, self.grad, self.requires_grad = array, None, requires_grad
        self.op, self.name, self.node = None, None, None

    @classmethod
    def _from_op(cls, data: Any, op: str | None, node: engine.Node | None) -> Tensor:
        """A tensor around an op's result array, without the constructor's copy and checks."""
        t = cls.__new__(cls)
        t.data, t._grad, t.requires_grad = data, None, node is not None
        t.op, t.name, t.node = op, None, node
        return t

    # ----- properties -----
    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape)

    @property
    def ndim(self) -> int:
        return self.data.ndim

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    @property
    def device(self) -> str:
        return device_of(self.data)

    @property
    def grad(self) -> Any:
        """The accumulated gradient (an array on this tensor's device), or None."""
        return self._grad

    @grad.setter
    def grad(self, value: Any) -> None:
        """An array of this tensor's shape on its device, or None (else DeviceError, ShapeError)."""
        data = self.data
        # The engine's path first: an array of the data's own type (so on its device) and shape.
        if value is not None and (type(value) is not type(data) or value.shape != data.shape):
            if device_of(value) != self.device:
                raise DeviceError(f"grad: a {device_of(value)} array cannot be the gradient of a tensor on "
                                  f"{self.device}; move it with backend.to_device first")
            if getattr(value, "shape", None) != self.data.shape:
                got = f"shape {tuple(value.shape)}" if hasattr(value, "shape") else type(value).__name__
                raise ShapeError(f"grad: the gradient of a tensor of shape {self.shape} must be an array "
                                 f"of that shape, got {got}")
        self._grad = value

    @property
    def is_leaf(self) -> bool:
        """True unless an op recorded in the graph made this tensor."""
        return self.node is None

    @property
    def T(self) -> Tensor:
        """The last two axes swapped (a 1-D or 0-D tensor is returned as it is)."""
        return self if self.ndim < 2 else self.swapaxes(-1, -2)

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        """The sub-tensors along the first axis, as iterating a NumPy array gives its rows."""
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    def __repr__(self) -> str:
        extra = f", op={self.op!r}" if self.op else ""
        extra += ", requires_grad=True" if self.requires_grad else ""
        extra += f", device={self.device!r}" if self.device != "cpu" else ""
        return f"Tensor({to_numpy(self.data)!r}{extra})"

    # ----- autodiff and conversion -----
    def backward(self, grad: Any = None) -> None:
        """Accumulate d(self)/d(leaf) · grad into every leaf's ``.grad`` that requires grad.

        `grad` may be omitted for a single-element tensor (it is then 1). The graph is kept, so
        calling backward again accumulates again (zero the grads in between to start afresh).
        """
        engine.run_backward(self, seed_gradient(self, grad, "backward"))

    def numpy(self) -> np.ndarray:
        """A NumPy copy of the data (also for a tensor on the GPU)."""
        return to_numpy(self.data)

    def item(self) -> Any:
        """The single element as a Python number."""
        if self.data.size != 1:
            raise ValueError(f"item: tensor of shape {self.shape} has {self.data.size} elements")
        return self.data.item()

    def detach(self) -> Tensor:
        """A leaf sharing this data, outside any graph, not requiring grad."""
        return Tensor._from_op(self.data, None, None)

    def to(self, device: str) -> Tensor:
        """A copy on `device`: a leaf that requires grad if this tensor does."""
        if device == self.device:
            return self
        return Tensor(self.data, requires_grad=self.requires_grad, device=device)

    def zero_grad(self) -> None:
        """Forget the accumulated gradient."""
        self.grad = None

    # ----- arithmetic -----
    def _lift(self, other: Any) -> Tensor:
        """`other` as a tensor on this device; a scalar (Python or NumPy number, 0-d array)
        takes a float tensor's dtype, a float scalar beside an integer tensor the default float."""
        if isinstance(other, Tensor):
            return other
        if getattr(other, "ndim", 0) != 0 or isinstance(other, (list, tuple)):
            return Tensor(other, device=self.device)
        kind = other.dtype.kind if hasattr(other, "dtype") else np.asarray(other).dtype.kind
        dtype = None                    # complex, strings: refused by the constructor
        if kind == "f" and not _is_float(self.dtype):
            dtype = _default_dtype
        elif kind in "biuf" and self.dtype.kind != "b":
            dtype = self.dtype
        return Tensor(other, dtype=dtype, device=self.device)

    def __add__(self, other): return _binary(E.Add, self, self._lift(other))
    def __radd__(self, other): return _binary(E.Add, self._lift(other), self)
    def __sub__(self, other): return _binary(E.Sub, self, self._lift(other))
    def __rsub__(self, other): return _binary(E.Sub, self._lift(other), self)
    def __mul__(self, other): return _binary(E.Mul, self, self._lift(other))
    def __rmul__(self, other): return _binary(E.Mul, self._lift(other), self)
    def __truediv__(self, other): return _binary(E.Div, self, self._lift(other))
    def __rtruediv__(self, other): return _binary(E.Div, self._lift(other), self)
    def __pow__(self, other): return _binary(E.Pow, self, self._lift(other))
    def __rpow__(self, other): return _binary(E.Pow, self._lift(other), self)
    def __neg__(self): return apply(E.Neg, self)

    def __matmul__(self, other):
        return _matmul(self, self._lift(other))

    def __rmatmul__(self, other):
        return _matmul(self._lift(other), self)

    def exp(self) -> Tensor: return apply(E.Exp, as_float(self))
    def log(self) -> Tensor: return apply(E.Log, as_float(self))
    def sqrt(self) -> Tensor: return apply(E.Sqrt, as_float(self))
    def tanh(self) -> Tensor: return apply(E.Tanh, as_float(self))
    def sigmoid(self) -> Tensor: return apply(E.Sigmoid, as_float(self))
    def relu(self) -> Tensor: return apply(E.Relu, self)
    def gelu(self) -> Tensor: return apply(E.Gelu, as_float(self))
    def silu(self) -> Tensor: return apply(E.Silu, as_float(self))

    # ----- reductions -----
    def sum(self, axis: int | Sequence[int] | None = None, keepdims: bool = False,
            dtype: Any = None) -> Tensor:
        """Σ over `axis`; `dtype` sets the dtype it accumulates in and returns (float16 is
        always accumulated in float32)."""
        return self._reduce(R.Sum, axis, keepdims, **({} if dtype is None else {"dtype": np.dtype(dtype)}))

    def mean(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        return as_float(self)._reduce(R.Mean, axis, keepdims)

    def max(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        """The maximum; at ties the gradient is shared equally by the tied elements."""
        return self._reduce(R.Max, axis, keepdims)

    def var(self, axis: int | Sequence[int] | None = None, keepdims: bool = False,
            correction: int = 0) -> Tensor:
        """Σ (x − mean)² / (n − correction): the population variance by default (correction 0;
        PyTorch's default is 1, the unbiased estimate)."""
        return as_float(self)._reduce(R.Var, axis, keepdims, correction=correction)

    def _reduce(self, op, axis, keepdims, **params) -> Tensor:
        axes = normalize_axes(op.name, axis, self.ndim)
        reduced = range(self.ndim) if axes is None else axes
        if op in (R.Max, R.Min) and any(self.shape[a] == 0 for a in reduced):
            raise ShapeError(f"{op.name}: cannot take the {op.name}imum over an empty axis (axis {axis} of "
                             f"shape {self.shape})")
        return apply(op, self, axis=axes, keepdims=keepdims, **params)

    # ----- shape -----
    def reshape(self, *shape: int | Sequence[int]) -> Tensor:
        shape = sizes_argument(shape)
        check_reshape(self.shape, self.data.size, shape)
        return apply(S.Reshape, self, shape=shape)

    def transpose(self, *axes: int) -> Tensor:
        """Permute the axes (reversed when none are given), as numpy.transpose."""
        axes = tuple(axes[0]) if len(axes) == 1 and isinstance(axes[0], (tuple, list)) else axes
        axes = normalize_axes("transpose", axes, self.ndim, sort=False) if axes else \
            tuple(reversed(range(self.ndim)))
        if len(axes) != self.ndim:
            raise ShapeError(f"transpose: axes {axes} are not a permutation for shape {self.shape}")
        return apply(S.Transpose, self, axes=axes)

    def swapaxes(self, a: int, b: int) -> Tensor:
        axes = list(range(self.ndim))
        a, b = (normalize_axis("swapaxes", x, self.ndim) for x in (a, b))
        axes[a], axes[b] = axes[b], axes[a]
        return apply(S.Transpose, self, axes=tuple(axes))

    def __getitem__(self, index: Any) -> Tensor:
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
            if self.device == "cpu" and (i.device if isinstance(i, Tensor) else device_of(i)) == "cuda":
                raise DeviceError(f"getitem: the index is on cuda but the tensor is on {self.device}; "
                                  "move the index with .to() or backend.to_device")
        # Index arrays are copied: backward scatters through them, so a later edit of the caller's
        # array must not move the gradient. An empty list selects nothing, as in NumPy.
        index = tuple(xp.array(i.data if isinstance(i, Tensor) else i,
                               dtype=np.intp if isinstance(i, list) and not i else None)
                      if isinstance(i, (Tensor, list, np.ndarray)) or device_of(i) == "cuda"
                      else i for i in index)
        check_index(xp, index, self.shape)
        return apply(S.GetItem, self, index=index)

    def split(self, sizes_or_n: int | Sequence[int], axis: int = 0) -> list[Tensor]:
        """Equal pieces (an int: how many) or pieces of the given sizes along `axis`."""
        axis = normalize_axis("split", axis, self.ndim)
        sizes = split_sizes(self.shape, axis, sizes_or_n)
        starts = np.cumsum([0] + sizes).tolist()
        return [apply(S.Split, self, axis=axis, start=a, stop=b)
                for a, b in zip(starts[:-1], starts[1:])]

    def masked_fill(self, mask: Any, value: float) -> Tensor:
        """`value` where `mask` is True, this tensor elsewhere (mask broadcasts, never differentiated)."""
        mask = _as_mask(mask, self.device)
        broadcast_shape("masked_fill", tuple(mask.shape), self.shape, names=("mask", "x"), what="shapes of")
        return apply(S.MaskedFill, self, mask, value=value)

    # ===== the op surface a learner reaches for (PyTorch's names; issue 21) ==========================
    # One line per method where an op (or a short composition of ops) does it all; argument checks
    # before any op runs. Results that are not differentiable (comparisons, argmax, any, …) are
    # tensors with no graph.

    # ----- method forms of the operators -----
    def add(self, other: Any) -> Tensor: return self + other
    def sub(self, other: Any) -> Tensor: return self - other
    def mul(self, other: Any) -> Tensor: return self * other
    def div(self, other: Any) -> Tensor: return self / other
    def neg(self) -> Tensor: return -self
    def pow(self, exponent: Any) -> Tensor: return self ** exponent

    # ----- elementwise -----
    def abs(self) -> Tensor: return apply(U.Abs, self)
    def sign(self) -> Tensor: return apply(U.Sign, self)
    def floor(self) -> Tensor: return apply(U.Floor, self)
    def ceil(self) -> Tensor: return apply(U.Ceil, self)
    def round(self, decimals: int = 0) -> Tensor: return apply(U.Round, self, decimals=decimals)
    def trunc(self) -> Tensor: return apply(U.Trunc, self)
    def rsqrt(self) -> Tensor: return apply(U.Rsqrt, as_float(self))
    def log2(self) -> Tensor: return apply(U.Log2, as_float(self))
    def exp2(self) -> Tensor: return apply(U.Exp2, as_float(self))
    def sin(self) -> Tensor: return apply(U.Sin, as_float(self))
    def cos(self) -> Tensor: return apply(U.Cos, as_float(self))
    def erf(self) -> Tensor: return apply(U.Erf, as_float(self))
    def maximum(self, other: Any) -> Tensor: return _binary(B.Maximum, self, self._lift(other))
    def minimum(self, other: Any) -> Tensor: return _binary(B.Minimum, self, self._lift(other))
    def logaddexp(self, other: Any) -> Tensor: return _binary(B.LogAddExp, as_float(self), self._lift(other))

    def clip(self, min: Any = None, max: Any = None) -> Tensor:     # noqa: A002 (PyTorch's names)
        """Values below `min` become `min`, above `max` become `max` (either may be None; Tensor
        bounds go through ``maximum``/``minimum``). The gradient passes where x is within them."""
        if isinstance(min, Tensor) or isinstance(max, Tensor):
            low = self if min is None else self.maximum(min)
            return low if max is None else low.minimum(max)
        if min is None and max is None:
            raise ValueError("clip: at least one of min and max must be given")
        return apply(U.Clip, self, min=min, max=max)

    clamp = clip

    def lerp(self, end: Any, weight: Any) -> Tensor:
        """self + weight ⊙ (end − self); `weight` a number or a tensor, all three broadcast."""
        start = as_float(self)
        end, weight = start._lift(end), start._lift(weight)
        broadcast_shape("lerp", start.shape, end.shape, weight.shape)
        return apply(B.Lerp, start, as_float(end), as_float(weight))

    # ----- comparisons and tests: bool tensors, no gradient -----
    __hash__ = object.__hash__      # a tensor stays usable as a dict key or set member by identity

    def __eq__(self, other): return other is not None and _constant("eq", lambda xp, a, b: a == b, self, other)  # noqa: E501
    def __ne__(self, other): return other is None or _constant("ne", lambda xp, a, b: a != b, self, other)
    def __lt__(self, other): return _constant("lt", lambda xp, a, b: a < b, self, other)
    def __le__(self, other): return _constant("le", lambda xp, a, b: a <= b, self, other)
    def __gt__(self, other): return _constant("gt", lambda xp, a, b: a > b, self, other)
    def __ge__(self, other): return _constant("ge", lambda xp, a, b: a >= b, self, other)
    def isnan(self) -> Tensor: return _constant("isnan", lambda xp, a: xp.isnan(a), self)
    def isinf(self) -> Tensor: return _constant("isinf", lambda xp, a: xp.isinf(a), self)
    def isfinite(self) -> Tensor: return _constant("isfinite", lambda xp, a: xp.isfinite(a), self)
    def logical_not(self) -> Tensor: return _constant("logical_not", lambda xp, a: xp.logical_not(a), self)
    def logical_and(self, other) -> Tensor: return _constant("logical_and", lambda xp, a, b: xp.logical_and(a, b), self, other)  # noqa: E501
    def logical_or(self, other) -> Tensor: return _constant("logical_or", lambda xp, a, b: xp.logical_or(a, b), self, other)  # noqa: E501

    def __abs__(self) -> Tensor: return self.abs()
    def __invert__(self) -> Tensor: return self._bools("~").logical_not()
    def __and__(self, other) -> Tensor: return self._bools("&").logical_and(self._lift(other)._bools("&"))
    def __or__(self, other) -> Tensor: return self._bools("|").logical_or(self._lift(other)._bools("|"))
    __rand__, __ror__ = __and__, __or__

    def _bools(self, operator: str) -> Tensor:
        """`self` if it is a bool tensor: ~ & | are logical on masks (bitwise ops are out of scope)."""
        if self.dtype != np.bool_:
            raise TypeError(f"{operator}: works on bool tensors (masks), got dtype {self.dtype}; bitwise "
                            "ops on integers are not supported")
        return self

    def __bool__(self) -> bool:
        """The truth of a single element (``if (x > 0).all():``); more elements are ambiguous."""
        if self.data.size != 1:
            raise RuntimeError(f"bool: the truth value of a tensor of shape {self.shape} is ambiguous; "
                               "use .any() or .all()")
        return bool(self.data)

    # ----- reductions -----
    def min(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        """The minimum; at ties the gradient is shared equally by the tied elements."""
        return self._reduce(R.Min, axis, keepdims)

    def prod(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        return self._reduce(R.Prod, axis, keepdims)

    def logsumexp(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        """log Σ exp(x) over `axis`, with the maximum subtracted first (never overflows)."""
        return as_float(self)._reduce(R.LogSumExp, axis, keepdims)

    def std(self, axis: int | Sequence[int] | None = None, keepdims: bool = False,
            correction: int = 0) -> Tensor:
        """√var: the square root of ``var`` with the same `correction` (0 by default, as ``var``)."""
        return self.var(axis, keepdims, correction).sqrt()

    def cumsum(self, axis: int) -> Tensor:
        return apply(R.CumSum, self, axis=normalize_axis("cumsum", axis, self.ndim))

    def argmax(self, axis: int | None = None, keepdims: bool = False) -> Tensor:
        """The index of the maximum along `axis` (of the flattened tensor when axis is None)."""
        return self._arg("argmax", axis, keepdims)

    def argmin(self, axis: int | None = None, keepdims: bool = False) -> Tensor:
        """The index of the minimum along `axis` (of the flattened tensor when axis is None)."""
        return self._arg("argmin", axis, keepdims)

    def _arg(self, name: str, axis: int | None, keepdims: bool) -> Tensor:
        axis = None if axis is None else normalize_axis(name, axis, self.ndim)
        if self.data.size == 0 or (axis is not None and self.shape[axis] == 0):
            raise ShapeError(f"{name}: cannot take it over an empty axis (axis {axis} of shape {self.shape})")
        return _constant(name, lambda xp, a: getattr(xp, name)(a, axis=axis, keepdims=keepdims), self)

    def any(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        axes = normalize_axes("any", axis, self.ndim)
        return _constant("any", lambda xp, a: xp.any(a, axis=axes, keepdims=keepdims), self)

    def all(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        axes = normalize_axes("all", axis, self.ndim)
        return _constant("all", lambda xp, a: xp.all(a, axis=axes, keepdims=keepdims), self)

    def sort(self, axis: int = -1, descending: bool = False) -> tuple[Tensor, Tensor]:
        """(values, indices) sorted along `axis`; values = gather(indices), so they are
        differentiable, each gradient going back to the element it came from."""
        axis = normalize_axis("sort", axis, self.ndim)
        order = _constant("sort", lambda xp, a: xp.argsort(-a if descending else a, axis=axis), self)
        return self.gather(axis, order), order

    def topk(self, k: int, axis: int = -1, largest: bool = True) -> tuple[Tensor, Tensor]:
        """(values, indices) of the k largest (or smallest) elements along `axis`, in order."""
        axis = normalize_axis("topk", axis, self.ndim)
        if not 0 <= k <= self.shape[axis]:
            raise ShapeError(f"topk: k = {k} is out of range for axis {axis} of shape {self.shape}")
        _, order = self.sort(axis, descending=largest)
        indices = Tensor._from_op(order.data[(slice(None),) * axis + (slice(0, k),)], None, None)
        return self.gather(axis, indices), indices

    # ----- shape -----
    def view(self, *shape: int | Sequence[int]) -> Tensor: return self.reshape(*shape)

    def squeeze(self, axis: int | Sequence[int] | None = None) -> Tensor:
        """The size-1 axes removed (only those in `axis` when given; others there stay)."""
        axes = range(self.ndim) if axis is None else normalize_axes("squeeze", axis, self.ndim)
        drop = {a for a in axes if self.shape[a] == 1}
        return self.reshape(tuple(n for a, n in enumerate(self.shape) if a not in drop))

    def unsqueeze(self, axis: int) -> Tensor:
        """A size-1 axis inserted at `axis` (−1 appends one)."""
        axis = normalize_axis("unsqueeze", axis, self.ndim + 1)
        return self.reshape(self.shape[:axis] + (1,) + self.shape[axis:])

    def flatten(self, start_axis: int = 0, end_axis: int = -1) -> Tensor:
        """Axes start_axis … end_axis merged into one."""
        if self.ndim == 0:
            return self.reshape(1)
        start, end = (normalize_axis("flatten", a, self.ndim) for a in (start_axis, end_axis))
        if start > end:
            raise ShapeError(f"flatten: start_axis {start_axis} comes after end_axis {end_axis}")
        return self.reshape(self.shape[:start] + (-1,) + self.shape[end + 1:])

    def unflatten(self, axis: int, sizes: Sequence[int]) -> Tensor:
        """Axis `axis` split into axes of `sizes` (one may be −1)."""
        axis = normalize_axis("unflatten", axis, self.ndim)
        check_unflatten(self.shape, axis, sizes)
        return self.reshape(self.shape[:axis] + tuple(sizes) + self.shape[axis + 1:])

    def expand(self, *sizes: int | Sequence[int]) -> Tensor:
        """Size-1 axes stretched to `sizes` (−1 keeps an axis) and new leading axes added, without
        copying: the gradient sums over the copies."""
        return apply(V.Expand, self, shape=expanded_shape(self.shape, sizes))

    def flip(self, axis: int | Sequence[int]) -> Tensor:
        return apply(V.Flip, self, axis=normalize_axes("flip", axis, self.ndim))

    def roll(self, shifts: int | Sequence[int], axis: int | Sequence[int] | None = None) -> Tensor:
        """Elements shifted cyclically along `axis` (over the flattened tensor when axis is None)."""
        shifts, axis = roll_shifts(shifts, axis, self.ndim)
        return apply(V.Roll, self, shifts=shifts, axis=axis)

    def repeat(self, *repeats: int | Sequence[int]) -> Tensor:
        """The tensor tiled `repeats[i]` times along axis i (PyTorch's repeat, NumPy's tile)."""
        return apply(V.Repeat, self, repeats=repeat_counts(self.shape, repeats))

    def repeat_interleave(self, repeats: int | Sequence[int], axis: int | None = None) -> Tensor:
        """Each element repeated `repeats` times (or repeats[i] times) along `axis` (flattened first
        when axis is None)."""
        x = self.reshape(-1) if axis is None else self
        axis = 0 if axis is None else normalize_axis("repeat_interleave", axis, self.ndim)
        repeats = repeats.data.tolist() if isinstance(repeats, Tensor) else repeats
        return apply(V.RepeatInterleave, x, repeats=interleave_counts(x.shape, axis, repeats), axis=axis)

    def tril(self, diagonal: int = 0) -> Tensor:
        """Zeros above the `diagonal`-th diagonal of the last two axes."""
        return apply(V.Tril, self._matrices("tril"), k=diagonal)

    def triu(self, diagonal: int = 0) -> Tensor:
        """Zeros below the `diagonal`-th diagonal of the last two axes."""
        return apply(V.Triu, self._matrices("triu"), k=diagonal)

    def _matrices(self, name: str) -> Tensor:
        if self.ndim < 2:
            raise ShapeError(f"{name}: needs at least 2 dims, got shape {self.shape}")
        return self

    def diagonal(self, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Tensor:
        """The diagonal of the (axis1, axis2) planes, shifted by `offset`, as the last axis."""
        a1, a2 = (normalize_axis("diagonal", a, self.ndim) for a in (axis1, axis2))
        if a1 == a2:
            raise ShapeError(f"diagonal: axis1 and axis2 are the same axis {a1}")
        return apply(V.Diagonal, self, offset=offset, axis1=a1, axis2=a2)

    def chunk(self, chunks: int, axis: int = 0) -> list[Tensor]:
        """Pieces of ⌈n/chunks⌉ along `axis`, the last one smaller (possibly fewer pieces), as PyTorch."""
        if chunks < 1:
            raise ValueError(f"chunk: chunks must be at least 1, got {chunks}")
        length = self.shape[normalize_axis("chunk", axis, self.ndim)]
        size = max(-(-length // chunks), 1)
        return self.split([size] * (length // size) + ([length % size] if length % size else []), axis)

    def pad(self, pad: Sequence[int], value: float = 0.0) -> Tensor:
        """`value` added around the tensor: pad = (before, after) for the last axis, then for the one
        before it, … (PyTorch's order)."""
        return apply(V.Pad, self, widths=pad_widths(self.shape, pad), value=value)

    def gather(self, axis: int, index: Any) -> Tensor:
        """x read at `index` along `axis`: y[i, j] = x[index[i, j], j] for axis 0 (index has x's
        number of dims, and on the other axes covers a leading part of x)."""
        axis, index = self._index_for("gather", axis, index)
        return apply(G.Gather, self, index, axis=axis)

    def scatter_add(self, axis: int, index: Any, src: Tensor) -> Tensor:
        """A copy of x with src added at `index` along `axis`: y[index[i, j], j] += src[i, j] for
        axis 0. Indices may repeat (their additions accumulate)."""
        src = self._lift(src)
        if src.dtype != self.dtype or src.ndim != self.ndim:
            raise TypeError(f"scatter_add: src must have x's dtype {self.dtype} and {self.ndim} dims, "
                            f"got {src.dtype} and {src.ndim}")
        axis, index = self._index_for("scatter_add", axis, index)
        if any(i > n for i, n in zip(index.shape, src.shape)):
            raise ShapeError(f"scatter_add: index of shape {index.shape} is larger than src {src.shape}")
        return apply(G.ScatterAdd, self, index, src, axis=axis)

    def _index_for(self, name: str, axis: int, index: Any) -> tuple[int, Tensor]:
        """The axis normalised, and the index as an integer tensor with x's number of dims, no
        longer than x off `axis`, its values in [0, x.shape[axis])."""
        axis = normalize_axis(name, axis, self.ndim)
        index = index if isinstance(index, Tensor) else Tensor(index, device=self.device)
        check_index_along(name, self.shape, axis, index.data)
        return axis, index

    def one_hot(self, num_classes: int = -1) -> Tensor:
        """Integer class ids → int64 rows with a 1 at the id (no gradient); num_classes −1 means max + 1."""
        if self.dtype.kind not in "iu":
            raise TypeError(f"one_hot: needs integer class ids, got dtype {self.dtype}")
        classes = int(self.data.max()) + 1 if num_classes == -1 and self.data.size else max(num_classes, 0)
        bad = first_out_of_range(self.data, classes)
        if bad is not None:
            raise ValueError(f"one_hot: class {bad} is out of range for {classes} classes")
        return _constant("one_hot", lambda xp, a: (a[..., None] == xp.arange(classes)).astype(xp.int64), self)
    # ===== end of the op surface =====================================================================


def as_float(t: Tensor) -> Tensor:
    """`t`, or for an integer or bool tensor its values in the default float dtype: what an op
    that must return a float (division, exp, mean, …) computes on, as PyTorch."""
    return t if t.data.dtype.kind == "f" else Tensor(t.data, dtype=_default_dtype, device=t.device)


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
        return Tensor._from_op(fn(xp_for(first.device), first.data, *[o.data for o in others]), None, None)


def apply(op: type[Op], *inputs: Tensor | None, **params: Any) -> Tensor:
    """Run `op` on the inputs' arrays and wrap the result, recording a Node if grad is needed.

    Every differentiable operation ends here: the methods above, ``functional``, and a new op.
    It runs for every op, so it reads the inputs in one loop: their arrays, whether each needs a
    gradient, and that they share one device (arrays of one type do: one type test per input).
    """
    arrays: list[Any] = []
    needs_grad: list[bool] = []
    first = None
    for t in inputs:
        if t is None:
            arrays.append(None)
            needs_grad.append(False)
            continue
        data = t.data
        if first is None:
            first = data
        elif type(data) is not type(first):
            _check_one_device(op, inputs)
        arrays.append(data)
        needs_grad.append(t.requires_grad)
    xp = array_module(first)
    ctx = Context(xp, tuple(needs_grad), params)
    token = silence_float_errors()  # inf/NaN without RuntimeWarnings, as PyTorch; anomaly mode reports them
    try:
        out = op.forward(ctx, *arrays, **params)
    finally:
        restore_float_errors(token)
    node = engine.record(op, ctx, inputs, out) if True in needs_grad else None
    if anomaly.mode.open_blocks:    # the only cost of anomaly mode when it is off: this one test
        anomaly.check_forward(op, xp, inputs, out, node, current_scope(), params)
    return Tensor._from_op(out, op.name, node)


def _check_one_device(op: type[Op], inputs: tuple[Tensor | None, ...]) -> None:
    """DeviceError naming the op and the devices when the inputs' arrays are on two devices."""
    devices = [t.device for t in inputs if t is not None]
    if len(set(devices)) > 1:
        raise DeviceError(f"{op.name}: inputs are on different devices ({', '.join(devices)}); "
                          "move them with .to()")


def seed_gradient(root: Tensor, grad: Any, caller: str) -> Any:
    """The gradient that starts a backward pass from `root` (``backward``, ``backprop_steps``),
    checked: 1 for a single element when `grad` is None, else `grad` as an array of root's shape."""
    if not root.requires_grad:
        raise RuntimeError(f"{caller}: this tensor does not require grad and has no graph")
    xp = array_module(root.data)
    if grad is None:
        if root.data.size != 1:
            raise RuntimeError(f"{caller}: a tensor of shape {root.shape} needs an explicit "
                               "grad of the same shape; only a single element defaults to 1")
        return ones(xp, root.data.shape, root.dtype)
    grad = grad.data if isinstance(grad, Tensor) else grad
    if device_of(grad) != root.device and device_of(grad) != "cpu":
        raise DeviceError(f"{caller}: grad is on {device_of(grad)} but the tensor is on "
                          f"{root.device}; move it with .to({root.device!r})")
    grad = xp.asarray(grad, dtype=root.dtype)
    if grad.shape != root.data.shape:
        raise ShapeError(f"{caller}: grad has shape {tuple(grad.shape)} but the tensor "
                         f"has shape {root.shape}")
    return grad


def _as_mask(mask: Any, device: str) -> Tensor:
    mask = mask if isinstance(mask, Tensor) else Tensor(mask, device=device)
    if mask.dtype != np.bool_:
        raise TypeError(f"mask must be boolean, got dtype {mask.dtype}")
    return mask


def _checked_array(xp: Any, data: Any, dtype: Any) -> Any:
    """A fresh array of `data`; TypeError for what a tensor cannot hold (complex, strings,
    objects, ragged lists): only bool, integer and float data."""
    try:
        with quiet_float_errors():      # a cast that overflows gives inf, as PyTorch (1e39 in float32)
            array = xp.array(data, dtype=dtype, copy=True)
    except ValueError as e:
        if "inhomogeneous" not in str(e):
            raise
        raise TypeError("Tensor: ragged data (nested lists of different lengths) cannot form a "
                        "tensor") from None
    if array.dtype.kind not in "biuf":
        raise TypeError(f"Tensor: cannot hold dtype {array.dtype}; a tensor holds bool, integer "
                        "or float data")
    return array


def _matmul(a: Tensor, b: Tensor) -> Tensor:
    check_matmul(a.shape, b.shape)
    return apply(M.MatMul, a, b)


def _binary(op, a: Tensor, b: Tensor) -> Tensor:
    if a.data.dtype is not b.data.dtype or a.data.dtype.kind != "f":   # else the common case: one float dtype
        a, b = _promoted(op, a, b)
    if a.data.shape != b.data.shape:
        broadcast_shape(op.name, a.shape, b.shape)
    return apply(op, a, b)


def _promoted(op, a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    """The operands of a binary op in the dtypes PyTorch computes it in."""
    a_float, b_float = a.data.dtype.kind == "f", b.data.dtype.kind == "f"
    if op is E.Div and not (a_float or b_float):    # integers divided: the default float
        return as_float(a), as_float(b)
    if a_float != b_float:                          # int meets float: the float's dtype
        if a_float:
            return a, Tensor(b.data, dtype=a.dtype, device=b.device)
        return Tensor(a.data, dtype=b.dtype, device=a.device), b
    return a, b


def where(cond: Any, a: Any, b: Any) -> Tensor:
    """Elements of `a` where `cond` is True, of `b` elsewhere; cond is never differentiated."""
    like = next((t for t in (a, b) if isinstance(t, Tensor)), None)
    device = like.device if like is not None else "cpu"
    a = a if isinstance(a, Tensor) else (like._lift(a) if like is not None else Tensor(a))
    b = b if isinstance(b, Tensor) else a._lift(b)
    cond = _as_mask(cond, device)
    broadcast_shape("where", cond.shape, a.shape, b.shape)
    return apply(S.Where, cond, a, b)


def concat(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
    """The tensors joined along an existing axis."""
    tensors = list(tensors)
    if not tensors:
        raise ValueError("concat: needs at least one tensor")
    axis = normalize_axis("concat", axis, tensors[0].ndim)
    check_concat([t.shape for t in tensors], axis)
    return apply(S.Concat, *tensors, axis=axis)


def stack(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
    """The tensors (of one shape) joined along a new axis."""
    tensors = list(tensors)
    if not tensors:
        raise ValueError("stack: needs at least one tensor")
    check_stack([t.shape for t in tensors])
    axis = normalize_axis("stack", axis, tensors[0].ndim + 1)
    return apply(S.Stack, *tensors, axis=axis)

