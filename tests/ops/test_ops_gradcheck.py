"""Every registered op, every one of its cases, through ta.gradcheck in float64."""

import numpy as np
import pytest

import tinygrad_attn as ta
from tinygrad_attn.apply import apply
from tinygrad_attn.gradcheck import case_inputs
from tinygrad_attn.ops import REGISTRY
from tinygrad_attn.ops.arithmetic import Mul
from tinygrad_attn.ops.base import Case, Op

ALL_CASES = [(name, i) for name, op in sorted(REGISTRY.items()) for i in range(len(op.cases))]


def run_case(op: type[Op], case: Case, rng: np.random.Generator, device: str = "cpu") -> bool:
    inputs = case_inputs(case, rng, device)
    return ta.gradcheck(lambda *xs: apply(op, *xs, **case.params), inputs)


def test_registry_is_complete_and_every_formula_is_text():
    """``@register`` already refuses an op without cases or whose formula does not name its inputs;
    it lets through a formula entry that is not text, which this catches."""
    assert len(REGISTRY) >= 25
    for name, op in REGISTRY.items():
        assert all(f is None or (isinstance(f, str) and f) for f in op.formula.values()), name
        # `formula` is what a learner reads for each input; a backward docstring is optional, for
        # the derivation and the edge cases where the formula alone does not say them.


@pytest.mark.parametrize("name,index", ALL_CASES)
def test_gradcheck(name, index, rng, device):
    op = REGISTRY[name]
    assert run_case(op, op.cases[index], rng, device)


def test_wrong_backward_fails_gradcheck(rng):
    class WrongMul(Mul):
        name = "wrong_mul"

        @staticmethod
        def backward(ctx, grad):
            """Deliberately wrong: forgets the factor b."""
            return grad, grad * ctx.saved["a"]

    with pytest.raises(ta.GradcheckError, match=r"input 0 of shape \(3, 4\).*analytic.*numeric"):
        run_case(WrongMul, Case((3, 4), (3, 4)), rng)


def test_gradcheck_message_names_worst_element():
    x = ta.Tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)

    class Square(Mul):
        name = "square"

        @staticmethod
        def forward(ctx, x):
            ctx.save(x=x)
            return x * x

        @staticmethod
        def backward(ctx, grad):
            """Wrong only at element 2."""
            g = 2 * ctx.saved["x"] * grad
            g[2] += 1.0
            return (g,)

    with pytest.raises(ta.GradcheckError, match=r"worst element \(2,\)"):
        ta.gradcheck(lambda t: apply(Square, t), [x])
