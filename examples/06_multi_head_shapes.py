"""Multi-head attention, shape by shape: self-attention, then cross-attention.

Prints the shape after every step of nn.MultiHeadAttention's forward (docs/multi_head.md) for
B = 2 sequences of T = 5 tokens, D = 8, H = 2 heads, and checks the result against the module.
Run: python examples/06_multi_head_shapes.py
"""

import numpy as np
from blas_threads import one_blas_thread

import tinygrad_attn as ta
from tinygrad_attn import functional as F
from tinygrad_attn import nn

print(one_blas_thread())

ta.manual_seed(0)
B, T, T_CONTEXT, D, H = 2, 5, 7, 8, 2
mha = nn.MultiHeadAttention(D, H)


def trace(x: ta.Tensor, context: ta.Tensor) -> ta.Tensor:
    """The module's forward written out, printing each shape (keys and values from `context`)."""
    print(f"  X (queries' input)        {x.shape}    context (keys', values') {context.shape}")
    split = [proj(inp).reshape(B, inp.shape[1], H, D // H).swapaxes(1, 2)
             for proj, inp in ((mha.q_proj, x), (mha.k_proj, context), (mha.v_proj, context))]
    print(f"  Q, K, V = X W_Q, C W_K, C W_V, split into heads: {[t.shape for t in split]}  (B, H, T, D_h)")
    heads, weights = F.scaled_dot_product_attention(*split, return_weights=True)
    print(f"  P per head                {weights.shape}    head outputs {heads.shape}")
    concat = heads.swapaxes(1, 2).reshape(B, T, D)
    print(f"  Concat(heads)             {concat.shape}")
    out = mha.out_proj(concat)
    print(f"  · W_O (mixes the heads)   {out.shape}")
    return out


x = ta.randn(B, T, D)
print("self-attention:")
assert np.allclose(trace(x, x).numpy(), mha(x).numpy(), atol=1e-6)
print("cross-attention:")
context = ta.randn(B, T_CONTEXT, D)
assert np.allclose(trace(x, context).numpy(), mha(x, context=context).numpy(), atol=1e-6)
print("both traces equal nn.MultiHeadAttention's output")
