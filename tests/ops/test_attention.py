"""scaled_dot_product_attention against S, P, O and the backward written out as NumPy matrices.

The reference (np_attention, np_attention_grads, SETTINGS) is shared with test_flash.py.
"""

import numpy as np
import pytest

import tinygrad_attn as ta
from tinygrad_attn import functional as F
from tinygrad_attn.backend import to_numpy


def np_attention(q, k, v, keep=None, bias=None, is_causal=False, scale=None):
    """S = scale·QKᵀ (+ bias), −inf where masked, P = softmax(S) (zero rows stay zero), O = PV."""
    scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ np.swapaxes(k, -1, -2) * scale
    if bias is not None:
        s = s + bias
    allowed = np.ones(s.shape, bool) if keep is None else np.ones(s.shape, bool) & keep   # may grow
    if is_causal:
        allowed = allowed & np.tril(np.ones(s.shape[-2:], bool))
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


def _head_mask():
    """A float mask (2, 1, 5, 7): batch 1 pads keys 4..6, query 0 of batch 0 is fully masked."""
    mask = np.zeros((2, 1, 5, 7))
    mask[1, :, :, 4:] = -np.inf
    mask[0, :, 0, :] = -np.inf
    return mask


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
    "causal, more queries": dict(shapes=((9, 3), (5, 3), (5, 2)),
                                 mask=np.array([True, True, False, True, True]), causal=True),
    # The mask carries v's batch axis, which Q Kᵀ lacks: batch 1 pads its last 3 keys.
    "mask with v's batch axes": dict(shapes=((1, 5, 4), (1, 7, 4), (2, 7, 3)),
                                     mask=np.array([[[True] * 7], [[True] * 4 + [False] * 3]]), causal=False),
    # (batch 2, heads 3): batch 1 pads its last 3 keys; query 0 of batch 0 sees nothing (−inf).
    "heads, padding, float −inf row": dict(
        shapes=((2, 3, 5, 4), (2, 3, 7, 4), (2, 3, 7, 3)),
        mask=_head_mask(), causal=False),
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


KERNELS = [F.scaled_dot_product_attention, F.flash_attention]


@pytest.mark.parametrize("fn", KERNELS)
def test_masked_weights_are_exactly_zero_and_dead_rows_get_zeros_without_warnings(fn, rng):
    q, k, v = _inputs(((3, 2), (3, 2), (3, 2)), rng)
    keep = np.array([[True, False, True], [False, False, False], [True, True, True]])
    with np.errstate(all="raise"):                       # any NaN, inf − inf or 0/0 would raise
        out, w = fn(q, k, v, mask=keep, return_weights=True)
        assert (w.data[~keep] == 0).all() and (w.data[keep] > 0).all()
        np.testing.assert_array_equal(out.data[1], [0.0, 0.0])
        fused = fn(q, k, v, mask=keep)
        np.testing.assert_array_equal(fused.data[1], [0.0, 0.0])
        fused.backward(rng.standard_normal(fused.shape))
    np.testing.assert_array_equal(q.grad[1], [0.0, 0.0])  # the dead query gets no gradient
    assert np.isfinite(k.grad).all() and np.isfinite(v.grad).all()


@pytest.mark.parametrize("fn", KERNELS)
def test_default_scale_and_tensor_mask_combined_with_causal(fn, rng):
    q, k, v = _inputs(((2, 4, 8), (2, 6, 8), (2, 6, 3)), rng)
    keep = rng.random((2, 4, 6)) > 0.3
    out, w = fn(q, k, v, mask=ta.Tensor(keep), is_causal=True, return_weights=True)
    expected, p = np_attention(q.data, k.data, v.data, keep, is_causal=True, scale=1 / np.sqrt(8))
    np.testing.assert_allclose(out.data, expected, atol=1e-12)
    np.testing.assert_allclose(w.data, p, atol=1e-12)


def test_plain_kernel_is_one_node_with_p_saved(rng):
    q, k, v = _inputs(((4, 3), (5, 3), (5, 2)), rng)
    out = F.scaled_dot_product_attention(q, k, v)
    assert out.op == "scaled_dot_product_attention"
    assert [t for t in out.node.parents if t is not None] == [q, k, v]
    assert out.node.ctx.saved["probs"].shape == (4, 5)


@pytest.mark.parametrize("fn", KERNELS)
def test_returned_weights_are_differentiable(fn, rng):
    """return_weights builds (output, weights) from matmul and softmax: both carry gradients."""
    q, k, v = _inputs(((2, 3, 3), (2, 4, 3), (2, 4, 2)), rng)
    keep = np.array([[True, True, False, True], [False] * 4, [True] * 4])
    assert ta.gradcheck(lambda *x: fn(*x, mask=keep, is_causal=True, scale=0.8, return_weights=True),
                        [q, k, v])


def test_integer_mask_is_refused():
    q = ta.Tensor(np.zeros((2, 3)))
    with pytest.raises(TypeError, match="scaled_dot_product_attention: mask must be boolean"):
        F.scaled_dot_product_attention(q, q, q, mask=np.ones((2, 2), int))


@pytest.mark.parametrize("fn", KERNELS)
def test_bad_shapes_raise(fn):
    q = ta.Tensor(np.zeros((2, 4, 8)))
    with pytest.raises(ta.ShapeError, match=fn.__name__ + r": q \(2, 4, 8\), k \(2, 5, 7\)"):
        fn(q, ta.Tensor(np.zeros((2, 5, 7))), ta.Tensor(np.zeros((2, 5, 3))))
    with pytest.raises(ta.ShapeError, match=r"k \(2, 5, 8\), v \(2, 6, 3\) do not fit"):
        fn(q, ta.Tensor(np.zeros((2, 5, 8))), ta.Tensor(np.zeros((2, 6, 3))))
    with pytest.raises(ta.ShapeError, match=r"mask of shape \(4, 4\) does not broadcast to \(2, 4, 5\)"):
        fn(q, ta.Tensor(np.zeros((2, 5, 8))), ta.Tensor(np.zeros((2, 5, 3))), mask=np.ones((4, 4), bool))
    with pytest.raises(ta.ShapeError, match=fn.__name__ + r": batch dims of q \(2,\), k \(3,\) and v \(3,\) "
                                            "do not broadcast$"):
        fn(q, ta.Tensor(np.zeros((3, 5, 8))), ta.Tensor(np.zeros((3, 5, 3))))


def test_dropout_p_drops_the_weights_before_v(rng):
    q, k, v = _inputs(((2, 4, 3), (2, 5, 3), (2, 5, 2)), rng)
    ta.manual_seed(3)
    out, weights = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5, return_weights=True)
    ta.manual_seed(3)
    keep = ta.creation.generator_for("cpu").random(weights.shape) >= 0.5
    np.testing.assert_allclose(out.data, (weights.data * keep / 0.5) @ v.data, atol=1e-12)
    p = np_attention(q.data, k.data, v.data)[1]
    np.testing.assert_allclose(weights.data, p, atol=1e-12)                   # returned before dropout
    with pytest.raises(ValueError, match=r"attention: dropout_p must be in \[0, 1\), got 1"):
        F.scaled_dot_product_attention(q, k, v, dropout_p=1)


def test_attention_dropout_in_a_module_multiplies_v_once(monkeypatch):
    """With dropout the weights are dropped, then multiplied with V: Q Kᵀ and dropout(P) V are the
    only matrix products, no P V computed and discarded."""
    from tinygrad_attn.ops.matmul import MatMul

    calls = []
    forward = MatMul.forward
    counted = staticmethod(lambda ctx, a, b: calls.append(a.shape) or forward(ctx, a, b))
    monkeypatch.setattr(MatMul, "forward", counted)
    attention = ta.nn.MultiHeadAttention(8, 2, dropout=0.5)
    attention(ta.randn(1, 3, 8))
    assert len(calls) == 2
    calls.clear()
    attention.eval()(ta.randn(1, 3, 8))
    assert calls == []                                  # evaluation: one fused op


def _fused_causal_run(device, rng_seed, mask, is_causal, window=None):
    """The fused kernel's output, gradients and saved keep mask for one causal or masked call."""
    rng = np.random.default_rng(rng_seed)
    q, k, v = (ta.Tensor(rng.standard_normal((2, 3, 6, 4)).astype(np.float32), requires_grad=True,
                         device=device) for _ in range(3))
    mask = None if mask is None else ta.Tensor(mask, device=device)
    out = F.scaled_dot_product_attention(q, k, v, mask=mask, is_causal=is_causal, window=window)
    assert out.node.op.__name__ == "FusedAttention"
    out.backward(ta.Tensor(rng.standard_normal(out.shape).astype(np.float32), device=device).data)
    return [out.numpy()] + [to_numpy(t.grad) for t in (q, k, v)], out.node.ctx.saved["keep"]


@pytest.mark.parametrize("window", [None, 2])
def test_the_fused_kernel_masks_causally_with_a_mask_made_once(device, window):
    """is_causal in the fused kernel: the same bits as the causal mask given as a keep mask (how
    the kernel masked before), with the causal mask made once per size and kept, never per call."""
    causal = np.tril(np.ones((6, 6), bool))
    if window is not None:
        causal &= ~np.tril(np.ones((6, 6), bool), -window)
    by_flag, saved = _fused_causal_run(device, 0, None, True, window)
    by_mask, _ = _fused_causal_run(device, 0, causal, False)
    for a, b in zip(by_flag, by_mask):
        np.testing.assert_array_equal(a, b)
    _, saved_again = _fused_causal_run(device, 1, None, True, window)
    assert saved_again is saved                                       # the same array: made once
    np.testing.assert_array_equal(to_numpy(saved), causal)
    padding = np.array([True, True, True, True, False, True])         # the user's mask and causal
    by_both, saved_both = _fused_causal_run(device, 2, padding, True, window)
    by_combined, _ = _fused_causal_run(device, 2, padding & causal, False)
    for a, b in zip(by_both, by_combined):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(to_numpy(saved_both), padding & causal)


def test_a_causal_mask_past_the_kept_size_is_made_for_its_call(device, monkeypatch):
    from tinygrad_attn.kernels import attention as fused

    monkeypatch.setattr(fused, "KEPT_MASK_POSITIONS", 35)                 # a 6 × 6 mask is past it
    _, kept = _fused_causal_run(device, 0, None, True, None)
    _, again = _fused_causal_run(device, 0, None, True, None)
    assert kept is not again
    np.testing.assert_array_equal(to_numpy(kept), np.tril(np.ones((6, 6), bool)))
    np.testing.assert_array_equal(to_numpy(again), to_numpy(kept))
