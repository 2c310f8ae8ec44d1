"""flash_attention against scaled_dot_product_attention (1e-10 in float64, outputs and every
gradient), what it saves, which tiles it visits, and that it never holds an (n_q, n_k) array."""

import tracemalloc

import numpy as np
import pytest
from test_attention import SETTINGS, _inputs

import tinygrad_attn as ta
from tinygrad_attn import functional as F
from tinygrad_attn.ops import flash


def _run(fn, q, k, v, d_out, **kwargs):
    for t in (q, k, v):
        t.zero_grad()
    out = fn(q, k, v, **kwargs)
    out.backward(d_out)
    return [out.data.copy(), q.grad.copy(), k.grad.copy(), v.grad.copy()]


@pytest.mark.parametrize("name", SETTINGS)
@pytest.mark.parametrize("block_size", [1, 3, 4, 100])
def test_flash_equals_plain_forward_and_backward(name, block_size, rng):
    """Lengths 4..9 are not multiples of 3 or 4, so the last key block is a short one."""
    cfg = SETTINGS[name]
    q, k, v = _inputs(cfg["shapes"], rng)
    kwargs = dict(mask=cfg["mask"], is_causal=cfg["causal"], scale=0.9)
    plain = F.scaled_dot_product_attention(q, k, v, **kwargs)
    d_out = rng.standard_normal(plain.shape)
    with np.errstate(all="raise"):
        expected = _run(F.scaled_dot_product_attention, q, k, v, d_out, **kwargs)
        got = _run(F.flash_attention, q, k, v, d_out, block_size=block_size, **kwargs)
    for what, e, g in zip(("output", "dQ", "dK", "dV"), expected, got):
        np.testing.assert_allclose(g, e, rtol=0, atol=1e-10, err_msg=what)


def test_forward_saves_only_output_and_log_sum_exp(rng):
    q, k, v = _inputs(((2, 5, 3), (2, 7, 3), (2, 7, 4)), rng)
    keep = np.ones((5, 7), bool)
    keep[2] = False
    out = F.flash_attention(q, k, v, mask=keep, block_size=3)
    saved = out.node.ctx.saved
    assert set(saved) == {"q", "k", "v", "keep", "bias", "out", "lse"}
    s = q.data @ np.swapaxes(k.data, -1, -2) / np.sqrt(3)
    lse = np.log(np.exp(s).sum(-1, keepdims=True))
    lse[:, 2] = np.inf                                      # the fully masked row: exp(S − L) = 0
    np.testing.assert_allclose(saved["lse"], lse, rtol=1e-12)


@pytest.mark.parametrize("n_q,n_k,expected", [
    (10, 10, [(0, 0, 4), (4, 4, 8), (8, 8, 10)]),
    (4, 10, [(0, 0, 4)]),                                   # keys 4..9 are seen by no query
    (10, 6, [(0, 0, 4), (4, 4, 6)]),
])
def test_causal_tiles_skip_what_no_query_sees(n_q, n_k, expected):
    ctx = ta.ops.base.Context(np, (True,) * 3, {"is_causal": True, "block_size": 4})
    tiles = flash._tiles(ctx, n_q, n_k)
    assert [(r.start, c.start, c.stop) for r, c in tiles] == expected
    assert all(r.stop == n_q for r, _ in tiles)


def _peak_bytes(fn, q, k, v, d_out, **kwargs) -> int:
    tracemalloc.start()
    try:
        fn(q, k, v, **kwargs).backward(d_out)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("is_causal", [False, True])
def test_neither_pass_holds_the_score_matrix(is_causal, rng):
    n, block = 1024, 32
    q, k, v = _inputs(((n, 8), (n, 8), (n, 8)), rng)
    d_out = rng.standard_normal((n, 8))
    square = n * n * 8                                      # one float64 (n, n) array: 8 MiB
    assert _peak_bytes(F.scaled_dot_product_attention, q, k, v, d_out, is_causal=is_causal) > square
    flash_peak = _peak_bytes(F.flash_attention, q, k, v, d_out, is_causal=is_causal, block_size=block)
    assert flash_peak < square / 4                          # a few n × 32 tiles: 256 KiB each


def test_float32_stays_float32_and_close_to_plain(rng):
    q, k, v = (ta.Tensor(rng.standard_normal((2, 300, 16)).astype(np.float32), requires_grad=True)
               for _ in range(3))
    d_out = rng.standard_normal((2, 300, 16)).astype(np.float32)
    expected = _run(F.scaled_dot_product_attention, q, k, v, d_out, is_causal=True)
    got = _run(F.flash_attention, q, k, v, d_out, is_causal=True, block_size=64)
    for e, g in zip(expected, got):
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)


def test_block_size_must_be_positive():
    q = ta.Tensor(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="flash_attention: block_size must be at least 1, got 0"):
        F.flash_attention(q, q, q, block_size=0)


@pytest.mark.parametrize("is_causal", [False, True])
def test_huge_scores_stay_finite_and_equal(is_causal, rng):
    """Scores beyond ±1e4 (about 2e5 here): the row maximum keeps every exp ≤ 1 in both kernels."""
    q, k, v = _inputs(((6, 4), (9, 4), (9, 3)), rng)
    q.data *= 150.0
    k.data *= 150.0
    d_out = rng.standard_normal((6, 3))
    s = q.data @ k.data.T
    assert np.abs(s).max() > 1e4
    with np.errstate(over="raise", invalid="raise", divide="raise"):   # exp may underflow to 0
        expected = _run(F.scaled_dot_product_attention, q, k, v, d_out, is_causal=is_causal, scale=1.0)
        got = _run(F.flash_attention, q, k, v, d_out, is_causal=is_causal, scale=1.0, block_size=2)
    for e, g in zip(expected, got):
        assert np.isfinite(g).all()
        np.testing.assert_allclose(g, e, rtol=1e-9, atol=1e-10)
