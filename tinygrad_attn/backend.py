"""Maps a device string to an array module: "cpu" is NumPy, "cuda" is CuPy (imported lazily).

CuPy is imported and its GPU probed once, on first use; an array's module is looked up once per
array type. So an op on the GPU pays no import or driver call, only a dictionary lookup.
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import Any

import numpy as np

from .errors import DeviceError

__all__ = ["DEVICES", "array_module", "cuda_available", "device_of", "ones", "to_device", "to_numpy",
           "xp_for"]


DEVICES = ("cpu", "cuda")


def xp_for(device: str) -> ModuleType:
    """The array module for `device`; raises DeviceError if "cuda" is asked for and unusable."""
    if device == "cpu":
        return np
    if device == "cuda":
        return _cupy()
    raise DeviceError(f"unknown device {device!r}: expected one of {DEVICES}")


# Which CuPy wheel fits which CUDA: the version `nvidia-smi` prints is the newest the driver runs.
_INSTALL_CUDA = ("pip install 'tinygrad_attn[cuda12]' for CUDA 12 or 'tinygrad_attn[cuda13]' for CUDA 13 "
                "(the CUDA version nvidia-smi prints)")


@functools.cache
def _cupy() -> ModuleType:
    """CuPy, once it has imported and seen a GPU (kept after the first success; a failure is
    not kept, so each later call raises again). Every failure is a DeviceError of one line:
    CuPy missing, CuPy installed but not loading (a wheel for another CUDA, no driver), or no GPU."""
    try:
        import cupy
    except ImportError as e:
        if isinstance(e, ModuleNotFoundError) and e.name == "cupy":
            raise DeviceError(f"device 'cuda' needs CuPy, which is not installed: {_INSTALL_CUDA}") from None
        raise DeviceError(f"device 'cuda': CuPy is installed but does not load ({_one_line(e)}); its wheel "
                          f"must match the CUDA the driver runs: {_INSTALL_CUDA}") from e
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # CuPy raises its own runtime error when no driver or GPU is present
        raise DeviceError(f"device 'cuda' has no usable GPU: {_one_line(e)}") from e
    if count < 1:
        raise DeviceError("device 'cuda' has no usable GPU: CuPy sees none")
    return cupy


def _one_line(error: BaseException) -> str:
    """The message of the error at the root of `error`'s chain (CuPy wraps the loader's own in a
    framed page of advice), on one line."""
    while error.__cause__ is not None:
        error = error.__cause__
    return " ".join(str(error).split()) or type(error).__name__


def device_of(array: Any) -> str:
    """"cuda" for a CuPy array, "cpu" for anything else."""
    return "cuda" if _is_cupy_type(type(array)) else "cpu"


def array_module(array: Any) -> ModuleType:
    """NumPy or CuPy, whichever owns `array` (a NumPy array, every op's common case, is answered
    by one type test; other types are looked up once)."""
    # (mypy takes a class for unhashable here: it reads type's __hash__ as an unbound method)
    return np if type(array) is np.ndarray else _module_of_type(type(array))  # type: ignore[arg-type]


@functools.cache
def _module_of_type(kind: type) -> ModuleType:
    return _cupy() if _is_cupy_type(kind) else np


def _is_cupy_type(kind: type) -> bool:
    return kind.__module__.startswith("cupy")


def to_numpy(array: Any) -> np.ndarray:
    """A NumPy copy of a NumPy or CuPy array."""
    if device_of(array) == "cuda":
        return array.get()
    return np.array(array, copy=True)


def to_device(array: Any, device: str) -> Any:
    """`array` moved to `device` (no copy if it is already there); DeviceError for an unknown device."""
    if device not in DEVICES:
        raise DeviceError(f"unknown device {device!r}: expected one of {DEVICES}")
    if device_of(array) == device:
        return array
    return xp_for(device).asarray(array) if device == "cuda" else array.get()


def cuda_available() -> bool:
    """True when CuPy imports and sees at least one GPU."""
    try:
        return _cupy().cuda.runtime.getDeviceCount() > 0
    except DeviceError:
        return False


def ones(xp: ModuleType, shape: Any, dtype: Any) -> Any:
    """An array of ones made as empty + fill, cheaper than NumPy's ones (a Python function that
    calls copyto), for the per-step ones (backward's seed, the sums as products)."""
    array = xp.empty(shape, dtype=dtype)
    array.fill(1)
    return array
