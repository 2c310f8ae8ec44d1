"""Multi-head attention as in "Attention Is All You Need", §3.2.2, with today's options.

    Q = X W_Q,  K = C W_K,  V = C W_V          (C = X for self-attention, the context otherwise)
    headₕ = softmax(Qₕ Kₕᵀ / √d_head, mask) Vₕ  (Qₕ the h-th contiguous slice of d_model)
    MultiHead(X, C) = Concat(head₁ … head_H) W_O

Options of Llama-style models: fewer key/value heads than query heads (grouped-query attention:
K and V have n_kv_heads heads, each read by num_heads / n_kv_heads query heads), rotary position
embeddings on Q and K (``F.rope``), and a sliding window (query i sees keys i − w + 1 … i).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .. import functional as F
from ..backend import xp_for
from ..errors import ShapeError
from ..tensor import Tensor, concat
from .attention_choice import attention_kernel
from .layers import Linear
from .module import Module, check_probability, check_sizes

__all__ = ["LayerCache", "MultiHeadAttention"]


@dataclass
class LayerCache:
    """The keys and values one attention layer has seen so far while decoding: (B, H_kv, T, Dh).

    ``seen`` counts the tokens decoded so far: the position of the next one (RoPE rotates by it).
    With a window w only the last w keys and values are kept, all a later query can see.
    """

    k: Tensor | None = None
    v: Tensor | None = None
    seen: int = 0


class MultiHeadAttention(Module):
    """Self- or cross-attention with `num_heads` heads of size d_head (default d_model // num_heads).

    Args:
        d_model: the model width; q_proj is Linear(d_model, num_heads · d_head), k_proj and
            v_proj Linear(d_model, n_kv_heads · d_head), out_proj Linear(num_heads · d_head, d_model).
        num_heads: query heads; must divide d_model unless head_dim is given.
        bias: whether the projections have a bias (q, k and v; out_proj too unless out_bias says).
        dropout: probability of dropping attention weights while training.
        scale: multiplies Q Kᵀ; None (the default) means 1/√d_head, as in the paper. Setting it
            to 1.0 trains without scaling (the √d_k experiment in the docs does).
        fused: attention as one op (True) or built from primitives, each its own backward step
            (False); see ``F.scaled_dot_product_attention``. An attribute: it may be changed.
            Fused attention without dropout or weights asked for runs as ``F.flash_attention``
            where ``attention_choice.attention_kernel`` says so: on the CPU from 512 keys on, on
            the GPU once the score matrix would take more than a 64th of its memory.
        n_kv_heads: key/value heads (None: num_heads); must divide num_heads. Query head h reads
            kv head h // (num_heads // n_kv_heads); K and V are never repeated in memory.
        rope: rotate Q and K by their positions (``F.rope``) after the projections; self-attention
            only. Needs an even d_head.
        window: with is_causal, query i sees keys i − window + 1 … i only (None: all keys ≤ i).
        head_dim: the size of a head, d_head (None: d_model // num_heads). Real models may choose
            it freely: num_heads · head_dim need not be d_model.
        rope_base: RoPE's base; pair i of a head turns by position · rope_base^(−2i/d_head)
            (10000 in the RoFormer paper and Llama 2, 500000 in Llama 3).
        out_bias: whether out_proj has a bias (None: as `bias`). Qwen2 has biases on q, k and v
            only: bias=True, out_bias=False.

    The tensors it makes are named for steps and drawings: Q, K, V (split into heads; RoPE(Q) and
    RoPE(K) after the rotation), the heads' output ``heads``, their concatenation ``concat(heads)``.

    Example:
        >>> import tinygrad_attn as ta
        >>> mha = MultiHeadAttention(8, 2)
        >>> out, w = mha(ta.randn(3, 5, 8), is_causal=True, return_weights=True)
        >>> out.shape, w.shape
        ((3, 5, 8), (3, 2, 5, 5))
        >>> gqa = MultiHeadAttention(8, 4, n_kv_heads=2, rope=True, window=3)
        >>> gqa.k_proj.weight.shape, gqa(ta.randn(3, 5, 8), is_causal=True).shape
        ((8, 4), (3, 5, 8))
    """

    def __init__(self, d_model: int, num_heads: int, bias: bool = True, dropout: float = 0.0,
                 scale: float | None = None, fused: bool = True, n_kv_heads: int | None = None,
                 rope: bool = False, window: int | None = None, head_dim: int | None = None,
                 rope_base: float = 10000.0, out_bias: bool | None = None):
        check_sizes("MultiHeadAttention", d_model=d_model, num_heads=num_heads)
        if head_dim is not None:
            check_sizes("MultiHeadAttention", head_dim=head_dim)
        if not 0 < rope_base < math.inf:
            raise ValueError(f"MultiHeadAttention: rope_base must be a finite number > 0, got {rope_base!r}")
        check_probability("MultiHeadAttention", "dropout", dropout)
        if scale is not None and not math.isfinite(scale):
            raise ValueError(f"MultiHeadAttention: scale must be a finite number or None, got {scale!r}")
        if head_dim is None and d_model % num_heads:
            raise ValueError(f"MultiHeadAttention: d_model {d_model} is not divisible by "
                             f"num_heads {num_heads}")
        n_kv_heads = num_heads if n_kv_heads is None else n_kv_heads
        check_sizes("MultiHeadAttention", n_kv_heads=n_kv_heads)
        if num_heads % n_kv_heads:
            raise ValueError(f"MultiHeadAttention: num_heads {num_heads} is not divisible by "
                             f"n_kv_heads {n_kv_heads} (each kv head serves a whole group of query heads)")
        if window is not None:
            check_sizes("MultiHeadAttention", window=window)
        d_head = d_model // num_heads if head_dim is None else head_dim
        if rope and d_head % 2:
            raise ValueError(f"MultiHeadAttention: rope needs an even d_head, got {d_head}")
        self.d_model, self.num_heads, self.n_kv_heads, self.d_head = d_model, num_heads, n_kv_heads, d_head
        self.dropout, self.scale, self.fused = dropout, scale, fused
        self.rope, self.window, self.rope_base = rope, window, rope_base
        self.q_proj = Linear(d_model, num_heads * d_head, bias)
        self.k_proj = Linear(d_model, n_kv_heads * d_head, bias)
        self.v_proj = Linear(d_model, n_kv_heads * d_head, bias)
        self.out_proj = Linear(num_heads * d_head, d_model, bias if out_bias is None else out_bias)

    def _split_heads(self, x: Tensor, heads: int, name: str) -> Tensor:
        """(…, T, heads·Dh) → (…, heads, T, Dh): head h is the h-th contiguous slice of width Dh."""
        *lead, t, _ = x.shape
        split = x.reshape(*lead, t, heads, self.d_head).swapaxes(-3, -2)  # (B, H, T, Dh)
        split.name = name
        return split

    def _rotate(self, x: Tensor, start: int, name: str) -> Tensor:
        """RoPE at the absolute positions start … start + T − 1."""
        positions = xp_for(x.device).arange(start, start + x.shape[-2])
        rotated = F.rope(x, positions, base=self.rope_base)
        rotated.name = name
        return rotated

    def forward(self, x: Tensor, context: Tensor | None = None, mask: Any = None,
                is_causal: bool = False, return_weights: bool = False,
                cache: LayerCache | None = None) -> Any:
        """Attend from `x` to `context` (default `x`: self-attention).

        Args:
            x: queries' inputs, (batch, n_q, d_model) or unbatched (n_q, d_model).
            context: keys' and values' inputs, (batch, n_k, d_model) or (n_k, d_model).
            mask: bool (True = the key takes part) or float (added to the scores), broadcastable
                to (batch, num_heads, n_q, n_k), e.g. (n_q, n_k), or (batch, 1, 1, n_k) to hide
                padding; (num_heads, n_q, n_k) for unbatched input.
            is_causal: query i sees only keys j ≤ i (and, with a window, j > i − window).
            return_weights: also return the attention weights.
            cache: used by ``TinyTransformer.generate``: the keys and values of earlier tokens;
                the new ones are appended and the queries attend to all of them (the last
                `window` of them with a window).

        Returns:
            The output shaped like `x`, or (output, weights (batch, num_heads, n_q, n_k)), the
            weights (num_heads, n_q, n_k) for unbatched input (before any dropout).
        """
        d_model = self.d_model
        if self.rope and context is not None:
            raise ValueError("MultiHeadAttention: rope is for self-attention; got a context")
        if self.window is not None and not is_causal:
            raise ValueError(f"MultiHeadAttention: window={self.window} needs is_causal=True")
        context = x if context is None else context
        if x.ndim not in (2, 3) or context.ndim != x.ndim or x.shape[-1] != d_model \
                or context.shape[-1] != d_model or context.shape[:-2] != x.shape[:-2]:
            raise ShapeError(f"MultiHeadAttention: expected x and context of shape (batch, n, "
                             f"{d_model}) or (n, {d_model}), got {x.shape} and {context.shape}")

        q = self._split_heads(self.q_proj(x), self.num_heads, "Q")            # Q = X W_Q (B, H, Tq, Dh)
        k = self._split_heads(self.k_proj(context), self.n_kv_heads, "K")     # K = C W_K (B, Hkv, Tk, Dh)
        v = self._split_heads(self.v_proj(context), self.n_kv_heads, "V")     # V = C W_V (B, Hkv, Tk, Dh)
        start = 0 if cache is None else cache.seen
        if self.rope:
            q, k = self._rotate(q, start, "RoPE(Q)"), self._rotate(k, start, "RoPE(K)")
        window = self.window
        if cache is not None:
            if cache.k is not None:
                if is_causal and x.shape[-2] > 1:
                    raise ValueError("MultiHeadAttention: a cache with earlier keys takes one new "
                                     "query at a time when is_causal")
                is_causal, window = False, None     # the newest query sees every key kept
                k = concat([cache.k, k], axis=-2)                       # (B, Hkv, Tk, Dh)
                v = concat([cache.v, v], axis=-2)                       # (B, Hkv, Tk, Dh)
                if self.window is not None:                             # the last `window` keys
                    k, v = k[..., -self.window:, :], v[..., -self.window:, :]
            cache.seen = start + x.shape[-2]
            cache.k, cache.v = (k, v) if self.window is None else \
                (k[..., -self.window:, :], v[..., -self.window:, :])    # all a later query can see

        # headₕ = softmax(QₕKₕᵀ/√Dh) Vₕ for all heads at once; dropout acts on the weights.
        dropout_p = self.dropout if self.training else 0.0
        scores = math.prod(q.shape[:-1]) * k.shape[-2]                    # B · H · Tq · Tk
        if self.fused and not return_weights and dropout_p == 0 and \
                attention_kernel(x.device, scores, q.dtype.itemsize, k.shape[-2]) == "flash":
            # in key blocks, never holding the (n_q, n_k) matrix
            result = F.flash_attention(q, k, v, mask=mask, is_causal=is_causal, scale=self.scale,
                                       enable_gqa=self.n_kv_heads != self.num_heads, window=window)
        else:
            result = F.scaled_dot_product_attention(q, k, v, mask=mask, is_causal=is_causal,
                                                    scale=self.scale, return_weights=return_weights,
                                                    fused=self.fused, dropout_p=dropout_p,
                                                    enable_gqa=self.n_kv_heads != self.num_heads,
                                                    window=window)
        heads, weights = result if return_weights else (result, None)  # (B, H, Tq, Dh)
        heads.name = "heads"
        concat_heads = heads.swapaxes(-3, -2).reshape(*x.shape[:-1], self.num_heads * self.d_head)
        concat_heads.name = "concat(heads)"                             # (B, Tq, H·Dh)
        out = self.out_proj(concat_heads)                               # Concat(heads) W_O (B, Tq, D)
        return (out, weights) if return_weights else out
