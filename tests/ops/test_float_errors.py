"""The float-error state while ops run, on NumPy 2's private state variable and on the fallback
(``np.errstate``) that a NumPy without that name gets: the same behaviour from both."""

import importlib.util
import sys
import types
import warnings

import numpy as np
import pytest

import tinygrad_attn as ta
from tinygrad_attn import apply, engine, float_errors

PRIVATE = "numpy._core._ufunc_config"


def load_without_the_private_name(monkeypatch):
    """A fresh copy of float_errors.py, loaded while NumPy's private module lacks the name it reads."""
    monkeypatch.setitem(sys.modules, PRIVATE, types.ModuleType(PRIVATE))
    spec = importlib.util.spec_from_file_location("float_errors_fallback", float_errors.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.undo()
    return module


@pytest.fixture(params=["private state variable", "errstate fallback"])
def state(request, monkeypatch):
    """float_errors as the ops use it: the real module, or the fallback put where apply and the
    backward pass call it."""
    if request.param == "private state variable":
        assert float_errors._error_state is not None        # this NumPy has the name
        return float_errors
    fallback = load_without_the_private_name(monkeypatch)
    assert fallback._error_state is None
    for module in (apply, engine):
        monkeypatch.setattr(module, "silence_float_errors", fallback.silence_float_errors)
        monkeypatch.setattr(module, "restore_float_errors", fallback.restore_float_errors)
    return fallback


def test_a_token_quiets_over_divide_invalid_keeps_the_rest_and_restores(state):
    with np.errstate(under="raise", over="warn"):
        before = np.geterr()
        token = state.silence_float_errors()
        assert np.geterr() == {**before, "over": "ignore", "divide": "ignore", "invalid": "ignore"}
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert np.exp(np.float64(1000.0)) == np.inf
        state.restore_float_errors(token)
        assert np.geterr() == before
        with pytest.warns(RuntimeWarning, match="overflow"):
            np.exp(np.float64(1000.0))


def test_ops_and_backward_give_inf_quietly_and_keep_the_callers_underflow_setting(state):
    x = ta.Tensor([1000.0, 0.0], requires_grad=True)
    before = np.geterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = x.exp()
        (y * ta.Tensor([2.0, 3.0])).sum().backward()
    np.testing.assert_array_equal(y.data, [np.inf, 1.0])
    np.testing.assert_array_equal(x.grad, [np.inf, 3.0])
    assert np.geterr() == before
    with np.errstate(under="raise"), pytest.raises(FloatingPointError, match="underflow"):
        ta.Tensor([-1000.0]).exp()
    assert np.geterr() == before
