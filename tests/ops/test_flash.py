"""flash_attention against scaled_dot_product_attention (1e-10 in float64, outputs and every
gradient), what it saves, which tiles it visits, and that it never holds an (n_q, n_k) array."""

import tracemalloc

import numpy as np
import pytest
from test_attention import SETTINGS, _inputs

import tinygrad_attn as ta
from tinygrad_attn import functional as F
from tinygrad_attn.kernels import flash


def _run(fn, q, k, v, d_out, **kwargs):
    for t in (q, k, v):
        t.zero_grad()
    out = fn(q, k, v, **kwargs)
    out.backward(d_out)
    return [out.data.copy(), q.grad.copy(), k.grad.copy(), v.grad.copy()]


@pytest.mark.parametrize("name", SETTINGS)
@pytest.mark.parametrize("block_size", [1, 3, 4, 100])
@pytest.mark.parametrize("tile_rows", [flash._TILE_ROWS, 2])
def test_flash_equals_plain_forward_and_backward(name, block_size, tile_rows, rng, monkeypatch):
    """Lengths 4..9 are not multiples of 3 or 4, so the last key block is a short one. With tile
    rows 2 each key block meets its query rows in pieces of 2 (the last may be 1): dK and dV are
    sums over the pieces, and a causal block's diagonal square spans several pieces."""
    monkeypatch.setattr(flash, "_TILE_ROWS", tile_rows)
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
    (10, 10, [(0, 2, 0, 2), (2, 10, 0, 4), (4, 6, 4, 6), (6, 10, 4, 8), (8, 10, 8, 10)]),
    (4, 10, [(0, 2, 0, 2), (2, 4, 0, 4)]),                  # keys 4..9 are seen by no query
    (10, 6, [(0, 2, 0, 2), (2, 10, 0, 4), (4, 6, 4, 6), (6, 10, 4, 6)]),
])
def test_causal_tiles_skip_what_no_query_sees(n_q, n_k, expected):
    """(first row, end row, first key, end key) per tile, blocks of 4: block c meets rows ≥ c only,
    first the top half of its diagonal square (rows c, c + 1) against the keys they see (c, c + 1)."""
    ctx = ta.ops.base.Context(np, (True,) * 3, {"is_causal": True, "block_size": 4, "window": None})
    assert [(r.start, r.stop, c.start, c.stop) for r, c in flash._tiles(ctx, n_q, n_k)] == expected


def test_a_window_skips_the_tiles_below_it():
    """Window 3, blocks of 4: block 0's last key (3) leaves the window of rows ≥ 6, so its second
    tile stops at row 6 (rows 2 … 9 without the window); block 4's reaches row 9, block 8's too."""
    ctx = ta.ops.base.Context(np, (True,) * 3, {"is_causal": True, "block_size": 4, "window": 3})
    assert [(r.start, r.stop, c.start, c.stop) for r, c in flash._tiles(ctx, 10, 10)] == \
        [(0, 2, 0, 2), (2, 6, 0, 4), (4, 6, 4, 6), (6, 10, 4, 8), (8, 10, 8, 10)]


@pytest.mark.parametrize("is_causal,n_q,n_k,expected", [
    (True, 10, 10, [(0, 2, 0, 2), (2, 5, 0, 4), (5, 8, 0, 4), (8, 10, 0, 4),
                    (4, 6, 4, 6), (6, 9, 4, 8), (9, 10, 4, 8), (8, 10, 8, 10)]),
    (False, 5, 6, [(0, 3, 0, 4), (3, 5, 0, 4), (0, 3, 4, 6), (3, 5, 4, 6)]),
])
def test_tiles_cut_query_rows_in_pieces(is_causal, n_q, n_k, expected, monkeypatch):
    """Key blocks of 4 meet their query rows in pieces of at most 3 rows."""
    monkeypatch.setattr(flash, "_TILE_ROWS", 3)
    ctx = ta.ops.base.Context(np, (True,) * 3, {"is_causal": is_causal, "block_size": 4, "window": None})
    assert [(r.start, r.stop, c.start, c.stop) for r, c in flash._tiles(ctx, n_q, n_k)] == expected


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
    assert flash_peak < square / 4                          # tiles of at most 512 × 32: 128 KiB


def test_float32_stays_float32_and_close_to_plain(rng):
    q, k, v = (ta.Tensor(rng.standard_normal((2, 300, 16)).astype(np.float32), requires_grad=True)
               for _ in range(3))
    d_out = rng.standard_normal((2, 300, 16)).astype(np.float32)
    expected = _run(F.scaled_dot_product_attention, q, k, v, d_out, is_causal=True)
    got = _run(F.flash_attention, q, k, v, d_out, is_causal=True, block_size=64)
    for e, g in zip(expected, got):
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)


def test_a_float64_scale_keeps_float32_queries_float32():
    """Q is scaled once, in Q's dtype: a NumPy float64 scale must not make the tiles float64."""
    ctx = ta.ops.base.Context(np, (True,) * 3, {"scale": np.float64(0.3)})
    q = np.full((2, 3, 4), 2.0, np.float32)
    q_scaled, _ = flash._scaled_queries(ctx, q, np.zeros((1, 5, 4), np.float32), np.zeros((5, 2), np.float32))
    assert q_scaled.dtype == np.float32 and q_scaled.shape == (2, 3, 4)
    np.testing.assert_allclose(q_scaled, 0.6, rtol=1e-6)


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
