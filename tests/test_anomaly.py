"""detect_anomaly: the first op whose output or gradient holds NaN or Inf raises, naming the op,
its module and inputs, what went bad, and the user's line that created it."""

import inspect
import re
import warnings

import numpy as np
import pytest

import tinygrad_attn as ta
from tinygrad_attn import nn


def this_line() -> int:
    return inspect.currentframe().f_back.f_lineno


def test_planted_log_of_zero_in_forward():
    x = ta.Tensor([1.0, 0.0], requires_grad=True)
    with ta.detect_anomaly(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ta.AnomalyError) as info:
            line = this_line() + 1
            (x * 2.0).log()
    message = str(info.value)
    assert message.startswith("log: forward output (2,) holds NaN or Inf")
    assert f"test_anomaly.py:{line}" in message


def test_planted_nan_in_backward_names_op_input_and_line():
    x = ta.Tensor([4.0, 0.0], requires_grad=True)
    with ta.detect_anomaly(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        line = this_line() + 1
        y = x.sqrt()                      # forward is finite: sqrt(0) = 0
        with pytest.raises(ta.AnomalyError) as info:
            (y * 3.0).sum().backward()    # d√x/dx = 1/(2√x) = inf at 0
    message = str(info.value)
    assert re.match(r"sqrt: backward gradient for input 0 \(2,\) holds NaN or Inf", message)
    assert f"test_anomaly.py:{line}" in message
    assert x.grad is None                 # nothing was written to the leaf


def test_anomaly_names_the_module_and_parameter():
    layer = nn.Linear(2, 2)
    layer.weight.data[0, 0] = np.nan
    with ta.detect_anomaly(), pytest.raises(ta.AnomalyError) as info:
        line = this_line() + 1
        layer(ta.ones(1, 2))
    message = str(info.value)
    assert "matmul: forward output (1, 2)" in message and "in module Linear" in message
    assert "inputs weight" in message and f"test_anomaly.py:{line}" in message


def test_off_by_default_and_restored():
    x = ta.Tensor([0.0], requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert np.isneginf(x.log().data[0])       # no error when off
        with pytest.raises(ta.AnomalyError), ta.detect_anomaly():
            x.log()
        assert np.isneginf(x.log().data[0])       # off again after the block
