"""Every kernel gives its op's textbook numbers: on every case of the op, in float64 and float32, on
each device it serves ("cuda" on the strict CuPy stand-in where no GPU is), its output and every
gradient equal the textbook op's to the tolerance the kernel states (``ulps``); and the switch
``ta.textbook()`` picks the forms it says."""

import contextlib
import os
import subprocess
import sys

import numpy as np
import pytest

import tinygrad_attn as ta
from tinygrad_attn.apply import apply
from tinygrad_attn.backend import to_numpy
from tinygrad_attn.gradcheck import case_inputs
from tinygrad_attn.kernels import KERNELS
from tinygrad_attn.kernels.registry import choose, kernel, textbook_ops
from tinygrad_attn.ops import REGISTRY
from tinygrad_attn.ops.base import Op

KERNEL_CASES = [(op.name, device, i) for op, by_device in KERNELS.items() for device in by_device
                for i in range(len(op.cases))]


def forward_and_backward(op: type[Op], case, device: str, dtype, seed: int, textbook: bool) -> list:
    """The op's output and the gradient of each differentiated input, for a random cotangent."""
    rng = np.random.default_rng(seed)
    inputs = case_inputs(case, rng, device)
    inputs = [t if t is None or not t.requires_grad else ta.Tensor(t.numpy().astype(dtype),
                                                                  requires_grad=True, device=device)
              for t in inputs]
    with ta.textbook(op.name) if textbook else contextlib.nullcontext():
        out = apply(op, *inputs, **case.params)
        assert (out.node.op is op) == textbook
        cotangent = rng.standard_normal(out.shape).astype(dtype)
        out.backward(cotangent)
    return [out.numpy()] + [to_numpy(t.grad) for t in inputs if t is not None and t.requires_grad]


@pytest.mark.parametrize("name,device,index", KERNEL_CASES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_kernel_equals_its_textbook_op(name, device, index, dtype, request):
    if device == "cuda" and not ta.cuda_available():
        request.getfixturevalue("strict_cuda")
    op = REGISTRY[name]
    fast = KERNELS[op][device]
    case = op.cases[index]
    expected = forward_and_backward(op, case, device, dtype, index, textbook=True)
    got = forward_and_backward(op, case, device, dtype, index, textbook=False)
    eps = np.finfo(dtype).eps
    for what, e, g in zip(["output", *(f"gradient {i}" for i in range(len(got) - 1))], expected, got):
        assert e.shape == g.shape and e.dtype == g.dtype, what
        finite = np.isfinite(e)
        np.testing.assert_array_equal(np.isfinite(g), finite, err_msg=f"{fast.__name__}: {what}")
        np.testing.assert_array_equal(g[~finite], e[~finite], err_msg=f"{fast.__name__}: {what}")
        scale = np.abs(e[finite]).max(initial=1.0)
        np.testing.assert_allclose(g[finite], e[finite], rtol=0, atol=fast.ulps * eps * scale,
                                   err_msg=f"{fast.__name__}: {what} (ulps {fast.ulps})")


def test_every_kernel_subclasses_a_registered_op_and_states_its_tolerance():
    assert KERNELS, "no kernel registered"
    for op, by_device in KERNELS.items():
        assert REGISTRY[op.name] is op and op.textbook is op
        for fast in by_device.values():
            assert issubclass(fast, op) and fast.textbook is op and fast is not op
            assert fast.name == op.name and fast.formula == op.formula and fast.insides == op.insides
            assert fast.ulps >= 0 and fast.__doc__


@pytest.mark.parametrize("name", sorted(op.name for op in KERNELS))
def test_the_textbook_op_passes_gradcheck(name, rng):
    """Gradcheck (test_ops_gradcheck) runs what apply runs, the kernels; here the textbook op too."""
    op = REGISTRY[name]
    with ta.textbook(name):
        for case in op.cases:
            inputs = case_inputs(case, rng)
            assert ta.gradcheck(lambda *xs, params=case.params: apply(op, *xs, **params), inputs)


def test_textbook_switches_every_op_or_the_ones_named_and_restores():
    softmax, layer_norm = REGISTRY["softmax"], REGISTRY["layer_norm"]
    assert choose(softmax, np) is KERNELS[softmax]["cpu"]
    with ta.textbook("softmax"):
        assert choose(softmax, np) is softmax and choose(layer_norm, np) is KERNELS[layer_norm]["cpu"]
        assert textbook_ops() == frozenset({"softmax"})
        with ta.textbook():
            assert choose(layer_norm, np) is layer_norm and textbook_ops() is None
        assert choose(layer_norm, np) is KERNELS[layer_norm]["cpu"]
    assert choose(softmax, np) is KERNELS[softmax]["cpu"] and textbook_ops() == frozenset()
    with pytest.raises(ValueError, match="no op named 'sofmax'"):
        with ta.textbook("sofmax"):
            pass


def test_a_kernel_must_subclass_a_registered_op_and_serve_a_known_device():
    class NotAnOp(Op):
        name = "not_registered"

    with pytest.raises(ValueError, match="is not a registered op"):
        kernel("cpu")(type("Fast", (NotAnOp,), {}))
    with pytest.raises(ValueError, match="devices must be some of"):
        kernel("tpu")
    with pytest.raises(ValueError, match="has a cpu kernel already"):
        kernel("cpu")(type("Again", (REGISTRY["softmax"],), {}))


@pytest.mark.slow
def test_the_environment_variable_runs_a_process_in_textbook_form():
    code = ("import numpy as np; from tinygrad_attn.ops import REGISTRY; "
            "from tinygrad_attn.kernels.registry import choose; "
            "print(choose(REGISTRY['softmax'], np).__name__, choose(REGISTRY['layer_norm'], np).__name__)")
    runs = {value: subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                  env={**os.environ, "TINYGRAD_ATTN_TEXTBOOK": value}).stdout.split()
            for value in ("1", "softmax", "0")}
    assert runs == {"1": ["Softmax", "LayerNorm"], "softmax": ["Softmax", "FusedLayerNorm"],
                    "0": ["FastSoftmax", "FusedLayerNorm"]}
