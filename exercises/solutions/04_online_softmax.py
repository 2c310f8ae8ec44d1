"""Reference solution to exercise 4: the online-softmax update at the heart of flash attention.

Flash attention folds the keys in block by block, keeping per query row a running maximum m,
l = Σ exp(s − m) and a = Σ exp(s − m) v over the keys seen so far (docs/flash_attention.md,
"The online softmax"). The checker starts from m = −inf, l = 0, a = 0, calls `online_update`
once per block, then compares O = a / l and L = m + log l with softmax computed whole
(`attention_by_blocks` in tinygrad_attn/exercises/cases.py runs the loop). Masked scores are
−inf; a row may have seen only masked keys so far, and exp(−inf − (−inf)) is NaN.

Check: python -m tinygrad_attn check exercises/04_online_softmax.py
"""

import numpy as np


def online_update(m, l, a, scores, values):  # noqa: E741  (l is the name in the docs)
    """Fold one block of keys into the running state of every query row.

    Args:
        m: (n, 1) the largest score seen so far (−inf before the first block).
        l: (n, 1) Σ exp(s − m) over the keys seen so far.
        a: (n, d_v) Σ exp(s − m) v over the keys seen so far.
        scores: (n, B) this block's scores, −inf where masked.
        values: (B, d_v) this block's values.

    Returns:
        (m', l', a') with the same shapes, now covering this block too.
    """
    m_new = np.maximum(m, scores.max(axis=1, keepdims=True))
    shift = np.where(np.isfinite(m_new), m_new, 0)        # a row with only masked keys so far
    rescale = np.exp(m - shift)                             # exp(m − m'): 0 when m = −inf
    weights = np.exp(scores - shift)                        # exp(s − m'), 0 where masked
    return m_new, l * rescale + weights.sum(axis=1, keepdims=True), a * rescale + weights @ values
