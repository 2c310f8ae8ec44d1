"""gradcheck nudges the right element whatever the input's memory layout: transposed, Fortran
order, axes permuted, sliced with a step, reversed, broadcast, 0-d; a correct backward passes,
a wrong one fails with the true numeric gradient in its report, and the caller's array is
never changed."""

import re

import numpy as np
import pytest

import tinygrad_attn as ta
from tinygrad_attn.apply import apply
from tinygrad_attn.gradcheck import gradient_pairs
from tinygrad_attn.ops.arithmetic import Mul

_BASE = np.random.default_rng(3).uniform(-1.2, 1.2, (4, 6, 5))

LAYOUTS = {
    "transposed 2-D (a.T)": lambda: _BASE[0].T,
    "Fortran order 3-D": lambda: np.asfortranarray(_BASE[:, :3, :4]),
    "axes permuted (2, 0, 1)": lambda: _BASE.transpose(2, 0, 1),
    "sliced with a step": lambda: _BASE[0, ::2, 1::2],
    "reversed with a negative step": lambda: _BASE[1, ::-1, ::-2],
    "a broadcast row (stride 0)": lambda: np.broadcast_to(_BASE[0, 0], (3, 5)),
    "0-d": lambda: _BASE[1, 2, 3].reshape(()),
    "C-contiguous": lambda: _BASE[2].copy(),
}


class _ThreeQuarterMul(Mul):
    """a·b whose backward is ¾ of the true one (a test-only op, not registered)."""

    name = "three_quarter_mul"

    @staticmethod
    def backward(ctx, grad):
        return tuple(0.75 * g for g in Mul.backward(ctx, grad))


def _weights(shape):
    return np.random.default_rng(7).standard_normal(shape)


def _exact_gradient(a, w):
    """d/da of Σ w ⊙ tanh(a²) = w ⊙ 2a (1 − tanh²(a²))."""
    return w * 2 * a * (1 - np.tanh(a * a) ** 2)


def _loss(t, w, mul=Mul):
    return (apply(mul, t, t).tanh() * ta.Tensor(w)).sum()


def _as_leaf(array, through_constructor):
    """A leaf holding `array`'s values: through the constructor, or holding the view itself."""
    if through_constructor:
        return ta.Tensor(array, requires_grad=True)
    t = ta.Tensor(np.zeros(array.shape), requires_grad=True)
    t.data = array                                  # a leaf whose data is the strided view itself
    return t


@pytest.mark.parametrize("through_constructor", [True, False], ids=["constructed", "view held"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_a_correct_backward_passes_and_the_numeric_gradient_is_exact(layout, through_constructor):
    array = LAYOUTS[layout]()
    before, strides = array.copy(), array.strides
    w = _weights(array.shape)
    x = _as_leaf(array, through_constructor)
    assert ta.gradcheck(lambda t: _loss(t, w), [x])
    [(_, analytic, numeric)] = gradient_pairs(lambda t: _loss(t, w), [x])
    assert analytic.shape == numeric.shape == array.shape
    np.testing.assert_allclose(numeric, _exact_gradient(before, w), rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(analytic, _exact_gradient(before, w), rtol=1e-12, atol=1e-14)
    assert np.array_equal(array, before) and array.strides == strides   # the caller's array untouched
    assert np.array_equal(x.data, before)


def test_a_transposed_input_with_a_vector_output_passes():
    a = np.arange(6.0).reshape(2, 3).T / 4 - 0.6
    assert ta.gradcheck(lambda x: (x * x).tanh(), [ta.Tensor(a, requires_grad=True)])


@pytest.mark.parametrize("layout", ["transposed 2-D (a.T)", "axes permuted (2, 0, 1)", "sliced with a step",
                                    "0-d"])
def test_a_wrong_backward_fails_and_reports_the_true_numeric_gradient(layout):
    array = LAYOUTS[layout]()
    w = _weights(array.shape)
    x = ta.Tensor(array, requires_grad=True)
    with pytest.raises(ta.GradcheckError) as info:
        ta.gradcheck(lambda t: _loss(t, w, _ThreeQuarterMul), [x])
    message = str(info.value)
    found = re.search(r"worst element \(([\d, ]*)\) has analytic (\S+), numeric (\S+) ", message)
    assert found, message
    index = tuple(int(i) for i in found.group(1).split(",") if i.strip())
    analytic, numeric = float(found.group(2)), float(found.group(3))
    exact = np.asarray(_exact_gradient(array, w))[index]
    assert numeric == pytest.approx(exact, rel=1e-7)
    assert analytic == pytest.approx(0.75 * exact, rel=1e-7)
    assert abs(exact) > 1e-3                        # the worst element is a real gradient, not a 0
