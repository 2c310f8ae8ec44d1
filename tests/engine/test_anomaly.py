"""detect_anomaly: the first op whose output or gradient holds NaN or Inf raises at once, naming
the op, its module and parameters, which input or output went bad, and the user's line."""

import inspect
import re
import warnings

import numpy as np
import pytest

import tinygrad_attn as ta
from tinygrad_attn import nn
from tinygrad_attn.apply import apply
from tinygrad_attn.ops.base import Op


def this_line() -> int:
    return inspect.currentframe().f_back.f_lineno


@pytest.fixture(autouse=True)
def quiet_numpy():
    """log(0) and 1/0 warn in NumPy; the point here is the error, not the warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


class NanBackward(Op):
    """y = 2x whose planted backward sends NaN (not registered: a test-only op)."""

    name = "nan_backward"
    formula = {"x": "dx = NaN"}

    @staticmethod
    def forward(ctx, x):
        return 2 * x

    @staticmethod
    def backward(ctx, grad):
        return (grad * ctx.xp.nan,)


class Planted(nn.Module):
    def forward(self, x):
        return apply(NanBackward, x)


class Outer(nn.Module):
    def __init__(self):
        self.inner = Planted()

    def forward(self, x):
        return self.inner(x * 3.0).sum()


def test_planted_log_of_zero_in_forward():
    x = ta.Tensor([1.0, 0.0], requires_grad=True)
    with ta.detect_anomaly(), pytest.raises(ta.AnomalyError) as info:
        line = this_line() + 1
        (x * 2.0).log()
    message = str(info.value)
    assert message.startswith("log: forward output (2,) holds NaN or Inf; its inputs were finite")
    assert message.endswith(f"test_anomaly.py:{line})")


def test_planted_nan_in_backward_by_sqrt_names_op_input_and_line():
    x = ta.Tensor([4.0, 0.0], requires_grad=True)
    x.name = "x"
    with ta.detect_anomaly():
        line = this_line() + 1
        y = x.sqrt()                      # forward is finite: sqrt(0) = 0
        loss = (y * 3.0).sum()
        with pytest.raises(ta.AnomalyError) as info:
            loss.backward()               # d√x/dx = 1/(2√x) = inf at 0
    message = str(info.value)
    assert message.startswith("sqrt: backward gradient (2,) for input 0 (x) holds NaN or Inf")
    assert f"test_anomaly.py:{line})" in message
    assert x.grad is None                 # raised before anything reached the leaf


def test_planted_nan_in_backward_of_a_custom_op_names_module_and_producer():
    x = ta.Tensor([1.0, 2.0], requires_grad=True)
    model = Outer()
    with ta.detect_anomaly():
        loss = model(x)
        with pytest.raises(ta.AnomalyError) as info:
            loss.backward()
    message = str(info.value)
    assert message.startswith("nan_backward: backward gradient (2,) for input 0 (output of mul)")
    # the innermost user line: the module's forward that applied the op
    line = inspect.getsourcelines(Planted.forward)[1] + 1
    assert "in module inner (Planted)" in message and f"test_anomaly.py:{line})" in message


def test_steps_stop_at_the_same_anomaly():
    x = ta.Tensor([4.0, 0.0], requires_grad=True)
    with ta.detect_anomaly():
        steps = ta.backprop_steps((x.sqrt() * 3.0).sum())
        assert [next(steps).op, next(steps).op] == ["sum", "mul"]
        with pytest.raises(ta.AnomalyError, match="^sqrt: backward gradient"):
            next(steps)


def test_a_nan_parameter_is_named_by_its_dotted_path_and_module():
    ta.manual_seed(0)
    net = nn.TinyTransformer(vocab_size=6, d_model=8, num_heads=2, num_layers=2, max_len=8)
    ids = np.array([[1, 2, 3]])
    net(ids)                              # the first root call names the parameters
    net.blocks[1].attn.q_proj.weight.data[0, 0] = np.nan
    with ta.detect_anomaly(), pytest.raises(ta.AnomalyError) as info:
        line = this_line() + 1
        net(ids)
    message = str(info.value)
    assert re.match(r"linear: forward output \(1, 3, 8\) holds NaN or Inf; inputs already "
                    r"holding NaN or Inf: input 1 \(blocks\.1\.attn\.q_proj\.weight\)", message)
    assert "in module blocks.1.attn.q_proj (Linear)" in message
    assert f"test_anomaly.py:{line})" in message


def test_off_by_default_and_restored_after_an_error():
    x = ta.Tensor([0.0], requires_grad=True)
    assert np.isneginf(x.log().data[0])               # no error when off
    with pytest.raises(ta.AnomalyError), ta.detect_anomaly():
        x.log()
    assert np.isneginf(x.log().data[0])               # off again after the block
    assert x.log().node.site is None                 # and no call-site capture when off


def test_finite_graphs_pass_and_record_the_creating_line():
    x = ta.Tensor([1.0, 2.0], requires_grad=True)
    with ta.detect_anomaly():
        line = this_line() + 1
        y = (x * x).sum()
        y.backward()
    assert y.node.site[0].endswith("test_anomaly.py") and y.node.site[1] == line
    np.testing.assert_array_equal(x.grad, [2.0, 4.0])
