"""``TransformerConfig``: everything that decides a ``TinyTransformer``, in one dataclass.

As nanoGPT's ``GPTConfig``: the model is built from it (``TinyTransformer(config)``), a Hugging
Face config.json is read into one (``load_pretrained``), a training run holds one
(``TrainConfig.model``) and saves it in its checkpoint, so the model a file describes never
depends on what a preset meant when it was written.

Example:
    >>> TransformerConfig(vocab_size=15, max_len=18).d_model
    64
    >>> llama = TransformerConfig.llama(100, d_model=32, num_heads=4, n_kv_heads=2)
    >>> llama.norm, llama.mlp, llama.positions, llama.attn_bias, llama.head_bias
    ('rms', 'swiglu', 'rope', False, False)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["TransformerConfig"]


@dataclass(frozen=True)
class TransformerConfig:
    """The shape and the math of a decoder-only transformer; ``TinyTransformer`` checks the values.

    Attributes:
        vocab_size: number of token ids.
        d_model, num_heads, num_layers: width, heads per block, number of blocks.
        max_len: the longest sequence (positions 0 … max_len − 1 have embeddings).
        d_ff: hidden width of each MLP (None: 4 · d_model for "gelu", ``swiglu_width(d_model)``,
            about 8/3 · d_model, for "swiglu", so that both have about as many weights).
        dropout: dropout probability in every block.
        norm: "layer" (LayerNorm) or "rms" (RMSNorm), for every block and the final norm ``ln_f``.
        mlp: "gelu" (``MLP``) or "swiglu" (``SwiGLU``).
        positions: "learned" (a position embedding table of max_len rows added to the token
            embeddings) or "rope" (no table: every block rotates Q and K by their positions).
        n_kv_heads: key/value heads of grouped-query attention (None: as many as num_heads).
        window: a sliding attention window (None: every earlier token).
        head_dim: the size of each head (None: d_model / num_heads).
        rope_base: RoPE's base (theta).
        attn_bias, attn_out_bias: biases of the q/k/v projections and of the output projection
            (None: as attn_bias).
        mlp_bias: biases in the MLP (None: True for "gelu", False for "swiglu").
        norm_eps: the norms' eps (None: each norm's default, 1e-5 for LayerNorm, 1e-6 for RMSNorm).
        gelu_approximate: GELU's form in the "gelu" MLP, "tanh" (GPT-2's) or "none" (exact, erf).
        head_bias: whether the LM head has a bias.
        tie_embeddings: the LM head reuses the token embedding (logits = x Eᵀ), as in GPT-2.
    """

    vocab_size: int
    d_model: int = 64
    num_heads: int = 4
    num_layers: int = 2
    max_len: int = 64
    d_ff: int | None = None
    dropout: float = 0.0
    norm: str = "layer"
    mlp: str = "gelu"
    positions: str = "learned"
    n_kv_heads: int | None = None
    window: int | None = None
    head_dim: int | None = None
    rope_base: float = 10000.0
    attn_bias: bool = True
    attn_out_bias: bool | None = None
    mlp_bias: bool | None = None
    norm_eps: float | None = None
    gelu_approximate: str = "tanh"
    head_bias: bool = True
    tie_embeddings: bool = False

    @classmethod
    def gpt2(cls, vocab_size: int, **fields: Any) -> TransformerConfig:
        """GPT-2's kind: LayerNorm, a GELU MLP (tanh form), learned positions, biases in every
        projection, and an LM head without bias tied to the token embedding; `fields` change any."""
        return cls(vocab_size, **{"head_bias": False, "tie_embeddings": True, **fields})

    @classmethod
    def llama(cls, vocab_size: int, **fields: Any) -> TransformerConfig:
        """Llama's kind: RMSNorm, a SwiGLU MLP, rotary positions, no bias anywhere (the LM head's
        included) and an LM head of its own; `fields` change any (Qwen2: ``attn_bias=True``)."""
        return cls(vocab_size, **{"norm": "rms", "mlp": "swiglu", "positions": "rope", "attn_bias": False,
                                  "head_bias": False, **fields})
