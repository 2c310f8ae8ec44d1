"""A pre-norm transformer block and a tiny decoder-only language model with greedy decoding.

Both take the choices that make a GPT-2-style model Llama-style: RMSNorm instead of LayerNorm,
a SwiGLU MLP instead of GELU, rotary positions instead of learned ones, fewer key/value heads
than query heads (grouped-query attention), and a sliding attention window.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..backend import to_device, to_numpy, xp_for
from ..creation import generator
from ..engine import no_grad
from ..tensor import Tensor
from .attention import LayerCache, MultiHeadAttention
from .layers import Dropout, Embedding, LayerNorm, Linear, RMSNorm, TiedHead
from .module import Module, check_sizes
from .sampling import check_sampling, next_token
from .transformer_config import TransformerConfig

__all__ = ["GELU_FORMS", "MLP", "MLPS", "NORMS", "POSITIONS", "SwiGLU", "TinyTransformer", "TransformerBlock",
           "swiglu_width"]


GELU_FORMS = ("tanh", "none")


class MLP(Module):
    """fc2(GELU(fc1(x))): the position-wise feed-forward network.

    `approximate` picks GELU's form, as PyTorch's argument does: "tanh" (the default here, GPT-2's
    gelu_new) ½x(1 + tanh(√(2/π)(x + 0.044715x³))), or "none", the exact ½x(1 + erf(x/√2)).
    """

    def __init__(self, d_model: int, d_ff: int, bias: bool = True, approximate: str = "tanh"):
        check_sizes("MLP", d_model=d_model, d_ff=d_ff)
        _check_choice("MLP", "approximate", approximate, GELU_FORMS)
        self.approximate = approximate
        self.fc1 = Linear(d_model, d_ff, bias)
        self.fc2 = Linear(d_ff, d_model, bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.fc1(x).gelu(approximate=self.approximate))


class SwiGLU(Module):
    """down_proj(silu(gate_proj(x)) ⊙ up_proj(x)), no biases by default: the gated feed-forward
    network of Llama (Shazeer, 2020), its Linears named as Hugging Face's Llama names them.

    silu(x W_gate) is the gate, x W_up the value it lets through; W_down maps back to d_model (the
    W1, W3 and W2 of the paper and the API contract).

    Example:
        >>> import tinygrad_attn as ta
        >>> SwiGLU(8, 16)(ta.randn(2, 3, 8)).shape
        (2, 3, 8)
    """

    def __init__(self, d_model: int, d_ff: int, bias: bool = False):
        check_sizes("SwiGLU", d_model=d_model, d_ff=d_ff)
        self.gate_proj = Linear(d_model, d_ff, bias)
        self.up_proj = Linear(d_model, d_ff, bias)
        self.down_proj = Linear(d_ff, d_model, bias)

    def forward(self, x: Tensor) -> Tensor:
        gate = self.gate_proj(x).silu()                                 # silu(x W_gate) (…, d_ff)
        gate.name = "gate"
        return self.down_proj(gate * self.up_proj(x))                   # (…, d_model)


NORMS = {"layer": LayerNorm, "rms": RMSNorm}
MLPS = {"gelu": MLP, "swiglu": SwiGLU}
POSITIONS = ("learned", "rope")


def _check_choice(owner: str, name: str, value: str, choices: Any) -> None:
    if value not in choices:
        raise ValueError(f"{owner}: {name} must be one of {tuple(choices)}, got {value!r}")


def swiglu_width(d_model: int) -> int:
    """SwiGLU's default hidden width: 8/3 · d_model rounded up to a multiple of 8, so its three
    matrices hold about as many weights as a GELU MLP's two of width 4 · d_model (as in Llama)."""
    return -(-8 * d_model // 24) * 8


class TransformerBlock(Module):
    """Pre-norm block: x + attn(ln1(x)), then x + mlp(ln2(x)); dropout on both branches.

    Normalising before each sub-layer (not after, as the paper does) keeps the residual path an
    identity from input to output, so gradients reach the early blocks undistorted (Xiong et al.,
    2020, "On Layer Normalization in the Transformer Architecture").

    Args:
        d_model: the model width.
        num_heads: attention heads (must divide d_model).
        d_ff: hidden width of the MLP.
        dropout: on the attention weights and on both branches while training.
        fused: passed to ``MultiHeadAttention`` (False: attention from primitives, step by step).
        norm: "layer" (LayerNorm) or "rms" (RMSNorm) for ln1 and ln2.
        mlp: "gelu" (``MLP``) or "swiglu" (``SwiGLU``, no biases).
        n_kv_heads, rope, window, head_dim, rope_base: passed to ``MultiHeadAttention``
            (grouped-query attention, rotary positions, a sliding window, the head size, RoPE's base).
        attn_bias, attn_out_bias: biases of the attention's q/k/v projections and of its output
            projection (None: as attn_bias); ``MultiHeadAttention``'s bias and out_bias.
        mlp_bias: biases in the MLP (None: True for "gelu", False for "swiglu").
        norm_eps: the norms' eps (None: each norm's default, 1e-5 for LayerNorm, 1e-6 for RMSNorm).
        gelu_approximate: GELU's form in the "gelu" MLP, "tanh" or "none" (exact, with erf).

    Example:
        >>> import tinygrad_attn as ta
        >>> TransformerBlock(8, 2, 32)(ta.randn(2, 5, 8), is_causal=True).shape
        (2, 5, 8)
        >>> llama = TransformerBlock(8, 2, 24, norm="rms", mlp="swiglu", n_kv_heads=1, rope=True)
        >>> llama(ta.randn(2, 5, 8), is_causal=True).shape
        (2, 5, 8)
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0,
                 fused: bool = True, norm: str = "layer", mlp: str = "gelu", n_kv_heads: int | None = None,
                 rope: bool = False, window: int | None = None, head_dim: int | None = None,
                 rope_base: float = 10000.0, attn_bias: bool = True, attn_out_bias: bool | None = None,
                 mlp_bias: bool | None = None, norm_eps: float | None = None, gelu_approximate: str = "tanh"):
        check_sizes("TransformerBlock", d_model=d_model, num_heads=num_heads, d_ff=d_ff)
        _check_choice("TransformerBlock", "norm", norm, NORMS)
        _check_choice("TransformerBlock", "mlp", mlp, MLPS)
        eps = {} if norm_eps is None else {"eps": norm_eps}
        self.ln1 = NORMS[norm](d_model, **eps)
        self.attn = MultiHeadAttention(d_model, num_heads, bias=attn_bias, dropout=dropout, fused=fused,
                                       n_kv_heads=n_kv_heads, rope=rope, window=window, head_dim=head_dim,
                                       rope_base=rope_base, out_bias=attn_out_bias)
        self.ln2 = NORMS[norm](d_model, **eps)
        mlp_bias = (mlp == "gelu") if mlp_bias is None else mlp_bias
        self.mlp = MLP(d_model, d_ff, mlp_bias, gelu_approximate) if mlp == "gelu" else \
            SwiGLU(d_model, d_ff, mlp_bias)
        self.drop = Dropout(dropout)

    def forward(self, x: Tensor, mask: Any = None, is_causal: bool = False,
                cache: LayerCache | None = None, return_weights: bool = False) -> Any:
        """The block's output shaped like `x` (batch, n, d_model) or (n, d_model), or
        (output, attention weights) with `return_weights`; `mask`, `is_causal` and `cache` go to
        ``MultiHeadAttention``."""
        attended = self.attn(self.ln1(x), mask=mask, is_causal=is_causal, cache=cache,
                             return_weights=return_weights)
        attended, weights = attended if return_weights else (attended, None)
        x = x + self.drop(attended)
        x = x + self.drop(self.mlp(self.ln2(x)))
        return (x, weights) if return_weights else x


class TinyTransformer(Module):
    """A decoder-only transformer: token + position embeddings, causal blocks, a linear head.

    ``TinyTransformer(config)`` builds the model a ``TransformerConfig`` describes (kept as
    ``model.config``); ``TinyTransformer(vocab_size, d_model=64, num_heads=4, num_layers=2,
    max_len=64, d_ff=None, dropout=0.0, norm=..., ...)`` is the same with the config's fields as
    arguments (at most the first seven by position). `fused` is passed to every block's attention
    (False: attention from primitives, step by step); it changes how the graph looks, not what the
    model computes, so it is no part of the config.

    The embeddings' sum is named ``X`` and the output ``logits`` in steps and drawings.

    Example:
        >>> import numpy as np
        >>> model = TinyTransformer(vocab_size=5, d_model=8, num_heads=2, num_layers=1, max_len=6)
        >>> model(np.array([[1, 2, 3]])).shape
        (1, 3, 5)
        >>> model.generate(np.array([1, 2]), max_new_tokens=3).shape
        (5,)
        >>> TinyTransformer(TransformerConfig.llama(5, d_model=8, num_heads=2, max_len=6)).pos_emb is None
        True
    """

    def __init__(self, config: TransformerConfig | int | None = None, /, *sizes: Any, fused: bool = True,
                 **fields: Any):
        if isinstance(config, TransformerConfig):
            if sizes or fields:
                raise TypeError("TinyTransformer: give a TransformerConfig or its fields as arguments, "
                                f"not both (got {len(sizes)} more by position and {sorted(fields)} by name)")
        elif len(sizes) > 6:
            raise TypeError(f"TinyTransformer takes at most 7 arguments by position (vocab_size, d_model, "
                            f"num_heads, num_layers, max_len, d_ff, dropout), got {1 + len(sizes)}; give "
                            f"the others by name")
        else:
            config = TransformerConfig(*(() if config is None else (config,)), *sizes, **fields)
        c = self.config = config
        check_sizes("TinyTransformer", vocab_size=c.vocab_size, d_model=c.d_model, num_heads=c.num_heads,
                    max_len=c.max_len, **({} if c.d_ff is None else {"d_ff": c.d_ff}))
        check_sizes("TinyTransformer", minimum=0, num_layers=c.num_layers)
        for name, value, choices in (("norm", c.norm, NORMS), ("mlp", c.mlp, MLPS),
                                     ("positions", c.positions, POSITIONS)):
            _check_choice("TinyTransformer", name, value, choices)
        self.vocab_size, self.max_len = c.vocab_size, c.max_len
        self.tok_emb = Embedding(c.vocab_size, c.d_model)
        self.pos_emb = Embedding(c.max_len, c.d_model) if c.positions == "learned" else None
        d_ff = c.d_ff if c.d_ff is not None else 4 * c.d_model if c.mlp == "gelu" else swiglu_width(c.d_model)
        self.blocks = [TransformerBlock(c.d_model, c.num_heads, d_ff, c.dropout, fused, c.norm, c.mlp,
                                        c.n_kv_heads, c.positions == "rope", c.window, c.head_dim,
                                        c.rope_base, c.attn_bias, c.attn_out_bias, c.mlp_bias, c.norm_eps,
                                        c.gelu_approximate)
                       for _ in range(c.num_layers)]
        self.ln_f = NORMS[c.norm](c.d_model, **({} if c.norm_eps is None else {"eps": c.norm_eps}))
        self.head = TiedHead(self.tok_emb, c.head_bias) if c.tie_embeddings else \
            Linear(c.d_model, c.vocab_size, c.head_bias)

    def forward(self, ids: Any) -> Tensor:
        """Logits (batch, seq, vocab_size) for integer ids (batch, seq); position i sees ids ≤ i."""
        return self._logits(ids, 0, None)

    def attention_maps(self, ids: Any) -> list[Tensor]:
        """The attention weights of every block for `ids` (batch, seq), each (batch, heads, seq, seq)."""
        maps: list[Tensor] = []
        with no_grad(), self.scope():
            self._logits(ids, 0, None, maps)
        return maps

    def embed(self, ids: Tensor, start: int = 0) -> Tensor:
        """X (batch, seq, d_model): the token embeddings of `ids`, plus the position embeddings of
        positions start … start + seq − 1 with learned positions (RoPE acts inside attention)."""
        x = self.tok_emb(ids)                                           # (B, T, D)
        if self.pos_emb is not None:
            # made on the host: the embedding's range check then reads nothing back from a device
            positions = Tensor(np.arange(start, start + ids.shape[1]), device=self.head.weight.device)
            x = x + self.pos_emb(positions)
        x.name = "X"
        return x

    def _logits(self, ids: Any, start: int, caches: list[LayerCache] | None,
                maps: list[Tensor] | None = None) -> Tensor:
        ids = ids if isinstance(ids, Tensor) else Tensor(ids, device=self.head.weight.device)
        if ids.ndim != 2:
            raise ValueError(f"TinyTransformer: ids must be (batch, seq), got shape {ids.shape}")
        if start + ids.shape[1] > self.max_len:
            raise ValueError(f"TinyTransformer: sequence of length {start + ids.shape[1]} is longer "
                             f"than max_len {self.max_len}")
        x = self.embed(ids, start)
        for i, block in enumerate(self.blocks):
            x = block(x, is_causal=True, cache=None if caches is None else caches[i],
                      return_weights=maps is not None)
            if maps is not None:
                x, weights = x
                maps.append(weights)
        logits = self.head(self.ln_f(x))                                # (B, T, V)
        logits.name = "logits"
        return logits

    def generate(self, ids: Any, max_new_tokens: int, temperature: float = 0.0, top_k: int | None = None,
                 rng: np.random.Generator | None = None,
                 on_token: Callable[[Any], object] | None = None) -> Tensor:
        """Greedy decoding, or sampling: the prompt followed by `max_new_tokens` new tokens.

        Each block keeps the keys and values of earlier tokens (a key/value cache), so every new
        token costs one position, not a recomputation of the whole sequence; the tokens are
        exactly those of recomputing ``model(ids)[:, -1].argmax()`` each step. Runs without grad
        and without dropout (the training mode is restored afterwards).

        Args:
            ids: integer prompt ids, (batch, seq) or (seq,).
            max_new_tokens: how many tokens to append (≥ 0).
            temperature: 0 (the default) takes the argmax each step; above 0 each token is drawn
                from softmax(logits / temperature) (``nn.sampling.next_token``).
            top_k: when sampling, draw among the k most likely tokens only (None: all).
            rng: the NumPy generator sampling draws from; default the library's (``manual_seed``).
            on_token: called with each new token as soon as it is chosen, before the next one is
                computed (to show a text as it is written): its id, a NumPy integer, for a (seq,)
                prompt; the ids of every row, (batch,), for a batch. It runs without grad.

        Returns:
            An integer Tensor of the same rank as `ids`: (batch, seq + max_new_tokens), on the
            model's device.

        Raises:
            ValueError: if seq + max_new_tokens > max_len (there is no position embedding for
                more); decoding never stops early.
        """
        ids = ids.data if isinstance(ids, Tensor) else ids
        prompt = to_numpy(ids) if hasattr(ids, "dtype") else np.asarray(ids)   # checked on the host
        if prompt.size == 0:
            raise ValueError(f"generate: the prompt is empty (ids of shape {prompt.shape}); give at least "
                             f"one token id to continue from")
        if prompt.ndim not in (1, 2) or prompt.dtype.kind not in "iu" or max_new_tokens < 0:
            raise ValueError(f"generate: ids must be integers of shape (batch, seq) or (seq,) and "
                             f"max_new_tokens >= 0, got {prompt.dtype} ids of shape {prompt.shape} "
                             f"and max_new_tokens={max_new_tokens}")
        check_sampling(temperature, top_k)
        rng = rng if rng is not None else generator()
        single = prompt.ndim == 1
        prompt = prompt[None] if single else prompt                     # (B, T)
        if prompt.shape[1] + max_new_tokens > self.max_len:
            raise ValueError(f"generate: {prompt.shape[1]} prompt tokens + {max_new_tokens} new "
                             f"ones exceed max_len {self.max_len}")
        device = self.head.weight.device
        modes = [(module, module.training) for _, module in self.named_modules()]
        self.eval()
        tokens = [to_device(prompt, device)]                            # stay on the model's device
        try:
            with no_grad(), self.scope():
                caches = [LayerCache() for _ in self.blocks]
                logits = self._logits(prompt, 0, caches)                # (B, T, V)
                for step in range(max_new_tokens):
                    last = logits.data[:, -1]                                   # (B, V)
                    if temperature == 0:
                        token = last.argmax(axis=-1)[:, None]                   # (B, 1)
                    else:
                        token = to_device(next_token(to_numpy(last), temperature, top_k, rng)[:, None],
                                          device)
                    tokens.append(token)
                    if on_token is not None:
                        chosen = to_numpy(token[:, 0])                          # (B,) on the host
                        on_token(chosen[0] if single else chosen)
                    if step + 1 < max_new_tokens:
                        logits = self._logits(token, prompt.shape[1] + step, caches)  # (B, 1, V)
        finally:
            for module, mode in modes:
                module.training = mode
        out = xp_for(device).concatenate(tokens, axis=1)                # (B, T + new)
        return Tensor(out[0] if single else out, device=device)
