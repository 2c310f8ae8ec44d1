"""RoPE against rotations written out in NumPy: the half-split pairs, relative positions (scores do
not change when every position shifts), the backward as the inverse rotation, and the refusals."""

import numpy as np
import pytest

import tinygrad_attn as ta
from tinygrad_attn import functional as F
from tinygrad_attn.errors import ShapeError


def np_rope(x, positions, base=10000.0):
    """Pair (i, i + D/2) of row t turned by positions[t] · base^(−2i/D), one 2×2 matrix at a time."""
    d = x.shape[-1]
    y = np.empty_like(x)
    for t, p in enumerate(positions):
        for i in range(d // 2):
            angle = p * base ** (-2 * i / d)
            rotation = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
            pair = np.stack([x[..., t, i], x[..., t, i + d // 2]], axis=-1)       # (..., 2)
            turned = pair @ rotation.T
            y[..., t, i], y[..., t, i + d // 2] = turned[..., 0], turned[..., 1]
    return y


def test_rope_rotates_each_half_split_pair(rng):
    x = rng.standard_normal((2, 3, 5, 6))
    out = F.rope(ta.Tensor(x))
    assert out.op == "rope"
    np.testing.assert_allclose(out.data, np_rope(x, range(5)), rtol=1e-12, atol=1e-12)
    shifted = F.rope(ta.Tensor(x), positions=np.arange(4, 9), base=100.0)
    np.testing.assert_allclose(shifted.data, np_rope(x, range(4, 9), base=100.0), rtol=1e-12, atol=1e-12)


def test_scores_depend_only_on_the_distance_between_positions(rng):
    q, k = ta.Tensor(rng.standard_normal((4, 8))), ta.Tensor(rng.standard_normal((4, 8)))
    scores = F.rope(q).data @ F.rope(k).data.T
    moved = F.rope(q, np.arange(7, 11)).data @ F.rope(k, np.arange(7, 11)).data.T
    np.testing.assert_allclose(moved, scores, rtol=1e-10, atol=1e-12)
    assert not np.allclose(scores, q.data @ k.data.T)                  # the rotation does change them


def test_backward_is_the_inverse_rotation(rng):
    x = ta.Tensor(rng.standard_normal((3, 4)), requires_grad=True)
    dy = rng.standard_normal((3, 4))
    F.rope(x, np.array([2, 5, 9])).backward(dy)
    np.testing.assert_allclose(x.grad, np_rope(dy, [-2, -5, -9]), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(x.grad), np.linalg.norm(dy))    # a rotation keeps lengths


def test_rope_refuses_odd_width_bad_positions_and_base(rng):
    x = ta.Tensor(rng.standard_normal((3, 5)))
    with pytest.raises(ShapeError, match=r"rope: x must be \(\.\.\., T, D\) with D even.*\(3, 5\)"):
        F.rope(x)
    x = ta.Tensor(rng.standard_normal((3, 4)))
    with pytest.raises(ShapeError, match=r"rope: positions must have shape \(3,\).*got \(2,\)"):
        F.rope(x, np.arange(2))
    with pytest.raises(TypeError, match="rope: positions must be integers, got dtype float64"):
        F.rope(x, np.arange(3.0))
    with pytest.raises(ValueError, match="rope: base must be a finite number > 0, got 0"):
        F.rope(x, base=0)
