"""F.linear, F.relu, F.gelu and F.dropout against NumPy, dropout's seeding, scaling and errors, and the
documentation every public F function of this module owes its reader."""

import math

import numpy as np
import pytest

import tinygrad_attn as ta
from tinygrad_attn import creation
from tinygrad_attn import functional as F
from tinygrad_attn.apply import apply
from tinygrad_attn.ops.selection import Dropout

pytestmark = pytest.mark.filterwarnings("error")


def test_linear_matches_x_w_plus_b_and_its_gradients(rng):
    x, w, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((4, 5)), rng.standard_normal(5)
    dy = rng.standard_normal((2, 3, 5))
    tx, tw, tb = (ta.Tensor(a, requires_grad=True) for a in (x, w, b))
    out = F.linear(tx, tw, tb)
    out.backward(dy)
    np.testing.assert_allclose(out.data, x @ w + b, rtol=1e-12)
    np.testing.assert_allclose(tx.grad, dy @ w.T, rtol=1e-12)
    np.testing.assert_allclose(tw.grad, np.einsum("bti,btj->ij", x, dy), rtol=1e-12)
    np.testing.assert_allclose(tb.grad, dy.sum(axis=(0, 1)), rtol=1e-12)
    np.testing.assert_allclose(F.linear(tx, tw).data, x @ w, rtol=1e-12)          # no bias
    assert F.linear(ta.ones(2, 4), ta.Tensor(w), ta.Tensor(b)).dtype == np.float64   # promotes as @ and +


def test_linear_names_the_shapes_at_fault():
    with pytest.raises(ta.ShapeError, match=r"^linear: x of shape \(2, 3\) does not fit weight of "
                                            r"shape \(4, 5\)"):
        F.linear(ta.ones(2, 3), ta.ones(4, 5))
    with pytest.raises(ta.ShapeError, match=r"^linear: bias of shape \(4,\) does not match weight's "
                                            r"out_features 5"):
        F.linear(ta.ones(2, 4), ta.ones(4, 5), ta.ones(4))
    with pytest.raises(TypeError, match=r"^linear: x must be a float tensor, got dtype int64"):
        F.linear(ta.Tensor(np.ones((2, 4), dtype=np.int64)), ta.ones(4, 5))


def test_relu_and_gelu_match_numpy(rng):
    x = rng.standard_normal((3, 5))
    dy = rng.standard_normal((3, 5))
    t = ta.Tensor(x, requires_grad=True)
    F.relu(t).backward(dy)
    np.testing.assert_array_equal(F.relu(t).data, np.maximum(x, 0))
    np.testing.assert_array_equal(t.grad, dy * (x > 0))

    c = math.sqrt(2 / math.pi)
    u = c * (x + 0.044715 * x**3)
    t.zero_grad()
    F.gelu(t, approximate="tanh").backward(dy)
    np.testing.assert_allclose(F.gelu(t, approximate="tanh").data, 0.5 * x * (1 + np.tanh(u)), rtol=1e-12)
    du = c * (1 + 3 * 0.044715 * x**2)
    np.testing.assert_allclose(t.grad, dy * (0.5 * (1 + np.tanh(u))
                                             + 0.5 * x * (1 - np.tanh(u) ** 2) * du), rtol=1e-10)


def test_gelu_defaults_to_the_exact_erf_form():
    x = np.array([-4.0, -1.5, -0.3, 0.0, 0.7, 2.0, 5.0])
    dy = np.array([0.3, -1.2, 0.8, 2.0, -0.5, 1.1, 0.9])
    t = ta.Tensor(x, requires_grad=True)
    y = F.gelu(t)                                   # approximate="none", PyTorch's default
    y.backward(dy)
    cdf = np.array([0.5 * (1 + math.erf(v / math.sqrt(2))) for v in x])
    pdf = np.exp(-x * x / 2) / math.sqrt(2 * math.pi)
    np.testing.assert_allclose(y.data, x * cdf, rtol=1e-11, atol=1e-16)   # erf by series: ~1e-15 absolute
    np.testing.assert_allclose(t.grad, dy * (cdf + x * pdf), rtol=1e-12, atol=1e-16)
    np.testing.assert_allclose(t.gelu().data, y.data)                       # the Tensor method agrees
    assert abs(F.gelu(ta.Tensor([1.0])).item() - F.gelu(ta.Tensor([1.0]), approximate="tanh").item()) > 1e-4
    half = F.gelu(ta.Tensor(np.array([300.0, -3.0, 1.0], dtype=np.float16)))
    assert half.dtype == np.float16 and np.allclose(half.numpy(), [300.0, -0.00405, 0.8413], rtol=1e-3)
    with pytest.raises(ValueError, match=r"^gelu: approximate must be one of \('none', 'tanh'\), got 'erf'"):
        F.gelu(t, approximate="erf")


def test_dropout_is_inverted_and_repeatable_under_manual_seed():
    x = ta.Tensor(np.ones((200, 50)), requires_grad=True)
    ta.manual_seed(1)
    y = F.dropout(x, 0.25)
    ta.manual_seed(1)
    np.testing.assert_array_equal(F.dropout(x, 0.25).data, y.data)
    assert not np.array_equal(F.dropout(x, 0.25).data, y.data)        # the generator moved on
    assert y.op == "dropout" and set(np.unique(y.data)) == {0.0, 1 / 0.75}
    assert abs((y.data == 0).mean() - 0.25) < 0.02                      # 10,000 draws: σ ≈ 0.004
    assert abs(y.data.mean() - 1.0) < 0.03                              # E[y] = x
    dy = np.random.default_rng(0).standard_normal((200, 50))
    y.backward(dy)
    np.testing.assert_allclose(x.grad, dy * y.data)                     # the same mask and scale


def test_dropout_mask_on_cpu_is_the_library_generators_draw():
    ta.manual_seed(3)
    y = F.dropout(ta.ones(4, 6), 0.5)
    keep = np.random.default_rng(3).random((4, 6)) >= 0.5     # what manual_seed(3) has always given
    np.testing.assert_array_equal(y.data, np.where(keep, 2.0, 0.0))
    assert creation.generator_for("cpu") is creation.generator()


class _FakeDeviceModule:
    """Stands in for CuPy's module: its ``random.default_rng`` records the seeds it is given."""

    def __init__(self):
        self.seeds = []
        self.random = self

    def default_rng(self, seed):
        self.seeds.append(seed)
        return np.random.default_rng(seed)


def test_device_generator_is_seeded_from_the_host_stream_at_each_draw(monkeypatch):
    """The host generator's state alone decides GPU draws: each call seeds a device generator
    with the host stream's next number (so a checkpoint's host state resumes GPU dropout too)."""
    fake = _FakeDeviceModule()
    monkeypatch.setattr(creation, "xp_for", lambda device: fake)
    ta.manual_seed(5)
    first, second = (creation.generator_for("cuda").random(8) for _ in range(2))
    assert not np.array_equal(first, second)                          # a fresh seed per draw
    host = np.random.default_rng(5)
    assert fake.seeds == [int(host.integers(2**63)), int(host.integers(2**63))]  # the host stream, in order
    ta.manual_seed(5)
    np.testing.assert_array_equal(creation.generator_for("cuda").random(8), first)   # repeatable
    ta.manual_seed(6)
    assert not np.array_equal(creation.generator_for("cuda").random(8), first)


def test_dropout_mask_is_drawn_on_the_tensors_device(device):
    p = 0.3
    ta.manual_seed(2)
    y = F.dropout(ta.ones(50, 40, device=device), p)
    ta.manual_seed(2)
    again = F.dropout(ta.ones(50, 40, device=device), p)
    assert y.device == device and type(y.data) is type(ta.ones(1, device=device).data)
    np.testing.assert_array_equal(y.numpy(), again.numpy())
    assert abs((y.numpy() == 0).mean() - p) < 0.05                     # 2,000 draws: σ ≈ 0.01


def test_dropout_identity_cases_and_dtype():
    x = ta.Tensor(np.ones((3, 4), np.float32), requires_grad=True)
    assert F.dropout(x, 0.5, training=False) is x and F.dropout(x, 0.0) is x
    assert F.dropout(x, 0.5).dtype == np.float32


@pytest.mark.parametrize("p", [1.0, -0.1, 1.5, float("nan")])
def test_dropout_rejects_p_outside_unit_interval(p):
    with pytest.raises(ValueError, match=rf"dropout: p must be in \[0, 1\), got {p}"):
        F.dropout(ta.ones(3), p)
    with pytest.raises(ValueError, match=r"dropout: p must be in \[0, 1\)"):
        F.dropout(ta.ones(3), p, training=False)                        # checked even in eval


def test_dropout_op_with_a_fixed_mask_gradchecks(rng):
    keep = ta.Tensor(rng.random((4, 5)) > 0.3)
    x = ta.Tensor(rng.standard_normal((4, 5)), requires_grad=True)
    y = apply(Dropout, x, keep, p=0.3)
    np.testing.assert_allclose(y.data, x.data * keep.data / 0.7)
    assert ta.gradcheck(lambda t: apply(Dropout, t, keep, p=0.3), [x])


def test_dropout_mask_lives_on_the_input_device(device):
    x = ta.Tensor(np.ones((8, 8)), device=device)
    y = F.dropout(x, 0.5)
    assert y.device == device and set(np.unique(y.numpy())) <= {0.0, 2.0}


@pytest.mark.parametrize("name", F.__all__)
def test_public_functions_are_documented(name):
    """Each has its math on the first line; the lessons' own functions also have Args and Returns
    with the shapes, and an example that runs (doctests). A one-line wrapper such as relu keeps a
    one-line docstring and its example, without restating "x: any tensor"."""
    doc = getattr(F, name).__doc__
    assert doc and doc.splitlines()[0].strip(), name
    if name in ("relu", "gelu"):
        assert ">>> " in doc and len(doc.splitlines()) <= 8, name
    if name in ("softmax", "log_softmax", "cross_entropy", "linear", "layer_norm", "dropout",
                "scaled_dot_product_attention", "flash_attention"):
        for section in ("Args:", "Returns:", "(...", ">>> "):
            assert section in doc, f"F.{name} docstring lacks {section!r}"
