"""Which Hugging Face tensor is which of our parameters, and how one becomes the other.

A ``Link`` ties one checkpoint tensor to one or more of our parameters. Hugging Face's
``nn.Linear`` stores its weight as (out, in) and ours is (in, out), as in Q = X W_Q, so those are
transposed; GPT-2's ``Conv1D`` already stores (in, out), and its ``c_attn`` holds W_Q, W_K and W_V
side by side, which become our q_proj, k_proj and v_proj.

Example:
    >>> import numpy as np
    >>> link = Link("lm_head.weight", ("head.weight",), transpose=True)
    >>> link.ours_from(np.zeros((5, 3)))[0].shape, link.theirs_shape([(3, 5)])
    ((3, 5), (5, 3))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from ..nn import TransformerConfig

__all__ = ["GPT2_BUFFERS", "Link", "checkpoint_shapes", "layers_held", "links"]

# GPT-2 checkpoints written by older transformers carry each layer's causal mask as a buffer.
GPT2_BUFFERS = (".attn.bias", ".attn.masked_bias")


@dataclass(frozen=True)
class Link:
    """Checkpoint tensor `theirs` ↔ our parameters `ours` (several: split along the last axis)."""

    theirs: str
    ours: tuple[str, ...]
    transpose: bool = False

    def ours_from(self, array: np.ndarray) -> list[np.ndarray]:
        """Our parameters' arrays from the checkpoint's."""
        array = array.T if self.transpose else array
        parts = np.split(array, len(self.ours), axis=-1) if len(self.ours) > 1 else [array]
        return [np.ascontiguousarray(part) for part in parts]

    def theirs_from(self, arrays: list[np.ndarray]) -> np.ndarray:
        """The checkpoint's array from our parameters' arrays."""
        array = np.concatenate(arrays, axis=-1) if len(arrays) > 1 else arrays[0]
        return np.ascontiguousarray(array.T if self.transpose else array)

    def theirs_shape(self, shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
        """The shape the checkpoint's tensor must have, from our parameters' shapes."""
        *lead, last = shapes[0]
        shape = (*lead, sum(s[-1] for s in shapes))
        return shape[::-1] if self.transpose else shape


def _linear(theirs: str, ours: str, bias: bool, transpose: bool = True) -> list[Link]:
    out = [Link(f"{theirs}.weight", (f"{ours}.weight",), transpose)]
    return out + [Link(f"{theirs}.bias", (f"{ours}.bias",))] if bias else out


def _gpt2(params: set[str], layers: int) -> list[Link]:
    out = [Link("transformer.wte.weight", ("tok_emb.weight",)),
           Link("transformer.wpe.weight", ("pos_emb.weight",))]
    for i in range(layers):
        h, b = f"transformer.h.{i}", f"blocks.{i}"
        out += [Link(f"{h}.ln_1.weight", (f"{b}.ln1.weight",)), Link(f"{h}.ln_1.bias", (f"{b}.ln1.bias",)),
                Link(f"{h}.attn.c_attn.weight", tuple(f"{b}.attn.{p}_proj.weight" for p in "qkv")),
                Link(f"{h}.attn.c_attn.bias", tuple(f"{b}.attn.{p}_proj.bias" for p in "qkv")),
                *_linear(f"{h}.attn.c_proj", f"{b}.attn.out_proj", True, transpose=False),
                Link(f"{h}.ln_2.weight", (f"{b}.ln2.weight",)), Link(f"{h}.ln_2.bias", (f"{b}.ln2.bias",)),
                *_linear(f"{h}.mlp.c_fc", f"{b}.mlp.fc1", True, transpose=False),
                *_linear(f"{h}.mlp.c_proj", f"{b}.mlp.fc2", True, transpose=False)]
    out += [Link("transformer.ln_f.weight", ("ln_f.weight",)), Link("transformer.ln_f.bias", ("ln_f.bias",))]
    return out


def _llama(params: set[str], layers: int) -> list[Link]:
    has = lambda name: name in params
    out = [Link("model.embed_tokens.weight", ("tok_emb.weight",))]
    for i in range(layers):
        h, b = f"model.layers.{i}", f"blocks.{i}"
        out += [Link(f"{h}.input_layernorm.weight", (f"{b}.ln1.weight",)),
                Link(f"{h}.post_attention_layernorm.weight", (f"{b}.ln2.weight",))]
        for theirs, ours in (("q_proj", "q_proj"), ("k_proj", "k_proj"), ("v_proj", "v_proj"),
                             ("o_proj", "out_proj")):
            out += _linear(f"{h}.self_attn.{theirs}", f"{b}.attn.{ours}", has(f"{b}.attn.{ours}.bias"))
        for name in ("gate_proj", "up_proj", "down_proj"):                 # SwiGLU's names are theirs
            out += _linear(f"{h}.mlp.{name}", f"{b}.mlp.{name}", has(f"{b}.mlp.{name}.bias"))
    return out + [Link("model.norm.weight", ("ln_f.weight",))]


def layers_held(model_type: str, names: set[str]) -> list[int]:
    """The layer indices that tensor `names` hold (``model.layers.3.…`` holds layer 3), sorted;
    GPT-2's names with their "transformer." prefix."""
    prefix = "transformer.h." if model_type == "gpt2" else "model.layers."
    held = {name[len(prefix):].split(".", 1)[0] for name in names if name.startswith(prefix)}
    return sorted(int(i) for i in held if i.isascii() and i.isdigit())


def checkpoint_shapes(model_type: str, config: TransformerConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor a checkpoint of `model_type` holds and its shape, from the ``TransformerConfig``
    its config.json gives (``configs.config_from_json``, which sets every size), before any model
    is built: the weight files' headers are checked against it. The LM head only when it is not tied.

    Raises:
        ValueError: `config` leaves a size or a bias this needs unset (None), which
            ``config_from_json`` never does.
    """
    v, d, ff, layers = config.vocab_size, config.d_model, _given(config.d_ff, "d_ff"), config.num_layers
    out: dict[str, tuple[int, ...]]
    if model_type == "gpt2":
        out = {"transformer.wte.weight": (v, d), "transformer.wpe.weight": (config.max_len, d)}
        for i in range(layers):
            h = f"transformer.h.{i}"
            out |= {f"{h}.ln_1.weight": (d,), f"{h}.ln_1.bias": (d,), f"{h}.attn.c_attn.weight": (d, 3 * d),
                    f"{h}.attn.c_attn.bias": (3 * d,), f"{h}.attn.c_proj.weight": (d, d),
                    f"{h}.attn.c_proj.bias": (d,), f"{h}.ln_2.weight": (d,), f"{h}.ln_2.bias": (d,),
                    f"{h}.mlp.c_fc.weight": (d, ff), f"{h}.mlp.c_fc.bias": (ff,),
                    f"{h}.mlp.c_proj.weight": (ff, d), f"{h}.mlp.c_proj.bias": (d,)}
        out |= {"transformer.ln_f.weight": (d,), "transformer.ln_f.bias": (d,)}
    else:
        head_dim = _given(config.head_dim, "head_dim")
        q, kv = config.num_heads * head_dim, _given(config.n_kv_heads, "n_kv_heads") * head_dim
        attn = config.attn_bias
        out_bias, mlp = _given(config.attn_out_bias, "attn_out_bias"), _given(config.mlp_bias, "mlp_bias")
        projections = {"self_attn.q_proj": ((q, d), attn), "self_attn.k_proj": ((kv, d), attn),
                       "self_attn.v_proj": ((kv, d), attn), "self_attn.o_proj": ((d, q), out_bias),
                       "mlp.gate_proj": ((ff, d), mlp), "mlp.up_proj": ((ff, d), mlp),
                       "mlp.down_proj": ((d, ff), mlp)}                # (out, in), as nn.Linear stores
        out = {"model.embed_tokens.weight": (v, d)}
        for i in range(layers):
            h = f"model.layers.{i}"
            out |= {f"{h}.input_layernorm.weight": (d,), f"{h}.post_attention_layernorm.weight": (d,)}
            for name, (shape, bias) in projections.items():
                out[f"{h}.{name}.weight"] = shape
                if bias:
                    out[f"{h}.{name}.bias"] = shape[:1]
        out["model.norm.weight"] = (d,)
    if not config.tie_embeddings:
        out["lm_head.weight"] = (v, d)
    return out


_T = TypeVar("_T")


def _given(value: _T | None, field: str) -> _T:
    """A field of the config that ``checkpoint_shapes`` reads, which must be set (not None)."""
    if value is None:
        raise ValueError(f"checkpoint_shapes: the config leaves {field} unset (None); the config of a "
                         f"config.json (configs.config_from_json) sets every size and bias")
    return value


def links(model_type: str, params: set[str], layers: int) -> list[Link]:
    """Every checkpoint tensor of a model of `model_type` with `layers` blocks whose parameters
    are named `params`; the LM head only when it is its own parameter (not tied)."""
    out = _gpt2(params, layers) if model_type == "gpt2" else _llama(params, layers)
    head = [Link("lm_head.weight", ("head.weight",), transpose=True)] if "head.weight" in params else []
    return out + head
