"""A test-only stand-in for CuPy that runs on NumPy but refuses what CuPy refuses (and more).

CI has no GPU, so the "cuda" device is checked against this backend. Its ``StrictArray`` wraps a
NumPy array and behaves like ``cupy.ndarray`` where it matters:

- ``np.asarray(a)`` / any implicit host conversion raises TypeError, as CuPy's ``__array__`` does;
- NumPy functions and ufuncs given a StrictArray raise TypeError. CuPy would dispatch many of
  them to itself (``__array_ufunc__``, ``__array_function__``); refusing them is stricter on
  purpose, because library code must use ``ctx.xp`` / ``xp_for(device)``, never ``numpy``.
  The one exception is an operator with a NumPy scalar on its left (``np.float32(2) * a``),
  which Python routes through ``np.multiply`` and which CuPy accepts;
- an operator or xp function given a NumPy array raises TypeError, as CuPy's do;
- full reductions and integer indexing give 0-d arrays, never NumPy scalars;
- integer-array indices out of range wrap around instead of raising (CuPy's behaviour);
- ``flags`` has only c_contiguous, f_contiguous and owndata (no ``writeable``).

Deliberately allowed, as in CuPy (each synchronises with the device there): ``.get()``,
``.item()``, ``.tolist()``, ``float()``, ``int()``, ``bool()``, ``repr``/``format``. Every one of
them, and every host-to-device copy (``xp.asarray(numpy_array)``, a NumPy index array), is
recorded in ``TRANSFERS`` as (kind, number of elements), so a test can assert that a code path
copies no array to the host. Every scatter through a ufunc's ``.at`` (``xp.add.at``), which CuPy
runs with atomic adds whose order changes from run to run, is recorded in ``SCATTERS`` as (ufunc
name, number of elements), so a test can assert that a code path adds in a fixed order.

``module()`` is the stand-in ``cupy`` module; ``install()`` makes it the "cuda" device.
"""

from __future__ import annotations

import sys
import types
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

TRANSFERS: list[tuple[str, int]] = []     # ("to_host" | "to_device", elements)
SCATTERS: list[tuple[str, int]] = []      # (ufunc name, elements) of each ufunc.at

_HOST_OK = ("asarray", "array", "ascontiguousarray")


class _Flags:
    """CuPy's flags: no ``writeable``."""

    def __init__(self, a: np.ndarray):
        self.c_contiguous = a.flags.c_contiguous
        self.f_contiguous = a.flags.f_contiguous
        self.owndata = a.flags.owndata


def _refuse_host(where: str, x: np.ndarray) -> TypeError:
    return TypeError(f"strict cuda: {where} got a NumPy array of shape {x.shape}; CuPy refuses host "
                     "arrays here (Unsupported type <class 'numpy.ndarray'>): move it with xp.asarray")


def _unwrap(x: Any, where: str, host_ok: bool = False) -> Any:
    if isinstance(x, StrictArray):
        return x._a
    if isinstance(x, np.ndarray):
        if not host_ok:
            raise _refuse_host(where, x)
        TRANSFERS.append(("to_device", x.size))
        return x
    if isinstance(x, (list, tuple)):
        return type(x)(_unwrap(i, where, host_ok) for i in x)
    return x


_OWNERS: weakref.WeakValueDictionary[int, StrictArray] = weakref.WeakValueDictionary()


def _wrap(x: Any) -> Any:
    if isinstance(x, np.ndarray):
        return StrictArray(x)
    if isinstance(x, np.generic):
        return StrictArray(np.asarray(x))
    if isinstance(x, tuple):
        return tuple(_wrap(i) for i in x)
    if isinstance(x, list):
        return [_wrap(i) for i in x]
    if isinstance(x, (np.random.Generator, np.random.RandomState)):
        return _Namespace(x, type(x).__name__)
    return x


def _index(a: np.ndarray, index: Any) -> Any:
    """`index` unwrapped for `a`, with integer arrays wrapped modulo their axis (as CuPy does)."""
    items = list(index) if isinstance(index, tuple) else [index]
    items = [_unwrap(i, "indexing", host_ok=True) if isinstance(i, (StrictArray, np.ndarray, list))
             else i for i in items]
    items = [np.asarray(i) if isinstance(i, list) else i for i in items]
    consumed = sum(i.ndim if isinstance(i, np.ndarray) and i.dtype == bool else 0 if i is None or
                   i is Ellipsis else 1 for i in items)
    axis, out = 0, []
    for i in items:
        if i is Ellipsis:
            axis += a.ndim - consumed
        elif isinstance(i, np.ndarray) and i.dtype.kind in "iu" and axis < a.ndim and a.shape[axis]:
            i = i % a.shape[axis]
        if i is not None and i is not Ellipsis:
            axis += i.ndim if isinstance(i, np.ndarray) and i.dtype == bool else 1
        out.append(i)
    return tuple(out)


def _binary(name: str, reflected: bool = False):
    def op(self, other):
        if isinstance(other, np.ndarray):
            raise _refuse_host(f"operator {name}", other)
        if not isinstance(other, (StrictArray, int, float, bool, complex, np.generic)):
            return NotImplemented
        other = other._a if isinstance(other, StrictArray) else other
        fn = getattr(np.ndarray, name)
        result = fn(self._a, other)
        return result if result is NotImplemented else _wrap(result)
    op.__name__ = name
    return op


def _inplace(name: str):
    def op(self, other):
        if isinstance(other, np.ndarray):
            raise _refuse_host(f"operator {name}", other)
        getattr(self._a, name)(other._a if isinstance(other, StrictArray) else other)
        return self
    op.__name__ = name
    return op


class StrictArray:
    """A device array: a NumPy array inside, refusing implicit host conversion."""

    __module__ = "cupy.strict"   # backend.device_of tells devices by the array type's module
    __slots__ = ("_a", "_base", "__weakref__")
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, a: np.ndarray):
        self._a, self._base = a, None
        if a.base is None:
            _OWNERS[id(a)] = self           # a view's .base finds this object, as CuPy's does

    # ----- what CuPy refuses -----
    def __array__(self, *args: Any, **kwargs: Any):
        raise TypeError("Implicit conversion to a NumPy array is not allowed. "
                        "Please use `.get()` to construct a NumPy array explicitly.")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        scalar_operator = method == "__call__" and not kwargs and len(inputs) == 2 and \
            isinstance(inputs[0], np.generic) and inputs[1] is self
        if not scalar_operator:
            raise TypeError(f"strict cuda: numpy.{ufunc.__name__} called on a device array; "
                            "use the device's array module (ctx.xp / xp_for(device))")
        return _wrap(ufunc(inputs[0], self._a))

    def __array_function__(self, func, types, args, kwargs):
        raise TypeError(f"strict cuda: numpy.{func.__name__} called on a device array; "
                        "use the device's array module (ctx.xp / xp_for(device))")

    # ----- explicit (synchronising) reads, recorded -----
    def get(self) -> np.ndarray:
        TRANSFERS.append(("to_host", self._a.size))
        return self._a.copy()

    def item(self) -> Any:
        TRANSFERS.append(("to_host", 1))
        return self._a.item()

    def tolist(self) -> Any:
        TRANSFERS.append(("to_host", self._a.size))
        return self._a.tolist()

    def _scalar(self, kind):
        if self._a.size != 1:
            raise TypeError(f"only size-1 arrays can be converted to Python scalars (shape {self.shape})")
        TRANSFERS.append(("to_host", 1))
        return kind(self._a.reshape(()))

    def __float__(self): return self._scalar(float)
    def __int__(self): return self._scalar(int)

    def __bool__(self):
        if self._a.size != 1:
            raise ValueError("The truth value of an array with more than one element is ambiguous.")
        return self._scalar(bool)

    def __repr__(self) -> str:
        return "strict_" + repr(self.get())

    def __format__(self, spec: str) -> str:
        return format(self.get(), spec)

    # ----- attributes -----
    shape = property(lambda self: self._a.shape)
    ndim = property(lambda self: self._a.ndim)
    dtype = property(lambda self: self._a.dtype)
    size = property(lambda self: self._a.size)
    nbytes = property(lambda self: self._a.nbytes)
    itemsize = property(lambda self: self._a.itemsize)
    strides = property(lambda self: self._a.strides)
    T = property(lambda self: StrictArray(self._a.T))
    flags = property(lambda self: _Flags(self._a))

    @property
    def base(self) -> StrictArray | None:
        """The array that owns this view's memory: one object, the same on every read (CuPy's
        views hold their base), the very array the memory was made as while that one lives."""
        if self._a.base is None:
            return None
        if self._base is None:
            owner = _OWNERS.get(id(self._a.base))
            alive = owner is not None and owner._a is self._a.base
            self._base = owner if alive else StrictArray(self._a.base)
        return self._base

    def __len__(self) -> int:
        return len(self._a)

    def __iter__(self) -> Iterator[StrictArray]:
        return (StrictArray(self._a[i]) for i in range(len(self._a)))

    def __getitem__(self, index):
        return _wrap(self._a[_index(self._a, index)])

    def __setitem__(self, index, value):
        if isinstance(value, np.ndarray):
            raise _refuse_host("__setitem__", value)
        self._a[_index(self._a, index)] = value._a if isinstance(value, StrictArray) else value

    def __getattr__(self, name: str):
        if name == "_a":
            raise AttributeError(name)
        method = getattr(self._a, name)          # sum, max, reshape, astype, view, ...
        if not callable(method):
            raise AttributeError(name)

        def call(*args, **kwargs):
            return _wrap(method(*_unwrap(args, f".{name}()"),
                                **{k: _unwrap(v, f".{name}()") for k, v in kwargs.items()}))
        return call

    def __neg__(self): return StrictArray(-self._a)
    def __pos__(self): return StrictArray(+self._a)
    def __abs__(self): return StrictArray(abs(self._a))
    def __invert__(self): return StrictArray(~self._a)


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor",
              "lt", "le", "gt", "ge", "eq", "ne"):
    setattr(StrictArray, f"__{_name}__", _binary(f"__{_name}__"))
    if _name not in ("lt", "le", "gt", "ge", "eq", "ne"):
        setattr(StrictArray, f"__r{_name}__", _binary(f"__r{_name}__"))
        setattr(StrictArray, f"__i{_name}__", _inplace(f"__i{_name}__"))


class _Ufunc:
    """A NumPy ufunc on device arrays: call and ``.at`` (scatter, in place)."""

    def __init__(self, ufunc: np.ufunc):
        self._u, self.__name__ = ufunc, ufunc.__name__

    def __call__(self, *args, **kwargs):
        return _wrap(self._u(*_unwrap(args, self.__name__),
                             **{k: _unwrap(v, self.__name__) for k, v in kwargs.items()}))

    def at(self, a: StrictArray, indices: Any, b: Any = None) -> None:
        if not isinstance(a, StrictArray):
            raise TypeError(f"strict cuda: {self.__name__}.at needs a device array, got {type(a).__name__}")
        SCATTERS.append((self.__name__, a.size))
        self._u.at(a._a, _index(a._a, indices), _unwrap(b, f"{self.__name__}.at"))


class _Namespace:
    """Functions of a NumPy namespace (or a random generator) taking and giving device arrays."""

    def __init__(self, inner: Any, name: str):
        self._inner, self._name = inner, name

    def __getattr__(self, name: str):
        value = getattr(self._inner, name)
        if isinstance(value, np.ufunc):
            return _Ufunc(value)
        if isinstance(value, type) or not callable(value):
            return value                          # dtypes, classes, constants: as CuPy shares them
        host_ok = name in _HOST_OK

        def call(*args, **kwargs):
            return _wrap(value(*_unwrap(args, f"{self._name}.{name}", host_ok),
                               **{k: _unwrap(v, f"{self._name}.{name}", host_ok) for k, v in kwargs.items()}))
        call.__name__ = name
        return call


class _Device:
    MEMORY = 16 * 2**30      # the stand-in GPU's total memory, in bytes (mem_info's second number)

    def __init__(self, index: int = 0):
        self.id = index

    def synchronize(self) -> None:
        pass

    @property
    def mem_info(self) -> tuple[int, int]:
        """(free, total) bytes, as CuPy's: half of the stand-in's memory free."""
        return self.MEMORY // 2, self.MEMORY


def module() -> types.ModuleType:
    """The stand-in ``cupy`` module: NumPy's functions on StrictArrays, plus ``random``,
    ``cuda.runtime.getDeviceCount()`` (1), ``cuda.Device().mem_info`` (16 GiB), ``ndarray``,
    ``asnumpy`` and ``get_array_module``."""
    strict = types.ModuleType("cupy", "strict CuPy stand-in (tests/strict_backend.py)")
    functions = _Namespace(np, "cupy")
    strict.__getattr__ = functions.__getattr__
    strict.ndarray = StrictArray
    strict.random = _Namespace(np.random, "cupy.random")
    strict.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(getDeviceCount=lambda: 1),
                                        Device=_Device)
    strict.asnumpy = lambda a: a.get() if isinstance(a, StrictArray) else np.asarray(a)
    strict.get_array_module = lambda *arrays: strict if any(isinstance(a, StrictArray)
                                                            for a in arrays) else np
    return strict


def _clear_backend_caches(backend: types.ModuleType) -> None:
    """Forget any cached CuPy probe (functools.cache on backend's functions)."""
    for value in vars(backend).values():
        if callable(getattr(value, "cache_clear", None)):
            value.cache_clear()


@contextmanager
def install() -> Iterator[types.ModuleType]:
    """Within the block, "cuda" is the strict backend: ``import cupy`` finds it, and the
    backend's CuPy loader returns it; caches of the probe are cleared on entry and exit."""
    from tinygrad_attn import backend

    strict = module()
    saved_module = sys.modules.get("cupy")
    saved_loader = getattr(backend, "_cupy", None)
    sys.modules["cupy"] = strict
    if saved_loader is not None:
        backend._cupy = lambda: strict
    _clear_backend_caches(backend)
    TRANSFERS.clear()
    SCATTERS.clear()
    try:
        yield strict
    finally:
        if saved_module is None:
            sys.modules.pop("cupy", None)
        else:
            sys.modules["cupy"] = saved_module
        if saved_loader is not None:
            backend._cupy = saved_loader
        _clear_backend_caches(backend)
