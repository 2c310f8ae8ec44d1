"""The device path without a GPU: a stand-in CuPy module counts how often the GPU is probed."""

import sys
import types

import numpy as np
import pytest

import tinygrad_attn as ta
from tinygrad_attn import backend


class StandInArray(np.ndarray):
    """A NumPy array whose type says it comes from CuPy, so the engine takes it for "cuda"."""

    __module__ = "cupy._stand_in"

    def get(self) -> np.ndarray:
        return np.array(self)


def on_stand_in(make):
    """NumPy's constructor `make`, giving a StandInArray."""
    return lambda *args, **kwargs: make(*args, **kwargs).view(StandInArray)


def stand_in_cupy(probes: list[int]) -> types.ModuleType:
    """A module that answers for CuPy: NumPy's functions, arrays made as StandInArray, and a
    ``cuda.runtime.getDeviceCount`` that records each call in `probes`."""
    module = types.ModuleType("cupy")
    for name in ("array", "asarray", "ones", "zeros"):
        setattr(module, name, on_stand_in(getattr(np, name)))
    module.__getattr__ = lambda name: getattr(np, name)

    def device_count() -> int:
        probes.append(1)
        return 1

    module.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(getDeviceCount=device_count))
    return module


@pytest.fixture
def probes(monkeypatch):
    """The GPU probes made while the stand-in CuPy is installed (the caches start empty and are
    emptied again afterwards, so no other test sees the stand-in)."""
    calls: list[int] = []
    monkeypatch.setitem(sys.modules, "cupy", stand_in_cupy(calls))
    backend._cupy.cache_clear()
    backend._module_of_type.cache_clear()
    yield calls
    backend._cupy.cache_clear()
    backend._module_of_type.cache_clear()


def test_ops_on_cuda_probe_the_gpu_once(probes):
    a = ta.Tensor([1.0, 2.0], device="cuda", requires_grad=True)
    b = ta.Tensor([3.0, 4.0], device="cuda")
    assert a.device == b.device == "cuda" and probes == [1]
    y = a
    for _ in range(5):
        y = y * b                     # y = a b^5
    y.backward(np.ones(2))
    assert probes == [1]              # one probe for the first tensor, none per op or in backward
    assert type(y.data) is StandInArray and type(a.grad) is StandInArray
    np.testing.assert_array_equal(a.grad.get(), [3.0 ** 5, 4.0 ** 5])   # dy/da = b^5


def test_a_failed_probe_is_not_kept(probes):
    runtime = sys.modules["cupy"].cuda.runtime
    working = runtime.getDeviceCount

    def no_gpu() -> int:
        raise RuntimeError("cudaErrorNoDevice")

    runtime.getDeviceCount = no_gpu
    for _ in range(2):
        with pytest.raises(ta.DeviceError, match="device 'cuda' has no usable GPU: cudaErrorNoDevice"):
            ta.Tensor([1.0], device="cuda")
    runtime.getDeviceCount = working     # the GPU is back: the next call probes again and succeeds
    assert ta.Tensor([1.0], device="cuda").device == "cuda" and probes == [1]
