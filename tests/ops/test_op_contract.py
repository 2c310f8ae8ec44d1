"""The op contract on every registered op and every case, calling ``op.backward`` directly through a
Context: a tuple with one entry per input, None exactly where no gradient was asked for, the
other entries unchanged, and the skipped gradients not computed (their residuals are never read)."""

from itertools import combinations

import numpy as np
import pytest
from test_ops_gradcheck import ALL_CASES  # every op × case, as the gradcheck runs them

from tinygrad_attn.float_errors import quiet_float_errors
from tinygrad_attn.gradcheck import case_inputs
from tinygrad_attn.ops import REGISTRY
from tinygrad_attn.ops.base import Case, Context


def case_arrays(case: Case, rng: np.random.Generator) -> list:
    """The case's input arrays (None where an input is absent), as an op's forward takes them."""
    return [None if t is None else t.data for t in case_inputs(case, rng)]


def differentiable(case: Case) -> list[int]:
    """Positions of the inputs a case differentiates (shape specs; masks and targets are arrays)."""
    return [i for i, spec in enumerate(case.specs) if isinstance(spec, tuple)]


def run_backward(op, case: Case, arrays: list, needs: tuple[bool, ...], grad, poisoned=()) -> tuple:
    """Forward then backward through a fresh Context; the residuals named in `poisoned` are
    replaced by arrays that fail on any use before backward runs."""
    ctx = Context(np, needs, case.params)
    with quiet_float_errors():
        op.forward(ctx, *arrays, **case.params)
        ctx.save(**{name: Poisoned(op.name, name) for name in poisoned})
        return op.backward(ctx, grad)


class Poisoned:
    """A residual that backward must not read: any arithmetic, attribute or conversion fails."""

    __array_ufunc__ = None          # NumPy hands ndarray ⊙ Poisoned to our (failing) operators

    def __init__(self, op: str, name: str):
        object.__setattr__(self, "label", f"{op}: backward used the residual {name!r}, which only a "
                                          "gradient nobody asked for needs")

    def fail(self, *args, **kwargs):
        raise AssertionError(object.__getattribute__(self, "label"))

    def __getattr__(self, attribute):
        self.fail()

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = fail
    __matmul__ = __rmatmul__ = __getitem__ = __neg__ = __invert__ = __array__ = __bool__ = fail


@pytest.mark.parametrize("name,index", ALL_CASES)
def test_backward_returns_none_exactly_where_no_grad_is_needed(name, index, rng):
    op = REGISTRY[name]
    case = op.cases[index]
    arrays = case_arrays(case, rng)
    wrt = differentiable(case)
    with quiet_float_errors():
        out = op.forward(Context(np, (True,) * len(arrays), case.params), *arrays, **case.params)
    grad = rng.standard_normal(np.shape(out))
    full = run_backward(op, case, arrays, tuple(i in wrt for i in range(len(arrays))), grad)
    for size in range(len(wrt) + 1):
        for chosen in combinations(wrt, size):
            needs = tuple(i in chosen for i in range(len(arrays)))
            sent = run_backward(op, case, arrays, needs, grad)
            assert type(sent) is tuple and len(sent) == len(arrays), f"{name}: {sent!r}"
            assert [g is not None for g in sent] == list(needs), f"{name} with needs_grad {needs}"
            for i in chosen:            # asking for fewer gradients changes none of the others
                np.testing.assert_array_equal(sent[i], full[i], err_msg=f"{name}: input {i}")


# (op, which differentiable inputs need grad, the residuals only the skipped gradients read)
SKIPPED_WORK = [
    ("scaled_dot_product_attention", (True, False, False), ("q",)),            # dK = scale · dSᵀ Q
    ("scaled_dot_product_attention", (False, True, False), ("k",)),            # dQ = scale · dS K
    ("scaled_dot_product_attention", (False, False, True), ("q", "k", "v")),   # dP = dO Vᵀ, dQ, dK
    ("flash_attention", (False, False, True), ("out",)),                       # D = rowsum(dO ⊙ O) for dS
    ("layer_norm", (False, True, True), ("rstd",)),                            # dx only
    ("softmax", (False,), ("y",)),
    ("log_softmax", (False,), ("probs", "alive")),
    ("cross_entropy", (False,), ("probs", "safe", "counted", "n_counted")),
    ("linear", (True, False, True), ("x",)),                                    # dx = dy Wᵀ, db
    ("linear", (False, True, True), ("w",)),                                    # dW = xᵀ dy, db
]


@pytest.mark.parametrize("name,pattern,poisoned", SKIPPED_WORK)
def test_skipped_gradients_are_not_computed(name, pattern, poisoned, rng):
    op = REGISTRY[name]
    for case in op.cases:
        arrays = case_arrays(case, rng)
        wrt = differentiable(case)
        needs = tuple(i in wrt and pattern[wrt.index(i)] for i in range(len(arrays)))
        with quiet_float_errors():
            out = op.forward(Context(np, needs, case.params), *arrays, **case.params)
        grad = rng.standard_normal(np.shape(out))
        full = run_backward(op, case, arrays, tuple(i in wrt for i in range(len(arrays))), grad)
        sent = run_backward(op, case, arrays, needs, grad, poisoned)
        for i, need in enumerate(needs):
            if need:
                np.testing.assert_array_equal(sent[i], full[i])


def test_poisoned_residual_is_noticed():
    """The check above can fail: a backward that reads a poisoned residual raises."""
    op = REGISTRY["scaled_dot_product_attention"]
    case = op.cases[0]
    arrays = case_arrays(case, np.random.default_rng(0))
    with pytest.raises(AssertionError, match="backward used the residual 'k'"):
        run_backward(op, case, arrays, (True, False, False, False, False), np.ones((3, 2)), ("k",))


@pytest.mark.parametrize("name,index", ALL_CASES)
def test_an_input_gets_a_gradient_exactly_when_its_formula_is_not_none(name, index, rng):
    """Every input is asked for a gradient (masks and targets too): the ones whose formula is None
    answer None, every other one answers an array."""
    op = REGISTRY[name]
    case = op.cases[index]
    arrays = case_arrays(case, rng)
    present = tuple(a is not None for a in arrays)
    with quiet_float_errors():
        out = op.forward(Context(np, present, case.params), *arrays, **case.params)
    sent = run_backward(op, case, arrays, present, rng.standard_normal(np.shape(out)))
    formulas = op.formulas_for(len(arrays))
    for i, (is_present, formula, grad) in enumerate(zip(present, formulas, sent)):
        if is_present:
            assert (grad is None) == (formula is None), f"{name} input {i}: formula {formula!r}"


@pytest.mark.parametrize("name,index", ALL_CASES)
def test_every_saved_residual_has_a_label(name, index, rng):
    op = REGISTRY[name]
    case = op.cases[index]
    arrays = case_arrays(case, rng)
    ctx = Context(np, tuple(a is not None for a in arrays), case.params)
    with quiet_float_errors():
        op.forward(ctx, *arrays, **case.params)
    assert set(ctx.saved) <= set(op.residuals), f"{name}: {set(ctx.saved) - set(op.residuals)} unlabelled"


def test_register_refuses_a_formula_that_does_not_name_the_inputs():
    from tinygrad_attn.ops import register
    from tinygrad_attn.ops.base import Op

    class Scale(Op):
        name = "test_scale"
        formula = {"y": "dx = 2 dy"}          # keyed by the output, not the input x
        cases = (Case((2,)),)

        @staticmethod
        def forward(ctx, x):
            return 2 * x

    with pytest.raises(ValueError, match=r"formula must have one entry per forward input \('x',\)"):
        register(Scale)
    Scale.formula = {"x": None}
    with pytest.raises(ValueError, match="needs a formula for at least one input"):
        register(Scale)
    assert "test_scale" not in REGISTRY


@pytest.mark.parametrize("name,index", ALL_CASES)
def test_backward_leaves_the_gradient_it_is_handed_unchanged(name, index, rng):
    """What ``grad_read_only`` (set by @register) promises: the engine hands a registered op the
    gradient without a copy, so the op must not write into it."""
    op = REGISTRY[name]
    assert op.grad_read_only
    case = op.cases[index]
    arrays = case_arrays(case, rng)
    needs = tuple(a is not None for a in arrays)
    with quiet_float_errors():
        out = op.forward(Context(np, needs, case.params), *arrays, **case.params)
    grad = rng.standard_normal(np.shape(out))
    before = grad.copy()
    run_backward(op, case, arrays, needs, grad)
    np.testing.assert_array_equal(grad, before, err_msg=f"{name} wrote into its incoming gradient")
