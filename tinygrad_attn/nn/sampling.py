"""Choosing the next token from a model's logits: greedily, or by sampling with a temperature
and top-k.

    p = softmax(logits / T) over the k largest logits (the others get probability 0)

T → 0 approaches the argmax (T = 0 is the argmax itself); T = 1 samples the model's own
distribution; T > 1 flattens it. Top-k cuts the long tail of unlikely tokens, whose sum is what
makes a sampled text wander off. The largest logit is subtracted before dividing by T, so a tiny T
never overflows: the others go to −∞ and the draw is the argmax, as in the limit. A T below
``GREEDY_BELOW`` (the smallest normal float64, whose reciprocal is still finite) is the argmax.

Example:
    >>> logits = np.array([[1.0, 3.0, 2.0]])
    >>> next_token(logits).tolist()                        # temperature 0: the argmax
    [1]
    >>> rng = np.random.default_rng(0)
    >>> next_token(logits, temperature=1.0, top_k=1, rng=rng).tolist()   # only the top one left
    [1]
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["GREEDY_BELOW", "check_sampling", "generate_beyond_context", "next_token"]

GREEDY_BELOW = float(np.finfo(np.float64).tiny)     # 2.2e-308: 1 / T overflows below it


def check_sampling(temperature: float, top_k: int | None) -> None:
    """ValueError naming the argument unless temperature ≥ 0 (finite) and top_k ≥ 1 (or None)."""
    if not (math.isfinite(temperature) and temperature >= 0):
        raise ValueError(f"temperature must be a finite number ≥ 0 (0: always the most likely token), "
                         f"got {temperature}")
    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k must be at least 1 (or None: every token), got {top_k}")


def next_token(logits: np.ndarray, temperature: float = 0.0, top_k: int | None = None,
               rng: np.random.Generator | None = None) -> np.ndarray:
    """One token id per row of `logits` (batch, vocab): the argmax for temperature 0 (or below
    ``GREEDY_BELOW``), else a draw from softmax(logits / temperature) restricted to the `top_k`
    largest logits, made with `rng`.

    Returns:
        Integer ids, (batch,).
    """
    check_sampling(temperature, top_k)
    logits = np.asarray(logits, dtype=np.float64)
    if temperature < GREEDY_BELOW:
        return logits.argmax(axis=-1)
    if rng is None:
        raise ValueError("next_token: sampling (temperature > 0) needs a random generator, rng")
    with np.errstate(over="ignore"):            # (z − max) / T ≤ 0: at worst −∞, probability 0
        scaled = (logits - logits.max(axis=-1, keepdims=True)) / temperature
    if top_k is not None and top_k < scaled.shape[-1]:
        kth = np.partition(scaled, -top_k, axis=-1)[:, -top_k, None]              # (batch, 1)
        scaled = np.where(scaled >= kth, scaled, -np.inf)
    probs = np.exp(scaled)
    probs /= probs.sum(axis=-1, keepdims=True)
    cumulative = probs.cumsum(axis=-1)                                            # (batch, vocab)
    draws = rng.random((len(probs), 1)) * cumulative[:, -1:]
    return np.minimum((cumulative < draws).sum(axis=-1), probs.shape[-1] - 1)


def generate_beyond_context(model, ids: np.ndarray, max_new_tokens: int, temperature: float = 0.0,
                            top_k: int | None = None, rng: np.random.Generator | None = None,
                            on_token: Callable[[Any], object] | None = None) -> np.ndarray:
    """``model.generate`` for one prompt (seq,), continued past the model's ``max_len``: once the
    context is full, its last half is the prompt of the next stretch (so every token is chosen
    seeing at least max_len / 2 tokens before it, or all of them). Returns the prompt and the
    new ids, (seq + max_new_tokens,); `on_token`, if given, gets each new id as it is chosen.

    Raises:
        ValueError: the prompt is longer than max_len − 1 (no room for a new token).
    """
    ids = np.asarray(ids)
    if len(ids) >= model.max_len:
        raise ValueError(f"the prompt has {len(ids)} tokens; the model reads at most {model.max_len}, "
                         f"so give at most {model.max_len - 1} to leave room for a new one")
    keep = max(1, model.max_len // 2)
    while max_new_tokens > 0:
        context = ids if len(ids) < model.max_len else ids[-keep:]
        new = min(max_new_tokens, model.max_len - len(context))
        out = model.generate(context, new, temperature=temperature, top_k=top_k, rng=rng,
                             on_token=on_token).numpy()
        ids = np.concatenate([ids, out[len(context):]])
        max_new_tokens -= new
    return ids
