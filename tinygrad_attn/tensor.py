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
from .apply import apply
from .backend import array_module, device_of, ones, to_device, to_numpy, xp_for
from .dtypes import get_default_dtype, is_float
from .errors import DeviceError, ShapeError
from .float_errors import quiet_float_errors
from .guards.axes import normalize_axis, numpy_spellings
from .guards.shapes import broadcast_shape, check_concat, check_stack
from .ops.selection import Where
from .ops.shape import Concat, Stack
from .tensor_methods import TensorMethods, as_mask, promoted

__all__ = ["Tensor", "concat", "seed_gradient", "stack", "where"]


class Tensor(TensorMethods):
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
    raises a RuntimeError naming the op and the tensor, instead of using the new values. The data
    of more than 64 KiB that an op made in a graph is read-only instead (``Tensor(t)`` and
    ``t.detach()`` give a writable copy).

    Example:
        >>> x = Tensor([1.0, 2.0], requires_grad=True)
        >>> (x * x).sum().backward()
        >>> x.grad
        array([2., 4.], dtype=float32)
    """

    __slots__ = ("data", "_grad", "requires_grad", "op", "name", "node", "host_values", "__weakref__")
    data: Any                   # the array: NumPy's, or CuPy's on "cuda"
    _grad: Any
    requires_grad: bool
    op: str | None              # the op that made it; None for a tensor you created
    name: str | None            # what steps, drawings and messages call it (a parameter's dotted name)
    node: engine.Node | None    # its place in the graph, when it needs a gradient
    host_values: Any            # integers moved from the host: their distinct values (range checks)
    __array_ufunc__ = None  # numpy defers to our reflected operators: ndarray * Tensor -> Tensor

    def __init__(self, data: Any, requires_grad: bool = False, dtype: Any = None,
                 device: str = "cpu"):
        xp = xp_for(device)
        if isinstance(data, Tensor):
            data = data.data
        # Integers moved from the host to a device (ids, targets) keep their distinct values, read
        # on the host, so that a range check needs nothing read back from the device.
        self.host_values = None
        if device_of(data) != device:
            if device != "cpu" and getattr(data, "dtype", np.dtype("O")).kind in "iu":
                self.host_values = np.unique(data)
            data = to_device(data, device) if hasattr(data, "dtype") else data
        is_python = not hasattr(data, "dtype")
        array = _checked_array(xp, data, dtype)
        if dtype is None and is_python and array.dtype.kind == "f":
            array = array.astype(get_default_dtype())
        if requires_grad and not is_float(array.dtype):
            raise TypeError(f"Tensor: only float tensors can require grad, got dtype {array.dtype}")
        self.data, self.grad, self.requires_grad = array, None, requires_grad
        self.op, self.name, self.node = None, None, None

    @staticmethod
    def _from_op(data: Any, op: str | None, node: engine.Node | None) -> Tensor:
        """A tensor around an op's result array, without the constructor's copy and checks: a
        plain Tensor, also for an op on a Parameter (as PyTorch gives)."""
        t = Tensor.__new__(Tensor)
        t.data, t._grad, t.requires_grad = data, None, node is not None
        t.op, t.name, t.node, t.host_values = op, None, node, None
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
        # The engine's path first: an array of the data's own type (so on its device) and shape
        # skips device_of and the messages (what it saves: check_costs --tricks).
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

    def numpy(self, *, force: bool = False) -> np.ndarray:
        """A NumPy copy of the data (also for a tensor on the GPU). `force` is PyTorch's (copy it
        off the device and out of the graph): here that is what always happens."""
        return to_numpy(self.data)

    def item(self) -> Any:
        """The single element as a Python number."""
        if self.data.size != 1:
            raise ValueError(f"item: tensor of shape {self.shape} has {self.data.size} elements")
        return self.data.item()

    def detach(self) -> Tensor:
        """A leaf outside any graph, not requiring grad, sharing this data; a copy of it where the
        data is read-only (a large output of an op in a graph is: ``guards/inplace.py``), so that
        the leaf can be changed in place (``detach()``, ``requires_grad = True``, an optimizer)
        without touching what backward reads."""
        data = self.data
        if type(data) is np.ndarray and not data.flags.writeable:
            data = data.copy()
        return Tensor._from_op(data, None, None)

    def to(self, device: str) -> Tensor:
        """A copy on `device`: a leaf that requires grad if this tensor does."""
        if device == self.device:
            return self
        return Tensor(self.data, requires_grad=self.requires_grad, device=device)

    def zero_grad(self) -> None:
        """Forget the accumulated gradient."""
        self.grad = None

    def _wrap(self, value: Any, dtype: Any = None) -> Tensor:
        """`value` (an index, a mask, an array) as a plain tensor on this device, not requiring grad
        (a Parameter's ``type(self)(…)`` would)."""
        return Tensor(value, dtype=dtype, device=self.device)

    # ----- arithmetic -----
    def _lift(self, other: Any) -> Tensor:
        """`other` as a tensor on this device; a scalar (Python or NumPy number, 0-d array)
        takes a float tensor's dtype, a float scalar beside an integer tensor the default float."""
        if isinstance(other, Tensor):
            return other
        if getattr(other, "ndim", 0) != 0 or isinstance(other, (list, tuple)):
            return self._wrap(other)
        kind = other.dtype.kind if hasattr(other, "dtype") else np.asarray(other).dtype.kind
        dtype = None                    # complex, strings: refused by the constructor
        if kind == "f" and not is_float(self.dtype):
            dtype = get_default_dtype()
        elif kind in "biuf" and self.dtype.kind != "b":
            dtype = self.dtype
        return self._wrap(other, dtype)


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


def where(cond: Any, a: Any, b: Any) -> Tensor:
    """Elements of `a` where `cond` is True, of `b` elsewhere; cond is never differentiated."""
    like = next((t for t in (a, b) if isinstance(t, Tensor)), None)
    a = a if isinstance(a, Tensor) else (like._lift(a) if like is not None else Tensor(a))
    b = b if isinstance(b, Tensor) else a._lift(b)
    cond = as_mask(cond, a)
    broadcast_shape("where", cond.shape, a.shape, b.shape)
    return apply(Where, cond, *promoted(a, b))


@numpy_spellings
def concat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """The tensors joined along an existing axis."""
    tensors = list(tensors)
    if not tensors:
        raise ValueError("concat: needs at least one tensor")
    axis = normalize_axis("concat", dim, tensors[0].ndim)
    check_concat([t.shape for t in tensors], axis)
    return apply(Concat, *promoted(*tensors), axis=axis)


@numpy_spellings
def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """The tensors (of one shape) joined along a new axis."""
    tensors = list(tensors)
    if not tensors:
        raise ValueError("stack: needs at least one tensor")
    check_stack([t.shape for t in tensors])
    axis = normalize_axis("stack", dim, tensors[0].ndim + 1)
    return apply(Stack, *promoted(*tensors), axis=axis)
