"""Attention against matrices written out in NumPy, and flash attention against the plain kernel."""

import numpy as np
import pytest

import tinygrad_attn as ta
from tinygrad_attn import functional as F


def np_attention(q, k, v, keep=None, bias=None, is_causal=False, scale=None):
    """S = scale·QKᵀ (+ bias), −inf where masked, P = softmax(S) (zero rows stay zero), O = PV."""
    scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ np.swapaxes(k, -1, -2) * scale
    if bias is not None:
        s = s + bias
    allowed = np.ones(s.shape, bool)
    if keep is not None:
        allowed &= keep
    if is_causal:
        allowed &= np.tril(np.ones(s.shape[-2:], bool))
    s = np.where(allowed, s, -np.inf)
    m = s.max(-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(m), m, 0))
    total = e.sum(-1, keepdims=True)
    p = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    return p @ v, p


def np_attention_grads(q, k, v, p, d_out, scale):
    """The backward written as matrices: dV = PᵀdO, dP = dO Vᵀ, dS = P⊙(dP − rowsum(dP⊙P))."""
    dv = np.swapaxes(p, -1, -2) @ d_out
    dp = d_out @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    return scale * ds @ k, scale * np.swapaxes(ds, -1, -2) @ q, dv


SETTINGS = {
    "self": dict(shapes=((2, 7, 4), (2, 7, 4), (2, 7, 3)), mask=None, causal=False),
    "causal": dict(shapes=((2, 7, 4), (2, 7, 4), (2, 7, 3)), mask=None, causal=True),
    "cross": dict(shapes=((3, 5, 4), (3, 9, 4), (3, 9, 2)), mask=None, causal=False),
    "padding": dict(shapes=((2, 5, 4), (2, 9, 4), (2, 9, 3)),
                    mask=np.array([[[True] * 6 + [False] * 3]], bool), causal=False),
    "fully masked row": dict(shapes=((5, 4), (6, 4), (6, 3)),
                             mask=np.array([[True] * 6, [False] * 6, [True, False] * 3,
                                            [True] * 6, [False] * 6]), causal=False),
    "float mask + causal": dict(shapes=((2, 2, 6, 4), (1, 2, 6, 4), (2, 1, 6, 5)),
                                mask=np.linspace(-2, 1, 6), causal=True),
    "causal cross": dict(shapes=((4, 4), (7, 4), (7, 2)), mask=None, causal=True),
}


def _inputs(shapes, rng):
    return [ta.Tensor(rng.standard_normal(s), requires_grad=True) for s in shapes]


@pytest.mark.parametrize("name", SETTINGS)
def test_plain_kernel_matches_explicit_matrices(name, rng):
    cfg = SETTINGS[name]
    q, k, v = _inputs(cfg["shapes"], rng)
    mask = cfg["mask"]
    keep, bias = (mask, None) if mask is None or mask.dtype == bool else (None, mask)
    expected, p = np_attention(q.data, k.data, v.data, keep, bias, cfg["causal"], scale=0.7)
    out, weights = F.scaled_dot_product_attention(q, k, v, mask=mask, is_causal=cfg["causal"],
                                                  scale=0.7, return_weights=True)
    np.testing.assert_allclose(out.data, expected, atol=1e-12)
    np.testing.assert_allclose(weights.data, np.broadcast_to(p, weights.shape), atol=1e-12)
    fused = F.scaled_dot_product_attention(q, k, v, mask=mask, is_causal=cfg["causal"], scale=0.7)
    np.testing.assert_allclose(fused.data, expected, atol=1e-12)
    d_out = rng.standard_normal(fused.shape)
    fused.backward(d_out)
    dq, dk, dv = np_attention_grads(q.data, k.data, v.data, np.broadcast_to(p, weights.shape), d_out, 0.7)
    for t, ref in ((q, dq), (k, dk), (v, dv)):
        np.testing.assert_allclose(t.grad, ta.engine.unbroadcast(ref, t.shape), atol=1e-12)


@pytest.mark.parametrize("name", SETTINGS)
@pytest.mark.parametrize("block_size", [1, 2, 4])
def test_flash_equals_plain_forward_and_backward(name, block_size, rng):
    cfg = SETTINGS[name]
    q, k, v = _inputs(cfg["shapes"], rng)
    d_out = None
    results = []
    for fn in (F.scaled_dot_product_attention,
               lambda *a, **kw: F.flash_attention(*a, **kw, block_size=block_size)):
        for t in (q, k, v):
            t.zero_grad()
        out = fn(q, k, v, mask=cfg["mask"], is_causal=cfg["causal"])
        d_out = rng.standard_normal(out.shape) if d_out is None else d_out
        out.backward(d_out)
        results.append([out.data.copy(), q.grad.copy(), k.grad.copy(), v.grad.copy()])
    for plain, flash in zip(*results):
        np.testing.assert_allclose(flash, plain, rtol=0, atol=1e-10)
    assert np.isfinite(results[1][0]).all()


def test_masked_weights_are_exactly_zero_and_dead_rows_output_zero():
    q, k, v = (ta.Tensor(np.ones((3, 2))) for _ in range(3))
    keep = np.array([[True, False, True], [False, False, False], [True, True, True]])
    for fn in (F.scaled_dot_product_attention, F.flash_attention):
        out, w = fn(q, k, v, mask=keep, return_weights=True)
        assert (w.data[~keep] == 0).all()
        np.testing.assert_array_equal(out.data[1], [0.0, 0.0])
        np.testing.assert_array_equal(fn(q, k, v, mask=keep).data[1], [0.0, 0.0])


def test_flash_return_weights_and_default_scale(rng):
    q, k, v = _inputs(((4, 8), (6, 8), (6, 3)), rng)
    out, w = F.flash_attention(q, k, v, return_weights=True)
    expected, p = np_attention(q.data, k.data, v.data, scale=1 / np.sqrt(8))
    np.testing.assert_allclose(out.data, expected, atol=1e-12)
    np.testing.assert_allclose(w.data, p, atol=1e-12)


@pytest.mark.parametrize("fn", [F.scaled_dot_product_attention, F.flash_attention])
def test_bad_shapes_raise(fn):
    q = ta.Tensor(np.zeros((2, 4, 8)))
    with pytest.raises(ta.ShapeError, match=r"q \(2, 4, 8\), k \(2, 5, 7\)"):
        fn(q, ta.Tensor(np.zeros((2, 5, 7))), ta.Tensor(np.zeros((2, 5, 3))))
    with pytest.raises(ta.ShapeError, match="v"):
        fn(q, ta.Tensor(np.zeros((2, 5, 8))), ta.Tensor(np.zeros((2, 6, 3))))
    with pytest.raises(ta.ShapeError, match=r"mask of shape \(4, 4\) does not broadcast to \(2, 4, 5\)"):
        fn(q, ta.Tensor(np.zeros((2, 5, 8))), ta.Tensor(np.zeros((2, 5, 3))), mask=np.ones((4, 4), bool))
    with pytest.raises(ta.ShapeError, match="batch dims"):
        fn(q, ta.Tensor(np.zeros((3, 5, 8))), ta.Tensor(np.zeros((3, 5, 3))))
