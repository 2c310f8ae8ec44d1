"""Grouped-query attention and the sliding window against explicit matrices in NumPy (float64), the
three paths (fused, unfused, flash) equal within 1e-10, and the refusals."""

import numpy as np
import pytest

import tinygrad_attn as ta
from tinygrad_attn import functional as F
from tinygrad_attn.errors import ShapeError


def np_attention(q, k, v, keep, d_out):
    """Output and (dQ, dK, dV) of softmax(Q Kᵀ/√d, keep) V, K and V already one per query head."""
    scale = 1 / np.sqrt(q.shape[-1])
    s = np.where(keep, q @ np.swapaxes(k, -1, -2) * scale, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    dp = d_out @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    return p @ v, (ds @ k * scale, np.swapaxes(ds, -1, -2) @ q * scale, np.swapaxes(p, -1, -2) @ d_out)


def window_keep(n, window):
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    return (j <= i) & (j > i - (window or n))


def run(path, q, k, v, d_out, **kwargs):
    leaves = [ta.Tensor(a, requires_grad=True) for a in (q, k, v)]
    fn = {"fused": F.scaled_dot_product_attention, "flash": F.flash_attention}[path.split("-")[0]]
    extra = {"fused": False} if path == "fused-unfused" else {"block_size": 3} if path == "flash" else {}
    out = fn(*leaves, is_causal=True, **extra, **kwargs)
    out.backward(d_out)
    return out.numpy(), [t.grad for t in leaves]


@pytest.mark.parametrize("kv_heads", [4, 2, 1])                    # groups of 1, 2 and all 4 heads
@pytest.mark.parametrize("window", [None, 1, 3])
def test_gqa_and_window_equal_explicit_matrices_on_every_path(rng, kv_heads, window):
    n, group = 7, 4 // kv_heads
    q, d_out = rng.standard_normal((2, 4, n, 5)), rng.standard_normal((2, 4, n, 5))
    k, v = rng.standard_normal((2, kv_heads, n, 5)), rng.standard_normal((2, kv_heads, n, 5))
    # The reference copies each kv head to its group, then sums dK and dV back over the group.
    expected, (dq, dk, dv) = np_attention(q, np.repeat(k, group, axis=1), np.repeat(v, group, axis=1),
                                          window_keep(n, window), d_out)
    dk, dv = (g.reshape(2, kv_heads, group, n, 5).sum(axis=2) for g in (dk, dv))
    for path in ("fused", "fused-unfused", "flash"):
        out, grads = run(path, q, k, v, d_out, enable_gqa=kv_heads != 4, window=window)
        np.testing.assert_allclose(out, expected, atol=1e-10, err_msg=path)
        for got, want in zip(grads, (dq, dk, dv)):
            np.testing.assert_allclose(got, want, atol=1e-10, err_msg=path)


def test_gqa_keeps_a_per_head_mask_and_its_padding(rng):
    q, k, v = (rng.standard_normal(shape) for shape in ((1, 4, 5, 3), (1, 2, 5, 3), (1, 2, 5, 3)))
    mask = rng.random((1, 4, 5, 5)) > 0.3
    mask[..., 0] = True
    d_out = rng.standard_normal((1, 4, 5, 3))
    expected, _ = np_attention(q, np.repeat(k, 2, axis=1), np.repeat(v, 2, axis=1), mask, d_out)
    for fn in (F.scaled_dot_product_attention, F.flash_attention):
        out = fn(ta.Tensor(q), ta.Tensor(k), ta.Tensor(v), mask=mask, enable_gqa=True)
        np.testing.assert_allclose(out.numpy(), expected, atol=1e-10)


def test_refusals(rng):
    q, k = ta.Tensor(rng.standard_normal((1, 4, 5, 3))), ta.Tensor(rng.standard_normal((1, 3, 5, 3)))
    with pytest.raises(ShapeError, match=r"scaled_dot_product_attention: enable_gqa needs .* Hq divisible by "
                                         r"Hkv, got q \(1, 4, 5, 3\), k \(1, 3, 5, 3\)"):
        F.scaled_dot_product_attention(q, k, k, enable_gqa=True)
    with pytest.raises(ValueError, match=r"flash_attention: window must be an integer >= 1 .* got window=0"):
        F.flash_attention(q, q, q, is_causal=True, window=0)
    with pytest.raises(ValueError, match=r"needs is_causal=True .* got window=2, is_causal=False"):
        F.scaled_dot_product_attention(q, q, q, window=2)
