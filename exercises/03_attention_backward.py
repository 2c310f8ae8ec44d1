"""Exercise 3: attention's backward.

Forward is written for you: S = scale · Q Kᵀ, masked where `keep` is False, P = softmax(S)
row by row (a row with every key masked is all zeros), O = P V. Shapes (…, n, d_k), (…, m, d_k),
(…, m, d_v): there may be batch axes in front, so transpose the last two axes with
np.swapaxes(a, -1, -2), not a.T. Write `backward`: given grad = dO, return (dQ, dK, dV).
Hint: docs/attention.md, "Backward" — dV, dP, dS, then dQ and dK (mind the transpose in Kᵀ).

Check: python -m tinygrad_attn check exercises/03_attention_backward.py
"""

import numpy as np

from tinygrad_attn.ops.base import Op


class Attention(Op):
    """O = softmax(scale · Q Kᵀ, keep) V over the last two axes."""

    name = "exercise_attention"

    @staticmethod
    def forward(ctx, q, k, v, *, scale, keep):
        s = scale * (q @ np.swapaxes(k, -1, -2))                        # (…, n, m)
        if keep is not None:
            s = np.where(keep, s, -np.inf)
        top = s.max(axis=-1, keepdims=True)
        e = np.exp(s - np.where(np.isfinite(top), top, 0))              # 0 where masked
        total = e.sum(axis=-1, keepdims=True)
        p = e / np.where(total > 0, total, 1)                           # (…, n, m)
        ctx.save(q=q, k=k, v=v, p=p)
        return p @ v                                                    # (…, n, d_v)

    @staticmethod
    def backward(ctx, grad):
        """Return (dQ, dK, dV); ctx.scale is the scale, ctx.saved holds q, k, v and p."""
        raise NotImplementedError("return (dQ, dK, dV) from grad = dO and ctx.saved['q'], 'k', 'v', 'p'")
