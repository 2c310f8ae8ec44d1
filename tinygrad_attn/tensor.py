"""Tensor: an array on a device, whether it requires grad, and the node of the op that made it.

Every differentiable method calls ``apply``, the op's entry point defined here, with one op
class; no method computes a gradient itself. Dtypes follow PyTorch: a scalar on the other side
of an operator (a Python number, a NumPy scalar or a 0-d array) never changes a float tensor's
dtype (a float32 tensor times ``np.float64(2)`` stays float32); an integer tensor meeting a
float takes the float's dtype (the default float dtype for a Python float); arrays with dims
promote as NumPy does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import engine
from .backend import array_module, device_of, to_device, to_numpy, xp_for
from .errors import DeviceError, IndexOutOfRange, ShapeError
from .guards import anomaly
from .guards.axes import normalize_axes, normalize_axis
from .guards.shapes import broadcast_shape
from .ops import elementwise as E
from .ops import matmul as M
from .ops import reduce as R
from .ops import shape as S
from .ops.base import Context, Op, restore_float_errors, silence_float_errors
from .scopes import current_scope

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
        if value is not None and device_of(value) != self.device:
            raise DeviceError(f"grad: a {device_of(value)} array cannot be the gradient of a tensor on "
                              f"{self.device}; move it with backend.to_device first")
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

    def exp(self) -> Tensor: return apply(E.Exp, self)
    def log(self) -> Tensor: return apply(E.Log, self)
    def sqrt(self) -> Tensor: return apply(E.Sqrt, self)
    def tanh(self) -> Tensor: return apply(E.Tanh, self)
    def sigmoid(self) -> Tensor: return apply(E.Sigmoid, self)
    def relu(self) -> Tensor: return apply(E.Relu, self)
    def gelu(self) -> Tensor: return apply(E.Gelu, self)

    # ----- reductions -----
    def sum(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        return self._reduce(R.Sum, axis, keepdims)

    def mean(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        return self._reduce(R.Mean, axis, keepdims)

    def max(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        """The maximum; at ties the gradient is shared equally by the tied elements."""
        return self._reduce(R.Max, axis, keepdims)

    def var(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        """The population variance (ddof 0)."""
        return self._reduce(R.Var, axis, keepdims)

    def _reduce(self, op, axis, keepdims) -> Tensor:
        axes = normalize_axes(op.name, axis, self.ndim)
        if op is R.Max and any(self.shape[a] == 0 for a in (range(self.ndim) if axes is None else axes)):
            raise ShapeError(f"max: cannot take the maximum over an empty axis (axis {axis} of "
                             f"shape {self.shape})")
        return apply(op, self, axis=axes, keepdims=keepdims)

    # ----- shape -----
    def reshape(self, *shape: int | Sequence[int]) -> Tensor:
        shape = tuple(shape[0]) if len(shape) == 1 and not isinstance(shape[0], int) else shape
        size, known = self.data.size, math.prod(n for n in shape if n != -1)
        fits = size == known if -1 not in shape else known > 0 and size % known == 0
        if not fits or shape.count(-1) > 1 or any(n < -1 for n in shape):
            raise ShapeError(f"reshape: cannot reshape {self.shape} ({size} elements) to {shape}")
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
        index = tuple(xp.asarray(i.data if isinstance(i, Tensor) else i)
                      if isinstance(i, (Tensor, list, np.ndarray)) or device_of(i) == "cuda"
                      else i for i in index)
        try:
            for probe in _index_probes(xp, index):
                np.broadcast_to(np.empty((), bool), self.shape)[probe]
        except IndexError as e:
            raise IndexOutOfRange(f"getitem: index {index} does not fit shape {self.shape}: {e}") from e
        except (TypeError, ValueError) as e:
            raise ShapeError(f"getitem: index {index} does not fit shape {self.shape}: {e}") from e
        return apply(S.GetItem, self, index=index)

    def split(self, sizes_or_n: int | Sequence[int], axis: int = 0) -> list[Tensor]:
        """Equal pieces (an int: how many) or pieces of the given sizes along `axis`."""
        axis = normalize_axis("split", axis, self.ndim)
        length = self.shape[axis]
        if isinstance(sizes_or_n, int):
            if sizes_or_n <= 0 or length % sizes_or_n:
                raise ShapeError(f"split: axis {axis} of shape {self.shape} does not split into "
                                 f"{sizes_or_n} equal pieces")
            sizes = [length // sizes_or_n] * sizes_or_n
        else:
            sizes = list(sizes_or_n)
            if sum(sizes) != length or any(n < 0 for n in sizes):
                raise ShapeError(f"split: sizes {sizes} do not add up to {length}, the length of "
                                 f"axis {axis} of shape {self.shape}")
        starts = np.cumsum([0] + sizes).tolist()
        return [apply(S.Split, self, axis=axis, start=a, stop=b)
                for a, b in zip(starts[:-1], starts[1:])]

    def masked_fill(self, mask: Any, value: float) -> Tensor:
        """`value` where `mask` is True, this tensor elsewhere (mask broadcasts, never differentiated)."""
        mask = _as_mask(mask, self.device)
        broadcast_shape("masked_fill", tuple(mask.shape), self.shape, names=("mask", "x"), what="shapes of")
        return apply(S.MaskedFill, self, mask, value=value)


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
    if anomaly.active:              # the only cost of anomaly mode when it is off: this one test
        anomaly.check_forward(op, xp, inputs, out, node, current_scope())
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
        return xp.ones(root.data.shape, dtype=root.dtype)
    grad = grad.data if isinstance(grad, Tensor) else grad
    if device_of(grad) != root.device and device_of(grad) != "cpu":
        raise DeviceError(f"{caller}: grad is on {device_of(grad)} but the tensor is on "
                          f"{root.device}; move it with .to({root.device!r})")
    grad = xp.asarray(grad, dtype=root.dtype)
    if grad.shape != root.data.shape:
        raise ShapeError(f"{caller}: grad has shape {tuple(grad.shape)} but the tensor "
                         f"has shape {root.shape}")
    return grad


def _index_probes(xp: Any, index: tuple) -> tuple[tuple, ...]:
    """Host stand-ins of `index` that NumPy checks against the shape (on a zero-byte array): the
    index itself on the CPU (one probe, nothing copied).

    A GPU integer array is not copied to the host: it is replaced by its minimum, then by its
    maximum, broadcast to its shape (two probes, one read of two numbers). The indices that fit
    an axis of length n form the interval [−n, n − 1], so if both extremes fit, every value does.
    A GPU boolean array is copied, since its count of True values decides the result's shape.
    """
    low, high = [], []
    for i in index:
        if _is_device_int_array(i):
            lowest, highest = to_numpy(xp.stack([i.min(), i.max()]))
            low.append(np.broadcast_to(lowest, i.shape))
            high.append(np.broadcast_to(highest, i.shape))
        else:
            host = to_numpy(i) if device_of(i) == "cuda" else i
            low.append(host)
            high.append(host)
    return (tuple(low), tuple(high)) if any(map(_is_device_int_array, index)) else (tuple(low),)


def _is_device_int_array(i: Any) -> bool:
    return device_of(i) == "cuda" and i.dtype.kind in "iu" and i.size > 0


def _as_mask(mask: Any, device: str) -> Tensor:
    mask = mask if isinstance(mask, Tensor) else Tensor(mask, device=device)
    if mask.dtype != np.bool_:
        raise TypeError(f"mask must be boolean, got dtype {mask.dtype}")
    return mask


def _checked_array(xp: Any, data: Any, dtype: Any) -> Any:
    """A fresh array of `data`; TypeError for what a tensor cannot hold (complex, strings,
    objects, ragged lists): only bool, integer and float data."""
    try:
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
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(f"matmul: operands must have at least 1 dim, got {a.shape} @ {b.shape}")
    inner_a, inner_b = a.shape[-1], b.shape[0] if b.ndim == 1 else b.shape[-2]
    if inner_a != inner_b:
        raise ShapeError(f"matmul: shapes {a.shape} and {b.shape} do not fit "
                         f"(inner dims {inner_a} and {inner_b} differ)")
    broadcast_shape("matmul", a.shape[:-2], b.shape[:-2], names=("a", "b"), what="batch dims of")
    return apply(M.MatMul, a, b)


def _binary(op, a: Tensor, b: Tensor) -> Tensor:
    a_float, b_float = a.data.dtype.kind == "f", b.data.dtype.kind == "f"
    if a_float != b_float:                  # int meets float: the float's dtype (PyTorch)
        if a_float:
            b = Tensor(b.data, dtype=a.dtype, device=b.device)
        else:
            a = Tensor(a.data, dtype=b.dtype, device=a.device)
    if a.data.shape != b.data.shape:
        broadcast_shape(op.name, a.shape, b.shape)
    return apply(op, a, b)


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
    first = tensors[0].shape
    for t in tensors:
        if t.ndim != len(first) or t.shape[:axis] + t.shape[axis + 1:] != first[:axis] + first[axis + 1:]:
            raise ShapeError(f"concat: shapes {[x.shape for x in tensors]} differ off axis {axis}")
    return apply(S.Concat, *tensors, axis=axis)


def stack(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
    """The tensors (of one shape) joined along a new axis."""
    tensors = list(tensors)
    if not tensors:
        raise ValueError("stack: needs at least one tensor")
    if any(t.shape != tensors[0].shape for t in tensors):
        raise ShapeError(f"stack: all shapes must be equal, got {[t.shape for t in tensors]}")
    axis = normalize_axis("stack", axis, tensors[0].ndim + 1)
    return apply(S.Stack, *tensors, axis=axis)

