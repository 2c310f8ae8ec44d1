"""`device="cuda"` where it cannot work: CuPy missing, CuPy that does not load, no GPU. Each is a
DeviceError of one line that says which CuPy wheel fits which CUDA, and the commands print it as
their one error line, before they write or read anything."""

import importlib.abc
import importlib.util
import sys

import pytest

import tinygrad_attn as ta
from tinygrad_attn import backend
from tinygrad_attn.commands import cli, sample

NO_CUPY = "device 'cuda' needs CuPy, which is not installed: "
WHEELS = ("pip install 'tinygrad_attn[cuda12]' for CUDA 12 or 'tinygrad_attn[cuda13]' for CUDA 13 "
          "(the CUDA version nvidia-smi prints)")


class BrokenCuPy(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """An installed `cupy` whose import fails as CuPy's does when its wheel does not fit the
    machine: a framed page of advice raised from the loader's own error."""

    def find_spec(self, name, path, target=None):
        return importlib.util.spec_from_loader(name, self) if name == "cupy" else None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        try:
            raise ImportError("libcudart.so.13: cannot open shared object file: No such file or directory")
        except ImportError as e:
            raise ImportError("\n" + "=" * 64 + "\nFailed to import CuPy.\n\nOriginal error:\n  "
                              f"ImportError: {e}\n" + "=" * 64) from e


@pytest.fixture
def fresh_probe():
    """The backend's CuPy probe forgotten before and after the test."""
    backend._cupy.cache_clear()
    backend._module_of_type.cache_clear()
    yield
    backend._cupy.cache_clear()
    backend._module_of_type.cache_clear()


@pytest.fixture
def no_cupy(monkeypatch, fresh_probe):
    monkeypatch.setitem(sys.modules, "cupy", None)          # `import cupy` raises ModuleNotFoundError


@pytest.fixture
def broken_cupy(monkeypatch, fresh_probe):
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    monkeypatch.setattr(sys, "meta_path", [BrokenCuPy(), *sys.meta_path])


def test_without_cupy_a_cuda_tensor_says_which_wheel_to_install(no_cupy):
    with pytest.raises(ta.DeviceError) as caught:
        ta.Tensor([1.0], device="cuda")
    assert str(caught.value) == NO_CUPY + WHEELS
    assert caught.value.__cause__ is None and caught.value.__suppress_context__   # nothing to add
    assert not ta.cuda_available()


def test_cupy_that_does_not_load_is_named_with_the_loaders_own_error(broken_cupy):
    with pytest.raises(ta.DeviceError) as caught:
        ta.zeros(2, device="cuda")
    assert str(caught.value) == (
        "device 'cuda': CuPy is installed but does not load (libcudart.so.13: cannot open shared object "
        f"file: No such file or directory); its wheel must match the CUDA the driver runs: {WHEELS}")
    assert isinstance(caught.value.__cause__, ImportError)     # CuPy's own page stays in the traceback


def test_a_gpu_error_of_several_lines_is_told_on_one(monkeypatch, fresh_probe):
    def no_device() -> int:
        raise RuntimeError("cudaErrorNoDevice:\n  no CUDA-capable device is detected")

    cupy = type(sys)("cupy")
    cupy.cuda = type(sys)("cupy.cuda")
    cupy.cuda.runtime = type(sys)("cupy.cuda.runtime")
    cupy.cuda.runtime.getDeviceCount = no_device
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    with pytest.raises(ta.DeviceError) as caught:
        ta.Tensor([1.0], device="cuda")
    assert str(caught.value) == ("device 'cuda' has no usable GPU: cudaErrorNoDevice: no CUDA-capable "
                                 "device is detected")
    cupy.cuda.runtime.getDeviceCount = lambda: 0
    with pytest.raises(ta.DeviceError, match="^device 'cuda' has no usable GPU: CuPy sees none$"):
        ta.Tensor([1.0], device="cuda")


def test_train_on_cuda_without_cupy_is_one_error_line_and_writes_nothing(no_cupy, tmp_path, capsys):
    out = tmp_path / "reverse"
    assert cli.main(["train", "reverse", "--device", "cuda", "--steps", "2", "--out", str(out)]) == 2
    printed = capsys.readouterr()
    assert printed.err == f"error: {NO_CUPY}{WHEELS}\n"
    assert printed.out == "" and not out.exists()


def test_sample_on_cuda_without_cupy_is_refused_before_reading_the_model(no_cupy, tmp_path, capsys,
                                                                         monkeypatch):
    def unread(path):
        raise AssertionError(f"{path} was read although the device cannot be used")

    monkeypatch.setattr(sample, "load_pretrained", unread)
    (tmp_path / "config.json").write_text("{}")
    for argv in (["sample", "--model", str(tmp_path), "hello", "--device", "cuda"],
                 ["sample", str(tmp_path), "hello", "--device", "cuda"],
                 ["sample", str(tmp_path / "a run"), "1 2", "--device", "cuda"]):
        assert cli.main(argv) == 2
        assert capsys.readouterr().err == f"error: {NO_CUPY}{WHEELS}\n"

